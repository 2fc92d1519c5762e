//! [`IdMap`]: a `HashMap` for integer keys that datrs allocates itself (object ids, poller
//! tokens, the random `lmr_context`/`rmr_context` keys of the memory table), hashed with one
//! multiplication instead of SipHash: the post path looks keys up in such maps on every
//! message.
//!
//! No key is ever inserted by a peer (a peer only looks keys up), so the flooding
//! resistance SipHash buys is not needed.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of integer keys (the high bits of `key * 2^64 / φ` spread sequential
/// ids over the table); other input is folded in eight bytes at a time.
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

const PHI: u64 = 0x9e37_79b9_7f4a_7c15;

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(PHI);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_land_in_distinct_slots_and_lookups_work() {
        let mut m: IdMap<u32, u32> = IdMap::default();
        for i in 0..10_000 {
            m.insert(i, i * 2);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000).all(|i| m.get(&i) == Some(&(i * 2))));
        assert_eq!(m.get(&10_000), None);
        let hash = |n: u32| {
            let mut h = IdHasher::default();
            h.write_u32(n);
            h.finish()
        };
        // The top bits (what a table indexes with) differ between neighbours.
        assert_ne!(hash(1) >> 57, hash(2) >> 57);
        let mut a = IdHasher::default();
        a.write(&[1, 2, 3]);
        let mut b = IdHasher::default();
        b.write(&[1, 2, 4]);
        assert_ne!(a.finish(), b.finish());
    }
}
