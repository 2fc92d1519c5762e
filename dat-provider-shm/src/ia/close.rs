//! The end of a connection: a graceful close once nothing is in flight, a teardown that
//! reports and flushes, and the peer going away (closing, hanging up, or dying).

use super::*;

/// When the rendezvous directory is swept again after a peer died, in milliseconds after the
/// death was seen: its listener's entry becomes removable only once the kernel has closed all
/// of the dead process's descriptors.
const RESWEEP_MS: [u64; 5] = [20, 200, 1_000, 3_000, 8_000];

impl Shared {
    /// Closes the connections whose graceful disconnect has nothing left in flight (their
    /// successful completions were reported first) or whose wait expired ([`GRACEFUL_LIMIT`]:
    /// what is left is flushed). Returns whether any closed.
    pub(super) fn finish_closing(&self, st: &mut State, out: &mut Ups) -> bool {
        let mut now = None;
        let done: Vec<u64> = st
            .conns
            .iter()
            .filter_map(|(id, c)| {
                let deadline = c.closing?;
                let idle = c.data.as_ref().is_none_or(|d| d.outstanding() == 0);
                (idle || deadline <= *now.get_or_insert_with(Instant::now)).then_some(*id)
            })
            .collect();
        for id in &done {
            if st
                .conns
                .get(id)
                .is_some_and(|c| c.data.as_ref().is_some_and(|d| d.outstanding() > 0))
            {
                tracing::warn!(ia = %self.name, "shm: graceful disconnect: requests still in flight after {GRACEFUL_LIMIT:?} are flushed");
            }
            self.teardown(st, *id, Some(CmFact::Disconnected), true, out);
        }
        !done.is_empty()
    }

    /// Removes a connection; reports `fact` on its endpoint and flushes it. `graceful` sends
    /// the close packet first (else the peer sees a hang-up: broken).
    pub(super) fn teardown(
        &self,
        st: &mut State,
        id: u64,
        fact: Option<CmFact>,
        graceful: bool,
        out: &mut Ups,
    ) {
        let Some(mut c) = st.conns.remove(&id) else {
            return;
        };
        if graceful && matches!(c.phase, Phase::Connected) {
            let _ = sys::send_packet(c.sock.as_fd(), &Packet::Close.encode(), &[]);
        }
        if let Phase::Pending { cr } = c.phase {
            st.crs.remove(&cr);
        }
        if let Some(d) = &c.data {
            self.epoll.remove(d.my_efd.as_fd());
            self.app_epoll.remove(d.my_efd.as_fd());
        }
        let mut keep = Vec::new();
        let ep = c.ep.and_then(|e| st.eps.get_mut(&e));
        if let (None, Some(d)) = (&ep, c.data.as_mut()) {
            keep = d.flush_all(None, out);
        }
        if let Some(ep) = ep {
            ep.conn = None;
            if let Some(fact) = fact {
                out.push(Up::Cm(ep.upcalls.clone(), fact));
            }
            if let Some(d) = c.data.as_mut() {
                keep = d.flush_all(Some(&ep.upcalls), out);
            }
            for wr in ep.recvs.drain(..) {
                out.push(Up::Done(
                    ep.upcalls.clone(),
                    wr.completion(DtoStatus::Flushed, 0),
                ));
            }
        }
        if !keep.is_empty() && !c.peer_gone {
            // Our half-close tells the peer; its close (or death) releases the memory.
            sys::shutdown(c.sock.as_fd(), false);
            st.lingers.insert(
                id,
                Linger {
                    sock: c.sock,
                    _segs: keep,
                },
            );
            return;
        }
        self.epoll.remove(c.sock.as_fd());
        sys::shutdown(c.sock.as_fd(), true);
        // Dropping `c` closes the socket and eventfds and unmaps the segment.
    }

    /// The peer closed (`graceful`) or hung up: take in what it sent first, then report.
    pub(super) fn peer_gone(&self, st: &mut State, id: u64, graceful: bool, out: &mut Ups) {
        if st
            .conns
            .get(&id)
            .is_some_and(|c| matches!(c.phase, Phase::Connected))
        {
            self.settle_accepting(st, id, out);
        }
        let Some(c) = st.conns.get_mut(&id) else {
            return;
        };
        let fact = match c.phase {
            Phase::Connected => {
                if let (Some(d), Some(ep)) =
                    (c.data.as_mut(), c.ep.and_then(|e| st.eps.get_mut(&e)))
                {
                    d.drain(&mut ep.view(&mut st.srqs), &self.mem, out);
                }
                if graceful {
                    CmFact::Disconnected
                } else {
                    CmFact::Broken
                }
            }
            Phase::Requesting { .. } => CmFact::NonPeerRejected,
            Phase::Accepting => CmFact::AcceptCompletionError,
            Phase::Pending { .. } => {
                // The consumer still holds the request: its accept will see the failure as
                // an ACCEPT_COMPLETION_ERROR event, as if the requester left just after.
                c.peer_gone = true;
                self.epoll.remove(c.sock.as_fd());
                return;
            }
            Phase::Greeting { .. } => {
                self.teardown(st, id, None, false, out);
                return;
            }
        };
        let died = !graceful && matches!(fact, CmFact::Broken);
        if let Some(c) = st.conns.get_mut(&id) {
            c.peer_gone = true;
        }
        self.teardown(st, id, Some(fact), false, out);
        if died {
            rendezvous::sweep(&self.params.dir);
            // A dying process closes its descriptors one by one, and a loaded machine can
            // hold it between the connection's and the listener's for long: look again at
            // widening intervals.
            let now = Instant::now();
            for ms in RESWEEP_MS {
                st.resweep.push(now + Duration::from_millis(ms));
            }
        }
    }

    /// Before a connection's end is reported: reads the control packets already received on
    /// the connections accepted here that wait for their `Ready`, so their establishment is
    /// reported first.
    ///
    /// epoll reports sockets in no causal order (one already on its ready list keeps its
    /// place), so a requester's `Close` on one connection could otherwise be seen before the
    /// `Ready` it sent earlier on another. IB's CM keeps that order, and consumers such as
    /// dtestcm count on it: its server takes its first N connection events as the N
    /// establishments.
    fn settle_accepting(&self, st: &mut State, except: u64, out: &mut Ups) {
        let waiting: Vec<u64> = st
            .conns
            .iter()
            .filter(|(id, c)| **id != except && matches!(c.phase, Phase::Accepting))
            .map(|(id, _)| *id)
            .collect();
        for id in waiting {
            self.on_sock(st, id, out);
        }
    }
}
