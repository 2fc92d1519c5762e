//! Checks every `#[repr(C)]` type of `dat_capi::abi` against the Debian `dat2` headers: size,
//! alignment and the offset of every field, as printed by `csrc/layout.c` (compiled by
//! build.rs with the `cc` crate's compiler). Reference 4.3 / 2.6 numbers are cross-checked.

use std::collections::HashMap;
use std::mem::{align_of, offset_of, size_of};

#[allow(unused_imports)]
use dat_capi::abi::*;

fn c_layout() -> HashMap<String, (usize, usize)> {
    let built = env!("DATCAPI_LAYOUT");
    let Some(path) = built.strip_prefix("ok:") else {
        panic!("the layout program was not built (install libdapl-dev): {built}");
    };
    let out = std::process::Command::new(path)
        .output()
        .expect("run the layout program");
    assert!(out.status.success());
    let mut m = HashMap::new();
    for line in String::from_utf8(out.stdout).expect("utf-8").lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["S", name, size, align] => {
                m.insert(
                    (*name).to_owned(),
                    (size.parse().expect("size"), align.parse().expect("align")),
                );
            }
            ["F", name, off] => {
                m.insert((*name).to_owned(), (off.parse().expect("offset"), 0));
            }
            _ => panic!("unexpected line {line}"),
        }
    }
    m
}

macro_rules! layout_table {
    ($($c:ident => $r:ty { $($cf:ident => $rf:ident),* $(,)? }),* $(,)?) => {
        fn rust_layout() -> HashMap<String, (usize, usize)> {
            let mut m = HashMap::new();
            $(
                m.insert(stringify!($c).to_owned(), (size_of::<$r>(), align_of::<$r>()));
                $(
                    m.insert(
                        format!("{}.{}", stringify!($c), stringify!($cf)),
                        (offset_of!($r, $rf), 0),
                    );
                )*
            )*
            m
        }
    };
}

