//! The frame format of the TCP provider.
//!
//! Every frame starts with a 12-byte header, all integers little-endian:
//!
//! ```text
//! 0      1       2         4            8            12
//! | kind | flags | 0u16    | body_len   | ack        | body (body_len bytes) ...
//! ```
//!
//! `ack` is the cumulative acknowledgement the sender of the frame piggy-backs on everything
//! it sends: the message sequence number (MSN) of the last request of the peer that it has
//! fully executed (a send placed in a receive, an RDMA write placed, an RDMA read answered).
//! MSNs count requests (send, RDMA write, RDMA read) per connection from 1, wrapping.
//!
//! Data frames (send, RDMA write, RDMA read response) carry at most [`MAX_CHUNK`] payload
//! bytes; longer messages are a run of frames of the same MSN, the first flagged
//! [`FIRST`], the last [`LAST`] (a one-frame message has both). A receiver knows the total
//! length from the first frame, so it can check the receive (or the remote region) before it
//! places any byte.
//!
//! [`Frame::parse`] validates the header and every length before it reads a field, and never
//! panics, whatever the input: it returns `Ok(None)` when more bytes are needed and
//! [`WireError`] for input no correct peer sends (the connection is then broken).

use std::fmt;

/// Header length in bytes.
pub const HEADER_LEN: usize = 12;
/// Largest payload of one data frame.
pub const MAX_CHUNK: usize = 1024 * 1024;
/// Largest private data of a connection request, accept or reject (advertised as
/// `max_private_data_size`).
pub const MAX_PRIVATE_DATA: usize = 1024;
/// Largest body any frame may have: the largest fixed part plus [`MAX_CHUNK`].
pub const MAX_BODY: usize = 32 + MAX_CHUNK;
/// Largest frame on the wire.
pub const MAX_FRAME: usize = HEADER_LEN + MAX_BODY;
/// Protocol version carried in the connection request.
pub const VERSION: u16 = 2;

/// Frame flag: first frame of a message.
pub const FIRST: u8 = 0x01;
/// Frame flag: last frame of a message.
pub const LAST: u8 = 0x02;
/// Frame flag: the send asks for a solicited event (`DAT_COMPLETION_SOLICITED_WAIT_FLAG`).
pub const SOLICITED: u8 = 0x04;
const DATA_FLAGS: u8 = FIRST | LAST | SOLICITED;

/// Frame kinds (the first header byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Connection request: version, RNR timeout, qualifier, private data.
    ConnReq = 1,
    /// The passive side accepts: RNR timeout, private data.
    Accept = 2,
    /// The passive side rejects: private data.
    Reject = 3,
    /// Ready to use: the active side saw the accept.
    Rtu = 4,
    /// Orderly disconnect: nothing follows.
    Disconnect = 5,
    /// A piece of a send.
    Send = 6,
    /// A piece of an RDMA write.
    RdmaWrite = 7,
    /// An RDMA read request.
    ReadReq = 8,
    /// A piece of an RDMA read response.
    ReadResp = 9,
    /// A bare acknowledgement (the header's `ack`).
    Ack = 10,
    /// A request failed at the target: its MSN and the DTO status for the requester.
    Nak = 11,
    /// Keepalive: no effect beyond the header's `ack`.
    Keepalive = 12,
    /// The answer to a connection request whose qualifier no service point on that TCP port
    /// has (qualifiers beyond the port space fold onto ports, see [`crate::params`]): as if
    /// nobody listened.
    NoListener = 13,
    /// The passive side saw the `Rtu` and reported the connection established: the active
    /// side may report it too.
    Confirm = 14,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        use Kind::*;
        [
            ConnReq, Accept, Reject, Rtu, Disconnect, Send, RdmaWrite, ReadReq, ReadResp, Ack, Nak,
            Keepalive, NoListener, Confirm,
        ]
        .get(usize::from(v).wrapping_sub(1))
        .copied()
    }
}

