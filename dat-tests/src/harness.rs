//! Common set-up of the cases: a [`Side`] (IA, PZ, EVDs, EP, LMR), a connected [`Pair`], and
//! waits for events with exact expectations. Every wait is bounded by [`WAIT`].

use std::time::{Duration, Instant};

use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EpAttr, EvdFlags, EventNumber,
    MemPriv, PspFlags, Qos, Timeout,
};
use dat::{
    ConnectFlags, Cr, DatError, DtoCompletion, Ep, EpParams, EpState, ErrorType, Evd, Event,
    EventData, Ia, Lmr, Pz, Sp, Subtype,
};

use crate::target::Target;

/// The bound of every wait for an event that must come (30 s). A connection request that
/// Soft-RoCE drops on a loaded host is resent by the kernel's CM only after its response
/// timeout (4.096 us x 2^20, about 4.3 s, per lost message), so 10 s was once too short in CI
/// (`no_device_resources_left_after_a_disconnect_storm`, no CR within 10 s, 1 run of many);
/// a case that passes waits no longer.
pub const WAIT: Timeout = Timeout(30_000_000);

/// The connect timeout of the cases that do not test timeouts: long enough never to fire.
pub const CONNECT_TIMEOUT: Timeout = Timeout(60_000_000);

/// Size of a side's default LMR.
pub const LMR_LEN: usize = 64 * 1024;

/// Queue length of a side's DTO EVDs.
pub const DTO_QLEN: i32 = 1024;

/// Bare `DAT_INVALID_STATE` (`0x0007_0000`): what `dat_cr_accept` returns for an EP in the
/// wrong state.
pub const BARE_ISE: DatError = DatError::bare(ErrorType::InvalidState, Subtype::NoSubtype);

/// `DAT_INVALID_STATE | DAT_INVALID_STATE_EP_UNCONNECTED`: a request post outside
/// CONNECTED/DISCONNECTED, whatever the state.
pub const UNC: DatError = DatError::invalid_state(Subtype::StateEpUnconnected);

/// `DAT_INVALID_STATE | subtype(state)`.
pub fn ise(state: EpState) -> DatError {
    DatError::invalid_state(state.invalid_state_subtype())
}

/// One end: an IA with a PZ, separate connection, CR, request and receive EVDs, an EP using
/// them and a registered buffer with every privilege.
pub struct Side {
    /// The IA.
    pub ia: Ia,
    /// Its protection zone.
    pub pz: Pz,
    /// Connection events of `ep`.
    pub conn: Evd,
    /// Connection requests of the service points the case creates.
    pub cr: Evd,
    /// Request completions of `ep`.
    pub req: Evd,
    /// Receive completions of `ep`.
    pub recv: Evd,
    /// The endpoint.
    pub ep: Ep,
    /// [`LMR_LEN`] bytes with [`MemPriv::ALL`].
    pub lmr: Lmr,
}

impl Side {
    /// Sets up a side on `ia` with the provider's default EP attributes.
    ///
    /// # Panics
    /// If any object cannot be created.
    pub fn new(ia: Ia) -> Side {
        Side::with_attr(ia, None)
    }

    /// Sets up a side whose EP has `attr`.
    ///
    /// # Panics
    /// If any object cannot be created.
    pub fn with_attr(ia: Ia, attr: Option<&EpAttr>) -> Side {
        let pz = ia.create_pz().expect("create_pz");
        let conn = ia
            .create_evd(16, EvdFlags::CONNECTION, None)
            .expect("connection EVD");
        let cr = ia.create_evd(16, EvdFlags::CR, None).expect("CR EVD");
        // Request completions and RMR bind completions share the request EVD, as OFA
        // consumers set it up.
        let req = ia
            .create_evd(DTO_QLEN, EvdFlags::DTO | EvdFlags::RMR_BIND, None)
            .expect("request EVD");
        let recv = ia
            .create_evd(DTO_QLEN, EvdFlags::DTO, None)
            .expect("receive EVD");
        let ep = ia
            .create_ep(&EpParams {
                pz: Some(&pz),
                recv_evd: Some(&recv),
                request_evd: Some(&req),
                connect_evd: Some(&conn),
                attr,
                ..EpParams::default()
            })
            .expect("create_ep");
        let lmr = pz.alloc(LMR_LEN, MemPriv::ALL).expect("alloc LMR");
        Side {
            ia,
            pz,
            conn,
            cr,
            req,
            recv,
            ep,
            lmr,
        }
    }

    /// Another EP on this side's PZ and EVDs.
    ///
    /// # Panics
    /// If it cannot be created.
    pub fn another_ep(&self) -> Ep {
        self.ia.create_ep(&self.ep_params()).expect("create_ep")
    }

