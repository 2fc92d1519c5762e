//! The baselines a DAT IA is judged against, using only std and libc (no DAT): raw TCP over
//! loopback ([`tcp`]), a two-process shared-memory spin ping-pong ([`shm`]), memcpy
//! ([`memcpy`]), and libfabric's `fi_pingpong` run as a subprocess ([`libfabric`]).
//!
//! Methods follow the project's performance anchors: latency is half a round trip in µs,
//! bandwidth MB/s (10^6 bytes/s); every loop is bounded by a timeout.

pub mod libfabric;
pub mod memcpy;
pub mod shm;
pub mod tcp;

/// The `provider` of baseline records.
pub const BASELINE: &str = "baseline";

/// Series names.
pub mod series {
    /// Raw TCP ping-pong, receiver spinning on non-blocking sockets.
    pub const TCP_SPIN: &str = "raw-tcp-spin";
    /// Raw TCP ping-pong with blocking sockets.
    pub const TCP_BLOCK: &str = "raw-tcp-block";
    /// Raw TCP one-way stream (blocking).
    pub const TCP_STREAM: &str = "raw-tcp";
    /// Two-process shared-memory flag-spin ping-pong.
    pub const SHM_SPIN: &str = "raw-shm-spin";
    /// memcpy in one thread.
    pub const MEMCPY: &str = "memcpy";
    /// libfabric fi_pingpong, tcp provider (MSG endpoint).
    pub const FI_TCP: &str = "fi-tcp";
    /// libfabric fi_pingpong, shm provider (RDM endpoint).
    pub const FI_SHM: &str = "fi-shm";
}
