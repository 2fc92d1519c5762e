//! The LMRs a thread's posts named last, remembered per thread so that a post resolves its
//! segment without taking its IA's memory-table lock (two atomic read-modify-writes) and
//! without an atomic operation on the memory's reference count (see `pin`).
//!
//! An entry holds the region a lookup found under the lock ([`MemTable::find_local`]) with
//! the table's number and count of deregistrations at that time ([`LmrGeneration`]). While
//! the count has not moved, no LMR of that table was deregistered, so the key still names
//! that region and the region's checks give what the locked lookup would. Any
//! deregistration in the table invalidates every thread's entries for it; the next post of
//! each thread looks up under the lock again. Registrations and RMR binds change no LMR a
//! key names and leave the entries valid.
//!
//! A post that read the count just before a concurrent `dat_lmr_free` advanced it uses the
//! LMR as a post holding the read lock before the free would: it is ordered before the free,
//! and its segment holds a reference to the memory as every post's does.
//!
//! The entry also holds the thread's credits of the region's pin (references taken in a
//! batch, handed to segments one by one, and taken back from segments dropped on this
//! thread). An entry keeps its region and its credits (so the memory) after the LMR is
//! freed, until another LMR takes the entry or the thread ends; they are never used through a
//! stale entry: the count rules it out first.
#![allow(unsafe_code)]

use std::cell::Cell;
use std::sync::Arc;

use super::generation::LmrGeneration;
use super::pin::{self, Pinned, SegBuf};
use super::segment::Segment;
use super::table::{MemTable, Region};
use crate::by_thread::ByThread;
use crate::types::{LmrTriplet, MemPriv, PzId};

/// Entries per thread, chosen by the low bits of the key (the slot of the table's direct
/// index: keys drawn one after another take consecutive slots, so the LMRs of one table
/// rarely share an entry) mixed with the table's number (every table hands out its first
/// slots first: two IAs of one thread must not fight over the same entries).
const WAYS: usize = 16;
/// References an entry takes from its pin's count at once.
const BATCH: usize = 64;
/// Credits an entry keeps at most; references given back beyond go to the count.
const MAX_CREDITS: usize = 2 * BATCH;

/// One remembered lookup; `table == 0` (no table has that number) and null pointers when
/// empty. `region` comes from `Arc::into_raw`: the entry owns one strong count of it. The
/// entry owns `credits` references to `pin`, the region's pin.
#[derive(Clone, Copy)]
struct Entry {
    table: u64,
    removed: u64,
    key: u32,
    region: *const Region,
    pin: *const Pinned,
    credits: usize,
}

impl Entry {
    const EMPTY: Entry = Entry {
        table: 0,
        removed: 0,
        key: 0,
        region: std::ptr::null(),
        pin: std::ptr::null(),
        credits: 0,
    };
}

/// A thread's entries, which a post reads through one thread-local access ([`slots`]; in a
/// shared library every access to a thread-local is a call).
pub struct Slots {
    entries: [Cell<Entry>; WAYS],
}

thread_local! {
    // The thread's `Slots`, allocated at its first use ([`slots`]), or null. A pointer, not
    // the slots themselves (800 bytes): a shared library's thread-locals that fit in glibc's
    // 512 bytes of optional static TLS are reached without a call into the dynamic linker
    // when built with TLS descriptors (`.cargo/config.toml`), and `libdat_capi.so`'s did
    // not fit with the slots inside. No destructor, so that a post reads it with a plain
    // thread-relative load (a key with a destructor is checked for its state at every
    // access); `OWNER` gives back what the entries own, and frees them, when the thread ends.
    static CACHE: Cell<*const Slots> = const { Cell::new(std::ptr::null()) };
    static OWNER: Owner = const { Owner };
}

/// Each thread's `Slots` by its thread pointer (`crate::by_thread`: no thread-local access,
/// which in a shared library is a call): claimed where `CACHE` is set while `Owner` is live,
/// released by `Owner::drop` before it frees them.
static BY_THREAD: ByThread<Slots> = ByThread::new();

/// This thread's slots, for a post ([`Slots::lookup`]). The reference cannot leave the
/// thread (`Slots` is not `Sync`).
#[inline(always)]
pub fn slots() -> &'static Slots {
    match BY_THREAD.get() {
        // SAFETY: the cell holds this thread's `Slots` (see `BY_THREAD`), which live until
        // `Owner::drop` released the cell; `Slots` is made of `Cell`s (not `Sync`), so the
        // reference cannot be sent to or shared with another thread.
        Some(p) => unsafe { &*p },
        None => slots_local(),
    }
}

