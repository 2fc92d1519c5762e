//! The engine in memory: two engines joined by byte pipes, a virtual clock, real memory
//! tables. Every frame kind and every error path of the protocol.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use dat_core::mem::{Buffer, MemTable, SegList};
use dat_core::provider::{CmFact, PostOp, WorkRequest};
use dat_core::types::{
    CompletionFlags, Cookie, DtoOp, DtoStatus, LmrId, LmrTriplet, MemPriv, PzId, RmrTriplet, VaType,
};

use super::*;
use crate::wire::{self, Frame};

const PZ: PzId = PzId(1);
const RNR: Duration = Duration::from_millis(50);

/// One side: an engine, its memory, bytes received but not yet used, facts reported.
struct Side {
    e: Engine,
    mem: SharedMemTable,
    inbox: Vec<u8>,
    events: Vec<Event>,
    next_lmr: u32,
}

impl Side {
    fn new() -> Side {
        let mem: SharedMemTable = Arc::new(RwLock::new(MemTable::new()));
        let e = Engine::new(EngineConfig {
            mem: mem.clone(),
            pz: Some(PZ),
            srq: None,
            rnr_timeout: RNR,
        });
        Side {
            e,
            mem,
            inbox: Vec::new(),
            events: Vec::new(),
            next_lmr: 0,
        }
    }

    /// Registers `bytes` with every privilege; returns (lmr_context, rmr_context, address).
    fn register(&mut self, bytes: &[u8]) -> (u32, u32, u64) {
        self.register_in(bytes, PZ, MemPriv::ALL)
    }

    fn register_in(&mut self, bytes: &[u8], pz: PzId, privs: MemPriv) -> (u32, u32, u64) {
        self.next_lmr += 1;
        let buf = Arc::new(Buffer::from_vec(bytes.to_vec()));
        let r = self
            .mem
            .write()
            .unwrap()
            .register(LmrId(self.next_lmr), pz, buf, privs, VaType::Va)
            .unwrap();
        (r.lmr_context, r.rmr_context.unwrap_or(0), r.start)
    }

    fn read(&self, lmr_context: u32) -> Vec<u8> {
        self.mem
            .read()
            .unwrap()
            .lmr(lmr_context)
            .unwrap()
            .buf
            .to_vec()
    }

    fn wr(&self, op: PostOp, iov: &[LmrTriplet], cookie: u64) -> WorkRequest {
        let mem = self.mem.read().unwrap();
        let segs: SegList = iov
            .iter()
            .filter(|t| t.segment_length > 0)
            .map(|t| mem.local(PZ, t, op.local_privilege()).unwrap())
            .collect();
        WorkRequest {
            op,
            segs,
            cookie: Cookie(cookie),
            flags: CompletionFlags::DEFAULT,
        }
    }

    fn take(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }
}

fn tri(lmr: (u32, u32, u64), off: u64, len: u32) -> LmrTriplet {
    LmrTriplet {
        lmr_context: lmr.0,
        virtual_address: lmr.2 + off,
        segment_length: len,
    }
}

fn rtri(lmr: (u32, u32, u64), off: u64, len: u32) -> RmrTriplet {
    RmrTriplet {
        rmr_context: lmr.1,
        virtual_address: lmr.2 + off,
        segment_length: len,
    }
}

fn done(cookie: u64, status: DtoStatus, len: u32, op: DtoOp) -> Event {
    Event::Completion(Completion {
        cookie: Cookie(cookie),
        status,
        transferred_length: len,
        op,
        flags: CompletionFlags::DEFAULT,
    })
}

fn established(pd: &[u8]) -> Event {
    Event::Cm(CmFact::Established {
        private_data: pd.into(),
    })
}

/// Two engines joined by in-memory pipes and a virtual clock.
struct Pair {
    a: Side,
    b: Side,
    now: Instant,
    /// Bytes each side wrote, for checks of what went over the wire.
    wire_ab: Vec<u8>,
    wire_ba: Vec<u8>,
}

fn transfer(from: &mut Side, to: &mut Side, now: Instant, log: &mut Vec<u8>) -> bool {
    let mut moved = false;
    loop {
        let out = from.e.poll_transmit();
        if out.is_empty() {
            break;
        }
        let n = out.len();
        to.inbox.extend_from_slice(out);
        log.extend_from_slice(out);
        from.e.advance_transmit(n);
        moved = true;
    }
    let used = to.e.handle_input(now, &to.inbox);
    to.inbox.drain(..used);
    moved |= used > 0;
    for s in [from, to] {
        while let Some(ev) = s.e.poll_event() {
            s.events.push(ev);
            moved = true;
        }
    }
    moved
}

