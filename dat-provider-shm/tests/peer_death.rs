//! A peer process killed with SIGKILL in the middle of a transfer.

mod common;

use common::*;
use dat::EventData;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber};

/// The tests count this process's shared segments: they run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

/// Sends the streaming peer makes, far fewer than the receives the survivor posts: however
/// late the kill lands (a loaded machine may run the peer for milliseconds first), some of
/// those receives are still outstanding and must be flushed.
const STREAM_SENDS: u64 = 8;

/// The peer: listens, accepts, then streams RDMA writes at the requester, the first
/// [`STREAM_SENDS`] of them each followed by a send, until it is killed (bounded: it gives up
/// after a while on its own).
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
        let sends = u64::from(i < STREAM_SENDS);
        if sends == 1 {
            s.ep.post_send(&[s.lmr.triplet(0, 1000)], Cookie(i), none())
                .unwrap();
        }
        for _ in 0..1 + sends {
            if dto(&s.dto).status != DtoStatus::Success {
                return;
            }
        }
    }
}

/// The peer as requester: connects and streams messages until it is killed (bounded).
fn client(dir: &std::path::Path, qual: u64) {
    let reg = registry(dir, "");
    let s = Side::new(&reg);
    connect_to_peer(&s, qual, b"");
    for i in 0..100_000u64 {
        s.ep.post_send(&[s.lmr.triplet(0, 20_000)], Cookie(i), none())
            .unwrap();
        if dto(&s.dto).status != DtoStatus::Success {
            return;
        }
    }
}

#[test]
fn peer_entry() {
    match peer_args() {
        Some((role, dir, qual)) if role == "stream" => stream(&dir, qual),
        Some((role, dir, qual)) if role == "client" => client(&dir, qual),
        Some((role, ..)) => panic!("unknown role {role}"),
        None => {}
    }
}

#[test]
fn killed_peer_breaks_the_connection_flushes_unmaps_and_leaves_no_files() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
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
    assert!(flushed >= RECVS - STREAM_SENDS, "{flushed} flushed");
    assert_eq!(s.dto.dequeue().unwrap_err(), dat::DatError::QUEUE_EMPTY);
    assert_eq!(mapped_segments(), 0, "the dead peer's segment is unmapped");
    peer.join();
    // The dead listener's entry is swept by the survivor (bounded poll: the kernel closes the
    // dead process's descriptors one by one, and the survivor looks again at widening
    // intervals up to 8 s after the death).
    for _ in 0..1_000 {
        if entries(&dir).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    s.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn killed_requester_breaks_the_listeners_connection_and_the_listener_lives_on() {
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = scratch("kill-client");
    let reg = registry(&dir, "");
    let s = Side::new(&reg);
    let (sp, cr_evd) = listen(&s.ia, 6100);
    let mut peer = Peer::spawn("peer_entry", "client", &dir, 6100);
    const RECVS: u64 = 32;
    for i in 0..RECVS {
        s.ep.post_recv(&[s.lmr.triplet(i * 32_768, 32_768)], Cookie(i), none())
            .unwrap();
    }
    let (cr, _) = request(&s.ia, &cr_evd);
    cr.accept(Some(&s.ep), b"").unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Established);
    let first = dto(&s.dto);
    assert_eq!(
        (first.cookie, first.status),
        (Cookie(0), DtoStatus::Success)
    );
    peer.0.kill().unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Broken);
    let mut seen = 1;
    while seen < RECVS {
        let c = dto(&s.dto);
        assert_eq!(c.cookie, Cookie(seen));
        assert!(
            matches!(c.status, DtoStatus::Success | DtoStatus::Flushed),
            "{c:?}"
        );
        seen += 1;
    }
    assert_eq!(mapped_segments(), 0);
    peer.join();
    // The survivor's own listener stays, and still takes connections.
    assert_eq!(entries(&dir), vec!["6100".to_owned()]);
    let other = Side::new(&reg);
    other.connect(6100, b"again", WAIT);
    let (cr, pd) = request(&s.ia, &cr_evd);
    assert_eq!(pd, b"again");
    cr.reject(b"").unwrap();
    assert_eq!(cm(&other.conn).0, EventNumber::PeerRejected);
    sp.free().unwrap();
    s.ia.close(CloseFlags::Abrupt).unwrap();
    other.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
