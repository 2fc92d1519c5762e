//! # dat-provider-tcp
//!
//! The TCP provider of datrs (`provider = "tcp"`): DAT 2.0 semantics (connection
//! management, two-sided send/receive, one-sided RDMA read and write) emulated over TCP.
//!
//! * [`wire`]: the frame format; the parser validates lengths first and never panics.

pub mod engine;
pub mod wire;
