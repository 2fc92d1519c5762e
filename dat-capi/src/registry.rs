//! The provider side of libdat2's plug-in ABI: `dat_provider_init`/`dat_provider_fini`, one
//! `DAT_PROVIDER` table per registered IA name, and the libdat2 functions we call back
//! (resolved with `dlsym(RTLD_DEFAULT)`, so the library links without libdat2 and works when
//! loaded by a consumer that links it).

use std::ffi::{CStr, CString, c_char};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::abi::{DatHandle, DatProvider, DatProviderInfo, DatReturn};
use crate::handle;
use crate::state::Key;

/// One registered IA name.
pub struct Entry {
    /// The registered name (`device_name` points here).
    pub name: CString,
    /// The IA of our registry it serves (dat.conf `ia_params`).
    pub ia_name: String,
    /// The registry key, as libdat2 passed it.
    pub info: DatProviderInfo,
    /// The table (boxed: stable address).
    pub table: Box<DatProvider>,
    /// Whether `dat_registry_add_provider` accepted it.
    pub registered: bool,
}

// SAFETY: the table and the info are immutable after construction; the raw pointers in them
// point into the entry itself (the name) or at functions.
unsafe impl Send for Entry {}

static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

fn entries() -> MutexGuard<'static, Vec<Entry>> {
    ENTRIES.lock().unwrap_or_else(|p| p.into_inner())
}

type AddRemoveFn = unsafe extern "C" fn(*const DatProvider, *const DatProviderInfo) -> DatReturn;
type GetIaFn = unsafe extern "C" fn(DatHandle, *mut DatHandle) -> DatReturn;

fn lookup(name: &CStr) -> *mut libc::c_void {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name has no other preconditions.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) }
}

fn add_remove(name: &CStr) -> Option<AddRemoveFn> {
    let p = lookup(name);
    // SAFETY: libdat2 exports these with exactly this signature (dat_registry.h).
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, AddRemoveFn>(p) })
}

/// Translates a raw IA handle into libdat2's index with `dats_get_ia_handle` (which searches
/// values above its table size as pointers); the raw handle when libdat2 is absent or does not
/// know it.
pub fn consumer_ia_handle(raw: DatHandle) -> DatHandle {
    if raw.is_null() {
        return raw;
    }
    let p = lookup(c"dats_get_ia_handle");
    if p.is_null() {
        return raw;
    }
    // SAFETY: exported by libdat2 as `DAT_RETURN dats_get_ia_handle(DAT_IA_HANDLE,
    // DAT_IA_HANDLE *)` (dat_api.c, version node DAT_2.0).
    let f = unsafe { std::mem::transmute::<*mut libc::c_void, GetIaFn>(p) };
    let mut out: DatHandle = std::ptr::null_mut();
    // SAFETY: `out` is a valid out-pointer; `raw` is only compared, never dereferenced.
    let rc = unsafe { f(raw, &mut out) };
    if rc == 0 && !out.is_null() { out } else { raw }
}

fn name_of(info: &DatProviderInfo) -> String {
    let bytes: Vec<u8> = info
        .ia_name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Finds the entry for a registered name: `(table, our IA name, key)`.
pub fn find(name: &str) -> Option<(*const DatProvider, String, Key)> {
    entries()
        .iter()
        .find(|e| e.name.to_bytes() == name.as_bytes())
        .map(|e| {
            (
                &*e.table as *const DatProvider,
                e.ia_name.clone(),
                Key::of(&e.info),
            )
        })
}

/// Registers a table for `info`'s IA name serving the IA `instance_data`; returns the code of
/// `dat_registry_add_provider` (`None` when libdat2 is not loaded).
///
/// # Safety
/// `info` must be NULL or valid; `instance_data` NULL or NUL-terminated.
pub unsafe fn init(
    info: *const DatProviderInfo,
    instance_data: *const c_char,
) -> Option<DatReturn> {
    if info.is_null() {
        tracing::error!("dat_provider_init called with a NULL provider info");
        return None;
    }
    // SAFETY: non-NULL, valid per the caller.
    let info = unsafe { *info };
    let name = name_of(&info);
    let ia_name = if instance_data.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated per the caller.
        unsafe { CStr::from_ptr(instance_data) }
            .to_string_lossy()
            .trim()
            .to_owned()
    };
    let ia_name = if ia_name.is_empty() {
        name.clone()
    } else {
        ia_name
    };
    let mut list = entries();
    if list.iter().any(|e| e.name.to_bytes() == name.as_bytes()) {
        tracing::warn!(name, "dat_provider_init for an IA name already registered");
        return None;
    }
    let cname = CString::new(name.clone()).unwrap_or_default();
    let table = Box::new(crate::table::build_table(cname.as_ptr()));
    let rc = add_remove(c"dat_registry_add_provider").map(|add| {
        // SAFETY: both pointers are valid; libdat2 copies the info and keeps the table
        // pointer, which stays valid until dat_provider_fini removes it.
        unsafe { add(&*table, &info) }
    });
    let registered = rc == Some(0);
    tracing::debug!(name, ia = ia_name, ?rc, "dat_provider_init");
    if rc.is_some() && !registered {
        tracing::error!(name, ?rc, "dat_registry_add_provider refused the provider");
        return rc;
    }
    list.push(Entry {
        name: cname,
        ia_name,
        info,
        table,
        registered,
    });
    rc
}

/// Unregisters `info`'s IA name: closes its IAs (stopping provider threads), removes the
/// table from libdat2 and frees it.
///
/// # Safety
/// `info` must be NULL or valid.
pub unsafe fn fini(info: *const DatProviderInfo) {
    if info.is_null() {
        return;
    }
    // SAFETY: non-NULL, valid per the caller.
    let name = name_of(unsafe { &*info });
    let entry = {
        let mut list = entries();
        let Some(i) = list
            .iter()
            .position(|e| e.name.to_bytes() == name.as_bytes())
        else {
            return;
        };
        list.remove(i)
    };
    close_ias_of(&entry.table);
    if entry.registered
        && let Some(remove) = add_remove(c"dat_registry_remove_provider")
    {
        // SAFETY: the table registered in init and its info.
        let rc = unsafe { remove(&*entry.table, &entry.info) };
        tracing::debug!(name, rc, "dat_registry_remove_provider");
    }
    drop(entry);
}

/// Closes every IA served by `table` (abruptly) and frees their handles.
fn close_ias_of(table: &DatProvider) {
    let me = table as *const DatProvider;
    for state in crate::calls::ia::open_ias() {
        if state.provider.0 == me {
            let _ = state.ia.close(dat::types::CloseFlags::Abrupt);
            handle::remove_ia(&state);
        }
    }
}

/// Creates the handle for an IA (used by `ia_open`).
///
/// # Errors
/// `DAT_INSUFFICIENT_RESOURCES` when the handle table is full.
pub fn ia_node(
    ia: dat::Ia,
    table: *const DatProvider,
    key: Key,
) -> dat::DatResult<Arc<handle::Node>> {
    crate::state::IaState::create(ia, crate::state::TablePtr(table), key)
}
