//! The `datperf` binary as a user runs it: real processes, loopback only, every run bounded.
//! The tcp and shm providers are compiled in (`dat`'s default features); the IA `nowhere`
//! names a verbs device that does not exist, for the error paths.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const REGISTRY: &str = r#"
version = 1
default = "tcp-lo"

[[ia]]
name = "tcp-lo"
provider = "tcp"
params = { address = "127.0.0.1" }

[[ia]]
name = "shm0"
provider = "shm"

[[ia]]
name = "nowhere"
provider = "verbs"
params = { device = "no_such_device0" }
"#;

/// A scratch directory with a registry file, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("datperf-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("dat.toml"), REGISTRY).unwrap();
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn datperf(dir: &Scratch, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_datperf"));
    c.args(args)
        .env("DAT_CONF", dir.0.join("dat.toml"))
        .env_remove("DAT_IA")
        .env("HOME", &dir.0)
        .env("XDG_CONFIG_HOME", &dir.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Waits for `child` at most `limit`, killing it then.
fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn run(dir: &Scratch, args: &[&str]) -> Output {
    finish(
        datperf(dir, args).spawn().unwrap(),
        Duration::from_secs(120),
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn info_lists_the_ias_and_their_providers() {
    let dir = Scratch::new("info");
    let out = run(&dir, &["info"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("default IA: tcp-lo\n"), "{s}");
    let compiled = s
        .lines()
        .find(|l| l.starts_with("providers compiled in: "))
        .unwrap_or_default();
    assert!(compiled.contains("tcp") && compiled.contains("shm"), "{s}");
    assert!(s.contains("ia: tcp-lo\n    provider: tcp\n"), "{s}");
    assert!(s.contains("ia: shm0\n    provider: shm\n"), "{s}");
    assert!(s.contains("ia: nowhere\n    provider: verbs\n"), "{s}");
}

#[test]
fn default_run_measures_the_default_ia() {
    let dir = Scratch::new("default");
    let out = run(&dir, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("tcp-lo"), "{s}");
    assert!(s.contains("latency") && s.contains("bandwidth"), "{s}");
}

#[test]
fn an_ia_that_cannot_open_is_explained() {
    let dir = Scratch::new("missing");
    let out = run(&dir, &["lat", "--ia", "nowhere", "--sizes", "64"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(
        e.starts_with("datperf: cannot measure: ") && e.contains("nowhere"),
        "{e}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_sizes_are_refused() {
    let dir = Scratch::new("sizes");
    let out = run(&dir, &["lat", "--sizes", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("sizes start at 1 byte"));
}

#[test]
fn server_and_client_processes_measure_over_tcp() {
    let dir = Scratch::new("remote");
    let port = {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let mut server = datperf(&dir, &["server", "--once", "--port", &port])
        .spawn()
        .unwrap();
    // The server prints its control address once it listens: the client starts after that
    // line (a fixed pause was too short for a loaded machine, where the client then found
    // nobody listening). Bounded: a reader thread hands the line over.
    let first = {
        let out = server.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(out);
            let mut line = String::new();
            let _ = std::io::BufRead::read_line(&mut r, &mut line);
            let mut rest = String::new();
            let _ = tx.send(line);
            let _ = std::io::Read::read_to_string(&mut r, &mut rest);
        });
        rx.recv_timeout(Duration::from_secs(60))
            .expect("the server prints its control address")
    };
    assert!(
        first.starts_with(&format!(
            "datperf server: control socket on 127.0.0.1:{port} "
        )),
        "{first}"
    );
    let client = run(
        &dir,
        &[
            "client",
            "127.0.0.1",
            "--port",
            &port,
            "--timeout-s",
            "30",
            "--tests",
            "lat",
            "--sizes",
            "64",
            "--iters",
            "200",
        ],
    );
    let server = finish(server, Duration::from_secs(60));
    assert!(client.status.success(), "{}", text(&client.stderr));
    assert!(
        text(&client.stdout).contains("64"),
        "{}",
        text(&client.stdout)
    );
    assert!(server.status.success(), "{}", text(&server.stderr));
}

#[test]
fn short_compare_prints_json_and_plots() {
    let dir = Scratch::new("compare");
    let png = dir.0.join("cmp.png");
    let out = run(
        &dir,
        &[
            "compare",
            "--short",
            "--no-libfabric",
            "--json",
            "--plot",
            png.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut series = std::collections::BTreeSet::new();
    for line in stdout.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("one JSON object per line");
        assert!(v["value"].as_f64().is_some_and(|x| x > 0.0), "{line}");
        assert!(v["size"] == 64 || v["size"] == 65536, "{line}");
        series.insert(v["series"].as_str().unwrap().to_owned());
    }
    for baseline in [
        "memcpy",
        "raw-shm-spin",
        "raw-tcp",
        "raw-tcp-block",
        "raw-tcp-spin",
    ] {
        assert!(
            series.contains(baseline),
            "{baseline} missing from {series:?}"
        );
    }
    assert!(
        series.iter().any(|s| s.starts_with("tcp-lo")),
        "the tcp-lo IA is measured: {series:?}"
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
}
