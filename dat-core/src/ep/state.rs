//! The endpoint state machine: one pure transition function shared by every provider.
//!
//! Providers report *facts* (a connection was established, the peer rejected, the transport
//! broke); the facade reports the consumer's *calls*. [`transition`] decides, for the current
//! [`EpState`] and one [`Input`], the new state, the connection event to post, the transport
//! [`Actions`] to take and the `DAT_RETURN` of the call. It has no side effects, so every
//! provider gets identical DAT semantics and the whole machine is tested as a table
//! (`state/tests.rs`: every state × every input).
//!
//! Return codes follow the allowed-call matrix of reference 3.4 (OFA 2.1.10): a refused call
//! returns `DAT_INVALID_STATE | subtype(state)` ([`EpState::invalid_state_subtype`]), except
//! `dat_cr_accept` (bare `DAT_INVALID_STATE`, `0x0007_0000`) and request posts (always
//! `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED`). A refusal never changes anything:
//! `next == state`, no event, no actions.
//!
//! # Using the outcome
//!
//! The intended pattern is *stage, act, commit*: call [`transition`], perform the transport
//! actions, and store [`Outcome::next`] only if the transport did not refuse synchronously. A
//! facade that commits first undoes with [`Input::ConnectFailedSync`],
//! [`Input::RspAcceptFailedSync`] or [`Input::ProviderAcceptFailedSync`].
//! When [`Actions::DESTROY`] is set the endpoint is gone; `next` is then the state it was
//! destroyed in and means nothing. Facts that do not apply in the current state come back with
//! [`Outcome::ignored`] set and change nothing (for example `ESTABLISHED` after the consumer
//! aborted the connect).
//!
//! # Decisions (spec vs OFA, reference 3.2 and 3.5)
//!
//! 1. **UNDISCONNECTED is DISCONNECTED** (3.5 item 1): PEER_REJECTED, NON_PEER_REJECTED and
//!    TIMED_OUT in ACTIVE_CONNECTION_PENDING go to DISCONNECTED; `dat_ep_reset` then gives
//!    UNCONNECTED.
//! 2. **Unreachable** (3.5 item 7, 2.4): spec, not OFA. The facade applies `Connect` (U→ACP)
//!    and the provider then reports [`Input::Unreachable`], even when it learns it
//!    synchronously: the call returns `DAT_SUCCESS`, an `UNREACHABLE` event is posted and the
//!    EP is DISCONNECTED (OFA leaves it UNCONNECTED). `Unreachable` in U is ignored.
//! 3. **Graceful disconnect in DISCONNECT_PENDING** (3.5 item 2): spec, no-op `DAT_SUCCESS`.
//!    The seed says it "has no effect"; OFA's `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2` would
//!    claim the flag argument is invalid, which it is not, and no test program depends on it.
//!    It also makes teardown idempotent, like disconnect in DISCONNECTED.
//! 4. **Abrupt disconnect in DISCONNECT_PENDING** (seed): DISCONNECTED at once, without
//!    waiting; the `DISCONNECTED` event is posted now, outstanding DTOs are flushed and the
//!    transport is closed abruptly. The transport's later `Disconnected` fact is ignored.
//! 5. **Disconnect in ACP/CP** (3.5 item 3): either flag aborts the establishment: DISCONNECTED
//!    at once with a `DISCONNECTED` event posted synchronously (OFA), pre-posted receives
//!    flushed (seed), transport aborted abruptly, connect timer cancelled (ACP).
//! 6. **Disconnect in DISCONNECTED** is a no-op `DAT_SUCCESS` (seed and OFA).
//! 7. **Disconnect in CONNECTED** goes to DISCONNECT_PENDING (3.4); the `DISCONNECTED` event
//!    comes with the transport's `Disconnected` fact. Abrupt flushes outstanding DTOs at once
//!    (seed: "completed unsuccessfully"); graceful does not (they "must try to be completed
//!    successfully first"); the flush then happens on entering DISCONNECTED.
//! 8. **Every entry into DISCONNECTED flushes** ([`Actions::FLUSH`]) and posts an event, so in
//!    DISCONNECTED nothing is outstanding; posts made there complete at once as flushed.
//! 9. **Request posts** (send, RDMA read/write) outside CONNECTED and DISCONNECTED return
//!    `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED` whatever the state (OFA, 3.4);
//!    in DISCONNECTED they succeed and are flushed. **Receive posts** succeed in every
//!    configured state (flushed in DISCONNECTED). Receives on an SRQ endpoint
//!    (`DAT_INVALID_STATE | DAT_INVALID_STATE_SRQ_IN_USE`) are the facade's check, not a state.
//! 10. **`dat_rmr_bind` in DISCONNECTED**: spec (accepted and flushed like any request), not
//!     OFA's ISE, so every request-queue operation behaves the same after a disconnect.
//!     In DISCONNECT_PENDING binds are refused (seed: no new binds while pending).
//! 11. **`dat_cr_accept` with the EP in a wrong state** returns the bare `DAT_INVALID_STATE`
//!     (`0x0007_0000`) as OFA does (3.4); both accept forms.
//! 12. **Accept failures**: `ACCEPT_COMPLETION_ERROR` always leads to DISCONNECTED (spec); OFA
//!     stays in COMPLETION_PENDING when the CR vanished during the accept.
//! 13. **`dat_cr_reject` on a provider-created (TENTATIVE) EP destroys it** (OFA frees it; the
//!     spec's "back to Provider control" has no other use for it). On an RSP's EP it returns
//!     to UNCONNECTED.
//! 14. **`dat_ep_free`**: refused in RESERVED, PASSIVE and TENTATIVE pending (3.4). Elsewhere
//!     it destroys; with a connection established or being established (ACP, CP, C, DP) it
//!     first disconnects abruptly and flushes, in UNCONNECTED it flushes pre-posted receives.
//!     No connection event is posted (the EP and its handle are gone).
//! 15. **Transport failure during establishment**: `Disconnected` or `Broken` in ACP becomes
//!     `NON_PEER_REJECTED` (seed: "Transport errors"), in CP `ACCEPT_COMPLETION_ERROR`; both
//!     go to DISCONNECTED, so an EP can never be stuck pending.
//! 16. **NON_PEER_REJECTED and UNREACHABLE in CP** (3.3 "or CP") go to DISCONNECTED posting
//!     the same event. PEER_REJECTED and TIMED_OUT apply to ACP only (ignored elsewhere).
//! 17. **BROKEN** in C/DP posts the `BROKEN` connection event and also asks for
//!     `DAT_ASYNC_ERROR_EP_BROKEN` on the async EVD ([`Actions::ASYNC_EP_BROKEN`]): OFA raises
//!     it for fatal QP errors, which is what a provider's `Broken` fact is, and consumers that
//!     watch only the async EVD (MPI libraries) learn of the failure.
//! 18. **Connect timer**: `Connect` asks to arm it ([`Actions::ARM_TIMER`], when the timeout is
//!     finite); every way out of ACP cancels it. `TimedOut` also aborts the transport attempt.
//! 19. **`ESTABLISHED` in any state but ACP/CP is ignored** (OFA: the consumer aborted). If the
//!     event cannot be posted (EVD full) the facade reports `Broken` afterwards.
//! 20. **`dat_rsp_free`** returns a RESERVED EP to UNCONNECTED; in any other state the EP is
//!     no longer reserved and the input is ignored.
//! 21. **`dat_ep_modify`**: PZ in U and TCP, EVDs/attributes in U, R and TCP (3.4); refused in
//!     PCP (OFA) and in every connection state.
//! 22. **Unconfigured states** (1, 3, 5, 8; OFA never uses them): our providers always create
//!     UNCONNECTED (defaults fill every attribute), so they only arise if a facade chooses to
//!     use them. They permit what the seed of `dat_ep_create` allows before configuration
//!     (query, get_status, modify, free) plus the passive path they exist for: RSP
//!     create/free, CR arrival, reject; [`Input::Configured`] (the facade's fact that modify
//!     completed the attributes) moves uU→U, uR→R, uP→PCP, uT→TCP. Free is refused in uR, uP
//!     and uT like in their configured twins. Everything else is refused with the matching
//!     `DAT_INVALID_STATE_EP_UNCONF*` subtype (request posts with UNC as decision 9 says, and
//!     accept with the bare code of decision 11).
//! 23. **HA states** (13, 14) behave exactly like CONNECTED, including the
//!     `DAT_INVALID_STATE_EP_CONNECTED` subtype, and stay themselves when the state is kept.
//!     Nothing enters them (no multipath support).
//! 24. **Subtypes**: U→47, R→53, PCP→49, ACP→48, TCP→50, C→51, DP→55, D→52, CP→54 (OFA);
//!     unlike OFA (which gives 0) the unconfigured states use the header's dedicated subtypes
//!     uU→63, uR→64, uP→65, uT→66 and the HA states use 51 (decision 23).
//! 25. **`dat_ep_reset`** in DISCONNECTED re-initialises the transport
//!     ([`Actions::TRANSPORT_RESET`]) and returns to UNCONNECTED; in UNCONNECTED it is a no-op
//!     keeping pre-posted receives; elsewhere ISE.
//! 26. **An EP attached to an SRQ that leaves a connection** (C, DP, C1 or Cn into
//!     DISCONNECTED: `Disconnected`, `Broken`, abrupt disconnect while pending) also gets
//!     `DAT_ASYNC_ERROR_EP_BROKEN` (reason `DAT_EP_TRANSFER_TO_ERROR`) on the async EVD,
//!     after its connection event ([`Actions::SRQ_LAST_WQE`], resolved by
//!     [`Outcome::posts_async_ep_broken`]): the EP takes no SRQ buffer any more, so the
//!     consumer may free it. The DISCONNECTED event alone does not say so for an SRQ EP,
//!     whose receives stay on the SRQ instead of being flushed. This is InfiniBand's
//!     `IBV_EVENT_QP_LAST_WQE_REACHED`, which OFA 2.1.10 maps to `DAT_ASYNC_ERROR_EP_BROKEN`
//!     with the EP as `dat_handle`, and what `dtestsrq` waits for after every disconnect.
//!     The header has no SRQ-specific EP event number (`DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT`
//!     is a watermark *reason*), so we use OFA's. One event per exit: a `Broken` SRQ EP gets
//!     it once (decision 17). None for connections never established (ACP, CP: nothing was
//!     consumed) nor on `dat_ep_free` (no handle left to report). A receive the transport
//!     was filling when a connection broke is flushed after the fact (upcall rules of
//!     `crate::provider`), so its completion may follow this event.
//! 27. **SRQ low watermark** (`dat_srq_set_lw`; OFA: `DAT_NOT_IMPLEMENTED`): spec and
//!     InfiniBand semantics, the rule in `crate::srq`. `DAT_SRQ_LOW_WATERMARK_EVENT` fires once
//!     on the async EVD (the SRQ as `dat_handle`, reason 2) when fewer buffers than the
//!     watermark remain posted and untaken, including at once when `dat_srq_set_lw` finds the
//!     queue already below; it is then disarmed until the next `dat_srq_set_lw`; 0 never
//!     fires. The event number is `DAT_ASYNC_ERROR_EP_BROKEN`, OFA's number for affiliated
//!     events (decision 26), since the header has none for it. On verbs the device counts
//!     (`IBV_SRQ_LIMIT`), and decides when a limit already undercut fires.