/// Why bytes from the peer are not a valid frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Unknown frame kind.
    Kind(u8),
    /// Reserved header bits set, or flags not allowed on this kind.
    Flags(u8),
    /// A body length the kind does not allow.
    Length {
        /// The frame kind.
        kind: u8,
        /// The body length announced.
        len: u32,
    },
    /// A field value no correct peer sends (payload beyond the total, an empty middle piece,
    /// an unknown DTO status, a wrong version).
    Field(&'static str),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Kind(k) => write!(f, "unknown frame kind {k}"),
            WireError::Flags(x) => write!(f, "invalid frame flags {x:#x}"),
            WireError::Length { kind, len } => {
                write!(f, "invalid body length {len} for frame kind {kind}")
            }
            WireError::Field(what) => write!(f, "invalid field: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

/// One decoded frame, borrowing its variable parts from the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Connection request.
    ConnReq {
        /// The requester's receiver-not-ready timeout in milliseconds.
        rnr_timeout_ms: u32,
        /// The connection qualifier asked for.
        qual: u64,
        /// Private data.
        private_data: &'a [u8],
    },
    /// Accept.
    Accept {
        /// The acceptor's receiver-not-ready timeout in milliseconds.
        rnr_timeout_ms: u32,
        /// Private data.
        private_data: &'a [u8],
    },
    /// Reject.
    Reject {
        /// Private data.
        private_data: &'a [u8],
    },
    /// Ready to use.
    Rtu,
    /// Orderly disconnect.
    Disconnect,
    /// A piece of a send.
    Send {
        /// Message sequence number.
        msn: u32,
        /// Total message length.
        total: u32,
        /// [`FIRST`], [`LAST`], [`SOLICITED`].
        flags: u8,
        /// The bytes of this piece.
        payload: &'a [u8],
    },
    /// A piece of an RDMA write.
    RdmaWrite {
        /// Message sequence number.
        msn: u32,
        /// Total length of the write.
        total: u32,
        /// Remote key.
        rkey: u32,
        /// Remote address of the first byte of the write (not of this piece).
        addr: u64,
        /// [`FIRST`], [`LAST`].
        flags: u8,
        /// The bytes of this piece.
        payload: &'a [u8],
    },
    /// An RDMA read request.
    ReadReq {
        /// Message sequence number.
        msn: u32,
        /// Length to read.
        len: u32,
        /// Remote key.
        rkey: u32,
        /// Remote address.
        addr: u64,
    },
    /// A piece of an RDMA read response.
    ReadResp {
        /// The MSN of the read request.
        msn: u32,
        /// Total length.
        total: u32,
        /// [`FIRST`], [`LAST`].
        flags: u8,
        /// The bytes of this piece.
        payload: &'a [u8],
    },
    /// Bare acknowledgement.
    Ack,
    /// Negative acknowledgement of one request.
    Nak {
        /// The MSN of the failed request.
        msn: u32,
        /// The raw `DAT_DTO_COMPLETION_STATUS` for the requester (validated: 2..=12).
        status: u32,
    },
    /// Keepalive.
    Keepalive,
    /// No service point has the requested qualifier.
    NoListener,
    /// The passive side reported the connection established.
    Confirm,
}

/// The start of a data frame whose payload is still arriving (see [`Frame::parse_partial`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partial<'a> {
    /// The frame, its payload being the bytes present so far.
    pub frame: Frame<'a>,
    /// The cumulative acknowledgement of the header.
    pub ack: u32,
    /// Bytes of input used: header, fixed fields and the payload present.
    pub len: usize,
    /// The length of the whole payload.
    pub payload_len: usize,
}

/// A decoded frame with its header's acknowledgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The frame.
    pub frame: Frame<'a>,
    /// The cumulative acknowledgement of the header.
    pub ack: u32,
    /// Bytes of input the frame occupied.
    pub len: usize,
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Fixed body length of each kind, and whether a variable part may follow (with its limit).
fn body_shape(kind: Kind) -> (usize, usize) {
    match kind {
        Kind::ConnReq => (16, MAX_PRIVATE_DATA),
        Kind::Accept => (4, MAX_PRIVATE_DATA),
        Kind::Reject => (0, MAX_PRIVATE_DATA),
        Kind::Rtu
        | Kind::Disconnect
        | Kind::Ack
        | Kind::Keepalive
        | Kind::NoListener
        | Kind::Confirm => (0, 0),
        Kind::Send | Kind::ReadResp => (8, MAX_CHUNK),
        Kind::RdmaWrite => (20, MAX_CHUNK),
        Kind::ReadReq => (20, 0),
        Kind::Nak => (8, 0),
    }
}

