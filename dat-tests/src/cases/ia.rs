//! IA open, query and close.

use dat::types::{CloseFlags, EvdFlags, MemPriv};
use dat::{DatError, EpParams, Subtype};

use crate::Outcome;
use crate::harness::{Side, pair};
use crate::target::Target;

/// Attributes are sane and the address is set.
pub fn ia_open_query_attributes(t: &dyn Target) -> Outcome {
    let ia = t.open_by_name(t.ia_name()).expect("open the target's IA");
    assert_eq!(ia.name(), t.ia_name());
    let a = ia.attr();
    assert!(!a.adapter_name.is_empty(), "adapter name empty");
    assert!(a.max_eps > 0 && a.max_evds > 0 && a.max_pzs > 0 && a.max_lmrs > 0);
    assert!(a.max_evd_qlen > 0 && a.max_dto_per_ep > 0);
    assert!(a.max_iov_segments_per_dto > 0 && a.max_message_size > 0);
    let p = ia.provider_attr();
    assert!(!p.provider_name.is_empty());
    assert_eq!(p.dapl_version.0, 2, "DAT major version");
    assert!(p.optimal_buffer_alignment.is_power_of_two());
    ia.close(CloseFlags::Graceful).expect("close");
    Outcome::Pass
}

/// Both IAs of a pair report a concrete address peers can connect to (two opens of the same
/// IA name may share it).
pub fn ia_pair_addresses_distinct(t: &dyn Target) -> Outcome {
    let (a, b) = t.open_pair();
    for ia in [&a, &b] {
        let addr = ia.attr().ia_address;
        assert!(!addr.ip().is_unspecified(), "{addr}");
        assert!(!addr.ip().is_multicast(), "{addr}");
    }
    Outcome::Pass
}

/// An unknown IA name is `DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED`.
pub fn ia_unknown_name_provider_not_found(t: &dyn Target) -> Outcome {
    let err = t
        .open_by_name("no-such-ia-conformance")
        .expect_err("unknown name opened");
    assert_eq!(err.code().to_raw(), 0x800A_0064, "{err}");
    assert!(err.message().contains("no-such-ia-conformance"), "{err}");
    Outcome::Pass
}

/// Close succeeds once; the closed IA's handle is invalid.
pub fn ia_close_twice_invalid_handle(t: &dyn Target) -> Outcome {
    let (a, _b) = t.open_pair();
    a.close(CloseFlags::Graceful).expect("close");
    assert!(a.is_closed());
    let ia_h = DatError::invalid_handle(Subtype::InvalidHandleIa);
    assert_eq!(a.close(CloseFlags::Graceful), Err(ia_h));
    assert_eq!(a.close(CloseFlags::Abrupt), Err(ia_h));
    assert_eq!(a.create_pz().unwrap_err(), ia_h);
    assert_eq!(a.create_evd(4, EvdFlags::DTO, None).unwrap_err(), ia_h);
    assert_eq!(a.create_cno().unwrap_err(), ia_h);
    assert_eq!(a.create_ep(&EpParams::default()).unwrap_err(), ia_h);
    Outcome::Pass
}

/// A graceful close with children is `DAT_INVALID_STATE | IA_IN_USE`; once they are freed
/// it succeeds.
pub fn ia_close_graceful_with_children(t: &dyn Target) -> Outcome {
    let (a, _b) = t.open_pair();
    let pz = a.create_pz().unwrap();
    let lmr = pz
        .alloc(64, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE)
        .unwrap();
    let busy = Err(DatError::invalid_state(Subtype::StateIaInUse));
    assert_eq!(a.close(CloseFlags::Graceful), busy);
    lmr.free().unwrap();
    assert_eq!(a.close(CloseFlags::Graceful), busy);
    pz.free().unwrap();
    a.close(CloseFlags::Graceful)
        .expect("close without children");
    Outcome::Pass
}

/// An abrupt close frees every child: their handles report `DAT_INVALID_HANDLE`.
pub fn ia_close_abrupt_frees_children(t: &dyn Target) -> Outcome {
    let (ia, _b) = t.open_pair();
    let s = Side::new(ia);
    let psp = s.psp(t);
    let cno = s.ia.create_cno().unwrap();
    s.ia.close(CloseFlags::Abrupt).expect("abrupt close");
    assert_eq!(
        s.ep.state(),
        Err(DatError::invalid_handle(Subtype::InvalidHandleEp))
    );
    assert_eq!(
        s.lmr.query().unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandleLmr)
    );
    assert_eq!(
        s.pz.free(),
        Err(DatError::invalid_handle(Subtype::InvalidHandlePz))
    );
    assert_eq!(
        psp.query().unwrap_err(),
        DatError::invalid_handle(Subtype::InvalidHandlePsp)
    );
    assert_eq!(
        cno.free(),
        Err(DatError::invalid_handle(Subtype::InvalidHandleCno))
    );
    assert_eq!(
        s.req.dequeue().unwrap_err().kind(),
        dat::ErrorType::InvalidHandle
    );
    Outcome::Pass
}

/// Closing an IA abruptly with a connection: the peer sees `DISCONNECTED`.
pub fn ia_close_abrupt_disconnects_peer(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.ia.close(CloseFlags::Abrupt).expect("abrupt close");
    crate::harness::expect_conn(&p.b.conn, dat::types::EventNumber::Disconnected, &p.b.ep);
    assert_eq!(p.b.ep.state(), Ok(dat::EpState::Disconnected));
    Outcome::Pass
}

/// The async EVD exists, has the async flag and cannot be freed.
pub fn ia_async_evd(t: &dyn Target) -> Outcome {
    let (a, _b) = t.open_pair();
    let ev = a.async_evd();
    let q = ev.query().expect("query async EVD");
    assert!(q.flags.contains(EvdFlags::ASYNC));
    assert_eq!(q.qlen, crate::target::ASYNC_QLEN as u32);
    assert_eq!(
        ev.free(),
        Err(DatError::invalid_state(Subtype::StateEvdInUse))
    );
    crate::harness::assert_empty(&ev);
    Outcome::Pass
}
