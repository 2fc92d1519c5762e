//! The bytes an engine has queued for the socket: frame headers and small payloads copied
//! into one buffer, and large payloads referenced in registered memory (so the driver can
//! hand them to `writev` without copying them first).

use std::collections::VecDeque;

use dat_core::mem::Segment;

/// One run of queued bytes.
enum Piece {
    /// `buf[start..end]`.
    Own { start: usize, end: usize },
    /// `len` bytes of `seg` from `off`.
    Mem {
        seg: Segment,
        off: usize,
        len: usize,
    },
}

/// A queued run as the driver sees it.
pub enum TxPiece<'a> {
    /// Bytes in the engine's buffer.
    Bytes(&'a [u8]),
    /// Bytes in registered memory: `len` bytes of `seg` from `off` (within the segment).
    Mem {
        /// The segment.
        seg: &'a Segment,
        /// Offset in the segment.
        off: usize,
        /// Length.
        len: usize,
    },
}

/// Consumed buffer bytes above which the buffer is compacted while runs remain.
const COMPACT: usize = 256 * 1024;

/// The transmit queue.
#[derive(Default)]
pub(super) struct TxQueue {
    /// Appended to freely by frame encoders; [`TxQueue::seal`] turns new bytes into a run.
    pub(super) buf: Vec<u8>,
    pieces: VecDeque<Piece>,
    sealed: usize,
    /// Bytes of the front run already written.
    head: usize,
    /// Bytes queued in runs (not counting `head`).
    queued: usize,
}

impl TxQueue {
    /// Turns bytes appended to `buf` since the last call into a run.
    pub(super) fn seal(&mut self) {
        let end = self.buf.len();
        if end <= self.sealed {
            return;
        }
        self.queued += end - self.sealed;
        match self.pieces.back_mut() {
            Some(Piece::Own { end: e, .. }) if *e == self.sealed => *e = end,
            _ => self.pieces.push_back(Piece::Own {
                start: self.sealed,
                end,
            }),
        }
        self.sealed = end;
    }

    /// Queues `len` bytes of `seg` from `off` without copying them.
    pub(super) fn push_mem(&mut self, seg: &Segment, off: usize, len: usize) {
        if len == 0 {
            return;
        }
        self.seal();
        self.pieces.push_back(Piece::Mem {
            seg: seg.clone(),
            off,
            len,
        });
        self.queued += len;
    }

    /// Bytes queued (sealed or not).
    pub(super) fn len(&self) -> usize {
        self.queued + (self.buf.len() - self.sealed)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(super) fn clear(&mut self) {
        self.buf.clear();
        self.pieces.clear();
        self.sealed = 0;
        self.head = 0;
        self.queued = 0;
    }

    /// The queued runs in order, the first one less what was already written.
    pub(super) fn pieces(&mut self) -> impl Iterator<Item = TxPiece<'_>> {
        self.seal();
        let head = self.head;
        let buf = &self.buf;
        self.pieces.iter().enumerate().map(move |(i, p)| {
            let skip = if i == 0 { head } else { 0 };
            match p {
                Piece::Own { start, end } => {
                    TxPiece::Bytes(buf.get(start + skip..*end).unwrap_or_default())
                }
                Piece::Mem { seg, off, len } => TxPiece::Mem {
                    seg,
                    off: off + skip,
                    len: len - skip,
                },
            }
        })
    }

    /// The queued bytes as one slice: copies referenced runs into the buffer first if there
    /// are any (the copying path, used by in-memory tests and as a fallback).
    pub(super) fn contiguous(&mut self) -> &[u8] {
        self.seal();
        if self.pieces.iter().any(|p| matches!(p, Piece::Mem { .. })) || self.pieces.len() > 1 {
            let mut flat = Vec::with_capacity(self.queued);
            for p in self.pieces() {
                match p {
                    TxPiece::Bytes(b) => flat.extend_from_slice(b),
                    TxPiece::Mem { seg, off, len } => {
                        let at = flat.len();
                        flat.resize(at + len, 0);
                        if let Some(dst) = flat.get_mut(at..)
                            && seg.copy_to(off, dst).is_err()
                        {
                            tracing::error!("queued segment out of range");
                        }
                    }
                }
            }
            self.clear();
            self.buf = flat;
            self.seal();
        }
        match self.pieces.front() {
            Some(Piece::Own { start, end }) => {
                self.buf.get(start + self.head..*end).unwrap_or_default()
            }
            _ => &[],
        }
    }

