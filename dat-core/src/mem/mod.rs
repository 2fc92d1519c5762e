//! Registered memory: buffers, the LMR/RMR table and the protection checks.
