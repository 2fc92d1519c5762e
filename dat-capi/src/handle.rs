//! Handles given to C: validation, poisoning and the process-wide slot table.
//!
//! Every handle is the address of a [`HandleHeader`] whose first word is the `DAT_PROVIDER *`
//! (libdat2 dispatches through it) followed by a magic word naming the kind. The headers are
//! the first bytes of fixed-size slots in one address range reserved at first use, so
//! resolving a handle is arithmetic, not a hash: an address outside the range, not on a slot
//! boundary or beyond the slots handed out so far is rejected before anything is read; inside,
//! the slot's own lock holds the live object, whose kind must match what the call expects.
//! A stale, foreign or garbage pointer thus yields `DAT_INVALID_HANDLE` with the caller's
//! subtype and is never dereferenced. Freed slots are poisoned (magic [`POISON`]) and kept in
//! a FIFO quarantine of [`QUARANTINE`] slots before they are reused, so an address is not
//! handed out again while a stale copy is likely around.
//!
//! The lookup of a DTO or dequeue call takes no global lock and allocates nothing: a range
//! check, a shift and an uncontended read lock of the slot, held while the call runs
//! ([`with`]); other calls take a reference to the node ([`get`]). Lock order: a slot's lock
//! may be held while the allocator's is taken (a dequeue that creates an EP handle), never
//! the other way round.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use dat::{DatError, ErrorType, Subtype};

use crate::abi::{DatHandle, DatProvider, handle_type};
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

/// One slot: the header C points at, then the live node.
#[repr(C, align(64))]
struct Slot {
    header: HandleHeader,
    node: RwLock<Option<Arc<Node>>>,
}

/// Slot bookkeeping, changed only when handles are created or freed.
struct Alloc {
    /// Freed slots, oldest first.
    free: VecDeque<usize>,
    /// Slots whose memory is committed.
    committed: usize,
    /// Live handles.
    live: usize,
}

/// The reserved range.
struct Slots {
    base: usize,
    /// Slots initialized so far (indices below are valid `Slot`s).
    used: AtomicUsize,
    alloc: Mutex<Alloc>,
}

const SHIFT: u32 = std::mem::size_of::<Slot>().trailing_zeros();
const _: () = assert!(std::mem::size_of::<Slot>().is_power_of_two());
const _: () = assert!(std::mem::offset_of!(Slot, header) == 0);

static SLOTS: OnceLock<Slots> = OnceLock::new();

fn slots() -> &'static Slots {
    SLOTS.get_or_init(|| {
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
        let base = if p == libc::MAP_FAILED {
            tracing::error!(
                len,
                "cannot reserve the handle table; no handle can be created"
            );
            0
        } else {
            p as usize
        };
        Slots {
            base,
            used: AtomicUsize::new(0),
            alloc: Mutex::new(Alloc {
                free: VecDeque::new(),
                committed: 0,
                live: 0,
            }),
        }
    })
}

impl Slots {
    fn alloc(&self) -> MutexGuard<'_, Alloc> {
        self.alloc.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The slot at `addr`, if it is the address of a slot handed out so far.
    fn at(&self, addr: usize) -> Option<&Slot> {
        let off = addr.wrapping_sub(self.base);
        let idx = off >> SHIFT;
        if self.base == 0
            || off & ((1 << SHIFT) - 1) != 0
            || idx >= self.used.load(Ordering::Acquire)
        {
            return None;
        }
        // SAFETY: `idx` is below `used`, so the slot is committed and was initialized (the
        // Release store of `used` follows its initialization); slots are never unmapped.
        Some(unsafe { &*(addr as *const Slot) })
    }

    /// The slot `idx` (below `used`).
    fn slot(&self, idx: usize) -> &Slot {
        debug_assert!(idx < self.used.load(Ordering::Acquire));
        // SAFETY: as in `at`: initialized and never unmapped.
        unsafe { &*((self.base + (idx << SHIFT)) as *const Slot) }
    }

    /// A slot for a new handle: the oldest freed one once the quarantine is full, else a
    /// fresh one, else (range exhausted) the oldest freed one.
    fn take(&self, a: &mut Alloc) -> Option<usize> {
        if a.free.len() > QUARANTINE {
            return a.free.pop_front();
        }
        let used = self.used.load(Ordering::Relaxed);
        if self.base == 0 || used == CAPACITY {
            return a.free.pop_front();
        }
        if used == a.committed {
            let addr = self.base + (used << SHIFT);
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
        let p = (self.base + (used << SHIFT)) as *mut Slot;
        // SAFETY: committed, writable, not yet initialized and not yet visible to `at`.
        unsafe {
            p.write(Slot {
                header: HandleHeader {
                    provider: AtomicPtr::new(std::ptr::null_mut()),
                    magic: AtomicU32::new(POISON),
                    kind: AtomicU32::new(0),
                },
                node: RwLock::new(None),
            });
        }
        self.used.store(used + 1, Ordering::Release);
        Some(used)
    }
}

fn read(s: &Slot) -> std::sync::RwLockReadGuard<'_, Option<Arc<Node>>> {
    s.node.read().unwrap_or_else(|p| p.into_inner())
}

