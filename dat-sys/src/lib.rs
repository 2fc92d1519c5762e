//! # dat-sys: operating-system helpers shared by the providers
//!
//! What more than one provider asks of the operating system, in one place: today the address
//! of a network interface by name ([`ifaddr`]). It depends on `libc` only (not on the RDMA
//! libraries), so every provider can use it; `dat-core` stays free of I/O and system calls.

pub mod ifaddr;
