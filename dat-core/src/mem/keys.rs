//! Generation of `lmr_context` / `rmr_context` values.
//!
//! A remote key is the only thing that stands between a peer and the memory of this process,
//! so keys are drawn from a CSPRNG ([`StdRng`], seeded from the operating system) rather than
//! counted: a peer that saw some keys cannot guess others, and two IAs (or two runs) do not
//! hand out the same sequence. A key is never 0, never equal to a live key of the same table
//! (local and remote keys share one space, so an `lmr_context` is never accepted as an rkey
//! by accident), and never one of the last [`RECENT`] retired keys, so a stale key (an LMR
//! freed, an RMR re-bound) keeps failing rather than silently naming new memory.

use std::collections::{HashSet, VecDeque};

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// How many retired keys are kept out of circulation.
pub(crate) const RECENT: usize = 4096;

/// Draws before giving up; with at most a few million live keys out of 2^32 the chance of
/// needing more than a handful is negligible.
const TRIES: usize = 64;

/// The key generator of one [`MemTable`](super::MemTable).
pub(crate) struct KeyGen {
    rng: StdRng,
    recent: VecDeque<u32>,
    recent_set: HashSet<u32>,
}

impl KeyGen {
    /// A generator seeded from the operating system's entropy.
    pub(crate) fn from_entropy() -> KeyGen {
        KeyGen::with_rng(StdRng::from_entropy())
    }

    /// A reproducible generator (tests only: its keys are predictable).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn from_seed(seed: u64) -> KeyGen {
        KeyGen::with_rng(StdRng::seed_from_u64(seed))
    }

    fn with_rng(rng: StdRng) -> KeyGen {
        KeyGen {
            rng,
            recent: VecDeque::new(),
            recent_set: HashSet::new(),
        }
    }

    /// A fresh key: non-zero, not `live`, not recently retired. `None` if no such key was
    /// found (the key space is practically exhausted).
    pub(crate) fn next(&mut self, live: impl Fn(u32) -> bool) -> Option<u32> {
        (0..TRIES)
            .map(|_| self.rng.next_u32())
            .find(|&k| k != 0 && !live(k) && !self.recent_set.contains(&k))
    }

    /// [`KeyGen::next`] with the low `bits` bits fixed to `low` (the rest random): a key that
    /// names its own slot in a direct-indexed table.
    pub(crate) fn next_with_low(
        &mut self,
        low: u32,
        bits: u32,
        live: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        let mask = (1u32 << bits) - 1;
        (0..TRIES)
            .map(|_| self.rng.next_u32() & !mask | low & mask)
            .find(|&k| k != 0 && !live(k) && !self.recent_set.contains(&k))
    }

    /// Takes a key out of use; it will not be handed out again for a while.
    pub(crate) fn retire(&mut self, key: u32) {
        if !self.recent_set.insert(key) {
            return;
        }
        self.recent.push_back(key);
        if self.recent.len() > RECENT
            && let Some(old) = self.recent.pop_front()
        {
            self.recent_set.remove(&old);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_nonzero_unique_among_live_and_not_sequential() {
        let mut g = KeyGen::from_entropy();
        let mut live = HashSet::new();
        for _ in 0..2000 {
            let k = g.next(|k| live.contains(&k)).unwrap();
            assert_ne!(k, 0);
            assert!(live.insert(k));
        }
        let mut sorted: Vec<u32> = live.into_iter().collect();
        sorted.sort_unstable();
        // 2000 random u32 spread over the whole range: not a run of consecutive values.
        assert!(sorted.windows(2).filter(|w| w[1] - w[0] == 1).count() < 10);
        assert!(sorted[sorted.len() - 1] - sorted[0] > u32::MAX / 2);
    }

    #[test]
    fn live_and_retired_keys_are_skipped() {
        // Two generators with one seed produce one sequence; the second one shows which key
        // the first would have produced next.
        let mut peek = KeyGen::from_seed(7);
        let k1 = peek.next(|_| false).unwrap();
        let k2 = peek.next(|_| false).unwrap();
        assert_ne!(k1, k2);

        let mut g = KeyGen::from_seed(7);
        g.retire(k1);
        g.retire(k1); // retiring twice is harmless
        assert_eq!(g.recent.len(), 1);
        assert_eq!(g.next(|_| false), Some(k2));

        let mut g = KeyGen::from_seed(7);
        assert_eq!(g.next(|k| k == k1), Some(k2));

        // Everything live: no key, no endless loop.
        assert_eq!(KeyGen::from_seed(7).next(|_| true), None);
    }

    #[test]
    fn keys_with_fixed_low_bits_keep_them_and_stay_random_above() {
        let mut g = KeyGen::from_seed(3);
        let mut seen = HashSet::new();
        for _ in 0..500 {
            let k = g.next_with_low(0x2a5, 12, |_| false).unwrap();
            assert_eq!(k & 0xfff, 0x2a5);
            seen.insert(k >> 12);
        }
        assert!(seen.len() > 480, "{}", seen.len());
        // Slot 0: never the key 0; retired and live keys are skipped as by `next`.
        let mut g = KeyGen::from_seed(3);
        for _ in 0..1000 {
            assert_ne!(g.next_with_low(0, 12, |_| false), Some(0));
        }
        let mut peek = KeyGen::from_seed(5);
        let k1 = peek.next_with_low(7, 12, |_| false).unwrap();
        let mut g = KeyGen::from_seed(5);
        g.retire(k1);
        assert_ne!(g.next_with_low(7, 12, |_| false), Some(k1));
        assert_eq!(KeyGen::from_seed(5).next_with_low(7, 12, |_| true), None);
    }

    #[test]
    fn the_retired_window_is_bounded() {
        let mut g = KeyGen::from_seed(1);
        for k in 1..=(RECENT as u32 + 10) {
            g.retire(k);
        }
        assert_eq!(g.recent.len(), RECENT);
        assert_eq!(g.recent_set.len(), RECENT);
        assert!(!g.recent_set.contains(&1));
        assert!(g.recent_set.contains(&(RECENT as u32 + 10)));
    }
}
