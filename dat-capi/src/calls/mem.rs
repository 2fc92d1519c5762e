//! PZ, LMR and RMR slots: 38-44, 51-53, 58-59.

use std::sync::Arc;

use dat::types::{Cookie, MemPriv, VaType};
use dat::{Buffer, DatError, ErrorType, Subtype};

use crate::abi::{
    DatContext, DatHandle, DatLmrParam, DatLmrTriplet, DatPzParam, DatRegionDescription, DatReturn,
    DatRmrParam,
};
use crate::calls::convert::completion_flags;
use crate::calls::{ep_of, ia_of, lmr_of, pz_of, rmr_of};
use crate::ffi::{arg, guard, put, put_req};
use crate::handle::{Kind, Obj};

/// How an LMR was described at creation (reported back by `dat_lmr_query`).
#[derive(Clone, Copy, Debug)]
pub struct LmrOrigin {
    /// `DAT_MEM_TYPE`.
    pub mem_type: u32,
    /// `for_va` or `for_lmr_handle`, as an address.
    pub region: usize,
    /// Requested length.
    pub length: u64,
    /// Requested privileges.
    pub privs: u32,
    /// `DAT_VA_TYPE`.
    pub va_type: u32,
}

const MEM_TYPE_VIRTUAL: u32 = 0;
const MEM_TYPE_LMR: u32 = 1;
const MEM_TYPE_SHARED_VIRTUAL: u32 = 2;

fn va_type(v: u32, n: u16) -> Result<VaType, DatError> {
    match v {
        0 => Ok(VaType::Va),
        1 => Ok(VaType::ZeroBased),
        _ => Err(arg(n)),
    }
}

