//! Data-path tests against a hostile or slow peer, over a real shared segment.
use super::iov::{advance, split_last_byte};
use super::*;
use crate::ring::{self, Segment as Shm};
use crate::sys::RemoteIov;
use dat_core::provider::{CmFact, EpUpcalls};
use dat_core::types::CompletionFlags;
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

/// Completions reported, and the count of suppressed requests retired.
#[derive(Default)]
struct Log(Mutex<Vec<Completion>>, AtomicU32);
impl EpUpcalls for Log {
    fn completion(&self, c: Completion) {
        self.0.lock().unwrap().push(c);
    }
    fn cm(&self, _f: CmFact) {}
    fn retired(&self, n: u32) {
        self.1.fetch_add(n, Ordering::Relaxed);
    }
}

/// A target data path over a fresh segment, and the hostile peer's producer.
fn target() -> (DataPath, ring::Producer) {
    let seg = Shm::anonymous(8, 256).unwrap();
    let (tx, rx) = ring::ends(&seg, false);
    let (peer_tx, _) = ring::ends(&seg, true);
    let d = DataPath::new(
        tx,
        rx,
        sys::eventfd().unwrap(),
        sys::eventfd().unwrap(),
        sys::pid(),
    );
    (d, peer_tx)
}

/// The last byte of a cross-memory transfer gets an iovec of its own, so the kernel copies
/// it last (see `DataPath::cma`); the ranges still cover the same bytes.
#[test]
fn the_last_byte_of_a_cma_transfer_gets_its_own_iovec() {
    let iov = |addr, len| RemoteIov { addr, len };
    let mut v: Iovs = smallvec::smallvec![iov(100, 8), iov(500, 4), iov(900, 0)];
    assert!(split_last_byte(&mut v));
    assert_eq!(v.as_slice(), [iov(100, 8), iov(500, 3), iov(503, 1)]);
    let mut two: Iovs = smallvec::smallvec![iov(100, 8), iov(300, 1)];
    assert!(split_last_byte(&mut two));
    assert_eq!(two.as_slice(), [iov(100, 8), iov(300, 1)]);
    let mut one: Iovs = smallvec::smallvec![iov(7, 1)];
    assert!(!split_last_byte(&mut one), "a single byte is simply last");
    assert_eq!(one.as_slice(), [iov(7, 1)]);
    let mut none: Iovs = smallvec::smallvec![iov(7, 0)];
    assert!(!split_last_byte(&mut none));
    assert!(none.is_empty());
}

/// A copy that moved `n` bytes leaves the ranges after them, without shifting the list.
#[test]
fn a_partial_cma_copy_advances_past_the_ranges_done() {
    let iov = |addr, len| RemoteIov { addr, len };
    let mut v = [iov(100, 8), iov(500, 4), iov(900, 2)];
    let mut start = 0;
    advance(&mut v, &mut start, 10);
    assert_eq!((start, v[start]), (1, iov(502, 2)));
    advance(&mut v, &mut start, 2);
    assert_eq!((start, v[start]), (2, iov(900, 2)));
    advance(&mut v, &mut start, 5);
    assert_eq!(start, 3, "past the end: nothing left");
}

#[test]
fn hostile_records_break_the_connection_without_panicking() {
    let bad = [
        Rec {
            kind: 99,
            ..Rec::default()
        },
        Rec {
            kind: SEND,
            offset: 5,
            ..Rec::default()
        },
        Rec {
            kind: SEND_ACK,
            ..Rec::default()
        },
        Rec {
            kind: RDMA_ACK,
            a: 12345,
            ..Rec::default()
        },
        Rec {
            kind: SEND_ACK,
            a: DtoStatus::Success as u32,
            ..Rec::default()
        },
        Rec {
            kind: READ_DATA,
            total: 10,
            ..Rec::default()
        },
        Rec {
            kind: SEND,
            ack: 1,
            ..Rec::default()
        },
        Rec {
            kind: WRITE,
            offset: 1,
            ..Rec::default()
        },
        Rec {
            kind: WRITE_CMA,
            a: 1,
            total: 8,
            c: u32::MAX,
            ..Rec::default()
        },
        Rec {
            kind: READ,
            a: u32::MAX,
            total: u64::MAX,
            ..Rec::default()
        },
    ];
    let mem = RwLock::new(MemTable::new());
    for rec in bad {
        let (mut d, mut peer) = target();
        assert!(peer.push(rec, |_, _| {}));
        let up: Arc<dyn EpUpcalls> = Arc::new(Log::default());
        let mut recvs = VecDeque::new();
        let mut ep = EpView {
            upcalls: &up,
            pz: Some(PzId(1)),
            recvs: &mut recvs,
        };
        let mut out = Ups::new();
        assert_eq!(d.pump(&mut ep, &mem, &mut out), Err(Fatal), "{rec:?}");
    }
}

