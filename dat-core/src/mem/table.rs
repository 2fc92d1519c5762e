//! [`MemTable`]: the LMRs and RMR bindings of one IA, and every protection check of reference
//! 6.1–6.3 and 6.7 in one place, so all providers enforce what InfiniBand hardware enforces.
//!
//! # Decisions where the reference leaves room
//!
//! Registration (`dat_lmr_create`, [`MemTable::register`]):
//! * Privilege bits other than `LOCAL_READ`, `REMOTE_READ`, `LOCAL_WRITE`, `REMOTE_WRITE` and
//!   `REMOTE_ATOMIC` → `DAT_INVALID_PARAMETER | DAT_INVALID_ARG6` (privileges are argument 6).
//!   Combinations are not restricted: verbs' "remote write needs local write" is a rule of the
//!   verbs API, not of DAT, and each privilege is checked on its own at use.
//! * A zero-length buffer → `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4` (length): it could
//!   never be named by a non-empty segment.
//! * A VA registration whose `address + length` does not fit in 64 bits →
//!   `DAT_INVALID_PARAMETER | DAT_INVALID_ARG3` (region description).
//! * An `rmr_context` is generated only when a remote privilege was requested; it is random
//!   in all 32 bits. An `lmr_context` this table draws names a slot of its direct index in its
//!   low 12 bits, the other 20 random (it only ever names memory to this process's own
//!   posts; see the `direct` module).
//!
//! Deregistration (`dat_lmr_free`, [`MemTable::deregister`]):
//! * Unknown `lmr_context` → `DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR`.
//! * RMRs still bound to it → `DAT_INVALID_STATE | DAT_INVALID_STATE_LMR_IN_USE` *with* the
//!   error class (OFA returns a bare `DAT_INVALID_STATE`; consumers compare `DAT_GET_TYPE`,
//!   which is the same, and the subtype tells them why).
//!
//! Local segments of a post ([`MemTable::local`], [`MemTable::local_iov`]), checked in this
//! order:
//! 1. `segment_length == 0`: legal, the other fields are ignored (6.3). `local` returns an
//!    empty segment without looking the key up; `local_iov` leaves such segments out.
//! 2. More triplets than the EP allows → `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`
//!    (`num_segments` is argument 2 of every post call).
//! 3. `lmr_context` names no live LMR (never registered, or freed) →
//!    `DAT_PROTECTION_VIOLATION`, like an LMR of another PZ: both mean "this key does not name
//!    memory this EP may use" (reference 2.2; on IB both are a local protection error).
//! 4. LMR in another PZ than the EP → `DAT_PROTECTION_VIOLATION`.
//! 5. Range not inside the registration (computed without overflow; `address + length`
//!    wrapping around is outside) → `DAT_INVALID_PARAMETER | DAT_INVALID_ARG3` (`local_iov`
//!    is argument 3 of every post call).
//! 6. A needed privilege missing → `DAT_PRIVILEGES_VIOLATION`.
//!
//! The subtypes of 3–6 name the access: `LOCAL_READ` (send, RDMA write source) → `_READ`,
//! `LOCAL_WRITE` (receive, RDMA read sink) → `_WRITE`, `REMOTE_READ` → `_RDMA_READ`,
//! `REMOTE_WRITE`/`REMOTE_ATOMIC` → `_RDMA_WRITE`; for a missing privilege the first missing
//! one in that order, for a protection error the first needed one.
//! `DAT_LENGTH_ERROR` depends on the EP and the remote triplet, so it is the caller's check;
//! [`check_length`](super::check_length) implements it.
//!
//! Incoming RDMA ([`MemTable::remote`]): unknown or stale rkey, rkey of another PZ than the
//! EP the request arrived on, range outside the LMR or window (overflow-safe), or a missing
//! `REMOTE_READ` / `REMOTE_WRITE` → `Err(DtoStatus::RemoteAccess)`, which the requester
//! reports as `DAT_DTO_ERR_REMOTE_ACCESS` (2.7). A zero-length access is legal but still needs
//! a valid rkey, the right PZ and the privilege; its address must lie in the region or at its
//! exact end.
//!
//! RMR binding ([`MemTable::bind_rmr`], 6.7): `segment_length == 0` unbinds (other fields
//! ignored, returns 0, which is never a key). Otherwise, in order: unknown privilege bits →
//! `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4`; unknown `lmr_context` →
//! `DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR`; LMR and RMR in different PZs →
//! `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4` (as OFA); range not inside the LMR →
//! `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2` (as OFA); `REMOTE_READ` on an LMR without
//! `LOCAL_READ` → `DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_READ`; `REMOTE_WRITE` or
//! `REMOTE_ATOMIC` on an LMR without `LOCAL_WRITE` →
//! `DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_RDMA_WRITE`. A failed bind leaves an existing
//! binding in place; a successful one revokes the RMR's previous `rmr_context` at once.

