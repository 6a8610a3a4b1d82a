//! The collector's parsers of untrusted bytes, compiled from rtl-user's own source files.
//!
//! rtl-user itself is not a dependency: its build script builds the eBPF object (nested cargo
//! for bpfel-unknown-none) and it pulls tokio, aya and a bundled SQLite, none of which a
//! sanitizer/coverage build needs. The modules below use nothing but `object`, `anyhow`,
//! `cpp_demangle` and `rtl_common`, so including the very same files fuzzes the very same code:
//! `rtl_user::probe::symbols::Symbols::parse` (with the bounded demangling of C++ exports it
//! does) and `rtl_user::collect::decode::decode`.

#[path = "../../rtl-user/src/probe/symbols.rs"]
pub mod symbols;

/// `symbols` uses it as `super::demangle`, as in rtl-user's `probe` module.
#[path = "../../rtl-user/src/probe/demangle.rs"]
pub mod demangle;

#[path = "../../rtl-user/src/collect/decode.rs"]
pub mod decode;
