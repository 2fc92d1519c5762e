//! # dat
//!
//! DAT 2.0 (uDAPL) in safe Rust: open an interface adapter (IA) by name, register memory,
//! connect endpoints, and move data with two-sided send/receive and one-sided RDMA read and
//! write. The transport is chosen by configuration (see [`Registry`]): TCP emulation, shared
//! memory or InfiniBand/RoCE verbs, with identical semantics.
//!
//! ```no_run
//! use dat::types::{EvdFlags, MemPriv};
//! let ia = dat::open_ia("tcp-lo")?;
//! let pz = ia.create_pz()?;
//! let lmr = pz.alloc(4096, MemPriv::ALL)?;
//! let evd = ia.create_evd(16, EvdFlags::DTO, None)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Every fallible call returns the exact DAT return code ([`DatError`]) the DAT 2.0
//! specification names; the `# Errors` section of each item lists them.

mod cm;
mod cno;
mod direct;
mod dyn_arc;
mod ep;
mod ep_cell;
mod ep_count;
mod ep_post;
mod ep_route;
mod evd;
mod handoff;
mod ia;
mod mem;
mod pace;
mod registry;
mod srq;
mod sync;
mod teardown;

pub use cm::{Cr, CrParam, Sp, SpParam};
pub use cno::Cno;
pub use dat_core::ep::state::EpState;
pub use dat_core::evd::{AsyncHandle, DtoCompletion, Event, EventData};
pub use dat_core::mem::Buffer;
pub use dat_core::provider::EpConfig;
pub use dat_core::{DatError, DatResult, ErrorType, Subtype, types};
pub use ep::{ConnectFlags, Ep, EpModify, EpParam, EpParams, EpStatus};
pub use evd::Evd;
pub use ia::Ia;
pub use mem::{Lmr, LmrParam, Pz, Rmr, RmrParam};
pub use pace::{PaceCounts, counts as pace_counts};
pub use registry::{EMBEDDED_CONFIG, IaOpenError, Registry, open_default_ia, open_ia};
pub use srq::{Srq, SrqAttr, SrqParam};

/// Objects with an explicit DAT free: a freed object's handle reports `DAT_INVALID_HANDLE`.
pub(crate) trait Freeable {
    fn is_freed(&self) -> bool;
}
