//! [`Segment`]: the resolved local memory of one post segment, and the gather/scatter rules of
//! reference 6.3 (gather = concatenate in order; scatter = leading segments full, at most one
//! partial, the rest untouched).
//!
//! Providers move data between segments and their own socket or shared-memory buffers with
//! the copy helpers here ([`Segment::copy_from`], [`Segment::copy_to`], [`gather_at`],
//! [`scatter_at`], [`copy_segments`]), which never build references into a
//! [`Buffer`] (see its access contract).

use std::sync::Arc;

use smallvec::SmallVec;

use super::buffer::{Buffer, OUT_OF_RANGE};
use super::pin::SegBuf;
use crate::error::{DatError, DatResult, ErrorType, Subtype};

/// Resolved local memory of one post segment. It keeps the memory alive ([`SegBuf`], a
/// counted reference that a post and its completion take and give back without an atomic
/// operation in the usual case) until the provider drops it, so a consumer freeing an LMR
/// under an outstanding DTO cannot pull the memory away from the provider.
///
/// Built by [`MemTable::local`](super::MemTable::local) and
/// [`MemTable::remote`](super::MemTable::remote), which guarantee
/// `offset + len <= buf.len()`. The fields are public for providers and tests; the copy
/// helpers re-check the range anyway, so a hand-made inconsistent segment cannot cause an
/// out-of-bounds access, only an `OUT_OF_RANGE` error (or a short copy).
#[derive(Clone, Debug)]
pub struct Segment {
    /// The registered memory the segment lies in (dereferences to the [`Buffer`]).
    pub buf: SegBuf,
    /// Offset of the segment's first byte in `buf`.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
    /// The key the post named: the triplet's `lmr_context` for local segments, the underlying
    /// LMR's `lmr_context` for a segment resolved from an incoming RDMA.
    pub lkey: u32,
    /// The address as the triplet (or the RDMA request) named it: a virtual address, or an
    /// offset for zero-based registrations.
    pub addr: u64,
}

/// The segments of one post. Two inline entries (a payload, or a header and a payload) cover
/// the common cases without allocating; a longer gather/scatter list allocates once.
///
/// Every post moves its list into the transport's queue and out again, so its size is paid
/// per message: with four inline entries the work request was 208 bytes, copied by `memcpy`
/// several times per post; with two it is 128 (shm, 8-byte ping-pong: 6 503 instructions per
/// round trip with four, 6 009 with two, 5 881 with one).
pub type SegList = SmallVec<[Segment; 2]>;

/// The list of the one segment `seg`, written in place. `SegList::push` would do the same,
/// but its growth path (never taken for a first entry, yet a call that sees the list)
/// keeps the compiler from building the list inside the work request that is then handed
/// to the transport: a post paid a 128-byte copy of its request for it.
#[inline(always)]
#[allow(unsafe_code)]
pub fn one_segment(seg: Segment) -> SegList {
    let mut buf = std::mem::MaybeUninit::<[Segment; 2]>::uninit();
    // SAFETY: writes the first element of the array, in bounds, without reading or dropping
    // the uninitialised memory it replaces.
    unsafe { buf.as_mut_ptr().cast::<Segment>().write(seg) };
    // SAFETY: the first element of `buf` is initialised (just written) and 1 is within the
    // inline capacity of 2, so the list owns exactly that element.
    unsafe { SegList::from_buf_and_len_unchecked(buf, 1) }
}

impl Segment {
    /// A segment of `len` bytes at `offset` in `buf` with its own reference to it, named by
    /// key `lkey` at address `offset` (a hand-made segment: tests, a provider's own
    /// buffers).
    pub fn of_buffer(buf: &Arc<Buffer>, offset: usize, len: usize, lkey: u32) -> Segment {
        Segment {
            buf: SegBuf::new(Arc::clone(buf)),
            offset,
            len,
            lkey,
            addr: offset as u64,
        }
    }

