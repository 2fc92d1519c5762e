//! The engine in memory: two engines joined by byte pipes, a virtual clock, real memory
//! tables. Every frame kind and every error path of the protocol: connection management and
//! failures in `cm`, data transfer and its errors in `data`.

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
        Side::with_retry(Duration::ZERO)
    }

    /// A side whose refused connects are retried for `connect_retry`.
    fn with_retry(connect_retry: Duration) -> Side {
        let mem: SharedMemTable = Arc::new(RwLock::new(MemTable::new()));
        let e = Engine::new(EngineConfig {
            mem: mem.clone(),
            pz: Some(PZ),
            srq: None,
            rnr_timeout: RNR,
            connect_retry,
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
        // Reported: as the driver does.
        if s.e.is_confirm_held() {
            s.e.release_confirm();
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
        p.a.e.connect(p.now, 45248, pd_a, None);
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

    /// A sends one byte with cookie `send` into a receive B posts first with cookie `recv`;
    /// runs the pair and returns A's facts.
    fn one_send(&mut self, recv: u64, send: u64) -> Vec<Event> {
        let src = self.a.register(b"z");
        let dst = self.b.register(&[0u8; 1]);
        self.b
            .e
            .post(self.b.wr(PostOp::Recv, &[tri(dst, 0, 1)], recv));
        self.a
            .e
            .post(self.a.wr(PostOp::Send, &[tri(src, 0, 1)], send));
        self.run();
        self.a.take()
    }
}

mod cm;
mod data;
mod retired;
mod retry;
