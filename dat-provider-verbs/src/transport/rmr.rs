//! RMRs as type 2 memory windows bound on the endpoint's QP (LMRs, one MR each, are
//! `Transport::register` in the parent module).

use super::*;

impl VerbsIa {
    /// `Transport::bind_rmr`: a type 2 window bound through the endpoint's send queue, its
    /// key usable once the bind has completed (waited for here).
    ///
    /// # Errors
    /// `DAT_MODEL_NOT_SUPPORTED` for a zero-based window or a window over a zero-based LMR
    /// (the window bound before stays); `DAT_INVALID_STATE|DAT_INVALID_STATE_EP_DISCONNECTED`
    /// unless the endpoint is connected (or when the bind fails);
    /// `DAT_INSUFFICIENT_RESOURCES|DAT_RESOURCE_MEMORY_REGION` for an unknown LMR or a window
    /// the device does not give.
    pub(super) fn bind_mw(&self, b: &RmrBind) -> DatResult<Option<u32>> {
        // Windows and zero-based addressing do not combine here (the provider attribute
        // `ZB_RMR_ATTR` says so): mlx5 refuses IBV_ACCESS_ZERO_BASED binds, rxe binds them
        // without bounding remote accesses to the window, and a window's addresses are its
        // MR's I/O addresses, offsets in a zero-based LMR, where an ordinary window is
        // addressed by virtual address. Refused before the previous window is revoked.
        let zero_based_lmr = lock(&self.shared.mrs)
            .get(&b.lmr)
            .is_some_and(Mr::zero_based);
        if b.va_type != VaType::Va || zero_based_lmr {
            return Err(DatError::new(
                ErrorType::ModelNotSupported,
                Subtype::NoSubtype,
            ));
        }
        let ep = self.ep(b.ep)?;
        let not_connected = || DatError::invalid_state(Subtype::StateEpDisconnected);
        let region = || DatError::resources(Subtype::ResourceMemoryRegion);
        // The previous window goes first: its key stops working at once.
        lock(&self.shared.mws).remove(&b.rmr);
        let (id, mw, rkey, cqs) = {
            let mrs = lock(&self.shared.mrs);
            let mr = mrs.get(&b.lmr).ok_or_else(region)?;
            let mw = Mw::alloc(mr.pd()).map_err(|e| {
                tracing::warn!(ia = %self.name, error = %e, "ibv_alloc_mw failed");
                region()
            })?;
            let rkey = mw.next_rkey();
            let mut st = ep.st.lock();
            let qp = st.cm.as_ref().map_or(std::ptr::null_mut(), CmId::qp);
            if qp.is_null() || st.phase != Phase::Connected {
                return Err(not_connected());
            }
            // A sequence number of the send queue: its completion retires the unsignalled
            // requests before it.
            let id = st.sends.next_seq() | WR_BIND;
            // `virtual_address` is in the LMR's own address space: the MR's I/O addresses
            // (offsets, for a zero-based LMR).
            let range = (b.virtual_address, b.length, window_access(b.privs));
            post_bind(qp, id, &mw, rkey, mr, range).map_err(|e| {
                tracing::debug!(ia = %self.name, error = %e, "memory window bind post failed");
                region()
            })?;
            st.sends.skip();
            st.sig.run = 0;
            st.binds.insert(id, None);
            (id, mw, rkey, st.cqs.clone())
        };
        // The key is usable once the bind has executed: wait for its completion (driving
        // the CQ here delivers whatever else completes meanwhile).
        let until = Instant::now() + std::time::Duration::from_secs(10);
        let status = loop {
            if let Some(s) = ep.st.lock().binds.get(&id).copied().flatten() {
                break Some(s);
            }
            if Instant::now() >= until {
                break None;
            }
            if !cqs.iter().any(|c| self.shared.poll_cq(c, false)) {
                std::thread::yield_now();
            }
        };
        ep.st.lock().binds.remove(&id);
        match status {
            Some(dat_core::types::DtoStatus::Success) => {
                lock(&self.shared.mws).insert(b.rmr, mw);
                Ok(Some(rkey))
            }
            other => {
                tracing::debug!(ia = %self.name, ?other, "memory window bind failed");
                Err(not_connected())
            }
        }
    }
}