use std::fmt;

use bitflags::bitflags;

use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::types::{CloseFlags, EventNumber};

/// `DAT_EP_STATE`: the state of an endpoint. The numeric values are ABI (`dat2/dat.h`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EpState {
    /// `DAT_EP_STATE_UNCONNECTED` (U): quiescent; where `dat_ep_create` puts a new EP.
    #[default]
    Unconnected = 0,
    /// `DAT_EP_STATE_UNCONFIGURED_UNCONNECTED` (uU): DAT 2.0, attributes still missing.
    UnconfiguredUnconnected = 1,
    /// `DAT_EP_STATE_RESERVED` (R): bound to an RSP, waiting for its connection request.
    Reserved = 2,
    /// `DAT_EP_STATE_UNCONFIGURED_RESERVED` (uR).
    UnconfiguredReserved = 3,
    /// `DAT_EP_STATE_PASSIVE_CONNECTION_PENDING` (PCP): the RSP's request arrived.
    PassiveConnectionPending = 4,
    /// `DAT_EP_STATE_UNCONFIGURED_PASSIVE` (uP).
    UnconfiguredPassive = 5,
    /// `DAT_EP_STATE_ACTIVE_CONNECTION_PENDING` (ACP): `dat_ep_connect` issued.
    ActiveConnectionPending = 6,
    /// `DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING` (TCP): provider-created EP awaiting accept.
    TentativeConnectionPending = 7,
    /// `DAT_EP_STATE_UNCONFIGURED_TENTATIVE` (uT).
    UnconfiguredTentative = 8,
    /// `DAT_EP_STATE_CONNECTED` (C): data transfer.
    Connected = 9,
    /// `DAT_EP_STATE_DISCONNECT_PENDING` (DP): disconnect in progress.
    DisconnectPending = 10,
    /// `DAT_EP_STATE_DISCONNECTED` (D), alias `DAT_EP_STATE_ERROR`: connection gone.
    Disconnected = 11,
    /// `DAT_EP_STATE_COMPLETION_PENDING` (CP): passive side accepted, transport completing.
    CompletionPending = 12,
    /// `DAT_EP_STATE_CONNECTED_SINGLE_PATH` (C1): DAT 2.0 HA.
    ConnectedSinglePath = 13,
    /// `DAT_EP_STATE_CONNECTED_MULTI_PATH` (Cn): DAT 2.0 HA.
    ConnectedMultiPath = 14,
}

