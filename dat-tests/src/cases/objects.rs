//! PZ, LMR, RMR, EVD, CNO, SRQ, EP and service point create, query, free, and free while in
//! use.

use std::sync::Arc;

use dat::types::{ConnQual, EvdFlags, MemPriv, PspFlags, VaType};
use dat::{Buffer, DatError, EpParams, EpState, ErrorType, SrqAttr, Subtype};

use crate::Outcome;
use crate::harness::Side;
use crate::target::Target;

fn ia(t: &dyn Target) -> dat::Ia {
    t.open_pair().0
}

fn handle(sub: Subtype) -> DatError {
    DatError::invalid_handle(sub)
}

/// PZ create and free; a second free is `INVALID_HANDLE | PZ`.
pub fn pz_create_free(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let pz2 = ia.create_pz().unwrap();
    assert_ne!(pz.id(), pz2.id());
    pz.free().unwrap();
    assert_eq!(pz.free(), Err(handle(Subtype::InvalidHandlePz)));
    pz2.free().unwrap();
    Outcome::Pass
}

/// A PZ used by an LMR is `INVALID_STATE | PZ_IN_USE`.
pub fn pz_free_in_use_by_lmr(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let lmr = pz.alloc(128, MemPriv::ALL).unwrap();
    assert_eq!(
        pz.free(),
        Err(DatError::invalid_state(Subtype::StatePzInUse))
    );
    lmr.free().unwrap();
    pz.free().unwrap();
    Outcome::Pass
}

/// A PZ used by an EP is `INVALID_STATE | PZ_IN_USE` until the EP is freed.
pub fn pz_free_in_use_by_ep(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let ep = ia
        .create_ep(&EpParams {
            pz: Some(&pz),
            ..EpParams::default()
        })
        .unwrap();
    assert_eq!(
        pz.free(),
        Err(DatError::invalid_state(Subtype::StatePzInUse))
    );
    ep.free().unwrap();
    pz.free().unwrap();
    Outcome::Pass
}

/// LMR query reports what was registered; keys are distinct.
pub fn lmr_query(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let a = pz.alloc(4096, MemPriv::ALL).unwrap();
    let b = pz.alloc(100, MemPriv::ALL).unwrap();
    let q = a.query().unwrap();
    assert_eq!(q.pz, pz.id());
    assert_eq!(q.registered_size, 4096);
    assert_eq!(q.registered_address, a.address());
    assert_eq!(q.privs, MemPriv::ALL);
    assert_eq!(q.lmr_context, a.lmr_context());
    assert_eq!(q.rmr_context, a.rmr_context());
    assert!(
        q.rmr_context.is_some(),
        "remote privileges give an rmr_context"
    );
    assert_eq!(b.len(), 100);
    assert_ne!(a.lmr_context(), b.lmr_context());
    assert_ne!(a.rmr_context(), b.rmr_context());
    assert_eq!(
        a.address() % u64::from(ia.provider_attr().optimal_buffer_alignment.max(1)),
        0
    );
    Outcome::Pass
}

