//! Data transfer: send/receive, RDMA write/read, acknowledgements, and their error paths.

use super::*;

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

#[test]
fn suppressed_successes_are_counted_before_the_next_completion() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    let dst = p.b.register(&[0u8; 64]);
    for i in 0..6 {
        p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, i * 8, 8)], i));
    }
    let quiet = |p: &Pair, cookie| {
        let mut wr = p.a.wr(PostOp::Send, &[tri(src, 0, 4)], cookie);
        wr.flags = CompletionFlags::SUPPRESS;
        wr
    };
    for c in [20, 21] {
        let wr = quiet(&p, c);
        p.a.e.post(wr);
    }
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 22));
    for c in [23, 24, 25] {
        let wr = quiet(&p, c);
        p.a.e.post(wr);
    }
    p.run();
    assert_eq!(p.b.take().len(), 6);
    // The count of the first run comes before the completion of the request posted after
    // it; the second run's is held back (no later request yet) and answered on demand.
    assert_eq!(
        p.a.take(),
        vec![
            Event::Retired(2),
            done(22, DtoStatus::Success, 4, DtoOp::Send),
        ]
    );
    assert_eq!(p.a.e.retired_unreported(), 3);
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn large_messages_travel_in_pieces() {
    let mut p = Pair::connected();
    let big = pattern(2 * 1024 * 1024 + 7, 3);
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
fn delayed_acks_ride_on_replies_and_are_bounded() {
    let mut p = Pair::connected();
    let src = p.a.register(b"x");
    let dst = p.b.register(&[0u8; 16]);
    p.b.e.set_ack_clock(Some(p.now));
    for i in 0..3 {
        p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, i, 1)], i));
        p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 10 + i));
    }
    p.wire_ba.clear();
    p.run();
    assert_eq!(p.b.take().len(), 3);
    assert!(
        p.a.take().is_empty(),
        "no ack yet: the sends are not complete"
    );
    assert!(p.wire_ba.is_empty(), "no bare ack in delayed mode");
    // A reply carries the ack.
    let back = p.a.register(&[0u8; 1]);
    p.a.e.post(p.a.wr(PostOp::Recv, &[tri(back, 0, 1)], 20));
    p.b.e.post(p.b.wr(PostOp::Send, &[tri(dst, 0, 1)], 21));
    p.run();
    let d = Frame::parse(&p.wire_ba).unwrap().unwrap();
    assert!(matches!(d.frame, Frame::Send { .. }) && d.ack == 3);
    assert_eq!(p.a.take().len(), 4);
    assert_eq!(p.b.take().len(), 1);
    // Without a reply, the ack goes out once it is due.
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 1)], 30));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 31));
    p.wire_ba.clear();
    p.run();
    assert!(p.wire_ba.is_empty());
    p.b.e.set_ack_clock(Some(p.now + Duration::from_micros(20)));
    p.run();
    assert_eq!(Frame::parse(&p.wire_ba).unwrap().unwrap().frame, Frame::Ack);
    assert_eq!(
        p.a.take(),
        vec![done(31, DtoStatus::Success, 1, DtoOp::Send)]
    );
    // Or once eight requests wait for it.
    p.b.e.set_ack_clock(Some(p.now + Duration::from_micros(20)));
    p.wire_ba.clear();
    for i in 0..8 {
        p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, i, 1)], 40 + i));
        p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 50 + i));
    }
    p.run();
    assert_eq!(p.a.take().len(), 8);
    // Immediate mode flushes whatever waits.
    p.b.e.set_ack_clock(Some(p.now));
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, 1)], 60));
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 1)], 61));
    p.run();
    assert!(p.a.take().is_empty());
    p.b.e.set_ack_clock(None);
    p.run();
    assert_eq!(p.a.take().len(), 1);
}

/// Bytes placed through `rx_direct` by [`transfer_pieces`].
static DIRECT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Moves at most `max` bytes from `from` to `to` through the vectored interface, reading
/// referenced runs out of registered memory (what `writev` does in the driver).
fn transfer_pieces(from: &mut Side, to: &mut Side, now: Instant, max: usize) -> bool {
    transfer_pieces_seen(from, to, now, max, &mut |_, _, _| {})
}

