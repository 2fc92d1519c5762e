//! Handles given to C: validation, poisoning and the process-wide slot table.
//!
//! Every handle is the address of a [`HandleHeader`] whose first word is the `DAT_PROVIDER *`
//! (libdat2 dispatches through it) followed by a magic word naming the kind. The headers are
//! the first bytes of fixed-size slots in one address range reserved at first use, so
//! resolving a handle is arithmetic, not a hash: an address outside the range, not on a slot
//! boundary or beyond the slots handed out so far is rejected before anything is read; inside,
//! the slot's gate (`crate::gate`) says whether it holds a live object of the kind the call
//! expects, and keeps that object from being freed while the call uses it.
//! A stale, foreign or garbage pointer thus yields `DAT_INVALID_HANDLE` with the caller's
//! subtype and is never dereferenced. Freed slots are poisoned (magic [`POISON`]) and kept in
//! a FIFO quarantine of [`QUARANTINE`] slots before they are reused, so an address is not
//! handed out again while a stale copy is likely around.
//!
//! The lookup of a DTO or dequeue call takes no lock and allocates nothing: two loads, a
//! subtraction, a rotation and one comparison for the range (a rotation by the slot size's
//! bits turns a misaligned offset into a huge index, so one comparison with the slots handed
//! out checks both), then one `fetch_add` on the slot's gate, whose result also says which
//! kind the slot holds (or none), and one `fetch_sub` when the call is done ([`hold`]); other
//! calls take a reference to the node ([`get`]). Why the gate is as safe as a lock is in
//! `crate::gate`. Order: a caller inside a slot may take the allocator's lock (a dequeue that
//! creates an EP handle) and come into other slots; a free waits for the slot's callers to
//! leave while holding no lock.

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dat::{DatError, ErrorType, Subtype};

use crate::abi::{DatHandle, DatProvider, handle_type};
use crate::gate::{Gate, Inside};
use crate::state::IaState;

/// The magic of a freed handle.
pub const POISON: u32 = 0xDEAD_DA7A;

/// How many freed slots are kept (poisoned) before one is reused.
pub const QUARANTINE: usize = 1 << 16;

/// Slots reserved (address space only; memory is committed as slots are handed out).
const CAPACITY: usize = 1 << 22;

/// Slots committed at a time (64 KiB).
const GROW: usize = 1024;

/// The kinds of handles, with their `DAT_HANDLE_TYPE` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Kind {
    /// Connection request.
    Cr = handle_type::CR,
    /// Endpoint.
    Ep = handle_type::EP,
    /// Event dispatcher.
    Evd = handle_type::EVD,
    /// Interface adapter (the raw provider handle, not libdat2's index).
    Ia = handle_type::IA,
    /// Local memory region.
    Lmr = handle_type::LMR,
    /// Public service point.
    Psp = handle_type::PSP,
    /// Protection zone.
    Pz = handle_type::PZ,
    /// Remote memory region.
    Rmr = handle_type::RMR,
    /// Reserved service point.
    Rsp = handle_type::RSP,
    /// Consumer notification object.
    Cno = handle_type::CNO,
    /// Shared receive queue.
    Srq = handle_type::SRQ,
}

impl Kind {
    /// The magic word of a live handle of this kind.
    pub const fn magic(self) -> u32 {
        0xDA7A_0000 | self as u32
    }

    /// Its tag in a slot's gate (never 0, which means "no node").
    const fn tag(self) -> NonZeroU32 {
        match NonZeroU32::new(self as u32 + 1) {
            Some(t) => t,
            None => NonZeroU32::MIN,
        }
    }
}

/// What C sees behind a handle: the provider table first (ABI), then the magic.
///
/// The fields are atomics (same layout as the plain words) because libdat2 reads the
/// provider word without our locks.
#[repr(C)]
pub struct HandleHeader {
    /// `DAT_PROVIDER *`: `DAT_HANDLE_TO_PROVIDER(handle)` reads this word.
    pub provider: AtomicPtr<DatProvider>,
    /// [`Kind::magic`] while live, [`POISON`] once freed.
    pub magic: AtomicU32,
    /// The `DAT_HANDLE_TYPE`.
    pub kind: AtomicU32,
}

/// The Rust object behind a handle.
#[derive(Clone)]
pub enum Obj {
    /// An open IA.
    Ia(Arc<IaState>),
    /// A protection zone.
    Pz(dat::Pz),
    /// A local memory region, with the C description it was created from.
    Lmr(dat::Lmr, crate::calls::mem::LmrOrigin),
    /// A memory window.
    Rmr(dat::Rmr),
    /// An event dispatcher.
    Evd(dat::Evd),
    /// A consumer notification object.
    Cno(dat::Cno),
    /// An endpoint.
    Ep(dat::Ep),
    /// A public service point.
    Psp(dat::Sp),
    /// A reserved service point.
    Rsp(dat::Sp),
    /// A connection request.
    Cr(dat::Cr),
    /// A shared receive queue.
    Srq(dat::Srq),
}

