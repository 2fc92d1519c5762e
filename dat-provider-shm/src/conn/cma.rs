//! Cross-memory attach at the target: the single copy between a peer's memory and ours,
//! through address lists the connection keeps across requests.

use dat_core::mem::Segment;
use dat_core::types::DtoStatus;

use super::iov::{STORES_IN_ORDER, advance, read_iovs, split_last_byte, truncate};
use super::{DataPath, EpView, Fatal, PeerGone, READ, SEND_ACK, Up, Ups};
use crate::copy;
use crate::ring::Incoming;
use crate::sys::{self, Iovs, RemoteIov};

impl DataPath {
    /// Reads the peer's address list of `inc` into `remote`: we must serve cross-memory
    /// requests, and the list must cover the request's length exactly.
    pub(super) fn peer_list(&self, inc: Incoming, remote: &mut Iovs) -> Result<(), Fatal> {
        read_iovs(inc, remote)?;
        if !self.cma_in || remote.iter().map(|i| i.len).sum::<u64>() != inc.rec.total {
            return Err(Fatal);
        }
        Ok(())
    }

    /// A message whose bytes the peer left in its own memory (`SEND_CMA`): copied by
    /// cross-memory attach into the receive at the front, through the address lists `local`
    /// and `remote` (the connection's, kept across requests).
    pub(super) fn send_cma(
        &mut self,
        inc: Incoming,
        ep: &mut EpView<'_>,
        out: &mut Ups,
        local: &mut Iovs,
        remote: &mut Iovs,
    ) -> Result<bool, Fatal> {
        let r = inc.rec;
        self.peer_list(inc, remote)?;
        let Some(wr) = self.take_recv(ep, out, r.total)? else {
            return Ok(false);
        };
        copy::iovs_into(&wr.segs, local);
        truncate(local, r.total);
        let status = match self.cma(local, remote, r.total, false) {
            Ok(status) => status,
            Err(PeerGone) => {
                // The sender died before we could copy: the message never arrived
                // and its receive stays posted (the breakage flushes it in order).
                ep.recvs.push_front(wr);
                return Err(Fatal);
            }
        };
        let n = if status == DtoStatus::Success {
            r.total as u32
        } else {
            0
        };
        out.push(Up::Done(ep.upcalls.clone(), wr.completion(status, n)));
        if status != DtoStatus::Success {
            self.ack(SEND_ACK, status);
            return Err(Fatal);
        }
        Ok(true)
    }

    /// The copy of an RDMA write or read whose requester left its addresses (`WRITE_CMA`,
    /// `READ`) into or out of the checked target segment `seg`, through the connection's
    /// address lists.
    pub(super) fn rdma_cma(
        &self,
        inc: Incoming,
        seg: &Segment,
        local: &mut Iovs,
        remote: &mut Iovs,
    ) -> Result<DtoStatus, Fatal> {
        let r = inc.rec;
        self.peer_list(inc, remote)?;
        let Some((p, len)) = copy::target(seg) else {
            return Err(Fatal);
        };
        local.clear();
        local.push(RemoteIov {
            addr: p as u64,
            len: len as u64,
        });
        Ok(self
            .cma(local, remote, r.total, r.kind == READ)
            .unwrap_or(DtoStatus::Transport))
    }

    /// The single copy of a cross-memory transfer, done by the target: `total` bytes between
    /// `local` (ranges of this process: a checked target region or a posted receive) and the
    /// peer's `remote` ranges, into the peer's memory when `into_peer`.
    /// [`PeerGone`] when the peer process has exited (`ESRCH`): its connection is about to
    /// report the hang-up.
    fn cma(
        &self,
        local: &mut Iovs,
        rest: &mut Iovs,
        total: u64,
        into_peer: bool,
    ) -> Result<DtoStatus, PeerGone> {
        // The ranges before these are done (see `advance`).
        let (mut l0, mut r0) = (0, 0);
        let mut done = 0u64;
        let last_apart = split_last_byte(local) && !STORES_IN_ORDER;
        while done < total {
            // The last byte lands last (see `split_last_byte`); on a weakly ordered CPU it
            // is copied by a call of its own, after a fence.
            let upto = local.len() - usize::from(last_apart && done + 1 < total);
            if last_apart && done + 1 == total {
                std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            }
            // SAFETY: every local range lies in registered memory that this request keeps
            // alive (the checked target segment, or the receive's segments) and that no Rust
            // reference borrows; the kernel checks the peer's ranges.
            let r = unsafe {
                if into_peer {
                    sys::cma_writev(self.peer_pid, &local[l0..upto], &rest[r0..])
                } else {
                    sys::cma_readv(self.peer_pid, &local[l0..upto], &rest[r0..])
                }
            };
            match r {
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(PeerGone),
                Ok(0) | Err(_) => {
                    tracing::warn!(pid = self.peer_pid, "shm: cross-memory attach failed");
                    return Ok(DtoStatus::Transport);
                }
                Ok(n) => {
                    done += n as u64;
                    advance(local, &mut l0, n as u64);
                    advance(rest, &mut r0, n as u64);
                }
            }
        }
        Ok(DtoStatus::Success)
    }
}
