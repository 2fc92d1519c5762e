//! Two processes: the test binary runs itself as a peer (selected by an environment
//! variable), serves one-sided RDMA writes while its application sleeps, and is killed in the
//! middle of a transfer.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use dat::types::{CompletionFlags, ConnQual, Cookie, DtoStatus, EventNumber, RmrTriplet};

const PEER_ENV: &str = "DAT_TCP_TEST_PEER";
const REGION: usize = 1 << 20;

fn encode(t: RmrTriplet) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&t.virtual_address.to_le_bytes());
    v.extend_from_slice(&t.segment_length.to_le_bytes());
    v.extend_from_slice(&t.rmr_context.to_le_bytes());
    v
}

fn decode(b: &[u8]) -> RmrTriplet {
    RmrTriplet {
        virtual_address: u64::from_le_bytes(b[0..8].try_into().unwrap()),
        segment_length: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        rmr_context: u32::from_le_bytes(b[12..16].try_into().unwrap()),
    }
}

/// The peer's entry point: does nothing unless started by the test below.
#[test]
fn peer_process() {
    let Ok(path) = std::env::var(PEER_ENV) else {
        return;
    };
    let b = Node::new();
    let sp = b.listen();
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, sp.conn_qual().0.to_string()).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    let cr = b.next_cr();
    let target = b.alloc(REGION);
    cr.accept(Some(&b.ep), &encode(target.rmr_triplet(0, REGION as u32)))
        .unwrap();
    // The application sleeps; the driver thread serves the writes until we are killed.
    std::thread::sleep(Duration::from_secs(30));
}

#[test]
fn killed_peer_process_breaks_the_connection_in_bounded_time() {
    if std::env::var(PEER_ENV).is_ok() {
        return;
    }
    let path = std::env::temp_dir().join(format!("dat-tcp-peer-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["peer_process", "--exact", "--test-threads=1"])
        .env(PEER_ENV, &path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let qual = loop {
        if let Ok(s) = std::fs::read_to_string(&path) {
            break s.parse::<u64>().unwrap();
        }
        // Generous: a loaded machine can be slow to start a process.
        assert!(start.elapsed() < 3 * WAIT, "peer did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = std::fs::remove_file(&path);
    let a = Node::new();
    a.ep.connect(
        std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 0),
        ConnQual(qual),
        wait_t(),
        b"",
        dat::types::Qos::BestEffort,
        dat::ConnectFlags::Default,
    )
    .unwrap();
    let (n, pd) = a.conn_event();
    assert_eq!(n, EventNumber::Established);
    let remote = decode(&pd);
    let src = a.alloc(REGION);
    // Stream writes, four in flight; kill the peer after a few have completed.
    let mut posted = 0u64;
    let mut done = Vec::new();
    let deadline = Instant::now() + 3 * WAIT;
    let mut killed = false;
    while done.len() < posted as usize || !killed {
        while posted < done.len() as u64 + 4 && !killed {
            a.ep.post_rdma_write(
                &[src.triplet(0, REGION as u32)],
                Cookie(posted),
                remote,
                CompletionFlags::DEFAULT,
            )
            .unwrap();
            posted += 1;
        }
        let c = a.dto();
        done.push(c);
        if done.len() == 3 && !killed {
            child.kill().unwrap();
            killed = true;
        }
        assert!(Instant::now() < deadline, "no end in bounded time");
    }
    child.wait().unwrap();
    let (n, _) = a.conn_event();
    assert!(
        n == EventNumber::Broken || n == EventNumber::Disconnected,
        "{n:?}"
    );
    // Completions in posting order: successes, then at most one error, then flushes.
    for (i, c) in done.iter().enumerate() {
        assert_eq!(c.cookie, Cookie(i as u64));
    }
    assert!(done[..3].iter().all(|c| c.status == DtoStatus::Success));
    let first_bad = done
        .iter()
        .position(|c| c.status != DtoStatus::Success)
        .unwrap_or(done.len());
    assert!(
        done[first_bad..]
            .iter()
            .all(|c| c.status == DtoStatus::Flushed)
    );
}
