//! The active side of connection establishment: the request (segment, eventfds, socket), and
//! the retries of a request that found nobody listening.
//!
//! A connect whose qualifier has no listener yet (no entry, or a dead one, or a full backlog)
//! is retried, as InfiniBand's CM retries a request and as the tcp provider does: after a
//! backoff of [`RETRY_FIRST`] doubling up to [`RETRY_MAX`], until the IA's retry window
//! (`connect_retry_ms`) has passed, with a last attempt at its end; then
//! `NON_PEER_REJECTED`. The consumer's connect timeout, if it comes first, still gives
//! `TIMED_OUT`. The retries run on the provider thread's timer (`check_deadlines`): the
//! consumer's `connect` returns at once and nothing spins meanwhile.

use super::*;

/// First backoff before a refused connect is retried.
pub(crate) const RETRY_FIRST: Duration = Duration::from_millis(10);
/// Longest backoff between retries of a refused connect.
pub(crate) const RETRY_MAX: Duration = Duration::from_millis(100);

/// A connect that found nobody listening, waiting for its next attempt.
pub(super) struct Retry {
    qual: ConnQual,
    pdata: Box<[u8]>,
    /// The consumer's connect timeout.
    deadline: Option<Instant>,
    /// The end of the retry window: the attempt made then is the last.
    until: Instant,
    /// The next attempt.
    at: Instant,
    backoff: Duration,
}

impl Retry {
    /// The retry of a connect refused at `now`, or `None` if the window (`window` from the
    /// connect) is empty.
    pub(super) fn new(
        now: Instant,
        window: Duration,
        qual: ConnQual,
        pdata: &[u8],
        deadline: Option<Instant>,
    ) -> Option<Retry> {
        let until = now.checked_add(window)?;
        let mut r = Retry {
            qual,
            pdata: pdata.into(),
            deadline,
            until,
            at: now,
            backoff: RETRY_FIRST,
        };
        r.refused(now).then_some(r)
    }

    /// The attempt made at `now` was refused: schedules the next one and returns true, or
    /// false if the window is over.
    fn refused(&mut self, now: Instant) -> bool {
        if now >= self.until {
            return false;
        }
        self.at = now
            .checked_add(self.backoff)
            .unwrap_or(self.until)
            .min(self.until);
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
        true
    }

    /// When this retry next needs the timer.
    fn next(&self) -> Instant {
        self.deadline.map_or(self.at, |d| d.min(self.at))
    }
}

