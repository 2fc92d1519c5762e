//! Fuzzes the TCP provider's frame parser: any input must parse or fail, never panic, and a
//! frame that parses must re-encode to the same bytes.
#![no_main]

use dat_provider_tcp::wire::{Frame, parse_all};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = parse_all(data);
    if let Ok(Some(d)) = Frame::parse(data) {
        let mut out = Vec::new();
        d.frame.emit(d.ack, &mut out);
        assert_eq!(&out[..], &data[..d.len]);
    }
});
