//! The endpoint state matrix (reference 3.4), one case per row x state, every state reached
//! through real connections.

use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber, PspFlags};
use dat::{Cr, DatError, Ep, EpModify, EpState, Sp, Subtype};

use crate::Outcome;
use crate::harness::{
    BARE_ISE, Side, UNC, assert_empty, connect_ep, disconnect_pair, expect_completion, expect_conn,
    expect_cr, ise, pair, sides, wait_state,
};
use crate::target::Target;

/// An endpoint driven into a state, with the objects that keep it there.
pub struct Fx {
    /// The side that owns the EP under test.
    pub me: Side,
    /// The other side.
    pub peer: Side,
    /// The EP under test.
    pub ep: Ep,
    /// The EP of `peer` it is (being) connected with, if any.
    pub peer_ep: Option<Ep>,
    _keep: Vec<Sp>,
    _cr: Option<Cr>,
    /// A pending request on a consumer PSP of `me`, made before the EP entered a state that
    /// progress would end (CP, DP).
    spare: Option<Spare>,
}

/// A pending connection request prepared in advance: (PSP, requester EP, request).
struct Spare(Sp, Ep, Cr);

fn spare(t: &dyn Target, me: &Side, peer: &Side) -> Spare {
    let psp = me.psp(t);
    let requester = peer.another_ep();
    connect_ep(&requester, &me.addr(), psp.conn_qual(), b"x");
    let cr = expect_cr(&me.ia, &me.cr, &psp);
    Spare(psp, requester, cr)
}

fn fx(me: Side, peer: Side, ep: Ep, peer_ep: Option<Ep>, keep: Vec<Sp>, cr: Option<Cr>) -> Fx {
    Fx {
        me,
        peer,
        ep,
        peer_ep,
        _keep: keep,
        _cr: cr,
        spare: None,
    }
}

/// Drives an EP into `state` (U, R, PCP, TCP, ACP, CP, C, DP or D).
///
/// # Errors
/// `Outcome::Skip` when the target cannot produce the state observably (the provider flag is
/// not supported, or CP/DP complete synchronously).
pub fn make(t: &dyn Target, state: EpState) -> Result<Fx, Outcome> {
    make_with(t, state, false)
}