impl EpState {
    /// Every state, in ABI order (`ALL[v]` has value `v`).
    pub const ALL: [EpState; 15] = [
        EpState::Unconnected,
        EpState::UnconfiguredUnconnected,
        EpState::Reserved,
        EpState::UnconfiguredReserved,
        EpState::PassiveConnectionPending,
        EpState::UnconfiguredPassive,
        EpState::ActiveConnectionPending,
        EpState::TentativeConnectionPending,
        EpState::UnconfiguredTentative,
        EpState::Connected,
        EpState::DisconnectPending,
        EpState::Disconnected,
        EpState::CompletionPending,
        EpState::ConnectedSinglePath,
        EpState::ConnectedMultiPath,
    ];

    /// Decodes a raw `DAT_EP_STATE`; `None` for values the header does not define.
    pub const fn from_raw(v: u32) -> Option<EpState> {
        if v < EpState::ALL.len() as u32 {
            Some(EpState::ALL[v as usize])
        } else {
            None
        }
    }

    /// The raw `DAT_EP_STATE` value.
    pub const fn raw(self) -> u32 {
        self as u32
    }

    /// The header name, for diagnostics.
    pub const fn dat_name(self) -> &'static str {
        match self {
            EpState::Unconnected => "DAT_EP_STATE_UNCONNECTED",
            EpState::UnconfiguredUnconnected => "DAT_EP_STATE_UNCONFIGURED_UNCONNECTED",
            EpState::Reserved => "DAT_EP_STATE_RESERVED",
            EpState::UnconfiguredReserved => "DAT_EP_STATE_UNCONFIGURED_RESERVED",
            EpState::PassiveConnectionPending => "DAT_EP_STATE_PASSIVE_CONNECTION_PENDING",
            EpState::UnconfiguredPassive => "DAT_EP_STATE_UNCONFIGURED_PASSIVE",
            EpState::ActiveConnectionPending => "DAT_EP_STATE_ACTIVE_CONNECTION_PENDING",
            EpState::TentativeConnectionPending => "DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING",
            EpState::UnconfiguredTentative => "DAT_EP_STATE_UNCONFIGURED_TENTATIVE",
            EpState::Connected => "DAT_EP_STATE_CONNECTED",
            EpState::DisconnectPending => "DAT_EP_STATE_DISCONNECT_PENDING",
            EpState::Disconnected => "DAT_EP_STATE_DISCONNECTED",
            EpState::CompletionPending => "DAT_EP_STATE_COMPLETION_PENDING",
            EpState::ConnectedSinglePath => "DAT_EP_STATE_CONNECTED_SINGLE_PATH",
            EpState::ConnectedMultiPath => "DAT_EP_STATE_CONNECTED_MULTI_PATH",
        }
    }

    /// The `DAT_INVALID_STATE` subtype that names this state in a refusal (decision 24).
    pub const fn invalid_state_subtype(self) -> Subtype {
        match self {
            EpState::Unconnected => Subtype::StateEpUnconnected,
            EpState::UnconfiguredUnconnected => Subtype::StateEpUnconfigured,
            EpState::Reserved => Subtype::StateEpReserved,
            EpState::UnconfiguredReserved => Subtype::StateEpUnconfReserved,
            EpState::PassiveConnectionPending => Subtype::StateEpPassConnPending,
            EpState::UnconfiguredPassive => Subtype::StateEpUnconfPassive,
            EpState::ActiveConnectionPending => Subtype::StateEpActConnPending,
            EpState::TentativeConnectionPending => Subtype::StateEpTentConnPending,
            EpState::UnconfiguredTentative => Subtype::StateEpUnconfTentative,
            EpState::Connected | EpState::ConnectedSinglePath | EpState::ConnectedMultiPath => {
                Subtype::StateEpConnected
            }
            EpState::DisconnectPending => Subtype::StateEpDiscPending,
            EpState::Disconnected => Subtype::StateEpDisconnected,
            EpState::CompletionPending => Subtype::StateEpComplPending,
        }
    }

    /// True for CONNECTED and the two HA connected states: data may flow.
    pub const fn is_connected(self) -> bool {
        matches!(
            self,
            EpState::Connected | EpState::ConnectedSinglePath | EpState::ConnectedMultiPath
        )
    }

    /// True for the four DAT 2.0 unconfigured states (1, 3, 5, 8).
    pub const fn is_unconfigured(self) -> bool {
        matches!(
            self,
            EpState::UnconfiguredUnconnected
                | EpState::UnconfiguredReserved
                | EpState::UnconfiguredPassive
                | EpState::UnconfiguredTentative
        )
    }

    /// The configured twin of an unconfigured state (uU→U, uR→R, uP→PCP, uT→TCP); any other
    /// state is returned unchanged.
    pub const fn configured(self) -> EpState {
        match self {
            EpState::UnconfiguredUnconnected => EpState::Unconnected,
            EpState::UnconfiguredReserved => EpState::Reserved,
            EpState::UnconfiguredPassive => EpState::PassiveConnectionPending,
            EpState::UnconfiguredTentative => EpState::TentativeConnectionPending,
            other => other,
        }
    }
}

