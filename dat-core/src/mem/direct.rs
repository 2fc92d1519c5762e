//! [`Direct`]: the direct index of a memory table's LMRs by key slot, which the post path
//! resolves every local triplet through.

use std::sync::Arc;

use super::table::Region;

/// Bits of an `lmr_context` that name its slot in the direct index of a [`MemTable`](super::MemTable).
pub(super) const SLOT_BITS: u32 = 12;
/// Slots of the direct index: the most LMRs whose lookup needs no hashing.
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
/// Slots looked at for a free one before a registration takes a key without a slot.
const SLOT_PROBES: usize = 8;

/// The LMRs by the low bits of their `lmr_context`: every post resolves its triplets here
/// with one indexed load and a comparison of the whole key (the generation check: a stale
/// or foreign key whose slot now holds another LMR compares unequal) instead of a hash map
/// lookup. Keys this table draws name a free slot in their low [`SLOT_BITS`] bits (the
/// other 20 bits random); a key a transport made (verbs) takes its slot if that is free.
/// An LMR without a slot (more than [`SLOTS`] live, or a transport key whose slot is taken)
/// is found in the map, which holds every LMR.
#[derive(Default)]
pub(super) struct Direct {
    /// Empty until the first registration, then [`SLOTS`] entries.
    slots: Vec<Option<Arc<Region>>>,
    /// Where the search for a free slot starts: slots are handed out in rotation, so a
    /// freed slot is not reused at once.
    cursor: usize,
}

impl Direct {
    #[inline]
    pub(super) fn get(&self, key: u32) -> Option<&Arc<Region>> {
        match self.slots.get((key & SLOT_MASK) as usize) {
            Some(Some(r)) if r.lmr_context == key => Some(r),
            _ => None,
        }
    }

    /// A free slot, if one of the next [`SLOT_PROBES`] is.
    pub(super) fn free_slot(&mut self) -> Option<u32> {
        if self.slots.is_empty() {
            self.slots.resize(SLOTS, None);
        }
        for _ in 0..SLOT_PROBES {
            let s = self.cursor;
            self.cursor = (s + 1) % SLOTS;
            if self.slots[s].is_none() {
                return u32::try_from(s).ok();
            }
        }
        None
    }

    /// Gives `region` the slot of its key if that slot is free.
    pub(super) fn insert(&mut self, region: &Arc<Region>) {
        if self.slots.is_empty() {
            self.slots.resize(SLOTS, None);
        }
        if let Some(slot @ None) = self
            .slots
            .get_mut((region.lmr_context & SLOT_MASK) as usize)
        {
            *slot = Some(Arc::clone(region));
        }
    }

    pub(super) fn remove(&mut self, key: u32) {
        if let Some(slot) = self.slots.get_mut((key & SLOT_MASK) as usize)
            && slot.as_ref().is_some_and(|r| r.lmr_context == key)
        {
            *slot = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Buffer;
    use crate::types::{LmrId, MemPriv, PzId, VaType};

    fn region(lmr_context: u32) -> Arc<Region> {
        let buf = Arc::new(Buffer::from_vec(vec![0; 8]));
        Arc::new(Region {
            pz: PzId(1),
            pin: crate::mem::SegBuf::new(Arc::clone(&buf)),
            buf,
            offset: 0,
            start: 0,
            len: 8,
            privs: MemPriv::LOCAL_READ,
            va_type: VaType::ZeroBased,
            lmr_context,
            rmr_context: None,
            lmr: LmrId(1),
            rmr: None,
        })
    }

    #[test]
    fn a_key_is_found_only_while_its_slot_holds_it() {
        let mut d = Direct::default();
        assert!(d.get(5).is_none(), "empty index");
        let slot = d.free_slot().unwrap();
        let key = 0xabc0_0000 | slot;
        let r = region(key);
        d.insert(&r);
        assert!(Arc::ptr_eq(d.get(key).unwrap(), &r));
        // Same slot, other generation (high bits): refused.
        assert!(d.get(key ^ 0x0010_0000).is_none());
        // A later key for the slot does not displace the holder.
        d.insert(&region(0x1230_0000 | slot));
        assert!(Arc::ptr_eq(d.get(key).unwrap(), &r));
        // Removing another key of the slot leaves it; removing the holder frees it.
        d.remove(0x1230_0000 | slot);
        assert!(d.get(key).is_some());
        d.remove(key);
        assert!(d.get(key).is_none());
    }

    #[test]
    fn free_slots_rotate_and_run_out_gracefully() {
        let mut d = Direct::default();
        let a = d.free_slot().unwrap();
        let b = d.free_slot().unwrap();
        assert_ne!(a, b, "a slot handed out is not handed out again at once");
        for s in 0..SLOTS as u32 {
            d.insert(&region(0x0100_0000 | s));
        }
        assert_eq!(
            d.free_slot(),
            None,
            "all taken: the caller draws a key without a slot"
        );
        d.remove(0x0100_0000 | 3);
        let found = (0..SLOTS).find_map(|_| d.free_slot());
        assert_eq!(found, Some(3));
    }
}
