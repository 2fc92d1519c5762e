//! The C boundary: panic containment and raw-pointer helpers.

use std::panic::{AssertUnwindSafe, catch_unwind};

use dat::{DatError, DatResult, ErrorType, Subtype};
use dat_core::error::{DAT_CLASS_ERROR, DAT_CLASS_WARNING, DAT_SUCCESS};

use crate::abi::DatReturn;

/// Runs one exported call: converts the result to a `DAT_RETURN` and contains panics
/// (unwinding into C is undefined behaviour), reporting them as `DAT_INTERNAL_ERROR`.
///
/// Inlined into each exported function, so that the call's body is too (a guard of its own
/// took the body as a closure of references to the arguments, spilled them and reloaded them:
/// about 50 instructions per DTO post or dequeue); `catch_unwind` costs nothing until a panic,
/// whose handling stays out of line ([`contained`]).
#[inline(always)]
pub fn guard(call: &'static str, f: impl FnOnce() -> DatResult<()>) -> DatReturn {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => to_return(r),
        Err(payload) => contained(call, payload),
    }
}

/// `DAT_SUCCESS` or the error's raw `DAT_RETURN`, as `DatError::result_to_raw` gives it, with
/// the class bits computed without a branch: `dat_core::error::Class` in declaration order
/// is Error (0), Warning (1), Bare (2), so `DAT_CLASS_ERROR >> class`, masked to the two class
/// bits, is `DAT_CLASS_ERROR`, `DAT_CLASS_WARNING` or 0 (`to_return_is_the_raw_code` checks
/// every code). `result_to_raw` is not inlined here and picks the class with two branches.
#[inline(always)]
pub fn to_return(r: DatResult<()>) -> DatReturn {
    match r {
        Ok(()) => DAT_SUCCESS,
        Err(e) => {
            let class =
                (DAT_CLASS_ERROR >> (e.class() as u32)) & (DAT_CLASS_ERROR | DAT_CLASS_WARNING);
            class | e.kind().raw() | u32::from(e.subtype().raw())
        }
    }
}

/// A panic stopped at the C boundary in `call`: logged, `DAT_INTERNAL_ERROR`.
#[cold]
#[inline(never)]
fn contained(call: &'static str, payload: Box<dyn std::any::Any + Send>) -> DatReturn {
    drop(payload);
    tracing::error!(call, "panic contained at the C boundary");
    DatError::new(ErrorType::InternalError, Subtype::NoSubtype).to_raw()
}

/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for the argument positions of the calls, built at
/// compile time.
const ARGS: [DatError; 11] = {
    let mut a = [DatError::invalid_arg(0); 11];
    let mut n = 1;
    while n < a.len() {
        a[n] = DatError::invalid_arg(n as u16);
        n += 1;
    }
    a
};

/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn`. A constant where `n` is one (every call site):
/// `DatError::invalid_arg` is a call into `dat-core`, and a call on an error path of a DTO
/// post made the compiler keep the post's arguments in saved registers on the fast path
/// too.
#[inline(always)]
pub fn arg(n: u16) -> DatError {
    match ARGS.get(n as usize) {
        Some(e) => *e,
        None => DatError::invalid_arg(n),
    }
}

/// Writes `v` through `p` if `p` is not NULL.
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the caller guarantees `p` is valid for writes when non-NULL.
        unsafe { p.write(v) };
    }
}

/// Writes `v` through `p`, which must not be NULL (argument `n`).
///
/// # Safety
/// `p` must be NULL or valid for a write of `T`.
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for NULL.
pub unsafe fn put_req<T>(p: *mut T, v: T, n: u16) -> DatResult<()> {
    if p.is_null() {
        return Err(arg(n));
    }
    // SAFETY: non-NULL, and the caller guarantees validity.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `size` bytes of private data from `p` (argument `n`).
///
/// # Safety
/// `p` must be NULL or valid for `size` bytes of reads.
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for a negative size or a NULL pointer with a
/// positive size.
pub unsafe fn private_data(size: i32, p: *const std::ffi::c_void, n: u16) -> DatResult<Vec<u8>> {
    let len = usize::try_from(size).map_err(|_| arg(n - 1))?;
    if len == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(arg(n));
    }
    // SAFETY: non-NULL and, per the caller, valid for `len` bytes.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
}

/// Borrows `n` triplets at `p` (count argument `count_arg`, pointer argument `count_arg + 1`)
/// without copying them: DTO calls read the consumer's IOV in place.
///
/// # Safety
/// `p` must be NULL or valid for `n` elements of reads (and aligned for `T`) for `'a`, and the
/// consumer must not write them meanwhile (the call holds them only while it runs).
///
/// # Errors
/// `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn` for a negative count or a NULL array with a
/// positive count.
pub unsafe fn triplets<'a, T: Copy>(n: i32, p: *const T, count_arg: u16) -> DatResult<&'a [T]> {
    let len = usize::try_from(n).map_err(|_| arg(count_arg))?;
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(arg(count_arg + 1));
    }
    // SAFETY: non-NULL and, per the caller, valid and unchanged for `len` elements for 'a.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// Copies `s` into a fixed C char array, truncating, always NUL-terminated.
pub fn fill_name(dst: &mut [libc::c_char], s: &str) {
    dst.fill(0);
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(&s.as_bytes()[..n]) {
        *d = *b as libc::c_char;
    }
}

/// `DAT_TRUE`/`DAT_FALSE`.
pub fn boolean(b: bool) -> u32 {
    u32::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn to_return_is_the_raw_code() {
        let mut seen = 0;
        for class in [0, DAT_CLASS_ERROR, DAT_CLASS_WARNING] {
            for kind in 0..0x40u32 {
                for sub in 0..0x100u32 {
                    let raw = class | kind << 16 | sub;
                    let Ok(Some(e)) = DatError::from_raw(raw) else {
                        continue;
                    };
                    assert_eq!(to_return(Err(e)), raw, "{e:?}");
                    assert_eq!(to_return(Err(e)), DatError::result_to_raw(Err(e)));
                    seen += 1;
                }
            }
        }
        assert!(seen > 3 * 20 * 40, "only {seen} codes decoded");
        assert_eq!(to_return(Ok(())), 0);
        assert_eq!(to_return(Err(DatError::QUEUE_EMPTY)), 0x000D_0000);
    }

    #[test]
    fn arg_is_invalid_arg() {
        for n in 0..=12 {
            assert_eq!(arg(n), DatError::invalid_arg(n));
        }
    }
}