/// An LMR without remote privileges has no `rmr_context`.
pub fn lmr_local_only_no_rmr_context(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let l = pz
        .alloc(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
        .unwrap();
    assert_eq!(l.rmr_context(), None);
    assert_eq!(l.query().unwrap().rmr_context, None);
    Outcome::Pass
}

/// LMR free twice is `INVALID_HANDLE | LMR`; query of a freed LMR too.
pub fn lmr_double_free(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let l = pz.alloc(64, MemPriv::ALL).unwrap();
    l.free().unwrap();
    assert_eq!(l.free(), Err(handle(Subtype::InvalidHandleLmr)));
    assert_eq!(l.query().unwrap_err(), handle(Subtype::InvalidHandleLmr));
    Outcome::Pass
}

/// Copy-in/copy-out access round-trips; out-of-range access is `INVALID_PARAMETER`.
pub fn lmr_write_read_bounds(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let l = pz.alloc(256, MemPriv::ALL).unwrap();
    assert_eq!(l.to_vec(), vec![0u8; 256], "alloc zeroes");
    l.write(250, b"abcdef").unwrap();
    let mut got = [0u8; 6];
    l.read(250, &mut got).unwrap();
    assert_eq!(&got, b"abcdef");
    assert_eq!(
        l.write(251, b"abcdef").unwrap_err().kind(),
        ErrorType::InvalidParameter
    );
    assert_eq!(
        l.read(257, &mut got).unwrap_err().kind(),
        ErrorType::InvalidParameter
    );
    Outcome::Pass
}

/// Registering on a freed PZ is `INVALID_HANDLE | PZ`.
pub fn lmr_register_on_freed_pz(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    pz.free().unwrap();
    assert_eq!(
        pz.alloc(64, MemPriv::ALL).unwrap_err(),
        handle(Subtype::InvalidHandlePz)
    );
    Outcome::Pass
}

/// A consumer buffer registers, and the LMR shows its bytes.
pub fn lmr_register_user_buffer(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let pz = ia.create_pz().unwrap();
    let buf = Arc::new(Buffer::alloc(1000, 64).unwrap());
    buf.write_at(10, b"mine").unwrap();
    let l = pz.register(buf.clone(), MemPriv::ALL, VaType::Va).unwrap();
    assert_eq!(l.len(), 1000);
    let mut got = [0u8; 4];
    l.read(10, &mut got).unwrap();
    assert_eq!(&got, b"mine");
    Outcome::Pass
}

/// RMR create/bind/free.
pub fn rmr_create_bind_free(t: &dyn Target) -> Outcome {
    use dat::types::{CompletionFlags, Cookie, DtoStatus, EventNumber, RmrTriplet};
    let p = crate::harness::pair(t);
    let rmr = p.b.pz.create_rmr().unwrap();
    assert_eq!(rmr.rmr_context(), None, "a new window is unbound");
    let lmr_b = &p.b.lmr;
    let window = lmr_b.triplet(64, 32);
    let bind = |cookie, flags| {
        rmr.bind(
            lmr_b,
            window,
            MemPriv::REMOTE_WRITE,
            VaType::Va,
            &p.b.ep,
            Cookie(cookie),
            flags,
        )
    };
    let ctx = bind(1, CompletionFlags::DEFAULT).unwrap();
    let ev = crate::harness::next_event(&p.b.req);
    assert_eq!(ev.number, EventNumber::RmrBindCompletion, "{ev:?}");
    assert_eq!(rmr.rmr_context(), Some(ctx));
    assert_eq!(rmr.query().unwrap().pz, p.b.pz.id());
    // The PZ and the LMR are in use while the window exists / is bound.
    assert_eq!(
        p.b.pz.free(),
        Err(DatError::invalid_state(Subtype::StatePzInUse))
    );
    assert_eq!(p.b.lmr.free().unwrap_err().kind(), ErrorType::InvalidState);
    // The window admits RDMA inside it only.
    p.a.lmr.write(0, b"through the window").unwrap();
    let remote = RmrTriplet {
        virtual_address: lmr_b.address() + 64,
        segment_length: 18,
        rmr_context: ctx,
    };
    p.a.ep
        .post_rdma_write(
            &[p.a.lmr.triplet(0, 18)],
            Cookie(2),
            remote,
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    let c = crate::harness::expect_dto(&p.a.req);
    assert_eq!((c.cookie, c.status), (Cookie(2), DtoStatus::Success));
    let mut got = [0u8; 18];
    lmr_b.read(64, &mut got).unwrap();
    assert_eq!(&got, b"through the window");
    // Unbinding (length 0) revokes the key; freeing makes the handle stale.
    let unbound = rmr
        .bind(
            lmr_b,
            lmr_b.triplet(0, 0),
            MemPriv::REMOTE_WRITE,
            VaType::Va,
            &p.b.ep,
            Cookie(3),
            CompletionFlags::SUPPRESS,
        )
        .unwrap();
    assert_eq!(unbound, 0);
    assert_eq!(rmr.rmr_context(), None);
    rmr.free().unwrap();
    assert_eq!(
        rmr.query().unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandleRmr)
    );
    Outcome::Pass
}

/// `dat_ep_modify`: EVDs and the PZ change in UNCONNECTED, references move with them, and a
/// refused change leaves everything as it was.
pub fn ep_modify(t: &dyn Target) -> Outcome {
    use dat::EpModify;
    let (a, _b) = crate::harness::sides(t);
    let pz2 = a.ia.create_pz().unwrap();
    let conn2 = a.ia.create_evd(4, EvdFlags::CONNECTION, None).unwrap();
    let before = a.ep.query().unwrap().config;
    // A DTO EVD cannot be the connect EVD: refused, nothing changes.
    assert_eq!(
        a.ep.modify(&EpModify {
            pz: Some(&pz2),
            connect_evd: Some(&a.req),
            ..EpModify::default()
        }),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEvdConn))
    );
    assert_eq!(a.ep.query().unwrap().config, before);
    a.ep.modify(&EpModify {
        pz: Some(&pz2),
        connect_evd: Some(&conn2),
        ..EpModify::default()
    })
    .unwrap();
    let after = a.ep.query().unwrap().config;
    assert_eq!(
        (after.pz, after.connect_evd),
        (Some(pz2.id()), Some(conn2.id()))
    );
    // The new objects are referenced; the old connect EVD is free to go.
    assert_eq!(
        pz2.free(),
        Err(DatError::invalid_state(Subtype::StatePzInUse))
    );
    assert_eq!(
        conn2.free(),
        Err(DatError::invalid_state(Subtype::StateEvdInUse))
    );
    a.conn.free().unwrap();
    Outcome::Pass
}

