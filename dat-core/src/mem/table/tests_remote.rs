//! Incoming RDMA checks and RMR (memory window) binding.

use super::tests::{OTHER_PZ, PZ, RW, buf64, privs_err, trip};
use super::*;

/// A read-only window of `rmr` over `range` of a zero-based LMR, exposed zero-based.
fn zero_based_read(rmr: RmrId, lmr_context: u32, range: LmrTriplet) -> WindowBind {
    WindowBind::new(rmr, PZ, lmr_context, range, MemPriv::REMOTE_READ)
        .with_va_type(VaType::ZeroBased)
}

#[test]
fn remote_checks_key_pz_range_and_privileges() {
    let mut t = MemTable::with_seed(4);
    let w = t
        .register(
            LmrId(1),
            PZ,
            buf64(),
            MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE,
            VaType::Va,
        )
        .unwrap();
    let r = t
        .register(
            LmrId(2),
            PZ,
            buf64(),
            MemPriv::LOCAL_READ | MemPriv::REMOTE_READ,
            VaType::ZeroBased,
        )
        .unwrap();
    let local_only = t.register(LmrId(3), PZ, buf64(), RW, VaType::Va).unwrap();
    assert!(local_only.rmr_context.is_none());
    let (wk, rk, b) = (w.rmr_context.unwrap(), r.rmr_context.unwrap(), w.start);
    let deny = Err(DtoStatus::RemoteAccess);
    // (rkey, pz, addr, len, need, expected first byte or status)
    type Case = (u32, PzId, u64, u64, MemPriv, Result<u8, DtoStatus>);
    let cases: Vec<Case> = vec![
        (wk, PZ, b, 64, MemPriv::REMOTE_WRITE, Ok(0)),
        (wk, PZ, b + 60, 4, MemPriv::REMOTE_WRITE, Ok(60)),
        (wk, PZ, b + 61, 4, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, b + 64, 1, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, b - 1, 1, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, b, 65, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, b + 1, u64::MAX, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, u64::MAX, 2, MemPriv::REMOTE_WRITE, deny),
        (wk, PZ, b, 8, MemPriv::REMOTE_READ, deny),
        (wk, OTHER_PZ, b, 8, MemPriv::REMOTE_WRITE, deny),
        (rk, PZ, 0, 64, MemPriv::REMOTE_READ, Ok(0)),
        (rk, PZ, 63, 1, MemPriv::REMOTE_READ, Ok(63)),
        (rk, PZ, 64, 1, MemPriv::REMOTE_READ, deny),
        (rk, PZ, b, 1, MemPriv::REMOTE_READ, deny),
        (rk, PZ, 0, 8, MemPriv::REMOTE_WRITE, deny),
        (rk, PZ, u64::MAX - 3, 8, MemPriv::REMOTE_READ, deny),
        (w.lmr_context, PZ, b, 8, MemPriv::REMOTE_WRITE, deny),
        (
            local_only.lmr_context,
            PZ,
            local_only.start,
            8,
            MemPriv::NONE,
            deny,
        ),
        (0, PZ, b, 8, MemPriv::REMOTE_WRITE, deny),
    ];
    for (rkey, pz, addr, len, need, want) in cases {
        let got = t.remote(pz, rkey, addr, len, need);
        match (got, want) {
            (Ok(seg), Ok(first)) => {
                assert_eq!(seg.len as u64, len);
                assert_eq!(seg.to_vec()[0], first, "{addr:#x}+{len}");
            }
            (Err(e), Err(w)) => assert_eq!(e, w, "{addr:#x}+{len}"),
            (got, want) => panic!("{rkey:#x} {addr:#x}+{len}: got {got:?}, want {want:?}"),
        }
    }
    // The resolved segment writes into the registered memory.
    let seg = t.remote(PZ, wk, b + 4, 2, MemPriv::REMOTE_WRITE).unwrap();
    assert_eq!(seg.lkey, w.lmr_context);
    seg.copy_from(0, &[0xEE, 0xFF]).unwrap();
    assert_eq!(&w.buf.to_vec()[3..7], &[3, 0xEE, 0xFF, 6]);
}

