//! Endpoints: creation, connection management through the core's state machine, and posts.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use dat_core::ep::attr::{EpLimits, default_attr, validate_attr};
use dat_core::ep::state::{Actions, EpState, Input, Outcome, transition};
use dat_core::error::{ErrorType, Subtype};
use dat_core::evd::{Event, EventData, Signal};
use dat_core::provider::{CmFact, Completion, EpConfig, EpUpcalls};
use dat_core::types::{
    CloseFlags, ConnQual, CrId, EpAttr, EpId, EvdFlags, IaAddress, Qos, Timeout,
};
use dat_core::{DatError, DatResult};

use crate::ep_cell::{CoreGuard, EpCell};
use crate::ep_route::Routes;
use crate::evd::Evd;
use crate::ia::{Ia, IaInner};
use crate::mem::Pz;
use crate::srq::Srq;

/// `DAT_CONNECT_FLAGS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConnectFlags {
    /// `DAT_CONNECT_DEFAULT_FLAG`.
    #[default]
    Default,
    /// `DAT_CONNECT_MULTIPATH_REQUESTED_FLAG` (not supported).
    MultipathRequested,
    /// `DAT_CONNECT_MULTIPATH_REQUIRED_FLAG` (not supported).
    MultipathRequired,
}

/// What an endpoint is created with (`dat_ep_create` arguments). Every field may be `None`,
/// as in C; an EP without a PZ or a connect EVD cannot connect until modified.
#[derive(Clone, Debug, Default)]
pub struct EpParams<'a> {
    /// Protection zone.
    pub pz: Option<&'a Pz>,
    /// EVD for receive completions (needs `DAT_EVD_DTO_FLAG`).
    pub recv_evd: Option<&'a Evd>,
    /// EVD for request completions (needs `DAT_EVD_DTO_FLAG`).
    pub request_evd: Option<&'a Evd>,
    /// EVD for connection events (needs `DAT_EVD_CONNECTION_FLAG`).
    pub connect_evd: Option<&'a Evd>,
    /// Shared receive queue (`dat_ep_create_with_srq`).
    pub srq: Option<&'a Srq>,
    /// Attributes; `None` takes the provider defaults.
    pub attr: Option<&'a EpAttr>,
}

/// What `dat_ep_modify` changes: each `Some` field replaces that part of the endpoint.
#[derive(Clone, Debug, Default)]
pub struct EpModify<'a> {
    /// New protection zone (allowed in `UNCONNECTED` and `TENTATIVE_CONNECTION_PENDING`).
    pub pz: Option<&'a Pz>,
    /// New receive EVD.
    pub recv_evd: Option<&'a Evd>,
    /// New request EVD.
    pub request_evd: Option<&'a Evd>,
    /// New connect EVD.
    pub connect_evd: Option<&'a Evd>,
    /// New attributes.
    pub attr: Option<&'a EpAttr>,
}

/// `DAT_EP_PARAM`: what `dat_ep_query` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpParam {
    /// Current state.
    pub state: EpState,
    /// The local IA address.
    pub local_address: IaAddress,
    /// Local qualifier, for passive EPs.
    pub local_qual: Option<ConnQual>,
    /// The peer's IA address once known.
    pub remote_address: Option<IaAddress>,
    /// The peer's qualifier, for active EPs.
    pub remote_qual: Option<ConnQual>,
    /// Current configuration (PZ, EVDs, SRQ, attributes).
    pub config: EpConfig,
}

/// A snapshot of an endpoint ([`Ep::status`], `dat_ep_get_status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpStatus {
    /// The state.
    pub state: EpState,
    /// Receives posted to the endpoint and not completed (always 0 on an SRQ's endpoint:
    /// its receives are the SRQ's).
    pub recvs: u64,
    /// Sends, RDMA writes and RDMA reads posted and not completed. (Memory window binds
    /// complete within `Rmr::bind` and never count.)
    pub requests: u64,
}

