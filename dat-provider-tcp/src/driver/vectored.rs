//! Writing an engine's queued runs with one `writev`, straight from registered memory.

use std::io::{self, ErrorKind, Write};
use std::mem::MaybeUninit;
use std::os::fd::AsRawFd;

use mio::net::TcpStream;

use crate::engine::{Engine, TxPiece};

/// Runs per `writev` call.
const MAX_IOV: usize = 64;

/// Writes as much of the engine's queue as the socket takes, in one system call. Returns the
/// bytes written (0 if nothing was queued).
///
/// # Errors
/// The socket's error; `WouldBlock` when its buffer is full.
pub(super) fn write_queued(sock: &mut TcpStream, engine: &mut Engine) -> io::Result<usize> {
    // Left uninitialised (a message needs one or two of the 64 entries: zeroing them all
    // would cost more than filling them); entries `..count` are written below.
    let mut iov = [const { MaybeUninit::<libc::iovec>::uninit() }; MAX_IOV];
    let mut count = 0;
    let mut valid = true;
    for piece in engine.poll_transmit_pieces().take(MAX_IOV) {
        let (ptr, len) = match piece {
            TxPiece::Bytes(b) => (b.as_ptr(), b.len()),
            TxPiece::Mem { seg, off, len } => {
                let inside = off.checked_add(len).is_some_and(|e| e <= seg.len)
                    && seg
                        .offset
                        .checked_add(seg.len)
                        .is_some_and(|e| e <= seg.buf.len());
                if !inside {
                    valid = false;
                    break;
                }
                // In bounds (checked above); no reference into the buffer is formed.
                (
                    seg.buf.as_ptr().wrapping_add(seg.offset + off).cast_const(),
                    len,
                )
            }
        };
        if let Some(slot) = iov.get_mut(count) {
            slot.write(libc::iovec {
                iov_base: ptr.cast_mut().cast(),
                iov_len: len,
            });
            count += 1;
        }
    }
    if !valid {
        // A segment that does not fit its buffer (only hand-made ones can): take the
        // checked, copying path.
        let out = engine.poll_transmit();
        return if out.is_empty() {
            Ok(0)
        } else {
            sock.write(out)
        };
    }
    if count == 0 {
        return Ok(0);
    }
    let fd = sock.as_raw_fd();
    let n = i32::try_from(count).unwrap_or(1);
    // SAFETY: `iov[..count]` describes memory that stays valid and unchanged for the call:
    // runs of the engine's transmit buffer (borrowed mutably by our caller, so nothing
    // mutates it) and ranges of registered buffers checked above to lie inside their
    // allocation, kept alive by the `Arc`s the engine's queue holds. `writev` only reads
    // them; `fd` is the socket's open descriptor. Entries `..count` of `iov` were written
    // above (`MaybeUninit<iovec>` has the layout of `iovec`), and `writev` reads no others.
    let r = unsafe { libc::writev(fd, iov.as_ptr().cast::<libc::iovec>(), n) };
    if r < 0 {
        return Err(last_error());
    }
    Ok(usize::try_from(r).unwrap_or(0))
}

/// Where a direct read may land: a raw range of registered memory, checked to lie inside its
/// buffer. `None` for a segment that does not fit its buffer (only hand-made ones).
pub(super) fn direct_target(
    seg: &dat_core::mem::Segment,
    off: usize,
    len: usize,
) -> Option<(*mut u8, usize)> {
    let inside = off.checked_add(len).is_some_and(|e| e <= seg.len)
        && seg
            .offset
            .checked_add(seg.len)
            .is_some_and(|e| e <= seg.buf.len());
    // In bounds (checked); no reference into the buffer is formed.
    inside.then(|| (seg.buf.as_ptr().wrapping_add(seg.offset + off), len))
}

/// Reads from the socket into `buf` with one `recv`: [`std::io::Read`] for a busy poll, less
/// the layers (mio, std) and the error value built, decoded and dropped for every `EAGAIN`.
/// `Ok(None)`: nothing there (`EAGAIN`).
///
/// # Errors
/// The socket's error.
pub(super) fn read_buf(sock: &TcpStream, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is a valid, exclusively borrowed byte buffer of `buf.len()` bytes for the
    // call; `recv` writes at most that many; `fd` is the socket's open descriptor.
    let r = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    read_result(r)
}

/// What a read returned: the count, `None` for `EAGAIN`, or the error.
fn read_result(r: isize) -> io::Result<Option<usize>> {
    if let Ok(n) = usize::try_from(r) {
        return Ok(Some(n));
    }
    // SAFETY: `__errno_location` returns the calling thread's `errno`, always valid to read.
    let errno = unsafe { *libc::__errno_location() };
    if errno == libc::EAGAIN {
        Ok(None)
    } else {
        Err(io::Error::from_raw_os_error(errno))
    }
}

/// The error of the system call that just failed, `EAGAIN` as a plain `WouldBlock`.
fn last_error() -> io::Error {
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EAGAIN) {
        io::Error::from(ErrorKind::WouldBlock)
    } else {
        e
    }
}

/// Reads from the socket straight into registered memory. `Ok(None)`: nothing there.
///
/// # Errors
/// The socket's error.
pub(super) fn read_direct(sock: &TcpStream, ptr: *mut u8, len: usize) -> io::Result<Option<usize>> {
    // SAFETY: `ptr..ptr+len` lies inside a registered buffer (checked by `direct_target`)
    // that the engine keeps alive (its `Arc` is held by the receive or the RDMA being
    // placed) and that is only ever accessed through raw-pointer copies, so the kernel
    // writing into it creates no aliasing with Rust references; `fd` is open.
    let r = unsafe { libc::read(sock.as_raw_fd(), ptr.cast(), len) };
    read_result(r)
}
