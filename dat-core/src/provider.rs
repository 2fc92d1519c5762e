//! The provider boundary: what a transport implements, and how it reports back.
//!
//! A [`Provider`] is a transport kind registered by name (`provider = "tcp"` in the registry).
//! Opening an IA gives a [`Transport`]: one object per open IA that owns the I/O (sockets, shared
//! memory rings, verbs queue pairs). The facade (`dat`) calls the transport only after the core
//! has validated the call and decided the state transition; the transport reports *facts* back
//! through upcalls ([`EpUpcalls`], [`SpUpcalls`], [`IaUpcalls`]) and never decides DAT state
//! itself. That is what gives every provider identical semantics.
//!
//! The shape fits the three transports we build:
//! - verbs: `create_pz` allocates a PD, `register` an MR (keys come from the HCA), EPs are RC QPs
//!   with CQs per EVD, `connect`/`listen`/`accept` map to rdma_cm, `progress` polls CQs.
//! - TCP emulation and shared memory: memory keys come from the shared [`MemTable`] (the
//!   provider checks incoming RDMA against it at the target), EPs are sockets or ring pairs, a
//!   driver thread serves one-sided operations while the application sleeps.
//!
//! # Upcall rules
//! - Upcalls may run on any thread: a provider thread, or the application thread inside
//!   [`Transport::progress`] or a post.
//! - A provider must not hold any lock of its own across an upcall. The facade does not call
//!   back into the transport from inside [`EpUpcalls`]; it may from inside
//!   [`SpUpcalls::connection_request`], which can call `create_ep` (a PSP with the provider
//!   flag creates the request's EP), `reject` (no EP could be made, or the service point is
//!   gone) and `unlisten` (a reserved service point takes one request only).
//! - Ordering per endpoint: successful completions that precede a connection loss are reported
//!   before the [`CmFact`]; after reporting `Disconnected`, `Broken`, or any terminal fact, the
//!   provider completes everything still outstanding on that EP with [`DtoStatus::Flushed`] (in
//!   posting order per queue). A post made after that fact is completed as flushed by the core
//!   without reaching the transport.

use std::sync::{Arc, RwLock};

use crate::error::{DatError, DatResult};
use crate::mem::{Buffer, MemTable, SegList};
use crate::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, CrId, DtoOp, DtoStatus, EpAttr, EpId, EvdFlags,
    EvdId, IaAddress, IaAttr, LmrId, MemPriv, ProviderAttr, PzId, RmrId, RmrTriplet, SpId, SrqId,
    Timeout, VaType,
};

/// The memory table of one IA, shared by the facade (local checks at post time) and a software
/// provider (remote checks at the target).
pub type SharedMemTable = Arc<RwLock<MemTable>>;

/// A transport kind, registered by name.
pub trait Provider: Send + Sync + 'static {
    /// The name the registry uses in `provider = "..."`.
    fn name(&self) -> &'static str;

    /// Opens an IA on this transport.
    ///
    /// # Errors
    /// [`OpenError`] with `DAT_PROVIDER_NOT_FOUND` for a missing device or unusable address,
    /// `DAT_INVALID_PARAMETER` for bad or unknown `params` (the message names the key and the
    /// file), `DAT_INSUFFICIENT_RESOURCES` when threads or sockets cannot be created.
    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError>;
}

/// Everything a provider needs to open an IA.
pub struct OpenRequest<'a> {
    /// The IA name from the registry.
    pub ia_name: &'a str,
    /// The `params` table of the registry entry; the provider parses and validates it.
    pub params: &'a toml::Table,
    /// Where the entry came from (`file:line`), for error messages.
    pub origin: &'a str,
    /// The IA's memory table (software providers check remote access against it).
    pub mem: SharedMemTable,
    /// IA-level upcalls (asynchronous errors).
    pub upcalls: Arc<dyn IaUpcalls>,
}

/// Why an IA could not be opened: a DAT code plus a message that says what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenError {
    /// The DAT return code.
    pub code: DatError,
    /// What went wrong, naming the IA, the key, the file or the device.
    pub message: String,
}