impl EpStatus {
    /// No receive outstanding (`recv_idle`).
    pub fn recv_idle(&self) -> bool {
        self.recvs == 0
    }

    /// No request outstanding (`request_idle`).
    pub fn request_idle(&self) -> bool {
        self.requests == 0
    }
}

pub(crate) struct EpCore {
    pub(crate) state: EpState,
    pub(crate) cfg: EpConfig,
    pub(crate) pz: Option<Pz>,
    pub(crate) recv_evd: Option<Evd>,
    pub(crate) request_evd: Option<Evd>,
    pub(crate) connect_evd: Option<Evd>,
    pub(crate) srq: Option<Srq>,
    pub(crate) remote: Option<IaAddress>,
    pub(crate) remote_qual: Option<ConnQual>,
    pub(crate) local_qual: Option<ConnQual>,
    /// The connection request this EP is bound to (RSP or provider-created EP).
    pub(crate) cr: Option<CrId>,
}

pub(crate) struct EpInner {
    pub(crate) id: EpId,
    pub(crate) ia: Arc<IaInner>,
    pub(crate) core: EpCell,
    pub(crate) freed: AtomicBool,
    /// The transport's own post entry of this endpoint (`Transport::ep_post`), if it has
    /// one: a post through it skips the transport's lookup of the endpoint by id.
    pub(crate) post_to: Option<crate::direct::PostTo>,
    /// `post_to` takes requests lent for the call (`EpPost::lends`): a post then drops its
    /// request itself, with this thread's post cache at hand.
    pub(crate) lend: bool,
}

impl crate::Freeable for EpInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// An endpoint (`DAT_EP_HANDLE`).
#[derive(Clone)]
pub struct Ep {
    pub(crate) inner: Arc<EpInner>,
}

impl fmt::Debug for Ep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ep").field("id", &self.inner.id).finish()
    }
}