/// Memory C holds pointers into (sockaddrs, private data, the CNO agent), owned by the node
/// so it stays valid while the handle lives.
#[derive(Default)]
pub struct Extra {
    /// Private data last handed out (connection events, CR query).
    pub private_data: Vec<Box<[u8]>>,
    /// Remote address storage (EP query, CR query).
    pub remote_addr: Option<Box<libc::sockaddr_storage>>,
    /// The CNO's proxy agent (instance data, function) as raw words.
    pub agent: (usize, usize),
    /// The RMR's current binding (triplet, privileges, VA type) for `dat_rmr_query`.
    pub rmr_binding: Option<(crate::abi::DatLmrTriplet, u32, u32)>,
}

/// One live handle.
pub struct Node {
    /// Its kind.
    pub kind: Kind,
    /// The object.
    pub obj: Obj,
    /// The IA it belongs to (for IAs, itself).
    pub ia: Arc<IaState>,
    /// `dat_set_consumer_context` value.
    pub context: AtomicU64,
    /// C-visible storage.
    pub extra: Mutex<Extra>,
    /// The handle's address.
    pub addr: usize,
}

/// One slot: the header C points at, its gate, then the live node.
#[repr(C, align(64))]
struct Slot {
    header: HandleHeader,
    gate: Gate,
    /// Written only while the gate is closed and nobody it let in is inside (by `insert`,
    /// before it opens the gate; by `remove`, after it closed it); read only by callers the
    /// gate let in with the node's tag.
    node: UnsafeCell<Option<Arc<Node>>>,
}

/// Slot bookkeeping, changed only when handles are created or freed.
struct Alloc {
    /// Freed slots, oldest first.
    free: VecDeque<usize>,
    /// Slots whose memory is committed.
    committed: usize,
    /// Live handles.
    live: usize,
    /// The reservation was tried (`base` is its address, or 0 when it failed).
    reserved: bool,
}

const SHIFT: u32 = std::mem::size_of::<Slot>().trailing_zeros();
const _: () = assert!(std::mem::size_of::<Slot>().is_power_of_two());
const _: () = assert!(std::mem::offset_of!(Slot, header) == 0);

/// Where the slots are: read by every lookup (one static, so one address to load).
struct Range {
    /// Slots initialized so far (indices below are valid `Slot`s); stays 0 without a range.
    used: AtomicUsize,
    /// The reserved range's address (0 until reserved, or if that failed); set once, before
    /// `used` first grows.
    base: AtomicUsize,
}

static RANGE: Range = Range {
    used: AtomicUsize::new(0),
    base: AtomicUsize::new(0),
};

/// The allocator (its lock is taken only to create and free handles).
static ALLOC: Mutex<Alloc> = Mutex::new(Alloc {
    free: VecDeque::new(),
    committed: 0,
    live: 0,
    reserved: false,
});

fn alloc() -> MutexGuard<'static, Alloc> {
    ALLOC.lock().unwrap_or_else(|p| p.into_inner())
}

/// Reserves the range (once, under the allocator's lock).
fn reserve(a: &mut Alloc) {
    if a.reserved {
        return;
    }
    a.reserved = true;
    let len = CAPACITY << SHIFT;
    // SAFETY: a fresh private anonymous mapping with no access; nothing else refers to it.
    // PROT_NONE keeps it out of the commit charge until slots are made writable.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        tracing::error!(
            len,
            "cannot reserve the handle table; no handle can be created"
        );
    } else {
        RANGE.base.store(p as usize, Ordering::Relaxed);
    }
}

/// Whether `addr` is the address of a slot handed out so far.
#[inline(always)]
fn is_slot(addr: usize) -> bool {
    // `used` first: once it is above 0, `base` (stored before it grew, with Release) is the
    // range's address; while it is 0 nothing passes, whatever `base` reads.
    let used = RANGE.used.load(Ordering::Acquire);
    let base = RANGE.base.load(Ordering::Relaxed);
    // The offset's low SHIFT bits (non-zero unless on a slot boundary) become the top bits:
    // the index is then above any count of slots, as is an offset below the range (wrapped).
    addr.wrapping_sub(base).rotate_right(SHIFT) < used
}

/// The slot at `addr`, which [`is_slot`] accepted.
///
/// # Safety
/// `is_slot(addr)` returned true (after which the slot stays valid: slots are never
/// unmapped).
#[inline(always)]
unsafe fn slot_at(addr: usize) -> &'static Slot {
    // SAFETY: `addr` is `base + idx << SHIFT` with `idx` below `used` (the caller's
    // contract), so the slot is committed and was initialized (the Release store of `used`
    // follows its initialization); slots are never unmapped.
    unsafe { &*(addr as *const Slot) }
}

