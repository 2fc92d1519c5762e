//! `DAT_PROVIDER` (`struct dat_provider` of `udat_redirection.h`): the 79-slot function table
//! libdat2 jumps through. Slot `s` (1-based) is at byte offset `8 * (s + 1)`.

use std::ffi::{c_char, c_void};

use super::{
    DatBoolean, DatCnoParam, DatComm, DatContext, DatCount, DatCrParam, DatEpAttr, DatEpParam,
    DatEvdParam, DatEvent, DatFd, DatHandle as H, DatIaAddressPtr, DatIaAttr, DatLmrParam,
    DatLmrTriplet, DatOsWaitProxyAgent, DatProviderAttr, DatPspParam, DatPzParam,
    DatRegionDescription, DatReturn, DatRmrParam, DatRmrTriplet, DatRspParam, DatSrqAttr,
    DatSrqParam,
};

/// `DAT_PROVIDER`: `device_name`, `extension`, then 79 function pointers (648 bytes). Every
/// slot is filled; `handle_extendedop_func` receives the C `va_list` as the pointer it decays
/// to on x86-64.
#[repr(C)]
pub struct DatProvider {
    /// `device_name`: the registered IA name (NUL-terminated; libdat2's close path keys on it).
    pub device_name: *const c_char,
    /// `extension`: provider private (unused, NULL).
    pub extension: *mut c_void,
    /// Slot 1: `ia_open_func`.
    pub ia_open_func: unsafe extern "C" fn(
        name: *const c_char,
        async_evd_qlen: DatCount,
        async_evd: *mut H,
        ia: *mut H,
    ) -> DatReturn,
    /// Slot 2: `ia_query_func`.
    pub ia_query_func: unsafe extern "C" fn(
        ia: H,
        async_evd: *mut H,
        ia_attr_mask: u64,
        ia_attr: *mut DatIaAttr,
        provider_attr_mask: u64,
        provider_attr: *mut DatProviderAttr,
    ) -> DatReturn,
    /// Slot 3: `ia_close_func`.
    pub ia_close_func: unsafe extern "C" fn(ia: H, flags: u32) -> DatReturn,
    /// Slot 4: `set_consumer_context_func`.
    pub set_consumer_context_func:
        unsafe extern "C" fn(handle: H, context: DatContext) -> DatReturn,
    /// Slot 5: `get_consumer_context_func`.
    pub get_consumer_context_func:
        unsafe extern "C" fn(handle: H, context: *mut DatContext) -> DatReturn,
    /// Slot 6: `get_handle_type_func`.
    pub get_handle_type_func: unsafe extern "C" fn(handle: H, handle_type: *mut u32) -> DatReturn,
    /// Slot 7: `cno_create_func`.
    pub cno_create_func:
        unsafe extern "C" fn(ia: H, agent: DatOsWaitProxyAgent, cno: *mut H) -> DatReturn,
    /// Slot 8: `cno_modify_agent_func`.
    pub cno_modify_agent_func:
        unsafe extern "C" fn(cno: H, agent: DatOsWaitProxyAgent) -> DatReturn,
    /// Slot 9: `cno_query_func`.
    pub cno_query_func:
        unsafe extern "C" fn(cno: H, mask: u32, param: *mut DatCnoParam) -> DatReturn,
    /// Slot 10: `cno_free_func`.
    pub cno_free_func: unsafe extern "C" fn(cno: H) -> DatReturn,
    /// Slot 11: `cno_wait_func`.
    pub cno_wait_func: unsafe extern "C" fn(cno: H, timeout: u32, evd: *mut H) -> DatReturn,
    /// Slot 12: `cr_query_func`.
    pub cr_query_func: unsafe extern "C" fn(cr: H, mask: u32, param: *mut DatCrParam) -> DatReturn,
    /// Slot 13: `cr_accept_func`.
    pub cr_accept_func: unsafe extern "C" fn(
        cr: H,
        ep: H,
        private_data_size: DatCount,
        private_data: *const c_void,
    ) -> DatReturn,
    /// Slot 14: `cr_reject_func`.
    pub cr_reject_func: unsafe extern "C" fn(
        cr: H,
        private_data_size: DatCount,
        private_data: *const c_void,
    ) -> DatReturn,
    /// Slot 15: `cr_handoff_func`.
    pub cr_handoff_func: unsafe extern "C" fn(cr: H, conn_qual: u64) -> DatReturn,
    /// Slot 16: `evd_create_func`.
    pub evd_create_func: unsafe extern "C" fn(
        ia: H,
        min_qlen: DatCount,
        cno: H,
        flags: u32,
        evd: *mut H,
    ) -> DatReturn,
    /// Slot 17: `evd_query_func`.
    pub evd_query_func:
        unsafe extern "C" fn(evd: H, mask: u32, param: *mut DatEvdParam) -> DatReturn,
    /// Slot 18: `evd_modify_cno_func`.
    pub evd_modify_cno_func: unsafe extern "C" fn(evd: H, cno: H) -> DatReturn,
    /// Slot 19: `evd_enable_func`.
    pub evd_enable_func: unsafe extern "C" fn(evd: H) -> DatReturn,
    /// Slot 20: `evd_disable_func`.
    pub evd_disable_func: unsafe extern "C" fn(evd: H) -> DatReturn,
    /// Slot 21: `evd_wait_func`.
    pub evd_wait_func: unsafe extern "C" fn(
        evd: H,
        timeout: u32,
        threshold: DatCount,
        event: *mut DatEvent,
        nmore: *mut DatCount,
    ) -> DatReturn,
    /// Slot 22: `evd_resize_func`.
    pub evd_resize_func: unsafe extern "C" fn(evd: H, min_qlen: DatCount) -> DatReturn,
    /// Slot 23: `evd_post_se_func`.
    pub evd_post_se_func: unsafe extern "C" fn(evd: H, event: *const DatEvent) -> DatReturn,
    /// Slot 24: `evd_dequeue_func`.
    pub evd_dequeue_func: unsafe extern "C" fn(evd: H, event: *mut DatEvent) -> DatReturn,
    /// Slot 25: `evd_free_func`.
    pub evd_free_func: unsafe extern "C" fn(evd: H) -> DatReturn,
    /// Slot 26: `ep_create_func`.
    pub ep_create_func: unsafe extern "C" fn(
        ia: H,
        pz: H,
        recv_evd: H,
        request_evd: H,
        connect_evd: H,
        attr: *const DatEpAttr,
        ep: *mut H,
    ) -> DatReturn,
    /// Slot 27: `ep_query_func`.
    pub ep_query_func: unsafe extern "C" fn(ep: H, mask: u64, param: *mut DatEpParam) -> DatReturn,
    /// Slot 28: `ep_modify_func`.
    pub ep_modify_func:
        unsafe extern "C" fn(ep: H, mask: u64, param: *const DatEpParam) -> DatReturn,
    /// Slot 29: `ep_connect_func`.
    pub ep_connect_func: unsafe extern "C" fn(
        ep: H,
        remote_addr: DatIaAddressPtr,
        remote_conn_qual: u64,
        timeout: u32,
        private_data_size: DatCount,
        private_data: *const c_void,
        qos: u32,
        flags: u32,
    ) -> DatReturn,
    /// Slot 30: `ep_dup_connect_func`.
    pub ep_dup_connect_func: unsafe extern "C" fn(
        ep: H,
        dup_ep: H,
        timeout: u32,
        private_data_size: DatCount,
        private_data: *const c_void,
        qos: u32,
    ) -> DatReturn,
    /// Slot 31: `ep_disconnect_func`.
    pub ep_disconnect_func: unsafe extern "C" fn(ep: H, flags: u32) -> DatReturn,
    /// Slot 32: `ep_post_send_func`.
    pub ep_post_send_func: unsafe extern "C" fn(
        ep: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
        flags: u32,
    ) -> DatReturn,
    /// Slot 33: `ep_post_recv_func`.
    pub ep_post_recv_func: unsafe extern "C" fn(
        ep: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
        flags: u32,
    ) -> DatReturn,
    /// Slot 34: `ep_post_rdma_read_func`.
    pub ep_post_rdma_read_func: unsafe extern "C" fn(
        ep: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
        remote_iov: *const DatRmrTriplet,
        flags: u32,
    ) -> DatReturn,
    /// Slot 35: `ep_post_rdma_write_func`.
    pub ep_post_rdma_write_func: unsafe extern "C" fn(
        ep: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
        remote_iov: *const DatRmrTriplet,
        flags: u32,
    ) -> DatReturn,
    /// Slot 36: `ep_get_status_func`.
    pub ep_get_status_func: unsafe extern "C" fn(
        ep: H,
        state: *mut u32,
        recv_idle: *mut DatBoolean,
        request_idle: *mut DatBoolean,
    ) -> DatReturn,
    /// Slot 37: `ep_free_func`.
    pub ep_free_func: unsafe extern "C" fn(ep: H) -> DatReturn,
    /// Slot 38: `lmr_create_func`.
    pub lmr_create_func: unsafe extern "C" fn(
        ia: H,
        mem_type: u32,
        region: DatRegionDescription,
        length: u64,
        pz: H,
        privileges: u32,
        va_type: u32,
        lmr: *mut H,
        lmr_context: *mut u32,
        rmr_context: *mut u32,
        registered_length: *mut u64,
        registered_address: *mut u64,
    ) -> DatReturn,
    /// Slot 39: `lmr_query_func`.
    pub lmr_query_func:
        unsafe extern "C" fn(lmr: H, mask: u32, param: *mut DatLmrParam) -> DatReturn,
    /// Slot 40: `lmr_free_func`.
    pub lmr_free_func: unsafe extern "C" fn(lmr: H) -> DatReturn,
    /// Slot 41: `rmr_create_func`.
    pub rmr_create_func: unsafe extern "C" fn(pz: H, rmr: *mut H) -> DatReturn,
    /// Slot 42: `rmr_query_func`.
    pub rmr_query_func:
        unsafe extern "C" fn(rmr: H, mask: u32, param: *mut DatRmrParam) -> DatReturn,
    /// Slot 43: `rmr_bind_func`.
    pub rmr_bind_func: unsafe extern "C" fn(
        rmr: H,
        lmr: H,
        triplet: *const DatLmrTriplet,
        privileges: u32,
        va_type: u32,
        ep: H,
        cookie: DatContext,
        flags: u32,
        rmr_context: *mut u32,
    ) -> DatReturn,
    /// Slot 44: `rmr_free_func`.
    pub rmr_free_func: unsafe extern "C" fn(rmr: H) -> DatReturn,
    /// Slot 45: `psp_create_func`.
    pub psp_create_func:
        unsafe extern "C" fn(ia: H, conn_qual: u64, evd: H, flags: u32, psp: *mut H) -> DatReturn,
    /// Slot 46: `psp_query_func`.
    pub psp_query_func:
        unsafe extern "C" fn(psp: H, mask: u32, param: *mut DatPspParam) -> DatReturn,
    /// Slot 47: `psp_free_func`.
    pub psp_free_func: unsafe extern "C" fn(psp: H) -> DatReturn,
    /// Slot 48: `rsp_create_func`.
    pub rsp_create_func:
        unsafe extern "C" fn(ia: H, conn_qual: u64, ep: H, evd: H, rsp: *mut H) -> DatReturn,
    /// Slot 49: `rsp_query_func`.
    pub rsp_query_func:
        unsafe extern "C" fn(rsp: H, mask: u32, param: *mut DatRspParam) -> DatReturn,
    /// Slot 50: `rsp_free_func`.
    pub rsp_free_func: unsafe extern "C" fn(rsp: H) -> DatReturn,
    /// Slot 51: `pz_create_func`.
    pub pz_create_func: unsafe extern "C" fn(ia: H, pz: *mut H) -> DatReturn,
    /// Slot 52: `pz_query_func`.
    pub pz_query_func: unsafe extern "C" fn(pz: H, mask: u32, param: *mut DatPzParam) -> DatReturn,
    /// Slot 53: `pz_free_func`.
    pub pz_free_func: unsafe extern "C" fn(pz: H) -> DatReturn,
    /// Slot 54: `psp_create_any_func`.
    pub psp_create_any_func: unsafe extern "C" fn(
        ia: H,
        conn_qual: *mut u64,
        evd: H,
        flags: u32,
        psp: *mut H,
    ) -> DatReturn,
    /// Slot 55: `ep_reset_func`.
    pub ep_reset_func: unsafe extern "C" fn(ep: H) -> DatReturn,
    /// Slot 56: `evd_set_unwaitable_func`.
    pub evd_set_unwaitable_func: unsafe extern "C" fn(evd: H) -> DatReturn,
    /// Slot 57: `evd_clear_unwaitable_func`.
    pub evd_clear_unwaitable_func: unsafe extern "C" fn(evd: H) -> DatReturn,
    /// Slot 58: `lmr_sync_rdma_read_func`.
    pub lmr_sync_rdma_read_func:
        unsafe extern "C" fn(ia: H, segments: *const DatLmrTriplet, num_segments: u64) -> DatReturn,
    /// Slot 59: `lmr_sync_rdma_write_func`.
    pub lmr_sync_rdma_write_func:
        unsafe extern "C" fn(ia: H, segments: *const DatLmrTriplet, num_segments: u64) -> DatReturn,
    /// Slot 60: `ep_create_with_srq_func`.
    pub ep_create_with_srq_func: unsafe extern "C" fn(
        ia: H,
        pz: H,
        recv_evd: H,
        request_evd: H,
        connect_evd: H,
        srq: H,
        attr: *const DatEpAttr,
        ep: *mut H,
    ) -> DatReturn,
    /// Slot 61: `ep_recv_query_func`.
    pub ep_recv_query_func: unsafe extern "C" fn(
        ep: H,
        nbufs_allocated: *mut DatCount,
        bufs_alloc_span: *mut DatCount,
    ) -> DatReturn,
    /// Slot 62: `ep_set_watermark_func`.
    pub ep_set_watermark_func:
        unsafe extern "C" fn(ep: H, soft_high: DatCount, hard_high: DatCount) -> DatReturn,
    /// Slot 63: `srq_create_func`.
    pub srq_create_func:
        unsafe extern "C" fn(ia: H, pz: H, attr: *mut DatSrqAttr, srq: *mut H) -> DatReturn,
    /// Slot 64: `srq_free_func`.
    pub srq_free_func: unsafe extern "C" fn(srq: H) -> DatReturn,
    /// Slot 65: `srq_post_recv_func`.
    pub srq_post_recv_func: unsafe extern "C" fn(
        srq: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
    ) -> DatReturn,
    /// Slot 66: `srq_query_func`.
    pub srq_query_func:
        unsafe extern "C" fn(srq: H, mask: u32, param: *mut DatSrqParam) -> DatReturn,
    /// Slot 67: `srq_resize_func`.
    pub srq_resize_func: unsafe extern "C" fn(srq: H, max_recv_dtos: DatCount) -> DatReturn,
    /// Slot 68: `srq_set_lw_func`.
    pub srq_set_lw_func: unsafe extern "C" fn(srq: H, low_watermark: DatCount) -> DatReturn,
    /// Slot 69: `csp_create_func`.
    pub csp_create_func: unsafe extern "C" fn(
        ia: H,
        comm: *mut DatComm,
        address: DatIaAddressPtr,
        evd: H,
        csp: *mut H,
    ) -> DatReturn,
    /// Slot 70: `csp_query_func`.
    pub csp_query_func: unsafe extern "C" fn(csp: H, mask: u32, param: *mut c_void) -> DatReturn,
    /// Slot 71: `csp_free_func`.
    pub csp_free_func: unsafe extern "C" fn(csp: H) -> DatReturn,
    /// Slot 72: `ep_common_connect_func`.
    pub ep_common_connect_func: unsafe extern "C" fn(
        ep: H,
        remote_addr: DatIaAddressPtr,
        timeout: u32,
        private_data_size: DatCount,
        private_data: *const c_void,
    ) -> DatReturn,
    /// Slot 73: `rmr_create_for_ep_func`.
    pub rmr_create_for_ep_func: unsafe extern "C" fn(pz: H, rmr: *mut H) -> DatReturn,
    /// Slot 74: `ep_post_send_with_invalidate_func`.
    pub ep_post_send_with_invalidate_func: unsafe extern "C" fn(
        ep: H,
        num_segments: DatCount,
        local_iov: *mut DatLmrTriplet,
        cookie: DatContext,
        flags: u32,
        invalidate: DatBoolean,
        rmr_context: u32,
    ) -> DatReturn,
    /// Slot 75: `ep_post_rdma_read_to_rmr_func`.
    pub ep_post_rdma_read_to_rmr_func: unsafe extern "C" fn(
        ep: H,
        local_iov: *const DatRmrTriplet,
        cookie: DatContext,
        remote_iov: *const DatRmrTriplet,
        flags: u32,
    ) -> DatReturn,
    /// Slot 76: `cno_fd_create_func`.
    pub cno_fd_create_func: unsafe extern "C" fn(ia: H, fd: *mut DatFd, cno: *mut H) -> DatReturn,
    /// Slot 77: `cno_trigger_func`.
    pub cno_trigger_func: unsafe extern "C" fn(cno: H, evd: *mut H) -> DatReturn,
    /// Slot 78: `ia_ha_related_func`.
    pub ia_ha_related_func:
        unsafe extern "C" fn(ia: H, name: *const c_char, answer: *mut DatBoolean) -> DatReturn,
    /// Slot 79: `handle_extendedop_func`.
    pub handle_extendedop_func:
        unsafe extern "C" fn(handle: H, op: i32, args: *mut c_void) -> DatReturn,
}