    /// Marks `n` bytes as written.
    pub(super) fn advance(&mut self, mut n: usize) {
        self.seal();
        while n > 0 {
            let Some(front) = self.pieces.front() else {
                break;
            };
            let len = match front {
                Piece::Own { start, end } => end - start,
                Piece::Mem { len, .. } => *len,
            };
            let rest = len - self.head;
            if n >= rest {
                self.pieces.pop_front();
                self.head = 0;
                self.queued -= rest;
                n -= rest;
            } else {
                self.head += n;
                self.queued -= n;
                n = 0;
            }
        }
        if self.pieces.is_empty() {
            self.buf.clear();
            self.sealed = 0;
            self.head = 0;
        } else {
            self.compact();
        }
    }

    /// Drops the written prefix of the buffer once it is large.
    fn compact(&mut self) {
        let first_own = self.pieces.iter().find_map(|p| match p {
            Piece::Own { start, .. } => Some(*start),
            Piece::Mem { .. } => None,
        });
        let cut = match (first_own, self.pieces.front()) {
            (Some(s), Some(Piece::Own { .. })) => s + self.head,
            (Some(s), _) => s,
            (None, _) => self.sealed,
        };
        if cut < COMPACT {
            return;
        }
        self.buf.drain(..cut);
        self.sealed -= cut;
        let head_in_own = matches!(self.pieces.front(), Some(Piece::Own { .. }));
        for (i, p) in self.pieces.iter_mut().enumerate() {
            if let Piece::Own { start, end } = p {
                *start = start.saturating_sub(cut);
                *end -= cut;
                if i == 0 && head_in_own {
                    // The written part of the front run was cut off with the prefix.
                    *start = 0;
                }
            }
        }
        if head_in_own {
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dat_core::mem::{Buffer, Segment};

    use super::*;

    fn seg(bytes: &[u8]) -> Segment {
        Segment {
            buf: Arc::new(Buffer::from_vec(bytes.to_vec())).into(),
            offset: 0,
            len: bytes.len(),
            lkey: 1,
            addr: 0,
        }
    }

    fn drain(q: &mut TxQueue) -> Vec<u8> {
        let mut out = Vec::new();
        for p in q.pieces() {
            match p {
                TxPiece::Bytes(b) => out.extend_from_slice(b),
                TxPiece::Mem { seg, off, len } => {
                    let at = out.len();
                    out.resize(at + len, 0);
                    seg.copy_to(off, &mut out[at..]).unwrap();
                }
            }
        }
        out
    }

    #[test]
    fn runs_keep_order_and_partial_advances_cross_them() {
        let mut q = TxQueue::default();
        q.buf.extend_from_slice(b"head");
        let s = seg(b"0123456789");
        q.push_mem(&s, 2, 5);
        q.buf.extend_from_slice(b"tail");
        assert_eq!(q.len(), 13);
        assert_eq!(drain(&mut q), b"head23456tail");
        q.advance(3);
        assert_eq!(drain(&mut q), b"d23456tail");
        q.advance(3);
        assert_eq!(drain(&mut q), b"456tail");
        assert_eq!(q.contiguous(), b"456tail");
        q.advance(7);
        assert!(q.is_empty());
        assert!(q.buf.is_empty());
    }

    #[test]
    fn compaction_keeps_the_unwritten_bytes() {
        let mut q = TxQueue::default();
        let big: Vec<u8> = (0..COMPACT + 1000).map(|i| (i % 251) as u8).collect();
        q.buf.extend_from_slice(&big);
        let s = seg(b"XYZ");
        q.push_mem(&s, 0, 3);
        q.buf.extend_from_slice(b"end");
        q.advance(COMPACT + 10);
        assert!(q.buf.len() < 1000, "compacted to {}", q.buf.len());
        let mut want = big[COMPACT + 10..].to_vec();
        want.extend_from_slice(b"XYZend");
        assert_eq!(drain(&mut q), want);
        q.advance(990);
        assert_eq!(drain(&mut q), b"XYZend");
        q.advance(4);
        assert_eq!(drain(&mut q), b"nd");
    }
}
