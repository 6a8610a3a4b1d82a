//! The collector's parsers of untrusted bytes, compiled from rtl-user's own source files.
//!
//! rtl-user itself is not a dependency: its build script builds the eBPF object (nested cargo
//! for bpfel-unknown-none) and it pulls tokio, aya and a bundled SQLite, none of which a
//! sanitizer/coverage build needs. The two modules below use nothing but `object`, `anyhow`
//! and `rtl_common`, so including the very same files fuzzes the very same code:
//! `rtl_user::probe::symbols::Symbols::parse` and `rtl_user::collect::decode::decode`.

#[path = "../../rtl-user/src/probe/symbols.rs"]
pub mod symbols;

#[path = "../../rtl-user/src/collect/decode.rs"]
pub mod decode;
