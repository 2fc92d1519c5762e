//! The [`Transport`] calls of an shm IA.

use super::*;

/// Largest private data (at least the 256 bytes DAT consumers expect).
pub const MAX_PRIVATE_DATA: u32 = wire::MAX_PRIVATE_DATA as u32;

/// Requests (and, separately, receives) an endpoint may have queued: the IA's
/// `max_dto_per_ep`. The per-EP queue depths are the consumer's contract and are not policed
/// here; this bound only keeps a runaway consumer from growing the queues without limit.
const MAX_QUEUED: usize = 16_384;

fn resources() -> DatError {
    DatError::resources(Subtype::NoSubtype)
}

fn queue_full() -> DatError {
    DatError::new(ErrorType::InsufficientResources, Subtype::NoSubtype)
}

impl ShmIa {
    /// [`Transport::progress`]; `None` when another thread holds the state or delivers.
    pub(super) fn poll(&self) -> Option<bool> {
        let sh = &self.shared;
        sh.polled.store(true, Ordering::Relaxed);
        // A look at the rings first, under the state lock alone: most polls find nothing
        // and make no upcall.
        let mut st = sh.state.try_lock()?;
        let work = |c: &mut Conn| {
            matches!(c.phase, Phase::Connected) && c.data.as_mut().is_some_and(|d| d.has_work())
        };
        let State {
            conns,
            eps,
            srqs,
            tickets,
            ..
        } = &mut *st;
        let slots = conns.slots_mut();
        // The first connection with work, if any (most polls find none and stop here).
        let mut closing = false;
        let mut first = slots.len();
        for (i, e) in slots.iter_mut().enumerate() {
            if let Some((_, c)) = e {
                if work(c) {
                    first = i;
                    break;
                }
                closing |= c.closing.is_some();
            }
        }
        let rest = slots.get_mut(first..).filter(|r| !r.is_empty())?;
        // Another thread delivering is moving data too: report nothing.
        if !sh.may_deliver(tickets) {
            return None;
        }
        let mut out = Ups::new();
        let mut any = false;
        let mut broken = Vec::new();
        // Where this poller runs, told to the peers it takes records from every so many polls
        // (a store only when it moved): their naps must not go by where it polled long ago
        // (`nap`). Asked once per poll, and only if some connection is due.
        let mut cpu = None;
        for (i, e) in rest.iter_mut().enumerate() {
            let Some((id, c)) = e else { continue };
            closing |= c.closing.is_some();
            if i > 0 && !work(c) {
                continue;
            }
            if let Some(d) = c.data.as_mut()
                && d.announce_due()
            {
                d.announce_cpu(*cpu.get_or_insert_with(sys::current_cpu));
            }
            match super::pump_conn(c, eps, srqs, &sh.mem, &mut out) {
                Ok(moved) => any |= moved,
                Err(Fatal) => broken.push(*id),
            }
        }
        let mut g = Guard { st };
        if closing || !broken.is_empty() {
            any |= sh.after_pump(&mut g, broken, closing, &mut out);
        }
        sh.finish(g, &mut out);
        // `finish` made every upcall: an empty inline list owns nothing, and its drop would
        // be an out-of-line call per poll that finds work. Anything else is dropped as usual,
        // so an upcall left behind by mistake is never leaked.
        debug_assert!(out.is_empty());
        if out.is_empty() && !out.spilled() {
            std::mem::forget(out);
        }
        Some(any)
    }
}

impl ShmIa {
    fn rdma_mode(&self) -> &'static str {
        if self.shared.cma_mode { "cma" } else { "copy" }
    }

    /// Up to how many bytes a request of a connection this IA makes travels through the
    /// ring in `"cma"` mode (`rdma_inline`, at most a quarter of the ring); `"all"` in
    /// `"copy"` mode.
    fn rdma_inline(&self) -> String {
        if !self.shared.cma_mode {
            return "all".to_owned();
        }
        let p = &self.shared.params;
        let ring = crate::ring::payload_bytes(p.slots, p.slot_size);
        p.inline_max.min(ring / 4).to_string()
    }
}

