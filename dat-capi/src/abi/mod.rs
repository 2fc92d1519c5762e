//! `#[repr(C)]` mirrors of the Debian `dat2/*.h` types (LP64), hand-written and checked field
//! by field against the headers by `tests/layout.rs`.
//!
//! Names follow Rust conventions; each item's documentation names its C type.

mod attr;
mod event;
mod param;
mod provider;

use std::ffi::c_void;

pub use attr::{DatEpAttr, DatEpParam, DatIaAttr, DatProviderAttr, DatSrqAttr, DatSrqParam};
pub use event::{
    DatAsynchErrorEventData, DatConnectionEventData, DatCrArrivalEventData,
    DatDtoCompletionEventData, DatEvent, DatEventData, DatRmrBindCompletionEventData,
    DatSoftwareEventData, DatSpHandle,
};
pub use param::{
    DatAgentFunc, DatCnoParam, DatCnoProxy, DatCrParam, DatEvdParam, DatLmrParam,
    DatOsWaitProxyAgent, DatPspParam, DatPzParam, DatRegionDescription, DatRmrParam, DatRspParam,
    DatSharedMemory,
};
pub use provider::{DatProvider, SLOT_NAMES};

/// `DAT_RETURN`.
pub type DatReturn = u32;
/// `DAT_HANDLE` (and every typed handle).
pub type DatHandle = *mut c_void;
/// `DAT_COUNT`.
pub type DatCount = i32;
/// `DAT_BOOLEAN`.
pub type DatBoolean = u32;
/// `DAT_TIMEOUT` (microseconds).
pub type DatTimeout = u32;
/// `DAT_IA_ADDRESS_PTR` (`struct sockaddr *`).
pub type DatIaAddressPtr = *mut libc::sockaddr;
/// `DAT_FD`.
pub type DatFd = i32;

/// `DAT_FALSE`.
pub const DAT_FALSE: DatBoolean = 0;
/// `DAT_TRUE`.
pub const DAT_TRUE: DatBoolean = 1;
/// `DAT_NAME_MAX_LENGTH`.
pub const DAT_NAME_MAX_LENGTH: usize = 256;

/// `DAT_CONTEXT` (also `DAT_DTO_COOKIE`, `DAT_RMR_COOKIE`): passed by value as one
/// INTEGER-class eightbyte.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DatContext {
    /// `as_ptr`.
    pub as_ptr: *mut c_void,
    /// `as_64`.
    pub as_64: u64,
    /// `as_index`.
    pub as_index: u64,
}

impl DatContext {
    /// The context holding `v`.
    pub fn from_u64(v: u64) -> DatContext {
        DatContext { as_64: v }
    }

    /// The 64 bits of the context.
    pub fn value(self) -> u64 {
        // SAFETY: every member is 8 plain bytes; reading them as u64 is always defined.
        unsafe { self.as_64 }
    }
}

/// `DAT_NAMED_ATTR`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatNamedAttr {
    /// `name`.
    pub name: *const libc::c_char,
    /// `value`.
    pub value: *const libc::c_char,
}

/// `DAT_LMR_TRIPLET` (the `dat` type is already bit-identical).
pub type DatLmrTriplet = dat::types::LmrTriplet;
/// `DAT_RMR_TRIPLET` (the `dat` type is already bit-identical).
pub type DatRmrTriplet = dat::types::RmrTriplet;

/// `DAT_COMM`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct DatComm {
    /// `domain`.
    pub domain: i32,
    /// `type`.
    pub type_: i32,
    /// `protocol`.
    pub protocol: i32,
}

/// `DAT_PROVIDER_INFO`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatProviderInfo {
    /// `ia_name` (NUL-terminated).
    pub ia_name: [libc::c_char; DAT_NAME_MAX_LENGTH],
    /// `dapl_version_major`.
    pub dapl_version_major: u32,
    /// `dapl_version_minor`.
    pub dapl_version_minor: u32,
    /// `is_thread_safe`.
    pub is_thread_safe: DatBoolean,
}

/// `DAT_HANDLE_TYPE` values.
pub mod handle_type {
    /// `DAT_HANDLE_TYPE_CR`.
    pub const CR: u32 = 0;
    /// `DAT_HANDLE_TYPE_EP`.
    pub const EP: u32 = 1;
    /// `DAT_HANDLE_TYPE_EVD`.
    pub const EVD: u32 = 2;
    /// `DAT_HANDLE_TYPE_IA`.
    pub const IA: u32 = 3;
    /// `DAT_HANDLE_TYPE_LMR`.
    pub const LMR: u32 = 4;
    /// `DAT_HANDLE_TYPE_PSP`.
    pub const PSP: u32 = 5;
    /// `DAT_HANDLE_TYPE_PZ`.
    pub const PZ: u32 = 6;
    /// `DAT_HANDLE_TYPE_RMR`.
    pub const RMR: u32 = 7;
    /// `DAT_HANDLE_TYPE_RSP`.
    pub const RSP: u32 = 8;
    /// `DAT_HANDLE_TYPE_CNO`.
    pub const CNO: u32 = 9;
    /// `DAT_HANDLE_TYPE_SRQ`.
    pub const SRQ: u32 = 10;
    /// `DAT_HANDLE_TYPE_CSP`.
    pub const CSP: u32 = 11;
}
