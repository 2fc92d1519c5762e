//! Table test of the endpoint state machine: every state × every input against an explicit
//! expected table, plus invariants and one assertion per behaviour sentence of the seeds.

use super::*;
use crate::types::CloseFlags::{Abrupt, Graceful};

use EpState::*;

/// Column order of [`TABLE`]: the states by ABI value.
const COLS: [EpState; 15] = [
    Unconnected,
    UnconfiguredUnconnected,
    Reserved,
    UnconfiguredReserved,
    PassiveConnectionPending,
    UnconfiguredPassive,
    ActiveConnectionPending,
    TentativeConnectionPending,
    UnconfiguredTentative,
    Connected,
    DisconnectPending,
    Disconnected,
    CompletionPending,
    ConnectedSinglePath,
    ConnectedMultiPath,
];

/// The subtype every ISE cell expects, written out independently of the code under test.
const SUB: [u16; 15] = [47, 63, 53, 64, 49, 65, 48, 50, 66, 51, 55, 52, 54, 51, 51];

/// Expected outcomes. Cell syntax:
/// * `ISE` refused, `DAT_INVALID_STATE | SUB[col]`; `BISE` refused, bare `0x00070000`;
///   `UNC` refused, `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED`;
/// * `~` ignored fact (`Ok`, state kept, nothing done);
/// * `=` success keeping the state, or `>ST` success moving to state `ST`; then optionally
///   `!ev` (connection event) and `+letters` (actions):
///   c connect, t arm timer, x cancel timer, a accept, r reject, g graceful disconnect,
///   b abrupt disconnect, f flush, p flush this post, e async EP_BROKEN, s async EP_BROKEN
///   if attached to an SRQ, z release reservation, R transport reset, X destroy.
#[rustfmt::skip]
const TABLE: &[(Input, [&str; 15])] = &[
    //                                U        uU     R        uR        PCP       uP       ACP           TCP      uT       C            DP           D          CP           C1           Cn
    (Input::Connect,               [">ACP+ct","ISE", "ISE",   "ISE",    "ISE",    "ISE",   "ISE",        "ISE",   "ISE",   "ISE",       "ISE",       "ISE",     "ISE",       "ISE",       "ISE"]),
    (Input::DupSource,             ["ISE",   "ISE",  "ISE",   "ISE",    "ISE",    "ISE",   "ISE",        "ISE",   "ISE",   "=",         "ISE",       "ISE",     "ISE",       "=",         "="]),
    (Input::Disconnect(Abrupt),    ["ISE",   "ISE",  "ISE",   "ISE",    "ISE",    "ISE",   ">D!disc+bxf","ISE",   "ISE",   ">DP+bf",    ">D!disc+bfs","=",      ">D!disc+bf",">DP+bf",    ">DP+bf"]),
    (Input::Disconnect(Graceful),  ["ISE",   "ISE",  "ISE",   "ISE",    "ISE",    "ISE",   ">D!disc+bxf","ISE",   "ISE",   ">DP+g",     "=",         "=",       ">D!disc+bf",">DP+g",     ">DP+g"]),
    (Input::Reset,                 ["=",     "ISE",  "ISE",   "ISE",    "ISE",    "ISE",   "ISE",        "ISE",   "ISE",   "ISE",       "ISE",       ">U+R",    "ISE",       "ISE",       "ISE"]),
    (Input::Free,                  ["=+fX",  "=+X",  "ISE",   "ISE",    "ISE",    "ISE",   "=+bxfX",     "ISE",   "ISE",   "=+bfX",     "=+bfX",     "=+X",     "=+bfX",     "=+bfX",     "=+bfX"]),
    (Input::AcceptWithEp,          [">CP+a", "BISE", "BISE",  "BISE",   "BISE",   "BISE",  "BISE",       "BISE",  "BISE",  "BISE",      "BISE",      "BISE",    "BISE",      "BISE",      "BISE"]),
    (Input::AcceptOwnEp,           ["BISE",  "BISE", "BISE",  "BISE",   ">CP+a",  "BISE",  "BISE",       ">CP+a", "BISE",  "BISE",      "BISE",      "BISE",    "BISE",      "BISE",      "BISE"]),
    (Input::Reject,                ["ISE",   "ISE",  "ISE",   "ISE",    ">U+r",   ">uU+r", "ISE",        "=+rX",  "=+rX",  "ISE",       "ISE",       "ISE",     "ISE",       "ISE",       "ISE"]),
    (Input::ModifyPz,              ["=",     "=",    "ISE",   "=",      "ISE",    "=",     "ISE",        "=",     "=",     "ISE",       "ISE",       "ISE",     "ISE",       "ISE",       "ISE"]),
    (Input::ModifyOther,           ["=",     "=",    "=",     "=",      "ISE",    "=",     "ISE",        "=",     "=",     "ISE",       "ISE",       "ISE",     "ISE",       "ISE",       "ISE"]),
    (Input::RspCreate,             [">R",    ">uR",  "ISE",   "ISE",    "ISE",    "ISE",   "ISE",        "ISE",   "ISE",   "ISE",       "ISE",       "ISE",     "ISE",       "ISE",       "ISE"]),
    (Input::RspFree,               ["~",     "~",    ">U+z",  ">uU+z",  "~",      "~",     "~",          "~",     "~",     "~",         "~",         "~",       "~",         "~",         "~"]),
    (Input::PostRequest,           ["UNC",   "UNC",  "UNC",   "UNC",    "UNC",    "UNC",   "UNC",        "UNC",   "UNC",   "=",         "UNC",       "=+p",     "UNC",       "=",         "="]),
    (Input::PostRecv,              ["=",     "ISE",  "=",     "ISE",    "=",      "ISE",   "=",          "=",     "ISE",   "=",         "=",         "=+p",     "=",         "=",         "="]),
    (Input::RmrBind,               ["ISE",   "ISE",  "ISE",   "ISE",    "ISE",    "ISE",   "ISE",        "ISE",   "ISE",   "=",         "ISE",       "=+p",     "ISE",       "=",         "="]),
    (Input::Query,                 ["=",     "=",    "=",     "=",      "=",      "=",     "=",          "=",     "=",     "=",         "=",         "=",       "=",         "=",         "="]),
    (Input::Configured,            ["~",     ">U",   "~",     ">R",     "~",      ">PCP",  "~",          "~",     ">TCP",  "~",         "~",         "~",       "~",         "~",         "~"]),
    (Input::CrArrived,             ["~",     "~",    ">PCP",  ">uP",    "~",      "~",     "~",          "~",     "~",     "~",         "~",         "~",       "~",         "~",         "~"]),
    (Input::Established,           ["~",     "~",    "~",     "~",      "~",      "~",     ">C!est+x",   "~",     "~",     "~",         "~",         "~",       ">C!est",    "~",         "~"]),
    (Input::PeerRejected,          ["~",     "~",    "~",     "~",      "~",      "~",     ">D!prej+xf", "~",     "~",     "~",         "~",         "~",       "~",         "~",         "~"]),
    (Input::NonPeerRejected,       ["~",     "~",    "~",     "~",      "~",      "~",     ">D!nprej+xf","~",     "~",     "~",         "~",         "~",       ">D!nprej+f","~",         "~"]),
    (Input::Unreachable,           ["~",     "~",    "~",     "~",      "~",      "~",     ">D!unr+xf",  "~",     "~",     "~",         "~",         "~",       ">D!unr+f",  "~",         "~"]),
    (Input::TimedOut,              ["~",     "~",    "~",     "~",      "~",      "~",     ">D!tmo+xbf", "~",     "~",     "~",         "~",         "~",       "~",         "~",         "~"]),
    (Input::AcceptCompletionError, ["~",     "~",    "~",     "~",      "~",      "~",     "~",          "~",     "~",     "~",         "~",         "~",       ">D!ace+f",  "~",         "~"]),
    (Input::Disconnected,          ["~",     "~",    "~",     "~",      "~",      "~",     ">D!nprej+xf","~",     "~",     ">D!disc+fs",">D!disc+fs","~",       ">D!ace+f",  ">D!disc+fs",">D!disc+fs"]),
    (Input::Broken,                ["~",     "~",    "~",     "~",      "~",      "~",     ">D!nprej+xf","~",     "~",     ">D!brk+fes",">D!brk+fes","~",       ">D!ace+f",  ">D!brk+fes",">D!brk+fes"]),
    (Input::ConnectFailedSync,     ["~",     "~",    "~",     "~",      "~",      "~",     ">U+x",       "~",     "~",     "~",         "~",         "~",       ">U",        "~",         "~"]),
    (Input::RspAcceptFailedSync,   ["~",     "~",    "~",     "~",      "~",      "~",     "~",          "~",     "~",     "~",         "~",         "~",       ">PCP",      "~",         "~"]),
    (Input::ProviderAcceptFailedSync,["~",   "~",    "~",     "~",      "~",      "~",     "~",          "~",     "~",     "~",         "~",         "~",       ">TCP",      "~",         "~"]),
];