use std::fmt;
use std::sync::Arc;

use super::buffer::Buffer;
use super::direct::{Direct, SLOT_BITS};
use super::generation::LmrGeneration;
use super::keys::KeyGen;
use super::pin::SegBuf;
use super::segment::{SegList, Segment};
use crate::error::{DatError, DatResult, ErrorType, Subtype};
use crate::idmap::IdMap;
use crate::types::{DtoStatus, LmrId, LmrTriplet, MemPriv, PzId, RmrId, VaType};

/// Every privilege bit DAT 2.0 (with the IB atomic extension) defines.
const KNOWN_PRIVS: MemPriv = MemPriv::LOCAL_READ
    .union(MemPriv::REMOTE_READ)
    .union(MemPriv::LOCAL_WRITE)
    .union(MemPriv::REMOTE_WRITE)
    .union(MemPriv::REMOTE_ATOMIC);

/// A registered range: an LMR, or an RMR (memory window) bound to a sub-range of one.
#[derive(Debug)]
pub struct Region {
    /// The protection zone of the LMR (or of the RMR, for a window).
    pub pz: PzId,
    /// The memory.
    pub buf: Arc<Buffer>,
    /// The reference every segment in this region takes ([`SegBuf::take`]).
    pub pin: SegBuf,
    /// Offset in `buf` of the byte at address `start` (0 for an LMR; a window's offset).
    pub offset: usize,
    /// The registered address of the first byte: `buf.addr()` (plus `offset`) for
    /// `DAT_VA_TYPE_VA`, 0 for zero-based registrations.
    pub start: u64,
    /// Length in bytes.
    pub len: u64,
    /// The privileges granted.
    pub privs: MemPriv,
    /// How addresses are interpreted (virtual addresses, or offsets from 0).
    pub va_type: VaType,
    /// The LMR's local key (for a window: the key of the LMR it is bound to).
    pub lmr_context: u32,
    /// The remote key: for an LMR only if a remote privilege was requested; for a window the
    /// key of the current binding.
    pub rmr_context: Option<u32>,
    /// The LMR (for a window: the LMR it is bound to).
    pub lmr: LmrId,
    /// For a window, the RMR; `None` for an LMR.
    pub rmr: Option<RmrId>,
}

impl Region {
    /// The buffer offset of `addr..addr+len`, or `None` if that range is not inside the
    /// region. Overflow-safe: a range whose end wraps around 2^64 is outside.
    #[inline]
    pub fn resolve(&self, addr: u64, len: u64) -> Option<usize> {
        let rel = addr.checked_sub(self.start)?;
        let room = self.len.checked_sub(rel)?;
        if len > room {
            return None;
        }
        usize::try_from(rel).ok()?.checked_add(self.offset)
    }

