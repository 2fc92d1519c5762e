//! EVD and CNO slots: 7-11, 16-25, 56-57.

use dat::types::{EvdFlags, EventNumber, Timeout};
use dat::{DatError, Event, EventData, Subtype};

use crate::abi::{
    DatCnoParam, DatCnoProxy, DatCount, DatEvdParam, DatEvent, DatHandle, DatOsWaitProxyAgent,
    DatReturn,
};
use crate::calls::convert::{dto_event_to_c, event_to_c};
use crate::calls::{cno_of, evd_of, ia_of};
use crate::ffi::{arg, guard, put, put_req};
use crate::handle::{self, Kind, Obj};

/// `DAT_SOFTWARE_EVENT`.
const DAT_SOFTWARE_EVENT: u32 = 0x10001;

fn opt_cno(h: DatHandle) -> Result<Option<dat::Cno>, DatError> {
    if h.is_null() {
        return Ok(None);
    }
    cno_of(h).map(|(_, c)| Some(c))
}

pub(crate) unsafe extern "C" fn evd_create(
    ia: DatHandle,
    min_qlen: DatCount,
    cno: DatHandle,
    flags: u32,
    evd: *mut DatHandle,
) -> DatReturn {
    guard("evd_create", || {
        let s = ia_of(ia)?;
        let cno = opt_cno(cno)?;
        let flags = EvdFlags::from_bits(flags).ok_or(arg(4))?;
        if evd.is_null() {
            return Err(arg(5));
        }
        let e = s.ia.create_evd(min_qlen, flags, cno.as_ref())?;
        let id = e.id().0;
        let n = s.adopt(Kind::Evd, id, Obj::Evd(e))?;
        // SAFETY: checked non-NULL; consumer OUT pointer.
        unsafe { put(evd, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn evd_query(
    evd: DatHandle,
    _mask: u32,
    param: *mut DatEvdParam,
) -> DatReturn {
    guard("evd_query", || {
        let (n, e) = evd_of(evd)?;
        let q = e.query()?;
        let p = DatEvdParam {
            ia_handle: n.ia.consumer_handle(),
            evd_qlen: i32::try_from(q.qlen).unwrap_or(i32::MAX),
            evd_state: q.state.bits(),
            cno_handle: q
                .cno
                .map_or(std::ptr::null_mut(), |c| n.ia.handle_of(Kind::Cno, c.0)),
            evd_flags: q.flags.bits(),
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn evd_modify_cno(evd: DatHandle, cno: DatHandle) -> DatReturn {
    guard("evd_modify_cno", || {
        let (_, e) = evd_of(evd)?;
        let c = opt_cno(cno)?;
        e.modify_cno(c.as_ref())
    })
}

pub(crate) unsafe extern "C" fn evd_enable(evd: DatHandle) -> DatReturn {
    guard("evd_enable", || evd_of(evd)?.1.enable())
}

pub(crate) unsafe extern "C" fn evd_disable(evd: DatHandle) -> DatReturn {
    guard("evd_disable", || evd_of(evd)?.1.disable())
}

pub(crate) unsafe extern "C" fn evd_set_unwaitable(evd: DatHandle) -> DatReturn {
    guard("evd_set_unwaitable", || evd_of(evd)?.1.set_unwaitable())
}

pub(crate) unsafe extern "C" fn evd_clear_unwaitable(evd: DatHandle) -> DatReturn {
    guard("evd_clear_unwaitable", || evd_of(evd)?.1.clear_unwaitable())
}

pub(crate) unsafe extern "C" fn evd_resize(evd: DatHandle, min_qlen: DatCount) -> DatReturn {
    guard("evd_resize", || evd_of(evd)?.1.resize(min_qlen))
}

pub(crate) unsafe extern "C" fn evd_wait(
    evd: DatHandle,
    timeout: u32,
    threshold: DatCount,
    event: *mut DatEvent,
    nmore: *mut DatCount,
) -> DatReturn {
    guard("evd_wait", || {
        let (n, e) = evd_of(evd)?;
        if event.is_null() {
            return Err(arg(4));
        }
        match e.wait(Timeout(timeout), threshold) {
            Ok((ev, more)) => {
                // SAFETY: consumer OUT pointers (event checked non-NULL).
                unsafe {
                    // A DTO event of a cached endpoint is written in one pass, as a dequeue's.
                    match &ev.data {
                        EventData::Dto(d) if let Some(ep) = n.ia.cached_ep_handle(d.ep) => {
                            dto_event_to_c(event, ev.number as u32, n.handle(), ep, d);
                        }
                        _ => event_to_c(event, &ev, n.handle(), &n.ia),
                    }
                    put(nmore, i32::try_from(more).unwrap_or(i32::MAX));
                }
                Ok(())
            }
            Err(err) => {
                let left = i32::try_from(e.len()).unwrap_or(i32::MAX);
                // SAFETY: consumer OUT pointer or NULL.
                unsafe { put(nmore, left) };
                Err(err)
            }
        }
    })
}

pub(crate) unsafe extern "C" fn evd_post_se(evd: DatHandle, event: *const DatEvent) -> DatReturn {
    guard("evd_post_se", || {
        let (_, e) = evd_of(evd)?;
        if event.is_null() {
            return Err(arg(2));
        }
        // SAFETY: non-NULL consumer event.
        let ev = unsafe { *event };
        if ev.event_number != DAT_SOFTWARE_EVENT {
            return Err(arg(2));
        }
        // SAFETY: a software event carries its pointer in the software member; reading the
        // pointer-sized bytes is defined for any bit pattern.
        let pointer = unsafe { ev.event_data.software_event_data.pointer };
        e.post_se(pointer as usize as u64)
    })
}

pub(crate) unsafe extern "C" fn evd_dequeue(evd: DatHandle, event: *mut DatEvent) -> DatReturn {
    guard("evd_dequeue", || {
        // Used in place inside the slot's gate: a polling consumer calls this in a loop.
        let bad = DatError::invalid_handle(Subtype::InvalidHandleEvdRequest);
        let Some(n) = handle::hold(evd, Kind::Evd) else {
            return Err(bad);
        };
        let Obj::Evd(e) = &n.obj else {
            return Err(bad);
        };
        if event.is_null() {
            return Err(arg(2));
        }
        // An empty queue returns DatError::QUEUE_EMPTY, the bare 0x000D0000 `dtest -p`
        // compares against. The event is written where the facade shows it: a completion
        // handed to this poll in its slot (no copy of it on the way), any other one once.
        // Both closures spell the cached-handle case out: one closure shared by both, or
        // `ep_handle` instead of the cache's hit, cost the usual dequeue about 20
        // instructions (callgrind, session 19).
        // `evd` is the node's handle (`hold` takes only a slot's exact address).
        e.dequeue_with(
            |d| match n.ia.cached_ep_handle(d.ep) {
                // SAFETY: checked non-NULL consumer OUT pointer.
                Some(ep) => unsafe {
                    dto_event_to_c(event, EventNumber::DtoCompletion as u32, evd, ep, d);
                },
                // SAFETY: as above.
                None => unsafe { event_to_c(event, &Event::dto(*d), evd, &n.ia) },
            },
            |ev| {
                if let EventData::Dto(d) = &ev.data
                    && let Some(ep) = n.ia.cached_ep_handle(d.ep)
                {
                    // SAFETY: checked non-NULL consumer OUT pointer.
                    unsafe { dto_event_to_c(event, ev.number as u32, evd, ep, d) };
                    return;
                }
                // SAFETY: checked non-NULL consumer OUT pointer.
                unsafe { event_to_c(event, &ev, evd, &n.ia) };
            },
        )
    })
}

pub(crate) unsafe extern "C" fn evd_free(evd: DatHandle) -> DatReturn {
    guard("evd_free", || {
        let (n, e) = evd_of(evd)?;
        e.free()?;
        n.ia.release(&n, e.id().0);
        Ok(())
    })
}

fn agent_words(a: &DatOsWaitProxyAgent) -> (usize, usize) {
    (
        a.instance_data as usize,
        a.proxy_agent_func.map_or(0, |f| f as usize),
    )
}

pub(crate) unsafe extern "C" fn cno_create(
    ia: DatHandle,
    agent: DatOsWaitProxyAgent,
    cno: *mut DatHandle,
) -> DatReturn {
    guard("cno_create", || {
        let s = ia_of(ia)?;
        if cno.is_null() {
            return Err(arg(3));
        }
        let c = s.ia.create_cno()?;
        let n = s.adopt(Kind::Cno, c.id().0, Obj::Cno(c))?;
        n.extra().agent = agent_words(&agent);
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(cno, n.handle()) };
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cno_modify_agent(
    cno: DatHandle,
    agent: DatOsWaitProxyAgent,
) -> DatReturn {
    guard("cno_modify_agent", || {
        let (n, _) = cno_of(cno)?;
        n.extra().agent = agent_words(&agent);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cno_query(
    cno: DatHandle,
    _mask: u32,
    param: *mut DatCnoParam,
) -> DatReturn {
    guard("cno_query", || {
        let (n, _) = cno_of(cno)?;
        let (data, func) = n.extra().agent;
        let agent = DatOsWaitProxyAgent {
            instance_data: data as *mut std::ffi::c_void,
            // SAFETY: `func` is 0 or a function pointer of this type the consumer gave us.
            proxy_agent_func: unsafe {
                std::mem::transmute::<usize, crate::abi::DatAgentFunc>(func)
            },
        };
        let p = DatCnoParam {
            ia_handle: n.ia.consumer_handle(),
            proxy_type: u32::from(func != 0), // DAT_PROXY_TYPE_NONE / _AGENT
            proxy: DatCnoProxy { agent },
        };
        // SAFETY: consumer OUT pointer (NULL rejected).
        unsafe { put_req(param, p, 3) }
    })
}

pub(crate) unsafe extern "C" fn cno_free(cno: DatHandle) -> DatReturn {
    guard("cno_free", || {
        let (n, c) = cno_of(cno)?;
        c.free()?;
        n.ia.release(&n, c.id().0);
        Ok(())
    })
}

pub(crate) unsafe extern "C" fn cno_wait(
    cno: DatHandle,
    timeout: u32,
    evd: *mut DatHandle,
) -> DatReturn {
    guard("cno_wait", || {
        let (n, c) = cno_of(cno)?;
        if evd.is_null() {
            return Err(arg(3));
        }
        let which = c.wait(Timeout(timeout))?;
        let h = which.map_or(std::ptr::null_mut(), |id| n.ia.handle_of(Kind::Evd, id.0));
        // SAFETY: checked non-NULL consumer OUT pointer.
        unsafe { put(evd, h) };
        Ok(())
    })
}
