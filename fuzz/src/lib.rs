//! The collector's parsers of untrusted bytes, compiled from rtl-user's own source files.
//!
//! rtl-user itself is not a dependency: its build script builds the eBPF object (nested cargo
//! for bpfel-unknown-none) and it pulls tokio, aya and a bundled SQLite, none of which a
//! sanitizer/coverage build needs. The modules below use nothing but `object`, `anyhow`,
//! `rtl_common` and the trace library `rtl-trace` (bounded demangling; no aya, tokio or eBPF
//! build), so including the very same files fuzzes the very same code:
//! `rtl_user::probe::symbols::Symbols::parse` (with the bounded demangling of C++ exports it
//! does) and `rtl_user::collect::decode::decode`.

#[path = "../../rtl-user/src/probe/symbols.rs"]
pub mod symbols;

/// `symbols` uses it as `super::demangle`, as in rtl-user's `probe` module (which re-exports
/// the trace library's, as here).
pub use rtl_trace::demangle;

/// `symbols` opens and reads files through it (`super::untrusted`).
#[path = "../../rtl-user/src/probe/untrusted.rs"]
pub mod untrusted;

#[path = "../../rtl-user/src/collect/decode.rs"]
pub mod decode;

/// `decode` names processes with `crate::join::proc_info::join_args`.
#[path = "../../rtl-user/src/join/proc_info.rs"]
pub mod proc_info;
pub mod join {
    pub use super::proc_info;
}
