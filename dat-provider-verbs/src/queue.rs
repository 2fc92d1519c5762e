//! Where the work requests the hardware holds are kept until their completions: a ring per
//! work queue of an endpoint, in posting order, and a slab per shared receive queue.
//!
//! The requests of one work queue of an RC QP complete in posting order (the send queue; the
//! receive queue without an SRQ), so a queue of an endpoint keeps them in a ring indexed by a
//! sequence number of its own, which the `wr_id` carries (low [`SEQ_BITS`] bits): a post is a
//! push at the back, a completion a lookup by offset from the front, and retiring the
//! unsignalled requests before a completion walks the front. Nothing is allocated per request
//! once the ring has grown to the queue's depth (it never shrinks). A request may stay behind
//! a later one that completed (one the device flushed while the terminal fact is on its way,
//! or one reported already and waiting for the device's flush): its slot stays, and the front
//! moves on once it goes. Sequence numbers keep increasing over the endpoint's life (a reset
//! QP's stale completions find nothing), and each endpoint starts its own at a different
//! base, so a completion of a destroyed QP whose number came back matches no request.
//!
//! Receives posted to an SRQ complete in any order, from any endpoint: the SRQ keeps them in
//! a slab (slots and a free list), the `wr_id` naming the slot and a serial, checked whole.

use dat_core::provider::WorkRequest;

use crate::ep::Pending;

/// Bits of a `wr_id` that carry a sequence number (the flags of [`crate::ep`] sit above).
pub const SEQ_BITS: u32 = 60;
/// Mask of the sequence number in a `wr_id`.
pub const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// The requests of one work queue, by sequence number, in posting order.
#[derive(Debug, Default)]
pub struct WrQueue {
    /// Sequence number of the front slot (masked with [`SEQ_MASK`]).
    head: u64,
    /// Slots in use from the front on (empty ones between held ones included).
    len: usize,
    /// The ring: sequence number `s` lives in slot `s & (slots.len() - 1)` (a power of two,
    /// or no slot at all before the first push); `None`: completed, or a sequence number
    /// taken without a request ([`WrQueue::skip`]).
    slots: Vec<Option<Pending>>,
}

impl WrQueue {
    /// An empty queue whose first sequence number is `base`.
    pub fn starting_at(base: u64) -> WrQueue {
        WrQueue {
            head: base & SEQ_MASK,
            len: 0,
            slots: Vec::new(),
        }
    }

    /// The slot of sequence number `seq`.
    fn slot(&self, seq: u64) -> usize {
        // Truncation intended: the ring is smaller than the number space.
        (seq as usize) & (self.slots.len() - 1)
    }

    /// The sequence number the next push gets.
    pub fn next_seq(&self) -> u64 {
        (self.head + self.len as u64) & SEQ_MASK
    }

    /// Makes room for one more slot (for [`WrQueue::push_reserved`]).
    #[inline]
    pub fn reserve_one(&mut self) {
        if self.len == self.slots.len() {
            self.grow();
        }
    }

