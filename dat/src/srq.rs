//! Shared receive queues: one pool of receive buffers for many endpoints.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use dat_core::error::Subtype;
use dat_core::evd::{AsyncHandle, reason};
use dat_core::provider::{PostOp, SrqConfig, SrqFact, WorkRequest};
use dat_core::srq::LowWatermark;
use dat_core::types::{CompletionFlags, Cookie, LmrTriplet, MemPriv, SrqId};
use dat_core::{DatError, DatResult};

use crate::ia::{Ia, IaInner};
use crate::mem::Pz;
use crate::sync::{lock, read};

/// `DAT_SRQ_ATTR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive buffers the queue can hold.
    pub max_recv_dtos: u32,
    /// Segments per receive.
    pub max_recv_iov: u32,
    /// Low watermark (0 = `DAT_SRQ_LW_DEFAULT`, no event).
    pub low_watermark: u32,
}

/// `DAT_SRQ_PARAM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrqParam {
    /// Attributes in force.
    pub attr: SrqAttr,
    /// The SRQ's PZ.
    pub pz: dat_core::types::PzId,
    /// Endpoints using the SRQ.
    pub ep_count: u32,
}

pub(crate) struct SrqInner {
    pub(crate) id: SrqId,
    pz: Pz,
    attr: Mutex<SrqAttr>,
    /// The low-watermark rule (`dat_core::srq`). Locked after `attr` and never held while
    /// taking another facade lock (a transport's upcall reaches it after the IA's children
    /// lock is released); `set_lw` holds it across `Transport::set_srq_lw`.
    watermark: Mutex<LowWatermark>,
    /// DAT references: EPs created with this SRQ.
    pub(crate) refs: AtomicU32,
    freed: AtomicBool,
}

impl crate::Freeable for SrqInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// A shared receive queue (`DAT_SRQ_HANDLE`).
#[derive(Clone)]
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl fmt::Debug for Srq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srq").field("id", &self.inner.id).finish()
    }
}

impl Ia {
    /// Creates a shared receive queue in `pz` (`dat_srq_create`).
    ///
    /// # Errors
    /// `DAT_MODEL_NOT_SUPPORTED` if the provider has no SRQs;
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_PZ` for a freed PZ;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG3` for a zero or too large depth or IOV count, or a
    /// low watermark above the depth.
    ///
    /// A non-zero `low_watermark` is armed as by [`Srq::set_lw`]: on the still empty queue
    /// the event fires at once where the facade counts (reference 6.6: create with
    /// `DAT_SRQ_LW_DEFAULT`, 0, and set it once the queue is filled).
    pub fn create_srq(&self, pz: &Pz, attr: SrqAttr) -> DatResult<Srq> {
        self.inner.check_open()?;
        if !self.inner.provider_attr.srq_supported {
            return Err(DatError::new(
                dat_core::ErrorType::ModelNotSupported,
                Subtype::NoSubtype,
            ));
        }
        pz.check()?;
        let a = &self.inner.ia_attr;
        if attr.max_recv_dtos == 0
            || attr.max_recv_dtos > a.max_recv_per_srq
            || attr.max_recv_iov == 0
            || attr.max_recv_iov > a.max_iov_segments_per_dto
            || attr.low_watermark > attr.max_recv_dtos
        {
            return Err(DatError::invalid_arg(3));
        }
        let id = SrqId(self.inner.next_id());
        let cfg = SrqConfig {
            pz: pz.id(),
            max_recv_dtos: attr.max_recv_dtos,
            max_recv_iov: attr.max_recv_iov,
        };
        self.inner.transport.create_srq(id, &cfg)?;
        pz.inner.refs.fetch_add(1, Ordering::AcqRel);
        let inner = Arc::new(SrqInner {
            id,
            pz: pz.clone(),
            attr: Mutex::new(SrqAttr {
                low_watermark: 0,
                ..attr
            }),
            watermark: Mutex::new(LowWatermark::new()),
            refs: AtomicU32::new(0),
            freed: AtomicBool::new(false),
        });
        self.inner
            .children()
            .srqs
            .insert(id.0, Arc::downgrade(&inner));
        let srq = Srq { inner };
        if attr.low_watermark > 0
            && let Err(e) = srq.set_lw(attr.low_watermark)
        {
            srq.free_unchecked();
            return Err(e);
        }
        Ok(srq)
    }
}

/// A transport's fact about `srq` (from `IaUpcalls::srq`): posts the low-watermark event on
/// the IA's async EVD if the rule says it fires.
pub(crate) fn on_fact(ia: &IaInner, srq: &SrqInner, fact: SrqFact) {
    let fire = {
        let mut w = lock(&srq.watermark);
        match fact {
            SrqFact::Taken(n) => w.taken(n),
            SrqFact::LimitReached => w.limit_reached(),
        }
    };
    if fire {
        post_low_watermark(ia, srq.id);
    }
}