/// [`make`], with a spare pending request for the CP and DP states when `with_spare`.
fn make_with(t: &dyn Target, state: EpState, with_spare: bool) -> Result<Fx, Outcome> {
    match state {
        EpState::Unconnected => {
            let (a, b) = sides(t);
            let ep = a.ep.clone();
            Ok(fx(a, b, ep, None, vec![], None))
        }
        EpState::Reserved => {
            let (a, b) = sides(t);
            let rsp = b.ia.create_rsp(t.qual(), &b.ep, &b.cr).expect("rsp");
            assert_eq!(b.ep.state(), Ok(EpState::Reserved));
            let ep = b.ep.clone();
            Ok(fx(b, a, ep, None, vec![rsp], None))
        }
        EpState::PassiveConnectionPending => {
            let (a, b) = sides(t);
            let rsp = b.ia.create_rsp(t.qual(), &b.ep, &b.cr).expect("rsp");
            connect_ep(&a.ep, &b.addr(), rsp.conn_qual(), b"pcp");
            let cr = expect_cr(&b.ia, &b.cr, &rsp);
            assert_eq!(cr.ep().as_ref(), Some(&b.ep));
            assert_eq!(b.ep.state(), Ok(EpState::PassiveConnectionPending));
            let ep = b.ep.clone();
            let aep = a.ep.clone();
            Ok(fx(b, a, ep, Some(aep), vec![rsp], Some(cr)))
        }
        EpState::TentativeConnectionPending => {
            let (a, b) = sides(t);
            if !b.ia.provider_attr().psp_provider_flag_supported {
                return Err(Outcome::Skip(
                    "provider does not advertise DAT_PSP_PROVIDER_FLAG".into(),
                ));
            }
            let psp =
                b.ia.create_psp(t.qual(), &b.cr, PspFlags::Provider)
                    .expect("provider psp");
            connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"tcp");
            let cr = expect_cr(&b.ia, &b.cr, &psp);
            let ep = cr.ep().expect("the provider created an EP");
            assert_eq!(ep.state(), Ok(EpState::TentativeConnectionPending));
            assert_eq!(cr.query().unwrap().ep, Some(ep.id()));
            let aep = a.ep.clone();
            Ok(fx(b, a, ep, Some(aep), vec![psp], Some(cr)))
        }
        EpState::ActiveConnectionPending => {
            let (a, b) = sides(t);
            let psp = b.psp(t);
            connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"acp");
            assert_eq!(a.ep.state(), Ok(EpState::ActiveConnectionPending));
            let cr = expect_cr(&b.ia, &b.cr, &psp);
            assert_eq!(a.ep.state(), Ok(EpState::ActiveConnectionPending));
            let ep = a.ep.clone();
            Ok(fx(a, b, ep, None, vec![psp], Some(cr)))
        }
        EpState::CompletionPending => {
            if !t.deterministic() {
                // Verified exactly on the fabric target and by dat-core's table test.
                return Err(Outcome::Skip(
                    "COMPLETION_PENDING cannot be held open on a real transport: it ends when \
                     the requester's ready-to-use frame arrives, racing the test"
                        .into(),
                ));
            }
            let (a, b) = sides(t);
            let sp = with_spare.then(|| spare(t, &b, &a));
            let psp = b.psp(t);
            connect_ep(&a.ep, &b.addr(), psp.conn_qual(), b"cp");
            let cr = expect_cr(&b.ia, &b.cr, &psp);
            cr.accept(Some(&b.ep), b"").expect("accept");
            let st = b.ep.state().unwrap();
            if st != EpState::CompletionPending {
                assert_eq!(st, EpState::Connected, "after accept");
                return Err(Outcome::Skip(
                    "COMPLETION_PENDING not observable: the accept completed synchronously".into(),
                ));
            }
            let ep = b.ep.clone();
            let aep = a.ep.clone();
            let mut f = fx(b, a, ep, Some(aep), vec![psp], None);
            f.spare = sp;
            Ok(f)
        }
        EpState::Connected => {
            let p = pair(t);
            let ep = p.a.ep.clone();
            let bep = p.b.ep.clone();
            Ok(fx(p.a, p.b, ep, Some(bep), vec![p.psp], None))
        }
        EpState::DisconnectPending => {
            let p = pair(t);
            let sp = with_spare.then(|| spare(t, &p.a, &p.b));
            // A send the peer has no receive for keeps the graceful disconnect pending.
            crate::harness::post_send(&p.a, &p.a.ep, 0, 8, 0xD0);
            p.a.ep.disconnect(CloseFlags::Graceful).expect("disconnect");
            if p.a.ep.state() != Ok(EpState::DisconnectPending) {
                return Err(Outcome::Skip(
                    "DISCONNECT_PENDING not observable: the graceful disconnect completed synchronously"
                        .into(),
                ));
            }
            let ep = p.a.ep.clone();
            let bep = p.b.ep.clone();
            let mut f = fx(p.a, p.b, ep, Some(bep), vec![p.psp], None);
            f.spare = sp;
            Ok(f)
        }
        EpState::Disconnected => {
            let p = pair(t);
            disconnect_pair(&p);
            let ep = p.a.ep.clone();
            let bep = p.b.ep.clone();
            Ok(fx(p.a, p.b, ep, Some(bep), vec![p.psp], None))
        }
        other => Err(Outcome::Skip(format!(
            "{other:?} is not produced by this API"
        ))),
    }
}

/// The provider-created EP of TENTATIVE has no PZ or EVDs: `dat_ep_modify` gives it those of
/// its side (and queue depths to go with the DTO EVDs) so that posts and accepts reach the
/// state checks.
fn configure_tentative(f: &Fx) {
    if f.ep.state() != Ok(EpState::TentativeConnectionPending) {
        return;
    }
    let attr = f.me.deep_attr(8);
    f.ep.modify(&EpModify {
        pz: Some(&f.me.pz),
        recv_evd: Some(&f.me.recv),
        request_evd: Some(&f.me.req),
        connect_evd: Some(&f.me.conn),
        attr: Some(&attr),
    })
    .expect("dat_ep_modify of the provider-created EP");
    assert_eq!(f.ep.state(), Ok(EpState::TentativeConnectionPending));
}