impl Pair {
    fn new() -> Pair {
        Pair {
            a: Side::new(),
            b: Side::new(),
            now: Instant::now(),
            wire_ab: Vec::new(),
            wire_ba: Vec::new(),
        }
    }

    /// Moves bytes both ways until nothing moves.
    fn run(&mut self) {
        for _ in 0..10_000 {
            let x = transfer(&mut self.a, &mut self.b, self.now, &mut self.wire_ab);
            let y = transfer(&mut self.b, &mut self.a, self.now, &mut self.wire_ba);
            if !x && !y {
                return;
            }
        }
        panic!("the pair never went quiet");
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        for s in [&mut self.a, &mut self.b] {
            s.e.handle_timeout(self.now);
            while let Some(ev) = s.e.poll_event() {
                s.events.push(ev);
            }
        }
    }

    /// A connects with `pd_a`, B reads the request and accepts with `pd_b`.
    fn connect_with(pd_a: &[u8], pd_b: &[u8]) -> Pair {
        let mut p = Pair::new();
        p.a.e.connect(45248, pd_a, None);
        let bytes = p.a.e.poll_transmit().to_vec();
        p.a.e.advance_transmit(bytes.len());
        let (req, used) = parse_request(&bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len());
        assert_eq!(req.qual, 45248);
        assert_eq!(req.rnr_timeout, RNR);
        assert_eq!(&*req.private_data, pd_a);
        p.b.e.accept(req.rnr_timeout, pd_b);
        p.run();
        assert_eq!(p.a.take(), vec![established(pd_b)]);
        assert_eq!(p.b.take(), vec![established(&[])]);
        assert!(p.a.e.is_connected() && p.b.e.is_connected());
        p
    }

    fn connected() -> Pair {
        Pair::connect_with(b"hello", b"welcome")
    }
}

#[test]
fn connect_and_accept_carry_private_data_both_ways() {
    let pd_a: Vec<u8> = (0..=255u8).chain(0..44).collect();
    let pd_b: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
    let p = Pair::connect_with(&pd_a, &pd_b);
    assert_eq!(p.a.e.poll_timeout(), None);
}

#[test]
fn reject_carries_private_data_and_returns_to_idle() {
    let mut p = Pair::new();
    let mut recvbuf = Side::new();
    let lmr = recvbuf.register(&[0; 8]);
    p.a.e.post(recvbuf.wr(PostOp::Recv, &[tri(lmr, 0, 8)], 1));
    p.a.e.connect(7, b"x", None);
    let mut rej = Vec::new();
    encode_reject(b"go away", &mut rej);
    let used = p.a.e.handle_input(p.now, &rej);
    assert_eq!(used, rej.len());
    assert_eq!(
        p.a.e.poll_event(),
        Some(Event::Cm(CmFact::PeerRejected {
            private_data: (*b"go away").into()
        }))
    );
    // The receive posted before connecting is kept (not flushed) for the next attempt.
    assert_eq!(p.a.e.poll_event(), None);
    assert!(p.a.e.is_closed() && !p.a.e.is_active());
    assert!(p.a.e.poll_transmit().is_empty());
}

#[test]
fn connect_timeout_fires_at_the_deadline_only() {
    let mut p = Pair::new();
    let deadline = p.now + Duration::from_millis(100);
    p.a.e.connect(1, &[], Some(deadline));
    assert_eq!(p.a.e.poll_timeout(), Some(deadline));
    p.advance(Duration::from_millis(99));
    assert!(p.a.take().is_empty());
    p.advance(Duration::from_millis(1));
    assert_eq!(p.a.take(), vec![Event::Cm(CmFact::TimedOut)]);
    assert_eq!(p.a.e.poll_timeout(), None);
    assert!(p.a.e.is_closed());
    // A late accept after the timeout is an unexpected frame: ignored by a closed engine.
    let mut acc = Vec::new();
    Frame::Accept {
        rnr_timeout_ms: 1,
        private_data: &[],
    }
    .emit(0, &mut acc);
    assert_eq!(p.a.e.handle_input(p.now, &acc), 0);
    assert_eq!(p.a.e.poll_event(), None);
}