// Generated with csrc/layout.c from the same list: (C name, Rust type, [(C field, Rust field)]).
layout_table! {
    DAT_CONTEXT => DatContext { as_ptr => as_ptr, as_64 => as_64, as_index => as_index },
    DAT_NAMED_ATTR => DatNamedAttr { name => name, value => value },
    DAT_LMR_TRIPLET => DatLmrTriplet { virtual_address => virtual_address, segment_length => segment_length, lmr_context => lmr_context },
    DAT_RMR_TRIPLET => DatRmrTriplet { virtual_address => virtual_address, segment_length => segment_length, rmr_context => rmr_context },
    DAT_COMM => DatComm { domain => domain, type => type_, protocol => protocol },
    DAT_PROVIDER_INFO => DatProviderInfo { ia_name => ia_name, dapl_version_major => dapl_version_major, dapl_version_minor => dapl_version_minor, is_thread_safe => is_thread_safe },
    DAT_IA_ATTR => DatIaAttr { adapter_name => adapter_name, vendor_name => vendor_name, hardware_version_major => hardware_version_major, hardware_version_minor => hardware_version_minor, firmware_version_major => firmware_version_major, firmware_version_minor => firmware_version_minor, ia_address_ptr => ia_address_ptr, max_eps => max_eps, max_dto_per_ep => max_dto_per_ep, max_rdma_read_per_ep_in => max_rdma_read_per_ep_in, max_rdma_read_per_ep_out => max_rdma_read_per_ep_out, max_evds => max_evds, max_evd_qlen => max_evd_qlen, max_iov_segments_per_dto => max_iov_segments_per_dto, max_lmrs => max_lmrs, max_lmr_block_size => max_lmr_block_size, max_lmr_virtual_address => max_lmr_virtual_address, max_pzs => max_pzs, max_message_size => max_message_size, max_rdma_size => max_rdma_size, max_rmrs => max_rmrs, max_rmr_target_address => max_rmr_target_address, max_srqs => max_srqs, max_ep_per_srq => max_ep_per_srq, max_recv_per_srq => max_recv_per_srq, max_iov_segments_per_rdma_read => max_iov_segments_per_rdma_read, max_iov_segments_per_rdma_write => max_iov_segments_per_rdma_write, max_rdma_read_in => max_rdma_read_in, max_rdma_read_out => max_rdma_read_out, max_rdma_read_per_ep_in_guaranteed => max_rdma_read_per_ep_in_guaranteed, max_rdma_read_per_ep_out_guaranteed => max_rdma_read_per_ep_out_guaranteed, zb_supported => zb_supported, extension_supported => extension_supported, extension_version => extension_version, num_transport_attr => num_transport_attr, transport_attr => transport_attr, num_vendor_attr => num_vendor_attr, vendor_attr => vendor_attr },
    DAT_PROVIDER_ATTR => DatProviderAttr { provider_name => provider_name, provider_version_major => provider_version_major, provider_version_minor => provider_version_minor, dapl_version_major => dapl_version_major, dapl_version_minor => dapl_version_minor, lmr_mem_types_supported => lmr_mem_types_supported, iov_ownership_on_return => iov_ownership_on_return, dat_qos_supported => dat_qos_supported, completion_flags_supported => completion_flags_supported, is_thread_safe => is_thread_safe, max_private_data_size => max_private_data_size, supports_multipath => supports_multipath, ep_creator => ep_creator, pz_support => pz_support, optimal_buffer_alignment => optimal_buffer_alignment, evd_stream_merging_supported => evd_stream_merging_supported, srq_supported => srq_supported, srq_watermarks_supported => srq_watermarks_supported, srq_ep_pz_difference_supported => srq_ep_pz_difference_supported, srq_info_supported => srq_info_supported, ep_recv_info_supported => ep_recv_info_supported, lmr_sync_req => lmr_sync_req, dto_async_return_guaranteed => dto_async_return_guaranteed, rdma_write_for_rdma_read_req => rdma_write_for_rdma_read_req, rdma_read_lmr_rmr_context_exposure => rdma_read_lmr_rmr_context_exposure, rmr_scope_supported => rmr_scope_supported, is_signal_safe => is_signal_safe, ha_supported => ha_supported, ha_loadbalancing => ha_loadbalancing, num_provider_specific_attr => num_provider_specific_attr, provider_specific_attr => provider_specific_attr },
    DAT_EP_ATTR => DatEpAttr { service_type => service_type, max_message_size => max_message_size, max_rdma_size => max_rdma_size, qos => qos, recv_completion_flags => recv_completion_flags, request_completion_flags => request_completion_flags, max_recv_dtos => max_recv_dtos, max_request_dtos => max_request_dtos, max_recv_iov => max_recv_iov, max_request_iov => max_request_iov, max_rdma_read_in => max_rdma_read_in, max_rdma_read_out => max_rdma_read_out, srq_soft_hw => srq_soft_hw, max_rdma_read_iov => max_rdma_read_iov, max_rdma_write_iov => max_rdma_write_iov, ep_transport_specific_count => ep_transport_specific_count, ep_transport_specific => ep_transport_specific, ep_provider_specific_count => ep_provider_specific_count, ep_provider_specific => ep_provider_specific },
    DAT_EP_PARAM => DatEpParam { ia_handle => ia_handle, ep_state => ep_state, comm => comm, local_ia_address_ptr => local_ia_address_ptr, local_port_qual => local_port_qual, remote_ia_address_ptr => remote_ia_address_ptr, remote_port_qual => remote_port_qual, pz_handle => pz_handle, recv_evd_handle => recv_evd_handle, request_evd_handle => request_evd_handle, connect_evd_handle => connect_evd_handle, srq_handle => srq_handle, ep_attr => ep_attr },
    DAT_SRQ_ATTR => DatSrqAttr { max_recv_dtos => max_recv_dtos, max_recv_iov => max_recv_iov, low_watermark => low_watermark },
    DAT_SRQ_PARAM => DatSrqParam { ia_handle => ia_handle, srq_state => srq_state, pz_handle => pz_handle, max_recv_dtos => max_recv_dtos, max_recv_iov => max_recv_iov, low_watermark => low_watermark, available_dto_count => available_dto_count, outstanding_dto_count => outstanding_dto_count },
    DAT_SHARED_MEMORY => DatSharedMemory { virtual_address => virtual_address, shared_memory_id => shared_memory_id },
    DAT_REGION_DESCRIPTION => DatRegionDescription { for_va => for_va, for_lmr_handle => for_lmr_handle, for_shared_memory => for_shared_memory },
    DAT_OS_WAIT_PROXY_AGENT => DatOsWaitProxyAgent { instance_data => instance_data, proxy_agent_func => proxy_agent_func },
    DAT_LMR_PARAM => DatLmrParam { ia_handle => ia_handle, mem_type => mem_type, region_desc => region_desc, length => length, pz_handle => pz_handle, mem_priv => mem_priv, va_type => va_type, lmr_context => lmr_context, rmr_context => rmr_context, registered_size => registered_size, registered_address => registered_address },
    DAT_RMR_PARAM => DatRmrParam { ia_handle => ia_handle, pz_handle => pz_handle, lmr_triplet => lmr_triplet, mem_priv => mem_priv, rmr_context => rmr_context, rmr_scope => rmr_scope, va_type => va_type },
    DAT_EVD_PARAM => DatEvdParam { ia_handle => ia_handle, evd_qlen => evd_qlen, evd_state => evd_state, cno_handle => cno_handle, evd_flags => evd_flags },
    DAT_CNO_PARAM => DatCnoParam { ia_handle => ia_handle, proxy_type => proxy_type, proxy => proxy },
    DAT_CR_PARAM => DatCrParam { remote_ia_address_ptr => remote_ia_address_ptr, remote_port_qual => remote_port_qual, private_data_size => private_data_size, private_data => private_data, local_ep_handle => local_ep_handle },
    DAT_PZ_PARAM => DatPzParam { ia_handle => ia_handle },
    DAT_PSP_PARAM => DatPspParam { ia_handle => ia_handle, conn_qual => conn_qual, evd_handle => evd_handle, psp_flags => psp_flags },
    DAT_RSP_PARAM => DatRspParam { ia_handle => ia_handle, conn_qual => conn_qual, evd_handle => evd_handle, ep_handle => ep_handle },
    DAT_DTO_COMPLETION_EVENT_DATA => DatDtoCompletionEventData { ep_handle => ep_handle, user_cookie => user_cookie, status => status, transfered_length => transfered_length, operation => operation, rmr_context => rmr_context },
    DAT_RMR_BIND_COMPLETION_EVENT_DATA => DatRmrBindCompletionEventData { rmr_handle => rmr_handle, user_cookie => user_cookie, status => status },
    DAT_SP_HANDLE => DatSpHandle { rsp_handle => rsp_handle, psp_handle => psp_handle, csp_handle => csp_handle },
    DAT_CR_ARRIVAL_EVENT_DATA => DatCrArrivalEventData { sp_handle => sp_handle, local_ia_address_ptr => local_ia_address_ptr, conn_qual => conn_qual, cr_handle => cr_handle, truncate_flag => truncate_flag },
    DAT_CONNECTION_EVENT_DATA => DatConnectionEventData { ep_handle => ep_handle, private_data_size => private_data_size, private_data => private_data },
    DAT_ASYNCH_ERROR_EVENT_DATA => DatAsynchErrorEventData { dat_handle => dat_handle, reason => reason },
    DAT_SOFTWARE_EVENT_DATA => DatSoftwareEventData { pointer => pointer },
    DAT_EVENT_DATA => DatEventData { dto_completion_event_data => dto_completion_event_data, rmr_completion_event_data => rmr_completion_event_data, cr_arrival_event_data => cr_arrival_event_data, connect_event_data => connect_event_data, asynch_error_event_data => asynch_error_event_data, software_event_data => software_event_data },
    DAT_EVENT => DatEvent { event_number => event_number, evd_handle => evd_handle, event_data => event_data, event_extension_data => event_extension_data },
    DAT_PROVIDER => DatProvider { device_name => device_name, extension => extension, ia_open_func => ia_open_func, ia_query_func => ia_query_func, ia_close_func => ia_close_func, set_consumer_context_func => set_consumer_context_func, get_consumer_context_func => get_consumer_context_func, get_handle_type_func => get_handle_type_func, cno_create_func => cno_create_func, cno_modify_agent_func => cno_modify_agent_func, cno_query_func => cno_query_func, cno_free_func => cno_free_func, cno_wait_func => cno_wait_func, cr_query_func => cr_query_func, cr_accept_func => cr_accept_func, cr_reject_func => cr_reject_func, cr_handoff_func => cr_handoff_func, evd_create_func => evd_create_func, evd_query_func => evd_query_func, evd_modify_cno_func => evd_modify_cno_func, evd_enable_func => evd_enable_func, evd_disable_func => evd_disable_func, evd_wait_func => evd_wait_func, evd_resize_func => evd_resize_func, evd_post_se_func => evd_post_se_func, evd_dequeue_func => evd_dequeue_func, evd_free_func => evd_free_func, ep_create_func => ep_create_func, ep_query_func => ep_query_func, ep_modify_func => ep_modify_func, ep_connect_func => ep_connect_func, ep_dup_connect_func => ep_dup_connect_func, ep_disconnect_func => ep_disconnect_func, ep_post_send_func => ep_post_send_func, ep_post_recv_func => ep_post_recv_func, ep_post_rdma_read_func => ep_post_rdma_read_func, ep_post_rdma_write_func => ep_post_rdma_write_func, ep_get_status_func => ep_get_status_func, ep_free_func => ep_free_func, lmr_create_func => lmr_create_func, lmr_query_func => lmr_query_func, lmr_free_func => lmr_free_func, rmr_create_func => rmr_create_func, rmr_query_func => rmr_query_func, rmr_bind_func => rmr_bind_func, rmr_free_func => rmr_free_func, psp_create_func => psp_create_func, psp_query_func => psp_query_func, psp_free_func => psp_free_func, rsp_create_func => rsp_create_func, rsp_query_func => rsp_query_func, rsp_free_func => rsp_free_func, pz_create_func => pz_create_func, pz_query_func => pz_query_func, pz_free_func => pz_free_func, psp_create_any_func => psp_create_any_func, ep_reset_func => ep_reset_func, evd_set_unwaitable_func => evd_set_unwaitable_func, evd_clear_unwaitable_func => evd_clear_unwaitable_func, lmr_sync_rdma_read_func => lmr_sync_rdma_read_func, lmr_sync_rdma_write_func => lmr_sync_rdma_write_func, ep_create_with_srq_func => ep_create_with_srq_func, ep_recv_query_func => ep_recv_query_func, ep_set_watermark_func => ep_set_watermark_func, srq_create_func => srq_create_func, srq_free_func => srq_free_func, srq_post_recv_func => srq_post_recv_func, srq_query_func => srq_query_func, srq_resize_func => srq_resize_func, srq_set_lw_func => srq_set_lw_func, csp_create_func => csp_create_func, csp_query_func => csp_query_func, csp_free_func => csp_free_func, ep_common_connect_func => ep_common_connect_func, rmr_create_for_ep_func => rmr_create_for_ep_func, ep_post_send_with_invalidate_func => ep_post_send_with_invalidate_func, ep_post_rdma_read_to_rmr_func => ep_post_rdma_read_to_rmr_func, cno_fd_create_func => cno_fd_create_func, cno_trigger_func => cno_trigger_func, ia_ha_related_func => ia_ha_related_func, handle_extendedop_func => handle_extendedop_func },
}

