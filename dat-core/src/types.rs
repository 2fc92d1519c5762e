//! The small value types of DAT 2.0: qualifiers, cookies, timeouts, flags, triplets and
//! attributes. Numeric values are the ABI values of the `dat2/*.h` headers.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bitflags::bitflags;

/// `DAT_CONN_QUAL`: names a service point on an IA (how it maps to a transport port is
/// provider-defined and documented by each provider).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnQual(pub u64);

/// `DAT_IA_ADDRESS_PTR`: the network address of an IA. The TCP provider uses the IP part (and
/// may encode its port base in the port); providers document what they put there.
pub type IaAddress = SocketAddr;

/// The address reported by IAs that have no network address of their own.
pub const LOOPBACK_ADDRESS: IaAddress = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// `DAT_DTO_COOKIE` / `DAT_RMR_COOKIE`: 64 opaque bits returned verbatim in the completion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Cookie(pub u64);

/// `DAT_TIMEOUT`: microseconds; `u32::MAX` (`DAT_TIMEOUT_INFINITE`) waits forever.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Timeout(pub u32);

impl Timeout {
    /// `DAT_TIMEOUT_INFINITE`.
    pub const INFINITE: Timeout = Timeout(u32::MAX);
    /// Zero: poll once.
    pub const ZERO: Timeout = Timeout(0);

    /// `None` for infinite, else the duration.
    pub fn duration(self) -> Option<Duration> {
        (self != Timeout::INFINITE).then(|| Duration::from_micros(u64::from(self.0)))
    }

    /// From a duration, saturating just below infinite.
    pub fn from_duration(d: Duration) -> Timeout {
        Timeout(
            u32::try_from(d.as_micros())
                .unwrap_or(u32::MAX - 1)
                .min(u32::MAX - 1),
        )
    }
}

bitflags! {
    /// `DAT_MEM_PRIV_FLAGS`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MemPriv: u32 {
        /// `DAT_MEM_PRIV_LOCAL_READ_FLAG`.
        const LOCAL_READ = 0x01;
        /// `DAT_MEM_PRIV_REMOTE_READ_FLAG`.
        const REMOTE_READ = 0x02;
        /// `DAT_MEM_PRIV_LOCAL_WRITE_FLAG`.
        const LOCAL_WRITE = 0x10;
        /// `DAT_MEM_PRIV_REMOTE_WRITE_FLAG`.
        const REMOTE_WRITE = 0x20;
        /// `DAT_IB_MEM_PRIV_REMOTE_ATOMIC` (IB extension).
        const REMOTE_ATOMIC = 0x40;
        /// `DAT_MEM_PRIV_ALL_FLAG`.
        const ALL = 0x33;
    }
}

impl MemPriv {
    /// `DAT_MEM_PRIV_NONE_FLAG`.
    pub const NONE: MemPriv = MemPriv::empty();

    /// True if remote access of any kind was requested (an `rmr_context` is generated).
    pub fn is_remote(self) -> bool {
        self.intersects(MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE | MemPriv::REMOTE_ATOMIC)
    }
}

bitflags! {
    /// `DAT_COMPLETION_FLAGS`.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct CompletionFlags: u32 {
        /// `DAT_COMPLETION_SUPPRESS_FLAG`: no completion on success.
        const SUPPRESS = 0x01;
        /// `DAT_COMPLETION_SOLICITED_WAIT_FLAG`.
        const SOLICITED_WAIT = 0x02;
        /// `DAT_COMPLETION_UNSIGNALLED_FLAG`: queued but does not wake a waiter.
        const UNSIGNALLED = 0x04;
        /// `DAT_COMPLETION_BARRIER_FENCE_FLAG`: wait for earlier RDMA reads.
        const BARRIER_FENCE = 0x08;
        /// `DAT_COMPLETION_EVD_THRESHOLD_FLAG`.
        const EVD_THRESHOLD = 0x10;
    }
}

impl CompletionFlags {
    /// `DAT_COMPLETION_DEFAULT_FLAG`.
    pub const DEFAULT: CompletionFlags = CompletionFlags::empty();
}

