//! The interface adapter: an open IA, its attributes, its children.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use dat_core::error::Subtype;
use dat_core::evd::EvdQueue;
use dat_core::evd::{AsyncHandle, Event, EventData};
use dat_core::mem::{LmrGeneration, MemTable};
use dat_core::provider::{AsyncFact, IaUpcalls, OpenError, OpenRequest, Provider, Transport};
use dat_core::types::{CloseFlags, EvdFlags, EventNumber, IaAttr, ProviderAttr};
use dat_core::{DatError, DatResult};

use crate::cm::{CrInner, SpInner};
use crate::cno::{Cno, CnoInner};
use crate::dyn_arc::DynArc;
use crate::ep::EpInner;
use crate::evd::{Evd, EvdInner};
use crate::mem::{LmrInner, PzInner};
use crate::registry::IaOpenError;
use crate::srq::SrqInner;
use crate::sync::lock;

/// Weak references to every live child of an IA, by id: what `dat_ia_close` tears down and
/// what events name.
#[derive(Default)]
pub(crate) struct Children {
    pub(crate) pzs: HashMap<u32, Weak<PzInner>>,
    pub(crate) lmrs: HashMap<u32, Weak<LmrInner>>,
    pub(crate) evds: HashMap<u32, Weak<EvdInner>>,
    pub(crate) cnos: HashMap<u32, Weak<CnoInner>>,
    pub(crate) eps: HashMap<u32, Weak<EpInner>>,
    pub(crate) sps: HashMap<u32, Weak<SpInner>>,
    pub(crate) crs: HashMap<u32, Arc<CrInner>>,
    pub(crate) srqs: HashMap<u32, Weak<SrqInner>>,
}

impl Children {
    fn live_count(&self) -> usize {
        fn live<T: crate::Freeable>(m: &HashMap<u32, Weak<T>>) -> usize {
            m.values()
                .filter_map(Weak::upgrade)
                .filter(|o| !o.is_freed())
                .count()
        }
        live(&self.pzs)
            + live(&self.lmrs)
            + live(&self.evds)
            + live(&self.cnos)
            + live(&self.eps)
            + live(&self.sps)
            + live(&self.srqs)
    }
}

pub(crate) struct IaInner {
    pub(crate) name: String,
    pub(crate) transport: DynArc<dyn Transport>,
    pub(crate) mem: Arc<RwLock<MemTable>>,
    /// `mem`'s number and count of deregistrations, read by posts without the lock
    /// (`dat_core::mem::post_cache`).
    pub(crate) mem_generation: Arc<LmrGeneration>,
    pub(crate) ia_attr: IaAttr,
    pub(crate) provider_attr: ProviderAttr,
    next_id: AtomicU32,
    pub(crate) children: Mutex<Children>,
    pub(crate) async_evd: Evd,
    closed: AtomicBool,
}

impl IaInner {
    /// A fresh object id, unique for the life of the IA.
    pub(crate) fn next_id(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn check_open(&self) -> DatResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleIa));
        }
        Ok(())
    }

    /// Posts an asynchronous event on the IA's async EVD.
    pub(crate) fn post_async(&self, handle: AsyncHandle, number: EventNumber, reason: i32) {
        self.async_evd.inner.push_async(Event {
            number,
            data: EventData::Async { handle, reason },
        });
    }

    pub(crate) fn children(&self) -> std::sync::MutexGuard<'_, Children> {
        lock(&self.children)
    }
}

/// The IA's upcalls; the weak link is set once the IA exists (the provider opens first).
struct IaLink(std::sync::OnceLock<Weak<IaInner>>);

impl IaUpcalls for IaLink {
    fn async_error(&self, fact: AsyncFact) {
        if let Some(ia) = self.0.get().and_then(Weak::upgrade) {
            let (handle, number, reason) = match fact {
                AsyncFact::Catastrophic => (
                    AsyncHandle::Ia,
                    EventNumber::AsyncIaCatastrophic,
                    dat_core::evd::reason::IA_CATASTROPHIC,
                ),
                AsyncFact::InternalError => (
                    AsyncHandle::Ia,
                    EventNumber::AsyncProviderInternalError,
                    dat_core::evd::reason::IA_OTHER,
                ),
                AsyncFact::EvdOverflow(evd) => (
                    AsyncHandle::Evd(evd),
                    EventNumber::AsyncEvdOverflow,
                    dat_core::evd::reason::EVD_OVERFLOW,
                ),
            };
            tracing::error!(ia = %ia.name, ?fact, "asynchronous IA error");
            ia.post_async(handle, number, reason);
        }
    }

    fn srq(&self, srq: dat_core::types::SrqId, fact: dat_core::provider::SrqFact) {
        if let Some(ia) = self.0.get().and_then(Weak::upgrade) {
            let found = ia.children().srqs.get(&srq.0).and_then(Weak::upgrade);
            if let Some(s) = found {
                crate::srq::on_fact(&ia, &s, fact);
            }
        }
    }
}

/// An open interface adapter (`DAT_IA_HANDLE`).
///
/// Cloning gives another handle to the same IA. Objects created from it keep it alive.
#[derive(Clone)]
pub struct Ia {
    pub(crate) inner: Arc<IaInner>,
}

