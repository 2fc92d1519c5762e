//! `DAT_RETURN`: the DAT 2.0 status word, one to one with `dat2/dat_error.h`.
//!
//! A `DAT_RETURN` is a `u32` made of a class (bits 31..30: error, warning or none), a type
//! (bits 29..16) and a subtype (bits 15..0). [`DatError`] keeps all three, so every code that
//! libdat2 or a provider can produce converts to a `DatError` and back without loss.
//!
//! Errors we build ourselves carry the error class (`0x8000_0000`), as libdat2 and OFA dapl do
//! with `DAT_ERROR(type, sub)`. The one deliberate exception is [`DatError::QUEUE_EMPTY`], which
//! is returned *bare* (`0x000D_0000`) because `dtest -p` compares the result of
//! `dat_evd_dequeue` with `DAT_QUEUE_EMPTY` exactly (reference 2.4).

use std::fmt;

/// Declares a `#[repr]` enum together with its DAT name table and a fallible conversion from
/// the raw value. One table, so the name, the value and the variant cannot drift apart.
macro_rules! dat_codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $repr:ty {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal => $cname:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr($repr)]
        $vis enum $name {
            $( $(#[$vmeta])* #[doc = concat!("`", $cname, "`")] $variant = $value, )*
        }

        impl $name {
            /// Every value, in header order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The name used by the C headers (what `dat_strerror` prints).
            pub const fn dat_name(self) -> &'static str {
                match self { $($name::$variant => $cname,)* }
            }

            /// The raw numeric value.
            pub const fn raw(self) -> $repr {
                self as $repr
            }

            /// Converts a raw value; `None` if the headers define no such value.
            pub const fn from_raw(v: $repr) -> Option<Self> {
                match v { $($value => Some($name::$variant),)* _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.dat_name())
            }
        }
    };
}

dat_codes! {
    /// `DAT_RETURN_TYPE`: bits 29..16 of a `DAT_RETURN` (the values are already shifted).
    pub enum ErrorType: u32 {
        /// Operation aborted: the IA was closed or the EVD destroyed.
        Abort = 0x0001_0000 => "DAT_ABORT",
        ConnQualInUse = 0x0002_0000 => "DAT_CONN_QUAL_IN_USE",
        InsufficientResources = 0x0003_0000 => "DAT_INSUFFICIENT_RESOURCES",
        InternalError = 0x0004_0000 => "DAT_INTERNAL_ERROR",
        InvalidHandle = 0x0005_0000 => "DAT_INVALID_HANDLE",
        InvalidParameter = 0x0006_0000 => "DAT_INVALID_PARAMETER",
        InvalidState = 0x0007_0000 => "DAT_INVALID_STATE",
        LengthError = 0x0008_0000 => "DAT_LENGTH_ERROR",
        ModelNotSupported = 0x0009_0000 => "DAT_MODEL_NOT_SUPPORTED",
        /// Also known as `DAT_NAME_NOT_FOUND`.
        ProviderNotFound = 0x000A_0000 => "DAT_PROVIDER_NOT_FOUND",
        PrivilegesViolation = 0x000B_0000 => "DAT_PRIVILEGES_VIOLATION",
        ProtectionViolation = 0x000C_0000 => "DAT_PROTECTION_VIOLATION",
        QueueEmpty = 0x000D_0000 => "DAT_QUEUE_EMPTY",
        QueueFull = 0x000E_0000 => "DAT_QUEUE_FULL",
        TimeoutExpired = 0x000F_0000 => "DAT_TIMEOUT_EXPIRED",
        ProviderAlreadyRegistered = 0x0010_0000 => "DAT_PROVIDER_ALREADY_REGISTERED",
        ProviderInUse = 0x0011_0000 => "DAT_PROVIDER_IN_USE",
        InvalidAddress = 0x0012_0000 => "DAT_INVALID_ADDRESS",
        InterruptedCall = 0x0013_0000 => "DAT_INTERRUPTED_CALL",
        ConnQualUnavailable = 0x0014_0000 => "DAT_CONN_QUAL_UNAVAILABLE",
        /// kDAPL only.
        ReservedLmr = 0x0015_0000 => "DAT_RESERVED_LMR",
        PortInUse = 0x0016_0000 => "DAT_PORT_IN_USE",
        CommNotSupported = 0x0017_0000 => "DAT_COMM_NOT_SUPPORTED",
        /// Base of the range reserved for extensions (`DAT_IB_ERR`).
        ExtensionBase = 0x1000_0000 => "DAT_EXTENSION_BASE",
        NotImplemented = 0x3FFF_0000 => "DAT_NOT_IMPLEMENTED",
    }
}

