//! [`Buffer`]: memory that can be registered as an LMR and touched by a peer (RDMA).
//!
//! # The access contract
//!
//! Registered memory is shared with agents Rust cannot see: a peer's RDMA write lands in it
//! whenever the provider's I/O thread gets to it, and a C consumer may read it through its own
//! pointer at any time. A Rust reference (`&[u8]` or `&mut [u8]`) into such memory would promise
//! the compiler that nobody else writes it while the reference lives, and that promise cannot be
//! kept. Therefore:
//!
//! * **Nobody ever holds a `&[u8]` or `&mut [u8]` into a `Buffer`.** The type hands out no slice
//!   views, and no `Deref`.
//! * Every access is a copy in or out through raw pointers ([`std::ptr::copy_nonoverlapping`],
//!   [`std::ptr::copy`], [`std::ptr::write_bytes`]) with a range check first: [`Buffer::read_at`],
//!   [`Buffer::write_at`], [`Buffer::fill`], [`Buffer::copy_from_buffer`], [`Buffer::to_vec`].
//!   The only references involved point at the *caller's* memory (`src`/`dst`), never into the
//!   buffer, so concurrent remote writes cannot break Rust's aliasing rules on references.
//! * Out-of-range accesses are refused with `DAT_INVALID_PARAMETER`; nothing here panics.
//!
//! What the contract does *not* give is a meaning to two agents touching the same bytes at the
//! same time. DAT forbids that (the consumer must not touch memory named by an outstanding DTO,
//! and RDMA into memory that is concurrently used is undefined in DAT as on the wire), so the
//! bytes seen in such a race are unspecified, exactly as they are on RDMA hardware. Keeping
//! access copy-only confines such a consumer error to the bytes involved.
//!
//! A `Buffer` is shared as `Arc<Buffer>` by its [`Region`](super::Region); every
//! [`Segment`](super::Segment) that names it holds a counted reference to the region's pin
//! ([`SegBuf`](super::SegBuf)), which holds the `Arc`, so the memory outlives every queued
//! operation that may still touch it, whatever order the consumer frees things in.
//!
//! This, `pin`, `post_cache` and `flag_lock` are the only modules of `dat-core` that contain
//! `unsafe` code.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::fmt;
use std::ptr;
use std::sync::atomic;

use crate::error::{DatError, DatResult, ErrorType, Subtype};

/// `DAT_INVALID_PARAMETER` for a byte range that does not lie inside a buffer. Buffer methods
/// are not DAT calls, so no argument position is named.
pub const OUT_OF_RANGE: DatError = DatError::new(ErrorType::InvalidParameter, Subtype::NoSubtype);

/// Who owns the memory of a [`Buffer`] and how it is released.
enum Owner {
    /// Allocated by [`Buffer::alloc`] with this layout (size > 0); freed with `dealloc`.
    Alloc(Layout),
    /// No memory: a zero-length buffer whose pointer is dangling (never dereferenced).
    Empty,
    /// The pieces of a `Vec<u8>` taken apart by [`Buffer::from_vec`]; rebuilt and dropped.
    Vec {
        /// The vector's capacity (its length is the buffer's length).
        capacity: usize,
    },
    /// Memory owned by somebody else ([`Buffer::from_raw_parts`]); never freed here.
    External,
}

/// Memory that can be registered: a stable address range that outlives every use (shared as
/// `Arc<Buffer>`).
///
/// See the [module documentation](self) for the access contract: the bytes are only ever
/// copied in and out through raw pointers, never borrowed.
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    owner: Owner,
}

