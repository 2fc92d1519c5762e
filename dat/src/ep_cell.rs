//! [`EpCell`]: an endpoint's locked state plus a copy of what a post needs, readable without
//! the lock.
//!
//! Every post reads the EP's state, PZ, SRQ binding and per-operation limits; taking the EP
//! mutex for that costs two atomic read-modify-writes per post, which on the 8-byte
//! ping-pong is a measurable share of the half round trip. The cell keeps those fields in a
//! sequence lock instead: every change of the core happens through [`CoreGuard`], which
//! republishes them (under the mutex, so writers are serialised) when the guard was used
//! mutably; a post reads them with plain loads and retries under the mutex in the rare case
//! a change was in progress. A post thus sees a consistent snapshot from before or after a
//! concurrent change, as it would have under the mutex.
//!
//! Beside the sequence-locked copy, each kind of operation has a *fast word* ([`Fast`]): one
//! atomic word that says whether a post of that kind needs no check of the state (connected,
//! or a receive in a state that takes receives, not on an SRQ) and holds the completion flags
//! such a post may carry, its segment limit and the PZ. A post whose arguments fit the word
//! skips the snapshot and the state machine's gate; any other post (and every error) takes
//! the full path, so every return code stays what the full checks give. One word is
//! consistent by itself: no sequence number is needed to read it.
//!
//! The same guard keeps the completion [`Routes`] in step with the core's EVDs.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard};

use dat_core::ep::state::{EpState, PostGate, post_gate};
use dat_core::provider::PostOp;
use dat_core::types::{CompletionFlags, EpId, PzId};

use crate::ep::EpCore;
use crate::ep_route::Routes;
use crate::sync::lock;

/// What a post needs of its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PostSnapshot {
    pub(crate) state: EpState,
    /// The EP takes its receives from an SRQ.
    pub(crate) srq: bool,
    pub(crate) pz: Option<PzId>,
    /// Completion flags allowed on receives and on requests.
    recv_flags: CompletionFlags,
    request_flags: CompletionFlags,
    /// Segment limits: receive, send, RDMA read, RDMA write.
    max_iov: [u32; 4],
}

impl PostSnapshot {
    fn of(core: &EpCore) -> PostSnapshot {
        let a = &core.cfg.attr;
        PostSnapshot {
            state: core.state,
            srq: core.srq.is_some(),
            pz: core.cfg.pz,
            recv_flags: a.recv_completion_flags,
            request_flags: a.request_completion_flags,
            max_iov: [
                a.max_recv_iov,
                a.max_request_iov,
                a.max_rdma_read_iov,
                a.max_rdma_write_iov,
            ],
        }
    }

    /// The completion flags allowed and the segment limit of `op`.
    #[inline]
    pub(crate) fn limits(&self, op: PostOp) -> (CompletionFlags, u32) {
        match op {
            PostOp::Recv => (self.recv_flags, self.max_iov[0]),
            PostOp::Send => (self.request_flags, self.max_iov[1]),
            PostOp::RdmaRead(_) => (self.request_flags, self.max_iov[2]),
            PostOp::RdmaWrite(_) => (self.request_flags, self.max_iov[3]),
        }
    }
}

/// The fast word of one kind of operation (module docs): bits 0-7 the completion flags a post
/// may carry without further checks, bit 8 set when posts of this kind need no state check,
/// bits 16-23 the segment limit (capped at 255), bits 32-63 the PZ. 0 sends every post the
/// full way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fast(u64);

const FAST_OPEN: u64 = 1 << 8;

impl Fast {
    /// The word of operation `op` (index of [`op_index`]) in the EP described by `s`.
    fn of(s: &PostSnapshot, op: usize) -> Fast {
        let recv = op == 0;
        let open = matches!(post_gate(s.state, recv), Ok(PostGate::Transport)) && !(recv && s.srq);
        let (Some(pz), true) = (s.pz, open) else {
            return Fast(0);
        };
        let (allowed, max_iov) = match op {
            0 => (s.recv_flags, s.max_iov[0]),
            _ => (s.request_flags, s.max_iov[op]),
        };
        let mut ok = CompletionFlags::all();
        if !allowed.contains(CompletionFlags::UNSIGNALLED) {
            ok.remove(CompletionFlags::UNSIGNALLED);
        }
        if recv {
            ok.remove(CompletionFlags::SUPPRESS);
        }
        Fast(
            u64::from(ok.bits() & 0xff)
                | FAST_OPEN
                | u64::from(max_iov.min(255)) << 16
                | u64::from(pz.0) << 32,
        )
    }

