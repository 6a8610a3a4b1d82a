//! The rtl-ebpf trace format, as a library: a SQLite file in the rocpd schema plus rtl-ebpf's
//! `rtl_*` tables.
//!
//! Writing: [`rows`] (one value per table row: the trace's vocabulary, which the collector's
//! joiner produces) -> [`writer`] (the SQLite writer thread) over [`schema`]. Reading: [`read`]
//! opens a trace ([`read::open_trace`], checked, never written; older layouts [`migrate`]d in a
//! private copy) and makes the summary (text, JSON, HTML), the Perfetto timeline and merged
//! traces. [`api_meaning`]: what `rtl_api.ret` and `a0..a3` hold, as a trace records it.
//!
//! Depends on SQLite and what the readers need; nothing of the collector (no aya, tokio, eBPF).

pub mod api_meaning;
pub mod demangle;
pub mod error;
pub mod migrate;
pub mod read;
pub mod rows;
pub mod schema;
pub mod sites;
pub mod term;
pub mod writer;
