//! Generic slots (4-6: consumer context, handle type), the extension escape hatch (79) and
//! the DAT 2.0 additions libdat2 does not export (69-78).

use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering;

use dat::{DatError, ErrorType, Subtype};

use crate::abi::{
    DatBoolean, DatComm, DatContext, DatCount, DatFd, DatHandle, DatIaAddressPtr, DatLmrTriplet,
    DatReturn, DatRmrTriplet,
};
use crate::ffi::guard;
use crate::handle;

fn any(h: DatHandle) -> Result<std::sync::Arc<handle::Node>, DatError> {
    handle::get_any(
        h,
        DatError::new(ErrorType::InvalidHandle, Subtype::InvalidHandle1),
    )
}

pub(crate) unsafe extern "C" fn set_consumer_context(
    h: DatHandle,
    context: DatContext,
) -> DatReturn {
    guard("set_consumer_context", || {
        any(h)?.context.store(context.value(), Ordering::Release);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn get_consumer_context(
    h: DatHandle,
    context: *mut DatContext,
) -> DatReturn {
    guard("get_consumer_context", || {
        let v = any(h)?.context();
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { crate::ffi::put_req(context, DatContext::from_u64(v), 2) }
    })
}

pub(crate) unsafe extern "C" fn get_handle_type(h: DatHandle, handle_type: *mut u32) -> DatReturn {
    guard("get_handle_type", || {
        let k = any(h)?.kind as u32;
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { crate::ffi::put_req(handle_type, k, 2) }
    })
}

fn not_implemented() -> DatReturn {
    DatError::NOT_IMPLEMENTED.into_bare().to_raw()
}

fn model_not_supported() -> DatReturn {
    DatError::bare(ErrorType::ModelNotSupported, Subtype::NoSubtype).to_raw()
}

/// No IB extensions are advertised (`extension_supported = DAT_EXTENSION_NONE`), so libdat2
/// never routes an operation here; any call that arrives anyway is refused. The `va_list` is
/// not touched (reading it needs `core::ffi::VaList`, unstable in Rust 1.95).
pub(crate) unsafe extern "C" fn handle_extendedop(
    _h: DatHandle,
    _op: i32,
    _args: *mut c_void,
) -> DatReturn {
    not_implemented()
}

pub(crate) unsafe extern "C" fn ia_ha_related(
    _ia: DatHandle,
    _name: *const c_char,
    _answer: *mut DatBoolean,
) -> DatReturn {
    model_not_supported()
}

pub(crate) unsafe extern "C" fn csp_create(
    _ia: DatHandle,
    _comm: *mut DatComm,
    _address: DatIaAddressPtr,
    _evd: DatHandle,
    _csp: *mut DatHandle,
) -> DatReturn {
    model_not_supported()
}

pub(crate) unsafe extern "C" fn csp_query(
    _csp: DatHandle,
    _mask: u32,
    _param: *mut c_void,
) -> DatReturn {
    model_not_supported()
}

pub(crate) unsafe extern "C" fn csp_free(_csp: DatHandle) -> DatReturn {
    model_not_supported()
}

pub(crate) unsafe extern "C" fn ep_common_connect(
    _ep: DatHandle,
    _remote_addr: DatIaAddressPtr,
    _timeout: u32,
    _private_data_size: DatCount,
    _private_data: *const c_void,
) -> DatReturn {
    model_not_supported()
}

pub(crate) unsafe extern "C" fn rmr_create_for_ep(
    _pz: DatHandle,
    _rmr: *mut DatHandle,
) -> DatReturn {
    not_implemented()
}

pub(crate) unsafe extern "C" fn ep_post_send_with_invalidate(
    _ep: DatHandle,
    _num_segments: DatCount,
    _local_iov: *mut DatLmrTriplet,
    _cookie: DatContext,
    _flags: u32,
    _invalidate: DatBoolean,
    _rmr_context: u32,
) -> DatReturn {
    not_implemented()
}

pub(crate) unsafe extern "C" fn ep_post_rdma_read_to_rmr(
    _ep: DatHandle,
    _local_iov: *const DatRmrTriplet,
    _cookie: DatContext,
    _remote_iov: *const DatRmrTriplet,
    _flags: u32,
) -> DatReturn {
    not_implemented()
}

pub(crate) unsafe extern "C" fn cno_fd_create(
    _ia: DatHandle,
    _fd: *mut DatFd,
    _cno: *mut DatHandle,
) -> DatReturn {
    not_implemented()
}

pub(crate) unsafe extern "C" fn cno_trigger(_cno: DatHandle, _evd: *mut DatHandle) -> DatReturn {
    not_implemented()
}