    /// The parameters of this side's EP (PZ and the three EVDs).
    pub fn ep_params(&self) -> EpParams<'_> {
        EpParams {
            pz: Some(&self.pz),
            recv_evd: Some(&self.recv),
            request_evd: Some(&self.req),
            connect_evd: Some(&self.conn),
            ..EpParams::default()
        }
    }

    /// A consumer-flag PSP on a fresh qualifier, delivering to [`Side::cr`].
    ///
    /// # Panics
    /// If it cannot be created.
    pub fn psp(&self, t: &dyn Target) -> Sp {
        self.ia
            .create_psp(t.qual(), &self.cr, PspFlags::Consumer)
            .expect("create_psp")
    }

    /// The IA address.
    pub fn addr(&self) -> dat::types::IaAddress {
        self.ia.attr().ia_address
    }

    /// The default EP attributes of this IA, with both queue depths raised to `depth`.
    ///
    /// # Panics
    /// If the EP cannot be queried.
    pub fn deep_attr(&self, depth: u32) -> EpAttr {
        let mut a = self.ep.query().expect("ep query").config.attr;
        a.max_recv_dtos = depth;
        a.max_request_dtos = depth;
        a
    }
}

/// Two connected sides: `a` connected to `b`'s PSP on `qual`, `b` accepted on its own EP.
pub struct Pair {
    /// The active side.
    pub a: Side,
    /// The passive side.
    pub b: Side,
    /// The qualifier `b` listens on.
    pub qual: ConnQual,
    /// `b`'s PSP (still listening).
    pub psp: Sp,
}

/// Two unconnected sides on a fresh pair of IAs.
pub fn sides(t: &dyn Target) -> (Side, Side) {
    let (a, b) = t.open_pair();
    (Side::new(a), Side::new(b))
}

/// A connected pair with default attributes.
pub fn pair(t: &dyn Target) -> Pair {
    let (a, b) = sides(t);
    connect(t, a, b)
}

/// A connected pair whose EPs take `depth` outstanding DTOs each way.
pub fn deep_pair(t: &dyn Target, depth: u32) -> Pair {
    let (ia_a, ia_b) = t.open_pair();
    let probe = Side::new(ia_a.clone());
    let attr = probe.deep_attr(depth);
    let a = Side::with_attr(ia_a, Some(&attr));
    let b = Side::with_attr(ia_b, Some(&attr));
    connect(t, a, b)
}

/// Connects `a.ep` to `b.ep` through a PSP of `b`, checking every event on the way.
///
/// # Panics
/// If any step deviates from the expected events and states.
pub fn connect(t: &dyn Target, a: Side, b: Side) -> Pair {
    let psp = b.psp(t);
    let qual = psp.conn_qual();
    connect_ep(&a.ep, &b.addr(), qual, b"");
    let cr = expect_cr(&b.ia, &b.cr, &psp);
    cr.accept(Some(&b.ep), b"").expect("accept");
    expect_conn(&a.conn, EventNumber::Established, &a.ep);
    expect_conn(&b.conn, EventNumber::Established, &b.ep);
    assert_eq!(a.ep.state(), Ok(EpState::Connected));
    assert_eq!(b.ep.state(), Ok(EpState::Connected));
    Pair { a, b, qual, psp }
}

