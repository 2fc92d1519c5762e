//! Endpoint attributes: the provider defaults used when `dat_ep_create` gets `attr == NULL`,
//! and the validation of consumer-supplied attributes (reference 3.5 item 5 and 6.8).
//!
//! # Rules of [`validate_attr`], in the order they are checked
//!
//! Every violation of rules 1-6 returns `DAT_INVALID_PARAMETER | DAT_INVALID_ARG6` (the
//! position of `ep_attributes` in `dat_ep_create`; `DAT_INVALID_ARG7` for
//! `dat_ep_create_with_srq`, where the attributes are the seventh argument; OFA reports ARG6
//! there too, a copy of its `dat_ep_create` code). Unlike OFA we set the error class bit
//! (OFA returns this code without it, reference 2.4).
//!
//! 1. `recv_completion_flags` must not contain `DAT_COMPLETION_SUPPRESS_FLAG`: receive
//!    completions cannot be suppressed (OFA, 6.4).
//! 2. `recv_completion_flags` must not combine `DAT_COMPLETION_UNSIGNALLED_FLAG` with
//!    `DAT_COMPLETION_EVD_THRESHOLD_FLAG` (6.4: incompatible for receives).
//! 3. Queue depth and EVD agree: with a recv EVD `max_recv_dtos > 0`, without one
//!    `max_recv_dtos == 0`; the same for `max_request_dtos` and the request EVD (OFA: a queue
//!    without an EVD could never report its completions). With an SRQ the EP has no receive
//!    queue of its own, so `max_recv_dtos` is not checked against the recv EVD.
//! 4. `max_request_iov > 0`, and `max_recv_iov > 0` unless the EP uses an SRQ (OFA: a post
//!    needs at least one segment slot).
//! 5. No size exceeds the IA limits ([`EpLimits`]): message and RDMA sizes, both queue
//!    depths, both IOV counts, RDMA read credits in and out, RDMA read and write IOVs.
//! 6. (`service_type` can only be RC in [`ServiceType`], so OFA's non-RC check cannot fail.)
//! 7. `qos` other than `DAT_QOS_BEST_EFFORT` returns `DAT_MODEL_NOT_SUPPORTED` (the only QoS
//!    our providers offer; the seed lists this code for unsupported models). It is checked
//!    after the parameter rules: an invalid request is reported before an unsupported one.
//!
//! `srq_soft_hw` is not validated: the EP high watermarks are not implemented (6.6; the SRQ low
//! watermark is, in `crate::srq`).

use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::types::{CompletionFlags, EpAttr, IaAttr, Qos, ServiceType};

/// Default receive and request queue depth (OFA `IB_IO_DEFAULT`).
pub const DEFAULT_DTOS: u32 = 16;
/// Default segments per post, also used for RDMA read/write IOVs (OFA `IB_IOV_DEFAULT`).
pub const DEFAULT_IOV: u32 = 4;
/// Default outstanding RDMA reads in each direction (OFA `IB_RDMA_DEFAULT`).
pub const DEFAULT_RDMA_READ: u32 = 4;
/// Default message and RDMA size, 2^31 (OFA, IBTA 1.1 9.4.3).
pub const DEFAULT_MAX_SIZE: u64 = 1 << 31;

/// The per-endpoint limits of an IA, which attributes are checked against and defaults are
/// capped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EpLimits {
    /// Largest send/receive message.
    pub max_message_size: u64,
    /// Largest RDMA transfer.
    pub max_rdma_size: u64,
    /// Deepest receive or request queue.
    pub max_dtos: u32,
    /// Most segments per send or receive.
    pub max_iov: u32,
    /// Most incoming RDMA reads in flight.
    pub max_rdma_read_in: u32,
    /// Most outgoing RDMA reads in flight.
    pub max_rdma_read_out: u32,
    /// Most local segments per RDMA read.
    pub max_rdma_read_iov: u32,
    /// Most local segments per RDMA write.
    pub max_rdma_write_iov: u32,
}

