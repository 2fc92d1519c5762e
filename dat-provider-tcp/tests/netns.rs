//! Between two network namespaces: the test creates two namespaces joined by a veth pair
//! (10.213.0.1/24 and 10.213.0.2/24, addresses that exist only inside them), writes a registry
//! for each side, and runs the test binary itself in each namespace with `ip netns exec`: the
//! passive side listens on 10.213.0.2, the active side connects from 10.213.0.1 with private
//! data, and they exchange sends, an RDMA write and an RDMA read, then disconnect. The
//! namespaces (and with them the veth pair) are deleted at the end, also on failure.
//!
//! Needs root and `ip`; otherwise the test is skipped with the reason.

mod common;

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dat::types::{
    CloseFlags, CompletionFlags, ConnQual, Cookie, DtoOp, EventNumber, Qos, RmrTriplet,
};
use dat::{ConnectFlags, Registry};

/// Selects the role of a child: `passive` or `active`.
const ROLE_ENV: &str = "DAT_TCP_NETNS_ROLE";
/// Passive: where to write the qualifier. Active: the qualifier to connect to.
const QUAL_ENV: &str = "DAT_TCP_NETNS_QUAL";
const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 1);
const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 213, 0, 2);
const PD_A: &[u8] = b"hello across the veth link";
const REGION: usize = 4096;
const PIECE: u32 = 1024;
/// Bound on the whole exchange as the parent sees it.
const CHILD_LIMIT: Duration = Duration::from_secs(60);

fn encode(t: RmrTriplet) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&t.virtual_address.to_le_bytes());
    v.extend_from_slice(&t.segment_length.to_le_bytes());
    v.extend_from_slice(&t.rmr_context.to_le_bytes());
    v
}