#[test]
fn a_send_waits_in_the_ring_until_a_receive_is_posted() {
    let (mut d, mut peer) = target();
    assert!(peer.push(
        Rec {
            kind: SEND,
            len: 3,
            total: 3,
            ..Rec::default()
        },
        |p, n| {
            // SAFETY: the slot payload has room for `n` = 3 bytes.
            unsafe { std::ptr::copy_nonoverlapping(b"abc".as_ptr(), p, n) };
        }
    ));
    let mem = RwLock::new(MemTable::new());
    let log = Arc::new(Log::default());
    let up: Arc<dyn EpUpcalls> = log.clone();
    let mut recvs = VecDeque::new();
    let mut out = Ups::new();
    let mut ep = EpView {
        upcalls: &up,
        pz: None,
        recvs: &mut recvs,
    };
    assert_eq!(d.pump(&mut ep, &mem, &mut out), Ok(false));
    assert!(!d.arm(), "a held send is not work for the provider thread");
    let buf = Arc::new(dat_core::mem::Buffer::alloc(8, 8).unwrap());
    let seg = Segment {
        buf: buf.clone().into(),
        offset: 2,
        len: 6,
        lkey: 1,
        addr: 0,
    };
    recvs.push_back(WorkRequest {
        op: PostOp::Recv,
        segs: [seg].into_iter().collect(),
        cookie: dat_core::types::Cookie(9),
        flags: dat_core::types::CompletionFlags::empty(),
    });
    let mut ep = EpView {
        upcalls: &up,
        pz: None,
        recvs: &mut recvs,
    };
    assert_eq!(d.pump(&mut ep, &mem, &mut out), Ok(true));
    out.into_iter().for_each(Up::run);
    let got = log.0.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].status, got[0].transferred_length),
        (DtoStatus::Success, 3)
    );
    assert_eq!(&buf.to_vec()[2..5], b"abc");
}

/// Both ends of one connection over a fresh segment (requester, acceptor), each waking the
/// other through the other's eventfd.
fn both() -> (DataPath, DataPath) {
    let seg = Shm::anonymous(8, 256).unwrap();
    let (ea, eb) = (sys::eventfd().unwrap(), sys::eventfd().unwrap());
    let end = |requester, mine: &OwnedFd, peer: &OwnedFd| {
        let (tx, rx) = ring::ends(&seg, requester);
        let dup = |fd: &OwnedFd| fd.try_clone().unwrap();
        DataPath::new(tx, rx, dup(mine), dup(peer), sys::pid())
    };
    (end(true, &ea, &eb), end(false, &eb, &ea))
}

/// True if the side's eventfd was written since the last call (and resets it).
fn woken(d: &DataPath) -> bool {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a valid local from a non-blocking eventfd we hold.
    let n = unsafe { libc::read(d.my_efd.as_raw_fd(), (&raw mut v).cast(), 8) };
    n == 8
}

fn wr(op: PostOp, buf: &Arc<dat_core::mem::Buffer>, len: usize, flags: u32) -> WorkRequest {
    let seg = Segment {
        buf: buf.clone().into(),
        offset: 0,
        len,
        lkey: 1,
        addr: 0,
    };
    WorkRequest {
        op,
        segs: [seg].into_iter().collect(),
        cookie: dat_core::types::Cookie(u64::from(flags)),
        flags: CompletionFlags::from_bits_truncate(flags),
    }
}

/// One side's endpoint: its log of completions and its posted receives.
struct Side {
    log: Arc<Log>,
    up: Arc<dyn EpUpcalls>,
    recvs: VecDeque<WorkRequest>,
}

impl Side {
    fn new() -> Side {
        let log = Arc::new(Log::default());
        Side {
            up: log.clone(),
            log,
            recvs: VecDeque::new(),
        }
    }

