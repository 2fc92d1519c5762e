//! The only code that does I/O: sockets (mio + socket2), the driver thread, and the pump
//! that moves bytes between a socket and its [`Engine`].
//!
//! Threads: every open IA has one driver thread that sleeps in `epoll_wait` until a socket
//! or a timer needs it; it accepts connections, reads connection requests, serves incoming
//! RDMA reads and writes and notices dead peers while the application sleeps. Application
//! threads move bytes themselves: a post writes its frames to the socket from the caller's
//! thread (falling back to the driver only when the socket is full), and
//! [`Shared::progress`] (called by EVD waiters while they spin) reads and executes what has
//! arrived. Each endpoint has its own lock, so posts on different endpoints never contend.
//!
//! Upcalls are made with no engine lock held; a second per-endpoint lock, taken before the
//! engine lock is released, keeps them in the engine's order whichever thread delivers.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use dat_core::idmap::IdMap;
use dat_core::provider::{EpUpcalls, SharedMemTable, SpUpcalls};
use dat_core::types::{CrId, EpId, SpId, SrqId};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use socket2::{Domain, Protocol, Socket, TcpKeepalive, Type};

use crate::engine::{Engine, Event, IncomingRequest, SharedSrq, TransportError};
use crate::params::TcpParams;

mod active;
mod handoff;
mod passive;
mod pump;
mod vectored;

use pump::transport_error;
pub(crate) use pump::{Clock, Pump};

/// Receive buffer of a connection. Every frame the engine waits for in full is small
/// (control frames, data pieces under [`crate::engine::ZERO_COPY_MIN`]); larger pieces are
/// executed from their start and their payload read straight into registered memory.
const RX_BUF: usize = 256 * 1024;
/// How long a closed connection waits for the peer's end of stream before dropping it.
const LINGER: Duration = Duration::from_secs(2);
const WAKER: Token = Token(0);
/// Rounds of read/execute/write per pump: a peer that sends without pause cannot keep one
/// thread (an application's `progress`, or the driver away from its other sockets) forever.
const PUMP_BUDGET: usize = 32;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(PoisonError::into_inner)
}

/// The socket side of one endpoint.
pub(crate) struct Io {
    pub(crate) engine: Engine,
    pub(crate) sock: Option<TcpStream>,
    /// An active TCP connect has not completed yet.
    pub(crate) connecting: bool,
    /// Where an active connect goes (kept for its retries).
    pub(crate) peer: Option<SocketAddr>,
    rx: Vec<u8>,
    rx_len: usize,
    /// The socket is registered with the poller (see the `handoff` module).
    registered: bool,
    /// A pump stopped at its budget with bytes possibly still waiting.
    backlog: bool,
}

impl Io {
    /// Gives the endpoint a socket (registered by the caller) and bytes already read from it.
    pub(crate) fn attach(&mut self, sock: TcpStream, connecting: bool, leftover: &[u8]) {
        if self.rx.len() < RX_BUF {
            self.rx = vec![0; RX_BUF];
        }
        let n = leftover.len().min(self.rx.len());
        self.rx[..n].copy_from_slice(&leftover[..n]);
        self.rx_len = n;
        self.sock = Some(sock);
        self.connecting = connecting;
        self.registered = true;
    }
}

/// One endpoint: its engine and socket, and where its facts go.
pub(crate) struct EpConn {
    pub(crate) token: Token,
    pub(crate) upcalls: Arc<dyn EpUpcalls>,
    pub(crate) io: Mutex<Io>,
    deliver: Mutex<VecDeque<Event>>,
    /// The SRQ the endpoint takes receives from.
    pub(crate) srq: Mutex<Option<SrqId>>,
    /// The engine's next deadline in nanoseconds since [`Shared::epoch`] (`u64::MAX`: none).
    deadline: AtomicU64,
    /// An incoming send waits for a receive.
    pub(crate) parked: AtomicBool,
    /// A pump left work behind: the driver must pump again (see [`PUMP_BUDGET`]).
    backlog: AtomicBool,
}

