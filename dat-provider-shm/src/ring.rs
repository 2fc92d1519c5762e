//! The shared segment of one connection and its two single-producer single-consumer rings.
//!
//! # Layout (all offsets from the start of the memfd)
//! ```text
//! 0      header: magic, version, slot count, slot size          (one page)
//! 4096   ring 0 control (requester -> acceptor)                  (256 bytes)
//! 4352   ring 1 control (acceptor -> requester)                  (256 bytes)
//! 8192   ring 0 slots, then ring 1 slots
//! ```
//! A ring control block holds three words on separate cache lines: `head` (written by the
//! consumer), `sleeping` (the consumer asks to be woken through its eventfd) and `starved`
//! (the producer waits for free slots). (The first line, once the producer's `tail`, is
//! unused since version 2.)
//!
//! A slot is a 48-byte [`Rec`] header, the record's 8-byte sequence number, then up to
//! `slot_size - 56` payload bytes. The producer publishes a record by storing its sequence
//! number (its index + 1) last, with release ordering; the consumer polls the sequence number
//! of the slot it expects next. A small record (up to 8 payload bytes: acknowledgements,
//! 8-byte messages) is thus one cache line that the reader pulls once, instead of a tail
//! index, a header and a payload line. Messages larger than a slot are carried in
//! consecutive slots; the slots rotate through the whole ring, so the reader never pulls
//! lines the writer touched last.
//!
//! The peer writes the segment at any time and may be hostile or dead: headers are copied out
//! and checked before use, payload is only ever copied with raw pointers, and indices are
//! bounded by the ring size, so bad bytes can at worst break this one connection.
#![allow(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::sys::Mapping;

/// Identifies a datrs shm segment.
pub const MAGIC: u64 = 0x6461_7472_735f_7368; // "datrs_sh"
/// Layout version (2: sequence numbers in the slots, payload after them).
pub const VERSION: u64 = 2;
const HDR: usize = 4096;
const CTL: usize = 256;
const SLOTS_AT: usize = 8192;
/// Bytes of the record header (the [`Rec`] and its sequence number) at the start of every
/// slot.
pub const REC_HDR: usize = 56;
/// Offset of the sequence number in a slot.
const SEQ_AT: usize = 48;
const _: () = assert!(std::mem::size_of::<Rec>() == SEQ_AT && SEQ_AT + 8 == REC_HDR);

/// Size of a segment with `slots` slots of `slot_size` bytes per ring.
pub fn segment_len(slots: u32, slot_size: u32) -> usize {
    SLOTS_AT + 2 * slots as usize * slot_size as usize
}

/// True for a ring geometry this provider accepts: a power-of-two slot count in 2..=65536,
/// slots of 256 bytes to 1 MiB in multiples of 64.
pub fn valid_geometry(slots: u32, slot_size: u32) -> bool {
    slots.is_power_of_two()
        && (2..=1 << 16).contains(&slots)
        && (256..=1 << 20).contains(&slot_size)
        && slot_size.is_multiple_of(64)
}

/// The header of one record (one slot). Field meaning depends on `kind` (see `conn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rec {
    /// Record kind.
    pub kind: u32,
    /// Payload bytes in this slot.
    pub len: u32,
    /// Total length of the message the record belongs to.
    pub total: u64,
    /// Offset of this slot's payload in the message.
    pub offset: u64,
    /// Kind-specific (rkey, status).
    pub a: u64,
    /// Kind-specific (remote address).
    pub b: u64,
    /// Kind-specific (number of iovs).
    pub c: u64,
}

/// A mapped segment, shared by the rings of one connection.
#[derive(Debug)]
pub struct Segment {
    map: Mapping,
    slots: u32,
    slot_size: u32,
}

impl Segment {
    /// Initializes a freshly created (zeroed) segment.
    pub fn create(map: Mapping, slots: u32, slot_size: u32) -> Option<Arc<Segment>> {
        let seg = Segment::check(map, slots, slot_size)?;
        seg.word(0).store(MAGIC, Ordering::Relaxed);
        seg.word(8).store(VERSION, Ordering::Relaxed);
        seg.word(16).store(u64::from(slots), Ordering::Relaxed);
        seg.word(24).store(u64::from(slot_size), Ordering::Release);
        Some(Arc::new(seg))
    }

