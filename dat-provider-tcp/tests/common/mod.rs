//! Helpers of the end-to-end tests: a registry with the TCP provider, and a node (IA, PZ,
//! EVDs, EP) driven through the `dat` facade over real loopback sockets.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dat::types::{
    CompletionFlags, ConnQual, Cookie, DtoOp, DtoStatus, EvdFlags, EventNumber, MemPriv, PspFlags,
    Qos, Timeout,
};
use dat::{
    ConnectFlags, Cr, DtoCompletion, Ep, EpParams, Evd, Event, EventData, Ia, Lmr, Pz, Registry, Sp,
};
use dat_core::config::{Source, parse_toml};
use dat_provider_tcp::TcpProvider;

/// A bound on every wait of the tests.
pub const WAIT: Duration = Duration::from_secs(10);

pub fn wait_t() -> Timeout {
    Timeout::from_duration(WAIT)
}

/// A registry with one IA `t` of the TCP provider with `params` (a TOML inline table body).
pub fn registry(params: &str) -> Registry {
    let text =
        format!("version = 1\n[[ia]]\nname = \"t\"\nprovider = \"tcp\"\nparams = {{ {params} }}\n");
    let cfg = parse_toml(&text, Source::Embedded, &["tcp", "shm", "verbs"]).expect("config");
    Registry::new(cfg, vec![Arc::new(TcpProvider::new())])
}

pub fn open(params: &str) -> Ia {
    registry(params).open_ia(Some("t"), 8).expect("open IA")
}

/// An IA with a PZ, EVDs and one EP.
pub struct Node {
    pub ia: Ia,
    pub pz: Pz,
    pub dto: Evd,
    pub conn: Evd,
    pub cr: Evd,
    pub ep: Ep,
}

impl Node {
    pub fn new() -> Node {
        Node::with_params("address = \"127.0.0.1\"")
    }

    pub fn with_params(params: &str) -> Node {
        Node::on(open(params))
    }

    /// A PZ, EVDs and one EP on `ia`.
    pub fn on(ia: Ia) -> Node {
        let pz = ia.create_pz().expect("pz");
        let dto = ia.create_evd(256, EvdFlags::DTO, None).expect("dto evd");
        let conn = ia
            .create_evd(16, EvdFlags::CONNECTION, None)
            .expect("conn evd");
        let cr = ia.create_evd(16, EvdFlags::CR, None).expect("cr evd");
        let ep = ia
            .create_ep(&EpParams {
                pz: Some(&pz),
                recv_evd: Some(&dto),
                request_evd: Some(&dto),
                connect_evd: Some(&conn),
                srq: None,
                attr: None,
            })
            .expect("ep");
        Node {
            ia,
            pz,
            dto,
            conn,
            cr,
            ep,
        }
    }

    /// Another EP on the node's PZ and EVDs.
    pub fn another_ep(&self) -> Ep {
        self.ia
            .create_ep(&EpParams {
                pz: Some(&self.pz),
                recv_evd: Some(&self.dto),
                request_evd: Some(&self.dto),
                connect_evd: Some(&self.conn),
                srq: None,
                attr: None,
            })
            .expect("ep")
    }

    pub fn alloc(&self, len: usize) -> Lmr {
        self.pz.alloc(len, MemPriv::ALL).expect("alloc")
    }

    pub fn listen(&self) -> Sp {
        self.ia
            .create_psp_any(&self.cr, PspFlags::Consumer)
            .expect("psp")
    }

    pub fn connect(&self, to: &Node, qual: ConnQual, pdata: &[u8]) {
        self.ep
            .connect(
                to.ia.attr().ia_address,
                qual,
                wait_t(),
                pdata,
                Qos::BestEffort,
                ConnectFlags::Default,
            )
            .expect("connect");
    }

    /// Waits for a connection request and returns it.
    pub fn next_cr(&self) -> Cr {
        let (ev, _) = self.cr.wait(wait_t(), 1).expect("CR event");
        let EventData::ConnectionRequest { cr, .. } = ev.data else {
            panic!("not a CR: {ev:?}");
        };
        self.ia.cr(cr).expect("cr handle")
    }

    /// Waits for the next connection event.
    pub fn conn_event(&self) -> (EventNumber, Box<[u8]>) {
        let (ev, _) = self.conn.wait(wait_t(), 1).expect("connection event");
        match ev.data {
            EventData::Connection { private_data, .. } => (ev.number, private_data),
            _ => panic!("not a connection event: {ev:?}"),
        }
    }

    /// Waits for the next DTO completion.
    pub fn dto(&self) -> DtoCompletion {
        dto_of(self.dto.wait(wait_t(), 1).expect("DTO event").0)
    }

    pub fn post_recv(&self, lmr: &Lmr, off: u64, len: u32, cookie: u64) {
        self.ep
            .post_recv(
                &[lmr.triplet(off, len)],
                Cookie(cookie),
                CompletionFlags::DEFAULT,
            )
            .expect("post_recv");
    }
}

/// Connects `ep` to qualifier `qual` at `addr` (an IA address: its port is the remote's
/// `port_base`).
pub fn connect_ep(ep: &Ep, addr: SocketAddr, qual: ConnQual) {
    ep.connect(
        addr,
        qual,
        wait_t(),
        b"",
        Qos::BestEffort,
        ConnectFlags::Default,
    )
    .expect("connect");
}

/// A loopback port nobody listens on (bound by the kernel's choice, then closed).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("local address")
        .port()
}

pub fn dto_of(ev: Event) -> DtoCompletion {
    match ev.data {
        EventData::Dto(c) => c,
        _ => panic!("not a DTO completion: {ev:?}"),
    }
}

/// Connects `a` to `b` (listening with psp_create_any) with private data both ways.
pub fn pair_with(a: &Node, b: &Node, pd_a: &[u8], pd_b: &[u8]) {
    let sp = b.listen();
    a.connect(b, sp.conn_qual(), pd_a);
    let cr = b.next_cr();
    let q = cr.query().expect("cr query");
    assert_eq!(&*q.private_data, pd_a);
    cr.accept(Some(&b.ep), pd_b).expect("accept");
    let (n, pd) = a.conn_event();
    assert_eq!(n, EventNumber::Established);
    assert_eq!(&*pd, pd_b);
    let (n, _) = b.conn_event();
    assert_eq!(n, EventNumber::Established);
}

/// Two connected nodes.
pub fn pair() -> (Node, Node) {
    let a = Node::new();
    let b = Node::new();
    pair_with(&a, &b, b"hi", b"ho");
    (a, b)
}

pub fn ok(c: &DtoCompletion, cookie: u64, op: DtoOp, len: u32) {
    assert_eq!(
        (c.cookie, c.status, c.operation, c.transferred_length),
        (Cookie(cookie), DtoStatus::Success, op, len),
        "{c:?}"
    );
}
