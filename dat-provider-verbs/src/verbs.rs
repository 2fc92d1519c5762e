//! RAII wrappers of the data-path verbs objects (completion channel, CQ, MR, SRQ) and the pure
//! mappings between DAT and verbs (privileges, completion flags, work-completion statuses).
//!
//! Teardown order is fixed by ownership: a [`Cq`] owns its [`CompChannel`] (destroyed after
//! the CQ), an
//! [`Mr`] and an [`Srq`] hold an `Arc` of their [`Pd`], and a QP (see `cm`) holds its CQs, SRQ
//! and PD; so a channel outlives its CQs, a PD its MRs, SRQs and QPs, and the context its PDs.

use std::io;
use std::mem::MaybeUninit;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use dat_core::mem::Buffer;
use dat_core::provider::PostOp;
use dat_core::types::{CompletionFlags, DtoStatus, MemPriv};
use rdma_sys as sys;

use crate::device::{Context, Pd, errno_result};

/// A completion channel (`ibv_create_comp_channel`), non-blocking, destroyed on drop.
#[derive(Debug)]
pub struct CompChannel {
    ch: NonNull<sys::ibv_comp_channel>,
    _ctx: Arc<Context>,
}

// SAFETY: a completion channel is a file descriptor owned by libibverbs; its calls are
// thread-safe and it is destroyed once, in Drop, when no CQ uses it (each holds an Arc).
unsafe impl Send for CompChannel {}
// SAFETY: as for Send.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    /// Creates a non-blocking completion channel on `ctx`.
    ///
    /// # Errors
    /// The errno of `ibv_create_comp_channel` or `fcntl`.
    pub fn new(ctx: &Arc<Context>) -> io::Result<CompChannel> {
        // SAFETY: the context is open (the Arc keeps it so); the channel is destroyed in Drop.
        let ch = unsafe { sys::ibv_create_comp_channel(ctx.as_ptr()) };
        let ch = NonNull::new(ch).ok_or_else(io::Error::last_os_error)?;
        let ch = CompChannel {
            ch,
            _ctx: ctx.clone(),
        };
        set_nonblocking(ch.fd())?;
        Ok(ch)
    }

    /// The channel's file descriptor (readable when a CQ has an event).
    pub fn fd(&self) -> libc::c_int {
        // SAFETY: the channel is live; `fd` is a plain field.
        unsafe { (*self.ch.as_ptr()).fd }
    }

    /// Takes one CQ event and acknowledges it at once; true if there was one (false on
    /// EAGAIN). The event's CQ is marked as unarmed (see [`Cq::arm`]), so the next arm of it
    /// requests a new event.
    pub fn take_event(&self) -> bool {
        let mut cq: *mut sys::ibv_cq = std::ptr::null_mut();
        let mut cq_ctx: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: the channel is live and non-blocking; `cq` and `cq_ctx` are out-pointers.
        let rc = unsafe { sys::ibv_get_cq_event(self.ch.as_ptr(), &mut cq, &mut cq_ctx) };
        if rc != 0 || cq.is_null() {
            return false;
        }
        if let Some(armed) = NonNull::new(cq_ctx.cast::<AtomicBool>()) {
            // SAFETY: the CQ of this channel is created by `Cq::new` with the address of its
            // boxed `armed` flag as context. The box is freed only after `ibv_destroy_cq` has
            // returned, which waits until every event read for the CQ is acknowledged, and
            // this one is acknowledged below, after this store.
            unsafe { armed.as_ref() }.store(false, Ordering::Release);
        }
        // SAFETY: `cq` was returned by ibv_get_cq_event and cannot be destroyed before this
        // event is acknowledged (ibv_destroy_cq waits for it); acknowledged at once, so a
        // concurrent destroy never waits on us.
        unsafe { sys::ibv_ack_cq_events(cq, 1) };
        true
    }
}

impl Drop for CompChannel {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_comp_channel, destroyed once; no CQ is left on it.
        let rc = unsafe { sys::ibv_destroy_comp_channel(self.ch.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_comp_channel failed");
        }
    }
}

