//! Raw TCP over loopback with `TCP_NODELAY`: ping-pong with the receiver spinning on a
//! non-blocking socket (the like-for-like comparison with a polling transport) or blocking,
//! and a one-way stream. The echo end runs on a thread of this process.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use crate::baseline::{BASELINE, series};
use crate::client::chunked;
use crate::error::{IoContext, PerfError, PerfResult};
use crate::record::{Metric, Op, Record};

/// Reads exactly `buf.len()` bytes. With `spin`, the socket is non-blocking and the loop
/// spins; `deadline` bounds it either way. Returns false on a clean end of stream before
/// the first byte.
fn read_full(s: &mut TcpStream, buf: &mut [u8], deadline: Instant) -> PerfResult<bool> {
    let mut got = 0;
    let mut spins = 0u32;
    while got < buf.len() {
        match s.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(PerfError::Protocol("TCP peer closed mid-message".into())),
            Ok(n) => got += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) && Instant::now() >= deadline {
                    return Err(PerfError::Timeout("TCP peer stalled".into()));
                }
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(PerfError::io("TCP read", e)),
        }
    }
    Ok(true)
}

fn write_full(s: &mut TcpStream, buf: &[u8], deadline: Instant) -> PerfResult<()> {
    let mut put = 0;
    let mut spins = 0u32;
    while put < buf.len() {
        match s.write(&buf[put..]) {
            Ok(0) => return Err(PerfError::Protocol("TCP peer closed".into())),
            Ok(n) => put += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                spins = spins.wrapping_add(1);
                if spins.is_multiple_of(1024) && Instant::now() >= deadline {
                    return Err(PerfError::Timeout("TCP peer stalled".into()));
                }
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(PerfError::io("TCP write", e)),
        }
    }
    Ok(())
}

fn configure(s: &TcpStream, spin: bool, timeout: Duration) -> PerfResult<()> {
    s.set_nodelay(true).io_ctx("TCP_NODELAY")?;
    s.set_nonblocking(spin).io_ctx("O_NONBLOCK")?;
    s.set_read_timeout(Some(timeout)).io_ctx("SO_RCVTIMEO")?;
    s.set_write_timeout(Some(timeout)).io_ctx("SO_SNDTIMEO")
}

/// A connected loopback pair: the client end here, the server end on a thread running
/// `serve` until the client closes.
fn with_server<T>(
    spin: bool,
    timeout: Duration,
    serve: impl FnOnce(TcpStream) -> PerfResult<()> + Send + 'static,
    client: impl FnOnce(TcpStream) -> PerfResult<T>,
) -> PerfResult<T> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).io_ctx("bind a loopback socket")?;
    let addr = listener.local_addr().io_ctx("loopback socket")?;
    let c = TcpStream::connect(addr).io_ctx("connect over loopback")?;
    let (s, _) = listener.accept().io_ctx("accept over loopback")?;
    configure(&c, spin, timeout)?;
    configure(&s, spin, timeout)?;
    let h = thread::Builder::new()
        .name("raw-tcp-echo".into())
        .spawn(move || serve(s))
        .io_ctx("spawn the echo thread")?;
    let r = client(c);
    let joined = h
        .join()
        .unwrap_or_else(|_| Err(PerfError::Protocol("echo thread panicked".into())));
    let v = r?;
    joined?;
    Ok(v)
}

