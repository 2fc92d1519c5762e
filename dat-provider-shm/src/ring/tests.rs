//! Unit tests of the ring: two mappings of one segment, as two processes see it.

use super::*;
use crate::sys;
use std::os::fd::AsFd;

fn pair(slots: u32, size: u32) -> (Arc<Segment>, Arc<Segment>) {
    let len = segment_len(slots, size);
    let fd = sys::memfd(len).unwrap();
    let a = Segment::create(Mapping::new(fd.as_fd(), len).unwrap(), slots, size).unwrap();
    let b = Segment::adopt(Mapping::new(fd.as_fd(), len).unwrap()).unwrap();
    (a, b)
}

/// The requester's producer and the acceptor's consumer of ring 0 of a fresh 4 x 256 segment
/// (each through its own mapping), and the requester's mapping.
fn ring0() -> (Producer, Consumer, Arc<Segment>) {
    let (a, b) = pair(4, 256);
    let (tx, _) = ends(&a, true);
    let (_, rx) = ends(&b, false);
    (tx, rx, a)
}

#[test]
fn records_cross_two_mappings_in_order_with_backpressure() {
    let (mut tx, mut rx, _) = ring0();
    for i in 0..4u64 {
        // Small payloads travel in the header line, larger ones on the next lines.
        let len = if i % 2 == 0 { 1 } else { 192 };
        assert_eq!(tx.payload_cap(), 192);
        assert!(tx.push(
            Rec {
                kind: 7,
                len,
                total: i,
                ..Rec::default()
            },
            |p, n| {
                assert_eq!(n, len as usize);
                // SAFETY: `p` has `n` writable bytes.
                unsafe { std::ptr::write_bytes(p, i as u8, n) };
            }
        ));
    }
    assert!(!tx.push(Rec::default(), |_, _| {}), "full ring refuses");
    assert!(!tx.set_starved());
    for i in 0..4u64 {
        let inc = rx.peek().unwrap().unwrap();
        let len = if i % 2 == 0 { 1 } else { 192 };
        assert_eq!((inc.rec.kind, inc.rec.total, inc.rec.len), (7, i, len));
        assert_eq!(inc.payload as usize % 64, if len == 1 { 48 } else { 0 });
        // SAFETY: `len` payload bytes were written (read one by one: no reference into
        // the shared segment).
        let byte = |k: usize| unsafe { inc.payload.add(k).read() };
        assert!((0..len as usize).all(|k| byte(k) == i as u8));
        assert_eq!(rx.release(), i == 0, "the starved producer is woken once");
    }
    assert!(rx.peek().unwrap().is_none());
    assert!(tx.has_room());
}

#[test]
fn the_consumer_head_reaches_the_producer_by_records_and_the_control_block() {
    let (mut tx, mut rx, _) = ring0();
    for _ in 0..3 {
        assert!(tx.push(Rec::default(), |_, _| {}));
    }
    assert_eq!(tx.note_acked(4), Err(Corrupt), "beyond the records pushed");
    tx.note_acked(1).unwrap();
    assert_eq!(tx.acked(), 1);
    tx.note_acked(0).unwrap();
    assert_eq!(tx.acked(), 1, "an older head is ignored");
    assert!(!tx.watch_head(), "nothing more consumed yet");
    for _ in 0..2 {
        assert!(rx.peek().unwrap().is_some());
        rx.consume();
    }
    assert!(rx.publish(), "the watching producer is woken once");
    assert!(!rx.publish());
    assert!(tx.refresh_acked());
    assert_eq!(tx.acked(), 2);
    assert!(!tx.refresh_acked(), "no news");
}

#[test]
fn sleeping_consumer_is_woken_once() {
    let (mut tx, mut rx, _) = ring0();
    assert!(!rx.arm());
    assert!(tx.push(Rec::default(), |_, _| {}));
    assert!(tx.consumer_needs_wake());
    assert!(!tx.consumer_needs_wake());
    assert!(rx.arm(), "a record is pending");
}

#[test]
fn segments_are_size_sealed() {
    use std::os::fd::AsRawFd;
    let fd = sys::memfd(segment_len(4, 256)).unwrap();
    assert!(sys::size_sealed(fd.as_fd()));
    // SAFETY: plain system call on a descriptor we own.
    let r = unsafe { libc::ftruncate(fd.as_raw_fd(), 0) };
    assert_eq!(r, -1, "a sealed segment cannot be shrunk under its peer");
    assert!(!valid_geometry(3, 256) && !valid_geometry(4, 100) && valid_geometry(4, 256));
    assert!(sys::is_anon_inode(sys::eventfd().unwrap().as_fd()));
    assert!(!sys::is_anon_inode(fd.as_fd()), "a memfd is not an eventfd");
}