impl fmt::Display for EpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.dat_name())
    }
}

/// One thing that happens to an endpoint: a consumer call or a fact reported by a provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Input {
    /// `dat_ep_connect`, and `dat_ep_dup_connect` applied to the EP being connected.
    Connect,
    /// `dat_ep_dup_connect` applied to the *dup* EP: it must be connected and stays as it is.
    DupSource,
    /// `dat_ep_disconnect` with its flags.
    Disconnect(CloseFlags),
    /// `dat_ep_reset`.
    Reset,
    /// `dat_ep_free`.
    Free,
    /// `dat_cr_accept(cr, ep)` with a consumer-supplied EP (PSP with the consumer flag).
    AcceptWithEp,
    /// `dat_cr_accept(cr, NULL)` on the CR's own EP (RSP's EP in PCP, provider EP in TCP).
    AcceptOwnEp,
    /// `dat_cr_reject` on the CR's own EP.
    Reject,
    /// `dat_ep_modify` changing the PZ.
    ModifyPz,
    /// `dat_ep_modify` changing EVDs or attributes (not the PZ).
    ModifyOther,
    /// `dat_rsp_create` naming this EP.
    RspCreate,
    /// `dat_rsp_free` of the RSP that reserved this EP.
    RspFree,
    /// `dat_ep_post_send`, `dat_ep_post_rdma_read` or `dat_ep_post_rdma_write`.
    PostRequest,
    /// `dat_ep_post_recv`.
    PostRecv,
    /// `dat_rmr_bind` on this EP.
    RmrBind,
    /// `dat_ep_query` or `dat_ep_get_status`.
    Query,
    /// Facade fact: a `dat_ep_modify` completed the attributes of an unconfigured EP.
    Configured,
    /// Transport fact: the connection request for the RSP this EP is reserved on arrived.
    CrArrived,
    /// Transport fact: the connection is established (active or passive side).
    Established,
    /// Transport fact: the remote consumer rejected the connect.
    PeerRejected,
    /// Transport fact: the connect failed for another reason (no listener, backlog, QoS).
    NonPeerRejected,
    /// Transport fact: the remote host could not be reached.
    Unreachable,
    /// Timer fact: the consumer's connect timeout expired.
    TimedOut,
    /// Transport fact: the passive side's accept could not complete.
    AcceptCompletionError,
    /// Transport fact: the connection was closed (locally requested or by the peer).
    Disconnected,
    /// Transport fact: the connection failed (transport error, DTO error, failed bind).
    Broken,
    /// Transport fact: the transport refused a connect, or an accept with a consumer EP,
    /// synchronously. Undoes `Connect` (ACP→U) or `AcceptWithEp` (CP→U).
    ConnectFailedSync,
    /// Transport fact: the transport refused an accept of an RSP's EP synchronously (CP→PCP).
    RspAcceptFailedSync,
    /// Transport fact: the transport refused an accept of a provider-created EP synchronously
    /// (CP→TCP).
    ProviderAcceptFailedSync,
}