    /// The segment of the non-empty local triplet `t` (whose key names this LMR) if a post on
    /// an EP in `ep_pz` needing `need` may use it: the checks of
    /// [`MemTable::try_local`] once the LMR is found.
    #[inline(always)]
    pub fn try_local(&self, ep_pz: PzId, t: &LmrTriplet, need: MemPriv) -> Option<Segment> {
        self.local_offset(ep_pz, t, need)?;
        self.segment(
            t.virtual_address,
            u64::from(t.segment_length),
            t.lmr_context,
        )
    }

    /// The buffer offset of the non-empty local triplet `t` (whose key names this LMR) if a
    /// post on an EP in `ep_pz` needing `need` may use it (PZ, privilege, range).
    #[inline(always)]
    pub(crate) fn local_offset(&self, ep_pz: PzId, t: &LmrTriplet, need: MemPriv) -> Option<usize> {
        if self.pz != ep_pz || !effective(self.privs).contains(need) {
            return None;
        }
        self.resolve(t.virtual_address, u64::from(t.segment_length))
    }

    /// The segment for `addr..addr+len` named by key `lkey`, if the range is inside.
    #[inline(always)]
    fn segment(&self, addr: u64, len: u64, lkey: u32) -> Option<Segment> {
        let offset = self.resolve(addr, len)?;
        Some(Segment {
            buf: self.pin.take(),
            offset,
            len: usize::try_from(len).ok()?,
            lkey,
            addr,
        })
    }
}

/// The current binding of one RMR.
#[derive(Debug, Clone, Copy)]
struct Binding {
    rmr_context: u32,
    lmr_context: u32,
}

/// The LMRs and RMR bindings of one IA: `lmr_context` → LMR, `rmr_context` → LMR or window,
/// `RmrId` → binding. See the [module documentation](self) for the rules and codes.
pub struct MemTable {
    lmrs: IdMap<u32, Arc<Region>>,
    /// The same LMRs by key slot, for the post path.
    direct: Direct,
    rkeys: IdMap<u32, Arc<Region>>,
    rmrs: IdMap<RmrId, Binding>,
    keys: KeyGen,
    empty: SegBuf,
    /// Counts the deregistrations, for lookups made without the lock ([`MemTable::generation`]).
    generation: Arc<LmrGeneration>,
}

impl Default for MemTable {
    fn default() -> MemTable {
        MemTable::new()
    }
}

impl fmt::Debug for MemTable {
    /// Counts only: keys are secrets.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemTable")
            .field("lmrs", &self.lmrs.len())
            .field("rkeys", &self.rkeys.len())
            .field("bound_rmrs", &self.rmrs.len())
            .finish()
    }
}

/// The privileges a registration actually grants: what was requested plus LOCAL_READ, which
/// InfiniBand grants every registration implicitly. Consumers written for IB (the stock `dtest`
/// among them) send from memory registered without it, and must work here too.
fn effective(privs: MemPriv) -> MemPriv {
    privs | MemPriv::LOCAL_READ
}

/// The subtype, among `[read, write, rdma_read, rdma_write]`, of the first access in `privs`
/// (LOCAL_READ, LOCAL_WRITE, REMOTE_READ, then REMOTE_WRITE or REMOTE_ATOMIC).
fn access_subtype(privs: MemPriv, subs: [Subtype; 4]) -> Subtype {
    let order = [
        MemPriv::LOCAL_READ,
        MemPriv::LOCAL_WRITE,
        MemPriv::REMOTE_READ,
        MemPriv::REMOTE_WRITE | MemPriv::REMOTE_ATOMIC,
    ];
    order
        .iter()
        .zip(subs)
        .find(|(p, _)| privs.intersects(**p))
        .map_or(Subtype::NoSubtype, |(_, s)| s)
}

/// `DAT_PROTECTION_VIOLATION` with the subtype of the first needed access.
fn protection(need: MemPriv) -> DatError {
    use Subtype::{ProtectionRdmaRead, ProtectionRdmaWrite, ProtectionRead, ProtectionWrite};
    let subs = [
        ProtectionRead,
        ProtectionWrite,
        ProtectionRdmaRead,
        ProtectionRdmaWrite,
    ];
    DatError::new(ErrorType::ProtectionViolation, access_subtype(need, subs))
}

