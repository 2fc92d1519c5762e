//! `datperf compare`: in one run, size by size, every IA of the configuration that opens here
//! and every baseline, interleaved so that a change in machine load hits all series alike.
//! Each figure is printed with its ratio to its baseline: latency and bandwidth of a
//! TCP-like IA against raw TCP (spinning ping-pong, blocking stream), of a shared-memory IA
//! against the raw shared-memory spin ping-pong and memcpy.

use std::fmt::Write as _;
use std::time::Duration;

use dat::Registry;

use crate::baseline::{self, libfabric, series};
use crate::client::RunOpts;
use crate::local::{self, LocalPair, Pairing};
use crate::proto::Test;
use crate::record::{Metric, Op, Record, medians, tables};
use crate::side::Mode;
use crate::sizes::{bw_count, lat_iters};
use crate::suite::{Counts, Job, run_job};
use crate::{PerfError, PerfResult};

/// What a compare run covers.
#[derive(Clone, Debug)]
pub struct Config {
    /// Sizes, each measured for every series before the next size.
    pub sizes: Vec<u64>,
    /// Time per figure.
    pub budget: Duration,
    /// Operation counts.
    pub counts: Counts,
    /// Polling or waiting (DAT series).
    pub mode: Mode,
    /// Window of the bandwidth tests.
    pub window: u32,
    /// Longest wait for one event.
    pub timeout: Duration,
    /// Run libfabric's `fi_pingpong` (an external program) when it is installed.
    pub external: bool,
    /// Only these IAs (default: every IA of the configuration).
    pub ias: Option<Vec<String>>,
    /// The IA of the server ends (default: the IA measured).
    pub server_ia: Option<String>,
    /// Times the whole interleaved sequence runs; each figure is the median of its rounds.
    pub rounds: u32,
    /// How the two ends of each IA's pair get their IAs.
    pub pairing: Pairing,
    /// Only the steps whose description contains one of these (default, empty: every step).
    /// The IAs are opened all the same, so that a series can be measured next to the
    /// threads of IAs that run nothing (to find which earlier series slows a later one).
    pub only: Vec<String>,
}

impl Config {
    /// The full run (by hand; a few minutes): 1 B .. 4 MiB, one second per figure.
    pub fn full() -> Config {
        Config {
            sizes: vec![1, 64, 1024, 4096, 65536, 1 << 20, 4 << 20],
            budget: Duration::from_millis(1000),
            counts: Counts::default(),
            mode: Mode::Poll,
            window: 64,
            timeout: Duration::from_secs(10),
            external: true,
            ias: None,
            server_ia: None,
            rounds: 3,
            pairing: Pairing::TwoIas,
            only: Vec::new(),
        }
    }

    /// The smoke run for CI: two sizes, few iterations, seconds in all.
    pub fn short() -> Config {
        Config {
            sizes: vec![64, 65536],
            budget: Duration::from_millis(30),
            counts: Counts {
                lat_iters: 200,
                bw_bytes: 4 << 20,
                conn_iters: 10,
            },
            rounds: 1,
            ..Config::full()
        }
    }
}

/// The DAT tests each IA runs at each size.
pub const IA_TESTS: [Test; 5] = [
    Test::LatSend,
    Test::LatWrite,
    Test::BwSend,
    Test::BwWrite,
    Test::BwRead,
];

/// The baseline measurements at each size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Base {
    /// [`baseline::tcp::pingpong`], spinning.
    TcpSpin,
    /// [`baseline::tcp::pingpong`], blocking.
    TcpBlock,
    /// [`baseline::tcp::stream`].
    TcpStream,
    /// [`baseline::shm::pingpong`].
    ShmSpin,
    /// [`baseline::memcpy::copy`].
    Memcpy,
    /// [`libfabric::pingpong`] with provider tcp.
    FiTcp,
    /// [`libfabric::pingpong`] with provider shm.
    FiShm,
}