    /// Doubles the ring (the only allocation, until the ring has grown to the queue's depth)
    /// and moves the slots in use to their new places.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let cap = (self.slots.len() * 2).max(8);
        let mut slots: Vec<Option<Pending>> = Vec::with_capacity(cap);
        slots.resize_with(cap, || None);
        for k in 0..self.len as u64 {
            let seq = (self.head + k) & SEQ_MASK;
            let from = self.slot(seq);
            slots[(seq as usize) & (cap - 1)] = self.slots[from].take();
        }
        self.slots = slots;
    }

    /// Adds `p` (not yet reported) at the back; returns its sequence number.
    #[cfg(test)]
    pub fn push(&mut self, p: Pending) -> u64 {
        debug_assert!(!p.reported);
        self.reserve_one();
        self.push_reserved(p)
    }

    /// Adds `p` (not yet reported) at the back, in the room [`WrQueue::reserve_one`] made;
    /// returns its sequence number.
    ///
    /// # Panics
    /// If no room was made (never: the callers reserve first).
    #[inline(always)]
    pub fn push_reserved(&mut self, p: Pending) -> u64 {
        assert!(self.len < self.slots.len(), "push without reserve_one");
        let seq = self.next_seq();
        let i = self.slot(seq);
        let slot = &mut self.slots[i];
        // The slot is free (`len` counts every slot in use): filled without a drop of the
        // old value (`replace` and a `forget` of the `None` it returns is a plain store).
        debug_assert!(slot.is_none());
        std::mem::forget(slot.replace(p));
        self.len += 1;
        seq
    }

    /// Takes a sequence number for a request kept elsewhere (a window bind, a disconnect's
    /// marker): its completion retires the unsignalled requests before it.
    pub fn skip(&mut self) -> u64 {
        let seq = self.next_seq();
        if self.len == 0 {
            self.head = (self.head + 1) & SEQ_MASK;
        } else {
            // The slot is empty already.
            self.reserve_one();
            self.len += 1;
        }
        seq
    }

    /// How far sequence number `seq` (any bits above [`SEQ_MASK`] ignored) is from the front;
    /// `None` for one behind the front (more than half the number space away).
    #[inline]
    pub fn offset(&self, seq: u64) -> Option<usize> {
        let i = (seq & SEQ_MASK).wrapping_sub(self.head) & SEQ_MASK;
        if i >> (SEQ_BITS - 1) != 0 {
            return None;
        }
        Some(usize::try_from(i).unwrap_or(usize::MAX))
    }

    /// The slot of sequence number `seq`, if it is in use.
    #[cfg(test)]
    fn index(&self, seq: u64) -> Option<usize> {
        self.offset(seq).and_then(|off| self.slot_at(seq, off))
    }

    /// The slot of sequence number `seq` found at offset `off` from the front
    /// ([`WrQueue::offset`]), if that number is in use. A completion's handler looks its
    /// number up once this way and then works on the slot ([`WrQueue::get_at`],
    /// [`WrQueue::remove_at`]): retiring the requests before it ([`WrQueue::retire_range`])
    /// leaves that slot where it is.
    #[inline]
    pub fn slot_at(&self, seq: u64, off: usize) -> Option<usize> {
        (off < self.len).then(|| self.slot(seq))
    }

    /// The request in slot `i` ([`WrQueue::slot_at`]), if one is there.
    #[inline]
    pub fn get_at(&mut self, i: usize) -> Option<&mut Pending> {
        self.slots.get_mut(i)?.as_mut()
    }

    /// Drops the request in slot `i` ([`WrQueue::slot_at`]) where it lies, and moves the
    /// front past the empty slots there.
    #[inline]
    pub fn remove_at(&mut self, i: usize) {
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = None;
            self.trim();
        }
    }

    /// The request of sequence number `seq`, if it is held.
    #[cfg(test)]
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Pending> {
        let i = self.index(seq)?;
        self.slots[i].as_mut()
    }

    /// Drops the request of sequence number `seq` where it lies (tests; a completion's
    /// handler looks the number up once and goes by its slot, [`WrQueue::remove_at`]).
    #[cfg(test)]
    pub fn remove(&mut self, seq: u64) {
        if let Some(i) = self.index(seq) {
            self.remove_at(i);
        }
    }

    /// Moves the front past the empty slots there.
    fn trim(&mut self) {
        while self.len > 0 && self.slots[self.slot(self.head)].is_none() {
            self.head = (self.head + 1) & SEQ_MASK;
            self.len -= 1;
        }
    }

    /// Drops the unsignalled, unreported requests posted before sequence number `seq`, each
    /// shown to `f` first, in posting order (tests; the handler goes by the offset it looked
    /// up, [`WrQueue::retire_range`]).
    #[cfg(test)]
    pub fn retire_before(&mut self, seq: u64, f: impl FnMut(&Pending)) {
        match self.offset(seq) {
            Some(0) | None => {}
            Some(end) => self.retire_range(end, f),
        }
    }

    /// Drops the unsignalled, unreported requests in the `end` slots at the front (those
    /// posted before the number at offset `end`), each shown to `f` first, in posting order:
    /// an RC send queue completes in order, so they succeeded. A completion of the front
    /// request (`end` 0, the usual case) has nothing before it.
    pub fn retire_range(&mut self, end: usize, mut f: impl FnMut(&Pending)) {
        for k in 0..end.min(self.len) as u64 {
            let i = self.slot(self.head + k);
            if let Some(p) = &self.slots[i]
                && !p.signaled
                && !p.reported
            {
                f(p);
                self.slots[i] = None;
            }
        }
        self.trim();
    }

    /// The slots in use, oldest first, with their sequence numbers.
    fn in_use(&self) -> impl DoubleEndedIterator<Item = (u64, usize)> + use<> {
        let (head, mask) = (self.head, self.slots.len().wrapping_sub(1));
        (0..self.len as u64).map(move |k| {
            let seq = (head + k) & SEQ_MASK;
            (seq, (seq as usize) & mask)
        })
    }

    /// The newest request held.
    pub fn newest(&self) -> Option<&Pending> {
        self.in_use()
            .rev()
            .find_map(|(_, i)| self.slots[i].as_ref())
    }

    /// Calls `f` on each request held, oldest first, with its sequence number; stops at the
    /// first error.
    ///
    /// # Errors
    /// The first error of `f`.
    pub fn try_for_each<E>(
        &mut self,
        mut f: impl FnMut(u64, &mut Pending) -> Result<(), E>,
    ) -> Result<(), E> {
        for (seq, i) in self.in_use() {
            if let Some(p) = &mut self.slots[i] {
                f(seq, p)?;
            }
        }
        Ok(())
    }

    /// The requests held, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Pending> {
        self.in_use().filter_map(|(_, i)| self.slots[i].as_ref())
    }

    /// Keeps the requests for which `keep` is true (in posting order).
    pub fn retain(&mut self, mut keep: impl FnMut(&mut Pending) -> bool) {
        for (_, i) in self.in_use() {
            if self.slots[i].as_mut().is_some_and(|p| !keep(p)) {
                self.slots[i] = None;
            }
        }
        self.trim();
    }

    /// Forgets every request (sequence numbers go on from where they were).
    pub fn clear(&mut self) {
        for (_, i) in self.in_use() {
            self.slots[i] = None;
        }
        self.head = self.next_seq();
        self.len = 0;
    }

    /// True when no request is held.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Removes and returns the request of sequence number `seq` (tests; the data path drops
    /// requests where they lie, [`WrQueue::remove`]).
    #[cfg(test)]
    pub fn take(&mut self, seq: u64) -> Option<Pending> {
        let i = self.index(seq)?;
        let p = self.slots[i].take();
        self.trim();
        p
    }
}

