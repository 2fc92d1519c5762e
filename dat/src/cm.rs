//! Connection management on the passive side: public and reserved service points, and the
//! connection requests they deliver.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use dat_core::ep::state::{Actions, EpState, Input};
use dat_core::error::Subtype;
use dat_core::evd::{Event, EventData, Signal};
use dat_core::provider::{ConnRequest, SpUpcalls};
use dat_core::types::{ConnQual, CrId, EpId, EvdFlags, EventNumber, IaAddress, PspFlags, SpId};
use dat_core::{DatError, DatResult};

use crate::ep::{Ep, EpInner, EpParams};
use crate::evd::Evd;
use crate::ia::{Ia, IaInner};

pub(crate) enum SpKind {
    Psp(PspFlags),
    Rsp(Weak<EpInner>),
}

pub(crate) struct SpInner {
    pub(crate) id: SpId,
    ia: Arc<IaInner>,
    /// Set before listening, or right after for `create_any` (no request can name a
    /// qualifier nobody has learned yet).
    qual: std::sync::OnceLock<ConnQual>,
    evd: Evd,
    kind: SpKind,
    freed: AtomicBool,
}

impl crate::Freeable for SpInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// A service point (`DAT_PSP_HANDLE` or `DAT_RSP_HANDLE`): listens on a connection qualifier
/// and delivers `DAT_CONNECTION_REQUEST_EVENT`s to its EVD.
#[derive(Clone)]
pub struct Sp {
    pub(crate) inner: Arc<SpInner>,
}

impl fmt::Debug for Sp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sp")
            .field("id", &self.inner.id)
            .field("qual", &self.inner.qual())
            .finish()
    }
}

/// `DAT_PSP_PARAM` / `DAT_RSP_PARAM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpParam {
    /// The qualifier listened on.
    pub conn_qual: ConnQual,
    /// The EVD receiving requests.
    pub evd: dat_core::types::EvdId,
    /// PSP flags (`None` for an RSP).
    pub psp_flags: Option<PspFlags>,
    /// The reserved EP (RSP only).
    pub ep: Option<EpId>,
}

struct SpLink(Weak<SpInner>);

impl SpUpcalls for SpLink {
    fn connection_request(&self, req: ConnRequest) {
        match self.0.upgrade() {
            Some(sp) if !crate::Freeable::is_freed(&*sp) => sp.on_request(req),
            Some(sp) => {
                let _ = sp.ia.transport.reject(req.cr, &[]);
            }
            None => {}
        }
    }
}

impl SpInner {
    fn qual(&self) -> ConnQual {
        self.qual.get().copied().unwrap_or(ConnQual(0))
    }

    fn on_request(self: &Arc<SpInner>, req: ConnRequest) {
        let ia = &self.ia;
        let ep = match &self.kind {
            SpKind::Psp(PspFlags::Consumer) => None,
            SpKind::Psp(PspFlags::Provider) => {
                let ia_h = Ia { inner: ia.clone() };
                let created = ia_h
                    .ep_core(&EpParams::default(), EpState::TentativeConnectionPending)
                    .and_then(|core| Ep::create_in(ia, core));
                match created {
                    Ok(ep) => Some(ep),
                    Err(e) => {
                        tracing::warn!(ia = %ia.name, error = %e, "cannot create an EP for a request: rejected");
                        let _ = ia.transport.reject(req.cr, &[]);
                        return;
                    }
                }
            }
            SpKind::Rsp(weak) => {
                let Some(inner) = weak.upgrade() else {
                    let _ = ia.transport.reject(req.cr, &[]);
                    return;
                };
                if inner.apply(Input::CrArrived).is_err() {
                    let _ = ia.transport.reject(req.cr, &[]);
                    return;
                }
                // A reserved service point takes one request only.
                ia.transport.unlisten(self.id);
                Some(Ep { inner })
            }
        };
        if let Some(ep) = &ep {
            let mut core = ep.inner.core.lock();
            core.remote = Some(req.remote);
            core.local_qual = Some(self.qual());
            core.cr = Some(req.cr);
        }
        let cr = Arc::new(CrInner {
            id: req.cr,
            sp: self.id,
            ia: ia.clone(),
            qual: self.qual(),
            remote: req.remote,
            private_data: req.private_data,
            ep,
            done: AtomicBool::new(false),
        });
        ia.children().crs.insert(req.cr.0, cr);
        let ev = Event {
            number: EventNumber::ConnectionRequest,
            data: EventData::ConnectionRequest {
                sp: self.id,
                conn_qual: self.qual(),
                cr: req.cr,
            },
        };
        self.evd.inner.push(ev, Signal::Normal);
    }
}