impl Base {
    fn name(self) -> &'static str {
        match self {
            Base::TcpSpin => series::TCP_SPIN,
            Base::TcpBlock => series::TCP_BLOCK,
            Base::TcpStream => series::TCP_STREAM,
            Base::ShmSpin => series::SHM_SPIN,
            Base::Memcpy => series::MEMCPY,
            Base::FiTcp => series::FI_TCP,
            Base::FiShm => series::FI_SHM,
        }
    }

    fn run(self, size: u64, cfg: &Config) -> PerfResult<Vec<Record>> {
        let lat = lat_iters(size, cfg.counts.lat_iters);
        let bw = bw_count(size, cfg.counts.bw_bytes);
        let (b, t) = (cfg.budget, cfg.timeout);
        Ok(match self {
            Base::TcpSpin => vec![baseline::tcp::pingpong(size, lat, b, true, t)?],
            Base::TcpBlock => vec![baseline::tcp::pingpong(size, lat, b, false, t)?],
            Base::TcpStream => vec![baseline::tcp::stream(size, bw, b, t)?],
            Base::ShmSpin => vec![baseline::shm::pingpong(size, lat, b, t)?],
            Base::Memcpy => vec![baseline::memcpy::copy(size, bw, b)?],
            Base::FiTcp | Base::FiShm => {
                let p = if self == Base::FiTcp { "tcp" } else { "shm" };
                let (l, w) = libfabric::pingpong(p, size, lat, t)?;
                vec![l, w]
            }
        })
    }
}

/// The series and operation a record is judged against, if any.
pub fn baseline_of(r: &Record) -> Option<(&'static str, Op)> {
    let shm_like = r.provider == "shm" || r.series == series::FI_SHM;
    match r.metric {
        Metric::Latency => match r.series.as_str() {
            series::TCP_SPIN | series::SHM_SPIN => None,
            _ if shm_like => Some((series::SHM_SPIN, Op::PingPong)),
            _ => Some((series::TCP_SPIN, Op::PingPong)),
        },
        Metric::Bandwidth => match r.series.as_str() {
            series::TCP_STREAM | series::MEMCPY => None,
            _ if shm_like => Some((series::MEMCPY, Op::Copy)),
            _ => Some((series::TCP_STREAM, Op::Stream)),
        },
        Metric::ConnRate => None,
    }
}

/// A compare run with its IAs opened.
#[derive(Debug)]
pub struct Plan {
    cfg: Config,
    pairs: Vec<(String, Option<LocalPair>)>,
    bases: Vec<Base>,
    notes: Vec<String>,
}

/// What a compare run found.
#[derive(Debug, Default)]
pub struct Report {
    /// Every figure, in the order measured.
    pub records: Vec<Record>,
    /// Skipped series and failures.
    pub notes: Vec<String>,
    /// The machine it ran on.
    pub machine: String,
    /// CPUs kept busy by other work during the run, on average (machine busy time from
    /// `/proc/stat` less this process's and its children's), when known. Other work skews
    /// every figure, busy-polling ones most.
    pub background_cpus: Option<f64>,
}

impl Report {
    /// The ratio of `r` to its baseline at the same size, if both were measured.
    pub fn ratio(&self, r: &Record) -> Option<f64> {
        let (s, op) = baseline_of(r)?;
        let b = self
            .records
            .iter()
            .find(|b| b.series == s && b.op == op && b.metric == r.metric && b.size == r.size)?;
        (b.value > 0.0).then(|| r.value / b.value)
    }

    /// The machine, the tables with ratios, the key to the ratios and the notes.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "machine: {}", self.machine);
        match self.background_cpus {
            Some(b) => {
                let _ = writeln!(
                    out,
                    "other work on this machine during the run: {b:.2} CPUs busy on average\n"
                );
            }
            None => out.push('\n'),
        }
        out.push_str(&tables(&self.records, Some(&|r: &Record| self.ratio(r))));
        out.push_str(
            "(xR) = ratio to the baseline at the same size. Latency: TCP-like series against \
             raw-tcp-spin ping-pong, shared-memory series against raw-shm-spin (above 1 = \
             slower). Bandwidth: against raw-tcp stream, or memcpy for shared memory (below 1 \
             = slower). fi-* bandwidth is fi_pingpong's ping-pong MB/s.\n",
        );
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        out
    }
}

/// CPU seconds used so far: by the whole machine (busy time in `/proc/stat`) and by this
/// process with its waited-for children (`getrusage`).
fn cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return None;
    }
    let mut ours = 0.0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: an all-zero rusage is a valid value of this plain C struct.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `ru` is a valid out pointer for the duration of the call.
        if unsafe { libc::getrusage(who, &mut ru) } != 0 {
            return None;
        }
        for tv in [ru.ru_utime, ru.ru_stime] {
            ours += tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        }
    }
    Some((busy as f64 / hz as f64, ours))
}

/// True if the step described `what` runs ([`Config::only`]).
fn selected(only: &[String], what: &str) -> bool {
    only.is_empty() || only.iter().any(|p| what.contains(p.as_str()))
}

/// One line about this machine: CPU model, CPUs, memory, kernel.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or_else(|| "?".into(), |kb| format!("{} GiB", kb / (1 << 20)));
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "?".into());
    format!("{cpu}, {cpus} CPUs, {mem} RAM, Linux {kernel}")
}

