//! Consumer notification objects (`DAT_CNO_HANDLE`): one wait for several EVDs. The core's
//! `dat_core::cno::CnoState` decides; this module blocks on a condition variable that the
//! EVDs attached to the CNO signal when they trigger it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use dat_core::cno::CnoState;
use dat_core::error::Subtype;
use dat_core::provider::Transport;
use dat_core::types::{CnoId, EvdId, Timeout};
use dat_core::{DatError, DatResult};

use crate::dyn_arc::DynArc;
use crate::evd::Sleeping;
use crate::ia::IaInner;
use crate::sync::lock;

pub(crate) struct CnoInner {
    pub(crate) id: CnoId,
    /// Told when a waiter sleeps ([`Transport::sleeping`]): nobody drives progress for it.
    transport: DynArc<dyn Transport>,
    pub(crate) state: Mutex<CnoState>,
    cond: Condvar,
    freed: AtomicBool,
}

impl crate::Freeable for CnoInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

impl CnoInner {
    pub(crate) fn trigger(&self, evd: EvdId) {
        if lock(&self.state).trigger(evd) {
            self.cond.notify_all();
        }
    }
}

/// A consumer notification object (`DAT_CNO_HANDLE`): one wait for several EVDs.
#[derive(Clone)]
pub struct Cno {
    pub(crate) inner: Arc<CnoInner>,
}

impl fmt::Debug for Cno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cno").field("id", &self.inner.id).finish()
    }
}

impl Cno {
    pub(crate) fn create(ia: &Arc<IaInner>) -> Cno {
        let id = ia.next_id();
        let cno = Cno {
            inner: Arc::new(CnoInner {
                id: CnoId(id),
                transport: ia.transport.clone(),
                state: Mutex::new(CnoState::new()),
                cond: Condvar::new(),
                freed: AtomicBool::new(false),
            }),
        };
        ia.children().cnos.insert(id, Arc::downgrade(&cno.inner));
        cno
    }

    pub(crate) fn check(&self) -> DatResult<()> {
        if self.inner.freed.load(Ordering::Acquire) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleCno));
        }
        Ok(())
    }

    /// The CNO's id.
    pub fn id(&self) -> CnoId {
        self.inner.id
    }

    /// Waits until an attached, enabled EVD triggers (`dat_cno_wait`); returns that EVD's id
    /// when known.
    ///
    /// # Errors
    /// The CNO timeout code (see `dat_core::cno`) when `timeout` passes; `DAT_INVALID_STATE` if
    /// another thread waits; `DAT_INVALID_STATE|DAT_INVALID_STATE_CNO_DEAD` if freed meanwhile.
    pub fn wait(&self, timeout: Timeout) -> DatResult<Option<EvdId>> {
        self.check()?;
        let deadline = timeout.duration().map(|d| Instant::now() + d);
        let mut st = lock(&self.inner.state);
        st.begin_wait()?;
        // Told before the first sleep, and again that it ended whichever way the wait ends.
        let mut sleeping: Option<Sleeping<'_>> = None;
        loop {
            if let Some(evd) = st.try_complete_wait() {
                st.end_wait();
                return Ok(evd);
            }
            if self.inner.freed.load(Ordering::Acquire) {
                st.end_wait();
                return Err(DatError::invalid_state(Subtype::StateCnoDead));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                st.end_wait();
                return Err(CnoState::timeout_error());
            }
            let slice = deadline.map_or(Duration::from_secs(3600), |d| d - now);
            if sleeping.is_none() {
                sleeping = Some(Sleeping::begin(&*self.inner.transport));
            }
            st = match self.inner.cond.wait_timeout(st, slice) {
                Ok((g, _)) => g,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Frees the CNO (`dat_cno_free`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_CNO_IN_USE` while EVDs are attached.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        let mut st = lock(&self.inner.state);
        st.check_free()?;
        st.kill();
        self.inner.freed.store(true, Ordering::Release);
        self.inner.cond.notify_all();
        Ok(())
    }

    pub(crate) fn free_unchecked(&self) {
        let mut st = lock(&self.inner.state);
        st.kill();
        self.inner.freed.store(true, Ordering::Release);
        self.inner.cond.notify_all();
    }
}