impl Ia {
    fn create_sp(&self, qual: Option<ConnQual>, evd: &Evd, kind: SpKind) -> DatResult<Sp> {
        self.inner.check_open()?;
        if crate::Freeable::is_freed(&*evd.inner) || !evd.inner.flags().contains(EvdFlags::CR) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleEvdCr));
        }
        let id = SpId(self.inner.next_id());
        let inner = Arc::new(SpInner {
            id,
            ia: self.inner.clone(),
            qual: std::sync::OnceLock::new(),
            evd: evd.clone(),
            kind,
            freed: AtomicBool::new(false),
        });
        if let Some(q) = qual {
            let _ = inner.qual.set(q);
        }
        let link = Arc::new(SpLink(Arc::downgrade(&inner)));
        let got = self.inner.transport.listen(id, qual, link)?;
        let _ = inner.qual.set(got);
        evd.inner.refs.fetch_add(1, Ordering::AcqRel);
        self.inner
            .children()
            .sps
            .insert(id.0, Arc::downgrade(&inner));
        Ok(Sp { inner })
    }

    /// Listens on `qual` (`dat_psp_create`). With [`PspFlags::Provider`] the provider creates
    /// an endpoint in `TENTATIVE_CONNECTION_PENDING` for every request.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EVD_CR` for an EVD without `DAT_EVD_CR_FLAG`;
    /// `DAT_CONN_QUAL_IN_USE` if the qualifier is taken.
    pub fn create_psp(&self, qual: ConnQual, evd: &Evd, flags: PspFlags) -> DatResult<Sp> {
        self.check_psp_flags(flags)?;
        self.create_sp(Some(qual), evd, SpKind::Psp(flags))
    }

    /// Listens on a qualifier the provider chooses (`dat_psp_create_any`); see
    /// [`Sp::conn_qual`].
    ///
    /// # Errors
    /// As [`Ia::create_psp`], plus `DAT_CONN_QUAL_UNAVAILABLE`.
    pub fn create_psp_any(&self, evd: &Evd, flags: PspFlags) -> DatResult<Sp> {
        self.check_psp_flags(flags)?;
        self.create_sp(None, evd, SpKind::Psp(flags))
    }

    fn check_psp_flags(&self, flags: PspFlags) -> DatResult<()> {
        if flags == PspFlags::Provider && !self.inner.provider_attr.psp_provider_flag_supported {
            return Err(DatError::invalid_arg(4));
        }
        Ok(())
    }

    /// Reserves `ep` for one request on `qual` (`dat_rsp_create`): the EP goes to `RESERVED`,
    /// then to `PASSIVE_CONNECTION_PENDING` when the request arrives.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` unless the EP is `UNCONNECTED`; otherwise as
    /// [`Ia::create_psp`].
    pub fn create_rsp(&self, qual: ConnQual, ep: &Ep, evd: &Evd) -> DatResult<Sp> {
        ep.inner.check()?;
        ep.inner.apply(Input::RspCreate)?;
        match self.create_sp(Some(qual), evd, SpKind::Rsp(Arc::downgrade(&ep.inner))) {
            Ok(sp) => Ok(sp),
            Err(e) => {
                let _ = ep.inner.apply(Input::RspFree);
                Err(e)
            }
        }
    }
}

impl Sp {
    fn check(&self) -> DatResult<()> {
        if crate::Freeable::is_freed(&*self.inner) {
            let sub = match self.inner.kind {
                SpKind::Psp(_) => Subtype::InvalidHandlePsp,
                SpKind::Rsp(_) => Subtype::InvalidHandleRsp,
            };
            return Err(DatError::invalid_handle(sub));
        }
        Ok(())
    }

    /// The qualifier this service point listens on.
    pub fn conn_qual(&self) -> ConnQual {
        self.inner.qual()
    }

