//! A peer process killed with SIGKILL in the middle of a transfer.

mod common;

use common::*;
use dat::EventData;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber};

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

/// The peer: listens, accepts, then streams RDMA writes and sends at the requester until it
/// is killed (bounded: it gives up after a while on its own).
fn stream(dir: &std::path::Path, qual: u64) {
    let reg = registry(dir, "");
    let s = Side::new(&reg);
    let (_sp, cr_evd) = listen(&s.ia, qual);
    let (cr, pd) = request(&s.ia, &cr_evd);
    let mut theirs = decode_rmr(&pd);
    theirs.segment_length = 256 * 1024;
    cr.accept(Some(&s.ep), b"").unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Established);
    for i in 0..100_000u64 {
        s.ep.post_rdma_write(&[s.lmr.triplet(0, 256 * 1024)], Cookie(i), theirs, none())
            .unwrap();
        s.ep.post_send(&[s.lmr.triplet(0, 1000)], Cookie(i), none())
            .unwrap();
        for _ in 0..2 {
            if dto(&s.dto).status != DtoStatus::Success {
                return;
            }
        }
    }
}

#[test]
fn peer_entry() {
    if let Some((role, dir, qual)) = peer_args() {
        assert_eq!(role, "stream");
        stream(&dir, qual);
    }
}

#[test]
fn killed_peer_breaks_the_connection_flushes_unmaps_and_leaves_no_files() {
    let dir = scratch("kill");
    let reg = registry(&dir, "");
    let s = Side::new(&reg);
    let mut peer = Peer::spawn("peer_entry", "stream", &dir, 6000);
    const RECVS: u64 = 64;
    for i in 0..RECVS {
        s.ep.post_recv(&[s.lmr.triplet(i * 1024, 1024)], Cookie(i), none())
            .unwrap();
    }
    connect_to_peer(&s, 6000, &encode_rmr(s.lmr.rmr_triplet(0, 1 << 20)));
    assert_eq!(mapped_segments(), 1);
    // Mid-transfer: the first message has landed, more are on the way.
    let first = dto(&s.dto);
    assert_eq!(
        (first.cookie, first.status),
        (Cookie(0), DtoStatus::Success)
    );
    peer.0.kill().unwrap();

    assert_eq!(cm(&s.conn).0, EventNumber::Broken);
    // Every receive completes exactly once, in order: successes first, then flushed.
    let mut next_cookie = 1;
    let mut flushed = 0;
    while next_cookie < RECVS {
        let e = next(&s.dto);
        let EventData::Dto(c) = e.data else {
            panic!("{e:?}")
        };
        assert_eq!(
            (c.cookie, c.operation),
            (Cookie(next_cookie), DtoOp::Receive)
        );
        match c.status {
            DtoStatus::Success => assert_eq!(flushed, 0, "no success after a flush"),
            DtoStatus::Flushed => flushed += 1,
            other => panic!("{other:?}"),
        }
        next_cookie += 1;
    }
    assert!(flushed > 0);
    assert_eq!(s.dto.dequeue().unwrap_err(), dat::DatError::QUEUE_EMPTY);
    assert_eq!(mapped_segments(), 0, "the dead peer's segment is unmapped");
    peer.join();
    // The dead listener's entry is swept by the survivor (bounded poll: the kernel closes the
    // dead process's descriptors one by one).
    for _ in 0..500 {
        if entries(&dir).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    s.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