#[test]
fn every_struct_and_field_matches_the_debian_headers() {
    let c = c_layout();
    let r = rust_layout();
    let mut bad = Vec::new();
    for (k, v) in &c {
        match r.get(k) {
            Some(rv) if rv == v => {}
            other => bad.push(format!("{k}: C {v:?}, Rust {other:?}")),
        }
    }
    for k in r.keys() {
        if !c.contains_key(k) {
            bad.push(format!("{k}: missing from the C list"));
        }
    }
    bad.sort();
    assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    assert!(c.len() > 300, "only {} entries checked", c.len());
}

#[test]
fn reference_numbers_cross_check() {
    assert_eq!(size_of::<DatProvider>(), 648);
    assert_eq!(offset_of!(DatProvider, handle_extendedop_func), 8 * 80);
    assert_eq!(offset_of!(DatProvider, ia_open_func), 16);
    assert_eq!(size_of::<DatProviderInfo>(), 268);
    assert_eq!(size_of::<DatIaAttr>(), 688);
    assert_eq!(offset_of!(DatIaAttr, ia_address_ptr), 528);
    assert_eq!(offset_of!(DatIaAttr, extension_supported), 648);
    assert_eq!(size_of::<DatProviderAttr>(), 520);
    assert_eq!(offset_of!(DatProviderAttr, dapl_version_major), 264);
    assert_eq!(offset_of!(DatProviderAttr, is_thread_safe), 288);
    assert_eq!(offset_of!(DatProviderAttr, max_private_data_size), 292);
    assert_eq!(
        offset_of!(DatProviderAttr, evd_stream_merging_supported),
        312
    );
    assert_eq!(offset_of!(DatProviderAttr, num_provider_specific_attr), 508);
    assert_eq!(offset_of!(DatProviderAttr, provider_specific_attr), 512);
    assert_eq!(size_of::<DatEpAttr>(), 88);
    assert_eq!(size_of::<DatEpParam>(), 184);
    assert_eq!(offset_of!(DatEpParam, ep_state), 8);
    assert_eq!(offset_of!(DatEpParam, local_ia_address_ptr), 24);
    assert_eq!(offset_of!(DatEpParam, ep_attr), 96);
    assert_eq!(size_of::<DatLmrParam>(), 80);
    assert_eq!(size_of::<DatRmrParam>(), 48);
    assert_eq!(size_of::<DatEvdParam>(), 32);
    assert_eq!(size_of::<DatCrParam>(), 40);
    assert_eq!(offset_of!(DatCrParam, private_data_size), 16);
    assert_eq!(offset_of!(DatCrParam, private_data), 24);
    assert_eq!(offset_of!(DatCrParam, local_ep_handle), 32);
    assert_eq!(size_of::<DatSrqAttr>(), 12);
    assert_eq!(size_of::<DatSrqParam>(), 48);
    assert_eq!(size_of::<DatCnoParam>(), 32);
    assert_eq!(size_of::<DatEvent>(), 120);
    assert_eq!(offset_of!(DatEvent, event_data), 16);
    assert_eq!(offset_of!(DatEvent, event_extension_data), 56);
    assert_eq!(size_of::<DatRegionDescription>(), 16);
    assert_eq!(size_of::<DatOsWaitProxyAgent>(), 16);
    assert_eq!(size_of::<DatContext>(), 8);
    assert_eq!(SLOT_NAMES.len(), 79);
}
