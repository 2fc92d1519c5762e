//! Round trips of every frame kind, and the parser's refusals.

use super::*;

/// `DAT_DTO_ERR_REMOTE_ACCESS` as a raw value.
const REMOTE_ACCESS: u32 = 6;

fn all_frames() -> Vec<Frame<'static>> {
    static PD: [u8; 300] = [7; 300];
    static DATA: [u8; 5] = [1, 2, 3, 4, 5];
    vec![
        Frame::ConnReq {
            rnr_timeout_ms: 2000,
            qual: 45248,
            private_data: &PD,
        },
        Frame::ConnReq {
            rnr_timeout_ms: 0,
            qual: u64::MAX,
            private_data: &[],
        },
        Frame::Accept {
            rnr_timeout_ms: 7,
            private_data: &PD[..256],
        },
        Frame::Reject { private_data: &PD },
        Frame::Reject { private_data: &[] },
        Frame::Rtu,
        Frame::Disconnect,
        Frame::Send {
            msn: 1,
            total: 5,
            flags: FIRST | LAST | SOLICITED,
            payload: &DATA,
        },
        Frame::Send {
            msn: 2,
            total: 0,
            flags: FIRST | LAST,
            payload: &[],
        },
        Frame::Send {
            msn: 3,
            total: 100,
            flags: FIRST,
            payload: &DATA,
        },
        Frame::RdmaWrite {
            msn: u32::MAX,
            total: 5,
            rkey: 0xdead_beef,
            addr: 0x7fff_0000_1000,
            flags: FIRST | LAST,
            payload: &DATA,
        },
        Frame::ReadReq {
            msn: 9,
            len: 1 << 20,
            rkey: 3,
            addr: 42,
        },
        Frame::ReadResp {
            msn: 9,
            total: 10,
            flags: LAST,
            payload: &DATA,
        },
        Frame::Ack,
        Frame::Nak {
            msn: 4,
            status: REMOTE_ACCESS,
        },
        Frame::Keepalive,
        Frame::NoListener,
        Frame::Confirm,
    ]
}

#[test]
fn every_kind_round_trips() {
    let frames = all_frames();
    let mut kinds: Vec<Kind> = frames.iter().map(Frame::kind).collect();
    kinds.dedup();
    assert_eq!(kinds.len(), 14, "every kind is covered");
    for (i, f) in frames.iter().enumerate() {
        let mut out = Vec::new();
        let ack = u32::try_from(i).unwrap() * 3;
        f.emit(ack, &mut out);
        let d = Frame::parse(&out).unwrap().unwrap();
        assert_eq!(d.frame, *f);
        assert_eq!(d.ack, ack);
        assert_eq!(d.len, out.len());
        // Every strict prefix is "need more", never an error or a panic.
        for cut in 0..out.len() {
            assert_eq!(Frame::parse(&out[..cut]), Ok(None), "{f:?} cut at {cut}");
        }
    }
}

#[test]
fn frames_back_to_back_parse_in_order() {
    let mut out = Vec::new();
    for f in all_frames() {
        f.emit(1, &mut out);
    }
    assert_eq!(parse_all(&out), (all_frames().len(), None));
}

#[test]
fn data_header_matches_frame_encoding() {
    let payload = [9u8; 33];
    let mut a = Vec::new();
    DataHeader::RdmaWrite {
        msn: 5,
        total: 1000,
        rkey: 77,
        addr: 4096,
    }
    .emit(FIRST, payload.len(), 12, &mut a);
    a.extend_from_slice(&payload);
    let mut b = Vec::new();
    Frame::RdmaWrite {
        msn: 5,
        total: 1000,
        rkey: 77,
        addr: 4096,
        flags: FIRST,
        payload: &payload,
    }
    .emit(12, &mut b);
    assert_eq!(a, b);
    let mut c = Vec::new();
    DataHeader::Send { msn: 1, total: 33 }.emit(FIRST | LAST, 33, 0, &mut c);
    c.extend_from_slice(&payload);
    assert!(matches!(
        Frame::parse(&c).unwrap().unwrap().frame,
        Frame::Send { total: 33, .. }
    ));
    let mut d = Vec::new();
    DataHeader::ReadResp { msn: 1, total: 33 }.emit(LAST, 33, 0, &mut d);
    d.extend_from_slice(&payload);
    assert!(matches!(
        Frame::parse(&d).unwrap().unwrap().frame,
        Frame::ReadResp { total: 33, .. }
    ));
}