/// [`transfer_pieces`], showing `seen` every run read straight into memory.
fn transfer_pieces_seen(
    from: &mut Side,
    to: &mut Side,
    now: Instant,
    max: usize,
    seen: &mut dyn FnMut(&dat_core::mem::Segment, usize, usize),
) -> bool {
    let mut out = Vec::new();
    for piece in from.e.poll_transmit_pieces() {
        if out.len() >= max {
            break;
        }
        match piece {
            crate::engine::TxPiece::Bytes(b) => out.extend_from_slice(b),
            crate::engine::TxPiece::Mem { seg, off, len } => {
                let at = out.len();
                out.resize(at + len, 0);
                seg.copy_to(off, &mut out[at..]).unwrap();
            }
        }
    }
    out.truncate(max);
    let mut moved = !out.is_empty();
    from.e.advance_transmit(out.len());
    // Deliver like the driver: large payloads straight into memory when nothing is buffered.
    let mut rest = &out[..];
    loop {
        if to.inbox.is_empty()
            && let Some((seg, off, len)) = to.e.rx_direct()
        {
            let k = len.min(rest.len());
            if k == 0 {
                break;
            }
            seen(seg, off, k);
            seg.copy_from(off, &rest[..k]).unwrap();
            to.e.rx_direct_done(now, k);
            DIRECT.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
            rest = &rest[k..];
            continue;
        }
        to.inbox.extend_from_slice(rest);
        let used = to.e.handle_input(now, &to.inbox);
        to.inbox.drain(..used);
        moved |= used > 0;
        break;
    }
    for s in [from, to] {
        while let Some(ev) = s.e.poll_event() {
            s.events.push(ev);
        }
    }
    moved
}

#[test]
fn zero_copy_runs_carry_the_same_bytes_through_partial_writes() {
    let before = DIRECT.load(std::sync::atomic::Ordering::Relaxed);
    partial_writes(true, 2 * 1024 * 1024 + 13);
    assert!(
        DIRECT.load(std::sync::atomic::Ordering::Relaxed) > before,
        "direct path used"
    );
}

/// The copying path through partial writes, long enough to compact the transmit buffer.
#[test]
fn copied_frames_survive_partial_writes_and_compaction() {
    partial_writes(false, 2 * 1024 * 1024 + 5);
}

type Lmr = (u32, u32, u64);

/// A connected pair, a pattern of `n` bytes registered at A (`src`), and `n` zeroed bytes
/// registered at B (`dst`) and at A (`back`).
fn with_regions(zero_copy: bool, n: usize, seed: u8) -> (Pair, Vec<u8>, Lmr, Lmr, Lmr) {
    let mut p = Pair::connected();
    p.a.e.set_zero_copy(zero_copy);
    p.b.e.set_zero_copy(zero_copy);
    let data = pattern(n, seed);
    let src = p.a.register(&data);
    let dst = p.b.register(&vec![0u8; n]);
    let back = p.a.register(&vec![0u8; n]);
    (p, data, src, dst, back)
}

fn partial_writes(zero_copy: bool, n: usize) {
    let (mut p, data, src, dst, back) = with_regions(zero_copy, n, 5);
    let n32 = n as u32;
    let half = n32 / 2;
    // A send gathered from two segments, a write, and a read back.
    p.b.e.post(p.b.wr(PostOp::Recv, &[tri(dst, 0, n32)], 1));
    p.a.e.post(p.a.wr(
        PostOp::Send,
        &[tri(src, 0, half), tri(src, u64::from(half), n32 - half)],
        2,
    ));
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(dst, 0, n32)), &[tri(src, 0, n32)], 3));
    p.a.e
        .post(p.a.wr(PostOp::RdmaRead(rtri(dst, 0, n32)), &[tri(back, 0, n32)], 4));
    let now = p.now;
    for step in 0..100_000 {
        let max = 1 + (step * 7919) % 70_000;
        let x = transfer_pieces(&mut p.a, &mut p.b, now, max);
        let y = transfer_pieces(&mut p.b, &mut p.a, now, max);
        if !x && !y {
            break;
        }
    }
    assert_eq!(
        p.b.take(),
        vec![done(1, DtoStatus::Success, n32, DtoOp::Receive)]
    );
    assert_eq!(
        p.a.take(),
        vec![
            done(2, DtoStatus::Success, n32, DtoOp::Send),
            done(3, DtoStatus::Success, n32, DtoOp::RdmaWrite),
            done(4, DtoStatus::Success, n32, DtoOp::RdmaRead),
        ]
    );
    assert_eq!(p.b.read(dst.0), data);
    assert_eq!(p.a.read(back.0), data);
}

#[test]
fn zero_copy_falls_back_to_copies_for_poll_transmit() {
    let mut p = Pair::connected();
    p.a.e.set_zero_copy(true);
    let data = pattern(100_000, 1);
    let src = p.a.register(&data);
    let dst = p.b.register(&vec![0u8; data.len()]);
    let len = data.len() as u32;
    p.a.e
        .post(p.a.wr(PostOp::RdmaWrite(rtri(dst, 0, len)), &[tri(src, 0, len)], 1));
    p.run();
    assert_eq!(
        p.a.take(),
        vec![done(1, DtoStatus::Success, len, DtoOp::RdmaWrite)]
    );
    assert_eq!(p.b.read(dst.0), data);
}

