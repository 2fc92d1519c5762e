//! Endpoints: the state machine and attributes.
pub mod state;
