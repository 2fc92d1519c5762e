//! The LMRs a thread's posts named last, remembered per thread so that a post resolves its
//! segments without taking its IA's memory-table lock (two atomic read-modify-writes, on a
//! cache line every posting thread of the IA writes).
//!
//! An entry holds the region a lookup found under the lock (`MemTable::find_local`) with the
//! table's number and count of deregistrations at that time ([`LmrGeneration`]). While the
//! count has not moved, no LMR of that table was deregistered, so the key still names that
//! region and the checks of `Region::try_local` give what the locked lookup would. Any
//! deregistration in the table invalidates every thread's entries for it; the next post of
//! each thread looks up under the lock again. Registrations and RMR binds change no LMR a
//! key names and leave the entries valid.
//!
//! A post that read the count just before a concurrent `dat_lmr_free` advanced it uses the
//! LMR as a post holding the read lock before the free would: it is ordered before the free,
//! and its segment holds the buffer (`Arc`) as every post's does.
//!
//! An entry keeps its region (and so the buffer) alive after the LMR is freed until the
//! thread's next post that looks at it, another key taking its place, or the thread's end.
//! The memory of an LMR freed while a post names it is kept past the free already; this
//! extends that to the few regions a thread posted from last (`WAYS` per thread at most).
//! The region's memory is never touched through a stale entry: the count rules it out first.

use std::cell::Cell;
use std::sync::Arc;

use dat_core::mem::{LmrGeneration, MemTable, Region, Segment};
use dat_core::types::{LmrTriplet, MemPriv, PzId};

/// Entries per thread, chosen by the low bits of the key (the slot of the table's direct
/// index: keys drawn one after another take consecutive slots, so the LMRs of one table
/// rarely share an entry) mixed with the table's number (every table hands out its first
/// slots first: two IAs of one thread must not fight over the same entries).
const WAYS: usize = 16;

/// One remembered lookup; `table == 0` (no table has that number) and a null `region` when
/// empty. `region` comes from `Arc::into_raw`: the entry owns one strong count of it, given
/// back when the entry is replaced ([`fill`]) or the thread ends ([`Owner`]).
#[derive(Clone, Copy)]
struct Entry {
    table: u64,
    removed: u64,
    key: u32,
    region: *const Region,
}

impl Entry {
    const EMPTY: Entry = Entry {
        table: 0,
        removed: 0,
        key: 0,
        region: std::ptr::null(),
    };
}

thread_local! {
    // No destructor, so that a post reads it with a plain thread-relative load (a key with
    // a destructor is checked for its state at every access); `OWNER` gives the counts back.
    static CACHE: [Cell<Entry>; WAYS] = const { [const { Cell::new(Entry::EMPTY) }; WAYS] };
    static OWNER: Owner = const { Owner };
}

/// Gives back the regions of the thread's entries when the thread ends.
struct Owner;

impl Drop for Owner {
    fn drop(&mut self) {
        let _ = CACHE.try_with(|c| {
            for e in c {
                release(e.replace(Entry::EMPTY));
            }
        });
    }
}

/// Gives back the strong count `e` owns, if any.
fn release(e: Entry) {
    if !e.region.is_null() {
        // SAFETY: a non-null `region` of an entry came from `Arc::into_raw` in `fill`, and
        // the entry owning that count was just taken out of the cache, so it is given back
        // exactly once.
        drop(unsafe { Arc::from_raw(e.region) });
    }
}

#[inline(always)]
fn way(table: u64, key: u32) -> usize {
    // The top bits of a Fibonacci hash of the table's number: tables 1, 2, 3, ... start
    // their keys' slots at entries 9, 3, 12, 6, ...
    let mix = table.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60;
    (key as usize ^ mix as usize) % WAYS
}

