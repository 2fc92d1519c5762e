//! Device and port attributes (`ibv_query_device`, `ibv_query_port`) mapped to `IaAttr` and
//! `ProviderAttr`. The mapping is a pure function of [`DeviceFacts`], tested without a device.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use dat_core::defaults::software_stream_merging;
use dat_core::types::{
    CompletionFlags, IaAttr, IovOwnership, NamedAttr, ProviderAttr, ZB_RMR_ATTR,
};

use crate::params::VerbsParams;

/// Largest private data of a connect, accept or reject: rdma_cm over InfiniBand / RoCE leaves
/// 56 bytes of a REQ after its header (accept and reject allow more, connect is the limit),
/// and the provider's framing takes one of them for the length (see the `cm` module).
pub const MAX_PRIVATE_DATA: u32 = 55;

/// What the IA reports of its device and port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceFacts {
    /// Device name.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// `fw_ver`.
    pub fw_ver: String,
    /// `node_guid` (host order).
    pub node_guid: u64,
    /// `vendor_id`.
    pub vendor_id: u32,
    /// `vendor_part_id`.
    pub vendor_part_id: u32,
    /// `hw_ver`.
    pub hw_ver: u32,
    /// `max_mr_size`.
    pub max_mr_size: u64,
    /// `max_qp`.
    pub max_qp: u32,
    /// `max_qp_wr`.
    pub max_qp_wr: u32,
    /// `max_sge`.
    pub max_sge: u32,
    /// `max_sge_rd`.
    pub max_sge_rd: u32,
    /// `max_cq`.
    pub max_cq: u32,
    /// `max_cqe`.
    pub max_cqe: u32,
    /// `max_mr`.
    pub max_mr: u32,
    /// `max_pd`.
    pub max_pd: u32,
    /// `max_qp_rd_atom`.
    pub max_qp_rd_atom: u32,
    /// `max_qp_init_rd_atom`.
    pub max_qp_init_rd_atom: u32,
    /// `max_res_rd_atom`.
    pub max_res_rd_atom: u32,
    /// `max_mw`.
    pub max_mw: u32,
    /// `max_srq`.
    pub max_srq: u32,
    /// `max_srq_wr`.
    pub max_srq_wr: u32,
    /// `phys_port_cnt`.
    pub phys_port_cnt: u8,
    /// Port `state` (`IBV_PORT_ACTIVE` = 4).
    pub port_state: u32,
    /// Port `active_mtu` (enum: 1 = 256 .. 5 = 4096).
    pub active_mtu: u32,
    /// Port `max_msg_sz`.
    pub max_msg_sz: u32,
    /// Port `lid`.
    pub lid: u16,
    /// Port `link_layer` (1 = InfiniBand, 2 = Ethernet).
    pub link_layer: u8,
    /// Port `gid_tbl_len`.
    pub gid_tbl_len: i32,
    /// The source GID (`gid_index`).
    pub gid: [u8; 16],
}

impl DeviceFacts {
    /// Link layer name.
    pub fn link_layer_name(&self) -> &'static str {
        match self.link_layer {
            1 => "InfiniBand",
            2 => "Ethernet",
            _ => "unspecified",
        }
    }

    /// Port state name (`ibv_port_state`).
    pub fn port_state_name(&self) -> &'static str {
        match self.port_state {
            1 => "DOWN",
            2 => "INIT",
            3 => "ARMED",
            4 => "ACTIVE",
            5 => "ACTIVE_DEFER",
            _ => "NOP",
        }
    }

    /// The active MTU in bytes (0 if unknown).
    pub fn active_mtu_bytes(&self) -> u32 {
        match self.active_mtu {
            m @ 1..=5 => 128 << m,
            _ => 0,
        }
    }

    /// The address of the source GID: an IPv4-mapped GID (RoCE v2 over IPv4) is that IPv4
    /// address, any other GID the IPv6 address of its 16 bytes.
    pub fn gid_address(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.gid);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }
}

