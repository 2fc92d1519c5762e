//! Memory windows: binding an RMR to part of an LMR (`dat_rmr_bind`), its validation, and
//! unbinding. Each bind draws a fresh `rmr_context` (or takes a transport's key), so the old
//! one stops working at once.

use std::sync::Arc;

use super::{Binding, KNOWN_PRIVS, MemTable, Region, effective, privileges};
use crate::error::{DatError, DatResult, Subtype};
use crate::types::{LmrTriplet, MemPriv, PzId, RmrId, VaType};

impl MemTable {
    /// Binds RMR `rmr` (of PZ `pz`) to the range `t` of the LMR `lmr_context` with remote
    /// privileges `privs` (`dat_rmr_bind`); window addresses are virtual addresses. Returns
    /// the new `rmr_context`; the previous one of this RMR stops working at once. A
    /// zero-length `t` unbinds and returns 0. The caller checks that the EP posting the bind
    /// is in `pz` too (same `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4` on mismatch).
    ///
    /// # Errors
    /// See [`MemTable::bind_rmr_va`].
    pub fn bind_rmr(
        &mut self,
        rmr: RmrId,
        pz: PzId,
        lmr_context: u32,
        t: &LmrTriplet,
        privs: MemPriv,
    ) -> DatResult<u32> {
        self.bind_rmr_va(rmr, pz, lmr_context, t, privs, VaType::Va)
    }

    /// [`MemTable::bind_rmr`] with the window's address type: [`VaType::Va`] exposes the
    /// window at its virtual address, [`VaType::ZeroBased`] at offsets from 0. `t` is always in
    /// the LMR's own address space.
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
    pub fn bind_rmr_va(
        &mut self,
        rmr: RmrId,
        pz: PzId,
        lmr_context: u32,
        t: &LmrTriplet,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<u32> {
        self.bind_rmr_keyed(rmr, pz, lmr_context, t, privs, va_type, None)
    }

    /// [`MemTable::bind_rmr_va`] with the key a transport made (a verbs memory window's
    /// rkey) instead of one drawn from this table (`key == None`).
    ///
    /// # Errors
    /// As [`MemTable::bind_rmr_va`], plus `DAT_INTERNAL_ERROR` if `key` is 0 or names a live
    /// registration or window.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_rmr_keyed(
        &mut self,
        rmr: RmrId,
        pz: PzId,
        lmr_context: u32,
        t: &LmrTriplet,
        privs: MemPriv,
        va_type: VaType,
        key: Option<u32>,
    ) -> DatResult<u32> {
        if t.segment_length == 0 {
            self.unbind_rmr(rmr);
            return Ok(0);
        }
        let mut window = self.window(rmr, pz, lmr_context, t, privs, va_type)?;
        let key = match key {
            Some(k) => {
                let old = self.rmrs.get(&rmr).map(|b| b.rmr_context);
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
        self.unbind_rmr(rmr);
        self.rkeys.insert(key, Arc::new(window));
        self.rmrs.insert(
            rmr,
            Binding {
                rmr_context: key,
                lmr_context,
            },
        );
        Ok(key)
    }

    /// Validates a bind of `rmr` to `t` and returns the window it would make (no key yet),
    /// without changing anything (a transport that binds windows itself is asked only for
    /// binds that pass). A zero-length `t` is an unbind and gives `None`.
    ///
    /// # Errors
    /// As [`MemTable::bind_rmr_va`].
    pub fn check_bind(
        &self,
        rmr: RmrId,
        pz: PzId,
        lmr_context: u32,
        t: &LmrTriplet,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<Option<Region>> {
        if t.segment_length == 0 {
            return Ok(None);
        }
        self.window(rmr, pz, lmr_context, t, privs, va_type)
            .map(Some)
    }

    fn window(
        &self,
        rmr: RmrId,
        pz: PzId,
        lmr_context: u32,
        t: &LmrTriplet,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<Region> {
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