/// Row `connect`: only UNCONNECTED proceeds (to ACP).
pub fn row_connect(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let psp = f.peer.psp(t);
    let r = f.ep.connect(
        f.peer.addr(),
        psp.conn_qual(),
        crate::harness::CONNECT_TIMEOUT,
        b"",
        dat::types::Qos::BestEffort,
        dat::ConnectFlags::Default,
    );
    if state == EpState::Unconnected {
        assert_eq!(r, Ok(()));
        assert_eq!(f.ep.state(), Ok(EpState::ActiveConnectionPending));
        let cr = expect_cr(&f.peer.ia, &f.peer.cr, &psp);
        cr.accept(Some(&f.peer.ep), b"").unwrap();
        expect_conn(&f.me.conn, EventNumber::Established, &f.ep);
        assert_eq!(f.ep.state(), Ok(EpState::Connected));
    } else {
        assert_eq!(r, Err(ise(state)));
        assert_eq!(f.ep.state(), Ok(state), "a refused call changes nothing");
    }
    Outcome::Pass
}

/// Row `disconnect` with `flags`.
pub fn row_disconnect(t: &dyn Target, state: EpState, flags: CloseFlags) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let conn_ep_evd = &f.me.conn;
    match state {
        EpState::Unconnected
        | EpState::Reserved
        | EpState::PassiveConnectionPending
        | EpState::TentativeConnectionPending => {
            assert_eq!(f.ep.disconnect(flags), Err(ise(state)));
            assert_eq!(f.ep.state(), Ok(state));
        }
        EpState::ActiveConnectionPending | EpState::CompletionPending => {
            // Aborts the establishment: DISCONNECTED at once, event posted synchronously.
            assert_eq!(f.ep.disconnect(flags), Ok(()));
            assert_eq!(f.ep.state(), Ok(EpState::Disconnected));
            let ev = conn_ep_evd
                .dequeue()
                .expect("DISCONNECTED posted synchronously");
            assert_eq!(ev.number, EventNumber::Disconnected, "{ev:?}");
            assert_eq!(ev.ep(), Some(f.ep.id()));
            assert_empty(conn_ep_evd);
        }
        EpState::Connected => {
            assert_eq!(f.ep.disconnect(flags), Ok(()));
            let st = f.ep.state().unwrap();
            assert!(
                st == EpState::DisconnectPending || st == EpState::Disconnected,
                "{st:?}"
            );
            expect_conn(conn_ep_evd, EventNumber::Disconnected, &f.ep);
            assert_eq!(f.ep.state(), Ok(EpState::Disconnected));
            let peer_ep = f.peer_ep.as_ref().unwrap();
            expect_conn(&f.peer.conn, EventNumber::Disconnected, peer_ep);
            assert_eq!(peer_ep.state(), Ok(EpState::Disconnected));
        }
        EpState::DisconnectPending => {
            assert_eq!(f.ep.disconnect(flags), Ok(()));
            if flags == CloseFlags::Abrupt {
                assert_eq!(f.ep.state(), Ok(EpState::Disconnected));
            }
            expect_conn(conn_ep_evd, EventNumber::Disconnected, &f.ep);
            assert_eq!(f.ep.state(), Ok(EpState::Disconnected));
        }
        EpState::Disconnected => {
            assert_eq!(f.ep.disconnect(flags), Ok(()), "no-op");
            assert_eq!(f.ep.state(), Ok(EpState::Disconnected));
            assert_empty(conn_ep_evd);
        }
        _ => unreachable!("make() only produces the states above"),
    }
    Outcome::Pass
}

/// Row `reset`: no-op in U, D -> U, ISE elsewhere.
pub fn row_reset(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    match state {
        EpState::Unconnected | EpState::Disconnected => {
            assert_eq!(f.ep.reset(), Ok(()));
            assert_eq!(f.ep.state(), Ok(EpState::Unconnected));
            let q = f.ep.query().unwrap();
            assert_eq!((q.remote_address, q.remote_qual), (None, None));
        }
        _ => {
            assert_eq!(f.ep.reset(), Err(ise(state)));
            assert_eq!(f.ep.state(), Ok(state));
        }
    }
    Outcome::Pass
}