impl Plan {
    /// Opens every IA of `cfg` (or of the configuration) as an in-process pair; those that do
    /// not open are noted (for example: provider not compiled in).
    pub fn new(reg: &Registry, cfg: &Config) -> Plan {
        let names: Vec<String> = match &cfg.ias {
            Some(v) => v.clone(),
            None => reg.config().ias.iter().map(|e| e.name.clone()).collect(),
        };
        let max_size = cfg.sizes.iter().copied().max().unwrap_or(64);
        let opts = RunOpts {
            window: cfg.window,
            budget: cfg.budget,
            timeout: cfg.timeout,
        };
        let mut pairs = Vec::new();
        let mut notes = Vec::new();
        for name in names {
            let server = cfg.server_ia.as_deref().unwrap_or(&name);
            match local::start(
                reg,
                Some(server),
                Some(&name),
                max_size,
                cfg.mode,
                cfg.pairing,
                &opts,
            ) {
                Ok(p) => pairs.push((name, Some(p))),
                Err(e) => notes.push(format!("IA {name}: not measured: {e}")),
            }
        }
        let mut bases = vec![
            Base::TcpSpin,
            Base::TcpBlock,
            Base::TcpStream,
            Base::ShmSpin,
            Base::Memcpy,
        ];
        if cfg.external {
            if libfabric::find().is_some() {
                bases.extend([Base::FiTcp, Base::FiShm]);
            } else {
                notes.push(format!(
                    "fi-tcp, fi-shm: not measured: {} is not installed (Debian package \
                     libfabric-bin)",
                    libfabric::PROGRAM
                ));
            }
        }
        Plan {
            cfg: cfg.clone(),
            pairs,
            bases,
            notes,
        }
    }

    /// Steps [`Plan::run`] reports progress for.
    pub fn len(&self) -> usize {
        self.cfg.rounds.max(1) as usize
            * self.cfg.sizes.len()
            * (self.pairs.len() * IA_TESTS.len() + self.bases.len())
    }

