//! [`decide`]: the table behind [`transition`](super::transition), one arm per
//! [`Input`], every state listed; the module documentation of `state` gives the numbered
//! decisions the arms cite.

use super::{Actions, BARE_INVALID_STATE, ConnEvent, EpState, Input, Outcome, POST_UNCONNECTED};
use crate::error::DatError;
use crate::types::CloseFlags;

/// The table of [`transition`](super::transition) without decision 26.
pub(super) fn decide(state: EpState, input: Input) -> Outcome {
    use Actions as A;
    use EpState as S;

    let ise = Outcome::refused(
        state,
        DatError::invalid_state(state.invalid_state_subtype()),
    );
    let stay = Outcome::to(state);
    let ignore = Outcome::not_applicable(state);
    let connected = state.is_connected();
    let unconfigured = state.is_unconfigured();
    // Entering DISCONNECTED always posts an event and flushes (decision 8).
    let to_d = |event: ConnEvent, extra: Actions| {
        Outcome::to(S::Disconnected)
            .posting(event)
            .doing(A::FLUSH.union(extra))
    };
    let establishment_failed = |acp_event: ConnEvent, cp_event: ConnEvent| match state {
        S::ActiveConnectionPending => to_d(acp_event, A::CANCEL_TIMER),
        S::CompletionPending => to_d(cp_event, A::empty()),
        _ => ignore,
    };

    match input {
        // ---- connection establishment, active side
        Input::Connect => match state {
            S::Unconnected => Outcome::to(S::ActiveConnectionPending)
                .doing(A::TRANSPORT_CONNECT.union(A::ARM_TIMER)),
            _ => ise,
        },
        Input::DupSource if connected => stay,
        Input::DupSource => ise,

        // ---- teardown (decisions 3-7, 14, 25)
        Input::Disconnect(flags) => match state {
            _ if connected => match flags {
                CloseFlags::Abrupt => Outcome::to(S::DisconnectPending)
                    .doing(A::TRANSPORT_DISCONNECT_ABRUPT.union(A::FLUSH)),
                CloseFlags::Graceful => {
                    Outcome::to(S::DisconnectPending).doing(A::TRANSPORT_DISCONNECT_GRACEFUL)
                }
            },
            S::DisconnectPending => match flags {
                CloseFlags::Abrupt => to_d(ConnEvent::Disconnected, A::TRANSPORT_DISCONNECT_ABRUPT),
                CloseFlags::Graceful => stay,
            },
            S::ActiveConnectionPending => to_d(
                ConnEvent::Disconnected,
                A::TRANSPORT_DISCONNECT_ABRUPT.union(A::CANCEL_TIMER),
            ),
            S::CompletionPending => to_d(ConnEvent::Disconnected, A::TRANSPORT_DISCONNECT_ABRUPT),
            S::Disconnected => stay,
            _ => ise,
        },
        Input::Reset => match state {
            S::Disconnected => Outcome::to(S::Unconnected).doing(A::TRANSPORT_RESET),
            S::Unconnected => stay,
            _ => ise,
        },
        Input::Free => match state {
            S::Unconnected => stay.doing(A::FLUSH.union(A::DESTROY)),
            S::UnconfiguredUnconnected | S::Disconnected => stay.doing(A::DESTROY),
            S::ActiveConnectionPending => stay.doing(
                A::TRANSPORT_DISCONNECT_ABRUPT
                    .union(A::CANCEL_TIMER)
                    .union(A::FLUSH)
                    .union(A::DESTROY),
            ),
            S::CompletionPending | S::DisconnectPending => stay.doing(
                A::TRANSPORT_DISCONNECT_ABRUPT
                    .union(A::FLUSH)
                    .union(A::DESTROY),
            ),
            _ if connected => stay.doing(
                A::TRANSPORT_DISCONNECT_ABRUPT
                    .union(A::FLUSH)
                    .union(A::DESTROY),
            ),
            _ => ise,
        },

        // ---- passive side (decisions 11, 13, 20, 22)
        Input::AcceptWithEp => match state {
            S::Unconnected => Outcome::to(S::CompletionPending).doing(A::TRANSPORT_ACCEPT),
            _ => Outcome::refused(state, BARE_INVALID_STATE),
        },
        Input::AcceptOwnEp => match state {
            S::PassiveConnectionPending | S::TentativeConnectionPending => {
                Outcome::to(S::CompletionPending).doing(A::TRANSPORT_ACCEPT)
            }
            _ => Outcome::refused(state, BARE_INVALID_STATE),
        },
        Input::Reject => match state {
            S::PassiveConnectionPending => Outcome::to(S::Unconnected).doing(A::TRANSPORT_REJECT),
            S::UnconfiguredPassive => {
                Outcome::to(S::UnconfiguredUnconnected).doing(A::TRANSPORT_REJECT)
            }
            S::TentativeConnectionPending | S::UnconfiguredTentative => {
                stay.doing(A::TRANSPORT_REJECT.union(A::DESTROY))
            }
            _ => ise,
        },
        Input::RspCreate => match state {
            S::Unconnected => Outcome::to(S::Reserved),
            S::UnconfiguredUnconnected => Outcome::to(S::UnconfiguredReserved),
            _ => ise,
        },
        Input::RspFree => match state {
            S::Reserved => Outcome::to(S::Unconnected).doing(A::RELEASE_RESERVATION),
            S::UnconfiguredReserved => {
                Outcome::to(S::UnconfiguredUnconnected).doing(A::RELEASE_RESERVATION)
            }
            _ => ignore,
        },
        Input::CrArrived => match state {
            S::Reserved => Outcome::to(S::PassiveConnectionPending),
            S::UnconfiguredReserved => Outcome::to(S::UnconfiguredPassive),
            _ => ignore,
        },
        Input::Configured if unconfigured => Outcome::to(state.configured()),
        Input::Configured => ignore,

        // ---- modify and query (decision 21)
        Input::ModifyPz => match state {
            S::Unconnected | S::TentativeConnectionPending => stay,
            _ if unconfigured => stay,
            _ => ise,
        },
        Input::ModifyOther => match state {
            S::Unconnected | S::Reserved | S::TentativeConnectionPending => stay,
            _ if unconfigured => stay,
            _ => ise,
        },
        Input::Query => stay,

        // ---- data transfer (decisions 9, 10)
        Input::PostRequest if connected => stay,
        Input::PostRequest => match state {
            S::Disconnected => stay.doing(A::FLUSH_THIS_POST),
            _ => Outcome::refused(state, POST_UNCONNECTED),
        },
        Input::PostRecv if unconfigured => ise,
        Input::PostRecv => match state {
            S::Disconnected => stay.doing(A::FLUSH_THIS_POST),
            _ => stay,
        },
        Input::RmrBind if connected => stay,
        Input::RmrBind => match state {
            S::Disconnected => stay.doing(A::FLUSH_THIS_POST),
            _ => ise,
        },

        // ---- transport facts (decisions 1, 2, 12, 15-19)
        Input::Established => match state {
            S::ActiveConnectionPending => Outcome::to(S::Connected)
                .posting(ConnEvent::Established)
                .doing(A::CANCEL_TIMER),
            S::CompletionPending => Outcome::to(S::Connected).posting(ConnEvent::Established),
            _ => ignore,
        },
        Input::PeerRejected => match state {
            S::ActiveConnectionPending => to_d(ConnEvent::PeerRejected, A::CANCEL_TIMER),
            _ => ignore,
        },
        Input::NonPeerRejected => {
            establishment_failed(ConnEvent::NonPeerRejected, ConnEvent::NonPeerRejected)
        }
        Input::Unreachable => establishment_failed(ConnEvent::Unreachable, ConnEvent::Unreachable),
        Input::TimedOut => match state {
            S::ActiveConnectionPending => to_d(
                ConnEvent::TimedOut,
                A::CANCEL_TIMER.union(A::TRANSPORT_DISCONNECT_ABRUPT),
            ),
            _ => ignore,
        },
        Input::AcceptCompletionError => match state {
            S::CompletionPending => to_d(ConnEvent::AcceptCompletionError, A::empty()),
            _ => ignore,
        },
        Input::Disconnected => match state {
            _ if connected => to_d(ConnEvent::Disconnected, A::empty()),
            S::DisconnectPending => to_d(ConnEvent::Disconnected, A::empty()),
            _ => establishment_failed(ConnEvent::NonPeerRejected, ConnEvent::AcceptCompletionError),
        },
        Input::Broken => match state {
            _ if connected => to_d(ConnEvent::Broken, A::ASYNC_EP_BROKEN),
            S::DisconnectPending => to_d(ConnEvent::Broken, A::ASYNC_EP_BROKEN),
            _ => establishment_failed(ConnEvent::NonPeerRejected, ConnEvent::AcceptCompletionError),
        },

        // ---- synchronous transport refusals: undo (module docs, "Using the outcome")
        Input::ConnectFailedSync => match state {
            S::ActiveConnectionPending => Outcome::to(S::Unconnected).doing(A::CANCEL_TIMER),
            S::CompletionPending => Outcome::to(S::Unconnected),
            _ => ignore,
        },
        Input::RspAcceptFailedSync => match state {
            S::CompletionPending => Outcome::to(S::PassiveConnectionPending),
            _ => ignore,
        },
        Input::ProviderAcceptFailedSync => match state {
            S::CompletionPending => Outcome::to(S::TentativeConnectionPending),
            _ => ignore,
        },
    }
}
