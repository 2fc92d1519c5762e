//! A per-thread pointer reached from the thread pointer, without a thread-local access.
//!
//! In a shared library (`libdat_capi.so`, which libdat2 loads with `dlopen`) every access to
//! a thread-local is a call through a TLS descriptor, an indirect call and its return: the
//! costliest control transfer under emulation (about 18 ns in the Soft-RoCE guest against
//! 0.2 for an addition, BENCHMARKS.md session 17), made by every post (its post cache) and
//! every dequeue (its pacer). A [`ByThread`] is a small static table of cells keyed by the
//! thread pointer ([`thread_id`]: `%fs:0` on x86-64 Linux, distinct between live threads).
//! A thread claims the cell its id hashes to once ([`ByThread::claim`], a compare-exchange
//! from 0 to its id) and stores its pointer there; every later look ([`ByThread::get`]) is a
//! load of `%fs:0`, a multiply and two loads. A thread whose cell another live thread holds,
//! one that has not claimed, or a target without the thread pointer gets `None` and takes the
//! thread-local way, as before.
//!
//! Why a look can trust what it finds: a cell's `owner` is written only by a thread claiming
//! it for itself (from 0) and by that thread giving it back ([`ByThread::release`], to 0),
//! which it must do before its thread ends and before the pointed value is freed (from a
//! thread-local's destructor). So a look that finds its own id there finds its own claim
//! (no other live thread has that id, and a thread that had it before released it before it
//! ended), and the value it reads was written by itself, earlier in its own program order.
//! After a `fork`, the child's cells of the parent's other threads stay claimed; a thread of
//! the child that reuses one of their stacks (and so their id) takes over that cell and the
//! value it names, memory no other thread uses; nothing is shared between live threads.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Cells per table (a power of two). A collision only sends the later thread the
/// thread-local way.
const CELLS: usize = 64;

/// One thread's cell: its id and its pointer.
struct Cell<T> {
    owner: AtomicUsize,
    value: AtomicPtr<T>,
}

/// A table of per-thread pointers keyed by [`thread_id`] (see the [module docs](self)).
pub struct ByThread<T> {
    cells: [Cell<T>; CELLS],
}

impl<T> Default for ByThread<T> {
    fn default() -> ByThread<T> {
        ByThread::new()
    }
}

/// This thread's id: its thread pointer (`%fs:0`, the thread control block's own address, on
/// x86-64 Linux), distinct between live threads and never 0; 0 on other targets (where
/// [`ByThread`] is unused and ids come from elsewhere).
#[inline(always)]
pub fn thread_id() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tp: usize;
        // SAFETY: on x86-64 Linux `%fs` is the thread pointer and `%fs:0` holds its own
        // address (the TLS ABI); the load has no side effects and touches no Rust memory.
        #[allow(unsafe_code)]
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tp,
                // `nomem`: the word is no Rust memory and never changes while the thread
                // runs, so that two reads in one function are one.
                options(nostack, preserves_flags, pure, nomem)
            );
        }
        tp
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        0
    }
}

/// The cell of id `me`: the top bits of its Fibonacci hash (thread pointers differ in their
/// middle bits: one thread's stack mapping apart).
#[inline(always)]
fn index(me: usize) -> usize {
    ((me as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - CELLS.trailing_zeros())) as usize
}

impl<T> ByThread<T> {
    /// An empty table.
    pub const fn new() -> ByThread<T> {
        ByThread {
            cells: [const {
                Cell {
                    owner: AtomicUsize::new(0),
                    value: AtomicPtr::new(std::ptr::null_mut()),
                }
            }; CELLS],
        }
    }

