//! RAII wrappers around libibverbs objects and the discovery of a device.
//!
//! Teardown order is fixed by ownership: a [`Pd`] holds an `Arc` of its [`Context`], so the
//! context (`ibv_close_device`) is released only after every PD allocated on it
//! (`ibv_dealloc_pd`); the IA drops its PDs explicitly in `close` before its context.

use std::ffi::CStr;
use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

use rdma_sys as sys;

/// Why no device could be opened.
#[derive(Debug)]
pub enum FindError {
    /// `ibv_get_device_list` failed: no kernel support (ENOSYS) or no permission.
    List(io::Error),
    /// The list is empty.
    NoDevice,
    /// No device of that name; the names present.
    NotFound(Vec<String>),
    /// `ibv_open_device` failed.
    Open(String, io::Error),
}

/// The device list (`ibv_get_device_list`), freed on drop.
struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<DeviceList, io::Error> {
        let mut n: libc::c_int = 0;
        // SAFETY: ibv_get_device_list writes the count to `n` and returns a NULL-terminated
        // array owned by us until ibv_free_device_list (in Drop), or NULL with errno set.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        match NonNull::new(list) {
            Some(list) => Ok(DeviceList {
                list,
                len: usize::try_from(n).unwrap_or(0),
            }),
            None => Err(io::Error::last_os_error()),
        }
    }

    fn devices(&self) -> impl Iterator<Item = (*mut sys::ibv_device, String)> + '_ {
        (0..self.len).filter_map(move |i| {
            // SAFETY: `i < len`, the array holds `len` valid device pointers while the list
            // lives.
            let dev = unsafe { *self.list.as_ptr().add(i) };
            if dev.is_null() {
                return None;
            }
            // SAFETY: `dev` is a device of the live list; the name is a NUL-terminated string
            // owned by the device.
            let name = unsafe { sys::ibv_get_device_name(dev) };
            if name.is_null() {
                return None;
            }
            // SAFETY: non-null NUL-terminated string, copied before the list is freed.
            let name = unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned();
            Some((dev, name))
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once; contexts opened
        // from its devices stay valid after it is freed (libibverbs keeps the devices).
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

/// The names of the verbs devices present.
///
/// # Errors
/// The errno of `ibv_get_device_list` (ENOSYS: no kernel RDMA support).
pub fn device_names() -> Result<Vec<String>, io::Error> {
    Ok(DeviceList::get()?.devices().map(|(_, n)| n).collect())
}

/// librdmacm's device list (`rdma_get_devices`), released on drop. The contexts in it are
/// librdmacm's own: an `rdma_cm_id` bound to the device uses exactly these, so PDs, CQs and
/// QPs created on them can be attached to the id (`rdma_create_qp` requires it).
#[derive(Debug)]
struct CmDevices {
    list: NonNull<*mut sys::ibv_context>,
}

// SAFETY: the list is only read (its entries are librdmacm's thread-safe contexts) and freed
// once, in Drop.
unsafe impl Send for CmDevices {}
// SAFETY: as for Send.
unsafe impl Sync for CmDevices {}

impl Drop for CmDevices {
    fn drop(&mut self) {
        // SAFETY: the list came from rdma_get_devices and is freed once; every Context that
        // borrows one of its entries holds an Arc of this list.
        unsafe { sys::rdma_free_devices(self.list.as_ptr()) };
        // librdmacm lets go of a device that was removed (closes its context, which the kernel
        // waits for to finish the removal) only when it next compares its list with the
        // system's: have it do so now, so a closed IA leaves nothing of a removed device open.
        let mut n: libc::c_int = 0;
        // SAFETY: as in `Context::rdma_cm`; the fresh list is freed at once.
        let list = unsafe { sys::rdma_get_devices(&mut n) };
        if !list.is_null() {
            // SAFETY: the list just returned, freed once.
            unsafe { sys::rdma_free_devices(list) };
        }
    }
}

/// Who closes a [`Context`].
#[derive(Debug)]
enum Owner {
    /// Ours, from `ibv_open_device`: closed on drop.
    Opened,
    /// librdmacm's: released with its list.
    Cm(#[allow(dead_code)] Arc<CmDevices>),
}

/// An open device context, released on drop (`ibv_close_device` for one we opened; librdmacm's
/// device list for one of librdmacm's).
#[derive(Debug)]
pub struct Context {
    ctx: NonNull<sys::ibv_context>,
    name: String,
    owner: Owner,
}

// SAFETY: libibverbs contexts are thread-safe: every verb on a context may be called from any
// thread, and the pointer is only closed in Drop, when no other reference exists.
unsafe impl Send for Context {}
// SAFETY: as for Send; shared use only calls thread-safe verbs (query, alloc_pd).
unsafe impl Sync for Context {}

impl Context {
    /// Opens the device called `name`, or the first device when `name` is `None`.
    ///
    /// # Errors
    /// [`FindError`] saying which step failed.
    pub fn open(name: Option<&str>) -> Result<Context, FindError> {
        let list = DeviceList::get().map_err(FindError::List)?;
        let devices: Vec<_> = list.devices().collect();
        if devices.is_empty() {
            return Err(FindError::NoDevice);
        }
        let (dev, dev_name) = match name {
            None => devices[0].clone(),
            Some(want) => match devices.iter().find(|(_, n)| n == want) {
                Some(d) => d.clone(),
                None => {
                    return Err(FindError::NotFound(
                        devices.into_iter().map(|(_, n)| n).collect(),
                    ));
                }
            },
        };
        // SAFETY: `dev` belongs to the live list; the returned context is owned by the
        // Context below and closed once in its Drop.
        let ctx = unsafe { sys::ibv_open_device(dev) };
        let ctx = NonNull::new(ctx)
            .ok_or_else(|| FindError::Open(dev_name.clone(), io::Error::last_os_error()))?;
        drop(list);
        Ok(Context {
            ctx,
            name: dev_name,
            owner: Owner::Opened,
        })
    }

    /// librdmacm's context of the device called `name` (`rdma_get_devices`): the one its
    /// `rdma_cm_id`s use.
    ///
    /// # Errors
    /// The errno of `rdma_get_devices` (ENODEV: no `/dev/infiniband/rdma_cm`), ENODEV when
    /// librdmacm does not know the device.
    pub fn rdma_cm(name: &str) -> io::Result<Context> {
        let mut n: libc::c_int = 0;
        // SAFETY: rdma_get_devices writes the count and returns a NULL-terminated array owned
        // by us until rdma_free_devices (CmDevices' Drop), or NULL with errno set.
        let list = unsafe { sys::rdma_get_devices(&mut n) };
        let list = CmDevices {
            list: NonNull::new(list).ok_or_else(io::Error::last_os_error)?,
        };
        let list = Arc::new(list);
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: `i < n`, the array holds `n` contexts while the list lives.
            let ctx = unsafe { *list.list.as_ptr().add(i) };
            let Some(ctx) = NonNull::new(ctx) else {
                continue;
            };
            // SAFETY: a live context of the list; its device and name outlive the list.
            let dev_name = unsafe { sys::ibv_get_device_name((*ctx.as_ptr()).device) };
            if dev_name.is_null() {
                continue;
            }
            // SAFETY: non-null NUL-terminated string, compared at once.
            if unsafe { CStr::from_ptr(dev_name) }.to_bytes() == name.as_bytes() {
                return Ok(Context {
                    ctx,
                    name: name.to_owned(),
                    owner: Owner::Cm(list),
                });
            }
        }
        Err(io::Error::from_raw_os_error(libc::ENODEV))
    }

    /// The raw context, for the wrappers of this crate.
    pub fn as_ptr(&self) -> *mut sys::ibv_context {
        self.ctx.as_ptr()
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ibv_query_device`.
    ///
    /// # Errors
    /// The errno of the query.
    pub fn query_device(&self) -> io::Result<sys::ibv_device_attr> {
        // SAFETY: ibv_device_attr is plain data (integers and a char array); all-zero is valid.
        let mut attr: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; `attr` is a valid out-pointer for the call.
        let rc = unsafe { sys::ibv_query_device(self.ctx.as_ptr(), &mut attr) };
        errno_result(rc).map(|()| attr)
    }

    /// `ibv_query_port`.
    ///
    /// # Errors
    /// The errno of the query (EINVAL for a port the device does not have).
    pub fn query_port(&self, port: u8) -> io::Result<sys::ibv_port_attr> {
        // SAFETY: ibv_port_attr is plain data; all-zero is valid.
        let mut attr: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; `attr` is a valid out-pointer of the full size, which
        // ___ibv_query_port passes to the provider (the inline ibv_query_port of verbs.h).
        let rc = unsafe { sys::___ibv_query_port(self.ctx.as_ptr(), port, &mut attr) };
        errno_result(rc).map(|()| attr)
    }

    /// `ibv_query_gid`: the 16 bytes of GID `index` of `port`.
    ///
    /// # Errors
    /// The errno of the query (index beyond the table).
    pub fn query_gid(&self, port: u8, index: u16) -> io::Result<[u8; 16]> {
        // SAFETY: ibv_gid is a union of byte arrays and integers; all-zero is valid.
        let mut gid: sys::ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: the context is open; `gid` is a valid out-pointer.
        let rc = unsafe {
            sys::ibv_query_gid(self.ctx.as_ptr(), port, libc::c_int::from(index), &mut gid)
        };
        errno_result(rc)?;
        // SAFETY: every bit pattern of the union is a valid byte array.
        Ok(unsafe { gid.raw })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if !matches!(self.owner, Owner::Opened) {
            return;
        }
        // SAFETY: the context was opened by ibv_open_device and is closed once; every PD holds
        // an Arc of this Context, so none is left when Drop runs.
        let rc = unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.name, rc, "ibv_close_device failed");
        }
    }
}

/// A protection domain (`ibv_alloc_pd`), deallocated on drop, before its context.
#[derive(Debug)]
pub struct Pd {
    pd: NonNull<sys::ibv_pd>,
    ctx: Arc<Context>,
}

// SAFETY: PDs are used through thread-safe verbs only and freed once, in Drop.
unsafe impl Send for Pd {}
// SAFETY: as for Send.
unsafe impl Sync for Pd {}

impl Pd {
    /// Allocates a PD on `ctx`.
    ///
    /// # Errors
    /// The errno of `ibv_alloc_pd`.
    pub fn alloc(ctx: &Arc<Context>) -> io::Result<Pd> {
        // SAFETY: the context is open (the Arc keeps it so); the PD is freed in Drop.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(io::Error::last_os_error)?;
        Ok(Pd {
            pd,
            ctx: ctx.clone(),
        })
    }

    /// The raw PD.
    pub fn as_ptr(&self) -> *mut sys::ibv_pd {
        self.pd.as_ptr()
    }

    /// The context the PD lives on.
    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd, freed once; `self.ctx` keeps the context open
        // until after this call.
        let rc = unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
        if rc != 0 {
            tracing::warn!(device = %self.ctx.name, rc, "ibv_dealloc_pd failed (resources still use it)");
        }
    }
}

#[inline]
pub fn errno_result(rc: libc::c_int) -> io::Result<()> {
    match rc {
        0 => Ok(()),
        // Verbs return a positive errno; some return -1 with errno set.
        rc if rc > 0 => Err(io::Error::from_raw_os_error(rc)),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The device and port an IP address belongs to, through rdma_cm (`rdma_bind_addr`).
///
/// # Errors
/// The errno of `rdma_create_id` (ENODEV: no `/dev/infiniband/rdma_cm`) or of
/// `rdma_bind_addr` (EADDRNOTAVAIL: not a local address, ENODEV: no RDMA device on it), and
/// ENODEV when the bound id has no device.
pub fn resolve_address(ip: std::net::IpAddr) -> Result<(String, u8), (&'static str, io::Error)> {
    let mut id: *mut sys::rdma_cm_id = std::ptr::null_mut();
    // SAFETY: a NULL channel makes the id synchronous; `id` receives the new id, destroyed
    // below on every path.
    let rc = unsafe {
        sys::rdma_create_id(
            std::ptr::null_mut(),
            &mut id,
            std::ptr::null_mut(),
            sys::rdma_port_space::RDMA_PS_TCP,
        )
    };
    if rc != 0 || id.is_null() {
        return Err(("rdma_create_id", io::Error::last_os_error()));
    }
    let result = bind_and_read(id, ip);
    // SAFETY: `id` was created above, has no QP and is destroyed once.
    unsafe { sys::rdma_destroy_id(id) };
    result
}

fn bind_and_read(
    id: *mut sys::rdma_cm_id,
    ip: std::net::IpAddr,
) -> Result<(String, u8), (&'static str, io::Error)> {
    // SAFETY: sockaddr_storage is plain data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match ip {
        std::net::IpAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_addr.s_addr = u32::from(v4).to_be();
        }
        std::net::IpAddr::V6(v6) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_addr.s6_addr = v6.octets();
        }
    }
    // SAFETY: `id` is a live id; the address is a valid sockaddr of its family, read during
    // the call only.
    let rc = unsafe { sys::rdma_bind_addr(id, &mut ss as *mut _ as *mut libc::sockaddr) };
    if rc != 0 {
        return Err(("rdma_bind_addr", io::Error::last_os_error()));
    }
    // SAFETY: `id` is live; after a successful bind to a specific address its `verbs` is the
    // device's context (owned by librdmacm) or NULL.
    let (verbs, port) = unsafe { ((*id).verbs, (*id).port_num) };
    if verbs.is_null() {
        return Err(("rdma_bind_addr", io::Error::from_raw_os_error(libc::ENODEV)));
    }
    // SAFETY: `verbs` is a live context of librdmacm; its device and name outlive the id.
    let name = unsafe { sys::ibv_get_device_name((*verbs).device) };
    if name.is_null() {
        return Err((
            "ibv_get_device_name",
            io::Error::from_raw_os_error(libc::ENODEV),
        ));
    }
    // SAFETY: non-null NUL-terminated string, copied at once.
    let name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    Ok((name, port))
}