dat_codes! {
    /// `DAT_RETURN_SUBTYPE`: bits 15..0 of a `DAT_RETURN`.
    pub enum Subtype: u16 {
        NoSubtype = 0 => "DAT_NO_SUBTYPE",
        SubInterrupted = 1 => "DAT_SUB_INTERRUPTED",
        ResourceMemory = 2 => "DAT_RESOURCE_MEMORY",
        ResourceDevice = 3 => "DAT_RESOURCE_DEVICE",
        ResourceTep = 4 => "DAT_RESOURCE_TEP",
        ResourceTevd = 5 => "DAT_RESOURCE_TEVD",
        ResourceProtectionDomain = 6 => "DAT_RESOURCE_PROTECTION_DOMAIN",
        ResourceMemoryRegion = 7 => "DAT_RESOURCE_MEMORY_REGION",
        ResourceErrorHandler = 8 => "DAT_RESOURCE_ERROR_HANDLER",
        ResourceCredits = 9 => "DAT_RESOURCE_CREDITS",
        ResourceSrq = 10 => "DAT_RESOURCE_SRQ",
        InvalidHandleIa = 11 => "DAT_INVALID_HANDLE_IA",
        InvalidHandleEp = 12 => "DAT_INVALID_HANDLE_EP",
        InvalidHandleLmr = 13 => "DAT_INVALID_HANDLE_LMR",
        InvalidHandleRmr = 14 => "DAT_INVALID_HANDLE_RMR",
        InvalidHandlePz = 15 => "DAT_INVALID_HANDLE_PZ",
        InvalidHandlePsp = 16 => "DAT_INVALID_HANDLE_PSP",
        InvalidHandleRsp = 17 => "DAT_INVALID_HANDLE_RSP",
        InvalidHandleCr = 18 => "DAT_INVALID_HANDLE_CR",
        InvalidHandleCno = 19 => "DAT_INVALID_HANDLE_CNO",
        InvalidHandleEvdCr = 20 => "DAT_INVALID_HANDLE_EVD_CR",
        InvalidHandleEvdRequest = 21 => "DAT_INVALID_HANDLE_EVD_REQUEST",
        InvalidHandleEvdRecv = 22 => "DAT_INVALID_HANDLE_EVD_RECV",
        InvalidHandleEvdConn = 23 => "DAT_INVALID_HANDLE_EVD_CONN",
        InvalidHandleEvdAsync = 24 => "DAT_INVALID_HANDLE_EVD_ASYNC",
        InvalidHandleSrq = 25 => "DAT_INVALID_HANDLE_SRQ",
        InvalidHandleCsp = 26 => "DAT_INVALID_HANDLE_CSP",
        InvalidHandle1 = 27 => "DAT_INVALID_HANDLE1",
        InvalidHandle2 = 28 => "DAT_INVALID_HANDLE2",
        InvalidHandle3 = 29 => "DAT_INVALID_HANDLE3",
        InvalidHandle4 = 30 => "DAT_INVALID_HANDLE4",
        InvalidHandle5 = 31 => "DAT_INVALID_HANDLE5",
        InvalidHandle6 = 32 => "DAT_INVALID_HANDLE6",
        InvalidHandle7 = 33 => "DAT_INVALID_HANDLE7",
        InvalidHandle8 = 34 => "DAT_INVALID_HANDLE8",
        InvalidHandle9 = 35 => "DAT_INVALID_HANDLE9",
        InvalidHandle10 = 36 => "DAT_INVALID_HANDLE10",
        InvalidArg1 = 37 => "DAT_INVALID_ARG1",
        InvalidArg2 = 38 => "DAT_INVALID_ARG2",
        InvalidArg3 = 39 => "DAT_INVALID_ARG3",
        InvalidArg4 = 40 => "DAT_INVALID_ARG4",
        InvalidArg5 = 41 => "DAT_INVALID_ARG5",
        InvalidArg6 = 42 => "DAT_INVALID_ARG6",
        InvalidArg7 = 43 => "DAT_INVALID_ARG7",
        InvalidArg8 = 44 => "DAT_INVALID_ARG8",
        InvalidArg9 = 45 => "DAT_INVALID_ARG9",
        InvalidArg10 = 46 => "DAT_INVALID_ARG10",
        StateEpUnconnected = 47 => "DAT_INVALID_STATE_EP_UNCONNECTED",
        StateEpActConnPending = 48 => "DAT_INVALID_STATE_EP_ACTCONNPENDING",
        StateEpPassConnPending = 49 => "DAT_INVALID_STATE_EP_PASSCONNPENDING",
        StateEpTentConnPending = 50 => "DAT_INVALID_STATE_EP_TENTCONNPENDING",
        StateEpConnected = 51 => "DAT_INVALID_STATE_EP_CONNECTED",
        StateEpDisconnected = 52 => "DAT_INVALID_STATE_EP_DISCONNECTED",
        StateEpReserved = 53 => "DAT_INVALID_STATE_EP_RESERVED",
        StateEpComplPending = 54 => "DAT_INVALID_STATE_EP_COMPLPENDING",
        StateEpDiscPending = 55 => "DAT_INVALID_STATE_EP_DISCPENDING",
        StateEpProviderControl = 56 => "DAT_INVALID_STATE_EP_PROVIDERCONTROL",
        StateEpNotReady = 57 => "DAT_INVALID_STATE_EP_NOTREADY",
        StateEpRecvWatermark = 58 => "DAT_INVALID_STATE_EP_RECV_WATERMARK",
        StateEpPz = 59 => "DAT_INVALID_STATE_EP_PZ",
        StateEpEvdRequest = 60 => "DAT_INVALID_STATE_EP_EVD_REQUEST",
        StateEpEvdRecv = 61 => "DAT_INVALID_STATE_EP_EVD_RECV",
        StateEpEvdConnect = 62 => "DAT_INVALID_STATE_EP_EVD_CONNECT",
        StateEpUnconfigured = 63 => "DAT_INVALID_STATE_EP_UNCONFIGURED",
        StateEpUnconfReserved = 64 => "DAT_INVALID_STATE_EP_UNCONFRESERVED",
        StateEpUnconfPassive = 65 => "DAT_INVALID_STATE_EP_UNCONFPASSIVE",
        StateEpUnconfTentative = 66 => "DAT_INVALID_STATE_EP_UNCONFTENTATIVE",
        StateCnoInUse = 67 => "DAT_INVALID_STATE_CNO_IN_USE",
        StateCnoDead = 68 => "DAT_INVALID_STATE_CNO_DEAD",
        StateEvdOpen = 69 => "DAT_INVALID_STATE_EVD_OPEN",
        StateEvdEnabled = 70 => "DAT_INVALID_STATE_EVD_ENABLED",
        StateEvdDisabled = 71 => "DAT_INVALID_STATE_EVD_DISABLED",
        StateEvdWaitable = 72 => "DAT_INVALID_STATE_EVD_WAITABLE",
        StateEvdUnwaitable = 73 => "DAT_INVALID_STATE_EVD_UNWAITABLE",
        StateEvdInUse = 74 => "DAT_INVALID_STATE_EVD_IN_USE",
        StateEvdConfigNotify = 75 => "DAT_INVALID_STATE_EVD_CONFIG_NOTIFY",
        StateEvdConfigSolicited = 76 => "DAT_INVALID_STATE_EVD_CONFIG_SOLICITED",
        StateEvdConfigThreshold = 77 => "DAT_INVALID_STATE_EVD_CONFIG_THRESHOLD",
        StateEvdWaiter = 78 => "DAT_INVALID_STATE_EVD_WAITER",
        StateEvdAsync = 79 => "DAT_INVALID_STATE_EVD_ASYNC",
        StateIaInUse = 80 => "DAT_INVALID_STATE_IA_IN_USE",
        StateLmrInUse = 81 => "DAT_INVALID_STATE_LMR_IN_USE",
        StateLmrFree = 82 => "DAT_INVALID_STATE_LMR_FREE",
        StatePzInUse = 83 => "DAT_INVALID_STATE_PZ_IN_USE",
        StatePzFree = 84 => "DAT_INVALID_STATE_PZ_FREE",
        StateSrqOperational = 85 => "DAT_INVALID_STATE_SRQ_OPERATIONAL",
        StateSrqError = 86 => "DAT_INVALID_STATE_SRQ_ERROR",
        StateSrqInUse = 87 => "DAT_INVALID_STATE_SRQ_IN_USE",
        StateSrqShutdown = 88 => "DAT_INVALID_STATE_SRQ_SHUTDOWN",
        PrivilegesRead = 89 => "DAT_PRIVILEGES_READ",
        PrivilegesWrite = 90 => "DAT_PRIVILEGES_WRITE",
        PrivilegesRdmaRead = 91 => "DAT_PRIVILEGES_RDMA_READ",
        PrivilegesRdmaWrite = 92 => "DAT_PRIVILEGES_RDMA_WRITE",
        ProtectionRead = 93 => "DAT_PROTECTION_READ",
        ProtectionWrite = 94 => "DAT_PROTECTION_WRITE",
        ProtectionRdmaRead = 95 => "DAT_PROTECTION_RDMA_READ",
        ProtectionRdmaWrite = 96 => "DAT_PROTECTION_RDMA_WRITE",
        InvalidAddressUnsupported = 97 => "DAT_INVALID_ADDRESS_UNSUPPORTED",
        InvalidAddressUnreachable = 98 => "DAT_INVALID_ADDRESS_UNREACHABLE",
        InvalidAddressMalformed = 99 => "DAT_INVALID_ADDRESS_MALFORMED",
        NameNotRegistered = 100 => "DAT_NAME_NOT_REGISTERED",
        MajorNotFound = 101 => "DAT_MAJOR_NOT_FOUND",
        MinorNotFound = 102 => "DAT_MINOR_NOT_FOUND",
        ThreadSafetyNotFound = 103 => "DAT_THREAD_SAFETY_NOT_FOUND",
    }
}

