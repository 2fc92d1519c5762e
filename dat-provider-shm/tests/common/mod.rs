//! Helpers shared by the end-to-end tests: a registry with one shm IA in a private rendezvous
//! directory, endpoints with their EVDs, and bounded waits.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use dat::types::{
    ConnQual, EvdFlags, EventNumber, IaAddress, LOOPBACK_ADDRESS, MemPriv, PspFlags, Qos, Timeout,
};
use dat::{ConnectFlags, Ep, EpParams, Evd, Event, EventData, Ia, Lmr, Pz, Registry, Sp};
use dat_core::config::{Source, parse_toml};
use dat_provider_shm::ShmProvider;

/// Ten seconds: every wait is bounded.
pub const WAIT: Timeout = Timeout(10_000_000);

/// A fresh rendezvous directory for one test.
pub fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("datrs-shm-e2e-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Names in the rendezvous directory.
pub fn entries(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// A registry whose IA `shm0` uses `dir` and the extra params `extra` (e.g. `, rdma = "copy"`).
pub fn registry(dir: &Path, extra: &str) -> Registry {
    let text = format!(
        "version = 1\ndefault = \"shm0\"\n[[ia]]\nname = \"shm0\"\nprovider = \"shm\"\nparams = {{ dir = \"{}\"{extra} }}\n",
        dir.display()
    );
    let cfg = parse_toml(&text, Source::Embedded, &["tcp", "shm", "verbs"]).expect("config");
    Registry::new(cfg, vec![ShmProvider::new()])
}

/// One side: IA, PZ, a DTO EVD, a connection EVD, an EP and a 1 MiB LMR.
pub struct Side {
    pub ia: Ia,
    pub pz: Pz,
    pub dto: Evd,
    pub conn: Evd,
    pub ep: Ep,
    pub lmr: Lmr,
}

impl Side {
    pub fn new(reg: &Registry) -> Side {
        let ia = reg.open_ia(Some("shm0"), 16).expect("open");
        let pz = ia.create_pz().unwrap();
        let dto = ia.create_evd(256, EvdFlags::DTO, None).unwrap();
        let conn = ia.create_evd(16, EvdFlags::CONNECTION, None).unwrap();
        let ep = ia
            .create_ep(&EpParams {
                pz: Some(&pz),
                recv_evd: Some(&dto),
                request_evd: Some(&dto),
                connect_evd: Some(&conn),
                ..EpParams::default()
            })
            .unwrap();
        let lmr = pz.alloc(1 << 20, MemPriv::ALL).unwrap();
        Side {
            ia,
            pz,
            dto,
            conn,
            ep,
            lmr,
        }
    }

    pub fn connect(&self, qual: u64, pdata: &[u8], timeout: Timeout) {
        self.ep
            .connect(
                LOOPBACK_ADDRESS,
                ConnQual(qual),
                timeout,
                pdata,
                Qos::BestEffort,
                ConnectFlags::Default,
            )
            .unwrap();
    }
}

/// The next event of `evd` (bounded).
pub fn next(evd: &Evd) -> Event {
    evd.wait(WAIT, 1).expect("event within the bound").0
}

/// The next connection event: its number and private data.
pub fn cm(evd: &Evd) -> (EventNumber, Vec<u8>) {
    let e = next(evd);
    match e.data {
        EventData::Connection { private_data, .. } => (e.number, private_data.into_vec()),
        other => panic!("not a connection event: {other:?}"),
    }
}

/// The next DTO completion: (cookie, status, length).
pub fn dto(evd: &Evd) -> dat::DtoCompletion {
    match next(evd).data {
        EventData::Dto(c) => c,
        other => panic!("not a DTO event: {other:?}"),
    }
}

/// A listener on `qual` with its CR EVD.
pub fn listen(ia: &Ia, qual: u64) -> (Sp, Evd) {
    let evd = ia.create_evd(16, EvdFlags::CR, None).unwrap();
    let sp = ia
        .create_psp(ConnQual(qual), &evd, PspFlags::Consumer)
        .unwrap();
    (sp, evd)
}

/// Waits for a request on `cr_evd` and returns it with its private data.
pub fn request(ia: &Ia, cr_evd: &Evd) -> (dat::Cr, Vec<u8>) {
    let e = next(cr_evd);
    let EventData::ConnectionRequest { cr, .. } = e.data else {
        panic!("not a request: {e:?}");
    };
    let cr = ia.cr(cr).expect("cr");
    let pd = cr.query().unwrap().private_data.into_vec();
    (cr, pd)
}

/// Connects `a` to `b` through a listener on `qual` (one process, two IAs).
pub fn connect_pair(a: &Side, b: &Side, qual: u64) -> Sp {
    let (sp, cr_evd) = listen(&b.ia, qual);
    a.connect(qual, b"hi", WAIT);
    let (cr, _) = request(&b.ia, &cr_evd);
    cr.accept(Some(&b.ep), b"welcome").unwrap();
    assert_eq!(cm(&a.conn), (EventNumber::Established, b"welcome".to_vec()));
    assert_eq!(cm(&b.conn).0, EventNumber::Established);
    sp
}

/// The IA address every shm IA reports.
pub fn addr() -> IaAddress {
    LOOPBACK_ADDRESS
}

/// Environment variable that turns the test binary into a peer process.
pub const PEER_ROLE: &str = "DATRS_SHM_TEST_PEER";
const PEER_DIR: &str = "DATRS_SHM_TEST_DIR";
const PEER_QUAL: &str = "DATRS_SHM_TEST_QUAL";

/// Kills the child when dropped (a failing test leaves no process behind).
pub struct Peer(pub std::process::Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Peer {
    /// Spawns this test binary as a peer running `role` (its test `entry` runs the role).
    pub fn spawn(entry: &str, role: &str, dir: &Path, qual: u64) -> Peer {
        let exe = std::env::current_exe().unwrap();
        let child = std::process::Command::new(exe)
            .args(["--exact", entry, "--test-threads=1", "--nocapture"])
            .env(PEER_ROLE, role)
            .env(PEER_DIR, dir)
            .env(PEER_QUAL, qual.to_string())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        Peer(child)
    }

    /// Waits (bounded, 30 s: a loaded machine can be slow to run a process to its end) for
    /// the child to exit; returns whether it succeeded.
    pub fn join(&mut self) -> bool {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while std::time::Instant::now() < until {
            if let Ok(Some(st)) = self.0.try_wait() {
                return st.success();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }
}

/// In a peer process: `(role, dir, qual)`, or `None` in the ordinary test run.
pub fn peer_args() -> Option<(String, PathBuf, u64)> {
    let role = std::env::var(PEER_ROLE).ok()?;
    let dir = PathBuf::from(std::env::var_os(PEER_DIR)?);
    let qual = std::env::var(PEER_QUAL).ok()?.parse().ok()?;
    Some((role, dir, qual))
}

/// Connects to a peer process's listener, retrying while it is not listening yet (bounded).
pub fn connect_to_peer(s: &Side, qual: u64, pdata: &[u8]) -> Vec<u8> {
    for _ in 0..500 {
        s.connect(qual, pdata, WAIT);
        match cm(&s.conn) {
            (EventNumber::Established, pd) => return pd,
            (EventNumber::NonPeerRejected, _) => {
                s.ep.reset().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    panic!("the peer never listened");
}

/// An RMR triplet encoded in private data.
pub fn encode_rmr(t: dat::types::RmrTriplet) -> Vec<u8> {
    let mut v = t.rmr_context.to_le_bytes().to_vec();
    v.extend_from_slice(&t.virtual_address.to_le_bytes());
    v.extend_from_slice(&t.segment_length.to_le_bytes());
    v
}

/// Decodes [`encode_rmr`].
pub fn decode_rmr(b: &[u8]) -> dat::types::RmrTriplet {
    dat::types::RmrTriplet {
        rmr_context: u32::from_le_bytes(b[0..4].try_into().unwrap()),
        virtual_address: u64::from_le_bytes(b[4..12].try_into().unwrap()),
        segment_length: u32::from_le_bytes(b[12..16].try_into().unwrap()),
    }
}

/// Shared-memory segments of this provider mapped in this process.
pub fn mapped_segments() -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("memfd:datrs-shm"))
        .count()
}
