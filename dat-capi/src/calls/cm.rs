//! Service points and connection requests: slots 12-15, 45-50, 54.

use dat::types::{ConnQual, PspFlags};
use dat::{DatError, Subtype};

use crate::abi::{DatCount, DatCrParam, DatHandle, DatPspParam, DatReturn, DatRspParam};
use crate::calls::convert::hold_private_data;
use crate::calls::{cr_of, ep_of, ia_of, opt_evd, psp_of, rsp_of};
use crate::ffi::{arg, guard, private_data, put, put_req};
use crate::handle::{Kind, Obj};
use crate::state::sockaddr_from;

fn psp_flags(v: u32) -> Result<PspFlags, DatError> {
    match v {
        0 => Ok(PspFlags::Consumer),
        1 => Ok(PspFlags::Provider),
        _ => Err(arg(4)),
    }
}

fn cr_evd(h: DatHandle) -> Result<dat::Evd, DatError> {
    opt_evd(h, Subtype::InvalidHandleEvdCr)?
        .ok_or(DatError::invalid_handle(Subtype::InvalidHandleEvdCr))
}

pub(crate) unsafe extern "C" fn psp_create(
    ia: DatHandle,
    conn_qual: u64,
    evd: DatHandle,
    flags: u32,
    psp: *mut DatHandle,
) -> DatReturn {
    guard("psp_create", || {
        let s = ia_of(ia)?;
        let e = cr_evd(evd)?;
        let f = psp_flags(flags)?;
        if psp.is_null() {
            return Err(arg(5));
        }
        let sp = s.ia.create_psp(ConnQual(conn_qual), &e, f)?;
        let n = s.adopt(Kind::Psp, sp.id().0, Obj::Psp(sp))?;
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(psp, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn psp_create_any(
    ia: DatHandle,
    conn_qual: *mut u64,
    evd: DatHandle,
    flags: u32,
    psp: *mut DatHandle,
) -> DatReturn {
    guard("psp_create_any", || {
        let s = ia_of(ia)?;
        if conn_qual.is_null() {
            return Err(arg(2));
        }
        let e = cr_evd(evd)?;
        let f = psp_flags(flags)?;
        if psp.is_null() {
            return Err(arg(5));
        }
        let sp = s.ia.create_psp_any(&e, f)?;
        let q = sp.conn_qual().0;
        let n = s.adopt(Kind::Psp, sp.id().0, Obj::Psp(sp))?;
        // SAFETY: checked non-NULL consumer OUT pointers.
        unsafe {
            put(conn_qual, q);
            put(psp, n.handle());
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn psp_query(
    psp: DatHandle,
    _mask: u32,
    param: *mut DatPspParam,
) -> DatReturn {
    guard("psp_query", || {
        let (n, sp) = psp_of(psp)?;
        let q = sp.query()?;
        let p = DatPspParam {
            ia_handle: n.ia.consumer_handle(),
            conn_qual: q.conn_qual.0,
            evd_handle: n.ia.handle_of(Kind::Evd, q.evd.0),
            psp_flags: q.psp_flags.map_or(0, |f| f as u32),
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn psp_free(psp: DatHandle) -> DatReturn {
    guard("psp_free", || {
        let (n, sp) = psp_of(psp)?;
        sp.free()?;
        n.ia.release(&n, sp.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn rsp_create(
    ia: DatHandle,
    conn_qual: u64,
    ep: DatHandle,
    evd: DatHandle,
    rsp: *mut DatHandle,
) -> DatReturn {
    guard("rsp_create", || {
        let s = ia_of(ia)?;
        let (_, e) = ep_of(ep)?;
        let cr_evd = cr_evd(evd)?;
        if rsp.is_null() {
            return Err(arg(5));
        }
        let sp = s.ia.create_rsp(ConnQual(conn_qual), &e, &cr_evd)?;
        let n = s.adopt(Kind::Rsp, sp.id().0, Obj::Rsp(sp))?;
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(rsp, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn rsp_query(
    rsp: DatHandle,
    _mask: u32,
    param: *mut DatRspParam,
) -> DatReturn {
    guard("rsp_query", || {
        let (n, sp) = rsp_of(rsp)?;
        let q = sp.query()?;
        let p = DatRspParam {
            ia_handle: n.ia.consumer_handle(),
            conn_qual: q.conn_qual.0,
            evd_handle: n.ia.handle_of(Kind::Evd, q.evd.0),
            ep_handle: q.ep.map_or(std::ptr::null_mut(), |id| n.ia.ep_handle(id)),
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn rsp_free(rsp: DatHandle) -> DatReturn {
    guard("rsp_free", || {
        let (n, sp) = rsp_of(rsp)?;
        sp.free()?;
        n.ia.release(&n, sp.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_query(
    cr: DatHandle,
    _mask: u32,
    param: *mut DatCrParam,
) -> DatReturn {
    guard("cr_query", || {
        let (n, c) = cr_of(cr)?;
        if param.is_null() {
            return Err(arg(3));
        }
        let q = c.query()?;
        let addr_ptr = {
            let mut extra = n.extra();
            let b = extra
                .remote_addr
                .insert(Box::new(sockaddr_from(q.remote_address)));
            (&raw mut **b).cast::<libc::sockaddr>()
        };
        let (size, data) = hold_private_data(n.handle(), &q.private_data);
        let p = DatCrParam {
            remote_ia_address_ptr: addr_ptr,
            remote_port_qual: u64::from(q.remote_address.port()),
            private_data_size: size,
            private_data: data,
            local_ep_handle: q.ep.map_or(std::ptr::null_mut(), |id| n.ia.ep_handle(id)),
        };
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(param, p) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_accept(
    cr: DatHandle,
    ep: DatHandle,
    private_data_size: DatCount,
    pdata: *const std::ffi::c_void,
) -> DatReturn {
    guard("cr_accept", || {
        let (n, c) = cr_of(cr)?;
        let e = if ep.is_null() {
            None
        } else {
            Some(ep_of(ep)?.1)
        };
        // SAFETY: the consumer's private data, `private_data_size` bytes.
        let data = unsafe { private_data(private_data_size, pdata, 4)? };
        c.accept(e.as_ref(), &data)?;
        n.ia.release(&n, c.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_reject(
    cr: DatHandle,
    private_data_size: DatCount,
    pdata: *const std::ffi::c_void,
) -> DatReturn {
    guard("cr_reject", || {
        let (n, c) = cr_of(cr)?;
        // SAFETY: the consumer's private data, `private_data_size` bytes.
        let data = unsafe { private_data(private_data_size, pdata, 3)? };
        c.reject(&data)?;
        n.ia.release(&n, c.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cr_handoff(cr: DatHandle, conn_qual: u64) -> DatReturn {
    guard("cr_handoff", || {
        let (n, c) = cr_of(cr)?;
        c.handoff(ConnQual(conn_qual))?;
        n.ia.release(&n, c.id().0);
        Ok(())
    })
}