#[test]
fn transport_failures_while_connecting() {
    for (err, fact) in [
        (TransportError::Refused, CmFact::NonPeerRejected),
        (TransportError::Unreachable, CmFact::Unreachable),
        (TransportError::Lost, CmFact::NonPeerRejected),
    ] {
        let mut s = Side::new();
        s.e.connect(1, &[], None);
        s.e.handle_transport_error(err);
        assert_eq!(s.e.poll_event(), Some(Event::Cm(fact)));
        assert!(s.e.poll_transmit().is_empty());
    }
    // The passive side losing the requester before the RTU.
    let mut s = Side::new();
    s.e.accept(RNR, b"pd");
    s.e.handle_transport_error(TransportError::Lost);
    assert_eq!(
        s.e.poll_event(),
        Some(Event::Cm(CmFact::AcceptCompletionError))
    );
}

#[test]
fn unexpected_first_answer_is_a_non_peer_reject() {
    let mut s = Side::new();
    s.e.connect(1, &[], None);
    let mut rtu = Vec::new();
    Frame::Rtu.emit(0, &mut rtu);
    s.e.handle_input(Instant::now(), &rtu);
    assert_eq!(s.e.poll_event(), Some(Event::Cm(CmFact::NonPeerRejected)));
    // A request that is not a ConnReq is refused by the passive parser.
    assert!(parse_request(&rtu).is_err());
    assert_eq!(parse_request(&rtu[..5]), Ok(None));
}

#[test]
fn send_gathers_and_receive_scatters() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcdefghij");
    let dst = p.b.register(&[0u8; 16]);
    // Gather "abc" + "" + "ghij" into a receive of 2 + 3 + 8 bytes (the last partly used).
    p.b.e.post(p.b.wr(
        PostOp::Recv,
        &[tri(dst, 0, 2), tri(dst, 4, 3), tri(dst, 8, 8)],
        10,
    ));
    p.a.e.post(p.a.wr(
        PostOp::Send,
        &[tri(src, 0, 3), tri(src, 3, 0), tri(src, 6, 4)],
        20,
    ));
    p.run();
    assert_eq!(
        p.b.take(),
        vec![done(10, DtoStatus::Success, 7, DtoOp::Receive)]
    );
    assert_eq!(
        p.a.take(),
        vec![done(20, DtoStatus::Success, 7, DtoOp::Send)]
    );
    assert_eq!(&p.b.read(dst.0), b"ab\0\0cgh\0ij\0\0\0\0\0\0");
}

#[test]
fn zero_length_send_consumes_a_receive() {
    let mut p = Pair::connected();
    let dst = p.b.register(&[5u8; 4]);
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[], 2));
    p.run();
    assert_eq!(
        p.b.take(),
        vec![done(1, DtoStatus::Success, 0, DtoOp::Receive)]
    );
    assert_eq!(
        p.a.take(),
        vec![done(2, DtoStatus::Success, 0, DtoOp::Send)]
    );
    assert_eq!(p.b.read(dst.0), vec![5u8; 4]);
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn large_messages_travel_in_pieces() {
    let mut p = Pair::connected();
    let big = pattern(300 * 1024 + 7, 3);
    let n = big.len() as u32;
    let src = p.a.register(&big);
    let dst = p.b.register(&vec![0u8; big.len()]);
    // Send and receive.
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, n)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, n)], 2));
    p.run();
    assert_eq!(
        p.b.take(),
        vec![done(1, DtoStatus::Success, n, DtoOp::Receive)]
    );
    assert_eq!(
        p.a.take(),
        vec![done(2, DtoStatus::Success, n, DtoOp::Send)]
    );
    assert_eq!(p.b.read(dst.0), big);
    // RDMA write of another pattern, then RDMA read back into a fresh buffer.
    let big2 = pattern(big.len(), 9);
    let src2 = p.a.register(&big2);
    let back = p.a.register(&vec![0u8; big.len()]);
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(dst, 0, n)), &[tri(src2, 0, n)], 3));
    p.a.e
        .post(p.a.wr(PostOp::RdmaRead(rtri(dst, 0, n)), &[tri(back, 0, n)], 4));
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(3, DtoStatus::Success, n, DtoOp::RdmaWrite),
            done(4, DtoStatus::Success, n, DtoOp::RdmaRead)
        ]
    );
    assert!(p.b.take().is_empty(), "one-sided: nothing at the target");
    assert_eq!(p.b.read(dst.0), big2);
    assert_eq!(p.a.read(back.0), big2);
}

