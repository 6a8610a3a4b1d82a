//! rtl-ebpf's collector, as a library: the binary (`main.rs`) is a thin CLI over these modules.
//!
//! Data flows one way: [`probe`] (eBPF uprobes) -> ring buffer -> [`collect::decode`] ->
//! [`join`] -> [`trace::writer`] (the trace format is the `rtl-trace` crate). [`session`] wires
//! them for one tracing run.

pub mod cli;
pub mod clock;
pub mod collect;
pub mod env_list;
pub mod join;
pub mod pid_watch;
pub mod probe;
pub mod read;
pub mod report;
pub mod run_as;
pub mod session;
pub mod stacks;
pub mod trace;

// The exit-code categories and terminal escaping are shared with the trace readers (rtl-trace).
pub use rtl_trace::{error, term};