impl Input {
    /// Every input (both disconnect flags), for table tests.
    pub const ALL: &'static [Input] = &[
        Input::Connect,
        Input::DupSource,
        Input::Disconnect(CloseFlags::Abrupt),
        Input::Disconnect(CloseFlags::Graceful),
        Input::Reset,
        Input::Free,
        Input::AcceptWithEp,
        Input::AcceptOwnEp,
        Input::Reject,
        Input::ModifyPz,
        Input::ModifyOther,
        Input::RspCreate,
        Input::RspFree,
        Input::PostRequest,
        Input::PostRecv,
        Input::RmrBind,
        Input::Query,
        Input::Configured,
        Input::CrArrived,
        Input::Established,
        Input::PeerRejected,
        Input::NonPeerRejected,
        Input::Unreachable,
        Input::TimedOut,
        Input::AcceptCompletionError,
        Input::Disconnected,
        Input::Broken,
        Input::ConnectFailedSync,
        Input::RspAcceptFailedSync,
        Input::ProviderAcceptFailedSync,
    ];

    /// True for facts (reported by a provider, timer or the facade itself) as opposed to
    /// consumer calls. Facts are never refused: where they do not apply they are ignored.
    pub const fn is_fact(self) -> bool {
        matches!(
            self,
            Input::Configured
                | Input::CrArrived
                | Input::Established
                | Input::PeerRejected
                | Input::NonPeerRejected
                | Input::Unreachable
                | Input::TimedOut
                | Input::AcceptCompletionError
                | Input::Disconnected
                | Input::Broken
                | Input::ConnectFailedSync
                | Input::RspAcceptFailedSync
                | Input::ProviderAcceptFailedSync
        )
    }
}

