//! Memory windows: binding an RMR to part of an LMR (`dat_rmr_bind`), its validation, and
//! unbinding. Each bind draws a fresh `rmr_context` (or takes a transport's key), so the old
//! one stops working at once.

use std::sync::Arc;

use super::{Binding, KNOWN_PRIVS, MemTable, Region, effective, privileges};
use crate::error::{DatError, DatResult, Subtype};
use crate::types::{LmrTriplet, MemPriv, PzId, RmrId, VaType};

/// One `dat_rmr_bind` as the memory table validates it: which window, in which PZ, over which
/// range of which LMR, with which remote privileges and address type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowBind {
    /// The window (RMR).
    pub rmr: RmrId,
    /// The RMR's protection zone; the LMR must be in it too.
    pub pz: PzId,
    /// The LMR the window lies in.
    pub lmr_context: u32,
    /// The range, in the LMR's own address space; a zero length unbinds.
    pub range: LmrTriplet,
    /// Remote privileges of the window.
    pub privs: MemPriv,
    /// [`VaType::Va`] exposes the window at its virtual address, [`VaType::ZeroBased`] at
    /// offsets from 0.
    pub va_type: VaType,
}

impl WindowBind {
    /// A bind of `rmr` (of PZ `pz`) to `range` of the LMR `lmr_context`, exposed at its virtual
    /// address.
    pub fn new(rmr: RmrId, pz: PzId, lmr_context: u32, range: LmrTriplet, privs: MemPriv) -> Self {
        Self {
            rmr,
            pz,
            lmr_context,
            range,
            privs,
            va_type: VaType::Va,
        }
    }

    /// The same bind with address type `va_type`.
    pub fn with_va_type(self, va_type: VaType) -> Self {
        Self { va_type, ..self }
    }
}

impl MemTable {
    /// Binds a window (`dat_rmr_bind`) and returns its new `rmr_context`; the previous one of
    /// this RMR stops working at once. A zero-length range unbinds and returns 0. The caller
    /// checks that the EP posting the bind is in the same PZ (same `DAT_INVALID_PARAMETER |
    /// DAT_INVALID_ARG4` on mismatch).
    ///
    /// # Errors
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4`: unknown privilege bits, or LMR and RMR in
    ///   different PZs.
    /// * `DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR`: no live LMR has `lmr_context`.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`: range not inside the LMR.
    /// * `DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_READ`: `REMOTE_READ` on an LMR
    ///   without `LOCAL_READ`; `| DAT_PRIVILEGES_RDMA_WRITE`: `REMOTE_WRITE` or
    ///   `REMOTE_ATOMIC` on an LMR without `LOCAL_WRITE`.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY_REGION`: no fresh key.
    pub fn bind_rmr(&mut self, b: &WindowBind) -> DatResult<u32> {
        self.bind_rmr_keyed(b, None)
    }

    /// [`MemTable::bind_rmr`] with the key a transport made (a verbs memory window's
    /// rkey) instead of one drawn from this table (`key == None`).
    ///
    /// # Errors
    /// As [`MemTable::bind_rmr`], plus `DAT_INTERNAL_ERROR` if `key` is 0 or names a live
    /// registration or window.
    pub fn bind_rmr_keyed(&mut self, b: &WindowBind, key: Option<u32>) -> DatResult<u32> {
        if b.range.segment_length == 0 {
            self.unbind_rmr(b.rmr);
            return Ok(0);
        }
        let mut window = self.window(b)?;
        let key = match key {
            Some(k) => {
                let old = self.rmrs.get(&b.rmr).map(|b| b.rmr_context);
                if k == 0 || (Some(k) != old && self.rkeys.contains_key(&k)) {
                    return Err(DatError::new(
                        crate::error::ErrorType::InternalError,
                        crate::error::Subtype::NoSubtype,
                    ));
                }
                k
            }
            // Drawn while the old key is still live, so the new one always differs from it.
            None => self.fresh_key()?,
        };
        window.rmr_context = Some(key);
        self.unbind_rmr(b.rmr);
        self.rkeys.insert(key, Arc::new(window));
        self.rmrs.insert(
            b.rmr,
            Binding {
                rmr_context: key,
                lmr_context: b.lmr_context,
            },
        );
        Ok(key)
    }

    /// Validates a bind and returns the window it would make (no key yet), without changing
    /// anything (a transport that binds windows itself is asked only for binds that pass). A
    /// zero-length range is an unbind and gives `None`.
    ///
    /// # Errors
    /// As [`MemTable::bind_rmr`].
    pub fn check_bind(&self, b: &WindowBind) -> DatResult<Option<Region>> {
        if b.range.segment_length == 0 {
            return Ok(None);
        }
        self.window(b).map(Some)
    }

    fn window(&self, b: &WindowBind) -> DatResult<Region> {
        let WindowBind {
            rmr,
            pz,
            lmr_context,
            range: t,
            privs,
            va_type,
        } = *b;
        if !KNOWN_PRIVS.contains(privs) {
            return Err(DatError::invalid_arg(4));
        }
        let lmr = self
            .lmrs
            .get(&lmr_context)
            .ok_or(DatError::invalid_handle(Subtype::InvalidHandleLmr))?;
        if lmr.pz != pz {
            return Err(DatError::invalid_arg(4));
        }
        let len = u64::from(t.segment_length);
        let offset = lmr
            .resolve(t.virtual_address, len)
            .ok_or(DatError::invalid_arg(2))?;
        if privs.contains(MemPriv::REMOTE_READ)
            && !effective(lmr.privs).contains(MemPriv::LOCAL_READ)
        {
            return Err(privileges(MemPriv::REMOTE_READ));
        }
        if privs.intersects(MemPriv::REMOTE_WRITE | MemPriv::REMOTE_ATOMIC)
            && !lmr.privs.contains(MemPriv::LOCAL_WRITE)
        {
            return Err(privileges(MemPriv::REMOTE_WRITE));
        }
        let start = match va_type {
            VaType::Va => lmr
                .buf
                .addr()
                .checked_add(offset as u64)
                .filter(|s| s.checked_add(len).is_some())
                .ok_or(DatError::invalid_arg(2))?,
            VaType::ZeroBased => 0,
        };
        Ok(Region {
            pz,
            buf: Arc::clone(&lmr.buf),
            pin: lmr.pin.clone(),
            offset,
            start,
            len,
            privs,
            va_type,
            lmr_context,
            rmr_context: None,
            lmr: lmr.lmr,
            rmr: Some(rmr),
        })
    }

    /// Unbinds RMR `rmr` (also what `dat_rmr_free` does): its `rmr_context` stops working.
    /// Nothing happens if it is not bound.
    pub fn unbind_rmr(&mut self, rmr: RmrId) {
        if let Some(b) = self.rmrs.remove(&rmr) {
            self.rkeys.remove(&b.rmr_context);
            self.keys.retire(b.rmr_context);
        }
    }

    /// The window RMR `rmr` is bound to, if any (`dat_rmr_query`).
    pub fn rmr_binding(&self, rmr: RmrId) -> Option<Arc<Region>> {
        self.rmrs
            .get(&rmr)
            .and_then(|b| self.rkeys.get(&b.rmr_context))
            .cloned()
    }

    /// Number of bound RMRs.
    pub fn bound_rmrs(&self) -> usize {
        self.rmrs.len()
    }
}
