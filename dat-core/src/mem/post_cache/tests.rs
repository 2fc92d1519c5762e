use std::sync::Arc;

use super::*;
use crate::mem::Buffer;
use crate::mem::pin::refs;
use crate::types::{LmrId, VaType};

fn triplet(r: &Region, len: u32) -> LmrTriplet {
    LmrTriplet {
        lmr_context: r.lmr_context,
        virtual_address: r.start,
        segment_length: len,
    }
}

fn credits(r: &Region) -> usize {
    slots()
        .entries
        .iter()
        .map(Cell::get)
        .find(|e| e.pin == r.pin.as_ptr())
        .map_or(0, |e| e.credits)
}

const PZ: PzId = PzId(1);

/// A table (keys from `seed`) with one LMR over `buf`, readable locally.
fn table_with(seed: u64, buf: &Arc<Buffer>) -> (MemTable, Arc<Region>) {
    let mut mem = MemTable::with_seed(seed);
    let a = mem
        .register(LmrId(1), PZ, buf.clone(), MemPriv::LOCAL_READ, VaType::Va)
        .unwrap();
    (mem, a)
}

#[test]
fn an_entry_serves_until_its_table_deregisters_anything() {
    let (pz, need) = (PZ, MemPriv::LOCAL_READ);
    let buf = Arc::new(Buffer::from_vec(vec![0; 64]));
    let (mut mem, a) = table_with(7, &buf);
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
    assert_eq!((seg.lkey, seg.len, seg.offset), (a.lmr_context, 8, 0));
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
    drop(seg);
}

#[test]
fn segments_take_and_give_back_credits_and_the_memory_outlives_the_lmr() {
    let (pz, need) = (PZ, MemPriv::LOCAL_READ);
    let buf = Arc::new(Buffer::from_vec(vec![5; 32]));
    let (mut mem, a) = table_with(9, &buf);
    fill(&mem, a.lmr_context);
    let g = Arc::clone(mem.generation());
    let s1 = lookup(&g, pz, &triplet(&a, 8), need).unwrap();
    assert_eq!((refs(&a.pin), credits(&a)), (1 + BATCH, BATCH - 1));
    let s2 = lookup(&g, pz, &triplet(&a, 8), need).unwrap();
    assert_eq!((refs(&a.pin), credits(&a)), (1 + BATCH, BATCH - 2));
    drop(s1);
    assert_eq!((refs(&a.pin), credits(&a)), (1 + BATCH, BATCH - 1));
    // Dropped on another thread: back to the count.
    std::thread::spawn(move || drop(s2)).join().unwrap();
    assert_eq!((refs(&a.pin), credits(&a)), (BATCH, BATCH - 1));
    // Freed with a segment outstanding on another thread: the memory stays until the
    // segment, the region and this thread's credits have all let go.
    let s3 = lookup(&g, pz, &triplet(&a, 8), need).unwrap();
    let region = mem.deregister(a.lmr_context).unwrap();
    drop(a);
    drop(region);
    let t = std::thread::spawn(move || {
        assert_eq!(s3.to_vec(), vec![5; 8]);
        drop(s3);
    });
    t.join().unwrap();
    assert!(
        Arc::strong_count(&buf) > 1,
        "this thread's entry still holds it"
    );
    // Another LMR taking the entry gives the region and the credits back.
    let mut n = 0;
    while Arc::strong_count(&buf) > 1 {
        let o = mem
            .register(
                LmrId(10 + n),
                pz,
                Arc::new(Buffer::from_vec(vec![0; 8])),
                need,
                VaType::Va,
            )
            .unwrap();
        fill(&mem, o.lmr_context);
        n += 1;
        assert!(n < 1000, "no LMR ever took the entry");
    }
    assert_eq!(Arc::strong_count(&buf), 1);
}