impl Subtype {
    /// `DAT_INVALID_ARGn` for a 1-based argument position (1..=10).
    ///
    /// # Panics
    /// Never at run time for positions 1..=10; other positions are a programming error and
    /// map to `DAT_NO_SUBTYPE` instead of panicking.
    pub const fn arg(position: u16) -> Subtype {
        match position {
            1..=10 => match Subtype::from_raw(Subtype::InvalidArg1 as u16 + position - 1) {
                Some(s) => s,
                None => Subtype::NoSubtype,
            },
            _ => Subtype::NoSubtype,
        }
    }

    /// `DAT_INVALID_HANDLEn` for a 1-based argument position (1..=10).
    pub const fn handle(position: u16) -> Subtype {
        match position {
            1..=10 => match Subtype::from_raw(Subtype::InvalidHandle1 as u16 + position - 1) {
                Some(s) => s,
                None => Subtype::NoSubtype,
            },
            _ => Subtype::NoSubtype,
        }
    }
}

/// The class bits of a `DAT_RETURN` (bits 31..30).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// `DAT_CLASS_ERROR` (`0x8000_0000`): what `DAT_ERROR(type, sub)` produces.
    Error,
    /// `DAT_CLASS_WARNING` (`0x4000_0000`).
    Warning,
    /// No class bit: a "bare" code such as the `DAT_QUEUE_EMPTY` that `dtest -p` expects.
    Bare,
}

