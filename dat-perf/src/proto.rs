//! The out-of-band control channel between a datperf client and server: JSON lines over a
//! plain TCP socket (default port [`DEFAULT_PORT`]). The server announces its IA address,
//! connection qualifier and the RMR triplet of its buffer; the client then drives each
//! measurement chunk with a command and waits for `ready` and `done`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, PerfError, PerfResult};

/// The default control port (the classic perftest port).
pub const DEFAULT_PORT: u16 = 18515;

/// Longest control line accepted from a peer.
const MAX_LINE: u64 = 64 * 1024;
/// How long [`Channel::recv`] polls the socket before it sleeps in the kernel. The messages
/// between the chunks of one figure follow each other within tens of microseconds; a thread
/// that slept for them was woken by its peer's send, and Linux places such a thread on the
/// waker's CPU (a synchronous wake-up: the waker is expected to sleep next), where the peer
/// goes on polling: both ends of a ping-pong then shared one core of two until the load
/// balancer moved one (dat-provider-tcp/BENCHMARKS.md, session 8). The raw baselines' echo
/// threads never sleep between chunks. Longer waits (between the steps of other IAs) sleep.
const SPIN: Duration = Duration::from_millis(2);

/// A remote buffer as an RMR triplet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRmr {
    /// Target virtual address.
    pub va: u64,
    /// Length in bytes.
    pub len: u32,
    /// The RMR context (remote key).
    pub rmr_context: u32,
}

impl From<dat::types::RmrTriplet> for WireRmr {
    fn from(t: dat::types::RmrTriplet) -> WireRmr {
        WireRmr {
            va: t.virtual_address,
            len: t.segment_length,
            rmr_context: t.rmr_context,
        }
    }
}

impl WireRmr {
    /// The triplet for `len` bytes from the start.
    pub fn triplet(self, len: u32) -> dat::types::RmrTriplet {
        dat::types::RmrTriplet {
            virtual_address: self.va,
            segment_length: len,
            rmr_context: self.rmr_context,
        }
    }
}

/// A measurement the client and server run together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Test {
    /// Send/receive ping-pong.
    LatSend,
    /// RDMA-write ping-pong: each side polls the last byte of its buffer.
    LatWrite,
    /// Streaming sends into a window of receives.
    BwSend,
    /// Streaming RDMA writes.
    BwWrite,
    /// Streaming RDMA reads.
    BwRead,
}

/// Client to server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum ToServer {
    /// Run one chunk of `count` operations of `size` bytes.
    Run {
        /// The measurement.
        test: Test,
        /// Message size.
        size: u64,
        /// Operations in this chunk.
        count: u64,
        /// Receives the server keeps posted.
        window: u32,
        /// Where the server writes back (RDMA-write ping-pong).
        reply_to: Option<WireRmr>,
    },
    /// Accept `count` connections on the second EP, each with `private_data` bytes.
    Conn {
        /// Connections.
        count: u64,
        /// Private-data bytes each way.
        private_data: u32,
    },
    /// End of the session.
    Quit,
}

/// Server to client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "msg", rename_all = "kebab-case")]
pub enum ToClient {
    /// The server's IA and buffer.
    Hello {
        /// IA name.
        ia: String,
        /// Provider name.
        provider: String,
        /// The IA address to connect to.
        address: String,
        /// The PSP's connection qualifier.
        conn_qual: u64,
        /// The server's buffer.
        rmr: WireRmr,
    },
    /// The chunk's receives are posted: go.
    Ready,
    /// The server's part of the chunk is finished (or failed).
    Done {
        /// Why the server's part failed.
        error: Option<String>,
    },
}