/// Pushes a record of `len` bytes of `byte`; returns its payload block.
fn push_bytes(tx: &mut Producer, len: u32, byte: u8) -> u16 {
    let rec = Rec {
        len,
        ..Rec::default()
    };
    // SAFETY: `p` has `n` writable bytes.
    assert!(tx.push(rec, |p, n| unsafe { std::ptr::write_bytes(p, byte, n) }));
    // SAFETY: the header of the record just pushed lies inside the mapping.
    unsafe { (*tx.slots.slot(tx.tail - 1).cast::<Rec>()).block }
}

/// Takes one record of `len` bytes of `byte`; returns its payload block.
fn take_bytes(rx: &mut Consumer, len: u32, byte: u8) -> u16 {
    let inc = rx.peek().unwrap().unwrap();
    assert_eq!(inc.rec.len, len);
    // SAFETY: `len` payload bytes (read one by one: no reference into the segment).
    assert!((0..len as usize).all(|k| unsafe { inc.payload.add(k).read() } == byte));
    rx.consume();
    inc.rec.block
}

#[test]
fn payload_blocks_restart_when_the_ring_is_empty_and_never_overlap_records_in_flight() {
    let (mut tx, mut rx, _) = ring0();
    // A ping-pong: the producer learns that its record was taken before the next one
    // (from the reply's `ack`): every payload lies in block 0, whatever the slot.
    for i in 0..6u8 {
        assert_eq!(push_bytes(&mut tx, 100, i), 0);
        assert_eq!(take_bytes(&mut rx, 100, i), 0);
        tx.note_acked(rx.head()).unwrap();
    }
    // A stream: records in flight have distinct blocks, rotating through the ring.
    let blocks: Vec<u16> = (0..4u8).map(|i| push_bytes(&mut tx, 150, 10 + i)).collect();
    assert_eq!(blocks, [0, 1, 2, 3]);
    assert_eq!(take_bytes(&mut rx, 150, 10), 0);
    assert_eq!(take_bytes(&mut rx, 150, 11), 1);
    tx.note_acked(rx.head()).unwrap();
    // Two still in flight (blocks 2 and 3): the next ones continue around the ring.
    assert_eq!(push_bytes(&mut tx, 150, 20), 0);
    assert_eq!(push_bytes(&mut tx, 150, 21), 1);
    for (byte, block) in [(12, 2), (13, 3), (20, 0), (21, 1)] {
        assert_eq!(take_bytes(&mut rx, 150, byte), block);
    }
    // Small payloads stay in the header line and leave the blocks alone.
    tx.note_acked(rx.head()).unwrap();
    assert_eq!(push_bytes(&mut tx, 8, 30), 0);
    assert_eq!(
        push_bytes(&mut tx, 9, 31),
        1,
        "the 8-byte record is still in flight"
    );
    assert_eq!(take_bytes(&mut rx, 8, 30), 0);
    assert_eq!(take_bytes(&mut rx, 9, 31), 1);
}

#[test]
fn bad_headers_are_refused() {
    let (mut tx, mut rx, a) = ring0();
    assert!(tx.push(Rec::default(), |_, _| {}));
    // Corrupt the length as a hostile peer would.
    let slot = a.slot_ptr(0, 0);
    // SAFETY: the slot header lies inside the mapping.
    unsafe { (*slot.cast::<Rec>()).len = 10_000 };
    assert!(rx.peek().is_err());
    // A payload block beyond the ring is refused too.
    // SAFETY: as above.
    unsafe {
        *slot.cast::<Rec>() = Rec {
            len: 100,
            block: 4,
            ..Rec::default()
        }
    };
    assert!(rx.peek().is_err());
    // SAFETY: as above.
    unsafe { (*slot.cast::<Rec>()).block = 3 };
    assert!(rx.peek().unwrap().is_some(), "the last block of the ring");
    // A wrong magic is refused at adoption.
    let fd = sys::memfd(segment_len(4, 256)).unwrap();
    assert!(Segment::adopt(Mapping::new(fd.as_fd(), segment_len(4, 256)).unwrap()).is_none());
}