bitflags! {
    /// `DAT_EVD_FLAGS`: the event streams an EVD accepts.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct EvdFlags: u32 {
        /// `DAT_EVD_SOFTWARE_FLAG`.
        const SOFTWARE = 0x001;
        /// `DAT_EVD_CR_FLAG`.
        const CR = 0x010;
        /// `DAT_EVD_DTO_FLAG`.
        const DTO = 0x020;
        /// `DAT_EVD_CONNECTION_FLAG`.
        const CONNECTION = 0x040;
        /// `DAT_EVD_RMR_BIND_FLAG`.
        const RMR_BIND = 0x080;
        /// `DAT_EVD_ASYNC_FLAG`.
        const ASYNC = 0x100;
    }
}

impl EvdFlags {
    /// `DAT_EVD_DEFAULT_FLAG` (every stream but software).
    pub const DEFAULT: EvdFlags = EvdFlags::CR
        .union(EvdFlags::DTO)
        .union(EvdFlags::CONNECTION)
        .union(EvdFlags::RMR_BIND)
        .union(EvdFlags::ASYNC);
}

/// `DAT_PSP_FLAGS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PspFlags {
    /// `DAT_PSP_CONSUMER_FLAG`: the consumer supplies the EP at accept.
    Consumer = 0,
    /// `DAT_PSP_PROVIDER_FLAG`: the provider creates an EP per request (TENTATIVE state).
    Provider = 1,
}

/// `DAT_CLOSE_FLAGS` (also used by `dat_ep_disconnect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CloseFlags {
    /// `DAT_CLOSE_ABRUPT_FLAG`.
    Abrupt = 0,
    /// `DAT_CLOSE_GRACEFUL_FLAG`.
    Graceful = 1,
}

/// `DAT_MEM_TYPE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemType {
    /// `DAT_MEM_TYPE_VIRTUAL`.
    Virtual = 0,
    /// `DAT_MEM_TYPE_LMR`.
    Lmr = 1,
    /// `DAT_MEM_TYPE_SHARED_VIRTUAL`.
    SharedVirtual = 2,
}

/// `DAT_VA_TYPE`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VaType {
    /// `DAT_VA_TYPE_VA`: remote addresses are virtual addresses.
    #[default]
    Va = 0,
    /// `DAT_VA_TYPE_ZB`: remote addresses are zero-based offsets.
    ZeroBased = 1,
}

/// `DAT_LMR_TRIPLET`: names local memory in a post. Bit-identical to the C struct (and to
/// `struct ibv_sge`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct LmrTriplet {
    /// Start address (as registered: virtual address, or offset for zero-based LMRs).
    pub virtual_address: u64,
    /// Length in bytes; zero-length segments are legal and ignored.
    pub segment_length: u32,
    /// The `lmr_context` of the LMR the range lies in.
    pub lmr_context: u32,
}

/// `DAT_RMR_TRIPLET`: names remote memory in an RDMA post.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct RmrTriplet {
    /// Remote start address.
    pub virtual_address: u64,
    /// Length in bytes.
    pub segment_length: u32,
    /// The remote key (`rmr_context`).
    pub rmr_context: u32,
}

/// `DAT_DTO_COMPLETION_STATUS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DtoStatus {
    /// `DAT_DTO_SUCCESS`.
    Success = 0,
    /// `DAT_DTO_ERR_FLUSHED`.
    Flushed = 1,
    /// `DAT_DTO_ERR_LOCAL_LENGTH`.
    LocalLength = 2,
    /// `DAT_DTO_ERR_LOCAL_EP`.
    LocalEp = 3,
    /// `DAT_DTO_ERR_LOCAL_PROTECTION`.
    LocalProtection = 4,
    /// `DAT_DTO_ERR_BAD_RESPONSE`.
    BadResponse = 5,
    /// `DAT_DTO_ERR_REMOTE_ACCESS`.
    RemoteAccess = 6,
    /// `DAT_DTO_ERR_REMOTE_RESPONDER`.
    RemoteResponder = 7,
    /// `DAT_DTO_ERR_TRANSPORT`.
    Transport = 8,
    /// `DAT_DTO_ERR_RECEIVER_NOT_READY`.
    ReceiverNotReady = 9,
    /// `DAT_DTO_ERR_PARTIAL_PACKET`.
    PartialPacket = 10,
    /// `DAT_RMR_OPERATION_FAILED`.
    RmrOperationFailed = 11,
    /// `DAT_DTO_ERR_LOCAL_MM_ERROR` (kDAPL).
    LocalMmError = 12,
}

