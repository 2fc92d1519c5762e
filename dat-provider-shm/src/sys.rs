//! Thin, checked wrappers over the Linux system calls the provider uses: memfd segments and
//! their mappings, eventfds, `SOCK_SEQPACKET` unix sockets with `SCM_RIGHTS` and
//! `SO_PEERCRED`, epoll, and cross-memory attach (`process_vm_readv`/`writev`).
//!
//! Every `unsafe` block of the crate that is not about the layout of the shared segment lives
//! here; each one says why it is sound.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Wraps a new descriptor returned by a system call.
fn owned(r: libc::c_int) -> io::Result<OwnedFd> {
    let fd = cvt(r)?;
    // SAFETY: `fd` was just returned by a successful system call that creates a descriptor;
    // nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Seals a segment carries: its size can never change again, so a peer cannot make our
/// mapping short (which would raise SIGBUS on access).
const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// Creates an anonymous memory file of `len` bytes (`memfd_create` + `ftruncate`) and seals
/// its size.
pub fn memfd(len: usize) -> io::Result<OwnedFd> {
    let name = c"datrs-shm";
    // SAFETY: `name` is a valid NUL-terminated string; the flags are valid.
    let fd = owned(unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
    })?;
    let len = libc::off_t::try_from(len).map_err(|_| io::Error::from_raw_os_error(libc::EFBIG))?;
    // SAFETY: `fd` is a valid memfd we own.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) })?;
    // SAFETY: `fd` is a valid memfd created with sealing allowed.
    cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, SIZE_SEALS) })?;
    Ok(fd)
}

/// True if the size of the memory file behind `fd` can no longer shrink (sealed).
pub fn size_sealed(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: plain system call on a descriptor we hold; fails harmlessly on other files.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    seals >= 0 && seals & libc::F_SEAL_SHRINK != 0
}

/// Size of the file behind `fd`.
pub fn file_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a valid descriptor and `st` a valid out-pointer.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(u64::try_from(st.st_size).unwrap_or(0))
}

/// A shared, read-write mapping of a memfd. Unmapped on drop.
///
/// Never lent out as a slice: the peer process writes it concurrently, so every access goes
/// through raw pointers (atomics for control words, raw copies for payload).
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is a plain address range; all accesses are raw-pointer copies or atomic
// operations, which any thread may perform. Unmapping happens once, in `drop`.
unsafe impl Send for Mapping {}
// SAFETY: as above: shared access only performs atomics and raw copies, never references.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared; fails unless the file holds at least `len` bytes (so
    /// touching the mapping can never raise SIGBUS because the peer made it short).
    pub fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        if len == 0 || file_size(fd)? < len as u64 {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (no fixed address), of a file
        // that is at least `len` bytes long (checked above).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// Start of the mapping.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping made by `Mapping::new`, unmapped only here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A non-blocking eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with valid flags.
    owned(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })
}

/// True if `fd` is an anonymous-inode descriptor (what an eventfd is): writing 8 bytes to it
/// can never raise a signal, unlike a pipe whose reader is gone.
pub fn is_anon_inode(fd: BorrowedFd<'_>) -> bool {
    // SAFETY: `stat` is plain old data; all-zero is a valid value.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a valid descriptor and `st` a valid out-pointer.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    r == 0 && st.st_mode & libc::S_IFMT == 0
}

