//! Endpoint slots: 26-37, 55, 60-62.

use dat::types::{CloseFlags, Cookie, Timeout};

use dat::{ConnectFlags, DatError, EpModify, EpParams, ErrorType, Subtype};

use crate::abi::{
    DatBoolean, DatContext, DatCount, DatEpAttr, DatEpParam, DatHandle, DatIaAddressPtr,
    DatLmrTriplet, DatReturn, DatRmrTriplet,
};
use crate::calls::convert::{completion_flags, ep_attr_from_c, ep_attr_to_c, qos};
use crate::calls::{ep_of, ia_of, opt_evd, opt_node, pz_of, srq_of};
use crate::ffi::{arg, boolean, guard, private_data, put, put_req, triplets};
use crate::handle::{self, Kind, Obj};
use crate::state::{sockaddr_from, sockaddr_to};

#[allow(clippy::too_many_arguments)]
fn create(
    ia: DatHandle,
    pz: DatHandle,
    recv_evd: DatHandle,
    request_evd: DatHandle,
    connect_evd: DatHandle,
    srq: Option<DatHandle>,
    attr: *const DatEpAttr,
    attr_arg: u16,
    ep: *mut DatHandle,
) -> Result<(), DatError> {
    let s = ia_of(ia)?;
    let pz = match opt_node(pz, Kind::Pz, Subtype::InvalidHandlePz)? {
        Some(_) => Some(pz_of(pz)?.1),
        None => None,
    };
    let recv = opt_evd(recv_evd, Subtype::InvalidHandleEvdRecv)?;
    let request = opt_evd(request_evd, Subtype::InvalidHandleEvdRequest)?;
    let connect = opt_evd(connect_evd, Subtype::InvalidHandleEvdConn)?;
    let srq = match srq {
        Some(h) => Some(srq_of(h)?.1),
        None => None,
    };
    let attr = if attr.is_null() {
        None
    } else {
        // SAFETY: non-NULL consumer attributes.
        Some(ep_attr_from_c(unsafe { &*attr }, attr_arg)?)
    };
    if ep.is_null() {
        return Err(arg(attr_arg + 1));
    }
    let e = s.ia.create_ep(&EpParams {
        pz: pz.as_ref(),
        recv_evd: recv.as_ref(),
        request_evd: request.as_ref(),
        connect_evd: connect.as_ref(),
        srq: srq.as_ref(),
        attr: attr.as_ref(),
    })?;
    let n = s.adopt(Kind::Ep, e.id().0, Obj::Ep(e))?;
    // SAFETY: checked non-NULL consumer OUT pointer.
    unsafe { put(ep, n.handle()) };
    Ok(())
}