/// The segment of the non-empty triplet `t` from this thread's entry for its key in the
/// table numbered by `generation`, if the entry is current and `Region::try_local` accepts
/// the triplet. `None` sends the caller to the locked lookup, which decides (and gives the
/// error, if any).
#[inline(always)]
pub(crate) fn lookup(
    generation: &LmrGeneration,
    pz: PzId,
    t: &LmrTriplet,
    need: MemPriv,
) -> Option<Segment> {
    let removed = generation.current();
    let table = generation.table();
    let e = CACHE.with(|c| c[way(table, t.lmr_context)].get());
    if e.table != table || e.removed != removed || e.key != t.lmr_context || e.region.is_null() {
        return None;
    }
    // SAFETY: the entry (a copy of this thread's, which only this thread changes) owns a
    // strong count of `region` (see `Entry`) that is given back only when this thread
    // replaces the entry or ends, neither of which can happen during this borrow.
    let region = unsafe { &*e.region };
    region.try_local(pz, t, need)
}

/// Remembers the LMR `key` names in `mem` (locked by the caller) for this thread's next
/// posts, if it names one.
#[cold]
pub(crate) fn fill(mem: &MemTable, key: u32) {
    let Some(region) = mem.find_local(key) else {
        return;
    };
    // Only with the thread's `Owner` in place, which gives the count back at its end.
    if OWNER.try_with(|_| ()).is_err() {
        return;
    }
    let generation = mem.generation();
    let entry = Entry {
        table: generation.table(),
        // Stable: the count moves only with the table locked for writing.
        removed: generation.current(),
        key,
        region: Arc::into_raw(Arc::clone(region)),
    };
    match CACHE.try_with(|c| c[way(entry.table, key)].replace(entry)) {
        Ok(old) => release(old),
        Err(_) => release(entry),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dat_core::mem::Buffer;
    use dat_core::types::{LmrId, VaType};

    fn triplet(r: &Region, len: u32) -> LmrTriplet {
        LmrTriplet {
            lmr_context: r.lmr_context,
            virtual_address: r.start,
            segment_length: len,
        }
    }

    #[test]
    fn an_entry_serves_until_its_table_deregisters_anything() {
        let mut mem = MemTable::with_seed(7);
        let (pz, need) = (PzId(1), MemPriv::LOCAL_READ);
        let buf = Arc::new(Buffer::from_vec(vec![0; 64]));
        let a = mem
            .register(LmrId(1), pz, buf.clone(), need, VaType::Va)
            .unwrap();
        let b = mem
            .register(LmrId(2), pz, buf.clone(), need, VaType::Va)
            .unwrap();
        let g = Arc::clone(mem.generation());
        assert!(
            lookup(&g, pz, &triplet(&a, 8), need).is_none(),
            "not filled"
        );
        fill(&mem, a.lmr_context);
        let seg = lookup(&g, pz, &triplet(&a, 8), need).expect("filled");
        assert_eq!((seg.lkey, seg.len), (a.lmr_context, 8));
        // The region's own checks still apply: another PZ, a missing privilege, out of range.
        assert!(lookup(&g, PzId(2), &triplet(&a, 8), need).is_none());
        assert!(lookup(&g, pz, &triplet(&a, 8), MemPriv::LOCAL_WRITE).is_none());
        assert!(lookup(&g, pz, &triplet(&a, 65), need).is_none());
        // Another table with the same key is never served from this one's entry.
        let other = MemTable::with_seed(7);
        assert!(lookup(other.generation(), pz, &triplet(&a, 8), need).is_none());
        // A registration leaves the entry valid; freeing any LMR of the table ends it.
        mem.register(LmrId(3), pz, buf.clone(), need, VaType::Va)
            .unwrap();
        assert!(lookup(&g, pz, &triplet(&a, 8), need).is_some());
        mem.deregister(b.lmr_context).unwrap();
        assert!(lookup(&g, pz, &triplet(&a, 8), need).is_none());
        fill(&mem, a.lmr_context);
        assert!(lookup(&g, pz, &triplet(&a, 8), need).is_some());
        mem.deregister(a.lmr_context).unwrap();
        assert!(lookup(&g, pz, &triplet(&a, 8), need).is_none());
        // A freed key is not remembered.
        fill(&mem, a.lmr_context);
        assert!(lookup(&g, pz, &triplet(&a, 8), need).is_none());
    }
}
