//! Registered memory: buffers, the LMR/RMR table and the protection checks.
//!
//! * [`Buffer`]: memory that can be registered, shared as `Arc<Buffer>` and only ever accessed
//!   by copying through raw pointers (see its access contract), so remote writes can never
//!   alias a Rust reference.
//! * [`Segment`] / [`SegList`]: the resolved memory of a post, with the gather/scatter rules of
//!   reference 6.3 and copy helpers for providers. A segment holds its memory through a
//!   [`SegBuf`], a counted reference the usual post and completion take and give back
//!   without an atomic operation (`pin`, `post_cache`).
//! * [`post_cache`]: the LMRs a thread's posts named last, found again without the table's
//!   lock while no LMR of the table was freed ([`LmrGeneration`]).
//! * [`MemTable`] / [`Region`]: the LMRs and RMR bindings of an IA and every protection check
//!   (PZ, range, privileges, keys) of reference 6.1–6.3 and 6.7, in one place for all
//!   providers. Its module documentation lists the return code of every rule.

pub mod buffer;
mod direct;
pub mod generation;
mod keys;
pub mod pin;
pub mod post_cache;
pub mod segment;
pub mod table;

pub use buffer::{Buffer, OUT_OF_RANGE};
pub use generation::LmrGeneration;
pub use pin::SegBuf;
pub use segment::{
    SegList, Segment, check_length, copy_segments, gather, gather_at, one_segment, scatter,
    scatter_at, scatter_at_ordered, total_len,
};
pub use table::{MemTable, Region, WindowBind};