/// Row `free`: refused in R, PCP, TCP; elsewhere the EP is gone (and a connected peer is
/// disconnected).
pub fn row_free(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    match state {
        EpState::Reserved
        | EpState::PassiveConnectionPending
        | EpState::TentativeConnectionPending => {
            assert_eq!(f.ep.free(), Err(ise(state)));
            assert_eq!(f.ep.state(), Ok(state));
        }
        _ => {
            assert_eq!(f.ep.free(), Ok(()));
            assert_eq!(
                f.ep.state(),
                Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
            );
            if matches!(state, EpState::Connected | EpState::CompletionPending)
                && let Some(pe) = &f.peer_ep
            {
                // The peer learns: DISCONNECTED (C), or its establishment fails (CP).
                let ev = crate::harness::next_event(&f.peer.conn);
                assert_eq!(ev.ep(), Some(pe.id()), "{ev:?}");
                assert!(
                    matches!(
                        ev.number,
                        EventNumber::Disconnected
                            | EventNumber::Established
                            | EventNumber::NonPeerRejected
                    ),
                    "{ev:?}"
                );
                if ev.number == EventNumber::Established {
                    expect_conn(&f.peer.conn, EventNumber::Disconnected, pe);
                }
                wait_state(&f.peer.ia, pe, EpState::Disconnected);
            }
            // Objects it used are released.
            if f.ep == f.me.ep {
                f.me.req.free().expect("request EVD no longer in use");
            }
        }
    }
    Outcome::Pass
}

/// Rows `post send` and `post RDMA write`: CONNECTED proceeds, DISCONNECTED flushes, every
/// other state is `INVALID_STATE | EP_UNCONNECTED`.
pub fn row_post_request(t: &dyn Target, state: EpState, rdma: bool) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    configure_tentative(&f);
    let s = &f.me;
    s.lmr.write(0, b"request").unwrap();
    if state == EpState::Connected {
        crate::harness::post_recv(&f.peer, f.peer_ep.as_ref().unwrap(), 0, 64, 5);
    }
    let iov = [s.lmr.triplet(0, 7)];
    let r = if rdma {
        f.ep.post_rdma_write(
            &iov,
            Cookie(9),
            f.peer.lmr.rmr_triplet(100, 7),
            CompletionFlags::DEFAULT,
        )
    } else {
        f.ep.post_send(&iov, Cookie(9), CompletionFlags::DEFAULT)
    };
    let op = if rdma { DtoOp::RdmaWrite } else { DtoOp::Send };
    match state {
        EpState::Connected => {
            assert_eq!(r, Ok(()));
            expect_completion(&s.req, &f.ep, 9, DtoStatus::Success, op, 7);
        }
        EpState::Disconnected => {
            assert_eq!(r, Ok(()));
            expect_completion(&s.req, &f.ep, 9, DtoStatus::Flushed, op, 0);
            assert_eq!(f.peer.lmr.to_vec()[100..107], [0u8; 7], "nothing written");
        }
        _ => {
            assert_eq!(r, Err(UNC));
            assert_eq!(f.ep.state(), Ok(state));
            if state != EpState::DisconnectPending {
                // (In DP the request that keeps it pending may complete now.)
                assert_empty(&s.req);
            }
        }
    }
    Outcome::Pass
}

/// Row `post recv`: allowed in every state; flushed at once in DISCONNECTED.
pub fn row_post_recv(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    configure_tentative(&f);
    let s = &f.me;
    assert_eq!(
        f.ep.post_recv(&[s.lmr.triplet(0, 64)], Cookie(3), CompletionFlags::DEFAULT),
        Ok(())
    );
    assert_eq!(f.ep.state(), Ok(state));
    if state == EpState::Disconnected || state == EpState::DisconnectPending {
        // In DP it is flushed when the disconnect completes.
        expect_completion(&s.recv, &f.ep, 3, DtoStatus::Flushed, DtoOp::Receive, 0);
    } else {
        assert_empty(&s.recv);
    }
    Outcome::Pass
}

