//! The connections of an IA, indexed by slot: a connection id names its slot in its low
//! bits, so finding a connection on the data path (every post, every poll) is an index and
//! one comparison, not a hash lookup, and a pass over the connections walks one vector.
//!
//! An id is `sequence << SLOT_BITS | slot`: the sequence (one more for every insertion)
//! keeps the id of a removed connection from naming the connection that reuses its slot
//! (a stale epoll token, a lingering socket's id).

/// Bits of an id that name the slot.
const SLOT_BITS: u32 = 20;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;
/// Bits of an id in all (the provider's epoll tokens carry 40).
const ID_BITS: u32 = 40;

/// Values keyed by ids that this table hands out ([`Slab::next_key`]).
pub(crate) struct Slab<T> {
    slots: Vec<Option<(u64, T)>>,
    /// Empty slots below `slots.len()`.
    free: Vec<usize>,
    /// Insertions so far (the high bits of the next id).
    seq: u64,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }
}

impl<T> Slab<T> {
    /// The id the next [`Slab::insert`] will use (never 0).
    pub(crate) fn next_key(&self) -> u64 {
        let slot = self.free.last().copied().unwrap_or(self.slots.len()) as u64;
        let seq = (self.seq + 1) & ((1 << (ID_BITS - SLOT_BITS)) - 1);
        (seq.max(1) << SLOT_BITS) | (slot & SLOT_MASK)
    }

    /// Inserts `v` under `key`, which should come from [`Slab::next_key`]; any key whose
    /// slot is free or past the end works (a value already in that slot is replaced).
    pub(crate) fn insert(&mut self, key: u64, v: T) {
        let slot = (key & SLOT_MASK) as usize;
        self.seq += 1;
        if slot >= self.slots.len() {
            self.free.extend(self.slots.len()..slot);
            self.slots.resize_with(slot, || None);
            self.slots.push(Some((key, v)));
            return;
        }
        if let Some(i) = self.free.iter().rposition(|f| *f == slot) {
            self.free.swap_remove(i);
        }
        self.slots[slot] = Some((key, v));
    }

    /// The value under `key`.
    #[inline]
    pub(crate) fn get(&self, key: &u64) -> Option<&T> {
        match self.slots.get((*key & SLOT_MASK) as usize) {
            Some(Some((k, v))) if k == key => Some(v),
            _ => None,
        }
    }

    /// The value under `key`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, key: &u64) -> Option<&mut T> {
        match self.slots.get_mut((*key & SLOT_MASK) as usize) {
            Some(Some((k, v))) if k == key => Some(v),
            _ => None,
        }
    }

    /// Removes and returns the value under `key`.
    pub(crate) fn remove(&mut self, key: &u64) -> Option<T> {
        let slot = (*key & SLOT_MASK) as usize;
        let entry = self.slots.get_mut(slot)?;
        if entry.as_ref().is_none_or(|(k, _)| k != key) {
            return None;
        }
        let (_, v) = entry.take()?;
        // Trailing empty slots go; others are reused.
        while self.slots.last().is_some_and(Option::is_none) {
            self.slots.pop();
        }
        let len = self.slots.len();
        self.free.retain(|f| *f < len);
        if slot < len {
            self.free.push(slot);
        }
        Some(v)
    }

    /// True if nothing is stored.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Ids and values, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &T)> {
        self.slots.iter().flatten().map(|(k, v)| (k, v))
    }

    /// Ids and values, mutably, in slot order.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&u64, &mut T)> {
        self.slots.iter_mut().flatten().map(|(k, v)| (&*k, v))
    }

    /// The slots themselves (`None`: empty), for a plain loop on the data path.
    #[inline]
    pub(crate) fn slots_mut(&mut self) -> &mut [Option<(u64, T)>] {
        &mut self.slots
    }

    /// The ids.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &u64> {
        self.iter().map(|(k, _)| k)
    }

    /// The values.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.iter().map(|(_, v)| v)
    }

    /// The values, mutably.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.iter_mut().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_find_their_values_and_stale_ids_find_nothing() {
        let mut s = Slab::default();
        let a = s.next_key();
        s.insert(a, "a");
        let b = s.next_key();
        s.insert(b, "b");
        assert_ne!(a, 0);
        assert_ne!(a, b);
        assert_eq!((s.get(&a), s.get(&b)), (Some(&"a"), Some(&"b")));
        assert_eq!(s.remove(&a), Some("a"));
        assert_eq!(s.remove(&a), None, "removed once");
        // The freed slot is reused under a new id: the old id names nothing.
        let c = s.next_key();
        assert_eq!(c & SLOT_MASK, a & SLOT_MASK);
        s.insert(c, "c");
        assert_ne!(c, a);
        assert_eq!(s.get(&a), None);
        assert_eq!(s.get_mut(&c).map(|v| *v), Some("c"));
        let mut seen: Vec<_> = s.iter().map(|(k, v)| (*k, *v)).collect();
        seen.sort_unstable();
        let mut want = vec![(b, "b"), (c, "c")];
        want.sort_unstable();
        assert_eq!(seen, want);
        assert!(
            s.get(&(b + (1 << SLOT_BITS))).is_none(),
            "same slot, other id"
        );
        for (_, v) in s.iter_mut() {
            *v = "x";
        }
        assert!(s.values().all(|v| *v == "x"));
        assert_eq!(s.keys().count(), 2);
        assert_eq!(s.remove(&b), Some("x"));
        assert_eq!(s.remove(&c), Some("x"));
        assert!(s.is_empty(), "trailing empty slots are dropped");
        assert_eq!(s.next_key() & SLOT_MASK, 0);
    }

    #[test]
    fn ids_fit_the_epoll_tokens_and_any_free_slot_can_be_named() {
        let mut s = Slab {
            seq: (1 << (ID_BITS - SLOT_BITS)) - 1,
            ..Slab::default()
        };
        let k = s.next_key();
        assert!(
            k < 1 << ID_BITS && k != 0,
            "the sequence wraps within 40 bits"
        );
        // A key past the end leaves free slots behind it, which later ids reuse.
        s.insert(3 | (7 << SLOT_BITS), 'd');
        assert_eq!(s.get(&(3 | (7 << SLOT_BITS))), Some(&'d'));
        let mut slots = Vec::new();
        for _ in 0..3 {
            let k = s.next_key();
            slots.push(k & SLOT_MASK);
            s.insert(k, 'e');
        }
        slots.sort_unstable();
        assert_eq!(slots, vec![0, 1, 2]);
        assert_eq!(s.values_mut().count(), 4);
    }
}
