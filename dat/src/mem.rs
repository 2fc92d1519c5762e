//! Protection zones and registered memory.
//!
//! Registered memory is a [`Buffer`]: a stable allocation shared (`Arc`) between the
//! application, the LMR and every post that names it, so memory a transfer uses cannot be
//! freed under it. Access is copy-in/copy-out ([`Lmr::write`], [`Lmr::read`]): no `&mut [u8]`
//! ever aliases memory a peer may be writing with RDMA.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use dat_core::error::Subtype;
use dat_core::mem::{Buffer, Region, WindowBind};
use dat_core::types::{LmrId, LmrTriplet, MemPriv, PzId, RmrTriplet, VaType};
use dat_core::{DatError, DatResult};

use crate::ia::{Ia, IaInner};
use crate::sync::write;

pub(crate) struct PzInner {
    pub(crate) id: PzId,
    pub(crate) ia: Arc<IaInner>,
    /// DAT references: EPs, LMRs, RMRs and SRQs in this PZ.
    pub(crate) refs: AtomicU32,
    freed: AtomicBool,
}

impl crate::Freeable for PzInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// A protection zone (`DAT_PZ_HANDLE`): endpoints may only use memory of their own PZ, locally
/// and remotely.
#[derive(Clone)]
pub struct Pz {
    pub(crate) inner: Arc<PzInner>,
}

impl fmt::Debug for Pz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pz").field("id", &self.inner.id).finish()
    }
}

