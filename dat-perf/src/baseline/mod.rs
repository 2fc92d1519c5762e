//! Baselines (in progress).