impl Shared {
    /// Requester: creates the segment, connects to the qualifier's listener, sends the
    /// request. `Ok(None)`: nobody listens (or its backlog is full).
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` if a socket, segment or eventfd cannot be made.
    pub(super) fn open_conn(
        &self,
        qual: ConnQual,
        pdata: &[u8],
    ) -> DatResult<Option<(OwnedFd, DataPath)>> {
        let resources = || DatError::resources(Subtype::NoSubtype);
        let Some(sock) = rendezvous::connect(&self.params.dir, qual.0).map_err(|_| resources())?
        else {
            return Ok(None);
        };
        let len = ring::segment_len(self.params.slots, self.params.slot_size);
        let memfd = sys::memfd(len).map_err(|_| resources())?;
        let map = Mapping::new(memfd.as_fd(), len).map_err(|_| resources())?;
        let seg =
            Segment::create(map, self.params.slots, self.params.slot_size).ok_or_else(resources)?;
        let acc_efd = sys::eventfd().map_err(|_| resources())?;
        let req_efd = sys::eventfd().map_err(|_| resources())?;
        let req = Packet::Request {
            pid: sys::pid() as u32,
            probe: (&raw const *self.probe) as u64,
            slots: self.params.slots,
            slot_size: self.params.slot_size,
            pdata: pdata.to_vec(),
        };
        if sys::send_packet(
            sock.as_fd(),
            &req.encode(),
            &[memfd.as_fd(), acc_efd.as_fd(), req_efd.as_fd()],
        )
        .is_err()
        {
            return Ok(None);
        }
        let pid = sys::peer_cred(sock.as_fd()).map(|(p, _)| p).unwrap_or(0);
        let (tx, rx) = ring::ends(&seg, true);
        Ok(Some((sock, DataPath::new(tx, rx, req_efd, acc_efd, pid))))
    }

    /// Requester: registers a request just sent for `ep` (its socket and eventfd with both
    /// pollers) and waits for the answer until `deadline`.
    ///
    /// # Errors
    /// `DAT_INSUFFICIENT_RESOURCES` if the pollers refuse the descriptors.
    pub(super) fn install_requester(
        &self,
        st: &mut State,
        ep: EpId,
        sock: OwnedFd,
        data: DataPath,
        deadline: Option<Instant>,
    ) -> DatResult<()> {
        let resources = || DatError::resources(Subtype::NoSubtype);
        let id = st.conns.next_key();
        self.epoll
            .add(sock.as_fd(), TOK_SOCK | id)
            .map_err(|_| resources())?;
        if self.epoll.add(data.my_efd.as_fd(), TOK_EFD | id).is_err() {
            self.epoll.remove(sock.as_fd());
            return Err(resources());
        }
        if self
            .app_epoll
            .add(data.my_efd.as_fd(), TOK_EFD | id)
            .is_err()
        {
            self.epoll.remove(data.my_efd.as_fd());
            self.epoll.remove(sock.as_fd());
            return Err(resources());
        }
        st.conns.insert(
            id,
            Conn {
                sock,
                phase: Phase::Requesting { deadline },
                ep: Some(ep),
                data: Some(data),
                peer_probe: 0,
                peer_gone: false,
                closing: None,
            },
        );
        if let Some(e) = st.eps.get_mut(&ep) {
            e.conn = Some(id);
        }
        Ok(())
    }

    /// A connect of `ep` refused at `now` (nobody listens): retried if the window allows,
    /// else `NON_PEER_REJECTED` (reported by the provider thread).
    pub(super) fn refused(
        &self,
        st: &mut State,
        ep: EpId,
        now: Instant,
        qual: ConnQual,
        pdata: &[u8],
        deadline: Option<Instant>,
    ) {
        match Retry::new(now, self.params.connect_retry, qual, pdata, deadline) {
            Some(r) => {
                tracing::debug!(ia = %self.name, qual = qual.0, "shm: connect refused: retrying");
                st.retries.insert(ep, r);
            }
            None => st.deferred.push((ep, CmFact::NonPeerRejected)),
        }
    }

    /// Runs the retries that are due at `now`: the consumer's timeout (`TIMED_OUT`), or a
    /// new attempt (established later, retried again, or `NON_PEER_REJECTED` at the end of
    /// the window). Returns when the timer is next needed.
    pub(super) fn run_retries(
        &self,
        st: &mut State,
        now: Instant,
        out: &mut Ups,
    ) -> Option<Instant> {
        let due: Vec<EpId> = st
            .retries
            .iter()
            .filter(|(_, r)| r.next() <= now)
            .map(|(ep, _)| *ep)
            .collect();
        for ep in due {
            let Some(mut r) = st.retries.remove(&ep) else {
                continue;
            };
            let Some(upcalls) = st.eps.get(&ep).map(|e| e.upcalls.clone()) else {
                continue;
            };
            if r.deadline.is_some_and(|d| d <= now) {
                out.push(Up::Cm(upcalls, CmFact::TimedOut));
                continue;
            }
            let fact = match self.open_conn(r.qual, &r.pdata) {
                Ok(Some((sock, data))) => {
                    match self.install_requester(st, ep, sock, data, r.deadline) {
                        Ok(()) => continue,
                        Err(_) => CmFact::NonPeerRejected,
                    }
                }
                Ok(None) if r.refused(now) => {
                    st.retries.insert(ep, r);
                    continue;
                }
                Ok(None) => CmFact::NonPeerRejected,
                Err(e) => {
                    tracing::warn!(ia = %self.name, error = %e, "shm: connect retry failed");
                    CmFact::NonPeerRejected
                }
            };
            out.push(Up::Cm(upcalls, fact));
        }
        st.retries.values().map(Retry::next).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_the_last_attempt_is_at_the_window_end() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut r = Retry::new(t0, ms(500), ConnQual(1), b"", None).unwrap();
        let mut attempts = vec![r.at - t0];
        while r.refused(r.at) {
            attempts.push(r.at - t0);
        }
        let want: Vec<Duration> = [10, 30, 70, 150, 250, 350, 450, 500]
            .into_iter()
            .map(ms)
            .collect();
        assert_eq!(attempts, want);
        assert!(Retry::new(t0, Duration::ZERO, ConnQual(1), b"", None).is_none());
        let r = Retry::new(t0, ms(500), ConnQual(1), b"", Some(t0 + ms(5))).unwrap();
        assert_eq!(r.next(), t0 + ms(5), "the consumer's timeout comes first");
    }
}