fn post_low_watermark(ia: &IaInner, srq: SrqId) {
    tracing::debug!(ia = %ia.name, srq = srq.0, "SRQ low watermark event");
    ia.post_async(
        AsyncHandle::Srq(srq),
        dat_core::srq::LOW_WATERMARK_EVENT,
        reason::SRQ_LOW_WATERMARK,
    );
}

impl Srq {
    pub(crate) fn check(&self) -> DatResult<()> {
        if crate::Freeable::is_freed(&*self.inner) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleSrq));
        }
        Ok(())
    }

    /// The SRQ's id.
    pub fn id(&self) -> SrqId {
        self.inner.id
    }

    /// Posts a receive buffer (`dat_srq_post_recv`); any EP of the SRQ may consume it, and the
    /// completion arrives on that EP's receive EVD.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` for more segments than `max_recv_iov`; the
    /// local protection codes of `dat_core::mem`; `DAT_INSUFFICIENT_RESOURCES` when full.
    pub fn post_recv(&self, iov: &[LmrTriplet], cookie: Cookie) -> DatResult<()> {
        self.check()?;
        let max_iov = lock(&self.inner.attr).max_recv_iov;
        if iov.len() > max_iov as usize {
            return Err(DatError::invalid_arg(2));
        }
        let ia = &self.inner.pz.inner.ia;
        let segs =
            read(&ia.mem).local_iov(self.inner.pz.id(), iov, MemPriv::LOCAL_WRITE, max_iov)?;
        let wr = WorkRequest {
            op: PostOp::Recv,
            segs,
            cookie,
            flags: CompletionFlags::DEFAULT,
        };
        // Counted before the transport has it: an endpoint may take it at once.
        lock(&self.inner.watermark).posted(1);
        let r = ia.transport.srq_post_recv(self.inner.id, wr);
        if r.is_err() {
            lock(&self.inner.watermark).unposted(1);
        }
        r
    }

    /// Parameters (`dat_srq_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_SRQ` on a freed SRQ.
    pub fn query(&self) -> DatResult<SrqParam> {
        self.check()?;
        Ok(SrqParam {
            attr: *lock(&self.inner.attr),
            pz: self.inner.pz.id(),
            ep_count: self.inner.refs.load(Ordering::Acquire),
        })
    }

    /// Changes the queue depth (`dat_srq_resize`).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` for zero or above the IA's `max_recv_per_srq`;
    /// `DAT_INVALID_STATE` below the low watermark.
    pub fn resize(&self, max_recv_dtos: u32) -> DatResult<()> {
        self.check()?;
        let max = self.inner.pz.inner.ia.ia_attr.max_recv_per_srq;
        if max_recv_dtos == 0 || max_recv_dtos > max {
            return Err(DatError::invalid_arg(2));
        }
        let mut a = lock(&self.inner.attr);
        if max_recv_dtos < a.low_watermark {
            return Err(DatError::invalid_state(Subtype::NoSubtype));
        }
        a.max_recv_dtos = max_recv_dtos;
        Ok(())
    }

    /// Sets and arms the low watermark (`dat_srq_set_lw`): `DAT_SRQ_LOW_WATERMARK_EVENT`
    /// goes to the IA's async EVD once, when fewer than `low_watermark` posted buffers remain
    /// untaken — during this call if that is already so — and not again until the next
    /// `set_lw`; 0 disarms (the rule is `dat_core::srq`).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` above the queue depth; the transport's code
    /// if it cannot arm its own limit (the old watermark stays).
    pub fn set_lw(&self, low_watermark: u32) -> DatResult<()> {
        self.check()?;
        let mut a = lock(&self.inner.attr);
        if low_watermark > a.max_recv_dtos {
            return Err(DatError::invalid_arg(2));
        }
        let ia = &self.inner.pz.inner.ia;
        let fire = {
            // Held across the transport call: a limit it reports at once finds the rule
            // already set.
            let mut w = lock(&self.inner.watermark);
            if ia.transport.set_srq_lw(self.inner.id, low_watermark)? {
                w.set_delegated(low_watermark);
                false
            } else {
                w.set(low_watermark)
            }
        };
        a.low_watermark = low_watermark;
        drop(a);
        if fire {
            post_low_watermark(ia, self.inner.id);
        }
        Ok(())
    }

    /// Frees the SRQ (`dat_srq_free`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_SRQ_IN_USE` while EPs use it.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        if self.inner.refs.load(Ordering::Acquire) > 0 {
            return Err(DatError::invalid_state(Subtype::StateSrqInUse));
        }
        self.free_unchecked();
        Ok(())
    }

    pub(crate) fn free_unchecked(&self) {
        if !self.inner.freed.swap(true, Ordering::AcqRel) {
            let ia = &self.inner.pz.inner.ia;
            ia.transport.free_srq(self.inner.id);
            self.inner.pz.inner.refs.fetch_sub(1, Ordering::AcqRel);
            ia.children().srqs.remove(&self.inner.id.0);
        }
    }
}
