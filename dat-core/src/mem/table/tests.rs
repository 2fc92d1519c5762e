use std::collections::HashSet;

use super::*;
use crate::error::Class;
use crate::mem::{OUT_OF_RANGE, gather, scatter, total_len};

pub(super) const PZ: PzId = PzId(1);
pub(super) const OTHER_PZ: PzId = PzId(2);

/// 64 bytes holding 0..64, so every resolved segment's bytes show its offset.
pub(super) fn buf64() -> Arc<Buffer> {
    Arc::new(Buffer::from_vec((0..64u8).collect()))
}

pub(super) fn trip(virtual_address: u64, segment_length: u32, lmr_context: u32) -> LmrTriplet {
    LmrTriplet {
        virtual_address,
        segment_length,
        lmr_context,
    }
}

pub(super) fn prot(sub: Subtype) -> DatError {
    DatError::new(ErrorType::ProtectionViolation, sub)
}

pub(super) fn privs_err(sub: Subtype) -> DatError {
    DatError::new(ErrorType::PrivilegesViolation, sub)
}

pub(super) const RW: MemPriv = MemPriv::LOCAL_READ.union(MemPriv::LOCAL_WRITE);

#[test]
fn register_va_and_zero_based() {
    let mut t = MemTable::with_seed(1);
    let b = buf64();
    let va = t
        .register(LmrId(1), PZ, Arc::clone(&b), MemPriv::ALL, VaType::Va)
        .unwrap();
    assert_eq!((va.start, va.len, va.offset), (b.addr(), 64, 0));
    assert_eq!(
        (va.pz, va.lmr, va.rmr, va.privs),
        (PZ, LmrId(1), None, MemPriv::ALL)
    );
    let zb = t
        .register(LmrId(2), PZ, Arc::clone(&b), RW, VaType::ZeroBased)
        .unwrap();
    assert_eq!((zb.start, zb.len, zb.va_type), (0, 64, VaType::ZeroBased));
    assert_eq!(t.len(), 2);
    assert!(!t.is_empty());
    assert!(Arc::ptr_eq(&t.lmr(va.lmr_context).unwrap(), &va));
    assert!(t.lmr(0).is_none());
    assert!(format!("{t:?}").contains("lmrs: 2"));
}

#[test]
fn rmr_context_only_for_remote_privileges() {
    let table = [
        (MemPriv::NONE, false),
        (MemPriv::LOCAL_READ, false),
        (MemPriv::LOCAL_WRITE, false),
        (RW, false),
        (MemPriv::REMOTE_READ, true),
        (MemPriv::REMOTE_WRITE, true),
        (MemPriv::REMOTE_ATOMIC, true),
        (MemPriv::ALL, true),
    ];
    let mut t = MemTable::new();
    for (i, &(privs, remote)) in table.iter().enumerate() {
        let r = t
            .register(LmrId(i as u32), PZ, buf64(), privs, VaType::Va)
            .unwrap();
        assert_eq!(r.rmr_context.is_some(), remote, "{privs:?}");
        assert_ne!(r.lmr_context, 0);
        assert_ne!(r.rmr_context, Some(0));
        assert_ne!(r.rmr_context, Some(r.lmr_context));
    }
}

#[test]
fn register_rejects_bad_arguments() {
    let mut t = MemTable::new();
    for bits in [0x04u32, 0x08, 0x80, 0x100, 0x8000_0000] {
        let e = t
            .register(
                LmrId(1),
                PZ,
                buf64(),
                MemPriv::from_bits_retain(bits | 1),
                VaType::Va,
            )
            .unwrap_err();
        assert_eq!(e, DatError::invalid_arg(6), "{bits:#x}");
    }
    assert_eq!(DatError::invalid_arg(6).to_raw(), 0x8006_002A);
    let empty = Arc::new(Buffer::alloc(0, 8).unwrap());
    assert_eq!(
        t.register(LmrId(1), PZ, empty, RW, VaType::Va).unwrap_err(),
        DatError::invalid_arg(4)
    );
    assert!(t.is_empty());
}

