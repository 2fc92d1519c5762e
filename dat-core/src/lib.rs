//! # dat-core
//!
//! The transport-independent heart of datrs, a Rust implementation of DAT 2.0 (uDAPL):
//! return codes, the object model, the one endpoint state machine, event dispatchers, memory
//! protection rules, configuration, and the traits a transport provider implements.
//!
//! The crate is sans-IO: it opens no sockets, starts no threads and makes no system calls.
//! Providers (`dat-provider-tcp`, `dat-provider-shm`, `dat-provider-verbs`) own the I/O and
//! report *facts*; this crate decides state transitions, events and return codes, so every
//! provider has identical DAT semantics. Applications use the `dat` facade crate.
#![deny(unsafe_code)]

pub mod error;
pub mod types;

pub use error::{DatError, DatResult, ErrorType, Subtype};

pub mod by_thread;
pub mod cno;
pub mod config;
pub mod defaults;
pub mod ep;
pub mod evd;
pub mod flag_lock;
pub mod idmap;
pub mod mem;
pub mod provider;
pub mod srq;
#[cfg(feature = "testing")]
pub mod testing;