impl PartialEq for Ep {
    fn eq(&self, other: &Ep) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

fn limits(ia: &IaInner) -> EpLimits {
    let a = &ia.ia_attr;
    EpLimits {
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        max_dtos: a.max_dto_per_ep,
        max_iov: a.max_iov_segments_per_dto,
        max_rdma_read_in: a.max_rdma_read_per_ep_in,
        max_rdma_read_out: a.max_rdma_read_per_ep_out,
        max_rdma_read_iov: a.max_iov_segments_per_rdma_read,
        max_rdma_write_iov: a.max_iov_segments_per_rdma_write,
    }
}

fn check_evd(evd: Option<&Evd>, need: EvdFlags, sub: Subtype) -> DatResult<Option<Evd>> {
    match evd {
        None => Ok(None),
        Some(e) if crate::Freeable::is_freed(&*e.inner) || !e.inner.flags().contains(need) => {
            Err(DatError::invalid_handle(sub))
        }
        Some(e) => Ok(Some(e.clone())),
    }
}

/// Takes a DAT reference on each object an EP uses (released by [`release_refs`]).
fn take_refs(core: &EpCore) {
    if let Some(pz) = &core.pz {
        pz.inner.refs.fetch_add(1, Ordering::AcqRel);
    }
    for e in [&core.recv_evd, &core.request_evd, &core.connect_evd]
        .into_iter()
        .flatten()
    {
        e.inner.refs.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(s) = &core.srq {
        s.inner.refs.fetch_add(1, Ordering::AcqRel);
    }
}

fn release_refs(core: &EpCore) {
    if let Some(pz) = &core.pz {
        pz.inner.refs.fetch_sub(1, Ordering::AcqRel);
    }
    for e in [&core.recv_evd, &core.request_evd, &core.connect_evd]
        .into_iter()
        .flatten()
    {
        e.inner.refs.fetch_sub(1, Ordering::AcqRel);
    }
    if let Some(s) = &core.srq {
        s.inner.refs.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Ia {
    /// Creates an endpoint in `UNCONNECTED` (`dat_ep_create`, or `dat_ep_create_with_srq`
    /// when `params.srq` is set).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE` with subtype `PZ`, `EVD_RECV`, `EVD_REQUEST`, `EVD_CONN` or `SRQ`
    /// for a freed object or an EVD without the needed stream flag; attribute errors of
    /// `dat_core::ep::attr::validate_attr` (`DAT_INVALID_PARAMETER|DAT_INVALID_ARG6`,
    /// `DAT_MODEL_NOT_SUPPORTED`); `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_TEP` from the
    /// transport.
    pub fn create_ep(&self, params: &EpParams<'_>) -> DatResult<Ep> {
        self.inner.check_open()?;
        let core = self.ep_core(params, EpState::Unconnected)?;
        Ep::create(&self.inner, core)
    }

    pub(crate) fn ep_core(&self, params: &EpParams<'_>, state: EpState) -> DatResult<EpCore> {
        if let Some(pz) = params.pz {
            pz.check()?;
        }
        let recv_evd = check_evd(
            params.recv_evd,
            EvdFlags::DTO,
            Subtype::InvalidHandleEvdRecv,
        )?;
        let request_evd = check_evd(
            params.request_evd,
            EvdFlags::DTO,
            Subtype::InvalidHandleEvdRequest,
        )?;
        let connect_evd = check_evd(
            params.connect_evd,
            EvdFlags::CONNECTION,
            Subtype::InvalidHandleEvdConn,
        )?;
        if let Some(srq) = params.srq {
            srq.check()?;
        }
        let lim = limits(&self.inner);
        let attr = match params.attr {
            Some(a) => a.clone(),
            None => {
                let mut a = default_attr(&lim);
                if recv_evd.is_none() {
                    a.max_recv_dtos = 0;
                }
                if request_evd.is_none() {
                    a.max_request_dtos = 0;
                }
                a
            }
        };
        validate_attr(
            &attr,
            &lim,
            recv_evd.is_some(),
            request_evd.is_some(),
            params.srq.is_some(),
        )?;
        let cfg = EpConfig {
            pz: params.pz.map(|p| p.inner.id),
            recv_evd: recv_evd.as_ref().map(Evd::id),
            request_evd: request_evd.as_ref().map(Evd::id),
            connect_evd: connect_evd.as_ref().map(Evd::id),
            srq: params.srq.map(|s| s.inner.id),
            attr,
        };
        Ok(EpCore {
            state,
            cfg,
            pz: params.pz.cloned(),
            recv_evd,
            request_evd,
            connect_evd,
            srq: params.srq.cloned(),
            remote: None,
            remote_qual: None,
            local_qual: None,
            cr: None,
        })
    }
}

/// The endpoint's upcalls: completions go straight to the EVDs through the shared routes;
/// connection facts through a weak link, so a provider never keeps a freed EP alive.
struct EpLink {
    ep: Weak<EpInner>,
    routes: Arc<Routes>,
}

impl EpUpcalls for EpLink {
    fn completion(&self, c: Completion) {
        self.routes.deliver(c);
    }

    fn cm(&self, fact: CmFact) {
        if let Some(ep) = self.ep.upgrade() {
            ep.on_fact(fact);
        }
    }

    fn retired(&self, n: u32) {
        self.routes.retired(n);
    }
}

impl EpInner {
    /// Queues a DTO completion on the right EVD, applying SUPPRESS and UNSIGNALLED.
    pub(crate) fn deliver(&self, c: Completion) {
        self.core.routes().deliver(c);
    }

    /// Applies a transport fact through the state machine.
    fn on_fact(&self, fact: CmFact) {
        let input = match &fact {
            CmFact::Established { .. } => Input::Established,
            CmFact::PeerRejected { .. } => Input::PeerRejected,
            CmFact::NonPeerRejected => Input::NonPeerRejected,
            CmFact::Unreachable => Input::Unreachable,
            CmFact::TimedOut => Input::TimedOut,
            CmFact::AcceptCompletionError => Input::AcceptCompletionError,
            CmFact::Disconnected => Input::Disconnected,
            CmFact::Broken => Input::Broken,
        };
        let pdata = match fact {
            CmFact::Established { private_data } | CmFact::PeerRejected { private_data } => {
                private_data
            }
            _ => Box::default(),
        };
        let mut core = self.core.lock();
        if self.freed.load(Ordering::Acquire) {
            // Decision 14: a freed EP reports nothing (a transport may still be closing it).
            tracing::debug!(
                ep = self.id.0,
                ?input,
                "transport fact for a freed EP ignored"
            );
            return;
        }
        let out = transition(core.state, input);
        if out.ignored || out.result.is_err() {
            tracing::debug!(ep = self.id.0, state = ?core.state, ?input, "transport fact ignored");
            return;
        }
        tracing::debug!(ep = self.id.0, from = ?core.state, to = ?out.next, ?input, "EP transition");
        core.state = out.next;
        core.publish();
        self.post_conn_event(&core, &out, pdata);
        self.post_async_event(&core, &out);
    }

    /// Posts `DAT_ASYNC_ERROR_EP_BROKEN` for this EP on the IA's async EVD when the outcome
    /// asks for it: a broken connection (decision 17 of `dat_core::ep::state`) or an EP on an
    /// SRQ leaving its connection (decision 26). Called after the connection event with the
    /// EP still locked, so the EP cannot be freed before its event is queued.
    fn post_async_event(&self, core: &EpCore, out: &Outcome) {
        if out.posts_async_ep_broken(core.srq.is_some()) {
            self.ia.post_async(
                dat_core::evd::AsyncHandle::Ep(self.id),
                dat_core::types::EventNumber::AsyncEpBroken,
                dat_core::evd::reason::EP_TRANSFER_TO_ERROR,
            );
        }
    }

    /// Posts the outcome's connection event (if any) on the connect EVD. Called with the EP
    /// locked so that events and state changes are seen in the same order.
    fn post_conn_event(&self, core: &EpCore, out: &Outcome, pdata: Box<[u8]>) {
        if let (Some(ev), Some(evd)) = (out.event, &core.connect_evd) {
            evd.inner.push(
                Event::connection(ev.number(), self.id, pdata),
                Signal::Normal,
            );
        }
    }

    /// Runs a consumer call through the state machine; on success the new state is set, the
    /// connection event and then any asynchronous event are posted, and the outcome (with
    /// its actions for the caller to carry out) is returned.
    pub(crate) fn apply(&self, input: Input) -> DatResult<Outcome> {
        let mut core = self.core.lock();
        self.apply_locked(&mut core, input)
    }

    pub(crate) fn apply_locked(
        &self,
        core: &mut CoreGuard<'_>,
        input: Input,
    ) -> DatResult<Outcome> {
        let out = transition(core.state, input);
        out.result?;
        if core.state != out.next {
            tracing::debug!(ep = self.id.0, from = ?core.state, to = ?out.next, ?input, "EP transition");
        }
        core.state = out.next;
        core.publish();
        self.post_conn_event(core, &out, Box::default());
        self.post_async_event(core, &out);
        Ok(out)
    }

    pub(crate) fn check(&self) -> DatResult<()> {
        if self.freed.load(Ordering::Acquire) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleEp));
        }
        Ok(())
    }

    /// Frees the EP's resources after the state machine allowed it (or on IA close).
    pub(crate) fn destroy(&self) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.ia.transport.free_ep(self.id);
        let core = self.core.lock();
        release_refs(&core);
        let id = self.id;
        // Completions of a freed EP may stay on shared EVDs (spec: may or may not remain);
        // we remove them so nothing refers to a dead EP.
        for evd in [&core.recv_evd, &core.request_evd].into_iter().flatten() {
            evd.inner
                .drain_where(|e| matches!(e.data, EventData::Dto(c) if c.ep == id));
        }
        drop(core);
        self.ia.children().eps.remove(&self.id.0);
    }