fn decode(b: &[u8]) -> RmrTriplet {
    assert_eq!(b.len(), 16, "private data of the accept");
    RmrTriplet {
        virtual_address: u64::from_le_bytes(b[0..8].try_into().unwrap()),
        segment_length: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        rmr_context: u32::from_le_bytes(b[12..16].try_into().unwrap()),
    }
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

/// The IA named `veth` of the registry file `$DAT_CONF` (written by the parent).
fn open_from_registry_file() -> Node {
    let reg = Registry::from_env().expect("registry from $DAT_CONF");
    Node::on(reg.open_ia(Some("veth"), 8).expect("open the veth IA"))
}

/// A child's entry point: does nothing unless started by the test below.
#[test]
fn netns_role() {
    match std::env::var(ROLE_ENV).as_deref() {
        Ok("passive") => passive(),
        Ok("active") => active(),
        _ => {}
    }
}

/// Inside namespace B (10.213.0.2).
fn passive() {
    let qual_path = PathBuf::from(std::env::var(QUAL_ENV).expect("qualifier path"));
    let b = open_from_registry_file();
    assert_eq!(b.ia.attr().ia_address.ip(), IpAddr::V4(ADDR_B));
    let sp = b.listen();
    let tmp = qual_path.with_extension("tmp");
    std::fs::write(&tmp, sp.conn_qual().0.to_string()).unwrap();
    std::fs::rename(&tmp, &qual_path).unwrap();
    let cr = b.next_cr();
    let q = cr.query().unwrap();
    assert_eq!(&*q.private_data, PD_A);
    assert_eq!(q.remote_address.ip(), IpAddr::V4(ADDR_A));
    // The region the active side writes into (first piece) and reads from (third piece).
    let region = b.alloc(REGION);
    region
        .write(2 * PIECE as usize, &pattern(PIECE as usize, 7))
        .unwrap();
    let bufs = b.alloc(256);
    b.post_recv(&bufs, 0, 64, 1);
    cr.accept(Some(&b.ep), &encode(region.rmr_triplet(0, REGION as u32)))
        .unwrap();
    let (n, _) = b.conn_event();
    assert_eq!(n, EventNumber::Established);
    let c = b.dto();
    ok(&c, 1, DtoOp::Receive, 4);
    let mut got = [0u8; 4];
    bufs.read(0, &mut got).unwrap();
    assert_eq!(&got, b"ping");
    bufs.write(128, b"pong").unwrap();
    b.ep.post_send(&[bufs.triplet(128, 4)], Cookie(2), CompletionFlags::DEFAULT)
        .unwrap();
    ok(&b.dto(), 2, DtoOp::Send, 4);
    // The active side writes, reads, then disconnects.
    let (n, _) = b.conn_event();
    assert_eq!(n, EventNumber::Disconnected);
    let mut written = vec![0u8; PIECE as usize];
    region.read(0, &mut written).unwrap();
    assert_eq!(written, pattern(PIECE as usize, 3), "the RDMA write landed");
}

/// Inside namespace A (10.213.0.1).
fn active() {
    let qual: u64 = std::env::var(QUAL_ENV)
        .expect("qualifier")
        .parse()
        .expect("qualifier number");
    let a = open_from_registry_file();
    assert_eq!(a.ia.attr().ia_address.ip(), IpAddr::V4(ADDR_A));
    let bufs = a.alloc(REGION);
    a.post_recv(&bufs, 0, 64, 10);
    a.ep.connect(
        SocketAddr::new(IpAddr::V4(ADDR_B), 0),
        ConnQual(qual),
        wait_t(),
        PD_A,
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    let (n, pd) = a.conn_event();
    assert_eq!(n, EventNumber::Established);
    let remote = decode(&pd);
    assert_eq!(remote.segment_length, REGION as u32);
    assert_eq!(
        a.ep.query().unwrap().remote_address.map(|r| r.ip()),
        Some(IpAddr::V4(ADDR_B))
    );
    // Send and receive.
    bufs.write(64, b"ping").unwrap();
    a.ep.post_send(&[bufs.triplet(64, 4)], Cookie(11), CompletionFlags::DEFAULT)
        .unwrap();
    let mut seen = [a.dto(), a.dto()];
    seen.sort_by_key(|c| c.cookie.0);
    ok(&seen[0], 10, DtoOp::Receive, 4);
    ok(&seen[1], 11, DtoOp::Send, 4);
    let mut got = [0u8; 4];
    bufs.read(0, &mut got).unwrap();
    assert_eq!(&got, b"pong");
    // RDMA write into the first piece, RDMA read of the third.
    bufs.write(PIECE as usize, &pattern(PIECE as usize, 3))
        .unwrap();
    a.ep.post_rdma_write(
        &[bufs.triplet(u64::from(PIECE), PIECE)],
        Cookie(12),
        RmrTriplet {
            segment_length: PIECE,
            ..remote
        },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    a.ep.post_rdma_read(
        &[bufs.triplet(2 * u64::from(PIECE), PIECE)],
        Cookie(13),
        RmrTriplet {
            virtual_address: remote.virtual_address + 2 * u64::from(PIECE),
            segment_length: PIECE,
            ..remote
        },
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    ok(&a.dto(), 12, DtoOp::RdmaWrite, PIECE);
    ok(&a.dto(), 13, DtoOp::RdmaRead, PIECE);
    let mut back = vec![0u8; PIECE as usize];
    bufs.read(2 * PIECE as usize, &mut back).unwrap();
    assert_eq!(
        back,
        pattern(PIECE as usize, 7),
        "the RDMA read brought the peer's bytes"
    );
    a.ep.disconnect(CloseFlags::Graceful).unwrap();
    let (n, _) = a.conn_event();
    assert_eq!(n, EventNumber::Disconnected);
}

/// Runs `ip` with `args`; the error names the command and its output.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Deletes the namespaces (and so the veth pair) and stops the children, also on failure.
struct Netns {
    names: [String; 2],
    children: Vec<Child>,
    dir: PathBuf,
}

impl Drop for Netns {
    fn drop(&mut self) {
        for c in &mut self.children {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for n in &self.names {
            let _ = ip(&["netns", "del", n]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Netns {
    /// Two namespaces joined by a veth pair, with their addresses, both links up.
    fn create() -> Result<Netns, String> {
        let pid = std::process::id();
        let ns = Netns {
            names: [format!("dattcp-a-{pid}"), format!("dattcp-b-{pid}")],
            children: Vec::new(),
            dir: std::env::temp_dir().join(format!("dat-tcp-netns-{pid}")),
        };
        let [na, nb] = &ns.names;
        ip(&["netns", "add", na])?;
        ip(&["netns", "add", nb])?;
        let (va, vb) = (format!("dta{pid}"), format!("dtb{pid}"));
        ip(&[
            "link", "add", &va, "netns", na, "type", "veth", "peer", "name", &vb, "netns", nb,
        ])?;
        for (n, v, addr) in [(na, &va, ADDR_A), (nb, &vb, ADDR_B)] {
            ip(&["-n", n, "addr", "add", &format!("{addr}/24"), "dev", v])?;
            ip(&["-n", n, "link", "set", v, "up"])?;
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        std::fs::create_dir_all(&ns.dir).map_err(|e| e.to_string())?;
        Ok(ns)
    }

    /// Writes the registry of one side: a single TCP IA `veth` on `addr`.
    fn registry(&self, side: &str, addr: Ipv4Addr) -> PathBuf {
        let path = self.dir.join(format!("dat-{side}.toml"));
        let text = format!(
            "version = 1\ndefault = \"veth\"\n\n[[ia]]\nname = \"veth\"\nprovider = \"tcp\"\nparams = {{ address = \"{addr}\" }}\n"
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Starts the test binary in namespace `ns` in `role`.
    fn spawn(&mut self, ns: usize, role: &str, registry: &Path, qual: &str) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[ns]])
            .arg(std::env::current_exe().unwrap())
            .args(["netns_role", "--exact", "--test-threads=1", "--nocapture"])
            .env(ROLE_ENV, role)
            .env(QUAL_ENV, qual)
            .env("DAT_CONF", registry)
            .env_remove("DAT_IA")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.children.push(child);
    }

    /// Waits (bounded) for child `i` and returns its success and output.
    fn finish(&mut self, i: usize, until: Instant) -> (bool, String) {
        let c = &mut self.children[i];
        let status = loop {
            if let Some(s) = c.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() >= until {
                let _ = c.kill();
                let _ = c.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut out = String::new();
        if let Some(o) = c.stdout.as_mut() {
            let _ = o.read_to_string(&mut out);
        }
        if let Some(e) = c.stderr.as_mut() {
            let _ = e.read_to_string(&mut out);
        }
        match status {
            Some(s) => (s.success(), format!("{s}: {out}")),
            None => (false, format!("killed after {CHILD_LIMIT:?}: {out}")),
        }
    }
}

#[allow(clippy::print_stderr)]
fn skip(why: &str) {
    eprintln!("SKIPPED connect_send_rdma_and_disconnect_across_network_namespaces: {why}");
}

#[test]
fn connect_send_rdma_and_disconnect_across_network_namespaces() {
    if std::env::var(ROLE_ENV).is_ok() {
        return;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return skip("needs root (network namespaces)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return skip("`ip` (iproute2) not found");
    }
    let mut ns = match Netns::create() {
        Ok(ns) => ns,
        Err(e) => return skip(&format!("cannot set up the namespaces: {e}")),
    };
    let reg_a = ns.registry("a", ADDR_A);
    let reg_b = ns.registry("b", ADDR_B);
    let qual_path = ns.dir.join("qual");
    ns.spawn(1, "passive", &reg_b, qual_path.to_str().unwrap());
    let until = Instant::now() + CHILD_LIMIT;
    let qual = loop {
        if let Ok(s) = std::fs::read_to_string(&qual_path) {
            break s;
        }
        if Instant::now() >= until || matches!(ns.children[0].try_wait(), Ok(Some(_))) {
            let (_, out) = ns.finish(0, Instant::now());
            panic!("the passive side never listened: {out}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ns.spawn(0, "active", &reg_a, qual.trim());
    let (a_ok, a_out) = ns.finish(1, until);
    let (b_ok, b_out) = ns.finish(0, until);
    assert!(a_ok, "active side (10.213.0.1) failed: {a_out}");
    assert!(b_ok, "passive side (10.213.0.2) failed: {b_out}");
}