/// The receives posted to one SRQ: slots, a free list, and a serial that makes every `wr_id`
/// different from the last one that used its slot.
#[derive(Debug, Default)]
pub struct SrqSlab {
    /// The request in each slot, with the `wr_id` it was posted with.
    slots: Vec<Option<(u64, WorkRequest)>>,
    /// Free slots.
    free: Vec<u32>,
    /// Serial of the next `wr_id` (bits 32 up to [`SEQ_BITS`]).
    serial: u64,
}

impl SrqSlab {
    /// The `wr_id` (below the flag bits) the next [`SrqSlab::insert`] uses, so the caller can
    /// post first and insert after a successful post.
    pub fn next_id(&mut self) -> u64 {
        let slot = match self.free.last() {
            Some(&s) => u64::from(s),
            None => self.slots.len() as u64,
        };
        ((self.serial << 32) | slot) & SEQ_MASK
    }

    /// Keeps `wr` under `id` (the value [`SrqSlab::next_id`] gave, with any flag bits).
    pub fn insert(&mut self, id: u64, wr: WorkRequest) {
        let slot = match self.free.pop() {
            Some(s) => s as usize,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        };
        debug_assert_eq!(slot as u64, id & 0xffff_ffff);
        self.slots[slot] = Some((id, wr));
        self.serial = (self.serial + 1) & (SEQ_MASK >> 32);
    }

