//! One measured figure ([`Record`]), its JSON form and the human tables.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Serialize};

use crate::sizes::format_size;

/// What a figure measures, and so its unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Half round trip (one-way latency) in microseconds, as fi_pingpong's `usec/xfer`.
    Latency,
    /// Throughput in MB/s (10^6 bytes per second).
    Bandwidth,
    /// Connections set up and torn down per second.
    ConnRate,
}

impl Metric {
    /// The unit of [`Record::value`].
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Latency => "us",
            Metric::Bandwidth => "MB/s",
            Metric::ConnRate => "conn/s",
        }
    }

    /// True when a larger value is better.
    pub fn higher_is_better(self) -> bool {
        !matches!(self, Metric::Latency)
    }

    fn title(self) -> &'static str {
        match self {
            Metric::Latency => "latency, half round trip (us)",
            Metric::Bandwidth => "bandwidth (MB/s)",
            Metric::ConnRate => "connection setup + teardown rate (conn/s; size = private data)",
        }
    }
}

/// The operation measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// DAT send/receive ping-pong.
    SendRecv,
    /// DAT RDMA write (ping-pong polling memory, or a stream of writes).
    RdmaWrite,
    /// DAT RDMA read stream.
    RdmaRead,
    /// DAT streaming send into a window of receives.
    Send,
    /// DAT connection setup with private data, then teardown.
    Connect,
    /// A baseline ping-pong (socket, shared memory, libfabric).
    PingPong,
    /// A baseline one-way stream.
    Stream,
    /// A memcpy of the size.
    Copy,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::SendRecv => "send-recv",
            Op::RdmaWrite => "rdma-write",
            Op::RdmaRead => "rdma-read",
            Op::Send => "send",
            Op::Connect => "connect",
            Op::PingPong => "ping-pong",
            Op::Stream => "stream",
            Op::Copy => "copy",
        })
    }
}

/// One measured figure. Serialized as one JSON object per line with `--json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// What was measured: an IA name (`tcp-lo`) or a baseline (`raw-tcp-spin`, `fi-tcp`).
    pub series: String,
    /// The IA's provider, or `baseline`.
    pub provider: String,
    /// The operation.
    pub op: Op,
    /// What the value measures.
    pub metric: Metric,
    /// Message size in bytes (private-data bytes for [`Op::Connect`]).
    pub size: u64,
    /// Iterations (messages, round trips, connections) that were timed.
    pub iters: u64,
    /// The figure, in [`Metric::unit`].
    pub value: f64,
    /// The unit of `value`.
    pub unit: String,
    /// `poll` (dequeue loop / spinning) or `wait` (blocking waits).
    pub mode: String,
}

impl Record {
    /// A record with `unit` filled in from `metric`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        series: &str,
        provider: &str,
        op: Op,
        metric: Metric,
        size: u64,
        iters: u64,
        value: f64,
        mode: &str,
    ) -> Record {
        Record {
            series: series.to_owned(),
            provider: provider.to_owned(),
            op,
            metric,
            size,
            iters,
            value,
            unit: metric.unit().to_owned(),
            mode: mode.to_owned(),
        }
    }

    /// The column label: series and operation.
    pub fn label(&self) -> String {
        format!("{} {}", self.series, self.op)
    }

    /// One JSON object (no newline).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// One record per series, operation, metric and size (in order of first appearance): the
/// median value of the repeats, with their iterations added up.
pub fn medians(records: &[Record]) -> Vec<Record> {
    let key = |r: &Record| (r.series.clone(), r.op, r.metric, r.size);
    let mut out: Vec<Record> = Vec::new();
    for r in records {
        if out.iter().any(|o| key(o) == key(r)) {
            continue;
        }
        let same: Vec<&Record> = records.iter().filter(|o| key(o) == key(r)).collect();
        let mut values: Vec<f64> = same.iter().map(|o| o.value).collect();
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        let mut m = r.clone();
        m.value = median;
        m.iters = same.iter().map(|o| o.iters).sum();
        out.push(m);
    }
    out
}

/// A figure in a width that suits its magnitude.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else if v < 1000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// How a cell of a table is written: the value, and optionally a ratio to a baseline.
pub type Annotate<'a> = &'a dyn Fn(&Record) -> Option<f64>;

