//! Reading what the probes produced.
pub mod decode;
pub mod spool;