impl OpenError {
    /// Builds an open error.
    pub fn new(code: DatError, message: impl Into<String>) -> OpenError {
        OpenError {
            code,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for OpenError {}

/// Keys of a registration made by the transport itself (verbs: the MR's lkey and rkey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemKeys {
    /// Local key (`lmr_context`).
    pub lmr_context: u32,
    /// Remote key (`rmr_context`), when remote access was requested.
    pub rmr_context: Option<u32>,
}

/// The configuration of an endpoint as the transport needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpConfig {
    /// Protection zone (an EP without one cannot connect).
    pub pz: Option<PzId>,
    /// EVD for receive completions.
    pub recv_evd: Option<EvdId>,
    /// EVD for request (send, RDMA, bind) completions.
    pub request_evd: Option<EvdId>,
    /// EVD for connection events.
    pub connect_evd: Option<EvdId>,
    /// Shared receive queue, if the EP takes receives from one.
    pub srq: Option<SrqId>,
    /// Validated attributes.
    pub attr: EpAttr,
}

/// What a work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostOp {
    /// Two-sided send.
    Send,
    /// Receive buffer.
    Recv,
    /// One-sided write of the local gather list to `remote`.
    RdmaWrite(RmrTriplet),
    /// One-sided read of `remote` into the local scatter list.
    RdmaRead(RmrTriplet),
}

impl PostOp {
    /// The DTO operation reported in the completion.
    #[inline]
    pub fn dto_op(self) -> DtoOp {
        match self {
            PostOp::Send => DtoOp::Send,
            PostOp::Recv => DtoOp::Receive,
            PostOp::RdmaWrite(_) => DtoOp::RdmaWrite,
            PostOp::RdmaRead(_) => DtoOp::RdmaRead,
        }
    }

    /// The local privilege the segments need (`LOCAL_READ` for sources, `LOCAL_WRITE` for sinks).
    #[inline]
    pub fn local_privilege(self) -> MemPriv {
        match self {
            PostOp::Send | PostOp::RdmaWrite(_) => MemPriv::LOCAL_READ,
            PostOp::Recv | PostOp::RdmaRead(_) => MemPriv::LOCAL_WRITE,
        }
    }
}

/// A validated work request: local segments are resolved and kept alive until the provider
/// reports the completion (dropping the request releases them), or, lent to a provider
/// that keeps the memory reachable itself ([`EpPost::lends`]), until the post returns.
#[derive(Clone, Debug)]
pub struct WorkRequest {
    /// The operation.
    pub op: PostOp,
    /// Resolved local memory.
    pub segs: SegList,
    /// Returned verbatim in the completion.
    pub cookie: Cookie,
    /// Completion flags of the post.
    pub flags: CompletionFlags,
}

impl WorkRequest {
    /// Total local length in bytes.
    #[inline]
    pub fn len(&self) -> u64 {
        crate::mem::total_len(&self.segs)
    }

    /// True for a zero-length request.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the request's segments where they lie (they give their memory references
    /// back), leaving it with an empty inline list: nothing of it needs dropping then, so
    /// the caller may forget it (`mem::forget`, which copies nothing).
    ///
    /// In place: a request dropped by value after it was lent (its address given to a call)
    /// was first copied (128 bytes), and `SmallVec`'s own drop is a generic function the
    /// compiler keeps out of line, about 48 instructions for one segment, of which the
    /// segment's own drop is a few. A spilled list (more segments than fit inline) is
    /// replaced by an empty one, which frees its heap block.
    #[inline(always)]
    #[allow(unsafe_code)]
    pub fn release_segments(&mut self) {
        // Nothing of a request but its segment list needs dropping.
        const {
            assert!(
                !std::mem::needs_drop::<PostOp>()
                    && !std::mem::needs_drop::<Cookie>()
                    && !std::mem::needs_drop::<CompletionFlags>()
            );
        }
        if self.segs.spilled() {
            self.segs = SegList::new();
            return;
        }
        let n = self.segs.len();
        let first = self.segs.as_mut_ptr();
        // SAFETY: the list is inline, so it owns no heap block: its first `n` entries are
        // its whole contents. Its length goes to 0 first, so nothing reaches them again (an
        // unwinding drop of one segment still drops the others, and never twice); then
        // every segment is dropped once. One segment (the usual post) is dropped on its
        // own, so that its drop is inlined.
        unsafe {
            self.segs.set_len(0);
            if n == 1 {
                // A segment's only field that needs dropping is its memory reference,
                // given back inlined (`SegBuf::release`).
                std::ptr::read(first).buf.release();
            } else {
                std::ptr::drop_in_place(std::ptr::slice_from_raw_parts_mut(first, n));
            }
        }
    }