    /// Resolves `off..off+count` (relative to the segment) to a buffer offset, overflow-safe.
    fn range(&self, off: usize, count: usize) -> DatResult<usize> {
        match off.checked_add(count) {
            Some(end) if end <= self.len => self.offset.checked_add(off).ok_or(OUT_OF_RANGE),
            _ => Err(OUT_OF_RANGE),
        }
    }

    /// Length as `u64` (saturating on hypothetical 128-bit targets).
    #[inline]
    pub fn len_u64(&self) -> u64 {
        u64::try_from(self.len).unwrap_or(u64::MAX)
    }

    /// Copies `src` into the segment starting `off` bytes into it (a receive or an incoming
    /// RDMA write landing).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if `off + src.len()` exceeds the segment
    /// (or the segment exceeds its buffer); nothing is written then.
    pub fn copy_from(&self, off: usize, src: &[u8]) -> DatResult<()> {
        let at = self.range(off, src.len())?;
        self.buf.write_at(at, src)
    }

    /// [`Segment::copy_from`] with the last byte of `src` stored last (see
    /// [`Buffer::write_at_ordered`]): the final piece of an incoming RDMA write.
    ///
    /// # Errors
    /// As [`Segment::copy_from`].
    pub fn copy_from_ordered(&self, off: usize, src: &[u8]) -> DatResult<()> {
        let at = self.range(off, src.len())?;
        self.buf.write_at_ordered(at, src)
    }

    /// Copies `dst.len()` bytes out of the segment starting `off` bytes into it (a send or an
    /// RDMA read source being transmitted).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if `off + dst.len()` exceeds the segment
    /// (or the segment exceeds its buffer); `dst` is untouched then.
    pub fn copy_to(&self, off: usize, dst: &mut [u8]) -> DatResult<()> {
        let at = self.range(off, dst.len())?;
        self.buf.read_at(at, dst)
    }

    /// Sets `count` bytes starting `off` bytes into the segment to `byte`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if the range exceeds the segment.
    pub fn fill(&self, off: usize, count: usize, byte: u8) -> DatResult<()> {
        let at = self.range(off, count)?;
        self.buf.fill(at, count, byte)
    }

    /// Copies `count` bytes from `src` (starting `src_off` into it) to this segment (starting
    /// `off` into it) without an intermediate buffer: a shared-memory RDMA.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if either range exceeds its segment.
    pub fn copy_from_segment(
        &self,
        off: usize,
        src: &Segment,
        src_off: usize,
        count: usize,
    ) -> DatResult<()> {
        let dst_at = self.range(off, count)?;
        let src_at = src.range(src_off, count)?;
        self.buf.copy_from_buffer(dst_at, &src.buf, src_at, count)
    }

    /// The segment's bytes as a new vector (tests and diagnostics).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        if self.copy_to(0, &mut v).is_err() {
            v.clear();
        }
        v
    }
}

/// The total length of `segs` in bytes (the length of the message a send carries, or the
/// room a receive offers). Saturates instead of overflowing.
#[inline]
pub fn total_len(segs: &[Segment]) -> u64 {
    segs.iter()
        .fold(0u64, |acc, s| acc.saturating_add(s.len_u64()))
}

/// Checks a transfer length against a limit: the local segments of an RDMA against the remote
/// segment's length, or a message against `max_message_size` / `max_rdma_size` (reference
/// 6.3). Returns the total length.
///
/// # Errors
/// `DAT_LENGTH_ERROR` if `total_len(segs) > limit`.
pub fn check_length(segs: &[Segment], limit: u64) -> DatResult<u64> {
    let total = total_len(segs);
    if total > limit {
        return Err(DatError::new(ErrorType::LengthError, Subtype::NoSubtype));
    }
    Ok(total)
}

