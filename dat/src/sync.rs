//! Lock helpers: a poisoned lock (a panic elsewhere while holding it) still yields its data,
//! because every critical section here leaves the protected state consistent. And
//! [`thread_ref`], a thread-local reached without `LocalKey`'s "destroyed" check.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[inline]
pub(crate) fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub(crate) fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This thread's value of `key`, reached without the "destroyed" check of `LocalKey::with` /
/// `get` (which the compiler keeps on the hot path, on a niche of the value).
///
/// # Safety
/// `key` must be initialised by a constant and have no destructor, so that its storage stays
/// valid for as long as the thread runs, and `T` must not be `Sync` (a `Cell`), so that the
/// reference cannot be sent to or shared with another thread.
#[inline(always)]
pub(crate) unsafe fn thread_ref<T: 'static>(key: &'static std::thread::LocalKey<T>) -> &'static T {
    let p: *const T = key.with(std::ptr::from_ref);
    // SAFETY: the caller's contract: the storage outlives every use on this thread, and the
    // reference stays on it.
    unsafe { &*p }
}