/// `DAT_CLASS_ERROR`.
pub const DAT_CLASS_ERROR: u32 = 0x8000_0000;
/// `DAT_CLASS_WARNING`.
pub const DAT_CLASS_WARNING: u32 = 0x4000_0000;
/// `DAT_TYPE_MASK`.
pub const DAT_TYPE_MASK: u32 = 0x3FFF_0000;
/// `DAT_SUBTYPE_MASK`.
pub const DAT_SUBTYPE_MASK: u32 = 0x0000_FFFF;
/// `DAT_SUCCESS`.
pub const DAT_SUCCESS: u32 = 0;

/// A non-success `DAT_RETURN`: type, subtype and class.
///
/// Equality compares all three, so tests can assert exact codes. Use [`DatError::kind`] and
/// [`DatError::subtype`] to compare like `DAT_GET_TYPE` / `DAT_GET_SUBTYPE` do.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct DatError {
    kind: ErrorType,
    sub: Subtype,
    class: Class,
}

/// `Result` with a [`DatError`].
pub type DatResult<T> = Result<T, DatError>;

impl DatError {
    /// `DAT_QUEUE_EMPTY`, bare (`0x000D_0000`), as `dat_evd_dequeue` must return it.
    pub const QUEUE_EMPTY: DatError = DatError::bare(ErrorType::QueueEmpty, Subtype::NoSubtype);
    /// `DAT_TIMEOUT_EXPIRED` with the error class.
    pub const TIMEOUT_EXPIRED: DatError =
        DatError::new(ErrorType::TimeoutExpired, Subtype::NoSubtype);
    /// `DAT_NOT_IMPLEMENTED` with the error class.
    pub const NOT_IMPLEMENTED: DatError =
        DatError::new(ErrorType::NotImplemented, Subtype::NoSubtype);

