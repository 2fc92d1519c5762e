//! One-sided RDMA write and read: basic, gather/scatter, large (64 MiB), unaligned, lengths.

use dat::types::{CompletionFlags, Cookie, DtoOp, DtoStatus, MemPriv};
use dat::{DatError, ErrorType, Lmr, Subtype};

use crate::Outcome;
use crate::harness::{
    Pair, assert_empty, deep_pair, expect_completion, pair, pattern, post_recv, post_send, read,
};
use crate::target::Target;

fn need_read(p: &Pair) -> Option<Outcome> {
    (!p.a.ia.provider_attr().rdma_read_supported)
        .then(|| Outcome::Skip("provider does not advertise RDMA read".into()))
}

/// RDMA write: data lands, the initiator completes, the target's application sees nothing.
pub fn rdma_write_basic(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let data = pattern(4000, 3);
    p.a.lmr.write(100, &data).unwrap();
    p.a.ep
        .post_rdma_write(
            &[p.a.lmr.triplet(100, 4000)],
            Cookie(1),
            p.b.lmr.rmr_triplet(8000, 4000),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        1,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        4000,
    );
    assert_eq!(read(&p.b.lmr, 8000, 4000), data);
    assert_empty(&p.b.recv);
    assert_empty(&p.b.req);
    Outcome::Pass
}

/// RDMA read: the remote bytes land locally; the target sees nothing.
pub fn rdma_read_basic(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if let Some(o) = need_read(&p) {
        return o;
    }
    let data = pattern(3000, 4);
    p.b.lmr.write(5, &data).unwrap();
    p.a.ep
        .post_rdma_read(
            &[p.a.lmr.triplet(0, 3000)],
            Cookie(2),
            p.b.lmr.rmr_triplet(5, 3000),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        2,
        DtoStatus::Success,
        DtoOp::RdmaRead,
        3000,
    );
    assert_eq!(read(&p.a.lmr, 0, 3000), data);
    assert_empty(&p.b.recv);
    assert_empty(&p.b.req);
    Outcome::Pass
}

/// RDMA write gathers three local segments into one remote range.
pub fn rdma_write_gather(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.a.lmr.write(0, b"one").unwrap();
    p.a.lmr.write(1000, b"two").unwrap();
    p.a.lmr.write(50_000, b"three").unwrap();
    p.a.ep
        .post_rdma_write(
            &[
                p.a.lmr.triplet(0, 3),
                p.a.lmr.triplet(1000, 3),
                p.a.lmr.triplet(50_000, 5),
            ],
            Cookie(3),
            p.b.lmr.rmr_triplet(77, 11),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        3,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        11,
    );
    assert_eq!(read(&p.b.lmr, 77, 11), b"onetwothree");
    Outcome::Pass
}

/// RDMA read scatters one remote range over three local segments.
pub fn rdma_read_scatter(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if let Some(o) = need_read(&p) {
        return o;
    }
    p.b.lmr.write(300, b"abcdefghijk").unwrap();
    p.a.ep
        .post_rdma_read(
            &[
                p.a.lmr.triplet(9, 4),
                p.a.lmr.triplet(0, 2),
                p.a.lmr.triplet(4096, 5),
            ],
            Cookie(4),
            p.b.lmr.rmr_triplet(300, 11),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        4,
        DtoStatus::Success,
        DtoOp::RdmaRead,
        11,
    );
    assert_eq!(read(&p.a.lmr, 9, 4), b"abcd");
    assert_eq!(read(&p.a.lmr, 0, 2), b"ef");
    assert_eq!(read(&p.a.lmr, 4096, 5), b"ghijk");
    Outcome::Pass
}

const BIG: usize = 64 << 20;

fn big(p: &Pair, which: &crate::harness::Side) -> Lmr {
    let _ = p;
    which.pz.alloc(BIG, MemPriv::ALL).expect("64 MiB LMR")
}

fn checksum(lmr: &Lmr) -> (u64, u64) {
    let v = lmr.to_vec();
    let mut a = 1u64;
    let mut b = 0u64;
    for chunk in v.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        a = a.wrapping_add(u64::from_le_bytes(w));
        b = b.wrapping_add(a);
    }
    (a, b)
}

/// A 64 MiB RDMA write arrives intact.
pub fn rdma_write_64mib(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if (p.a.ep.query().unwrap().config.attr.max_rdma_size as usize) < BIG {
        return Outcome::Skip("EP max_rdma_size below 64 MiB".into());
    }
    let src = big(&p, &p.a);
    let dst = big(&p, &p.b);
    src.write(0, &pattern(BIG, 64)).unwrap();
    p.a.ep
        .post_rdma_write(
            &[src.triplet(0, BIG as u32)],
            Cookie(64),
            dst.rmr_triplet(0, BIG as u32),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        64,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        BIG as u32,
    );
    assert_eq!(checksum(&src), checksum(&dst));
    Outcome::Pass
}

/// A 64 MiB RDMA read arrives intact.
pub fn rdma_read_64mib(t: &dyn Target) -> Outcome {
    let p = pair(t);
    if let Some(o) = need_read(&p) {
        return o;
    }
    if (p.a.ep.query().unwrap().config.attr.max_rdma_size as usize) < BIG {
        return Outcome::Skip("EP max_rdma_size below 64 MiB".into());
    }
    let src = big(&p, &p.b);
    let dst = big(&p, &p.a);
    src.write(0, &pattern(BIG, 65)).unwrap();
    p.a.ep
        .post_rdma_read(
            &[dst.triplet(0, BIG as u32)],
            Cookie(65),
            src.rmr_triplet(0, BIG as u32),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        65,
        DtoStatus::Success,
        DtoOp::RdmaRead,
        BIG as u32,
    );
    assert_eq!(checksum(&src), checksum(&dst));
    Outcome::Pass
}