#[test]
fn rdma_read_scatters_into_a_local_list_and_completions_keep_posting_order() {
    let mut p = Pair::connected();
    let remote = p.b.register(b"0123456789");
    let local = p.a.register(&[0u8; 12]);
    let dst = p.b.register(&[0u8; 4]);
    let src = p.a.register(b"ping");
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 9));
    p.a.e.post(p.a.wr(
        PostOp::RdmaRead(rtri(remote, 2, 6)),
        &[tri(local, 0, 2), tri(local, 6, 4)],
        1,
    ));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 2));
    p.a.e
        .post(p.a.wr(PostOp::RdmaRead(rtri(remote, 0, 0)), &[], 3));
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(1, DtoStatus::Success, 6, DtoOp::RdmaRead),
            done(2, DtoStatus::Success, 4, DtoOp::Send),
            done(3, DtoStatus::Success, 0, DtoOp::RdmaRead),
        ]
    );
    assert_eq!(&p.a.read(local.0), b"23\0\0\0\x004567\0\0");
    assert_eq!(
        p.b.take(),
        vec![done(9, DtoStatus::Success, 4, DtoOp::Receive)]
    );
}

#[test]
fn acknowledgements_are_coalesced_per_batch() {
    let mut p = Pair::connected();
    let src = p.a.register(b"x");
    let dst = p.b.register(&[0u8; 16]);
    for i in 0..10 {
        p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, i, 1)], i));
        p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 100 + i));
    }
    p.wire_ba.clear();
    p.run();
    assert_eq!(p.a.take().len(), 10);
    assert_eq!(p.b.take().len(), 10);
    // B answered ten sends with one bare ack of the last MSN.
    let (frames, err) = wire::parse_all(&p.wire_ba);
    assert_eq!((frames, err), (1, None));
    let d = Frame::parse(&p.wire_ba).unwrap().unwrap();
    assert_eq!((d.frame, d.ack), (Frame::Ack, 10));
    // A reply piggy-backs the ack: no bare ack follows it.
    let pong = p.b.register(b"y");
    let back = p.a.register(&[0u8; 1]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(back, 0, 1)], 50));
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 1)], 51));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 52));
    transfer(&mut p.a, &mut p.b, p.now, &mut p.wire_ab);
    p.b.e.post(p.b.wr(PostOp::Send, &[tri(pong, 0, 1)], 53));
    p.wire_ba.clear();
    p.run();
    let d = Frame::parse(&p.wire_ba).unwrap().unwrap();
    assert!(matches!(d.frame, Frame::Send { msn: 1, .. }));
    assert_eq!(d.ack, 11);
    assert_eq!(
        p.a.take(),
        vec![
            done(52, DtoStatus::Success, 1, DtoOp::Send),
            done(50, DtoStatus::Success, 1, DtoOp::Receive)
        ]
    );
}

