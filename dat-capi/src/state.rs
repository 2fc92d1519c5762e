//! Per-IA state of the C ABI: the open `dat::Ia`, the memory C holds pointers into (the IA
//! address, named attributes), and the map from the ids events name to handles.

use std::collections::HashMap;
use std::ffi::CString;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use dat::{DatError, DatResult, ErrorType, Subtype};

use crate::abi::{DatHandle, DatNamedAttr, DatProvider, DatProviderInfo};
use crate::handle::{self, Kind, Node, Obj};

/// The dat.conf key an IA was opened under (what `ia_query` must report back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// `dapl_version_major`.
    pub major: u32,
    /// `dapl_version_minor`.
    pub minor: u32,
    /// `is_thread_safe`.
    pub thread_safe: u32,
}

impl Key {
    /// The key of a registry entry.
    pub fn of(info: &DatProviderInfo) -> Key {
        Key {
            major: info.dapl_version_major,
            minor: info.dapl_version_minor,
            thread_safe: info.is_thread_safe,
        }
    }
}

/// The provider-specific attribute OFA uses for the link MTU in bytes (read by dtestsrq).
pub const IB_TRANSPORT_MTU: &str = "DAT_IB_TRANSPORT_MTU";

/// A list of named attributes with the strings they point at.
pub struct NamedAttrs {
    _strings: Vec<CString>,
    /// The C array.
    pub list: Vec<DatNamedAttr>,
}

// SAFETY: the raw pointers point into `_strings`, owned by the same value and never mutated.
unsafe impl Send for NamedAttrs {}
// SAFETY: as above; shared read-only.
unsafe impl Sync for NamedAttrs {}

impl NamedAttrs {
    /// Builds the C list (strings with interior NULs are cut at the NUL).
    pub fn new(attrs: &[dat::types::NamedAttr]) -> NamedAttrs {
        let cstr = |s: &str| {
            let s = s.split('\0').next().unwrap_or("");
            CString::new(s).unwrap_or_default()
        };
        let mut strings = Vec::new();
        let mut list = Vec::new();
        for a in attrs {
            let n = cstr(&a.name);
            let v = cstr(&a.value);
            list.push(DatNamedAttr {
                name: n.as_ptr(),
                value: v.as_ptr(),
            });
            strings.push(n);
            strings.push(v);
        }
        NamedAttrs {
            _strings: strings,
            list,
        }
    }

    /// `(count, pointer)` for C; the pointer stays valid while `self` lives.
    pub fn c(&self) -> (i32, *mut DatNamedAttr) {
        if self.list.is_empty() {
            return (0, std::ptr::null_mut());
        }
        (
            i32::try_from(self.list.len()).unwrap_or(i32::MAX),
            self.list.as_ptr().cast_mut(),
        )
    }
}

/// A provider table pointer that may cross threads (the table is immutable).
#[derive(Clone, Copy)]
pub struct TablePtr(pub *const DatProvider);
// SAFETY: the table is immutable and outlives every IA that points at it.
unsafe impl Send for TablePtr {}
// SAFETY: as above.
unsafe impl Sync for TablePtr {}

/// The hasher of [`IaState`]'s id map: ids are small integers the provider chose, not
/// consumer input, so a multiplicative hash (one multiply per word) replaces SipHash on the
/// event path.
#[derive(Clone, Copy, Default)]
pub struct IdHash;

