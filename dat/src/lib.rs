//! # dat
//!
//! The API applications use: DAT 2.0 (uDAPL) in safe Rust.
pub use dat_core::{DatError, DatResult};