fn state_by_abbrev(s: &str) -> EpState {
    match s {
        "U" => Unconnected,
        "uU" => UnconfiguredUnconnected,
        "R" => Reserved,
        "uR" => UnconfiguredReserved,
        "PCP" => PassiveConnectionPending,
        "uP" => UnconfiguredPassive,
        "ACP" => ActiveConnectionPending,
        "TCP" => TentativeConnectionPending,
        "uT" => UnconfiguredTentative,
        "C" => Connected,
        "DP" => DisconnectPending,
        "D" => Disconnected,
        "CP" => CompletionPending,
        other => panic!("bad state abbreviation {other:?}"),
    }
}

fn event_by_abbrev(s: &str) -> ConnEvent {
    match s {
        "est" => ConnEvent::Established,
        "prej" => ConnEvent::PeerRejected,
        "nprej" => ConnEvent::NonPeerRejected,
        "ace" => ConnEvent::AcceptCompletionError,
        "disc" => ConnEvent::Disconnected,
        "brk" => ConnEvent::Broken,
        "tmo" => ConnEvent::TimedOut,
        "unr" => ConnEvent::Unreachable,
        other => panic!("bad event abbreviation {other:?}"),
    }
}

fn actions_by_letters(s: &str) -> Actions {
    s.chars().fold(Actions::empty(), |acc, c| {
        acc | match c {
            'c' => Actions::TRANSPORT_CONNECT,
            't' => Actions::ARM_TIMER,
            'x' => Actions::CANCEL_TIMER,
            'a' => Actions::TRANSPORT_ACCEPT,
            'r' => Actions::TRANSPORT_REJECT,
            'g' => Actions::TRANSPORT_DISCONNECT_GRACEFUL,
            'b' => Actions::TRANSPORT_DISCONNECT_ABRUPT,
            'f' => Actions::FLUSH,
            'p' => Actions::FLUSH_THIS_POST,
            'e' => Actions::ASYNC_EP_BROKEN,
            's' => Actions::SRQ_LAST_WQE,
            'z' => Actions::RELEASE_RESERVATION,
            'R' => Actions::TRANSPORT_RESET,
            'X' => Actions::DESTROY,
            other => panic!("bad action letter {other:?}"),
        }
    })
}

