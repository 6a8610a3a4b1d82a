//! Kernel-side programs of rtl-ebpf.
//!
//! One generic entry program and one generic return program are attached to every probed
//! function; the uprobe cookie (see `rtl_common::cookie`) tells them which API they are on and
//! how many stack words to copy. Records go to one ring buffer; the collector decodes them.
//! Three raw tracepoints follow task lifecycles (fork, exec, exit) of traced processes.
//!
//! Hot path budget: a map lookup (process filter), one ring-buffer reserve/submit, a handful of
//! register reads. No logging, no loops over data.
//!
//! Every uprobe program comes twice: as a `uprobe.multi` program (the default: one kernel link per
//! library and probe kind, removed with one RCU synchronisation) and as a plain `uprobe` one (the
//! per-probe perf-event fallback for kernels without uprobe_multi, before 6.6). The kernel refuses
//! to attach a program loaded for one kind of link through the other, so the collector loads the
//! pair its kernel supports. The section names are written by hand because aya-ebpf 0.2's macros
//! only emit the plain kinds.
//!
//! Files: `maps` (every map), `helpers` (filter, counters, headers, wake-ups), `api_enter` and
//! `api_exit` (the probes on every API), `strings` (string arguments), `stacks` (call sites),
//! `publish` (the agent's hand-off), `loader` (the dynamic loader's hook), `task` (fork, exec,
//! exit tracepoints), `call_slots` (parked and held calls), `take_held` (the collector's take of
//! a waiting thread's held calls).
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![allow(internal_features)]

mod api_enter;
mod api_exit;
mod call_slots;
mod helpers;
mod loader;
mod maps;
mod publish;
mod python;
mod python_code;
mod stacks;
mod strings;
mod take_held;
mod task;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
