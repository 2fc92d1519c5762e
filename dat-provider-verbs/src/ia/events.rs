//! The event thread of an IA: CM events mapped to the core's facts, completion events, and
//! deadlines (connect timeouts, address resolution, graceful disconnects).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use dat_core::provider::{AsyncFact, CmFact, ConnRequest};
use dat_core::types::{ConnQual, CrId, EpId};
use rdma_sys as sys;
use sys::rdma_cm_event_type as ev;

use super::{APP_IDLE, CrPending, DEADLINE_RETRY, Owner, RESOLVE_MS, Shared, lock, read};
use crate::cm::{CmEvent, CmId, REJ_CONSUMER_DEFINED};
use crate::ep::{Ep, Phase};

impl Shared {
    /// The event thread: CM events, completion events, deadlines, until [`Shared::stop`].
    pub fn run(self: &Arc<Shared>) {
        // The CM channel, the wake-up eventfd, the device's async events, then (while this
        // thread has armed the CQs) each CQ's completion channel.
        let mut fds = vec![
            libc::pollfd {
                fd: self.events.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: self.wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: super::device_events::async_fd(&self.ctx),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        const FIXED: usize = 3;
        let mut last_active = Instant::now();
        // The time between looks at an application that keeps polling (see APP_LOOK_MAX and
        // APP_LOOK_QUIET_MAX).
        let mut look = APP_IDLE;
        while !self.stop.load(Ordering::Acquire) {
            let mut timeout = self.next_deadline().map_or(-1, |d| {
                let ms = d.saturating_duration_since(Instant::now()).as_millis();
                i32::try_from(ms.saturating_add(1)).unwrap_or(i32::MAX)
            });
            let armed = self.armed().load(Ordering::Acquire);
            if !armed {
                // Look again soon: the CQs are to be armed once the application goes quiet.
                let idle = i32::try_from(look.as_millis()).unwrap_or(1);
                timeout = if timeout < 0 { idle } else { timeout.min(idle) };
            }
            // The completion channels only while this thread has armed the CQs: an event
            // there otherwise comes from a waiter's arm (`Shared::block`), and the waiter
            // sleeps on its channel itself; waking this thread too would cost a switch per
            // completion. An event a waiter left untaken is found when this thread arms next
            // (its CQ counts as armed until then, and its channel stays readable).
            fds.truncate(FIXED);
            let cqs = armed.then(|| read(&self.snapshot).clone());
            fds.extend(cqs.iter().flat_map(|c| c.iter()).map(|slot| libc::pollfd {
                fd: slot.cq.channel_fd(),
                events: libc::POLLIN,
                revents: 0,
            }));
            for f in fds.iter_mut() {
                f.revents = 0;
            }
            let nfds = libc::nfds_t::try_from(fds.len()).unwrap_or(libc::nfds_t::MAX);
            // SAFETY: `fds` is a live vector of `nfds` pollfd for the call.
            let rc = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout) };
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    tracing::error!(ia = %self.name, error = %e, "poll failed; event thread stops");
                    self.upcalls.async_error(AsyncFact::InternalError);
                    return;
                }
            }
            if fds[1].revents != 0 {
                super::drain_eventfd(&self.wake);
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            // Only when there is something to read: each look is a system call (rdma_cm's
            // GET_EVENT), and this loop also runs on timeouts.
            if fds[0].revents != 0 {
                while let Some(e) = self.events.next() {
                    self.handle_cm(e);
                }
            }
            if fds[2].revents != 0 {
                super::device_events::drain(&self.ctx);
                if fds[2].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                    // A device that is gone keeps its descriptor in error: stop watching it
                    // (the CM's DEVICE_REMOVAL tells the rest).
                    tracing::warn!(ia = %self.name, revents = fds[2].revents, "device event descriptor failed");
                    fds[2].fd = -1;
                }
            }
            let mut any = false;
            for (slot, f) in cqs.iter().flat_map(|c| c.iter()).zip(&fds[FIXED..]) {
                if f.revents != 0 {
                    any |= slot.cq.take_event();
                }
            }
            if any {
                // Taking the events disarmed their CQs. A CQ an application thread is
                // polling is left to it (waiting for its lock would make every one of its
                // polls wake this thread); if it stops, the CQs are armed and drained below,
                // waiting, once it has been idle for APP_IDLE.
                self.armed().store(false, Ordering::Release);
                self.drain(false);
            }
            drop(cqs);
            // Arm only while no application thread drives the CQs: a busy poller then costs
            // no interrupt and no wake-up of this thread per completion. Armed, then drained,
            // so no completion slips between the two. One clock read per wake (a system call
            // under emulation).
            let now = Instant::now();
            if !self.armed().load(Ordering::Acquire) {
                if self.app_active(now, &mut last_active) {
                    look = self.next_look(look);
                } else {
                    self.armed().store(true, Ordering::Release);
                    self.arm_all();
                    self.drain(true);
                    look = APP_IDLE;
                    self.short_look();
                }
            }
            self.fire_deadlines(now);
        }
    }

    /// The earliest deadline of the IA's endpoints. An endpoint without one ([`Ep::timed`]
    /// clear) is not looked at; one whose lock is held (an application thread posting or
    /// reaping on it) is not waited for: it is looked at again within [`DEADLINE_RETRY`]
    /// (see [`Ep::st`]).
    fn next_deadline(&self) -> Option<Instant> {
        read(&self.eps)
            .values()
            .filter_map(|ep| {
                if !ep.timed.load(Ordering::Acquire) {
                    return None;
                }
                let Some(st) = ep.st.try_lock() else {
                    return Some(Instant::now() + DEADLINE_RETRY);
                };
                let resolve = (st.phase == Phase::Resolving)
                    .then_some(st.resolve_by)
                    .flatten();
                let next = [st.deadline, resolve, st.graceful_by]
                    .into_iter()
                    .flatten()
                    .min();
                if next.is_none() {
                    // Under the lock, as every setter sets it: a deadline set later sets it
                    // again (and wakes this thread).
                    ep.timed.store(false, Ordering::Release);
                }
                next
            })
            .min()
    }

    fn fire_deadlines(&self, now: Instant) {
        let due: Vec<(Arc<Ep>, CmFact)> = read(&self.eps)
            .values()
            .filter_map(|ep| {
                if !ep.timed.load(Ordering::Acquire) {
                    return None;
                }
                // Busy: its deadline (if any) is fired at the next look (`next_deadline`).
                let st = ep.st.try_lock()?;
                let pending = matches!(st.phase, Phase::Resolving | Phase::Connecting);
                if pending && st.deadline.is_some_and(|d| d <= now) {
                    Some((ep.clone(), CmFact::TimedOut))
                } else if st.phase == Phase::Resolving && st.resolve_by.is_some_and(|d| d <= now) {
                    // rdma_cm may sit on an address it has no route to: give up ourselves.
                    Some((ep.clone(), CmFact::Unreachable))
                } else if st.graceful_by.is_some_and(|d| d <= now) {
                    Some((ep.clone(), CmFact::Disconnected))
                } else {
                    None
                }
            })
            .collect();
        for (ep, fact) in due {
            if fact == CmFact::Disconnected {
                // The graceful disconnect's sends did not drain in time: disconnect anyway.
                self.fail_ep(&ep, fact, true, true);
                continue;
            }
            self.fail_ep(&ep, fact, false, false);
            // The id goes at once: a late accept of the peer then meets no one.
            let cm = self.drop_cm(&mut ep.st.lock());
            drop(cm);
        }
    }

    /// The owner of the id with key `key` ([`CmId::key`]; a key is never reused).
    fn owner(&self, key: usize) -> Option<Owner> {
        lock(&self.ids).get(&key).copied()
    }

    fn ep(&self, id: EpId) -> Option<Arc<Ep>> {
        read(&self.eps).get(&id).cloned()
    }

    /// Handles one CM event.
    fn handle_cm(&self, e: CmEvent) {
        tracing::trace!(ia = %self.name, kind = e.kind, status = e.status, "cm event");
        if e.kind == ev::RDMA_CM_EVENT_CONNECT_REQUEST {
            self.connect_request(e);
            return;
        }
        if e.kind == ev::RDMA_CM_EVENT_DEVICE_REMOVAL {
            tracing::error!(ia = %self.name, "RDMA device removed");
            self.catastrophic();
        }
        match self.owner(e.key) {
            Some(Owner::Ep(id)) => {
                if let Some(ep) = self.ep(id) {
                    self.ep_event(&ep, &e);
                }
            }
            Some(Owner::Listener(_) | Owner::Cr(_)) | None => {
                tracing::debug!(ia = %self.name, kind = e.kind, "cm event ignored");
            }
        }
    }

    fn connect_request(&self, e: CmEvent) {
        // SAFETY: `e.id` is the new id of this CONNECT_REQUEST on our channel; nobody else
        // owns it.
        let Some(cm) = (unsafe { CmId::adopt(e.id, &self.events) }) else {
            return;
        };
        let (private_data, asked) = crate::cm::unframe_req(&e.private_data);
        let listener = match self.owner(e.listen_key) {
            Some(Owner::Listener(sp)) => lock(&self.listeners)
                .get(&sp)
                .map(|l| (l.upcalls.clone(), l.qual)),
            _ => None,
        };
        // A request without a qualifier asked for the port itself.
        let serves = |qual: ConnQual| match asked {
            Some(q) => q == qual.0,
            None => !crate::transport::port_of(qual).1,
        };
        let Some((upcalls, _)) = listener.filter(|&(_, q)| serves(q)) else {
            // The service point is gone, or it serves another qualifier folded onto the same
            // port: the provider's own reject, NON_PEER_REJECTED at the requester.
            tracing::debug!(ia = %self.name, ?asked, "connect request for no service point");
            let _ = cm.reject(&[crate::cm::NO_LISTENER]);
            return;
        };
        let cr = CrId(self.next_cr.fetch_add(1, Ordering::Relaxed));
        let remote = cm
            .peer_addr()
            .map_or(SocketAddr::new(self.ip, 0), |a| SocketAddr::new(a.ip(), 0));
        self.own(cm.key(), Owner::Cr(cr));
        lock(&self.crs).insert(
            cr,
            CrPending {
                cm,
                initiator_depth: e.initiator_depth,
                responder_resources: e.responder_resources,
            },
        );
        upcalls.connection_request(ConnRequest {
            cr,
            remote,
            private_data,
        });
    }

    /// Handles a CM event of an endpoint's id.
    ///
    /// Only an event of the endpoint's current id counts: the event was read and acknowledged
    /// before this, so meanwhile the endpoint may have been freed and its id destroyed, and
    /// a new endpoint (endpoint ids are reused) or a new connection of this one may be
    /// resolving an address; an event of the old id (a late DISCONNECTED) would end it.
    fn ep_event(&self, ep: &Arc<Ep>, e: &CmEvent) {
        let (phase, active) = {
            let st = ep.st.lock();
            if st.cm.as_ref().map(CmId::key) != Some(e.key) {
                tracing::debug!(ia = %self.name, ep = ep.id.0, kind = e.kind, "cm event of a previous id ignored");
                return;
            }
            (st.phase, st.active)
        };
        let fail = |fact: CmFact| self.fail_ep(ep, fact, false, false);
        let passive_fail = || fail(CmFact::AcceptCompletionError);
        match e.kind {
            ev::RDMA_CM_EVENT_ADDR_RESOLVED if phase == Phase::Resolving => {
                let st = ep.st.lock();
                let r = st.cm.as_ref().map(|c| c.resolve_route(RESOLVE_MS));
                drop(st);
                if let Some(Err(err)) = r {
                    tracing::debug!(error = %err, "rdma_resolve_route");
                    fail(CmFact::Unreachable);
                }
            }
            ev::RDMA_CM_EVENT_ROUTE_RESOLVED if phase == Phase::Resolving => {
                if let Err(err) = self.connect_resolved(ep) {
                    tracing::debug!(ia = %self.name, error = %err, "connect after route resolution failed");
                    fail(CmFact::Unreachable);
                }
            }
            ev::RDMA_CM_EVENT_ADDR_ERROR | ev::RDMA_CM_EVENT_ROUTE_ERROR if phase.is_live() => {
                fail(CmFact::Unreachable)
            }
            ev::RDMA_CM_EVENT_UNREACHABLE | ev::RDMA_CM_EVENT_CONNECT_ERROR if phase.is_live() => {
                if active {
                    fail(CmFact::Unreachable)
                } else if phase == Phase::Connected {
                    fail(CmFact::Broken)
                } else {
                    passive_fail()
                }
            }
            ev::RDMA_CM_EVENT_REJECTED if phase.is_live() => {
                if !active {
                    passive_fail()
                } else if e.status == REJ_CONSUMER_DEFINED
                    && !crate::cm::is_no_listener(&e.private_data)
                {
                    fail(CmFact::PeerRejected {
                        private_data: crate::cm::unframe(&e.private_data),
                    })
                } else {
                    fail(CmFact::NonPeerRejected)
                }
            }
            ev::RDMA_CM_EVENT_ESTABLISHED
                if matches!(phase, Phase::Connecting | Phase::Accepting) =>
            {
                {
                    let mut st = ep.st.lock();
                    st.phase = Phase::Connected;
                    st.deadline = None;
                    // Connected, no disconnect yet: no deadline left.
                    ep.timed.store(st.graceful_by.is_some(), Ordering::Release);
                }
                let private_data = if active {
                    crate::cm::unframe(&e.private_data)
                } else {
                    Box::default()
                };
                ep.upcalls.cm(CmFact::Established { private_data });
            }
            ev::RDMA_CM_EVENT_DISCONNECTED if phase.is_live() => {
                // A QP already in error was broken here (a responder that met a remote
                // access violation goes to error without a completion of its own).
                let broken = ep.st.lock().cm.as_ref().is_some_and(CmId::qp_in_error);
                let fact = if broken {
                    CmFact::Broken
                } else {
                    CmFact::Disconnected
                };
                self.fail_ep(ep, fact, true, true)
            }
            ev::RDMA_CM_EVENT_DEVICE_REMOVAL => fail(CmFact::Broken),
            _ => {
                tracing::debug!(ia = %self.name, ep = ep.id.0, kind = e.kind, ?phase, "cm event ignored")
            }
        }
    }

    /// The route is known: create the QP and send the connect request.
    fn connect_resolved(&self, ep: &Arc<Ep>) -> std::io::Result<()> {
        let mut st = ep.st.lock();
        let Some(mut cm) = st.cm.take() else {
            return Ok(());
        };
        let r = self.attach_qp(ep, &mut st, &mut cm).and_then(|()| {
            let a = &st.cfg.attr;
            let p = self.conn_params(a.max_rdma_read_in, a.max_rdma_read_out, None);
            cm.connect(p, &st.pdata)
        });
        st.cm = Some(cm);
        if r.is_ok() {
            st.phase = Phase::Connecting;
        }
        r
    }
}
