//! Attribute and parameter structs of IAs, providers, endpoints and SRQs.

use super::{
    DAT_NAME_MAX_LENGTH, DatBoolean, DatComm, DatCount, DatHandle, DatIaAddressPtr, DatNamedAttr,
};

/// `DAT_IA_ATTR` (688 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatIaAttr {
    /// `adapter_name`.
    pub adapter_name: [libc::c_char; DAT_NAME_MAX_LENGTH],
    /// `vendor_name`.
    pub vendor_name: [libc::c_char; DAT_NAME_MAX_LENGTH],
    /// `hardware_version_major`.
    pub hardware_version_major: u32,
    /// `hardware_version_minor`.
    pub hardware_version_minor: u32,
    /// `firmware_version_major`.
    pub firmware_version_major: u32,
    /// `firmware_version_minor`.
    pub firmware_version_minor: u32,
    /// `ia_address_ptr`.
    pub ia_address_ptr: DatIaAddressPtr,
    /// `max_eps`.
    pub max_eps: DatCount,
    /// `max_dto_per_ep`.
    pub max_dto_per_ep: DatCount,
    /// `max_rdma_read_per_ep_in`.
    pub max_rdma_read_per_ep_in: DatCount,
    /// `max_rdma_read_per_ep_out`.
    pub max_rdma_read_per_ep_out: DatCount,
    /// `max_evds`.
    pub max_evds: DatCount,
    /// `max_evd_qlen`.
    pub max_evd_qlen: DatCount,
    /// `max_iov_segments_per_dto`.
    pub max_iov_segments_per_dto: DatCount,
    /// `max_lmrs`.
    pub max_lmrs: DatCount,
    /// `max_lmr_block_size` (`DAT_SEG_LENGTH`).
    pub max_lmr_block_size: u32,
    /// `max_lmr_virtual_address`.
    pub max_lmr_virtual_address: u64,
    /// `max_pzs`.
    pub max_pzs: DatCount,
    /// `max_message_size` (`DAT_SEG_LENGTH`).
    pub max_message_size: u32,
    /// `max_rdma_size` (`DAT_SEG_LENGTH`).
    pub max_rdma_size: u32,
    /// `max_rmrs`.
    pub max_rmrs: DatCount,
    /// `max_rmr_target_address`.
    pub max_rmr_target_address: u64,
    /// `max_srqs`.
    pub max_srqs: DatCount,
    /// `max_ep_per_srq`.
    pub max_ep_per_srq: DatCount,
    /// `max_recv_per_srq`.
    pub max_recv_per_srq: DatCount,
    /// `max_iov_segments_per_rdma_read`.
    pub max_iov_segments_per_rdma_read: DatCount,
    /// `max_iov_segments_per_rdma_write`.
    pub max_iov_segments_per_rdma_write: DatCount,
    /// `max_rdma_read_in`.
    pub max_rdma_read_in: DatCount,
    /// `max_rdma_read_out`.
    pub max_rdma_read_out: DatCount,
    /// `max_rdma_read_per_ep_in_guaranteed`.
    pub max_rdma_read_per_ep_in_guaranteed: DatBoolean,
    /// `max_rdma_read_per_ep_out_guaranteed`.
    pub max_rdma_read_per_ep_out_guaranteed: DatBoolean,
    /// `zb_supported`.
    pub zb_supported: DatBoolean,
    /// `extension_supported` (`DAT_EXTENSION`).
    pub extension_supported: u32,
    /// `extension_version`.
    pub extension_version: DatCount,
    /// `num_transport_attr`.
    pub num_transport_attr: DatCount,
    /// `transport_attr`.
    pub transport_attr: *mut DatNamedAttr,
    /// `num_vendor_attr`.
    pub num_vendor_attr: DatCount,
    /// `vendor_attr`.
    pub vendor_attr: *mut DatNamedAttr,
}

