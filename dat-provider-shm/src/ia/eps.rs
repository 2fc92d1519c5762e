//! The endpoints of an IA: held in a [`Slab`], found by their [`EpId`] through a map, with
//! the last endpoint found remembered, so that a stream of posts and polls on one endpoint
//! (the common case) finds it without a hash lookup.

use std::cell::Cell;

use dat_core::idmap::IdMap;
use dat_core::types::EpId;

use super::slab::Slab;

/// Endpoints by id (see the module docs).
pub(crate) struct EpTable<T> {
    slots: Slab<T>,
    index: IdMap<EpId, u64>,
    /// The last endpoint looked up and its slot key. Endpoint ids are never reused and slot
    /// keys are unique, so a stale entry can only miss.
    last: Cell<Option<(EpId, u64)>>,
}

impl<T> Default for EpTable<T> {
    fn default() -> Self {
        EpTable {
            slots: Slab::default(),
            index: IdMap::default(),
            last: Cell::new(None),
        }
    }
}

impl<T> EpTable<T> {
    #[inline]
    fn key(&self, ep: &EpId) -> Option<u64> {
        match self.last.get() {
            Some((id, key)) if id == *ep => Some(key),
            _ => {
                let key = *self.index.get(ep)?;
                self.last.set(Some((*ep, key)));
                Some(key)
            }
        }
    }

    /// Adds (or replaces) an endpoint; returns the one replaced.
    pub(crate) fn insert(&mut self, ep: EpId, v: T) -> Option<T> {
        let old = self.remove(&ep);
        let key = self.slots.next_key();
        self.slots.insert(key, v);
        self.index.insert(ep, key);
        old
    }

    /// The endpoint `ep`.
    #[inline]
    pub(crate) fn get(&self, ep: &EpId) -> Option<&T> {
        self.slots.get(&self.key(ep)?)
    }

    /// The endpoint `ep`, mutably.
    #[inline]
    pub(crate) fn get_mut(&mut self, ep: &EpId) -> Option<&mut T> {
        let key = self.key(ep)?;
        self.slots.get_mut(&key)
    }

    /// True if `ep` is here.
    pub(crate) fn contains_key(&self, ep: &EpId) -> bool {
        self.index.contains_key(ep)
    }

    /// Removes and returns the endpoint `ep`.
    pub(crate) fn remove(&mut self, ep: &EpId) -> Option<T> {
        let key = self.index.remove(ep)?;
        self.slots.remove(&key)
    }

    /// Removes every endpoint; returns them.
    pub(crate) fn clear(&mut self) -> Vec<T> {
        let ids: Vec<EpId> = self.index.keys().copied().collect();
        ids.iter().filter_map(|ep| self.remove(ep)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_found_by_id_through_the_remembered_one_and_the_map() {
        let mut t = EpTable::default();
        t.insert(EpId(7), "seven");
        t.insert(EpId(9), "nine");
        assert_eq!(t.get(&EpId(7)), Some(&"seven"));
        assert_eq!(t.get(&EpId(7)), Some(&"seven"), "remembered");
        assert_eq!(t.get(&EpId(9)), Some(&"nine"), "a miss goes to the map");
        *t.get_mut(&EpId(9)).unwrap() = "NINE";
        assert_eq!(t.get(&EpId(9)), Some(&"NINE"));
        assert_eq!(t.remove(&EpId(9)), Some("NINE"));
        assert_eq!(t.get(&EpId(9)), None, "the remembered endpoint is gone");
        assert!(!t.contains_key(&EpId(9)) && t.contains_key(&EpId(7)));
        assert_eq!(t.insert(EpId(7), "again"), Some("seven"));
        assert_eq!(t.get(&EpId(7)), Some(&"again"), "replaced");
        assert_eq!(t.clear(), vec!["again"]);
        assert_eq!(t.get(&EpId(7)), None);
        assert_eq!(t.get_mut(&EpId(7)), None);
    }
}