/// The slot at `addr`, if it is the address of a slot handed out so far.
#[inline(always)]
fn at(addr: usize) -> Option<&'static Slot> {
    // SAFETY: checked by `is_slot`.
    is_slot(addr).then(|| unsafe { slot_at(addr) })
}

/// The slot `idx` (below `used`).
fn slot(idx: usize) -> &'static Slot {
    debug_assert!(idx < RANGE.used.load(Ordering::Acquire));
    // SAFETY: as in `at`: initialized and never unmapped.
    unsafe { &*((RANGE.base.load(Ordering::Relaxed) + (idx << SHIFT)) as *const Slot) }
}

/// A slot for a new handle: the oldest freed one once the quarantine is full, else a fresh
/// one, else (range exhausted) the oldest freed one.
fn take(a: &mut Alloc) -> Option<usize> {
    if a.free.len() > QUARANTINE {
        return a.free.pop_front();
    }
    reserve(a);
    let base = RANGE.base.load(Ordering::Relaxed);
    let used = RANGE.used.load(Ordering::Relaxed);
    if base == 0 || used == CAPACITY {
        return a.free.pop_front();
    }
    if used == a.committed {
        let addr = base + (used << SHIFT);
        // SAFETY: the range lies inside our reservation (used + GROW <= CAPACITY, since
        // CAPACITY is a multiple of GROW) and holds no Rust objects yet.
        let rc = unsafe {
            libc::mprotect(
                addr as *mut libc::c_void,
                GROW << SHIFT,
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        if rc != 0 {
            tracing::error!(slots = used, "cannot commit more handle slots");
            return a.free.pop_front();
        }
        a.committed += GROW;
    }
    let p = (base + (used << SHIFT)) as *mut Slot;
    // SAFETY: committed, writable, not yet initialized and not yet visible to `at`.
    unsafe {
        p.write(Slot {
            header: HandleHeader {
                provider: AtomicPtr::new(std::ptr::null_mut()),
                magic: AtomicU32::new(POISON),
                kind: AtomicU32::new(0),
            },
            gate: Gate::new(),
            node: UnsafeCell::new(None),
        });
    }
    RANGE.used.store(used + 1, Ordering::Release);
    Some(used)
}

impl Slot {
    /// Comes in through the gate; the node if the slot holds one of `kind`.
    #[inline(always)]
    fn enter(&self, kind: Option<Kind>) -> (Inside<'_>, Option<&Arc<Node>>) {
        let inside = self.gate.enter();
        let ok = match kind {
            Some(k) => inside.tag() == k.tag().get(),
            None => inside.tag() != 0,
        };
        if !ok {
            return (inside, None);
        }
        // SAFETY: the gate let us in with a node's tag: the node was written before the gate
        // opened and is not taken out before we leave (`inside` lives as long as the
        // reference); see `crate::gate`.
        let node = unsafe { &*self.node.get() };
        (inside, node.as_ref())
    }
}

/// Creates a handle for `obj` of `kind` in `ia`, served by `provider`.
///
/// # Errors
/// `DAT_INSUFFICIENT_RESOURCES` when every slot of the table is live (4 Mi handles) or the
/// table could not be reserved.
pub fn insert(
    kind: Kind,
    obj: Obj,
    ia: Arc<IaState>,
    provider: *const DatProvider,
) -> Result<Arc<Node>, DatError> {
    let idx = {
        let mut a = alloc();
        let idx = take(&mut a)
            .ok_or_else(|| DatError::new(ErrorType::InsufficientResources, Subtype::NoSubtype))?;
        a.live += 1;
        idx
    };
    // The slot is ours now (out of the free list), its gate closed.
    let s = slot(idx);
    let addr = s as *const Slot as usize;
    let node = Arc::new(Node {
        kind,
        obj,
        ia,
        context: AtomicU64::new(0),
        extra: Mutex::new(Extra::default()),
        addr,
    });
    s.header
        .provider
        .store(provider.cast_mut(), Ordering::Relaxed);
    s.header.kind.store(kind as u32, Ordering::Relaxed);
    s.header.magic.store(kind.magic(), Ordering::Release);
    // SAFETY: the gate is closed and the last close waited for its callers before the slot
    // went to the free list (whose lock we took since): nobody reads the node now.
    unsafe { *s.node.get() = Some(node.clone()) };
    s.gate.open(kind.tag());
    Ok(node)
}

/// Looks up a live handle of kind `kind`; anything else yields `bad`.
///
/// # Errors
/// `bad` (a `DAT_INVALID_HANDLE` code chosen by the caller) for NULL, misaligned, unknown,
/// freed or wrong-kind handles.
#[inline]
pub fn get(h: DatHandle, kind: Kind, bad: DatError) -> Result<Arc<Node>, DatError> {
    let Some(s) = at(h as usize) else {
        return Err(bad);
    };
    match s.enter(Some(kind)) {
        (_in, Some(n)) => Ok(n.clone()),
        _ => Err(bad),
    }
}

/// A live node used in place, inside its slot's gate: the node cannot be freed until this
/// is dropped (a free waits for it). No reference count is taken: the DTO and dequeue calls
/// use this.
pub struct Held<'a> {
    _inside: Inside<'a>,
    node: &'a Node,
}

impl std::ops::Deref for Held<'_> {
    type Target = Node;

    #[inline(always)]
    fn deref(&self) -> &Node {
        self.node
    }
}

