//! The client end of a session: connect to the server's IA, then measure. The client times
//! every figure; the server only does its part of each chunk.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use dat::ConnectFlags;
use dat::types::{CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, EventNumber, Qos, Timeout};

use crate::error::{DatContext, PerfError, PerfResult};
use crate::proto::{Channel, Test, ToClient, ToServer, WireRmr};
use crate::record::{Metric, Op, Record};
use crate::server::{HELLO_PDATA, conn_pdata};
use crate::side::{Side, seq_byte};

/// How measurements run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOpts {
    /// Operations outstanding in the streaming tests.
    pub window: u32,
    /// Time spent on one figure: chunks stop once this much has been timed.
    pub budget: Duration,
    /// Longest wait for any one event or control message.
    pub timeout: Duration,
}

impl Default for RunOpts {
    fn default() -> RunOpts {
        RunOpts {
            window: 64,
            budget: Duration::from_millis(500),
            timeout: Duration::from_secs(10),
        }
    }
}

impl Test {
    /// The operation and metric a test reports.
    pub fn kind(self) -> (Op, Metric) {
        match self {
            Test::LatSend => (Op::SendRecv, Metric::Latency),
            Test::LatWrite => (Op::RdmaWrite, Metric::Latency),
            Test::BwSend => (Op::Send, Metric::Bandwidth),
            Test::BwWrite => (Op::RdmaWrite, Metric::Bandwidth),
            Test::BwRead => (Op::RdmaRead, Metric::Bandwidth),
        }
    }
}

/// A connected client.
#[derive(Debug)]
pub struct Client {
    side: Side,
    ch: Channel,
    server: SocketAddr,
    conn_qual: ConnQual,
    server_rmr: WireRmr,
    opts: RunOpts,
}

impl Client {
    /// Reads the server's hello on `ch` and connects `side`'s data EP to the server's IA.
    /// `peer` (the control connection's peer) replaces an unspecified IA address.
    ///
    /// # Errors
    /// [`PerfError::Protocol`] / [`PerfError::Timeout`] for a server that does not say hello;
    /// [`PerfError::Dat`] with the code of `Ep::connect`; [`PerfError::Protocol`] when the
    /// connection is not established (rejected, unreachable).
    pub fn connect(side: Side, mut ch: Channel, peer: IpAddr, opts: RunOpts) -> PerfResult<Client> {
        let (address, conn_qual, rmr) = match ch.recv(opts.timeout)? {
            ToClient::Hello {
                address,
                conn_qual,
                rmr,
                ..
            } => (address, conn_qual, rmr),
            ToClient::Done { error } => return Err(server_failed(error)),
            ToClient::Ready => {
                return Err(PerfError::Protocol("the server did not say hello".into()));
            }
        };
        let mut server: SocketAddr = address
            .parse()
            .map_err(|_| PerfError::Protocol(format!("bad IA address `{address}`")))?;
        if server.ip().is_unspecified() {
            server.set_ip(peer);
        }
        let conn_qual = ConnQual(conn_qual);
        side.ep
            .connect(
                server,
                conn_qual,
                Timeout::from_duration(opts.timeout),
                HELLO_PDATA,
                Qos::BestEffort,
                ConnectFlags::Default,
            )
            .ctx("connect")?;
        let pd = side.conn_event(&side.conn, EventNumber::Established)?;
        if &*pd != HELLO_PDATA {
            return Err(PerfError::Protocol(format!(
                "the server accepted with private data {pd:?}"
            )));
        }
        Ok(Client {
            side,
            ch,
            server,
            conn_qual,
            server_rmr: rmr,
            opts,
        })
    }

    /// The client's side (its IA names the series).
    pub fn side(&self) -> &Side {
        &self.side
    }

    /// The largest size both buffers hold.
    pub fn max_size(&self) -> u64 {
        self.side.max_size().min(u64::from(self.server_rmr.len) / 2)
    }

