//! A fast hasher for maps keyed by small identifiers (handle ids, memory contexts), used on
//! the data path where the standard library's SipHash costs more than the rest of a lookup.
//!
//! Not resistant to chosen keys: use it only where the keys are ours (counters, contexts
//! drawn from a CSPRNG) or where a peer can only look keys up, never insert them.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-fold hashing of integer keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0 ^ i).wrapping_mul(K);
    }

    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }

    fn finish(&self) -> u64 {
        // The product's entropy sits in its high bits; the table indexes by the low ones
        // and tags by the top seven.
        self.0 ^ (self.0 >> 32)
    }
}

/// A `HashMap` hashed with [`IdHasher`].
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn sequential_and_random_keys_spread_over_the_low_bits() {
        let b = BuildHasherDefault::<IdHasher>::default();
        let buckets = |keys: &mut dyn Iterator<Item = u32>| {
            let mut seen = std::collections::HashSet::new();
            for k in keys {
                seen.insert(b.hash_one(k) & 255);
            }
            seen.len()
        };
        // A random function fills about 162 of 256 buckets.
        assert!(buckets(&mut (1..=256)) > 130);
        assert!(buckets(&mut (0..256).map(|i: u32| i.wrapping_mul(0x9e37_79b9))) > 130);
        assert!(buckets(&mut (0..256).map(|i| i << 16)) > 130);
        let mut m: IdMap<u64, u64> = IdMap::default();
        m.extend((0..1000).map(|i| (i, i * 2)));
        assert!((0..1000).all(|i| m[&i] == i * 2));
    }
}