#[test]
fn receive_too_small_is_local_length_and_breaks_both_sides() {
    let mut p = Pair::connected();
    let src = p.a.register(b"0123456789");
    let dst = p.b.register(&[0u8; 8]);
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 4, 4)], 2));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 10)], 3));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 4));
    p.run();
    assert_eq!(
        p.b.take(),
        vec![
            done(1, DtoStatus::LocalLength, 0, DtoOp::Receive),
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert_eq!(
        p.a.take(),
        vec![
            done(3, DtoStatus::RemoteResponder, 0, DtoOp::Send),
            Event::Cm(CmFact::Broken),
            done(4, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    assert_eq!(p.b.read(dst.0), vec![0u8; 8]);
    assert!(p.a.e.is_closed() && p.b.e.is_closed());
}

/// Every protection failure of an incoming RDMA: the requester gets REMOTE_ACCESS, both
/// sides break, and no byte of the target changes.
#[test]
fn remote_access_errors_touch_nothing_and_break_both_sides() {
    type Case = fn(&mut Side) -> (u32, u32, u64);
    let cases: [(&str, Case, bool); 6] = [
        (
            "unknown rkey",
            |s| {
                let r = s.register(&[7u8; 16]);
                (r.0, r.1 ^ 0x5a5a_5a5a, r.2)
            },
            true,
        ),
        (
            "out of bounds",
            |s| {
                let r = s.register(&[7u8; 16]);
                (r.0, r.1, r.2 + 12)
            },
            true,
        ),
        (
            "wrong protection zone",
            |s| s.register_in(&[7u8; 16], PzId(2), MemPriv::ALL),
            true,
        ),
        (
            "no remote write",
            |s| s.register_in(&[7u8; 16], PZ, MemPriv::LOCAL_READ | MemPriv::REMOTE_READ),
            true,
        ),
        (
            "no remote read",
            |s| s.register_in(&[7u8; 16], PZ, MemPriv::LOCAL_READ | MemPriv::REMOTE_WRITE),
            false,
        ),
        (
            "unknown rkey (read)",
            |s| {
                let r = s.register(&[7u8; 16]);
                (r.0, r.1.wrapping_add(1), r.2)
            },
            false,
        ),
    ];
    for (name, make, write) in cases {
        let mut p = Pair::connected();
        let target = make(&mut p.b);
        let local = p.a.register(&[1u8; 8]);
        let before = p.a.wr(
            PostOp::RdmaWrite(rtri(p.b.register(&[0; 8]), 0, 8)),
            &[tri(local, 0, 8)],
            1,
        );
        p.a.e.post(before);
        let op = if write {
            PostOp::RdmaWrite(rtri(target, 0, 8))
        } else {
            PostOp::RdmaRead(rtri(target, 0, 8))
        };
        let dto = op.dto_op();
        p.a.e.post(p.a.wr(op, &[tri(local, 0, 8)], 2));
        p.a.e.post(p.a.wr(PostOp::Send, &[tri(local, 0, 1)], 3));
        let r = p.b.register(&[0; 1]);
        p.b.e.post(p.b.wr(PostOp::Recv, &[tri(r, 0, 1)], 4));
        p.run();
        assert_eq!(
            p.a.take(),
            vec![
                done(1, DtoStatus::Success, 8, DtoOp::RdmaWrite),
                done(2, DtoStatus::RemoteAccess, 0, dto),
                Event::Cm(CmFact::Broken),
                done(3, DtoStatus::Flushed, 0, DtoOp::Send),
            ],
            "{name}"
        );
        assert_eq!(
            p.b.take(),
            vec![
                Event::Cm(CmFact::Broken),
                done(4, DtoStatus::Flushed, 0, DtoOp::Receive)
            ],
            "{name}"
        );
        assert_eq!(p.b.read(target.0), vec![7u8; 16], "{name}");
        assert_eq!(p.a.read(local.0), vec![1u8; 8], "{name}");
    }
}

#[test]
fn send_waits_for_a_receive_then_completes() {
    let mut p = Pair::connected();
    let src = p.a.register(b"data");
    let dst = p.b.register(&[0u8; 4]);
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    p.run();
    assert!(p.b.e.is_parked());
    assert_eq!(p.b.e.poll_timeout(), Some(p.now + RNR));
    p.advance(RNR - Duration::from_millis(1));
    assert!(p.a.take().is_empty() && p.b.take().is_empty());
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 2));
    p.run();
    assert!(!p.b.e.is_parked());
    assert_eq!(p.b.e.poll_timeout(), None);
    assert_eq!(
        p.b.take(),
        vec![done(2, DtoStatus::Success, 4, DtoOp::Receive)]
    );
    assert_eq!(
        p.a.take(),
        vec![done(1, DtoStatus::Success, 4, DtoOp::Send)]
    );
    assert_eq!(&p.b.read(dst.0), b"data");
}

#[test]
fn receiver_not_ready_after_the_timeout() {
    let mut p = Pair::connected();
    let src = p.a.register(b"data");
    let dst = p.b.register(&[0u8; 4]);
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 2)], 2));
    p.run();
    p.advance(RNR);
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(1, DtoStatus::ReceiverNotReady, 0, DtoOp::Send),
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Broken)]);
    // A receive posted afterwards is flushed at once.
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 3));
    assert_eq!(
        p.b.e.poll_event(),
        Some(done(3, DtoStatus::Flushed, 0, DtoOp::Receive))
    );
}

