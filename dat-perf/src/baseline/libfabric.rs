//! libfabric's `fi_pingpong` (Debian `libfabric-bin`) as a subprocess pair over loopback:
//! provider `tcp` with a MSG endpoint and `shm` with an RDM endpoint, both busy-polling.
//! Its `usec/xfer` is half a round trip; its `MB/sec` is ping-pong throughput
//! (2 x size x iterations / time), not streaming.
//!
//! The server's control socket listens on a free port and only 127.0.0.1 connects to it; the
//! data path is bound to `lo` (`-d lo`, `FI_*_IFACE=lo`).

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::baseline::series;
use crate::error::{IoContext, PerfError, PerfResult};
use crate::record::{Metric, Op, Record};

/// The program's name.
pub const PROGRAM: &str = "fi_pingpong";

/// The `provider` of its records.
pub const PROVIDER: &str = "libfabric";

/// Where `fi_pingpong` is on `$PATH`, if installed.
pub fn find() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(PROGRAM))
        .find(|p| p.is_file())
}

/// One parsed result line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FiResult {
    /// Ping-pong throughput, MB/s.
    pub mb_per_sec: f64,
    /// Half round trip, µs.
    pub usec_per_xfer: f64,
}

/// Parses fi_pingpong's output: the line after the `bytes #sent ...` header, whose sixth and
/// seventh columns are `MB/sec` and `usec/xfer`.
pub fn parse(output: &str) -> Option<FiResult> {
    let mut lines = output.lines();
    let header = lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("bytes"))?;
    let cols: Vec<&str> = header.split_whitespace().collect();
    let mb = cols.iter().position(|c| *c == "MB/sec")?;
    let us = cols.iter().position(|c| *c == "usec/xfer")?;
    let row: Vec<&str> = lines.next()?.split_whitespace().collect();
    Some(FiResult {
        mb_per_sec: row.get(mb)?.parse().ok()?,
        usec_per_xfer: row.get(us)?.parse().ok()?,
    })
}

fn free_port() -> PerfResult<u16> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).io_ctx("find a free port")?;
    Ok(l.local_addr().io_ctx("find a free port")?.port())
}

fn command(program: &PathBuf, provider: &str, size: u64, iters: u64) -> Command {
    let mut c = Command::new(program);
    let ep = if provider == "shm" { "rdm" } else { "msg" };
    c.args([
        "-p",
        provider,
        "-e",
        ep,
        "-I",
        &iters.to_string(),
        "-S",
        &size.to_string(),
    ]);
    if provider != "shm" {
        c.args(["-d", "lo"]);
    }
    for v in [
        "FI_TCP_IFACE",
        "FI_SOCKETS_IFACE",
        "FI_UDP_IFACE",
        "FI_NET_IFACE",
    ] {
        c.env(v, "lo");
    }
    c.stdin(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Waits for `child` until `deadline`, killing it then; returns its stdout and stderr and
/// whether it exited successfully.
fn finish(mut child: Child, deadline: Instant) -> (String, String, bool) {
    let ok = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st.success(),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break false;
            }
        }
    };
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (out, err, ok)
}

/// Runs `fi_pingpong` for `provider` (`tcp` or `shm`) at `size` with `iters` iterations and
/// returns its latency and ping-pong bandwidth records.
///
/// # Errors
/// [`PerfError::Unsupported`] when `fi_pingpong` is not installed; [`PerfError::Timeout`]
/// when it does not finish within `timeout`; [`PerfError::Protocol`] when it fails or its
/// output has no result line (its stderr is quoted).
pub fn pingpong(
    provider: &str,
    size: u64,
    iters: u64,
    timeout: Duration,
) -> PerfResult<(Record, Record)> {
    let program = find().ok_or_else(|| {
        PerfError::Unsupported(format!(
            "{PROGRAM} is not installed (Debian package libfabric-bin)"
        ))
    })?;
    let port = free_port()?.to_string();
    let deadline = Instant::now() + timeout;
    let server = command(&program, provider, size, iters)
        .args(["-B", &port])
        .stdout(Stdio::null())
        .spawn()
        .io_ctx("start fi_pingpong")?;
    // Give the server time to listen; the client does not retry its control connection.
    std::thread::sleep(Duration::from_millis(300));
    let client = command(&program, provider, size, iters)
        .args(["-P", &port, "127.0.0.1"])
        .stdout(Stdio::piped())
        .spawn();
    let client = match client {
        Ok(c) => c,
        Err(e) => {
            finish(server, Instant::now());
            return Err(PerfError::io("start fi_pingpong", e));
        }
    };
    let (out, err, ok) = finish(client, deadline);
    let (_, server_err, _) = finish(server, Instant::now() + Duration::from_secs(2));
    if Instant::now() >= deadline && !ok {
        return Err(PerfError::Timeout(format!(
            "{PROGRAM} -p {provider} did not finish within {timeout:?}"
        )));
    }
    let r = parse(&out).filter(|_| ok).ok_or_else(|| {
        PerfError::Protocol(format!(
            "{PROGRAM} -p {provider} -S {size} failed: {} {}",
            err.trim(),
            server_err.trim()
        ))
    })?;
    let name = if provider == "shm" {
        series::FI_SHM
    } else {
        series::FI_TCP
    };
    let rec = |metric, value| {
        Record::new(
            name,
            PROVIDER,
            Op::PingPong,
            metric,
            size,
            iters,
            value,
            "poll",
        )
    };
    Ok((
        rec(Metric::Latency, r.usec_per_xfer),
        rec(Metric::Bandwidth, r.mb_per_sec),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let out = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                   64      1k      =1k      125k        0.01s     11.91       5.37       0.19\n";
        assert_eq!(
            parse(out),
            Some(FiResult {
                mb_per_sec: 11.91,
                usec_per_xfer: 5.37
            })
        );
        assert_eq!(parse(""), None);
        assert_eq!(parse("bytes #sent MB/sec usec/xfer\n"), None);
        assert_eq!(
            parse("bytes a b c d MB/sec usec/xfer\n1 2 3 4 5 x y\n"),
            None
        );
    }

    #[test]
    fn runs_when_installed() {
        // Nothing to run on machines without libfabric-bin (compare notes the skip there).
        if find().is_none() {
            return;
        }
        let (lat, bw) = pingpong("tcp", 64, 200, Duration::from_secs(20)).unwrap();
        assert_eq!(
            (lat.series.as_str(), lat.metric),
            ("fi-tcp", Metric::Latency)
        );
        assert_eq!(
            (bw.series.as_str(), bw.metric),
            ("fi-tcp", Metric::Bandwidth)
        );
        assert!(lat.value > 0.0 && bw.value > 0.0);
    }
}