/// After `dat_ep_modify` gives an EP other DTO EVDs, its completions reach the new ones
/// only (the facade routes completions without the EP lock and must follow the change).
pub fn ep_modify_moves_completions(t: &dyn Target) -> Outcome {
    use dat::EpModify;
    use dat::types::{CompletionFlags, Cookie, DtoOp, DtoStatus};

    use crate::harness::{assert_empty, connect, expect_dto, sides};
    let (a, b) = sides(t);
    let recv2 = a.ia.create_evd(8, EvdFlags::DTO, None).unwrap();
    let req2 = a.ia.create_evd(8, EvdFlags::DTO, None).unwrap();
    a.ep.modify(&EpModify {
        recv_evd: Some(&recv2),
        request_evd: Some(&req2),
        ..EpModify::default()
    })
    .unwrap();
    let p = connect(t, a, b);
    let (a, b) = (&p.a, &p.b);
    let none = CompletionFlags::DEFAULT;
    a.ep.post_recv(&[a.lmr.triplet(0, 8)], Cookie(1), none)
        .unwrap();
    b.ep.post_send(&[b.lmr.triplet(0, 8)], Cookie(2), none)
        .unwrap();
    let c = expect_dto(&recv2);
    assert_eq!(
        (c.cookie, c.operation, c.status, c.transferred_length),
        (Cookie(1), DtoOp::Receive, DtoStatus::Success, 8)
    );
    assert_eq!(expect_dto(&b.req).cookie, Cookie(2));
    b.ep.post_recv(&[b.lmr.triplet(0, 8)], Cookie(3), none)
        .unwrap();
    a.ep.post_send(&[a.lmr.triplet(8, 8)], Cookie(4), none)
        .unwrap();
    let c = expect_dto(&req2);
    assert_eq!((c.cookie, c.operation), (Cookie(4), DtoOp::Send));
    assert_eq!(expect_dto(&b.recv).cookie, Cookie(3));
    assert_empty(&a.recv);
    assert_empty(&a.req);
    Outcome::Pass
}

