//! Posts: `dat_ep_post_send`, `_recv`, `_rdma_write` and `_rdma_read`, each checked
//! synchronously (state, flags, segment count, PZ, every local triplet, RDMA length) before
//! its work request goes to the transport.

use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;

use dat_core::ep::state::{PostGate, post_gate};
use dat_core::error::{ErrorType, Subtype};
use dat_core::mem::{MemTable, SegList, Segment, one_segment, post_cache, total_len};
use dat_core::provider::{PostOp, WorkRequest};
use dat_core::types::{CompletionFlags, Cookie, DtoStatus, LmrTriplet, MemPriv, PzId, RmrTriplet};
use dat_core::{DatError, DatResult};

use crate::direct::PostTo;
use crate::ep::{Ep, EpInner};
use crate::ep_cell::op_index;

/// The one non-empty triplet `t` of a post of `op` resolved (checked against the EP's PZ and
/// the operation's privilege) and, for an RDMA, its length checked against the remote
/// segment: from the LMR this thread found last under that key if no LMR was freed since (no
/// lock: see `dat_core::mem::post_cache`), else under the table's lock. The same checks, in
/// the same order, as [`resolve`] gives a list of one triplet.
#[inline(always)]
fn resolve_one(
    inner: &EpInner,
    slots: &post_cache::Slots,
    op: PostOp,
    t: &LmrTriplet,
    pz: PzId,
) -> DatResult<Segment> {
    let need = op.local_privilege();
    let seg = match slots.lookup(&inner.ia.mem_generation, pz, t, need) {
        Some(seg) => seg,
        None => resolve_locked(inner, pz, t, need)?,
    };
    check_remote_length(op, seg.len_u64())?;
    Ok(seg)
}

/// `DAT_LENGTH_ERROR` when an RDMA's local length `len` exceeds its remote segment.
#[inline(always)]
fn check_remote_length(op: PostOp, len: u64) -> DatResult<()> {
    match op {
        PostOp::RdmaRead(r) | PostOp::RdmaWrite(r) if len > u64::from(r.segment_length) => {
            Err(DatError::new(ErrorType::LengthError, Subtype::NoSubtype))
        }
        _ => Ok(()),
    }
}

/// Resolves the segments of a post of `op` whose other checks passed into `segs` (checked
/// against `max_iov`, the EP's PZ and the operation's privilege) and, for an RDMA, checks the
/// length against the remote segment.
#[inline(always)]
fn resolve(
    inner: &EpInner,
    slots: &post_cache::Slots,
    op: PostOp,
    segs: &mut SegList,
    iov: &[LmrTriplet],
    pz: PzId,
    max_iov: u32,
) -> DatResult<()> {
    if let [t] = iov
        && t.segment_length != 0
    {
        segs.push(resolve_one(inner, slots, op, t, pz)?);
        return Ok(());
    }
    crate::sync::read(&inner.ia.mem).local_iov_into(
        pz,
        iov,
        op.local_privilege(),
        max_iov,
        segs,
    )?;
    check_remote_length(op, total_len(segs))
}

/// The segment of one non-empty triplet looked up under the table's lock, remembered for
/// this thread's next posts (out of the post's line: a thread's first post from an LMR, or
/// its first after any LMR of the IA was freed, or a refused triplet).
#[cold]
#[inline(never)]
fn resolve_locked(inner: &EpInner, pz: PzId, t: &LmrTriplet, need: MemPriv) -> DatResult<Segment> {
    let mem = crate::sync::read(&inner.ia.mem);
    match mem.try_local(pz, t, need) {
        Some(seg) => {
            post_cache::fill(&mem, t.lmr_context);
            Ok(seg)
        }
        None => Err(refused(&mem, pz, t, need)),
    }
}

/// The error of a triplet `MemTable::try_local` refused (out of the post's line).
#[cold]
#[inline(never)]
fn refused(mem: &MemTable, pz: PzId, t: &LmrTriplet, need: MemPriv) -> DatError {
    match mem.local(pz, t, need) {
        Err(e) => e,
        // Unreachable: both run the same checks.
        Ok(_) => DatError::new(ErrorType::ProtectionViolation, Subtype::NoSubtype),
    }
}

impl Ep {
    /// Posts a send of the gather list `iov` (`dat_ep_post_send`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_EP_UNCONNECTED` unless connected (in
    /// `DISCONNECTED` the post succeeds and completes as `DAT_DTO_ERR_FLUSHED`);
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` for more segments than `max_request_iov`;
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG5` for unknown or disallowed flags; the local
    /// protection codes of `dat_core::mem` (`DAT_PROTECTION_VIOLATION`,
    /// `DAT_PRIVILEGES_VIOLATION`, `DAT_INVALID_PARAMETER`); transport errors such as
    /// `DAT_INSUFFICIENT_RESOURCES` for a full queue.
    #[inline]
    pub fn post_send(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post(PostOp::Send, iov, cookie, flags, 5)
    }

