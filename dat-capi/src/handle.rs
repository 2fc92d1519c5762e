//! Handles given to C: validation, poisoning and the process-wide table.
//!
//! Every handle is the address of a heap [`HandleHeader`] whose first word is the
//! `DAT_PROVIDER *` (libdat2 dispatches through it) followed by a magic word naming the kind.
//! A handle is accepted only if its address is a live entry of the process-wide table and the
//! magic matches the kind the call expects, so a stale, foreign or garbage pointer is never
//! dereferenced: it yields `DAT_INVALID_HANDLE` with the caller's subtype. Freed headers are
//! poisoned (magic [`POISON`]) and kept in a bounded quarantine before their memory is
//! released, so an address is not reused by a new handle while a stale copy is likely around.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use dat::DatError;

use crate::abi::{DatHandle, DatProvider, handle_type};
use crate::state::IaState;

/// The magic of a freed handle.
pub const POISON: u32 = 0xDEAD_DA7A;

/// How many freed headers are kept (poisoned) before their memory is reused.
const QUARANTINE: usize = 1 << 16;

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
#[repr(C)]
pub struct HandleHeader {
    /// `DAT_PROVIDER *`: `DAT_HANDLE_TO_PROVIDER(handle)` reads this word.
    pub provider: *const DatProvider,
    /// [`Kind::magic`] while live, [`POISON`] once freed.
    pub magic: u32,
    /// The `DAT_HANDLE_TYPE`.
    pub kind: u32,
}

// SAFETY: the header is only written under the table lock (poisoning); the provider pointer
// names an immutable table.
unsafe impl Send for HandleHeader {}

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
    /// Outstanding posts (receive, request) of an EP, for `dat_ep_get_status`.
    pub outstanding: [u64; 2],
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

struct Table {
    live: HashMap<usize, (Box<HandleHeader>, Arc<Node>)>,
    quarantine: VecDeque<Box<HandleHeader>>,
}

static TABLE: Mutex<Option<Table>> = Mutex::new(None);

fn table() -> MutexGuard<'static, Option<Table>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

fn with_table<R>(f: impl FnOnce(&mut Table) -> R) -> R {
    let mut g = table();
    let t = g.get_or_insert_with(|| Table {
        live: HashMap::new(),
        quarantine: VecDeque::new(),
    });
    f(t)
}

/// Creates a handle for `obj` of `kind` in `ia`, served by `provider`.
pub fn insert(kind: Kind, obj: Obj, ia: Arc<IaState>, provider: *const DatProvider) -> Arc<Node> {
    let header = Box::new(HandleHeader {
        provider,
        magic: kind.magic(),
        kind: kind as u32,
    });
    let addr = &*header as *const HandleHeader as usize;
    let node = Arc::new(Node {
        kind,
        obj,
        ia,
        context: AtomicU64::new(0),
        extra: Mutex::new(Extra::default()),
        addr,
    });
    with_table(|t| t.live.insert(addr, (header, node.clone())));
    node
}

/// Looks up a live handle of one of `kinds`; anything else yields `bad`.
///
/// # Errors
/// `bad` (a `DAT_INVALID_HANDLE` code chosen by the caller) for NULL, misaligned, unknown,
/// freed or wrong-kind handles.
pub fn get(h: DatHandle, kinds: &[Kind], bad: DatError) -> Result<Arc<Node>, DatError> {
    let addr = h as usize;
    if addr == 0 || !addr.is_multiple_of(std::mem::align_of::<HandleHeader>()) {
        return Err(bad);
    }
    with_table(|t| match t.live.get(&addr) {
        Some((header, node)) if header.magic == node.kind.magic() && kinds.contains(&node.kind) => {
            Ok(node.clone())
        }
        _ => Err(bad),
    })
}

/// Looks up any live handle.
///
/// # Errors
/// `bad` as [`get`].
pub fn get_any(h: DatHandle, bad: DatError) -> Result<Arc<Node>, DatError> {
    const ALL: [Kind; 11] = [
        Kind::Cr,
        Kind::Ep,
        Kind::Evd,
        Kind::Ia,
        Kind::Lmr,
        Kind::Psp,
        Kind::Pz,
        Kind::Rmr,
        Kind::Rsp,
        Kind::Cno,
        Kind::Srq,
    ];
    get(h, &ALL, bad)
}

/// Frees the handle at `addr`: poisons it and moves it to the quarantine. Unknown addresses
/// are ignored.
pub fn remove(addr: usize) {
    let dropped = with_table(|t| {
        let (mut header, node) = t.live.remove(&addr)?;
        header.magic = POISON;
        t.quarantine.push_back(header);
        while t.quarantine.len() > QUARANTINE {
            t.quarantine.pop_front();
        }
        Some(node)
    });
    // The node (and the Rust object) is dropped outside the table lock.
    drop(dropped);
}

/// Frees every handle of the IA `ia` (including the IA's own).
pub fn remove_ia(ia: &Arc<IaState>) {
    let addrs: Vec<usize> = with_table(|t| {
        t.live
            .iter()
            .filter(|(_, (_, n))| Arc::ptr_eq(&n.ia, ia))
            .map(|(a, _)| *a)
            .collect()
    });
    for a in addrs {
        remove(a);
    }
}

/// Number of live handles (for tests and leak diagnostics).
pub fn live_count() -> usize {
    with_table(|t| t.live.len())
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
    with_table(|t| {
        t.live
            .values()
            .filter(|(_, n)| n.kind == kind)
            .map(|(_, n)| n.clone())
            .collect()
    })
}
