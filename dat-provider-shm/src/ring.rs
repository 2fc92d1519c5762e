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
//! consumer: records it has taken and handed back), `sleeping` (the consumer asks to be woken
//! through its eventfd) and `starved` (the producer waits for the head to move: for room, or
//! for the completions of its requests). The first line (once the producer's `tail`, unused
//! in version 2) holds `cpu` since session 8: the CPU the consumer's polling thread last ran
//! on, plus one (0: unknown, or the consumer sleeps in a wait), written only when it
//! changes; the producer reads it to tell whether both pollers share one CPU (see
//! `ia::nap`). A peer that does not write it reads as unknown: nothing changes.
//!
//! A slot starts with one cache line: a 48-byte [`Rec`] header, up to [`INLINE`] payload bytes,
//! and the record's 8-byte sequence number. The producer publishes a record by storing its
//! sequence number (its index + 1) last, with release ordering; the consumer polls the
//! sequence number of the slot it expects next. A record of up to [`INLINE`] payload bytes (an
//! 8-byte message, an error acknowledgement) is thus one cache line for the reader; a larger
//! payload starts on the slot's second line, 64-byte aligned, so its copies move whole lines.
//! Messages larger than a slot are carried in consecutive slots; the slots rotate through the
//! whole ring, so the reader never pulls lines the writer touched last.
//!
//! Every record carries `ack`: how many records of the other ring its producer had consumed
//! when it wrote it. A side that takes records from the peer thereby learns, with no extra
//! cache line, which of its own records the peer has taken (see `conn`: a request taken by
//! its target is complete, so successes need no acknowledgement records).
//!
//! Version 3 of this layout (the header line with `ack` and the inline payload, the aligned
//! payload) is not compatible with version 2; both ends of a connection are the same build
//! in practice, and a segment of another version is refused when it is adopted.
//!
//! The peer writes the segment at any time and may be hostile or dead: headers are copied out
//! and checked before use, payload is only ever copied with raw pointers, and indices are
//! bounded by the ring size, so bad bytes can at worst break this one connection.
#![allow(unsafe_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sys::Mapping;

/// Identifies a datrs shm segment.
pub const MAGIC: u64 = 0x6461_7472_735f_7368; // "datrs_sh"
/// Layout version (3: one header line per slot with `ack`, the sequence number and a small
/// inline payload; larger payloads on the following, aligned lines).
pub const VERSION: u64 = 3;
const HDR: usize = 4096;
const CTL: usize = 256;
const SLOTS_AT: usize = 8192;
/// Bytes of the record header line (the [`Rec`], the inline payload and the sequence
/// number) at the start of every slot; a payload larger than [`INLINE`] starts here.
pub const REC_HDR: usize = 64;
/// Largest payload carried inside the header line (after the [`Rec`]).
pub const INLINE: usize = 8;
/// Offset of the inline payload in a slot.
const INLINE_AT: usize = 48;
/// Offset of the sequence number in a slot.
const SEQ_AT: usize = 56;
const _: () = assert!(
    std::mem::size_of::<Rec>() == INLINE_AT
        && INLINE_AT + INLINE == SEQ_AT
        && SEQ_AT + 8 == REC_HDR
);

/// Size of a segment with `slots` slots of `slot_size` bytes per ring.
pub fn segment_len(slots: u32, slot_size: u32) -> usize {
    SLOTS_AT + 2 * slots as usize * slot_size as usize
}

