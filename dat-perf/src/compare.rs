//! `datperf compare` (in progress).

use std::time::Duration;

use dat::Registry;

use crate::record::{Record, tables};
use crate::side::Mode;
use crate::suite::Counts;

/// What a compare run covers.
#[derive(Clone, Debug)]
pub struct Config {
    /// Sizes, measured in this order for every series.
    pub sizes: Vec<u64>,
    /// Time per figure.
    pub budget: Duration,
    /// Operation counts.
    pub counts: Counts,
    /// Polling or waiting.
    pub mode: Mode,
    /// Window of the bandwidth tests.
    pub window: u32,
    /// Longest wait for one event.
    pub timeout: Duration,
    /// Run the baselines that need a second process or external tools.
    pub external: bool,
    /// Only these IAs (default: every IA of the configuration).
    pub ias: Option<Vec<String>>,
}

impl Config {
    /// The full run.
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
        }
    }

    /// The smoke run.
    pub fn short() -> Config {
        Config {
            sizes: vec![64, 65536],
            budget: Duration::from_millis(50),
            ..Config::full()
        }
    }
}

/// A planned compare run.
#[derive(Debug)]
pub struct Plan<'a> {
    _reg: &'a Registry,
    _cfg: Config,
}

/// The outcome.
#[derive(Debug, Default)]
pub struct Report {
    /// Every figure.
    pub records: Vec<Record>,
    /// Skips and failures.
    pub notes: Vec<String>,
}

impl Report {
    /// Tables for people.
    pub fn render(&self) -> String {
        tables(&self.records, None)
    }
}

impl<'a> Plan<'a> {
    /// Plans a run.
    pub fn new(reg: &'a Registry, cfg: &Config) -> Plan<'a> {
        Plan {
            _reg: reg,
            _cfg: cfg.clone(),
        }
    }

    /// Steps.
    pub fn len(&self) -> usize {
        0
    }

    /// True without steps.
    pub fn is_empty(&self) -> bool {
        true
    }

    /// Runs.
    pub fn run(&self, _each: &mut dyn FnMut(&str)) -> Report {
        Report::default()
    }
}