/// `ep.connect` with [`CONNECT_TIMEOUT`], best effort, default flags; asserts success.
///
/// # Panics
/// If the call fails.
pub fn connect_ep(ep: &Ep, remote: &dat::types::IaAddress, qual: ConnQual, pdata: &[u8]) {
    ep.connect(
        *remote,
        qual,
        CONNECT_TIMEOUT,
        pdata,
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .expect("connect");
}

/// Connects a fresh EP of `a` to `b`'s `psp` and accepts it on a fresh EP of `b`.
///
/// # Panics
/// If any step fails.
pub fn connect_more(a: &Side, b: &Side, psp: &Sp) -> (Ep, Ep) {
    let ea = a.another_ep();
    let eb = b.another_ep();
    connect_ep(&ea, &b.addr(), psp.conn_qual(), b"");
    let cr = expect_cr(&b.ia, &b.cr, psp);
    cr.accept(Some(&eb), b"").expect("accept");
    expect_conn(&a.conn, EventNumber::Established, &ea);
    expect_conn(&b.conn, EventNumber::Established, &eb);
    (ea, eb)
}

/// Waits (bounded by [`WAIT`]) for the next event of `evd`.
///
/// # Panics
/// If no event arrives in time.
pub fn next_event(evd: &Evd) -> Event {
    match evd.wait(WAIT, 1) {
        Ok((ev, _)) => ev,
        Err(e) => panic!("no event on {evd:?} within {WAIT:?}: {e}"),
    }
}

/// The next event must be the connection event `number` for `ep`; returns its private data.
///
/// # Panics
/// On any other event or none.
pub fn expect_conn(evd: &Evd, number: EventNumber, ep: &Ep) -> Box<[u8]> {
    let ev = next_event(evd);
    assert_eq!(ev.number, number, "unexpected connection event {ev:?}");
    match &ev.data {
        EventData::Connection {
            ep: id,
            private_data,
        } => {
            assert_eq!(*id, ep.id(), "connection event for another EP: {ev:?}");
            private_data.clone()
        }
        other => panic!("not connection event data: {other:?}"),
    }
}

/// The next event must be a connection request on `sp`; returns the pending request.
///
/// # Panics
/// On any other event or none.
pub fn expect_cr(ia: &Ia, evd: &Evd, sp: &Sp) -> Cr {
    let ev = next_event(evd);
    assert_eq!(ev.number, EventNumber::ConnectionRequest, "{ev:?}");
    let EventData::ConnectionRequest {
        sp: sp_id,
        conn_qual,
        cr,
    } = ev.data
    else {
        panic!("not CR event data: {ev:?}")
    };
    assert_eq!(sp_id, sp.id(), "request for another service point");
    assert_eq!(conn_qual, sp.conn_qual(), "request names another qualifier");
    ia.cr(cr).expect("the CR of the event is pending")
}

/// The next event must be a DTO completion.
///
/// # Panics
/// On any other event or none.
pub fn expect_dto(evd: &Evd) -> DtoCompletion {
    let ev = next_event(evd);
    assert_eq!(ev.number, EventNumber::DtoCompletion, "{ev:?}");
    match ev.data {
        EventData::Dto(c) => c,
        other => panic!("not DTO data: {other:?}"),
    }
}

/// The next completion must be exactly this one.
///
/// # Panics
/// If it differs.
pub fn expect_completion(
    evd: &Evd,
    ep: &Ep,
    cookie: u64,
    status: DtoStatus,
    op: DtoOp,
    len: u32,
) -> DtoCompletion {
    let c = expect_dto(evd);
    assert_eq!(
        (c.ep, c.cookie, c.status, c.operation),
        (ep.id(), Cookie(cookie), status, op),
        "completion {c:?}"
    );
    if status == DtoStatus::Success {
        assert_eq!(c.transferred_length, len, "transferred length of {c:?}");
    }
    c
}

/// `dat_evd_dequeue` must report the empty queue (exactly `0x000D0000`).
///
/// # Panics
/// If an event is queued.
pub fn assert_empty(evd: &Evd) {
    match evd.dequeue() {
        Err(e) => assert_eq!(e.to_raw(), 0x000D_0000, "{e}"),
        Ok(ev) => panic!("unexpected event {ev:?}"),
    }
}

/// Polls until `ep` is in `state` (driving progress), bounded by [`WAIT`].
///
/// # Panics
/// If the state is not reached in time.
pub fn wait_state(ia: &Ia, ep: &Ep, state: EpState) {
    let deadline = Instant::now() + Duration::from_micros(u64::from(WAIT.0));
    loop {
        let now = ep.state();
        if now == Ok(state) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "EP never reached {state:?} (is {now:?})"
        );
        if !ia.progress() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Posts a receive of `len` bytes at `off` of `s.lmr` with `cookie`.
///
/// # Panics
/// If the post fails.
pub fn post_recv(s: &Side, ep: &Ep, off: u64, len: u32, cookie: u64) {
    ep.post_recv(
        &[s.lmr.triplet(off, len)],
        Cookie(cookie),
        CompletionFlags::DEFAULT,
    )
    .expect("post_recv");
}

/// Posts a send of `len` bytes at `off` of `s.lmr` with `cookie`.
///
/// # Panics
/// If the post fails.
pub fn post_send(s: &Side, ep: &Ep, off: u64, len: u32, cookie: u64) {
    ep.post_send(
        &[s.lmr.triplet(off, len)],
        Cookie(cookie),
        CompletionFlags::DEFAULT,
    )
    .expect("post_send");
}

/// A deterministic byte pattern (`seed` selects it).
pub fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Reads `len` bytes at `off` of `lmr`.
///
/// # Panics
/// If the range is outside the LMR.
pub fn read(lmr: &Lmr, off: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    lmr.read(off, &mut v).expect("lmr read");
    v
}

/// Disconnects `p.a` gracefully and checks both sides end DISCONNECTED with the event.
///
/// # Panics
/// If anything deviates.
pub fn disconnect_pair(p: &Pair) {
    p.a.ep.disconnect(CloseFlags::Graceful).expect("disconnect");
    expect_conn(&p.a.conn, EventNumber::Disconnected, &p.a.ep);
    expect_conn(&p.b.conn, EventNumber::Disconnected, &p.b.ep);
    assert_eq!(p.a.ep.state(), Ok(EpState::Disconnected));
    assert_eq!(p.b.ep.state(), Ok(EpState::Disconnected));
}

/// `ep.connect` (as [`connect_ep`]) must fail with `err`.
///
/// # Panics
/// If it returns anything else.
pub fn connect_ep_err(ep: &Ep, remote: &dat::types::IaAddress, qual: ConnQual, err: DatError) {
    assert_eq!(
        ep.connect(
            *remote,
            qual,
            CONNECT_TIMEOUT,
            b"",
            Qos::BestEffort,
            ConnectFlags::Default
        ),
        Err(err)
    );
}

/// The voluntary context switches (sleeps) of the task whose `/proc/.../status` file is
/// `status` (`/proc/thread-self/status` for the calling thread); `None` if it cannot be read
/// (the task has exited).
pub fn voluntary_switches(status: &std::path::Path) -> Option<u64> {
    std::fs::read_to_string(status)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .and_then(|v| v.trim().parse().ok())
}
