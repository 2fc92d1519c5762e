//! The data path of the engine: transmitting our requests and read responses, executing the
//! peer's requests, acknowledgements and completions.

use std::time::Instant;

use dat_core::mem::{Segment, gather_at, scatter_at, scatter_at_ordered};
use dat_core::provider::{CmFact, PostOp, WorkRequest};
use dat_core::types::{CompletionFlags, DtoStatus, MemPriv};

use super::txq::TxQueue;
use super::{
    ACK_DELAY, ACK_EVERY, Engine, Event, Flow, Pending, ReadResp, RxCur, RxStream, Streaming,
    TX_HIGH_WATER, ZERO_COPY_MIN, seq_le,
};
use crate::wire::{DataHeader, FIRST, Frame, LAST, MAX_CHUNK, SOLICITED, WireError};

/// Queues `n` bytes of the concatenation of `segs` from logical position `pos` by reference.
/// Segments shorter than announced (impossible for resolved posts) are padded with zeros so
/// the frame keeps its announced length.
fn push_segments(txq: &mut TxQueue, segs: &[Segment], mut pos: u64, n: usize) {
    let mut left = n;
    for s in segs {
        if left == 0 {
            break;
        }
        let len = s.len_u64();
        if pos >= len {
            pos -= len;
            continue;
        }
        let off = usize::try_from(pos).unwrap_or(usize::MAX);
        let take = (s.len - off).min(left);
        txq.push_mem(s, off, take);
        left -= take;
        pos = 0;
    }
    if left > 0 {
        tracing::error!(left, "segments shorter than the message");
        let at = txq.buf.len();
        txq.buf.resize(at + left, 0);
    }
}

/// Places bytes of an incoming RDMA write at offset `off` of its target `seg`; the piece
/// that ends the write (of `total` bytes) stores its last byte last, as InfiniBand does
/// (consumers poll the last byte of the target buffer, then read the rest).
fn place_write(seg: &Segment, off: usize, bytes: &[u8], total: u64) -> dat_core::DatResult<()> {
    if (off as u64).saturating_add(bytes.len() as u64) >= total {
        seg.copy_from_ordered(off, bytes)
    } else {
        seg.copy_from(off, bytes)
    }
}