/// EVD create argument checks.
pub fn evd_create_codes(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    assert_eq!(
        ia.create_evd(0, EvdFlags::DTO, None).unwrap_err(),
        DatError::invalid_arg(2)
    );
    assert_eq!(
        ia.create_evd(-1, EvdFlags::DTO, None).unwrap_err(),
        DatError::invalid_arg(2)
    );
    let max = ia.attr().max_evd_qlen;
    if let Ok(too_big) = i32::try_from(u64::from(max) + 1) {
        assert_eq!(
            ia.create_evd(too_big, EvdFlags::DTO, None).unwrap_err(),
            DatError::resources(Subtype::ResourceTevd)
        );
    }
    if !ia
        .provider_attr()
        .streams_may_merge(EvdFlags::ASYNC | EvdFlags::DTO)
    {
        assert_eq!(
            ia.create_evd(4, EvdFlags::ASYNC | EvdFlags::DTO, None)
                .unwrap_err(),
            DatError::invalid_arg(4)
        );
    }
    Outcome::Pass
}

/// EVD query, double free.
pub fn evd_query_free(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let e = ia
        .create_evd(7, EvdFlags::DTO | EvdFlags::CONNECTION, None)
        .unwrap();
    let q = e.query().unwrap();
    assert_eq!(q.qlen, 7);
    assert_eq!(q.flags, EvdFlags::DTO | EvdFlags::CONNECTION);
    assert_eq!(q.cno, None);
    e.free().unwrap();
    assert_eq!(e.free().unwrap_err().kind(), ErrorType::InvalidHandle);
    assert_eq!(e.query().unwrap_err().kind(), ErrorType::InvalidHandle);
    Outcome::Pass
}

/// An EVD used by an EP is `INVALID_STATE | EVD_IN_USE` until the EP is freed.
pub fn evd_free_in_use_by_ep(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let in_use = Err(DatError::invalid_state(Subtype::StateEvdInUse));
    assert_eq!(s.req.free(), in_use);
    assert_eq!(s.recv.free(), in_use);
    assert_eq!(s.conn.free(), in_use);
    s.ep.free().unwrap();
    s.req.free().unwrap();
    s.recv.free().unwrap();
    s.conn.free().unwrap();
    Outcome::Pass
}

/// An EVD used by a PSP is in use until the PSP is freed.
pub fn evd_free_in_use_by_psp(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let psp = s.psp(t);
    assert_eq!(
        s.cr.free(),
        Err(DatError::invalid_state(Subtype::StateEvdInUse))
    );
    psp.free().unwrap();
    s.cr.free().unwrap();
    Outcome::Pass
}

/// CNO create/free; a CNO with an EVD attached is `INVALID_STATE | CNO_IN_USE`.
pub fn cno_create_free_in_use(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let cno = ia.create_cno().unwrap();
    let e = ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno)).unwrap();
    assert_eq!(e.query().unwrap().cno, Some(cno.id()));
    assert_eq!(
        cno.free(),
        Err(DatError::invalid_state(Subtype::StateCnoInUse))
    );
    e.modify_cno(None).unwrap();
    assert_eq!(e.query().unwrap().cno, None);
    cno.free().unwrap();
    assert_eq!(cno.free(), Err(handle(Subtype::InvalidHandleCno)));
    Outcome::Pass
}

/// An EVD cannot be created on, or attached to, a freed CNO.
pub fn cno_freed_handle(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    let cno = ia.create_cno().unwrap();
    cno.free().unwrap();
    assert_eq!(
        ia.create_evd(4, EvdFlags::SOFTWARE, Some(&cno))
            .unwrap_err(),
        handle(Subtype::InvalidHandleCno)
    );
    let e = ia.create_evd(4, EvdFlags::SOFTWARE, None).unwrap();
    assert_eq!(
        e.modify_cno(Some(&cno)),
        Err(handle(Subtype::InvalidHandleCno))
    );
    Outcome::Pass
}