impl<'a> Frame<'a> {
    /// Decodes the frame at the start of `input`.
    ///
    /// Returns `Ok(None)` if `input` holds only part of a frame (the header is checked as
    /// soon as it is complete, so an invalid length is reported without waiting for the body).
    ///
    /// # Errors
    /// [`WireError`] for anything a correct peer never sends; the caller breaks the
    /// connection.
    pub fn parse(input: &'a [u8]) -> Result<Option<Decoded<'a>>, WireError> {
        Ok(Frame::decode(input, false)?.map(|(d, _)| d))
    }

    /// Decodes the start of a data frame (send, RDMA write, read response) whose payload has
    /// not fully arrived: the header and fixed fields are complete and validated exactly as
    /// [`Frame::parse`] does, the frame's payload is the part present, and
    /// [`Partial::payload_len`] says how long the whole payload is. Returns `Ok(None)` until
    /// the fixed fields are complete, and for every other kind of frame.
    ///
    /// # Errors
    /// As [`Frame::parse`].
    pub fn parse_partial(input: &'a [u8]) -> Result<Option<Partial<'a>>, WireError> {
        Ok(Frame::decode(input, true)?.map(|(d, payload_len)| Partial {
            frame: d.frame,
            ack: d.ack,
            len: d.len,
            payload_len,
        }))
    }

    fn decode(input: &'a [u8], partial: bool) -> Result<Option<(Decoded<'a>, usize)>, WireError> {
        let (Some(&k), Some(&flags), Some(rsv), Some(body_len), Some(ack)) = (
            input.first(),
            input.get(1),
            u16_at(input, 2),
            u32_at(input, 4),
            u32_at(input, 8),
        ) else {
            return Ok(None);
        };
        let kind = Kind::from_u8(k).ok_or(WireError::Kind(k))?;
        let (fixed, var) = body_shape(kind);
        let len_ok = usize::try_from(body_len)
            .ok()
            .filter(|&l| l >= fixed && l - fixed <= var);
        let Some(len) = len_ok else {
            return Err(WireError::Length {
                kind: k,
                len: body_len,
            });
        };
        if rsv != 0 {
            return Err(WireError::Flags(0xff));
        }
        let data_kind = matches!(kind, Kind::Send | Kind::RdmaWrite | Kind::ReadResp);
        let allowed = match kind {
            Kind::Send => DATA_FLAGS,
            _ if data_kind => FIRST | LAST,
            _ => 0,
        };
        if flags & !allowed != 0 {
            return Err(WireError::Flags(flags));
        }
        let body = if partial {
            if !data_kind {
                return Ok(None);
            }
            let end = input.len().min(HEADER_LEN + len);
            match input.get(HEADER_LEN..end) {
                Some(b) if b.len() >= fixed => b,
                _ => return Ok(None),
            }
        } else {
            let Some(b) = input.get(HEADER_LEN..HEADER_LEN + len) else {
                return Ok(None);
            };
            b
        };
        let var_part = body.get(fixed..).unwrap_or_default();
        let payload_len = len - fixed;
        let f = |at| u32_at(body, at).ok_or(WireError::Field("truncated"));
        let frame = match kind {
            Kind::ConnReq => {
                if u16_at(body, 0) != Some(VERSION) || u16_at(body, 2) != Some(0) {
                    return Err(WireError::Field("version"));
                }
                Frame::ConnReq {
                    rnr_timeout_ms: f(4)?,
                    qual: u64_at(body, 8).ok_or(WireError::Field("truncated"))?,
                    private_data: var_part,
                }
            }
            Kind::Accept => Frame::Accept {
                rnr_timeout_ms: f(0)?,
                private_data: var_part,
            },
            Kind::Reject => Frame::Reject {
                private_data: var_part,
            },
            Kind::Rtu => Frame::Rtu,
            Kind::Disconnect => Frame::Disconnect,
            Kind::Ack => Frame::Ack,
            Kind::Keepalive => Frame::Keepalive,
            Kind::NoListener => Frame::NoListener,
            Kind::Confirm => Frame::Confirm,
            Kind::Send => Frame::Send {
                msn: f(0)?,
                total: f(4)?,
                flags,
                payload: var_part,
            },
            Kind::ReadResp => Frame::ReadResp {
                msn: f(0)?,
                total: f(4)?,
                flags,
                payload: var_part,
            },
            Kind::RdmaWrite => Frame::RdmaWrite {
                msn: f(0)?,
                total: f(4)?,
                rkey: f(8)?,
                addr: u64_at(body, 12).ok_or(WireError::Field("truncated"))?,
                flags,
                payload: var_part,
            },
            Kind::ReadReq => Frame::ReadReq {
                msn: f(0)?,
                len: f(4)?,
                rkey: f(8)?,
                addr: u64_at(body, 12).ok_or(WireError::Field("truncated"))?,
            },
            Kind::Nak => {
                let status = f(4)?;
                if !(2..=12).contains(&status) {
                    return Err(WireError::Field("nak status"));
                }
                Frame::Nak { msn: f(0)?, status }
            }
        };
        if data_kind {
            let total = match frame {
                Frame::Send { total, .. }
                | Frame::RdmaWrite { total, .. }
                | Frame::ReadResp { total, .. } => total,
                _ => 0,
            };
            if u64::try_from(payload_len).unwrap_or(u64::MAX) > u64::from(total) {
                return Err(WireError::Field("payload longer than the message"));
            }
            if payload_len == 0 && total != 0 {
                return Err(WireError::Field("empty piece"));
            }
            if flags & (FIRST | LAST) == LAST && total == 0 {
                return Err(WireError::Field("zero-length message in pieces"));
            }
        }
        Ok(Some((
            Decoded {
                frame,
                ack,
                len: HEADER_LEN + body.len(),
            },
            payload_len,
        )))
    }

    /// The kind of this frame.
    pub fn kind(&self) -> Kind {
        match self {
            Frame::ConnReq { .. } => Kind::ConnReq,
            Frame::Accept { .. } => Kind::Accept,
            Frame::Reject { .. } => Kind::Reject,
            Frame::Rtu => Kind::Rtu,
            Frame::Disconnect => Kind::Disconnect,
            Frame::Send { .. } => Kind::Send,
            Frame::RdmaWrite { .. } => Kind::RdmaWrite,
            Frame::ReadReq { .. } => Kind::ReadReq,
            Frame::ReadResp { .. } => Kind::ReadResp,
            Frame::Ack => Kind::Ack,
            Frame::Nak { .. } => Kind::Nak,
            Frame::Keepalive => Kind::Keepalive,
            Frame::NoListener => Kind::NoListener,
            Frame::Confirm => Kind::Confirm,
        }
    }

    /// Appends the encoding of this frame with acknowledgement `ack` to `out`. Variable parts
    /// longer than the format allows are truncated to the limit (callers check first).
    pub fn emit(&self, ack: u32, out: &mut Vec<u8>) {
        let (fixed, var) = body_shape(self.kind());
        let payload: &[u8] = match *self {
            Frame::ConnReq { private_data, .. }
            | Frame::Accept { private_data, .. }
            | Frame::Reject { private_data } => private_data,
            Frame::Send { payload, .. }
            | Frame::RdmaWrite { payload, .. }
            | Frame::ReadResp { payload, .. } => payload,
            _ => &[],
        };
        let payload = payload.get(..var).unwrap_or(payload);
        let flags = match *self {
            Frame::Send { flags, .. } => flags & DATA_FLAGS,
            Frame::RdmaWrite { flags, .. } | Frame::ReadResp { flags, .. } => {
                flags & (FIRST | LAST)
            }
            _ => 0,
        };
        emit_header(self.kind(), flags, fixed + payload.len(), ack, out);
        match *self {
            Frame::ConnReq {
                rnr_timeout_ms,
                qual,
                ..
            } => {
                out.extend_from_slice(&VERSION.to_le_bytes());
                out.extend_from_slice(&0u16.to_le_bytes());
                out.extend_from_slice(&rnr_timeout_ms.to_le_bytes());
                out.extend_from_slice(&qual.to_le_bytes());
            }
            Frame::Accept { rnr_timeout_ms, .. } => {
                out.extend_from_slice(&rnr_timeout_ms.to_le_bytes());
            }
            Frame::Send { msn, total, .. } | Frame::ReadResp { msn, total, .. } => {
                out.extend_from_slice(&msn.to_le_bytes());
                out.extend_from_slice(&total.to_le_bytes());
            }
            Frame::RdmaWrite {
                msn,
                total,
                rkey,
                addr,
                ..
            } => emit_rdma_fields(msn, total, rkey, addr, out),
            Frame::ReadReq {
                msn,
                len,
                rkey,
                addr,
            } => emit_rdma_fields(msn, len, rkey, addr, out),
            Frame::Nak { msn, status } => {
                out.extend_from_slice(&msn.to_le_bytes());
                out.extend_from_slice(&status.to_le_bytes());
            }
            _ => {}
        }
        out.extend_from_slice(payload);
    }
}

fn emit_rdma_fields(msn: u32, len: u32, rkey: u32, addr: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&msn.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&rkey.to_le_bytes());
    out.extend_from_slice(&addr.to_le_bytes());
}

fn emit_header(kind: Kind, flags: u8, body_len: usize, ack: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&header_bytes(kind, flags, body_len, ack));
}