    fn pump(&mut self, d: &mut DataPath) -> Result<bool, Fatal> {
        let mem = RwLock::new(MemTable::new());
        let mut out = Ups::new();
        let mut ep = EpView {
            upcalls: &self.up,
            pz: None,
            recvs: &mut self.recvs,
        };
        let r = d.pump(&mut ep, &mem, &mut out);
        out.into_iter().for_each(Up::run);
        r
    }

    fn done(&self) -> Vec<(DtoStatus, u32)> {
        let got = std::mem::take(&mut *self.log.0.lock().unwrap());
        got.iter()
            .map(|c| (c.status, c.transferred_length))
            .collect()
    }
}

/// Successes come back with no acknowledgement record: a send completes once its target
/// took it, told by the target's head in the control block (the requester waits for that
/// completion) or by the `ack` of the next record coming back (a suppressed one).
#[test]
fn a_send_completes_once_its_target_took_it_without_an_ack_record() {
    let (mut a, mut b) = both();
    let (mut sa, mut sb) = (Side::new(), Side::new());
    let buf = Arc::new(dat_core::mem::Buffer::alloc(64, 8).unwrap());
    let suppress = CompletionFlags::SUPPRESS.bits();
    a.post(wr(PostOp::Send, &buf, 8, 0));
    assert_eq!(
        sa.pump(&mut a),
        Ok(false),
        "not taken yet: nothing to report"
    );
    assert!(
        !a.arm(),
        "asleep, the requester asks to be woken when the head moves"
    );
    assert_eq!(sb.pump(&mut b), Ok(false), "held back: no receive");
    sb.recvs.push_back(wr(PostOp::Recv, &buf, 8, 0));
    assert_eq!(sb.pump(&mut b), Ok(true));
    assert_eq!(sb.done(), vec![(DtoStatus::Success, 8)]);
    assert!(
        (0..HEAD_POLLS).any(|_| a.has_work()),
        "the head moved: a poll sees it within HEAD_POLLS polls"
    );
    assert_eq!(sa.pump(&mut a), Ok(true));
    assert_eq!(sa.done(), vec![(DtoStatus::Success, 8)]);
    assert_eq!((a.outstanding(), a.has_work()), (0, false));
    // A suppressed send is let go of when the reply's record says it was taken; until then
    // nobody reads the control block for it.
    a.post(wr(PostOp::Send, &buf, 100, suppress));
    sb.recvs.push_back(wr(PostOp::Recv, &buf, 100, 0));
    assert_eq!(sb.pump(&mut b), Ok(true));
    assert_eq!(a.outstanding(), 1);
    assert!(
        !a.has_work(),
        "a suppressed send does not make the requester look"
    );
    b.post(wr(PostOp::Send, &buf, 4, suppress));
    sa.recvs.push_back(wr(PostOp::Recv, &buf, 4, 0));
    assert_eq!(sa.pump(&mut a), Ok(true));
    assert_eq!(sa.done(), vec![(DtoStatus::Success, 4)]);
    assert_eq!(a.outstanding(), 0, "the reply acknowledged the send");
    assert_eq!(
        (sa.log.1.load(Ordering::Relaxed), a.retired_unreported()),
        (0, 1),
        "and the suppressed send was counted out, held back (no upcall per message)"
    );
    assert_eq!(sb.done(), vec![(DtoStatus::Success, 100)]);
    // A failure is acknowledged by a record: the receive is too short.
    a.post(wr(PostOp::Send, &buf, 16, 0));
    sb.recvs.push_back(wr(PostOp::Recv, &buf, 8, 0));
    assert_eq!(sb.pump(&mut b), Err(Fatal));
    assert_eq!(sb.done(), vec![(DtoStatus::LocalLength, 0)]);
    assert_eq!(sa.pump(&mut a), Err(Fatal));
    assert_eq!(sa.done(), vec![(DtoStatus::RemoteResponder, 0)]);
}