fn srq_attr() -> SrqAttr {
    SrqAttr {
        max_recv_dtos: 16,
        max_recv_iov: 2,
        low_watermark: 0,
    }
}

fn need_srq(ia: &dat::Ia) -> Option<Outcome> {
    (!ia.provider_attr().srq_supported)
        .then(|| Outcome::Skip("provider does not advertise SRQ support".into()))
}

/// SRQ create, query, set_lw, free; argument codes.
pub fn srq_create_query_free(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    if let Some(s) = need_srq(&ia) {
        return s;
    }
    let pz = ia.create_pz().unwrap();
    let srq = ia.create_srq(&pz, srq_attr()).unwrap();
    let q = srq.query().unwrap();
    assert_eq!((q.attr, q.pz, q.ep_count), (srq_attr(), pz.id(), 0));
    srq.set_lw(4).unwrap();
    assert_eq!(srq.query().unwrap().attr.low_watermark, 4);
    assert_eq!(srq.set_lw(17), Err(DatError::invalid_arg(2)));
    for bad in [
        SrqAttr {
            max_recv_dtos: 0,
            ..srq_attr()
        },
        SrqAttr {
            max_recv_iov: 0,
            ..srq_attr()
        },
    ] {
        assert_eq!(
            ia.create_srq(&pz, bad).unwrap_err(),
            DatError::invalid_arg(3)
        );
    }
    assert_eq!(
        pz.free(),
        Err(DatError::invalid_state(Subtype::StatePzInUse))
    );
    srq.free().unwrap();
    assert_eq!(srq.free(), Err(handle(Subtype::InvalidHandleSrq)));
    pz.free().unwrap();
    Outcome::Pass
}

/// An SRQ used by an EP is `INVALID_STATE | SRQ_IN_USE`; receives on such an EP are refused
/// with the same code.
pub fn srq_in_use_by_ep(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    if let Some(s) = need_srq(&ia) {
        return s;
    }
    let s = Side::new(ia);
    let srq = s.ia.create_srq(&s.pz, srq_attr()).unwrap();
    let mut attr = s.ep.query().unwrap().config.attr;
    attr.max_recv_dtos = 0;
    let ep =
        s.ia.create_ep(&EpParams {
            srq: Some(&srq),
            attr: Some(&attr),
            ..s.ep_params()
        })
        .unwrap();
    assert_eq!(srq.query().unwrap().ep_count, 1);
    assert_eq!(ep.query().unwrap().config.srq, Some(srq.id()));
    let in_use = DatError::invalid_state(Subtype::StateSrqInUse);
    assert_eq!(srq.free(), Err(in_use));
    assert_eq!(
        ep.post_recv(
            &[s.lmr.triplet(0, 8)],
            dat::types::Cookie(1),
            dat::types::CompletionFlags::DEFAULT
        ),
        Err(in_use)
    );
    srq.post_recv(&[s.lmr.triplet(0, 8)], dat::types::Cookie(1))
        .unwrap();
    ep.free().unwrap();
    srq.free().unwrap();
    Outcome::Pass
}

/// A new EP is UNCONNECTED and its query names what it was created with.
pub fn ep_create_query(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let q = s.ep.query().unwrap();
    assert_eq!(q.state, EpState::Unconnected);
    assert_eq!(q.local_address, s.addr());
    assert_eq!(
        (q.remote_address, q.remote_qual, q.local_qual),
        (None, None, None)
    );
    assert_eq!(q.config.pz, Some(s.pz.id()));
    assert_eq!(q.config.recv_evd, Some(s.recv.id()));
    assert_eq!(q.config.request_evd, Some(s.req.id()));
    assert_eq!(q.config.connect_evd, Some(s.conn.id()));
    assert_eq!(q.config.srq, None);
    Outcome::Pass
}