impl Ia {
    /// Creates a protection zone (`dat_pz_create`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_IA` on a closed IA;
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_PROTECTION_DOMAIN` from the transport.
    pub fn create_pz(&self) -> DatResult<Pz> {
        self.inner.check_open()?;
        let id = PzId(self.inner.next_id());
        self.inner.transport.create_pz(id)?;
        let inner = Arc::new(PzInner {
            id,
            ia: self.inner.clone(),
            refs: AtomicU32::new(0),
            freed: AtomicBool::new(false),
        });
        self.inner
            .children()
            .pzs
            .insert(id.0, Arc::downgrade(&inner));
        Ok(Pz { inner })
    }
}

impl Pz {
    pub(crate) fn check(&self) -> DatResult<()> {
        if crate::Freeable::is_freed(&*self.inner) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandlePz));
        }
        Ok(())
    }

    /// The PZ's id.
    pub fn id(&self) -> PzId {
        self.inner.id
    }

    /// Allocates `len` zeroed bytes aligned to the provider's optimal alignment and registers
    /// them (`dat_lmr_create` on memory the library owns).
    ///
    /// # Errors
    /// As [`Pz::register`]; `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY` if the allocation
    /// fails.
    pub fn alloc(&self, len: usize, privs: MemPriv) -> DatResult<Lmr> {
        let align = self.inner.ia.provider_attr.optimal_buffer_alignment.max(64) as usize;
        let buf = Arc::new(Buffer::alloc(len, align)?);
        self.register(buf, privs, VaType::Va)
    }

    /// Registers `buf` (`dat_lmr_create`, `DAT_MEM_TYPE_VIRTUAL`). An `rmr_context` is made
    /// only when a remote privilege is requested.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_PZ` on a freed PZ; the codes of
    /// `dat_core::mem::MemTable::register` for bad privileges; transport errors such as
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY_REGION`.
    pub fn register(&self, buf: Arc<Buffer>, privs: MemPriv, va_type: VaType) -> DatResult<Lmr> {
        self.check()?;
        let ia = &self.inner.ia;
        ia.check_open()?;
        let id = LmrId(ia.next_id());
        let keys = ia
            .transport
            .register(id, self.inner.id, &buf, privs, va_type)?;
        let region = {
            let mut mem = write(&ia.mem);
            match keys {
                None => mem.register(id, self.inner.id, buf, privs, va_type),
                Some(k) => mem.register_with_keys(
                    id,
                    self.inner.id,
                    buf,
                    privs,
                    va_type,
                    k.lmr_context,
                    k.rmr_context,
                ),
            }
        };
        let region = match region {
            Ok(r) => r,
            Err(e) => {
                ia.transport.deregister(id);
                return Err(e);
            }
        };
        self.inner.refs.fetch_add(1, Ordering::AcqRel);
        let inner = Arc::new(LmrInner {
            id,
            pz: self.clone(),
            region,
            freed: AtomicBool::new(false),
        });
        ia.children().lmrs.insert(id.0, Arc::downgrade(&inner));
        Ok(Lmr { inner })
    }

    /// Frees the PZ (`dat_pz_free`).
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|DAT_INVALID_STATE_PZ_IN_USE` while EPs, LMRs, RMRs or SRQs use it;
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_PZ` if already freed.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        if self.inner.refs.load(Ordering::Acquire) > 0 {
            return Err(DatError::invalid_state(Subtype::StatePzInUse));
        }
        self.free_unchecked();
        Ok(())
    }

    pub(crate) fn free_unchecked(&self) {
        if !self.inner.freed.swap(true, Ordering::AcqRel) {
            self.inner.ia.transport.free_pz(self.inner.id);
            self.inner.ia.children().pzs.remove(&self.inner.id.0);
        }
    }
}

pub(crate) struct LmrInner {
    pub(crate) id: LmrId,
    pz: Pz,
    region: Arc<Region>,
    freed: AtomicBool,
}

impl crate::Freeable for LmrInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// A local memory region (`DAT_LMR_HANDLE`): registered memory with its local and remote keys.
#[derive(Clone)]
pub struct Lmr {
    pub(crate) inner: Arc<LmrInner>,
}

impl fmt::Debug for Lmr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lmr")
            .field("id", &self.inner.id)
            .field("lmr_context", &self.inner.region.lmr_context)
            .field("len", &self.inner.region.len)
            .finish()
    }
}

/// `DAT_LMR_PARAM`: what `dat_lmr_query` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LmrParam {
    /// The PZ.
    pub pz: PzId,
    /// Registered start (virtual address, or 0 for zero-based).
    pub registered_address: u64,
    /// Registered size.
    pub registered_size: u64,
    /// Privileges.
    pub privs: MemPriv,
    /// Local key.
    pub lmr_context: u32,
    /// Remote key, when remote access was requested.
    pub rmr_context: Option<u32>,
}

impl Lmr {
    /// The id events and queries use for this LMR.
    pub fn id(&self) -> LmrId {
        self.inner.id
    }

    fn check(&self) -> DatResult<()> {
        if crate::Freeable::is_freed(&*self.inner) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleLmr));
        }
        Ok(())
    }

    /// The local key (`lmr_context`) that names this memory in posts.
    pub fn lmr_context(&self) -> u32 {
        self.inner.region.lmr_context
    }

    /// The remote key (`rmr_context`), if remote access was requested.
    pub fn rmr_context(&self) -> Option<u32> {
        self.inner.region.rmr_context
    }

    /// The registered start address (what triplets name).
    pub fn address(&self) -> u64 {
        self.inner.region.start
    }

    /// The registered length in bytes.
    pub fn len(&self) -> u64 {
        self.inner.region.len
    }

    /// True for a zero-length registration.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory itself.
    pub fn buffer(&self) -> &Arc<Buffer> {
        &self.inner.region.buf
    }

    /// A local triplet for `len` bytes at `offset` (no check here; posts check).
    pub fn triplet(&self, offset: u64, len: u32) -> LmrTriplet {
        LmrTriplet {
            virtual_address: self.address().wrapping_add(offset),
            segment_length: len,
            lmr_context: self.lmr_context(),
        }
    }

    /// A remote triplet for `len` bytes at `offset`, to hand to a peer for RDMA
    /// (`rmr_context` 0 if remote access was not requested: every access with it fails).
    pub fn rmr_triplet(&self, offset: u64, len: u32) -> RmrTriplet {
        RmrTriplet {
            virtual_address: self.address().wrapping_add(offset),
            segment_length: len,
            rmr_context: self.rmr_context().unwrap_or(0),
        }
    }

    /// Copies `src` into the region at `offset`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` if the range is outside the region.
    pub fn write(&self, offset: usize, src: &[u8]) -> DatResult<()> {
        self.inner.region.buf.write_at(offset, src)
    }