/// Sets `O_NONBLOCK` on `fd`.
///
/// # Errors
/// The errno of `fcntl`.
pub fn set_nonblocking(fd: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_GETFL/F_SETFL take no pointers.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A completion queue (`ibv_create_cq`) on a completion channel, destroyed on drop.
#[derive(Debug)]
pub struct Cq {
    cq: NonNull<sys::ibv_cq>,
    /// Set while an event of the CQ is requested (`ibv_req_notify_cq`) or sits in the channel
    /// untaken; cleared by [`CompChannel::take_event`]. Boxed: its address is the CQ's
    /// context, which the channel hands back with each event.
    armed: Box<AtomicBool>,
    /// The CQ's own channel: a waiter sleeps on the channel of the EVD it waits for, so a
    /// completion wakes only that waiter (and the event thread while it watches every CQ).
    /// Dropped after the CQ (`Drop` destroys the CQ before the fields go).
    channel: CompChannel,
}

// SAFETY: a CQ is used from several threads only under the owner's lock (polling) or through
// thread-safe verbs (create_qp, req_notify under the same lock), and destroyed once in Drop.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    /// Creates a CQ of at least `cqe` entries on a completion channel of its own, and arms
    /// it.
    ///
    /// # Errors
    /// The errno of `ibv_create_comp_channel`, `ibv_create_cq` or `ibv_req_notify_cq`.
    pub fn new(ctx: &Arc<Context>, cqe: u32) -> io::Result<Cq> {
        let channel = CompChannel::new(ctx)?;
        let cqe = libc::c_int::try_from(cqe).unwrap_or(libc::c_int::MAX);
        let armed = Box::new(AtomicBool::new(false));
        // SAFETY: context and channel are live; the context is the address of `armed`, which
        // the Cq keeps (boxed, so it does not move) until after ibv_destroy_cq in Drop, and
        // which `CompChannel::take_event` reads only as an AtomicBool. The CQ is destroyed in
        // Drop.
        let cq = unsafe {
            sys::ibv_create_cq(
                ctx.as_ptr(),
                cqe,
                std::ptr::from_ref::<AtomicBool>(&armed).cast_mut().cast(),
                channel.ch.as_ptr(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(io::Error::last_os_error)?;
        let cq = Cq { cq, armed, channel };
        cq.arm()?;
        Ok(cq)
    }

    /// The descriptor of the CQ's completion channel (readable when an event is there).
    pub fn channel_fd(&self) -> libc::c_int {
        self.channel.fd()
    }

    /// Takes the event waiting in the CQ's channel (which leaves the CQ unarmed); true if
    /// there was one. One read: the channel is the CQ's own and [`Cq::arm`] requests an event
    /// only after the last one was taken, so at most one waits there (a second, were there
    /// one, keeps the channel readable for the next look).
    pub fn take_event(&self) -> bool {
        self.channel.take_event()
    }

    /// The raw CQ (for QP creation).
    pub fn as_ptr(&self) -> *mut sys::ibv_cq {
        self.cq.as_ptr()
    }

    /// Requests an event for the next completion (`ibv_req_notify_cq`), unless one is
    /// requested already and its event not taken from the channel yet: a request lasts until
    /// its event is taken, so arming an armed CQ again would only be a system call in vain
    /// (`ibv_req_notify_cq` is one on rxe). Returns whether it made the call.
    ///
    /// The flag says "an event will come or has come": when the CQ has fired but its event is
    /// still in the channel, a caller that skips the call and sleeps on the channel finds the
    /// channel readable, so no completion goes unnoticed.
    ///
    /// # Errors
    /// The errno of the call (the CQ then counts as unarmed).
    pub fn arm(&self) -> io::Result<bool> {
        if self.armed.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        // SAFETY: the CQ is live.
        let r = errno_result(unsafe { sys::ibv_req_notify_cq(self.cq.as_ptr(), 0) });
        if r.is_err() {
            self.armed.store(false, Ordering::Release);
        }
        r.map(|()| true)
    }

    /// Polls up to `out.len()` completions into `out` and returns those it wrote. No system
    /// call on providers that poll in user space (all current ones, rxe included). `out` need
    /// not be initialised: an empty poll, the usual case of a busy poller, then costs no
    /// clearing of the array.
    ///
    /// # Errors
    /// A negative return of `ibv_poll_cq`.
    #[inline]
    pub fn poll<'a>(
        &self,
        out: &'a mut [MaybeUninit<sys::ibv_wc>],
    ) -> io::Result<&'a [sys::ibv_wc]> {
        let n = i32::try_from(out.len()).unwrap_or(i32::MAX);
        // SAFETY: the CQ is live and `out` has room for `n` work completions
        // (`MaybeUninit<ibv_wc>` has the layout of `ibv_wc`); ibv_poll_cq only writes them. The
        // caller holds the CQ's lock, so no other thread polls it at the same time.
        let rc = unsafe { sys::ibv_poll_cq(self.cq.as_ptr(), n, out.as_mut_ptr().cast()) };
        let got = usize::try_from(rc).map_err(|_| io::Error::from_raw_os_error(-rc))?;
        let got = got.min(out.len());
        // SAFETY: ibv_poll_cq wrote the first `got` entries (it returns how many, at most `n`),
        // and they are plain data.
        Ok(unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<sys::ibv_wc>(), got) })
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq, destroyed once; every QP on it holds an Arc of
        // this Cq and is destroyed first; its channel events are acknowledged at once.
        let rc = unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_cq failed");
        }
    }
}

