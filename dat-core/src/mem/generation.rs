//! [`LmrGeneration`]: a count of the LMRs a [`MemTable`](super::MemTable) has removed, which a
//! post path may read without the table's lock to tell whether an LMR it looked up before is
//! still registered.

use std::sync::atomic::{AtomicU64, Ordering};

/// Tables made so far in this process: each gets its own number, so that a lookup
/// remembered for one table is never taken for another's (an address could be reused).
static TABLES: AtomicU64 = AtomicU64::new(1);

/// The identity of one [`MemTable`](super::MemTable) and the number of LMRs it has
/// deregistered.
///
/// A region found under the table's lock while [`LmrGeneration::current`] was `g` is still
/// registered, under the same key, for as long as `current()` still reads `g`: only a
/// deregistration changes the LMRs a key names (keys are unique among live LMRs; a new
/// registration never takes a live key, and RMR binds do not touch LMRs), and each
/// deregistration advances the count before it removes anything.
#[derive(Debug)]
pub struct LmrGeneration {
    table: u64,
    removed: AtomicU64,
}

impl LmrGeneration {
    pub(super) fn new() -> LmrGeneration {
        LmrGeneration {
            table: TABLES.fetch_add(1, Ordering::Relaxed),
            removed: AtomicU64::new(0),
        }
    }

    /// The table's number, unique in this process (never 0).
    #[inline]
    pub fn table(&self) -> u64 {
        self.table
    }

    /// The number of deregistrations so far (Acquire: a reader that sees a count sees the
    /// removals before it).
    #[inline]
    pub fn current(&self) -> u64 {
        self.removed.load(Ordering::Acquire)
    }

    /// Counts a deregistration; called with the table locked for writing, before the LMR is
    /// removed.
    pub(super) fn advance(&self) {
        self.removed.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_numbered_apart_and_count_removals() {
        let (a, b) = (LmrGeneration::new(), LmrGeneration::new());
        assert_ne!(a.table(), b.table());
        assert_ne!(a.table(), 0);
        assert_eq!(a.current(), 0);
        a.advance();
        assert_eq!((a.current(), b.current()), (1, 0));
    }
}
