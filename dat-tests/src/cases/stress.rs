//! Data integrity under load: checksummed traffic mixing every operation over several
//! endpoints, bounded in iterations (and so in time).

use dat::types::{CompletionFlags, Cookie, DtoOp, DtoStatus};

use crate::Outcome;
use crate::harness::{Side, connect_more, deep_pair, expect_dto, pattern, read};
use crate::target::Target;

const SLOT: u64 = 4096;

fn fnv(data: &[u8]) -> u64 {
    data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One round on one EP pair: a send, an RDMA write and (if supported) an RDMA read, each
/// with fresh data, checked by checksum at the far end.
fn round(a: &Side, b: &Side, ea: &dat::Ep, eb: &dat::Ep, slot: u64, seq: u64, read_ok: bool) {
    let len = 1 + (seq * 977 % (SLOT - 1)) as usize;
    let base = slot * 4 * SLOT;
    let send = pattern(len, seq * 3);
    let write = pattern(len, seq * 3 + 1);
    let remote = pattern(len, seq * 3 + 2);
    a.lmr.write(base as usize, &send).unwrap();
    a.lmr.write((base + SLOT) as usize, &write).unwrap();
    b.lmr.write((base + 2 * SLOT) as usize, &remote).unwrap();
    eb.post_recv(
        &[b.lmr.triplet(base, SLOT as u32)],
        Cookie(seq),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    ea.post_rdma_write(
        &[a.lmr.triplet(base + SLOT, len as u32)],
        Cookie(seq << 2 | 1),
        b.lmr.rmr_triplet(base + SLOT, len as u32),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    if read_ok {
        ea.post_rdma_read(
            &[a.lmr.triplet(base + 2 * SLOT, len as u32)],
            Cookie(seq << 2 | 2),
            b.lmr.rmr_triplet(base + 2 * SLOT, len as u32),
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    }
    ea.post_send(
        &[a.lmr.triplet(base, len as u32)],
        Cookie(seq << 2 | 3),
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let expect = if read_ok { 3 } else { 2 };
    let mut got = 0;
    while got < expect {
        let c = expect_dto(&a.req);
        if c.ep != ea.id() {
            panic!("completion of another EP on a private EVD: {c:?}");
        }
        assert_eq!(c.status, DtoStatus::Success, "{c:?}");
        assert_eq!(c.transferred_length as usize, len, "{c:?}");
        assert_eq!(c.cookie.0 >> 2, seq);
        got += 1;
    }
    let r = expect_dto(&b.recv);
    assert_eq!(
        (r.ep, r.cookie, r.status, r.operation),
        (eb.id(), Cookie(seq), DtoStatus::Success, DtoOp::Receive)
    );
    assert_eq!(r.transferred_length as usize, len);
    assert_eq!(
        fnv(&read(&b.lmr, base as usize, len)),
        fnv(&send),
        "send data, seq {seq}"
    );
    assert_eq!(
        fnv(&read(&b.lmr, (base + SLOT) as usize, len)),
        fnv(&write),
        "write data, seq {seq}"
    );
    if read_ok {
        assert_eq!(
            fnv(&read(&a.lmr, (base + 2 * SLOT) as usize, len)),
            fnv(&remote),
            "read data, seq {seq}"
        );
    }
}

/// Several EP pairs on two IAs, each driven from its own thread with private EVDs, mixing
/// send, RDMA write and RDMA read; every payload checksummed.
pub fn stress_multi_ep_checksummed(t: &dyn Target) -> Outcome {
    let threads = 3u64;
    let rounds = 60u64;
    let (ia_a, ia_b) = t.open_pair();
    let read_ok = ia_a.provider_attr().rdma_read_supported;
    std::thread::scope(|sc| {
        let mut hs = Vec::new();
        for slot in 0..threads {
            let (ia_a, ia_b) = (ia_a.clone(), ia_b.clone());
            hs.push(sc.spawn(move || {
                let p = crate::harness::connect(t, Side::new(ia_a), Side::new(ia_b));
                for seq in 0..rounds {
                    round(&p.a, &p.b, &p.a.ep, &p.b.ep, slot % 4, seq + 1, read_ok);
                }
                crate::harness::disconnect_pair(&p);
            }));
        }
        for h in hs {
            h.join().expect("stress thread");
        }
    });
    Outcome::Pass
}

/// Many EPs sharing EVDs on one pair of sides, interleaved round-robin.
pub fn stress_shared_evds(t: &dyn Target) -> Outcome {
    let (a, b) = crate::harness::sides(t);
    let psp = b.psp(t);
    let eps: Vec<_> = (0..4).map(|_| connect_more(&a, &b, &psp)).collect();
    let read_ok = a.ia.provider_attr().rdma_read_supported;
    for seq in 1..=40u64 {
        let i = (seq % 4) as usize;
        let (ea, eb) = &eps[i];
        round(&a, &b, ea, eb, i as u64, seq, read_ok);
    }
    Outcome::Pass
}

/// 2000 small sends with sequence numbers arrive in order.
pub fn stress_send_sequence(t: &dyn Target) -> Outcome {
    let p = deep_pair(t, 512);
    let total = 2000u64;
    let batch = 250u64;
    let mut next = 0u64;
    while next < total {
        for i in next..next + batch {
            let off = (i % batch) * 8;
            crate::harness::post_recv(&p.b, &p.b.ep, off, 8, i);
            p.a.lmr
                .write((off + 32_768) as usize, &i.to_le_bytes())
                .unwrap();
            crate::harness::post_send(&p.a, &p.a.ep, off + 32_768, 8, i);
        }
        for i in next..next + batch {
            let c = expect_dto(&p.b.recv);
            assert_eq!((c.cookie, c.status), (Cookie(i), DtoStatus::Success));
            let got = read(&p.b.lmr, ((i % batch) * 8) as usize, 8);
            assert_eq!(got, i.to_le_bytes(), "message {i}");
            assert_eq!(expect_dto(&p.a.req).cookie, Cookie(i));
        }
        next += batch;
    }
    Outcome::Pass
}