#[test]
fn srq_receives_are_shared_between_engines() {
    let srq: SharedSrq = Arc::new(Mutex::new(VecDeque::new()));
    let mut p1 = Pair::connected();
    let mut p2 = Pair::connected();
    // Both B sides take receives from one SRQ in B1's memory table.
    let dst = p1.b.register(&[0u8; 8]);
    p1.b.e.set_binding(Some(PZ), Some(srq.clone()));
    p2.b.e.set_binding(Some(PZ), Some(srq.clone()));
    p2.b.e.cfg.mem = p1.b.mem.clone();
    srq.lock()
        .unwrap()
        .push_back(p1.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    srq.lock()
        .unwrap()
        .push_back(p1.b.wr(PostOp::Recv, &[tri(dst, 4, 4)], 2));
    let s1 = p1.a.register(b"one!");
    let s2 = p2.a.register(b"two!");
    p2.a.e.post(p2.a.wr(PostOp::Send, &[tri(s2, 0, 4)], 3));
    p2.run();
    p1.a.e.post(p1.a.wr(PostOp::Send, &[tri(s1, 0, 4)], 4));
    p1.run();
    assert_eq!(
        p2.b.take(),
        vec![done(1, DtoStatus::Success, 4, DtoOp::Receive)]
    );
    assert_eq!(
        p1.b.take(),
        vec![done(2, DtoStatus::Success, 4, DtoOp::Receive)]
    );
    assert_eq!(&p1.b.read(dst.0), b"two!one!");
    // An empty SRQ parks the next send until the SRQ gets a receive.
    p1.a.e.post(p1.a.wr(PostOp::Send, &[tri(s1, 0, 4)], 5));
    p1.run();
    assert!(p1.b.e.is_parked());
    srq.lock()
        .unwrap()
        .push_back(p1.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 6));
    p1.run();
    assert_eq!(
        p1.b.take(),
        vec![done(6, DtoStatus::Success, 4, DtoOp::Receive)]
    );
}

#[test]
fn malformed_frame_breaks_the_connection_and_flushes() {
    let mut p = Pair::connected();
    let src = p.a.register(b"x");
    let dst = p.a.register(&[0u8; 1]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 1)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 2));
    let _ = p.a.e.poll_transmit();
    for garbage in [
        &[0xffu8; 12][..],
        &[6, 1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0],
    ] {
        let mut s = Pair::connected();
        s.a.e.handle_input(s.now, garbage);
        assert_eq!(s.a.e.poll_event(), Some(Event::Cm(CmFact::Broken)));
    }
    // A well-formed frame out of sequence (a piece without a first piece) breaks too.
    let mut bad = Vec::new();
    Frame::Send {
        msn: 1,
        total: 4,
        flags: wire::LAST,
        payload: b"abcd",
    }
    .emit(0, &mut bad);
    p.a.e.handle_input(p.now, &bad);
    let evs: Vec<Event> = std::iter::from_fn(|| p.a.e.poll_event()).collect();
    assert_eq!(
        evs,
        vec![
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Send),
            done(1, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert!(p.a.e.is_closed());
    // An acknowledgement of a request never sent breaks a connection as well.
    let mut q = Pair::connected();
    let mut ack = Vec::new();
    Frame::Ack.emit(5, &mut ack);
    q.a.e.handle_input(q.now, &ack);
    assert_eq!(q.a.e.poll_event(), Some(Event::Cm(CmFact::Broken)));
}

#[test]
fn graceful_disconnect_reports_successes_first_then_flushes() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.b.register(&[0u8; 8]);
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 4, 4)], 2));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 3));
    p.run();
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 4));
    p.a.e.disconnect();
    p.run();
    assert_eq!(
        p.a.take(),
        vec![
            done(3, DtoStatus::Success, 4, DtoOp::Send),
            Event::Cm(CmFact::Disconnected),
            done(4, DtoStatus::Flushed, 0, DtoOp::Send),
        ]
    );
    // B executed the send that went out before the Disconnect; the second send was still
    // queued at A and was flushed there (as a QP moved to the error state flushes).
    assert_eq!(
        p.b.take(),
        vec![
            done(1, DtoStatus::Success, 4, DtoOp::Receive),
            Event::Cm(CmFact::Disconnected),
            done(2, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    assert!(p.a.e.is_closed() && p.b.e.is_closed());
    assert!(p.a.e.poll_transmit().is_empty());
}

#[test]
fn lost_stream_breaks_and_flushes_in_posting_order() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.a.register(&[0u8; 4]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 4)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 2));
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(src, 0, 4)), &[tri(src, 0, 4)], 3));
    p.a.e.handle_transport_error(TransportError::Lost);
    let evs: Vec<Event> = std::iter::from_fn(|| p.a.e.poll_event()).collect();
    assert_eq!(
        evs,
        vec![
            Event::Cm(CmFact::Broken),
            done(2, DtoStatus::Flushed, 0, DtoOp::Send),
            done(3, DtoStatus::Flushed, 0, DtoOp::RdmaWrite),
            done(1, DtoStatus::Flushed, 0, DtoOp::Receive),
        ]
    );
    // Posts after the loss are flushed at once.
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 4));
    assert_eq!(
        p.a.e.poll_event(),
        Some(done(4, DtoStatus::Flushed, 0, DtoOp::Send))
    );
}