    /// Creates a fresh memfd-backed segment mapped in this process only (benches, tests).
    ///
    /// # Errors
    /// The system error of `memfd_create`/`mmap`, or `EINVAL` for an invalid geometry.
    pub fn anonymous(slots: u32, slot_size: u32) -> std::io::Result<Arc<Segment>> {
        let len = segment_len(slots, slot_size);
        let fd = crate::sys::memfd(len)?;
        let map = Mapping::new(std::os::fd::AsFd::as_fd(&fd), len)?;
        Segment::create(map, slots, slot_size)
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))
    }

    /// Adopts a segment created by the peer, after checking its header against its size.
    pub fn adopt(map: Mapping) -> Option<Arc<Segment>> {
        if map.len() < SLOTS_AT {
            return None;
        }
        // SAFETY: the mapping is at least one page long (checked), so the 32 header bytes
        // are inside it; atomics are 8-aligned because the mapping is page-aligned.
        let (magic, version, slots, size) = unsafe {
            let w = |o: usize| (*map.ptr().add(o).cast::<AtomicU64>()).load(Ordering::Acquire);
            (w(0), w(8), w(16), w(24))
        };
        if magic != MAGIC || version != VERSION {
            return None;
        }
        let slots = u32::try_from(slots).ok()?;
        let size = u32::try_from(size).ok()?;
        Segment::check(map, slots, size).map(Arc::new)
    }

    fn check(map: Mapping, slots: u32, slot_size: u32) -> Option<Segment> {
        let ok = valid_geometry(slots, slot_size) && map.len() >= segment_len(slots, slot_size);
        ok.then_some(Segment {
            map,
            slots,
            slot_size,
        })
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        debug_assert!(off + 8 <= self.map.len() && off.is_multiple_of(8));
        // SAFETY: callers pass fixed offsets inside the header and control pages, which
        // `check` guarantees are mapped; the mapping is page-aligned so the word is 8-aligned;
        // the memory is only ever accessed atomically at these offsets by both processes.
        unsafe { &*self.map.ptr().add(off).cast::<AtomicU64>() }
    }

    /// Payload capacity of one slot.
    pub fn payload_cap(&self) -> usize {
        self.slot_size as usize - REC_HDR
    }

    /// Slots per ring.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    fn ctl(&self, ring: usize) -> usize {
        HDR + ring * CTL
    }

    /// The sequence number of the slot that holds record `index`.
    fn seq(&self, ring: usize, index: u64) -> &AtomicU64 {
        // SAFETY: `SEQ_AT + 8 <= REC_HDR <= slot_size`, inside the slot (see `slot_ptr`);
        // slots start at multiples of 64 from a page-aligned mapping, so the word is
        // 8-aligned; both processes only access it atomically.
        unsafe { &*self.slot_ptr(ring, index).add(SEQ_AT).cast::<AtomicU64>() }
    }

    fn slot_ptr(&self, ring: usize, index: u64) -> *mut u8 {
        let i = (index & u64::from(self.slots - 1)) as usize;
        let at = SLOTS_AT + (ring * self.slots as usize + i) * self.slot_size as usize;
        // SAFETY: `i < slots` and `ring < 2`, so the slot lies inside the mapping
        // (`check` verified its length).
        unsafe { self.map.ptr().add(at) }
    }
}

/// The producing end of one ring (used under the owner's lock: one producer at a time).
#[derive(Debug)]
pub struct Producer {
    seg: Arc<Segment>,
    ring: usize,
    tail: u64,
    head_cache: u64,
}

/// The consuming end of one ring (used under the owner's lock: one consumer at a time).
#[derive(Debug)]
pub struct Consumer {
    seg: Arc<Segment>,
    ring: usize,
    head: u64,
    /// The head the producer last saw.
    published_head: u64,
}

/// Both ends of a connection's rings as seen from one side.
pub fn ends(seg: &Arc<Segment>, requester: bool) -> (Producer, Consumer) {
    let (tx, rx) = if requester { (0, 1) } else { (1, 0) };
    let p = Producer {
        seg: seg.clone(),
        ring: tx,
        tail: 0,
        head_cache: 0,
    };
    let c = Consumer {
        seg: seg.clone(),
        ring: rx,
        head: 0,
        published_head: 0,
    };
    (p, c)
}

