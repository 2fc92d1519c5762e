//! What a post reads of its request ([`Req`]): a whole [`WorkRequest`], or the usual post's
//! parts ([`OneSeg`]: one segment, as the facade's post has it, not yet in a request).
//!
//! The facade's usual post calls this provider directly, inlined (`crate::direct`), with its
//! parts: the post then reads them where they lie (registers, mostly), not from a 128-byte
//! request built in memory for the call, whose segment list the post reads back through its
//! inline-or-heap check. Every other post passes its request. The paths are one code,
//! generic over the view, with the same outcomes.

use dat_core::mem::{Segment, one_segment};
use dat_core::provider::{PostOp, WorkRequest};
use dat_core::types::{CompletionFlags, Cookie};

/// A request as a post reads it.
pub trait Req {
    /// What it does.
    fn op(&self) -> PostOp;
    /// Its segments (the local gather or scatter list).
    fn segs(&self) -> &[Segment];
    /// Its cookie.
    fn cookie(&self) -> Cookie;
    /// Its completion flags.
    fn flags(&self) -> CompletionFlags;
    /// Its total length (saturating).
    fn len(&self) -> u64;
    /// The request, owned: for one the provider keeps (a copy takes its own references to
    /// the memory).
    fn to_request(&self) -> WorkRequest;
}

impl Req for WorkRequest {
    #[inline(always)]
    fn op(&self) -> PostOp {
        self.op
    }
    #[inline(always)]
    fn segs(&self) -> &[Segment] {
        &self.segs
    }
    #[inline(always)]
    fn cookie(&self) -> Cookie {
        self.cookie
    }
    #[inline(always)]
    fn flags(&self) -> CompletionFlags {
        self.flags
    }
    #[inline(always)]
    fn len(&self) -> u64 {
        WorkRequest::len(self)
    }
    fn to_request(&self) -> WorkRequest {
        self.clone()
    }
}

/// The usual post's request: one segment, borrowed for the call.
#[derive(Clone, Copy)]
pub struct OneSeg<'a> {
    /// What it does.
    pub op: PostOp,
    /// Its one segment.
    pub seg: &'a Segment,
    /// Its cookie.
    pub cookie: Cookie,
    /// Its completion flags.
    pub flags: CompletionFlags,
}

impl Req for OneSeg<'_> {
    #[inline(always)]
    fn op(&self) -> PostOp {
        self.op
    }
    #[inline(always)]
    fn segs(&self) -> &[Segment] {
        std::slice::from_ref(self.seg)
    }
    #[inline(always)]
    fn cookie(&self) -> Cookie {
        self.cookie
    }
    #[inline(always)]
    fn flags(&self) -> CompletionFlags {
        self.flags
    }
    #[inline(always)]
    fn len(&self) -> u64 {
        self.seg.len_u64()
    }
    fn to_request(&self) -> WorkRequest {
        WorkRequest {
            op: self.op,
            segs: one_segment(self.seg.clone()),
            cookie: self.cookie,
            flags: self.flags,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use dat_core::mem::Buffer;

    use super::*;

    /// Both views read the same request, and the one-segment view's copy is that request.
    #[test]
    fn both_views_read_the_same_request() {
        let buf = Arc::new(Buffer::from_vec(vec![0u8; 64]));
        let seg = Segment::of_buffer(&buf, 8, 24, 77);
        let one = OneSeg {
            op: PostOp::Send,
            seg: &seg,
            cookie: Cookie(5),
            flags: CompletionFlags::SOLICITED_WAIT,
        };
        let wr = one.to_request();
        assert_eq!(
            (
                Req::op(&wr),
                Req::cookie(&wr),
                Req::flags(&wr),
                Req::len(&wr)
            ),
            (one.op(), one.cookie(), one.flags(), one.len())
        );
        assert_eq!(one.len(), 24);
        assert_eq!(wr.segs.len(), 1);
        assert_eq!(
            (wr.segs[0].offset, wr.segs[0].len, wr.segs[0].lkey),
            (seg.offset, seg.len, seg.lkey)
        );
        assert_eq!(one.segs().len(), 1);
    }
}
