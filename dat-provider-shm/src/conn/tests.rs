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

/// The last byte of a cross-memory transfer gets an iovec of its own, so the kernel copies
/// it last (see `DataPath::cma`); the ranges still cover the same bytes.
#[test]
fn the_last_byte_of_a_cma_transfer_gets_its_own_iovec() {
    let iov = |addr, len| RemoteIov { addr, len };
    let mut v = vec![iov(100, 8), iov(500, 4), iov(900, 0)];
    assert!(split_last_byte(&mut v));
    assert_eq!(v, vec![iov(100, 8), iov(500, 3), iov(503, 1)]);
    let mut two = vec![iov(100, 8), iov(300, 1)];
    assert!(split_last_byte(&mut two));
    assert_eq!(two, vec![iov(100, 8), iov(300, 1)]);
    let mut one = vec![iov(7, 1)];
    assert!(!split_last_byte(&mut one), "a single byte is simply last");
    assert_eq!(one, vec![iov(7, 1)]);
    let mut none: Vec<RemoteIov> = vec![iov(7, 0)];
    assert!(!split_last_byte(&mut none));
    assert!(none.is_empty());
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
        assert_eq!(d.pump(&mut ep, &mem, &mut out), Err(Fatal), "{rec:?}");
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
    assert_eq!(d.pump(&mut ep, &mem, &mut out), Ok(false));
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