#[test]
fn remote_zero_length_needs_a_valid_key_and_an_address_in_range() {
    let mut t = MemTable::new();
    let r = t
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::ZeroBased)
        .unwrap();
    let k = r.rmr_context.unwrap();
    assert_eq!(t.remote(PZ, k, 0, 0, MemPriv::REMOTE_READ).unwrap().len, 0);
    assert_eq!(t.remote(PZ, k, 64, 0, MemPriv::REMOTE_READ).unwrap().len, 0);
    assert_eq!(
        t.remote(PZ, k, 65, 0, MemPriv::REMOTE_READ).unwrap_err(),
        DtoStatus::RemoteAccess
    );
    assert_eq!(
        t.remote(PZ, k ^ 1, 0, 0, MemPriv::REMOTE_READ).unwrap_err(),
        DtoStatus::RemoteAccess
    );
    assert_eq!(
        t.remote(OTHER_PZ, k, 0, 0, MemPriv::REMOTE_READ)
            .unwrap_err(),
        DtoStatus::RemoteAccess
    );
    assert_eq!(
        t.remote(PZ, k, 0, 0, MemPriv::REMOTE_ATOMIC).unwrap_err(),
        DtoStatus::RemoteAccess
    );
}

#[test]
fn rmr_bind_exposes_only_the_window() {
    let mut t = MemTable::with_seed(5);
    let lmr = t.register(LmrId(1), PZ, buf64(), RW, VaType::Va).unwrap();
    assert!(lmr.rmr_context.is_none());
    let b = lmr.start;
    let k = t
        .bind_rmr(&WindowBind::new(
            RmrId(1),
            PZ,
            lmr.lmr_context,
            trip(b + 16, 8, lmr.lmr_context),
            MemPriv::REMOTE_READ | MemPriv::REMOTE_WRITE,
        ))
        .unwrap();
    assert_ne!(k, 0);
    assert_ne!(k, lmr.lmr_context);
    assert_eq!(t.bound_rmrs(), 1);
    let w = t.rmr_binding(RmrId(1)).unwrap();
    assert_eq!(
        (w.start, w.len, w.offset, w.rmr),
        (b + 16, 8, 16, Some(RmrId(1)))
    );
    assert_eq!(
        (w.rmr_context, w.lmr_context, w.lmr),
        (Some(k), lmr.lmr_context, LmrId(1))
    );

    let seg = t.remote(PZ, k, b + 16, 8, MemPriv::REMOTE_READ).unwrap();
    assert_eq!(seg.to_vec(), (16..24).collect::<Vec<u8>>());
    for (addr, len) in [(b + 15, 1), (b + 20, 5), (b + 24, 1), (b, 8), (u64::MAX, 2)] {
        assert_eq!(
            t.remote(PZ, k, addr, len, MemPriv::REMOTE_READ)
                .unwrap_err(),
            DtoStatus::RemoteAccess,
            "{addr:#x}+{len}"
        );
    }
    assert!(t.remote(PZ, k, b + 24, 0, MemPriv::REMOTE_WRITE).is_ok());
    assert!(
        t.remote(OTHER_PZ, k, b + 16, 1, MemPriv::REMOTE_READ)
            .is_err()
    );
}