/// A passive socket between accept(2) and the consumer's accept or reject.
pub(crate) struct Pending {
    token: Token,
    sock: Mutex<Option<TcpStream>>,
    rx: Mutex<Vec<u8>>,
    upcalls: Arc<dyn SpUpcalls>,
    peer: SocketAddr,
    /// The qualifier of the service point that accepted the socket.
    qual: u64,
    /// The request once read (the consumer's accept needs the requester's RNR timeout).
    pub(crate) request: Mutex<Option<IncomingRequest>>,
}

struct Listener {
    sp: SpId,
    /// The service point's qualifier (several fold onto one port: requests must match).
    qual: u64,
    sock: Mutex<TcpListener>,
    upcalls: Arc<dyn SpUpcalls>,
}

/// A socket whose connection is over: our side is shut down, we wait for the peer's.
struct Closing {
    sock: Mutex<Option<TcpStream>>,
    until: Instant,
}

#[derive(Clone)]
enum Entry {
    Ep(Arc<EpConn>),
    Pending(Arc<Pending>),
    Listener(Arc<Listener>),
    Closing(Arc<Closing>),
}

/// State shared by the transport object, the driver thread and application threads.
pub(crate) struct Shared {
    pub(crate) params: TcpParams,
    pub(crate) mem: SharedMemTable,
    registry: mio::Registry,
    waker: Waker,
    epoch: Instant,
    entries: RwLock<IdMap<Token, Entry>>,
    pub(crate) eps: RwLock<IdMap<EpId, Arc<EpConn>>>,
    /// The endpoints as a list that progress can hold without a lock.
    snapshot: RwLock<Arc<[Arc<EpConn>]>>,
    listeners: Mutex<IdMap<SpId, Token>>,
    pub(crate) crs: Mutex<IdMap<CrId, Arc<Pending>>>,
    pub(crate) srqs: RwLock<IdMap<SrqId, SharedSrq>>,
    next_token: AtomicUsize,
    next_cr: AtomicUsize,
    stop: AtomicBool,
    /// When an application thread last called [`Shared::progress`] (ns since `epoch`),
    /// stamped every [`handoff::STAMP_EVERY`] calls and after every call that moved bytes.
    last_progress: AtomicU64,
    /// Calls of [`Shared::progress`] (approximate under concurrent callers).
    progress_calls: AtomicU64,
    /// Some endpoint has its `backlog` flag set.
    any_backlog: AtomicBool,
    /// The driver has stepped back for a polling application (see the `handoff` module).
    stepped_back: AtomicBool,
    /// An application thread about to sleep asks the stepped-back driver to take over.
    handback: AtomicBool,
}

impl Shared {
    /// Creates the poller and the shared state; the caller starts [`Shared::run`] on a
    /// thread.
    pub(crate) fn new(
        params: TcpParams,
        mem: SharedMemTable,
    ) -> std::io::Result<(Arc<Shared>, Poll)> {
        let poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        let registry = poll.registry().try_clone()?;
        let shared = Arc::new(Shared {
            params,
            mem,
            registry,
            waker,
            epoch: Instant::now(),
            entries: RwLock::new(IdMap::default()),
            eps: RwLock::new(IdMap::default()),
            snapshot: RwLock::new(Arc::from(Vec::new())),
            listeners: Mutex::new(IdMap::default()),
            crs: Mutex::new(IdMap::default()),
            srqs: RwLock::new(IdMap::default()),
            next_token: AtomicUsize::new(1),
            next_cr: AtomicUsize::new(1),
            stop: AtomicBool::new(false),
            last_progress: AtomicU64::new(0),
            progress_calls: AtomicU64::new(0),
            any_backlog: AtomicBool::new(false),
            stepped_back: AtomicBool::new(false),
            handback: AtomicBool::new(false),
        });
        Ok((shared, poll))
    }

