//! Conversions between the `dat` value types and the C structs.

use std::sync::Arc;

use dat::types::{CompletionFlags, EpAttr, Qos, ServiceType};
use dat::{AsyncHandle, DatError, DatResult, DtoCompletion, Event, EventData};

use crate::abi::{
    DAT_FALSE, DatContext, DatDtoCompletionEventData, DatEpAttr, DatEvent, DatHandle, DatIaAttr,
    DatProviderAttr,
};
use crate::ffi::{arg, boolean, fill_name};
use crate::handle::{self, Kind};
use crate::state::IaState;

/// `DAT_EXTENSION_NONE`: no IB extensions are advertised (see the README).
const DAT_EXTENSION_NONE: u32 = 0;

fn count(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

fn seg(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `DAT_IA_ATTR` of an IA (pointers stay valid while the IA is open).
pub fn ia_attr_to_c(s: &IaState) -> DatIaAttr {
    let a = s.ia.attr();
    // SAFETY: DatIaAttr is plain data (integers, char arrays, raw pointers); all-zero is valid.
    let mut c: DatIaAttr = unsafe { std::mem::zeroed() };
    fill_name(&mut c.adapter_name, &a.adapter_name);
    fill_name(&mut c.vendor_name, &a.vendor_name);
    c.hardware_version_major = a.hardware_version.0;
    c.hardware_version_minor = a.hardware_version.1;
    c.firmware_version_major = a.firmware_version.0;
    c.firmware_version_minor = a.firmware_version.1;
    c.ia_address_ptr = (&raw const *s.addr).cast_mut().cast();
    c.max_eps = count(a.max_eps);
    c.max_dto_per_ep = count(a.max_dto_per_ep);
    c.max_rdma_read_per_ep_in = count(a.max_rdma_read_per_ep_in);
    c.max_rdma_read_per_ep_out = count(a.max_rdma_read_per_ep_out);
    c.max_evds = count(a.max_evds);
    c.max_evd_qlen = count(a.max_evd_qlen);
    c.max_iov_segments_per_dto = count(a.max_iov_segments_per_dto);
    c.max_lmrs = count(a.max_lmrs);
    c.max_lmr_block_size = seg(a.max_lmr_block_size);
    c.max_lmr_virtual_address = a.max_lmr_virtual_address;
    c.max_pzs = count(a.max_pzs);
    c.max_message_size = seg(a.max_message_size);
    c.max_rdma_size = seg(a.max_rdma_size);
    c.max_rmrs = count(a.max_rmrs);
    c.max_rmr_target_address = a.max_rmr_target_address;
    c.max_srqs = count(a.max_srqs);
    c.max_ep_per_srq = count(a.max_ep_per_srq);
    c.max_recv_per_srq = count(a.max_recv_per_srq);
    c.max_iov_segments_per_rdma_read = count(a.max_iov_segments_per_rdma_read);
    c.max_iov_segments_per_rdma_write = count(a.max_iov_segments_per_rdma_write);
    c.max_rdma_read_in = count(a.max_rdma_read_in);
    c.max_rdma_read_out = count(a.max_rdma_read_out);
    c.max_rdma_read_per_ep_in_guaranteed = boolean(a.max_rdma_read_per_ep_in_guaranteed);
    c.max_rdma_read_per_ep_out_guaranteed = boolean(a.max_rdma_read_per_ep_out_guaranteed);
    c.zb_supported = boolean(a.zb_supported);
    c.extension_supported = DAT_EXTENSION_NONE;
    c.extension_version = 0;
    (c.num_transport_attr, c.transport_attr) = s.transport_attr.c();
    (c.num_vendor_attr, c.vendor_attr) = s.vendor_attr.c();
    c
}

/// `DAT_PROVIDER_ATTR` of an IA; the version and thread-safety fields are the registry key
/// the IA was opened under (libdat2's close path rebuilds the key from them).
pub fn provider_attr_to_c(s: &IaState) -> DatProviderAttr {
    let p = s.ia.provider_attr();
    // SAFETY: DatProviderAttr is plain data; all-zero is valid.
    let mut c: DatProviderAttr = unsafe { std::mem::zeroed() };
    fill_name(&mut c.provider_name, &p.provider_name);
    c.provider_version_major = p.provider_version.0;
    c.provider_version_minor = p.provider_version.1;
    c.dapl_version_major = s.key.major;
    c.dapl_version_minor = s.key.minor;
    // DAT_MEM_TYPE_VIRTUAL (0) | DAT_MEM_TYPE_LMR (1), as OFA reports it.
    c.lmr_mem_types_supported = 1;
    c.iov_ownership_on_return = p.iov_ownership_on_return as u32;
    c.dat_qos_supported = Qos::BestEffort as u32;
    c.completion_flags_supported = p.completion_flags_supported.bits();
    c.is_thread_safe = s.key.thread_safe;
    c.max_private_data_size = count(p.max_private_data_size);
    c.supports_multipath = DAT_FALSE;
    c.ep_creator = if p.psp_provider_flag_supported { 1 } else { 0 };
    c.pz_support = 0; // DAT_PZ_UNIQUE
    c.optimal_buffer_alignment = p.optimal_buffer_alignment;
    for (i, row) in p.evd_stream_merging_supported.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            c.evd_stream_merging_supported[i][j] = boolean(*v);
        }
    }
    c.srq_supported = boolean(p.srq_supported);
    c.srq_watermarks_supported = 0;
    c.srq_ep_pz_difference_supported = boolean(p.srq_ep_pz_difference_supported);
    c.srq_info_supported = 0;
    c.ep_recv_info_supported = 0;
    c.lmr_sync_req = DAT_FALSE;
    c.dto_async_return_guaranteed = DAT_FALSE;
    c.rdma_write_for_rdma_read_req = DAT_FALSE;
    c.rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
    c.rmr_scope_supported = 1; // DAT_RMR_SCOPE_PZ
    c.is_signal_safe = DAT_FALSE;
    c.ha_supported = DAT_FALSE;
    c.ha_loadbalancing = 0;
    (c.num_provider_specific_attr, c.provider_specific_attr) = s.provider_attr.c();
    c
}