    /// An error-class code: `DAT_ERROR(kind, sub)`.
    pub const fn new(kind: ErrorType, sub: Subtype) -> DatError {
        DatError {
            kind,
            sub,
            class: Class::Error,
        }
    }

    /// A code with no class bit (what OFA dapl returns on some paths, and `DAT_QUEUE_EMPTY`).
    pub const fn bare(kind: ErrorType, sub: Subtype) -> DatError {
        DatError {
            kind,
            sub,
            class: Class::Bare,
        }
    }

    /// A warning-class code.
    pub const fn warning(kind: ErrorType, sub: Subtype) -> DatError {
        DatError {
            kind,
            sub,
            class: Class::Warning,
        }
    }

    /// `DAT_INVALID_PARAMETER | DAT_INVALID_ARGn` (1-based argument position).
    pub const fn invalid_arg(position: u16) -> DatError {
        DatError::new(ErrorType::InvalidParameter, Subtype::arg(position))
    }

    /// `DAT_INVALID_HANDLE | sub`.
    pub const fn invalid_handle(sub: Subtype) -> DatError {
        DatError::new(ErrorType::InvalidHandle, sub)
    }

    /// `DAT_INVALID_STATE | sub`.
    pub const fn invalid_state(sub: Subtype) -> DatError {
        DatError::new(ErrorType::InvalidState, sub)
    }

    /// `DAT_INSUFFICIENT_RESOURCES | sub`.
    pub const fn resources(sub: Subtype) -> DatError {
        DatError::new(ErrorType::InsufficientResources, sub)
    }

    /// The type (what `DAT_GET_TYPE` extracts).
    pub const fn kind(self) -> ErrorType {
        self.kind
    }

    /// The subtype (what `DAT_GET_SUBTYPE` extracts).
    pub const fn subtype(self) -> Subtype {
        self.sub
    }

    /// The class bits.
    pub const fn class(self) -> Class {
        self.class
    }

    /// The same type and subtype without the class bit.
    pub const fn into_bare(self) -> DatError {
        DatError::bare(self.kind, self.sub)
    }

    /// The raw `DAT_RETURN`.
    pub const fn to_raw(self) -> u32 {
        let class = match self.class {
            Class::Error => DAT_CLASS_ERROR,
            Class::Warning => DAT_CLASS_WARNING,
            Class::Bare => 0,
        };
        class | self.kind.raw() | self.sub.raw() as u32
    }

    /// Decodes a raw `DAT_RETURN`.
    ///
    /// Returns `Ok(None)` for `DAT_SUCCESS` (which is not an error) and `Err(raw)` for a value
    /// that names a type or subtype the headers do not define (or sets both class bits).
    pub const fn from_raw(raw: u32) -> Result<Option<DatError>, u32> {
        if raw == DAT_SUCCESS {
            return Ok(None);
        }
        let class = match raw & (DAT_CLASS_ERROR | DAT_CLASS_WARNING) {
            DAT_CLASS_ERROR => Class::Error,
            DAT_CLASS_WARNING => Class::Warning,
            0 => Class::Bare,
            _ => return Err(raw),
        };
        let Some(kind) = ErrorType::from_raw(raw & DAT_TYPE_MASK) else {
            return Err(raw);
        };
        let Some(sub) = Subtype::from_raw((raw & DAT_SUBTYPE_MASK) as u16) else {
            return Err(raw);
        };
        Ok(Some(DatError { kind, sub, class }))
    }

