//! Executing the peer's requests: its sends into our receives, its RDMA writes into our
//! memory (checked against the memory table first), its RDMA read requests queued for
//! [`super::transmit`].

use std::time::Instant;

use dat_core::mem::{Segment, scatter_at};
use dat_core::provider::{CmFact, WorkRequest};
use dat_core::types::{CompletionFlags, DtoStatus, MemPriv};

use super::{Engine, Event, Flow, ReadResp, RxCur, Streaming};
use crate::wire::{FIRST, Frame, LAST, SOLICITED, WireError};

/// Places bytes of an incoming RDMA write at offset `off` of its target `seg`; the piece
/// that ends the write (of `total` bytes) stores its last byte last, as InfiniBand does
/// (consumers poll the last byte of the target buffer, then read the rest).
pub(super) fn place_write(
    seg: &Segment,
    off: usize,
    bytes: &[u8],
    total: u64,
) -> dat_core::DatResult<()> {
    if (off as u64).saturating_add(bytes.len() as u64) >= total {
        seg.copy_from_ordered(off, bytes)
    } else {
        seg.copy_from(off, bytes)
    }
}

/// [`scatter_at`] from the start of a receive, the usual single segment copied to directly.
fn scatter_start(segs: &[Segment], src: &[u8]) {
    match segs {
        [seg] if src.len() <= seg.len => {
            // Inside the segment (checked again by `copy_from`, which then writes nothing).
            let _ = seg.copy_from(0, src);
        }
        _ => {
            scatter_at(segs, 0, src);
        }
    }
}

pub(super) fn bad(what: &'static str) -> WireError {
    WireError::Field(what)
}

impl Engine {
    /// Handles a frame while connected.
    /// `whole`: the length of the piece's whole payload when only its start is in `f`
    /// (zero-copy receive; the rest is placed through [`Engine::rx_direct`] or later
    /// input), `None` for a complete frame.
    pub(super) fn handle_data(
        &mut self,
        now: Instant,
        f: Frame<'_>,
        whole: Option<usize>,
    ) -> Result<Flow, WireError> {
        let n_of = |payload: &[u8]| {
            u32::try_from(whole.unwrap_or(payload.len())).map_err(|_| bad("piece length"))
        };
        match f {
            Frame::Send {
                msn,
                total,
                flags,
                payload,
            } => self.on_send(now, msn, total, flags, payload, n_of(payload)?),
            Frame::RdmaWrite {
                msn,
                total,
                rkey,
                addr,
                flags,
                payload,
            } => {
                let n = n_of(payload)?;
                self.on_write(now, (msn, total, rkey, addr, flags), payload, n)
            }
            Frame::ReadReq {
                msn,
                len,
                rkey,
                addr,
            } => {
                self.expect_new(msn)?;
                let seg = match self.check_remote(rkey, addr, len, MemPriv::REMOTE_READ) {
                    Ok(seg) => seg,
                    Err(status) => {
                        self.nak_and_break(msn, status);
                        return Ok(Flow::Stop);
                    }
                };
                self.responses.push_back(ReadResp {
                    msn,
                    seg,
                    total: len,
                    pos: 0,
                });
                self.executed(msn, now);
                Ok(Flow::Next)
            }
            Frame::ReadResp {
                msn,
                total,
                flags,
                payload,
            } => self.on_read_resp(msn, total, flags, payload, n_of(payload)?),
            Frame::Ack | Frame::Keepalive => Ok(Flow::Next),
            Frame::Nak { msn, status } => {
                self.on_nak(msn, status)?;
                Ok(Flow::Stop)
            }
            Frame::Disconnect => {
                self.drop_tx();
                self.terminate(CmFact::Disconnected);
                Ok(Flow::Stop)
            }
            Frame::ConnReq { .. }
            | Frame::Accept { .. }
            | Frame::Reject { .. }
            | Frame::Rtu
            | Frame::Confirm
            | Frame::NoListener => Err(WireError::Kind(f.kind() as u8)),
        }
    }

    /// A new request must carry the next MSN and start no message inside another.
    fn expect_new(&self, msn: u32) -> Result<(), WireError> {
        if self.rx_cur.is_some() {
            return Err(bad("new request inside a message"));
        }
        if msn != self.processed.wrapping_add(1) {
            return Err(bad("request out of sequence"));
        }
        Ok(())
    }

    /// Checks an incoming RDMA against the memory table; a zero-length one touches nothing
    /// and needs no key (as on InfiniBand).
    fn check_remote(
        &self,
        rkey: u32,
        addr: u64,
        len: u32,
        need: MemPriv,
    ) -> Result<Option<Segment>, DtoStatus> {
        if len == 0 {
            return Ok(None);
        }
        let pz = self.cfg.pz.ok_or(DtoStatus::RemoteAccess)?;
        let mem = self
            .cfg
            .mem
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        mem.remote(pz, rkey, addr, u64::from(len), need).map(Some)
    }

    fn take_recv(&mut self) -> Option<WorkRequest> {
        match &self.cfg.srq {
            Some(srq) => srq
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop_front(),
            None => self.recvs.pop_front(),
        }
    }

