//! Connection-management packets on the per-connection `SOCK_SEQPACKET` socket. Parsing
//! checks every length and never panics; anything malformed is `None`.
//!
//! ```text
//! Request  1 | ver | pid u32 | probe u64 | slots u32 | slot_size u32 | pdata_len u16 | pdata
//!          + SCM_RIGHTS [memfd, acceptor's eventfd, requester's eventfd]
//! Accept   2 | cma u8 | probe u64 | pdata_len u16 | pdata
//! Reject   3 | pdata_len u16 | pdata
//! Ready    4 | cma u8                     (the requester's RTU)
//! Close    5                              (graceful disconnect)
//! ```
//! `probe` is the address of an 8-byte word holding [`PROBE_VALUE`] in the sender, which the
//! receiver reads with `process_vm_readv` to learn whether it may attach to the sender's
//! memory; `cma` reports that result back ("I can reach your memory").

/// Protocol version.
pub const VERSION: u8 = 1;
/// Largest private data carried.
pub const MAX_PRIVATE_DATA: usize = 1024;
/// The value behind a probe address.
pub const PROBE_VALUE: u64 = 0xda75_4d0b_e5a1_7e11;

/// One control packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// A connection request.
    Request {
        /// Requester's process id (informational; the credentials come from the socket).
        pid: u32,
        /// Requester's probe address.
        probe: u64,
        /// Slots per ring of the attached segment.
        slots: u32,
        /// Slot size of the attached segment.
        slot_size: u32,
        /// Private data.
        pdata: Vec<u8>,
    },
    /// The consumer accepted.
    Accept {
        /// The acceptor can attach to the requester's memory.
        cma: bool,
        /// Acceptor's probe address.
        probe: u64,
        /// Private data.
        pdata: Vec<u8>,
    },
    /// The consumer rejected.
    Reject {
        /// Private data.
        pdata: Vec<u8>,
    },
    /// The requester saw the accept.
    Ready {
        /// The requester can attach to the acceptor's memory.
        cma: bool,
    },
    /// Graceful disconnect.
    Close,
}

struct Rd<'a>(&'a [u8]);

impl Rd<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (h, t) = self.0.split_first_chunk::<N>()?;
        self.0 = t;
        Some(*h)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn pdata(&mut self) -> Option<Vec<u8>> {
        let n = usize::from(self.u16()?);
        if n > MAX_PRIVATE_DATA || n > self.0.len() {
            return None;
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Some(h.to_vec())
    }
}

fn put_pdata(out: &mut Vec<u8>, p: &[u8]) {
    let n = p.len().min(MAX_PRIVATE_DATA);
    out.extend_from_slice(&(n as u16).to_le_bytes());
    out.extend_from_slice(&p[..n]);
}

impl Packet {
    /// Encodes the packet.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        match self {
            Packet::Request {
                pid,
                probe,
                slots,
                slot_size,
                pdata,
            } => {
                out.extend_from_slice(&[1, VERSION]);
                out.extend_from_slice(&pid.to_le_bytes());
                out.extend_from_slice(&probe.to_le_bytes());
                out.extend_from_slice(&slots.to_le_bytes());
                out.extend_from_slice(&slot_size.to_le_bytes());
                put_pdata(&mut out, pdata);
            }
            Packet::Accept { cma, probe, pdata } => {
                out.extend_from_slice(&[2, u8::from(*cma)]);
                out.extend_from_slice(&probe.to_le_bytes());
                put_pdata(&mut out, pdata);
            }
            Packet::Reject { pdata } => {
                out.push(3);
                put_pdata(&mut out, pdata);
            }
            Packet::Ready { cma } => out.extend_from_slice(&[4, u8::from(*cma)]),
            Packet::Close => out.push(5),
        }
        out
    }

    /// Decodes a packet; `None` if malformed.
    pub fn decode(b: &[u8]) -> Option<Packet> {
        let mut r = Rd(b);
        let p = match r.u8()? {
            1 => {
                if r.u8()? != VERSION {
                    return None;
                }
                Packet::Request {
                    pid: r.u32()?,
                    probe: r.u64()?,
                    slots: r.u32()?,
                    slot_size: r.u32()?,
                    pdata: r.pdata()?,
                }
            }
            2 => Packet::Accept {
                cma: r.u8()? != 0,
                probe: r.u64()?,
                pdata: r.pdata()?,
            },
            3 => Packet::Reject { pdata: r.pdata()? },
            4 => Packet::Ready { cma: r.u8()? != 0 },
            5 => Packet::Close,
            _ => return None,
        };
        r.0.is_empty().then_some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packet_round_trips_and_truncations_fail() {
        let all = [
            Packet::Request {
                pid: 7,
                probe: 0x1234,
                slots: 64,
                slot_size: 8192,
                pdata: vec![9; 300],
            },
            Packet::Accept {
                cma: true,
                probe: 5,
                pdata: vec![1, 2, 3],
            },
            Packet::Reject { pdata: vec![] },
            Packet::Ready { cma: false },
            Packet::Close,
        ];
        for p in all {
            let b = p.encode();
            assert_eq!(Packet::decode(&b), Some(p.clone()));
            for cut in 0..b.len() {
                assert_eq!(Packet::decode(&b[..cut]), None, "{p:?} cut at {cut}");
            }
            let mut long = b.clone();
            long.push(0);
            assert_eq!(Packet::decode(&long), None);
        }
        assert_eq!(Packet::decode(&[9]), None);
        assert_eq!(Packet::decode(&[1, 99]), None);
    }
}
