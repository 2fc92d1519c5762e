//! Memory protection, locally (synchronous codes) and remotely (`DAT_DTO_ERR_REMOTE_ACCESS`,
//! no byte changed, the connection broken on both sides).

use dat::types::{
    CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber, LmrTriplet, MemPriv, RmrTriplet,
};
use dat::{AsyncHandle, DatError, EpState, ErrorType, EventData, Subtype};

use crate::Outcome;
use crate::harness::{Pair, assert_empty, expect_completion, expect_conn, pair, read};
use crate::target::Target;

fn prot(sub: Subtype) -> DatError {
    DatError::new(ErrorType::ProtectionViolation, sub)
}

fn privs(sub: Subtype) -> DatError {
    DatError::new(ErrorType::PrivilegesViolation, sub)
}

/// An unknown `lmr_context` is `DAT_PROTECTION_VIOLATION` (READ for a send source, WRITE for
/// a receive sink).
pub fn local_wrong_lmr_context(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let mut bad = p.a.lmr.triplet(0, 8);
    bad.lmr_context ^= 0x00F0_0F01;
    assert_eq!(
        p.a.ep
            .post_send(&[bad], Cookie(1), CompletionFlags::DEFAULT),
        Err(prot(Subtype::ProtectionRead))
    );
    assert_eq!(
        p.a.ep
            .post_recv(&[bad], Cookie(1), CompletionFlags::DEFAULT),
        Err(prot(Subtype::ProtectionWrite))
    );
    assert_empty(&p.a.req);
    assert_eq!(p.a.ep.state(), Ok(EpState::Connected));
    Outcome::Pass
}

/// An LMR of another PZ is a protection violation.
pub fn local_other_pz(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let pz2 = p.a.ia.create_pz().unwrap();
    let foreign = pz2.alloc(64, MemPriv::ALL).unwrap();
    assert_eq!(
        p.a.ep.post_send(
            &[foreign.triplet(0, 8)],
            Cookie(1),
            CompletionFlags::DEFAULT
        ),
        Err(prot(Subtype::ProtectionRead))
    );
    assert_eq!(
        p.a.ep.post_rdma_read(
            &[foreign.triplet(0, 8)],
            Cookie(1),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT
        ),
        Err(prot(Subtype::ProtectionWrite))
    );
    Outcome::Pass
}

/// A range outside the LMR (past the end, before the start, wrapping) is `INVALID_ARG3`.
pub fn local_out_of_bounds(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let len = p.a.lmr.len();
    let past = p.a.lmr.triplet(len - 4, 5);
    let before = LmrTriplet {
        virtual_address: p.a.lmr.address().wrapping_sub(1),
        segment_length: 4,
        lmr_context: p.a.lmr.lmr_context(),
    };
    let wrap = LmrTriplet {
        virtual_address: u64::MAX - 1,
        segment_length: 16,
        lmr_context: p.a.lmr.lmr_context(),
    };
    for bad in [past, before, wrap] {
        assert_eq!(
            p.a.ep
                .post_send(&[bad], Cookie(1), CompletionFlags::DEFAULT),
            Err(DatError::invalid_arg(3)),
            "{bad:?}"
        );
        assert_eq!(
            p.a.ep
                .post_recv(&[bad], Cookie(1), CompletionFlags::DEFAULT),
            Err(DatError::invalid_arg(3)),
            "{bad:?}"
        );
    }
    Outcome::Pass
}