/// Row `dat_cr_accept` with the EP given: only UNCONNECTED proceeds; every other state is
/// the bare `DAT_INVALID_STATE`.
pub fn row_accept_with_ep(t: &dyn Target, state: EpState) -> Outcome {
    let pending = matches!(
        state,
        EpState::CompletionPending | EpState::DisconnectPending
    );
    let mut f = match make_with(t, state, pending) {
        Ok(f) => f,
        Err(o) => return o,
    };
    configure_tentative(&f);
    // A fresh request on a consumer PSP of the EP's IA (prepared in advance for CP and DP,
    // which the progress of waiting for it would end).
    let Spare(_psp, requester, cr) = match f.spare.take() {
        Some(s) => s,
        None => spare(t, &f.me, &f.peer),
    };
    if f.ep.state() != Ok(state) {
        cr.reject(b"").expect("reject");
        return Outcome::Skip(format!(
            "{state:?} not held: the EP moved on while the request arrived"
        ));
    }
    let r = cr.accept(Some(&f.ep), b"");
    if state == EpState::Unconnected {
        assert_eq!(r, Ok(()));
        expect_conn(&f.peer.conn, EventNumber::Established, &requester);
        expect_conn(&f.me.conn, EventNumber::Established, &f.ep);
        assert_eq!(f.ep.state(), Ok(EpState::Connected));
    } else {
        assert_eq!(r, Err(BARE_ISE));
        assert_eq!(BARE_ISE.to_raw(), 0x0007_0000);
        assert_eq!(f.ep.state(), Ok(state));
        // The request is still pending and can be rejected.
        cr.reject(b"").expect("reject after refused accept");
    }
    Outcome::Pass
}

/// Row `dat_rsp_create`: only UNCONNECTED proceeds (to RESERVED).
pub fn row_rsp_create(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let r = f.me.ia.create_rsp(t.qual(), &f.ep, &f.me.cr);
    if state == EpState::Unconnected {
        let rsp = r.expect("rsp_create in U");
        assert_eq!(f.ep.state(), Ok(EpState::Reserved));
        rsp.free().unwrap();
        assert_eq!(f.ep.state(), Ok(EpState::Unconnected));
    } else {
        assert_eq!(r.unwrap_err(), ise(state));
        assert_eq!(f.ep.state(), Ok(state));
    }
    Outcome::Pass
}

/// `dat_ep_dup_connect` with the *dup* EP in `state`: only CONNECTED proceeds.
pub fn row_dup_source(t: &dyn Target, state: EpState) -> Outcome {
    let f = match make(t, state) {
        Ok(f) => f,
        Err(o) => return o,
    };
    let fresh = f.me.another_ep();
    let r = fresh.dup_connect(
        &f.ep,
        crate::harness::CONNECT_TIMEOUT,
        b"",
        dat::types::Qos::BestEffort,
    );
    if state == EpState::Connected {
        assert_eq!(r, Ok(()));
        assert_eq!(fresh.state(), Ok(EpState::ActiveConnectionPending));
    } else {
        assert_eq!(r, Err(ise(state)));
        assert_eq!(fresh.state(), Ok(EpState::Unconnected));
    }
    Outcome::Pass
}