fn write(s: &Slot) -> std::sync::RwLockWriteGuard<'_, Option<Arc<Node>>> {
    s.node.write().unwrap_or_else(|p| p.into_inner())
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
    let t = slots();
    let idx = {
        let mut a = t.alloc();
        let idx = t
            .take(&mut a)
            .ok_or_else(|| DatError::new(ErrorType::InsufficientResources, Subtype::NoSubtype))?;
        a.live += 1;
        idx
    };
    // The slot is ours now (out of the free list); its lock is taken without the
    // allocator's (the lock order of the module).
    let s = t.slot(idx);
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
    *write(s) = Some(node.clone());
    Ok(node)
}

/// Looks up a live handle of kind `kind`; anything else yields `bad`.
///
/// # Errors
/// `bad` (a `DAT_INVALID_HANDLE` code chosen by the caller) for NULL, misaligned, unknown,
/// freed or wrong-kind handles.
#[inline]
pub fn get(h: DatHandle, kind: Kind, bad: DatError) -> Result<Arc<Node>, DatError> {
    match slots().at(h as usize).map(read).as_deref() {
        Some(Some(n)) if n.kind == kind => Ok(n.clone()),
        _ => Err(bad),
    }
}

/// Runs `f` on the live node of kind `kind` behind `h` while holding the slot's read lock
/// (no reference count taken: the DTO and dequeue calls use this). `f` must not free `h`
/// (the free would wait for this very lock).
///
/// # Errors
/// `bad` as [`get`], or what `f` returns.
#[inline]
pub fn with<R>(
    h: DatHandle,
    kind: Kind,
    bad: DatError,
    f: impl FnOnce(&Node) -> Result<R, DatError>,
) -> Result<R, DatError> {
    match slots().at(h as usize).map(read).as_deref() {
        Some(Some(n)) if n.kind == kind => f(n),
        _ => Err(bad),
    }
}

/// Looks up any live handle.
///
/// # Errors
/// `bad` as [`get`].
pub fn get_any(h: DatHandle, bad: DatError) -> Result<Arc<Node>, DatError> {
    match slots().at(h as usize).map(read).as_deref() {
        Some(Some(n)) => Ok(n.clone()),
        _ => Err(bad),
    }
}

/// Frees the handle at `addr`: poisons it and moves its slot to the quarantine. Unknown or
/// already freed addresses are ignored.
pub fn remove(addr: usize) {
    let t = slots();
    let Some(s) = t.at(addr) else { return };
    // The slot's lock first, then the allocator's (the lock order of the module): a dequeue
    // holds its EVD's read lock while it may create a handle, so a free waiting for that
    // slot must hold nothing else.
    let Some(node) = write(s).take() else { return };
    s.header.magic.store(POISON, Ordering::Release);
    let mut a = t.alloc();
    a.free.push_back((addr - t.base) >> SHIFT);
    a.live -= 1;
    drop(a);
    // The node (and the Rust object) is dropped outside the locks.
    drop(node);
}

/// Every live node for which `keep` holds.
fn live_where(mut keep: impl FnMut(&Node) -> bool) -> Vec<Arc<Node>> {
    let t = slots();
    let used = t.used.load(Ordering::Acquire);
    (0..used)
        .filter_map(|i| read(t.slot(i)).as_ref().filter(|n| keep(n)).cloned())
        .collect()
}

/// Frees every handle of the IA `ia` (including the IA's own).
pub fn remove_ia(ia: &Arc<IaState>) {
    for n in live_where(|n| Arc::ptr_eq(&n.ia, ia)) {
        remove(n.addr);
    }
}

/// The slot number of the handle at `addr` (a handle handed out so far), for a compact
/// reference to it ([`at_index`] turns it back).
pub fn index_of(addr: usize) -> Option<u32> {
    let t = slots();
    t.at(addr)?;
    u32::try_from((addr - t.base) >> SHIFT).ok()
}

/// The handle address of slot number `idx` (from [`index_of`]).
#[inline]
pub fn at_index(idx: u32) -> usize {
    slots().base + ((idx as usize) << SHIFT)
}

/// Number of live handles (for tests and leak diagnostics).
pub fn live_count() -> usize {
    slots().alloc().live
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