    /// Copies from the region at `offset` into `dst`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` if the range is outside the region.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> DatResult<()> {
        self.inner.region.buf.read_at(offset, dst)
    }

    /// A copy of the whole region.
    pub fn to_vec(&self) -> Vec<u8> {
        self.inner.region.buf.to_vec()
    }

    /// Parameters (`dat_lmr_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_LMR` on a freed LMR.
    pub fn query(&self) -> DatResult<LmrParam> {
        self.check()?;
        let r = &self.inner.region;
        Ok(LmrParam {
            pz: self.inner.pz.inner.id,
            registered_address: r.start,
            registered_size: r.len,
            privs: r.privs,
            lmr_context: r.lmr_context,
            rmr_context: r.rmr_context,
        })
    }

    /// Deregisters (`dat_lmr_free`). The keys stop working at once; memory in use by a post
    /// stays allocated until that post completes.
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_LMR` if already freed; the codes of
    /// `dat_core::mem::MemTable::deregister` while RMRs are bound.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        let ia = &self.inner.pz.inner.ia;
        write(&ia.mem).deregister(self.inner.region.lmr_context)?;
        self.release(ia);
        Ok(())
    }

    fn release(&self, ia: &IaInner) {
        if !self.inner.freed.swap(true, Ordering::AcqRel) {
            ia.transport.deregister(self.inner.id);
            self.inner.pz.inner.refs.fetch_sub(1, Ordering::AcqRel);
            ia.children().lmrs.remove(&self.inner.id.0);
        }
    }

    pub(crate) fn free_unchecked(&self) {
        let ia = self.inner.pz.inner.ia.clone();
        let _ = write(&ia.mem).deregister(self.inner.region.lmr_context);
        self.release(&ia);
    }
}

pub(crate) struct RmrInner {
    pub(crate) id: dat_core::types::RmrId,
    pz: Pz,
    bound: std::sync::Mutex<Option<u32>>,
    freed: AtomicBool,
}

impl crate::Freeable for RmrInner {
    fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }
}

/// A remote memory region (`DAT_RMR_HANDLE`): a memory window that exposes a sub-range of an
/// LMR under its own remote key, revocable by rebinding or freeing.
#[derive(Clone)]
pub struct Rmr {
    pub(crate) inner: Arc<RmrInner>,
}

impl fmt::Debug for Rmr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rmr").field("id", &self.inner.id).finish()
    }
}

/// `DAT_RMR_PARAM`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RmrParam {
    /// The RMR's PZ.
    pub pz: PzId,
    /// The current remote key, while bound.
    pub rmr_context: Option<u32>,
}

impl Pz {
    /// Creates an unbound memory window in this PZ (`dat_rmr_create`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_PZ` on a freed PZ.
    pub fn create_rmr(&self) -> DatResult<Rmr> {
        self.check()?;
        let id = dat_core::types::RmrId(self.inner.ia.next_id());
        self.inner.refs.fetch_add(1, Ordering::AcqRel);
        Ok(Rmr {
            inner: Arc::new(RmrInner {
                id,
                pz: self.clone(),
                bound: std::sync::Mutex::new(None),
                freed: AtomicBool::new(false),
            }),
        })
    }
}

impl Rmr {
    /// The id `DAT_RMR_BIND_COMPLETION_EVENT`s name this window by.
    pub fn id(&self) -> dat_core::types::RmrId {
        self.inner.id
    }