    fn token(&self) -> Token {
        Token(self.next_token.fetch_add(1, Ordering::Relaxed))
    }

    /// Registers a new endpoint.
    pub(crate) fn add_ep(
        &self,
        id: EpId,
        engine: Engine,
        upcalls: Arc<dyn EpUpcalls>,
        srq: Option<SrqId>,
    ) {
        let ep = Arc::new(EpConn {
            token: self.token(),
            upcalls,
            io: Mutex::new(Io {
                engine,
                sock: None,
                connecting: false,
                peer: None,
                rx: Vec::new(),
                rx_len: 0,
                registered: false,
                backlog: false,
            }),
            deliver: Mutex::new(VecDeque::with_capacity(64)),
            srq: Mutex::new(srq),
            deadline: AtomicU64::new(u64::MAX),
            parked: AtomicBool::new(false),
            backlog: AtomicBool::new(false),
        });
        write(&self.entries).insert(ep.token, Entry::Ep(ep.clone()));
        let mut eps = write(&self.eps);
        eps.insert(id, ep);
        *write(&self.snapshot) = eps.values().cloned().collect();
    }

    /// Removes an endpoint (its connection must be over); its socket lingers.
    pub(crate) fn remove_ep(&self, id: EpId) {
        let ep = {
            let mut eps = write(&self.eps);
            let Some(ep) = eps.remove(&id) else {
                return;
            };
            *write(&self.snapshot) = eps.values().cloned().collect();
            ep
        };
        write(&self.entries).remove(&ep.token);
        let sock = lock(&ep.io).sock.take();
        if let Some(s) = sock {
            self.linger(s);
        }
    }

    pub(crate) fn ep(&self, id: EpId) -> Option<Arc<EpConn>> {
        read(&self.eps).get(&id).cloned()
    }

    /// Runs `f` on the endpoint's I/O state, then reports what the engine produced (in
    /// order, with no engine lock held). Returns only after facts another thread was
    /// reporting meanwhile have been delivered too.
    pub(crate) fn with_io<R>(&self, ep: &EpConn, f: impl FnOnce(&Shared, &mut Io) -> R) -> R {
        let mut io = lock(&ep.io);
        let r = f(self, &mut io);
        self.finish(ep, io, true);
        r
    }

    /// [`Shared::with_io`] for a post: when `f` leaves nothing to report, it does not wait
    /// for another thread's delivery in progress (nothing of the post's depends on it). `f`
    /// returns whether it pumped: a post that only queued (a receive, with no send waiting
    /// for one) changed no state to publish, so with no event either it skips the rest.
    pub(crate) fn with_io_post(&self, ep: &EpConn, f: impl FnOnce(&Shared, &mut Io) -> bool) {
        let mut io = lock(&ep.io);
        if f(self, &mut io) || io.engine.has_events() {
            self.finish(ep, io, false);
        }
    }

    /// Like [`Shared::with_io`] but gives up if another thread holds the endpoint. `f`
    /// returns whether anything moved; when nothing did, the engine produced no fact and no
    /// new deadline, so the reporting step is skipped (the common case of a polling thread).
    fn try_with_io(&self, ep: &EpConn, f: impl FnOnce(&Shared, &mut Io) -> bool) -> bool {
        let Ok(mut io) = ep.io.try_lock() else {
            return false;
        };
        let r = f(self, &mut io);
        if r || io.backlog {
            self.finish(ep, io, false);
        }
        r
    }