// SAFETY: the table is immutable after construction; `device_name` points at a string owned by
// the table's registry entry, which outlives every use.
unsafe impl Send for DatProvider {}
// SAFETY: as above, shared read-only.
unsafe impl Sync for DatProvider {}

/// The slot names in table order (slot 1 first), for tests and diagnostics.
pub const SLOT_NAMES: [&str; 79] = [
    "ia_open_func",
    "ia_query_func",
    "ia_close_func",
    "set_consumer_context_func",
    "get_consumer_context_func",
    "get_handle_type_func",
    "cno_create_func",
    "cno_modify_agent_func",
    "cno_query_func",
    "cno_free_func",
    "cno_wait_func",
    "cr_query_func",
    "cr_accept_func",
    "cr_reject_func",
    "cr_handoff_func",
    "evd_create_func",
    "evd_query_func",
    "evd_modify_cno_func",
    "evd_enable_func",
    "evd_disable_func",
    "evd_wait_func",
    "evd_resize_func",
    "evd_post_se_func",
    "evd_dequeue_func",
    "evd_free_func",
    "ep_create_func",
    "ep_query_func",
    "ep_modify_func",
    "ep_connect_func",
    "ep_dup_connect_func",
    "ep_disconnect_func",
    "ep_post_send_func",
    "ep_post_recv_func",
    "ep_post_rdma_read_func",
    "ep_post_rdma_write_func",
    "ep_get_status_func",
    "ep_free_func",
    "lmr_create_func",
    "lmr_query_func",
    "lmr_free_func",
    "rmr_create_func",
    "rmr_query_func",
    "rmr_bind_func",
    "rmr_free_func",
    "psp_create_func",
    "psp_query_func",
    "psp_free_func",
    "rsp_create_func",
    "rsp_query_func",
    "rsp_free_func",
    "pz_create_func",
    "pz_query_func",
    "pz_free_func",
    "psp_create_any_func",
    "ep_reset_func",
    "evd_set_unwaitable_func",
    "evd_clear_unwaitable_func",
    "lmr_sync_rdma_read_func",
    "lmr_sync_rdma_write_func",
    "ep_create_with_srq_func",
    "ep_recv_query_func",
    "ep_set_watermark_func",
    "srq_create_func",
    "srq_free_func",
    "srq_post_recv_func",
    "srq_query_func",
    "srq_resize_func",
    "srq_set_lw_func",
    "csp_create_func",
    "csp_query_func",
    "csp_free_func",
    "ep_common_connect_func",
    "rmr_create_for_ep_func",
    "ep_post_send_with_invalidate_func",
    "ep_post_rdma_read_to_rmr_func",
    "cno_fd_create_func",
    "cno_trigger_func",
    "ia_ha_related_func",
    "handle_extendedop_func",
];
