//! Criterion benches (filled in later).
fn main() {}
