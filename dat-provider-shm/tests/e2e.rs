//! End-to-end tests through the `dat` facade, two IAs in one process.

mod common;

use common::*;
use dat::types::{
    CloseFlags, CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber, MemPriv, Timeout,
};
use dat_provider_shm::{RDMA_INLINE_ATTR, RDMA_MODE_ATTR};

fn none() -> CompletionFlags {
    CompletionFlags::empty()
}

#[test]
fn connect_with_private_data_send_recv_and_graceful_disconnect() {
    let dir = scratch("basic");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let (sp, cr_evd) = listen(&b.ia, 4000);
    assert_eq!(entries(&dir), vec!["4000".to_owned()]);
    let pd: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    a.connect(4000, &pd, WAIT);
    let (cr, got) = request(&b.ia, &cr_evd);
    assert_eq!(got, pd, "requester private data arrives whole");
    let back: Vec<u8> = (0..256u32).map(|i| (255 - i) as u8).collect();
    cr.accept(Some(&b.ep), &back).unwrap();
    assert_eq!(cm(&a.conn), (EventNumber::Established, back));
    assert_eq!(cm(&b.conn).0, EventNumber::Established);

    // Gather two pieces into a receive scattered over two pieces.
    a.lmr.write(0, b"hello ").unwrap();
    a.lmr.write(100, b"world").unwrap();
    b.ep.post_recv(
        &[b.lmr.triplet(0, 4), b.lmr.triplet(64, 100)],
        Cookie(1),
        none(),
    )
    .unwrap();
    a.ep.post_send(
        &[a.lmr.triplet(0, 6), a.lmr.triplet(100, 5)],
        Cookie(2),
        none(),
    )
    .unwrap();
    let r = dto(&b.dto);
    assert_eq!(
        (r.cookie, r.status, r.transferred_length, r.operation),
        (Cookie(1), DtoStatus::Success, 11, DtoOp::Receive)
    );
    let mut buf = [0u8; 11];
    b.lmr.read(0, &mut buf[..4]).unwrap();
    b.lmr.read(64, &mut buf[4..]).unwrap();
    assert_eq!(&buf, b"hello world");
    let s = dto(&a.dto);
    assert_eq!(
        (s.cookie, s.status, s.transferred_length),
        (Cookie(2), DtoStatus::Success, 11)
    );

    // Zero-length message.
    b.ep.post_recv(&[b.lmr.triplet(0, 8)], Cookie(3), none())
        .unwrap();
    a.ep.post_send(&[], Cookie(4), none()).unwrap();
    let r = dto(&b.dto);
    assert_eq!(
        (r.cookie, r.status, r.transferred_length),
        (Cookie(3), DtoStatus::Success, 0)
    );
    assert_eq!(dto(&a.dto).status, DtoStatus::Success);

    // A receive outstanding at disconnect is flushed after the event.
    b.ep.post_recv(&[b.lmr.triplet(0, 8)], Cookie(5), none())
        .unwrap();
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
    assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
    let f = dto(&b.dto);
    assert_eq!((f.cookie, f.status), (Cookie(5), DtoStatus::Flushed));

    sp.free().unwrap();
    assert!(entries(&dir).is_empty(), "a freed PSP leaves no file");
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_listener_reject_and_timeout() {
    let dir = scratch("cm");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));

    a.connect(4100, b"", WAIT);
    assert_eq!(cm(&a.conn).0, EventNumber::NonPeerRejected);
    a.ep.reset().unwrap();

    let (_sp, cr_evd) = listen(&b.ia, 4101);
    a.connect(4101, b"please", WAIT);
    let (cr, pd) = request(&b.ia, &cr_evd);
    assert_eq!(pd, b"please");
    cr.reject(b"no thanks").unwrap();
    assert_eq!(
        cm(&a.conn),
        (EventNumber::PeerRejected, b"no thanks".to_vec())
    );
    a.ep.reset().unwrap();

    // Nobody answers the request: the consumer's timeout fires.
    a.connect(4101, b"", Timeout(50_000));
    let _pending = request(&b.ia, &cr_evd);
    assert_eq!(cm(&a.conn).0, EventNumber::TimedOut);

    // The qualifier is taken while the PSP lives.
    let other = b.ia.create_evd(4, dat::types::EvdFlags::CR, None).unwrap();
    let e =
        b.ia.create_psp(
            dat::types::ConnQual(4101),
            &other,
            dat::types::PspFlags::Consumer,
        )
        .unwrap_err();
    assert_eq!(e.kind(), dat::ErrorType::ConnQualInUse);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    assert!(entries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sends_wait_for_receives_large_messages_fragment_and_short_receives_fail() {
    flow("copy", 11);
    flow("copy", 5000);
}

#[test]
fn large_sends_by_cross_memory_attach_wait_for_receives_and_short_receives_fail() {
    flow("auto", 11);
    flow("auto", 5000);
}

/// `short`: length of the message sent into a 10-byte receive at the end.
fn flow(mode: &str, short: u32) {
    let dir = scratch(&format!("flow-{mode}-{short}"));
    let reg = registry(
        &dir,
        &format!(", ring_slots = 4, slot_size = 1024, rdma = \"{mode}\""),
    );
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4200);

    // 100 KB through a 4 x 1 KiB ring: many fragments, back-pressure inside the message.
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    a.lmr.write(0, &big).unwrap();
    a.ep.post_send(&[a.lmr.triplet(0, 100_000)], Cookie(1), none())
        .unwrap();
    // Nothing completes before a receive is posted: nothing is dropped either.
    for _ in 0..100 {
        b.ia.progress();
        assert_eq!(b.dto.dequeue().unwrap_err(), dat::DatError::QUEUE_EMPTY);
    }
    assert_eq!(a.dto.dequeue().unwrap_err(), dat::DatError::QUEUE_EMPTY);
    b.ep.post_recv(&[b.lmr.triplet(0, 200_000)], Cookie(2), none())
        .unwrap();
    let r = dto(&b.dto);
    assert_eq!(
        (r.cookie, r.status, r.transferred_length),
        (Cookie(2), DtoStatus::Success, 100_000)
    );
    let mut got = vec![0u8; 100_000];
    b.lmr.read(0, &mut got).unwrap();
    assert!(got == big, "payload intact");
    assert_eq!(dto(&a.dto).status, DtoStatus::Success);

    // A receive too short for the message: LOCAL_LENGTH, and the connection breaks.
    b.ep.post_recv(&[b.lmr.triplet(0, 10)], Cookie(3), none())
        .unwrap();
    a.ep.post_send(&[a.lmr.triplet(0, short)], Cookie(4), none())
        .unwrap();
    let r = dto(&b.dto);
    assert_eq!((r.cookie, r.status), (Cookie(3), DtoStatus::LocalLength));
    assert_eq!(cm(&b.conn).0, EventNumber::Broken);
    let s = dto(&a.dto);
    assert_eq!(
        (s.cookie, s.status),
        (Cookie(4), DtoStatus::RemoteResponder)
    );
    assert_eq!(cm(&a.conn).0, EventNumber::Broken);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// After a write refused past the end of `b`'s region: `b`'s connection broke, the last
/// bytes of the region are untouched; both IAs are closed and `dir` removed.
fn refused_at_the_end_and_closed(a: Side, b: Side, dir: &std::path::Path) {
    assert_eq!(cm(&b.conn).0, EventNumber::Broken);
    let mut tail = [0u8; 8];
    b.lmr.read((1 << 20) - 8, &mut tail).unwrap();
    assert_eq!(tail, [0; 8], "a refused write touches nothing");
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

fn rdma_round(mode: &str, expect: &str) {
    let dir = scratch(&format!("rdma-{mode}"));
    let reg = registry(&dir, &format!(", rdma = \"{mode}\", slot_size = 4096"));
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let attr = a.ia.provider_attr().provider_specific_attr.clone();
    assert!(
        attr.iter()
            .any(|n| n.name == RDMA_MODE_ATTR && n.value == expect),
        "{attr:?}"
    );
    let _sp = connect_pair(&a, &b, 4300);

    // Write 300 KB from two local pieces into the middle of b's region.
    let src: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    a.lmr.write(0, &src[..1000]).unwrap();
    a.lmr.write(5000, &src[1000..]).unwrap();
    b.lmr.write(0, &[0xEE; 16]).unwrap();
    let remote = b.lmr.rmr_triplet(8, 300_000);
    a.ep.post_rdma_write(
        &[a.lmr.triplet(0, 1000), a.lmr.triplet(5000, 299_000)],
        Cookie(1),
        remote,
        none(),
    )
    .unwrap();
    let c = dto(&a.dto);
    assert_eq!(
        (c.cookie, c.status, c.transferred_length, c.operation),
        (Cookie(1), DtoStatus::Success, 300_000, DtoOp::RdmaWrite)
    );
    let mut got = vec![0u8; 300_016];
    b.lmr.read(0, &mut got).unwrap();
    assert_eq!(
        &got[..8],
        &[0xEE; 8],
        "nothing before the target range is touched"
    );
    assert!(got[8..300_008] == src[..], "written bytes intact");

    // Read it back into a's memory at another place.
    a.ep.post_rdma_read(
        &[a.lmr.triplet(400_000, 300_000)],
        Cookie(2),
        remote,
        none(),
    )
    .unwrap();
    let c = dto(&a.dto);
    assert_eq!(
        (c.cookie, c.status, c.transferred_length, c.operation),
        (Cookie(2), DtoStatus::Success, 300_000, DtoOp::RdmaRead)
    );
    let mut back = vec![0u8; 300_000];
    a.lmr.read(400_000, &mut back).unwrap();
    assert!(back == src);

    // Zero-length RDMA.
    a.ep.post_rdma_read(&[], Cookie(3), remote, none()).unwrap();
    assert_eq!(dto(&a.dto).status, DtoStatus::Success);

    // Past the end of the region: REMOTE_ACCESS, and both sides break.
    // 400 KB: more than the ring holds in copy mode, refused at its first fragment.
    let mut bad = b.lmr.rmr_triplet(0, 400_000);
    bad.virtual_address += (1 << 20) - 8;
    a.ep.post_rdma_write(&[a.lmr.triplet(0, 400_000)], Cookie(4), bad, none())
        .unwrap();
    a.ep.post_send(&[a.lmr.triplet(0, 1)], Cookie(5), none())
        .unwrap();
    let c = dto(&a.dto);
    assert_eq!((c.cookie, c.status), (Cookie(4), DtoStatus::RemoteAccess));
    assert_eq!(cm(&a.conn).0, EventNumber::Broken);
    let f = dto(&a.dto);
    assert_eq!((f.cookie, f.status), (Cookie(5), DtoStatus::Flushed));
    refused_at_the_end_and_closed(a, b, &dir);
}

#[test]
fn rdma_write_read_and_protection_through_the_ring() {
    rdma_round("copy", "copy");
}

#[test]
fn rdma_write_read_and_protection_by_cross_memory_attach() {
    // The mode detected at open: "cma" where the kernel allows it (it does on the CI host).
    let expect = if std::fs::metadata("/proc/self/mem").is_ok() {
        "cma"
    } else {
        "copy"
    };
    rdma_round("auto", expect);
}

/// With cross-memory attach, RDMA writes and reads up to `rdma_inline` bytes travel
/// through the ring, larger ones by address: both land intact, the target's checks refuse
/// a small write past the region's end, and the size is reported as an attribute.
#[test]
fn small_rdma_through_the_ring_beside_cross_memory_attach() {
    if std::fs::metadata("/proc/self/mem").is_err() {
        return; // no cross-memory attach here: rdma_write_read_and_protection_through_the_ring
    }
    let dir = scratch("rdma-inline");
    let reg = registry(&dir, ", rdma_inline = 1024, slot_size = 512");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let attr = a.ia.provider_attr().provider_specific_attr.clone();
    let value = |name| {
        attr.iter()
            .find(|n| n.name == name)
            .map(|n| n.value.clone())
    };
    assert_eq!(value(RDMA_MODE_ATTR).as_deref(), Some("cma"), "{attr:?}");
    assert_eq!(value(RDMA_INLINE_ATTR).as_deref(), Some("1024"), "{attr:?}");
    let _sp = connect_pair(&a, &b, 4350);
    let done = |op, len| {
        let c = dto(&a.dto);
        assert_eq!(
            (c.status, c.transferred_length, c.operation),
            (DtoStatus::Success, len, op),
            "{op:?} of {len}"
        );
    };
    let mut at = 0u64;
    // 1 024 bytes span three slots of 448; 1 025 and 3 000 go by address.
    for (i, len) in [1u32, 8, 448, 449, 1024, 1025, 3000]
        .into_iter()
        .enumerate()
    {
        let src: Vec<u8> = (0..len).map(|j| (j % 253) as u8 ^ i as u8).collect();
        a.lmr.write(0, &src).unwrap();
        let remote = b.lmr.rmr_triplet(at, len);
        a.ep.post_rdma_write(&[a.lmr.triplet(0, len)], Cookie(1), remote, none())
            .unwrap();
        done(DtoOp::RdmaWrite, len);
        let mut got = vec![0u8; len as usize];
        b.lmr.read(at as usize, &mut got).unwrap();
        assert!(got == src, "write of {len} intact");
        a.ep.post_rdma_read(&[a.lmr.triplet(8192, len)], Cookie(2), remote, none())
            .unwrap();
        done(DtoOp::RdmaRead, len);
        let mut back = vec![0u8; len as usize];
        a.lmr.read(8192, &mut back).unwrap();
        assert!(back == src, "read of {len} intact");
        at += u64::from(len) + 7;
    }
    // A small write that runs past the end of the region: refused at the target.
    let mut bad = b.lmr.rmr_triplet(0, 16);
    bad.virtual_address += (1 << 20) - 8;
    a.ep.post_rdma_write(&[a.lmr.triplet(0, 16)], Cookie(3), bad, none())
        .unwrap();
    assert_eq!(dto(&a.dto).status, DtoStatus::RemoteAccess);
    assert_eq!(cm(&a.conn).0, EventNumber::Broken);
    refused_at_the_end_and_closed(a, b, &dir);
}

#[test]
fn wrong_rkey_and_missing_privilege_are_remote_access() {
    let dir = scratch("prot");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 4400);
    let ro =
        b.pz.alloc(
            4096,
            MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
        )
        .unwrap();
    ro.write(0, &[7; 16]).unwrap();
    let t = ro.rmr_triplet(0, 16);
    a.ep.post_rdma_read(&[a.lmr.triplet(0, 16)], Cookie(1), t, none())
        .unwrap();
    assert_eq!(dto(&a.dto).status, DtoStatus::Success);
    a.ep.post_rdma_write(&[a.lmr.triplet(0, 16)], Cookie(2), t, none())
        .unwrap();
    assert_eq!(dto(&a.dto).status, DtoStatus::RemoteAccess);
    assert_eq!(cm(&a.conn).0, EventNumber::Broken);
    assert_eq!(cm(&b.conn).0, EventNumber::Broken);
    assert_eq!(ro.to_vec()[..16], [7; 16]);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn local_disconnect_with_rdma_in_flight_completes_everything_once_in_order() {
    for mode in ["auto", "copy"] {
        let dir = scratch(&format!("inflight-{mode}"));
        let reg = registry(&dir, &format!(", rdma = \"{mode}\""));
        let (a, b) = (Side::new(&reg), Side::new(&reg));
        let _sp = connect_pair(&a, &b, 4500);
        let remote = b.lmr.rmr_triplet(0, 256 * 1024);
        for i in 0..16u64 {
            if i % 2 == 0 {
                a.ep.post_rdma_read(&[a.lmr.triplet(0, 256 * 1024)], Cookie(i), remote, none())
                    .unwrap();
            } else {
                a.ep.post_rdma_write(&[a.lmr.triplet(0, 256 * 1024)], Cookie(i), remote, none())
                    .unwrap();
            }
        }
        a.ep.disconnect(CloseFlags::Abrupt).unwrap();
        assert_eq!(cm(&a.conn).0, EventNumber::Disconnected);
        let mut flushed = false;
        for i in 0..16u64 {
            let c = dto(&a.dto);
            assert_eq!(c.cookie, Cookie(i), "posting order");
            match c.status {
                DtoStatus::Success => assert!(!flushed, "no success after a flush"),
                DtoStatus::Flushed => flushed = true,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(cm(&b.conn).0, EventNumber::Disconnected);
        a.ia.close(CloseFlags::Abrupt).unwrap();
        b.ia.close(CloseFlags::Abrupt).unwrap();
        assert!(entries(&dir).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn shared_receive_queue_feeds_two_connections_and_releases_held_sends() {
    let dir = scratch("srq");
    let reg = registry(&dir, "");
    let (a, b, c) = (Side::new(&reg), Side::new(&reg), Side::new(&reg));
    let srq =
        b.ia.create_srq(
            &b.pz,
            dat::SrqAttr {
                max_recv_dtos: 16,
                max_recv_iov: 2,
                low_watermark: 0,
            },
        )
        .unwrap();
    let conn2 =
        b.ia.create_evd(8, dat::types::EvdFlags::CONNECTION, None)
            .unwrap();
    let mk = |conn: &dat::Evd| {
        b.ia.create_ep(&dat::EpParams {
            pz: Some(&b.pz),
            recv_evd: Some(&b.dto),
            request_evd: Some(&b.dto),
            connect_evd: Some(conn),
            srq: Some(&srq),
            ..dat::EpParams::default()
        })
        .unwrap()
    };
    let (ep1, ep2) = (mk(&b.conn), mk(&conn2));
    let (_sp, cr_evd) = listen(&b.ia, 4900);
    for (side, ep, conn) in [(&a, &ep1, &b.conn), (&c, &ep2, &conn2)] {
        side.connect(4900, b"", WAIT);
        let (cr, _) = request(&b.ia, &cr_evd);
        cr.accept(Some(ep), b"").unwrap();
        assert_eq!(cm(&side.conn).0, EventNumber::Established);
        assert_eq!(cm(conn).0, EventNumber::Established);
    }
    // Both send before any receive exists: both wait, then land as receives are posted.
    a.lmr.write(0, b"from a").unwrap();
    c.lmr.write(0, b"from c").unwrap();
    a.ep.post_send(&[a.lmr.triplet(0, 6)], Cookie(1), none())
        .unwrap();
    c.ep.post_send(&[c.lmr.triplet(0, 6)], Cookie(2), none())
        .unwrap();
    srq.post_recv(&[b.lmr.triplet(0, 64)], Cookie(10)).unwrap();
    srq.post_recv(&[b.lmr.triplet(64, 64)], Cookie(11)).unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        let r = dto(&b.dto);
        assert_eq!((r.status, r.transferred_length), (DtoStatus::Success, 6));
        let off = if r.cookie == Cookie(10) { 0 } else { 64 };
        let mut m = [0u8; 6];
        b.lmr.read(off, &mut m).unwrap();
        got.push((r.ep, m));
    }
    got.sort_by_key(|g| g.0);
    assert_eq!(got, vec![(ep1.id(), *b"from a"), (ep2.id(), *b"from c")]);
    assert_eq!(dto(&a.dto).status, DtoStatus::Success);
    assert_eq!(dto(&c.dto).status, DtoStatus::Success);
    for s in [&a, &b, &c] {
        s.ia.close(CloseFlags::Abrupt).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn concurrent_posters_and_pollers_keep_per_endpoint_order() {
    let dir = scratch("concurrent");
    let reg = registry(&dir, ", ring_slots = 8");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 5100);
    const N: u64 = 2000;
    // A second connection on the same IAs carries RDMA reads at the same time.
    let (a2, b2) = (Side::new(&reg), Side::new(&reg));
    let _sp2 = connect_pair(&a2, &b2, 5101);
    std::thread::scope(|s| {
        s.spawn(|| {
            // Receiver: keeps 32 receives posted, checks order and payload.
            for i in 0..32u64 {
                b.ep.post_recv(&[b.lmr.triplet(i * 8, 8)], Cookie(i), none())
                    .unwrap();
            }
            for i in 0..N {
                let r = dto(&b.dto);
                assert_eq!((r.cookie, r.status), (Cookie(i), DtoStatus::Success));
                let mut v = [0u8; 8];
                b.lmr.read(((i % 32) * 8) as usize, &mut v).unwrap();
                assert_eq!(u64::from_le_bytes(v), i);
                let next = i + 32;
                if next < N {
                    b.ep.post_recv(&[b.lmr.triplet((next % 32) * 8, 8)], Cookie(next), none())
                        .unwrap();
                }
            }
        });
        s.spawn(|| {
            // RDMA reader on the other connection.
            let remote = b2.lmr.rmr_triplet(0, 4096);
            for i in 0..200u64 {
                a2.ep
                    .post_rdma_read(&[a2.lmr.triplet(0, 4096)], Cookie(i), remote, none())
                    .unwrap();
                let c = dto(&a2.dto);
                assert_eq!((c.cookie, c.status), (Cookie(i), DtoStatus::Success));
            }
        });
        // Sender: up to 64 in flight, completions strictly in posting order.
        let mut done = 0u64;
        for i in 0..N {
            let at = 100_000 + (i % 128) * 8;
            a.lmr.write(at as usize, &i.to_le_bytes()).unwrap();
            a.ep.post_send(&[a.lmr.triplet(at, 8)], Cookie(i), none())
                .unwrap();
            while i + 1 - done > 64 {
                let c = dto(&a.dto);
                assert_eq!((c.cookie, c.status), (Cookie(done), DtoStatus::Success));
                done += 1;
            }
        }
        while done < N {
            let c = dto(&a.dto);
            assert_eq!((c.cookie, c.status), (Cookie(done), DtoStatus::Success));
            done += 1;
        }
    });
    for s in [&a, &b, &a2, &b2] {
        s.ia.close(CloseFlags::Abrupt).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_runaway_receive_queue_is_insufficient_resources() {
    let dir = scratch("full");
    let reg = registry(&dir, "");
    let a = Side::new(&reg);
    let max = a.ia.attr().max_dto_per_ep;
    assert_eq!(max, 16_384);
    for i in 0..u64::from(max) {
        a.ep.post_recv(&[a.lmr.triplet(0, 8)], Cookie(i), none())
            .unwrap();
    }
    let e =
        a.ep.post_recv(&[a.lmr.triplet(0, 8)], Cookie(0), none())
            .unwrap_err();
    assert_eq!(e.kind(), dat::ErrorType::InsufficientResources);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A ping-pong whose sends are all suppressed: the provider reports their retirement to the
/// facade only when asked (`retired_unreported`) or before a later request's completion, and
/// `dat_ep_get_status` still finds the requester idle once the replies came back.
#[test]
fn suppressed_sends_of_a_ping_pong_leave_the_endpoint_idle() {
    let dir = scratch("status");
    let reg = registry(&dir, "");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    let _sp = connect_pair(&a, &b, 5000);
    for i in 0..20u64 {
        b.ep.post_recv(&[b.lmr.triplet(0, 64)], Cookie(i), none())
            .unwrap();
        a.ep.post_recv(&[a.lmr.triplet(0, 64)], Cookie(i), none())
            .unwrap();
        a.ep.post_send(&[a.lmr.triplet(0, 8)], Cookie(i), CompletionFlags::SUPPRESS)
            .unwrap();
        assert_eq!(dto(&b.dto).cookie, Cookie(i));
        b.ep.post_send(&[b.lmr.triplet(0, 8)], Cookie(i), CompletionFlags::SUPPRESS)
            .unwrap();
        assert_eq!(dto(&a.dto).cookie, Cookie(i));
    }
    // Each reply proves the peer took the send before it; none of a's requests had a
    // completion of its own, so the count of the twenty comes from the provider on demand.
    // (b's last send stays outstanding until a's next record says it was taken: the head
    // word is read lazily, see `Ep::status`.)
    let st = a.ep.status().unwrap();
    assert_eq!((st.requests, st.recvs), (0, 0), "{st:?}");
    assert_eq!(b.ep.status().unwrap().recvs, 0);
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Raises the endpoint's segment limits to eight per request and receive.
fn eight_segments(s: &Side) {
    let mut attr = s.ep.query().unwrap().config.attr;
    attr.max_request_iov = 8;
    attr.max_recv_iov = 8;
    attr.max_rdma_write_iov = 8;
    attr.max_rdma_read_iov = 8;
    s.ep.modify(&dat::EpModify {
        attr: Some(&attr),
        ..dat::EpModify::default()
    })
    .unwrap();
}

/// The six 3 000-byte pieces of `s` from `at` (see [`six`]), one after the other.
fn read_six(s: &Side, at: usize) -> Vec<u8> {
    let mut v = vec![0u8; 18_000];
    for (i, p) in v.chunks_mut(3000).enumerate() {
        s.lmr.read(at + i * 10_000, p).unwrap();
    }
    v
}

/// Six pieces of `len` bytes each, 10 000 bytes apart from `at`.
fn six(s: &Side, at: u64, len: u32) -> Vec<dat::types::LmrTriplet> {
    (0..6u64)
        .map(|i| s.lmr.triplet(at + i * 10_000, len))
        .collect()
}

#[test]
fn requests_of_more_than_four_segments_by_cross_memory_attach() {
    // Every RDMA by address (`rdma_inline = 0`) and sends larger than a 1 KiB slot too: the
    // address lists of six ranges (seven with the last byte apart) go past what the lists
    // keep inline.
    if std::fs::metadata("/proc/self/mem").is_err() {
        return; // no cross-memory attach here: the copy mode has no address lists
    }
    let dir = scratch("six");
    let reg = registry(&dir, ", rdma_inline = 0, slot_size = 1024");
    let (a, b) = (Side::new(&reg), Side::new(&reg));
    eight_segments(&a);
    eight_segments(&b);
    let _sp = connect_pair(&a, &b, 4960);
    let src: Vec<u8> = (0..6 * 3000u32).map(|i| (i % 239) as u8).collect();
    for (i, piece) in src.chunks(3000).enumerate() {
        a.lmr.write(i * 10_000, piece).unwrap();
    }
    for round in 0..3u64 {
        // Write the six pieces into one range of b, read them back into six pieces of a.
        let remote = b.lmr.rmr_triplet(200_000, 18_000);
        a.ep.post_rdma_write(&six(&a, 0, 3000), Cookie(round), remote, none())
            .unwrap();
        assert_eq!(dto(&a.dto).status, DtoStatus::Success);
        let mut got = vec![0u8; 18_000];
        b.lmr.read(200_000, &mut got).unwrap();
        assert!(got == src, "written bytes intact");
        a.ep.post_rdma_read(&six(&a, 500_000, 3000), Cookie(10 + round), remote, none())
            .unwrap();
        assert_eq!(dto(&a.dto).status, DtoStatus::Success);
        assert!(read_six(&a, 500_000) == src, "read bytes intact");
        // A send of six pieces (larger than a slot: by address) into a receive of six.
        b.ep.post_recv(&six(&b, 300_000, 3000), Cookie(20 + round), none())
            .unwrap();
        a.ep.post_send(&six(&a, 0, 3000), Cookie(30 + round), none())
            .unwrap();
        let r = dto(&b.dto);
        assert_eq!(
            (r.status, r.transferred_length),
            (DtoStatus::Success, 18_000)
        );
        assert_eq!(dto(&a.dto).status, DtoStatus::Success);
        assert!(read_six(&b, 300_000) == src, "received bytes intact");
    }
    a.ia.close(CloseFlags::Abrupt).unwrap();
    b.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