    /// Carries out the transport side of an outcome's actions (never with the EP locked).
    pub(crate) fn act(&self, out: &Outcome, flags_for_disconnect: CloseFlags) -> DatResult<()> {
        let t = &self.ia.transport;
        if out.actions.contains(Actions::TRANSPORT_DISCONNECT_ABRUPT) {
            t.disconnect(self.id, CloseFlags::Abrupt)?;
        } else if out.actions.contains(Actions::TRANSPORT_DISCONNECT_GRACEFUL) {
            t.disconnect(self.id, flags_for_disconnect)?;
        }
        if out.actions.contains(Actions::DESTROY) {
            self.destroy();
        }
        Ok(())
    }
}

impl Ep {
    fn create(ia: &Arc<IaInner>, core: EpCore) -> DatResult<Ep> {
        let id = EpId(ia.next_id());
        let cfg = core.cfg.clone();
        let core = EpCell::new(id, core);
        let routes = core.routes().clone();
        // Made around the transport's endpoint, so that it can hold the transport's post
        // entry, asked for once the endpoint exists.
        let mut made = Ok(());
        let inner = Arc::new_cyclic(|me: &Weak<EpInner>| {
            made = ia.transport.create_ep(
                id,
                &cfg,
                Arc::new(EpLink {
                    ep: me.clone(),
                    routes,
                }),
            );
            let post_to = match made {
                Ok(()) => ia.transport.ep_post(id).map(crate::direct::PostTo::new),
                Err(_) => None,
            };
            EpInner {
                id,
                ia: ia.clone(),
                core,
                freed: AtomicBool::new(false),
                lend: post_to.as_ref().is_some_and(|p| p.lends()),
                post_to,
            }
        });
        made?;
        take_refs(&inner.core.lock());
        ia.children().eps.insert(id.0, Arc::downgrade(&inner));
        Ok(Ep { inner })
    }