// SAFETY: a `Buffer` is an address range plus the knowledge of how to free it. It exposes no
// references into the range; every access copies through raw pointers after a bounds check, so
// moving a `Buffer` to another thread cannot create aliasing references. The memory it owns
// (`Alloc`/`Vec`) is plain heap memory that any thread may free.
unsafe impl Send for Buffer {}
// SAFETY: shared access (`&Buffer`) only performs raw-pointer copies into and out of the range
// (no references into it are ever created), which is what the memory of a registered region
// must allow anyway because remote peers write it concurrently; see the module documentation.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Allocates `len` zeroed bytes aligned to `align`, owned by the buffer.
    ///
    /// A zero `len` is allowed: the buffer then owns no memory and its address is `align`
    /// (a dangling, aligned, never dereferenced pointer).
    ///
    /// # Errors
    /// * `DAT_INVALID_PARAMETER | DAT_INVALID_ARG2` if `align` is not a power of two.
    /// * `DAT_INSUFFICIENT_RESOURCES | DAT_RESOURCE_MEMORY` if the size cannot be represented
    ///   (rounded up to `align` it exceeds `isize::MAX`) or the allocator fails.
    pub fn alloc(len: usize, align: usize) -> DatResult<Buffer> {
        if !align.is_power_of_two() {
            return Err(DatError::invalid_arg(2));
        }
        let layout = Layout::from_size_align(len, align)
            .map_err(|_| DatError::resources(Subtype::ResourceMemory))?;
        if len == 0 {
            return Ok(Buffer {
                ptr: ptr::without_provenance_mut(align),
                len: 0,
                owner: Owner::Empty,
            });
        }
        // SAFETY: `layout` has a non-zero size (checked above) and a valid alignment
        // (`Layout::from_size_align` succeeded).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(DatError::resources(Subtype::ResourceMemory));
        }
        Ok(Buffer {
            ptr,
            len,
            owner: Owner::Alloc(layout),
        })
    }

    /// Takes ownership of a vector's memory (no copy; its spare capacity is kept until drop).
    pub fn from_vec(v: Vec<u8>) -> Buffer {
        let mut v = std::mem::ManuallyDrop::new(v);
        let (ptr, len, capacity) = (v.as_mut_ptr(), v.len(), v.capacity());
        Buffer {
            ptr,
            len,
            owner: Owner::Vec { capacity },
        }
    }

    /// Wraps memory owned by somebody else (the C ABI's consumers register their own memory).
    /// The buffer never frees it.
    ///
    /// `ptr` may be null only if `len` is 0.
    ///
    /// # Safety
    /// For as long as this buffer or any `Arc` clone of it lives, `ptr..ptr+len` must stay
    /// allocated and valid for reads and writes, and must not be accessed through a Rust
    /// reference by anybody (C code and other raw-pointer copies are fine, as for registered
    /// memory on real hardware).
    pub unsafe fn from_raw_parts(ptr: *mut u8, len: usize) -> Buffer {
        Buffer {
            ptr,
            len,
            owner: Owner::External,
        }
    }

    /// The address of the first byte, as a number (what a VA-type registration advertises).
    pub fn addr(&self) -> u64 {
        self.ptr.addr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw start pointer, for providers that hand the memory to an OS or hardware
    /// interface. Creating references from it breaks the access contract of this module.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Checks that `offset..offset+count` lies inside the buffer (overflow-safe).
    fn check(&self, offset: usize, count: usize) -> DatResult<()> {
        match offset.checked_add(count) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OUT_OF_RANGE),
        }
    }

    /// Copies `dst.len()` bytes starting at `offset` out of the buffer.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if the range is not inside the buffer;
    /// `dst` is then left untouched.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> DatResult<()> {
        self.check(offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: `offset + dst.len() <= self.len` (checked), so the source range lies inside
        // the buffer, which is valid for reads while `self` lives (owned memory, or the
        // caller's guarantee of `from_raw_parts`). `dst` is a distinct caller-owned slice:
        // the buffer's memory is never borrowed as a slice, so the ranges cannot overlap.
        unsafe { ptr::copy_nonoverlapping(self.ptr.add(offset), dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    /// Copies `src` into the buffer starting at `offset`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if the range is not inside the buffer;
    /// nothing is written then.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> DatResult<()> {
        self.check(offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: the destination range lies inside the buffer (checked) and is valid for
        // writes while `self` lives; no reference into the buffer exists (module contract),
        // so writing through the raw pointer invalidates none. `src` is caller memory outside
        // the buffer's range (the buffer is never lent out as a slice), so no overlap.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) };
        Ok(())
    }

    /// Copies `src` into the buffer starting at `offset` so that its last byte is stored
    /// last: every byte but the last, then a `Release` fence, then the last byte (an atomic
    /// store). This is how an RDMA write or the data of an RDMA read lands: InfiniBand places
    /// a message's bytes in order, and consumers rely on it (`dtest -D -a` polls the last
    /// byte of its target buffer, then checks the whole buffer). A plain copy gives no such
    /// order (glibc's `memcpy` stores both ends first; `rep movsb` stores in any order). A
    /// reader that sees the last byte with an `Acquire` load (or on x86-64 any load: stores
    /// become visible in program order) sees every other byte too.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if the range is not inside the buffer;
    /// nothing is written then.
    pub fn write_at_ordered(&self, offset: usize, src: &[u8]) -> DatResult<()> {
        self.check(offset, src.len())?;
        let Some((&last, body)) = src.split_last() else {
            return Ok(());
        };
        self.write_at(offset, body)?;
        atomic::fence(atomic::Ordering::Release);
        // SAFETY: `offset + src.len() - 1` lies inside the buffer (checked) and is valid for
        // writes; a `u8` is always aligned for `AtomicU8`. No Rust reference into the buffer
        // exists (module contract); the atomic view lives for this one store.
        let at = unsafe { atomic::AtomicU8::from_ptr(self.ptr.add(offset + body.len())) };
        at.store(last, atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Sets `len` bytes starting at `offset` to `byte`.
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if the range is not inside the buffer.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> DatResult<()> {
        self.check(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: the range lies inside the buffer (checked) and is valid for writes; no
        // reference into it exists (module contract).
        unsafe { ptr::write_bytes(self.ptr.add(offset), byte, len) };
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` into this buffer at `dst_offset`, with no
    /// intermediate copy (what a shared-memory provider does for an RDMA). `src` may be this
    /// very buffer, and the ranges may overlap (memmove semantics).
    ///
    /// # Errors
    /// `DAT_INVALID_PARAMETER` ([`OUT_OF_RANGE`]) if either range is out of its buffer.
    pub fn copy_from_buffer(
        &self,
        dst_offset: usize,
        src: &Buffer,
        src_offset: usize,
        len: usize,
    ) -> DatResult<()> {
        self.check(dst_offset, len)?;
        src.check(src_offset, len)?;
        if len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges lie inside their buffers (checked), which are valid for reads
        // (source) and writes (destination). `ptr::copy` allows overlapping ranges, which
        // covers `src` being `self` or wrapping the same external memory.
        unsafe { ptr::copy(src.ptr.add(src_offset), self.ptr.add(dst_offset), len) };
        Ok(())
    }

    /// A copy of the whole contents.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len];
        // Cannot fail: the range is exactly the buffer.
        let _ = self.read_at(0, &mut v);
        v
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        match self.owner {
            Owner::Alloc(layout) => {
                // SAFETY: `ptr` was returned by `alloc_zeroed(layout)` in `Buffer::alloc` and
                // is freed only here, once.
                unsafe { alloc::dealloc(self.ptr, layout) }
            }
            Owner::Vec { capacity } => {
                // SAFETY: `ptr`, `len` and `capacity` are the parts of a `Vec<u8>` that
                // `from_vec` took apart without freeing; it is rebuilt and dropped only here.
                drop(unsafe { Vec::from_raw_parts(self.ptr, self.len, capacity) })
            }
            Owner::Empty | Owner::External => {}
        }
    }
}

impl fmt::Debug for Buffer {
    /// Address, length and ownership; never the contents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let owner = match self.owner {
            Owner::Alloc(_) => "alloc",
            Owner::Empty => "empty",
            Owner::Vec { .. } => "vec",
            Owner::External => "external",
        };
        f.debug_struct("Buffer")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("owner", &owner)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn alloc_is_zeroed_aligned_and_sized() {
        for &(len, align) in &[(1usize, 1usize), (100, 8), (4096, 4096), (3, 64)] {
            let b = Buffer::alloc(len, align).unwrap();
            assert_eq!(b.len(), len);
            assert!(!b.is_empty());
            assert_eq!(b.addr() % align as u64, 0, "align {align}");
            assert_eq!(b.to_vec(), vec![0; len]);
        }
    }

    #[test]
    fn alloc_zero_length_is_dangling_aligned_and_usable() {
        let b = Buffer::alloc(0, 64).unwrap();
        assert!(b.is_empty());
        assert_eq!(b.addr(), 64);
        assert_eq!(b.to_vec(), Vec::<u8>::new());
        assert_eq!(b.read_at(0, &mut []), Ok(()));
        assert_eq!(b.write_at(0, &[]), Ok(()));
        assert_eq!(b.fill(0, 0, 1), Ok(()));
        assert_eq!(b.read_at(0, &mut [0]), Err(OUT_OF_RANGE));
        assert_eq!(b.read_at(1, &mut []), Err(OUT_OF_RANGE));
    }

    #[test]
    fn alloc_rejects_bad_alignment_and_impossible_sizes() {
        for align in [0usize, 3, 6, 100] {
            assert_eq!(
                Buffer::alloc(8, align).unwrap_err(),
                DatError::invalid_arg(2),
                "align {align}"
            );
        }
        let e = Buffer::alloc(usize::MAX - 2, 8).unwrap_err();
        assert_eq!(e, DatError::resources(Subtype::ResourceMemory));
        assert_eq!(e.to_raw(), 0x8003_0002);
    }

    #[test]
    fn read_write_fill_round_trip() {
        let b = Buffer::alloc(16, 8).unwrap();
        b.write_at(2, b"hello").unwrap();
        b.fill(10, 3, 0xAB).unwrap();
        let mut out = [0u8; 5];
        b.read_at(2, &mut out).unwrap();
        assert_eq!(&out, b"hello");
        let v = b.to_vec();
        assert_eq!(&v[..2], &[0, 0]);
        assert_eq!(&v[10..13], &[0xAB; 3]);
        assert_eq!(v[13], 0);
    }

    #[test]
    fn range_errors_at_the_boundaries_never_touch_memory() {
        let b = Buffer::from_vec(vec![7; 8]);
        // Exact end is fine.
        assert_eq!(b.write_at(6, &[1, 2]), Ok(()));
        assert_eq!(b.read_at(8, &mut []), Ok(()));
        // One past the end.
        assert_eq!(b.write_at(7, &[1, 2]), Err(OUT_OF_RANGE));
        assert_eq!(b.read_at(9, &mut []), Err(OUT_OF_RANGE));
        let mut dst = [9u8; 2];
        assert_eq!(b.read_at(7, &mut dst), Err(OUT_OF_RANGE));
        assert_eq!(dst, [9, 9]);
        assert_eq!(b.fill(0, 9, 0), Err(OUT_OF_RANGE));
        // Wrap-around of offset + len.
        assert_eq!(b.fill(usize::MAX, 2, 0), Err(OUT_OF_RANGE));
        assert_eq!(b.write_at(usize::MAX, &[1]), Err(OUT_OF_RANGE));
        assert_eq!(b.to_vec(), vec![7, 7, 7, 7, 7, 7, 1, 2]);
        assert_eq!(OUT_OF_RANGE.to_raw(), 0x8006_0000);
    }

    #[test]
    fn from_vec_keeps_contents_and_address() {
        let mut v = Vec::with_capacity(32);
        v.extend_from_slice(b"abc");
        let addr = v.as_ptr() as u64;
        let b = Buffer::from_vec(v);
        assert_eq!(b.addr(), addr);
        assert_eq!(b.len(), 3);
        assert_eq!(b.to_vec(), b"abc");
        let e = Buffer::from_vec(Vec::new());
        assert!(e.is_empty());
        assert_eq!(e.to_vec(), Vec::<u8>::new());
    }

    #[test]
    fn from_raw_parts_reads_and_writes_external_memory_without_freeing_it() {
        let mut backing = vec![1u8, 2, 3, 4];
        let ptr = backing.as_mut_ptr();
        // SAFETY: `backing` outlives `b` (dropped at the end of the block) and is not
        // borrowed while `b` lives.
        let b = unsafe { Buffer::from_raw_parts(ptr, 4) };
        assert_eq!(b.addr(), ptr as u64);
        assert_eq!(b.as_ptr(), ptr);
        b.write_at(1, &[9, 9]).unwrap();
        assert_eq!(b.to_vec(), vec![1, 9, 9, 4]);
        assert_eq!(b.write_at(3, &[0, 0]), Err(OUT_OF_RANGE));
        drop(b);
        assert_eq!(backing, vec![1, 9, 9, 4]);
        // A null pointer is harmless with length 0.
        // SAFETY: zero length: nothing is ever dereferenced.
        let n = unsafe { Buffer::from_raw_parts(std::ptr::null_mut(), 0) };
        assert_eq!(n.addr(), 0);
        assert_eq!(n.to_vec(), Vec::<u8>::new());
        assert_eq!(n.read_at(0, &mut []), Ok(()));
    }

    #[test]
    fn copy_between_buffers_and_within_one() {
        let a = Buffer::from_vec(b"0123456789".to_vec());
        let b = Buffer::alloc(4, 1).unwrap();
        b.copy_from_buffer(0, &a, 3, 4).unwrap();
        assert_eq!(b.to_vec(), b"3456");
        // Overlapping move inside one buffer.
        a.copy_from_buffer(2, &a, 0, 5).unwrap();
        assert_eq!(a.to_vec(), b"0101234789");
        assert_eq!(b.copy_from_buffer(1, &a, 0, 4), Err(OUT_OF_RANGE));
        assert_eq!(b.copy_from_buffer(0, &a, 7, 4), Err(OUT_OF_RANGE));
        assert_eq!(b.copy_from_buffer(0, &a, usize::MAX, 1), Err(OUT_OF_RANGE));
        assert_eq!(b.to_vec(), b"3456");
    }

    #[test]
    fn shared_across_threads_with_disjoint_writes() {
        let b = Arc::new(Buffer::alloc(8 * 64, 64).unwrap());
        let handles: Vec<_> = (0..8u8)
            .map(|i| {
                let b = Arc::clone(&b);
                std::thread::spawn(move || b.fill(usize::from(i) * 64, 64, i + 1))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let v = b.to_vec();
        for i in 0..8usize {
            assert!(
                v[i * 64..(i + 1) * 64]
                    .iter()
                    .all(|&x| usize::from(x) == i + 1)
            );
        }
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Buffer>();
    }

    #[test]
    fn debug_shows_no_contents() {
        let b = Buffer::from_vec(b"secret".to_vec());
        let s = format!("{b:?}");
        assert!(s.contains("len: 6") && s.contains("vec"), "{s}");
        assert!(!s.contains("secret"));
    }

    #[test]
    fn registering_a_range_that_wraps_around_is_refused() {
        use crate::mem::MemTable;
        use crate::types::{LmrId, MemPriv, PzId, VaType};
        // SAFETY: the buffer is never read or written: registration only looks at the
        // address numbers (and the zero-based registration below is never accessed either).
        let wrap = Arc::new(unsafe { Buffer::from_raw_parts(usize::MAX as *mut u8, 8) });
        let mut t = MemTable::new();
        let rw = MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE;
        assert_eq!(
            t.register(LmrId(1), PzId(1), Arc::clone(&wrap), rw, VaType::Va)
                .unwrap_err(),
            DatError::invalid_arg(3)
        );
        // Zero-based, the same memory is addressed 0..8, which is fine.
        let r = t
            .register(LmrId(1), PzId(1), wrap, rw, VaType::ZeroBased)
            .unwrap();
        assert_eq!((r.start, r.len), (0, 8));
    }

    /// Races [`Buffer::write_at_ordered`] against a reader that spins on the last byte of
    /// the buffer (an `Acquire` load, as `dtest -D -a` polls) and then checks every other
    /// byte: with a plain copy the last byte may become visible before the rest (glibc's
    /// `memcpy` stores both ends first; `rep movsb` stores in any order) and the reader sees
    /// stale bytes.
    fn race_last_byte(len: usize, rounds: u32, write: fn(&Buffer, &[u8])) -> Result<(), String> {
        use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
        let buf = Arc::new(Buffer::alloc(len, 64).unwrap());
        let acked = Arc::new(AtomicU32::new(0));
        let wait = |pred: &dyn Fn() -> bool| {
            let mut spins = 0u32;
            while !pred() {
                spins += 1;
                if spins.is_multiple_of(256) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        };
        let marker = |round: u32| u8::try_from(round % 250).unwrap() + 1;
        let reader = {
            let (buf, acked) = (Arc::clone(&buf), Arc::clone(&acked));
            std::thread::spawn(move || -> Result<(), String> {
                // SAFETY: the last byte lies inside the buffer, which `buf` keeps alive; it
                // is only ever accessed atomically or by the writer's atomic store.
                let last = unsafe { AtomicU8::from_ptr(buf.as_ptr().add(len - 1)) };
                let mut seen = vec![0u8; len];
                for round in 1..=rounds {
                    let want = marker(round);
                    wait(&|| last.load(Ordering::Acquire) == want);
                    buf.read_at(0, &mut seen[..len - 1]).unwrap();
                    if let Some(at) = seen[..len - 1].iter().position(|&b| b != want) {
                        acked.store(u32::MAX, Ordering::Release);
                        return Err(format!("len {len} round {round}: stale byte at {at}"));
                    }
                    acked.store(round, Ordering::Release);
                }
                Ok(())
            })
        };
        for round in 1..=rounds {
            wait(&|| {
                let a = acked.load(Ordering::Acquire);
                a == round - 1 || a == u32::MAX
            });
            if acked.load(Ordering::Acquire) == u32::MAX {
                break;
            }
            write(&buf, &vec![marker(round); len]);
        }
        reader.join().unwrap()
    }

    #[test]
    fn ordered_write_stores_the_last_byte_last() {
        for len in [1, 2, 33, 128, 512, 4096, 70_000] {
            let rounds = if len > 10_000 { 200 } else { 2000 };
            race_last_byte(len, rounds, |b, src| b.write_at_ordered(0, src).unwrap()).unwrap();
        }
        let b = Buffer::from_vec(vec![0; 8]);
        b.write_at_ordered(3, &[1, 2, 3]).unwrap();
        assert_eq!(b.to_vec(), [0, 0, 0, 1, 2, 3, 0, 0]);
        b.write_at_ordered(8, &[]).unwrap();
        assert_eq!(b.write_at_ordered(6, &[9, 9, 9]), Err(OUT_OF_RANGE));
        assert_eq!(
            b.to_vec(),
            [0, 0, 0, 1, 2, 3, 0, 0],
            "nothing written out of range"
        );
    }

    /// The race above does catch a plain copy (run by hand: it depends on the CPU and the
    /// C library's `memcpy`; on this machine's glibc it fails within a few thousand rounds).
    #[test]
    #[ignore = "demonstrates that the race test can fail; timing-dependent by nature"]
    fn plain_write_can_expose_the_last_byte_early() {
        let failed = [512, 4096, 70_000]
            .iter()
            .any(|&len| race_last_byte(len, 20_000, |b, src| b.write_at(0, src).unwrap()).is_err());
        assert!(failed, "no stale byte seen with a plain copy");
    }
}
