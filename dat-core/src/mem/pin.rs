//! [`SegBuf`]: the reference a [`Segment`](super::Segment) holds on its registered memory,
//! counted so that the usual post and its completion need no atomic read-modify-write.
//!
//! A segment must keep its memory alive while a provider may still copy from or into it,
//! whatever order the consumer frees things in (a shared-memory provider copies with plain
//! loads and stores: memory freed under it would be unmapped or reused). An `Arc<Buffer>`
//! per segment did that at the cost of an atomic increment per post and an atomic decrement
//! per completion, each a full barrier on x86.
//!
//! Every region has one pin ([`Region::pin`](super::Region::pin)); the references to it
//! are counted in its own atomic count, but a thread takes them in batches (64 with one
//! atomic add) into its entry of the post cache (`post_cache`), which hands them to the
//! segments of its posts one by one without an atomic operation. A segment dropped on a
//! thread whose entry for that region holds the pin gives its reference back there, again
//! without one. Anything else is one atomic add or subtract, as for an `Arc`. The memory
//! goes when the count reaches zero: when the region, every segment and every thread's
//! credits have let go. Credits are references too: returned when another LMR takes their
//! entry or the thread ends, so the memory of a freed LMR lives on while a thread that
//! posted from it keeps credits of it; it is never touched through a credit.
#![allow(unsafe_code)]

use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering, fence};

use super::buffer::Buffer;
use super::post_cache;

/// Beyond this the count is broken (a leak of references on an absurd scale): abort, as
/// `Arc` does, rather than wrap around and free memory in use.
const MAX_REFS: usize = isize::MAX as usize;

/// `Pinned::way` of a pin no post cache entry ever holds.
pub(super) const NO_WAY: usize = usize::MAX;

/// The counted allocation behind a [`SegBuf`].
pub(super) struct Pinned {
    refs: AtomicUsize,
    buf: Arc<Buffer>,
    /// The post cache entry that may hold credits of this pin (fixed by the region's table
    /// and key), or [`NO_WAY`].
    pub(super) way: usize,
}

/// A counted reference to a registered buffer, held by every [`Segment`](super::Segment);
/// dereferences to the [`Buffer`]. See the [module documentation](self).
pub struct SegBuf {
    ptr: NonNull<Pinned>,
}

// SAFETY: a `SegBuf` is a counted reference to a `Pinned`, whose fields are an atomic count,
// an `Arc<Buffer>` (`Send` and `Sync`) and a constant; the count is only ever changed
// atomically, and a credit kept by a thread is that thread's own reference, so moving or
// sharing a `SegBuf` across threads is as safe as for an `Arc<Buffer>`.
unsafe impl Send for SegBuf {}
// SAFETY: as for `Send`: shared access only reads the buffer handle and takes references
// through the atomic count.
unsafe impl Sync for SegBuf {}

/// Gives back `n` references to `p`, freeing it when they were the last.
///
/// # Safety
/// The caller owns `n` references to `p` (none if `n == 0`, when `p` is not touched) and
/// does not use them afterwards.
pub(super) unsafe fn release(p: *const Pinned, n: usize) {
    if n == 0 {
        return;
    }
    // SAFETY: the caller owns `n >= 1` references, so `p` is alive.
    let refs = unsafe { &(*p).refs };
    if refs.fetch_sub(n, Ordering::Release) != n {
        return;
    }
    // Every access through other references happened before their release (as `Arc`).
    fence(Ordering::Acquire);
    // SAFETY: these were the last references: `p` came from `Box::leak` in `SegBuf::with_way`,
    // and nobody else can reach it any more.
    drop(unsafe { Box::from_raw(p.cast_mut()) });
}

impl SegBuf {
    /// A pin of `buf` holding one reference (a hand-made segment's; a region's is made by
    /// its table).
    pub fn new(buf: Arc<Buffer>) -> SegBuf {
        SegBuf::with_way(buf, NO_WAY)
    }