#[test]
fn deregister_codes_and_revocation() {
    let mut t = MemTable::with_seed(2);
    let r = t
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::Va)
        .unwrap();
    let (lkey, rkey) = (r.lmr_context, r.rmr_context.unwrap());
    let held = t
        .local(PZ, &trip(r.start, 4, lkey), MemPriv::LOCAL_READ)
        .unwrap();

    let unknown = t.deregister(lkey ^ 1).unwrap_err();
    assert_eq!(unknown, DatError::invalid_handle(Subtype::InvalidHandleLmr));
    assert_eq!(unknown.to_raw(), 0x8005_000D);
    // The rkey is not an LMR handle.
    assert_eq!(
        t.deregister(rkey).unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandleLmr)
    );

    let gone = t.deregister(lkey).unwrap();
    assert!(Arc::ptr_eq(&gone, &r));
    assert!(t.is_empty());
    assert_eq!(
        t.deregister(lkey).unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandleLmr)
    );
    // Both keys are dead.
    assert_eq!(
        t.local(PZ, &trip(r.start, 4, lkey), MemPriv::LOCAL_READ)
            .unwrap_err(),
        prot(Subtype::ProtectionRead)
    );
    assert_eq!(
        t.remote(PZ, rkey, r.start, 4, MemPriv::REMOTE_READ)
            .unwrap_err(),
        DtoStatus::RemoteAccess
    );
    // A segment resolved before the free keeps the memory alive and usable.
    assert_eq!(held.to_vec(), vec![0, 1, 2, 3]);
}

#[test]
fn deregister_with_bound_rmr_is_lmr_in_use() {
    let mut t = MemTable::new();
    let r = t
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::Va)
        .unwrap();
    t.bind_rmr(&WindowBind::new(
        RmrId(9),
        PZ,
        r.lmr_context,
        trip(r.start, 8, 0),
        MemPriv::REMOTE_READ,
    ))
    .unwrap();
    let e = t.deregister(r.lmr_context).unwrap_err();
    assert_eq!(e, DatError::invalid_state(Subtype::StateLmrInUse));
    assert_eq!(e.to_raw(), 0x8007_0051);
    assert_eq!(e.class(), Class::Error);
    assert_eq!(t.len(), 1);
    t.unbind_rmr(RmrId(9));
    assert!(t.deregister(r.lmr_context).is_ok());
}