/// A connection event to post on the EP's connect EVD.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConnEvent {
    /// `DAT_CONNECTION_EVENT_ESTABLISHED`.
    Established,
    /// `DAT_CONNECTION_EVENT_PEER_REJECTED`.
    PeerRejected,
    /// `DAT_CONNECTION_EVENT_NON_PEER_REJECTED`.
    NonPeerRejected,
    /// `DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR`.
    AcceptCompletionError,
    /// `DAT_CONNECTION_EVENT_DISCONNECTED`.
    Disconnected,
    /// `DAT_CONNECTION_EVENT_BROKEN`.
    Broken,
    /// `DAT_CONNECTION_EVENT_TIMED_OUT`.
    TimedOut,
    /// `DAT_CONNECTION_EVENT_UNREACHABLE`.
    Unreachable,
}

impl ConnEvent {
    /// The `DAT_EVENT_NUMBER` of the event.
    pub const fn number(self) -> EventNumber {
        match self {
            ConnEvent::Established => EventNumber::Established,
            ConnEvent::PeerRejected => EventNumber::PeerRejected,
            ConnEvent::NonPeerRejected => EventNumber::NonPeerRejected,
            ConnEvent::AcceptCompletionError => EventNumber::AcceptCompletionError,
            ConnEvent::Disconnected => EventNumber::Disconnected,
            ConnEvent::Broken => EventNumber::Broken,
            ConnEvent::TimedOut => EventNumber::TimedOut,
            ConnEvent::Unreachable => EventNumber::Unreachable,
        }
    }
}