fn fw_version(s: &str) -> (u32, u32) {
    let mut it = s
        .split(['.', '-', ' '])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

fn cap(limit: Option<u32>, device: u32) -> u32 {
    limit.map_or(device, |l| l.min(device))
}

/// `IaAttr` of an IA named `ia` on the device of `f`, at `address` (`None`: the GID's).
pub fn ia_attr(ia: &str, f: &DeviceFacts, p: &VerbsParams, address: Option<IpAddr>) -> IaAttr {
    let msg = u64::from(f.max_msg_sz);
    let sge_rd = if f.max_sge_rd == 0 {
        f.max_sge
    } else {
        f.max_sge_rd
    };
    IaAttr {
        adapter_name: ia.to_owned(),
        vendor_name: format!("datrs-verbs {}", f.device),
        hardware_version: (f.hw_ver, 0),
        firmware_version: fw_version(&f.fw_ver),
        ia_address: SocketAddr::new(
            address.unwrap_or_else(|| {
                if f.gid == [0; 16] {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                } else {
                    f.gid_address()
                }
            }),
            0,
        ),
        max_eps: cap(p.max_eps, f.max_qp),
        max_dto_per_ep: cap(p.max_dto_per_ep, f.max_qp_wr),
        max_rdma_read_per_ep_in: f.max_qp_rd_atom,
        max_rdma_read_per_ep_out: f.max_qp_init_rd_atom,
        max_evds: f.max_cq,
        max_evd_qlen: cap(p.max_evd_qlen, f.max_cqe),
        max_iov_segments_per_dto: f.max_sge,
        max_lmrs: f.max_mr,
        max_lmr_block_size: f.max_mr_size,
        max_lmr_virtual_address: u64::MAX,
        max_pzs: f.max_pd,
        max_message_size: msg,
        max_rdma_size: msg,
        max_rmrs: f.max_mw,
        max_rmr_target_address: u64::MAX,
        max_srqs: f.max_srq,
        max_ep_per_srq: f.max_qp,
        max_recv_per_srq: f.max_srq_wr,
        max_iov_segments_per_rdma_read: sge_rd,
        max_iov_segments_per_rdma_write: f.max_sge,
        max_rdma_read_in: f.max_res_rd_atom,
        max_rdma_read_out: f.max_res_rd_atom,
        max_rdma_read_per_ep_in_guaranteed: true,
        max_rdma_read_per_ep_out_guaranteed: true,
        // Zero-based LMRs are MRs registered from I/O address 0 (`ibv_reg_mr_iova`; the
        // region must start on a page boundary); windows do not combine with them
        // (`ZB_RMR_ATTR` below).
        zb_supported: true,
        transport_attr: vec![
            NamedAttr::new("DEVICE", &f.device),
            NamedAttr::new("PORT", f.port.to_string()),
            NamedAttr::new("LINK_LAYER", f.link_layer_name()),
            NamedAttr::new("PORT_STATE", f.port_state_name()),
            NamedAttr::new("ACTIVE_MTU", f.active_mtu_bytes().to_string()),
            NamedAttr::new("LID", f.lid.to_string()),
            NamedAttr::new("GID_INDEX", p.gid_index.to_string()),
            NamedAttr::new("GID", Ipv6Addr::from(f.gid).to_string()),
            NamedAttr::new("MAX_INLINE_DATA", p.max_inline_data.to_string()),
        ],
        vendor_attr: vec![
            NamedAttr::new("VENDOR_ID", format!("{:#x}", f.vendor_id)),
            NamedAttr::new("VENDOR_PART_ID", f.vendor_part_id.to_string()),
            NamedAttr::new("NODE_GUID", format!("{:016x}", f.node_guid)),
            NamedAttr::new("FW_VER", &f.fw_ver),
        ],
    }
}

/// `ProviderAttr` of the verbs provider on the device of `f`.
pub fn provider_attr(f: &DeviceFacts) -> ProviderAttr {
    ProviderAttr {
        provider_name: "verbs".to_owned(),
        provider_version: (0, 1),
        dapl_version: (2, 0),
        is_thread_safe: true,
        max_private_data_size: MAX_PRIVATE_DATA,
        iov_ownership_on_return: IovOwnership::Consumer,
        completion_flags_supported: CompletionFlags::all(),
        psp_provider_flag_supported: true,
        optimal_buffer_alignment: 64,
        evd_stream_merging_supported: software_stream_merging(),
        srq_supported: f.max_srq > 0,
        srq_ep_pz_difference_supported: false,
        rdma_read_supported: true,
        provider_specific_attr: vec![
            NamedAttr::new("DAT_IB_RDMA_READ", "TRUE"),
            // Zero-based windows and windows over zero-based LMRs are
            // DAT_MODEL_NOT_SUPPORTED (`VerbsIa::bind_mw`).
            NamedAttr::new(ZB_RMR_ATTR, "FALSE"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rxe_like() -> DeviceFacts {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[192, 0, 2, 1]);
        DeviceFacts {
            device: "rxe0".into(),
            port: 1,
            fw_ver: "0.0.0".into(),
            node_guid: 0x0200_5eff_fe00_0001,
            vendor_id: 0xffffff,
            hw_ver: 0,
            max_mr_size: u64::MAX,
            max_qp: 1_048_560,
            max_qp_wr: 1_048_576,
            max_sge: 32,
            max_sge_rd: 32,
            max_cq: 1_048_576,
            max_cqe: 32_767,
            max_mr: 524_287,
            max_pd: 1_048_576,
            max_qp_rd_atom: 128,
            max_qp_init_rd_atom: 128,
            max_res_rd_atom: 258_048,
            max_mw: 524_287,
            max_srq: 917_503,
            max_srq_wr: 1_048_576,
            phys_port_cnt: 1,
            port_state: 4,
            active_mtu: 3,
            max_msg_sz: 0x8000_0000,
            link_layer: 2,
            gid_tbl_len: 1024,
            gid,
            ..DeviceFacts::default()
        }
    }

    #[test]
    fn device_limits_become_ia_attributes() {
        let f = rxe_like();
        let a = ia_attr("rxe", &f, &VerbsParams::default(), None);
        assert_eq!(a.adapter_name, "rxe");
        assert_eq!(a.ia_address, "192.0.2.1:0".parse().unwrap());
        assert_eq!(a.max_eps, 1_048_560);
        assert_eq!(a.max_dto_per_ep, 1_048_576);
        assert_eq!(a.max_evd_qlen, 32_767);
        assert_eq!(a.max_iov_segments_per_dto, 32);
        assert_eq!(a.max_rdma_read_per_ep_in, 128);
        assert_eq!(a.max_message_size, 0x8000_0000);
        assert_eq!(a.max_srqs, 917_503);
        assert!(a.zb_supported);
        let named = |v: &[NamedAttr], k: &str| {
            v.iter()
                .find(|n| n.name == k)
                .map(|n| n.value.clone())
                .unwrap()
        };
        assert_eq!(named(&a.transport_attr, "LINK_LAYER"), "Ethernet");
        assert_eq!(named(&a.transport_attr, "PORT_STATE"), "ACTIVE");
        assert_eq!(named(&a.transport_attr, "ACTIVE_MTU"), "1024");
        assert_eq!(named(&a.transport_attr, "GID"), "::ffff:192.0.2.1");
        assert_eq!(named(&a.vendor_attr, "NODE_GUID"), "02005efffe000001");
    }

    #[test]
    fn limits_cap_but_never_raise_the_device() {
        let f = rxe_like();
        let p = VerbsParams {
            max_eps: Some(16),
            max_dto_per_ep: Some(1 << 30),
            max_evd_qlen: Some(100),
            ..VerbsParams::default()
        };
        let a = ia_attr("rxe", &f, &p, Some("192.0.2.9".parse().unwrap()));
        assert_eq!(a.max_eps, 16);
        assert_eq!(a.max_dto_per_ep, 1_048_576);
        assert_eq!(a.max_evd_qlen, 100);
        assert_eq!(a.ia_address, "192.0.2.9:0".parse().unwrap());
    }

    #[test]
    fn ib_gid_is_an_ipv6_address_and_firmware_is_parsed() {
        let mut f = rxe_like();
        f.gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7];
        f.fw_ver = "20.31.1014".into();
        f.max_sge_rd = 0;
        let a = ia_attr("ib", &f, &VerbsParams::default(), None);
        assert_eq!(a.ia_address, "[fe80::1:203:405:607]:0".parse().unwrap());
        assert_eq!(a.firmware_version, (20, 31));
        assert_eq!(a.max_iov_segments_per_rdma_read, 32);
    }

    #[test]
    fn provider_attributes() {
        let mut f = rxe_like();
        let p = provider_attr(&f);
        assert_eq!(p.provider_name, "verbs");
        assert_eq!(p.max_private_data_size, MAX_PRIVATE_DATA);
        assert!(p.srq_supported);
        assert!(!p.zb_windows(), "zero-based LMRs only");
        f.max_srq = 0;
        assert!(!provider_attr(&f).srq_supported);
    }
}
