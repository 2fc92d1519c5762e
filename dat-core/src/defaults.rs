//! Attribute defaults for software providers (TCP emulation, shared memory, the test fabric):
//! generous limits, checked by the core, advertised honestly.

use crate::types::{
    CompletionFlags, IaAddress, IaAttr, IovOwnership, NamedAttr, ProviderAttr, STREAMS,
};

/// Limits of a software IA. Providers start from these and adjust what their transport bounds.
pub fn software_ia_attr(adapter_name: &str, vendor_name: &str, ia_address: IaAddress) -> IaAttr {
    IaAttr {
        adapter_name: adapter_name.to_owned(),
        vendor_name: vendor_name.to_owned(),
        hardware_version: (0, 0),
        firmware_version: (0, 0),
        ia_address,
        max_eps: 65_536,
        max_dto_per_ep: 16_384,
        max_rdma_read_per_ep_in: 64,
        max_rdma_read_per_ep_out: 64,
        max_evds: 65_536,
        max_evd_qlen: 1 << 20,
        max_iov_segments_per_dto: 64,
        max_lmrs: 1 << 20,
        max_lmr_block_size: 1 << 40,
        max_lmr_virtual_address: u64::MAX,
        max_pzs: 65_536,
        max_message_size: 1 << 31,
        max_rdma_size: 1 << 31,
        max_rmrs: 1 << 20,
        max_rmr_target_address: u64::MAX,
        max_srqs: 4096,
        max_ep_per_srq: 65_536,
        max_recv_per_srq: 16_384,
        max_iov_segments_per_rdma_read: 64,
        max_iov_segments_per_rdma_write: 64,
        max_rdma_read_in: 64,
        max_rdma_read_out: 64,
        max_rdma_read_per_ep_in_guaranteed: true,
        max_rdma_read_per_ep_out_guaranteed: true,
        zb_supported: true,
        transport_attr: Vec::new(),
        vendor_attr: Vec::new(),
    }
}

/// Stream merging of software providers: every combination except the async stream with any
/// other (the async EVD is the IA's own), as OFA allows.
pub fn software_stream_merging() -> [[bool; 6]; 6] {
    let mut m = [[true; 6]; 6];
    let async_idx = STREAMS.len() - 1;
    for (i, row) in m.iter_mut().enumerate() {
        for (j, cell) in row.iter_mut().enumerate() {
            if (i == async_idx || j == async_idx) && i != j {
                *cell = false;
            }
        }
    }
    m
}

/// Capabilities of a software provider.
pub fn software_provider_attr(provider_name: &str, max_private_data_size: u32) -> ProviderAttr {
    ProviderAttr {
        provider_name: provider_name.to_owned(),
        provider_version: (0, 1),
        dapl_version: (2, 0),
        is_thread_safe: true,
        max_private_data_size,
        iov_ownership_on_return: IovOwnership::Consumer,
        completion_flags_supported: CompletionFlags::all(),
        psp_provider_flag_supported: true,
        optimal_buffer_alignment: 64,
        evd_stream_merging_supported: software_stream_merging(),
        srq_supported: true,
        srq_ep_pz_difference_supported: false,
        rdma_read_supported: true,
        provider_specific_attr: vec![NamedAttr::new("DAT_IB_RDMA_READ", "TRUE")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EvdFlags, LOOPBACK_ADDRESS};

    #[test]
    fn async_merges_with_nothing_else() {
        let p = software_provider_attr("x", 256);
        assert!(p.streams_may_merge(EvdFlags::DTO | EvdFlags::CONNECTION | EvdFlags::CR));
        assert!(p.streams_may_merge(EvdFlags::ASYNC));
        assert!(!p.streams_may_merge(EvdFlags::ASYNC | EvdFlags::DTO));
        assert!(!p.streams_may_merge(EvdFlags::DEFAULT));
        let a = software_ia_attr("ia", "x", LOOPBACK_ADDRESS);
        assert!(a.max_evd_qlen > 0);
    }
}
