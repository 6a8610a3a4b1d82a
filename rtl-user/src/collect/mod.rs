//! Reading what the probes produced.
pub mod decode;
pub mod loader_stops;
pub mod spool;
pub mod stack_record;
