//! The device's asynchronous events (`ibv_get_async_event`), read by the event threads and
//! mapped to DAT as OFA dapl does (its `dapli_async_event_cb`):
//!
//! | verbs event | DAT |
//! | --- | --- |
//! | `QP_FATAL`, `QP_REQ_ERR`, `QP_ACCESS_ERR`, `PATH_MIG_ERR` on an endpoint's QP | the connection is broken: `DAT_CONNECTION_EVENT_BROKEN` and `DAT_ASYNC_ERROR_EP_BROKEN` (the core's state machine), the QP's outstanding work flushed |
//! | `CQ_ERR` (the CQ overran) | `DAT_ASYNC_ERROR_EVD_OVERFLOW` on the CQ's EVD |
//! | `DEVICE_FATAL` | `DAT_ASYNC_ERROR_IA_CATASTROPHIC`, once per IA |
//! | `PORT_ACTIVE`, `PORT_ERR`, `LID_CHANGE`, `PKEY_CHANGE`, `SM_CHANGE`, `CLIENT_REREGISTER`, `GID_CHANGE` | no DAT event: logged (a port that goes down breaks each connection through its QP) |
//! | `SRQ_ERR` | no DAT event the core can post: logged (the SRQ's endpoints break through their QPs) |
//! | `SRQ_LIMIT_REACHED` (armed by `dat_srq_set_lw` through `ibv_modify_srq`) | `SrqFact::LimitReached`: the facade posts the SRQ's low-watermark event (rule in `dat_core::srq`) |
//! | `COMM_EST`, `SQ_DRAINED`, `PATH_MIG`, `QP_LAST_WQE_REACHED` | logged (rdma_cm and the core account for them) |
//!
//! The context is librdmacm's, one per device for the whole process, so every IA on a device
//! polls the same descriptor (non-blocking): whichever thread reads an event hands it to the
//! IA that owns its QP, CQ or SRQ through a process-wide list of the open IAs (QP numbers and
//! object addresses are unique per device), and an unaffiliated one to every IA on the device.
//! Every event is acknowledged (`ibv_ack_async_event`) once it has been handled, so a
//! concurrent destroy of its object waits for the handling, never the reverse.

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use dat_core::provider::{AsyncFact, CmFact, SrqFact};
use rdma_sys as sys;

use super::{Shared, lock, read};
use crate::cm::CmId;
use crate::device::Context;

/// What a verbs asynchronous event means for DAT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Meaning {
    /// The QP went to the error state: its endpoint's connection is broken.
    QpBroken,
    /// A QP event rdma_cm or the core accounts for (logged).
    QpInfo,
    /// The CQ overran: its EVD overflowed.
    CqOverflow,
    /// The SRQ went to the error state (logged).
    SrqError,
    /// The SRQ's limit was reached (logged).
    SrqLimit,
    /// The device is unusable: the IA is catastrophically broken.
    DeviceFatal,
    /// A port's state or addressing changed (logged).
    Port,
    /// An event this provider does not know (logged).
    Unknown,
}

/// The meaning of verbs event type `kind` (`enum ibv_event_type`).
pub(crate) fn meaning(kind: u32) -> Meaning {
    use sys::ibv_event_type as t;
    const fn k(e: t) -> u32 {
        e as u32
    }
    match kind {
        x if x == k(t::IBV_EVENT_QP_FATAL)
            || x == k(t::IBV_EVENT_QP_REQ_ERR)
            || x == k(t::IBV_EVENT_QP_ACCESS_ERR)
            || x == k(t::IBV_EVENT_PATH_MIG_ERR) =>
        {
            Meaning::QpBroken
        }
        x if x == k(t::IBV_EVENT_COMM_EST)
            || x == k(t::IBV_EVENT_SQ_DRAINED)
            || x == k(t::IBV_EVENT_PATH_MIG)
            || x == k(t::IBV_EVENT_QP_LAST_WQE_REACHED) =>
        {
            Meaning::QpInfo
        }
        x if x == k(t::IBV_EVENT_CQ_ERR) => Meaning::CqOverflow,
        x if x == k(t::IBV_EVENT_SRQ_ERR) => Meaning::SrqError,
        x if x == k(t::IBV_EVENT_SRQ_LIMIT_REACHED) => Meaning::SrqLimit,
        x if x == k(t::IBV_EVENT_DEVICE_FATAL) => Meaning::DeviceFatal,
        x if x == k(t::IBV_EVENT_PORT_ACTIVE)
            || x == k(t::IBV_EVENT_PORT_ERR)
            || x == k(t::IBV_EVENT_LID_CHANGE)
            || x == k(t::IBV_EVENT_PKEY_CHANGE)
            || x == k(t::IBV_EVENT_SM_CHANGE)
            || x == k(t::IBV_EVENT_CLIENT_REREGISTER)
            || x == k(t::IBV_EVENT_GID_CHANGE) =>
        {
            Meaning::Port
        }
        _ => Meaning::Unknown,
    }
}