    /// Publishes the engine's state (parked, backlog, deadline) and delivers its events.
    /// `barrier`: with no events of its own, still wait until another thread's delivery in
    /// progress is over.
    fn finish(&self, ep: &EpConn, mut io: MutexGuard<'_, Io>, barrier: bool) {
        ep.parked.store(io.engine.is_parked(), Ordering::Relaxed);
        if std::mem::take(&mut io.backlog) {
            // Edge-triggered readiness will not report these bytes again: hand them to the
            // driver.
            ep.backlog.store(true, Ordering::Release);
            self.any_backlog.store(true, Ordering::Release);
            let _ = self.waker.wake();
        }
        let d = io.engine.poll_timeout().map_or(u64::MAX, |d| {
            u64::try_from(d.saturating_duration_since(self.epoch).as_nanos())
                .unwrap_or(u64::MAX - 1)
        });
        // Read first: the deadline rarely changes, and a load is cheaper than a swap.
        let old = ep.deadline.load(Ordering::Acquire);
        if d != old {
            let old = ep.deadline.swap(d, Ordering::AcqRel);
            if d < old {
                // The driver may sleep past the new deadline.
                let _ = self.waker.wake();
            }
        }
        if !barrier && !io.engine.has_events() {
            // Nothing to report, so nothing whose order the delivery lock must keep.
            return;
        }
        let mut out = lock(&ep.deliver);
        io.engine.take_events(&mut out);
        let confirm = io.engine.is_confirm_held();
        drop(io);
        for ev in out.drain(..) {
            match ev {
                Event::Completion(c) => ep.upcalls.completion(c),
                Event::Cm(f) => ep.upcalls.cm(f),
                Event::Retired(n) => ep.upcalls.retired(n),
            }
        }
        drop(out);
        if confirm {
            // The passive side's `Established` is reported: only now may the requester learn
            // that the connection is up (see the engine's protocol notes).
            let mut io = lock(&ep.io);
            io.engine.release_confirm();
            if io.sock.is_some() {
                self.pump(&mut io, Instant::now(), Pump::Post);
            }
            self.finish(ep, io, false);
        }
    }

    /// Shuts our side down and keeps reading until the peer closes (so that unread bytes
    /// do not turn our close into a reset that could overtake our last frames).
    fn linger(&self, mut sock: TcpStream) {
        let _ = sock.shutdown(Shutdown::Write);
        let token = self.token();
        if self
            .registry
            .reregister(&mut sock, token, Interest::READABLE)
            .is_err()
            && self
                .registry
                .register(&mut sock, token, Interest::READABLE)
                .is_err()
        {
            return;
        }
        let c = Arc::new(Closing {
            sock: Mutex::new(Some(sock)),
            until: Instant::now() + LINGER,
        });
        write(&self.entries).insert(token, Entry::Closing(c.clone()));
        drain_closing(&c);
        let _ = self.waker.wake();
    }

    /// Creates a TCP socket with the IA's options, bound to its address.
    pub(crate) fn socket(&self, for_addr: &SocketAddr, listen: bool) -> std::io::Result<Socket> {
        let s = Socket::new(
            Domain::for_address(*for_addr),
            Type::STREAM,
            Some(Protocol::TCP),
        )?;
        s.set_nonblocking(true)?;
        s.set_cloexec(true)?;
        if listen {
            s.set_reuse_address(true)?;
        }
        self.set_options(&s)?;
        Ok(s)
    }

    fn set_options(&self, s: &Socket) -> std::io::Result<()> {
        let p = &self.params;
        s.set_nodelay(p.nodelay)?;
        if let Some(n) = p.send_buffer {
            s.set_send_buffer_size(n)?;
        }
        if let Some(n) = p.recv_buffer {
            s.set_recv_buffer_size(n)?;
        }
        if let Some(idle) = p.keepalive_idle {
            let ka = TcpKeepalive::new()
                .with_time(idle)
                .with_interval(p.keepalive_interval)
                .with_retries(p.keepalive_count);
            s.set_tcp_keepalive(&ka)?;
        }
        if let Some(t) = p.user_timeout {
            s.set_tcp_user_timeout(Some(t))?;
        }
        Ok(())
    }

