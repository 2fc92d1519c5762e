//! # dat-capi
//!
//! The DAT 2.0 (uDAPL) C ABI as a provider library for the stock Debian `libdat2` registry.
//! Built as `libdat_capi.so`, it exports `dat_provider_init` and `dat_provider_fini`; a
//! `dat.conf` line such as
//!
//! ```text
//! rs-tcp u2.0 nonthreadsafe default /abs/path/libdat_capi.so dat.2.0 "tcp-lo" ""
//! ```
//!
//! makes unmodified C programs linked with `-ldat2` open the IA `rs-tcp`, served by the IA
//! `tcp-lo` of our own registry (`ia_params`, the seventh field) through the [`dat`] API.
//!
//! Structure: [`abi`] holds the `#[repr(C)]` types (checked against the headers by
//! `tests/layout.rs`), [`handle`] the handle table that validates every handle C passes in,
//! `registry` the plug-in entry points, and `calls` one module per object family behind the
//! 79 slots of the `DAT_PROVIDER` table ([`table::build_table`]).
//!
//! No unwinding crosses the C boundary: every entry point runs under `catch_unwind` and turns
//! a panic into `DAT_INTERNAL_ERROR` (the cdylib keeps the default `panic = "unwind"` so the
//! workspace's test profile is unaffected).

pub mod abi;
mod calls;
mod ffi;
mod gate;
pub mod handle;
mod registry;
mod state;
pub mod table;

use std::ffi::c_char;

use abi::DatProviderInfo;

/// Called by libdat2 after `dlopen`: registers one `DAT_PROVIDER` table for `info`'s IA name
/// (with `dat_registry_add_provider`, looked up in the running process) serving the IA named
/// by `instance_data` (the dat.conf `ia_params` field; the IA name itself when empty).
///
/// # Safety
/// `info` must be NULL or point at a valid `DAT_PROVIDER_INFO`; `instance_data` must be NULL
/// or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_provider_init(
    info: *const DatProviderInfo,
    instance_data: *const c_char,
) {
    let _ = ffi::guard("dat_provider_init", || {
        // SAFETY: forwarded caller guarantees.
        unsafe { registry::init(info, instance_data) };
        Ok(())
    });
}

/// Called by libdat2 before `dlclose`: closes every IA of `info`'s name (stopping provider
/// threads), unregisters and frees its table.
///
/// # Safety
/// `info` must be NULL or point at a valid `DAT_PROVIDER_INFO`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_provider_fini(info: *const DatProviderInfo) {
    let _ = ffi::guard("dat_provider_fini", || {
        // SAFETY: forwarded caller guarantee.
        unsafe { registry::fini(info) };
        Ok(())
    });
}

/// Registers a table for `name` serving `ia_name` without libdat2 (for tests and embedders
/// that call the table directly); returns the table's address.
pub fn register_for_tests(name: &str, ia_name: &str) -> *const abi::DatProvider {
    // SAFETY: DatProviderInfo is plain data; all-zero is valid.
    let mut info: DatProviderInfo = unsafe { std::mem::zeroed() };
    ffi::fill_name(&mut info.ia_name, name);
    info.dapl_version_major = 2;
    let c = std::ffi::CString::new(ia_name).unwrap_or_default();
    // SAFETY: valid info and string.
    unsafe { registry::init(&info, c.as_ptr()) };
    registry::find(name).map_or(std::ptr::null(), |(t, _, _)| t)
}
