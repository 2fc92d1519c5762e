//! [`DynArc`]: an `Arc` of a trait object with the address of its value kept beside it.
//!
//! A method call through an `Arc<dyn Trait>` finds the value behind the reference counts
//! from the alignment the vtable gives, on every call (five instructions: the alignment's
//! load and the rounding); the facade calls its transport through one on every post and
//! every dequeue. A `DynArc` computes that address once, when it is made, and a call then
//! loads it with the vtable.

use std::ops::Deref;
use std::sync::Arc;

/// An `Arc<T>` (`T` a trait object, usually) and the address of its value. See the [module
/// documentation](self).
pub(crate) struct DynArc<T: ?Sized> {
    /// Owns the value for as long as `self` lives.
    arc: Arc<T>,
    /// `Arc::as_ptr(&arc)`.
    ptr: *const T,
}

// SAFETY: a `DynArc` is an `Arc<T>` plus a pointer into that same allocation, through which
// only shared references are made (`Deref`): sending it is sending the `Arc`.
unsafe impl<T: ?Sized + Send + Sync> Send for DynArc<T> {}
// SAFETY: as for `Send`: sharing a `DynArc` shares `&T`, as sharing the `Arc` would.
unsafe impl<T: ?Sized + Send + Sync> Sync for DynArc<T> {}

impl<T: ?Sized> DynArc<T> {
    pub(crate) fn new(arc: Arc<T>) -> DynArc<T> {
        let ptr = Arc::as_ptr(&arc);
        DynArc { arc, ptr }
    }
}

impl<T: ?Sized> Clone for DynArc<T> {
    fn clone(&self) -> DynArc<T> {
        DynArc {
            arc: Arc::clone(&self.arc),
            ptr: self.ptr,
        }
    }
}

impl<T: ?Sized> Deref for DynArc<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        // SAFETY: `ptr` is `Arc::as_ptr` of `self.arc`, which keeps the value alive and in
        // place for as long as `self` lives; the borrow cannot outlive `self`, and only
        // shared references are ever made through it.
        unsafe { &*self.ptr }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    trait Count: Send + Sync {
        fn bump(&self) -> usize;
    }

    /// Aligned beyond the counts, so that its value does not start where an `Arc`'s of a
    /// plain value would.
    #[repr(align(64))]
    struct Wide(AtomicUsize);

    impl Count for Wide {
        fn bump(&self) -> usize {
            self.0.fetch_add(1, Ordering::Relaxed) + 1
        }
    }

    #[test]
    fn calls_reach_the_arcs_value_and_clones_share_it() {
        let arc: Arc<dyn Count> = Arc::new(Wide(AtomicUsize::new(0)));
        let a = DynArc::new(Arc::clone(&arc));
        assert!(std::ptr::addr_eq(&*a, Arc::as_ptr(&arc)));
        assert_eq!(a.bump(), 1);
        let b = a.clone();
        drop(a);
        assert_eq!(std::thread::spawn(move || b.bump()).join().unwrap(), 2);
        assert_eq!(arc.bump(), 3);
        assert_eq!(
            Arc::strong_count(&arc),
            1,
            "the clones gave their counts back"
        );
    }
}