/// Ping-pong of `size` bytes: up to `iters` round trips (fewer when `budget` runs out).
/// `spin` selects busy-polling non-blocking sockets over blocking ones.
///
/// # Errors
/// [`PerfError::Io`] for socket failures; [`PerfError::Timeout`] when a round trip takes
/// longer than `timeout`.
pub fn pingpong(
    size: u64,
    iters: u64,
    budget: Duration,
    spin: bool,
    timeout: Duration,
) -> PerfResult<Record> {
    let n = usize::try_from(size).unwrap_or(usize::MAX).max(1);
    let (done, elapsed) = with_server(
        spin,
        timeout,
        move |mut s| {
            let mut buf = vec![0u8; n];
            loop {
                if !read_full(&mut s, &mut buf, Instant::now() + timeout)? {
                    return Ok(());
                }
                write_full(&mut s, &buf, Instant::now() + timeout)?;
            }
        },
        |mut c| {
            let mut buf = vec![1u8; n];
            chunked(iters, budget, |k| {
                let start = Instant::now();
                for _ in 0..k {
                    let deadline = Instant::now() + timeout;
                    write_full(&mut c, &buf, deadline)?;
                    if !read_full(&mut c, &mut buf, deadline)? {
                        return Err(PerfError::Protocol("echo thread closed".into()));
                    }
                }
                Ok(start.elapsed())
            })
        },
    )?;
    let value = elapsed.as_secs_f64() * 1e6 / done as f64 / 2.0;
    let (name, mode) = if spin {
        (series::TCP_SPIN, "poll")
    } else {
        (series::TCP_BLOCK, "wait")
    };
    Ok(Record::new(
        name,
        BASELINE,
        Op::PingPong,
        Metric::Latency,
        size,
        done,
        value,
        mode,
    ))
}

/// One-way stream of `size`-byte writes (blocking sockets): up to `count` messages, each
/// chunk acknowledged by one byte from the receiver once all its bytes arrived.
///
/// # Errors
/// As [`pingpong`].
pub fn stream(size: u64, count: u64, budget: Duration, timeout: Duration) -> PerfResult<Record> {
    let n = usize::try_from(size).unwrap_or(usize::MAX).max(1);
    let (done, elapsed) = with_server(
        false,
        timeout,
        move |mut s| {
            let mut buf = vec![0u8; n.min(1 << 20)];
            let mut hdr = [0u8; 8];
            loop {
                if !read_full(&mut s, &mut hdr, Instant::now() + timeout)? {
                    return Ok(());
                }
                let mut left = u64::from_le_bytes(hdr);
                while left > 0 {
                    let k = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
                    if !read_full(&mut s, &mut buf[..k], Instant::now() + timeout)? {
                        return Err(PerfError::Protocol("stream cut short".into()));
                    }
                    left -= k as u64;
                }
                write_full(&mut s, &[1], Instant::now() + timeout)?;
            }
        },
        |mut c| {
            let buf = vec![1u8; n];
            chunked(count, budget, |k| {
                let start = Instant::now();
                let total = k.saturating_mul(size);
                write_full(&mut c, &total.to_le_bytes(), start + timeout)?;
                for _ in 0..k {
                    write_full(&mut c, &buf, Instant::now() + timeout)?;
                }
                let mut ack = [0u8; 1];
                if !read_full(&mut c, &mut ack, Instant::now() + timeout)? {
                    return Err(PerfError::Protocol("receiver closed".into()));
                }
                Ok(start.elapsed())
            })
        },
    )?;
    let value = done as f64 * size as f64 / elapsed.as_secs_f64().max(1e-9) / 1e6;
    Ok(Record::new(
        series::TCP_STREAM,
        BASELINE,
        Op::Stream,
        Metric::Bandwidth,
        size,
        done,
        value,
        "wait",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn pingpong_spin_and_blocking_and_stream() {
        for size in [1, 4096, 1 << 20] {
            let r = pingpong(size, 20, Duration::from_millis(20), true, T).unwrap();
            assert_eq!(
                (r.series.as_str(), r.op, r.metric, r.size),
                ("raw-tcp-spin", Op::PingPong, Metric::Latency, size)
            );
            assert!(r.value > 0.0 && r.iters >= 5);
            let r = pingpong(size, 20, Duration::from_millis(20), false, T).unwrap();
            assert_eq!(
                (r.series.as_str(), r.mode.as_str()),
                ("raw-tcp-block", "wait")
            );
            let r = stream(size, 32, Duration::from_millis(20), T).unwrap();
            assert_eq!(
                (r.series.as_str(), r.op, r.metric),
                ("raw-tcp", Op::Stream, Metric::Bandwidth)
            );
            assert!(r.value > 0.0);
        }
    }

    #[test]
    fn a_silent_peer_times_out() {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, _) = l.accept().unwrap();
        configure(&c, true, T).unwrap();
        let mut b = [0u8; 4];
        let e = read_full(&mut c, &mut b, Instant::now() + Duration::from_millis(30));
        assert!(matches!(e, Err(PerfError::Timeout(_))));
    }
}