/// The live node of kind `kind` behind `h`, used in place ([`Held`]); `None` for anything
/// else (NULL, misaligned, unknown, freed or wrong-kind handles). The holder must not free
/// `h` (the free would wait for it to let go).
#[inline(always)]
pub fn hold(h: DatHandle, kind: Kind) -> Option<Held<'static>> {
    // Not `at`: the compiler then tested for NULL too (an `Option<&Slot>` of `addr` is None
    // when `addr` is 0).
    if !is_slot(h as usize) {
        return None;
    }
    // SAFETY: `is_slot` accepted it.
    let s = unsafe { slot_at(h as usize) };
    match s.enter(Some(kind)) {
        (inside, Some(n)) => Some(Held {
            _inside: inside,
            node: n,
        }),
        _ => None,
    }
}

/// Looks up any live handle.
///
/// # Errors
/// `bad` as [`get`].
pub fn get_any(h: DatHandle, bad: DatError) -> Result<Arc<Node>, DatError> {
    let Some(s) = at(h as usize) else {
        return Err(bad);
    };
    match s.enter(None) {
        (_in, Some(n)) => Ok(n.clone()),
        _ => Err(bad),
    }
}

/// Frees the handle at `addr`: poisons it and moves its slot to the quarantine. Unknown or
/// already freed addresses are ignored.
pub fn remove(addr: usize) {
    let Some(s) = at(addr) else { return };
    // The gate first, with no lock held (the order of the module): a dequeue inside its
    // EVD's slot may create a handle, so a free waiting for that slot must hold nothing.
    if s.gate.close().is_none() {
        return;
    }
    // SAFETY: the gate is closed and every caller it let in has left: nobody reads the node.
    let Some(node) = (unsafe { (*s.node.get()).take() }) else {
        return;
    };
    s.header.magic.store(POISON, Ordering::Release);
    let mut a = alloc();
    a.free
        .push_back((addr - RANGE.base.load(Ordering::Relaxed)) >> SHIFT);
    a.live -= 1;
    drop(a);
    // The node (and the Rust object) is dropped outside the locks.
    drop(node);
}

/// Every live node for which `keep` holds.
fn live_where(mut keep: impl FnMut(&Node) -> bool) -> Vec<Arc<Node>> {
    let used = RANGE.used.load(Ordering::Acquire);
    (0..used)
        .filter_map(|i| {
            let s = slot(i);
            match s.enter(None) {
                (_in, Some(n)) if keep(n) => Some(n.clone()),
                _ => None,
            }
        })
        .collect()
}

/// Frees every handle of the IA `ia` (including the IA's own).
pub fn remove_ia(ia: &Arc<IaState>) {
    for n in live_where(|n| Arc::ptr_eq(&n.ia, ia)) {
        remove(n.addr);
    }
}

/// A compact, non-zero reference to the handle at `addr` (a handle handed out so far): its
/// offset in the table plus one slot. [`from_token`] turns it back with one addition.
pub fn token_of(addr: usize) -> Option<NonZeroU32> {
    at(addr)?;
    let off = (addr - RANGE.base.load(Ordering::Relaxed)) + (1 << SHIFT);
    NonZeroU32::new(u32::try_from(off).ok()?)
}

/// The handle address of a token from [`token_of`].
#[inline(always)]
pub fn from_token(token: u32) -> usize {
    (RANGE.base.load(Ordering::Relaxed) + token as usize).wrapping_sub(1 << SHIFT)
}

/// Number of live handles (for tests and leak diagnostics).
pub fn live_count() -> usize {
    alloc().live
}

impl Node {
    /// The handle as C sees it.
    pub fn handle(&self) -> DatHandle {
        self.addr as DatHandle
    }

    /// Reads the consumer context.
    pub fn context(&self) -> u64 {
        self.context.load(Ordering::Acquire)
    }

    /// Locks the C-visible storage.
    pub fn extra(&self) -> MutexGuard<'_, Extra> {
        self.extra.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Every live handle of `kind`.
pub fn nodes_of(kind: Kind) -> Vec<Arc<Node>> {
    live_where(|n| n.kind == kind)
}
