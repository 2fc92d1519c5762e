//! # dat-provider-verbs
//!
//! The verbs provider of datrs (`provider = "verbs"`): InfiniBand and RoCE through
//! libibverbs and librdmacm, bound by `rdma-sys`. This is what production runs on.
//!
//! * [`params`]: the registry `params` (`device` + `port`, or `address` / `netdev`,
//!   `gid_index`, limits).
//! * `device`: the device list, contexts and PDs; `verbs`: completion channel, CQ, MR, memory
//!   window, SRQ, and the pure DAT <-> verbs mappings; `cm`: librdmacm's event channel and ids
//!   (with their QP) and the private-data framing. RAII wrappers with a fixed teardown order;
//!   every `unsafe` block says why it is sound.
//! * `ia`: the shared state of an open IA and its event thread (CM events, completions,
//!   deadlines); `ep`: an endpoint's outstanding requests and posting; `transport`: the
//!   `Transport` the facade calls.
//! * [`attr`]: device and port attributes mapped to `IaAttr` / `ProviderAttr`.
//!
//! The design (threads, teardown order, the qualifier -> port mapping, the CM event and
//! work-completion mappings) is described in the crate README.
//!
//! # Errors at open
//! No kernel RDMA support, no device, an unknown device, a port the device lacks, or no
//! permission on `/dev/infiniband` give `DAT_PROVIDER_NOT_FOUND` with a message naming the
//! cause and what to do; nothing panics.

use std::sync::Arc;

use dat_core::error::{DatError, ErrorType, Subtype};
use dat_core::provider::{OpenError, OpenRequest, Provider, Transport};

pub mod attr;
mod cm;
mod device;
mod ep;
mod ia;
pub mod params;
mod queue;
mod req;
mod transport;
mod verbs;

pub use params::VerbsParams;

/// The types behind this provider's per-call entries, [`dat_core::provider::EpPost`] (an
/// endpoint) and [`dat_core::provider::EvdPoll`] (an EVD's poller): the facade downcasts
/// the entries it is given to these and calls them directly, with no virtual call and
/// inlined into its post and dequeue. Nothing else of them is public.
pub mod direct {
    pub use crate::ep::Ep;
    pub use crate::ia::EvdPoller;
}

/// The verbs provider: `provider = "verbs"` in the registry. See [`params`] for its `params`.
#[derive(Debug, Default)]
pub struct VerbsProvider {
    _private: (),
}

impl VerbsProvider {
    /// The provider, ready to register.
    pub fn new() -> VerbsProvider {
        VerbsProvider { _private: () }
    }
}

/// The names of the verbs devices on this machine (empty when the kernel has no RDMA support).
pub fn device_names() -> Vec<String> {
    device::device_names().unwrap_or_default()
}

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        "verbs"
    }

    /// Opens an IA: parses `params`, finds and opens the device, queries device and port.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for an unknown key or a bad value (the message names the key
    /// and the origin); `DAT_PROVIDER_NOT_FOUND` when the kernel has no RDMA support, there is
    /// no such device or port, the address is not on an RDMA device, or the device cannot be
    /// opened (permission); `DAT_INSUFFICIENT_RESOURCES` when a query fails.
    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError> {
        let params = VerbsParams::parse(req.params, req.origin, req.ia_name)?;
        let ia = transport::VerbsIa::open(req.ia_name, req.origin, params, req.upcalls)?;
        Ok(Arc::new(ia))
    }
}

fn not_found(message: String) -> OpenError {
    OpenError::new(
        DatError::new(ErrorType::ProviderNotFound, Subtype::NoSubtype),
        message,
    )
}
