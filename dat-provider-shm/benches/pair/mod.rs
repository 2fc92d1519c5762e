//! The two ends of a connection between two shm IAs of this process, shared by the benches
//! and the `rtt_count` example.
#![allow(dead_code)]

use dat::types::{ConnQual, EvdFlags, LOOPBACK_ADDRESS, MemPriv, PspFlags, Qos, Timeout};
use dat::{ConnectFlags, Ep, EpParams, Evd, EventData, Ia, Lmr, Registry};
use dat_core::config::{Source, parse_toml};
use dat_provider_shm::ShmProvider;

/// One end: its IA, DTO EVD, EP and a 4 MiB LMR.
pub struct End {
    pub ia: Ia,
    pub dto: Evd,
    pub ep: Ep,
    pub lmr: Lmr,
}

/// An end on IA `shm0` of `reg`, with its connection EVD.
pub fn end(reg: &Registry) -> (End, Evd) {
    let ia = reg.open_ia(Some("shm0"), 16).unwrap();
    let pz = ia.create_pz().unwrap();
    let dto = ia.create_evd(4096, EvdFlags::DTO, None).unwrap();
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
    // More segments per request than the defaults allow (`rtt_count`'s `DATRS_RTT_SEGS`).
    if std::env::var_os("DATRS_RTT_SEGS").is_some() {
        let mut attr = ep.query().unwrap().config.attr;
        attr.max_request_iov = 16;
        attr.max_rdma_write_iov = 16;
        ep.modify(&dat::EpModify {
            attr: Some(&attr),
            ..dat::EpModify::default()
        })
        .unwrap();
    }
    let lmr = pz.alloc(4 << 20, MemPriv::ALL).unwrap();
    (End { ia, dto, ep, lmr }, conn)
}

/// Ten seconds.
pub const W: Timeout = Timeout(10_000_000);

/// A registry with one shm IA in a bench-private rendezvous directory; `extra` is added to
/// its parameters (`", rdma_inline = 0"`).
pub fn registry_with(extra: &str) -> Registry {
    let dir = std::env::temp_dir().join("datrs-shm-bench");
    let text = format!(
        "version = 1\n[[ia]]\nname = \"shm0\"\nprovider = \"shm\"\nparams = {{ dir = \"{}\"{extra} }}\n",
        dir.display()
    );
    Registry::new(
        parse_toml(&text, Source::Embedded, &["shm"]).unwrap(),
        vec![ShmProvider::new()],
    )
}

/// A registry with one shm IA in a bench-private rendezvous directory.
pub fn registry() -> Registry {
    registry_with("")
}

/// Two connected ends (qualifier `qual`).
pub fn pair(qual: u64) -> (End, End) {
    pair_with(qual, "")
}

/// Two connected ends (qualifier `qual`) on IAs with `extra` parameters.
pub fn pair_with(qual: u64, extra: &str) -> (End, End) {
    let reg = registry_with(extra);
    let (a, ac) = end(&reg);
    let (b, bc) = end(&reg);
    let cr_evd = b.ia.create_evd(4, EvdFlags::CR, None).unwrap();
    let _sp =
        b.ia.create_psp(ConnQual(qual), &cr_evd, PspFlags::Consumer)
            .unwrap();
    a.ep.connect(
        LOOPBACK_ADDRESS,
        ConnQual(qual),
        W,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    let EventData::ConnectionRequest { cr, .. } = cr_evd.wait(W, 1).unwrap().0.data else {
        panic!("no request")
    };
    b.ia.cr(cr).unwrap().accept(Some(&b.ep), &[]).unwrap();
    ac.wait(W, 1).unwrap();
    bc.wait(W, 1).unwrap();
    (a, b)
}