/// Builds the expected outcome of one cell, with raw codes written out.
fn expected(col: usize, cell: &str) -> Outcome {
    let state = COLS[col];
    let refused = |raw: u32| Outcome {
        result: Err(DatError::try_from(raw).expect("valid code")),
        next: state,
        event: None,
        actions: Actions::empty(),
        ignored: false,
    };
    match cell {
        "ISE" => return refused(0x8007_0000 | u32::from(SUB[col])),
        "BISE" => return refused(0x0007_0000),
        "UNC" => return refused(0x8007_002F),
        "~" => {
            return Outcome {
                result: Ok(()),
                next: state,
                event: None,
                actions: Actions::empty(),
                ignored: true,
            };
        }
        _ => {}
    }
    let (head, letters) = cell.split_once('+').unwrap_or((cell, ""));
    let (head, event) = match head.split_once('!') {
        Some((h, e)) => (h, Some(event_by_abbrev(e))),
        None => (head, None),
    };
    let next = match head {
        "=" => state,
        _ => state_by_abbrev(head.strip_prefix('>').expect("cell starts with = or >")),
    };
    Outcome {
        result: Ok(()),
        next,
        event,
        actions: actions_by_letters(letters),
        ignored: false,
    }
}

#[test]
fn table_covers_every_input_once_and_columns_are_abi_order() {
    assert_eq!(TABLE.len(), Input::ALL.len());
    for input in Input::ALL {
        assert_eq!(
            TABLE.iter().filter(|(i, _)| i == input).count(),
            1,
            "{input:?}"
        );
    }
    for (v, s) in COLS.iter().enumerate() {
        assert_eq!(s.raw() as usize, v);
        assert_eq!(EpState::ALL[v], *s);
    }
}