    pub(crate) fn create_in(ia: &Arc<IaInner>, core: EpCore) -> DatResult<Ep> {
        Ep::create(ia, core)
    }

    /// The id events use for this endpoint.
    pub fn id(&self) -> EpId {
        self.inner.id
    }

    /// Current state (the state part of `dat_ep_get_status`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EP` on a freed EP.
    pub fn state(&self) -> DatResult<EpState> {
        self.inner.check()?;
        Ok(self.inner.core.lock().state)
    }

    /// The state and what is outstanding (`dat_ep_get_status`).
    ///
    /// A post counts from the moment it is accepted until its completion is queued on its
    /// EVD (or, suppressed, until the transport reports it done), not until the consumer
    /// dequeues it. A transport notices that suppressed requests finished when something
    /// else brings the news: the peer's next record or acknowledgement (tcp, shm), or the
    /// next signalled work completion of the send queue (verbs posts up to 7 suppressed
    /// requests in a row without a completion of their own). A request posted after them
    /// whose completion the consumer has seen therefore proves them counted out.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EP` on a freed EP.
    pub fn status(&self) -> DatResult<EpStatus> {
        self.inner.check()?;
        let state = self.inner.core.lock().state;
        // The facade's count first, then what the transport holds back: a report made in
        // between is then missed by both (a moment's overcount), never subtracted twice.
        let (recvs, requests) = self.inner.core.routes().outstanding();
        let held_back = self.inner.ia.transport.retired_unreported(self.inner.id);
        let requests = requests.saturating_sub(held_back);
        Ok(EpStatus {
            state,
            recvs,
            requests,
        })
    }

    /// Parameters (`dat_ep_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EP` on a freed EP.
    pub fn query(&self) -> DatResult<EpParam> {
        self.inner.check()?;
        let core = self.inner.core.lock();
        Ok(EpParam {
            state: core.state,
            local_address: self.inner.ia.ia_attr.ia_address,
            local_qual: core.local_qual,
            remote_address: core.remote,
            remote_qual: core.remote_qual,
            config: core.cfg.clone(),
        })
    }