    /// True when there is nothing to run.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs everything, size by size, [`Config::rounds`] times, calling `each` with a
    /// description after every step; each figure is the median of its rounds. Failures become
    /// notes; an IA whose session breaks is measured no further.
    pub fn run(mut self, each: &mut dyn FnMut(&str)) -> Report {
        let cpu_start = cpu_seconds();
        let wall = std::time::Instant::now();
        let mut report = Report {
            machine: machine(),
            notes: std::mem::take(&mut self.notes),
            ..Report::default()
        };
        let sizes: Vec<u64> = (0..self.cfg.rounds.max(1))
            .flat_map(|_| self.cfg.sizes.iter().copied())
            .collect();
        for size in sizes {
            for (name, slot) in &mut self.pairs {
                for test in IA_TESTS {
                    let job = Job::Dat(test, size);
                    let what = format!("{name} {}", job.describe());
                    let chosen = selected(&self.cfg.only, &what);
                    let Some(pair) = slot.as_mut().filter(|_| chosen) else {
                        each(&what);
                        continue;
                    };
                    let r = pair.client().and_then(|c| run_job(c, job, self.cfg.counts));
                    match r {
                        Ok(rec) => report.records.push(rec),
                        Err(e @ PerfError::Unsupported(_)) => {
                            report.notes.push(format!("{what}: skipped: {e}"));
                        }
                        Err(e) => {
                            report
                                .notes
                                .push(format!("{what}: failed, IA dropped from the run: {e}"));
                            *slot = None;
                        }
                    }
                    each(&what);
                }
            }
            for &b in &self.bases {
                let what = format!("{} {}", b.name(), crate::sizes::format_size(size));
                if !selected(&self.cfg.only, &what) {
                    each(&what);
                    continue;
                }
                match b.run(size, &self.cfg) {
                    Ok(rs) => report.records.extend(rs),
                    Err(e) => report.notes.push(format!("{what}: {e}")),
                }
                each(&what);
            }
        }
        for (name, slot) in self.pairs {
            if let Some(p) = slot
                && let Err(e) = p.close()
            {
                tracing::warn!("closing IA {name}: {e}");
            }
        }
        if let (Some((b0, o0)), Some((b1, o1))) = (cpu_start, cpu_seconds()) {
            let secs = wall.elapsed().as_secs_f64();
            if secs > 0.0 {
                report.background_cpus = Some(((b1 - b0) - (o1 - o0)).max(0.0) / secs);
            }
        }
        report.records = medians(&report.records);
        let mut seen = std::collections::HashSet::new();
        report.notes.retain(|n| seen.insert(n.clone()));
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_compare_runs_ias_and_baselines() {
        let reg = crate::testutil::registry();
        let cfg = Config {
            external: false,
            ias: Some(vec!["b".into(), "tcp-lo".into()]),
            server_ia: Some("a".into()),
            ..Config::short()
        };
        let plan = Plan::new(&reg, &cfg);
        assert_eq!(
            plan.len(),
            2 * (5 + 5),
            "two sizes x (one IA x 5 tests + 5 baselines)"
        );
        let mut steps = 0;
        let report = plan.run(&mut |_| steps += 1);
        assert_eq!(steps, 20);
        // Every IA test and baseline at both sizes (memcpy, stream: bandwidth).
        assert_eq!(report.records.len(), 20, "{:?}", report.notes);
        assert_eq!(
            report.notes.len(),
            1,
            "only tcp-lo is noted: {:?}",
            report.notes
        );
        assert!(report.notes[0].contains("IA tcp-lo: not measured"));
        for size in [64, 65536] {
            let lat = report
                .records
                .iter()
                .find(|r| r.series == "b" && r.op == Op::SendRecv && r.size == size)
                .unwrap();
            assert_eq!(baseline_of(lat), Some((series::TCP_SPIN, Op::PingPong)));
            assert!(report.ratio(lat).is_some_and(|x| x > 0.0));
            let spin = report
                .records
                .iter()
                .find(|r| r.series == series::TCP_SPIN && r.size == size)
                .unwrap();
            assert_eq!(report.ratio(spin), None);
        }
        let text = report.render();
        assert!(text.starts_with("machine: "), "{text}");
        assert!(
            text.contains("\nother work on this machine during the run: "),
            "{text}"
        );
        assert!(
            report
                .background_cpus
                .is_some_and(|b| (0.0..=64.0).contains(&b))
        );
        assert!(text.contains("b send-recv"), "{text}");
        assert!(text.contains("raw-shm-spin ping-pong"), "{text}");
        assert!(text.contains("(x"), "{text}");
        assert!(text.contains("note: IA tcp-lo: not measured"), "{text}");
    }

    #[test]
    fn only_runs_the_chosen_steps_with_every_ia_open() {
        let reg = crate::testutil::registry();
        let cfg = Config {
            external: false,
            ias: Some(vec!["b".into()]),
            server_ia: Some("a".into()),
            sizes: vec![64],
            only: vec!["b send-recv lat".into(), "raw-tcp-spin".into()],
            ..Config::short()
        };
        let plan = Plan::new(&reg, &cfg);
        assert_eq!(
            plan.len(),
            5 + 5,
            "every step still counts for the progress bar"
        );
        let mut steps = Vec::new();
        let report = plan.run(&mut |w| steps.push(w.to_owned()));
        assert_eq!(steps.len(), 10);
        assert!(
            steps.contains(&"b send-recv lat 64".to_owned()),
            "{steps:?}"
        );
        let got: Vec<(&str, Op)> = report
            .records
            .iter()
            .map(|r| (r.series.as_str(), r.op))
            .collect();
        assert_eq!(
            got,
            [("b", Op::SendRecv), (series::TCP_SPIN, Op::PingPong)],
            "{:?}",
            report.notes
        );
        assert!(report.notes.is_empty(), "{:?}", report.notes);
    }

    #[test]
    fn baselines_of_each_kind() {
        let r = |series: &str, provider: &str, metric| {
            Record::new(series, provider, Op::PingPong, metric, 1, 1, 1.0, "poll")
        };
        assert_eq!(
            baseline_of(&r("shm0", "shm", Metric::Latency)),
            Some((series::SHM_SPIN, Op::PingPong))
        );
        assert_eq!(
            baseline_of(&r("shm0", "shm", Metric::Bandwidth)),
            Some((series::MEMCPY, Op::Copy))
        );
        assert_eq!(
            baseline_of(&r("fi-tcp", "libfabric", Metric::Bandwidth)),
            Some((series::TCP_STREAM, Op::Stream))
        );
        assert_eq!(
            baseline_of(&r("raw-tcp-block", "baseline", Metric::Latency)),
            Some((series::TCP_SPIN, Op::PingPong))
        );
        assert_eq!(
            baseline_of(&r("memcpy", "baseline", Metric::Bandwidth)),
            None
        );
        assert_eq!(baseline_of(&r("x", "tcp", Metric::ConnRate)), None);
    }
}
