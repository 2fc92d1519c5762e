//! One endpoint: its `rdma_cm_id` and QP, the work requests it has outstanding, and posting.
//!
//! Every work request gets a `wr_id` from one counter of the IA (so posting order is key
//! order) and stays in the endpoint's map, with the memory it names, until its work
//! completion arrives; a request flushed by the provider before the hardware flushed it is
//! marked `reported` and dropped silently when the hardware's flush arrives.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use dat_core::provider::{Completion, EpConfig, EpUpcalls, PostOp, WorkRequest};
use dat_core::types::{DtoStatus, EpId};
use rdma_sys as sys;

use crate::cm::CmId;
use crate::verbs::{SEND_SIGNALED, send_flags};

/// Bit 63 of a `wr_id`: a receive posted to a shared receive queue.
pub const WR_SRQ: u64 = 1 << 63;
/// Bit 62 of a `wr_id`: a receive (on the endpoint's own receive queue, or an SRQ).
pub const WR_RECV: u64 = 1 << 62;

/// Bit 61 of a `wr_id`: a memory window bind (no consumer request behind it).
pub const WR_BIND: u64 = 1 << 61;

/// Where an endpoint is in its connection's life, as the provider sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// No connection.
    Idle,
    /// Active: resolving the address and route.
    Resolving,
    /// Active: connect sent.
    Connecting,
    /// Passive: accept sent, waiting for ESTABLISHED.
    Accepting,
    /// Established.
    Connected,
    /// A terminal fact is being reported (successes drained, flush pending).
    Closing,
    /// The terminal fact was reported.
    Done,
}

impl Phase {
    /// True while a connection is being made or is up.
    pub fn is_live(self) -> bool {
        matches!(
            self,
            Phase::Resolving | Phase::Connecting | Phase::Accepting | Phase::Connected
        )
    }
}

/// A work request the hardware (or the provider, before the QP exists) holds.
#[derive(Debug)]
pub struct Pending {
    /// The request (keeps its memory alive).
    pub wr: WorkRequest,
    /// Signalled (sends): a completion of its own will arrive.
    pub signaled: bool,
    /// Given to the hardware (a receive posted before the QP exists is not).
    pub posted: bool,
    /// Reported to the consumer already (flushed by the provider).
    pub reported: bool,
}

/// The state of an endpoint behind its lock.
pub struct EpSt {
    /// The configuration.
    pub cfg: EpConfig,
    /// The connection's id and QP.
    pub cm: Option<CmId>,
    /// Connection phase.
    pub phase: Phase,
    /// Active side.
    pub active: bool,
    /// The framed private data of a connect, until `rdma_connect`.
    pub pdata: Vec<u8>,
    /// The consumer's connect timeout.
    pub deadline: Option<Instant>,
    /// When address and route resolution is given up (see `ia::RESOLVE_LIMIT`).
    pub resolve_by: Option<Instant>,
    /// A graceful disconnect waits for the sends outstanding, until then (see
    /// `ia::GRACEFUL_LIMIT`).
    pub graceful_by: Option<Instant>,
    /// Inline limit the QP was granted.
    pub max_inline: u32,
    /// Requests on the send queue, by `wr_id` (boxed: a request is moved into the map and out
    /// again once per message, and a pointer moves for less than the copies of the request it
    /// replaces cost).
    pub sends: BTreeMap<u64, Box<Pending>>,
    /// Receives on the endpoint's own receive queue, by `wr_id` (boxed as `sends`).
    pub recvs: BTreeMap<u64, Box<Pending>>,
    /// The CQs the QP uses (drained before a terminal fact).
    pub cqs: Vec<Arc<crate::ia::CqSlot>>,
    /// The SRQ the QP takes receives from.
    pub srq: Option<Arc<crate::ia::SrqSlot>>,
    /// Memory window binds posted, by `wr_id`, with their status once complete.
    pub binds: std::collections::HashMap<u64, Option<DtoStatus>>,
}

/// One endpoint.
pub struct Ep {
    /// Its id.
    pub id: EpId,
    /// Where its facts go.
    pub upcalls: Arc<dyn EpUpcalls>,
    /// Its state.
    pub st: Mutex<EpSt>,
}

impl Ep {
    /// A new, unconnected endpoint.
    pub fn new(id: EpId, cfg: EpConfig, upcalls: Arc<dyn EpUpcalls>) -> Ep {
        Ep {
            id,
            upcalls,
            st: Mutex::new(EpSt {
                cfg,
                cm: None,
                phase: Phase::Idle,
                active: false,
                pdata: Vec::new(),
                deadline: None,
                resolve_by: None,
                graceful_by: None,
                max_inline: 0,
                sends: BTreeMap::new(),
                recvs: BTreeMap::new(),
                cqs: Vec::new(),
                srq: None,
                binds: std::collections::HashMap::new(),
            }),
        }
    }
}

impl EpSt {
    /// True while a request of the send queue has not been reported.
    pub fn sends_outstanding(&self) -> bool {
        self.sends.values().any(|p| !p.reported)
    }

    /// Marks every unreported request flushed and returns their completions in posting order
    /// per queue (sends, then receives). Requests never given to the hardware are dropped;
    /// the others stay until the hardware's flush (or the QP's destruction).
    pub fn flush_all(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        for q in [&mut self.sends, &mut self.recvs] {
            q.retain(|_, p| {
                if !p.reported {
                    out.push(p.wr.completion(DtoStatus::Flushed, 0));
                    p.reported = true;
                }
                p.posted
            });
        }
        out
    }