    /// Connects to `qual` on the IA at `remote` (`dat_ep_connect`). The result arrives on the
    /// connect EVD: `ESTABLISHED` (with the acceptor's private data), `PEER_REJECTED`,
    /// `NON_PEER_REJECTED`, `UNREACHABLE` or `TIMED_OUT`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG4` for a zero timeout;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG5` for private data over `max_private_data_size`;
    /// `DAT_MODEL_NOT_SUPPORTED` for a QoS other than best effort or non-default flags;
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_EP_NOTREADY` without a PZ or a connect EVD;
    /// `DAT_INVALID_STATE|<state>` unless the EP is `UNCONNECTED`; transport errors such as
    /// `DAT_INVALID_ADDRESS`.
    pub fn connect(
        &self,
        remote: IaAddress,
        qual: ConnQual,
        timeout: Timeout,
        private_data: &[u8],
        qos: Qos,
        flags: ConnectFlags,
    ) -> DatResult<()> {
        self.inner.check()?;
        if timeout == Timeout::ZERO {
            return Err(DatError::invalid_arg(4));
        }
        self.check_pdata(private_data, 5)?;
        if qos != Qos::BestEffort || flags != ConnectFlags::Default {
            return Err(DatError::new(
                ErrorType::ModelNotSupported,
                Subtype::NoSubtype,
            ));
        }
        {
            let mut core = self.inner.core.lock();
            if core.state == EpState::Unconnected
                && (core.pz.is_none() || core.connect_evd.is_none())
            {
                return Err(DatError::invalid_state(Subtype::StateEpNotReady));
            }
            self.inner.apply_locked(&mut core, Input::Connect)?;
            core.remote = Some(remote);
            core.remote_qual = Some(qual);
        }
        if let Err(e) =
            self.inner
                .ia
                .transport
                .connect(self.inner.id, remote, qual, private_data, timeout)
        {
            let mut core = self.inner.core.lock();
            let _ = self.inner.apply_locked(&mut core, Input::ConnectFailedSync);
            return Err(e);
        }
        Ok(())
    }

    /// Connects to the same remote end as the connected `dup` (`dat_ep_dup_connect`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<dup's state>` unless `dup` is connected;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG3` for a zero timeout; otherwise as
    /// [`Ep::connect`].
    pub fn dup_connect(
        &self,
        dup: &Ep,
        timeout: Timeout,
        private_data: &[u8],
        qos: Qos,
    ) -> DatResult<()> {
        self.inner.check()?;
        dup.inner.check()?;
        if timeout == Timeout::ZERO {
            return Err(DatError::invalid_arg(3));
        }
        let (remote, qual) = {
            let core = dup.inner.core.lock();
            transition(core.state, Input::DupSource).result?;
            match (core.remote, core.remote_qual.or(core.local_qual)) {
                (Some(r), Some(q)) => (r, q),
                _ => return Err(DatError::invalid_state(core.state.invalid_state_subtype())),
            }
        };
        self.connect(
            remote,
            qual,
            timeout,
            private_data,
            qos,
            ConnectFlags::Default,
        )
    }

    /// Disconnects, or aborts a pending connection (`dat_ep_disconnect`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` in `UNCONNECTED`, `RESERVED`,
    /// `PASSIVE_CONNECTION_PENDING` and `TENTATIVE_CONNECTION_PENDING`; see
    /// `dat_core::ep::state` for a graceful disconnect while one is pending.
    pub fn disconnect(&self, flags: CloseFlags) -> DatResult<()> {
        self.inner.check()?;
        let out = self.inner.apply(Input::Disconnect(flags))?;
        self.inner.act(&out, flags)
    }

    /// Returns a disconnected EP to `UNCONNECTED` for reuse (`dat_ep_reset`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` unless `DISCONNECTED` or `UNCONNECTED`.
    pub fn reset(&self) -> DatResult<()> {
        self.inner.check()?;
        let mut core = self.inner.core.lock();
        let from = core.state;
        self.inner.apply_locked(&mut core, Input::Reset)?;
        if from != EpState::Unconnected {
            core.remote = None;
            core.remote_qual = None;
            core.local_qual = None;
            core.cr = None;
            drop(core);
            self.inner.ia.transport.reset_ep(self.inner.id)?;
        }
        Ok(())
    }