/// `DAT_EP_ATTR` of `a`.
pub fn ep_attr_to_c(a: &EpAttr) -> DatEpAttr {
    DatEpAttr {
        service_type: a.service_type as u32,
        max_message_size: seg(a.max_message_size),
        max_rdma_size: seg(a.max_rdma_size),
        qos: a.qos as u32,
        recv_completion_flags: a.recv_completion_flags.bits(),
        request_completion_flags: a.request_completion_flags.bits(),
        max_recv_dtos: count(a.max_recv_dtos),
        max_request_dtos: count(a.max_request_dtos),
        max_recv_iov: count(a.max_recv_iov),
        max_request_iov: count(a.max_request_iov),
        max_rdma_read_in: count(a.max_rdma_read_in),
        max_rdma_read_out: count(a.max_rdma_read_out),
        srq_soft_hw: a.srq_soft_hw.map_or(-1, count),
        max_rdma_read_iov: count(a.max_rdma_read_iov),
        max_rdma_write_iov: count(a.max_rdma_write_iov),
        ep_transport_specific_count: 0,
        ep_transport_specific: std::ptr::null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: std::ptr::null_mut(),
    }
}

/// `DAT_QOS` from C (argument `n`).
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for a value that is not a `DAT_QOS`.
pub fn qos(v: u32, n: u16) -> DatResult<Qos> {
    Ok(match v {
        0x00 => Qos::BestEffort,
        0x01 => Qos::HighThroughput,
        0x02 => Qos::LowLatency,
        0x04 => Qos::Economy,
        0x08 => Qos::Premium,
        _ => return Err(arg(n)),
    })
}

/// Completion flags from C (argument `n`).
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for unknown bits.
pub fn completion_flags(v: u32, n: u16) -> DatResult<CompletionFlags> {
    CompletionFlags::from_bits(v).ok_or_else(|| arg(n))
}

fn nonneg(v: i32, n: u16) -> DatResult<u32> {
    u32::try_from(v).map_err(|_| arg(n))
}

/// `DAT_EP_ATTR` from C (the struct is argument `n`).
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for negative counts, unknown service types,
/// QoS values or completion flags.
pub fn ep_attr_from_c(c: &DatEpAttr, n: u16) -> DatResult<EpAttr> {
    if c.service_type != ServiceType::Rc as u32 {
        return Err(arg(n));
    }
    let max_request_iov = nonneg(c.max_request_iov, n)?;
    // OFA ignores the two RDMA IOV limits (RDMA goes through the send queue, whose limit is
    // `max_request_iov`) and dtest leaves them 0 yet posts multi-segment RDMA: 0 means that.
    let rdma_iov = |v: i32| nonneg(v, n).map(|v| if v == 0 { max_request_iov } else { v });
    Ok(EpAttr {
        service_type: ServiceType::Rc,
        max_message_size: u64::from(c.max_message_size),
        max_rdma_size: u64::from(c.max_rdma_size),
        qos: qos(c.qos, n)?,
        recv_completion_flags: completion_flags(c.recv_completion_flags, n)?,
        request_completion_flags: completion_flags(c.request_completion_flags, n)?,
        max_recv_dtos: nonneg(c.max_recv_dtos, n)?,
        max_request_dtos: nonneg(c.max_request_dtos, n)?,
        max_recv_iov: nonneg(c.max_recv_iov, n)?,
        max_request_iov,
        max_rdma_read_in: nonneg(c.max_rdma_read_in, n)?,
        max_rdma_read_out: nonneg(c.max_rdma_read_out, n)?,
        srq_soft_hw: (c.srq_soft_hw >= 0).then_some(c.srq_soft_hw.unsigned_abs()),
        max_rdma_read_iov: rdma_iov(c.max_rdma_read_iov)?,
        max_rdma_write_iov: rdma_iov(c.max_rdma_write_iov)?,
    })
}

