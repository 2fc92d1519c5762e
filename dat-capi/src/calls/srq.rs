//! SRQ slots: 63-68.

use dat::SrqAttr;
use dat::types::Cookie;

use crate::abi::{
    DatContext, DatCount, DatHandle, DatLmrTriplet, DatReturn, DatSrqAttr, DatSrqParam,
};
use crate::calls::{ia_of, pz_of, srq_of};
use crate::ffi::{arg, guard, put, put_req, triplets};
use crate::handle::{Kind, Obj};

/// `DAT_VALUE_UNKNOWN`.
const VALUE_UNKNOWN: i32 = i32::MAX - 1;
/// `DAT_SRQ_STATE_OPERATIONAL`.
const OPERATIONAL: u32 = 1;

pub(crate) unsafe extern "C" fn srq_create(
    ia: DatHandle,
    pz: DatHandle,
    attr: *mut DatSrqAttr,
    srq: *mut DatHandle,
) -> DatReturn {
    guard("srq_create", || {
        let s = ia_of(ia)?;
        let (_, p) = pz_of(pz)?;
        if attr.is_null() {
            return Err(arg(3));
        }
        // SAFETY: non-NULL consumer attributes.
        let a = unsafe { *attr };
        let nn = |v: i32| u32::try_from(v).map_err(|_| arg(3));
        let a = SrqAttr {
            max_recv_dtos: nn(a.max_recv_dtos)?,
            max_recv_iov: nn(a.max_recv_iov)?,
            low_watermark: nn(a.low_watermark)?,
        };
        if srq.is_null() {
            return Err(arg(4));
        }
        let q = s.ia.create_srq(&p, a)?;
        let n = s.adopt(Kind::Srq, q.id().0, Obj::Srq(q))?;
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(srq, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn srq_free(srq: DatHandle) -> DatReturn {
    guard("srq_free", || {
        let (n, q) = srq_of(srq)?;
        q.free()?;
        n.ia.release(&n, q.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn srq_post_recv(
    srq: DatHandle,
    num_segments: DatCount,
    local_iov: *mut DatLmrTriplet,
    cookie: DatContext,
) -> DatReturn {
    guard("srq_post_recv", || {
        let (_, q) = srq_of(srq)?;
        // SAFETY: the consumer's IOV of `num_segments` triplets.
        let iov = unsafe { triplets(num_segments, local_iov, 2)? };
        q.post_recv(iov, Cookie(cookie.value()))
    })
}

pub(crate) unsafe extern "C" fn srq_query(
    srq: DatHandle,
    _mask: u32,
    param: *mut DatSrqParam,
) -> DatReturn {
    guard("srq_query", || {
        let (n, q) = srq_of(srq)?;
        let p = q.query()?;
        let c = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
        let out = DatSrqParam {
            ia_handle: n.ia.consumer_handle(),
            srq_state: OPERATIONAL,
            pz_handle: n.ia.handle_of(Kind::Pz, p.pz.0),
            max_recv_dtos: c(p.attr.max_recv_dtos),
            max_recv_iov: c(p.attr.max_recv_iov),
            low_watermark: c(p.attr.low_watermark),
            available_dto_count: VALUE_UNKNOWN,
            outstanding_dto_count: VALUE_UNKNOWN,
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, out, 3) }
    })
}

pub(crate) unsafe extern "C" fn srq_resize(srq: DatHandle, max_recv_dtos: DatCount) -> DatReturn {
    guard("srq_resize", || {
        let (_, q) = srq_of(srq)?;
        q.resize(u32::try_from(max_recv_dtos).map_err(|_| arg(2))?)
    })
}

pub(crate) unsafe extern "C" fn srq_set_lw(srq: DatHandle, low_watermark: DatCount) -> DatReturn {
    guard("srq_set_lw", || {
        let (_, q) = srq_of(srq)?;
        q.set_lw(u32::try_from(low_watermark).map_err(|_| arg(2))?)
    })
}