/// Room for `N` work completions for [`Cq::poll`], not initialised.
pub fn wc_room<const N: usize>() -> [MaybeUninit<sys::ibv_wc>; N] {
    [const { MaybeUninit::uninit() }; N]
}

/// A memory region (`ibv_reg_mr`), deregistered on drop, before its PD.
#[derive(Debug)]
pub struct Mr {
    mr: NonNull<sys::ibv_mr>,
    /// Registered from I/O address 0 (a zero-based LMR).
    zero_based: bool,
    _pd: Arc<Pd>,
    _buf: Arc<Buffer>,
}

// SAFETY: an MR is only read (keys) and deregistered once, in Drop.
unsafe impl Send for Mr {}
// SAFETY: as for Send.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers the whole of `buf` on `pd` with `access` (`ibv_access_flags` bits), addressed
    /// by its virtual addresses, or from 0 with `zero_based` (`DAT_VA_TYPE_ZB`:
    /// `ibv_reg_mr_iova` with an I/O virtual address of 0, so that local and remote accesses
    /// name offsets into `buf`).
    ///
    /// # Errors
    /// The errno of `ibv_reg_mr` / `ibv_reg_mr_iova`.
    pub fn register(
        pd: &Arc<Pd>,
        buf: &Arc<Buffer>,
        access: u32,
        zero_based: bool,
    ) -> io::Result<Mr> {
        let (pd_ptr, addr, len, access) = (
            pd.as_ptr(),
            buf.as_ptr().cast(),
            buf.len(),
            access as libc::c_int,
        );
        // SAFETY: the PD is live; `buf` is `buf.len()` bytes of memory that stays allocated
        // while this Mr holds its Arc (the MR is deregistered in Drop, before the Arc goes);
        // zero-based, the device addresses the same memory from I/O address 0.
        let mr = unsafe {
            if zero_based {
                sys::ibv_reg_mr_iova(pd_ptr, addr, len, 0, access)
            } else {
                sys::ibv_reg_mr(pd_ptr, addr, len, access)
            }
        };
        let mr = NonNull::new(mr).ok_or_else(io::Error::last_os_error)?;
        Ok(Mr {
            mr,
            zero_based,
            _pd: pd.clone(),
            _buf: buf.clone(),
        })
    }

    /// True for an MR registered from I/O address 0 (`DAT_VA_TYPE_ZB`).
    pub fn zero_based(&self) -> bool {
        self.zero_based
    }

    /// The raw MR (for memory window binds).
    pub fn as_ptr(&self) -> *mut sys::ibv_mr {
        self.mr.as_ptr()
    }

    /// The PD the MR is registered on.
    pub fn pd(&self) -> &Arc<Pd> {
        &self._pd
    }

    /// `(lkey, rkey)`.
    pub fn keys(&self) -> (u32, u32) {
        // SAFETY: the MR is live; lkey and rkey are plain fields set at registration.
        unsafe { ((*self.mr.as_ptr()).lkey, (*self.mr.as_ptr()).rkey) }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once; the PD and buffer outlive it.
        let rc = unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dereg_mr failed");
        }
    }
}