    fn check(&self) -> DatResult<()> {
        if crate::Freeable::is_freed(&*self.inner) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleRmr));
        }
        Ok(())
    }

    /// The current remote key, while bound.
    pub fn rmr_context(&self) -> Option<u32> {
        *crate::sync::lock(&self.inner.bound)
    }

    /// Binds the window to `triplet` of `lmr` with `privs`, through `ep`
    /// (`dat_rmr_bind`). Returns the new `rmr_context`; the previous one stops working at once.
    /// A `segment_length` of 0 unbinds (and returns 0). The completion
    /// (`DAT_RMR_BIND_COMPLETION_EVENT`) arrives on the EP's request EVD unless suppressed.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE|<state>` unless the EP is connected (in `DISCONNECTED` the bind
    /// completes as flushed and nothing is bound); `DAT_INVALID_STATE|EP_EVD_REQUEST` if the
    /// EP's request EVD does not take the RMR bind stream; `DAT_INVALID_PARAMETER|DAT_INVALID_ARG4`
    /// when the EP, the LMR and the RMR are not in one PZ; the codes of
    /// `dat_core::mem::MemTable::bind_rmr` (range `ARG2`, privileges
    /// `DAT_PRIVILEGES_VIOLATION`).
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        privs: MemPriv,
        va_type: VaType,
        ep: &crate::Ep,
        cookie: dat_core::types::Cookie,
        flags: dat_core::types::CompletionFlags,
    ) -> DatResult<u32> {
        use dat_core::ep::state::{Actions, Input, transition};
        use dat_core::evd::{Event, Signal};
        use dat_core::types::{CompletionFlags, DtoStatus};
        self.check()?;
        lmr.check()?;
        ep.inner.check()?;
        let (out, ep_pz, evd) = {
            let core = ep.inner.core.lock();
            let out = transition(core.state, Input::RmrBind);
            out.result?;
            (out, core.cfg.pz, core.request_evd.clone())
        };
        if !evd.as_ref().is_some_and(|e| {
            e.inner
                .flags()
                .contains(dat_core::types::EvdFlags::RMR_BIND)
        }) {
            return Err(DatError::invalid_state(Subtype::StateEpEvdRequest));
        }
        let pz = self.inner.pz.inner.id;
        if ep_pz != Some(pz) || lmr.inner.pz.inner.id != pz {
            return Err(DatError::invalid_arg(4));
        }
        let complete = |status: DtoStatus| {
            if let Some(evd) = &evd
                && !(status == DtoStatus::Success && flags.contains(CompletionFlags::SUPPRESS))
            {
                evd.inner.push(
                    Event::rmr_bind(self.inner.id, cookie, status),
                    Signal::Normal,
                );
            }
        };
        if out.actions.contains(Actions::FLUSH_THIS_POST) {
            complete(DtoStatus::Flushed);
            return Ok(0);
        }
        let ia = &self.inner.pz.inner.ia;
        let (rmr, lmr_context) = (self.inner.id, lmr.lmr_context());
        // Validated first; a transport that binds windows itself (verbs) is asked only then,
        // with no lock held, and its key installed.
        let bind = WindowBind::new(rmr, pz, lmr_context, triplet, privs).with_va_type(va_type);
        let window = crate::sync::read(&ia.mem).check_bind(&bind)?;
        let key = match &window {
            None => {
                ia.transport.unbind_rmr(rmr);
                None
            }
            Some(_) => ia.transport.bind_rmr(&dat_core::provider::RmrBind {
                rmr,
                ep: ep.inner.id,
                lmr: lmr.inner.id,
                virtual_address: triplet.virtual_address,
                length: u64::from(triplet.segment_length),
                privs,
                va_type,
            })?,
        };
        let ctx = write(&ia.mem).bind_rmr_keyed(&bind, key).inspect_err(|_| {
            if key.is_some() {
                ia.transport.unbind_rmr(rmr);
            }
        })?;
        *crate::sync::lock(&self.inner.bound) = (triplet.segment_length != 0).then_some(ctx);
        complete(DtoStatus::Success);
        Ok(ctx)
    }

    /// Parameters (`dat_rmr_query`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_RMR` on a freed RMR.
    pub fn query(&self) -> DatResult<RmrParam> {
        self.check()?;
        Ok(RmrParam {
            pz: self.inner.pz.inner.id,
            rmr_context: self.rmr_context(),
        })
    }

    /// Unbinds and destroys the window (`dat_rmr_free`).
    ///
    /// # Errors
    /// `DAT_INVALID_HANDLE|DAT_INVALID_HANDLE_RMR` if already freed.
    pub fn free(&self) -> DatResult<()> {
        self.check()?;
        if !self.inner.freed.swap(true, Ordering::AcqRel) {
            write(&self.inner.pz.inner.ia.mem).unbind_rmr(self.inner.id);
            self.inner.pz.inner.ia.transport.unbind_rmr(self.inner.id);
            self.inner.pz.inner.refs.fetch_sub(1, Ordering::AcqRel);
        }
        Ok(())
    }
}