impl Producer {
    /// Payload capacity of one slot.
    pub fn payload_cap(&self) -> usize {
        self.seg.payload_cap()
    }

    /// True if a slot is free (refreshes the cached head only when needed).
    pub fn has_room(&mut self) -> bool {
        let n = u64::from(self.seg.slots);
        if self.tail.wrapping_sub(self.head_cache) < n {
            return true;
        }
        self.head_cache = self
            .seg
            .word(self.seg.ctl(self.ring) + 64)
            .load(Ordering::Acquire);
        // A consumer that claims to be ahead of us is broken; treat as full.
        self.tail.wrapping_sub(self.head_cache) < n
    }

    /// Writes one record whose payload is produced by `fill(dst, cap)` (returns the payload
    /// bytes written, at most `cap`) and publishes it. Returns false if the ring is full.
    pub fn push(&mut self, mut rec: Rec, fill: impl FnOnce(*mut u8, usize) -> usize) -> bool {
        if !self.has_room() {
            return false;
        }
        let slot = self.seg.slot_ptr(self.ring, self.tail);
        let cap = self.payload_cap();
        // SAFETY: the slot is `slot_size` bytes inside the mapping; the payload area starts
        // after the `REC_HDR`-byte header and holds `cap` bytes.
        let payload = unsafe { slot.add(REC_HDR) };
        let n = fill(payload, cap).min(cap);
        rec.len = n as u32;
        // SAFETY: the header area of the slot holds `size_of::<Rec>() == SEQ_AT` bytes;
        // unaligned write because the peer might map at any offset (it cannot, but it costs
        // nothing).
        unsafe { std::ptr::write_unaligned(slot.cast::<Rec>(), rec) };
        let index = self.tail;
        self.tail = self.tail.wrapping_add(1);
        // Publishes the header and payload written above.
        self.seg
            .seq(self.ring, index)
            .store(self.tail, Ordering::Release);
        true
    }

    /// Asks the consumer to wake us when it frees slots; returns true if room appeared
    /// meanwhile (then the flag may stay set, which only costs a spurious wake-up).
    pub fn set_starved(&mut self) -> bool {
        self.seg
            .word(self.seg.ctl(self.ring) + 192)
            .store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.has_room()
    }

    /// After publishing: true if the consumer sleeps and must be woken (clears its flag).
    pub fn consumer_needs_wake(&self) -> bool {
        fence(Ordering::SeqCst);
        self.consumer_sleeping()
    }

    /// [`Producer::consumer_needs_wake`] for a caller that has already issued a
    /// sequentially consistent fence after publishing.
    pub fn consumer_sleeping(&self) -> bool {
        let w = self.seg.word(self.seg.ctl(self.ring) + 128);
        w.load(Ordering::Relaxed) != 0 && w.swap(0, Ordering::AcqRel) != 0
    }
}

/// A ring whose indices or a record header make no sense: the peer broke the protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Corrupt;

/// A record read from a ring: its header and a raw pointer to its payload (valid while the
/// segment lives and the record has not been released).
#[derive(Clone, Copy, Debug)]
pub struct Incoming {
    /// The header (copied out and checked: `len` fits the slot).
    pub rec: Rec,
    /// The payload.
    pub payload: *const u8,
}

impl Consumer {
    /// Slots in the ring.
    pub fn capacity(&self) -> u32 {
        self.seg.slots
    }

    /// True if the record at `head` is published (its slot carries its sequence number; a
    /// producer that writes anything else there only stalls its own connection).
    fn published(&self) -> bool {
        self.seg.seq(self.ring, self.head).load(Ordering::Acquire) == self.head.wrapping_add(1)
    }

    /// The oldest unreleased record, if any.
    ///
    /// # Errors
    /// [`Corrupt`] if a record's length does not fit its slot.
    pub fn peek(&mut self) -> Result<Option<Incoming>, Corrupt> {
        if !self.published() {
            return Ok(None);
        }
        let slot = self.seg.slot_ptr(self.ring, self.head);
        // SAFETY: the slot lies inside the mapping; the header is copied out unaligned.
        let rec = unsafe { std::ptr::read_unaligned(slot.cast::<Rec>()) };
        if rec.len as usize > self.seg.payload_cap() {
            return Err(Corrupt);
        }
        Ok(Some(Incoming {
            rec,
            // SAFETY: inside the slot (see `push`).
            payload: unsafe { slot.add(REC_HDR) },
        }))
    }