    /// Measures `test` at `size` over at most `iters` operations (fewer when the time budget
    /// runs out), after a warm-up chunk.
    ///
    /// # Errors
    /// [`PerfError::Unsupported`] for a size above the buffers or the IA's limits (the session
    /// stays usable); any other error leaves the session broken: DAT codes of the posts,
    /// [`PerfError::Timeout`] for a stalled peer, [`PerfError::Protocol`] for a failed
    /// completion or a server-side failure.
    pub fn measure(&mut self, test: Test, size: u64, iters: u64) -> PerfResult<Record> {
        let attr = self.side.ia.attr();
        let limit = match test {
            Test::LatSend | Test::BwSend => attr.max_message_size,
            _ => attr.max_rdma_size,
        };
        if size == 0 || size > self.max_size() || size > limit || u32::try_from(size).is_err() {
            return Err(PerfError::Unsupported(format!(
                "size {size} outside 1..={} on IA `{}`",
                self.max_size().min(limit),
                self.side.ia.name()
            )));
        }
        let window = self
            .opts
            .window
            .clamp(1, self.side.max_window(test == Test::BwRead)?);
        let (op, metric) = test.kind();
        let (done, elapsed) = chunked(iters, self.opts.budget, |n| {
            self.chunk(test, size, n, window)
        })?;
        let secs = elapsed.as_secs_f64().max(1e-9);
        let value = match metric {
            Metric::Latency => secs * 1e6 / done as f64 / 2.0,
            _ => done as f64 * size as f64 / secs / 1e6,
        };
        Ok(self.record(op, metric, size, done, value))
    }

    /// Measures connection setup and teardown (a fresh EP each time, freed after), with `private_data` bytes
    /// each way (checked at both ends), over at most `iters` connections.
    ///
    /// # Errors
    /// [`PerfError::Unsupported`] when the IA carries less private data; otherwise as
    /// [`Client::measure`].
    pub fn conn_rate(&mut self, private_data: u32, iters: u64) -> PerfResult<Record> {
        let max = self.side.ia.provider_attr().max_private_data_size;
        if private_data > max {
            return Err(PerfError::Unsupported(format!(
                "{private_data} bytes of private data: IA `{}` carries at most {max}",
                self.side.ia.name()
            )));
        }
        let (done, elapsed) = chunked(iters, self.opts.budget, |n| {
            self.conn_chunk(private_data, n)
        })?;
        let value = done as f64 / elapsed.as_secs_f64().max(1e-9);
        Ok(self.record(
            Op::Connect,
            Metric::ConnRate,
            u64::from(private_data),
            done,
            value,
        ))
    }

    fn record(&self, op: Op, metric: Metric, size: u64, iters: u64, value: f64) -> Record {
        Record::new(
            self.side.ia.name(),
            &self.side.ia.provider_attr().provider_name,
            op,
            metric,
            size,
            iters,
            value,
            self.side.mode.name(),
        )
    }

    /// Ends the session: tells the server, disconnects and waits for the disconnect (bounded).
    ///
    /// # Errors
    /// [`PerfError::Io`] when the control socket is gone; the DAT code of `Ep::disconnect`.
    pub fn close(mut self) -> PerfResult<()> {
        self.ch.send(&ToServer::Quit)?;
        self.side
            .ep
            .disconnect(CloseFlags::Graceful)
            .ctx("disconnect")?;
        self.side
            .conn_event(&self.side.conn, EventNumber::Disconnected)?;
        Ok(())
    }