/// A type 2 memory window (`ibv_alloc_mw`), deallocated on drop (which revokes its key),
/// before its PD.
#[derive(Debug)]
pub struct Mw {
    mw: NonNull<sys::ibv_mw>,
    _pd: Arc<Pd>,
}

// SAFETY: a window is only read (its rkey) and deallocated once, in Drop.
unsafe impl Send for Mw {}
// SAFETY: as for Send.
unsafe impl Sync for Mw {}

impl Mw {
    /// Allocates a type 2 window on `pd`.
    ///
    /// # Errors
    /// The errno of `ibv_alloc_mw` (EOPNOTSUPP: the device has no windows).
    pub fn alloc(pd: &Arc<Pd>) -> io::Result<Mw> {
        // SAFETY: the PD is live; the window is deallocated in Drop.
        let mw = unsafe { sys::ibv_alloc_mw(pd.as_ptr(), sys::ibv_mw_type::IBV_MW_TYPE_2) };
        let mw = mw
            .and_then(NonNull::new)
            .ok_or_else(io::Error::last_os_error)?;
        Ok(Mw {
            mw,
            _pd: pd.clone(),
        })
    }

    /// The raw window.
    pub fn as_ptr(&self) -> *mut sys::ibv_mw {
        self.mw.as_ptr()
    }