/// Places bytes of an RDMA read response at message position `at` of the read's local
/// segments; the piece that ends the response stores its last byte last.
fn place_read(segs: &[Segment], at: u64, bytes: &[u8], total: u64) {
    if at.saturating_add(bytes.len() as u64) >= total {
        scatter_at_ordered(segs, at, bytes);
    } else {
        scatter_at(segs, at, bytes);
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

/// [`gather_at`] for a small payload, the usual single segment copied from directly.
fn gather_small(segs: &[Segment], pos: u64, dst: &mut [u8]) {
    match (segs, usize::try_from(pos)) {
        ([seg], Ok(off)) if off.checked_add(dst.len()).is_some_and(|e| e <= seg.len) => {
            if seg.copy_to(off, dst).is_err() {
                tracing::error!("send source out of range");
            }
        }
        _ => {
            gather_at(segs, pos, dst);
        }
    }
}

fn bad(what: &'static str) -> WireError {
    WireError::Field(what)
}

/// Flags of the piece `pos..pos+n` of a message of `total` bytes.
fn piece_flags(pos: u32, n: u32, total: u32) -> u8 {
    let mut f = 0;
    if pos == 0 {
        f |= FIRST;
    }
    if pos.saturating_add(n) >= total {
        f |= LAST;
    }
    f
}

impl Engine {
    /// Applies the peer's cumulative acknowledgement.
    pub(super) fn on_ack(&mut self, ack: u32) -> Result<(), WireError> {
        if ack == self.peer_acked {
            return Ok(());
        }
        if !seq_le(self.peer_acked, ack) || !seq_le(ack, self.last_sent) {
            return Err(bad("acknowledgement of a request never sent"));
        }
        self.peer_acked = ack;
        self.complete_front();
        Ok(())
    }

    /// Reports, in posting order, every request at the front that has finished.
    fn complete_front(&mut self) {
        while let Some(p) = self.outstanding.front() {
            let finished = if matches!(p.wr.op, PostOp::RdmaRead(_)) {
                p.done
            } else {
                self.tx_idx > 0 && seq_le(p.msn, self.peer_acked)
            };
            if !finished {
                break;
            }
            if let Some(p) = self.outstanding.pop_front() {
                self.tx_idx = self.tx_idx.saturating_sub(1);
                // A successful completion the consumer suppressed is never delivered: it is
                // only counted, and the count reported before the next completion of a
                // request or at the end of the connection (errors are always reported).
                // Reporting each run cost a ping-pong whose sends are suppressed an event
                // and an upcall per message.
                if p.wr.flags.contains(CompletionFlags::SUPPRESS) {
                    self.quiet_done += 1;
                } else {
                    self.report_quiet();
                    self.events.push_back(Event::Completion(
                        p.wr.completion(DtoStatus::Success, p.len),
                    ));
                }
            }
        }
    }

    /// Queues the count of suppressed requests that succeeded since the last report as
    /// [`Event::Retired`], if any. Called before any later completion of a request is queued
    /// and when the connection ends, so that the consumer never sees a completion of a
    /// request posted after them while they still count as outstanding.
    pub(super) fn report_quiet(&mut self) {
        while self.quiet_done > 0 {
            let n = u32::try_from(self.quiet_done).unwrap_or(u32::MAX);
            self.events.push_back(Event::Retired(n));
            self.quiet_done -= u64::from(n);
        }
    }

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

    fn finish_send(&mut self, now: Instant, msn: u32, total: u32, flags: u8) {
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

    /// When only `present` of the piece's `n` payload bytes (starting at message position
    /// `start`) were in the input, records where the rest goes and returns true.
    #[allow(clippy::too_many_arguments)]
    fn stream_rest(
        &mut self,
        kind: Streaming,
        msn: u32,
        total: u32,
        flags: u8,
        start: u32,
        present: usize,
        n: u32,
    ) -> bool {
        let n = n as usize;
        if present >= n {
            return false;
        }
        self.rx_stream = Some(RxStream {
            kind,
            msn,
            total,
            flags,
            at: u64::from(start) + present as u64,
            left: n - present,
        });
        true
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

    fn finish_write(&mut self, now: Instant, msn: u32, flags: u8) {
        if flags & LAST != 0 {
            self.rx_cur = None;
            self.executed(msn, now);
        }
    }

    fn on_read_resp(
        &mut self,
        msn: u32,
        total: u32,
        flags: u8,
        payload: &[u8],
        n: u32,
    ) -> Result<Flow, WireError> {
        let front = self.outstanding.front().map(|p| p.msn).unwrap_or(msn);
        let idx = usize::try_from(msn.wrapping_sub(front)).map_err(|_| bad("msn"))?;
        if idx >= self.tx_idx {
            return Err(bad("response to a read never sent"));
        }
        let Some(p) = self.outstanding.get_mut(idx) else {
            return Err(bad("response to an unknown read"));
        };
        if p.msn != msn || !matches!(p.wr.op, PostOp::RdmaRead(_)) || p.done || p.len != total {
            return Err(bad("response does not match the read"));
        }
        if (flags & FIRST != 0) != (p.read_pos == 0) {
            return Err(bad("first piece flag"));
        }
        let end = p.read_pos.checked_add(n).filter(|&e| e <= total);
        let Some(end) = end else {
            return Err(bad("response exceeds the read"));
        };
        if (end == total) != (flags & LAST != 0) {
            return Err(bad("last piece flag"));
        }
        let start = p.read_pos;
        place_read(&p.wr.segs, u64::from(start), payload, u64::from(total));
        p.read_pos = end;
        if self.stream_rest(
            Streaming::ReadResp,
            msn,
            total,
            flags,
            start,
            payload.len(),
            n,
        ) {
            return Ok(Flow::Next);
        }
        self.finish_read(msn);
        Ok(Flow::Next)
    }

    fn finish_read(&mut self, msn: u32) {
        let Some(p) = self.outstanding.iter_mut().find(|p| p.msn == msn) else {
            return;
        };
        if p.read_pos == p.len {
            p.done = true;
            self.complete_front();
        }
    }

    /// Places payload bytes of the piece being streamed; finishes the piece when complete.
    pub(super) fn stream_place(&mut self, now: Instant, bytes: &[u8]) {
        let Some(st) = &self.rx_stream else {
            return;
        };
        let k = bytes.len().min(st.left);
        let (kind, at, total) = (st.kind, st.at, u64::from(st.total));
        let bytes = bytes.get(..k).unwrap_or_default();
        match kind {
            Streaming::Send => {
                if let Some(RxCur::Send { recv, .. }) = &self.rx_cur {
                    scatter_at(&recv.segs, at, bytes);
                }
            }
            Streaming::Write => {
                if let Some(RxCur::Write { seg: Some(seg), .. }) = &self.rx_cur {
                    let off = usize::try_from(at).unwrap_or(usize::MAX);
                    if place_write(seg, off, bytes, total).is_err() {
                        tracing::error!("streamed write outside the region");
                    }
                }
            }
            Streaming::ReadResp => {
                let msn = st.msn;
                if let Some(p) = self.outstanding.iter().find(|p| p.msn == msn) {
                    place_read(&p.wr.segs, at, bytes, total);
                }
            }
        }
        self.stream_advance(now, k);
    }

    /// `k` more payload bytes of the streamed piece have landed.
    pub(super) fn stream_advance(&mut self, now: Instant, k: usize) {
        let Some(st) = &mut self.rx_stream else {
            return;
        };
        st.left -= k.min(st.left);
        st.at += k as u64;
        if st.left > 0 {
            return;
        }
        let RxStream {
            kind,
            msn,
            total,
            flags,
            ..
        } = *st;
        self.rx_stream = None;
        match kind {
            Streaming::Send => self.finish_send(now, msn, total, flags),
            Streaming::Write => self.finish_write(now, msn, flags),
            Streaming::ReadResp => self.finish_read(msn),
        }
    }

    /// Where the next streamed payload bytes go: a run of registered memory (segment,
    /// offset in it, length), for a read straight from the socket. The last byte of an RDMA
    /// write or read response is never read straight into memory (the kernel's copy stores
    /// in no particular order): it comes through the input buffer and lands last
    /// ([`place_write`], [`place_read`]).
    pub(super) fn stream_dest(&self) -> Option<(&Segment, usize, usize)> {
        let (seg, off, len) = self.stream_run()?;
        let st = self.rx_stream.as_ref()?;
        let len = if st.kind != Streaming::Send && st.at + len as u64 >= u64::from(st.total) {
            len - 1
        } else {
            len
        };
        (len > 0).then_some((seg, off, len))
    }

    fn stream_run(&self) -> Option<(&Segment, usize, usize)> {
        let st = self.rx_stream.as_ref()?;
        let (segs, at): (&[Segment], u64) = match st.kind {
            Streaming::Send => match &self.rx_cur {
                Some(RxCur::Send { recv, .. }) => (&recv.segs, st.at),
                _ => return None,
            },
            Streaming::Write => match &self.rx_cur {
                Some(RxCur::Write { seg: Some(seg), .. }) => {
                    return Some((seg, usize::try_from(st.at).ok()?, st.left));
                }
                _ => return None,
            },
            Streaming::ReadResp => {
                let p = self.outstanding.iter().find(|p| p.msn == st.msn)?;
                (&p.wr.segs, st.at)
            }
        };
        let mut pos = at;
        for seg in segs {
            let len = seg.len_u64();
            if pos < len {
                let off = usize::try_from(pos).ok()?;
                return Some((seg, off, (seg.len - off).min(st.left)));
            }
            pos -= len;
        }
        None
    }

    fn on_nak(&mut self, msn: u32, status: u32) -> Result<(), WireError> {
        let status = DtoStatus::from_raw(status).ok_or(bad("nak status"))?;
        let front = self.outstanding.front().map(|p| p.msn).unwrap_or(msn);
        let idx = usize::try_from(msn.wrapping_sub(front)).map_err(|_| bad("msn"))?;
        let started = self.tx_idx + usize::from(self.tx_off > 0);
        if idx >= started {
            return Err(bad("nak of a request never sent"));
        }
        // Everything before the failed request was executed by the target, in order.
        self.report_quiet();
        for p in self.outstanding.drain(..idx).collect::<Vec<Pending>>() {
            let status = if matches!(p.wr.op, PostOp::RdmaRead(_)) && !p.done {
                DtoStatus::Flushed
            } else {
                DtoStatus::Success
            };
            let len = if status == DtoStatus::Success {
                p.len
            } else {
                0
            };
            self.events
                .push_back(Event::Completion(p.wr.completion(status, len)));
        }
        if let Some(p) = self.outstanding.pop_front() {
            self.events
                .push_back(Event::Completion(p.wr.completion(status, 0)));
        }
        self.drop_tx();
        // During a graceful disconnect the failed request carries the error and the teardown
        // the consumer asked for completes as such (as a verbs provider moving the QP to the
        // error state reports the disconnect).
        let fact = if self.drain_deadline.is_some() {
            CmFact::Disconnected
        } else {
            CmFact::Broken
        };
        self.terminate(fact);
        Ok(())
    }

    /// Queues frames up to the high-water mark: read responses first, then our requests in
    /// order, then a bare acknowledgement if nothing carried it.
    pub(super) fn fill_tx(&mut self) {
        while self.txq.len() < TX_HIGH_WATER {
            if let Some(r) = self.responses.front_mut() {
                let n = (r.total - r.pos).min(MAX_CHUNK as u32);
                let flags = piece_flags(r.pos, n, r.total);
                DataHeader::ReadResp {
                    msn: r.msn,
                    total: r.total,
                }
                .emit(flags, n as usize, self.processed, &mut self.txq.buf);
                let at = usize::try_from(r.pos).unwrap_or(usize::MAX);
                match &r.seg {
                    Some(seg) if self.zero_copy && n as usize >= ZERO_COPY_MIN => {
                        self.txq.push_mem(seg, at, n as usize);
                    }
                    seg => {
                        let start = self.txq.buf.len();
                        self.txq.buf.resize(start + n as usize, 0);
                        if let (Some(seg), Some(dst)) = (seg, self.txq.buf.get_mut(start..))
                            && seg.copy_to(at, dst).is_err()
                        {
                            tracing::error!("read response source out of range");
                        }
                    }
                }
                r.pos += n;
                if r.pos >= r.total {
                    self.responses.pop_front();
                }
                self.acked_now();
                continue;
            }
            let Some(p) = self.outstanding.get(self.tx_idx) else {
                break;
            };
            let (msn, total, off) = (p.msn, p.len, self.tx_off);
            let n = (total - off).min(MAX_CHUNK as u32);
            let flags = piece_flags(off, n, total);
            let header = match p.wr.op {
                PostOp::Send => DataHeader::Send { msn, total },
                PostOp::RdmaWrite(r) => DataHeader::RdmaWrite {
                    msn,
                    total,
                    rkey: r.rmr_context,
                    addr: r.virtual_address,
                },
                PostOp::RdmaRead(r) => {
                    Frame::ReadReq {
                        msn,
                        len: total,
                        rkey: r.rmr_context,
                        addr: r.virtual_address,
                    }
                    .emit(self.processed, &mut self.txq.buf);
                    self.sent_request(msn);
                    continue;
                }
                PostOp::Recv => {
                    // Never queued here; drop defensively.
                    self.tx_idx += 1;
                    continue;
                }
            };
            let flags = if matches!(header, DataHeader::Send { .. })
                && p.wr.flags.contains(CompletionFlags::SOLICITED_WAIT)
            {
                flags | SOLICITED
            } else {
                flags
            };
            header.emit(flags, n as usize, self.processed, &mut self.txq.buf);
            if self.zero_copy && n as usize >= ZERO_COPY_MIN {
                push_segments(&mut self.txq, &p.wr.segs, u64::from(off), n as usize);
            } else {
                let start = self.txq.buf.len();
                self.txq.buf.resize(start + n as usize, 0);
                if let Some(dst) = self.txq.buf.get_mut(start..) {
                    gather_small(&p.wr.segs, u64::from(off), dst);
                }
            }
            if off + n >= total {
                self.sent_request(msn);
            } else {
                self.tx_off = off + n;
                self.acked_now();
            }
        }
        if self.bare_ack_due() {
            Frame::Ack.emit(self.processed, &mut self.txq.buf);
            self.acked_now();
        }
    }

    /// The peer's request `msn` has been executed: it will be acknowledged.
    fn executed(&mut self, msn: u32, now: Instant) {
        self.processed = msn;
        if self.ack_due.is_none() {
            self.ack_due = Some(now + ACK_DELAY);
        }
    }

    /// Every frame we queue carries the acknowledgement.
    fn acked_now(&mut self) {
        self.ack_sent = self.processed;
        self.ack_due = None;
    }

    /// True if a bare `Ack` must go out now: always in immediate mode; in delayed mode once
    /// [`ACK_EVERY`] requests wait for it or the oldest has waited [`ACK_DELAY`].
    pub(super) fn bare_ack_due(&self) -> bool {
        if self.processed == self.ack_sent {
            return false;
        }
        match self.ack_clock {
            None => true,
            Some(now) => {
                self.processed.wrapping_sub(self.ack_sent) >= ACK_EVERY
                    || self.ack_due.is_some_and(|d| now >= d)
            }
        }
    }

    fn sent_request(&mut self, msn: u32) {
        self.tx_idx += 1;
        self.tx_off = 0;
        self.last_sent = msn;
        self.acked_now();
    }
}
