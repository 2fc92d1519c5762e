//! Two connected endpoints on two `tcp` IAs over 127.0.0.1, for the benches and the
//! `lockstep` example (which includes this file with `#[path]`).

use std::sync::Arc;
use std::time::Duration;

use dat::types::{EvdFlags, MemPriv, PspFlags, Qos, Timeout};
use dat::{ConnectFlags, Ep, EpParams, Evd, EventData, Ia, Lmr, Pz, Registry};
use dat_core::config::{Source, parse_toml};
use dat_provider_tcp::TcpProvider;

/// One end: (IA, PZ, DTO EVD for requests and receives, connection EVD, CR EVD, EP, a 64-byte
/// LMR with every privilege).
pub type End = (Ia, Pz, Evd, Evd, Evd, Ep, Lmr);

/// How long any setup step may wait.
pub const SETUP_WAIT: Duration = Duration::from_secs(10);

/// Two ends of a raw TCP connection over 127.0.0.1, `TCP_NODELAY` and non-blocking: the
/// baseline the endpoints are compared with.
pub fn raw_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    for s in [&a, &b] {
        s.set_nodelay(true).unwrap();
        s.set_nonblocking(true).unwrap();
    }
    (a, b)
}

/// A registry with one tcp IA on 127.0.0.1, and two ends connected through it (`b` accepted
/// `a`'s request on a PSP of its own). The registry is returned to keep it alive.
pub fn connected() -> (Registry, End, End) {
    let text = "version = 1\n[[ia]]\nname = \"t\"\nprovider = \"tcp\"\nparams = { address = \"127.0.0.1\" }\n";
    let cfg = parse_toml(text, Source::Embedded, &["tcp"]).unwrap();
    let reg = Registry::new(cfg, vec![Arc::new(TcpProvider::new())]);
    let t = Timeout::from_duration(SETUP_WAIT);
    let mk = || {
        let ia = reg.open_ia(Some("t"), 8).unwrap();
        let pz = ia.create_pz().unwrap();
        let dto = ia.create_evd(64, EvdFlags::DTO, None).unwrap();
        let conn = ia.create_evd(8, EvdFlags::CONNECTION, None).unwrap();
        let cr = ia.create_evd(8, EvdFlags::CR, None).unwrap();
        let ep = ia
            .create_ep(&EpParams {
                pz: Some(&pz),
                recv_evd: Some(&dto),
                request_evd: Some(&dto),
                connect_evd: Some(&conn),
                srq: None,
                attr: None,
            })
            .unwrap();
        let lmr = pz.alloc(64, MemPriv::ALL).unwrap();
        (ia, pz, dto, conn, cr, ep, lmr)
    };
    let a = mk();
    let b = mk();
    let sp = b.0.create_psp_any(&b.4, PspFlags::Consumer).unwrap();
    a.5.connect(
        b.0.attr().ia_address,
        sp.conn_qual(),
        t,
        &[],
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .unwrap();
    let (ev, _) = b.4.wait(t, 1).unwrap();
    let EventData::ConnectionRequest { cr, .. } = ev.data else {
        panic!("no connection request: {ev:?}")
    };
    b.0.cr(cr).unwrap().accept(Some(&b.5), &[]).unwrap();
    a.3.wait(t, 1).unwrap();
    b.3.wait(t, 1).unwrap();
    (reg, a, b)
}