/// [`slots`] through the thread-local: a thread whose cell another thread holds, or one
/// with no slots yet (out of the post's line).
#[inline(never)]
fn slots_local() -> &'static Slots {
    let p = CACHE.with(Cell::get);
    if p.is_null() {
        return new_slots();
    }
    claim(p);
    // SAFETY: a non-null `CACHE` points to this thread's `Slots` (from `Box::into_raw` in
    // `new_slots`), freed only by `Owner::drop`, which nulls `CACHE` first; `Slots` is made
    // of `Cell`s (not `Sync`), so the reference cannot be sent to or shared with another
    // thread.
    unsafe { &*p }
}

/// Puts this thread's slots `p` in its cell of `BY_THREAD` if that is free and `Owner`, which
/// releases it, is live (not after its drop: a post from another thread-local's destructor).
fn claim(p: *const Slots) {
    if BY_THREAD.is_free() && OWNER.try_with(|_| ()).is_ok() {
        BY_THREAD.claim(p);
    }
}

/// This thread's slots if it has any (no allocation): for a segment's drop, which only
/// gives a credit back to an entry that holds its memory.
#[inline(always)]
fn try_slots() -> Option<&'static Slots> {
    if let Some(p) = BY_THREAD.get() {
        // SAFETY: as in `slots`.
        return Some(unsafe { &*p });
    }
    let p = CACHE.with(Cell::get);
    // SAFETY: as in `slots_local`.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// Allocates this thread's slots (its first post, or one after its `Owner` was dropped:
/// a post from another thread-local's destructor, which gets empty slots and never fills
/// them, see [`fill`]).
#[cold]
fn new_slots() -> &'static Slots {
    let b = Box::new(Slots {
        entries: [const { Cell::new(Entry::EMPTY) }; WAYS],
    });
    let p = Box::into_raw(b);
    CACHE.with(|c| c.set(p));
    // Registers the destructor that frees them (after it ran, this thread's destructors
    // are running: the slots are then left to the end of the process), then takes the
    // thread's cell.
    let _ = OWNER.try_with(|_| ());
    claim(p);
    // SAFETY: just allocated and stored; freed only by `Owner::drop` (see `slots`).
    unsafe { &*p }
}

impl Slots {
    /// [`lookup`] in these slots.
    #[inline(always)]
    pub fn lookup(
        &self,
        generation: &LmrGeneration,
        pz: PzId,
        t: &LmrTriplet,
        need: MemPriv,
    ) -> Option<Segment> {
        lookup_in::<false>(self, generation, pz, t, need)
    }

    /// [`lookup`] for a post whose request the transport only borrows
    /// (`EpPost::post_lent`): the segment's memory reference is the entry's own, lent for
    /// the post, not a credit taken and given back (about 30 instructions and two writes of
    /// the entry fewer per post).
    ///
    /// # Safety
    /// The segment must not be dropped or released: the caller forgets it (and any request
    /// holding it) before this thread's next post or the thread's end, either of which may
    /// replace the entry. A copy the transport keeps takes a reference of its own
    /// (`SegBuf`'s clone).
    #[inline(always)]
    pub unsafe fn lookup_lent(
        &self,
        generation: &LmrGeneration,
        pz: PzId,
        t: &LmrTriplet,
        need: MemPriv,
    ) -> Option<Segment> {
        lookup_in::<true>(self, generation, pz, t, need)
    }
}

/// Gives back what the thread's entries own when the thread ends.
struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        // The cell first: no look finds the slots once they are freed.
        BY_THREAD.release();
        let _ = CACHE.try_with(|c| {
            let p = c.replace(std::ptr::null());
            if p.is_null() {
                return;
            }
            // SAFETY: `p` came from `Box::into_raw` in `new_slots` and `CACHE` no longer
            // names it, so this is its only owner (no reference from `slots` outlives the
            // post or drop that took it, and this thread is ending).
            let slots = unsafe { Box::from_raw(p.cast_mut()) };
            for e in &slots.entries {
                release(e.replace(Entry::EMPTY));
            }
        });
    }
}

/// Gives back what `e`, just taken out of the cache, owns.
fn release(e: Entry) {
    // SAFETY: the entry owned `credits` references to `pin` (see `Entry`) and was taken out
    // of the cache, so they are given back exactly once.
    unsafe { pin::release(e.pin, e.credits) };
    if !e.region.is_null() {
        // SAFETY: a non-null `region` of an entry came from `Arc::into_raw` in `fill`, and
        // the entry owning that count was taken out of the cache.
        drop(unsafe { Arc::from_raw(e.region) });
    }
}

