//! Ring-buffer record decoder: any bytes as one record. Must not panic; an agent batch's
//! payload is bounded by the record and by AGENT_BATCH_MAX.
#![no_main]
use libfuzzer_sys::fuzz_target;
use rtl_fuzz::decode::{decode, Event};

fuzz_target!(|data: &[u8]| {
    if let Ok(Event::Agent(_, payload, _)) = decode(data) {
        assert!(payload.len() <= data.len() && payload.len() <= rtl_common::AGENT_BATCH_MAX);
        // What the collector does next with the payload.
        if let Ok(b) = rtl_common::agent::decode(&payload) {
            for _ in b.records() {}
        }
    }
});
