//! Cases that need a real second process: the test binary re-runs itself with
//! [`ROLE_ENV`] selecting a peer role (the suite's hidden `__dat_peer` test serves it), and the
//! peer reports its address through a file.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dat::EpState;
use dat::types::{CloseFlags, CompletionFlags, ConnQual, Cookie, EventNumber, IaAddress};

use crate::Outcome;
use crate::harness::{Side, connect_ep, expect_conn, next_event};
use crate::target::Target;

/// Selects the peer role in the child process.
pub const ROLE_ENV: &str = "DAT_TEST_PEER_ROLE";
/// The qualifier the child listens on.
pub const QUAL_ENV: &str = "DAT_TEST_PEER_QUAL";
/// Where the child writes its address.
pub const OUT_ENV: &str = "DAT_TEST_PEER_OUT";

/// How long a peer lives at most (it is normally killed or exits much earlier).
const PEER_LIFETIME: Duration = Duration::from_secs(60);

thread_local! {
    static SELF_TEST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Records the test name that serves peer roles in this binary (set by the suite macro for
/// the case running on this thread).
pub fn set_peer_test(name: &str) {
    SELF_TEST.with(|s| *s.borrow_mut() = Some(name.to_owned()));
}

/// The hidden test of the suite: when [`ROLE_ENV`] is set, plays that role; otherwise returns
/// at once.
pub fn serve_if_requested(t: &dyn Target) {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    let qual = std::env::var(QUAL_ENV)
        .ok()
        .and_then(|q| q.parse::<u64>().ok())
        .map(ConnQual);
    let out = std::env::var(OUT_ENV).ok().map(PathBuf::from);
    let (Some(qual), Some(out)) = (qual, out) else {
        tracing::error!("peer role {role} without {QUAL_ENV}/{OUT_ENV}");
        return;
    };
    match role.as_str() {
        "victim" => victim(t, qual, &out),
        "exiter" => exiter(t, qual, &out),
        other => tracing::error!(role = other, "unknown peer role"),
    }
}

/// Opens the IA, listens on `qual`, publishes the address, accepts one connection.
fn listen_and_accept(t: &dyn Target, qual: ConnQual, out: &Path) -> Side {
    let ia = t
        .open_by_name(t.ia_name())
        .unwrap_or_else(|e| panic!("peer: open IA: {e}"));
    let s = Side::new(ia);
    let psp =
        s.ia.create_psp(qual, &s.cr, dat::types::PspFlags::Consumer)
            .expect("peer: psp");
    let tmp = out.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!(
            "{}\n{} {} {}\n",
            s.addr(),
            s.lmr.rmr_context().unwrap_or(0),
            s.lmr.address(),
            s.lmr.len()
        ),
    )
    .expect("peer: write address file");
    std::fs::rename(&tmp, out).expect("peer: publish address file");
    let cr = crate::harness::expect_cr(&s.ia, &s.cr, &psp);
    cr.accept(Some(&s.ep), b"peer").expect("peer: accept");
    expect_conn(&s.conn, EventNumber::Established, &s.ep);
    s
}

/// Keeps receiving until killed (or [`PEER_LIFETIME`]).
fn victim(t: &dyn Target, qual: ConnQual, out: &Path) {
    let s = listen_and_accept(t, qual, out);
    for i in 0..256u64 {
        let _ = s.ep.post_recv(
            &[s.lmr.triplet(0, 4096)],
            Cookie(i),
            CompletionFlags::DEFAULT,
        );
    }
    let end = Instant::now() + PEER_LIFETIME;
    while Instant::now() < end {
        if let Ok((ev, _)) = s.recv.wait(dat::types::Timeout(100_000), 1)
            && ev.number == EventNumber::DtoCompletion
        {
            let _ = s.ep.post_recv(
                &[s.lmr.triplet(0, 4096)],
                Cookie(0),
                CompletionFlags::DEFAULT,
            );
        }
        if s.ep.state() != Ok(EpState::Connected) {
            break;
        }
    }
}

/// Accepts, then closes its IA abruptly and exits.
fn exiter(t: &dyn Target, qual: ConnQual, out: &Path) {
    let s = listen_and_accept(t, qual, out);
    std::thread::sleep(Duration::from_millis(50));
    let _ = s.ia.close(CloseFlags::Abrupt);
    std::process::exit(0);
}

/// A spawned peer, killed when dropped.
struct Peer {
    child: Child,
    out: PathBuf,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.out);
    }
}