pub(crate) unsafe extern "C" fn pz_create(ia: DatHandle, pz: *mut DatHandle) -> DatReturn {
    guard("pz_create", || {
        let s = ia_of(ia)?;
        if pz.is_null() {
            return Err(arg(2));
        }
        let p = s.ia.create_pz()?;
        let n = s.adopt(Kind::Pz, p.id().0, Obj::Pz(p))?;
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(pz, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn pz_query(
    pz: DatHandle,
    _mask: u32,
    param: *mut DatPzParam,
) -> DatReturn {
    guard("pz_query", || {
        let (n, _) = pz_of(pz)?;
        let p = DatPzParam {
            ia_handle: n.ia.consumer_handle(),
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn pz_free(pz: DatHandle) -> DatReturn {
    guard("pz_free", || {
        let (n, p) = pz_of(pz)?;
        p.free()?;
        n.ia.release(&n, p.id().0);
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn lmr_create(
    ia: DatHandle,
    mem_type: u32,
    region: DatRegionDescription,
    length: u64,
    pz: DatHandle,
    privileges: u32,
    va: u32,
    lmr: *mut DatHandle,
    lmr_context: *mut u32,
    rmr_context: *mut u32,
    registered_length: *mut u64,
    registered_address: *mut u64,
) -> DatReturn {
    guard("lmr_create", || {
        let s = ia_of(ia)?;
        let (_, p) = pz_of(pz)?;
        let privs = MemPriv::from_bits(privileges).ok_or(arg(6))?;
        let vt = va_type(va, 7)?;
        if lmr.is_null() {
            return Err(arg(8));
        }
        let (buf, addr) = match mem_type {
            MEM_TYPE_VIRTUAL => {
                // SAFETY: reading the pointer member of a by-value union is defined for any bits.
                let ptr = unsafe { region.for_va }.cast::<u8>();
                let len = usize::try_from(length).map_err(|_| arg(4))?;
                if len == 0 {
                    // What dapltest (FFT mem case 2) requires of a zero-length registration.
                    return Err(DatError::new(ErrorType::LengthError, Subtype::NoSubtype));
                }
                if ptr.is_null() && len > 0 {
                    return Err(arg(3));
                }
                // SAFETY: the consumer registers memory it owns; by the DAT contract it stays
                // allocated and is only accessed through raw pointers until dat_lmr_free.
                let b = unsafe { Buffer::from_raw_parts(ptr, len) };
                (Arc::new(b), ptr as usize)
            }
            MEM_TYPE_LMR => {
                // SAFETY: as above, the handle member.
                let h = unsafe { region.for_lmr_handle };
                let (_, other, _) = lmr_of(h)?;
                (other.buffer().clone(), h as usize)
            }
            MEM_TYPE_SHARED_VIRTUAL => {
                return Err(DatError::new(
                    ErrorType::ModelNotSupported,
                    Subtype::NoSubtype,
                ));
            }
            _ => return Err(arg(2)),
        };
        let l = p.register(buf, privs, vt)?;
        let origin = LmrOrigin {
            mem_type,
            region: addr,
            length,
            privs: privileges,
            va_type: va,
        };
        let (lctx, rctx, len, start) = (
            l.lmr_context(),
            l.rmr_context().unwrap_or(0),
            l.len(),
            l.address(),
        );
        let n = s.adopt(Kind::Lmr, l.id().0, Obj::Lmr(l, origin))?;
        // SAFETY: consumer OUT pointers (lmr checked non-NULL, the others may be NULL).
        unsafe {
            put(lmr, n.handle());
            put(lmr_context, lctx);
            put(rmr_context, rctx);
            put(registered_length, len);
            put(registered_address, start);
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn lmr_query(
    lmr: DatHandle,
    _mask: u32,
    param: *mut DatLmrParam,
) -> DatReturn {
    guard("lmr_query", || {
        let (n, l, o) = lmr_of(lmr)?;
        let q = l.query()?;
        let p = DatLmrParam {
            ia_handle: n.ia.consumer_handle(),
            mem_type: o.mem_type,
            region_desc: DatRegionDescription {
                for_va: o.region as *mut std::ffi::c_void,
            },
            length: o.length,
            pz_handle: n.ia.handle_of(Kind::Pz, q.pz.0),
            mem_priv: o.privs,
            va_type: o.va_type,
            lmr_context: q.lmr_context,
            rmr_context: q.rmr_context.unwrap_or(0),
            registered_size: q.registered_size,
            registered_address: q.registered_address,
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn lmr_free(lmr: DatHandle) -> DatReturn {
    guard("lmr_free", || {
        let (n, l, _) = lmr_of(lmr)?;
        l.free()?;
        n.ia.release(&n, l.id().0);
        Ok(())
    })
}

fn sync(ia: DatHandle, segments: *const DatLmrTriplet, num: u64) -> Result<(), DatError> {
    ia_of(ia)?;
    if num > 0 && segments.is_null() {
        return Err(arg(2));
    }
    // Memory is coherent on every platform we run on (`lmr_sync_req` is FALSE).
    Ok(())
}

pub(crate) unsafe extern "C" fn lmr_sync_rdma_read(
    ia: DatHandle,
    segments: *const DatLmrTriplet,
    num_segments: u64,
) -> DatReturn {
    guard("lmr_sync_rdma_read", || sync(ia, segments, num_segments))
}

pub(crate) unsafe extern "C" fn lmr_sync_rdma_write(
    ia: DatHandle,
    segments: *const DatLmrTriplet,
    num_segments: u64,
) -> DatReturn {
    guard("lmr_sync_rdma_write", || sync(ia, segments, num_segments))
}

pub(crate) unsafe extern "C" fn rmr_create(pz: DatHandle, rmr: *mut DatHandle) -> DatReturn {
    guard("rmr_create", || {
        let (n, p) = pz_of(pz)?;
        if rmr.is_null() {
            return Err(arg(2));
        }
        let r = p.create_rmr()?;
        let rn = n.ia.adopt(Kind::Rmr, r.id().0, Obj::Rmr(r))?;
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(rmr, rn.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn rmr_query(
    rmr: DatHandle,
    _mask: u32,
    param: *mut DatRmrParam,
) -> DatReturn {
    guard("rmr_query", || {
        let (n, r) = rmr_of(rmr)?;
        let q = r.query()?;
        let (triplet, privs, va) = n.extra().rmr_binding.unwrap_or_default();
        let p = DatRmrParam {
            ia_handle: n.ia.consumer_handle(),
            pz_handle: n.ia.handle_of(Kind::Pz, q.pz.0),
            lmr_triplet: triplet,
            mem_priv: privs,
            rmr_context: q.rmr_context.unwrap_or(0),
            rmr_scope: 1, // DAT_RMR_SCOPE_PZ
            va_type: va,
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn rmr_bind(
    rmr: DatHandle,
    lmr: DatHandle,
    triplet: *const DatLmrTriplet,
    privileges: u32,
    va: u32,
    ep: DatHandle,
    cookie: DatContext,
    flags: u32,
    rmr_context: *mut u32,
) -> DatReturn {
    guard("rmr_bind", || {
        let (n, r) = rmr_of(rmr)?;
        let (_, l, _) = lmr_of(lmr)?;
        if triplet.is_null() {
            return Err(arg(3));
        }
        // SAFETY: non-NULL consumer triplet.
        let t = unsafe { *triplet };
        let privs = MemPriv::from_bits(privileges).ok_or(arg(4))?;
        let vt = va_type(va, 5)?;
        let (_, e) = ep_of(ep)?;
        let f = completion_flags(flags, 8)?;
        if rmr_context.is_null() {
            return Err(arg(9));
        }
        let ctx = r.bind(&l, t, privs, vt, &e, Cookie(cookie.value()), f)?;
        n.extra().rmr_binding = (t.segment_length != 0).then_some((t, privileges, va));
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(rmr_context, ctx) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn rmr_free(rmr: DatHandle) -> DatReturn {
    guard("rmr_free", || {
        let (n, r) = rmr_of(rmr)?;
        r.free()?;
        n.ia.release(&n, r.id().0);
        Ok(())
    })
}
