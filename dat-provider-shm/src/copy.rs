//! Raw copies between registered memory ([`Segment`] lists) and the shared ring, and the
//! address lists handed to cross-memory attach. No reference into a registered buffer or into
//! the shared segment is ever created (see `dat_core::mem::buffer`'s access contract).
#![allow(unsafe_code)]

use dat_core::mem::Segment;

use crate::sys::{Iovs, RemoteIov};

/// Start pointer of a segment, if its range lies inside its buffer.
fn base(seg: &Segment) -> Option<*mut u8> {
    let end = seg.offset.checked_add(seg.len)?;
    if end > seg.buf.len() {
        return None;
    }
    // SAFETY: `offset <= buf.len()` (checked), so the result is inside or one past the
    // buffer's allocation.
    Some(unsafe { seg.buf.as_ptr().add(seg.offset) })
}

/// Calls `f(segment_ptr, done, n)` for each piece of `segs` covering `count` bytes from the
/// logical position `pos`. Returns the bytes covered.
fn walk(
    segs: &[Segment],
    pos: u64,
    count: usize,
    mut f: impl FnMut(*mut u8, usize, usize),
) -> usize {
    let mut skip = pos;
    let mut done = 0usize;
    for seg in segs {
        if done == count {
            break;
        }
        let len = seg.len as u64;
        if skip >= len {
            skip -= len;
            continue;
        }
        let Some(p) = base(seg) else { break };
        let off = skip as usize;
        skip = 0;
        let n = (seg.len - off).min(count - done);
        // SAFETY: `off < seg.len`, so `p + off` is inside the segment.
        f(unsafe { p.add(off) }, done, n);
        done += n;
    }
    done
}