    /// Forgets the requests the hardware held (after the QP was destroyed) and keeps the
    /// receives never posted (they are posted to the next QP).
    pub fn forget_posted(&mut self) {
        self.sends.clear();
        self.recvs.retain(|_, p| !p.posted && !p.reported);
    }
}

/// Scatter/gather entries of a request's segments (zero-length segments are left out: some
/// devices read a zero length as 2 GiB).
fn sges(wr: &WorkRequest) -> smallvec::SmallVec<[sys::ibv_sge; 4]> {
    wr.segs
        .iter()
        .filter(|s| s.len > 0)
        .map(|s| sys::ibv_sge {
            // The segment lies inside its registered buffer (the core resolved it).
            addr: s.buf.as_ptr() as u64 + s.offset as u64,
            length: u32::try_from(s.len).unwrap_or(u32::MAX),
            lkey: s.lkey,
        })
        .collect()
}

/// Posts a receive to `qp` (or, with `srq`, to the SRQ).
///
/// # Errors
/// The errno of `ibv_post_recv` / `ibv_post_srq_recv` (ENOMEM: queue full).
pub fn post_recv(
    qp: *mut sys::ibv_qp,
    srq: Option<*mut sys::ibv_srq>,
    wr_id: u64,
    wr: &WorkRequest,
) -> io::Result<()> {
    let mut list = sges(wr);
    // SAFETY: plain data; all-zero is valid.
    let mut r: sys::ibv_recv_wr = unsafe { std::mem::zeroed() };
    r.wr_id = wr_id;
    r.sg_list = list.as_mut_ptr();
    r.num_sge = i32::try_from(list.len()).unwrap_or(i32::MAX);
    let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
    // SAFETY: the QP (or SRQ) is live (its owner's lock is held); the work request and its
    // scatter list are valid for the call (the provider copies them); the memory they name is
    // registered and kept alive by `wr` until the completion.
    let rc = unsafe {
        match srq {
            Some(srq) => sys::ibv_post_srq_recv(srq, &mut r, &mut bad),
            None => sys::ibv_post_recv(qp, &mut r, &mut bad),
        }
    };
    crate::device::errno_result(rc)
}

/// Posts a send, RDMA write or RDMA read to `qp`. Returns whether it was signalled.
///
/// # Errors
/// The errno of `ibv_post_send` (ENOMEM: queue full, EINVAL: bad request).
pub fn post_send(
    qp: *mut sys::ibv_qp,
    wr_id: u64,
    wr: &WorkRequest,
    max_inline: u32,
) -> io::Result<bool> {
    let mut list = sges(wr);
    let len = wr.len();
    let inline = len > 0
        && len <= u64::from(max_inline)
        && matches!(wr.op, PostOp::Send | PostOp::RdmaWrite(_));
    // SAFETY: plain data; all-zero is valid.
    let mut s: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    s.wr_id = wr_id;
    s.sg_list = list.as_mut_ptr();
    s.num_sge = i32::try_from(list.len()).unwrap_or(i32::MAX);
    s.send_flags = send_flags(wr.flags, inline);
    use sys::ibv_wr_opcode as op;
    match wr.op {
        PostOp::Send => s.opcode = op::IBV_WR_SEND,
        PostOp::RdmaWrite(t) | PostOp::RdmaRead(t) => {
            s.opcode = if matches!(wr.op, PostOp::RdmaWrite(_)) {
                op::IBV_WR_RDMA_WRITE
            } else {
                op::IBV_WR_RDMA_READ
            };
            s.wr.rdma = sys::rdma_t {
                remote_addr: t.virtual_address,
                rkey: t.rmr_context,
            };
        }
        PostOp::Recv => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
    }
    let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: the QP is live (its owner's lock is held); the work request and its gather
    // list are valid for the call; the memory named is registered and kept alive by `wr`
    // until the completion (inline data is copied during the call).
    let rc = unsafe { sys::ibv_post_send(qp, &mut s, &mut bad) };
    crate::device::errno_result(rc)?;
    Ok(s.send_flags & SEND_SIGNALED != 0)
}

/// Posts a type 2 memory window bind of `mw` (new key `rkey`) to `length` bytes at `addr` of
/// `mr` with `access` (`mw_access_flags`), signalled.
///
/// # Errors
/// The errno of `ibv_post_send`.
pub fn post_bind(
    qp: *mut sys::ibv_qp,
    wr_id: u64,
    mw: &crate::verbs::Mw,
    rkey: u32,
    mr: &crate::verbs::Mr,
    (addr, length, access): (u64, u64, u32),
) -> io::Result<()> {
    // SAFETY: plain data; all-zero is valid.
    let mut s: sys::ibv_send_wr = unsafe { std::mem::zeroed() };
    s.wr_id = wr_id;
    s.opcode = sys::ibv_wr_opcode::IBV_WR_BIND_MW;
    s.send_flags = SEND_SIGNALED;
    s.bind_mw_tso_union.bind_mw = sys::bind_mw_t {
        mw: mw.as_ptr(),
        rkey,
        bind_info: sys::ibv_mw_bind_info {
            mr: mr.as_ptr(),
            addr,
            length,
            mw_access_flags: access,
        },
    };
    let mut bad: *mut sys::ibv_send_wr = std::ptr::null_mut();
    // SAFETY: the QP, window and MR are live (the caller holds them and the endpoint's lock);
    // the work request is valid for the call.
    let rc = unsafe { sys::ibv_post_send(qp, &mut s, &mut bad) };
    crate::device::errno_result(rc)
}