/// The 12 header bytes, built in place so that a frame costs one append, not one per field.
fn header_bytes(kind: Kind, flags: u8, body_len: usize, ack: u32) -> [u8; 12] {
    let mut h = [0u8; 12];
    h[0] = kind as u8;
    h[1] = flags;
    h[4..8].copy_from_slice(&u32::try_from(body_len).unwrap_or(u32::MAX).to_le_bytes());
    h[8..12].copy_from_slice(&ack.to_le_bytes());
    h
}

/// The header of a data piece whose payload the caller appends itself (gathered straight from
/// registered memory, without an intermediate copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataHeader {
    /// A piece of a send.
    Send {
        /// Message sequence number.
        msn: u32,
        /// Total message length.
        total: u32,
    },
    /// A piece of an RDMA write.
    RdmaWrite {
        /// Message sequence number.
        msn: u32,
        /// Total length.
        total: u32,
        /// Remote key.
        rkey: u32,
        /// Remote address of the write's first byte.
        addr: u64,
    },
    /// A piece of an RDMA read response.
    ReadResp {
        /// MSN of the read request.
        msn: u32,
        /// Total length.
        total: u32,
    },
}

impl DataHeader {
    /// Appends the header and fixed fields of a piece with `payload_len` bytes to come
    /// (clamped to [`MAX_CHUNK`]); the caller appends exactly that many payload bytes.
    pub fn emit(&self, flags: u8, payload_len: usize, ack: u32, out: &mut Vec<u8>) {
        let payload_len = payload_len.min(MAX_CHUNK);
        match *self {
            DataHeader::Send { msn, total } => {
                // The frame of every small message: one append.
                let mut f = [0u8; 20];
                f[..12].copy_from_slice(&header_bytes(
                    Kind::Send,
                    flags & DATA_FLAGS,
                    8 + payload_len,
                    ack,
                ));
                f[12..16].copy_from_slice(&msn.to_le_bytes());
                f[16..20].copy_from_slice(&total.to_le_bytes());
                out.extend_from_slice(&f);
            }
            DataHeader::ReadResp { msn, total } => {
                emit_header(
                    Kind::ReadResp,
                    flags & (FIRST | LAST),
                    8 + payload_len,
                    ack,
                    out,
                );
                out.extend_from_slice(&msn.to_le_bytes());
                out.extend_from_slice(&total.to_le_bytes());
            }
            DataHeader::RdmaWrite {
                msn,
                total,
                rkey,
                addr,
            } => {
                emit_header(
                    Kind::RdmaWrite,
                    flags & (FIRST | LAST),
                    20 + payload_len,
                    ack,
                    out,
                );
                emit_rdma_fields(msn, total, rkey, addr, out);
            }
        }
    }
}

/// Parses every frame in `input` until it ends or an error; returns how many frames were
/// complete and the error, if any. The fuzz target and the corpus test drive the parser
/// through this.
pub fn parse_all(mut input: &[u8]) -> (usize, Option<WireError>) {
    let mut n = 0;
    loop {
        match Frame::parse(input) {
            Ok(Some(d)) => {
                n += 1;
                input = input.get(d.len..).unwrap_or_default();
            }
            Ok(None) => return (n, None),
            Err(e) => return (n, Some(e)),
        }
    }
}

#[cfg(test)]
mod tests;