#[test]
fn rmr_zero_based_window_and_window_privileges() {
    let mut t = MemTable::new();
    let lmr = t
        .register(LmrId(1), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let k = t
        .bind_rmr(&zero_based_read(RmrId(1), lmr.lmr_context, trip(32, 16, 0)))
        .unwrap();
    let seg = t.remote(PZ, k, 0, 2, MemPriv::REMOTE_READ).unwrap();
    assert_eq!(seg.to_vec(), vec![32, 33]);
    assert!(t.remote(PZ, k, 15, 1, MemPriv::REMOTE_READ).is_ok());
    assert!(t.remote(PZ, k, 16, 1, MemPriv::REMOTE_READ).is_err());
    // The window grants read only.
    assert_eq!(
        t.remote(PZ, k, 0, 1, MemPriv::REMOTE_WRITE).unwrap_err(),
        DtoStatus::RemoteAccess
    );
    // A VA window over a zero-based LMR sits at the memory's virtual address.
    let k2 = t
        .bind_rmr(&WindowBind::new(
            RmrId(2),
            PZ,
            lmr.lmr_context,
            trip(8, 4, 0),
            MemPriv::REMOTE_WRITE,
        ))
        .unwrap();
    let at = lmr.buf.addr() + 8;
    assert_eq!(
        t.remote(PZ, k2, at, 4, MemPriv::REMOTE_WRITE)
            .unwrap()
            .offset,
        8
    );
    assert!(t.remote(PZ, k2, 8, 4, MemPriv::REMOTE_WRITE).is_err());
}

#[test]
fn rmr_rebind_revokes_the_old_context_and_unbind_revokes_all() {
    let mut t = MemTable::with_seed(6);
    let lmr = t
        .register(LmrId(1), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let mut old = Vec::new();
    let mut k = 0;
    for round in 0..50u64 {
        k = t
            .bind_rmr(&zero_based_read(
                RmrId(7),
                lmr.lmr_context,
                trip(round, 4, 0),
            ))
            .unwrap();
        assert!(!old.contains(&k), "a stale key came back");
        for &stale in &old {
            assert_eq!(
                t.remote(PZ, stale, 0, 1, MemPriv::REMOTE_READ).unwrap_err(),
                DtoStatus::RemoteAccess
            );
        }
        assert_eq!(
            t.remote(PZ, k, 0, 1, MemPriv::REMOTE_READ)
                .unwrap()
                .to_vec(),
            vec![round as u8]
        );
        old.push(k);
        assert_eq!(t.bound_rmrs(), 1);
    }
    // Unbinding with a zero-length triplet returns 0 and ignores the other fields.
    assert_eq!(
        t.bind_rmr(&WindowBind::new(
            RmrId(7),
            OTHER_PZ,
            0xBAD,
            trip(999, 0, 0),
            MemPriv::from_bits_retain(0x8000)
        )),
        Ok(0)
    );
    assert_eq!(t.bound_rmrs(), 0);
    assert!(t.rmr_binding(RmrId(7)).is_none());
    assert!(t.remote(PZ, k, 0, 1, MemPriv::REMOTE_READ).is_err());
    assert!(t.remote(PZ, 0, 0, 0, MemPriv::NONE).is_err());
    // unbind_rmr of an unbound RMR is harmless; of a bound one revokes its key.
    t.unbind_rmr(RmrId(7));
    let k = t
        .bind_rmr(&zero_based_read(RmrId(8), lmr.lmr_context, trip(0, 4, 0)))
        .unwrap();
    assert!(t.remote(PZ, k, 0, 1, MemPriv::REMOTE_READ).is_ok());
    t.unbind_rmr(RmrId(8));
    assert!(t.remote(PZ, k, 0, 1, MemPriv::REMOTE_READ).is_err());
    assert!(t.deregister(lmr.lmr_context).is_ok());
}

#[test]
fn rmr_bind_errors_leave_the_existing_binding() {
    let mut t = MemTable::new();
    let rw = t
        .register(LmrId(1), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let ro = t
        .register(
            LmrId(2),
            PZ,
            buf64(),
            MemPriv::LOCAL_READ,
            VaType::ZeroBased,
        )
        .unwrap();
    let wo = t
        .register(
            LmrId(3),
            PZ,
            buf64(),
            MemPriv::LOCAL_WRITE,
            VaType::ZeroBased,
        )
        .unwrap();
    let other = t
        .register(LmrId(4), OTHER_PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let k = t
        .bind_rmr(
            &WindowBind::new(
                RmrId(1),
                PZ,
                rw.lmr_context,
                trip(0, 8, 0),
                MemPriv::REMOTE_READ,
            )
            .with_va_type(VaType::ZeroBased),
        )
        .unwrap();
    let rr = MemPriv::REMOTE_READ;
    let cases: Vec<(u32, LmrTriplet, MemPriv, DatError)> = vec![
        (
            rw.lmr_context,
            trip(0, 8, 0),
            MemPriv::from_bits_retain(0x82),
            DatError::invalid_arg(4),
        ),
        (
            rw.lmr_context ^ 1,
            trip(0, 8, 0),
            rr,
            DatError::invalid_handle(Subtype::InvalidHandleLmr),
        ),
        (
            other.lmr_context,
            trip(0, 8, 0),
            rr,
            DatError::invalid_arg(4),
        ),
        (rw.lmr_context, trip(60, 8, 0), rr, DatError::invalid_arg(2)),
        (rw.lmr_context, trip(64, 1, 0), rr, DatError::invalid_arg(2)),
        (
            rw.lmr_context,
            trip(u64::MAX - 1, 4, 0),
            rr,
            DatError::invalid_arg(2),
        ),
        (
            ro.lmr_context,
            trip(0, 8, 0),
            MemPriv::REMOTE_WRITE,
            privs_err(Subtype::PrivilegesRdmaWrite),
        ),
        (
            ro.lmr_context,
            trip(0, 8, 0),
            MemPriv::REMOTE_ATOMIC,
            privs_err(Subtype::PrivilegesRdmaWrite),
        ),
    ];
    for (lmr_context, tr, privs, want) in cases {
        assert_eq!(
            t.bind_rmr(&WindowBind::new(RmrId(1), PZ, lmr_context, tr, privs)),
            Err(want),
            "{tr:?} {privs:?}"
        );
        // The previous binding still works.
        assert!(t.remote(PZ, k, 0, 8, MemPriv::REMOTE_READ).is_ok());
        assert_eq!(t.bound_rmrs(), 1);
    }
    assert_eq!(privs_err(Subtype::PrivilegesRdmaRead).to_raw(), 0x800B_005B);
    assert_eq!(
        privs_err(Subtype::PrivilegesRdmaWrite).to_raw(),
        0x800B_005C
    );
    // Matching privileges succeed.
    assert!(
        t.bind_rmr(&WindowBind::new(
            RmrId(2),
            PZ,
            ro.lmr_context,
            trip(0, 8, 0),
            rr
        ))
        .is_ok()
    );
    assert!(
        t.bind_rmr(&WindowBind::new(
            RmrId(3),
            PZ,
            wo.lmr_context,
            trip(0, 8, 0),
            MemPriv::REMOTE_WRITE
        ))
        .is_ok()
    );
}

#[test]
fn transport_keys_may_share_lkey_and_rkey_but_not_collide() {
    let mut t = MemTable::with_seed(9);
    let all = MemPriv::LOCAL_WRITE | MemPriv::REMOTE_WRITE;
    // One key for both, as verbs MRs on rxe and mlx5 have.
    let r = t
        .register_with_keys(LmrId(1), PZ, buf64(), all, VaType::Va, 0x100, Some(0x100))
        .unwrap();
    assert_eq!((r.lmr_context, r.rmr_context), (0x100, Some(0x100)));
    assert!(
        t.remote(PZ, 0x100, r.start, 8, MemPriv::REMOTE_WRITE)
            .is_ok()
    );
    // Another registration may not reuse a live key, either side.
    let internal = DatError::new(
        crate::error::ErrorType::InternalError,
        crate::error::Subtype::NoSubtype,
    );
    for (l, r) in [(0x100, Some(0x200)), (0x200, Some(0x100)), (0, None)] {
        let e = t
            .register_with_keys(LmrId(2), PZ, buf64(), all, VaType::Va, l, r)
            .unwrap_err();
        assert_eq!(e, internal, "{l:#x} {r:?}");
    }
    t.deregister(0x100).unwrap();
    assert!(
        t.remote(PZ, 0x100, r.start, 8, MemPriv::REMOTE_WRITE)
            .is_err()
    );
}

#[test]
fn windows_with_transport_keys() {
    let mut t = MemTable::with_seed(10);
    let lmr = t
        .register(
            LmrId(1),
            PZ,
            buf64(),
            RW | MemPriv::REMOTE_WRITE,
            VaType::Va,
        )
        .unwrap();
    let (rmr, lc, start) = (RmrId(7), lmr.lmr_context, lmr.start);
    let win = trip(start + 8, 16, lc);
    let bind = WindowBind::new(rmr, PZ, lc, win, MemPriv::REMOTE_WRITE);
    // Validation alone changes nothing; a zero length is an unbind.
    let w = t.check_bind(&bind).unwrap().unwrap();
    assert_eq!((w.start, w.len), (start + 8, 16));
    assert_eq!(t.bound_rmrs(), 0);
    let unbind = WindowBind {
        range: trip(start, 0, lc),
        ..bind
    };
    assert!(t.check_bind(&unbind).unwrap().is_none());
    let other_pz = WindowBind {
        pz: OTHER_PZ,
        ..bind
    };
    assert_eq!(
        t.check_bind(&other_pz).unwrap_err(),
        DatError::invalid_arg(4)
    );
    // The transport's key is the window's key, and only inside the window.
    let k = t.bind_rmr_keyed(&bind, Some(0xABC0_0101)).unwrap();
    assert_eq!(k, 0xABC0_0101);
    assert!(
        t.remote(PZ, k, start + 8, 16, MemPriv::REMOTE_WRITE)
            .is_ok()
    );
    assert!(t.remote(PZ, k, start, 8, MemPriv::REMOTE_WRITE).is_err());
    // A key in use elsewhere is refused; rebinding with the same key is allowed.
    let other_rmr = WindowBind {
        rmr: RmrId(8),
        ..bind
    };
    assert_eq!(
        t.bind_rmr_keyed(&other_rmr, Some(k)).unwrap_err().kind(),
        crate::error::ErrorType::InternalError
    );
    assert_eq!(t.bind_rmr_keyed(&bind, Some(k)), Ok(k));
    t.unbind_rmr(rmr);
    assert!(
        t.remote(PZ, k, start + 8, 16, MemPriv::REMOTE_WRITE)
            .is_err()
    );
}
