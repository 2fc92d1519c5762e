//! `datperf`: how fast is a DAT IA here, next to raw TCP, shared memory, memcpy and
//! libfabric? Run with no arguments for a short sweep on the default IA; `datperf --help`
//! lists the subcommands.

// A command-line program: printing its tables and JSON lines to stdout, and its errors to
// stderr, is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use dat::Registry;
use dat_perf::proto::{Channel, DEFAULT_PORT, ToClient};
use dat_perf::record::{Record, tables};
use dat_perf::side::Side;
use dat_perf::sizes::{MAX_SIZE, parse_sizes};
use dat_perf::suite::{Counts, Job, jobs};
use dat_perf::{Client, Mode, PerfError, PerfResult, RunOpts, Test, compare, info, local, plot};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(
    name = "datperf",
    version,
    about = "Measure a DAT IA (latency, bandwidth, connection rate) next to raw TCP, shared \
             memory, memcpy and libfabric baselines. With no subcommand: a short latency and \
             bandwidth sweep on the default IA."
)]
struct Cli {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Args, Debug, Clone)]
struct Common {
    /// IA to measure (default: $DAT_IA, else the configuration's default).
    #[arg(long, global = true)]
    ia: Option<String>,
    /// IA of the in-process server end (default: the same as --ia).
    #[arg(long, global = true)]
    server_ia: Option<String>,
    /// Run both in-process ends on one IA (default: each end opens its own, sharing one only
    /// if the second open fails).
    #[arg(long, global = true)]
    one_ia: bool,
    /// Sizes: `1,64,4K`, `1..4M` (powers of two) or `1..4M*4`.
    #[arg(long, global = true)]
    sizes: Option<String>,
    /// Round trips per latency figure up to 64 KiB (fewer above; the time budget may stop
    /// earlier); connections per connection-rate figure.
    #[arg(long, global = true)]
    iters: Option<u64>,
    /// Operations outstanding in the bandwidth tests.
    #[arg(long, global = true, default_value_t = 64)]
    window: u32,
    /// Bytes streamed per bandwidth figure (`256M`).
    #[arg(long, global = true)]
    bytes: Option<String>,
    /// Wait for completions with Evd::wait instead of polling with Evd::dequeue.
    #[arg(long, global = true)]
    wait: bool,
    /// One JSON object per result on stdout instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Also draw latency and bandwidth against size into this PNG.
    #[arg(long, global = true)]
    plot: Option<PathBuf>,
    /// Time spent on each figure, in milliseconds.
    #[arg(long, global = true)]
    budget_ms: Option<u64>,
    /// Longest wait for any one event, in seconds (a dead peer fails after this).
    #[arg(long, global = true, default_value_t = 10)]
    timeout_s: u64,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The IAs of the resolved configuration, their providers and attributes.
    Info,
    /// Ping-pong latency: send/recv and RDMA write (each side polls its buffer's last byte).
    Lat {
        /// Which ping-pongs.
        #[arg(long, value_delimiter = ',', default_value = "send,write")]
        ops: Vec<LatOp>,
    },
    /// Streaming bandwidth with a window of outstanding operations.
    Bw {
        /// Which operations.
        #[arg(long, value_delimiter = ',', default_value = "send,write,read")]
        ops: Vec<BwOp>,
    },
    /// Connection setup and teardown rate with private data.
    Conn {
        /// Private-data bytes each way.
        #[arg(long, default_value_t = 64)]
        private_data: u32,
    },
    /// The server end for `datperf client` in another process or on another host.
    Server {
        /// Address of the control socket.
        #[arg(long, default_value = "127.0.0.1")]
        bind: String,
        /// Port of the control socket.
        #[arg(long, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Serve one client, then exit.
        #[arg(long)]
        once: bool,
    },
    /// The client end: connect to `datperf server` on HOST and measure.
    Client {
        /// Host of the server's control socket.
        host: String,
        /// Port of the server's control socket.
        #[arg(long, default_value_t = DEFAULT_PORT)]
        port: u16,
        /// What to measure.
        #[arg(long, value_delimiter = ',', default_value = "lat,bw")]
        tests: Vec<Kind>,
    },
    /// Every IA that opens here and every baseline, interleaved size by size, with ratios.
    Compare {
        /// A smoke run (few sizes, few iterations, seconds): for CI.
        #[arg(long)]
        short: bool,
        /// Leave out libfabric's fi_pingpong (an external program).
        #[arg(long)]
        no_libfabric: bool,
        /// Repeat the interleaved sequence this often; each figure is the median (default:
        /// 3, or 1 with --short).
        #[arg(long)]
        rounds: Option<u32>,
        /// Run only the steps whose description (as the progress bar shows it, e.g.
        /// `tcp-lo send-recv lat 8`, `fi-tcp 4K`) contains one of these comma-separated strings;
        /// every IA is opened all the same (default: every step).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LatOp {
    Send,
    Write,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BwOp {
    Send,
    Write,
    Read,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Lat,
    Bw,
    Conn,
}

struct Settings {
    mode: Mode,
    opts: RunOpts,
    counts: Counts,
    max_size: u64,
}

fn settings(c: &Common, default_budget_ms: u64, sizes: &[u64]) -> Result<Settings, String> {
    let mut counts = Counts::default();
    if let Some(i) = c.iters {
        counts.lat_iters = i;
        counts.conn_iters = i;
    }
    if let Some(b) = c.bytes.as_deref() {
        counts.bw_bytes = dat_perf::sizes::parse_size(b).map_err(|e| format!("--bytes: {e}"))?;
    }
    Ok(Settings {
        mode: if c.wait { Mode::Wait } else { Mode::Poll },
        opts: RunOpts {
            window: c.window.max(1),
            budget: Duration::from_millis(c.budget_ms.unwrap_or(default_budget_ms)),
            timeout: Duration::from_secs(c.timeout_s.max(1)),
        },
        counts,
        max_size: sizes.iter().copied().max().unwrap_or(MAX_SIZE).max(64),
    })
}

fn sizes_or(c: &Common, default: &[u64]) -> Result<Vec<u64>, String> {
    match &c.sizes {
        Some(s) => parse_sizes(s).map_err(|e| format!("--sizes: {e}")),
        None => Ok(default.to_vec()),
    }
}

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;

fn main() -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("DAT_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("datperf: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let reg = Registry::from_env().map_err(|e| e.to_string())?;
    let c = &cli.common;
    match cli.cmd {
        None => {
            let lat = sizes_or(c, &[1, 64, K, 4 * K, 64 * K, M])?;
            let bw = sizes_or(c, &[4 * K, 64 * K, M])?;
            let s = settings(c, 250, &[&lat[..], &bw[..]].concat())?;
            let mut list = jobs(&[Test::LatSend, Test::LatWrite], &lat);
            list.extend(jobs(&[Test::BwSend, Test::BwWrite, Test::BwRead], &bw));
            local_run(&reg, c, &s, &list)
        }
        Some(Cmd::Info) => {
            print!("{}", info::describe(&reg));
            Ok(())
        }
        Some(Cmd::Lat { ops }) => {
            let sizes = sizes_or(c, &[1, 8, 64, 512, 4 * K, 64 * K, M, 4 * M])?;
            let s = settings(c, 1000, &sizes)?;
            let tests: Vec<Test> = ops
                .iter()
                .map(|o| match o {
                    LatOp::Send => Test::LatSend,
                    LatOp::Write => Test::LatWrite,
                })
                .collect();
            local_run(&reg, c, &s, &jobs(&tests, &sizes))
        }
        Some(Cmd::Bw { ops }) => {
            let sizes = sizes_or(c, &[64, 512, 4 * K, 64 * K, M, 4 * M])?;
            let s = settings(c, 1000, &sizes)?;
            let tests: Vec<Test> = ops.iter().map(|&o| bw_test(o)).collect();
            local_run(&reg, c, &s, &jobs(&tests, &sizes))
        }
        Some(Cmd::Conn { private_data }) => {
            let s = settings(c, 1000, &[64])?;
            local_run(&reg, c, &s, &[Job::Conn(private_data)])
        }
        Some(Cmd::Server {
            ref bind,
            port,
            once,
        }) => {
            let sizes = sizes_or(c, &[MAX_SIZE])?;
            let s = settings(c, 1000, &sizes)?;
            serve(&reg, c, &s, bind, port, once).map_err(|e| e.to_string())
        }
        Some(Cmd::Client {
            ref host,
            port,
            ref tests,
        }) => {
            let lat = sizes_or(c, &[1, 8, 64, 512, 4 * K, 64 * K, M, 4 * M])?;
            let s = settings(c, 1000, &lat)?;
            let mut list = Vec::new();
            for k in tests {
                match k {
                    Kind::Lat => list.extend(jobs(&[Test::LatSend, Test::LatWrite], &lat)),
                    Kind::Bw => {
                        list.extend(jobs(&[Test::BwSend, Test::BwWrite, Test::BwRead], &lat))
                    }
                    Kind::Conn => list.push(Job::Conn(64)),
                }
            }
            remote_run(&reg, c, &s, host, port, &list)
        }
        Some(Cmd::Compare {
            short,
            no_libfabric,
            rounds,
            only,
        }) => {
            let mut cfg = if short {
                compare::Config::short()
            } else {
                compare::Config::full()
            };
            if let Some(sz) = &c.sizes {
                cfg.sizes = parse_sizes(sz).map_err(|e| format!("--sizes: {e}"))?;
            }
            if let Some(b) = c.budget_ms {
                cfg.budget = Duration::from_millis(b);
            }
            if let Some(i) = c.iters {
                cfg.counts.lat_iters = i;
            }
            if let Some(b) = c.bytes.as_deref() {
                cfg.counts.bw_bytes =
                    dat_perf::sizes::parse_size(b).map_err(|e| format!("--bytes: {e}"))?;
            }
            cfg.mode = if c.wait { Mode::Wait } else { Mode::Poll };
            cfg.window = c.window.max(1);
            cfg.timeout = Duration::from_secs(c.timeout_s.max(1));
            cfg.external = !no_libfabric;
            if let Some(r) = rounds {
                cfg.rounds = r.max(1);
            }
            if let Some(ia) = &c.ia {
                cfg.ias = Some(vec![ia.clone()]);
            }
            cfg.server_ia.clone_from(&c.server_ia);
            cfg.pairing = pairing(c);
            cfg.only = only;
            compare_run(&reg, c, &cfg)
        }
    }
}

fn pairing(c: &Common) -> local::Pairing {
    if c.one_ia {
        local::Pairing::OneIa
    } else {
        local::Pairing::TwoIas
    }
}

fn bw_test(o: BwOp) -> Test {
    match o {
        BwOp::Send => Test::BwSend,
        BwOp::Write => Test::BwWrite,
        BwOp::Read => Test::BwRead,
    }
}

fn progress(len: usize, json: bool) -> ProgressBar {
    if json {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(len as u64);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} {msg}")
    {
        pb.set_style(style);
    }
    pb
}

fn local_run(reg: &Registry, c: &Common, s: &Settings, list: &[Job]) -> Result<(), String> {
    let mut pair = local::start(
        reg,
        c.server_ia.as_deref().or(c.ia.as_deref()),
        c.ia.as_deref(),
        s.max_size,
        s.mode,
        pairing(c),
        &s.opts,
    )
    .map_err(|e| format!("cannot measure: {e}"))?;
    let client = pair.client().map_err(|e| e.to_string())?;
    let (records, notes) = run_list(client, c, s, list);
    let closed = pair.close();
    output(c, &records, &notes, "datperf")?;
    if let Err(e) = closed {
        tracing::warn!("closing the session: {e}");
    }
    if records.is_empty() {
        return Err("no measurement succeeded".into());
    }
    Ok(())
}

fn run_list(
    client: &mut Client,
    c: &Common,
    s: &Settings,
    list: &[Job],
) -> (Vec<Record>, Vec<String>) {
    let pb = progress(list.len(), c.json);
    let ia = client.side().ia.name().to_owned();
    let provider = client.side().ia.provider_attr().provider_name.clone();
    pb.set_message(format!("IA {ia} ({provider})"));
    let out = dat_perf::suite::run(client, list, s.counts, &mut |job, r| {
        pb.inc(1);
        pb.set_message(match r {
            Ok(_) => job.describe(),
            Err(e) => format!("{}: {e}", job.describe()),
        });
    });
    pb.finish_and_clear();
    out
}

fn output(c: &Common, records: &[Record], notes: &[String], title: &str) -> Result<(), String> {
    if c.json {
        for r in records {
            println!("{}", r.to_json());
        }
        for n in notes {
            tracing::warn!("{n}");
        }
    } else {
        print!("{}", tables(records, None));
        for n in notes {
            println!("note: {n}");
        }
    }
    if let Some(p) = &c.plot {
        plot::plot(records, p, title).map_err(|e| e.to_string())?;
        if !c.json {
            println!("plot written to {}", p.display());
        }
    }
    Ok(())
}

fn serve(
    reg: &Registry,
    c: &Common,
    s: &Settings,
    bind: &str,
    port: u16,
    once: bool,
) -> PerfResult<()> {
    let listener = TcpListener::bind((bind, port))
        .map_err(|e| PerfError::io(format!("listen on {bind}:{port}"), e))?;
    println!(
        "datperf server: control socket on {} (IA {})",
        listener
            .local_addr()
            .map_or_else(|_| format!("{bind}:{port}"), |a| a.to_string()),
        c.ia.as_deref().unwrap_or("default")
    );
    loop {
        let (stream, peer) = listener
            .accept()
            .map_err(|e| PerfError::io("accept a client", e))?;
        tracing::info!(%peer, "client connected");
        let mut ch = Channel::new(stream)?;
        match Side::open(reg, c.ia.as_deref(), s.max_size, s.mode, s.opts.timeout) {
            Err(e) => {
                tracing::warn!("cannot open the IA: {e}");
                let _ = ch.send(&ToClient::Done {
                    error: Some(e.to_string()),
                });
            }
            Ok(side) => {
                match dat_perf::server::serve_session(&side, &mut ch, Duration::from_secs(600)) {
                    Ok(()) => tracing::info!(%peer, "session ended"),
                    Err(e) => tracing::warn!(%peer, "session failed: {e}"),
                }
            }
        }
        if once {
            return Ok(());
        }
    }
}

fn remote_run(
    reg: &Registry,
    c: &Common,
    s: &Settings,
    host: &str,
    port: u16,
    list: &[Job],
) -> Result<(), String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let stream = TcpStream::connect_timeout(&addr, s.opts.timeout)
        .map_err(|e| format!("connect to the datperf server at {addr}: {e}"))?;
    let ch = Channel::new(stream).map_err(|e| e.to_string())?;
    let side = Side::open(reg, c.ia.as_deref(), s.max_size, s.mode, s.opts.timeout)
        .map_err(|e| format!("cannot measure: {e}"))?;
    let mut client = Client::connect(side, ch, addr.ip(), s.opts.clone())
        .map_err(|e| format!("cannot measure: {e}"))?;
    let (records, notes) = run_list(&mut client, c, s, list);
    if let Err(e) = client.close() {
        tracing::warn!("closing the session: {e}");
    }
    output(c, &records, &notes, "datperf")?;
    if records.is_empty() {
        return Err("no measurement succeeded".into());
    }
    Ok(())
}

fn compare_run(reg: &Registry, c: &Common, cfg: &compare::Config) -> Result<(), String> {
    let plan = compare::Plan::new(reg, cfg);
    let pb = progress(plan.len(), c.json);
    let report = plan.run(&mut |what| {
        pb.inc(1);
        pb.set_message(what.to_owned());
    });
    pb.finish_and_clear();
    if c.json {
        for r in &report.records {
            println!("{}", r.to_json());
        }
        for n in &report.notes {
            tracing::warn!("{n}");
        }
    } else {
        print!("{}", report.render());
    }
    if let Some(p) = &c.plot {
        plot::plot(&report.records, p, "datperf compare").map_err(|e| e.to_string())?;
        if !c.json {
            println!("plot written to {}", p.display());
        }
    }
    Ok(())
}
