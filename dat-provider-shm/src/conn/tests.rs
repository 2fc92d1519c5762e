//! Data-path tests against a hostile or slow peer, over a real shared segment.
use super::*;
use crate::ring::{self, Segment as Shm};
use dat_core::provider::{CmFact, EpUpcalls};
use std::sync::Mutex;

#[derive(Default)]
struct Log(Mutex<Vec<Completion>>);
impl EpUpcalls for Log {
    fn completion(&self, c: Completion) {
        self.0.lock().unwrap().push(c);
    }
    fn cm(&self, _f: CmFact) {}
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
            kind: READ_DATA,
            total: 10,
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
            c: u64::MAX,
            ..Rec::default()
        },
        Rec {
            kind: READ,
            a: u64::MAX,
            total: u64::MAX,
            ..Rec::default()
        },
    ];
    let mem = RwLock::new(MemTable::new());
    for rec in bad {
        let (mut d, mut peer) = target();
        assert!(peer.push(rec, |_, _| 0));
        let up: Arc<dyn EpUpcalls> = Arc::new(Log::default());
        let mut recvs = VecDeque::new();
        let mut ep = EpView {
            upcalls: &up,
            pz: Some(PzId(1)),
            recvs: &mut recvs,
        };
        let mut out = Ups::new();
        assert_eq!(
            d.pump(&mut ep, &mem, &mut out, false),
            Err(Fatal),
            "{rec:?}"
        );
    }
}