/// `DAT_PRIVILEGES_VIOLATION` with the subtype of the first missing privilege.
fn privileges(missing: MemPriv) -> DatError {
    use Subtype::{PrivilegesRdmaRead, PrivilegesRdmaWrite, PrivilegesRead, PrivilegesWrite};
    let subs = [
        PrivilegesRead,
        PrivilegesWrite,
        PrivilegesRdmaRead,
        PrivilegesRdmaWrite,
    ];
    DatError::new(
        ErrorType::PrivilegesViolation,
        access_subtype(missing, subs),
    )
}

/// `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY_REGION`: no fresh key could be drawn.
const NO_KEY: DatError = DatError::resources(Subtype::ResourceMemoryRegion);

impl MemTable {
    /// An empty table whose keys come from a CSPRNG seeded by the operating system.
    pub fn new() -> MemTable {
        MemTable::with_keys(KeyGen::from_entropy())
    }

    /// An empty table with a reproducible key sequence, for deterministic tests only (its
    /// keys are predictable; never use it for memory a real peer can reach).
    #[cfg(any(test, feature = "testing"))]
    pub fn with_seed(seed: u64) -> MemTable {
        MemTable::with_keys(KeyGen::from_seed(seed))
    }

    fn with_keys(keys: KeyGen) -> MemTable {
        MemTable {
            lmrs: IdMap::default(),
            direct: Direct::default(),
            rkeys: IdMap::default(),
            rmrs: IdMap::default(),
            keys,
            // A zero-length buffer owns no memory; sharing one avoids allocating per empty
            // segment.
            empty: SegBuf::new(Arc::new(Buffer::from_vec(Vec::new()))),
            generation: Arc::new(LmrGeneration::new()),
        }
    }

    /// The table's number and count of deregistrations, which a post path may read without
    /// the lock to reuse an LMR it found with [`MemTable::find_local`] (see
    /// [`LmrGeneration`]).
    pub fn generation(&self) -> &Arc<LmrGeneration> {
        &self.generation
    }

    /// A fresh key, unique among the live local and remote keys.
    fn fresh_key(&mut self) -> DatResult<u32> {
        let (lmrs, rkeys) = (&self.lmrs, &self.rkeys);
        self.keys
            .next(|k| lmrs.contains_key(&k) || rkeys.contains_key(&k))
            .ok_or(NO_KEY)
    }

    /// Registers `buf` as LMR `lmr` in `pz` (`dat_lmr_create`). Returns the region with its
    /// new `lmr_context` and, if a remote privilege was requested, `rmr_context`. The region
    /// covers the whole buffer: from `buf.addr()` for [`VaType::Va`], from 0 for
    /// [`VaType::ZeroBased`].
    ///
    /// # Errors
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG6`: unknown privilege bits.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG4`: zero-length buffer.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG3`: VA range wraps around 2^64.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY_REGION`: no fresh key.
    pub fn register(
        &mut self,
        lmr: LmrId,
        pz: PzId,
        buf: Arc<Buffer>,
        privs: MemPriv,
        va_type: VaType,
    ) -> DatResult<Arc<Region>> {
        self.register_inner(lmr, pz, buf, privs, va_type, None)
    }

    fn fresh_keys(&mut self, privs: MemPriv) -> DatResult<(u32, Option<u32>)> {
        let lmr_context = match self.direct.free_slot() {
            Some(slot) => {
                let (lmrs, rkeys) = (&self.lmrs, &self.rkeys);
                self.keys
                    .next_with_low(slot, SLOT_BITS, |k| {
                        lmrs.contains_key(&k) || rkeys.contains_key(&k)
                    })
                    .ok_or(NO_KEY)?
            }
            None => self.fresh_key()?,
        };
        let rmr_context = if privs.is_remote() {
            // `lmr_context` is not inserted yet: keep the two keys distinct explicitly.
            let (lmrs, rkeys) = (&self.lmrs, &self.rkeys);
            let k = self
                .keys
                .next(|k| k == lmr_context || lmrs.contains_key(&k) || rkeys.contains_key(&k))
                .ok_or(NO_KEY)?;
            Some(k)
        } else {
            None
        };
        Ok((lmr_context, rmr_context))
    }

