//! Two processes: the test binary runs itself as the peer.

mod common;

use common::*;
use dat::types::{CloseFlags, CompletionFlags, Cookie, DtoStatus, EventNumber};

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

/// The peer: accepts, takes one message, reads the requester's memory, writes it back
/// inverted, echoes the message, then sleeps until the requester disconnects (serving its
/// RDMA from the provider thread meanwhile).
fn echo(dir: &std::path::Path, qual: u64) {
    let reg = registry(dir, "");
    let s = Side::new(&reg);
    let (_sp, cr_evd) = listen(&s.ia, qual);
    let (cr, pd) = request(&s.ia, &cr_evd);
    let theirs = decode_rmr(&pd);
    s.ep.post_recv(&[s.lmr.triplet(0, 4096)], Cookie(1), none())
        .unwrap();
    cr.accept(Some(&s.ep), &encode_rmr(s.lmr.rmr_triplet(0, 1 << 20)))
        .unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Established);
    let r = dto(&s.dto);
    assert_eq!(r.status, DtoStatus::Success);
    let mut src = theirs;
    src.segment_length = 4096;
    s.ep.post_rdma_read(&[s.lmr.triplet(8192, 4096)], Cookie(2), src, none())
        .unwrap();
    assert_eq!(dto(&s.dto).status, DtoStatus::Success);
    let mut data = vec![0u8; 4096];
    s.lmr.read(8192, &mut data).unwrap();
    data.iter_mut().for_each(|b| *b = !*b);
    s.lmr.write(8192, &data).unwrap();
    let mut dst = theirs;
    dst.virtual_address += 4096;
    dst.segment_length = 4096;
    s.ep.post_rdma_write(&[s.lmr.triplet(8192, 4096)], Cookie(3), dst, none())
        .unwrap();
    assert_eq!(dto(&s.dto).status, DtoStatus::Success);
    s.ep.post_send(&[s.lmr.triplet(0, r.transferred_length)], Cookie(4), none())
        .unwrap();
    assert_eq!(dto(&s.dto).status, DtoStatus::Success);
    assert_eq!(cm(&s.conn).0, EventNumber::Disconnected);
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn peer_entry() {
    if let Some((role, dir, qual)) = peer_args() {
        assert_eq!(role, "echo");
        echo(&dir, qual);
    }
}

#[test]
fn two_processes_send_rdma_and_target_side_progress() {
    let dir = scratch("mp");
    let reg = registry(&dir, "");
    let s = Side::new(&reg);
    let mut peer = Peer::spawn("peer_entry", "echo", &dir, 5000);
    let pattern: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    s.lmr.write(0, &pattern).unwrap();
    let theirs = decode_rmr(&connect_to_peer(
        &s,
        5000,
        &encode_rmr(s.lmr.rmr_triplet(0, 1 << 20)),
    ));
    s.lmr.write(100_000, b"ping across processes").unwrap();
    s.ep.post_recv(&[s.lmr.triplet(200_000, 64)], Cookie(1), none())
        .unwrap();
    s.ep.post_send(&[s.lmr.triplet(100_000, 21)], Cookie(2), none())
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let c = dto(&s.dto);
        assert_eq!(c.status, DtoStatus::Success);
        seen.push((c.cookie, c.transferred_length));
    }
    seen.sort_by_key(|c| c.0.0);
    assert_eq!(seen, vec![(Cookie(1), 21), (Cookie(2), 21)]);
    let mut echo = [0u8; 21];
    s.lmr.read(200_000, &mut echo).unwrap();
    assert_eq!(&echo, b"ping across processes");
    // The peer read our pattern and wrote it back inverted, before echoing.
    let mut inv = vec![0u8; 4096];
    s.lmr.read(4096, &mut inv).unwrap();
    assert!(inv.iter().zip(&pattern).all(|(a, b)| *a == !*b));

    // The peer's application now sleeps in a wait; its provider thread serves our RDMA.
    let mut t = theirs;
    t.virtual_address += 300_000;
    t.segment_length = 50_000;
    let blob: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
    s.lmr.write(500_000, &blob).unwrap();
    s.ep.post_rdma_write(&[s.lmr.triplet(500_000, 50_000)], Cookie(3), t, none())
        .unwrap();
    assert_eq!(dto(&s.dto).status, DtoStatus::Success);
    s.ep.post_rdma_read(&[s.lmr.triplet(600_000, 50_000)], Cookie(4), t, none())
        .unwrap();
    assert_eq!(dto(&s.dto).status, DtoStatus::Success);
    let mut back = vec![0u8; 50_000];
    s.lmr.read(600_000, &mut back).unwrap();
    assert!(back == blob);

    s.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(cm(&s.conn).0, EventNumber::Disconnected);
    assert!(peer.join(), "the peer process passed its own checks");
    s.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty(), "{:?}", entries(&dir));
    let _ = std::fs::remove_dir_all(&dir);
}
