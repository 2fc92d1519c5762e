//! Parameter structs of LMRs, RMRs, EVDs, CNOs, CRs, PZs and service points, and the
//! by-value unions `DAT_REGION_DESCRIPTION` and `DAT_OS_WAIT_PROXY_AGENT`.

use std::ffi::c_void;

use super::{DatCount, DatFd, DatHandle, DatIaAddressPtr, DatLmrTriplet};

/// `DAT_SHARED_MEMORY`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatSharedMemory {
    /// `virtual_address`.
    pub virtual_address: *mut c_void,
    /// `shared_memory_id` (`DAT_LMR_COOKIE`, a pointer to 40 chars).
    pub shared_memory_id: *mut c_void,
}

/// `DAT_REGION_DESCRIPTION` (16 bytes, passed by value in two INTEGER registers).
#[repr(C)]
#[derive(Clone, Copy)]
pub union DatRegionDescription {
    /// `for_va`.
    pub for_va: *mut c_void,
    /// `for_lmr_handle`.
    pub for_lmr_handle: DatHandle,
    /// `for_shared_memory`.
    pub for_shared_memory: DatSharedMemory,
}

/// `DAT_AGENT_FUNC`.
pub type DatAgentFunc = Option<unsafe extern "C" fn(*mut c_void, DatHandle)>;

/// `DAT_OS_WAIT_PROXY_AGENT` (16 bytes, passed by value).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatOsWaitProxyAgent {
    /// `instance_data`.
    pub instance_data: *mut c_void,
    /// `proxy_agent_func`.
    pub proxy_agent_func: DatAgentFunc,
}

/// `DAT_LMR_PARAM` (80 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatLmrParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `mem_type`.
    pub mem_type: u32,
    /// `region_desc`.
    pub region_desc: DatRegionDescription,
    /// `length`.
    pub length: u64,
    /// `pz_handle`.
    pub pz_handle: DatHandle,
    /// `mem_priv`.
    pub mem_priv: u32,
    /// `va_type`.
    pub va_type: u32,
    /// `lmr_context`.
    pub lmr_context: u32,
    /// `rmr_context`.
    pub rmr_context: u32,
    /// `registered_size`.
    pub registered_size: u64,
    /// `registered_address`.
    pub registered_address: u64,
}

/// `DAT_RMR_PARAM` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatRmrParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `pz_handle`.
    pub pz_handle: DatHandle,
    /// `lmr_triplet`.
    pub lmr_triplet: DatLmrTriplet,
    /// `mem_priv`.
    pub mem_priv: u32,
    /// `rmr_context`.
    pub rmr_context: u32,
    /// `rmr_scope`.
    pub rmr_scope: u32,
    /// `va_type`.
    pub va_type: u32,
}

/// `DAT_EVD_PARAM` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatEvdParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `evd_qlen`.
    pub evd_qlen: DatCount,
    /// `evd_state`.
    pub evd_state: u32,
    /// `cno_handle`.
    pub cno_handle: DatHandle,
    /// `evd_flags`.
    pub evd_flags: u32,
}

/// The `proxy` union of `DAT_CNO_PARAM`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union DatCnoProxy {
    /// `agent`.
    pub agent: DatOsWaitProxyAgent,
    /// `fd`.
    pub fd: DatFd,
    /// `none`.
    pub none: *mut c_void,
}

/// `DAT_CNO_PARAM` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatCnoParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `proxy_type` (`DAT_PROXY_TYPE`).
    pub proxy_type: u32,
    /// `proxy`.
    pub proxy: DatCnoProxy,
}

/// `DAT_CR_PARAM` (40 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatCrParam {
    /// `remote_ia_address_ptr`.
    pub remote_ia_address_ptr: DatIaAddressPtr,
    /// `remote_port_qual`.
    pub remote_port_qual: u64,
    /// `private_data_size`.
    pub private_data_size: DatCount,
    /// `private_data`.
    pub private_data: *mut c_void,
    /// `local_ep_handle`.
    pub local_ep_handle: DatHandle,
}

/// `DAT_PZ_PARAM`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatPzParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
}

/// `DAT_PSP_PARAM`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatPspParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `conn_qual`.
    pub conn_qual: u64,
    /// `evd_handle`.
    pub evd_handle: DatHandle,
    /// `psp_flags`.
    pub psp_flags: u32,
}

/// `DAT_RSP_PARAM`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatRspParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `conn_qual`.
    pub conn_qual: u64,
    /// `evd_handle`.
    pub evd_handle: DatHandle,
    /// `ep_handle`.
    pub ep_handle: DatHandle,
}