    /// A pin of `buf` holding one reference whose credits a thread keeps in post cache entry
    /// `way`.
    pub(super) fn with_way(buf: Arc<Buffer>, way: usize) -> SegBuf {
        let b = Box::new(Pinned {
            refs: AtomicUsize::new(1),
            buf,
            way,
        });
        SegBuf {
            ptr: NonNull::from(Box::leak(b)),
        }
    }

    #[inline(always)]
    fn pinned(&self) -> &Pinned {
        // SAFETY: `self` owns a reference, so the allocation is alive while `self` is.
        unsafe { self.ptr.as_ref() }
    }

    /// The pin's address, which names it in a post cache entry.
    #[inline(always)]
    pub(super) fn as_ptr(&self) -> *const Pinned {
        self.ptr.as_ptr().cast_const()
    }

    /// The buffer, as the `Arc` it was registered with.
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.pinned().buf
    }

    /// Another reference to the same buffer (one atomic add, as `Arc::clone`).
    #[inline]
    pub fn take(&self) -> SegBuf {
        self.add_refs(1);
        SegBuf { ptr: self.ptr }
    }

    /// Adds `n` references, which the caller then owns (credits of a post cache entry).
    pub(super) fn add_refs(&self, n: usize) {
        if self.pinned().refs.fetch_add(n, Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
    }

    /// A segment's reference made of one the caller owns (a credit).
    ///
    /// # Safety
    /// The caller owns a reference to `p` and hands it over.
    #[inline(always)]
    pub(super) unsafe fn from_credit(p: *const Pinned) -> SegBuf {
        SegBuf {
            // SAFETY: `p` is alive (the caller owns a reference), hence not null.
            ptr: unsafe { NonNull::new_unchecked(p.cast_mut()) },
        }
    }
}

impl From<Arc<Buffer>> for SegBuf {
    fn from(buf: Arc<Buffer>) -> SegBuf {
        SegBuf::new(buf)
    }
}

impl Clone for SegBuf {
    fn clone(&self) -> SegBuf {
        self.take()
    }
}

impl Deref for SegBuf {
    type Target = Buffer;

    #[inline]
    fn deref(&self) -> &Buffer {
        &self.pinned().buf
    }
}

impl SegBuf {
    /// Gives this reference back: to this thread's post cache entry when it holds the pin,
    /// else to the count. What the drop does, but always inlined (a drop reached through
    /// a segment's drop glue stayed a call of its own, with its own thread-local access).
    #[inline(always)]
    pub fn release(self) {
        let this = std::mem::ManuallyDrop::new(self);
        this.give_back();
    }

    #[inline(always)]
    fn give_back(&self) {
        let p = self.as_ptr();
        let way = self.pinned().way;
        if way != NO_WAY && post_cache::keep(p, way) {
            return;
        }
        // SAFETY: `self` owns one reference, given back here once (by `release`, which then
        // forgets it, or by the drop).
        unsafe { release(p, 1) };
    }
}

impl Drop for SegBuf {
    #[inline]
    fn drop(&mut self) {
        self.give_back();
    }
}

impl fmt::Debug for SegBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.buffer(), f)
    }
}

#[cfg(test)]
pub(super) fn refs(b: &SegBuf) -> usize {
    b.pinned().refs.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hand_made_pin_counts_like_an_arc() {
        let buf = Arc::new(Buffer::from_vec(vec![7; 16]));
        let pin = SegBuf::new(Arc::clone(&buf));
        let a = pin.take();
        let b = a.clone();
        assert_eq!(refs(&pin), 3);
        pin.take().release();
        assert_eq!(
            refs(&pin),
            3,
            "a released reference is given back as a dropped one"
        );
        assert_eq!(b.to_vec(), vec![7; 16]);
        drop(pin);
        drop(a);
        assert_eq!(Arc::strong_count(&buf), 2, "b still holds it");
        std::thread::spawn(move || drop(b)).join().unwrap();
        assert_eq!(
            Arc::strong_count(&buf),
            1,
            "the last reference freed the pin"
        );
    }
}