    /// Registers an active socket for the endpoint.
    pub(crate) fn register_ep_socket(
        &self,
        ep: &EpConn,
        sock: &mut TcpStream,
    ) -> std::io::Result<()> {
        self.registry
            .register(sock, ep.token, Interest::READABLE | Interest::WRITABLE)
    }

    /// Application-thread progress: executes what arrived on every endpoint not busy in
    /// another thread. Returns true if anything happened.
    pub(crate) fn progress(&self) -> bool {
        let mut clock = Clock::lazy();
        // The driver only needs to know that calls keep coming (see the `handoff` module):
        // one clock read every few calls tells it, and spares the rest of a busy poll.
        // Concurrent callers may lose an increment: harmless.
        let calls = self.progress_calls.load(Ordering::Relaxed).wrapping_add(1);
        self.progress_calls.store(calls, Ordering::Relaxed);
        if calls % handoff::STAMP_EVERY == 1 {
            let now = clock.now();
            self.last_progress.store(self.nanos(now), Ordering::Relaxed);
        }
        let mut any = false;
        // Read-locked for the loop rather than cloned (two atomic operations less per look):
        // only `add_ep`, `remove_ep` and `close_all` write it, and no upcall calls them.
        let eps = read(&self.snapshot);
        for ep in eps.iter() {
            any |= self.try_with_io(ep, |sh, io| {
                io.sock.is_some() && sh.pump_with(io, &mut clock, Pump::Poll)
            });
        }
        drop(eps);
        if any {
            // A call that moved bytes may have taken long (a large piece): stamp its end.
            let now = clock.now();
            self.last_progress.store(self.nanos(now), Ordering::Relaxed);
        }
        any
    }

    /// Wakes endpoints whose incoming send waited for a receive of `srq`.
    pub(crate) fn unpark_srq(&self, srq: SrqId) {
        let now = Instant::now();
        let eps: Vec<Arc<EpConn>> = read(&self.eps)
            .values()
            .filter(|e| e.parked.load(Ordering::Relaxed) && *lock(&e.srq) == Some(srq))
            .cloned()
            .collect();
        for ep in eps {
            self.with_io(&ep, |sh, io| sh.pump(io, now, Pump::Serve));
        }
    }

    /// Asks the driver thread to stop.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// Drops every socket (IA close).
    pub(crate) fn close_all(&self) {
        let entries: Vec<Entry> = write(&self.entries).drain().map(|(_, e)| e).collect();
        for e in entries {
            match e {
                Entry::Ep(ep) => {
                    let mut io = lock(&ep.io);
                    if let Some(mut s) = io.sock.take() {
                        let _ = self.registry.deregister(&mut s);
                    }
                }
                Entry::Pending(p) => drop(lock(&p.sock).take()),
                Entry::Closing(c) => drop(lock(&c.sock).take()),
                Entry::Listener(l) => {
                    let _ = self.registry.deregister(&mut *lock(&l.sock));
                }
            }
        }
        write(&self.eps).clear();
        *write(&self.snapshot) = Arc::from(Vec::new());
        lock(&self.crs).clear();
        lock(&self.listeners).clear();
    }