/// Payload bytes one ring direction of `slots` slots of `slot_size` bytes holds.
pub fn payload_bytes(slots: u32, slot_size: u32) -> u64 {
    u64::from(slots) * (slot_size as usize).saturating_sub(REC_HDR) as u64
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
    pub a: u32,
    /// Kind-specific (number of iovs).
    pub c: u32,
    /// Kind-specific (remote address).
    pub b: u64,
    /// Records of the other ring the producer had consumed when it wrote this one (set by
    /// the data path on every record).
    pub ack: u64,
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

    /// Where a payload of `len` bytes lies in its slot: inside the header line if it fits there,
    /// else on the aligned lines after it.
    fn payload_at(len: usize) -> usize {
        if len <= INLINE { INLINE_AT } else { REC_HDR }
    }

    fn slot_ptr(&self, ring: usize, index: u64) -> *mut u8 {
        let i = (index & u64::from(self.slots - 1)) as usize;
        let at = SLOTS_AT + (ring * self.slots as usize + i) * self.slot_size as usize;
        // SAFETY: `i < slots` and `ring < 2`, so the slot lies inside the mapping
        // (`check` verified its length).
        unsafe { self.map.ptr().add(at) }
    }
}

/// Orders this thread's earlier stores before its later loads, for every processor sharing
/// the segment (the Dekker pattern of the sleep/wake protocol: publish, then look at the
/// peer's flag; set our flag, then look for work). On x86-64 a locked read-modify-write of a
/// stack word does it, as Linux's `smp_mb`, at a fraction of the cost of `mfence`; elsewhere
/// a sequentially consistent fence.
#[inline]
pub fn store_load_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: ORs zero into the word at the stack pointer: mapped memory of this thread
    // that no other thread touches, whose value does not change (the flags it sets are
    // clobbered by default, no register is). Without `nomem`, the compiler also treats it
    // as a barrier for its own reordering of memory accesses.
    unsafe {
        std::arch::asm!("lock or dword ptr [rsp], 0", options(nostack))
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

/// Where one ring's slots lie, cached from its segment so that finding a slot is a mask, a
/// multiplication and an add (the segment stays mapped: the ring end holding this also
/// holds the segment's `Arc`).
#[derive(Clone, Copy, Debug)]
struct Slots {
    base: *mut u8,
    mask: u64,
    size: usize,
    payload_cap: usize,
}

// SAFETY: `base` points into a shared mapping that the owning ring end keeps alive; the
// memory is only accessed through raw copies and atomics (the protocol tolerates a peer
// writing it at any time), so using it from another thread is as sound as from this one.
unsafe impl Send for Slots {}

impl Slots {
    fn new(seg: &Segment, ring: usize) -> Slots {
        Slots {
            base: seg.slot_ptr(ring, 0),
            mask: u64::from(seg.slots - 1),
            size: seg.slot_size as usize,
            payload_cap: seg.payload_cap(),
        }
    }

    /// The slot that holds record `index`.
    #[inline]
    fn slot(&self, index: u64) -> *mut u8 {
        // SAFETY: `index & mask < slots`, so the slot lies inside the ring's slots, inside
        // the mapping (see `Segment::slot_ptr`).
        unsafe { self.base.add((index & self.mask) as usize * self.size) }
    }

    /// Reads the sequence number of a slot (acquire: the record it publishes is visible).
    #[inline]
    fn load_seq(slot: *mut u8) -> u64 {
        // SAFETY: `SEQ_AT + 8 <= REC_HDR <= slot_size`, inside the slot (from `slot`);
        // slots start at multiples of 64 from a page-aligned mapping, so the word is
        // 8-aligned; both processes only access it atomically.
        unsafe { (*slot.add(SEQ_AT).cast::<AtomicU64>()).load(Ordering::Acquire) }
    }

    /// Publishes the record written in a slot (release) by storing its sequence number.
    #[inline]
    fn store_seq(slot: *mut u8, seq: u64) {
        // SAFETY: as in `load_seq`.
        unsafe { (*slot.add(SEQ_AT).cast::<AtomicU64>()).store(seq, Ordering::Release) }
    }
}

/// The producing end of one ring (used under the owner's lock: one producer at a time).
#[derive(Debug)]
pub struct Producer {
    seg: Arc<Segment>,
    ring: usize,
    slots: Slots,
    tail: u64,
    head_cache: u64,
}

/// The consuming end of one ring (used under the owner's lock: one consumer at a time).
#[derive(Debug)]
pub struct Consumer {
    seg: Arc<Segment>,
    ring: usize,
    slots: Slots,
    head: u64,
    /// The head the producer last saw.
    published_head: u64,
    /// The `cpu` word as this side last wrote it.
    announced_cpu: u64,
    /// Polls that take records until the next announcement ([`Consumer::announce_due`]).
    announce_in: u32,
}

/// Polls that take records from a ring between two announcements of the poller's CPU
/// ([`Consumer::announce_due`]).
pub const ANNOUNCE_EVERY: u32 = 16;

/// Both ends of a connection's rings as seen from one side.
pub fn ends(seg: &Arc<Segment>, requester: bool) -> (Producer, Consumer) {
    let (tx, rx) = if requester { (0, 1) } else { (1, 0) };
    let p = Producer {
        seg: seg.clone(),
        ring: tx,
        slots: Slots::new(seg, tx),
        tail: 0,
        head_cache: 0,
    };
    let c = Consumer {
        seg: seg.clone(),
        ring: rx,
        slots: Slots::new(seg, rx),
        head: 0,
        published_head: 0,
        announced_cpu: 0,
        announce_in: 0,
    };
    (p, c)
}

impl Producer {
    /// Payload capacity of one slot.
    #[inline]
    pub fn payload_cap(&self) -> usize {
        self.slots.payload_cap
    }

    /// True if a slot is free (refreshes the cached head only when needed).
    #[inline]
    pub fn has_room(&mut self) -> bool {
        let n = self.slots.mask + 1;
        if self.tail.wrapping_sub(self.head_cache) < n {
            return true;
        }
        self.refresh_acked();
        self.tail.wrapping_sub(self.head_cache) < n
    }

    /// The head the consumer last reported (through the control block or a record's `ack`):
    /// records before it have been taken.
    pub fn acked(&self) -> u64 {
        self.head_cache
    }

    /// Index of the next record to be pushed.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Takes note of a head reported by the consumer in a record's `ack`. (Indices are never
    /// wrapped: 2^64 records outlast any connection.)
    ///
    /// # Errors
    /// [`Corrupt`] for a head beyond the records pushed. A head behind the one known is
    /// ignored: the control block may have told more since that record was written.
    pub fn note_acked(&mut self, head: u64) -> Result<(), Corrupt> {
        if head > self.tail {
            return Err(Corrupt);
        }
        self.head_cache = self.head_cache.max(head);
        Ok(())
    }

    /// Reads the head the consumer published in the control block; returns true if it moved
    /// since last known. (A head beyond the tail is ignored: the ring then stays full for
    /// the consumer that wrote it.)
    pub fn refresh_acked(&mut self) -> bool {
        let head = self
            .seg
            .word(self.seg.ctl(self.ring) + 64)
            .load(Ordering::Acquire);
        if head <= self.head_cache || head > self.tail {
            return false;
        }
        self.head_cache = head;
        true
    }

    /// Writes one record of `rec.len` payload bytes (at most [`Producer::payload_cap`]),
    /// which `fill(dst, len)` copies to `dst`, and publishes it. Returns false if the ring is
    /// full.
    #[inline]
    pub fn push(&mut self, rec: Rec, fill: impl FnOnce(*mut u8, usize)) -> bool {
        if !self.has_room() {
            return false;
        }
        let slot = self.slots.slot(self.tail);
        let n = (rec.len as usize).min(self.payload_cap());
        debug_assert_eq!(n, rec.len as usize, "a record longer than a slot");
        // SAFETY: the slot is `slot_size` bytes inside the mapping; a payload of `n` bytes
        // fits at its place (inline: `INLINE` bytes before the sequence number; else
        // `payload_cap` bytes after the header line).
        fill(unsafe { slot.add(Segment::payload_at(n)) }, n);
        // SAFETY: the header area of the slot holds `size_of::<Rec>() == INLINE_AT` bytes;
        // unaligned write because the peer might map at any offset (it cannot, but it costs
        // nothing).
        unsafe {
            std::ptr::write_unaligned(
                slot.cast::<Rec>(),
                Rec {
                    len: n as u32,
                    ..rec
                },
            )
        };
        let index = self.tail;
        self.tail = self.tail.wrapping_add(1);
        // Publishes the header and payload written above.
        debug_assert_eq!(slot, self.slots.slot(index));
        Slots::store_seq(slot, self.tail);
        true
    }

    /// Asks the consumer to wake us when it frees slots; returns true if room appeared
    /// meanwhile (then the flag may stay set, which only costs a spurious wake-up).
    pub fn set_starved(&mut self) -> bool {
        self.ask_head();
        self.has_room()
    }

    /// Asks the consumer to wake us when its head moves (room, or completions awaited);
    /// returns true if it moved past what we knew meanwhile (then the flag may stay set,
    /// which only costs a spurious wake-up).
    pub fn watch_head(&mut self) -> bool {
        self.ask_head();
        self.refresh_acked()
    }

    fn ask_head(&self) {
        self.seg
            .word(self.seg.ctl(self.ring) + 192)
            .store(1, Ordering::Relaxed);
        store_load_fence();
    }

    /// The CPU the consumer's polling thread last announced (see the layout notes), if any.
    /// One load of a line the consumer writes only when its thread moves.
    pub fn consumer_cpu(&self) -> Option<u32> {
        let v = self
            .seg
            .word(self.seg.ctl(self.ring))
            .load(Ordering::Relaxed);
        v.checked_sub(1).and_then(|c| u32::try_from(c).ok())
    }

    /// After publishing: true if the consumer sleeps and must be woken (clears its flag).
    pub fn consumer_needs_wake(&self) -> bool {
        store_load_fence();
        self.consumer_sleeping()
    }

    /// [`Producer::consumer_needs_wake`] for a caller that has already issued a
    /// [`store_load_fence`] after publishing.
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
    #[inline]
    fn published(&self) -> bool {
        Slots::load_seq(self.slots.slot(self.head)) == self.head.wrapping_add(1)
    }

    /// True if a record waits (published; [`Consumer::peek`] checks it).
    pub fn ready(&self) -> bool {
        self.published()
    }

    /// The oldest unreleased record, if any.
    ///
    /// # Errors
    /// [`Corrupt`] if a record's length does not fit its slot.
    pub fn peek(&mut self) -> Result<Option<Incoming>, Corrupt> {
        if !self.published() {
            return Ok(None);
        }
        let slot = self.slots.slot(self.head);
        // SAFETY: the slot lies inside the mapping; the header is copied out unaligned.
        let rec = unsafe { std::ptr::read_unaligned(slot.cast::<Rec>()) };
        let len = rec.len as usize;
        if len > self.slots.payload_cap {
            return Err(Corrupt);
        }
        Ok(Some(Incoming {
            rec,
            // SAFETY: inside the slot (see `push`).
            payload: unsafe { slot.add(Segment::payload_at(len)) },
        }))
    }

    /// Records consumed so far (the `ack` the data path writes into its own records).
    pub fn head(&self) -> u64 {
        self.head
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
        store_load_fence();
        self.producer_starved()
    }

    /// Stores the head if records were consumed since the last time; returns whether it
    /// did. The caller then issues a [`store_load_fence`] and asks
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
        self.seg.word(ctl + 128).store(1, Ordering::Relaxed);
        store_load_fence();
        self.published()
    }

    /// True on every [`ANNOUNCE_EVERY`]th call, and on the first after this side announced
    /// that it sleeps: a poll that takes records then announces its CPU. (Asking the CPU on
    /// every such poll cost 57 instructions per 8-byte round trip under cachegrind, where
    /// glibc's `sched_getcpu` has no restartable sequence and calls the vDSO; natively a
    /// few. The announcement is for a pinned peer's naps, which that peer's looks decide,
    /// and an announcement some messages old only costs the peer a nap that this side's
    /// next record ends; a thread that waits on a shared CPU announces at its own looks.)
    #[inline]
    pub fn announce_due(&mut self) -> bool {
        match self.announce_in.checked_sub(1) {
            Some(n) => {
                self.announce_in = n;
                false
            }
            None => {
                self.announce_in = ANNOUNCE_EVERY - 1;
                true
            }
        }
    }

    /// Announces the CPU this side's polling thread runs on (`None`: not polling, asleep in a
    /// wait). Stores only if it changed since the last call: the producer reads that line.
    #[inline]
    pub fn announce_cpu(&mut self, cpu: Option<u32>) {
        if cpu.is_none() {
            // Asleep: the first poll that takes records after the wake-up announces again.
            self.announce_in = 0;
        }
        let v = cpu.map_or(0, |c| u64::from(c) + 1);
        if v != self.announced_cpu {
            self.announced_cpu = v;
            self.seg
                .word(self.seg.ctl(self.ring))
                .store(v, Ordering::Relaxed);
        }
    }

    /// Withdraws the request to be woken. (Stores only if it was set: the producer reads
    /// that line after every record it publishes; a store would pull it over here.)
    pub fn disarm(&mut self) {
        let w = self.seg.word(self.seg.ctl(self.ring) + 128);
        if w.load(Ordering::Relaxed) != 0 {
            w.store(0, Ordering::Relaxed);
        }
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
        let (a, b) = pair(4, 256);
        let (mut tx, _) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
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
        let (a, b) = pair(4, 256);
        let (mut tx, _) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
        assert!(!rx.arm());
        assert!(tx.push(Rec::default(), |_, _| {}));
        assert!(tx.consumer_needs_wake());
        assert!(!tx.consumer_needs_wake());
        assert!(rx.arm(), "a record is pending");
    }

    #[test]
    fn the_consumer_announces_its_cpu_to_the_producer() {
        let (a, b) = pair(4, 256);
        let (tx, mut rx_other) = ends(&a, true);
        let (_, mut rx) = ends(&b, false);
        assert_eq!(tx.consumer_cpu(), None, "nothing announced yet");
        rx.announce_cpu(Some(0));
        assert_eq!(tx.consumer_cpu(), Some(0), "CPU 0 is not 'unknown'");
        rx.announce_cpu(Some(7));
        assert_eq!(tx.consumer_cpu(), Some(7));
        // The other ring's consumer (the requester's side) announces into its own ring.
        rx_other.announce_cpu(Some(3));
        assert_eq!(tx.consumer_cpu(), Some(7));
        rx.announce_cpu(None);
        assert_eq!(tx.consumer_cpu(), None, "asleep in a wait");
    }

    #[test]
    fn a_poll_that_takes_records_announces_every_so_often_and_first_after_a_sleep() {
        let (a, _) = pair(4, 256);
        let (_, mut rx) = ends(&a, false);
        let due = |rx: &mut Consumer, n: u32| (0..n).filter(|_| rx.announce_due()).count();
        assert!(rx.announce_due(), "the first poll announces");
        assert_eq!(due(&mut rx, ANNOUNCE_EVERY - 1), 0);
        assert_eq!(due(&mut rx, 3 * ANNOUNCE_EVERY), 3);
        rx.announce_cpu(Some(1));
        assert_eq!(
            due(&mut rx, ANNOUNCE_EVERY),
            1,
            "an announcement while polling keeps the cadence"
        );
        rx.announce_cpu(None);
        assert!(rx.announce_due(), "the first poll after a sleep announces");
        assert!(!rx.announce_due());
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
        assert!(tx.push(Rec::default(), |_, _| {}));
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
