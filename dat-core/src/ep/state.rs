//! The endpoint state machine.