#[test]
fn keepalive_is_harmless_and_reset_allows_a_new_connection() {
    let mut p = Pair::connected();
    let mut ka = Vec::new();
    Frame::Keepalive.emit(0, &mut ka);
    assert_eq!(p.a.e.handle_input(p.now, &ka), ka.len());
    assert_eq!(p.a.e.poll_event(), None);
    p.a.e.disconnect();
    p.run();
    assert_eq!(p.a.take(), vec![Event::Cm(CmFact::Disconnected)]);
    assert_eq!(p.b.take(), vec![Event::Cm(CmFact::Disconnected)]);
    // Reuse both ends for a second connection.
    p.a.e.reset();
    p.b.e.reset();
    p.a.e.connect(2, b"again", None);
    let bytes = p.a.e.poll_transmit().to_vec();
    p.a.e.advance_transmit(bytes.len());
    let (req, _) = parse_request(&bytes).unwrap().unwrap();
    p.b.e.accept(req.rnr_timeout, b"ok");
    p.run();
    assert_eq!(p.a.take(), vec![established(b"ok")]);
    let src = p.a.register(b"z");
    let dst = p.b.register(&[0u8; 1]);
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 1)], 1));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 2));
    p.run();
    assert_eq!(
        p.a.take(),
        vec![done(2, DtoStatus::Success, 1, DtoOp::Send)]
    );
}

#[test]
fn random_frames_into_a_connected_engine_never_panic() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..300 {
        let mut p = Pair::connected();
        let dst = p.a.register(&[0u8; 64]);
        p.a.e.post(p.a.wr(PostOp::Recv, &[tri(dst, 0, 64)], 1));
        let mut input = Vec::new();
        for _ in 0..8 {
            let payload: Vec<u8> = (0..next() % 80).map(|_| next().to_le_bytes()[0]).collect();
            let msn = (next() % 4) as u32;
            let total = (next() % 100) as u32;
            let flags = (next() % 8) as u8;
            let f = match next() % 7 {
                0 => Frame::Send {
                    msn,
                    total: total.max(payload.len() as u32),
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                1 => Frame::RdmaWrite {
                    msn,
                    total: total.max(payload.len() as u32),
                    rkey: next() as u32,
                    addr: dst.2 + next() % 128,
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                2 => Frame::ReadReq {
                    msn,
                    len: total,
                    rkey: next() as u32,
                    addr: next(),
                },
                3 => Frame::ReadResp {
                    msn,
                    total: total.max(payload.len() as u32),
                    flags: flags & (wire::FIRST | wire::LAST),
                    payload: &payload,
                },
                4 => Frame::Nak {
                    msn,
                    status: 2 + (next() % 11) as u32,
                },
                5 => Frame::Ack,
                _ => Frame::Keepalive,
            };
            let mut one = Vec::new();
            f.emit((next() % 3) as u32, &mut one);
            if round % 5 == 0 && !one.is_empty() {
                let at = (next() as usize) % one.len();
                one[at] ^= next().to_le_bytes()[0];
            }
            input.extend_from_slice(&one);
        }
        let used = p.a.e.handle_input(p.now, &input);
        assert!(used <= input.len());
        p.a.e.handle_timeout(p.now + Duration::from_secs(60));
        let _ = p.a.e.poll_transmit();
        while p.a.e.poll_event().is_some() {}
    }
}