/// libibverbs' name of event type `kind`, for the logs.
fn kind_name(kind: u32) -> &'static str {
    use sys::ibv_event_type as t;
    [
        (t::IBV_EVENT_CQ_ERR, "CQ_ERR"),
        (t::IBV_EVENT_QP_FATAL, "QP_FATAL"),
        (t::IBV_EVENT_QP_REQ_ERR, "QP_REQ_ERR"),
        (t::IBV_EVENT_QP_ACCESS_ERR, "QP_ACCESS_ERR"),
        (t::IBV_EVENT_COMM_EST, "COMM_EST"),
        (t::IBV_EVENT_SQ_DRAINED, "SQ_DRAINED"),
        (t::IBV_EVENT_PATH_MIG, "PATH_MIG"),
        (t::IBV_EVENT_PATH_MIG_ERR, "PATH_MIG_ERR"),
        (t::IBV_EVENT_DEVICE_FATAL, "DEVICE_FATAL"),
        (t::IBV_EVENT_PORT_ACTIVE, "PORT_ACTIVE"),
        (t::IBV_EVENT_PORT_ERR, "PORT_ERR"),
        (t::IBV_EVENT_LID_CHANGE, "LID_CHANGE"),
        (t::IBV_EVENT_PKEY_CHANGE, "PKEY_CHANGE"),
        (t::IBV_EVENT_SM_CHANGE, "SM_CHANGE"),
        (t::IBV_EVENT_SRQ_ERR, "SRQ_ERR"),
        (t::IBV_EVENT_SRQ_LIMIT_REACHED, "SRQ_LIMIT_REACHED"),
        (t::IBV_EVENT_QP_LAST_WQE_REACHED, "QP_LAST_WQE_REACHED"),
        (t::IBV_EVENT_CLIENT_REREGISTER, "CLIENT_REREGISTER"),
        (t::IBV_EVENT_GID_CHANGE, "GID_CHANGE"),
        (t::IBV_EVENT_WQ_FATAL, "WQ_FATAL"),
    ]
    .into_iter()
    .find(|&(e, _)| e as u32 == kind)
    .map_or("unknown", |(_, n)| n)
}

/// What an event is about, read while it is unacknowledged (its object cannot be destroyed
/// before the acknowledgement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Element {
    /// A QP, by number.
    Qp(u32),
    /// A CQ, by address.
    Cq(usize),
    /// An SRQ, by address.
    Srq(usize),
    /// A port.
    Port(i32),
    /// The device.
    Device,
}

/// One event taken from the device, acknowledged on drop.
struct AsyncEvent {
    raw: sys::ibv_async_event,
    kind: u32,
}