impl std::hash::BuildHasher for IdHash {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

/// See [`IdHash`].
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// One open IA.
pub struct IaState {
    /// The IA.
    pub ia: dat::Ia,
    /// The table that serves it.
    pub provider: TablePtr,
    /// The key it was opened under.
    pub key: Key,
    /// `ia_address_ptr`: stable for the IA's life.
    pub addr: Box<libc::sockaddr_storage>,
    /// `transport_attr`.
    pub transport_attr: NamedAttrs,
    /// `vendor_attr`.
    pub vendor_attr: NamedAttrs,
    /// `provider_specific_attr` (with `DAT_IB_RDMA_READ`).
    pub provider_attr: NamedAttrs,
    ids: Mutex<HashMap<(Kind, u32), usize, IdHash>>,
    /// Endpoint handles by `EpId`, read without a lock: every DTO completion event names its
    /// endpoint ([`IaState::ep_handle`]), and the lookup in `ids` (a mutex and a hash probe,
    /// about 70 instructions) was half of `dat_evd_dequeue`'s event conversion. Entry
    /// `id % EP_CACHE` holds `token << 32 | id` (see [`handle::token_of`]; never 0), or 0;
    /// it is written only under `ids`' lock, from `ids`, and cleared there when the entry
    /// leaves or changes, so it never names a handle `ids` no longer has.
    ep_cache: [AtomicU64; EP_CACHE],
    raw: OnceLock<usize>,
}

/// Entries of [`IaState`]'s endpoint handle cache.
const EP_CACHE: usize = 16;

/// The cache slot of endpoint `id`.
fn ep_slot(id: u32) -> usize {
    id as usize % EP_CACHE
}

impl IaState {
    /// Wraps an open IA and creates its handle.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` when the handle table is full.
    pub fn create(ia: dat::Ia, provider: TablePtr, key: Key) -> DatResult<Arc<Node>> {
        let mut specific = Vec::new();
        let pattr = ia.provider_attr();
        specific.push(dat::types::NamedAttr::new(
            "DAT_IB_RDMA_READ",
            if pattr.rdma_read_supported {
                "TRUE"
            } else {
                "FALSE"
            },
        ));
        specific.extend(
            pattr
                .provider_specific_attr
                .iter()
                .filter(|a| a.name != "DAT_IB_RDMA_READ")
                .cloned(),
        );
        if !specific.iter().any(|a| a.name == IB_TRANSPORT_MTU) {
            // dtestsrq sizes its buffers by the link MTU OFA lists here; our transports have
            // none of their own, so they report IB's largest.
            specific.push(dat::types::NamedAttr::new(IB_TRANSPORT_MTU, "4096"));
        }
        let state = Arc::new(IaState {
            addr: Box::new(sockaddr_from(ia.attr().ia_address)),
            transport_attr: NamedAttrs::new(&ia.attr().transport_attr),
            vendor_attr: NamedAttrs::new(&ia.attr().vendor_attr),
            provider_attr: NamedAttrs::new(&specific),
            ia,
            provider,
            key,
            ids: Mutex::new(HashMap::default()),
            ep_cache: std::array::from_fn(|_| AtomicU64::new(0)),
            raw: OnceLock::new(),
        });
        let node = handle::insert(Kind::Ia, Obj::Ia(state.clone()), state.clone(), provider.0)?;
        let _ = state.raw.set(node.addr);
        Ok(node)
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<(Kind, u32), usize, IdHash>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Creates a handle for a child object with id `id` and records it.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` when the handle table is full.
    pub fn adopt(self: &Arc<Self>, kind: Kind, id: u32, obj: Obj) -> DatResult<Arc<Node>> {
        let node = handle::insert(kind, obj, self.clone(), self.provider.0)?;
        let mut ids = self.ids();
        ids.insert((kind, id), node.addr);
        if kind == Kind::Ep {
            self.forget_ep(id);
        }
        drop(ids);
        Ok(node)
    }

    /// Frees a child's handle.
    pub fn release(&self, node: &Node, id: u32) {
        {
            let mut ids = self.ids();
            if ids.get(&(node.kind, id)) == Some(&node.addr) {
                ids.remove(&(node.kind, id));
                if node.kind == Kind::Ep {
                    self.forget_ep(id);
                }
            }
        }
        handle::remove(node.addr);
    }

    /// Clears endpoint `id`'s cache entry (the caller holds `ids`' lock).
    fn forget_ep(&self, id: u32) {
        let e = &self.ep_cache[ep_slot(id)];
        if e.load(Ordering::Relaxed) as u32 == id {
            e.store(0, Ordering::Release);
        }
    }

    /// The handle of the child `(kind, id)`, or NULL.
    pub fn handle_of(&self, kind: Kind, id: u32) -> DatHandle {
        self.ids()
            .get(&(kind, id))
            .map_or(std::ptr::null_mut(), |a| *a as DatHandle)
    }

    /// The handle of endpoint `id`, creating one for provider-created endpoints. The cache's
    /// hit (every DTO event) is inlined into the caller; the rest is not.
    #[inline]
    pub fn ep_handle(self: &Arc<Self>, id: dat::types::EpId) -> DatHandle {
        match self.cached_ep_handle(id) {
            Some(h) => h,
            None => self.ep_handle_slow(id),
        }
    }

    /// The handle of endpoint `id` if the cache has it (the hit of [`IaState::ep_handle`],
    /// for the dequeue's inlined DTO event).
    #[inline(always)]
    pub fn cached_ep_handle(&self, id: dat::types::EpId) -> Option<DatHandle> {
        let e = self.ep_cache[ep_slot(id.0)].load(Ordering::Acquire);
        if e != 0 && e as u32 == id.0 {
            return Some(handle::from_token((e >> 32) as u32) as DatHandle);
        }
        None
    }

    /// [`IaState::ep_handle`] past the cache: the `ids` map (which refills the cache), else a
    /// new handle.
    #[inline(never)]
    fn ep_handle_slow(self: &Arc<Self>, id: dat::types::EpId) -> DatHandle {
        let slot = &self.ep_cache[ep_slot(id.0)];
        let h = {
            let ids = self.ids();
            let h = ids.get(&(Kind::Ep, id.0)).copied();
            if let Some(t) = h.and_then(handle::token_of) {
                slot.store(
                    u64::from(t.get()) << 32 | u64::from(id.0),
                    Ordering::Release,
                );
            }
            h.map_or(std::ptr::null_mut(), |a| a as DatHandle)
        };
        if !h.is_null() {
            return h;
        }
        match self.ia.ep(id) {
            Some(ep) => self
                .adopt(Kind::Ep, id.0, Obj::Ep(ep))
                .map_or(std::ptr::null_mut(), |n| n.handle()),
            None => std::ptr::null_mut(),
        }
    }

    /// The handle of connection request `id`, creating it on first sight.
    pub fn cr_handle(self: &Arc<Self>, id: dat::types::CrId) -> DatHandle {
        let h = self.handle_of(Kind::Cr, id.0);
        if !h.is_null() {
            return h;
        }
        match self.ia.cr(id) {
            Some(cr) => self
                .adopt(Kind::Cr, id.0, Obj::Cr(cr))
                .map_or(std::ptr::null_mut(), |n| n.handle()),
            None => std::ptr::null_mut(),
        }
    }

    /// The handle of a service point (PSP or RSP).
    pub fn sp_handle(&self, id: dat::types::SpId) -> DatHandle {
        let h = self.handle_of(Kind::Psp, id.0);
        if h.is_null() {
            self.handle_of(Kind::Rsp, id.0)
        } else {
            h
        }
    }

    /// The raw IA handle (what the provider table's IA calls receive).
    pub fn raw(&self) -> DatHandle {
        self.raw
            .get()
            .map_or(std::ptr::null_mut(), |a| *a as DatHandle)
    }

    /// The IA handle as the consumer knows it (libdat2's index, through
    /// `dats_get_ia_handle`; the raw handle when libdat2 is not loaded).
    pub fn consumer_handle(&self) -> DatHandle {
        crate::registry::consumer_ia_handle(self.raw())
    }

    /// All child handles (for closing the IA).
    pub fn children(&self) -> Vec<usize> {
        self.ids().values().copied().collect()
    }
}

/// A sockaddr for `a` (`AF_INET` or `AF_INET6`).
pub fn sockaddr_from(a: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&raw mut ss).cast::<libc::sockaddr_in>(), sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&raw mut ss).cast::<libc::sockaddr_in6>(), sin6) };
        }
    }
    ss
}

/// Reads a consumer's sockaddr (argument `n`).
///
/// # Safety
/// `p` must be NULL or point at a readable sockaddr of the family it names.
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for NULL;
/// `DAT_INVALID_ADDRESS|DAT_INVALID_ADDRESS_UNSUPPORTED` for a family other than IPv4/IPv6.
pub unsafe fn sockaddr_to(p: *const libc::sockaddr, n: u16) -> DatResult<SocketAddr> {
    if p.is_null() {
        return Err(DatError::invalid_arg(n));
    }
    // SAFETY: non-NULL; every sockaddr starts with the family.
    let family = i32::from(unsafe { (*p).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in; read unaligned to be safe.
            let sin = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in>()) };
            Ok(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))),
                u16::from_be(sin.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let sin6 = unsafe { std::ptr::read_unaligned(p.cast::<libc::sockaddr_in6>()) };
            Ok(SocketAddr::new(
                IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)),
                u16::from_be(sin6.sin6_port),
            ))
        }
        _ => Err(DatError::new(
            ErrorType::InvalidAddress,
            Subtype::InvalidAddressUnsupported,
        )),
    }
}