#[test]
fn local_range_boundaries() {
    let mut t = MemTable::with_seed(3);
    let va = t.register(LmrId(1), PZ, buf64(), RW, VaType::Va).unwrap();
    let zb = t
        .register(LmrId(2), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let base = va.start;
    let bad = Err(DatError::invalid_arg(3));
    // (region, address, length, expected first byte or error)
    type Case<'a> = (&'a Arc<Region>, u64, u32, Result<u8, DatError>);
    let cases: Vec<Case<'_>> = vec![
        (&va, base, 64, Ok(0)),
        (&va, base + 63, 1, Ok(63)),
        (&va, base + 10, 54, Ok(10)),
        (&va, base + 64, 1, bad),
        (&va, base, 65, bad),
        (&va, base + 63, 2, bad),
        (&va, base - 1, 1, bad),
        (&va, base - 1, 2, bad),
        (&va, 0, 1, bad),
        (&va, u64::MAX, 1, bad),
        (&va, u64::MAX - 1, 4, bad),
        (&va, u64::MAX - 1, u32::MAX, bad),
        (&zb, 0, 64, Ok(0)),
        (&zb, 63, 1, Ok(63)),
        (&zb, 64, 1, bad),
        (&zb, 1, 64, bad),
        (&zb, base, 1, bad),
        (&zb, u64::MAX, 2, bad),
        (&zb, u64::MAX - 2, 4, bad),
    ];
    for (region, addr, len, want) in cases {
        let got = t.local(
            PZ,
            &trip(addr, len, region.lmr_context),
            MemPriv::LOCAL_READ,
        );
        match (got, want) {
            (Ok(seg), Ok(first)) => {
                assert_eq!(seg.len, len as usize);
                assert_eq!(seg.addr, addr);
                assert_eq!(seg.lkey, region.lmr_context);
                let bytes = seg.to_vec();
                assert_eq!(bytes[0], first, "{addr:#x}+{len}");
                assert_eq!(
                    *bytes.last().unwrap() as usize,
                    first as usize + len as usize - 1
                );
            }
            (Err(e), Err(w)) => assert_eq!(e, w, "{addr:#x}+{len}"),
            (got, want) => panic!("{addr:#x}+{len}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn local_zero_length_segment_ignores_its_other_fields() {
    let t = MemTable::new();
    let s = t
        .local(PZ, &trip(u64::MAX, 0, 0xDEAD), MemPriv::LOCAL_WRITE)
        .unwrap();
    assert_eq!((s.len, s.offset, s.lkey, s.addr), (0, 0, 0xDEAD, u64::MAX));
    assert!(s.to_vec().is_empty());
    assert_eq!(s.copy_from(0, &[1]), Err(OUT_OF_RANGE));
}

#[test]
fn local_protection_errors_unknown_key_and_other_pz() {
    let mut t = MemTable::new();
    let r = t
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::Va)
        .unwrap();
    let table = [
        (MemPriv::LOCAL_READ, Subtype::ProtectionRead, 0x800C_005D),
        (MemPriv::LOCAL_WRITE, Subtype::ProtectionWrite, 0x800C_005E),
        (
            MemPriv::REMOTE_READ,
            Subtype::ProtectionRdmaRead,
            0x800C_005F,
        ),
        (
            MemPriv::REMOTE_WRITE,
            Subtype::ProtectionRdmaWrite,
            0x800C_0060,
        ),
        (MemPriv::NONE, Subtype::NoSubtype, 0x800C_0000),
    ];
    for (need, sub, raw) in table {
        let other_pz = t
            .local(OTHER_PZ, &trip(r.start, 8, r.lmr_context), need)
            .unwrap_err();
        assert_eq!(other_pz, prot(sub));
        assert_eq!(other_pz.to_raw(), raw);
        let unknown = t.local(PZ, &trip(r.start, 8, r.lmr_context ^ 0x5A5A), need);
        assert_eq!(unknown.unwrap_err(), prot(sub));
    }
    // The rkey of an LMR is not a local key.
    assert_eq!(
        t.local(
            PZ,
            &trip(r.start, 8, r.rmr_context.unwrap()),
            MemPriv::LOCAL_READ
        )
        .unwrap_err(),
        prot(Subtype::ProtectionRead)
    );
    // The PZ check comes before the range check.
    assert_eq!(
        t.local(OTHER_PZ, &trip(0, 8, r.lmr_context), MemPriv::LOCAL_READ)
            .unwrap_err(),
        prot(Subtype::ProtectionRead)
    );
}

#[test]
fn local_privileges_for_each_use() {
    use MemPriv as P;
    let r_only = P::LOCAL_READ;
    let w_only = P::LOCAL_WRITE;
    // (registered, needed, expected)
    let table: [(MemPriv, MemPriv, Option<Subtype>); 11] = [
        (r_only, P::LOCAL_READ, None),
        (w_only, P::LOCAL_WRITE, None),
        (RW, P::LOCAL_READ, None),
        (RW, P::LOCAL_WRITE, None),
        (P::ALL, RW, None),
        // LOCAL_READ is implicit, as on InfiniBand: sending from any registration works.
        (w_only, P::LOCAL_READ, None),
        (r_only, P::LOCAL_WRITE, Some(Subtype::PrivilegesWrite)),
        (P::NONE, P::LOCAL_READ, None),
        (P::NONE, RW, Some(Subtype::PrivilegesWrite)),
        (P::REMOTE_READ | P::REMOTE_WRITE, P::LOCAL_READ, None),
        (RW, P::REMOTE_WRITE, Some(Subtype::PrivilegesRdmaWrite)),
    ];
    let mut t = MemTable::new();
    for (i, (registered, need, want)) in table.into_iter().enumerate() {
        let r = t
            .register(LmrId(i as u32), PZ, buf64(), registered, VaType::Va)
            .unwrap();
        let got = t.local(PZ, &trip(r.start + 1, 2, r.lmr_context), need);
        match want {
            None => assert_eq!(got.unwrap().to_vec(), vec![1, 2], "{registered:?} {need:?}"),
            Some(sub) => assert_eq!(got.unwrap_err(), privs_err(sub), "{registered:?} {need:?}"),
        }
    }
    assert_eq!(privs_err(Subtype::PrivilegesRead).to_raw(), 0x800B_0059);
    assert_eq!(privs_err(Subtype::PrivilegesWrite).to_raw(), 0x800B_005A);
    // The range check comes before the privilege check.
    let r = t
        .register(LmrId(99), PZ, buf64(), P::NONE, VaType::Va)
        .unwrap();
    assert_eq!(
        t.local(PZ, &trip(r.start + 60, 8, r.lmr_context), P::LOCAL_READ)
            .unwrap_err(),
        DatError::invalid_arg(3)
    );
}

#[test]
fn local_iov_limits_skipping_and_first_error() {
    let mut t = MemTable::new();
    let a = t.register(LmrId(1), PZ, buf64(), RW, VaType::Va).unwrap();
    let z = t
        .register(LmrId(2), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    let iov = [
        trip(a.start, 2, a.lmr_context),
        trip(7, 0, 12345), // zero-length: ignored
        trip(10, 3, z.lmr_context),
        trip(a.start + 62, 2, a.lmr_context),
    ];
    let segs = t.local_iov(PZ, &iov, MemPriv::LOCAL_READ, 4).unwrap();
    assert_eq!(segs.len(), 3);
    let mut flat = [0u8; 7];
    assert_eq!(gather(&segs, &mut flat), 7);
    assert_eq!(flat, [0, 1, 10, 11, 12, 62, 63]);

    let e = t.local_iov(PZ, &iov, MemPriv::LOCAL_READ, 3).unwrap_err();
    assert_eq!(e, DatError::invalid_arg(2));
    assert_eq!(e.to_raw(), 0x8006_0026);
    assert!(
        t.local_iov(PZ, &[], MemPriv::LOCAL_READ, 0)
            .unwrap()
            .is_empty()
    );
    assert!(
        t.local_iov(PZ, &[trip(0, 0, 0)], MemPriv::LOCAL_READ, 1)
            .unwrap()
            .is_empty()
    );

    // The first failing triplet decides.
    let mixed = [
        trip(a.start, 2, a.lmr_context),
        trip(100, 1, z.lmr_context),         // out of range
        trip(a.start, 1, a.lmr_context ^ 1), // unknown key
    ];
    assert_eq!(
        t.local_iov(PZ, &mixed, MemPriv::LOCAL_READ, 8).unwrap_err(),
        DatError::invalid_arg(3)
    );
    assert_eq!(
        t.local_iov(OTHER_PZ, &mixed, MemPriv::LOCAL_WRITE, 8)
            .unwrap_err(),
        prot(Subtype::ProtectionWrite)
    );

    // Many segments: every byte of the LMR, one segment each.
    let many: Vec<LmrTriplet> = (0..64u64).map(|i| trip(i, 1, z.lmr_context)).collect();
    let segs = t.local_iov(PZ, &many, MemPriv::LOCAL_WRITE, 64).unwrap();
    assert_eq!(total_len(&segs), 64);
    let data: Vec<u8> = (0..64u8).rev().collect();
    assert_eq!(scatter(&segs, &data), 64);
    assert_eq!(z.buf.to_vec(), data);
}

#[test]
fn pz_in_use_counts_lmrs_and_bound_windows() {
    let mut t = MemTable::new();
    assert!(!t.pz_in_use(PZ));
    let r = t.register(LmrId(1), PZ, buf64(), RW, VaType::Va).unwrap();
    assert!(t.pz_in_use(PZ));
    assert!(!t.pz_in_use(OTHER_PZ));
    t.deregister(r.lmr_context).unwrap();
    assert!(!t.pz_in_use(PZ));
}

#[test]
fn keys_are_random_unique_and_differ_between_tables() {
    let mut a = MemTable::new();
    let mut b = MemTable::new();
    let mut seen = HashSet::new();
    let mut a_first = Vec::new();
    let mut b_first = Vec::new();
    for i in 0..200u32 {
        let ra = a
            .register(LmrId(i), PZ, buf64(), MemPriv::ALL, VaType::Va)
            .unwrap();
        let rb = b
            .register(LmrId(i), PZ, buf64(), MemPriv::ALL, VaType::Va)
            .unwrap();
        for k in [ra.lmr_context, ra.rmr_context.unwrap()] {
            assert_ne!(k, 0);
            assert!(seen.insert(k), "key {k:#x} handed out twice");
        }
        a_first.push(ra.lmr_context);
        b_first.push(rb.lmr_context);
    }
    // Two tables (IAs) do not produce the same keys: equal sequences of 200 random u32
    // would mean the seeding is broken.
    assert_ne!(a_first, b_first);
    assert!(a_first.iter().zip(&b_first).filter(|(x, y)| x == y).count() < 2);
    // Not a counter: consecutive keys are not one apart.
    assert!(
        a_first
            .windows(2)
            .filter(|w| w[1].wrapping_sub(w[0]) == 1)
            .count()
            < 2
    );
}

#[test]
fn freed_keys_are_not_handed_out_again_soon() {
    let mut t = MemTable::new();
    let mut retired = HashSet::new();
    for i in 0..500u32 {
        let r = t
            .register(LmrId(i), PZ, buf64(), MemPriv::ALL, VaType::Va)
            .unwrap();
        assert!(!retired.contains(&r.lmr_context));
        assert!(!retired.contains(&r.rmr_context.unwrap()));
        t.deregister(r.lmr_context).unwrap();
        retired.insert(r.lmr_context);
        retired.insert(r.rmr_context.unwrap());
    }
}

#[test]
fn seeded_tables_are_reproducible() {
    let mut a = MemTable::with_seed(42);
    let mut b = MemTable::with_seed(42);
    let ra = a
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::Va)
        .unwrap();
    let rb = b
        .register(LmrId(1), PZ, buf64(), MemPriv::ALL, VaType::Va)
        .unwrap();
    assert_eq!(
        (ra.lmr_context, ra.rmr_context),
        (rb.lmr_context, rb.rmr_context)
    );
}

#[test]
fn table_and_segments_can_be_shared_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<MemTable>();
    assert_send_sync::<Region>();
    assert_send_sync::<Segment>();
    assert_send_sync::<SegList>();
}