    /// The PZ and segment limit of a post with `flags` and `segments` triplets if it needs
    /// no other check than those of its segments; `None` sends it the full way.
    #[inline]
    pub(crate) fn accepts(self, flags: CompletionFlags, segments: usize) -> Option<(PzId, u32)> {
        let w = self.0;
        let max_iov = (w >> 16) as u32 & 0xff;
        (w & FAST_OPEN != 0
            && u64::from(flags.bits()) & !(w & 0xff) == 0
            && segments <= max_iov as usize)
            .then_some((PzId((w >> 32) as u32), max_iov))
    }
}

/// The index of `op`'s fast word: receive, send, RDMA read, RDMA write (the order of
/// [`PostSnapshot`]'s limits).
#[inline]
pub(crate) const fn op_index(op: PostOp) -> usize {
    match op {
        PostOp::Recv => 0,
        PostOp::Send => 1,
        PostOp::RdmaRead(_) => 2,
        PostOp::RdmaWrite(_) => 3,
    }
}

/// The sequence-locked copy of a [`PostSnapshot`] (all fields atomics, so a read racing a
/// write is no data race; the sequence number tells whether the read was torn).
#[derive(Default)]
struct PostView {
    /// Odd while a writer is changing the fields.
    seq: AtomicU32,
    /// Raw state in the low 8 bits, bit 8 the SRQ flag, bit 9 "has a PZ", PZ id above 32.
    state_pz: AtomicU64,
    /// Receive flags in the low half, request flags in the high half.
    flags: AtomicU64,
    /// Receive and send limits.
    iov_a: AtomicU64,
    /// RDMA read and write limits.
    iov_b: AtomicU64,
    /// The fast word of each kind of operation (not part of the sequence lock).
    fast: [AtomicU64; 4],
}

fn pair(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

/// The two halves of a packed pair (truncation intended).
#[inline]
fn halves(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

impl PostView {
    /// Writes `s`; the caller holds the EP mutex (writers are serialised by it).
    fn publish(&self, s: &PostSnapshot) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let pz = s.pz.map_or(0, |p| u64::from(p.0) << 32 | 1 << 9);
        self.state_pz.store(
            u64::from(s.state.raw()) | u64::from(s.srq) << 8 | pz,
            Ordering::Relaxed,
        );
        self.flags.store(
            pair(s.recv_flags.bits(), s.request_flags.bits()),
            Ordering::Relaxed,
        );
        self.iov_a
            .store(pair(s.max_iov[0], s.max_iov[1]), Ordering::Relaxed);
        self.iov_b
            .store(pair(s.max_iov[2], s.max_iov[3]), Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
        for (op, w) in self.fast.iter().enumerate() {
            w.store(Fast::of(s, op).0, Ordering::Release);
        }
    }

    /// The snapshot, or `None` if a writer was active meanwhile.
    #[inline]
    fn read(&self) -> Option<PostSnapshot> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 != 0 {
            return None;
        }
        let state_pz = self.state_pz.load(Ordering::Relaxed);
        let flags = self.flags.load(Ordering::Relaxed);
        let iov_a = self.iov_a.load(Ordering::Relaxed);
        let iov_b = self.iov_b.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if self.seq.load(Ordering::Relaxed) != seq {
            return None;
        }
        let (raw, pz) = halves(state_pz);
        let (recv, request) = halves(flags);
        let (a0, a1) = halves(iov_a);
        let (b0, b1) = halves(iov_b);
        Some(PostSnapshot {
            state: EpState::from_raw(raw & 0xff)?,
            srq: raw & 1 << 8 != 0,
            pz: (raw & 1 << 9 != 0).then_some(PzId(pz)),
            recv_flags: CompletionFlags::from_bits_retain(recv),
            request_flags: CompletionFlags::from_bits_retain(request),
            max_iov: [a0, a1, b0, b1],
        })
    }
}

/// An endpoint's core behind its mutex, with the post view and the completion routes kept in
/// step.
pub(crate) struct EpCell {
    core: Mutex<EpCore>,
    view: PostView,
    routes: Arc<Routes>,
}

impl EpCell {
    pub(crate) fn new(id: EpId, core: EpCore) -> EpCell {
        let view = PostView::default();
        view.publish(&PostSnapshot::of(&core));
        let routes = Arc::new(Routes::new(id, &core));
        EpCell {
            core: Mutex::new(core),
            view,
            routes,
        }
    }

    /// Where the endpoint's completions go (shared with its upcall link).
    pub(crate) fn routes(&self) -> &Arc<Routes> {
        &self.routes
    }

    /// Locks the core; a mutable use of the guard republishes the post view on release.
    pub(crate) fn lock(&self) -> CoreGuard<'_> {
        CoreGuard {
            g: lock(&self.core),
            cell: self,
            dirty: false,
        }
    }

    /// The fast word of operation `op` (see [`op_index`]).
    #[inline]
    pub(crate) fn fast(&self, op: usize) -> Fast {
        Fast(self.view.fast[op].load(Ordering::Acquire))
    }

    /// What a post needs, without the mutex unless a change is in progress.
    #[inline]
    pub(crate) fn post_snapshot(&self) -> PostSnapshot {
        match self.view.read() {
            Some(s) => s,
            None => PostSnapshot::of(&lock(&self.core)),
        }
    }
}