    /// Frees the endpoint (`dat_ep_free`); a connected EP is disconnected abruptly first.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` in `RESERVED`, `PASSIVE_CONNECTION_PENDING` and
    /// `TENTATIVE_CONNECTION_PENDING`; `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_EP` if freed.
    pub fn free(&self) -> DatResult<()> {
        self.inner.check()?;
        let out = self.inner.apply(Input::Free)?;
        if out.actions.contains(Actions::TRANSPORT_DISCONNECT_ABRUPT) {
            let _ = self
                .inner
                .ia
                .transport
                .disconnect(self.inner.id, CloseFlags::Abrupt);
        }
        self.inner.destroy();
        Ok(())
    }

    /// Changes the PZ, EVDs or attributes (`dat_ep_modify`). The PZ may change in
    /// `UNCONNECTED` and `TENTATIVE_CONNECTION_PENDING`; EVDs and attributes also in
    /// `RESERVED`.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` in other states; `DAT_INVALID_HANDLE` with subtype `PZ`,
    /// `EVD_RECV`, `EVD_REQUEST` or `EVD_CONN` for freed or unsuitable objects; the attribute
    /// errors of `dat_core::ep::attr::validate_attr`. On error nothing changes.
    pub fn modify(&self, m: &EpModify<'_>) -> DatResult<()> {
        self.inner.check()?;
        if let Some(pz) = m.pz {
            pz.check()?;
        }
        let recv = check_evd(m.recv_evd, EvdFlags::DTO, Subtype::InvalidHandleEvdRecv)?;
        let request = check_evd(
            m.request_evd,
            EvdFlags::DTO,
            Subtype::InvalidHandleEvdRequest,
        )?;
        let connect = check_evd(
            m.connect_evd,
            EvdFlags::CONNECTION,
            Subtype::InvalidHandleEvdConn,
        )?;
        let mut core = self.inner.core.lock();
        let inputs = [
            (m.pz.is_some(), Input::ModifyPz),
            (
                recv.is_some() || request.is_some() || connect.is_some() || m.attr.is_some(),
                Input::ModifyOther,
            ),
        ];
        for (wanted, input) in inputs {
            if wanted {
                transition(core.state, input).result?;
            }
        }
        let mut next = EpCore {
            state: core.state,
            cfg: core.cfg.clone(),
            pz: m.pz.cloned().or_else(|| core.pz.clone()),
            recv_evd: recv.or_else(|| core.recv_evd.clone()),
            request_evd: request.or_else(|| core.request_evd.clone()),
            connect_evd: connect.or_else(|| core.connect_evd.clone()),
            srq: core.srq.clone(),
            remote: core.remote,
            remote_qual: core.remote_qual,
            local_qual: core.local_qual,
            cr: core.cr,
        };
        if let Some(a) = m.attr {
            next.cfg.attr = a.clone();
        }
        validate_attr(
            &next.cfg.attr,
            &limits(&self.inner.ia),
            next.recv_evd.is_some(),
            next.request_evd.is_some(),
            next.srq.is_some(),
        )?;
        next.cfg.pz = next.pz.as_ref().map(|p| p.inner.id);
        next.cfg.recv_evd = next.recv_evd.as_ref().map(Evd::id);
        next.cfg.request_evd = next.request_evd.as_ref().map(Evd::id);
        next.cfg.connect_evd = next.connect_evd.as_ref().map(Evd::id);
        self.inner
            .ia
            .transport
            .modify_ep(self.inner.id, &next.cfg)?;
        take_refs(&next);
        release_refs(&core);
        *core = next;
        Ok(())
    }

    fn check_pdata(&self, pdata: &[u8], arg: u16) -> DatResult<()> {
        if pdata.len() > self.inner.ia.provider_attr.max_private_data_size as usize {
            return Err(DatError::invalid_arg(arg));
        }
        Ok(())
    }
}