impl DtoStatus {
    /// Decodes the raw value.
    pub fn from_raw(v: u32) -> Option<DtoStatus> {
        use DtoStatus::*;
        [
            Success,
            Flushed,
            LocalLength,
            LocalEp,
            LocalProtection,
            BadResponse,
            RemoteAccess,
            RemoteResponder,
            Transport,
            ReceiverNotReady,
            PartialPacket,
            RmrOperationFailed,
            LocalMmError,
        ]
        .get(v as usize)
        .copied()
    }

    /// True for every status that breaks the connection (all but success and flushed), as
    /// InfiniBand and OFA dapl treat them.
    pub fn breaks_connection(self) -> bool {
        !matches!(self, DtoStatus::Success | DtoStatus::Flushed)
    }
}

/// `DAT_DTOS`: the operation a DTO completion reports (filled in every completion, unlike OFA).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DtoOp {
    /// `DAT_DTO_SEND`.
    Send = 0,
    /// `DAT_DTO_RDMA_WRITE`.
    RdmaWrite = 1,
    /// `DAT_DTO_RDMA_READ`.
    RdmaRead = 2,
    /// `DAT_DTO_RECEIVE`.
    Receive = 3,
    /// `DAT_DTO_RECEIVE_WITH_INVALIDATE`.
    ReceiveWithInvalidate = 4,
    /// `DAT_DTO_BIND_MW`.
    BindMw = 5,
}