impl Transport for ShmIa {
    fn ia_attr(&self) -> IaAttr {
        let mut a = software_ia_attr(&self.shared.name, "datrs-shm", LOOPBACK_ADDRESS);
        a.transport_attr
            .push(NamedAttr::new(crate::RDMA_MODE_ATTR, self.rdma_mode()));
        a.transport_attr
            .push(NamedAttr::new(crate::RDMA_INLINE_ATTR, self.rdma_inline()));
        a
    }

    fn provider_attr(&self) -> ProviderAttr {
        let mut a = software_provider_attr("shm", MAX_PRIVATE_DATA);
        a.provider_specific_attr
            .push(NamedAttr::new(crate::RDMA_MODE_ATTR, self.rdma_mode()));
        a.provider_specific_attr
            .push(NamedAttr::new(crate::RDMA_INLINE_ATTR, self.rdma_inline()));
        a
    }

    fn create_ep(&self, ep: EpId, cfg: &EpConfig, upcalls: Arc<dyn EpUpcalls>) -> DatResult<()> {
        let sh = &self.shared;
        let mut st = sh.state.lock();
        let old = st.eps.insert(
            ep,
            ShmEp {
                upcalls: CountTakes::wrap(upcalls, cfg.srq, &self.ia_upcalls),
                cfg: cfg.clone(),
                recvs: VecDeque::new(),
                conn: None,
            },
        );
        sh.bury(&mut st, old);
        Ok(())
    }

    fn modify_ep(&self, ep: EpId, cfg: &EpConfig) -> DatResult<()> {
        let mut st = self.shared.state.lock();
        Shared::ep_mut(&mut st, ep)?.cfg = cfg.clone();
        Ok(())
    }

    fn reset_ep(&self, ep: EpId) -> DatResult<()> {
        let sh = &self.shared;
        let mut st = sh.enter();
        st.retries.remove(&ep);
        let conn = Shared::ep_mut(&mut st, ep)?.conn.take();
        let mut out = Ups::new();
        if let Some(id) = conn {
            sh.teardown(&mut st, id, None, true, &mut out);
        }
        sh.finish(st, &mut out);
        Ok(())
    }

    fn free_ep(&self, ep: EpId) {
        let sh = &self.shared;
        let mut st = sh.state.lock();
        st.retries.remove(&ep);
        let conn = st.eps.get_mut(&ep).and_then(|e| e.conn.take());
        if let Some(id) = conn {
            if let Some(c) = st.conns.get_mut(&id) {
                c.ep = None;
            }
            sh.teardown(&mut st, id, None, true, &mut Ups::new());
        }
        let gone = st.eps.remove(&ep);
        sh.bury(&mut st, gone);
    }

