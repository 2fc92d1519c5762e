//! # dat-provider-shm
//!
//! The shared-memory transport of datrs (`provider = "shm"`): processes (and threads) of one
//! user on one Linux host talk without a network stack.
//!
//! * **Rendezvous** ([`rendezvous`]): one `SOCK_SEQPACKET` unix socket per connection
//!   qualifier in a private directory (mode 0700); no daemon. The acceptor checks the
//!   requester's credentials with `SO_PEERCRED` (same uid unless `allow_other_users`).
//! * **Data path** ([`ring`], `conn`): the requester creates a memfd segment holding two
//!   single-producer single-consumer rings and passes it, with one eventfd per side, over the
//!   socket (`SCM_RIGHTS`). Posting a message writes a ring slot and publishes it with one
//!   release store: no system call per message. A side that goes idle arms a flag and sleeps
//!   on its eventfd; the peer writes the eventfd only when that flag is set. A success needs
//!   no acknowledgement record: a target takes a request out of the ring only once it has
//!   carried it out, and every record carries its writer's ring head back (`conn`). The
//!   segment layout is versioned ([`ring::VERSION`]); both ends of a connection must be
//!   builds of the same layout (a segment of another version is refused).
//! * **Progress**: the application thread moves data when it posts and while it polls
//!   (`Evd::wait` spins on [`Transport::progress`] before it sleeps); a provider thread per IA
//!   serves connection management and target-side RDMA while the application sleeps. A
//!   waiter then sleeps in [`Transport::block`] on the rings' eventfds (one thread per IA at
//!   a time; others sleep on their EVD): the peer's wake-up reaches it directly and it takes
//!   its completions on its own thread, with no hand-off from the provider thread.
//! * **One core**: each side announces in the segment the CPU its polling thread runs on.
//!   When both pollers share one CPU and the thread may run on that CPU only (pinned, or a
//!   one-CPU machine), an empty poll naps on the rings' eventfds (woken by the peer's next
//!   record or another thread's delivery) and then yields, so the pair hands the CPU over per
//!   message instead of spinning out scheduler slices (`ia/nap.rs`, `tests/one_core.rs`). A
//!   thread allowed on more CPUs is left to the facade's pacing, so that a pair that merely
//!   started on one CPU is not kept there.
//! * **Graceful disconnect** waits for the requests already posted (their successes are
//!   reported before `DISCONNECTED`), at most two seconds (a peer that posts no receive would
//!   hold a send back forever); what is left is then flushed.
//! * **RDMA**: checked at the target with `MemTable::remote` (rkey, PZ, bounds, privileges;
//!   `DAT_DTO_ERR_REMOTE_ACCESS` and a broken connection on violation). With cross-memory
//!   attach the target copies once between its region and the requester's buffers
//!   (`process_vm_readv`/`writev`); otherwise the bytes travel through the ring. The mode is
//!   detected at IA open and per connection, and reported as the provider-specific attribute
//!   [`RDMA_MODE_ATTR`] (`"cma"` or `"copy"`). Even with cross-memory attach, a request of
//!   up to `rdma_inline` bytes (64 KiB, at most a quarter of the ring) travels through the
//!   ring, placed by the target from the slots: one system call costs more than two copies
//!   of a small payload (`BENCHMARKS.md`, "small RDMA, session 5"); the size is reported as
//!   [`RDMA_INLINE_ATTR`]. A send that fits one slot (`slot_size` less its 64-byte header
//!   line: 8 128 bytes by default) is always one record with its bytes, whatever
//!   `rdma_inline`: by cross-memory attach a 4 KiB message took 2.3x (the host's slow band)
//!   to 5x (its fast band) as long (`BENCHMARKS.md`, "Session 9, 4 KiB"). The checks and
//!   completions are the same in both ways. In both modes the last byte of an RDMA write (at
//!   the target) and of an RDMA read (at the requester) is stored last, as InfiniBand places
//!   it: consumers poll that byte, then read the rest (`dtest -D -a`).
//! * **Peer death**: the kernel closes a dead process's socket; the survivor sees the hang-up
//!   at once, takes in the messages and responses the peer had already published (not its
//!   RDMA requests), reports `Broken`, flushes, unmaps the segment and sweeps the rendezvous
//!   directory.
//! * **Flushed one-sided work**: when a connection is torn down locally while the peer may
//!   still be copying into or out of our buffers by cross-memory attach, the memory of those
//!   requests stays alive until the peer's end of the socket closes (bounded to one second at
//!   IA close).
//! * **Shared receive queues** are supported; an endpoint's queues are bounded by the IA's
//!   `max_dto_per_ep` (`DAT_INSUFFICIENT_RESOURCES` beyond).
//!
//! Limitation: a process that forks keeps the child holding the connection's socket and
//! mapping; the peer then only sees the hang-up once both have exited.
//!
//! # Parameters (`params` of the registry entry)
//! | key | type | default | meaning |
//! |-----|------|---------|---------|
//! | `dir` | string | `$XDG_RUNTIME_DIR/datrs-shm`, else `/tmp/datrs-shm-<uid>` | rendezvous directory |
//! | `ring_slots` | integer | 64 | slots per ring direction (power of two, 2..=65536) |
//! | `slot_size` | integer | 8192 | bytes per slot incl. its 64-byte header line (multiple of 64, 256..=1 MiB) |
//! | `rdma` | `"auto"` / `"copy"` | `"auto"` | allow cross-memory attach, or always copy through the ring |
//! | `rdma_inline` | integer | 65536 | with cross-memory attach, RDMA writes and reads (and sends larger than a slot) of up to this many bytes still travel through the ring (a send that fits one slot always does) (capped at a quarter of the ring): a `process_vm_readv`/`writev` system call per request costs more than copying a small payload twice (`BENCHMARKS.md`, "small RDMA, session 5"); 0: every RDMA by cross-memory attach |
//! | `allow_other_users` | bool | false | accept requesters of other user ids (then `dir` is used as set up by the administrator, not forced to 0700; cross-memory attach across users needs `CAP_SYS_PTRACE`, else the ring copy is used) |
//! | `connect_retry_ms` | integer | 500 | how long a connect that finds nobody listening (no service point on the qualifier yet) is retried, backoff 10 ms doubling to 100 ms with a last attempt at the end, before `NON_PEER_REJECTED`, as InfiniBand's CM retries a request (`dtest` relies on it); a shorter consumer timeout still ends it with `TIMED_OUT` (0: no retry) |
//! | `wait_in_provider` | bool | true | a waiting thread sleeps on the rings' wake-ups (`Transport::block`: one wake-up instead of two, the provider thread's and the facade's); `false` sleeps on the facade's condition variable |
//!
//! Qualifiers are host-wide (like TCP ports): an IA address is always `127.0.0.1:0`, and any
//! loopback address reaches every shm IA of the user.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use dat_core::error::{DatError, ErrorType, Subtype};
use dat_core::provider::{OpenError, OpenRequest, Provider, Transport};