    /// [`MemTable::register`] with keys the transport made itself (verbs MR keys) instead of
    /// keys drawn from this table.
    ///
    /// # Errors
    /// As [`MemTable::register`], plus `DAT_INTERNAL_ERROR` if a key is 0 or already live.
    #[allow(clippy::too_many_arguments)]
    pub fn register_with_keys(
        &mut self,
        lmr: LmrId,
        pz: PzId,
        buf: Arc<Buffer>,
        privs: MemPriv,
        va_type: VaType,
        lmr_context: u32,
        rmr_context: Option<u32>,
    ) -> DatResult<Arc<Region>> {
        self.register_inner(
            lmr,
            pz,
            buf,
            privs,
            va_type,
            Some((lmr_context, rmr_context)),
        )
    }

    fn register_inner(
        &mut self,
        lmr: LmrId,
        pz: PzId,
        buf: Arc<Buffer>,
        privs: MemPriv,
        va_type: VaType,
        given: Option<(u32, Option<u32>)>,
    ) -> DatResult<Arc<Region>> {
        if !KNOWN_PRIVS.contains(privs) {
            return Err(DatError::invalid_arg(6));
        }
        if buf.is_empty() {
            return Err(DatError::invalid_arg(4));
        }
        let len = u64::try_from(buf.len()).map_err(|_| DatError::invalid_arg(4))?;
        let start = match va_type {
            VaType::Va => buf.addr(),
            VaType::ZeroBased => 0,
        };
        if start.checked_add(len).is_none() {
            return Err(DatError::invalid_arg(3));
        }
        let (lmr_context, rmr_context) = match given {
            Some((l, r)) => {
                let taken =
                    |k: u32| k == 0 || self.lmrs.contains_key(&k) || self.rkeys.contains_key(&k);
                // A transport's rkey may equal its lkey (mlx5 and rxe MRs use one key for
                // both); the two live in separate maps, so only collisions with other
                // registrations matter.
                if taken(l) || r.is_some_and(|r| r != l && taken(r)) {
                    return Err(DatError::new(
                        crate::error::ErrorType::InternalError,
                        crate::error::Subtype::NoSubtype,
                    ));
                }
                (l, r)
            }
            None => self.fresh_keys(privs)?,
        };
        let way = super::post_cache::way(self.generation.table(), lmr_context);
        let region = Arc::new(Region {
            pz,
            pin: SegBuf::with_way(Arc::clone(&buf), way),
            buf,
            offset: 0,
            start,
            len,
            privs,
            va_type,
            lmr_context,
            rmr_context,
            lmr,
            rmr: None,
        });
        self.lmrs.insert(lmr_context, Arc::clone(&region));
        self.direct.insert(&region);
        if let Some(r) = rmr_context {
            self.rkeys.insert(r, Arc::clone(&region));
        }
        Ok(region)
    }