#[test]
fn a_send_waits_in_the_ring_until_a_receive_is_posted() {
    let (mut d, mut peer) = target();
    assert!(peer.push(
        Rec {
            kind: SEND,
            total: 3,
            ..Rec::default()
        },
        |p, _| {
            // SAFETY: the slot payload has room for 3 bytes.
            unsafe { std::ptr::copy_nonoverlapping(b"abc".as_ptr(), p, 3) };
            3
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
    assert_eq!(d.pump(&mut ep, &mem, &mut out, false), Ok(false));
    assert!(!d.arm(), "a held send is not work for the provider thread");
    let buf = Arc::new(dat_core::mem::Buffer::alloc(8, 8).unwrap());
    let seg = Segment {
        buf: buf.clone(),
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
    assert_eq!(d.pump(&mut ep, &mem, &mut out, false), Ok(true));
    out.into_iter().for_each(Up::run);
    let got = log.0.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].status, got[0].transferred_length),
        (DtoStatus::Success, 3)
    );
    assert_eq!(&buf.to_vec()[2..5], b"abc");
}

/// Both ends of one connection, each with a receive queue and a completion log.
struct End {
    d: DataPath,
    log: Arc<Log>,
    up: Arc<dyn EpUpcalls>,
    recvs: VecDeque<WorkRequest>,
    buf: Arc<dat_core::mem::Buffer>,
}

impl End {
    fn new(d: DataPath) -> End {
        let log = Arc::new(Log::default());
        End {
            d,
            up: log.clone(),
            log,
            recvs: VecDeque::new(),
            buf: Arc::new(dat_core::mem::Buffer::alloc(64, 8).unwrap()),
        }
    }

    fn wr(&self, op: PostOp, cookie: u64) -> WorkRequest {
        let seg = Segment {
            buf: self.buf.clone(),
            offset: 0,
            len: 8,
            lkey: 1,
            addr: 0,
        };
        WorkRequest {
            op,
            segs: [seg].into_iter().collect(),
            cookie: dat_core::types::Cookie(cookie),
            flags: dat_core::types::CompletionFlags::empty(),
        }
    }

    /// One pump (`defer` as an application thread polling); returns the completions made.
    fn pump(&mut self, defer: bool) -> Vec<(u64, PostOp, DtoStatus)> {
        let mem = RwLock::new(MemTable::new());
        let mut out = Ups::new();
        let mut ep = EpView {
            upcalls: &self.up,
            pz: None,
            recvs: &mut self.recvs,
        };
        assert!(self.d.pump(&mut ep, &mem, &mut out, defer).is_ok());
        out.into_iter().for_each(Up::run);
        let got = std::mem::take(&mut *self.log.0.lock().unwrap());
        got.into_iter()
            .map(|c| {
                let op = if c.op == dat_core::types::DtoOp::Send {
                    PostOp::Send
                } else {
                    PostOp::Recv
                };
                (c.cookie.0, op, c.status)
            })
            .collect()
    }
}

fn connection() -> (End, End) {
    let seg = Shm::anonymous(8, 256).unwrap();
    let (atx, arx) = ring::ends(&seg, true);
    let (btx, brx) = ring::ends(&seg, false);
    let efd = || sys::eventfd().unwrap();
    (
        End::new(DataPath::new(atx, arx, efd(), efd(), sys::pid())),
        End::new(DataPath::new(btx, brx, efd(), efd(), sys::pid())),
    )
}

const OK: DtoStatus = DtoStatus::Success;

#[test]
fn a_polled_send_is_acknowledged_on_the_reply() {
    let (mut a, mut b) = connection();
    b.recvs.push_back(b.wr(PostOp::Recv, 1));
    a.recvs.push_back(a.wr(PostOp::Recv, 2));
    a.d.post(a.wr(PostOp::Send, 3));
    assert_eq!(b.pump(true), vec![(1, PostOp::Recv, OK)]);
    assert!(!a.d.has_work(), "no acknowledgement record of its own");
    b.d.post(b.wr(PostOp::Send, 4));
    // The reply carries the acknowledgement: the send completes first, then the receive.
    assert_eq!(
        a.pump(true),
        vec![(3, PostOp::Send, OK), (2, PostOp::Recv, OK)]
    );
    assert_eq!(a.d.outstanding(), 0);
    // `a` owes the reply's acknowledgement: its next poll writes it.
    assert!(a.d.has_work());
    assert_eq!(a.pump(true), vec![]);
    assert_eq!(b.pump(true), vec![(4, PostOp::Send, OK)]);
    assert!(!a.d.has_work() && !b.d.has_work());
}

#[test]
fn owed_acknowledgements_go_as_one_record_when_no_reply_comes() {
    let (mut a, mut b) = connection();
    for i in 0..3 {
        b.recvs.push_back(b.wr(PostOp::Recv, i));
        a.d.post(a.wr(PostOp::Send, 10 + i));
    }
    assert_eq!(b.pump(true).len(), 3);
    assert!(!a.d.has_work());
    // The next poll writes them, as one record (one slot) for all three.
    assert_eq!(b.pump(true), vec![]);
    assert_eq!(
        a.pump(true),
        vec![
            (10, PostOp::Send, OK),
            (11, PostOp::Send, OK),
            (12, PostOp::Send, OK)
        ]
    );
    // A provider-thread pump (not deferring) writes them at once.
    b.recvs.push_back(b.wr(PostOp::Recv, 5));
    a.d.post(a.wr(PostOp::Send, 15));
    assert_eq!(b.pump(false), vec![(5, PostOp::Recv, OK)]);
    assert_eq!(a.pump(true), vec![(15, PostOp::Send, OK)]);
}

#[test]
fn owed_acknowledgements_precede_a_later_response() {
    let (mut a, mut b) = connection();
    b.recvs.push_back(b.wr(PostOp::Recv, 1));
    a.d.post(a.wr(PostOp::Send, 2));
    assert_eq!(b.pump(true).len(), 1);
    // A receive too small for the next send: the refusal must come after the success owed.
    b.recvs.push_back(WorkRequest {
        segs: SegList::new(),
        ..b.wr(PostOp::Recv, 3)
    });
    a.d.post(a.wr(PostOp::Send, 4));
    let mem = RwLock::new(MemTable::new());
    let mut out = Ups::new();
    let mut ep = EpView {
        upcalls: &b.up,
        pz: None,
        recvs: &mut b.recvs,
    };
    assert_eq!(b.d.pump(&mut ep, &mem, &mut out, true), Err(Fatal));
    let mut ep = EpView {
        upcalls: &a.up,
        pz: None,
        recvs: &mut a.recvs,
    };
    assert_eq!(a.d.pump(&mut ep, &mem, &mut out, true), Err(Fatal));
    out.into_iter().for_each(Up::run);
    let got: Vec<_> = a
        .log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.cookie.0, c.status))
        .collect();
    assert_eq!(got, vec![(2, OK), (4, DtoStatus::RemoteResponder)]);
}
