//! SO_PEERCRED: requesters of another user are refused unless the listener allows them.
//! Needs root (to run the peer process as `nobody`); skipped otherwise.

mod common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;

use common::*;
use dat::types::{CloseFlags, EventNumber};

/// The peer, running as another user: one request to each qualifier.
fn stranger(dir: &std::path::Path, qual: u64) {
    let reg = registry(dir, ", allow_other_users = true");
    let s = Side::new(&reg);
    s.connect(qual, b"let me in", WAIT);
    assert_eq!(
        cm(&s.conn).0,
        EventNumber::NonPeerRejected,
        "same-uid listener refuses"
    );
    s.ep.reset().unwrap();
    s.connect(qual + 1, b"let me in", WAIT);
    assert_eq!(
        cm(&s.conn),
        (EventNumber::PeerRejected, b"seen you".to_vec()),
        "the listener that allows other users hears us"
    );
    s.ia.close(CloseFlags::Abrupt).unwrap();
}

#[test]
fn peer_entry() {
    if let Some((role, dir, qual)) = peer_args() {
        assert_eq!(role, "stranger");
        stranger(&dir, qual);
    }
}

#[test]
fn requesters_of_another_user_are_refused_unless_allowed() {
    if std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(1)
        != 0
    {
        return; // cannot run a peer as another user
    }
    let dir = scratch("creds");
    let strict = Side::new(&registry(&dir, ""));
    let open = Side::new(&registry(&dir, ", allow_other_users = true"));
    let (_sp1, cr1) = listen(&strict.ia, 7000);
    let (_sp2, cr2) = listen(&open.ia, 7001);
    // Let the other user reach the sockets.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    for q in ["7000", "7001"] {
        std::fs::set_permissions(dir.join(q), std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--exact", "peer_entry", "--test-threads=1", "--nocapture"])
        .env("DATRS_SHM_TEST_PEER", "stranger")
        .env("DATRS_SHM_TEST_DIR", &dir)
        .env("DATRS_SHM_TEST_QUAL", "7000")
        .stdout(std::process::Stdio::null())
        .uid(65534)
        .gid(65534);
    let mut peer = Peer(cmd.spawn().unwrap());
    let (cr, pd) = request(&open.ia, &cr2);
    assert_eq!(pd, b"let me in");
    cr.reject(b"seen you").unwrap();
    assert!(peer.join(), "the peer saw exactly the expected events");
    assert_eq!(
        cr1.dequeue().unwrap_err(),
        dat::DatError::QUEUE_EMPTY,
        "the strict listener never saw the request"
    );
    strict.ia.close(CloseFlags::Abrupt).unwrap();
    open.ia.close(CloseFlags::Abrupt).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