/// Adds one to an eventfd (wakes whoever waits on it). Errors (a full counter) are harmless.
pub fn signal(fd: BorrowedFd<'_>) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid local to a descriptor we hold.
    unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

/// The CPU the calling thread runs on (`sched_getcpu`: with glibc's restartable sequences a
/// load from thread-local memory, else the vDSO's `getcpu`, never a system call here);
/// `None` if the kernel does not say.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: takes no argument and only reads the calling thread's state.
    u32::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// True if the calling thread may run on one CPU only (`sched_getaffinity`; false if the
/// kernel does not say).
pub fn pinned_to_one_cpu() -> bool {
    // SAFETY: a zeroed cpu_set_t is the empty set, filled by the kernel below.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: asks the calling thread's (pid 0) affinity into `set`, of the size given.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: counts the bits of the set filled above.
    rc == 0 && unsafe { libc::CPU_COUNT(&set) } == 1
}

/// Resets an eventfd to zero; returns true if it was not (a wake-up was taken).
pub fn drain(fd: BorrowedFd<'_>) -> bool {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a valid local from a descriptor we hold (non-blocking).
    unsafe { libc::read(fd.as_raw_fd(), (&raw mut v).cast(), 8) == 8 }
}

fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: `sockaddr_un` is plain old data; all-zero is valid.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

/// A new non-blocking `SOCK_SEQPACKET` unix socket.
pub fn seqpacket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with valid arguments.
    owned(unsafe {
        libc::socket(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })
}

/// Binds `fd` to `path` and listens.
pub fn bind_listen(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let (addr, len) = sockaddr(path)?;
    // SAFETY: `addr` is a valid `sockaddr_un` of `len` bytes.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), (&raw const addr).cast(), len) })?;
    // The largest backlog the system allows (the kernel caps SOMAXCONN at
    // net.core.somaxconn): a burst of connects beyond it is refused (EAGAIN), where TCP would
    // only delay it.
    // SAFETY: plain system call on a descriptor we hold.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), libc::SOMAXCONN) })?;
    Ok(())
}

/// Connects `fd` to the socket at `path` (a unix connect completes at once or fails).
pub fn connect(fd: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let (addr, len) = sockaddr(path)?;
    // SAFETY: `addr` is a valid `sockaddr_un` of `len` bytes.
    cvt(unsafe { libc::connect(fd.as_raw_fd(), (&raw const addr).cast(), len) })?;
    Ok(())
}

/// Accepts one connection (non-blocking, close-on-exec).
pub fn accept(fd: BorrowedFd<'_>) -> io::Result<OwnedFd> {
    // SAFETY: null address pointers are allowed; flags are valid.
    owned(unsafe {
        libc::accept4(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    })
}

/// Credentials of the peer of a connected unix socket: `(pid, uid)`.
pub fn peer_cred(fd: BorrowedFd<'_>) -> io::Result<(i32, u32)> {
    // SAFETY: `ucred` is plain old data; all-zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid out-pointers of the right size.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    })?;
    Ok((cred.pid, cred.uid))
}

/// The real user id of this process.
pub fn uid() -> u32 {
    // SAFETY: `getuid` cannot fail.
    unsafe { libc::getuid() }
}

/// Shuts a socket down for writing, or in both directions (`both`): the peer sees end of
/// file even if a duplicate of the descriptor lives on.
pub fn shutdown(fd: BorrowedFd<'_>, both: bool) {
    let how = if both { libc::SHUT_RDWR } else { libc::SHUT_WR };
    // SAFETY: plain system call on a descriptor we hold.
    unsafe { libc::shutdown(fd.as_raw_fd(), how) };
}

const MAX_FDS: usize = 4;

/// Sends one packet with up to four descriptors attached (`SCM_RIGHTS`), never blocking and
/// never raising SIGPIPE.
pub fn send_packet(fd: BorrowedFd<'_>, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // A buffer for the control message, aligned for `cmsghdr`.
    let mut cbuf = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr().cast_mut().cast(),
        iov_len: bytes.len(),
    };
    // SAFETY: `msghdr` is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let payload = (fds.len() * std::mem::size_of::<RawFd>()) as u32;
        // SAFETY: pure arithmetic on a length.
        let space = unsafe { libc::CMSG_SPACE(payload) } as usize;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: `msg_control` points at `cbuf`, which is 64 bytes (more than `space` for
        // four descriptors) and aligned for `cmsghdr`; CMSG_FIRSTHDR/CMSG_DATA stay inside
        // it; the descriptors are copied with an unaligned-safe byte copy.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(payload) as usize;
            let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
            std::ptr::copy_nonoverlapping(
                raw.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(c),
                payload as usize,
            );
        }
    }
    // SAFETY: `msg` describes valid buffers (the caller's bytes, read only by the kernel, and
    // `cbuf`) that live across the call.
    let n = unsafe {
        libc::sendmsg(
            fd.as_raw_fd(),
            &msg,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one packet into `buf` with the descriptors attached to it. `Ok(None)` means the
/// peer hung up; `WouldBlock` that nothing is there. Excess descriptors are closed.
pub fn recv_packet(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
) -> io::Result<Option<(usize, Vec<OwnedFd>)>> {
    let mut cbuf = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: `msghdr` is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: `msg` describes valid, writable buffers that live across the call.
    let n = unsafe {
        libc::recvmsg(
            fd.as_raw_fd(),
            &mut msg,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `msg.msg_control`/`msg_controllen` within `cbuf`; the CMSG
    // macros walk only inside it, and descriptors are read with unaligned reads.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let bytes = ((*c).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize);
                for i in 0..bytes / std::mem::size_of::<RawFd>() {
                    let raw = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    fds.push(OwnedFd::from_raw_fd(raw));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if n == 0 && fds.is_empty() {
        return Ok(None);
    }
    Ok(Some((n as usize, fds)))
}

/// An epoll instance.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// Creates one.
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain system call with a valid flag.
        Ok(Epoll(owned(unsafe {
            libc::epoll_create1(libc::EPOLL_CLOEXEC)
        })?))
    }

    /// Watches `fd` for input and hang-up, reporting `token`.
    pub fn add(&self, fd: BorrowedFd<'_>, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: valid descriptors and a valid event structure.
        cvt(unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        })?;
        Ok(())
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: valid descriptors and a valid event structure.
        unsafe {
            libc::epoll_ctl(
                self.0.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut ev,
            )
        };
    }

    /// Waits up to `timeout_ms` (-1: forever) and returns the tokens that fired.
    pub fn wait(&self, out: &mut Vec<u64>, timeout_ms: i32) {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 32];
        // SAFETY: `evs` is a valid array of 32 events.
        let n = unsafe { libc::epoll_wait(self.0.as_raw_fd(), evs.as_mut_ptr(), 32, timeout_ms) };
        out.clear();
        for ev in evs.iter().take(usize::try_from(n).unwrap_or(0)) {
            out.push(ev.u64);
        }
    }
}

/// Whether process `pid` exists.
pub fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// This process's id.
pub fn pid() -> i32 {
    std::process::id() as i32
}

/// One piece of memory in another process, for cross-memory attach. Laid out as the
/// kernel's `iovec` on 64-bit targets (a pointer-sized address, then a `size_t` length), so
/// that a list is handed to the kernel as it is, whatever its length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct RemoteIov {
    /// Address in the other process.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// An address list for cross-memory attach, inline up to four ranges (a request's segments,
/// the target's one region, the last byte apart): no allocation per request in the common
/// case.
pub type Iovs = smallvec::SmallVec<[RemoteIov; 4]>;

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<RemoteIov>() == std::mem::size_of::<libc::iovec>());
    assert!(std::mem::align_of::<RemoteIov>() == std::mem::align_of::<libc::iovec>());
    assert!(std::mem::offset_of!(RemoteIov, addr) == std::mem::offset_of!(libc::iovec, iov_base));
    assert!(std::mem::offset_of!(RemoteIov, len) == std::mem::offset_of!(libc::iovec, iov_len));
};

