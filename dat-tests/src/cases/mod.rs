//! The cases, grouped by topic. Each is `pub fn name(t: &dyn Target) -> Outcome`: it fails
//! by panicking (an assertion naming what differed), passes with [`Outcome::Pass`] or skips
//! with [`Outcome::Skip`] and the reason.
//!
//! [`Outcome::Pass`]: crate::Outcome::Pass
//! [`Outcome::Skip`]: crate::Outcome::Skip

pub mod cm;
pub mod dto;
pub mod ep_states;
pub mod evd;
pub mod ia;
pub mod objects;
pub mod protection;
pub mod rdma;
pub mod seeds;
pub mod srq;
pub mod stress;
pub mod teardown;
pub mod zero_based;
