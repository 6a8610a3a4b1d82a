//! The agent's wire format: any bytes as a published batch (and as a dump-file stream).
//! Must not panic; a validated batch's records iterate to exactly `record_count` items.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(b) = rtl_common::agent::decode(data) {
        assert_eq!(b.records().count() as u32, b.header.record_count);
        assert_eq!(b.bytes().len(), data.len());
    }
    let mut rest = data;
    while let Ok((b, n)) = rtl_common::agent::decode_prefix(rest) {
        assert!(n > 0 && n <= rest.len());
        assert_eq!(b.records().count() as u32, b.header.record_count);
        rest = &rest[n..];
    }
});