/// The entry of `key` in table `table`.
#[inline(always)]
pub(super) fn way(table: u64, key: u32) -> usize {
    // The top bits of a Fibonacci hash of the table's number: tables 1, 2, 3, ... start
    // their keys' slots at entries 9, 3, 12, 6, ...
    let mix = table.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
    (key as usize ^ mix as usize) % WAYS
}

/// The segment of the non-empty triplet `t` from this thread's entry for its key in the
/// table `generation` counts for, if the entry is current and the region accepts the
/// triplet (the checks of [`MemTable::try_local`]). `None` sends the caller to the locked
/// lookup, which decides (and gives the error, if any).
#[inline(always)]
pub fn lookup(
    generation: &LmrGeneration,
    pz: PzId,
    t: &LmrTriplet,
    need: MemPriv,
) -> Option<Segment> {
    lookup_in::<false>(slots(), generation, pz, t, need)
}

/// With `LENT`, the segment borrows the entry's reference (see [`Slots::lookup_lent`]).
#[inline(always)]
fn lookup_in<const LENT: bool>(
    slots: &Slots,
    generation: &LmrGeneration,
    pz: PzId,
    t: &LmrTriplet,
    need: MemPriv,
) -> Option<Segment> {
    let removed = generation.current();
    let table = generation.table();
    let cell = &slots.entries[way(table, t.lmr_context)];
    let mut e = cell.get();
    if e.table != table || e.removed != removed || e.key != t.lmr_context {
        return None;
    }
    // SAFETY: the entry (a copy of this thread's, which only this thread changes) owns a
    // strong count of `region` (see `Entry`), given back only when this thread replaces the
    // entry or ends, neither of which can happen during this borrow.
    let region = unsafe { &*e.region };
    let offset = region.local_offset(pz, t, need)?;
    let len = usize::try_from(t.segment_length).ok()?;
    let buf = if LENT {
        // SAFETY: the entry's region holds a reference to its pin (the region's own) while
        // the entry owns the region, which lasts beyond the post the caller lends this
        // segment to (`Slots::lookup_lent`'s contract: never dropped, so never given back).
        unsafe { SegBuf::from_credit(e.pin) }
    } else if e.credits > 0 {
        e.credits -= 1;
        cell.set(e);
        // SAFETY: the entry owned this credit, a reference to `e.pin`; it was just taken off
        // the entry.
        unsafe { SegBuf::from_credit(e.pin) }
    } else {
        refill(cell, region)
    };
    Some(Segment {
        buf,
        offset,
        len,
        lkey: t.lmr_context,
        addr: t.virtual_address,
    })
}

/// A reference to `region`'s pin for a segment, with a new batch of credits for `cell`
/// (whose entry holds `region` and no credits).
#[cold]
#[inline(never)]
fn refill(cell: &Cell<Entry>, region: &Region) -> SegBuf {
    region.pin.add_refs(BATCH);
    let mut e = cell.get();
    e.credits = BATCH - 1;
    cell.set(e);
    // SAFETY: one of the `BATCH` references just added, the others now the entry's.
    unsafe { SegBuf::from_credit(region.pin.as_ptr()) }
}

/// Keeps a reference to `p` being dropped as a credit of this thread's entry `way`, if that
/// entry holds `p` and has room.
#[inline(always)]
pub(super) fn keep(p: *const Pinned, way: usize) -> bool {
    let Some(cell) = try_slots().and_then(|s| s.entries.get(way)) else {
        return false;
    };
    let mut e = cell.get();
    let ok = e.pin == p && e.credits < MAX_CREDITS;
    if ok {
        e.credits += 1;
        cell.set(e);
    }
    ok
}

/// Remembers the LMR `key` names in `mem` (locked by the caller) for this thread's next
/// posts, if it names one. What the entry held before is given back.
#[cold]
pub fn fill(mem: &MemTable, key: u32) {
    let Some(region) = mem.find_local(key) else {
        return;
    };
    // Only with the thread's `Owner` in place, which gives back what the entry owns at
    // the thread's end.
    if OWNER.try_with(|_| ()).is_err() {
        return;
    }
    let generation = mem.generation();
    let table = generation.table();
    let entry = Entry {
        table,
        // Stable: the count moves only with the table locked for writing.
        removed: generation.current(),
        key,
        region: Arc::into_raw(Arc::clone(region)),
        pin: region.pin.as_ptr(),
        credits: 0,
    };
    let cell = &slots().entries[way(table, key)];
    let old = cell.replace(entry);
    if old.pin == entry.pin {
        // The same region again (the count moved): its credits stay with the entry.
        cell.set(Entry {
            credits: old.credits,
            ..entry
        });
        release(Entry { credits: 0, ..old });
    } else {
        release(old);
    }
}

#[cfg(test)]
mod tests;
