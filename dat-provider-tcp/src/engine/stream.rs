//! The payload of a piece that did not fit in the input: where its remaining bytes go
//! (straight from the socket into registered memory, or from later input) and finishing the
//! piece once they have landed.

use std::time::Instant;

use dat_core::mem::{Segment, scatter_at};

use super::data::place_write;
use super::requests::place_read;
use super::{Engine, RxCur, RxStream, Streaming};

impl Engine {
    /// When only `present` of the piece's `n` payload bytes (starting at message position
    /// `start`) were in the input, records where the rest goes and returns true.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stream_rest(
        &mut self,
        kind: Streaming,
        msn: u32,
        total: u32,
        flags: u8,
        start: u32,
        present: usize,
        n: u32,
    ) -> bool {
        let n = n as usize;
        if present >= n {
            return false;
        }
        self.rx_stream = Some(RxStream {
            kind,
            msn,
            total,
            flags,
            at: u64::from(start) + present as u64,
            left: n - present,
        });
        true
    }

    /// Places payload bytes of the piece being streamed; finishes the piece when complete.
    pub(super) fn stream_place(&mut self, now: Instant, bytes: &[u8]) {
        let Some(st) = &self.rx_stream else {
            return;
        };
        let k = bytes.len().min(st.left);
        let (kind, at, total) = (st.kind, st.at, u64::from(st.total));
        let bytes = bytes.get(..k).unwrap_or_default();
        match kind {
            Streaming::Send => {
                if let Some(RxCur::Send { recv, .. }) = &self.rx_cur {
                    scatter_at(&recv.segs, at, bytes);
                }
            }
            Streaming::Write => {
                if let Some(RxCur::Write { seg: Some(seg), .. }) = &self.rx_cur {
                    let off = usize::try_from(at).unwrap_or(usize::MAX);
                    if place_write(seg, off, bytes, total).is_err() {
                        tracing::error!("streamed write outside the region");
                    }
                }
            }
            Streaming::ReadResp => {
                let msn = st.msn;
                if let Some(p) = self.outstanding.iter().find(|p| p.msn == msn) {
                    place_read(&p.wr.segs, at, bytes, total);
                }
            }
        }
        self.stream_advance(now, k);
    }

    /// `k` more payload bytes of the streamed piece have landed.
    pub(super) fn stream_advance(&mut self, now: Instant, k: usize) {
        let Some(st) = &mut self.rx_stream else {
            return;
        };
        st.left -= k.min(st.left);
        st.at += k as u64;
        if st.left > 0 {
            return;
        }
        let RxStream {
            kind,
            msn,
            total,
            flags,
            ..
        } = *st;
        self.rx_stream = None;
        match kind {
            Streaming::Send => self.finish_send(now, msn, total, flags),
            Streaming::Write => self.finish_write(now, msn, flags),
            Streaming::ReadResp => self.finish_read(msn),
        }
    }

    /// Where the next streamed payload bytes go: a run of registered memory (segment,
    /// offset in it, length), for a read straight from the socket. The last byte of an RDMA
    /// write or read response is never read straight into memory (the kernel's copy stores
    /// in no particular order): it comes through the input buffer and lands last
    /// ([`place_write`], [`place_read`]).
    pub(super) fn stream_dest(&self) -> Option<(&Segment, usize, usize)> {
        let (seg, off, len) = self.stream_run()?;
        let st = self.rx_stream.as_ref()?;
        let len = if st.kind != Streaming::Send && st.at + len as u64 >= u64::from(st.total) {
            len - 1
        } else {
            len
        };
        (len > 0).then_some((seg, off, len))
    }

    fn stream_run(&self) -> Option<(&Segment, usize, usize)> {
        let st = self.rx_stream.as_ref()?;
        let (segs, at): (&[Segment], u64) = match st.kind {
            Streaming::Send => match &self.rx_cur {
                Some(RxCur::Send { recv, .. }) => (&recv.segs, st.at),
                _ => return None,
            },
            Streaming::Write => match &self.rx_cur {
                Some(RxCur::Write { seg: Some(seg), .. }) => {
                    return Some((seg, usize::try_from(st.at).ok()?, st.left));
                }
                _ => return None,
            },
            Streaming::ReadResp => {
                let p = self.outstanding.iter().find(|p| p.msn == st.msn)?;
                (&p.wr.segs, st.at)
            }
        };
        let mut pos = at;
        for seg in segs {
            let len = seg.len_u64();
            if pos < len {
                let off = usize::try_from(pos).ok()?;
                return Some((seg, off, (seg.len - off).min(st.left)));
            }
            pos -= len;
        }
        None
    }
}