macro_rules! rows {
    ($($state:ident => $connect:ident, $disc_g:ident, $disc_a:ident, $reset:ident, $free:ident,
        $send:ident, $write:ident, $recv:ident, $accept:ident, $rsp:ident, $dup:ident;)*) => {$(
        #[doc = concat!("`dat_ep_connect` in ", stringify!($state), ".")]
        pub fn $connect(t: &dyn Target) -> Outcome { row_connect(t, EpState::$state) }
        #[doc = concat!("Graceful `dat_ep_disconnect` in ", stringify!($state), ".")]
        pub fn $disc_g(t: &dyn Target) -> Outcome { row_disconnect(t, EpState::$state, CloseFlags::Graceful) }
        #[doc = concat!("Abrupt `dat_ep_disconnect` in ", stringify!($state), ".")]
        pub fn $disc_a(t: &dyn Target) -> Outcome { row_disconnect(t, EpState::$state, CloseFlags::Abrupt) }
        #[doc = concat!("`dat_ep_reset` in ", stringify!($state), ".")]
        pub fn $reset(t: &dyn Target) -> Outcome { row_reset(t, EpState::$state) }
        #[doc = concat!("`dat_ep_free` in ", stringify!($state), ".")]
        pub fn $free(t: &dyn Target) -> Outcome { row_free(t, EpState::$state) }
        #[doc = concat!("`dat_ep_post_send` in ", stringify!($state), ".")]
        pub fn $send(t: &dyn Target) -> Outcome { row_post_request(t, EpState::$state, false) }
        #[doc = concat!("`dat_ep_post_rdma_write` in ", stringify!($state), ".")]
        pub fn $write(t: &dyn Target) -> Outcome { row_post_request(t, EpState::$state, true) }
        #[doc = concat!("`dat_ep_post_recv` in ", stringify!($state), ".")]
        pub fn $recv(t: &dyn Target) -> Outcome { row_post_recv(t, EpState::$state) }
        #[doc = concat!("`dat_cr_accept` with an EP in ", stringify!($state), ".")]
        pub fn $accept(t: &dyn Target) -> Outcome { row_accept_with_ep(t, EpState::$state) }
        #[doc = concat!("`dat_rsp_create` with an EP in ", stringify!($state), ".")]
        pub fn $rsp(t: &dyn Target) -> Outcome { row_rsp_create(t, EpState::$state) }
        #[doc = concat!("`dat_ep_dup_connect` from a dup EP in ", stringify!($state), ".")]
        pub fn $dup(t: &dyn Target) -> Outcome { row_dup_source(t, EpState::$state) }
    )*};
}

rows! {
    Unconnected => u_connect, u_disconnect_graceful, u_disconnect_abrupt, u_reset, u_free,
        u_post_send, u_post_rdma_write, u_post_recv, u_accept_with_ep, u_rsp_create, u_dup_source;
    Reserved => r_connect, r_disconnect_graceful, r_disconnect_abrupt, r_reset, r_free,
        r_post_send, r_post_rdma_write, r_post_recv, r_accept_with_ep, r_rsp_create, r_dup_source;
    PassiveConnectionPending => pcp_connect, pcp_disconnect_graceful, pcp_disconnect_abrupt,
        pcp_reset, pcp_free, pcp_post_send, pcp_post_rdma_write, pcp_post_recv,
        pcp_accept_with_ep, pcp_rsp_create, pcp_dup_source;
    TentativeConnectionPending => tcp_connect, tcp_disconnect_graceful, tcp_disconnect_abrupt,
        tcp_reset, tcp_free, tcp_post_send, tcp_post_rdma_write, tcp_post_recv,
        tcp_accept_with_ep, tcp_rsp_create, tcp_dup_source;
    ActiveConnectionPending => acp_connect, acp_disconnect_graceful, acp_disconnect_abrupt,
        acp_reset, acp_free, acp_post_send, acp_post_rdma_write, acp_post_recv,
        acp_accept_with_ep, acp_rsp_create, acp_dup_source;
    CompletionPending => cp_connect, cp_disconnect_graceful, cp_disconnect_abrupt, cp_reset,
        cp_free, cp_post_send, cp_post_rdma_write, cp_post_recv, cp_accept_with_ep,
        cp_rsp_create, cp_dup_source;
    Connected => c_connect, c_disconnect_graceful, c_disconnect_abrupt, c_reset, c_free,
        c_post_send, c_post_rdma_write, c_post_recv, c_accept_with_ep, c_rsp_create,
        c_dup_source;
    DisconnectPending => dp_connect, dp_disconnect_graceful, dp_disconnect_abrupt, dp_reset,
        dp_free, dp_post_send, dp_post_rdma_write, dp_post_recv, dp_accept_with_ep,
        dp_rsp_create, dp_dup_source;
    Disconnected => d_connect, d_disconnect_graceful, d_disconnect_abrupt, d_reset, d_free,
        d_post_send, d_post_rdma_write, d_post_recv, d_accept_with_ep, d_rsp_create,
        d_dup_source;
}