/// EP create with freed or wrong-stream objects names the bad handle.
pub fn ep_create_bad_handles(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let pz = s.ia.create_pz().unwrap();
    pz.free().unwrap();
    assert_eq!(
        s.ia.create_ep(&EpParams {
            pz: Some(&pz),
            ..s.ep_params()
        })
        .unwrap_err(),
        handle(Subtype::InvalidHandlePz)
    );
    assert_eq!(
        s.ia.create_ep(&EpParams {
            recv_evd: Some(&s.conn),
            ..s.ep_params()
        })
        .unwrap_err(),
        handle(Subtype::InvalidHandleEvdRecv)
    );
    assert_eq!(
        s.ia.create_ep(&EpParams {
            request_evd: Some(&s.cr),
            ..s.ep_params()
        })
        .unwrap_err(),
        handle(Subtype::InvalidHandleEvdRequest)
    );
    assert_eq!(
        s.ia.create_ep(&EpParams {
            connect_evd: Some(&s.req),
            ..s.ep_params()
        })
        .unwrap_err(),
        handle(Subtype::InvalidHandleEvdConn)
    );
    Outcome::Pass
}

/// EP free twice is `INVALID_HANDLE | EP`, as is every call on the freed EP.
pub fn ep_double_free(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    s.ep.free().unwrap();
    let h = handle(Subtype::InvalidHandleEp);
    assert_eq!(s.ep.free(), Err(h));
    assert_eq!(s.ep.state(), Err(h));
    assert_eq!(s.ep.query().unwrap_err(), h);
    assert_eq!(s.ep.reset(), Err(h));
    assert_eq!(s.ep.disconnect(dat::types::CloseFlags::Abrupt), Err(h));
    assert_eq!(
        s.ep.post_recv(
            &[s.lmr.triplet(0, 8)],
            dat::types::Cookie(0),
            dat::types::CompletionFlags::DEFAULT
        ),
        Err(h)
    );
    assert_eq!(
        s.ep.post_send(
            &[],
            dat::types::Cookie(0),
            dat::types::CompletionFlags::DEFAULT
        ),
        Err(h)
    );
    crate::harness::connect_ep_err(&s.ep, &s.addr(), ConnQual(1), h);
    Outcome::Pass
}

/// PSP create and query; the same qualifier twice is `DAT_CONN_QUAL_IN_USE`.
pub fn psp_create_query_in_use(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let q = t.qual();
    let psp = s.ia.create_psp(q, &s.cr, PspFlags::Consumer).unwrap();
    let p = psp.query().unwrap();
    assert_eq!(
        (p.conn_qual, p.evd, p.psp_flags, p.ep),
        (q, s.cr.id(), Some(PspFlags::Consumer), None)
    );
    assert_eq!(psp.conn_qual(), q);
    assert_eq!(
        s.ia.create_psp(q, &s.cr, PspFlags::Consumer).unwrap_err(),
        DatError::new(ErrorType::ConnQualInUse, Subtype::NoSubtype)
    );
    psp.free().unwrap();
    assert_eq!(psp.free(), Err(handle(Subtype::InvalidHandlePsp)));
    // The qualifier is free again.
    s.ia.create_psp(q, &s.cr, PspFlags::Consumer)
        .unwrap()
        .free()
        .unwrap();
    Outcome::Pass
}

/// A PSP on an EVD without the CR flag is `INVALID_HANDLE | EVD_CR`.
pub fn psp_needs_cr_evd(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    assert_eq!(
        s.ia.create_psp(t.qual(), &s.conn, PspFlags::Consumer)
            .unwrap_err(),
        handle(Subtype::InvalidHandleEvdCr)
    );
    assert_eq!(
        s.ia.create_rsp(t.qual(), &s.ep, &s.req).unwrap_err(),
        handle(Subtype::InvalidHandleEvdCr)
    );
    assert_eq!(
        s.ep.state(),
        Ok(EpState::Unconnected),
        "failed RSP leaves U"
    );
    Outcome::Pass
}