/// Errors found at the start of a large piece (zero-copy receive) touch nothing either.
#[test]
fn streamed_pieces_check_before_placing() {
    // A write with a bad key, and a send too large for its receive, each arriving in small
    // bits so that the engine sees only the start of the piece first.
    for case in 0..2 {
        let mut p = Pair::connected();
        p.a.e.set_zero_copy(true);
        p.b.e.set_zero_copy(true);
        let n = 64 * 1024;
        let src = p.a.register(&vec![1u8; n]);
        let target = p.b.register(&vec![7u8; n]);
        let len = n as u32;
        let status = if case == 0 {
            let mut r = rtri(target, 0, len);
            r.rmr_context ^= 0x77;
            p.a.e
                .post(p.a.wr(PostOp::RdmaWrite(r), &[tri(src, 0, len)], 1));
            DtoStatus::RemoteAccess
        } else {
            p.b.e.post(p.b.wr(PostOp::Recv, &[tri(target, 0, 1000)], 9));
            p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, len)], 1));
            DtoStatus::RemoteResponder
        };
        let now = p.now;
        for _ in 0..10_000 {
            let x = transfer_pieces(&mut p.a, &mut p.b, now, 1000);
            let y = transfer_pieces(&mut p.b, &mut p.a, now, 1000);
            if !x && !y {
                break;
            }
        }
        let evs = p.a.take();
        assert_eq!(
            evs[0],
            done(
                1,
                status,
                0,
                if case == 0 {
                    DtoOp::RdmaWrite
                } else {
                    DtoOp::Send
                }
            )
        );
        assert_eq!(evs[1], Event::Cm(CmFact::Broken));
        assert_eq!(p.b.read(target.0), vec![7u8; n], "case {case}");
    }
}

/// The last byte of an RDMA write (at the target) and of an RDMA read response (at the
/// requester) is never read straight from the socket into memory, where the kernel's copy
/// stores in no particular order: it is placed last, after a fence (`place_write`,
/// `place_read`). The bytes are the same whatever the piece boundaries.
#[test]
fn the_last_byte_of_an_rdma_never_goes_straight_to_memory() {
    for n in [ZERO_COPY_MIN + 1, 2 * 1024 * 1024 + 3] {
        let (mut p, data, src, dst, back) = with_regions(true, n, 9);
        let n32 = n as u32;
        p.a.e
            .post(p.a.wr(PostOp::RdmaWrite(rtri(dst, 0, n32)), &[tri(src, 0, n32)], 1));
        p.a.e
            .post(p.a.wr(PostOp::RdmaRead(rtri(dst, 0, n32)), &[tri(back, 0, n32)], 2));
        let (mut direct, mut ends) = (0usize, 0usize);
        let mut seen = |seg: &dat_core::mem::Segment, off: usize, len: usize| {
            direct += len;
            if seg.offset + off + len >= seg.buf.len() {
                ends += 1;
            }
        };
        for step in 0..100_000 {
            let max = 1 + (step * 7919) % 70_000;
            let x = transfer_pieces_seen(&mut p.a, &mut p.b, p.now, max, &mut seen);
            let y = transfer_pieces_seen(&mut p.b, &mut p.a, p.now, max, &mut seen);
            if !x && !y {
                break;
            }
        }
        assert!(direct > 0, "n {n}: the direct path was used");
        assert_eq!(ends, 0, "n {n}: a direct read reached the last byte");
        assert_eq!(
            p.a.take(),
            vec![
                done(1, DtoStatus::Success, n32, DtoOp::RdmaWrite),
                done(2, DtoStatus::Success, n32, DtoOp::RdmaRead),
            ]
        );
        assert_eq!(p.b.read(dst.0), data);
        assert_eq!(p.a.read(back.0), data);
    }
}

#[test]
fn events_are_taken_in_order_and_a_waiting_request_is_known_until_framed() {
    let mut p = Pair::connected();
    let src = p.a.register(b"abcd");
    assert!(!p.a.e.request_waiting());
    p.a.e.post(p.a.wr(PostOp::Send, &[tri(src, 0, 4)], 1));
    assert!(p.a.e.request_waiting(), "posted, not framed yet");
    assert!(!p.a.e.poll_transmit().is_empty());
    assert!(
        !p.a.e.request_waiting(),
        "framed: nothing left to carry an ack"
    );
    // Posts on an unconnected engine complete as flushed, in posting order, whether taken
    // into an empty queue (swapped) or appended behind events already taken.
    let mut s = Side::new();
    let m = s.register(&[0u8; 8]);
    let flushed = |c| done(c, DtoStatus::Flushed, 0, DtoOp::Send);
    s.e.post(s.wr(PostOp::Send, &[tri(m, 0, 8)], 2));
    s.e.post(s.wr(PostOp::Send, &[tri(m, 0, 8)], 3));
    let mut out = VecDeque::new();
    s.e.take_events(&mut out);
    s.e.post(s.wr(PostOp::Send, &[tri(m, 0, 8)], 4));
    s.e.take_events(&mut out);
    assert!(!s.e.has_events());
    assert_eq!(Vec::from(out), vec![flushed(2), flushed(3), flushed(4)]);
}