fn header(kind: u8, flags: u8, len: u32) -> Vec<u8> {
    let mut v = vec![kind, flags, 0, 0];
    v.extend_from_slice(&len.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v
}

#[test]
fn refuses_unknown_kinds_and_bad_lengths_from_the_header_alone() {
    assert_eq!(Frame::parse(&header(0, 0, 0)), Err(WireError::Kind(0)));
    assert_eq!(Frame::parse(&header(15, 0, 0)), Err(WireError::Kind(15)));
    assert_eq!(Frame::parse(&header(255, 0, 0)), Err(WireError::Kind(255)));
    // Oversized bodies are refused before the body arrives.
    assert_eq!(
        Frame::parse(&header(Kind::Send as u8, FIRST, u32::MAX)),
        Err(WireError::Length {
            kind: 6,
            len: u32::MAX
        })
    );
    assert!(Frame::parse(&header(Kind::ConnReq as u8, 0, 16 + 1025)).is_err());
    assert!(Frame::parse(&header(Kind::Rtu as u8, 0, 1)).is_err());
    assert!(Frame::parse(&header(Kind::NoListener as u8, 0, 8)).is_err());
    assert!(Frame::parse(&header(Kind::NoListener as u8, LAST, 0)).is_err());
    assert!(Frame::parse(&header(Kind::Confirm as u8, 0, 4)).is_err());
    // Too short for the fixed part.
    assert!(Frame::parse(&header(Kind::ReadReq as u8, 0, 19)).is_err());
    assert!(Frame::parse(&header(Kind::Nak as u8, 0, 4)).is_err());
}

#[test]
fn refuses_bad_flags_and_reserved_bits() {
    assert_eq!(
        Frame::parse(&header(Kind::Ack as u8, FIRST, 0)),
        Err(WireError::Flags(FIRST))
    );
    assert!(Frame::parse(&header(Kind::RdmaWrite as u8, SOLICITED, 20)).is_err());
    let mut h = header(Kind::Ack as u8, 0, 0);
    h[2] = 1;
    assert!(Frame::parse(&h).is_err());
}

#[test]
fn refuses_inconsistent_fields() {
    // Payload longer than the total.
    let mut v = Vec::new();
    Frame::Send {
        msn: 1,
        total: 2,
        flags: FIRST | LAST,
        payload: &[1, 2, 3],
    }
    .emit(0, &mut v);
    assert_eq!(
        Frame::parse(&v),
        Err(WireError::Field("payload longer than the message"))
    );
    // An empty piece of a non-empty message.
    let mut v = Vec::new();
    Frame::ReadResp {
        msn: 1,
        total: 2,
        flags: FIRST,
        payload: &[],
    }
    .emit(0, &mut v);
    assert_eq!(Frame::parse(&v), Err(WireError::Field("empty piece")));
    // A Nak with success, flushed or an unknown status.
    for status in [0, 1, 13, u32::MAX] {
        let mut v = Vec::new();
        Frame::Nak { msn: 1, status }.emit(0, &mut v);
        assert_eq!(Frame::parse(&v), Err(WireError::Field("nak status")));
    }
    // A connection request of another version.
    let mut v = Vec::new();
    Frame::ConnReq {
        rnr_timeout_ms: 1,
        qual: 1,
        private_data: &[],
    }
    .emit(0, &mut v);
    v[HEADER_LEN] = 99;
    assert_eq!(Frame::parse(&v), Err(WireError::Field("version")));
}

#[test]
fn emit_truncates_oversized_private_data_to_the_limit() {
    let big = vec![1u8; MAX_PRIVATE_DATA + 10];
    let mut v = Vec::new();
    Frame::Reject { private_data: &big }.emit(0, &mut v);
    let d = Frame::parse(&v).unwrap().unwrap();
    assert_eq!(
        d.frame,
        Frame::Reject {
            private_data: &big[..MAX_PRIVATE_DATA]
        }
    );
}

#[test]
fn pseudo_random_input_never_panics() {
    // A deterministic xorshift stream: mutations of valid frames and pure noise.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut valid = Vec::new();
    for f in all_frames() {
        f.emit(0, &mut valid);
    }
    for _ in 0..20_000 {
        let mut v = valid.clone();
        let flips = next() % 8;
        for _ in 0..flips {
            let at = usize::try_from(next()).unwrap() % v.len();
            v[at] = next().to_le_bytes()[0];
        }
        let cut = usize::try_from(next()).unwrap() % (v.len() + 1);
        let _ = parse_all(&v[cut..]);
        let noise: Vec<u8> = (0..(next() % 64))
            .map(|_| next().to_le_bytes()[0])
            .collect();
        let _ = parse_all(&noise);
    }
}

/// The fuzz target's corpus (`fuzz/corpus/frame`) runs here as an ordinary test: every file
/// parses without a panic, and the files named `valid-*` parse completely.
#[test]
fn fuzz_corpus_parses_without_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/frame");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz corpus directory") {
        let path = entry.expect("corpus entry").path();
        let bytes = std::fs::read(&path).expect("corpus file");
        let (frames, err) = parse_all(&bytes);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("valid-") {
            assert!(frames > 0 && err.is_none(), "{name}: {frames} {err:?}");
        }
        n += 1;
    }
    assert!(n >= 12, "corpus has {n} files");
}

