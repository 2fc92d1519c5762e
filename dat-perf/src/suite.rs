//! A list of DAT measurements run on one session, in order, with per-point outcomes.

use crate::client::Client;
use crate::error::{PerfError, PerfResult};
use crate::proto::Test;
use crate::record::Record;
use crate::sizes::{bw_count, format_size, lat_iters};

/// One DAT measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Job {
    /// A latency or bandwidth test at a size.
    Dat(Test, u64),
    /// Connection rate with this many bytes of private data.
    Conn(u32),
}

impl Job {
    /// A short name for progress messages: `send-recv 4K`.
    pub fn describe(&self) -> String {
        match *self {
            Job::Dat(t, s) => {
                let (op, metric) = t.kind();
                format!("{op} {} {}", metric_word(metric), format_size(s))
            }
            Job::Conn(p) => format!("connect {p}B"),
        }
    }
}

fn metric_word(m: crate::record::Metric) -> &'static str {
    match m {
        crate::record::Metric::Latency => "lat",
        crate::record::Metric::Bandwidth => "bw",
        crate::record::Metric::ConnRate => "rate",
    }
}

/// Every test at every size, size by size (so a long run shows all tests early).
pub fn jobs(tests: &[Test], sizes: &[u64]) -> Vec<Job> {
    sizes
        .iter()
        .flat_map(|&s| tests.iter().map(move |&t| Job::Dat(t, s)))
        .collect()
}

/// How many operations each job gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Ping-pong round trips up to 64 KiB (scaled down above).
    pub lat_iters: u64,
    /// Bytes per streaming figure.
    pub bw_bytes: u64,
    /// Connections per connection-rate figure.
    pub conn_iters: u64,
}

impl Default for Counts {
    fn default() -> Counts {
        Counts {
            lat_iters: 2000,
            bw_bytes: 256 << 20,
            conn_iters: 200,
        }
    }
}

/// Runs one job.
///
/// # Errors
/// As [`Client::measure`] and [`Client::conn_rate`].
pub fn run_job(client: &mut Client, job: Job, counts: Counts) -> PerfResult<Record> {
    match job {
        Job::Dat(t @ (Test::LatSend | Test::LatWrite), s) => {
            client.measure(t, s, lat_iters(s, counts.lat_iters))
        }
        Job::Dat(t, s) => client.measure(t, s, bw_count(s, counts.bw_bytes)),
        Job::Conn(p) => client.conn_rate(p, counts.conn_iters),
    }
}

/// Runs `jobs` in order, calling `each` after every job. A job the IA cannot run is noted and
/// skipped; any other failure breaks the session, and the rest are noted as not run.
/// Returns the records and the notes.
pub fn run(
    client: &mut Client,
    jobs: &[Job],
    counts: Counts,
    each: &mut dyn FnMut(&Job, &PerfResult<Record>),
) -> (Vec<Record>, Vec<String>) {
    let mut records = Vec::new();
    let mut notes = Vec::new();
    let ia = client.side().ia.name().to_owned();
    for (i, &job) in jobs.iter().enumerate() {
        let r = run_job(client, job, counts);
        each(&job, &r);
        match r {
            Ok(rec) => records.push(rec),
            Err(e @ PerfError::Unsupported(_)) => {
                notes.push(format!("{ia} {}: skipped: {e}", job.describe()));
            }
            Err(e) => {
                notes.push(format!("{ia} {}: failed: {e}", job.describe()));
                if i + 1 < jobs.len() {
                    notes.push(format!(
                        "{ia}: the session broke; {} more measurements not run",
                        jobs.len() - i - 1
                    ));
                }
                break;
            }
        }
    }
    (records, notes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_are_size_major_and_described() {
        let j = jobs(&[Test::LatSend, Test::BwRead], &[1, 4096]);
        assert_eq!(
            j,
            vec![
                Job::Dat(Test::LatSend, 1),
                Job::Dat(Test::BwRead, 1),
                Job::Dat(Test::LatSend, 4096),
                Job::Dat(Test::BwRead, 4096),
            ]
        );
        assert_eq!(j[3].describe(), "rdma-read bw 4K");
        assert_eq!(Job::Conn(64).describe(), "connect 64B");
    }
}
