//! Zero-based addressing (`DAT_VA_TYPE_ZB`): an LMR registered zero-based is named by offsets
//! from 0, by the local posts that use it and by the peers' RDMA with its `rmr_context`; a
//! window bound zero-based is addressed from 0 remotely, wherever it lies in its LMR. Run
//! where the IA advertises `zb_supported`.

use std::sync::Arc;

use dat::types::{
    CompletionFlags, Cookie, DtoOp, DtoStatus, EventNumber, LmrTriplet, MemPriv, RmrTriplet,
    VaType, ZB_RMR_ATTR,
};
use dat::{Buffer, DatError, ErrorType, Lmr, Subtype};

use crate::Outcome;
use crate::cases::protection::remote_violation;
use crate::harness::{Pair, assert_empty, expect_completion, next_event, pair, pattern, read};
use crate::target::Target;

/// The skip of a pair whose IAs do not both offer zero-based addressing.
fn need_zb(p: &Pair) -> Option<Outcome> {
    (!(p.a.ia.attr().zb_supported && p.b.ia.attr().zb_supported))
        .then(|| Outcome::Skip("IA does not advertise zb_supported".into()))
}

/// True if `b`'s IA says windows and zero-based addressing do not combine there
/// (`dat::types::ZB_RMR_ATTR`; its zero-based LMRs work): the verbs provider (mlx5 refuses
/// zero-based binds, rxe does not bound them, and a window over a zero-based MR is
/// addressed by offsets).
fn no_zb_windows(p: &Pair) -> bool {
    !p.b.ia.provider_attr().zb_windows()
}

/// The refusal of a bind the IA does not offer.
fn model_not_supported() -> DatError {
    DatError::new(ErrorType::ModelNotSupported, Subtype::NoSubtype)
}

/// Registers `len` bytes of `b` zero-based, every privilege; with the buffer's address. The
/// buffer starts on a page boundary, which the verbs provider needs of a zero-based region
/// (the kernel maps an MR's I/O addresses page by page).
fn register_zero_based(p: &Pair, len: usize) -> (Lmr, u64) {
    let align = p.b.ia.provider_attr().optimal_buffer_alignment.max(4096) as usize;
    let buf = Arc::new(Buffer::alloc(len, align).unwrap());
    let addr = buf.addr();
    let lmr =
        p.b.pz
            .register(buf, MemPriv::ALL, VaType::ZeroBased)
            .unwrap();
    (lmr, addr)
}

/// Posts an RDMA write (`write`) or read of `local` to or from `remote` on `p.a`, and checks
/// its successful completion.
fn rdma_ok(p: &Pair, write: bool, local: LmrTriplet, remote: RmrTriplet, cookie: u64) {
    let (r, op) = if write {
        let r =
            p.a.ep
                .post_rdma_write(&[local], Cookie(cookie), remote, CompletionFlags::DEFAULT);
        (r, DtoOp::RdmaWrite)
    } else {
        let r =
            p.a.ep
                .post_rdma_read(&[local], Cookie(cookie), remote, CompletionFlags::DEFAULT);
        (r, DtoOp::RdmaRead)
    };
    r.unwrap();
    let len = local.segment_length;
    expect_completion(&p.a.req, &p.a.ep, cookie, DtoStatus::Success, op, len);
}