/// How many private-data buffers of one object stay valid (older ones are released).
const KEEP_PRIVATE_DATA: usize = 4;

/// Keeps `data` alive in the node behind `h` and returns `(size, pointer)` for C.
pub fn hold_private_data(h: DatHandle, data: &[u8]) -> (i32, *mut std::ffi::c_void) {
    if data.is_empty() {
        return (0, std::ptr::null_mut());
    }
    let Ok(node) = handle::get_any(h, DatError::invalid_handle(dat::Subtype::NoSubtype)) else {
        return (0, std::ptr::null_mut());
    };
    let boxed: Box<[u8]> = data.into();
    let ptr = boxed.as_ptr().cast_mut().cast();
    let mut extra = node.extra();
    extra.private_data.push(boxed);
    if extra.private_data.len() > KEEP_PRIVATE_DATA {
        extra.private_data.remove(0);
    }
    (count(u32::try_from(data.len()).unwrap_or(u32::MAX)), ptr)
}

/// A `DatEvent` holding a DTO completion, every byte spelled out: the C struct's layout with
/// the event number's padding, the rest of the `event_data` union and the extension data as
/// zeroes (what zeroing the struct and then writing the DTO fields gives, in one pass of
/// stores instead of 15 zeroing stores and 8 overwriting ones). The assertions below tie it
/// to `DatEvent`, whose layout `tests/layout.rs` checks against the headers.
#[repr(C)]
struct DtoEventImage {
    number: u32,
    pad: u32,
    evd: DatHandle,
    dto: DatDtoCompletionEventData,
    rest: [u64; 9],
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<DtoEventImage>() == size_of::<DatEvent>());
    assert!(align_of::<DtoEventImage>() == align_of::<DatEvent>());
    assert!(offset_of!(DatEvent, event_number) == 0 && size_of::<u32>() == 4);
    assert!(offset_of!(DtoEventImage, evd) == offset_of!(DatEvent, evd_handle));
    assert!(offset_of!(DtoEventImage, dto) == offset_of!(DatEvent, event_data));
    assert!(
        offset_of!(DtoEventImage, rest)
            == offset_of!(DatEvent, event_data) + size_of::<DatDtoCompletionEventData>()
    );
    assert!(
        offset_of!(DatEvent, event_extension_data) + size_of::<[u64; 8]>() == size_of::<DatEvent>()
    );
};

/// Writes the C form of a DTO completion `d` (event number `number`), dequeued from the EVD
/// `evd` and naming the endpoint handle `ep`, through `out`. Inlined: the dequeue's common
/// case, with the endpoint's handle from the cache.
///
/// # Safety
/// `out` must be valid for a write of a `DatEvent`.
#[inline(always)]
pub unsafe fn dto_event_to_c(
    out: *mut DatEvent,
    number: u32,
    evd: DatHandle,
    ep: DatHandle,
    d: &DtoCompletion,
) {
    let image = DtoEventImage {
        number,
        pad: 0,
        evd,
        dto: DatDtoCompletionEventData {
            ep_handle: ep,
            user_cookie: DatContext::from_u64(d.cookie.0),
            status: d.status as u32,
            transfered_length: d.transferred_length,
            operation: d.operation as u32,
            rmr_context: d.rmr_context,
        },
        rest: [0; 9],
    };
    // SAFETY: `out` is valid for writes of a `DatEvent` (the caller's contract), whose size
    // and alignment the image has (asserted above).
    unsafe { out.cast::<DtoEventImage>().write(image) };
}