    /// The service point's id (events name it).
    pub fn id(&self) -> SpId {
        self.inner.id
    }

    /// Parameters (`dat_psp_query`, `dat_rsp_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|PSP` (or `RSP`) on a freed service point.
    pub fn query(&self) -> DatResult<SpParam> {
        self.check()?;
        let (psp_flags, ep) = match &self.inner.kind {
            SpKind::Psp(f) => (Some(*f), None),
            SpKind::Rsp(w) => (None, w.upgrade().map(|e| e.id)),
        };
        Ok(SpParam {
            conn_qual: self.inner.qual(),
            evd: self.inner.evd.id(),
            psp_flags,
            ep,
        })
    }

    /// Stops listening and frees the service point (`dat_psp_free`, `dat_rsp_free`). A still
    /// reserved EP returns to `UNCONNECTED`; requests already delivered stay valid.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|PSP` (or `RSP`) if already freed.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        self.free_unchecked();
        Ok(())
    }

    pub(crate) fn free_unchecked(&self) {
        if self.inner.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        let ia = &self.inner.ia;
        ia.transport.unlisten(self.inner.id);
        if let SpKind::Rsp(w) = &self.inner.kind
            && let Some(ep) = w.upgrade()
            && ep.core.lock().state == EpState::Reserved
        {
            let _ = ep.apply(Input::RspFree);
        }
        self.inner.evd.inner.refs.fetch_sub(1, Ordering::AcqRel);
        ia.children().sps.remove(&self.inner.id.0);
    }
}

pub(crate) struct CrInner {
    pub(crate) id: CrId,
    sp: SpId,
    ia: Arc<IaInner>,
    qual: ConnQual,
    remote: IaAddress,
    private_data: Box<[u8]>,
    ep: Option<Ep>,
    done: AtomicBool,
}

/// A connection request (`DAT_CR_HANDLE`), valid until accepted, rejected or handed off.
#[derive(Clone)]
pub struct Cr {
    pub(crate) inner: Arc<CrInner>,
}

impl fmt::Debug for Cr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cr")
            .field("id", &self.inner.id)
            .field("remote", &self.inner.remote)
            .finish()
    }
}

/// `DAT_CR_PARAM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrParam {
    /// The requester's address.
    pub remote_address: IaAddress,
    /// The qualifier the request arrived on.
    pub conn_qual: ConnQual,
    /// The requester's private data.
    pub private_data: Box<[u8]>,
    /// The endpoint bound to the request (RSP, or created by the provider).
    pub ep: Option<EpId>,
    /// The service point it arrived at.
    pub sp: SpId,
}