/// The kernel's form of an address list: the list itself on 64-bit targets (no copy, no
/// allocation at any length).
#[cfg(target_pointer_width = "64")]
fn iovecs(v: &[RemoteIov]) -> &[RemoteIov] {
    v
}

/// The kernel's form of an address list (inline up to eight ranges).
#[cfg(not(target_pointer_width = "64"))]
fn iovecs(v: &[RemoteIov]) -> smallvec::SmallVec<[libc::iovec; 8]> {
    v.iter()
        .map(|r| libc::iovec {
            iov_base: r.addr as usize as *mut libc::c_void,
            iov_len: r.len as usize,
        })
        .collect()
}

/// Copies from `remote` (in process `pid`) into the `local` ranges of this process, in order.
/// The kernel checks the remote ranges and the permission; returns the bytes copied (at most
/// 1024 ranges per side are used per call).
///
/// # Safety
/// Every `local` range must be valid for writes and not borrowed by any Rust reference.
pub unsafe fn cma_readv(pid: i32, local: &[RemoteIov], remote: &[RemoteIov]) -> io::Result<usize> {
    let (l, r) = (
        iovecs(&local[..local.len().min(1024)]),
        iovecs(&remote[..remote.len().min(1024)]),
    );
    // SAFETY: the local ranges are valid for writes (caller's contract); the kernel checks
    // the remote ranges against the target's address space. Both lists have the kernel's
    // `iovec` layout (checked at compile time above) and live for the whole call.
    let n = unsafe {
        libc::process_vm_readv(
            pid,
            l.as_ptr().cast::<libc::iovec>(),
            l.len() as u64,
            r.as_ptr().cast::<libc::iovec>(),
            r.len() as u64,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Copies the `local` ranges of this process into `remote` (in process `pid`), in order.
///
/// # Safety
/// Every `local` range must be valid for reads.
pub unsafe fn cma_writev(pid: i32, local: &[RemoteIov], remote: &[RemoteIov]) -> io::Result<usize> {
    let (l, r) = (
        iovecs(&local[..local.len().min(1024)]),
        iovecs(&remote[..remote.len().min(1024)]),
    );
    // SAFETY: the local ranges are valid for reads (caller's contract); the kernel checks
    // the remote ranges against the target's address space. Both lists have the kernel's
    // `iovec` layout (checked at compile time above) and live for the whole call.
    let n = unsafe {
        libc::process_vm_writev(
            pid,
            l.as_ptr().cast::<libc::iovec>(),
            l.len() as u64,
            r.as_ptr().cast::<libc::iovec>(),
            r.len() as u64,
            0,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Probes whether cross-memory attach works at all here (not blocked by seccomp or a kernel
/// built without it): reads a word of our own memory through `process_vm_readv`.
pub fn cma_self_probe() -> bool {
    let src: u64 = 0x5eed_cafe;
    let mut dst: u64 = 0;
    let remote = [RemoteIov {
        addr: (&raw const src) as u64,
        len: 8,
    }];
    let local = [RemoteIov {
        addr: (&raw mut dst) as u64,
        len: 8,
    }];
    // SAFETY: `dst` is a valid 8-byte local, not borrowed during the call.
    let r = unsafe { cma_readv(pid(), &local, &remote) };
    matches!(r, Ok(8)) && dst == src
}

/// Reads the 8-byte word at `addr` in process `pid`: true if cross-memory attach to it works
/// and the word holds `expect`.
pub fn cma_probe(pid: i32, addr: u64, expect: u64) -> bool {
    let mut v: u64 = 0;
    let remote = [RemoteIov { addr, len: 8 }];
    let local = [RemoteIov {
        addr: (&raw mut v) as u64,
        len: 8,
    }];
    // SAFETY: `v` is a valid 8-byte local, not borrowed during the call.
    let r = unsafe { cma_readv(pid, &local, &remote) };
    matches!(r, Ok(8)) && v == expect
}