    /// The completion of this request with `status` and `transferred` bytes.
    #[inline]
    pub fn completion(&self, status: DtoStatus, transferred: u32) -> Completion {
        Completion::of(
            self.cookie,
            self.op.dto_op(),
            self.flags,
            status,
            transferred,
        )
    }
}

/// A DTO completion as the transport reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The cookie of the post.
    pub cookie: Cookie,
    /// Outcome.
    pub status: DtoStatus,
    /// Bytes transferred (meaningful on success).
    pub transferred_length: u32,
    /// Operation.
    pub op: DtoOp,
    /// Flags of the post (the core applies SUPPRESS and UNSIGNALLED).
    pub flags: CompletionFlags,
}

impl Completion {
    /// The completion of a post of `op` with `cookie` and `flags`: `status`, `transferred`
    /// bytes (for a provider that keeps a post's record rather than its request).
    #[inline(always)]
    pub fn of(
        cookie: Cookie,
        op: DtoOp,
        flags: CompletionFlags,
        status: DtoStatus,
        transferred: u32,
    ) -> Completion {
        Completion {
            cookie,
            status,
            transferred_length: transferred,
            op,
            flags,
        }
    }
}

/// A connection fact the transport observed on an endpoint. The core's state machine decides
/// what it means in the EP's current state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmFact {
    /// The connection is up. On the active side `private_data` is the acceptor's.
    Established {
        /// Private data of the peer's accept (empty on the passive side).
        private_data: Box<[u8]>,
    },
    /// The peer consumer rejected the request.
    PeerRejected {
        /// Private data of the peer's reject.
        private_data: Box<[u8]>,
    },
    /// Nobody listens on the qualifier, or the transport refused the request.
    NonPeerRejected,
    /// The remote address cannot be reached.
    Unreachable,
    /// The consumer's connect timeout expired.
    TimedOut,
    /// A passive accept could not complete.
    AcceptCompletionError,
    /// The connection was closed, by either side.
    Disconnected,
    /// The connection failed (transport error, peer died, protection error).
    Broken,
}

/// Upcalls of one endpoint.
///
/// Every request and receive a transport accepts ([`Transport::post`] returned `Ok`) is
/// reported exactly once: by [`EpUpcalls::completion`], or, for a request posted with
/// `DAT_COMPLETION_SUPPRESS_FLAG` that succeeded, either so or counted in
/// [`EpUpcalls::retired`]. The facade counts what is outstanding per endpoint
/// (`dat_ep_get_status`) from that rule.
pub trait EpUpcalls: Send + Sync {
    /// A DTO completed.
    fn completion(&self, c: Completion);
    /// A connection fact.
    fn cm(&self, fact: CmFact);
    /// `n` requests posted with `DAT_COMPLETION_SUPPRESS_FLAG` completed successfully and are
    /// not reported one by one (a transport that spares itself their upcalls counts them
    /// here instead). Reported no later than the completion of any request posted after
    /// them, so that once a consumer has seen that one, none of them counts as outstanding,
    /// unless [`Transport::retired_unreported`] counts them meanwhile.
    fn retired(&self, n: u32);
}

/// A connection request arriving at a service point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnRequest {
    /// Provider-allocated id, used later in `accept`/`reject`.
    pub cr: CrId,
    /// The requester's IA address.
    pub remote: IaAddress,
    /// The requester's private data.
    pub private_data: Box<[u8]>,
}