mod conn;
mod copy;
mod ia;
pub mod rendezvous;
pub mod ring;
mod sys;
mod wire;

pub use ia::{NapCounts, Params, ShmIa, nap_counts};

/// Name of the provider-specific attribute that reports the RDMA mode: `"cma"` (one copy by
/// cross-memory attach) or `"copy"` (through the ring).
pub const RDMA_MODE_ATTR: &str = "DATRS_SHM_RDMA_MODE";

/// Name of the provider-specific attribute that reports, in `"cma"` mode, up to how many
/// bytes a request still travels through the ring (`rdma_inline`, at most a quarter of the
/// ring of the connections the IA makes); `"all"` in `"copy"` mode.
pub const RDMA_INLINE_ATTR: &str = "DATRS_SHM_RDMA_INLINE";

/// Default of `rdma_inline`: measured in `BENCHMARKS.md` ("small RDMA, session 5").
const DEFAULT_RDMA_INLINE: u64 = 64 * 1024;

/// The shared-memory provider (`provider = "shm"`).
#[derive(Debug, Default)]
pub struct ShmProvider;

impl ShmProvider {
    /// A provider instance.
    pub fn new() -> Arc<ShmProvider> {
        Arc::new(ShmProvider)
    }
}

fn parse(req: &OpenRequest<'_>) -> Result<Params, OpenError> {
    let bad = |m: String| {
        OpenError::new(
            DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype),
            format!("{}: IA `{}`: {m}", req.origin, req.ia_name),
        )
    };
    let mut p = Params {
        dir: rendezvous::default_dir(),
        slots: 64,
        slot_size: 8192,
        cma: true,
        inline_max: DEFAULT_RDMA_INLINE,
        allow_other_users: false,
        wait_in_provider: true,
        connect_retry: Duration::from_millis(500),
    };
    for (k, v) in req.params {
        match (k.as_str(), v) {
            ("dir", toml::Value::String(s)) if !s.is_empty() => p.dir = PathBuf::from(s),
            ("ring_slots", toml::Value::Integer(n)) => {
                p.slots = u32::try_from(*n)
                    .ok()
                    .filter(|n| n.is_power_of_two() && (2..=65_536).contains(n))
                    .ok_or_else(|| {
                        bad(format!(
                            "params.ring_slots = {n}: a power of two in 2..=65536"
                        ))
                    })?;
            }
            ("slot_size", toml::Value::Integer(n)) => {
                p.slot_size = u32::try_from(*n)
                    .ok()
                    .filter(|n| n % 64 == 0 && (256..=1 << 20).contains(n))
                    .ok_or_else(|| {
                        bad(format!(
                            "params.slot_size = {n}: a multiple of 64 in 256..=1048576"
                        ))
                    })?;
            }
            ("rdma", toml::Value::String(s)) if s == "auto" || s == "copy" => p.cma = s == "auto",
            ("rdma_inline", toml::Value::Integer(n)) => {
                p.inline_max = u64::try_from(*n)
                    .ok()
                    .filter(|n| *n <= 1 << 24)
                    .ok_or_else(|| {
                        bad(format!("params.rdma_inline = {n}: bytes in 0..=16777216"))
                    })?;
            }
            ("allow_other_users", toml::Value::Boolean(b)) => p.allow_other_users = *b,
            ("wait_in_provider", toml::Value::Boolean(b)) => p.wait_in_provider = *b,
            ("connect_retry_ms", toml::Value::Integer(n)) => {
                let ms = u64::try_from(*n)
                    .ok()
                    .filter(|n| *n <= 600_000)
                    .ok_or_else(|| {
                        bad(format!(
                            "params.connect_retry_ms = {n}: milliseconds in 0..=600000"
                        ))
                    })?;
                p.connect_retry = Duration::from_millis(ms);
            }
            _ => {
                return Err(bad(format!(
                    "unknown or mistyped key `params.{k}` (the shm provider takes `dir`, `ring_slots`, `slot_size`, `rdma` = \"auto\"|\"copy\", `rdma_inline`, `allow_other_users`, `wait_in_provider`, `connect_retry_ms`)"
                )));
            }
        }
    }
    Ok(p)
}

impl Provider for ShmProvider {
    fn name(&self) -> &'static str {
        "shm"
    }

    /// Opens an shm IA.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` for an unknown or invalid parameter (the message names it);
    /// `DAT_INSUFFICIENT_RESOURCES` if the rendezvous directory cannot be prepared (created
    /// 0700 and owned by this user) or the provider thread cannot start.
    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError> {
        let params = parse(&req)?;
        let dir = params.dir.clone();
        let ia = ShmIa::open(req.ia_name, params, req.mem.clone(), req.upcalls.clone()).map_err(
            |e| {
                OpenError::new(
                    DatError::resources(Subtype::NoSubtype),
                    format!(
                        "{}: IA `{}`: shm rendezvous directory {}: {e}",
                        req.origin,
                        req.ia_name,
                        dir.display()
                    ),
                )
            },
        )?;
        Ok(Arc::new(ia))
    }
}