/// RDMA write and read with a zero-based LMR's key name offsets; sends from it and receives
/// into it name offsets too; its virtual addresses are out of its range, locally and
/// remotely; a remote access past its end breaks the connection.
pub fn zero_based_lmr(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if let Some(o) = need_zb(&p) {
        return o;
    }
    let (zb, buf_addr) = register_zero_based(&p, 4096);
    assert_eq!((zb.address(), zb.len()), (0, 4096));
    // RDMA write to offsets 200..1200.
    let data = pattern(1000, 11);
    p.a.lmr.write(100, &data).unwrap();
    rdma_ok(
        &p,
        true,
        p.a.lmr.triplet(100, 1000),
        zb.rmr_triplet(200, 1000),
        1,
    );
    assert_eq!(read(&zb, 200, 1000), data);
    // RDMA read of offsets 2000..2500.
    if p.a.ia.provider_attr().rdma_read_supported {
        let data = pattern(500, 12);
        zb.write(2000, &data).unwrap();
        rdma_ok(
            &p,
            false,
            p.a.lmr.triplet(3000, 500),
            zb.rmr_triplet(2000, 500),
            2,
        );
        assert_eq!(read(&p.a.lmr, 3000, 500), data);
    }
    // A send gathered from offset 2500 and a receive scattered to offset 3000.
    let out = pattern(64, 13);
    zb.write(2500, &out).unwrap();
    crate::harness::post_recv(&p.a, &p.a.ep, 0, 64, 3);
    p.b.ep
        .post_send(&[zb.triplet(2500, 64)], Cookie(4), CompletionFlags::DEFAULT)
        .unwrap();
    expect_completion(&p.b.req, &p.b.ep, 4, DtoStatus::Success, DtoOp::Send, 64);
    expect_completion(
        &p.a.recv,
        &p.a.ep,
        3,
        DtoStatus::Success,
        DtoOp::Receive,
        64,
    );
    assert_eq!(read(&p.a.lmr, 0, 64), out);
    let back = pattern(32, 14);
    p.a.lmr.write(500, &back).unwrap();
    p.b.ep
        .post_recv(&[zb.triplet(3000, 32)], Cookie(5), CompletionFlags::DEFAULT)
        .unwrap();
    crate::harness::post_send(&p.a, &p.a.ep, 500, 32, 6);
    expect_completion(&p.a.req, &p.a.ep, 6, DtoStatus::Success, DtoOp::Send, 32);
    expect_completion(
        &p.b.recv,
        &p.b.ep,
        5,
        DtoStatus::Success,
        DtoOp::Receive,
        32,
    );
    assert_eq!(read(&zb, 3000, 32), back);
    // A window of ordinary addressing over its bytes 1000..1064 is addressed by the memory's
    // virtual addresses; where the IA offers no windows with zero-based addressing, the bind
    // is refused, and the window's earlier binding (in an ordinary LMR) stays.
    let rmr = p.b.pz.create_rmr().unwrap();
    let before = rmr
        .bind(
            &p.b.lmr,
            p.b.lmr.triplet(0, 64),
            MemPriv::REMOTE_WRITE,
            VaType::Va,
            &p.b.ep,
            Cookie(7),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    let ev = next_event(&p.b.req);
    assert_eq!(ev.number, EventNumber::RmrBindCompletion, "{ev:?}");
    let bound = rmr.bind(
        &zb,
        zb.triplet(1000, 64),
        MemPriv::REMOTE_WRITE,
        VaType::Va,
        &p.b.ep,
        Cookie(8),
        CompletionFlags::DEFAULT,
    );
    if no_zb_windows(&p) {
        assert_eq!(bound, Err(model_not_supported()));
        assert_eq!(rmr.rmr_context(), Some(before), "the earlier binding stays");
        p.a.lmr.write(700, b"old window").unwrap();
        let old = RmrTriplet {
            virtual_address: p.b.lmr.address(),
            segment_length: 10,
            rmr_context: before,
        };
        rdma_ok(&p, true, p.a.lmr.triplet(700, 10), old, 10);
        assert_eq!(read(&p.b.lmr, 0, 10), b"old window");
    } else {
        let ev = next_event(&p.b.req);
        assert_eq!(ev.number, EventNumber::RmrBindCompletion, "{ev:?}");
        let through = pattern(40, 15);
        p.a.lmr.write(600, &through).unwrap();
        let remote = RmrTriplet {
            virtual_address: buf_addr + 1010,
            segment_length: 40,
            rmr_context: bound.unwrap(),
        };
        rdma_ok(&p, true, p.a.lmr.triplet(600, 40), remote, 9);
        assert_eq!(read(&zb, 1010, 40), through);
    }
    rmr.free().unwrap();
    // The buffer's virtual address is no address of a zero-based LMR, nor is an offset past
    // its end (the same error as any triplet outside its LMR).
    let va = LmrTriplet {
        virtual_address: buf_addr,
        ..zb.triplet(0, 16)
    };
    for bad in [zb.triplet(4090, 16), va] {
        assert_eq!(
            p.b.ep
                .post_send(&[bad], Cookie(7), CompletionFlags::DEFAULT),
            Err(DatError::invalid_arg(3)),
            "{bad:?}"
        );
    }
    // Remotely, one byte past the end: the connection breaks, nothing is written.
    remote_violation(&p, &zb, zb.rmr_triplet(4096 - 8, 9), true);
    Outcome::Pass
}

/// A zero-based window over part of an ordinary LMR: remote address 0 is the window's first
/// byte, writes and reads land inside it, and an access past its end breaks the connection.
/// Where the IA says windows and zero-based addressing do not combine, the bind is refused with
/// `DAT_MODEL_NOT_SUPPORTED` and nothing is bound.
pub fn zero_based_rmr_window(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if let Some(o) = need_zb(&p) {
        return o;
    }
    let rmr = p.b.pz.create_rmr().unwrap();
    let privs = MemPriv::REMOTE_WRITE | MemPriv::REMOTE_READ;
    let bound = rmr.bind(
        &p.b.lmr,
        p.b.lmr.triplet(64, 32),
        privs,
        VaType::ZeroBased,
        &p.b.ep,
        Cookie(1),
        CompletionFlags::DEFAULT,
    );
    if no_zb_windows(&p) {
        assert_eq!(bound, Err(model_not_supported()));
        assert_eq!(rmr.rmr_context(), None, "nothing is bound");
        assert_empty(&p.b.req);
        // A window bound before stays bound, and usable, through a refused bind.
        let bind = |va_type, cookie| {
            rmr.bind(
                &p.b.lmr,
                p.b.lmr.triplet(64, 32),
                privs,
                va_type,
                &p.b.ep,
                Cookie(cookie),
                CompletionFlags::DEFAULT,
            )
        };
        let ctx = bind(VaType::Va, 2).unwrap();
        let ev = next_event(&p.b.req);
        assert_eq!(ev.number, EventNumber::RmrBindCompletion, "{ev:?}");
        assert_eq!(bind(VaType::ZeroBased, 3), Err(model_not_supported()));
        assert_eq!(rmr.rmr_context(), Some(ctx));
        p.a.lmr.write(0, b"still bound").unwrap();
        let remote = RmrTriplet {
            virtual_address: p.b.lmr.address() + 64,
            segment_length: 11,
            rmr_context: ctx,
        };
        rdma_ok(&p, true, p.a.lmr.triplet(0, 11), remote, 4);
        assert_eq!(read(&p.b.lmr, 64, 11), b"still bound");
        return Outcome::Skip(format!(
            "{ZB_RMR_ATTR} = FALSE: zero-based binds refused, as advertised"
        ));
    }
    let ctx = bound.unwrap();
    let ev = next_event(&p.b.req);
    assert_eq!(ev.number, EventNumber::RmrBindCompletion, "{ev:?}");
    let window = |at: u64, len: u32| RmrTriplet {
        virtual_address: at,
        segment_length: len,
        rmr_context: ctx,
    };
    p.a.lmr.write(0, b"zero-based window!").unwrap();
    p.a.lmr.write(100, b"at offset 20").unwrap();
    for (cookie, src, at, len) in [(2, 0, 0, 18), (3, 100, 20, 12)] {
        rdma_ok(&p, true, p.a.lmr.triplet(src, len), window(at, len), cookie);
    }
    assert_eq!(read(&p.b.lmr, 64, 18), b"zero-based window!");
    assert_eq!(read(&p.b.lmr, 84, 12), b"at offset 20");
    if p.a.ia.provider_attr().rdma_read_supported {
        rdma_ok(&p, false, p.a.lmr.triplet(1000, 32), window(0, 32), 4);
        assert_eq!(read(&p.a.lmr, 1000, 32), read(&p.b.lmr, 64, 32));
    }
    // Four bytes at window offset 30: two past its end.
    remote_violation(&p, &p.b.lmr, window(30, 4), true);
    Outcome::Pass
}