#[test]
fn every_state_and_input_matches_the_table() {
    let mut checked = 0;
    for (input, row) in TABLE {
        for (col, cell) in row.iter().enumerate() {
            let got = transition(COLS[col], *input);
            let want = expected(col, cell);
            assert_eq!(got, want, "{} x {input:?} (cell {cell:?})", COLS[col]);
            if let Err(e) = got.result {
                assert_eq!(
                    e.to_raw(),
                    want.result.err().map_or(0, DatError::to_raw),
                    "raw code"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 15 * Input::ALL.len());
}

#[test]
fn invariants_hold_for_every_pair() {
    for &state in &EpState::ALL {
        for &input in Input::ALL {
            let o = transition(state, input);
            let ctx = format!("{state} x {input:?}");
            if o.is_refused() {
                assert_eq!(o.next, state, "{ctx}: refusal keeps the state");
                assert_eq!(o.event, None, "{ctx}");
                assert!(o.actions.is_empty(), "{ctx}");
                assert!(!o.ignored, "{ctx}");
                assert!(!input.is_fact(), "{ctx}: facts are never refused");
                assert_eq!(
                    o.result.err().map(DatError::kind),
                    Some(ErrorType::InvalidState)
                );
            }
            if o.ignored {
                assert_eq!(o.result, Ok(()), "{ctx}");
                assert_eq!(o.next, state, "{ctx}");
                assert_eq!(o.event, None, "{ctx}");
                assert!(o.actions.is_empty(), "{ctx}");
                assert!(input.is_fact() || input == Input::RspFree, "{ctx}");
            }
            if o.destroys() {
                assert_eq!(
                    o.next, state,
                    "{ctx}: destroy keeps the state by convention"
                );
                assert_eq!(o.event, None, "{ctx}: no event for a freed EP");
            }
            // Decision 8: every entry into DISCONNECTED flushes and posts an event.
            if o.next == Disconnected && state != Disconnected {
                assert!(o.actions.contains(Actions::FLUSH), "{ctx}");
                assert!(o.event.is_some(), "{ctx}");
            }
            // Decision 26: SRQ_LAST_WQE exactly when leaving a connection for DISCONNECTED.
            let leaves_connection =
                (state.is_connected() || state == DisconnectPending) && o.next == Disconnected;
            assert_eq!(
                o.actions.contains(Actions::SRQ_LAST_WQE),
                leaves_connection,
                "{ctx}"
            );
            // Decision 18: the timer is cancelled exactly when leaving ACP.
            let leaves_acp = state == ActiveConnectionPending && (o.next != state || o.destroys());
            assert_eq!(
                o.actions.contains(Actions::CANCEL_TIMER),
                leaves_acp,
                "{ctx}"
            );
            // Events only with a state change (or the abrupt DP -> D).
            if o.event.is_some() {
                assert_ne!(o.next, state, "{ctx}");
            }
        }
    }
}

#[test]
fn ha_states_behave_like_connected() {
    for &ha in &[ConnectedSinglePath, ConnectedMultiPath] {
        for &input in Input::ALL {
            let c = transition(Connected, input);
            let mut h = transition(ha, input);
            if h.next == ha {
                h.next = Connected;
            }
            assert_eq!(h, c, "{ha} x {input:?}");
        }
    }
}

#[test]
fn state_values_names_and_subtypes() {
    for v in 0..15 {
        let s = EpState::from_raw(v).expect("defined");
        assert_eq!(s.raw(), v);
        assert!(s.dat_name().starts_with("DAT_EP_STATE_"));
    }
    assert_eq!(EpState::from_raw(15), None);
    assert_eq!(EpState::from_raw(u32::MAX), None);
    assert_eq!(Disconnected.to_string(), "DAT_EP_STATE_DISCONNECTED");
    for (col, s) in COLS.iter().enumerate() {
        assert_eq!(s.invalid_state_subtype().raw(), SUB[col], "{s}");
    }
    assert_eq!(EpState::ALL.iter().filter(|s| s.is_connected()).count(), 3);
    assert_eq!(
        EpState::ALL.iter().filter(|s| s.is_unconfigured()).count(),
        4
    );
    assert_eq!(UnconfiguredPassive.configured(), PassiveConnectionPending);
    assert_eq!(Connected.configured(), Connected);
}

#[test]
fn connection_events_have_their_dat_numbers() {
    let pairs = [
        (ConnEvent::Established, 0x4001),
        (ConnEvent::PeerRejected, 0x4002),
        (ConnEvent::NonPeerRejected, 0x4003),
        (ConnEvent::AcceptCompletionError, 0x4004),
        (ConnEvent::Disconnected, 0x4005),
        (ConnEvent::Broken, 0x4006),
        (ConnEvent::TimedOut, 0x4007),
        (ConnEvent::Unreachable, 0x4008),
    ];
    for (e, n) in pairs {
        assert_eq!(e.number() as u32, n, "{e:?}");
    }
}

/// Runs a sequence of inputs from `start`, asserting each succeeds, and returns the last
/// outcome.
fn run(start: EpState, inputs: &[Input]) -> Outcome {
    let mut state = start;
    let mut last = Outcome::to(start);
    for &i in inputs {
        last = transition(state, i);
        assert!(!last.is_refused(), "{state} x {i:?} refused: {last:?}");
        state = last.next;
    }
    last
}

// ---- seed: dat_ep_create(3DAT)

#[test]
fn seed_create_the_endpoint_is_created_in_the_unconnected_state() {
    assert_eq!(EpState::default(), Unconnected);
}

#[test]
fn seed_create_usage_connect_accept_or_reserve_from_unconnected() {
    // "Request a connection ... through dat_ep_connect or dat_ep_dup_connect"
    assert_eq!(
        transition(Unconnected, Input::Connect).next,
        ActiveConnectionPending
    );
    // "Associate the Endpoint with the Pending Connection Request ..."
    assert_eq!(
        transition(Unconnected, Input::AcceptWithEp).next,
        CompletionPending
    );
    // "Create a Reserved Service Point with the Endpoint ... accepts the Pending CR"
    let o = run(
        Unconnected,
        &[
            Input::RspCreate,
            Input::CrArrived,
            Input::AcceptOwnEp,
            Input::Established,
        ],
    );
    assert_eq!(o.next, Connected);
    assert_eq!(o.event, Some(ConnEvent::Established));
}

#[test]
fn seed_create_unconfigured_allows_only_query_status_modify_free() {
    // "The Consumer cannot do any operations on the created Endpoint except for
    // dat_ep_query, dat_ep_get_status, dat_ep_modify, and dat_ep_free" (decision 22 adds
    // the passive path the unconfigured states exist for).
    let allowed = [
        Input::Query,
        Input::ModifyPz,
        Input::ModifyOther,
        Input::Free,
        Input::RspCreate,
    ];
    for &input in Input::ALL
        .iter()
        .filter(|i| !i.is_fact() && **i != Input::RspFree)
    {
        let o = transition(UnconfiguredUnconnected, input);
        assert_eq!(!o.is_refused(), allowed.contains(&input), "{input:?}");
    }
    // Once modify completed the attributes, the EP is usable.
    let o = run(
        UnconfiguredUnconnected,
        &[Input::ModifyOther, Input::Configured, Input::Connect],
    );
    assert_eq!(o.next, ActiveConnectionPending);
}

// ---- seed: dat_ep_connect(3DAT) (Solaris 10) and dat_ep_dup_connect(3DAT)

#[test]
fn seed_connect_success_transfers_into_active_connection_pending() {
    let o = transition(Unconnected, Input::Connect);
    assert_eq!(o.result, Ok(()));
    assert_eq!(o.next, ActiveConnectionPending);
    assert_eq!(o.actions, Actions::TRANSPORT_CONNECT | Actions::ARM_TIMER);
    assert_eq!(o.event, None);
}

#[test]
fn seed_connect_acceptance_gives_established_and_connected() {
    let o = run(Unconnected, &[Input::Connect, Input::Established]);
    assert_eq!((o.next, o.event), (Connected, Some(ConnEvent::Established)));
}

#[test]
fn seed_connect_peer_reject_gives_peer_rejected_and_disconnected() {
    let o = run(Unconnected, &[Input::Connect, Input::PeerRejected]);
    assert_eq!(
        (o.next, o.event),
        (Disconnected, Some(ConnEvent::PeerRejected))
    );
}

#[test]
fn seed_connect_remote_qos_and_other_failures_give_non_peer_rejected_and_disconnected() {
    // Remote QoS unsupported, no listener, backlog full: NON_PEER_REJECTED, DISCONNECTED
    // (dup_connect's "UNDISCONNECTED", decision 1). Transport errors too (decision 15).
    for fact in [Input::NonPeerRejected, Input::Broken, Input::Disconnected] {
        let o = run(Unconnected, &[Input::Connect, fact]);
        assert_eq!(
            (o.next, o.event),
            (Disconnected, Some(ConnEvent::NonPeerRejected)),
            "{fact:?}"
        );
    }
}

#[test]
fn seed_connect_unreachable_gives_unreachable_and_disconnected() {
    // Decision 2: even when the provider learns it synchronously, it reports the fact after
    // Connect, so the EP ends DISCONNECTED, not UNCONNECTED as in OFA.
    let o = run(Unconnected, &[Input::Connect, Input::Unreachable]);
    assert_eq!(
        (o.next, o.event),
        (Disconnected, Some(ConnEvent::Unreachable))
    );
    assert!(transition(Unconnected, Input::Unreachable).ignored);
}

#[test]
fn seed_connect_timeout_gives_timed_out_and_disconnected() {
    let o = run(Unconnected, &[Input::Connect, Input::TimedOut]);
    assert_eq!((o.next, o.event), (Disconnected, Some(ConnEvent::TimedOut)));
    assert!(o.actions.contains(Actions::TRANSPORT_DISCONNECT_ABRUPT));
}

#[test]
fn seed_disconnected_after_failed_connect_resets_to_unconnected() {
    // Decision 1: after UNDISCONNECTED (= DISCONNECTED), dat_ep_reset gives U.
    let o = run(
        Unconnected,
        &[
            Input::Connect,
            Input::TimedOut,
            Input::Reset,
            Input::Connect,
        ],
    );
    assert_eq!(o.next, ActiveConnectionPending);
}

#[test]
fn seed_dup_connect_needs_a_connected_dup_endpoint() {
    // "dup_ep_handle: Connected local Endpoint that specifies a requested connection remote end"
    for &s in &EpState::ALL {
        let o = transition(s, Input::DupSource);
        if s.is_connected() {
            assert_eq!((o.result, o.next), (Ok(()), s));
        } else {
            assert_eq!(
                o.result,
                Err(DatError::invalid_state(s.invalid_state_subtype()))
            );
        }
    }
    // "Upon successful completion ... transferred into ACTIVE_CONNECTION_PENDING"
    assert_eq!(
        transition(Unconnected, Input::Connect).next,
        ActiveConnectionPending
    );
}

#[test]
fn seed_connect_is_refused_unless_unconnected() {
    for &s in EpState::ALL.iter().filter(|s| **s != Unconnected) {
        assert_eq!(
            transition(s, Input::Connect).result,
            Err(DatError::invalid_state(s.invalid_state_subtype())),
            "{s}"
        );
    }
}

// ---- seed: dat_ep_disconnect(3DAT)

#[test]
fn seed_disconnect_graceful_waits_in_disconnect_pending() {
    // "all outstanding and in-progress request DTOs ... must try to be completed
    // successfully first ... During that time, the local Endpoint is in DISCONNECT_PENDING"
    let o = transition(Connected, Input::Disconnect(Graceful));
    assert_eq!(o.next, DisconnectPending);
    assert_eq!(o.actions, Actions::TRANSPORT_DISCONNECT_GRACEFUL);
    assert!(!o.actions.contains(Actions::FLUSH));
}

#[test]
fn seed_disconnect_abrupt_completes_outstanding_dtos_unsuccessfully() {
    let o = transition(Connected, Input::Disconnect(Abrupt));
    assert!(
        o.actions
            .contains(Actions::FLUSH | Actions::TRANSPORT_DISCONNECT_ABRUPT)
    );
}

#[test]
fn seed_disconnect_abrupt_in_disconnect_pending_goes_to_disconnected_without_waiting() {
    let o = run(
        Connected,
        &[Input::Disconnect(Graceful), Input::Disconnect(Abrupt)],
    );
    assert_eq!(
        (o.next, o.event),
        (Disconnected, Some(ConnEvent::Disconnected))
    );
    assert!(o.actions.contains(Actions::FLUSH));
    // The transport's own completion arriving later changes nothing.
    assert!(transition(o.next, Input::Disconnected).ignored);
}

#[test]
fn seed_disconnect_graceful_in_disconnect_pending_has_no_effect() {
    // Decision 3: spec, not OFA's INVALID_PARAMETER|ARG2.
    let o = transition(DisconnectPending, Input::Disconnect(Graceful));
    assert_eq!(o, Outcome::to(DisconnectPending));
}

#[test]
fn seed_disconnect_flag_does_not_matter_outside_connected() {
    // "If the Endpoint is not in CONNECTED, the semantic of the operation is the same for
    // graceful or abrupt" - except DISCONNECT_PENDING, which the same page treats apart.
    for &s in EpState::ALL
        .iter()
        .filter(|s| !s.is_connected() && **s != DisconnectPending)
    {
        assert_eq!(
            transition(s, Input::Disconnect(Abrupt)),
            transition(s, Input::Disconnect(Graceful)),
            "{s}"
        );
    }
}

#[test]
fn seed_disconnect_pending_accepts_no_new_requests_or_binds() {
    // "No new Send, RDMA Read, and RDMA Write DTOs, or RMR Binds can be posted ... in
    // DISCONNECT_PENDING"
    assert_eq!(
        transition(DisconnectPending, Input::PostRequest).result,
        Err(POST_UNCONNECTED)
    );
    assert!(transition(DisconnectPending, Input::RmrBind).is_refused());
    assert!(!transition(DisconnectPending, Input::PostRecv).is_refused());
}

#[test]
fn seed_disconnect_completion_posts_disconnected_and_enters_disconnected() {
    let o = run(
        Connected,
        &[Input::Disconnect(Graceful), Input::Disconnected],
    );
    assert_eq!(
        (o.next, o.event),
        (Disconnected, Some(ConnEvent::Disconnected))
    );
    assert!(o.actions.contains(Actions::FLUSH));
}

#[test]
fn seed_disconnecting_a_disconnected_endpoint_is_a_no_op() {
    for flags in [Abrupt, Graceful] {
        assert_eq!(
            transition(Disconnected, Input::Disconnect(flags)),
            Outcome::to(Disconnected)
        );
    }
}

#[test]
fn seed_disconnect_is_disallowed_in_u_r_pcp_tcp() {
    for (s, raw) in [
        (Unconnected, 0x8007_002F),
        (Reserved, 0x8007_0035),
        (PassiveConnectionPending, 0x8007_0031),
        (TentativeConnectionPending, 0x8007_0032),
    ] {
        for flags in [Abrupt, Graceful] {
            let o = transition(s, Input::Disconnect(flags));
            assert_eq!(o.result.err().map(DatError::to_raw), Some(raw), "{s}");
            assert_eq!(o.next, s);
        }
    }
}

#[test]
fn seed_disconnect_during_establishment_aborts_into_disconnected_and_flushes_recvs() {
    for s in [ActiveConnectionPending, CompletionPending] {
        for flags in [Abrupt, Graceful] {
            let o = transition(s, Input::Disconnect(flags));
            assert_eq!(o.next, Disconnected, "{s}");
            assert_eq!(
                o.event,
                Some(ConnEvent::Disconnected),
                "{s}: posted at once"
            );
            assert!(
                o.actions
                    .contains(Actions::FLUSH | Actions::TRANSPORT_DISCONNECT_ABRUPT)
            );
        }
    }
    // A late ESTABLISHED after the abort is ignored (decision 19).
    assert!(transition(Disconnected, Input::Established).ignored);
}

#[test]
fn async_ep_broken_for_broken_connections_and_srq_eps_leaving_one() {
    // Decision 26: an SRQ EP is told when it leaves a connection, by any way, once.
    let srq_exits = [
        (Connected, Input::Disconnected),
        (DisconnectPending, Input::Disconnected),
        (DisconnectPending, Input::Disconnect(Abrupt)),
        (ConnectedMultiPath, Input::Disconnected),
    ];
    for (state, input) in srq_exits {
        let o = transition(state, input);
        assert!(o.posts_async_ep_broken(true), "{state} x {input:?}");
        assert!(!o.posts_async_ep_broken(false), "{state} x {input:?}");
    }
    // Decision 17: a broken connection is reported with or without an SRQ.
    for state in [Connected, DisconnectPending, ConnectedSinglePath] {
        let o = transition(state, Input::Broken);
        assert!(o.posts_async_ep_broken(true), "{state}");
        assert!(o.posts_async_ep_broken(false), "{state}");
    }
    // Never for establishments that failed, for a free, or while the connection lasts.
    let quiet = [
        (ActiveConnectionPending, Input::Disconnected),
        (ActiveConnectionPending, Input::Broken),
        (ActiveConnectionPending, Input::PeerRejected),
        (ActiveConnectionPending, Input::Disconnect(Graceful)),
        (CompletionPending, Input::Disconnected),
        (CompletionPending, Input::AcceptCompletionError),
        (Connected, Input::Free),
        (DisconnectPending, Input::Free),
        (Connected, Input::Disconnect(Graceful)),
        (Connected, Input::Disconnect(Abrupt)),
        (Disconnected, Input::Disconnected),
        (Disconnected, Input::Disconnect(Abrupt)),
    ];
    for (state, input) in quiet {
        let o = transition(state, input);
        assert!(!o.posts_async_ep_broken(true), "{state} x {input:?}");
    }
}