pub(crate) unsafe extern "C" fn ep_create(
    ia: DatHandle,
    pz: DatHandle,
    recv_evd: DatHandle,
    request_evd: DatHandle,
    connect_evd: DatHandle,
    attr: *const DatEpAttr,
    ep: *mut DatHandle,
) -> DatReturn {
    guard("ep_create", || {
        create(
            ia,
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            None,
            attr,
            6,
            ep,
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn ep_create_with_srq(
    ia: DatHandle,
    pz: DatHandle,
    recv_evd: DatHandle,
    request_evd: DatHandle,
    connect_evd: DatHandle,
    srq: DatHandle,
    attr: *const DatEpAttr,
    ep: *mut DatHandle,
) -> DatReturn {
    guard("ep_create_with_srq", || {
        create(
            ia,
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            Some(srq),
            attr,
            7,
            ep,
        )
    })
}

pub(crate) unsafe extern "C" fn ep_query(
    ep: DatHandle,
    _mask: u64,
    param: *mut DatEpParam,
) -> DatReturn {
    guard("ep_query", || {
        let (n, e) = ep_of(ep)?;
        if param.is_null() {
            return Err(arg(3));
        }
        let q = e.query()?;
        let ia = &n.ia;
        let remote = {
            let mut x = n.extra();
            let ss = match q.remote_address {
                Some(a) => sockaddr_from(a),
                None => sockaddr_from(std::net::SocketAddr::from(([0, 0, 0, 0], 0))),
            };
            let b = x.remote_addr.insert(Box::new(ss));
            (&raw mut **b).cast::<libc::sockaddr>()
        };
        let cfg = &q.config;
        let h = |k: Kind, id: Option<u32>| id.map_or(std::ptr::null_mut(), |i| ia.handle_of(k, i));
        let p = DatEpParam {
            ia_handle: ia.consumer_handle(),
            ep_state: q.state as u32,
            comm: crate::abi::DatComm::default(),
            local_ia_address_ptr: (&raw const *ia.addr).cast_mut().cast(),
            local_port_qual: q.local_qual.map_or(0, |c| c.0),
            remote_ia_address_ptr: remote,
            remote_port_qual: q.remote_qual.map_or(0, |c| c.0),
            pz_handle: h(Kind::Pz, cfg.pz.map(|x| x.0)),
            recv_evd_handle: h(Kind::Evd, cfg.recv_evd.map(|x| x.0)),
            request_evd_handle: h(Kind::Evd, cfg.request_evd.map(|x| x.0)),
            connect_evd_handle: h(Kind::Evd, cfg.connect_evd.map(|x| x.0)),
            srq_handle: h(Kind::Srq, cfg.srq.map(|x| x.0)),
            ep_attr: ep_attr_to_c(&cfg.attr),
        };
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(param, p) };
        Ok(())
    })
}

/// `DAT_EP_FIELD_*` bits `dat_ep_modify` accepts: PZ, the three EVDs and every attribute.
const MODIFIABLE: u64 = 0x0000_0080 | 0x0000_0100 | 0x0000_0200 | 0x0000_0400 | 0x7FFF_F000;
const ATTR_BITS: u64 = 0x7FFF_F000;

pub(crate) unsafe extern "C" fn ep_modify(
    ep: DatHandle,
    mask: u64,
    param: *const DatEpParam,
) -> DatReturn {
    guard("ep_modify", || {
        let (_, e) = ep_of(ep)?;
        if mask & !MODIFIABLE != 0 {
            return Err(arg(2));
        }
        if param.is_null() {
            return Err(arg(3));
        }
        // SAFETY: non-NULL consumer parameters.
        let p = unsafe { *param };
        let pz = if mask & 0x80 != 0 {
            Some(pz_of(p.pz_handle)?.1)
        } else {
            None
        };
        let pick = |bit: u64, h: DatHandle, sub: Subtype| -> Result<Option<dat::Evd>, DatError> {
            if mask & bit == 0 {
                return Ok(None);
            }
            opt_evd(h, sub)?
                .ok_or(DatError::invalid_handle(sub))
                .map(Some)
        };
        let recv = pick(0x100, p.recv_evd_handle, Subtype::InvalidHandleEvdRecv)?;
        let request = pick(
            0x200,
            p.request_evd_handle,
            Subtype::InvalidHandleEvdRequest,
        )?;
        let connect = pick(0x400, p.connect_evd_handle, Subtype::InvalidHandleEvdConn)?;
        let attr = if mask & ATTR_BITS != 0 {
            let mut cur = ep_attr_to_c(&e.query()?.config.attr);
            merge_attr(&mut cur, &p.ep_attr, mask);
            Some(ep_attr_from_c(&cur, 3)?)
        } else {
            None
        };
        e.modify(&EpModify {
            pz: pz.as_ref(),
            recv_evd: recv.as_ref(),
            request_evd: request.as_ref(),
            connect_evd: connect.as_ref(),
            attr: attr.as_ref(),
        })
    })
}

/// Copies the attribute fields selected by `mask` from `new` into `cur`.
fn merge_attr(cur: &mut DatEpAttr, new: &DatEpAttr, mask: u64) {
    macro_rules! take {
        ($bit:expr, $f:ident) => {
            if mask & $bit != 0 {
                cur.$f = new.$f;
            }
        };
    }
    take!(0x0000_1000, service_type);
    take!(0x0000_2000, max_message_size);
    take!(0x0000_4000, max_rdma_size);
    take!(0x0000_8000, qos);
    take!(0x0001_0000, recv_completion_flags);
    take!(0x0002_0000, request_completion_flags);
    take!(0x0004_0000, max_recv_dtos);
    take!(0x0008_0000, max_request_dtos);
    take!(0x0010_0000, max_recv_iov);
    take!(0x0020_0000, max_request_iov);
    take!(0x0040_0000, max_rdma_read_in);
    take!(0x0080_0000, max_rdma_read_out);
    take!(0x0100_0000, srq_soft_hw);
    take!(0x0200_0000, max_rdma_read_iov);
    take!(0x0400_0000, max_rdma_write_iov);
}

fn connect_flags(v: u32) -> Result<ConnectFlags, DatError> {
    match v {
        0 => Ok(ConnectFlags::Default),
        1 => Ok(ConnectFlags::MultipathRequested),
        2 => Ok(ConnectFlags::MultipathRequired),
        _ => Err(arg(8)),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) unsafe extern "C" fn ep_connect(
    ep: DatHandle,
    remote_addr: DatIaAddressPtr,
    remote_conn_qual: u64,
    timeout: u32,
    private_data_size: DatCount,
    pdata: *const std::ffi::c_void,
    q: u32,
    flags: u32,
) -> DatReturn {
    guard("ep_connect", || {
        let (_, e) = ep_of(ep)?;
        // SAFETY: NULL or the consumer's sockaddr.
        let addr = unsafe { sockaddr_to(remote_addr, 2)? };
        // SAFETY: the consumer's private data, `private_data_size` bytes.
        let data = unsafe { private_data(private_data_size, pdata, 6)? };
        let qos = qos(q, 7)?;
        let f = connect_flags(flags)?;
        e.connect(
            addr,
            dat::types::ConnQual(remote_conn_qual),
            Timeout(timeout),
            &data,
            qos,
            f,
        )
    })
}

pub(crate) unsafe extern "C" fn ep_dup_connect(
    ep: DatHandle,
    dup_ep: DatHandle,
    timeout: u32,
    private_data_size: DatCount,
    pdata: *const std::ffi::c_void,
    q: u32,
) -> DatReturn {
    guard("ep_dup_connect", || {
        let (_, e) = ep_of(ep)?;
        let (_, dup) = ep_of(dup_ep)
            .map_err(|_| DatError::new(ErrorType::InvalidHandle, Subtype::InvalidHandle2))?;
        // SAFETY: the consumer's private data, `private_data_size` bytes.
        let data = unsafe { private_data(private_data_size, pdata, 5)? };
        let qos = qos(q, 6)?;
        e.dup_connect(&dup, Timeout(timeout), &data, qos)
    })
}

pub(crate) unsafe extern "C" fn ep_disconnect(ep: DatHandle, flags: u32) -> DatReturn {
    guard("ep_disconnect", || {
        let (_, e) = ep_of(ep)?;
        let f = match flags {
            0 => CloseFlags::Abrupt,
            1 => CloseFlags::Graceful,
            _ => return Err(arg(2)),
        };
        e.disconnect(f)
    })
}

/// Runs a DTO call on the EP behind a handle, used in place inside its slot's gate
/// (nothing cloned, no reference count). Written without closures of its own: each one left
/// to the inliner's judgement became a call taking its captures by reference, which were
/// spilled and reloaded around every post.
macro_rules! with_ep {
    ($ep:expr, |$e:ident| $body:expr) => {{
        let bad = DatError::invalid_handle(Subtype::InvalidHandleEp);
        match handle::hold($ep, Kind::Ep) {
            Some(n) => match &n.obj {
                Obj::Ep($e) => $body,
                _ => Err(bad),
            },
            None => Err(bad),
        }
    }};
}

pub(crate) unsafe extern "C" fn ep_post_send(
    ep: DatHandle,
    num_segments: DatCount,
    local_iov: *mut DatLmrTriplet,
    cookie: DatContext,
    flags: u32,
) -> DatReturn {
    guard("ep_post_send", || {
        with_ep!(ep, |e| {
            // SAFETY: the consumer's IOV of `num_segments` triplets, read during this call only.
            let iov = unsafe { triplets(num_segments, local_iov, 2)? };
            let f = completion_flags(flags, 5)?;
            e.post_send(iov, Cookie(cookie.value()), f)
        })
    })
}

pub(crate) unsafe extern "C" fn ep_post_recv(
    ep: DatHandle,
    num_segments: DatCount,
    local_iov: *mut DatLmrTriplet,
    cookie: DatContext,
    flags: u32,
) -> DatReturn {
    guard("ep_post_recv", || {
        with_ep!(ep, |e| {
            // SAFETY: the consumer's IOV of `num_segments` triplets, read during this call only.
            let iov = unsafe { triplets(num_segments, local_iov, 2)? };
            let f = completion_flags(flags, 5)?;
            e.post_recv(iov, Cookie(cookie.value()), f)
        })
    })
}

/// The body of both RDMA posts, inlined into each (a call of its own cost a frame and a
/// reload of the arguments per post).
#[inline(always)]
fn rdma(
    ep: DatHandle,
    num_segments: DatCount,
    local_iov: *const DatLmrTriplet,
    cookie: DatContext,
    remote_iov: *const DatRmrTriplet,
    flags: u32,
    write: bool,
) -> Result<(), DatError> {
    with_ep!(ep, |e| {
        // SAFETY: the consumer's IOV of `num_segments` triplets, read during this call only.
        let iov = unsafe { triplets(num_segments, local_iov, 2)? };
        if remote_iov.is_null() {
            return Err(arg(5));
        }
        // SAFETY: non-NULL consumer remote triplet.
        let remote = unsafe { *remote_iov };
        let f = completion_flags(flags, 6)?;
        let c = Cookie(cookie.value());
        if write {
            e.post_rdma_write(iov, c, remote, f)
        } else {
            e.post_rdma_read(iov, c, remote, f)
        }
    })
}

pub(crate) unsafe extern "C" fn ep_post_rdma_read(
    ep: DatHandle,
    num_segments: DatCount,
    local_iov: *mut DatLmrTriplet,
    cookie: DatContext,
    remote_iov: *const DatRmrTriplet,
    flags: u32,
) -> DatReturn {
    guard("ep_post_rdma_read", || {
        rdma(
            ep,
            num_segments,
            local_iov,
            cookie,
            remote_iov,
            flags,
            false,
        )
    })
}

pub(crate) unsafe extern "C" fn ep_post_rdma_write(
    ep: DatHandle,
    num_segments: DatCount,
    local_iov: *mut DatLmrTriplet,
    cookie: DatContext,
    remote_iov: *const DatRmrTriplet,
    flags: u32,
) -> DatReturn {
    guard("ep_post_rdma_write", || {
        rdma(ep, num_segments, local_iov, cookie, remote_iov, flags, true)
    })
}

pub(crate) unsafe extern "C" fn ep_get_status(
    ep: DatHandle,
    state: *mut u32,
    recv_idle: *mut DatBoolean,
    request_idle: *mut DatBoolean,
) -> DatReturn {
    guard("ep_get_status", || {
        let (_, e) = ep_of(ep)?;
        let st = e.status()?;
        // SAFETY: consumer OUT pointers (state required, the idle flags optional).
        unsafe {
            put_req(state, st.state as u32, 2)?;
            put(recv_idle, boolean(st.recv_idle()));
            put(request_idle, boolean(st.request_idle()));
        }
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_free(ep: DatHandle) -> DatReturn {
    guard("ep_free", || {
        let (n, e) = ep_of(ep)?;
        e.free()?;
        n.ia.release(&n, e.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_reset(ep: DatHandle) -> DatReturn {
    guard("ep_reset", || {
        let (n, e) = ep_of(ep)?;
        e.reset()?;
        n.extra().private_data.clear();
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn ep_recv_query(
    ep: DatHandle,
    _nbufs_allocated: *mut DatCount,
    _bufs_alloc_span: *mut DatCount,
) -> DatReturn {
    guard("ep_recv_query", || {
        ep_of(ep)?;
        // `ep_recv_info_supported` is 0: the dat API does not track receive buffers per EP.
        Err(DatError::NOT_IMPLEMENTED.into_bare())
    })
}

pub(crate) unsafe extern "C" fn ep_set_watermark(
    ep: DatHandle,
    _soft_high: DatCount,
    _hard_high: DatCount,
) -> DatReturn {
    guard("ep_set_watermark", || {
        ep_of(ep)?;
        // `srq_watermarks_supported` is 0, as for OFA.
        Err(DatError::NOT_IMPLEMENTED.into_bare())
    })
}