bitflags! {
    /// What the facade and provider must do as a result of a transition, in the order listed
    /// (cancel timers and flush before destroying).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Actions: u32 {
        /// Start the transport connect to the remote address and qualifier.
        const TRANSPORT_CONNECT = 1 << 0;
        /// Arm the connect timer (only if the consumer's timeout is not infinite).
        const ARM_TIMER = 1 << 1;
        /// Cancel the connect timer.
        const CANCEL_TIMER = 1 << 2;
        /// Send the transport accept for the pending connection request.
        const TRANSPORT_ACCEPT = 1 << 3;
        /// Send the transport reject for the pending connection request.
        const TRANSPORT_REJECT = 1 << 4;
        /// Start a graceful transport disconnect (outstanding requests complete first).
        const TRANSPORT_DISCONNECT_GRACEFUL = 1 << 5;
        /// Close or abort the transport connection (or connection attempt) at once.
        const TRANSPORT_DISCONNECT_ABRUPT = 1 << 6;
        /// Complete every outstanding DTO and RMR bind with `DAT_DTO_ERR_FLUSHED`, in order
        /// per queue.
        const FLUSH = 1 << 7;
        /// Accept the post being made and complete it at once with `DAT_DTO_ERR_FLUSHED`.
        const FLUSH_THIS_POST = 1 << 8;
        /// Post `DAT_ASYNC_ERROR_EP_BROKEN` on the IA's async EVD (decision 17).
        const ASYNC_EP_BROKEN = 1 << 9;
        /// Unbind the EP from its RSP.
        const RELEASE_RESERVATION = 1 << 10;
        /// Re-initialise the transport resources so the EP can connect again.
        const TRANSPORT_RESET = 1 << 11;
        /// Free the EP and its transport resources; the handle becomes invalid.
        const DESTROY = 1 << 12;
        /// The EP left a connection for DISCONNECTED: if it is attached to an SRQ, post
        /// `DAT_ASYNC_ERROR_EP_BROKEN` on the async EVD (decision 26;
        /// [`Outcome::posts_async_ep_broken`] decides).
        const SRQ_LAST_WQE = 1 << 13;
    }
}

