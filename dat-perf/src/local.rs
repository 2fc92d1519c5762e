//! Server and client in one process: the server's side runs on a thread, the control
//! channel is a loopback socket, exactly as between two processes.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dat::Registry;

use crate::client::{Client, RunOpts};
use crate::error::{IoContext, PerfError, PerfResult};
use crate::proto::Channel;
use crate::server::serve_session;
use crate::side::{Mode, Side};

/// A client connected to a server thread of the same process.
#[derive(Debug)]
pub struct LocalPair {
    client: Option<Client>,
    server: Option<JoinHandle<PerfResult<()>>>,
    /// The server's data EP, for its counts between chunks.
    #[cfg(test)]
    server_ep: dat::Ep,
}

/// How the two ends of an in-process pair get their IAs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pairing {
    /// Each end opens its own IA; if the second open of the same IA name fails, both ends
    /// share the first.
    #[default]
    TwoIas,
    /// Both ends share one IA.
    OneIa,
}

/// Opens the server's IA `server_ia` and the client's IA `client_ia` (default: the same IA
/// name as the server's) from `reg`, starts the server thread and connects.
///
/// # Errors
/// [`PerfError::Open`] when an IA cannot be opened (for example its provider is not
/// compiled in: `DAT_PROVIDER_NOT_FOUND`); [`PerfError::Dat`] / [`PerfError::Protocol`] /
/// [`PerfError::Timeout`] when the connection cannot be set up.
pub fn start(
    reg: &Registry,
    server_ia: Option<&str>,
    client_ia: Option<&str>,
    max_size: u64,
    mode: Mode,
    pairing: Pairing,
    opts: &RunOpts,
) -> PerfResult<LocalPair> {
    let server_side = Side::open(reg, server_ia, max_size, mode, opts.timeout)?;
    let client_name = client_ia.unwrap_or(server_side.ia.name()).to_owned();
    let shared = || Side::on_ia(server_side.ia.clone(), max_size, mode, opts.timeout);
    let client_side = match pairing {
        Pairing::OneIa => shared()?,
        Pairing::TwoIas => {
            match Side::open(reg, Some(&client_name), max_size, mode, opts.timeout) {
                Ok(s) => s,
                Err(e) if client_name == server_side.ia.name() => {
                    tracing::info!("a second IA `{client_name}` does not open ({e}); sharing one");
                    shared()?
                }
                Err(e) => return Err(e),
            }
        }
    };
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).io_ctx("bind the control socket")?;
    let addr = listener.local_addr().io_ctx("control socket")?;
    listener.set_nonblocking(true).io_ctx("control socket")?;
    let timeout = opts.timeout;
    #[cfg(test)]
    let server_ep = server_side.ep.clone();
    let server = std::thread::Builder::new()
        .name("datperf-server".into())
        .spawn(move || -> PerfResult<()> {
            let stream = accept_within(&listener, timeout)?;
            let mut ch = Channel::new(stream)?;
            // The client may sit idle while other series run (compare): allow long gaps.
            serve_session(&server_side, &mut ch, Duration::from_secs(3600))
        })
        .io_ctx("spawn the server thread")?;
    let mut pair = LocalPair {
        client: None,
        server: Some(server),
        #[cfg(test)]
        server_ep,
    };
    let stream = TcpStream::connect(addr).io_ctx("connect the control socket")?;
    let ch = Channel::new(stream)?;
    match Client::connect(client_side, ch, addr.ip(), opts.clone()) {
        Ok(c) => {
            pair.client = Some(c);
            Ok(pair)
        }
        Err(e) => {
            // Prefer the server's explanation when it failed first.
            match pair.join() {
                Err(se) => Err(se),
                Ok(()) => Err(e),
            }
        }
    }
}

fn accept_within(listener: &TcpListener, timeout: Duration) -> PerfResult<TcpStream> {
    let deadline = Instant::now() + timeout;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).io_ctx("control socket")?;
                return Ok(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(PerfError::Timeout("no client connected".into()));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(PerfError::io("accept a client", e)),
        }
    }
}