/// `DAT_EVENT_NUMBER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum EventNumber {
    /// `DAT_DTO_COMPLETION_EVENT`.
    DtoCompletion = 0x00001,
    /// `DAT_RMR_BIND_COMPLETION_EVENT`.
    RmrBindCompletion = 0x01001,
    /// `DAT_CONNECTION_REQUEST_EVENT`.
    ConnectionRequest = 0x02001,
    /// `DAT_CONNECTION_EVENT_ESTABLISHED`.
    Established = 0x04001,
    /// `DAT_CONNECTION_EVENT_PEER_REJECTED`.
    PeerRejected = 0x04002,
    /// `DAT_CONNECTION_EVENT_NON_PEER_REJECTED`.
    NonPeerRejected = 0x04003,
    /// `DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR`.
    AcceptCompletionError = 0x04004,
    /// `DAT_CONNECTION_EVENT_DISCONNECTED`.
    Disconnected = 0x04005,
    /// `DAT_CONNECTION_EVENT_BROKEN`.
    Broken = 0x04006,
    /// `DAT_CONNECTION_EVENT_TIMED_OUT`.
    TimedOut = 0x04007,
    /// `DAT_CONNECTION_EVENT_UNREACHABLE`.
    Unreachable = 0x04008,
    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW`.
    AsyncEvdOverflow = 0x08001,
    /// `DAT_ASYNC_ERROR_IA_CATASTROPHIC`.
    AsyncIaCatastrophic = 0x08002,
    /// `DAT_ASYNC_ERROR_EP_BROKEN`.
    AsyncEpBroken = 0x08003,
    /// `DAT_ASYNC_ERROR_TIMED_OUT`.
    AsyncTimedOut = 0x08004,
    /// `DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR`.
    AsyncProviderInternalError = 0x08005,
    /// `DAT_SOFTWARE_EVENT`.
    Software = 0x10001,
}

impl EventNumber {
    /// The EVD stream flag an event of this number needs.
    #[inline]
    pub fn stream(self) -> EvdFlags {
        use EventNumber::*;
        match self {
            DtoCompletion => EvdFlags::DTO,
            RmrBindCompletion => EvdFlags::RMR_BIND,
            ConnectionRequest => EvdFlags::CR,
            Established
            | PeerRejected
            | NonPeerRejected
            | AcceptCompletionError
            | Disconnected
            | Broken
            | TimedOut
            | Unreachable => EvdFlags::CONNECTION,
            AsyncEvdOverflow
            | AsyncIaCatastrophic
            | AsyncEpBroken
            | AsyncTimedOut
            | AsyncProviderInternalError => EvdFlags::ASYNC,
            Software => EvdFlags::SOFTWARE,
        }
    }
}

/// `DAT_SERVICE_TYPE`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ServiceType {
    /// `DAT_SERVICE_TYPE_RC`: reliable connected (the only type our providers offer).
    #[default]
    Rc = 0,
}

/// `DAT_QOS`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Qos {
    /// `DAT_QOS_BEST_EFFORT`.
    #[default]
    BestEffort = 0x00,
    /// `DAT_QOS_HIGH_THROUGHPUT`.
    HighThroughput = 0x01,
    /// `DAT_QOS_LOW_LATENCY`.
    LowLatency = 0x02,
    /// `DAT_QOS_ECONOMY`.
    Economy = 0x04,
    /// `DAT_QOS_PREMIUM`.
    Premium = 0x08,
}

/// `DAT_EP_ATTR`: what an endpoint is sized for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpAttr {
    /// `service_type`.
    pub service_type: ServiceType,
    /// Largest send/recv message.
    pub max_message_size: u64,
    /// Largest RDMA transfer.
    pub max_rdma_size: u64,
    /// Quality of service (only best effort is supported).
    pub qos: Qos,
    /// Completion flags allowed on receives.
    pub recv_completion_flags: CompletionFlags,
    /// Completion flags allowed on requests (send, RDMA, bind).
    pub request_completion_flags: CompletionFlags,
    /// Receive queue depth.
    pub max_recv_dtos: u32,
    /// Request queue depth.
    pub max_request_dtos: u32,
    /// Segments per receive.
    pub max_recv_iov: u32,
    /// Segments per send.
    pub max_request_iov: u32,
    /// Incoming RDMA reads in flight.
    pub max_rdma_read_in: u32,
    /// Outgoing RDMA reads in flight.
    pub max_rdma_read_out: u32,
    /// SRQ soft high watermark (`DAT_HW_DEFAULT` = -1 is `None`).
    pub srq_soft_hw: Option<u32>,
    /// Local segments per RDMA read.
    pub max_rdma_read_iov: u32,
    /// Local segments per RDMA write.
    pub max_rdma_write_iov: u32,
}

/// A named attribute (`DAT_NAMED_ATTR`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedAttr {
    /// Attribute name, for example `DAT_IB_RDMA_READ`.
    pub name: String,
    /// Attribute value, for example `TRUE`.
    pub value: String,
}

impl NamedAttr {
    /// Builds a named attribute.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> NamedAttr {
        NamedAttr {
            name: name.into(),
            value: value.into(),
        }
    }
}

/// `DAT_IA_ATTR`: limits and identity of an open IA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IaAttr {
    /// Adapter name (the IA name of the registry).
    pub adapter_name: String,
    /// Vendor name (the provider).
    pub vendor_name: String,
    /// Hardware version (major, minor).
    pub hardware_version: (u32, u32),
    /// Firmware version (major, minor).
    pub firmware_version: (u32, u32),
    /// The IA's own address, as peers connect to it.
    pub ia_address: IaAddress,
    /// Endpoints per IA.
    pub max_eps: u32,
    /// Outstanding DTOs per EP queue.
    pub max_dto_per_ep: u32,
    /// Incoming RDMA reads in flight per EP.
    pub max_rdma_read_per_ep_in: u32,
    /// Outgoing RDMA reads in flight per EP.
    pub max_rdma_read_per_ep_out: u32,
    /// EVDs per IA.
    pub max_evds: u32,
    /// Events per EVD.
    pub max_evd_qlen: u32,
    /// Segments per DTO.
    pub max_iov_segments_per_dto: u32,
    /// LMRs per IA.
    pub max_lmrs: u32,
    /// Largest registration.
    pub max_lmr_block_size: u64,
    /// Highest registrable address.
    pub max_lmr_virtual_address: u64,
    /// PZs per IA.
    pub max_pzs: u32,
    /// Largest message.
    pub max_message_size: u64,
    /// Largest RDMA transfer.
    pub max_rdma_size: u64,
    /// RMRs per IA.
    pub max_rmrs: u32,
    /// Highest RMR target address.
    pub max_rmr_target_address: u64,
    /// SRQs per IA.
    pub max_srqs: u32,
    /// EPs per SRQ.
    pub max_ep_per_srq: u32,
    /// Receives per SRQ.
    pub max_recv_per_srq: u32,
    /// Local segments per RDMA read.
    pub max_iov_segments_per_rdma_read: u32,
    /// Local segments per RDMA write.
    pub max_iov_segments_per_rdma_write: u32,
    /// Incoming RDMA reads in flight per IA.
    pub max_rdma_read_in: u32,
    /// Outgoing RDMA reads in flight per IA.
    pub max_rdma_read_out: u32,
    /// Whether `max_rdma_read_per_ep_in` is guaranteed.
    pub max_rdma_read_per_ep_in_guaranteed: bool,
    /// Whether `max_rdma_read_per_ep_out` is guaranteed.
    pub max_rdma_read_per_ep_out_guaranteed: bool,
    /// Zero-based virtual addresses supported.
    pub zb_supported: bool,
    /// Transport attributes.
    pub transport_attr: Vec<NamedAttr>,
    /// Vendor attributes.
    pub vendor_attr: Vec<NamedAttr>,
}

/// `DAT_IOV_OWNERSHIP`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum IovOwnership {
    /// `DAT_IOV_CONSUMER`: the IOV array may be reused as soon as the post returns.
    #[default]
    Consumer = 0,
    /// `DAT_IOV_PROVIDER_NOMOD`.
    ProviderNoMod = 1,
    /// `DAT_IOV_PROVIDER_MOD`.
    ProviderMod = 2,
}

/// The six event streams, in the order of `evd_stream_merging_supported`.
pub const STREAMS: [EvdFlags; 6] = [
    EvdFlags::SOFTWARE,
    EvdFlags::CR,
    EvdFlags::DTO,
    EvdFlags::CONNECTION,
    EvdFlags::RMR_BIND,
    EvdFlags::ASYNC,
];

/// `DAT_PROVIDER_ATTR`: capabilities of the provider behind an IA.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderAttr {
    /// Provider name (`tcp`, `shm`, `verbs`).
    pub provider_name: String,
    /// Provider version (major, minor).
    pub provider_version: (u32, u32),
    /// DAT API version implemented: always (2, 0).
    pub dapl_version: (u32, u32),
    /// Whether the API may be called from several threads at once (always true for the Rust
    /// API; the C ABI reports what its dat.conf key says).
    pub is_thread_safe: bool,
    /// Largest private data on connect, accept and reject.
    pub max_private_data_size: u32,
    /// Who owns the IOV array after a post returns.
    pub iov_ownership_on_return: IovOwnership,
    /// Completion flags supported on posts.
    pub completion_flags_supported: CompletionFlags,
    /// Whether PSPs with the provider flag are supported.
    pub psp_provider_flag_supported: bool,
    /// Optimal buffer alignment in bytes.
    pub optimal_buffer_alignment: u32,
    /// Which event streams may share one EVD, `[row][col]` in [`STREAMS`] order.
    pub evd_stream_merging_supported: [[bool; 6]; 6],
    /// Shared receive queues supported.
    pub srq_supported: bool,
    /// Whether an SRQ and its EPs may be in different PZs.
    pub srq_ep_pz_difference_supported: bool,
    /// Whether RDMA read is supported (listed as `DAT_IB_RDMA_READ` for the C ABI).
    pub rdma_read_supported: bool,
    /// Provider-specific named attributes.
    pub provider_specific_attr: Vec<NamedAttr>,
}

/// The provider-specific attribute by which an IA with `zb_supported` says that windows and
/// zero-based addressing do not combine there: `FALSE` when its zero-based LMRs work but no
/// window is zero-based (`dat_rmr_bind` with `DAT_VA_TYPE_ZB`) or lies over a zero-based LMR
/// (the verbs provider's; see [`ProviderAttr::zb_windows`]). Absent: they combine.
pub const ZB_RMR_ATTR: &str = "DAT_ZB_RMR";

impl ProviderAttr {
    /// False if the provider says windows and zero-based addressing do not combine
    /// ([`ZB_RMR_ATTR`] = `FALSE`): such binds are `DAT_MODEL_NOT_SUPPORTED` there.
    pub fn zb_windows(&self) -> bool {
        !self
            .provider_specific_attr
            .iter()
            .any(|a| a.name == ZB_RMR_ATTR && a.value.eq_ignore_ascii_case("FALSE"))
    }

    /// True if an EVD with `flags` is allowed by `evd_stream_merging_supported`.
    pub fn streams_may_merge(&self, flags: EvdFlags) -> bool {
        for (i, a) in STREAMS.iter().enumerate() {
            for (j, b) in STREAMS.iter().enumerate() {
                if flags.contains(*a)
                    && flags.contains(*b)
                    && !self.evd_stream_merging_supported[i][j]
                {
                    return false;
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_values_match_the_headers() {
        assert_eq!(MemPriv::ALL.bits(), 0x33);
        assert_eq!(EvdFlags::DEFAULT.bits(), 0x1F0);
        assert_eq!(CompletionFlags::EVD_THRESHOLD.bits(), 0x10);
        assert_eq!(std::mem::size_of::<LmrTriplet>(), 16);
        assert_eq!(std::mem::size_of::<RmrTriplet>(), 16);
        assert_eq!(EventNumber::Unreachable as u32, 0x4008);
        assert_eq!(DtoStatus::from_raw(6), Some(DtoStatus::RemoteAccess));
        assert_eq!(DtoStatus::from_raw(13), None);
    }

    #[test]
    fn windows_combine_with_zero_based_addressing_unless_the_provider_says_not() {
        let mut p = crate::defaults::software_provider_attr("test", 64);
        assert!(p.zb_windows(), "no such attribute: they combine");
        for (value, combine) in [("FALSE", false), ("false", false), ("TRUE", true)] {
            p.provider_specific_attr = vec![
                NamedAttr::new("DAT_IB_RDMA_READ", "TRUE"),
                NamedAttr::new(ZB_RMR_ATTR, value),
            ];
            assert_eq!(p.zb_windows(), combine, "{value}");
        }
    }

    #[test]
    fn timeout_conversions() {
        assert_eq!(Timeout::INFINITE.duration(), None);
        assert_eq!(Timeout(1500).duration(), Some(Duration::from_micros(1500)));
        assert_eq!(
            Timeout::from_duration(Duration::from_secs(1)),
            Timeout(1_000_000)
        );
        assert_ne!(
            Timeout::from_duration(Duration::from_secs(1 << 40)),
            Timeout::INFINITE
        );
    }

    #[test]
    fn every_event_maps_to_one_stream() {
        assert_eq!(EventNumber::Broken.stream(), EvdFlags::CONNECTION);
        assert_eq!(EventNumber::AsyncEvdOverflow.stream(), EvdFlags::ASYNC);
        assert!(!MemPriv::LOCAL_READ.is_remote());
        assert!((MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE).is_remote());
    }
}

macro_rules! object_ids {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        ///
        /// Ids are allocated by the layer that creates the object, are unique for the life of
        /// their IA and are never reused, so a stale id can only ever miss.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u32);
    )*};
}

object_ids! {
    /// Identifies a protection zone within its IA.
    PzId,
    /// Identifies a local memory region within its IA.
    LmrId,
    /// Identifies a remote memory region (memory window) within its IA.
    RmrId,
    /// Identifies an event dispatcher within its IA.
    EvdId,
    /// Identifies a consumer notification object within its IA.
    CnoId,
    /// Identifies an endpoint within its IA.
    EpId,
    /// Identifies a service point (PSP or RSP) within its IA.
    SpId,
    /// Identifies a connection request within its IA (allocated by the provider).
    CrId,
    /// Identifies a shared receive queue within its IA.
    SrqId,
}