    /// Releases the record returned by the last `peek`. Returns true if the producer waits
    /// for room and must be woken (its flag is cleared).
    pub fn release(&mut self) -> bool {
        self.consume();
        self.publish()
    }

    /// Releases the record returned by the last `peek` locally: the next `peek` looks at the
    /// following slot; the producer sees the room at the next [`Consumer::publish`].
    pub fn consume(&mut self) {
        self.head = self.head.wrapping_add(1);
    }

    /// Tells the producer about the records consumed since the last call (one store and one
    /// fence for a whole batch). Returns true if the producer waits for room and must be
    /// woken (its flag is cleared).
    pub fn publish(&mut self) -> bool {
        if !self.publish_head() {
            return false;
        }
        fence(Ordering::SeqCst);
        self.producer_starved()
    }

    /// Stores the head if records were consumed since the last time; returns whether it
    /// did. The caller then issues a sequentially consistent fence and asks
    /// [`Consumer::producer_starved`] (see [`Consumer::publish`]).
    pub fn publish_head(&mut self) -> bool {
        if self.head == self.published_head {
            return false;
        }
        self.published_head = self.head;
        self.seg
            .word(self.seg.ctl(self.ring) + 64)
            .store(self.head, Ordering::Release);
        true
    }

    /// After a head store and a fence: true if the producer waits for room and must be
    /// woken (its flag is cleared).
    pub fn producer_starved(&self) -> bool {
        let w = self.seg.word(self.seg.ctl(self.ring) + 192);
        w.load(Ordering::Relaxed) != 0 && w.swap(0, Ordering::AcqRel) != 0
    }

    /// Announces that this side is about to sleep: returns true if a record arrived in the
    /// meantime (then do not sleep).
    pub fn arm(&mut self) -> bool {
        let ctl = self.seg.ctl(self.ring);
        self.seg.word(ctl + 128).store(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        self.published()
    }

    /// Withdraws the request to be woken.
    pub fn disarm(&mut self) {
        self.seg
            .word(self.seg.ctl(self.ring) + 128)
            .store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn records_cross_two_mappings_in_order_with_backpressure() {
        let (a, b) = pair(4, 256);
        let (mut tx, _) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
        for i in 0..4u64 {
            assert!(tx.push(
                Rec {
                    kind: 7,
                    total: i,
                    ..Rec::default()
                },
                |p, cap| {
                    assert_eq!(cap, 200);
                    // SAFETY: `p` has `cap` writable bytes.
                    unsafe { p.write(i as u8) };
                    1
                }
            ));
        }
        assert!(!tx.push(Rec::default(), |_, _| 0), "full ring refuses");
        assert!(!tx.set_starved());
        for i in 0..4u64 {
            let inc = rx.peek().unwrap().unwrap();
            assert_eq!((inc.rec.kind, inc.rec.total, inc.rec.len), (7, i, 1));
            // SAFETY: one payload byte was written.
            assert_eq!(unsafe { inc.payload.read() }, i as u8);
            assert_eq!(rx.release(), i == 0, "the starved producer is woken once");
        }
        assert!(rx.peek().unwrap().is_none());
        assert!(tx.has_room());
    }

    #[test]
    fn sleeping_consumer_is_woken_once() {
        let (a, b) = pair(4, 256);
        let (mut tx, _) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
        assert!(!rx.arm());
        assert!(tx.push(Rec::default(), |_, _| 0));
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

    #[test]
    fn bad_headers_are_refused() {
        let (a, b) = pair(4, 256);
        let (mut tx, _) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
        assert!(tx.push(Rec::default(), |_, _| 0));
        // Corrupt the length as a hostile peer would.
        let slot = a.slot_ptr(0, 0);
        // SAFETY: the slot header lies inside the mapping.
        unsafe { (*slot.cast::<Rec>()).len = 10_000 };
        assert!(rx.peek().is_err());
        // A wrong magic is refused at adoption.
        let fd = sys::memfd(segment_len(4, 256)).unwrap();
        assert!(Segment::adopt(Mapping::new(fd.as_fd(), segment_len(4, 256)).unwrap()).is_none());
    }
}