/// [`Slots::lookup_lent`], its segment never dropped.
fn lent(
    g: &LmrGeneration,
    pz: PzId,
    t: &LmrTriplet,
    need: MemPriv,
) -> Option<std::mem::ManuallyDrop<Segment>> {
    // SAFETY: the segment is returned in a `ManuallyDrop`, which the tests never drop.
    unsafe { slots().lookup_lent(g, pz, t, need) }.map(std::mem::ManuallyDrop::new)
}

#[test]
fn a_lent_segment_takes_no_credit_and_reads_the_memory() {
    let (pz, need) = (PZ, MemPriv::LOCAL_READ);
    let buf = Arc::new(Buffer::from_vec((0..32).collect()));
    let (mem, a) = table_with(11, &buf);
    let g = Arc::clone(mem.generation());
    assert!(lent(&g, pz, &triplet(&a, 8), need).is_none(), "not filled");
    fill(&mem, a.lmr_context);
    let before = (refs(&a.pin), credits(&a));
    let t = LmrTriplet {
        virtual_address: a.start + 4,
        ..triplet(&a, 8)
    };
    let seg = lent(&g, pz, &t, need).expect("filled");
    assert_eq!((seg.lkey, seg.offset, seg.len), (a.lmr_context, 4, 8));
    assert_eq!(seg.to_vec(), (4..12).collect::<Vec<u8>>());
    assert_eq!((refs(&a.pin), credits(&a)), before, "nothing taken");
    // A copy the transport keeps takes a reference of its own (given back to this thread's
    // entry, as a credit, when dropped here).
    let kept = Segment::clone(&seg);
    assert_eq!((refs(&a.pin), credits(&a)), (before.0 + 1, before.1));
    drop(kept);
    assert_eq!((refs(&a.pin), credits(&a)), (before.0 + 1, before.1 + 1));
    // The region's checks, as `lookup`'s.
    assert!(lent(&g, PzId(2), &t, need).is_none());
    assert!(lent(&g, pz, &t, MemPriv::LOCAL_WRITE).is_none());
    assert!(lent(&g, pz, &triplet(&a, 33), need).is_none());
}

#[test]
fn a_thread_gives_back_its_entries_when_it_ends() {
    let mem = Arc::new(std::sync::RwLock::new(MemTable::with_seed(11)));
    let (pz, need) = (PzId(1), MemPriv::LOCAL_READ);
    let buf = Arc::new(Buffer::from_vec(vec![3; 16]));
    let a = mem
        .write()
        .unwrap()
        .register(LmrId(1), pz, buf.clone(), need, VaType::Va)
        .unwrap();
    let m = Arc::clone(&mem);
    let t = triplet(&a, 4);
    let seg = std::thread::spawn(move || {
        let mem = m.read().unwrap();
        fill(&mem, t.lmr_context);
        lookup(mem.generation(), pz, &t, need).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(
        refs(&a.pin),
        2,
        "the pin's and the segment's: the thread's credits are back"
    );
    drop(seg);
    assert_eq!(refs(&a.pin), 1);
}

/// A thread's slots are reached by its thread pointer once it made them, the same slots its
/// thread-local names, and its cell is free again when it ended.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[test]
fn a_thread_finds_its_slots_by_its_thread_pointer_until_it_ends() {
    let id = std::thread::spawn(|| {
        let me = crate::by_thread::thread_id();
        assert!(!BY_THREAD.holds(me));
        let first: *const Slots = slots();
        assert_eq!(CACHE.with(Cell::get), first);
        // The cell is ours, unless another live thread (of the other tests) holds it.
        let held = BY_THREAD.holds(me);
        assert!(held || !BY_THREAD.is_free());
        if held {
            assert_eq!(BY_THREAD.get(), Some(first));
        }
        assert!(std::ptr::eq(slots(), first));
        (me, held)
    })
    .join()
    .unwrap();
    if id.1 {
        assert!(!BY_THREAD.holds(id.0), "released when the thread ended");
    }
}