impl fmt::Debug for Ia {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ia")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Ia {
    pub(crate) fn open(
        provider: &dyn Provider,
        name: &str,
        params: &toml::Table,
        origin: &str,
        async_qlen: i32,
    ) -> Result<Ia, IaOpenError> {
        let table = MemTable::new();
        let mem_generation = Arc::clone(table.generation());
        let mem = Arc::new(RwLock::new(table));
        let link = Arc::new(IaLink(std::sync::OnceLock::new()));
        let req = OpenRequest {
            ia_name: name,
            params,
            origin,
            mem: mem.clone(),
            upcalls: link.clone(),
        };
        let transport = DynArc::new(provider.open(req)?);
        let ia_attr = transport.ia_attr();
        let provider_attr = transport.provider_attr();
        let queue = match EvdQueue::new(async_qlen, EvdFlags::ASYNC, ia_attr.max_evd_qlen, |_| true)
        {
            Ok(q) => q,
            Err(e) => {
                transport.close();
                return Err(OpenError::new(
                    e,
                    format!("IA `{name}`: cannot create an async EVD of {async_qlen} events"),
                )
                .into());
            }
        };
        let inner = Arc::new_cyclic(|weak: &Weak<IaInner>| {
            let async_evd = Evd::from_queue(weak.clone(), transport.clone(), None, 0, queue, true);
            IaInner {
                name: name.to_owned(),
                ia_attr,
                provider_attr,
                transport,
                mem,
                mem_generation,
                next_id: AtomicU32::new(1),
                children: Mutex::new(Children::default()),
                async_evd,
                closed: AtomicBool::new(false),
            }
        });
        let _ = link.0.set(Arc::downgrade(&inner));
        tracing::debug!(ia = name, origin, "IA opened");
        Ok(Ia { inner })
    }

    /// The IA name from the registry.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Adapter attributes (`dat_ia_query` IA part).
    pub fn attr(&self) -> &IaAttr {
        &self.inner.ia_attr
    }

    /// Provider attributes (`dat_ia_query` provider part).
    pub fn provider_attr(&self) -> &ProviderAttr {
        &self.inner.provider_attr
    }

    /// The async EVD created at open.
    pub fn async_evd(&self) -> Evd {
        self.inner.async_evd.clone()
    }

    /// Creates an event dispatcher (`dat_evd_create`).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG2` for `min_qlen <= 0`,
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_TEVD` above `max_evd_qlen`,
    /// `DAT_INVALID_PARAMETER|DAT_INVALID_ARG4` for stream flags that may not share an EVD,
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_CNO` for a freed CNO.
    pub fn create_evd(&self, min_qlen: i32, flags: EvdFlags, cno: Option<&Cno>) -> DatResult<Evd> {
        self.inner.check_open()?;
        Evd::create(&self.inner, min_qlen, flags, cno)
    }

    /// Creates a consumer notification object (`dat_cno_create`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_IA` on a closed IA.
    pub fn create_cno(&self) -> DatResult<Cno> {
        self.inner.check_open()?;
        Ok(Cno::create(&self.inner))
    }

    /// Closes the IA (`dat_ia_close`).
    ///
    /// `Graceful` refuses while children exist; `Abrupt` frees every child first (endpoints
    /// are disconnected abruptly, service points stop listening). The provider's threads are
    /// stopped before this returns.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_IA_IN_USE` for a graceful close with children;
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_IA` if already closed.
    pub fn close(&self, flags: CloseFlags) -> DatResult<()> {
        self.inner.check_open()?;
        if flags == CloseFlags::Graceful && self.inner.children().live_count() > 0 {
            return Err(DatError::invalid_state(Subtype::StateIaInUse));
        }
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleIa));
        }
        crate::teardown::free_children(&self.inner);
        self.inner.transport.close();
        tracing::debug!(ia = %self.inner.name, "IA closed");
        Ok(())
    }

    /// True once [`Ia::close`] succeeded.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// Makes progress on the calling thread (see [`Transport::progress`]); returns whether
    /// anything moved. A thread that calls it in a loop (waiting for an RDMA write to land,
    /// which raises no event) is paced like one polling an EVD: once it has been seen
    /// preempted, a call that moved nothing yields the CPU.
    pub fn progress(&self) -> bool {
        let moved = self.inner.transport.progress();
        if moved {
            crate::pace::busy_poll();
        } else {
            crate::pace::idle_poll();
        }
        moved
    }

    /// Looks up a live endpoint by the id an event names.
    pub fn ep(&self, id: dat_core::types::EpId) -> Option<crate::Ep> {
        let c = self.inner.children();
        c.eps
            .get(&id.0)
            .and_then(Weak::upgrade)
            .map(|inner| crate::Ep { inner })
    }

    /// Looks up a pending connection request by the id an event names.
    pub fn cr(&self, id: dat_core::types::CrId) -> Option<crate::Cr> {
        let c = self.inner.children();
        c.crs.get(&id.0).cloned().map(|inner| crate::Cr { inner })
    }
}

impl Drop for IaInner {
    fn drop(&mut self) {
        if !self.closed.swap(true, Ordering::AcqRel) {
            self.transport.close();
        }
    }
}