impl Cr {
    fn take(&self) -> DatResult<()> {
        if self.inner.done.swap(true, Ordering::AcqRel) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCr));
        }
        self.inner.ia.children().crs.remove(&self.inner.id.0);
        Ok(())
    }

    fn check(&self) -> DatResult<()> {
        if self.inner.done.load(Ordering::Acquire) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCr));
        }
        Ok(())
    }

    /// The request's id (what the CR event names).
    pub fn id(&self) -> CrId {
        self.inner.id
    }

    /// Parameters (`dat_cr_query`), including the requester's private data.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CR` once accepted, rejected or handed off.
    pub fn query(&self) -> DatResult<CrParam> {
        self.check()?;
        Ok(CrParam {
            remote_address: self.inner.remote,
            conn_qual: self.inner.qual,
            private_data: self.inner.private_data.clone(),
            ep: self.inner.ep.as_ref().map(Ep::id),
            sp: self.inner.sp,
        })
    }

    /// The endpoint bound to this request, if any (RSP, or created by the provider).
    pub fn ep(&self) -> Option<Ep> {
        self.inner.ep.clone()
    }

    /// Accepts the request (`dat_cr_accept`) on `ep`, or on the request's own EP with `None`.
    /// `private_data` reaches the requester in its `ESTABLISHED` event; this side gets its own
    /// `ESTABLISHED` (or `ACCEPT_COMPLETION_ERROR`) on the EP's connect EVD.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EP` when `ep` is `None` but the request has no
    /// EP, or `Some` while it has one, or the EP lacks a PZ or a connect EVD;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG3` for private data over the provider's maximum;
    /// bare `DAT_INVALID_STATE` for an EP in the wrong state;
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CR` for a request already answered.
    pub fn accept(&self, ep: Option<&Ep>, private_data: &[u8]) -> DatResult<()> {
        self.check()?;
        let ia = &self.inner.ia;
        if private_data.len() > ia.provider_attr.max_private_data_size as usize {
            return Err(DatError::invalid_arg(3));
        }
        let (ep, input) = match (ep, &self.inner.ep) {
            (Some(e), None) => (e.clone(), Input::AcceptWithEp),
            (None, Some(own)) => (own.clone(), Input::AcceptOwnEp),
            _ => return Err(DatError::invalid_handle(Subtype::InvalidHandleEp)),
        };
        // How to undo the accept if the transport refuses it: back to where the EP came from.
        let undo = match ep.inner.core.lock().state {
            EpState::PassiveConnectionPending => Input::RspAcceptFailedSync,
            EpState::TentativeConnectionPending => Input::ProviderAcceptFailedSync,
            _ => Input::ConnectFailedSync,
        };
        ep.inner.check()?;
        {
            let mut core = ep.inner.core.lock();
            if core.pz.is_none() || core.connect_evd.is_none() {
                return Err(DatError::invalid_handle(Subtype::InvalidHandleEp));
            }
            ep.inner.apply_locked(&mut core, input)?;
            core.remote = Some(self.inner.remote);
            core.local_qual = Some(self.inner.qual);
            core.cr = Some(self.inner.id);
        }
        self.take()?;
        if let Err(e) = ia.transport.accept(self.inner.id, ep.id(), private_data) {
            let _ = ep.inner.apply(undo);
            return Err(e);
        }
        Ok(())
    }

    /// Rejects the request (`dat_cr_reject`); `private_data` reaches the requester in its
    /// `PEER_REJECTED` event. A reserved EP returns to `UNCONNECTED`; an EP the provider
    /// created is destroyed.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` for private data over the maximum;
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CR` for a request already answered.
    pub fn reject(&self, private_data: &[u8]) -> DatResult<()> {
        self.check()?;
        let ia = &self.inner.ia;
        if private_data.len() > ia.provider_attr.max_private_data_size as usize {
            return Err(DatError::invalid_arg(2));
        }
        let out = match &self.inner.ep {
            Some(ep) => Some((ep.clone(), ep.inner.apply(Input::Reject)?)),
            None => None,
        };
        self.take()?;
        let res = ia.transport.reject(self.inner.id, private_data);
        if let Some((ep, out)) = out
            && out.actions.contains(Actions::DESTROY)
        {
            ep.inner.destroy();
        }
        res
    }

    /// Passes the request to the service point listening on `qual` in the same IA
    /// (`dat_cr_handoff`): a new `DAT_CONNECTION_REQUEST_EVENT` is delivered there.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` if no consumer-flag PSP of this IA listens on
    /// `qual`; `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CR` for a request already answered or
    /// bound to an EP.
    pub fn handoff(&self, qual: ConnQual) -> DatResult<()> {
        self.check()?;
        if self.inner.ep.is_some() {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCr));
        }
        let ia = &self.inner.ia;
        let target = ia
            .children()
            .sps
            .values()
            .filter_map(Weak::upgrade)
            .find(|sp| {
                !crate::Freeable::is_freed(&**sp)
                    && sp.qual() == qual
                    && matches!(sp.kind, SpKind::Psp(PspFlags::Consumer))
            });
        let Some(sp) = target else {
            return Err(DatError::invalid_arg(2));
        };
        self.take()?;
        let cr = Arc::new(CrInner {
            id: self.inner.id,
            sp: sp.id,
            ia: ia.clone(),
            qual,
            remote: self.inner.remote,
            private_data: self.inner.private_data.clone(),
            ep: None,
            done: AtomicBool::new(false),
        });
        ia.children().crs.insert(cr.id.0, cr);
        let ev = Event {
            number: EventNumber::ConnectionRequest,
            data: EventData::ConnectionRequest {
                sp: sp.id,
                conn_qual: qual,
                cr: self.inner.id,
            },
        };
        sp.evd.inner.push(ev, Signal::Normal);
        Ok(())
    }
}