    /// The driver thread: sleeps in the kernel until a socket, a timer or the waker needs
    /// it.
    pub(crate) fn run(self: Arc<Shared>, mut poll: Poll) {
        let mut events = Events::with_capacity(256);
        let mut passive = false;
        // While stepped back: how long until the next look at whether the application still
        // polls (doubling from `CHECK` while it does: see the `handoff` module).
        let mut check = handoff::CHECK;
        // The application's `progress` calls at the previous look.
        let mut seen_calls = 0;
        while !self.stop.load(Ordering::Acquire) {
            let mut timeout = self.next_timeout();
            if passive {
                timeout = Some(timeout.map_or(check, |t| t.min(check)));
                check = (check * 2).min(handoff::CHECK_MAX);
            } else {
                check = handoff::CHECK;
            }
            if let Err(e) = poll.poll(&mut events, timeout)
                && e.kind() != ErrorKind::Interrupted
            {
                tracing::error!(error = %e, "poll failed; driver stops");
                return;
            }
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let now = Instant::now();
            // A waiter going to sleep handed the sockets back: take them whatever the clock
            // says (it polls once more on its way to sleep).
            let handback = self.handback.swap(false, Ordering::Relaxed);
            let polling = self.app_polling(now, passive, &mut seen_calls) && !handback;
            for ev in &events {
                let entry = read(&self.entries).get(&ev.token()).cloned();
                match entry {
                    // An application thread is driving progress: leave the bytes to it.
                    Some(Entry::Ep(ep)) if polling => {
                        self.step_back(&ep);
                        passive = true;
                        self.stepped_back.store(true, Ordering::Relaxed);
                    }
                    Some(Entry::Ep(ep)) => {
                        self.with_io(&ep, |sh, io| sh.pump(io, now, Pump::Serve));
                    }
                    Some(Entry::Listener(l)) => self.on_listener(&l),
                    Some(Entry::Pending(p)) => self.on_pending(&p),
                    Some(Entry::Closing(c)) if drain_closing(&c) => {
                        write(&self.entries).remove(&ev.token());
                    }
                    Some(Entry::Closing(_)) => {}
                    None => {}
                }
            }
            if passive && !polling {
                self.stepped_back.store(false, Ordering::Relaxed);
                self.take_over(now);
                passive = false;
            }
            if self.any_backlog.swap(false, Ordering::AcqRel) {
                let eps = read(&self.snapshot).clone();
                for ep in eps.iter() {
                    if ep.backlog.swap(false, Ordering::AcqRel) {
                        self.with_io(ep, |sh, io| sh.pump(io, now, Pump::Serve));
                    }
                }
            }
            self.fire_timers(now);
        }
    }

    fn nanos(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn next_timeout(&self) -> Option<Duration> {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut next = read(&self.eps)
            .values()
            .map(|e| e.deadline.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        if read(&self.entries)
            .values()
            .any(|e| matches!(e, Entry::Closing(_)))
        {
            next = next.min(now.saturating_add(100_000_000));
        }
        (next != u64::MAX).then(|| Duration::from_nanos(next.saturating_sub(now)))
    }

    fn fire_timers(&self, now: Instant) {
        let now_ns =
            u64::try_from(now.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        let due: Vec<Arc<EpConn>> = read(&self.eps)
            .values()
            .filter(|e| e.deadline.load(Ordering::Acquire) <= now_ns)
            .cloned()
            .collect();
        for ep in due {
            self.with_io(&ep, |sh, io| {
                io.engine.handle_timeout(now);
                if io.engine.take_reconnect()
                    && let Err(e) = sh.open_active(&ep, io, now)
                {
                    tracing::warn!(error = %e, "no socket for a connect retry");
                    io.engine.handle_transport_error(TransportError::Lost);
                }
                sh.pump(io, now, Pump::Serve);
            });
        }
        let expired: Vec<Token> = read(&self.entries)
            .iter()
            .filter(|(_, e)| matches!(e, Entry::Closing(c) if c.until <= now))
            .map(|(t, _)| *t)
            .collect();
        if !expired.is_empty() {
            let mut entries = write(&self.entries);
            for t in expired {
                if let Some(Entry::Closing(c)) = entries.remove(&t) {
                    drop(lock(&c.sock).take());
                }
            }
        }
    }
}

/// Reads and discards until the peer's end of stream; true when the socket is gone.
fn drain_closing(c: &Closing) -> bool {
    let mut g = lock(&c.sock);
    let Some(sock) = g.as_mut() else {
        return true;
    };
    let mut buf = [0u8; 4096];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    drop(g.take());
    true
}