/// The direct index behind `local`: a freed LMR's key is refused with the code of an unknown
/// key even once its slot holds a new LMR, a key of the right slot but another generation is
/// refused, and LMRs beyond the index's slots, or with transport keys whose slots are taken,
/// resolve through the map as before.
#[test]
fn stale_and_foreign_keys_are_refused_through_the_direct_index() {
    let need = MemPriv::LOCAL_READ;
    let mut t = MemTable::with_seed(11);
    let old = t
        .register(LmrId(1), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    t.deregister(old.lmr_context).unwrap();
    // Fill every slot so that the stale key's slot is taken by a live LMR.
    let mut live = Vec::new();
    for i in 0..4200u32 {
        let r = t
            .register(LmrId(10 + i), PZ, buf64(), RW, VaType::ZeroBased)
            .unwrap();
        live.push(r);
    }
    assert_eq!(
        t.local(PZ, &trip(0, 8, old.lmr_context), need).unwrap_err(),
        prot(Subtype::ProtectionRead)
    );
    for r in &live {
        let seg = t.local(PZ, &trip(8, 4, r.lmr_context), need).unwrap();
        assert_eq!((seg.offset, seg.lkey), (8, r.lmr_context));
        let other_gen = r.lmr_context ^ 0x8000_0000;
        if t.lmr(other_gen).is_none() {
            assert_eq!(
                t.local(PZ, &trip(8, 4, other_gen), need).unwrap_err(),
                prot(Subtype::ProtectionRead)
            );
        }
    }
    // Free some, register again: still every key resolves to its own LMR.
    for r in live.drain(..100) {
        t.deregister(r.lmr_context).unwrap();
        assert!(t.local(PZ, &trip(0, 1, r.lmr_context), need).is_err());
    }
    let again = t
        .register(LmrId(9000), PZ, buf64(), RW, VaType::ZeroBased)
        .unwrap();
    assert!(Arc::ptr_eq(&t.lmr(again.lmr_context).unwrap(), &again));
    assert!(t.local(PZ, &trip(0, 64, again.lmr_context), need).is_ok());
}

#[test]
fn transport_keys_sharing_a_slot_each_resolve_to_their_own_lmr() {
    let need = MemPriv::LOCAL_WRITE;
    let mut t = MemTable::with_seed(12);
    // Two verbs-style keys with the same low bits (same slot).
    let a = t
        .register_with_keys(LmrId(1), PZ, buf64(), RW, VaType::Va, 0x0000_1105, None)
        .unwrap();
    let b = t
        .register_with_keys(
            LmrId(2),
            OTHER_PZ,
            buf64(),
            RW,
            VaType::Va,
            0x0007_7105,
            None,
        )
        .unwrap();
    assert_eq!(
        t.local(PZ, &trip(a.start, 8, a.lmr_context), need)
            .unwrap()
            .lkey,
        a.lmr_context
    );
    assert_eq!(
        t.local(OTHER_PZ, &trip(b.start, 8, b.lmr_context), need)
            .unwrap()
            .lkey,
        b.lmr_context
    );
    // Each key only in its own PZ.
    assert_eq!(
        t.local(PZ, &trip(b.start, 8, b.lmr_context), need)
            .unwrap_err(),
        prot(Subtype::ProtectionWrite)
    );
    t.deregister(a.lmr_context).unwrap();
    assert_eq!(
        t.local(PZ, &trip(a.start, 8, a.lmr_context), need)
            .unwrap_err(),
        prot(Subtype::ProtectionWrite)
    );
    assert!(
        t.local(OTHER_PZ, &trip(b.start, 8, b.lmr_context), need)
            .is_ok()
    );
}

/// The post path's inline check accepts what `local` accepts, with the same segment, for
/// every rule.
#[test]
fn try_local_agrees_with_local() {
    let mut t = MemTable::with_seed(13);
    let [r, ro] = [(1, MemPriv::LOCAL_WRITE), (2, MemPriv::LOCAL_READ)].map(|(id, privs)| {
        t.register(LmrId(id), PZ, buf64(), privs, VaType::ZeroBased)
            .unwrap()
    });
    let key = r.lmr_context;
    let cases = [
        trip(0, 64, key),
        trip(8, 4, key),
        trip(60, 5, key),
        trip(u64::MAX, 2, key),
        trip(0, 8, key ^ 1),
        trip(0, 8, ro.lmr_context),
    ];
    for pz in [PZ, OTHER_PZ] {
        for need in [MemPriv::LOCAL_READ, MemPriv::LOCAL_WRITE] {
            for c in &cases {
                let show = |s: Segment| (s.offset, s.len, s.lkey, s.addr);
                assert_eq!(
                    t.try_local(pz, c, need).map(show),
                    t.local(pz, c, need).ok().map(show),
                    "{c:?} {pz:?} {need:?}"
                );
            }
        }
    }
}