    /// Converts a `DatResult<()>` to the raw `DAT_RETURN` (`DAT_SUCCESS` for `Ok`).
    pub fn result_to_raw(r: DatResult<()>) -> u32 {
        match r {
            Ok(()) => DAT_SUCCESS,
            Err(e) => e.to_raw(),
        }
    }
}

impl fmt::Display for DatError {
    /// Prints `"<type> <subtype>"` with the DAT names, like the two strings of `dat_strerror`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.sub)
    }
}

impl fmt::Debug for DatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DatError({:#010x}: {} {})",
            self.to_raw(),
            self.kind,
            self.sub
        )
    }
}

impl std::error::Error for DatError {}

impl From<DatError> for u32 {
    fn from(e: DatError) -> u32 {
        e.to_raw()
    }
}

impl TryFrom<u32> for DatError {
    type Error = u32;

    /// Decodes a raw non-success `DAT_RETURN`; `DAT_SUCCESS` and undefined codes are returned
    /// as `Err(raw)`.
    fn try_from(raw: u32) -> Result<DatError, u32> {
        match DatError::from_raw(raw) {
            Ok(Some(e)) => Ok(e),
            _ => Err(raw),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_and_subtype_round_trips_in_every_class() {
        assert_eq!(ErrorType::ALL.len(), 25);
        assert_eq!(Subtype::ALL.len(), 104);
        for &kind in ErrorType::ALL {
            for &sub in Subtype::ALL {
                for e in [
                    DatError::new(kind, sub),
                    DatError::bare(kind, sub),
                    DatError::warning(kind, sub),
                ] {
                    let raw = e.to_raw();
                    assert_eq!(DatError::try_from(raw), Ok(e), "{raw:#x}");
                    assert_eq!(raw & DAT_TYPE_MASK, kind.raw());
                    assert_eq!(raw & DAT_SUBTYPE_MASK, u32::from(sub.raw()));
                }
            }
        }
    }

    #[test]
    fn subtypes_are_consecutive_like_the_c_enum() {
        for (i, s) in Subtype::ALL.iter().enumerate() {
            assert_eq!(usize::from(s.raw()), i, "{s}");
        }
    }

    #[test]
    fn values_match_the_header_and_the_reference() {
        assert_eq!(
            DatError::invalid_handle(Subtype::InvalidHandleEp).to_raw(),
            0x8005_000C
        );
        assert_eq!(DatError::QUEUE_EMPTY.to_raw(), 0x000D_0000);
        assert_eq!(
            DatError::new(ErrorType::ProviderNotFound, Subtype::NameNotRegistered).to_raw(),
            0x800A_0064
        );
        assert_eq!(Subtype::StateEpUnconnected.raw(), 47);
        assert_eq!(Subtype::StatePzInUse.raw(), 83);
        assert_eq!(Subtype::ThreadSafetyNotFound.raw(), 103);
        assert_eq!(Subtype::arg(1), Subtype::InvalidArg1);
        assert_eq!(Subtype::arg(10), Subtype::InvalidArg10);
        assert_eq!(Subtype::arg(11), Subtype::NoSubtype);
        assert_eq!(Subtype::handle(3), Subtype::InvalidHandle3);
        assert_eq!(DatError::invalid_arg(6).to_raw(), 0x8006_002A);
    }

    #[test]
    fn success_and_undefined_codes_are_not_errors() {
        assert_eq!(DatError::from_raw(0), Ok(None));
        assert_eq!(DatError::try_from(0), Err(0));
        assert_eq!(DatError::try_from(0x8018_0000), Err(0x8018_0000)); // no type 0x18
        assert_eq!(DatError::try_from(0x8007_0068), Err(0x8007_0068)); // no subtype 104
        assert_eq!(DatError::try_from(0xC007_0000), Err(0xC007_0000)); // both class bits
        assert_eq!(DatError::result_to_raw(Ok(())), 0);
    }

    #[test]
    fn display_uses_dat_names() {
        let e = DatError::invalid_state(Subtype::StatePzInUse);
        assert_eq!(
            e.to_string(),
            "DAT_INVALID_STATE DAT_INVALID_STATE_PZ_IN_USE"
        );
        assert_eq!(
            DatError::QUEUE_EMPTY.to_string(),
            "DAT_QUEUE_EMPTY DAT_NO_SUBTYPE"
        );
        assert!(format!("{e:?}").contains("0x80070053"));
    }
}