/// `dat_psp_create_any` picks distinct qualifiers.
pub fn psp_create_any(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let p1 = s.ia.create_psp_any(&s.cr, PspFlags::Consumer).unwrap();
    let p2 = s.ia.create_psp_any(&s.cr, PspFlags::Consumer).unwrap();
    assert_ne!(p1.conn_qual(), p2.conn_qual());
    assert_eq!(p1.query().unwrap().conn_qual, p1.conn_qual());
    Outcome::Pass
}

/// RSP query names its EP; free returns the EP to UNCONNECTED; double free is
/// `INVALID_HANDLE | RSP`.
pub fn rsp_query_free(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let q = t.qual();
    let rsp = s.ia.create_rsp(q, &s.ep, &s.cr).unwrap();
    let p = rsp.query().unwrap();
    assert_eq!(
        (p.conn_qual, p.evd, p.psp_flags, p.ep),
        (q, s.cr.id(), None, Some(s.ep.id()))
    );
    assert_eq!(s.ep.state(), Ok(EpState::Reserved));
    rsp.free().unwrap();
    assert_eq!(s.ep.state(), Ok(EpState::Unconnected));
    assert_eq!(rsp.free(), Err(handle(Subtype::InvalidHandleRsp)));
    Outcome::Pass
}

/// The provider flag is refused (`INVALID_ARG4`) when not advertised, accepted otherwise.
pub fn psp_provider_flag_advertised(t: &dyn Target) -> Outcome {
    let s = Side::new(ia(t));
    let r = s.ia.create_psp(t.qual(), &s.cr, PspFlags::Provider);
    if s.ia.provider_attr().psp_provider_flag_supported {
        assert_eq!(
            r.unwrap().query().unwrap().psp_flags,
            Some(PspFlags::Provider)
        );
    } else {
        assert_eq!(r.unwrap_err(), DatError::invalid_arg(4));
    }
    Outcome::Pass
}

/// SRQ codes: freed PZ, too many segments, protection of its receives.
pub fn srq_codes(t: &dyn Target) -> Outcome {
    let ia = ia(t);
    if let Some(s) = need_srq(&ia) {
        return s;
    }
    let pz = ia.create_pz().unwrap();
    let lmr = pz.alloc(64, MemPriv::ALL).unwrap();
    let srq = ia.create_srq(&pz, srq_attr()).unwrap();
    assert_eq!(
        srq.post_recv(&[lmr.triplet(0, 1); 3], dat::types::Cookie(1)),
        Err(DatError::invalid_arg(2))
    );
    let mut bad = lmr.triplet(0, 8);
    bad.lmr_context ^= 0x10_0001;
    assert_eq!(
        srq.post_recv(&[bad], dat::types::Cookie(1))
            .unwrap_err()
            .kind(),
        ErrorType::ProtectionViolation
    );
    let ro = pz.alloc(64, MemPriv::LOCAL_READ).unwrap();
    assert_eq!(
        srq.post_recv(&[ro.triplet(0, 8)], dat::types::Cookie(1))
            .unwrap_err()
            .kind(),
        ErrorType::PrivilegesViolation
    );
    let pz2 = ia.create_pz().unwrap();
    pz2.free().unwrap();
    assert_eq!(
        ia.create_srq(&pz2, srq_attr()).unwrap_err(),
        handle(Subtype::InvalidHandlePz)
    );
    srq.free().unwrap();
    assert_eq!(
        srq.post_recv(&[lmr.triplet(0, 8)], dat::types::Cookie(1)),
        Err(handle(Subtype::InvalidHandleSrq))
    );
    Outcome::Pass
}