/// Unaligned offsets and odd lengths on both ends, neighbours untouched.
pub fn rdma_unaligned(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let data = pattern(4093, 9);
    p.a.lmr.write(3, &data).unwrap();
    p.b.lmr.write(0, &[0xEE; 16]).unwrap();
    p.a.ep
        .post_rdma_write(
            &[p.a.lmr.triplet(3, 4093)],
            Cookie(1),
            p.b.lmr.rmr_triplet(7, 4093),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        1,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        4093,
    );
    assert_eq!(read(&p.b.lmr, 7, 4093), data);
    assert_eq!(
        read(&p.b.lmr, 0, 7),
        vec![0xEE; 7],
        "bytes before untouched"
    );
    assert_eq!(read(&p.b.lmr, 4100, 1), vec![0], "byte after untouched");
    if p.a.ia.provider_attr().rdma_read_supported {
        p.a.ep
            .post_rdma_read(
                &[p.a.lmr.triplet(10_001, 4093)],
                Cookie(2),
                p.b.lmr.rmr_triplet(7, 4093),
                CompletionFlags::DEFAULT,
            )
            .unwrap();
        expect_completion(
            &p.a.req,
            &p.a.ep,
            2,
            DtoStatus::Success,
            DtoOp::RdmaRead,
            4093,
        );
        assert_eq!(read(&p.a.lmr, 10_001, 4093), data);
        assert_eq!(read(&p.a.lmr, 14_094, 1), vec![0]);
    }
    Outcome::Pass
}

/// Zero-length RDMA write completes with length 0 and changes nothing.
pub fn rdma_write_zero_length(t: &dyn Target) -> Outcome {
    let p = pair(t);
    p.b.lmr.write(0, b"same").unwrap();
    p.a.ep
        .post_rdma_write(
            &[],
            Cookie(5),
            p.b.lmr.rmr_triplet(0, 0),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    expect_completion(
        &p.a.req,
        &p.a.ep,
        5,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        0,
    );
    assert_eq!(read(&p.b.lmr, 0, 4), b"same");
    Outcome::Pass
}

/// A local total larger than the remote segment is `DAT_LENGTH_ERROR`, synchronously.
pub fn rdma_length_error(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let len = DatError::new(ErrorType::LengthError, Subtype::NoSubtype);
    assert_eq!(
        p.a.ep.post_rdma_write(
            &[p.a.lmr.triplet(0, 9)],
            Cookie(1),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT
        ),
        Err(len)
    );
    assert_eq!(
        p.a.ep.post_rdma_read(
            &[p.a.lmr.triplet(0, 9)],
            Cookie(1),
            p.b.lmr.rmr_triplet(0, 8),
            CompletionFlags::DEFAULT
        ),
        Err(len)
    );
    assert_empty(&p.a.req);
    assert_eq!(p.a.ep.state(), Ok(dat::EpState::Connected));
    Outcome::Pass
}

/// An RDMA write followed by a send: when the receive completes, the written data is
/// visible at the target (ordering on one connection).
pub fn rdma_write_then_send_ordering(t: &dyn Target) -> Outcome {
    let p = pair(t);
    let data = pattern(10_000, 11);
    p.a.lmr.write(0, &data).unwrap();
    post_recv(&p.b, &p.b.ep, 60_000, 16, 1);
    p.a.ep
        .post_rdma_write(
            &[p.a.lmr.triplet(0, 10_000)],
            Cookie(2),
            p.b.lmr.rmr_triplet(20_000, 10_000),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    post_send(&p.a, &p.a.ep, 0, 4, 3);
    expect_completion(&p.b.recv, &p.b.ep, 1, DtoStatus::Success, DtoOp::Receive, 4);
    assert_eq!(read(&p.b.lmr, 20_000, 10_000), data);
    expect_completion(
        &p.a.req,
        &p.a.ep,
        2,
        DtoStatus::Success,
        DtoOp::RdmaWrite,
        10_000,
    );
    expect_completion(&p.a.req, &p.a.ep, 3, DtoStatus::Success, DtoOp::Send, 4);
    Outcome::Pass
}

/// Many outstanding RDMA writes complete in order with their cookies.
pub fn rdma_many_outstanding(t: &dyn Target) -> Outcome {
    let p = deep_pair(t, 128);
    for i in 0..100u64 {
        p.a.lmr.write((i * 64) as usize, &pattern(64, i)).unwrap();
        p.a.ep
            .post_rdma_write(
                &[p.a.lmr.triplet(i * 64, 64)],
                Cookie(i),
                p.b.lmr.rmr_triplet(i * 64, 64),
                CompletionFlags::DEFAULT,
            )
            .unwrap();
    }
    for i in 0..100u64 {
        expect_completion(
            &p.a.req,
            &p.a.ep,
            i,
            DtoStatus::Success,
            DtoOp::RdmaWrite,
            64,
        );
    }
    for i in 0..100u64 {
        assert_eq!(read(&p.b.lmr, (i * 64) as usize, 64), pattern(64, i));
    }
    Outcome::Pass
}