/// Gathers the bytes of `segs` (concatenated in order) from logical position `pos` into `dst`,
/// as many as fit. Returns the number of bytes copied: `min(dst.len(), total - pos)`, or 0 if
/// `pos` is past the end. Lets a provider stream a send through a fixed socket buffer.
///
/// A segment whose range lies outside its buffer (only possible when built by hand) ends the
/// copy early; the count returned says how far it got.
pub fn gather_at(segs: &[Segment], pos: u64, dst: &mut [u8]) -> usize {
    walk(segs, pos, dst.len(), |seg, seg_off, done, n| {
        dst.get_mut(done..done + n)
            .is_some_and(|d| seg.copy_to(seg_off, d).is_ok())
    })
}

/// Scatters `src` into `segs` starting at logical position `pos` (the concatenation of the
/// segments in order). Returns the number of bytes written: `min(src.len(), total - pos)`, or
/// 0 if `pos` is past the end. Lets a provider land a message arriving in pieces.
///
/// A segment whose range lies outside its buffer (only possible when built by hand) ends the
/// copy early; the count returned says how far it got.
pub fn scatter_at(segs: &[Segment], pos: u64, src: &[u8]) -> usize {
    walk(segs, pos, src.len(), |seg, seg_off, done, n| {
        src.get(done..done + n)
            .is_some_and(|s| seg.copy_from(seg_off, s).is_ok())
    })
}

/// [`scatter_at`] with the last byte written stored last: every other byte, then a
/// `Release` fence, then the last byte (see [`Buffer::write_at_ordered`]). For the final
/// piece of an RDMA read response landing in the requester's segments.
pub fn scatter_at_ordered(segs: &[Segment], pos: u64, src: &[u8]) -> usize {
    let Some((&last, body)) = src.split_last() else {
        return 0;
    };
    let n = scatter_at(segs, pos, body);
    if n < body.len() {
        return n;
    }
    let Some((i, off)) = locate(segs, pos.saturating_add(n as u64)) else {
        return n;
    };
    match segs.get(i).map(|s| s.copy_from_ordered(off, &[last])) {
        Some(Ok(())) => n + 1,
        _ => n,
    }
}

/// Concatenates `segs` into `dst` (send / RDMA write source). Returns the bytes copied:
/// `min(total_len(segs), dst.len())`.
pub fn gather(segs: &[Segment], dst: &mut [u8]) -> usize {
    gather_at(segs, 0, dst)
}

/// Fills `segs` in order from `src` (receive / RDMA read sink): leading segments full, at most
/// one partial, the rest untouched. Returns the bytes written:
/// `min(total_len(segs), src.len())`; a return smaller than `src.len()` means the message did
/// not fit (`DAT_DTO_ERR_LOCAL_LENGTH` for a receive).
pub fn scatter(segs: &[Segment], src: &[u8]) -> usize {
    scatter_at(segs, 0, src)
}

/// Copies `count` bytes from the logical position `src_pos` of `src` to the logical position
/// `dst_pos` of `dst`, segment by segment, with no intermediate buffer (a shared-memory
/// provider moving a send into a receive or executing an RDMA). Returns the bytes copied,
/// limited by `count` and by what both lists hold past their positions.
pub fn copy_segments(
    dst: &[Segment],
    dst_pos: u64,
    src: &[Segment],
    src_pos: u64,
    count: u64,
) -> u64 {
    let mut copied = 0u64;
    while copied < count {
        let (Some((di, doff)), Some((si, soff))) = (
            locate(dst, dst_pos.saturating_add(copied)),
            locate(src, src_pos.saturating_add(copied)),
        ) else {
            break;
        };
        let (Some(d), Some(s)) = (dst.get(di), src.get(si)) else {
            break;
        };
        let room = (d.len - doff).min(s.len - soff);
        let want = usize::try_from(count - copied).unwrap_or(usize::MAX);
        let n = room.min(want);
        if d.copy_from_segment(doff, s, soff, n).is_err() {
            break;
        }
        copied += n as u64;
    }
    copied
}