impl LocalPair {
    /// The client, for measurements.
    ///
    /// # Errors
    /// [`PerfError::Protocol`] after the pair was closed.
    pub fn client(&mut self) -> PerfResult<&mut Client> {
        self.client
            .as_mut()
            .ok_or_else(|| PerfError::Protocol("the session is closed".into()))
    }

    /// Ends the session and joins the server thread.
    ///
    /// # Errors
    /// The first failure of the client's close or the server thread.
    pub fn close(mut self) -> PerfResult<()> {
        let closed = match self.client.take() {
            Some(c) => c.close(),
            None => Ok(()),
        };
        let joined = self.join();
        closed.and(joined)
    }

    fn join(&mut self) -> PerfResult<()> {
        self.client = None;
        match self.server.take() {
            Some(h) => h
                .join()
                .unwrap_or_else(|_| Err(PerfError::Protocol("the server thread panicked".into()))),
            None => Ok(()),
        }
    }
}

impl Drop for LocalPair {
    fn drop(&mut self) {
        // Dropping the client closes the control socket, which ends the server's session.
        let _ = self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::Test;
    use crate::record::{Metric, Op};

    fn opts() -> RunOpts {
        RunOpts {
            window: 8,
            budget: Duration::from_millis(50),
            timeout: Duration::from_secs(10),
        }
    }

    fn every_test(mode: Mode) {
        let reg = crate::testutil::registry();
        let mut pair = start(
            &reg,
            Some("b"),
            Some("a"),
            1 << 16,
            mode,
            Pairing::TwoIas,
            &opts(),
        )
        .unwrap();
        let c = pair.client().unwrap();
        for (test, op, metric) in [
            (Test::LatSend, Op::SendRecv, Metric::Latency),
            (Test::LatWrite, Op::RdmaWrite, Metric::Latency),
            (Test::BwSend, Op::Send, Metric::Bandwidth),
            (Test::BwWrite, Op::RdmaWrite, Metric::Bandwidth),
            (Test::BwRead, Op::RdmaRead, Metric::Bandwidth),
        ] {
            for size in [1u64, 255, 4096, 1 << 16] {
                let r = c
                    .measure(test, size, 40)
                    .unwrap_or_else(|e| panic!("{test:?} {size}: {e}"));
                assert_eq!((r.op, r.metric, r.size), (op, metric, size));
                assert_eq!((r.series.as_str(), r.provider.as_str()), ("a", "mem"));
                assert_eq!(r.mode, mode.name());
                assert!(r.iters >= 10 && r.iters <= 40, "{r:?}");
                assert!(r.value.is_finite() && r.value > 0.0, "{r:?}");
            }
        }
        let r = match pair.client().unwrap().conn_rate(64, 6) {
            Ok(r) => r,
            Err(e) => panic!("conn: {e}; server: {:?}", pair.close()),
        };
        let c = pair.client().unwrap();
        assert_eq!(
            (r.op, r.metric, r.size),
            (Op::Connect, Metric::ConnRate, 64)
        );
        assert!(r.value > 0.0);
        // Above the buffers: refused, and the session stays usable.
        assert!(matches!(
            c.measure(Test::LatSend, (1 << 16) + 1, 4),
            Err(PerfError::Unsupported(_))
        ));
        assert!(matches!(
            c.conn_rate(100_000, 1),
            Err(PerfError::Unsupported(_))
        ));
        c.measure(Test::LatSend, 8, 4).unwrap();
        pair.close().unwrap();
    }

    #[test]
    fn every_test_polling_on_the_fabric() {
        every_test(Mode::Poll);
    }

    #[test]
    fn every_test_waiting_on_the_fabric() {
        every_test(Mode::Wait);
    }

    /// A registry of the real tcp and shm providers. `tcp-strict` breaks the connection as
    /// soon as a send finds no receive posted (a receiver-not-ready timeout of 0, where the
    /// default waits 5 s for one), as verbs does with no RNR retries.
    fn real_registry() -> Registry {
        const REGISTRY: &str = r#"
version = 1
default = "tcp-strict"

[[ia]]
name = "tcp-strict"
provider = "tcp"
params = { address = "127.0.0.1", rnr_timeout_ms = 0 }

[[ia]]
name = "shm0"
provider = "shm"
"#;
        let cfg = dat_core::config::parse_toml(
            REGISTRY,
            dat_core::config::Source::Embedded,
            &["tcp", "shm"],
        )
        .expect("parses");
        Registry::new(
            cfg,
            vec![
                std::sync::Arc::new(dat_provider_tcp::TcpProvider::new()),
                dat_provider_shm::ShmProvider::new(),
            ],
        )
    }

    /// Receives posted and not yet taken on the data EPs of the client and the server.
    fn recvs_left(pair: &mut LocalPair) -> (u64, u64) {
        let server = pair.server_ep.status().unwrap().recvs;
        let client = pair.client().unwrap().side().ep.status().unwrap().recvs;
        (client, server)
    }

    /// Send/recv ping-pongs on the real providers, in every kind of chunk a figure runs
    /// (warm-ups, then growing ones), at sizes that change between figures, with the other
    /// tests in between: every message finds a receive posted (checked before every send of
    /// the ping-pong in debug builds, whatever the timing; on `tcp-strict` a send that does
    /// arrive to none also breaks the connection), and each chunk takes exactly the receives
    /// its two ends post (one left over would take the next chunk's first message at the
    /// wrong size, or the fence).
    #[test]
    fn send_recv_round_trips_take_exactly_the_receives_posted_on_tcp_and_shm() {
        let reg = real_registry();
        let opts = RunOpts {
            budget: Duration::from_secs(600),
            timeout: Duration::from_secs(30),
            ..opts()
        };
        for ia in ["tcp-strict", "shm0"] {
            let mut pair = start(
                &reg,
                Some(ia),
                None,
                1 << 12,
                Mode::Poll,
                Pairing::TwoIas,
                &opts,
            )
            .unwrap_or_else(|e| panic!("{ia}: {e}"));
            let mut steps = vec![
                (Test::LatSend, 1),
                (Test::LatSend, 4096),
                (Test::LatWrite, 64),
                (Test::LatSend, 64),
            ];
            // A stream of sends may find its receive not yet replaced, for a moment, which
            // only `tcp-strict` does not forgive.
            if ia == "shm0" {
                steps.push((Test::BwSend, 256));
            }
            steps.push((Test::LatSend, 1));
            for (test, size) in steps {
                let r = pair
                    .client()
                    .unwrap()
                    .measure(test, size, 400)
                    .unwrap_or_else(|e| panic!("{ia} {test:?} {size}: {e}"));
                assert_eq!(r.iters, 400, "{ia} {test:?} {size}");
                assert_eq!(recvs_left(&mut pair), (0, 0), "{ia} {test:?} {size}");
            }
            pair.close().unwrap_or_else(|e| panic!("{ia}: {e}"));
        }
    }

    #[test]
    fn a_client_that_vanishes_ends_the_server_session_cleanly() {
        let reg = crate::testutil::registry();
        let mut pair = start(
            &reg,
            Some("b"),
            Some("a"),
            4096,
            Mode::Poll,
            Pairing::TwoIas,
            &opts(),
        )
        .unwrap();
        pair.client().unwrap().measure(Test::LatSend, 8, 4).unwrap();
        // No quit, no disconnect: the control socket just closes.
        drop(pair.client.take());
        assert!(pair.join().is_ok());
        assert!(matches!(pair.client(), Err(PerfError::Protocol(_))));
    }

    #[test]
    fn provider_not_compiled_in_is_a_clear_error() {
        let reg = crate::testutil::registry();
        let e = start(
            &reg,
            Some("tcp-lo"),
            None,
            4096,
            Mode::Poll,
            Pairing::TwoIas,
            &opts(),
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, PerfError::Open(_)), "{e:?}");
        assert!(
            text.contains("needs provider `tcp`, which is not compiled into this program"),
            "{text}"
        );
    }
}