/// `DAT_PROVIDER_ATTR` (520 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatProviderAttr {
    /// `provider_name`.
    pub provider_name: [libc::c_char; DAT_NAME_MAX_LENGTH],
    /// `provider_version_major`.
    pub provider_version_major: u32,
    /// `provider_version_minor`.
    pub provider_version_minor: u32,
    /// `dapl_version_major`.
    pub dapl_version_major: u32,
    /// `dapl_version_minor`.
    pub dapl_version_minor: u32,
    /// `lmr_mem_types_supported` (`DAT_MEM_TYPE`).
    pub lmr_mem_types_supported: u32,
    /// `iov_ownership_on_return`.
    pub iov_ownership_on_return: u32,
    /// `dat_qos_supported`.
    pub dat_qos_supported: u32,
    /// `completion_flags_supported`.
    pub completion_flags_supported: u32,
    /// `is_thread_safe`.
    pub is_thread_safe: DatBoolean,
    /// `max_private_data_size`.
    pub max_private_data_size: DatCount,
    /// `supports_multipath`.
    pub supports_multipath: DatBoolean,
    /// `ep_creator` (`DAT_EP_CREATOR_FOR_PSP`).
    pub ep_creator: u32,
    /// `pz_support` (`DAT_PZ_SUPPORT`).
    pub pz_support: u32,
    /// `optimal_buffer_alignment`.
    pub optimal_buffer_alignment: u32,
    /// `evd_stream_merging_supported[6][6]`.
    pub evd_stream_merging_supported: [[DatBoolean; 6]; 6],
    /// `srq_supported`.
    pub srq_supported: DatBoolean,
    /// `srq_watermarks_supported`.
    pub srq_watermarks_supported: DatCount,
    /// `srq_ep_pz_difference_supported`.
    pub srq_ep_pz_difference_supported: DatBoolean,
    /// `srq_info_supported`.
    pub srq_info_supported: DatCount,
    /// `ep_recv_info_supported`.
    pub ep_recv_info_supported: DatCount,
    /// `lmr_sync_req`.
    pub lmr_sync_req: DatBoolean,
    /// `dto_async_return_guaranteed`.
    pub dto_async_return_guaranteed: DatBoolean,
    /// `rdma_write_for_rdma_read_req`.
    pub rdma_write_for_rdma_read_req: DatBoolean,
    /// `rdma_read_lmr_rmr_context_exposure`.
    pub rdma_read_lmr_rmr_context_exposure: DatBoolean,
    /// `rmr_scope_supported` (`DAT_RMR_SCOPE`).
    pub rmr_scope_supported: u32,
    /// `is_signal_safe`.
    pub is_signal_safe: DatBoolean,
    /// `ha_supported`.
    pub ha_supported: DatBoolean,
    /// `ha_loadbalancing` (`DAT_HA_LB`).
    pub ha_loadbalancing: u32,
    /// `num_provider_specific_attr`.
    pub num_provider_specific_attr: DatCount,
    /// `provider_specific_attr`.
    pub provider_specific_attr: *mut DatNamedAttr,
}

/// `DAT_EP_ATTR` (88 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatEpAttr {
    /// `service_type`.
    pub service_type: u32,
    /// `max_message_size` (`DAT_SEG_LENGTH`).
    pub max_message_size: u32,
    /// `max_rdma_size` (`DAT_SEG_LENGTH`).
    pub max_rdma_size: u32,
    /// `qos`.
    pub qos: u32,
    /// `recv_completion_flags`.
    pub recv_completion_flags: u32,
    /// `request_completion_flags`.
    pub request_completion_flags: u32,
    /// `max_recv_dtos`.
    pub max_recv_dtos: DatCount,
    /// `max_request_dtos`.
    pub max_request_dtos: DatCount,
    /// `max_recv_iov`.
    pub max_recv_iov: DatCount,
    /// `max_request_iov`.
    pub max_request_iov: DatCount,
    /// `max_rdma_read_in`.
    pub max_rdma_read_in: DatCount,
    /// `max_rdma_read_out`.
    pub max_rdma_read_out: DatCount,
    /// `srq_soft_hw`.
    pub srq_soft_hw: DatCount,
    /// `max_rdma_read_iov`.
    pub max_rdma_read_iov: DatCount,
    /// `max_rdma_write_iov`.
    pub max_rdma_write_iov: DatCount,
    /// `ep_transport_specific_count`.
    pub ep_transport_specific_count: DatCount,
    /// `ep_transport_specific`.
    pub ep_transport_specific: *mut DatNamedAttr,
    /// `ep_provider_specific_count`.
    pub ep_provider_specific_count: DatCount,
    /// `ep_provider_specific`.
    pub ep_provider_specific: *mut DatNamedAttr,
}

/// `DAT_EP_PARAM` (184 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatEpParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `ep_state` (`DAT_EP_STATE`).
    pub ep_state: u32,
    /// `comm`.
    pub comm: DatComm,
    /// `local_ia_address_ptr`.
    pub local_ia_address_ptr: DatIaAddressPtr,
    /// `local_port_qual`.
    pub local_port_qual: u64,
    /// `remote_ia_address_ptr`.
    pub remote_ia_address_ptr: DatIaAddressPtr,
    /// `remote_port_qual`.
    pub remote_port_qual: u64,
    /// `pz_handle`.
    pub pz_handle: DatHandle,
    /// `recv_evd_handle`.
    pub recv_evd_handle: DatHandle,
    /// `request_evd_handle`.
    pub request_evd_handle: DatHandle,
    /// `connect_evd_handle`.
    pub connect_evd_handle: DatHandle,
    /// `srq_handle`.
    pub srq_handle: DatHandle,
    /// `ep_attr`.
    pub ep_attr: DatEpAttr,
}

/// `DAT_SRQ_ATTR` (12 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatSrqAttr {
    /// `max_recv_dtos`.
    pub max_recv_dtos: DatCount,
    /// `max_recv_iov`.
    pub max_recv_iov: DatCount,
    /// `low_watermark`.
    pub low_watermark: DatCount,
}

/// `DAT_SRQ_PARAM` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct DatSrqParam {
    /// `ia_handle`.
    pub ia_handle: DatHandle,
    /// `srq_state` (`DAT_SRQ_STATE`).
    pub srq_state: u32,
    /// `pz_handle`.
    pub pz_handle: DatHandle,
    /// `max_recv_dtos`.
    pub max_recv_dtos: DatCount,
    /// `max_recv_iov`.
    pub max_recv_iov: DatCount,
    /// `low_watermark`.
    pub low_watermark: DatCount,
    /// `available_dto_count`.
    pub available_dto_count: DatCount,
    /// `outstanding_dto_count`.
    pub outstanding_dto_count: DatCount,
}