/// Regenerates the seed corpus from [`all_frames`] (run by hand with `--ignored`).
#[test]
#[ignore = "writes the fuzz seed corpus"]
fn write_seed_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/frame");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, f) in all_frames().iter().enumerate() {
        let mut v = Vec::new();
        f.emit(u32::try_from(i).unwrap(), &mut v);
        std::fs::write(dir.join(format!("valid-{i:02}-{:?}", f.kind())), &v).unwrap();
    }
    std::fs::write(dir.join("bad-kind"), header(200, 0, 0)).unwrap();
    std::fs::write(dir.join("bad-length"), header(6, 1, u32::MAX)).unwrap();
    std::fs::write(dir.join("truncated"), &header(6, 3, 100)[..10]).unwrap();
}

#[test]
fn partial_data_frames_decode_their_fixed_fields_early() {
    let payload: Vec<u8> = (0..100u8).collect();
    let mut v = Vec::new();
    Frame::RdmaWrite {
        msn: 3,
        total: 500,
        rkey: 9,
        addr: 4096,
        flags: FIRST,
        payload: &payload,
    }
    .emit(7, &mut v);
    let fixed_end = HEADER_LEN + 20;
    for cut in 0..fixed_end {
        assert_eq!(Frame::parse_partial(&v[..cut]), Ok(None));
    }
    for cut in fixed_end..=v.len() {
        let p = Frame::parse_partial(&v[..cut]).unwrap().unwrap();
        assert_eq!(p.len, cut);
        assert_eq!(p.payload_len, 100);
        assert_eq!(p.ack, 7);
        assert_eq!(
            p.frame,
            Frame::RdmaWrite {
                msn: 3,
                total: 500,
                rkey: 9,
                addr: 4096,
                flags: FIRST,
                payload: &payload[..cut - fixed_end],
            }
        );
    }
    // Not for control frames, and the same refusals as a whole frame.
    let mut a = Vec::new();
    Frame::Ack.emit(0, &mut a);
    assert_eq!(Frame::parse_partial(&a), Ok(None));
    let mut bad = Vec::new();
    Frame::Send {
        msn: 1,
        total: 2,
        flags: FIRST | LAST,
        payload: &[1, 2, 3],
    }
    .emit(0, &mut bad);
    assert!(Frame::parse_partial(&bad[..HEADER_LEN + 8]).is_err());
}