impl EpLimits {
    /// The limits an IA advertises in its `DAT_IA_ATTR`.
    pub fn from_ia_attr(ia: &IaAttr) -> EpLimits {
        EpLimits {
            max_message_size: ia.max_message_size,
            max_rdma_size: ia.max_rdma_size,
            max_dtos: ia.max_dto_per_ep,
            max_iov: ia.max_iov_segments_per_dto,
            max_rdma_read_in: ia.max_rdma_read_per_ep_in,
            max_rdma_read_out: ia.max_rdma_read_per_ep_out,
            max_rdma_read_iov: ia.max_iov_segments_per_rdma_read,
            max_rdma_write_iov: ia.max_iov_segments_per_rdma_write,
        }
    }
}

/// The provider's default attributes, used when `dat_ep_create` gets `attr == NULL` (6.8):
/// RC, best effort, message and RDMA size 2^31, 16 DTOs per queue, 4 segments per post and
/// per RDMA, 4 RDMA read credits each way, `EVD_THRESHOLD` completion flags on both queues,
/// no SRQ watermark; every value capped by `limits`.
///
/// These defaults assume both DTO EVDs are present; use [`default_attr_for`] when either may
/// be NULL.
pub fn default_attr(limits: &EpLimits) -> EpAttr {
    EpAttr {
        service_type: ServiceType::Rc,
        max_message_size: DEFAULT_MAX_SIZE.min(limits.max_message_size),
        max_rdma_size: DEFAULT_MAX_SIZE.min(limits.max_rdma_size),
        qos: Qos::BestEffort,
        recv_completion_flags: CompletionFlags::EVD_THRESHOLD,
        request_completion_flags: CompletionFlags::EVD_THRESHOLD,
        max_recv_dtos: DEFAULT_DTOS.min(limits.max_dtos),
        max_request_dtos: DEFAULT_DTOS.min(limits.max_dtos),
        max_recv_iov: DEFAULT_IOV.min(limits.max_iov),
        max_request_iov: DEFAULT_IOV.min(limits.max_iov),
        max_rdma_read_in: DEFAULT_RDMA_READ.min(limits.max_rdma_read_in),
        max_rdma_read_out: DEFAULT_RDMA_READ.min(limits.max_rdma_read_out),
        srq_soft_hw: None,
        max_rdma_read_iov: DEFAULT_IOV.min(limits.max_rdma_read_iov),
        max_rdma_write_iov: DEFAULT_IOV.min(limits.max_rdma_write_iov),
    }
}

/// [`default_attr`] with the queue depth of a missing DTO EVD set to zero (OFA does the
/// same), so the defaults always pass rule 3 of [`validate_attr`].
pub fn default_attr_for(limits: &EpLimits, has_recv_evd: bool, has_request_evd: bool) -> EpAttr {
    let mut attr = default_attr(limits);
    if !has_recv_evd {
        attr.max_recv_dtos = 0;
    }
    if !has_request_evd {
        attr.max_request_dtos = 0;
    }
    attr
}