/// A requester that armed before it posted (its provider thread asleep, say) still learns
/// that its request completed: the target wakes a sleeping peer whose records it took, as an
/// acknowledgement record used to.
#[test]
fn a_requester_asleep_since_before_its_post_is_woken_when_the_target_takes_it() {
    let (mut a, mut b) = both();
    let (mut sa, mut sb) = (Side::new(), Side::new());
    let buf = Arc::new(dat_core::mem::Buffer::alloc(64, 8).unwrap());
    assert!(!a.arm(), "nothing to wait for yet");
    assert!(!b.arm());
    a.post(wr(PostOp::Send, &buf, 8, 0));
    assert!(woken(&b), "the target is woken for the message");
    sb.recvs.push_back(wr(PostOp::Recv, &buf, 8, 0));
    assert_eq!(sb.pump(&mut b), Ok(true));
    assert!(
        woken(&a),
        "the sleeping requester is woken for its completion"
    );
    assert_eq!(sa.pump(&mut a), Ok(true));
    assert_eq!(sa.done(), vec![(DtoStatus::Success, 8)]);
    // Awake (not armed), nobody writes its eventfd.
    a.disarm();
    a.post(wr(PostOp::Send, &buf, 8, 0));
    sb.recvs.push_back(wr(PostOp::Recv, &buf, 8, 0));
    assert_eq!(sb.pump(&mut b), Ok(true));
    assert!(!woken(&a));
    assert_eq!(sa.pump(&mut a), Ok(true));
    assert_eq!(sa.done(), vec![(DtoStatus::Success, 8)]);
}

/// With cross-memory attach, RDMA requests (and sends larger than a slot) up to the inline
/// size carry their bytes in the ring; larger ones carry addresses. A send that fits one
/// slot always travels in the ring. The inline size is capped at a quarter of the ring.
#[test]
fn small_rdma_travels_in_the_ring_and_large_rdma_by_address() {
    let (mut a, mut b) = both();
    let buf = Arc::new(dat_core::mem::Buffer::alloc(4096, 8).unwrap());
    let remote = dat_core::types::RmrTriplet {
        virtual_address: 0x1000,
        segment_length: 4096,
        rmr_context: 7,
    };
    let quiet = CompletionFlags::SUPPRESS.bits();
    // The first record in b's ring (kind, iov count, total length); empties the ring.
    let next = |b: &mut DataPath| {
        let r = b.rx.peek().unwrap().expect("a record").rec;
        while b.rx.peek().unwrap().is_some() {
            b.rx.consume();
        }
        b.rx.publish();
        (r.kind, r.c, r.total)
    };
    a.cma_out = true;
    a.set_inline_max(64);
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 64, quiet));
    assert_eq!(next(&mut b), (WRITE, 0, 64), "64 bytes: inline");
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 65, quiet));
    assert_eq!(next(&mut b), (WRITE_CMA, 1, 65), "65 bytes: by address");
    a.post(wr(PostOp::RdmaRead(remote), &buf, 64, quiet));
    assert_eq!(
        next(&mut b),
        (READ, 0, 64),
        "a small read is answered with data"
    );
    a.post(wr(PostOp::RdmaRead(remote), &buf, 65, quiet));
    assert_eq!(next(&mut b), (READ, 1, 65));
    // 8 slots of 192 payload bytes: at most 384 bytes inline, whatever is asked.
    a.set_inline_max(1 << 20);
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 384, quiet));
    assert_eq!(next(&mut b), (WRITE, 0, 384));
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 385, quiet));
    assert_eq!(next(&mut b), (WRITE_CMA, 1, 385));
    // A send larger than a slot (192 bytes) travels as fragments up to the inline size,
    // by address above it.
    a.post(wr(PostOp::Send, &buf, 384, quiet));
    assert_eq!(next(&mut b), (SEND, 0, 384), "two fragments");
    a.post(wr(PostOp::Send, &buf, 385, quiet));
    assert_eq!(next(&mut b), (SEND_CMA, 1, 385));
    // 0: every RDMA by address, as before `rdma_inline`.
    a.set_inline_max(0);
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 8, quiet));
    assert_eq!(next(&mut b), (WRITE_CMA, 1, 8));
    // But a send that fits one slot is one record with its bytes whatever the inline size
    // (`BENCHMARKS.md`, "Session 9, 4 KiB": by address it costs a system call); a larger
    // one goes by address.
    a.post(wr(PostOp::Send, &buf, 192, quiet));
    assert_eq!(next(&mut b), (SEND, 0, 192), "one slot: in the ring");
    a.post(wr(PostOp::Send, &buf, 193, quiet));
    assert_eq!(next(&mut b), (SEND_CMA, 1, 193));
    // Without cross-memory attach everything travels in the ring.
    a.cma_out = false;
    a.post(wr(PostOp::RdmaWrite(remote), &buf, 1000, quiet));
    assert_eq!(next(&mut b), (WRITE, 0, 1000));
}