/// Upcalls of one service point.
pub trait SpUpcalls: Send + Sync {
    /// A connection request arrived.
    fn connection_request(&self, req: ConnRequest);
}

/// An asynchronous IA-level error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncFact {
    /// The device is gone (`DAT_ASYNC_ERROR_IA_CATASTROPHIC`).
    Catastrophic,
    /// The provider hit an internal error (`DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR`).
    InternalError,
    /// The transport's completion queue behind this DTO EVD overran and lost completions
    /// (`DAT_ASYNC_ERROR_EVD_OVERFLOW` on the EVD; a verbs CQ error).
    EvdOverflow(EvdId),
}

/// A fact about a shared receive queue, for its low watermark (`crate::srq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrqFact {
    /// Endpoints took this many buffers from the SRQ (software providers, through
    /// [`crate::srq::CountTakes`]).
    Taken(u32),
    /// The limit the transport watches itself ([`Transport::set_srq_lw`] returned true) was
    /// reached (verbs: `IBV_EVENT_SRQ_LIMIT_REACHED`).
    LimitReached,
}

/// IA-level upcalls.
pub trait IaUpcalls: Send + Sync {
    /// An asynchronous error.
    fn async_error(&self, fact: AsyncFact);

    /// A fact about a shared receive queue. The facade decides with
    /// [`crate::srq::LowWatermark`] whether the low-watermark event fires; the default
    /// ignores it (for upcall objects that have no SRQs to report to).
    fn srq(&self, _srq: SrqId, _fact: SrqFact) {}
}

/// A memory window bind the core has validated (`dat_rmr_bind` with a non-zero length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrBind {
    /// The window.
    pub rmr: RmrId,
    /// The endpoint the bind is posted on.
    pub ep: EpId,
    /// The LMR the window lies in.
    pub lmr: LmrId,
    /// Start of the window in the LMR's own address space.
    pub virtual_address: u64,
    /// Length in bytes (never 0).
    pub length: u64,
    /// Remote privileges of the window.
    pub privs: MemPriv,
    /// How the window is addressed remotely.
    pub va_type: VaType,
}

/// Attributes of a shared receive queue as the transport needs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqConfig {
    /// Protection zone of the SRQ.
    pub pz: PzId,
    /// Queue depth.
    pub max_recv_dtos: u32,
    /// Segments per receive.
    pub max_recv_iov: u32,
}

/// An endpoint's own post entry ([`Transport::ep_post`]). `Any`, so that the facade can call
/// a built-in provider's entry directly, without the virtual call (`dat`'s `direct` module).
pub trait EpPost: Send + Sync + std::any::Any {
    /// Posts `wr` on this endpoint, as [`Transport::post`] with its id does: the same checks
    /// and outcomes, also once the endpoint was freed ([`Transport::free_ep`]) or its IA
    /// closed, when `post` would no longer find it.
    ///
    /// # Errors
    /// As [`Transport::post`].
    fn post(&self, wr: WorkRequest) -> DatResult<()>;

    /// True if this endpoint keeps the memory of the requests it holds reachable without
    /// the requests' segments (verbs: the device reaches it through the MR the request
    /// names, which holds the buffer while it is registered), so that a post may lend it
    /// the request ([`EpPost::post_lent`]) and let the segments go when the call returns.
    /// Asked once, when the core takes the entry. The default: false.
    fn lends(&self) -> bool {
        false
    }

    /// Posts `wr`, lent for the call: as [`EpPost::post`], but the caller keeps the
    /// request and drops it (its memory references) when this returns. Called only where
    /// [`EpPost::lends`] is true. The default posts a copy (another reference to each
    /// segment's memory).
    ///
    /// # Errors
    /// As [`Transport::post`].
    fn post_lent(&self, wr: &WorkRequest) -> DatResult<()> {
        self.post(wr.clone())
    }
}