impl AsyncEvent {
    /// Takes the next event of `ctx`, `None` when there is none (the descriptor is
    /// non-blocking) or the device failed.
    fn next(ctx: &Context) -> Option<AsyncEvent> {
        let mut raw = MaybeUninit::<sys::ibv_async_event>::zeroed();
        // SAFETY: the context is open; `raw` is a valid out-pointer of the full size. The
        // descriptor is non-blocking (see `watch`), so this never sleeps.
        let rc = unsafe { sys::ibv_get_async_event(ctx.as_ptr(), raw.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        // SAFETY: filled by the call. The type is read as the integer the kernel wrote (an
        // event type newer than the bindings is not a valid value of their enum).
        let kind = unsafe {
            std::ptr::addr_of!((*raw.as_ptr()).event_type)
                .cast::<u32>()
                .read()
        };
        // SAFETY: every field was written by the call (the enum's value was checked above
        // only as an integer and is passed back to libibverbs unchanged).
        let raw = unsafe { raw.assume_init() };
        Some(AsyncEvent { raw, kind })
    }

    /// What the event is about.
    fn element(&self) -> Element {
        // SAFETY: the union is read as the member the event type names; a QP's
        // number is read through its pointer, valid until the event is acknowledged (Drop).
        unsafe {
            match meaning(self.kind) {
                Meaning::QpBroken | Meaning::QpInfo => {
                    let qp = self.raw.element.qp;
                    if qp.is_null() {
                        Element::Device
                    } else {
                        Element::Qp((*qp).qp_num)
                    }
                }
                Meaning::CqOverflow => Element::Cq(self.raw.element.cq as usize),
                Meaning::SrqError | Meaning::SrqLimit => {
                    Element::Srq(self.raw.element.srq as usize)
                }
                Meaning::Port => Element::Port(self.raw.element.port_num),
                Meaning::DeviceFatal | Meaning::Unknown => Element::Device,
            }
        }
    }
}

impl Drop for AsyncEvent {
    fn drop(&mut self) {
        // SAFETY: an event returned by ibv_get_async_event, acknowledged exactly once.
        unsafe { sys::ibv_ack_async_event(&mut self.raw) };
    }
}

/// The open IAs of the process, by the address of their (librdmacm's) device context.
static OPEN: Mutex<Vec<(usize, Weak<Shared>)>> = Mutex::new(Vec::new());

/// Adds `shared` to the IAs that events of its device reach, and makes the device's event
/// descriptor non-blocking (shared by every IA on the device).
///
/// # Errors
/// The errno of `fcntl`.
fn watch(shared: &Arc<Shared>) -> std::io::Result<()> {
    crate::verbs::set_nonblocking(async_fd(&shared.ctx))?;
    let mut open = lock(&OPEN);
    open.retain(|(_, w)| w.strong_count() > 0);
    open.push((shared.ctx.as_ptr() as usize, Arc::downgrade(shared)));
    Ok(())
}

/// Makes `shared` hear of its device's events ([`watch`]) and of the device's removal even
/// without connections or service points: an id bound to the IA's address, on which rdma_cm
/// reports the removal as on every id of the device.
///
/// # Errors
/// The errno of `fcntl` (an id that cannot be bound is only logged).
pub(crate) fn attach(shared: &Arc<Shared>) -> std::io::Result<()> {
    watch(shared)?;
    match CmId::new(&shared.events).and_then(|cm| {
        cm.bind(std::net::SocketAddr::new(shared.ip, 0))?;
        Ok(cm)
    }) {
        Ok(cm) => *lock(&shared.sentinel) = Some(cm),
        Err(e) => {
            tracing::warn!(ia = %shared.name, error = %e, "no rdma_cm id on the IA's address: an idle IA will not hear of the device's removal");
        }
    }
    Ok(())
}

/// Removes `shared` (at close).
pub(crate) fn unwatch(shared: &Shared) {
    lock(&OPEN).retain(|(_, w)| w.strong_count() > 0 && !std::ptr::eq(w.as_ptr(), shared));
}

/// The descriptor the device's asynchronous events are read from.
pub(crate) fn async_fd(ctx: &Context) -> libc::c_int {
    // SAFETY: the context is open; `async_fd` is a plain field set at open.
    unsafe { (*ctx.as_ptr()).async_fd }
}

/// Reads every pending event of `ctx` and hands each to the IAs it concerns.
pub(crate) fn drain(ctx: &Context) {
    while let Some(ev) = AsyncEvent::next(ctx) {
        let key = ctx.as_ptr() as usize;
        let targets: Vec<Arc<Shared>> = lock(&OPEN)
            .iter()
            .filter(|(c, _)| *c == key)
            .filter_map(|(_, w)| w.upgrade())
            .collect();
        let element = ev.element();
        let meaning = meaning(ev.kind);
        let name = kind_name(ev.kind);
        let mut taken = false;
        for shared in &targets {
            taken |= shared.device_event(meaning, element, name);
            if taken && !matches!(element, Element::Port(_) | Element::Device) {
                break;
            }
        }
        if !taken {
            tracing::debug!(kind = name, ?element, "device event of no open object");
        }
        drop(ev);
    }
}

impl Shared {
    /// Reports `DAT_ASYNC_ERROR_IA_CATASTROPHIC` (once) and fails every later call that needs
    /// the device.
    pub(crate) fn catastrophic(&self) {
        if !self.dead.swap(true, Ordering::AcqRel) {
            self.upcalls.async_error(AsyncFact::Catastrophic);
        }
    }

    /// Whether the device is gone or failed.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_DEVICE` once it is.
    pub(crate) fn check_device(&self) -> dat_core::DatResult<()> {
        if self.dead.load(Ordering::Acquire) {
            return Err(dat_core::DatError::resources(
                dat_core::error::Subtype::ResourceDevice,
            ));
        }
        Ok(())
    }

    /// Handles one device event of this IA's device; false if it is about an object of
    /// another IA.
    fn device_event(&self, meaning: Meaning, element: Element, name: &'static str) -> bool {
        match (meaning, element) {
            (Meaning::QpBroken | Meaning::QpInfo, Element::Qp(qpn)) => {
                let Some(ep) = read(&self.by_qpn).get(&qpn).cloned() else {
                    return false;
                };
                if meaning == Meaning::QpInfo {
                    tracing::debug!(ia = %self.name, ep = ep.id.0, qpn, kind = name, "QP event");
                    return true;
                }
                tracing::warn!(ia = %self.name, ep = ep.id.0, qpn, kind = name, "QP error: connection broken");
                // The successful completions already in the CQs go first, then the fact, then
                // the flushes; the peer is told.
                self.fail_ep(&ep, CmFact::Broken, true, true);
                true
            }
            (Meaning::CqOverflow, Element::Cq(cq)) => {
                let evd = read(&self.cqs)
                    .iter()
                    .find(|(_, s)| s.cq.as_ptr() as usize == cq)
                    .map(|(&e, _)| e);
                if let Some(evd) = evd {
                    tracing::error!(ia = %self.name, evd = evd.0, "CQ overrun: EVD overflow");
                    self.upcalls.async_error(AsyncFact::EvdOverflow(evd));
                    return true;
                }
                let spare = lock(&self.null_cq)
                    .as_ref()
                    .is_some_and(|s| s.cq.as_ptr() as usize == cq);
                if spare {
                    tracing::warn!(ia = %self.name, "CQ overrun on the CQ of queues without an EVD");
                }
                spare
            }
            (Meaning::SrqError | Meaning::SrqLimit, Element::Srq(srq)) => {
                let id = read(&self.srqs)
                    .iter()
                    .find(|(_, s)| s.srq.as_ptr() as usize == srq)
                    .map(|(&id, _)| id);
                let Some(id) = id else {
                    return false;
                };
                if meaning == Meaning::SrqError {
                    tracing::error!(ia = %self.name, srq = id.0, kind = name, "SRQ in error");
                } else {
                    tracing::debug!(ia = %self.name, srq = id.0, kind = name, "SRQ limit reached");
                    self.upcalls.srq(id, SrqFact::LimitReached);
                }
                true
            }
            (Meaning::DeviceFatal, _) => {
                tracing::error!(ia = %self.name, device = %self.ctx.name(), "device fatal error");
                self.catastrophic();
                true
            }
            (Meaning::Port, Element::Port(port)) => {
                if name == "PORT_ERR" {
                    tracing::warn!(ia = %self.name, device = %self.ctx.name(), port, "port down");
                } else {
                    tracing::info!(ia = %self.name, device = %self.ctx.name(), port, kind = name, "port event");
                }
                true
            }
            _ => {
                tracing::warn!(ia = %self.name, kind = name, ?element, "unexpected device event");
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::ibv_event_type as t;

    #[test]
    fn events_map_as_ofa_dapl_maps_them() {
        let cases = [
            (t::IBV_EVENT_QP_FATAL, Meaning::QpBroken),
            (t::IBV_EVENT_QP_REQ_ERR, Meaning::QpBroken),
            (t::IBV_EVENT_QP_ACCESS_ERR, Meaning::QpBroken),
            (t::IBV_EVENT_PATH_MIG_ERR, Meaning::QpBroken),
            (t::IBV_EVENT_COMM_EST, Meaning::QpInfo),
            (t::IBV_EVENT_SQ_DRAINED, Meaning::QpInfo),
            (t::IBV_EVENT_PATH_MIG, Meaning::QpInfo),
            (t::IBV_EVENT_QP_LAST_WQE_REACHED, Meaning::QpInfo),
            (t::IBV_EVENT_CQ_ERR, Meaning::CqOverflow),
            (t::IBV_EVENT_SRQ_ERR, Meaning::SrqError),
            (t::IBV_EVENT_SRQ_LIMIT_REACHED, Meaning::SrqLimit),
            (t::IBV_EVENT_DEVICE_FATAL, Meaning::DeviceFatal),
            (t::IBV_EVENT_PORT_ACTIVE, Meaning::Port),
            (t::IBV_EVENT_PORT_ERR, Meaning::Port),
            (t::IBV_EVENT_LID_CHANGE, Meaning::Port),
            (t::IBV_EVENT_PKEY_CHANGE, Meaning::Port),
            (t::IBV_EVENT_SM_CHANGE, Meaning::Port),
            (t::IBV_EVENT_CLIENT_REREGISTER, Meaning::Port),
            (t::IBV_EVENT_GID_CHANGE, Meaning::Port),
            (t::IBV_EVENT_WQ_FATAL, Meaning::Unknown),
        ];
        for (e, m) in cases {
            assert_eq!(meaning(e as u32), m, "{e:?}");
            assert_ne!(kind_name(e as u32), "unknown", "{e:?}");
        }
        assert_eq!(meaning(4242), Meaning::Unknown);
        assert_eq!(kind_name(4242), "unknown");
    }
}
