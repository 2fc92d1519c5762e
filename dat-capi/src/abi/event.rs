//! `DAT_EVENT` and the members of its `event_data` union.

use std::ffi::c_void;

use super::{DatBoolean, DatContext, DatCount, DatHandle, DatIaAddressPtr};

/// `DAT_DTO_COMPLETION_EVENT_DATA` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatDtoCompletionEventData {
    /// `ep_handle`.
    pub ep_handle: DatHandle,
    /// `user_cookie`.
    pub user_cookie: DatContext,
    /// `status`.
    pub status: u32,
    /// `transfered_length` (sic).
    pub transfered_length: u32,
    /// `operation`.
    pub operation: u32,
    /// `rmr_context`.
    pub rmr_context: u32,
}

/// `DAT_RMR_BIND_COMPLETION_EVENT_DATA` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatRmrBindCompletionEventData {
    /// `rmr_handle`.
    pub rmr_handle: DatHandle,
    /// `user_cookie`.
    pub user_cookie: DatContext,
    /// `status`.
    pub status: u32,
}

/// `DAT_SP_HANDLE`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DatSpHandle {
    /// `rsp_handle`.
    pub rsp_handle: DatHandle,
    /// `psp_handle`.
    pub psp_handle: DatHandle,
    /// `csp_handle`.
    pub csp_handle: DatHandle,
}

/// `DAT_CR_ARRIVAL_EVENT_DATA` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatCrArrivalEventData {
    /// `sp_handle`.
    pub sp_handle: DatSpHandle,
    /// `local_ia_address_ptr`.
    pub local_ia_address_ptr: DatIaAddressPtr,
    /// `conn_qual`.
    pub conn_qual: u64,
    /// `cr_handle`.
    pub cr_handle: DatHandle,
    /// `truncate_flag`.
    pub truncate_flag: DatBoolean,
}

/// `DAT_CONNECTION_EVENT_DATA` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatConnectionEventData {
    /// `ep_handle`.
    pub ep_handle: DatHandle,
    /// `private_data_size`.
    pub private_data_size: DatCount,
    /// `private_data`.
    pub private_data: *mut c_void,
}

/// `DAT_ASYNCH_ERROR_EVENT_DATA` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatAsynchErrorEventData {
    /// `dat_handle`.
    pub dat_handle: DatHandle,
    /// `reason`.
    pub reason: DatCount,
}

/// `DAT_SOFTWARE_EVENT_DATA` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatSoftwareEventData {
    /// `pointer`.
    pub pointer: *mut c_void,
}

/// `DAT_EVENT_DATA` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DatEventData {
    /// `dto_completion_event_data`.
    pub dto_completion_event_data: DatDtoCompletionEventData,
    /// `rmr_completion_event_data`.
    pub rmr_completion_event_data: DatRmrBindCompletionEventData,
    /// `cr_arrival_event_data`.
    pub cr_arrival_event_data: DatCrArrivalEventData,
    /// `connect_event_data`.
    pub connect_event_data: DatConnectionEventData,
    /// `asynch_error_event_data`.
    pub asynch_error_event_data: DatAsynchErrorEventData,
    /// `software_event_data`.
    pub software_event_data: DatSoftwareEventData,
}

/// `DAT_EVENT` (120 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatEvent {
    /// `event_number`.
    pub event_number: u32,
    /// `evd_handle`.
    pub evd_handle: DatHandle,
    /// `event_data`.
    pub event_data: DatEventData,
    /// `event_extension_data[8]`.
    pub event_extension_data: [u64; 8],
}