    /// Removes the receive posted with `id`.
    pub fn take(&mut self, id: u64) -> Option<WorkRequest> {
        let slot = usize::try_from(id & 0xffff_ffff).ok()?;
        match self.slots.get_mut(slot) {
            Some(s) if s.as_ref().is_some_and(|(i, _)| *i == id) => {
                let (_, wr) = s.take()?;
                self.free.push(u32::try_from(slot).ok()?);
                Some(wr)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dat_core::provider::PostOp;
    use dat_core::types::{CompletionFlags, Cookie};

    fn wr(cookie: u64) -> WorkRequest {
        WorkRequest {
            op: PostOp::Send,
            segs: Default::default(),
            cookie: Cookie(cookie),
            flags: CompletionFlags::empty(),
        }
    }

    fn req(cookie: u64, signaled: bool) -> Pending {
        Pending::of_ref(&wr(cookie), signaled, true)
    }

    fn cookies(q: &WrQueue) -> Vec<u64> {
        q.iter().map(|p| p.cookie.0).collect()
    }

    #[test]
    fn requests_come_back_by_sequence_number_and_the_front_moves_on() {
        let mut q = WrQueue::starting_at(5 << 32);
        let a = q.push(req(1, true));
        let b = q.push(req(2, true));
        assert_eq!(b, a + 1);
        // A completion out of order leaves its slot; the front waits for the older one.
        assert_eq!(q.take(b).map(|p| p.cookie.0), Some(2));
        assert_eq!(q.take(b).map(|p| p.cookie.0), None);
        assert_eq!(cookies(&q), [1]);
        assert_eq!(q.take(a).map(|p| p.cookie.0), Some(1));
        assert!(q.is_empty() && q.len == 0);
        // Sequence numbers go on: a stale id finds nothing.
        let c = q.push(req(3, true));
        assert_eq!(c, b + 1);
        assert!(q.take(a).is_none());
        // Flag bits above the sequence number are ignored.
        assert_eq!(q.take(c | (1 << 62)).map(|p| p.cookie.0), Some(3));
        // A cleared queue does not reuse numbers either.
        let d = q.push(req(4, true));
        q.clear();
        assert!(q.take(d).is_none());
        assert_eq!(q.push(req(5, true)), d + 1);
    }

    #[test]
    fn a_completion_of_the_front_retires_nothing_and_a_stale_one_nothing_either() {
        let mut q = WrQueue::starting_at(0);
        let a = q.push(req(1, true));
        let b = q.push(req(2, false));
        let mut got = Vec::new();
        q.retire_before(a, |p| got.push(p.cookie.0));
        assert!(got.is_empty());
        assert_eq!(cookies(&q), [1, 2]);
        assert!(q.take(a).is_some());
        // Behind the front now: no request is retired by it.
        q.retire_before(a, |p| got.push(p.cookie.0));
        assert!(got.is_empty());
        assert_eq!(cookies(&q), [2]);
        // Pushed through the post's path, found by its number.
        let c = q.push(req(3, true));
        assert_eq!(c, b + 1);
        q.retire_before(c, |p| got.push(p.cookie.0));
        assert_eq!(got, [2]);
        assert_eq!(q.take(c).map(|p| p.cookie.0), Some(3));
    }

    #[test]
    fn a_completion_retires_the_unsignalled_requests_before_it() {
        let mut q = WrQueue::starting_at(0);
        let s: Vec<u64> = (0..4).map(|i| q.push(req(i, i == 3))).collect();
        let gap = q.skip();
        let later = q.push(req(9, false));
        let mut got = Vec::new();
        // The signalled request's completion: the three before it.
        q.retire_before(s[3], |p| got.push(p.cookie.0));
        assert_eq!(got, [0, 1, 2]);
        assert_eq!(cookies(&q), [3, 9]);
        assert!(q.take(s[3]).is_some());
        // A marker (a skipped number) retires what is before it, not what is after.
        got.clear();
        q.retire_before(gap, |p| got.push(p.cookie.0));
        assert!(got.is_empty());
        q.retire_before(later + 1, |p| got.push(p.cookie.0));
        assert_eq!(got, [9]);
        assert_eq!(q.len, 0);
        // Reported or signalled ones are not retired as successes.
        let a = q.push(req(10, false));
        q.get_mut(a).unwrap().reported = true;
        let b = q.push(req(11, true));
        let c = q.push(req(12, false));
        got.clear();
        q.retire_before(c + 1, |p| got.push(p.cookie.0));
        assert_eq!(got, [12]);
        assert_eq!(cookies(&q), [10, 11]);
        assert!(q.get_mut(b).is_some());
    }

    #[test]
    fn newest_retain_and_skip_on_an_empty_queue() {
        let mut q = WrQueue::starting_at(SEQ_MASK - 1);
        assert!(q.newest().is_none());
        let a = q.skip();
        let b = q.push(req(1, false));
        // The numbers wrap inside the mask.
        assert_eq!((a, b), (SEQ_MASK - 1, SEQ_MASK));
        let c = q.push(req(2, true));
        assert_eq!(c, 0);
        q.skip();
        assert_eq!(q.newest().map(|p| p.cookie.0), Some(2));
        let mut ids = Vec::new();
        q.try_for_each(|s, _| {
            ids.push(s);
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(ids, [b, c]);
        q.retain(|p| p.signaled);
        assert_eq!(cookies(&q), [2]);
        assert!(q.get_mut(c).is_some());
        q.retain(|_| false);
        assert!(q.is_empty() && q.len == 0);
        assert_eq!(q.next_seq(), 2);
    }

    #[test]
    fn the_ring_grows_and_keeps_its_order_across_the_wrap() {
        let mut q = WrQueue::starting_at(SEQ_MASK - 5);
        let first = q.push(req(0, true));
        // A request left behind while many later ones come and go.
        let mut seqs = Vec::new();
        for i in 1..40 {
            seqs.push(q.push(req(i, false)));
            if i % 3 == 0 {
                q.skip();
            }
        }
        assert_eq!(cookies(&q), (0..40).collect::<Vec<u64>>());
        let mut got = Vec::new();
        q.retire_before(seqs[19], |p| got.push(p.cookie.0));
        assert_eq!(got, (1..20).collect::<Vec<u64>>());
        assert_eq!(q.get_mut(first).map(|p| p.cookie.0), Some(0));
        q.remove(first);
        assert_eq!(cookies(&q), (20..40).collect::<Vec<u64>>());
        for (i, &s) in seqs.iter().enumerate().skip(19) {
            assert_eq!(q.take(s).map(|p| p.cookie.0), Some(i as u64 + 1));
        }
        assert!(q.is_empty());
        assert_eq!(q.len, 0);
    }

    #[test]
    fn a_request_the_device_holds_lets_its_memory_go_and_a_kept_one_on_removal() {
        use dat_core::mem::{Buffer, Segment};
        use std::sync::Arc;
        let buf = Arc::new(Buffer::from_vec(vec![0; 64]));
        let seg = |off| Segment::of_buffer(&buf, off, 8, 1);
        let request = |n: usize| {
            let mut w = wr(n as u64);
            w.segs = (0..n).map(|i| seg(i * 8)).collect();
            w
        };
        let with = |n: usize, signaled, keep: bool| {
            let w = request(n);
            if keep {
                Pending::kept(w, signaled)
            } else {
                // Given to the device: the record is made where the request lies, which
                // the core then drops (`EpPost::post_lent`).
                Pending::of_ref(&w, signaled, true)
            }
        };
        let mut q = WrQueue::starting_at(0);
        // Given to the device: inline lists (one and two segments) and a spilled one
        // (three) leave nothing held by the record, which knows the length.
        for n in 1..=3 {
            let p = with(n, true, false);
            assert_eq!((p.len, p.kept.is_none()), (8 * n as u32, true));
            assert_eq!(Arc::strong_count(&buf), 1, "{n} segments");
            let s = q.push(p);
            q.remove(s);
        }
        // Kept (a receive waiting for its QP): the memory stays until the record goes.
        let a = q.push(with(1, false, true));
        let b = q.push(with(3, false, true));
        let c = q.push(with(2, true, true));
        let d = q.push(with(1, true, true));
        assert_eq!(Arc::strong_count(&buf), 8);
        // The completion of `c` retires `a` and `b`, then `c` itself is removed.
        let off = q.offset(c).unwrap();
        let i = q.slot_at(c, off).unwrap();
        let mut got = Vec::new();
        q.retire_range(off, |p| got.push(p.cookie.0));
        assert_eq!(got, [1, 3]);
        assert_eq!(Arc::strong_count(&buf), 4);
        assert_eq!(
            q.get_at(i)
                .and_then(|p| p.kept.as_ref())
                .map(|w| w.segs.len()),
            Some(2)
        );
        q.remove_at(i);
        assert_eq!(Arc::strong_count(&buf), 2);
        assert_eq!(cookies(&q), [1]);
        q.remove(d);
        assert_eq!(Arc::strong_count(&buf), 1);
        assert!(q.is_empty() && q.len == 0);
        assert!(q.offset(a).is_none() && q.offset(b).is_none());
    }

    #[test]
    fn the_srq_slab_reuses_slots_under_new_ids() {
        let wr = |c| WorkRequest {
            op: PostOp::Recv,
            segs: Default::default(),
            cookie: Cookie(c),
            flags: CompletionFlags::empty(),
        };
        let mut s = SrqSlab::default();
        let flag = 1u64 << 63;
        let a = s.next_id() | flag;
        s.insert(a, wr(1));
        let b = s.next_id() | flag;
        s.insert(b, wr(2));
        assert_ne!(a & 0xffff_ffff, b & 0xffff_ffff);
        // Any order.
        assert_eq!(s.take(b).map(|w| w.cookie.0), Some(2));
        assert!(s.take(b).is_none());
        // The slot comes back under another id: the old id finds nothing.
        let c = s.next_id() | flag;
        assert_eq!(c & 0xffff_ffff, b & 0xffff_ffff);
        assert_ne!(c, b);
        s.insert(c, wr(3));
        assert!(s.take(b).is_none());
        assert_eq!(s.take(a).map(|w| w.cookie.0), Some(1));
        assert_eq!(s.take(c).map(|w| w.cookie.0), Some(3));
        assert!(s.take(u64::MAX).is_none());
    }
}
