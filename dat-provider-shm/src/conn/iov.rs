//! Address lists of cross-memory attach: their encoding in a ring slot, and the list
//! surgery of a copy (the last byte apart, truncation, progress).
#![allow(unsafe_code)]

use super::Fatal;
use crate::ring::Incoming;
use crate::sys::{Iovs, RemoteIov};

/// Writes the list into `len` bytes at `dst` (16 bytes an iov; as many as fit).
pub(super) fn write_iovs(iovs: impl Iterator<Item = RemoteIov>, dst: *mut u8, len: usize) {
    for (i, v) in iovs.take(len / 16).enumerate() {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&v.addr.to_le_bytes());
        b[8..].copy_from_slice(&v.len.to_le_bytes());
        // SAFETY: `i*16+16 <= len`, inside the slot's payload.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst.add(i * 16), 16) };
    }
}

/// Reads the peer's list of a record into `v` (cleared first; a list kept across requests
/// keeps its room, so a long list allocates once per connection, not per request).
pub(super) fn read_iovs(inc: Incoming, v: &mut Iovs) -> Result<(), Fatal> {
    let n = usize::try_from(inc.rec.c).map_err(|_| Fatal)?;
    if n.checked_mul(16).is_none_or(|b| b > inc.rec.len as usize) {
        return Err(Fatal);
    }
    v.clear();
    v.reserve(n);
    for i in 0..n {
        let mut b = [0u8; 16];
        // SAFETY: `i*16+16 <= rec.len`, which `peek` checked fits the slot's payload.
        unsafe { std::ptr::copy_nonoverlapping(inc.payload.add(i * 16), b.as_mut_ptr(), 16) };
        let (x, y) = b.split_at(8);
        v.push(RemoteIov {
            addr: u64::from_le_bytes(x.try_into().map_err(|_| Fatal)?),
            len: u64::from_le_bytes(y.try_into().map_err(|_| Fatal)?),
        });
    }
    Ok(())
}

/// True where stores become visible to other processors in program order (x86's TSO; a
/// fast string copy is ordered as a whole against later stores).
pub(super) const STORES_IN_ORDER: bool = cfg!(any(target_arch = "x86", target_arch = "x86_64"));

/// Gives the last byte of an iov list an iovec of its own, so that a cross-memory copy
/// stores it last, as InfiniBand places an RDMA write's (at the target) or an RDMA read's (at
/// the requester) last byte: consumers poll that byte, then read the rest. The kernel
/// (`process_vm_rw_core`) walks the remote ranges page by page in order and, within each
/// page, copies to or from the local iovecs in order, one `copy_{to,from}_user` per iovec
/// piece; so the last byte is copied by the last copy, after every other byte, and with
/// [`STORES_IN_ORDER`] that is the order another process sees, with no extra system call.
/// Returns true if the list ends with such a one-byte iovec after other bytes.
pub(super) fn split_last_byte(iovs: &mut Iovs) -> bool {
    while iovs.last().is_some_and(|v| v.len == 0) {
        iovs.pop();
    }
    if let Some(last) = iovs.last_mut().filter(|v| v.len > 1) {
        last.len -= 1;
        let tail = RemoteIov {
            addr: last.addr + last.len,
            len: 1,
        };
        iovs.push(tail);
    }
    iovs.len() > 1 && iovs.last().is_some_and(|v| v.len == 1)
}

/// Keeps the first `n` bytes of an iov list.
pub(super) fn truncate(iovs: &mut Iovs, mut n: u64) {
    let mut keep = 0;
    for v in iovs.iter_mut() {
        if n == 0 {
            break;
        }
        v.len = v.len.min(n);
        n -= v.len;
        keep += 1;
    }
    iovs.truncate(keep);
}

/// Drops the first `n` bytes of the iov list `iovs[*start..]`: `*start` moves past the
/// ranges wholly done (no shifting of the list), the first range left is shortened.
pub(super) fn advance(iovs: &mut [RemoteIov], start: &mut usize, mut n: u64) {
    while n > 0 {
        let Some(first) = iovs.get_mut(*start) else {
            return;
        };
        if first.len <= n {
            n -= first.len;
            *start += 1;
        } else {
            first.addr += n;
            first.len -= n;
            n = 0;
        }
    }
}