/// Checks consumer-supplied endpoint attributes for `dat_ep_create` (or, with `srq`,
/// `dat_ep_create_with_srq`). See the module documentation for the rules and their order.
///
/// # Errors
/// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG6` (`DAT_INVALID_ARG7` with `srq`): SUPPRESS in
///   the receive completion flags, UNSIGNALLED with EVD_THRESHOLD in them, a queue depth that
///   disagrees with the presence of its EVD, a zero IOV count, or any value above `limits`.
/// * `DAT_MODEL_NOT_SUPPORTED`: a `qos` other than best effort.
pub fn validate_attr(
    attr: &EpAttr,
    limits: &EpLimits,
    has_recv_evd: bool,
    has_request_evd: bool,
    srq: bool,
) -> DatResult<()> {
    let bad = DatError::invalid_arg(if srq { 7 } else { 6 });
    let recv = attr.recv_completion_flags;
    let checks = [
        // Rules 1 and 2.
        recv.contains(CompletionFlags::SUPPRESS),
        recv.contains(CompletionFlags::UNSIGNALLED | CompletionFlags::EVD_THRESHOLD),
        // Rule 3.
        !srq && has_recv_evd != (attr.max_recv_dtos > 0),
        has_request_evd != (attr.max_request_dtos > 0),
        // Rule 4.
        attr.max_request_iov == 0,
        !srq && attr.max_recv_iov == 0,
        // Rule 5.
        attr.max_message_size > limits.max_message_size,
        attr.max_rdma_size > limits.max_rdma_size,
        attr.max_recv_dtos > limits.max_dtos,
        attr.max_request_dtos > limits.max_dtos,
        attr.max_recv_iov > limits.max_iov,
        attr.max_request_iov > limits.max_iov,
        attr.max_rdma_read_in > limits.max_rdma_read_in,
        attr.max_rdma_read_out > limits.max_rdma_read_out,
        attr.max_rdma_read_iov > limits.max_rdma_read_iov,
        attr.max_rdma_write_iov > limits.max_rdma_write_iov,
    ];
    if let Some(check) = checks.iter().position(|&failed| failed) {
        tracing::debug!(check, ?attr, ?limits, "endpoint attributes rejected");
        return Err(bad);
    }
    // Rule 6 holds by construction; rule 7:
    if attr.qos != Qos::BestEffort {
        return Err(DatError::new(
            ErrorType::ModelNotSupported,
            Subtype::NoSubtype,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: EpLimits = EpLimits {
        max_message_size: 1 << 20,
        max_rdma_size: 1 << 30,
        max_dtos: 1024,
        max_iov: 8,
        max_rdma_read_in: 2,
        max_rdma_read_out: 3,
        max_rdma_read_iov: 6,
        max_rdma_write_iov: 5,
    };
    const ARG6: u32 = 0x8006_002A;
    const ARG7: u32 = 0x8006_002B;
    const MODEL: u32 = 0x8009_0000;

    fn ok_attr() -> EpAttr {
        default_attr(&LIMITS)
    }

    fn check(attr: &EpAttr) -> u32 {
        DatError::result_to_raw(validate_attr(attr, &LIMITS, true, true, false))
    }

    #[test]
    fn defaults_follow_ofa_and_are_capped_by_the_limits() {
        let a = default_attr(&LIMITS);
        assert_eq!(a.service_type, ServiceType::Rc);
        assert_eq!(a.qos, Qos::BestEffort);
        assert_eq!(a.max_message_size, 1 << 20); // 2^31 capped
        assert_eq!(a.max_rdma_size, 1 << 30);
        assert_eq!((a.max_recv_dtos, a.max_request_dtos), (16, 16));
        assert_eq!((a.max_recv_iov, a.max_request_iov), (4, 4));
        assert_eq!((a.max_rdma_read_in, a.max_rdma_read_out), (2, 3)); // 4 capped
        assert_eq!((a.max_rdma_read_iov, a.max_rdma_write_iov), (4, 4));
        assert_eq!(a.recv_completion_flags, CompletionFlags::EVD_THRESHOLD);
        assert_eq!(a.request_completion_flags, CompletionFlags::EVD_THRESHOLD);
        assert_eq!(a.srq_soft_hw, None);

        let roomy = EpLimits {
            max_message_size: u64::MAX,
            max_rdma_size: u64::MAX,
            max_dtos: u32::MAX,
            max_iov: u32::MAX,
            max_rdma_read_in: u32::MAX,
            max_rdma_read_out: u32::MAX,
            max_rdma_read_iov: u32::MAX,
            max_rdma_write_iov: u32::MAX,
        };
        let b = default_attr(&roomy);
        assert_eq!(b.max_message_size, 0x8000_0000);
        assert_eq!(b.max_rdma_size, 0x8000_0000);
        assert_eq!((b.max_rdma_read_in, b.max_rdma_read_out), (4, 4));
    }

    #[test]
    fn defaults_are_valid_for_every_evd_combination() {
        for recv in [false, true] {
            for req in [false, true] {
                let a = default_attr_for(&LIMITS, recv, req);
                assert_eq!(a.max_recv_dtos, if recv { 16 } else { 0 });
                assert_eq!(a.max_request_dtos, if req { 16 } else { 0 });
                assert_eq!(validate_attr(&a, &LIMITS, recv, req, false), Ok(()));
            }
        }
    }

    #[test]
    fn defaults_with_tiny_limits_are_still_valid() {
        let tiny = EpLimits {
            max_message_size: 0,
            max_rdma_size: 0,
            max_dtos: 1,
            max_iov: 1,
            max_rdma_read_in: 0,
            max_rdma_read_out: 0,
            max_rdma_read_iov: 0,
            max_rdma_write_iov: 0,
        };
        assert_eq!(
            validate_attr(&default_attr(&tiny), &tiny, true, true, false),
            Ok(())
        );
    }

    #[test]
    fn limits_come_from_the_ia_attributes() {
        let ia = IaAttr {
            adapter_name: "a".into(),
            vendor_name: "v".into(),
            hardware_version: (0, 0),
            firmware_version: (0, 0),
            ia_address: crate::types::LOOPBACK_ADDRESS,
            max_eps: 1,
            max_dto_per_ep: 11,
            max_rdma_read_per_ep_in: 12,
            max_rdma_read_per_ep_out: 13,
            max_evds: 1,
            max_evd_qlen: 1,
            max_iov_segments_per_dto: 14,
            max_lmrs: 1,
            max_lmr_block_size: 1,
            max_lmr_virtual_address: 1,
            max_pzs: 1,
            max_message_size: 15,
            max_rdma_size: 16,
            max_rmrs: 1,
            max_rmr_target_address: 1,
            max_srqs: 1,
            max_ep_per_srq: 1,
            max_recv_per_srq: 1,
            max_iov_segments_per_rdma_read: 17,
            max_iov_segments_per_rdma_write: 18,
            max_rdma_read_in: 1,
            max_rdma_read_out: 1,
            max_rdma_read_per_ep_in_guaranteed: true,
            max_rdma_read_per_ep_out_guaranteed: true,
            zb_supported: false,
            transport_attr: Vec::new(),
            vendor_attr: Vec::new(),
        };
        assert_eq!(
            EpLimits::from_ia_attr(&ia),
            EpLimits {
                max_message_size: 15,
                max_rdma_size: 16,
                max_dtos: 11,
                max_iov: 14,
                max_rdma_read_in: 12,
                max_rdma_read_out: 13,
                max_rdma_read_iov: 17,
                max_rdma_write_iov: 18,
            }
        );
    }

    #[test]
    fn rule1_suppress_in_recv_flags_is_arg6() {
        let mut a = ok_attr();
        a.recv_completion_flags = CompletionFlags::SUPPRESS;
        assert_eq!(check(&a), ARG6);
        // Allowed on requests.
        let mut b = ok_attr();
        b.request_completion_flags = CompletionFlags::SUPPRESS;
        assert_eq!(check(&b), 0);
    }

    #[test]
    fn rule2_unsignalled_with_threshold_in_recv_flags_is_arg6() {
        let mut a = ok_attr();
        a.recv_completion_flags = CompletionFlags::UNSIGNALLED | CompletionFlags::EVD_THRESHOLD;
        assert_eq!(check(&a), ARG6);
        a.recv_completion_flags = CompletionFlags::UNSIGNALLED;
        assert_eq!(check(&a), 0);
    }

    #[test]
    fn rule3_queue_depth_must_match_the_presence_of_its_evd() {
        let a = ok_attr();
        let raw = |a: &EpAttr, recv, req, srq| {
            DatError::result_to_raw(validate_attr(a, &LIMITS, recv, req, srq))
        };
        assert_eq!(
            raw(&a, false, true, false),
            ARG6,
            "recv dtos without recv EVD"
        );
        assert_eq!(
            raw(&a, true, false, false),
            ARG6,
            "request dtos without request EVD"
        );
        let mut z = ok_attr();
        z.max_recv_dtos = 0;
        assert_eq!(
            raw(&z, true, true, false),
            ARG6,
            "recv EVD with zero recv dtos"
        );
        assert_eq!(raw(&z, false, true, false), 0);
        z.max_request_dtos = 0;
        assert_eq!(
            raw(&z, false, true, false),
            ARG6,
            "request EVD with zero dtos"
        );
        assert_eq!(raw(&z, false, false, false), 0);
        // With an SRQ the receive depth is not tied to the recv EVD.
        assert_eq!(raw(&a, false, true, true), 0);
        assert_eq!(raw(&z, true, false, true), 0);
    }

    #[test]
    fn rule4_zero_iov_counts_are_arg6() {
        let mut a = ok_attr();
        a.max_request_iov = 0;
        assert_eq!(check(&a), ARG6);
        let mut b = ok_attr();
        b.max_recv_iov = 0;
        assert_eq!(check(&b), ARG6);
        assert_eq!(validate_attr(&b, &LIMITS, true, true, true), Ok(()), "SRQ");
    }

    #[test]
    fn rule5_every_limit_is_enforced_and_inclusive() {
        type Set = fn(&mut EpAttr, u64);
        let fields: [(&str, u64, Set); 10] = [
            ("message", LIMITS.max_message_size, |a, v| {
                a.max_message_size = v
            }),
            ("rdma", LIMITS.max_rdma_size, |a, v| a.max_rdma_size = v),
            ("recv dtos", 1024, |a, v| a.max_recv_dtos = v as u32),
            ("request dtos", 1024, |a, v| a.max_request_dtos = v as u32),
            ("recv iov", 8, |a, v| a.max_recv_iov = v as u32),
            ("request iov", 8, |a, v| a.max_request_iov = v as u32),
            ("read in", 2, |a, v| a.max_rdma_read_in = v as u32),
            ("read out", 3, |a, v| a.max_rdma_read_out = v as u32),
            ("read iov", 6, |a, v| a.max_rdma_read_iov = v as u32),
            ("write iov", 5, |a, v| a.max_rdma_write_iov = v as u32),
        ];
        for (name, limit, set) in fields {
            let mut a = ok_attr();
            set(&mut a, limit);
            assert_eq!(check(&a), 0, "{name} at the limit");
            set(&mut a, limit + 1);
            assert_eq!(check(&a), ARG6, "{name} above the limit");
            assert_eq!(
                DatError::result_to_raw(validate_attr(&a, &LIMITS, true, true, true)),
                ARG7,
                "{name} with SRQ"
            );
        }
    }

    #[test]
    fn rule7_qos_other_than_best_effort_is_model_not_supported() {
        for q in [
            Qos::HighThroughput,
            Qos::LowLatency,
            Qos::Economy,
            Qos::Premium,
        ] {
            let mut a = ok_attr();
            a.qos = q;
            assert_eq!(check(&a), MODEL, "{q:?}");
            // A parameter error is reported first.
            a.max_request_iov = 0;
            assert_eq!(check(&a), ARG6, "{q:?}");
        }
    }

    #[test]
    fn srq_variant_reports_arg7() {
        let mut a = ok_attr();
        a.recv_completion_flags = CompletionFlags::SUPPRESS;
        assert_eq!(
            DatError::result_to_raw(validate_attr(&a, &LIMITS, true, true, true)),
            ARG7
        );
    }
}