/// Writes the C form of `ev`, dequeued from the EVD `evd` of `ia`, through `out`: in place,
/// not built on the stack and copied (a `DatEvent` is 120 bytes with its extension data,
/// zeroed then copied once more per event before).
///
/// # Safety
/// `out` must be valid for a write of a `DatEvent`.
pub unsafe fn event_to_c(out: *mut DatEvent, ev: &Event, evd: DatHandle, ia: &Arc<IaState>) {
    if let EventData::Dto(d) = &ev.data {
        let ep = ia.ep_handle(d.ep);
        // SAFETY: the caller's contract.
        unsafe { dto_event_to_c(out, ev.number as u32, evd, ep, d) };
        return;
    }
    // SAFETY: `out` is valid for writes (the caller's contract); DatEvent is plain data
    // (integers, raw pointers, unions of those), so all-zero bytes are a valid value, which
    // makes the reference below sound.
    let c = unsafe {
        out.write_bytes(0, 1);
        &mut *out
    };
    c.event_number = ev.number as u32;
    c.evd_handle = evd;
    match &ev.data {
        EventData::Dto(_) => {} // written above
        EventData::RmrBind {
            rmr,
            cookie,
            status,
        } => {
            c.event_data.rmr_completion_event_data = crate::abi::DatRmrBindCompletionEventData {
                rmr_handle: ia.handle_of(Kind::Rmr, rmr.0),
                user_cookie: DatContext::from_u64(cookie.0),
                status: *status as u32,
            };
        }
        EventData::ConnectionRequest { sp, conn_qual, cr } => {
            c.event_data.cr_arrival_event_data = crate::abi::DatCrArrivalEventData {
                sp_handle: crate::abi::DatSpHandle {
                    psp_handle: ia.sp_handle(*sp),
                },
                local_ia_address_ptr: (&raw const *ia.addr).cast_mut().cast(),
                conn_qual: conn_qual.0,
                cr_handle: ia.cr_handle(*cr),
                truncate_flag: DAT_FALSE,
            };
        }
        EventData::Connection { ep, private_data } => {
            let h = ia.ep_handle(*ep);
            let (size, ptr) = hold_private_data(h, private_data);
            c.event_data.connect_event_data = crate::abi::DatConnectionEventData {
                ep_handle: h,
                private_data_size: size,
                private_data: ptr,
            };
        }
        EventData::Async { handle, reason } => {
            let h = match handle {
                AsyncHandle::Ia => ia.consumer_handle(),
                AsyncHandle::Ep(id) => ia.ep_handle(*id),
                AsyncHandle::Evd(id) => ia.handle_of(Kind::Evd, id.0),
                AsyncHandle::Srq(id) => ia.handle_of(Kind::Srq, id.0),
            };
            c.event_data.asynch_error_event_data = crate::abi::DatAsynchErrorEventData {
                dat_handle: h,
                reason: *reason,
            };
        }
        EventData::Software { pointer } => {
            c.event_data.software_event_data = crate::abi::DatSoftwareEventData {
                pointer: *pointer as usize as *mut std::ffi::c_void,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dat::types::{Cookie, DtoOp, DtoStatus, EpId};

    fn bytes(e: &DatEvent) -> [u8; std::mem::size_of::<DatEvent>()] {
        // SAFETY: every byte of `e` was written (each test fills the whole struct first).
        unsafe { std::mem::transmute_copy(e) }
    }

    #[test]
    fn dto_image_is_the_zeroed_struct_with_the_fields() {
        let d = DtoCompletion {
            ep: EpId(5),
            cookie: Cookie(0x1122_3344_5566_7788),
            status: DtoStatus::LocalLength,
            transferred_length: 0x0A0B_0C0D,
            operation: DtoOp::RdmaRead,
            rmr_context: 0xFEDC_BA98,
        };
        let (evd, ep) = (0x1000 as DatHandle, 0x2040 as DatHandle);
        // The way event_to_c wrote every event before: zeroed, then the fields.
        // SAFETY: DatEvent is plain data; all-zero is valid.
        let mut want: DatEvent = unsafe { std::mem::zeroed() };
        want.event_number = 0x00001;
        want.evd_handle = evd;
        want.event_data.dto_completion_event_data = DatDtoCompletionEventData {
            ep_handle: ep,
            user_cookie: DatContext::from_u64(d.cookie.0),
            status: d.status as u32,
            transfered_length: d.transferred_length,
            operation: d.operation as u32,
            rmr_context: d.rmr_context,
        };
        let mut got = std::mem::MaybeUninit::<DatEvent>::uninit();
        // SAFETY: the buffer is a DatEvent's; filled with a pattern so that an unwritten
        // byte shows.
        let got = unsafe {
            got.as_mut_ptr()
                .cast::<u8>()
                .write_bytes(0xA5, std::mem::size_of::<DatEvent>());
            dto_event_to_c(got.as_mut_ptr(), 0x00001, evd, ep, &d);
            got.assume_init()
        };
        assert_eq!(bytes(&got), bytes(&want));
    }
}