    fn on_send(
        &mut self,
        now: Instant,
        msn: u32,
        total: u32,
        flags: u8,
        payload: &[u8],
        n: u32,
    ) -> Result<Flow, WireError> {
        if flags & FIRST != 0 {
            self.expect_new(msn)?;
            let Some(recv) = self.take_recv() else {
                if self.parked_msn.is_none() {
                    tracing::trace!(msn, "send waits for a receive");
                    self.parked_msn = Some(msn);
                    self.rnr_deadline = Some(now + self.peer_rnr);
                }
                return Ok(Flow::Park);
            };
            self.parked_msn = None;
            self.rnr_deadline = None;
            if u64::from(total) > recv.len() {
                tracing::debug!(msn, total, room = recv.len(), "receive too small");
                self.events.push_back(Event::Completion(
                    recv.completion(DtoStatus::LocalLength, 0),
                ));
                self.nak_and_break(msn, DtoStatus::RemoteResponder);
                return Ok(Flow::Stop);
            }
            if flags & LAST != 0 && n == total && payload.len() == n as usize {
                // The whole message in this one piece (every small send): no receive state
                // to keep between pieces.
                scatter_start(&recv.segs, payload);
                self.complete_recv(&recv, total, flags);
                self.executed(msn, now);
                return Ok(Flow::Next);
            }
            scatter_at(&recv.segs, 0, payload);
            self.rx_cur = Some(RxCur::Send {
                msn,
                recv,
                total,
                pos: 0,
            });
        }
        let Some(RxCur::Send {
            msn: cur,
            total: t,
            pos,
            recv,
        }) = &mut self.rx_cur
        else {
            return Err(bad("send piece without a first piece"));
        };
        if *cur != msn || *t != total {
            return Err(bad("send piece of another message"));
        }
        let start = *pos;
        if flags & FIRST == 0 {
            scatter_at(&recv.segs, u64::from(start), payload);
        }
        self.advance_piece(n, total, flags)?;
        if self.stream_rest(Streaming::Send, msn, total, flags, start, payload.len(), n) {
            return Ok(Flow::Next);
        }
        self.finish_send(now, msn, total, flags);
        Ok(Flow::Next)
    }

    pub(super) fn finish_send(&mut self, now: Instant, msn: u32, total: u32, flags: u8) {
        if flags & LAST != 0 {
            if let Some(RxCur::Send { recv, .. }) = self.rx_cur.take() {
                self.complete_recv(&recv, total, flags);
            }
            self.executed(msn, now);
        }
    }

    /// Reports the receive that took a whole send of `total` bytes (its last piece had
    /// `flags`).
    fn complete_recv(&mut self, recv: &WorkRequest, total: u32, flags: u8) {
        let mut c = recv.completion(DtoStatus::Success, total);
        if flags & SOLICITED != 0 {
            c.flags |= CompletionFlags::SOLICITED_WAIT;
        }
        self.events.push_back(Event::Completion(c));
    }

    /// Advances the position of the message being received by a piece of `n` bytes, checking
    /// that the pieces add up and that `LAST` marks exactly the end.
    fn advance_piece(&mut self, n: u32, total: u32, flags: u8) -> Result<(), WireError> {
        let pos = match &mut self.rx_cur {
            Some(RxCur::Send { pos, .. } | RxCur::Write { pos, .. }) => pos,
            None => return Err(bad("piece without a message")),
        };
        let end = pos.checked_add(n).filter(|&e| e <= total);
        let Some(end) = end else {
            return Err(bad("pieces exceed the message"));
        };
        if (end == total) != (flags & LAST != 0) {
            return Err(bad("last piece flag"));
        }
        *pos = end;
        Ok(())
    }

    fn on_write(
        &mut self,
        now: Instant,
        (msn, total, rkey, addr, flags): (u32, u32, u32, u64, u8),
        payload: &[u8],
        n: u32,
    ) -> Result<Flow, WireError> {
        if flags & FIRST != 0 {
            self.expect_new(msn)?;
            // The whole range is checked before the first byte lands.
            let seg = match self.check_remote(rkey, addr, total, MemPriv::REMOTE_WRITE) {
                Ok(seg) => seg,
                Err(status) => {
                    self.nak_and_break(msn, status);
                    return Ok(Flow::Stop);
                }
            };
            self.rx_cur = Some(RxCur::Write {
                msn,
                seg,
                total,
                pos: 0,
            });
        }
        let Some(RxCur::Write {
            msn: cur,
            total: t,
            pos,
            seg,
        }) = &self.rx_cur
        else {
            return Err(bad("write piece without a first piece"));
        };
        if *cur != msn || *t != total {
            return Err(bad("write piece of another message"));
        }
        let start = *pos;
        if let Some(seg) = seg {
            let at = usize::try_from(start).map_err(|_| bad("offset"))?;
            place_write(seg, at, payload, u64::from(total))
                .map_err(|_| bad("write piece outside the region"))?;
        }
        self.advance_piece(n, total, flags)?;
        if self.stream_rest(Streaming::Write, msn, total, flags, start, payload.len(), n) {
            return Ok(Flow::Next);
        }
        self.finish_write(now, msn, flags);
        Ok(Flow::Next)
    }

    pub(super) fn finish_write(&mut self, now: Instant, msn: u32, flags: u8) {
        if flags & LAST != 0 {
            self.rx_cur = None;
            self.executed(msn, now);
        }
    }
}