/// Copies `n` bytes from `src` to `dst`; a small copy (an 8-byte message, an acknowledged
/// word) is a move or two of whole words instead of a call to `memcpy`.
///
/// # Safety
/// As [`std::ptr::copy_nonoverlapping`].
#[inline]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: (all arms) the caller's ranges hold `n` bytes; unaligned reads and writes of
    // words inside them (for 9..=16 bytes, the first and the last eight, which overlap).
    unsafe {
        match n {
            8 => dst
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            9..=16 => {
                let (a, b) = (
                    src.cast::<u64>().read_unaligned(),
                    src.add(n - 8).cast::<u64>().read_unaligned(),
                );
                dst.cast::<u64>().write_unaligned(a);
                dst.add(n - 8).cast::<u64>().write_unaligned(b);
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Copies up to `n` bytes of `segs` from position `pos` to `dst`. Returns the bytes copied.
///
/// # Safety
/// `dst..dst+n` must be valid for writes and must not overlap the segments.
pub unsafe fn gather_raw(segs: &[Segment], pos: u64, dst: *mut u8, n: usize) -> usize {
    walk(segs, pos, n, |p, done, k| {
        // SAFETY: `p..p+k` lies in a live segment (walk), `dst+done..dst+done+k` in the
        // caller's range; they do not overlap (caller's contract).
        unsafe { copy_bytes(p, dst.add(done), k) }
    })
}

/// Copies up to `n` bytes from `src` into `segs` at position `pos`. Returns the bytes copied.
///
/// # Safety
/// `src..src+n` must be valid for reads and must not overlap the segments.
pub unsafe fn scatter_raw(segs: &[Segment], pos: u64, src: *const u8, n: usize) -> usize {
    walk(segs, pos, n, |p, done, k| {
        // SAFETY: as in `gather_raw`, with the roles swapped.
        unsafe { copy_bytes(src.add(done), p, k) }
    })
}

/// [`scatter_raw`] with the last byte stored last: every other byte, then a `Release`
/// fence, then the last byte (`dat_core::mem::scatter_at_ordered`). The final piece of an
/// RDMA write at its target, or of an RDMA read's data at the requester: InfiniBand places
/// those bytes in order and consumers poll the last one.
///
/// # Safety
/// As [`scatter_raw`].
pub unsafe fn scatter_raw_ordered(segs: &[Segment], pos: u64, src: *const u8, n: usize) -> usize {
    let Some(body) = n.checked_sub(1) else {
        return 0;
    };
    // SAFETY: `src..src+body` is part of the caller's range.
    let done = unsafe { scatter_raw(segs, pos, src, body) };
    if done < body {
        return done;
    }
    // SAFETY: `src + body` is the last byte of the caller's range, valid for reads; a
    // volatile read because the peer may write the shared ring at any time.
    let last = unsafe { std::ptr::read_volatile(src.add(body)) };
    done + dat_core::mem::scatter_at_ordered(segs, pos + body as u64, &[last])
}

/// The addresses of `segs` in this process, for a peer's cross-memory attach (no list is
/// built: a request may have any number of segments).
pub fn iov_iter(segs: &[Segment]) -> impl Iterator<Item = RemoteIov> + Clone + '_ {
    segs.iter().filter(|s| s.len > 0).filter_map(|s| {
        base(s).map(|p| RemoteIov {
            addr: p as u64,
            len: s.len as u64,
        })
    })
}

/// [`iov_iter`] into `out` (cleared first; a list kept across requests keeps its room).
pub fn iovs_into(segs: &[Segment], out: &mut Iovs) {
    out.clear();
    out.extend(iov_iter(segs));
}

/// The start pointer and length of one target segment (checked against its buffer).
pub fn target(seg: &Segment) -> Option<(*mut u8, usize)> {
    base(seg).map(|p| (p, seg.len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use dat_core::mem::Buffer;
    use std::sync::Arc;

    fn seg(buf: &Arc<Buffer>, offset: usize, len: usize) -> Segment {
        Segment {
            buf: buf.clone().into(),
            offset,
            len,
            lkey: 1,
            addr: 0,
        }
    }

    #[test]
    fn small_copies_move_exactly_their_bytes() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=24 {
            let mut dst = [0u8; 40];
            // SAFETY: both arrays hold more than `n` bytes at the offsets used.
            unsafe { copy_bytes(src.as_ptr().add(3), dst.as_mut_ptr().add(5), n) };
            assert_eq!(&dst[5..5 + n], &src[3..3 + n], "{n} bytes");
            assert!(
                dst[..5].iter().chain(&dst[5 + n..]).all(|b| *b == 0),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn gather_and_scatter_cross_segment_boundaries() {
        let b = Arc::new(Buffer::from_vec((0u8..32).collect()));
        let segs = [
            seg(&b, 0, 4),
            seg(&b, 10, 6),
            seg(&b, 20, 0),
            seg(&b, 28, 4),
        ];
        let mut out = [0u8; 16];
        // SAFETY: `out` is a distinct local of 16 bytes.
        let n = unsafe { gather_raw(&segs, 2, out.as_mut_ptr(), 16) };
        assert_eq!(n, 12);
        assert_eq!(&out[..12], &[2, 3, 10, 11, 12, 13, 14, 15, 28, 29, 30, 31]);
        let src = [0xAAu8; 5];
        // SAFETY: `src` is a distinct local of 5 bytes.
        let n = unsafe { scatter_raw(&segs, 3, src.as_ptr(), 5) };
        assert_eq!(n, 5);
        let v = b.to_vec();
        assert_eq!(&v[3..4], &[0xAA]);
        assert_eq!(&v[10..14], &[0xAA; 4]);
        assert_eq!(v[14], 14);
        assert_eq!(iov_iter(&segs).count(), 3);
        // The ordered variant places the same bytes (its last one after a fence).
        let src = [0x55u8; 7];
        // SAFETY: `src` is a distinct local of 7 bytes.
        let n = unsafe { scatter_raw_ordered(&segs, 6, src.as_ptr(), 7) };
        assert_eq!(n, 7);
        let v = b.to_vec();
        assert_eq!(&v[12..16], &[0x55; 4]);
        assert_eq!(&v[28..31], &[0x55; 3]);
        assert_eq!(v[31], 31);
        // SAFETY: as above.
        assert_eq!(unsafe { scatter_raw_ordered(&segs, 0, src.as_ptr(), 0) }, 0);
        // A hand-made segment outside its buffer is never touched.
        let bad = [seg(&b, 30, 8)];
        // SAFETY: as above.
        assert_eq!(unsafe { gather_raw(&bad, 0, out.as_mut_ptr(), 8) }, 0);
        assert_eq!(iov_iter(&bad).count(), 0);
    }
}