/// Finds the segment holding logical position `pos` and the offset inside it, skipping
/// zero-length segments. `None` at or past the end.
fn locate(segs: &[Segment], mut pos: u64) -> Option<(usize, usize)> {
    for (i, s) in segs.iter().enumerate() {
        let len = s.len_u64();
        if pos < len {
            return Some((i, usize::try_from(pos).ok()?));
        }
        pos -= len;
    }
    None
}

/// Walks `segs` from logical position `pos` for at most `want` bytes, calling
/// `step(segment, offset_in_segment, bytes_done_so_far, n)` for each piece; stops when a step
/// returns false. Returns the bytes done.
fn walk(
    segs: &[Segment],
    pos: u64,
    want: usize,
    mut step: impl FnMut(&Segment, usize, usize, usize) -> bool,
) -> usize {
    let Some((first, mut off)) = locate(segs, pos) else {
        return 0;
    };
    let mut done = 0usize;
    for seg in segs.iter().skip(first) {
        if done == want {
            break;
        }
        let n = (seg.len - off).min(want - done);
        if n > 0 && !step(seg, off, done, n) {
            break;
        }
        done += n;
        off = 0;
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::Buffer;
    use std::sync::Arc;

    fn seg(buf: &Arc<Buffer>, offset: usize, len: usize) -> Segment {
        Segment {
            buf: SegBuf::new(Arc::clone(buf)),
            offset,
            len,
            lkey: 1,
            addr: buf.addr().wrapping_add(offset as u64),
        }
    }

    #[test]
    fn one_segment_is_a_list_of_that_segment_and_drops_it() {
        let a = Arc::new(Buffer::from_vec(b"abcdefgh".to_vec()));
        let mut list = one_segment(seg(&a, 2, 3));
        assert_eq!(list.len(), 1);
        assert!(!list.spilled());
        assert_eq!((list[0].offset, list[0].len), (2, 3));
        let mut out = [0u8; 8];
        assert_eq!(gather(&list, &mut out), 3);
        assert_eq!(&out[..3], b"cde");
        list.push(seg(&a, 0, 1));
        list.push(seg(&a, 7, 1));
        assert!(list.spilled());
        assert_eq!(gather(&list, &mut out), 5);
        assert_eq!(&out[..5], b"cdeah");
        drop(list);
        assert_eq!(
            Arc::strong_count(&a),
            1,
            "every segment let go of the memory"
        );
    }

    #[test]
    fn gather_concatenates_in_order_and_skips_empty_segments() {
        let a = Arc::new(Buffer::from_vec(b"abcdefgh".to_vec()));
        let b = Arc::new(Buffer::from_vec(b"XYZ".to_vec()));
        let segs = [
            seg(&a, 1, 2),
            seg(&b, 0, 0),
            seg(&b, 0, 3),
            seg(&a, 7, 0),
            seg(&a, 6, 2),
        ];
        assert_eq!(total_len(&segs), 7);
        let mut out = [0u8; 7];
        assert_eq!(gather(&segs, &mut out), 7);
        assert_eq!(&out, b"bcXYZgh");
        // Short destination: only what fits.
        let mut short = [0u8; 4];
        assert_eq!(gather(&segs, &mut short), 4);
        assert_eq!(&short, b"bcXY");
        // Larger destination: the rest is untouched.
        let mut long = [b'.'; 9];
        assert_eq!(gather(&segs, &mut long), 7);
        assert_eq!(&long, b"bcXYZgh..");
        // Streaming from a position.
        let mut mid = [0u8; 3];
        assert_eq!(gather_at(&segs, 3, &mut mid), 3);
        assert_eq!(&mid, b"YZg");
        assert_eq!(gather_at(&segs, 7, &mut mid), 0);
        assert_eq!(gather_at(&segs, u64::MAX, &mut mid), 0);
        assert_eq!(gather(&[], &mut mid), 0);
    }

    #[test]
    fn scatter_fills_leading_segments_one_partial_rest_untouched() {
        let m = Arc::new(Buffer::from_vec(vec![b'.'; 12]));
        let segs = [seg(&m, 0, 3), seg(&m, 3, 0), seg(&m, 4, 3), seg(&m, 8, 4)];
        assert_eq!(scatter(&segs, b"12345"), 5);
        assert_eq!(m.to_vec(), b"123.45......");
        // Too much data: everything that fits, and the count tells.
        assert_eq!(scatter(&segs, b"abcdefghijklmn"), 10);
        assert_eq!(m.to_vec(), b"abc.def.ghij");
        assert_eq!(scatter(&segs, b""), 0);
    }

    #[test]
    fn scatter_at_lands_a_message_in_pieces() {
        let m = Arc::new(Buffer::from_vec(vec![0; 10]));
        let segs = [seg(&m, 0, 4), seg(&m, 6, 4)];
        assert_eq!(scatter_at(&segs, 0, b"ab"), 2);
        assert_eq!(scatter_at(&segs, 2, b"cdef"), 4);
        assert_eq!(scatter_at(&segs, 6, b"ghij"), 2);
        assert_eq!(scatter_at(&segs, 8, b"z"), 0);
        assert_eq!(m.to_vec(), b"abcd\0\0efgh");
    }

    #[test]
    fn many_segments_round_trip() {
        let src = Arc::new(Buffer::from_vec((0..=255u8).collect()));
        let dst = Arc::new(Buffer::alloc(256, 8).unwrap());
        // 32 source segments of varying length (some empty) in reverse order of the buffer.
        let mut ssegs = Vec::new();
        let mut at = 256usize;
        for i in 0..32usize {
            let n = (i * 7) % 13;
            let n = n.min(at);
            at -= n;
            ssegs.push(seg(&src, at, n));
        }
        let total = total_len(&ssegs);
        let mut flat = vec![0u8; 256];
        let n = gather(&ssegs, &mut flat);
        assert_eq!(n as u64, total);
        // Scatter into 40 one-to-nine byte destination segments.
        let mut dsegs = SegList::new();
        let mut at = 0usize;
        for i in 0..40usize {
            let n = 1 + i % 9;
            dsegs.push(seg(&dst, at, n));
            at += n;
        }
        assert!(dsegs.spilled());
        assert_eq!(scatter(&dsegs, &flat[..n]), n);
        let mut back = vec![0u8; n];
        assert_eq!(gather(&dsegs, &mut back), n);
        assert_eq!(back, flat[..n]);
        // And the segment-to-segment copy gives the same bytes.
        let other = Arc::new(Buffer::alloc(256, 8).unwrap());
        let osegs = [seg(&other, 0, 100), seg(&other, 100, 156)];
        assert_eq!(copy_segments(&osegs, 0, &ssegs, 0, u64::MAX), total);
        assert_eq!(other.to_vec()[..n], flat[..n]);
    }

    #[test]
    fn copy_segments_honours_positions_and_count() {
        let s = Arc::new(Buffer::from_vec(b"0123456789".to_vec()));
        let d = Arc::new(Buffer::from_vec(vec![b'.'; 8]));
        let src = [seg(&s, 0, 5), seg(&s, 5, 5)];
        let dst = [seg(&d, 0, 3), seg(&d, 3, 0), seg(&d, 3, 5)];
        assert_eq!(copy_segments(&dst, 1, &src, 3, 4), 4);
        assert_eq!(d.to_vec(), b".3456...");
        // Limited by the destination's room.
        assert_eq!(copy_segments(&dst, 6, &src, 0, 10), 2);
        assert_eq!(d.to_vec(), b".3456.01");
        // Past the end of either side.
        assert_eq!(copy_segments(&dst, 8, &src, 0, 1), 0);
        assert_eq!(copy_segments(&dst, 0, &src, 10, 1), 0);
        assert_eq!(copy_segments(&dst, 0, &src, 0, 0), 0);
    }

    #[test]
    fn segment_copies_are_bounded_by_the_segment_not_the_buffer() {
        let m = Arc::new(Buffer::from_vec(vec![0; 10]));
        let s = seg(&m, 2, 4);
        assert_eq!(s.copy_from(0, b"abcd"), Ok(()));
        assert_eq!(s.copy_from(1, b"abcd"), Err(OUT_OF_RANGE));
        assert_eq!(s.copy_from(usize::MAX, b"a"), Err(OUT_OF_RANGE));
        let mut out = [0u8; 2];
        assert_eq!(s.copy_to(2, &mut out), Ok(()));
        assert_eq!(&out, b"cd");
        assert_eq!(s.copy_to(3, &mut out), Err(OUT_OF_RANGE));
        assert_eq!(s.fill(3, 2, 1), Err(OUT_OF_RANGE));
        assert_eq!(s.fill(3, 1, b'z'), Ok(()));
        assert_eq!(s.to_vec(), b"abcz");
        assert_eq!(m.to_vec(), b"\0\0abcz\0\0\0\0");
    }

    #[test]
    fn inconsistent_hand_made_segments_fail_safely() {
        let m = Arc::new(Buffer::from_vec(vec![1; 4]));
        let bad = seg(&m, 2, 8); // claims more than the buffer has
        assert_eq!(bad.copy_from(0, &[0; 3]), Err(OUT_OF_RANGE));
        assert!(bad.to_vec().is_empty());
        let huge = seg(&m, usize::MAX, 1);
        assert_eq!(huge.copy_to(0, &mut [0]), Err(OUT_OF_RANGE));
        let ok = seg(&m, 0, 2);
        let segs = [ok, bad];
        let mut out = [0u8; 6];
        assert_eq!(gather(&segs, &mut out), 2);
        assert_eq!(scatter(&segs, &[9; 6]), 2);
        assert_eq!(m.to_vec(), vec![9, 9, 1, 1]);
    }

    #[test]
    fn check_length_reports_dat_length_error() {
        let m = Arc::new(Buffer::from_vec(vec![0; 10]));
        let segs = [seg(&m, 0, 4), seg(&m, 4, 6)];
        assert_eq!(check_length(&segs, 10), Ok(10));
        assert_eq!(check_length(&segs, u64::MAX), Ok(10));
        let e = check_length(&segs, 9).unwrap_err();
        assert_eq!(e.to_raw(), 0x8008_0000);
        assert_eq!(check_length(&[], 0), Ok(0));
    }

    #[test]
    fn ordered_scatter_places_the_same_bytes_as_scatter() {
        let b = Arc::new(Buffer::from_vec(vec![0; 16]));
        let segs = [seg(&b, 0, 3), seg(&b, 5, 0), seg(&b, 8, 4)];
        assert_eq!(scatter_at_ordered(&segs, 1, &[1, 2, 3, 4]), 4);
        assert_eq!(b.to_vec()[..12], [0, 1, 2, 0, 0, 0, 0, 0, 3, 4, 0, 0]);
        // The last byte alone in a later segment; beyond the end only what fits.
        assert_eq!(scatter_at_ordered(&segs, 6, &[7]), 1);
        assert_eq!(b.to_vec()[11], 7);
        assert_eq!(scatter_at_ordered(&segs, 5, &[8, 9, 10]), 2);
        assert_eq!(b.to_vec()[10..12], [8, 9]);
        assert_eq!(scatter_at_ordered(&segs, 7, &[5]), 0);
        assert_eq!(scatter_at_ordered(&segs, 0, &[]), 0);
        let s = seg(&b, 12, 4);
        s.copy_from_ordered(1, &[6, 6]).unwrap();
        assert_eq!(b.to_vec()[12..], [0, 6, 6, 0]);
        assert!(s.copy_from_ordered(3, &[1, 1]).is_err());
    }
}