/// A missing LOCAL_WRITE is `DAT_PRIVILEGES_VIOLATION|PRIVILEGES_WRITE` for receive and RDMA
/// read sinks; LOCAL_READ is implicit (as on InfiniBand), so a write-only registration is a
/// valid send and RDMA write source.
pub fn local_missing_privilege(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let ro = p.a.pz.alloc(64, MemPriv::LOCAL_READ).unwrap();
    let wo = p.a.pz.alloc(64, MemPriv::LOCAL_WRITE).unwrap();
    assert_eq!(
        p.a.ep
            .post_recv(&[ro.triplet(0, 8)], Cookie(1), CompletionFlags::DEFAULT),
        Err(privs(Subtype::PrivilegesWrite))
    );
    assert_eq!(
        p.a.ep.post_rdma_read(
            &[ro.triplet(0, 8)],
            Cookie(1),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT
        ),
        Err(privs(Subtype::PrivilegesWrite))
    );
    assert_empty(&p.a.req);
    wo.write(0, b"implicit").unwrap();
    p.a.ep
        .post_rdma_write(
            &[wo.triplet(0, 8)],
            Cookie(2),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    let c = crate::harness::expect_dto(&p.a.req);
    assert_eq!((c.cookie, c.status), (Cookie(2), DtoStatus::Success));
    let mut got = [0u8; 8];
    p.b.lmr.read(0, &mut got).unwrap();
    assert_eq!(&got, b"implicit");
    Outcome::Pass
}

/// The keys of a freed LMR stop working at once.
pub fn local_freed_lmr(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let l = p.a.pz.alloc(64, MemPriv::ALL).unwrap();
    let tr = l.triplet(0, 8);
    l.free().unwrap();
    assert_eq!(
        p.a.ep.post_send(&[tr], Cookie(1), CompletionFlags::DEFAULT),
        Err(prot(Subtype::ProtectionRead))
    );
    Outcome::Pass
}

/// A key stops working at once when its LMR is freed, also for a thread whose posts named
/// it before (the facade remembers a thread's last LMRs); freeing another LMR leaves it
/// working.
pub fn local_freed_lmr_after_use(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let l = p.a.pz.alloc(64, MemPriv::ALL).unwrap();
    let other = p.a.pz.alloc(64, MemPriv::ALL).unwrap();
    l.write(0, b"usedonce").unwrap();
    for cookie in [1, 2] {
        crate::harness::post_recv(&p.b, &p.b.ep, 0, 8, cookie);
        p.a.ep
            .post_send(&[l.triplet(0, 8)], Cookie(cookie), CompletionFlags::DEFAULT)
            .unwrap();
        expect_completion(
            &p.a.req,
            &p.a.ep,
            cookie,
            DtoStatus::Success,
            DtoOp::Send,
            8,
        );
        let st = DtoStatus::Success;
        expect_completion(&p.b.recv, &p.b.ep, cookie, st, DtoOp::Receive, 8);
        if cookie == 1 {
            other.free().unwrap();
        }
    }
    assert_eq!(read(&p.b.lmr, 0, 8), b"usedonce");
    let tr = l.triplet(0, 8);
    l.free().unwrap();
    assert_eq!(
        p.a.ep.post_send(&[tr], Cookie(3), CompletionFlags::DEFAULT),
        Err(prot(Subtype::ProtectionRead))
    );
    assert_eq!(
        p.a.ep.post_recv(&[tr], Cookie(4), CompletionFlags::DEFAULT),
        Err(prot(Subtype::ProtectionWrite))
    );
    assert_empty(&p.a.req);
    Outcome::Pass
}

/// Runs one bad remote access and checks the whole outcome: REMOTE_ACCESS completion for the
/// cookie, BROKEN on both sides, DISCONNECTED states, the target's bytes unchanged, the
/// initiator's sink unchanged for reads.
pub(crate) fn remote_violation(p: &Pair, target_lmr: &dat::Lmr, remote: RmrTriplet, write: bool) {
    let before = target_lmr.to_vec();
    p.a.lmr.write(0, &[0x5A; 64]).unwrap();
    p.a.lmr.write(1000, &[0xC3; 64]).unwrap();
    let len = remote.segment_length.min(64);
    let r = if write {
        p.a.ep.post_rdma_write(
            &[p.a.lmr.triplet(0, len)],
            Cookie(66),
            remote,
            CompletionFlags::DEFAULT,
        )
    } else {
        p.a.ep.post_rdma_read(
            &[p.a.lmr.triplet(1000, len)],
            Cookie(66),
            remote,
            CompletionFlags::DEFAULT,
        )
    };
    assert_eq!(r, Ok(()), "a remote fault is reported asynchronously");
    let op = if write {
        DtoOp::RdmaWrite
    } else {
        DtoOp::RdmaRead
    };
    let c = expect_completion(&p.a.req, &p.a.ep, 66, DtoStatus::RemoteAccess, op, 0);
    assert_eq!(c.transferred_length, 0);
    expect_conn(&p.a.conn, EventNumber::Broken, &p.a.ep);
    expect_conn(&p.b.conn, EventNumber::Broken, &p.b.ep);
    assert_eq!(p.a.ep.state(), Ok(EpState::Disconnected));
    assert_eq!(p.b.ep.state(), Ok(EpState::Disconnected));
    assert_eq!(target_lmr.to_vec(), before, "no byte of the target changed");
    assert_eq!(
        read(&p.a.lmr, 1000, 64),
        vec![0xC3; 64],
        "no byte of the sink changed"
    );
}

/// Remote write with a wrong `rmr_context`.
pub fn remote_bad_rmr_context(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.b.lmr.write(0, &[7; 64]).unwrap();
    let mut bad = p.b.lmr.rmr_triplet(0, 16);
    bad.rmr_context ^= 0x5A5A_5A5A;
    remote_violation(&p, &p.b.lmr, bad, true);
    Outcome::Pass
}

/// Remote write one byte past the end of the registration.
pub fn remote_write_out_of_bounds(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let len = p.b.lmr.len();
    remote_violation(&p, &p.b.lmr, p.b.lmr.rmr_triplet(len - 8, 9), true);
    Outcome::Pass
}

/// Remote read one byte past the end of the registration.
pub fn remote_read_out_of_bounds(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let len = p.b.lmr.len();
    remote_violation(&p, &p.b.lmr, p.b.lmr.rmr_triplet(len - 1, 2), false);
    Outcome::Pass
}

/// Remote write into memory registered without REMOTE_WRITE.
pub fn remote_write_without_privilege(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let ro =
        p.b.pz
            .alloc(
                64,
                MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_READ,
            )
            .unwrap();
    ro.write(0, b"read-only").unwrap();
    remote_violation(&p, &ro, ro.rmr_triplet(0, 16), true);
    Outcome::Pass
}

/// Remote read of memory registered without REMOTE_READ.
pub fn remote_read_without_privilege(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let wo =
        p.b.pz
            .alloc(
                64,
                MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE,
            )
            .unwrap();
    wo.write(0, b"secret").unwrap();
    remote_violation(&p, &wo, wo.rmr_triplet(0, 16), false);
    Outcome::Pass
}

/// Remote access to an LMR of another PZ at the target.
pub fn remote_other_pz(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let pz2 = p.b.ia.create_pz().unwrap();
    let foreign = pz2.alloc(64, MemPriv::ALL).unwrap();
    foreign.write(0, b"other zone").unwrap();
    remote_violation(&p, &foreign, foreign.rmr_triplet(0, 16), true);
    Outcome::Pass
}

/// Remote access with the keys of an LMR the target has freed.
pub fn remote_freed_lmr(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let gone = p.b.pz.alloc(64, MemPriv::ALL).unwrap();
    let tr = gone.rmr_triplet(0, 16);
    gone.free().unwrap();
    remote_violation(&p, &p.b.lmr, tr, true);
    Outcome::Pass
}

/// A local-only LMR has no remote key: its remote triplet (context 0) is refused remotely.
pub fn remote_local_only_lmr(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let local =
        p.b.pz
            .alloc(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
            .unwrap();
    local.write(0, b"local only").unwrap();
    remote_violation(&p, &local, local.rmr_triplet(0, 16), true);
    Outcome::Pass
}

/// After a remote fault the EP is DISCONNECTED: further requests complete as flushed, and
/// the IA's async EVD reports `DAT_ASYNC_ERROR_EP_BROKEN` for the EP (decision 17).
pub fn remote_fault_breaks_connection(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let mut bad = p.b.lmr.rmr_triplet(0, 16);
    bad.rmr_context ^= 1;
    remote_violation(&p, &p.b.lmr, bad, true);
    p.a.ep
        .post_send(
            &[p.a.lmr.triplet(0, 4)],
            Cookie(67),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(&p.a.req, &p.a.ep, 67, DtoStatus::Flushed, DtoOp::Send, 0);
    let ev = crate::harness::next_event(&p.a.ia.async_evd());
    assert_eq!(ev.number, EventNumber::AsyncEpBroken, "{ev:?}");
    assert!(
        matches!(ev.data, EventData::Async { handle: AsyncHandle::Ep(id), .. } if id == p.a.ep.id()),
        "{ev:?}"
    );
    Outcome::Pass
}