    fn connect(
        &self,
        ep: EpId,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()> {
        if !(remote.ip().is_loopback() || remote.ip().is_unspecified()) {
            return Err(DatError::new(
                ErrorType::InvalidAddress,
                Subtype::InvalidAddressUnreachable,
            ));
        }
        if private_data.len() > wire::MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(5));
        }
        let sh = &self.shared;
        if !sh.state.lock().eps.contains_key(&ep) {
            return Err(invalid_state());
        }
        let now = Instant::now();
        let deadline = timeout.duration().and_then(|d| now.checked_add(d));
        let opened = sh.open_conn(qual, private_data)?;
        let mut st = sh.state.lock();
        if !st.eps.contains_key(&ep) {
            return Err(invalid_state());
        }
        match opened {
            None => sh.refused(&mut st, ep, now, qual, private_data, deadline),
            Some((sock, data)) => sh.install_requester(&mut st, ep, sock, data, deadline)?,
        }
        drop(st);
        sh.poke();
        Ok(())
    }

    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        let sh = &self.shared;
        let mut st = sh.state.lock();
        let (listener, q) = match qual {
            Some(q) => match rendezvous::listen(&sh.params.dir, q.0) {
                Ok(l) => (l, q),
                Err(ListenError::InUse) => {
                    return Err(DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype));
                }
                Err(ListenError::Io(e)) => {
                    tracing::warn!(ia = %sh.name, error = %e, "shm: cannot listen");
                    return Err(DatError::new(
                        ErrorType::ConnQualUnavailable,
                        Subtype::NoSubtype,
                    ));
                }
            },
            None => {
                let mut tries = 0;
                loop {
                    st.next_any += 1;
                    tries += 1;
                    let q = 0x4000_0000 + u64::from(sys::pid() as u32) * 4096 + st.next_any;
                    match rendezvous::listen(&sh.params.dir, q) {
                        Ok(l) => break (l, ConnQual(q)),
                        Err(ListenError::InUse) if tries < 64 => {}
                        Err(_) => {
                            return Err(DatError::new(
                                ErrorType::ConnQualUnavailable,
                                Subtype::NoSubtype,
                            ));
                        }
                    }
                }
            }
        };
        sh.epoll
            .add(listener.sock.as_fd(), TOK_LISTEN | u64::from(sp.0))
            .map_err(|_| resources())?;
        st.sps.insert(sp, Sp { listener, upcalls });
        Ok(q)
    }

    fn unlisten(&self, sp: SpId) {
        let sh = &self.shared;
        let mut st = sh.state.lock();
        if let Some(s) = st.sps.remove(&sp) {
            sh.epoll.remove(s.listener.sock.as_fd());
        }
        // Requests not yet delivered to the consumer die with the service point.
        let greeting: Vec<u64> = st
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.phase, Phase::Greeting { sp: s, .. } if s == sp))
            .map(|(id, _)| *id)
            .collect();
        for id in greeting {
            sh.teardown(&mut st, id, None, false, &mut Ups::new());
        }
    }

    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > wire::MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(3));
        }
        let sh = &self.shared;
        let mut st = sh.state.lock();
        let gone = || {
            DatError::new(
                ErrorType::InvalidAddress,
                Subtype::InvalidAddressUnreachable,
            )
        };
        let id = st.crs.remove(&cr).ok_or_else(gone)?;
        if !st.eps.contains_key(&ep) {
            sh.teardown(&mut st, id, None, false, &mut Ups::new());
            return Err(invalid_state());
        }
        let Some(c) = st.conns.get_mut(&id) else {
            return Err(gone());
        };
        if c.peer_gone {
            c.phase = Phase::Accepting;
            c.ep = Some(ep);
            if let Some(e) = st.eps.get_mut(&ep) {
                e.conn = Some(id);
            }
            st.doomed.push((id, CmFact::AcceptCompletionError));
            drop(st);
            sh.poke();
            return Ok(());
        }
        let cma_in = match c.data.as_mut() {
            Some(d) => {
                d.cma_in =
                    sh.cma_mode && sys::cma_probe(d.peer_pid, c.peer_probe, wire::PROBE_VALUE);
                d.cma_in
            }
            None => false,
        };
        let pkt = Packet::Accept {
            cma: cma_in,
            probe: (&raw const *sh.probe) as u64,
            pdata: private_data.to_vec(),
        };
        if sys::send_packet(c.sock.as_fd(), &pkt.encode(), &[]).is_err() {
            // The requester left: report it as an accept that could not complete.
            c.peer_gone = true;
            sh.epoll.remove(c.sock.as_fd());
            c.phase = Phase::Accepting;
            c.ep = Some(ep);
            if let Some(e) = st.eps.get_mut(&ep) {
                e.conn = Some(id);
            }
            st.doomed.push((id, CmFact::AcceptCompletionError));
            drop(st);
            sh.poke();
            return Ok(());
        }
        c.phase = Phase::Accepting;
        c.ep = Some(ep);
        if let Some(e) = st.eps.get_mut(&ep) {
            e.conn = Some(id);
        }
        Ok(())
    }

    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()> {
        if private_data.len() > wire::MAX_PRIVATE_DATA {
            return Err(DatError::invalid_arg(2));
        }
        let sh = &self.shared;
        let mut st = sh.state.lock();
        if let Some(id) = st.crs.remove(&cr) {
            if let Some(c) = st.conns.get(&id) {
                let pkt = Packet::Reject {
                    pdata: private_data.to_vec(),
                };
                let _ = sys::send_packet(c.sock.as_fd(), &pkt.encode(), &[]);
            }
            sh.teardown(&mut st, id, None, false, &mut Ups::new());
        }
        Ok(())
    }

    /// Graceful on a connected endpoint with requests in flight: they complete first (their
    /// successes are reported before `Disconnected`), then the connection closes and what is
    /// left (receives) is flushed; the wait is bounded (two seconds).
    /// Abrupt (also during such a wait) closes at once and flushes.
    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()> {
        let sh = &self.shared;
        let mut st = sh.enter();
        let mut out = Ups::new();
        let st_ref = &mut *st;
        // A connect waiting to retry ends here, like one still waiting for its answer.
        st_ref.retries.remove(&ep);
        let Some(e) = st_ref.eps.get_mut(&ep) else {
            return Ok(());
        };
        if flags == CloseFlags::Graceful
            && let Some(c) = e.conn.and_then(|id| st_ref.conns.get_mut(&id))
            && matches!(c.phase, Phase::Connected)
            && c.data.as_ref().is_some_and(|d| d.outstanding() > 0)
        {
            if c.closing.is_none() {
                c.closing = Some(Instant::now() + super::GRACEFUL_LIMIT);
            }
            if let Some(d) = c.data.as_mut() {
                d.set_closing();
            }
            // The provider thread (or the application's polling) completes the requests
            // and closes; the wake-up makes it account for the deadline.
            drop(st);
            sh.poke();
            return Ok(());
        }
        match e.conn {
            Some(id) => sh.teardown(&mut st, id, Some(CmFact::Disconnected), true, &mut out),
            None => {
                out.push(Up::Cm(e.upcalls.clone(), CmFact::Disconnected));
                for wr in e.recvs.drain(..) {
                    out.push(Up::Done(
                        e.upcalls.clone(),
                        wr.completion(DtoStatus::Flushed, 0),
                    ));
                }
            }
        }
        sh.finish(st, &mut out);
        Ok(())
    }

    /// Posts `wr`. The common case makes no upcall (a receive that no held-back send waits
    /// for, a request on a connected endpoint): the state lock alone will do, and the work
    /// request moves once, into its queue.
    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()> {
        let sh = &self.shared;
        {
            let mut st = sh.state.lock();
            let st = &mut *st;
            let e = st.eps.get_mut(&ep).ok_or_else(invalid_state)?;
            let data = e
                .conn
                .and_then(|id| st.conns.get_mut(&id))
                .filter(|c| matches!(c.phase, Phase::Connected))
                .and_then(|c| c.data.as_mut());
            if wr.op == PostOp::Recv {
                if e.recvs.len() >= MAX_QUEUED {
                    return Err(queue_full());
                }
                if !data.is_some_and(|d| d.held_back()) {
                    e.recvs.push_back(wr);
                    return Ok(());
                }
            } else if let Some(d) = data {
                if d.outstanding() >= MAX_QUEUED {
                    return Err(queue_full());
                }
                if !d.post_small(&wr) {
                    d.post(wr);
                }
                return Ok(());
            }
        }
        let mut st = sh.enter();
        let mut out = Ups::new();
        let st_ref = &mut *st;
        let e = st_ref.eps.get_mut(&ep).ok_or_else(invalid_state)?;
        let conn = e
            .conn
            .and_then(|id| st_ref.conns.get_mut(&id).map(|c| (id, c)))
            .filter(|(_, c)| matches!(c.phase, Phase::Connected));
        if wr.op == PostOp::Recv {
            if e.recvs.len() >= MAX_QUEUED {
                return Err(queue_full());
            }
            e.recvs.push_back(wr);
            if let Some((id, c)) = conn {
                // A send held back for want of a receive can land now (anything else waits
                // for the next progress: no pump on the way of every receive posted).
                if let Some(d) = c.data.as_mut().filter(|d| d.held_back()) {
                    let r = d.pump(&mut e.view(&mut st_ref.srqs), &sh.mem, &mut out);
                    if r.is_err() {
                        sh.teardown(&mut st, id, Some(CmFact::Broken), false, &mut out);
                    } else if c.closing.is_some() {
                        // The pump may have completed the last request a graceful
                        // disconnect waited for.
                        sh.finish_closing(&mut st, &mut out);
                    }
                }
            }
        } else {
            match conn.and_then(|(_, c)| c.data.as_mut()) {
                Some(d) if d.outstanding() >= MAX_QUEUED => {
                    return Err(queue_full());
                }
                Some(d) => d.post(wr),
                None => out.push(Up::Done(
                    e.upcalls.clone(),
                    wr.completion(DtoStatus::Flushed, 0),
                )),
            }
        }
        sh.finish(st, &mut out);
        Ok(())
    }

    fn create_srq(&self, srq: SrqId, _cfg: &SrqConfig) -> DatResult<()> {
        self.shared.state.lock().srqs.insert(srq, VecDeque::new());
        Ok(())
    }

    fn srq_post_recv(&self, srq: SrqId, wr: WorkRequest) -> DatResult<()> {
        let sh = &self.shared;
        let mut st = sh.enter();
        st.srqs
            .get_mut(&srq)
            .ok_or_else(invalid_state)?
            .push_back(wr);
        // Sends held back on any endpoint of this SRQ may land now.
        let mut out = Ups::new();
        sh.pump_all(&mut st, &mut out);
        sh.finish(st, &mut out);
        Ok(())
    }

    fn free_srq(&self, srq: SrqId) {
        self.shared.state.lock().srqs.remove(&srq);
    }

    fn progress(&self) -> bool {
        self.progress_or_nap()
    }

    fn retired_unreported(&self, ep: EpId) -> u64 {
        let st = self.shared.state.lock();
        st.eps
            .get(&ep)
            .and_then(|e| e.conn)
            .and_then(|id| st.conns.get(&id))
            .and_then(|c| c.data.as_ref())
            .map_or(0, |d| d.retired_unreported())
    }

    /// Sleeps on the rings' wake-ups (see `Shared::sleep_on_rings`): completions reach
    /// the waiter's EVD from its own thread, with no hand-off from the provider thread. One
    /// thread of the IA at a time; the others are told `false` and sleep on their EVDs
    /// (woken by the upcalls).
    fn block(&self, _evd: dat_core::types::EvdId, timeout: Duration) -> bool {
        self.shared
            .sleep_on_rings(timeout, super::nap::WAITING, None)
            .is_some()
    }

    fn unblock(&self, _evd: dat_core::types::EvdId) {
        sys::signal(self.shared.app_wake.as_fd());
    }

    fn close(&self) {
        let sh = &self.shared;
        sh.stop.store(true, Ordering::Release);
        sh.poke();
        if let Some(t) = lock(&self.thread).take() {
            // Closed from an upcall on the provider thread itself: it stops on its own.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        let mut st = sh.state.lock();
        let ids: Vec<u64> = st.conns.keys().copied().collect();
        for id in ids {
            sh.teardown(&mut st, id, None, true, &mut Ups::new());
        }
        st.sps.clear(); // unlinks the rendezvous entries
        let gone = st.eps.clear();
        sh.bury(&mut st, gone);
        st.crs.clear();
        st.retries.clear();
        // Memory a peer may still be copying into stays alive until the peer lets go
        // (bounded: a peer that neither closes nor dies within a second is not waited for).
        let mut buf = [0u8; 256];
        for _ in 0..100 {
            let done: Vec<u64> = st
                .lingers
                .iter()
                .filter(|(_, l)| sh.linger_done(l, &mut buf))
                .map(|(id, _)| *id)
                .collect();
            for id in done {
                st.lingers.remove(&id);
            }
            if st.lingers.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if !st.lingers.is_empty() {
            tracing::warn!(ia = %sh.name, "shm: closing while a peer may still copy into flushed RDMA buffers");
        }
        st.lingers.clear();
    }
}

impl Drop for ShmIa {
    fn drop(&mut self) {
        if lock(&self.thread).is_some() {
            self.close();
        }
    }
}