/// An EVD's own look at its completions ([`Transport::evd_poll`]). `Any`, as [`EpPost`].
pub trait EvdPoll: Send + Sync + std::any::Any {
    /// [`Transport::progress_evd`] of this EVD: the same looks and outcome, without the
    /// transport's lookup of the EVD's queue by its id. Called while the EVD lives (never
    /// after [`Transport::free_evd`]); harmless after the IA closed (nothing is delivered).
    fn progress(&self) -> bool;

    /// The consumer took events queued on this EVD (a dequeue that found one queued, so
    /// [`EvdPoll::progress`] was not called, or a wait that returns): it is driving the EVD
    /// all the same. A provider that leaves the completions of a polling consumer to its
    /// polls (verbs: no interrupt and no wake-up of its own thread per completion while the
    /// application polls) counts this as a poll; without it a consumer that keeps finding
    /// queued events (a window of completions taken one at a time) looked idle, and the
    /// provider's thread took every completion for it, woken once per completion. The
    /// default does nothing.
    fn active(&self) {}
}

/// One open IA of a provider. Every method is called only after the core validated the call.
pub trait Transport: Send + Sync {
    /// Adapter attributes (limits, address).
    fn ia_attr(&self) -> IaAttr;

    /// Provider attributes (capabilities).
    fn provider_attr(&self) -> ProviderAttr;

    /// Creates transport resources of a protection zone (verbs: a PD).
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_PROTECTION_DOMAIN`.
    fn create_pz(&self, _pz: PzId) -> DatResult<()> {
        Ok(())
    }

    /// Releases a protection zone.
    fn free_pz(&self, _pz: PzId) {}

    /// Registers memory with the transport. Returns `None` when the transport uses the keys of
    /// the shared [`MemTable`] (software providers), `Some` when the transport made its own
    /// (verbs MR keys).
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY_REGION` and transport-specific codes.
    fn register(
        &self,
        _lmr: LmrId,
        _pz: PzId,
        _buf: &Arc<Buffer>,
        _privs: MemPriv,
        _va_type: VaType,
    ) -> DatResult<Option<MemKeys>> {
        Ok(None)
    }

    /// Releases a registration.
    fn deregister(&self, _lmr: LmrId) {}

    /// Binds a memory window after the core validated the bind. Returns the window's new
    /// `rmr_context` when the transport makes windows itself (verbs memory windows), `None`
    /// when the keys of the shared [`MemTable`] serve (software providers, the default). The
    /// window's previous binding stops working either way.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY_REGION`; `DAT_INVALID_STATE` when the
    /// endpoint cannot carry the bind.
    fn bind_rmr(&self, _bind: &RmrBind) -> DatResult<Option<u32>> {
        Ok(None)
    }

    /// Unbinds a memory window (a zero-length bind, or `dat_rmr_free`): its key stops working.
    fn unbind_rmr(&self, _rmr: RmrId) {}

    /// Creates transport resources of an EVD (verbs: a CQ for DTO EVDs).
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_TEVD`.
    fn create_evd(&self, _evd: EvdId, _flags: EvdFlags, _qlen: u32) -> DatResult<()> {
        Ok(())
    }

    /// The EVD's own look at its completions, if the transport has one: the core asks once,
    /// after [`Transport::create_evd`] succeeded, and then calls it instead of
    /// [`Transport::progress_evd`] with the EVD's id (a dequeue's look then skips the
    /// transport's lookup of the EVD's queue). `None` (the default): `progress_evd`.
    fn evd_poll(&self, _evd: EvdId) -> Option<Arc<dyn EvdPoll>> {
        None
    }

    /// Releases an EVD.
    fn free_evd(&self, _evd: EvdId) {}

    /// Creates transport resources of an endpoint.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_TEP`.
    fn create_ep(&self, ep: EpId, cfg: &EpConfig, upcalls: Arc<dyn EpUpcalls>) -> DatResult<()>;

    /// Applies a modified configuration (only called in states where the core allows it).
    ///
    /// # Errors
    /// Transport-specific codes; the core keeps the old configuration on error.
    fn modify_ep(&self, _ep: EpId, _cfg: &EpConfig) -> DatResult<()> {
        Ok(())
    }

