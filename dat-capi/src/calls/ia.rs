//! Slots 1-3: `ia_open`, `ia_query`, `ia_close`.

use std::ffi::{CStr, c_char};
use std::sync::Arc;

use dat::types::CloseFlags;
use dat::{DatError, ErrorType, Subtype};

use crate::abi::{DAT_NAME_MAX_LENGTH, DatCount, DatHandle, DatIaAttr, DatProviderAttr, DatReturn};
use crate::calls::convert::{ia_attr_to_c, provider_attr_to_c};
use crate::calls::ia_of;
use crate::ffi::{arg, guard, put, put_req};
use crate::handle::{self, Kind, Obj};
use crate::state::IaState;

/// `DAT_EVD_ASYNC_EXISTS`: the consumer says it already has an async EVD.
const ASYNC_EXISTS: usize = 1;

/// Every open IA of this process.
pub(crate) fn open_ias() -> Vec<Arc<IaState>> {
    handle::nodes_of(Kind::Ia)
        .into_iter()
        .filter_map(|n| match &n.obj {
            Obj::Ia(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

pub(crate) unsafe extern "C" fn ia_open(
    name: *const c_char,
    async_evd_qlen: DatCount,
    async_evd: *mut DatHandle,
    ia: *mut DatHandle,
) -> DatReturn {
    guard("ia_open", || {
        if name.is_null() {
            return Err(arg(1));
        }
        if ia.is_null() {
            return Err(arg(4));
        }
        // SAFETY: non-NULL C string from libdat2 (it checked the length).
        let name = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        if name.len() >= DAT_NAME_MAX_LENGTH {
            return Err(arg(1));
        }
        let given = if async_evd.is_null() {
            0
        } else {
            // SAFETY: non-NULL INOUT pointer from the consumer.
            unsafe { *async_evd as usize }
        };
        if given != 0 && given != ASYNC_EXISTS {
            // Sharing an existing async EVD between IAs is not supported.
            return Err(DatError::new(
                ErrorType::ModelNotSupported,
                Subtype::NoSubtype,
            ));
        }
        let Some((table, ia_name, key)) = crate::registry::find(&name) else {
            return Err(DatError::new(
                ErrorType::ProviderNotFound,
                Subtype::NameNotRegistered,
            ));
        };
        let registry = dat::Registry::from_env().map_err(|e| {
            tracing::error!(ia = ia_name, error = %e, "cannot read the IA registry");
            e.dat_error()
        })?;
        let opened = registry
            .open_ia(Some(&ia_name), async_evd_qlen)
            .map_err(|e| {
                tracing::error!(name, ia = ia_name, error = %e, "IA open failed");
                e.code()
            })?;
        let node = crate::registry::ia_node(opened, table, key)?;
        let Obj::Ia(state) = &node.obj else {
            return Err(DatError::new(ErrorType::InternalError, Subtype::NoSubtype));
        };
        let aevd = state.ia.async_evd();
        let evd_node = match state.adopt(Kind::Evd, aevd.id().0, Obj::Evd(aevd)) {
            Ok(n) => n,
            Err(e) => {
                // The handle table is full: undo the open.
                let _ = state.ia.close(CloseFlags::Abrupt);
                handle::remove_ia(state);
                return Err(e);
            }
        };
        if given == 0 {
            // SAFETY: NULL or the consumer's INOUT pointer.
            unsafe { put(async_evd, evd_node.handle()) };
        }
        // SAFETY: checked non-NULL above.
        unsafe { put(ia, node.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ia_query(
    ia: DatHandle,
    async_evd: *mut DatHandle,
    ia_attr_mask: u64,
    ia_attr: *mut DatIaAttr,
    provider_attr_mask: u64,
    provider_attr: *mut DatProviderAttr,
) -> DatReturn {
    guard("ia_query", || {
        let s = ia_of(ia)?;
        // Fields asked for need somewhere to go (dapltest FFT queryinfo case 10).
        if ia_attr_mask != 0 && ia_attr.is_null() {
            return Err(arg(4));
        }
        if provider_attr_mask != 0 && provider_attr.is_null() {
            return Err(arg(6));
        }
        let aevd = s.handle_of(Kind::Evd, s.ia.async_evd().id().0);
        // SAFETY: NULL or valid OUT pointers from the consumer.
        unsafe { put(async_evd, aevd) };
        if !ia_attr.is_null() {
            let a = ia_attr_to_c(&s);
            // SAFETY: non-NULL OUT pointer.
            unsafe { put_req(ia_attr, a, 4)? };
        }
        if !provider_attr.is_null() {
            let p = provider_attr_to_c(&s);
            // SAFETY: non-NULL OUT pointer.
            unsafe { put_req(provider_attr, p, 6)? };
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ia_close(ia: DatHandle, flags: u32) -> DatReturn {
    guard("ia_close", || {
        let s = ia_of(ia)?;
        let flags = match flags {
            0 => CloseFlags::Abrupt,
            1 => CloseFlags::Graceful,
            _ => return Err(arg(2)),
        };
        s.ia.close(flags)?;
        handle::remove_ia(&s);
        Ok(())
    })
}