/// A JSON-lines channel over a TCP stream, every read bounded by a timeout.
#[derive(Debug)]
pub struct Channel {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Channel {
    /// Wraps a connected stream (sets `TCP_NODELAY`).
    ///
    /// # Errors
    /// [`PerfError::Io`] when the stream cannot be cloned or configured.
    pub fn new(stream: TcpStream) -> PerfResult<Channel> {
        stream.set_nodelay(true).io_ctx("control socket")?;
        let writer = stream.try_clone().io_ctx("control socket")?;
        Ok(Channel {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Sends one message.
    ///
    /// # Errors
    /// [`PerfError::Io`] when the peer is gone.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> PerfResult<()> {
        let mut line = serde_json::to_string(msg)
            .map_err(|e| PerfError::Protocol(format!("encode control message: {e}")))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .io_ctx("send on the control socket")
    }

    /// Receives one message, waiting at most `timeout`.
    ///
    /// # Errors
    /// [`PerfError::Timeout`] when nothing complete arrives in time; [`PerfError::PeerClosed`]
    /// at end of stream; [`PerfError::Protocol`] for an over-long line or a line that is not a
    /// message of type `T`.
    pub fn recv<T: DeserializeOwned>(&mut self, timeout: Duration) -> PerfResult<T> {
        let spun = self.spin_until_readable(timeout.min(SPIN));
        let left = timeout.saturating_sub(spun);
        self.reader
            .get_ref()
            .set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .io_ctx("control socket")?;
        let mut buf = Vec::new();
        let n = match (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(PerfError::Timeout(format!(
                    "no control message from the peer within {timeout:?}"
                )));
            }
            Err(e) => return Err(PerfError::io("receive on the control socket", e)),
        };
        if n == 0 {
            return Err(PerfError::PeerClosed);
        }
        if buf.last() != Some(&b'\n') {
            return Err(PerfError::Protocol(
                "control line too long or cut short".into(),
            ));
        }
        serde_json::from_slice(&buf)
            .map_err(|e| PerfError::Protocol(format!("bad control message from the peer: {e}")))
    }

    /// Polls the socket for up to `spin` until bytes (or the end of the stream) are there,
    /// without reading them (see [`SPIN`]); returns how long it polled. It yields the CPU
    /// between looks, so that a peer placed on this thread's core still runs. Any failure
    /// here is left to the blocking read that follows, which reports it.
    fn spin_until_readable(&mut self, spin: Duration) -> Duration {
        if !self.reader.buffer().is_empty() {
            return Duration::ZERO;
        }
        let sock = self.reader.get_ref();
        if sock.set_nonblocking(true).is_err() {
            return Duration::ZERO;
        }
        let start = Instant::now();
        let mut byte = [0u8; 1];
        loop {
            match sock.peek(&mut byte) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted
                    ) => {}
                // Bytes, the end of the stream or an error: the read tells which.
                _ => break,
            }
            if start.elapsed() >= spin {
                break;
            }
            std::thread::yield_now();
        }
        let _ = sock.set_nonblocking(false);
        start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (Channel, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (Channel::new(a).unwrap(), b)
    }

    #[test]
    fn messages_round_trip_and_bad_peer_bytes_are_errors() {
        let (mut a, b) = pair();
        let mut cb = Channel::new(b.try_clone().unwrap()).unwrap();
        let run = ToServer::Run {
            test: Test::LatWrite,
            size: 64,
            count: 3,
            window: 1,
            reply_to: Some(WireRmr {
                va: 1,
                len: 2,
                rmr_context: 3,
            }),
        };
        a.send(&run).unwrap();
        assert_eq!(cb.recv::<ToServer>(Duration::from_secs(5)).unwrap(), run);

        let mut raw = b;
        raw.write_all(b"{\"msg\":\"nonsense\"}\n").unwrap();
        assert!(matches!(
            a.recv::<ToClient>(Duration::from_secs(5)),
            Err(PerfError::Protocol(_))
        ));
        raw.write_all(b"\xff\xfe\n").unwrap();
        assert!(matches!(
            a.recv::<ToClient>(Duration::from_secs(5)),
            Err(PerfError::Protocol(_))
        ));
        assert!(matches!(
            a.recv::<ToClient>(Duration::from_millis(20)),
            Err(PerfError::Timeout(_))
        ));
        raw.write_all(&vec![b'x'; MAX_LINE as usize + 10]).unwrap();
        assert!(matches!(
            a.recv::<ToClient>(Duration::from_secs(5)),
            Err(PerfError::Protocol(_))
        ));
        drop(raw);
        drop(cb);
        // The rest of the long line, then end of stream: errors, never a hang.
        let _ = a.recv::<ToClient>(Duration::from_secs(5));
        assert!(a.recv::<ToClient>(Duration::from_secs(5)).is_err());
    }

    #[test]
    fn a_line_cut_across_the_poll_and_the_sleep_arrives_whole() {
        let (mut a, mut raw) = pair();
        // The first half arrives while the receive polls, the rest after it went to sleep:
        // the poll only looks at the bytes, the read takes the whole line.
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_micros(200));
            raw.write_all(b"{\"msg\":").unwrap();
            std::thread::sleep(SPIN * 3);
            raw.write_all(b"\"ready\"}\n").unwrap();
            raw
        });
        assert_eq!(
            a.recv::<ToClient>(Duration::from_secs(30)).unwrap(),
            ToClient::Ready
        );
        // A peer that closes while the receive polls: end of stream, at once.
        drop(writer.join().unwrap());
        assert!(matches!(
            a.recv::<ToClient>(Duration::from_secs(30)),
            Err(PerfError::PeerClosed)
        ));
    }
}