    /// Returns a disconnected endpoint to its initial state for reuse.
    ///
    /// # Errors
    /// `DAT_INTERNAL_ERROR` if the transport cannot recycle it.
    fn reset_ep(&self, ep: EpId) -> DatResult<()>;

    /// Destroys an endpoint (after an abrupt disconnect if it was connected) and drops its
    /// [`EpUpcalls`] object.
    fn free_ep(&self, ep: EpId);

    /// Starts an active connection; the outcome arrives as a [`CmFact`].
    ///
    /// # Errors
    /// `DAT_INVALID_ADDRESS` for an address of the wrong family or form, `DAT_INVALID_PARAMETER`
    /// for oversized private data, `DAT_INSUFFICIENT_RESOURCES`.
    fn connect(
        &self,
        ep: EpId,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()>;

    /// Starts listening. `qual == None` asks the transport to choose a free qualifier.
    ///
    /// # Errors
    /// `DAT_CONN_QUAL_IN_USE`, `DAT_CONN_QUAL_UNAVAILABLE`.
    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual>;

    /// Stops listening. Pending requests already delivered stay valid.
    fn unlisten(&self, sp: SpId);

    /// Accepts a request on `ep`; the passive `Established` arrives as a [`CmFact`].
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for oversized private data; `DAT_INVALID_ADDRESS` if the
    /// requester is gone.
    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()>;

    /// Rejects a request, sending `private_data` to the requester.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for oversized private data.
    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()>;

    /// Tears down a connection or aborts its establishment. The transport reports
    /// `Disconnected` when done (synchronously or later) and flushes outstanding work.
    ///
    /// # Errors
    /// Transport-specific codes.
    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()>;

    /// Posts a work request on a connected endpoint (or a receive on any endpoint).
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` when the queue is full.
    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()>;

    /// The endpoint's own post entry, if the transport has one: the core asks once, after
    /// [`Transport::create_ep`] succeeded, and then posts through it instead of
    /// [`Transport::post`], which saves the transport's lookup of the endpoint by its id on
    /// every post. `None` (the default): every post goes through [`Transport::post`].
    fn ep_post(&self, _ep: EpId) -> Option<Arc<dyn EpPost>> {
        None
    }

    /// Creates a shared receive queue.
    ///
    /// # Errors
    /// `DAT_MODEL_NOT_SUPPORTED` if SRQs are not supported.
    fn create_srq(&self, _srq: SrqId, _cfg: &SrqConfig) -> DatResult<()> {
        Err(DatError::new(
            crate::error::ErrorType::ModelNotSupported,
            crate::error::Subtype::NoSubtype,
        ))
    }

    /// Posts a receive on a shared receive queue.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` when the queue is full.
    fn srq_post_recv(&self, _srq: SrqId, _wr: WorkRequest) -> DatResult<()> {
        Err(DatError::NOT_IMPLEMENTED)
    }

    /// Sets the low watermark of a shared receive queue (`dat_srq_set_lw`, and at creation
    /// when the attributes carry one; 0 disarms). Returns true if the transport watches the
    /// limit itself and will report [`SrqFact::LimitReached`] once when fewer than
    /// `low_watermark` buffers remain (verbs: `ibv_modify_srq` with `IBV_SRQ_LIMIT`); false
    /// (the default) leaves the counting to the facade, from [`SrqFact::Taken`].
    ///
    /// # Errors
    /// Transport-specific codes (the facade keeps the old watermark).
    fn set_srq_lw(&self, _srq: SrqId, _low_watermark: u32) -> DatResult<bool> {
        Ok(false)
    }

    /// Destroys a shared receive queue.
    fn free_srq(&self, _srq: SrqId) {}

    /// Makes progress on the calling thread without blocking (read sockets, poll CQs) and
    /// reports what happened through upcalls. Returns true if anything happened. Called by
    /// waiters while they spin, so that the thread that waits also drives the transport.
    fn progress(&self) -> bool {
        false
    }

    /// Requests of `ep` posted with `DAT_COMPLETION_SUPPRESS_FLAG` that completed
    /// successfully and are not reported through [`EpUpcalls::retired`] yet: a transport may
    /// hold that report back (no upcall per message of a ping-pong) as long as it answers
    /// here. Asked by `dat_ep_get_status` only. The default is 0 (every one reported).
    fn retired_unreported(&self, _ep: EpId) -> u64 {
        0
    }

    /// [`Transport::progress`] for a poll of `evd` (`dat_evd_dequeue`): a transport with a
    /// completion queue per EVD may look at that one first and at the others less often (a
    /// completion the EVD's poll does not find this time waits in its own queue, which its
    /// own EVD's poll, a waiter or the transport's thread drains). Returns true if anything
    /// happened. The default is `progress`.
    fn progress_evd(&self, _evd: EvdId) -> bool {
        self.progress()
    }

    /// Sleeps on the calling thread in the transport's own primitive (an eventfd, a CQ
    /// channel) for at most `timeout`, waiting for events of `evd` (the EVD the caller waits
    /// on: a transport with a completion queue per EVD sleeps on that one only), then makes
    /// progress there, at least on what concerns `evd`: a waiter woken by the transport takes
    /// its completions with one wake-up instead of two (provider thread, then the facade's
    /// condition variable). Returns early on a [`Transport::unblock`] of `evd`, on activity,
    /// or spuriously; the caller looks at its queue again either way.
    ///
    /// Returns false at once if the transport has no such primitive (the default): the
    /// caller then sleeps its own way and is woken by the upcalls.
    fn block(&self, _evd: EvdId, _timeout: std::time::Duration) -> bool {
        false
    }

    /// Ends a [`Transport::block`] on `evd` in progress, or else the next one to start (one
    /// wake-up is kept; a transport may end other blocks too, which then return spuriously).
    /// The facade calls it when an event reaches an EVD whose waiter is blocked in the
    /// transport (from an upcall, a software event, a free). Never blocks.
    fn unblock(&self, _evd: EvdId) {}

    /// A consumer thread begins (`true`) or ends (`false`) a sleep that
    /// [`Transport::block`] does not cover (`dat_cno_wait`: it waits for any of several EVDs
    /// and drives no progress; an EVD wait on a condition variable, where `block` returned
    /// false). A transport that leaves its completion queues to the
    /// application's polls while the application polls, and looks only now and then
    /// whether it still does, must from now on deliver completions by itself soon after the
    /// application stops polling. Calls nest (several sleepers); the default does nothing.
    fn sleeping(&self, _begins: bool) {}

    /// Closes the IA: stops provider threads and releases every resource, including every
    /// upcall object it was given (the facade's endpoint links hold the endpoints' EVDs,
    /// which hold the transport: a link kept after `close` would keep them all alive).
    /// Called once.
    fn close(&self);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every post moves its request into the transport and out again: keep it small.
    #[test]
    fn a_work_request_fits_two_cache_lines() {
        assert!(
            std::mem::size_of::<WorkRequest>() <= 128,
            "{}",
            std::mem::size_of::<WorkRequest>()
        );
    }

    #[test]
    fn released_segments_give_their_memory_back_and_leave_nothing_to_drop() {
        use crate::mem::Segment;
        let buf = Arc::new(Buffer::from_vec(vec![0; 64]));
        let seg = |off| Segment::of_buffer(&buf, off, 8, 1);
        // One and two segments (inline) and three (a spilled list).
        for n in 1..=3 {
            let mut wr = WorkRequest {
                op: PostOp::Send,
                segs: (0..n).map(|i| seg(i * 8)).collect(),
                cookie: Cookie(n as u64),
                flags: CompletionFlags::empty(),
            };
            assert_eq!(Arc::strong_count(&buf), 1 + n, "{n} segments held");
            wr.release_segments();
            assert_eq!(Arc::strong_count(&buf), 1, "{n} segments given back");
            assert!(wr.segs.is_empty() && !wr.segs.spilled());
            assert_eq!(wr.cookie, Cookie(n as u64));
            std::mem::forget(wr);
        }
    }
}