    /// The key of the window's next bind: its current rkey with the low 8 bits (the
    /// consumer-owned tag) moved on, as `ibv_inc_rkey` does.
    pub fn next_rkey(&self) -> u32 {
        // SAFETY: the window is live; `rkey` is a plain field.
        let rkey = unsafe { (*self.mw.as_ptr()).rkey };
        (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_mw, deallocated once; the PD outlives it.
        let rc = unsafe { sys::ibv_dealloc_mw(self.mw.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_dealloc_mw failed");
        }
    }
}

/// `IBV_ACCESS_MW_BIND`: memory windows may be bound to the MR.
pub const ACCESS_MW_BIND: u32 = 16;
/// The system's page size (what `ibv_reg_mr_iova` aligns I/O addresses to).
pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Remote privileges of a window as `mw_access_flags` (no local bits: a window grants remote
/// access only).
pub fn window_access(p: MemPriv) -> u32 {
    access_flags(p) & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC)
}

/// A shared receive queue (`ibv_create_srq`), destroyed on drop, after its QPs.
#[derive(Debug)]
pub struct Srq {
    srq: NonNull<sys::ibv_srq>,
    _pd: Arc<Pd>,
}

// SAFETY: posting to an SRQ is thread-safe in libibverbs; destroyed once, in Drop, after every
// QP that uses it (each holds an Arc).
unsafe impl Send for Srq {}
// SAFETY: as for Send.
unsafe impl Sync for Srq {}

impl Srq {
    /// Creates an SRQ of `max_wr` receives of `max_sge` segments on `pd`.
    ///
    /// # Errors
    /// The errno of `ibv_create_srq`.
    pub fn new(pd: &Arc<Pd>, max_wr: u32, max_sge: u32) -> io::Result<Srq> {
        // SAFETY: plain data; all-zero is valid.
        let mut attr: sys::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        attr.attr.max_wr = max_wr.max(1);
        attr.attr.max_sge = max_sge.max(1);
        // SAFETY: the PD is live; `attr` is valid for the call. Destroyed in Drop.
        let srq = unsafe { sys::ibv_create_srq(pd.as_ptr(), &mut attr) };
        let srq = NonNull::new(srq).ok_or_else(io::Error::last_os_error)?;
        Ok(Srq {
            srq,
            _pd: pd.clone(),
        })
    }

    /// The raw SRQ.
    pub fn as_ptr(&self) -> *mut sys::ibv_srq {
        self.srq.as_ptr()
    }

    /// Arms the limit (`ibv_modify_srq` with `IBV_SRQ_LIMIT`): the device reports
    /// `IBV_EVENT_SRQ_LIMIT_REACHED` once when fewer than `limit` receives remain, then
    /// disarms it; 0 disarms.
    ///
    /// # Errors
    /// The errno of `ibv_modify_srq` (EINVAL: above the queue's depth).
    pub fn set_limit(&self, limit: u32) -> io::Result<()> {
        // SAFETY: plain data; all-zero is valid.
        let mut attr: sys::ibv_srq_attr = unsafe { std::mem::zeroed() };
        attr.srq_limit = limit;
        let mask = sys::ibv_srq_attr_mask::IBV_SRQ_LIMIT.0 as libc::c_int;
        // SAFETY: the SRQ is live (destroyed only in Drop); `attr` is valid for the call.
        let rc = unsafe { sys::ibv_modify_srq(self.srq.as_ptr(), &mut attr, mask) };
        errno_result(rc)
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_srq, destroyed once, after its QPs.
        let rc = unsafe { sys::ibv_destroy_srq(self.srq.as_ptr()) };
        if rc != 0 {
            tracing::warn!(rc, "ibv_destroy_srq failed");
        }
    }
}

/// `IBV_ACCESS_LOCAL_WRITE`.
pub const ACCESS_LOCAL_WRITE: u32 = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const ACCESS_REMOTE_WRITE: u32 = 2;
/// `IBV_ACCESS_REMOTE_READ`.
pub const ACCESS_REMOTE_READ: u32 = 4;
/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub const ACCESS_REMOTE_ATOMIC: u32 = 8;

/// DAT privileges to `ibv_access_flags` (reference 6.2): LOCAL_READ is implicit in verbs;
/// LOCAL_WRITE, REMOTE_READ, REMOTE_WRITE and REMOTE_ATOMIC map one to one, and the remote
/// write privileges bring LOCAL_WRITE with them because verbs refuses them without it (the
/// core still enforces the consumer's LOCAL_WRITE on local posts).
pub fn access_flags(p: MemPriv) -> u32 {
    let mut a = 0;
    if p.contains(MemPriv::LOCAL_WRITE) {
        a |= ACCESS_LOCAL_WRITE;
    }
    if p.contains(MemPriv::REMOTE_READ) {
        a |= ACCESS_REMOTE_READ;
    }
    if p.contains(MemPriv::REMOTE_WRITE) {
        a |= ACCESS_REMOTE_WRITE | ACCESS_LOCAL_WRITE;
    }
    if p.contains(MemPriv::REMOTE_ATOMIC) {
        a |= ACCESS_REMOTE_ATOMIC | ACCESS_LOCAL_WRITE;
    }
    a
}

/// `IBV_SEND_FENCE`.
pub const SEND_FENCE: u32 = 1;
/// `IBV_SEND_SIGNALED`.
pub const SEND_SIGNALED: u32 = 2;
/// `IBV_SEND_SOLICITED`.
pub const SEND_SOLICITED: u32 = 4;
/// `IBV_SEND_INLINE`.
pub const SEND_INLINE: u32 = 8;

/// True when a request with completion flags `f` may go without a work completion of its own
/// (`IBV_SEND_SIGNALED` clear): the consumer wants no event on success (`SUPPRESS`) or no
/// wake-up (`UNSIGNALLED`), and it is a send or an RDMA write. An RDMA read is always
/// signalled: its data is the consumer's only once its completion is polled.
pub fn may_skip_signal(f: CompletionFlags, op: PostOp) -> bool {
    f.intersects(CompletionFlags::SUPPRESS | CompletionFlags::UNSIGNALLED)
        && matches!(op, PostOp::Send | PostOp::RdmaWrite(_))
}

/// Completion flags of a post to `ibv_send_flags`: `signal` sets `IBV_SEND_SIGNALED` (the
/// endpoint decides, see [`may_skip_signal`] and `ep::EpSt::signal_next`); `SOLICITED_WAIT`
/// is a solicited send; `BARRIER_FENCE` fences the request behind earlier RDMA reads.
/// `inline` adds `IBV_SEND_INLINE`.
pub fn send_flags(f: CompletionFlags, signal: bool, inline: bool) -> u32 {
    let mut s = 0;
    if signal {
        s |= SEND_SIGNALED;
    }
    if f.contains(CompletionFlags::SOLICITED_WAIT) {
        s |= SEND_SOLICITED;
    }
    if f.contains(CompletionFlags::BARRIER_FENCE) {
        s |= SEND_FENCE;
    }
    if inline {
        s |= SEND_INLINE;
    }
    s
}

/// A work-completion status (`ibv_wc_status`) as a DAT DTO status (reference 2.7, as OFA
/// dapl maps them).
///
/// Success, every completion but a failing one, is a compare here; the other statuses go
/// through [`dto_error`], out of line: inlined whole, the mapping's jump table also set the
/// flags derived from it (success, flush) through the stack on every completion.
#[inline(always)]
pub fn dto_status(status: u32) -> DtoStatus {
    if status == sys::ibv_wc_status::IBV_WC_SUCCESS {
        DtoStatus::Success
    } else {
        dto_error(status)
    }
}

/// [`dto_status`] of a status other than success.
#[cold]
#[inline(never)]
fn dto_error(status: u32) -> DtoStatus {
    use sys::ibv_wc_status as s;
    match status {
        s::IBV_WC_SUCCESS => DtoStatus::Success,
        s::IBV_WC_LOC_LEN_ERR => DtoStatus::LocalLength,
        s::IBV_WC_LOC_QP_OP_ERR => DtoStatus::LocalEp,
        s::IBV_WC_LOC_PROT_ERR | s::IBV_WC_LOC_ACCESS_ERR | s::IBV_WC_LOC_RDD_VIOL_ERR => {
            DtoStatus::LocalProtection
        }
        s::IBV_WC_WR_FLUSH_ERR => DtoStatus::Flushed,
        s::IBV_WC_MW_BIND_ERR => DtoStatus::RmrOperationFailed,
        s::IBV_WC_BAD_RESP_ERR => DtoStatus::BadResponse,
        s::IBV_WC_REM_INV_REQ_ERR
        | s::IBV_WC_REM_OP_ERR
        | s::IBV_WC_REM_INV_RD_REQ_ERR
        | s::IBV_WC_REM_ABORT_ERR => DtoStatus::RemoteResponder,
        s::IBV_WC_REM_ACCESS_ERR => DtoStatus::RemoteAccess,
        s::IBV_WC_RNR_RETRY_EXC_ERR | s::IBV_WC_RESP_TIMEOUT_ERR => DtoStatus::ReceiverNotReady,
        // LOC_EEC_OP, RETRY_EXC, INV_EECN, INV_EEC_STATE, FATAL, GENERAL and anything newer.
        _ => DtoStatus::Transport,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::ibv_wc_status as s;

    #[test]
    fn privileges_map_as_reference_6_2() {
        assert_eq!(access_flags(MemPriv::LOCAL_READ), 0);
        assert_eq!(access_flags(MemPriv::LOCAL_WRITE), ACCESS_LOCAL_WRITE);
        assert_eq!(access_flags(MemPriv::REMOTE_READ), ACCESS_REMOTE_READ);
        assert_eq!(
            access_flags(MemPriv::REMOTE_WRITE),
            ACCESS_REMOTE_WRITE | ACCESS_LOCAL_WRITE
        );
        assert_eq!(
            access_flags(MemPriv::ALL),
            ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE
        );
        assert_eq!(
            access_flags(MemPriv::REMOTE_ATOMIC),
            ACCESS_REMOTE_ATOMIC | ACCESS_LOCAL_WRITE
        );
    }

    #[test]
    fn completion_flags_map_to_send_flags() {
        let f = CompletionFlags::DEFAULT;
        assert_eq!(send_flags(f, true, false), SEND_SIGNALED);
        assert_eq!(send_flags(f, false, true), SEND_INLINE);
        assert_eq!(
            send_flags(
                CompletionFlags::SOLICITED_WAIT | CompletionFlags::BARRIER_FENCE,
                true,
                false
            ),
            SEND_SIGNALED | SEND_SOLICITED | SEND_FENCE
        );
    }

    #[test]
    fn only_suppressed_or_unsignalled_sends_and_writes_may_skip_their_completion() {
        let t = dat_core::types::RmrTriplet {
            rmr_context: 1,
            virtual_address: 0,
            segment_length: 4,
        };
        for f in [CompletionFlags::SUPPRESS, CompletionFlags::UNSIGNALLED] {
            assert!(may_skip_signal(f, PostOp::Send));
            assert!(may_skip_signal(
                f | CompletionFlags::SOLICITED_WAIT,
                PostOp::Send
            ));
            assert!(may_skip_signal(f, PostOp::RdmaWrite(t)));
            assert!(
                !may_skip_signal(f, PostOp::RdmaRead(t)),
                "a read is signalled"
            );
        }
        assert!(!may_skip_signal(CompletionFlags::DEFAULT, PostOp::Send));
        assert!(!may_skip_signal(
            CompletionFlags::SOLICITED_WAIT,
            PostOp::RdmaWrite(t)
        ));
    }

    #[test]
    fn work_completion_statuses_map_as_reference_2_7() {
        let cases = [
            (s::IBV_WC_SUCCESS, DtoStatus::Success),
            (s::IBV_WC_LOC_LEN_ERR, DtoStatus::LocalLength),
            (s::IBV_WC_LOC_QP_OP_ERR, DtoStatus::LocalEp),
            (s::IBV_WC_LOC_EEC_OP_ERR, DtoStatus::Transport),
            (s::IBV_WC_LOC_PROT_ERR, DtoStatus::LocalProtection),
            (s::IBV_WC_LOC_ACCESS_ERR, DtoStatus::LocalProtection),
            (s::IBV_WC_LOC_RDD_VIOL_ERR, DtoStatus::LocalProtection),
            (s::IBV_WC_WR_FLUSH_ERR, DtoStatus::Flushed),
            (s::IBV_WC_MW_BIND_ERR, DtoStatus::RmrOperationFailed),
            (s::IBV_WC_BAD_RESP_ERR, DtoStatus::BadResponse),
            (s::IBV_WC_REM_INV_REQ_ERR, DtoStatus::RemoteResponder),
            (s::IBV_WC_REM_OP_ERR, DtoStatus::RemoteResponder),
            (s::IBV_WC_REM_INV_RD_REQ_ERR, DtoStatus::RemoteResponder),
            (s::IBV_WC_REM_ABORT_ERR, DtoStatus::RemoteResponder),
            (s::IBV_WC_REM_ACCESS_ERR, DtoStatus::RemoteAccess),
            (s::IBV_WC_RETRY_EXC_ERR, DtoStatus::Transport),
            (s::IBV_WC_RNR_RETRY_EXC_ERR, DtoStatus::ReceiverNotReady),
            (s::IBV_WC_RESP_TIMEOUT_ERR, DtoStatus::ReceiverNotReady),
            (s::IBV_WC_INV_EECN_ERR, DtoStatus::Transport),
            (s::IBV_WC_INV_EEC_STATE_ERR, DtoStatus::Transport),
            (s::IBV_WC_FATAL_ERR, DtoStatus::Transport),
            (s::IBV_WC_GENERAL_ERR, DtoStatus::Transport),
        ];
        for (wc, dat) in cases {
            assert_eq!(dto_status(wc), dat, "ibv_wc_status {wc}");
        }
    }
}
