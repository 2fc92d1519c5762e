//! [`post_gate`]: the post path's answer of [`transition`](super::transition) for
//! [`Input::PostRequest`](super::Input::PostRequest) and
//! [`Input::PostRecv`](super::Input::PostRecv), without building an
//! [`Outcome`](super::Outcome). A post never changes the state, posts no event and has one
//! possible action ([`Actions::FLUSH_THIS_POST`](super::Actions::FLUSH_THIS_POST)), so two
//! bits say it all; the test below checks the two agree in every state.

use super::{EpState, POST_UNCONNECTED};
use crate::error::{DatError, DatResult};

/// Where an accepted post goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostGate {
    /// To the transport.
    Transport,
    /// Completed at once as `DAT_DTO_ERR_FLUSHED` (the EP is `DISCONNECTED`, decision 9).
    Flush,
}

/// Decides a post in `state`: `recv` for `dat_ep_post_recv`, else a request (send, RDMA
/// read or write).
///
/// # Errors
/// As [`transition`](super::transition): `DAT_INVALID_STATE |
/// DAT_INVALID_STATE_EP_UNCONNECTED` for a request outside CONNECTED and DISCONNECTED;
/// `DAT_INVALID_STATE | subtype(state)` for a receive on an unconfigured EP.
#[inline]
pub const fn post_gate(state: EpState, recv: bool) -> DatResult<PostGate> {
    if state.is_connected() {
        return Ok(PostGate::Transport);
    }
    if matches!(state, EpState::Disconnected) {
        return Ok(PostGate::Flush);
    }
    if !recv {
        return Err(POST_UNCONNECTED);
    }
    if state.is_unconfigured() {
        return Err(DatError::invalid_state(state.invalid_state_subtype()));
    }
    Ok(PostGate::Transport)
}

#[cfg(test)]
mod tests {
    use super::super::{Actions, Input, transition};
    use super::*;

    #[test]
    fn the_gate_agrees_with_the_state_machine_in_every_state() {
        for &state in &EpState::ALL {
            for (input, recv) in [(Input::PostRequest, false), (Input::PostRecv, true)] {
                let out = transition(state, input);
                assert_eq!(out.next, state, "{state:?} {input:?}");
                assert_eq!(out.event, None, "{state:?} {input:?}");
                assert!(!out.ignored, "{state:?} {input:?}");
                let want = out.result.map(|()| {
                    if out.actions == Actions::FLUSH_THIS_POST {
                        PostGate::Flush
                    } else {
                        assert_eq!(out.actions, Actions::empty(), "{state:?} {input:?}");
                        PostGate::Transport
                    }
                });
                assert_eq!(post_gate(state, recv), want, "{state:?} {input:?}");
            }
        }
    }
}