    /// Posts a receive buffer (`dat_ep_post_recv`); allowed in every state.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_SRQ_IN_USE` on an EP that takes receives from an
    /// SRQ; otherwise as [`Ep::post_send`] with `max_recv_iov`.
    #[inline]
    pub fn post_recv(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post(PostOp::Recv, iov, cookie, flags, 5)
    }

    /// Posts a one-sided RDMA write of the gather list `iov` to `remote`
    /// (`dat_ep_post_rdma_write`). The target's application is not involved.
    ///
    /// # Errors
    /// As [`Ep::post_send`] (flags are argument 6), plus `DAT_LENGTH_ERROR` when the local
    /// total exceeds `remote.segment_length`. Remote protection errors arrive as a
    /// `DAT_DTO_ERR_REMOTE_ACCESS` completion and break the connection.
    #[inline]
    pub fn post_rdma_write(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post(PostOp::RdmaWrite(remote), iov, cookie, flags, 6)
    }

    /// Posts a one-sided RDMA read of `remote` into the scatter list `iov`
    /// (`dat_ep_post_rdma_read`).
    ///
    /// # Errors
    /// As [`Ep::post_rdma_write`].
    #[inline]
    pub fn post_rdma_read(
        &self,
        iov: &[LmrTriplet],
        cookie: Cookie,
        remote: RmrTriplet,
        flags: CompletionFlags,
    ) -> DatResult<()> {
        self.post(PostOp::RdmaRead(remote), iov, cookie, flags, 6)
    }

    // Inlined into each public post so that the operation is a constant there. Only the
    // usual post, one non-empty segment that needs no check beyond its own, is inlined: the
    // others are a call (`post_other`), so that the usual one's code stays small and in one
    // piece (the C ABI's `dat_ep_post_rdma_write` 2.8 KiB instead of 6.5, BENCHMARKS.md,
    // session 20).
    #[inline(always)]
    fn post(
        &self,
        op: PostOp,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
        flags_arg: u16,
    ) -> DatResult<()> {
        let inner = &*self.inner;
        // The usual post (see `ep_cell`): one word says the state, SRQ binding, flags and
        // segment count need no further check; only the segment is checked then.
        if let [t] = iov
            && t.segment_length != 0
            && let Some((pz, _)) = inner
                .core
                .fast(op_index(op))
                .accepts(flags, 1)
                .filter(|_| !inner.freed.load(Ordering::Acquire))
        {
            // The thread-local post cache (one access per post), and the thread's id (a load).
            let slots = post_cache::slots();
            let me = crate::ep_count::thread();
            if inner.lend
                && let Some(to) = &inner.post_to
                // SAFETY: `post_one_lent` forgets the segment, never drops it, and returns
                // before this thread posts again (`lookup_lent`'s contract).
                && let Some(seg) = unsafe {
                    slots.lookup_lent(&inner.ia.mem_generation, pz, t, op.local_privilege())
                }
            {
                return post_one_lent(inner, to, op, seg, (cookie, flags), me);
            }
            // A lookup under the lock (a miss), or a transport that keeps the request: the
            // segment owns its reference. Its request is built where the transport's call takes it (no list is pushed
            // to or borrowed on the way, nor does the request pass through another
            // function's parameter: each made the compiler copy the 128-byte request).
            let seg = resolve_one(inner, slots, op, t, pz)?;
            let wr = WorkRequest {
                op,
                segs: one_segment(seg),
                cookie,
                flags,
            };
            return submit(inner, wr, matches!(op, PostOp::Recv), me);
        }
        self.post_other(op, iov, cookie, flags, flags_arg)
    }