fn spawn(role: &str, qual: ConnQual) -> Result<Peer, Outcome> {
    let Some(test) = SELF_TEST.with(|s| s.borrow().clone()) else {
        return Err(Outcome::Skip(
            "peer test name unknown (case not run through conformance_suite!)".into(),
        ));
    };
    let exe = std::env::current_exe().expect("current test binary");
    let out = std::env::temp_dir().join(format!(
        "dat-tests-peer-{}-{}-{}",
        std::process::id(),
        qual.0,
        role
    ));
    let _ = std::fs::remove_file(&out);
    let child = Command::new(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, role)
        .env(QUAL_ENV, qual.0.to_string())
        .env(OUT_ENV, &out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the peer process");
    Ok(Peer { child, out })
}

/// Waits for the peer's address file.
fn peer_address(p: &mut Peer) -> IaAddress {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(text) = std::fs::read_to_string(&p.out)
            && let Some(line) = text.lines().next()
            && let Ok(addr) = line.parse()
        {
            return addr;
        }
        if let Ok(Some(status)) = p.child.try_wait() {
            panic!("the peer exited before publishing its address: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the peer never published its address"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Parent side of `peer_killed_mid_transfer`.
pub fn killed_mid_transfer(t: &dyn Target) -> Outcome {
    let qual = t.qual();
    let mut peer = match spawn("victim", qual) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let addr = peer_address(&mut peer);
    let (ia, _) = t.open_pair();
    let s = Side::new(ia);
    connect_ep(&s.ep, &addr, qual, b"");
    assert_eq!(
        &*expect_conn(&s.conn, EventNumber::Established, &s.ep),
        b"peer"
    );
    let mut posted = 0u64;
    for i in 0..16u64 {
        s.ep.post_send(
            &[s.lmr.triplet(0, 4096)],
            Cookie(i),
            CompletionFlags::DEFAULT,
        )
        .expect("send while connected");
        posted += 1;
    }
    let _ = peer.child.kill();
    let _ = peer.child.wait();
    // Keep the pipe busy while the peer dies.
    for i in 16..32u64 {
        if s.ep
            .post_send(
                &[s.lmr.triplet(0, 4096)],
                Cookie(i),
                CompletionFlags::DEFAULT,
            )
            .is_ok()
        {
            posted += 1;
        }
    }
    let ev = next_event(&s.conn);
    assert!(
        matches!(ev.number, EventNumber::Broken | EventNumber::Disconnected),
        "{ev:?}"
    );
    assert_eq!(ev.ep(), Some(s.ep.id()));
    assert_eq!(s.ep.state(), Ok(EpState::Disconnected));
    // Every posted request completes (success before the death, else an error or flushed).
    for _ in 0..posted {
        let c = crate::harness::expect_dto(&s.req);
        assert_eq!(c.ep, s.ep.id());
    }
    crate::harness::assert_empty(&s.req);
    Outcome::Pass
}

/// Parent side of `peer_process_exits`.
pub fn exits_after_connect(t: &dyn Target) -> Outcome {
    let qual = t.qual();
    let mut peer = match spawn("exiter", qual) {
        Ok(p) => p,
        Err(o) => return o,
    };
    let addr = peer_address(&mut peer);
    let (ia, _) = t.open_pair();
    let s = Side::new(ia);
    connect_ep(&s.ep, &addr, qual, b"");
    expect_conn(&s.conn, EventNumber::Established, &s.ep);
    let ev = next_event(&s.conn);
    assert!(
        matches!(ev.number, EventNumber::Disconnected | EventNumber::Broken),
        "{ev:?}"
    );
    assert_eq!(s.ep.state(), Ok(EpState::Disconnected));
    Outcome::Pass
}
