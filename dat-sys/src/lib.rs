//! # dat-sys: operating-system helpers shared by the providers
//!
//! What more than one crate asks of the operating system, in one place: the address of a
//! network interface by name ([`ifaddr`]) and what the scheduler did to the calling thread
//! ([`sched`]). It depends on `libc` only (not on the RDMA
//! libraries), so every provider can use it; `dat-core` stays free of I/O and system calls.

pub mod ifaddr;
pub mod sched;