    /// The pointer this thread stored with [`ByThread::claim`], if it holds its cell.
    #[inline(always)]
    pub fn get(&self) -> Option<*const T> {
        if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            self.get_as(thread_id())
        } else {
            None
        }
    }

    /// Claims this thread's cell for `value`: true if it was free (or this thread's already,
    /// whose value is then replaced). The caller must [`release`](ByThread::release) it
    /// before `value` is freed and before the thread ends.
    pub fn claim(&self, value: *const T) -> bool {
        self.claim_as(thread_id(), value)
    }

    /// True if the thread of id `id` ([`thread_id`]) holds its cell: for checks and tests
    /// (a cell is given back when its thread ends).
    pub fn holds(&self, id: usize) -> bool {
        id != 0 && self.cells[index(id)].owner.load(Ordering::Acquire) == id
    }

    /// True if this thread's cell is free (a [`ByThread::claim`] would take it).
    #[inline]
    pub fn is_free(&self) -> bool {
        let me = thread_id();
        me != 0 && self.cells[index(me)].owner.load(Ordering::Relaxed) == 0
    }

    /// Gives this thread's cell back, if it holds it: later looks of this thread get `None`.
    pub fn release(&self) {
        self.release_as(thread_id());
    }

    /// [`ByThread::get`] of the thread of id `me`, which is not 0 (a free cell's owner).
    #[inline(always)]
    fn get_as(&self, me: usize) -> Option<*const T> {
        let c = &self.cells[index(me)];
        // Relaxed: only this thread writes its own id there, and the value before it (see
        // the module docs); another thread's id, or 0, means "not ours".
        if c.owner.load(Ordering::Relaxed) == me {
            Some(c.value.load(Ordering::Relaxed).cast_const())
        } else {
            None
        }
    }

    fn claim_as(&self, me: usize, value: *const T) -> bool {
        if me == 0 {
            return false;
        }
        let c = &self.cells[index(me)];
        let ours = match c.owner.load(Ordering::Relaxed) {
            o if o == me => true,
            // A compare-exchange only where it may succeed: a thread whose cell another
            // holds retries at each of its thread-local looks, with a load.
            0 => c
                .owner
                .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok(),
            _ => false,
        };
        if ours {
            c.value.store(value.cast_mut(), Ordering::Relaxed);
        }
        ours
    }

    fn release_as(&self, me: usize) {
        if me == 0 {
            return;
        }
        let c = &self.cells[index(me)];
        if c.owner.load(Ordering::Relaxed) == me {
            c.value.store(std::ptr::null_mut(), Ordering::Relaxed);
            c.owner.store(0, Ordering::Release);
        }
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux"))]
mod tests {
    use super::*;

    static TABLE: ByThread<u32> = ByThread::new();

    #[test]
    fn a_thread_finds_only_what_it_claimed_until_it_releases() {
        let mine = 7u32;
        assert_ne!(thread_id(), 0);
        assert!(TABLE.get().is_none());
        assert!(TABLE.claim(&mine));
        assert_eq!(TABLE.get(), Some(std::ptr::from_ref(&mine)));
        // Another thread sees nothing of it (its own cell, or this one's held by us).
        std::thread::spawn(|| {
            assert!(TABLE.get().is_none());
            let theirs = Box::leak(Box::new(9u32));
            if TABLE.claim(theirs) {
                assert_eq!(TABLE.get(), Some(std::ptr::from_ref(theirs)));
                TABLE.release();
            }
            assert!(TABLE.get().is_none());
        })
        .join()
        .unwrap();
        assert_eq!(TABLE.get(), Some(std::ptr::from_ref(&mine)));
        TABLE.release();
        assert!(TABLE.get().is_none());
    }

    #[test]
    fn a_cell_held_by_another_id_is_not_taken_and_freed_cells_are() {
        static ONE: ByThread<u8> = ByThread::new();
        // Two ids (as thread pointers are: 8-byte aligned, never 0) that share a cell.
        let a = 0x7f00_0000_1000usize;
        let b = (1..)
            .map(|i| a + 8 * i)
            .find(|&b| index(b) == index(a))
            .unwrap();
        let (x, y) = (1u8, 2u8);
        assert!(ONE.claim_as(a, &x));
        assert!(!ONE.claim_as(b, &y));
        assert_eq!(ONE.get_as(a), Some(std::ptr::from_ref(&x)));
        assert!(ONE.get_as(b).is_none());
        // Only the holder gives it back.
        ONE.release_as(b);
        assert_eq!(ONE.get_as(a), Some(std::ptr::from_ref(&x)));
        ONE.release_as(a);
        assert!(ONE.get_as(a).is_none());
        assert!(ONE.claim_as(b, &y));
        assert_eq!(ONE.get_as(b), Some(std::ptr::from_ref(&y)));
        assert!(ONE.get_as(a).is_none());
        // Id 0 (no thread pointer) never claims.
        assert!(!ONE.claim_as(0, &x));
        ONE.release_as(b);
    }
}