/// The locked core of an endpoint (see [`EpCell::lock`]).
pub(crate) struct CoreGuard<'a> {
    g: MutexGuard<'a, EpCore>,
    cell: &'a EpCell,
    dirty: bool,
}

impl Deref for CoreGuard<'_> {
    type Target = EpCore;

    fn deref(&self) -> &EpCore {
        &self.g
    }
}

impl DerefMut for CoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut EpCore {
        self.dirty = true;
        &mut self.g
    }
}

impl CoreGuard<'_> {
    /// Publishes the changes made so far at once, without waiting for the guard's release:
    /// called before anything that lets another thread learn of them (a connection event on
    /// an EVD), so that a post made on seeing it sees the new state, as it would have by
    /// waiting for the mutex.
    pub(crate) fn publish(&mut self) {
        if self.dirty {
            self.cell.view.publish(&PostSnapshot::of(&self.g));
            self.cell.routes.publish(&self.g);
            self.dirty = false;
        }
    }
}

impl Drop for CoreGuard<'_> {
    fn drop(&mut self) {
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(state: EpState, pz: Option<u32>, srq: bool) -> PostSnapshot {
        PostSnapshot {
            state,
            srq,
            pz: pz.map(PzId),
            recv_flags: CompletionFlags::SOLICITED_WAIT,
            request_flags: CompletionFlags::all(),
            max_iov: [1, 2, 3, u32::MAX],
        }
    }

    #[test]
    fn the_view_returns_what_was_published() {
        let v = PostView::default();
        for s in [
            snapshot(EpState::Connected, Some(0), false),
            snapshot(EpState::ConnectedMultiPath, Some(u32::MAX), true),
            snapshot(EpState::UnconfiguredTentative, None, true),
            snapshot(EpState::Disconnected, None, false),
        ] {
            v.publish(&s);
            assert_eq!(v.read(), Some(s));
        }
    }

    /// What the full post path decides before it looks at segments: `Some(pz)` if a post
    /// of `op` with `flags` and `n` triplets goes to the transport (a copy of the checks of
    /// `Ep::post`).
    fn full_checks(s: &PostSnapshot, op: PostOp, flags: CompletionFlags, n: usize) -> Option<PzId> {
        let recv = matches!(op, PostOp::Recv);
        if post_gate(s.state, recv) != Ok(PostGate::Transport) || (recv && s.srq) {
            return None;
        }
        let (allowed, max_iov) = s.limits(op);
        if flags.bits() & !CompletionFlags::all().bits() != 0
            || (flags.contains(CompletionFlags::UNSIGNALLED)
                && !allowed.contains(CompletionFlags::UNSIGNALLED))
            || (recv && flags.contains(CompletionFlags::SUPPRESS))
            || n > max_iov as usize
        {
            return None;
        }
        s.pz
    }

    /// The fast word never lets through a post the full checks would stop or flush, and lets
    /// through every usual one (limits below 256).
    #[test]
    fn the_fast_word_accepts_exactly_what_the_full_checks_pass() {
        let r = dat_core::types::RmrTriplet {
            rmr_context: 1,
            virtual_address: 0,
            segment_length: 8,
        };
        let ops = [
            PostOp::Recv,
            PostOp::Send,
            PostOp::RdmaRead(r),
            PostOp::RdmaWrite(r),
        ];
        let mut accepted = 0;
        for &state in &EpState::ALL {
            for (pz, srq) in [(Some(3), false), (Some(u32::MAX), true), (None, false)] {
                for allowed in [CompletionFlags::all(), CompletionFlags::SOLICITED_WAIT] {
                    let mut s = snapshot(state, pz, srq);
                    s.recv_flags = allowed;
                    s.request_flags = allowed;
                    s.max_iov = [2, 3, 1, 300];
                    for op in ops {
                        let fast = Fast::of(&s, op_index(op));
                        for bits in 0..64u32 {
                            let flags = CompletionFlags::from_bits_retain(bits);
                            for n in 0..5 {
                                let want = full_checks(&s, op, flags, n);
                                let got = fast.accepts(flags, n).map(|(pz, _)| pz);
                                assert_eq!(
                                    got, want,
                                    "{state:?} {pz:?} {srq} {op:?} {bits:#x} {n}"
                                );
                                accepted += usize::from(got.is_some());
                            }
                        }
                    }
                }
            }
        }
        assert!(accepted > 0);
        // A segment limit above 255 is capped in the word: more triplets take the full path.
        let s = PostSnapshot {
            max_iov: [1000; 4],
            ..snapshot(EpState::Connected, Some(1), false)
        };
        let fast = Fast::of(&s, op_index(PostOp::Send));
        assert_eq!(
            fast.accepts(CompletionFlags::empty(), 255),
            Some((PzId(1), 255))
        );
        assert_eq!(fast.accepts(CompletionFlags::empty(), 256), None);
    }

    #[test]
    fn the_fast_words_follow_every_publish() {
        let v = PostView::default();
        v.publish(&snapshot(EpState::Connected, Some(4), false));
        assert!(
            Fast(v.fast[1].load(Ordering::Relaxed))
                .accepts(CompletionFlags::empty(), 1)
                .is_some()
        );
        v.publish(&snapshot(EpState::Disconnected, Some(4), false));
        for w in &v.fast {
            assert_eq!(w.load(Ordering::Relaxed), 0);
        }
    }

    #[test]
    fn a_read_during_a_write_is_refused() {
        let v = PostView::default();
        v.publish(&snapshot(EpState::Connected, Some(7), false));
        v.seq.fetch_add(1, Ordering::Relaxed);
        assert_eq!(v.read(), None);
    }

    /// A reader racing a writer that alternates two snapshots (different in every word)
    /// sees one of them, never a mix.
    #[test]
    fn concurrent_reads_are_never_torn() {
        use std::sync::atomic::AtomicBool;
        let a = snapshot(EpState::Connected, Some(1), false);
        let b = PostSnapshot {
            recv_flags: CompletionFlags::empty(),
            request_flags: CompletionFlags::SUPPRESS,
            max_iov: [9, 8, 7, 6],
            ..snapshot(EpState::Disconnected, None, true)
        };
        let v = std::sync::Arc::new(PostView::default());
        v.publish(&a);
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (w, halt) = (v.clone(), stop.clone());
        let writer = std::thread::spawn(move || {
            let mut n = 0u64;
            while !halt.load(Ordering::Relaxed) {
                w.publish(if n.is_multiple_of(2) { &b } else { &a });
                n += 1;
            }
            n
        });
        let mut seen = [0u32; 2];
        for _ in 0..2_000_000 {
            if let Some(s) = v.read() {
                assert!(s == a || s == b, "torn read: {s:?}");
                seen[usize::from(s == b)] += 1;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let writes = writer.join().unwrap();
        assert!(writes > 0 && seen[0] + seen[1] > 0, "{writes} {seen:?}");
    }
}