/// Tables for people: one per metric, a row per size, a column per series and operation
/// (in order of first appearance). With `ratio`, each cell also shows `(xR)`.
pub fn tables(records: &[Record], ratio: Option<Annotate<'_>>) -> String {
    let mut out = String::new();
    let metrics: BTreeSet<Metric> = records.iter().map(|r| r.metric).collect();
    for metric in metrics {
        let rows: Vec<&Record> = records.iter().filter(|r| r.metric == metric).collect();
        let mut cols: Vec<String> = Vec::new();
        for r in &rows {
            let l = r.label();
            if !cols.contains(&l) {
                cols.push(l);
            }
        }
        let sizes: BTreeSet<u64> = rows.iter().map(|r| r.size).collect();
        let cell = |size: u64, col: &str| -> String {
            match rows.iter().find(|r| r.size == size && r.label() == col) {
                None => "-".into(),
                Some(r) => match ratio.and_then(|f| f(r)) {
                    Some(x) => format!("{} (x{x:.2})", format_value(r.value)),
                    None => format_value(r.value),
                },
            }
        };
        let mut widths: Vec<usize> = cols.iter().map(String::len).collect();
        for &s in &sizes {
            for (i, c) in cols.iter().enumerate() {
                widths[i] = widths[i].max(cell(s, c).len());
            }
        }
        let _ = writeln!(out, "{}", metric.title());
        let _ = write!(out, "{:>6}", "size");
        for (c, w) in cols.iter().zip(&widths) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
        for &s in &sizes {
            let _ = write!(out, "{:>6}", format_size(s));
            for (c, w) in cols.iter().zip(&widths) {
                let _ = write!(out, "  {:>w$}", cell(s, c));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(series: &str, op: Op, metric: Metric, size: u64, value: f64) -> Record {
        Record::new(series, "baseline", op, metric, size, 10, value, "poll")
    }

    #[test]
    fn json_is_one_object_with_kebab_names() {
        let r = rec("raw-tcp-spin", Op::PingPong, Metric::Latency, 64, 5.5);
        let j = r.to_json();
        assert_eq!(
            j,
            "{\"series\":\"raw-tcp-spin\",\"provider\":\"baseline\",\"op\":\"ping-pong\",\
             \"metric\":\"latency\",\"size\":64,\"iters\":10,\"value\":5.5,\"unit\":\"us\",\
             \"mode\":\"poll\"}"
        );
        let back: Record = serde_json::from_str(&j).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn medians_of_repeats() {
        let rs = vec![
            rec("a", Op::PingPong, Metric::Latency, 1, 9.0),
            rec("b", Op::PingPong, Metric::Latency, 1, 5.0),
            rec("a", Op::PingPong, Metric::Latency, 1, 1.0),
            rec("a", Op::PingPong, Metric::Latency, 1, 2.0),
            rec("b", Op::PingPong, Metric::Latency, 1, 7.0),
        ];
        let m = medians(&rs);
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].series.as_str(), m[0].value, m[0].iters),
            ("a", 2.0, 30)
        );
        assert_eq!(
            (m[1].series.as_str(), m[1].value, m[1].iters),
            ("b", 6.0, 20)
        );
    }

    #[test]
    fn tables_group_by_metric_with_ratios() {
        let rs = vec![
            rec("a", Op::PingPong, Metric::Latency, 1, 2.0),
            rec("b", Op::PingPong, Metric::Latency, 1, 4.0),
            rec("a", Op::PingPong, Metric::Latency, 4096, 1234.5),
            rec("a", Op::Stream, Metric::Bandwidth, 4096, 99.0),
        ];
        let t = tables(&rs, None);
        assert_eq!(
            t,
            concat!(
                "latency, half round trip (us)\n",
                "  size  a ping-pong  b ping-pong\n",
                "     1         2.00         4.00\n",
                "    4K         1234            -\n",
                "\n",
                "bandwidth (MB/s)\n",
                "  size  a stream\n",
                "    4K      99.0\n",
                "\n"
            )
        );
        let ratio = |r: &Record| (r.series == "b").then_some(2.0);
        let t = tables(&rs, Some(&ratio));
        assert!(t.contains("4.00 (x2.00)"), "{t}");
        assert_eq!(format_value(f64::NAN), "-");
    }
}