    /// Every post but the usual one ([`Ep::post`]'s): several segments or none, or one that
    /// needs the full checks (a state, flag or SRQ change in progress, or a refusal to find).
    #[inline(never)]
    fn post_other(
        &self,
        op: PostOp,
        iov: &[LmrTriplet],
        cookie: Cookie,
        flags: CompletionFlags,
        flags_arg: u16,
    ) -> DatResult<()> {
        let inner = &*self.inner;
        if let Some((pz, max_iov)) = inner
            .core
            .fast(op_index(op))
            .accepts(flags, iov.len())
            .filter(|_| !inner.freed.load(Ordering::Acquire))
        {
            let slots = post_cache::slots();
            let me = crate::ep_count::thread();
            // Several segments, or none (or one empty): the list is resolved into the
            // request itself, not into a list then moved into it (a 128-byte copy).
            let mut wr = WorkRequest {
                op,
                segs: SegList::new(),
                cookie,
                flags,
            };
            resolve(inner, slots, op, &mut wr.segs, iov, pz, max_iov)?;
            return submit(inner, wr, matches!(op, PostOp::Recv), me);
        }
        inner.check()?;
        let recv = matches!(op, PostOp::Recv);
        let snap = inner.core.post_snapshot();
        let gate = post_gate(snap.state, recv)?;
        if recv && snap.srq {
            return Err(DatError::invalid_state(Subtype::StateSrqInUse));
        }
        let (allowed, max_iov) = snap.limits(op);
        if flags.bits() & !CompletionFlags::all().bits() != 0
            || (flags.contains(CompletionFlags::UNSIGNALLED)
                && !allowed.contains(CompletionFlags::UNSIGNALLED))
            || (recv && flags.contains(CompletionFlags::SUPPRESS))
        {
            return Err(DatError::invalid_arg(flags_arg));
        }
        if iov.len() > max_iov as usize {
            return Err(DatError::invalid_arg(2));
        }
        let Some(pz) = snap.pz else {
            return Err(DatError::invalid_state(Subtype::StateEpNotReady));
        };
        let mut segs = SegList::new();
        let slots = post_cache::slots();
        resolve(inner, slots, op, &mut segs, iov, pz, max_iov)?;
        let wr = WorkRequest {
            op,
            segs,
            cookie,
            flags,
        };
        if gate == PostGate::Flush {
            inner.core.routes().posting(recv, crate::ep_count::thread());
            inner.deliver(wr.completion(DtoStatus::Flushed, 0));
            return Ok(());
        }
        submit(inner, wr, recv, crate::ep_count::thread())
    }
}

/// The usual post to an endpoint entry that borrows its requests (`EpPost::lends`), with
/// `seg` found in the thread's post cache: it lends the entry's memory reference for the
/// call (`Slots::lookup_lent`), so nothing is taken or given back. The checks after the
/// lookup are [`resolve_one`]'s. The request is passed as its parts
/// (`PostTo::post_lent_one`), not built.
#[inline(always)]
fn post_one_lent(
    inner: &EpInner,
    to: &PostTo,
    op: PostOp,
    seg: Segment,
    (cookie, flags): (Cookie, CompletionFlags),
    me: usize,
) -> DatResult<()> {
    // Never dropped: the segment borrows its reference (see the caller).
    let seg = ManuallyDrop::new(seg);
    check_remote_length(op, seg.len_u64())?;
    counted(
        inner,
        matches!(op, PostOp::Recv),
        me,
        #[inline(always)]
        || to.post_lent_one(op, &seg, (cookie, flags)),
    )
}

/// Hands `wr` to the transport, counted as outstanding on the endpoint (before: its
/// completion may be reported on another thread before the transport's call returns).
#[inline(always)]
fn submit(inner: &EpInner, wr: WorkRequest, recv: bool, me: usize) -> DatResult<()> {
    counted(
        inner,
        recv,
        me,
        #[inline(always)]
        || hand_over(inner, wr),
    )
}

/// Runs `post`, the transport's call, with the request counted as outstanding on the
/// endpoint by thread `me` (before the call: its completion may be reported on another
/// thread before the call returns); a refused request is counted out again.
#[inline(always)]
fn counted(
    inner: &EpInner,
    recv: bool,
    me: usize,
    post: impl FnOnce() -> DatResult<()>,
) -> DatResult<()> {
    let routes = inner.core.routes();
    routes.posting(recv, me);
    let r = post();
    if r.is_err() {
        routes.unpost(recv);
    }
    r
}

/// Gives `wr` to the transport: lent for the call where the endpoint's entry takes it so
/// (`EpPost::lends`), and then dropped here, where the thread's post cache, which takes
/// the segments' memory references back, was reached already for the post's look-up (one
/// thread-local access per post instead of a second one in the provider).
#[inline(always)]
fn hand_over(inner: &EpInner, mut wr: WorkRequest) -> DatResult<()> {
    match &inner.post_to {
        Some(to) if inner.lend => {
            let r = to.post_lent(&wr);
            wr.release_segments();
            std::mem::forget(wr);
            r
        }
        Some(to) => to.post(wr),
        None => inner.ia.transport.post(inner.id, wr),
    }
}
