//! The one error type of datperf: which step failed and why, with the DAT code when a DAT
//! call failed.

use std::fmt;
use std::io;

use dat::{DatError, IaOpenError};

/// Why a measurement, a session or a baseline failed.
#[derive(Debug)]
pub enum PerfError {
    /// A DAT call returned an error code.
    Dat {
        /// What was being done.
        context: String,
        /// The DAT return code.
        code: DatError,
    },
    /// An IA could not be opened (unknown name, provider not compiled in, provider refused).
    Open(IaOpenError),
    /// The configuration could not be resolved.
    Config(dat_core::config::ConfigError),
    /// A socket, file or process operation failed.
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// The peer broke the out-of-band protocol or a completion was not what the test expects.
    Protocol(String),
    /// The peer closed the control socket.
    PeerClosed,
    /// Nothing arrived within the timeout.
    Timeout(String),
    /// The measurement cannot run here (size above the IA's limit, tool not installed, ...).
    Unsupported(String),
}

/// Result alias.
pub type PerfResult<T> = Result<T, PerfError>;

impl PerfError {
    /// A [`PerfError::Io`] with context.
    pub fn io(context: impl Into<String>, source: io::Error) -> PerfError {
        PerfError::Io {
            context: context.into(),
            source,
        }
    }

    /// A [`PerfError::Dat`] with context.
    pub fn dat(context: impl Into<String>, code: DatError) -> PerfError {
        PerfError::Dat {
            context: context.into(),
            code,
        }
    }
}

impl fmt::Display for PerfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PerfError::Dat { context, code } => write!(f, "{context}: {code}"),
            PerfError::Open(e) => write!(f, "{e}"),
            PerfError::Config(e) => write!(f, "{e}"),
            PerfError::Io { context, source } => write!(f, "{context}: {source}"),
            PerfError::Protocol(m) | PerfError::Timeout(m) | PerfError::Unsupported(m) => {
                f.write_str(m)
            }
            PerfError::PeerClosed => f.write_str("the peer closed the control socket"),
        }
    }
}

impl std::error::Error for PerfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PerfError::Open(e) => Some(e),
            PerfError::Config(e) => Some(e),
            PerfError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<IaOpenError> for PerfError {
    fn from(e: IaOpenError) -> PerfError {
        PerfError::Open(e)
    }
}

impl From<dat_core::config::ConfigError> for PerfError {
    fn from(e: dat_core::config::ConfigError) -> PerfError {
        PerfError::Config(e)
    }
}

/// Adds context to a DAT result.
pub(crate) trait DatContext<T> {
    fn ctx(self, context: &str) -> PerfResult<T>;
}

impl<T> DatContext<T> for Result<T, DatError> {
    fn ctx(self, context: &str) -> PerfResult<T> {
        self.map_err(|code| PerfError::dat(context, code))
    }
}

/// Adds context to an I/O result.
pub(crate) trait IoContext<T> {
    fn io_ctx(self, context: &str) -> PerfResult<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn io_ctx(self, context: &str) -> PerfResult<T> {
        self.map_err(|e| PerfError::io(context, e))
    }
}