/// The result of one [`transition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What the consumer call returns (`Ok` for facts).
    pub result: DatResult<()>,
    /// The state after the input (`== state` on refusal, when ignored and on destroy).
    pub next: EpState,
    /// The connection event to post on the connect EVD, if any.
    pub event: Option<ConnEvent>,
    /// The side effects to perform.
    pub actions: Actions,
    /// True when a fact does not apply in this state: nothing changes.
    pub ignored: bool,
}

impl Outcome {
    /// True if the call was refused (then nothing changes).
    pub const fn is_refused(&self) -> bool {
        self.result.is_err()
    }

    /// True if the EP is destroyed by this transition.
    pub const fn destroys(&self) -> bool {
        self.actions.contains(Actions::DESTROY)
    }

    /// True if `DAT_ASYNC_ERROR_EP_BROKEN` must be posted for the EP on the IA's async EVD,
    /// after the connection event: a broken connection (decision 17), or an EP attached to
    /// an SRQ leaving its connection (`srq_attached`, decision 26). At most one event per
    /// transition.
    pub const fn posts_async_ep_broken(&self, srq_attached: bool) -> bool {
        self.actions.contains(Actions::ASYNC_EP_BROKEN)
            || (srq_attached && self.actions.contains(Actions::SRQ_LAST_WQE))
    }

    const fn to(next: EpState) -> Outcome {
        Outcome {
            result: Ok(()),
            next,
            event: None,
            actions: Actions::empty(),
            ignored: false,
        }
    }

    const fn refused(state: EpState, error: DatError) -> Outcome {
        Outcome {
            result: Err(error),
            next: state,
            event: None,
            actions: Actions::empty(),
            ignored: false,
        }
    }

    const fn not_applicable(state: EpState) -> Outcome {
        Outcome {
            result: Ok(()),
            next: state,
            event: None,
            actions: Actions::empty(),
            ignored: true,
        }
    }

    const fn doing(mut self, actions: Actions) -> Outcome {
        self.actions = actions;
        self
    }

    const fn posting(mut self, event: ConnEvent) -> Outcome {
        self.event = Some(event);
        self
    }
}

/// The bare `DAT_INVALID_STATE` (`0x0007_0000`) that `dat_cr_accept` returns (decision 11).
pub const BARE_INVALID_STATE: DatError =
    DatError::bare(ErrorType::InvalidState, Subtype::NoSubtype);

/// `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED`, returned by request posts in any
/// state but CONNECTED and DISCONNECTED (decision 9).
pub const POST_UNCONNECTED: DatError = DatError::invalid_state(Subtype::StateEpUnconnected);

/// Decides what `input` does to an endpoint in `state`; total over every state and input.
///
/// See the module documentation for the table of decisions.
///
/// # Errors
/// In [`Outcome::result`]: `DAT_INVALID_STATE | subtype(state)` for calls the state does not
/// allow; bare `DAT_INVALID_STATE` for `dat_cr_accept` with the EP in a wrong state;
/// `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED` for request posts outside
/// CONNECTED/DISCONNECTED. Facts never fail.
pub fn transition(state: EpState, input: Input) -> Outcome {
    let mut out = decide(state, input);
    // Decision 26: every way from a connection into DISCONNECTED.
    let was_connected = state.is_connected() || matches!(state, EpState::DisconnectPending);
    if was_connected && out.next == EpState::Disconnected && !out.ignored && out.result.is_ok() {
        out.actions = out.actions.union(Actions::SRQ_LAST_WQE);
    }
    out
}

mod decide;
use decide::decide;

mod post;
pub use post::{PostGate, post_gate};

#[cfg(test)]
mod tests;
