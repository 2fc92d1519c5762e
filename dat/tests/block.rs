//! `Evd::wait` sleeps in the transport's own primitive when the transport has one
//! (`Transport::block`), and an event that arrives some other way ends that sleep through
//! `Transport::unblock`. The transport here wraps the in-memory fabric and blocks on its own
//! condition variable, counting the calls.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use dat::types::{EvdFlags, Timeout};
use dat::{EventData, Registry};
use dat_core::config::{Source, parse_toml};
use dat_core::error::DatResult;
use dat_core::mem::Buffer;
use dat_core::provider::{
    EpConfig, EpUpcalls, MemKeys, OpenError, OpenRequest, Provider, SpUpcalls, SrqConfig,
    Transport, WorkRequest,
};
use dat_core::testing::{Fabric, MemProvider};
use dat_core::types::{
    CloseFlags, ConnQual, CrId, EpId, EvdId, IaAddress, IaAttr, LmrId, MemPriv, ProviderAttr, PzId,
    SpId, SrqId, VaType,
};

/// What the blocking transport records.
#[derive(Default)]
struct Doorbell {
    rung: Mutex<bool>,
    cond: Condvar,
    blocks: AtomicU32,
    unblocks: AtomicU32,
}

struct Blocking {
    inner: Arc<dyn Transport>,
    bell: Arc<Doorbell>,
}

struct BlockingProvider {
    mem: Arc<MemProvider>,
    bell: Arc<Doorbell>,
}

impl Provider for BlockingProvider {
    fn name(&self) -> &'static str {
        "blk"
    }

    fn open(&self, req: OpenRequest<'_>) -> Result<Arc<dyn Transport>, OpenError> {
        Ok(Arc::new(Blocking {
            inner: self.mem.open(req)?,
            bell: self.bell.clone(),
        }))
    }
}