    fn start(&mut self, cmd: &ToServer) -> PerfResult<()> {
        self.ch.send(cmd)?;
        match self.ch.recv(self.opts.timeout)? {
            ToClient::Ready => Ok(()),
            ToClient::Done { error } => Err(server_failed(error)),
            other => Err(PerfError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    fn finish(&mut self) -> PerfResult<()> {
        match self.ch.recv(self.opts.timeout)? {
            ToClient::Done { error: None } => Ok(()),
            ToClient::Done { error } => Err(server_failed(error)),
            other => Err(PerfError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    fn chunk(&mut self, test: Test, size: u64, count: u64, window: u32) -> PerfResult<Duration> {
        let size32 = size as u32; // checked against the buffers by `measure`
        let half = self.side.max_size();
        let last = (size - 1) as usize;
        let reply_to =
            (test == Test::LatWrite).then(|| self.side.lmr.rmr_triplet(half, size32).into());
        if test == Test::LatWrite {
            self.side
                .lmr
                .write(half as usize + last, &[0])
                .ctx("clear the buffer")?;
        }
        self.start(&ToServer::Run {
            test,
            size,
            count,
            window,
            reply_to,
        })?;
        let s = &self.side;
        let src = [s.lmr.triplet(0, size32)];
        let dst = [s.lmr.triplet(half, size32)];
        let remote = self.server_rmr.triplet(size32);
        let start = Instant::now();
        let elapsed = match test {
            Test::LatSend => {
                // The receive of reply i is posted before send i: the first one ahead of the
                // first send, each later one right after the send before it (a reply cannot
                // come before the send it answers), so that post runs while the server turns
                // around, not between a reply and the next send. Exactly `count` receives,
                // all taken by the end of the loop.
                if count > 0 {
                    s.ep.post_recv(&dst, Cookie(0), CompletionFlags::DEFAULT)
                        .ctx("post a receive")?;
                }
                for i in 0..count {
                    s.debug_assert_recvs_posted("before a send");
                    s.ep.post_send(&src, Cookie(1), CompletionFlags::SUPPRESS)
                        .ctx("post a send")?;
                    if i + 1 < count {
                        s.ep.post_recv(&dst, Cookie(0), CompletionFlags::DEFAULT)
                            .ctx("post a receive")?;
                    }
                    let c = s.completion()?;
                    if c.operation != DtoOp::Receive || c.transferred_length != size32 {
                        return Err(PerfError::Protocol(format!("unexpected completion {c:?}")));
                    }
                }
                let e = start.elapsed();
                fence(s, 0)?;
                e
            }
            Test::LatWrite => {
                for i in 0..count {
                    s.lmr.write(last, &[seq_byte(i)]).ctx("write the buffer")?;
                    s.ep.post_rdma_write(&src, Cookie(2), remote, CompletionFlags::SUPPRESS)
                        .ctx("post an RDMA write")?;
                    s.poll_byte(half as usize + last, seq_byte(i))?;
                }
                let e = start.elapsed();
                fence(s, 0)?;
                e
            }
            Test::BwSend | Test::BwWrite | Test::BwRead => {
                let mut outstanding = 0u32;
                let mut posted = 0u64;
                while posted < count {
                    while outstanding < window && posted < count {
                        let f = CompletionFlags::DEFAULT;
                        match test {
                            Test::BwSend => s.ep.post_send(&src, Cookie(posted), f),
                            Test::BwWrite => s.ep.post_rdma_write(&src, Cookie(posted), remote, f),
                            _ => s.ep.post_rdma_read(&dst, Cookie(posted), remote, f),
                        }
                        .ctx("post")?;
                        posted += 1;
                        outstanding += 1;
                    }
                    let c = s.completion()?;
                    if c.operation == DtoOp::Receive {
                        return Err(PerfError::Protocol(format!("unexpected receive {c:?}")));
                    }
                    outstanding -= 1;
                }
                fence(s, outstanding)?;
                start.elapsed()
            }
        };
        self.finish()?;
        Ok(elapsed)
    }

    fn conn_chunk(&mut self, pdata: u32, count: u64) -> PerfResult<Duration> {
        self.start(&ToServer::Conn {
            count,
            private_data: pdata,
        })?;
        let s = &self.side;
        let start = Instant::now();
        for i in 0..count {
            let data = conn_pdata(i, pdata);
            let ep = s.conn_ep()?;
            ep.connect(
                self.server,
                self.conn_qual,
                Timeout::from_duration(self.opts.timeout),
                &data,
                Qos::BestEffort,
                ConnectFlags::Default,
            )
            .ctx("connect")?;
            let reply = s.conn_event(&s.conn2, EventNumber::Established)?;
            if !reply.iter().eq(data.iter().rev()) {
                return Err(PerfError::Protocol(format!(
                    "accept carried {} bytes of private data that are not the request's reversed",
                    reply.len()
                )));
            }
            ep.disconnect(CloseFlags::Graceful).ctx("disconnect")?;
            s.conn_event(&s.conn2, EventNumber::Disconnected)?;
            ep.free().ctx("free the connection-test EP")?;
        }
        let elapsed = start.elapsed();
        self.finish()?;
        Ok(elapsed)
    }
}

fn server_failed(error: Option<String>) -> PerfError {
    PerfError::Protocol(format!(
        "server: {}",
        error.unwrap_or_else(|| "finished early".into())
    ))
}

/// Sends the fence (a zero-length send the server answers with one) and collects the
/// `outstanding` request completions and the answer.
fn fence(s: &Side, mut outstanding: u32) -> PerfResult<()> {
    s.ep.post_recv(
        &[s.lmr.triplet(s.max_size(), 0)],
        Cookie(u64::MAX),
        CompletionFlags::DEFAULT,
    )
    .ctx("post the fence receive")?;
    s.ep.post_send(&[], Cookie(u64::MAX - 1), CompletionFlags::SUPPRESS)
        .ctx("post the fence")?;
    let mut answered = false;
    while !answered || outstanding > 0 {
        let c = s.completion()?;
        if c.operation == DtoOp::Receive {
            answered = true;
        } else {
            outstanding = outstanding.saturating_sub(1);
        }
    }
    Ok(())
}

/// Least time of warm-up chunks before a figure (at most a quarter of its budget). A figure
/// of 2 000 small round trips lasts 10-30 ms, about as long as what an earlier series leaves
/// behind: after `fi_pingpong` kept both cores busy, tcp send/recv ran 1.5-1.8x slower for
/// the next tens of milliseconds (session 7 in dat-provider-tcp/BENCHMARKS.md).
pub const WARM_UP: Duration = Duration::from_millis(20);

/// Runs warm-up chunks for at least [`WARM_UP`] of their own time (bounded by a quarter of
/// `budget`), then chunks of growing size until `iters` operations or `budget` of timed
/// work; returns the operations and time that count.
///
/// # Errors
/// The first error of `chunk`.
pub fn chunked(
    iters: u64,
    budget: Duration,
    mut chunk: impl FnMut(u64) -> PerfResult<Duration>,
) -> PerfResult<(u64, Duration)> {
    let iters = iters.max(1);
    let warm = (iters / 10).clamp(1, 100);
    let mut warmed = chunk(warm)?;
    while warmed < WARM_UP.min(budget / 4) {
        warmed += chunk(warm)?.max(Duration::from_micros(1));
    }
    let mut done = 0;
    let mut elapsed = Duration::ZERO;
    let mut n = (iters / 4).max(1);
    while done < iters {
        let k = n.min(iters - done);
        elapsed += chunk(k)?;
        done += k;
        if elapsed >= budget {
            break;
        }
        n = n.saturating_mul(2);
    }
    Ok((done, elapsed))
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    use std::thread;

    use dat::EventData;
    use dat::types::PspFlags;

    use super::*;
    use crate::side::Mode;

    /// The timeout of a wait the test expects to expire.
    const T: Duration = Duration::from_millis(300);
    /// The timeout of a wait the test expects to succeed: a loaded machine can stall a
    /// thread for seconds, so never `T` there.
    const LONG: Duration = Duration::from_secs(30);

    fn opts() -> RunOpts {
        RunOpts {
            window: 4,
            budget: Duration::from_millis(20),
            timeout: T,
        }
    }

    /// A client connected with [`LONG`] timeouts, which then waits at most `timeout`.
    fn connected(reg: &dat::Registry, ch: Channel, timeout: Duration) -> Client {
        let side = Side::open(reg, Some("a"), 4096, Mode::Poll, LONG).unwrap();
        let opts = RunOpts {
            timeout: LONG,
            ..opts()
        };
        let mut c = Client::connect(side, ch, Ipv4Addr::LOCALHOST.into(), opts).unwrap();
        c.side.timeout = timeout;
        c.opts.timeout = timeout;
        c
    }

    /// A control socket pair: the client's channel and the raw server end.
    fn control() -> (Channel, TcpStream) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        (Channel::new(c).unwrap(), s)
    }

    fn client_side(reg: &dat::Registry) -> Side {
        Side::open(reg, Some("a"), 4096, Mode::Poll, T).unwrap()
    }

    #[test]
    fn a_server_that_says_nonsense_or_nothing_fails_the_connect() {
        let reg = crate::testutil::registry();
        let (ch, mut raw) = control();
        raw.write_all(b"{\"msg\":\"ready\"}\n").unwrap();
        let e = Client::connect(client_side(&reg), ch, Ipv4Addr::LOCALHOST.into(), opts());
        assert!(matches!(e, Err(PerfError::Protocol(_))), "{e:?}");

        let (ch, mut raw) = control();
        let hello =
            b"{\"msg\":\"hello\",\"ia\":\"b\",\"provider\":\"mem\",\"address\":\"nowhere\",\
                      \"conn_qual\":1,\"rmr\":{\"va\":0,\"len\":0,\"rmr_context\":0}}\n";
        raw.write_all(hello).unwrap();
        let e = Client::connect(client_side(&reg), ch, Ipv4Addr::LOCALHOST.into(), opts());
        assert!(
            matches!(&e, Err(PerfError::Protocol(m)) if m.contains("bad IA address")),
            "{e:?}"
        );

        let (ch, raw) = control();
        let e = Client::connect(client_side(&reg), ch, Ipv4Addr::LOCALHOST.into(), opts());
        assert!(matches!(e, Err(PerfError::Timeout(_))), "{e:?}");
        drop(raw);

        let (ch, raw) = control();
        drop(raw);
        let e = Client::connect(client_side(&reg), ch, Ipv4Addr::LOCALHOST.into(), opts());
        assert!(matches!(e, Err(PerfError::PeerClosed)), "{e:?}");
    }

    #[test]
    fn a_server_that_goes_silent_mid_chunk_times_out() {
        let reg = crate::testutil::registry();
        let server = Side::open(&reg, Some("b"), 4096, Mode::Poll, LONG).unwrap();
        let (ch, raw) = control();
        // The server accepts, answers the first command with `ready` and then does nothing.
        let h = thread::spawn(move || {
            let mut ch = Channel::new(raw).unwrap();
            let psp = server
                .ia
                .create_psp_any(&server.cr, PspFlags::Consumer)
                .unwrap();
            ch.send(&ToClient::Hello {
                ia: "b".into(),
                provider: "mem".into(),
                address: server.ia.attr().ia_address.to_string(),
                conn_qual: psp.conn_qual().0,
                rmr: server.lmr.rmr_triplet(0, 4096).into(),
            })
            .unwrap();
            let EventData::ConnectionRequest { cr, .. } =
                server.next_event(&server.cr).unwrap().data
            else {
                panic!("no request")
            };
            server
                .ia
                .cr(cr)
                .unwrap()
                .accept(Some(&server.ep), HELLO_PDATA)
                .unwrap();
            let _ = ch.recv::<ToServer>(LONG).unwrap();
            ch.send(&ToClient::Ready).unwrap();
            // Keep the connection up until the client gives up and closes the control socket
            // (bounded far beyond the client's wait: giving up first would flush the client's
            // receive, and the test would see that instead of the client's own timeout).
            let _ = ch.recv::<ToServer>(10 * LONG);
            drop(server);
        });
        // Connected with long timeouts (a stall must not fail the setup), then `T`.
        let mut c = connected(&reg, ch, T);
        let start = Instant::now();
        let e = c.measure(Test::LatSend, 8, 10);
        assert!(matches!(e, Err(PerfError::Timeout(_))), "{e:?}");
        // Its own timeout, long before the server would give up. Polled waits count their
        // polls and read the clock only every 256th; a poller that shares its core yields on
        // every empty poll, so a 300 ms timeout took up to about 20 s on a loaded machine.
        let took = start.elapsed();
        assert!(took < 4 * LONG, "{took:?}");
        drop(c);
        h.join().unwrap();
    }

    #[test]
    fn a_one_sided_chunk_may_outlast_the_servers_timeout_for_one_event() {
        // The server's timeout for one event: short enough for the chunk below to outlast it,
        // long enough for its accept to survive a stalled client (300 ms did not, loaded).
        const SERVER_T: Duration = Duration::from_secs(3);
        let reg = crate::testutil::registry();
        let server = Side::open(&reg, Some("b"), 4096, Mode::Poll, SERVER_T).unwrap();
        let (ch, raw) = control();
        let h = thread::spawn(move || {
            let mut ch = Channel::new(raw).unwrap();
            crate::server::serve_session(&server, &mut ch, LONG)
        });
        let mut c = connected(&reg, ch, LONG);
        c.start(&ToServer::Run {
            test: Test::BwWrite,
            size: 8,
            count: 1,
            window: 1,
            reply_to: None,
        })
        .unwrap();
        let s = &c.side;
        let remote = c.server_rmr.triplet(8);
        s.ep.post_rdma_write(
            &[s.lmr.triplet(0, 8)],
            Cookie(0),
            remote,
            CompletionFlags::DEFAULT,
        )
        .unwrap();
        s.completion().unwrap();
        // A slow chunk: the server sees no event until the fence, later than its timeout (its
        // wait began before this write).
        thread::sleep(SERVER_T + Duration::from_secs(1));
        fence(s, 0).unwrap();
        c.close().unwrap();
        h.join().unwrap().unwrap();
    }

    #[test]
    fn chunked_warms_up_then_stops_at_iters_or_budget() {
        let mut calls = Vec::new();
        let (done, elapsed) = chunked(100, Duration::from_secs(3600), |n| {
            calls.push(n);
            Ok(Duration::from_millis(1))
        })
        .unwrap();
        // Warm-up chunks of 10 for 20 ms of their time, then 25, 50, 25 measured.
        assert_eq!(calls[..20], [10; 20]);
        assert_eq!(calls[20..], [25, 50, 25]);
        assert_eq!((done, elapsed), (100, Duration::from_millis(3)));

        let mut calls = Vec::new();
        let (done, _) = chunked(100, Duration::from_millis(30), |n| {
            calls.push(n);
            Ok(Duration::from_millis(40))
        })
        .unwrap();
        assert_eq!((calls, done), (vec![10, 25], 25));

        let e = chunked(5, Duration::ZERO, |_| Err(PerfError::PeerClosed));
        assert!(matches!(e, Err(PerfError::PeerClosed)));
    }
}