    /// Deregisters the LMR with `lmr_context` (`dat_lmr_free`): both its keys stop working at
    /// once. Memory still named by queued segments stays alive until they are dropped.
    ///
    /// # Errors
    /// * `DAT_INVALID_HANDLE | DAT_INVALID_HANDLE_LMR`: no live LMR has this key.
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_LMR_IN_USE`: an RMR is bound to it.
    pub fn deregister(&mut self, lmr_context: u32) -> DatResult<Arc<Region>> {
        if !self.lmrs.contains_key(&lmr_context) {
            return Err(DatError::invalid_handle(Subtype::InvalidHandleLmr));
        }
        if self.rmrs.values().any(|b| b.lmr_context == lmr_context) {
            return Err(DatError::invalid_state(Subtype::StateLmrInUse));
        }
        // Before the removal: a lookup remembered under the old count must stop matching.
        self.generation.advance();
        let region = self
            .lmrs
            .remove(&lmr_context)
            .ok_or(DatError::invalid_handle(Subtype::InvalidHandleLmr))?;
        self.direct.remove(lmr_context);
        self.keys.retire(lmr_context);
        if let Some(r) = region.rmr_context {
            self.rkeys.remove(&r);
            self.keys.retire(r);
        }
        Ok(region)
    }

    /// Checks one local triplet of a post on an EP in `ep_pz` that needs privileges `need`
    /// (`LOCAL_READ` for a send or RDMA write source, `LOCAL_WRITE` for a receive or RDMA read
    /// sink) and resolves it to a [`Segment`]. A zero-length triplet is legal and yields an
    /// empty segment whatever its other fields hold.
    ///
    /// # Errors
    /// * `DAT_PROTECTION_VIOLATION | DAT_PROTECTION_{READ,WRITE,..}`: unknown or freed
    ///   `lmr_context`, or an LMR of another PZ.
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG3`: range not inside the LMR (including
    ///   wrap-around).
    /// * `DAT_PRIVILEGES_VIOLATION | DAT_PRIVILEGES_{READ,WRITE,..}`: privilege missing.
    #[inline]
    pub fn local(&self, ep_pz: PzId, t: &LmrTriplet, need: MemPriv) -> DatResult<Segment> {
        if t.segment_length == 0 {
            return Ok(Segment {
                buf: self.empty.take(),
                offset: 0,
                len: 0,
                lkey: t.lmr_context,
                addr: t.virtual_address,
            });
        }
        let region = self
            .find_lmr(t.lmr_context)
            .ok_or_else(|| protection(need))?;
        if region.pz != ep_pz {
            return Err(protection(need));
        }
        let seg = region
            .segment(
                t.virtual_address,
                u64::from(t.segment_length),
                t.lmr_context,
            )
            .ok_or(DatError::invalid_arg(3))?;
        let missing = need.difference(effective(region.privs));
        if !missing.is_empty() {
            return Err(privileges(missing));
        }
        Ok(seg)
    }

    /// Checks the local IOV of a post (see [`MemTable::local`]) against the EP's segment limit
    /// `max_iov` and resolves it; zero-length triplets count towards the limit but are left
    /// out of the result. The first failing triplet decides the error.
    ///
    /// # Errors
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2`: more than `max_iov` triplets.
    /// * Every error of [`MemTable::local`].
    pub fn local_iov(
        &self,
        ep_pz: PzId,
        iov: &[LmrTriplet],
        need: MemPriv,
        max_iov: u32,
    ) -> DatResult<SegList> {
        let mut segs = SegList::new();
        self.local_iov_into(ep_pz, iov, need, max_iov, &mut segs)?;
        Ok(segs)
    }

    /// [`MemTable::local_iov`] appending to `segs`, which the post path hands in already in
    /// place in its work request (no move of the list afterwards). On error `segs` may hold
    /// the segments resolved before the failing triplet.
    ///
    /// # Errors
    /// As [`MemTable::local_iov`].
    pub fn local_iov_into(
        &self,
        ep_pz: PzId,
        iov: &[LmrTriplet],
        need: MemPriv,
        max_iov: u32,
        segs: &mut SegList,
    ) -> DatResult<()> {
        if u64::try_from(iov.len()).map_or(true, |n| n > u64::from(max_iov)) {
            return Err(DatError::invalid_arg(2));
        }
        for t in iov.iter().filter(|t| t.segment_length != 0) {
            match self.try_local(ep_pz, t, need) {
                Some(seg) => segs.push(seg),
                None => return Err(self.local_error(ep_pz, t, need)),
            }
        }
        Ok(())
    }

    /// The segment of a non-empty triplet if [`MemTable::local`] accepts it: the same checks,
    /// without building the error, which `local` gives when this refuses (the post path
    /// inlines this; it must not be asked about a zero-length triplet, which `local` takes
    /// whatever its other fields hold).
    #[inline(always)]
    pub fn try_local(&self, ep_pz: PzId, t: &LmrTriplet, need: MemPriv) -> Option<Segment> {
        self.find_lmr(t.lmr_context)?.try_local(ep_pz, t, need)
    }

    /// The error [`MemTable::local`] gives for a triplet [`MemTable::try_local`] refused.
    #[cold]
    #[inline(never)]
    fn local_error(&self, ep_pz: PzId, t: &LmrTriplet, need: MemPriv) -> DatError {
        match self.local(ep_pz, t, need) {
            Err(e) => e,
            // Unreachable: both run the same checks.
            Ok(_) => protection(need),
        }
    }

    /// Target-side check of an incoming RDMA on an EP in `ep_pz`: the requester names `len`
    /// bytes at `addr` under `rkey` and needs `need` (`REMOTE_WRITE` for an RDMA write,
    /// `REMOTE_READ` for an RDMA read). Works for LMR rkeys and RMR (window) contexts alike.
    ///
    /// # Errors
    /// `DtoStatus::RemoteAccess` (reported to the requester as `DAT_DTO_ERR_REMOTE_ACCESS`)
    /// for an unknown or revoked rkey, another PZ, a range outside the region (overflow-safe)
    /// or a missing privilege.
    pub fn remote(
        &self,
        ep_pz: PzId,
        rkey: u32,
        addr: u64,
        len: u64,
        need: MemPriv,
    ) -> Result<Segment, DtoStatus> {
        let refuse = |why: &str| {
            tracing::debug!(rkey, addr, len, why, "incoming RDMA refused");
            DtoStatus::RemoteAccess
        };
        let region = self
            .rkeys
            .get(&rkey)
            .ok_or_else(|| refuse("unknown rkey"))?;
        if region.pz != ep_pz {
            return Err(refuse("protection zone"));
        }
        if !region.privs.contains(need) {
            return Err(refuse("privileges"));
        }
        region
            .segment(addr, len, region.lmr_context)
            .ok_or_else(|| refuse("range"))
    }

    /// The live LMR with this key: from its slot, else from the map.
    #[inline]
    fn find_lmr(&self, lmr_context: u32) -> Option<&Arc<Region>> {
        match self.direct.get(lmr_context) {
            Some(r) => Some(r),
            None => self.lmrs.get(&lmr_context),
        }
    }

    /// The live LMR with this key, as a post finds it (the direct index, else the map), for
    /// a caller that remembers it while [`MemTable::generation`] does not change.
    #[inline]
    pub fn find_local(&self, lmr_context: u32) -> Option<&Arc<Region>> {
        self.find_lmr(lmr_context)
    }

    /// The live LMR with this `lmr_context` (`dat_lmr_query`).
    pub fn lmr(&self, lmr_context: u32) -> Option<Arc<Region>> {
        self.lmrs.get(&lmr_context).cloned()
    }

    /// True while an LMR or a bound RMR of the table is in `pz` (part of the
    /// `DAT_INVALID_STATE_PZ_IN_USE` check of `dat_pz_free`; unbound RMRs and EPs are the
    /// caller's to count).
    pub fn pz_in_use(&self, pz: PzId) -> bool {
        self.lmrs.values().any(|r| r.pz == pz) || self.rkeys.values().any(|r| r.pz == pz)
    }

    /// Number of registered LMRs.
    pub fn len(&self) -> usize {
        self.lmrs.len()
    }

    /// True if no LMR is registered.
    pub fn is_empty(&self) -> bool {
        self.lmrs.is_empty()
    }
}

mod rmr;
pub use rmr::WindowBind;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_remote;