impl Transport for Blocking {
    fn ia_attr(&self) -> IaAttr {
        self.inner.ia_attr()
    }
    fn provider_attr(&self) -> ProviderAttr {
        self.inner.provider_attr()
    }
    fn create_pz(&self, pz: PzId) -> DatResult<()> {
        self.inner.create_pz(pz)
    }
    fn free_pz(&self, pz: PzId) {
        self.inner.free_pz(pz)
    }
    fn register(
        &self,
        lmr: LmrId,
        pz: PzId,
        buf: &Arc<Buffer>,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<Option<MemKeys>> {
        self.inner.register(lmr, pz, buf, privs, va_type)
    }
    fn deregister(&self, lmr: LmrId) {
        self.inner.deregister(lmr)
    }
    fn create_evd(&self, evd: EvdId, flags: EvdFlags, qlen: u32) -> DatResult<()> {
        self.inner.create_evd(evd, flags, qlen)
    }
    fn free_evd(&self, evd: EvdId) {
        self.inner.free_evd(evd)
    }
    fn create_ep(&self, ep: EpId, cfg: &EpConfig, upcalls: Arc<dyn EpUpcalls>) -> DatResult<()> {
        self.inner.create_ep(ep, cfg, upcalls)
    }
    fn modify_ep(&self, ep: EpId, cfg: &EpConfig) -> DatResult<()> {
        self.inner.modify_ep(ep, cfg)
    }
    fn reset_ep(&self, ep: EpId) -> DatResult<()> {
        self.inner.reset_ep(ep)
    }
    fn free_ep(&self, ep: EpId) {
        self.inner.free_ep(ep)
    }
    fn connect(
        &self,
        ep: EpId,
        remote: IaAddress,
        qual: ConnQual,
        private_data: &[u8],
        timeout: Timeout,
    ) -> DatResult<()> {
        self.inner.connect(ep, remote, qual, private_data, timeout)
    }
    fn listen(
        &self,
        sp: SpId,
        qual: Option<ConnQual>,
        upcalls: Arc<dyn SpUpcalls>,
    ) -> DatResult<ConnQual> {
        self.inner.listen(sp, qual, upcalls)
    }
    fn unlisten(&self, sp: SpId) {
        self.inner.unlisten(sp)
    }
    fn accept(&self, cr: CrId, ep: EpId, private_data: &[u8]) -> DatResult<()> {
        self.inner.accept(cr, ep, private_data)
    }
    fn reject(&self, cr: CrId, private_data: &[u8]) -> DatResult<()> {
        self.inner.reject(cr, private_data)
    }
    fn disconnect(&self, ep: EpId, flags: CloseFlags) -> DatResult<()> {
        self.inner.disconnect(ep, flags)
    }
    fn post(&self, ep: EpId, wr: WorkRequest) -> DatResult<()> {
        self.inner.post(ep, wr)
    }
    fn create_srq(&self, srq: SrqId, cfg: &SrqConfig) -> DatResult<()> {
        self.inner.create_srq(srq, cfg)
    }
    fn srq_post_recv(&self, srq: SrqId, wr: WorkRequest) -> DatResult<()> {
        self.inner.srq_post_recv(srq, wr)
    }
    fn free_srq(&self, srq: SrqId) {
        self.inner.free_srq(srq)
    }
    fn progress(&self) -> bool {
        self.inner.progress()
    }

    /// Sleeps on the doorbell until rung (a kept ring ends the next sleep at once).
    fn block(&self, _evd: EvdId, timeout: Duration) -> bool {
        self.bell.blocks.fetch_add(1, Ordering::SeqCst);
        let rung = self.bell.rung.lock().unwrap();
        let (mut rung, _) = self
            .bell
            .cond
            .wait_timeout_while(rung, timeout, |r| !*r)
            .unwrap();
        *rung = false;
        true
    }

    fn unblock(&self, _evd: EvdId) {
        self.bell.unblocks.fetch_add(1, Ordering::SeqCst);
        *self.bell.rung.lock().unwrap() = true;
        self.bell.cond.notify_all();
    }

    fn close(&self) {
        self.inner.close()
    }
}

#[test]
fn a_waiter_sleeps_in_the_transport_and_an_event_ends_it() {
    let bell = Arc::new(Doorbell::default());
    let text = "version = 1\ndefault = \"a\"\n[[ia]]\nname = \"a\"\nprovider = \"blk\"\nparams = { address = \"10.0.0.1\" }\n";
    let cfg = parse_toml(text, Source::Embedded, &["blk"]).expect("registry parses");
    let reg = Registry::new(
        cfg,
        vec![Arc::new(BlockingProvider {
            mem: MemProvider::new(Fabric::new()),
            bell: bell.clone(),
        })],
    );
    let ia = reg.open_ia(Some("a"), 8).expect("open");
    let evd = ia.create_evd(8, EvdFlags::SOFTWARE, None).unwrap();
    let waiter = {
        let evd = evd.clone();
        // Bounded: a wait that no unblock ends returns TIMEOUT_EXPIRED after 20 s.
        std::thread::spawn(move || evd.wait(Timeout(20_000_000), 1))
    };
    // The waiter spins briefly, then sleeps in the transport (bounded look, well inside the
    // waiter's own 20 s: a loaded machine may not run the new thread for seconds).
    let until = std::time::Instant::now() + Duration::from_secs(15);
    while bell.blocks.load(Ordering::SeqCst) == 0 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(
        bell.blocks.load(Ordering::SeqCst) > 0,
        "the waiter never blocked in the transport"
    );
    evd.post_se(7).unwrap();
    let (ev, _) = waiter
        .join()
        .unwrap()
        .expect("the software event ends the wait");
    assert!(
        matches!(ev.data, EventData::Software { pointer: 7 }),
        "{ev:?}"
    );
    assert!(bell.unblocks.load(Ordering::SeqCst) > 0);
    ia.close(CloseFlags::Abrupt).unwrap();
}
