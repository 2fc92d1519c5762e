//! Endpoints: the state machine and attributes.
pub mod attr;
pub mod state;
