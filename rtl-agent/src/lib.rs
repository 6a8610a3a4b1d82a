//! rtl-agent: the in-process half of rtl-ebpf's GPU timing.
//!
//! Loaded with `LD_PRELOAD=.../librtl_agent.so` (an ELF constructor starts it) or
//! `HSA_TOOLS_LIB=.../librtl_agent.so` (the HSA runtime calls [`hsa::OnLoad`]). It finds the
//! libamdhip64 already loaded in the process (never loads one), turns on the runtime's built-in
//! profiler (`hipProfiler*Ext`, see [`clr`]) or, on stock ROCm and loaded as an HSA tool,
//! captures dispatch times by HSA signal capture (see [`hsa`]), converts what it gets to the wire
//! format of `rtl_common::agent` and hands batches to the collector by calling [`rtl_agent_publish`], a
//! no-op exported function the collector uprobes (it copies the bytes with
//! bpf_probe_read_user). No sockets, files or shared memory: nothing to clean up.
//!
//! # Exported symbols
//! * `rtl_agent_publish(const uint8_t *data, uint64_t len)`: the hand-off (the uprobe target).
//! * `OnLoad` / `OnUnload`: the HSA tools interface ([`hsa`]).
//!
//! # Environment
//! See [`config`]: `RTL_AGENT_GPU`, `RTL_AGENT_DRAIN_MS`, `RTL_AGENT_WAIT_MS`, `RTL_AGENT_QUIET`,
//! `RTL_AGENT_GRAPH_NODES` (`RTL_AGENT_HSA_BATCHES`), `RTL_AGENT_HSA_SPANS`, `RTL_AGENT_HSA_COPIES`, `RTL_AGENT_DUMP`. Nothing else is read (plus `LD_PRELOAD` and
//! `HSA_TOOLS_LIB`, only to learn how the agent itself was loaded).
//!
//! # Never harming the process
//! * Every `extern "C"` entry (constructor, destructor, fork handlers, TLS/atexit handlers, the
//!   profiler callback, OnLoad/OnUnload) runs inside `catch_unwind`; the crate is built with
//!   `panic = "unwind"` (a preloaded library must not abort its host).
//! * Fixed memory: a bounded lock-free queue and string table ([`publish`]); when the publisher
//!   falls behind, ops are dropped and counted, application threads never wait.
//! * The publisher thread blocks every signal, so process-directed signals reach the application.
//! * Without the API (stock ROCm) one warning is printed and nothing else happens.
//!
//! # Shutdown order (why not `atexit`)
//! The final flush (Disable, which drains pending GPU work, then drain, publish, final counters)
//! must run while libamdhip64 is still intact. `exit()` runs, in order: (1) the exiting thread's
//! TLS destructors (`__cxa_thread_atexit_impl`), (2) `atexit`/`__cxa_atexit` handlers in reverse
//! order of registration, (3) `_dl_fini`: `.fini_array` of every object, dependents first.
//! The HIP runtime registers its own teardown (C++ static destructors of lazily built singletons)
//! with `__cxa_atexit` whenever it first builds them, i.e. at an unknown time *after* any agent
//! constructor ran: a flush registered with `atexit` from the agent's constructor runs after the
//! runtime has torn itself down (the bug found in an earlier consumer). So the agent flushes from,
//! whichever comes first:
//! 1. a TLS destructor registered on the main thread by the constructor: it runs at the very
//!    start of `exit()` / return from `main`, before every atexit handler, whatever their order;
//! 2. an `atexit` handler registered when profiling is enabled (after the runtime's init-time
//!    handlers, so before them; covers `exit()` from another thread);
//! 3. the `.fini_array` destructor (before libamdhip64's own `.fini_array`: the agent does not
//!    depend on it; covers dlclose and the remaining paths);
//! 4. `OnUnload` (HSA tool mode; flushes the queue only, no call into the runtime);
//! 5. the application's own `_exit()` / `_Exit()`, which the agent interposes (forked workers
//!    commonly end with `_exit`): flush, then `exit_group` exactly like glibc's `_exit`. Skipped
//!    in a vfork child (pid differs from the agent's: it shares the parent's memory).
//!
//! The flush is idempotent, and the runtime part of it (Disable + last drain) runs on a helper
//! thread waited for at most 9 s (3 s in a forked child), so a wedged runtime cannot hang the
//! exit. `quick_exit()`, `exit_group` by other means and fatal signals skip all of them.
//! Limitation: the main thread calling `pthread_exit` while other threads go on also runs (1),
//! ending GPU capture early.
//!
//! # fork
//! `pthread_atfork`: the child resets the queue, counters and sequence numbers, marks strings
//! unsent (the collector keys them by pid; `batch_seq` restarts at 0), and restarts the
//! publisher thread. The child's runtime is a copy of its parent's, so records whose API call
//! started before the fork (CLOCK_REALTIME, the profiler's clock) are the parent's and are
//! skipped; the child's own records (a worker forked before HIP was initialised, the pattern
//! ROCm supports) are captured. A child still waiting for libamdhip64 keeps waiting and
//! activates on its own.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};
use std::sync::OnceLock;

pub mod clock;
pub mod clr;
pub mod config;
pub mod cupti;
mod hooks;
pub mod hsa;
pub mod loaded;
mod loaded_as;
pub mod publish;
mod publisher_thread;
mod shutdown;
mod start;
pub mod thread_seq;

use config::Config;

// ---------------------------------------------------------------------------------------------
// The hand-off.

/// The collector's uprobe target. A no-op: the collector's eBPF program reads `len` bytes (at
/// most `AGENT_BATCH_MAX`) at `data` on entry. Written in assembly so that nothing can remove it
/// or its calls, and so that its first instruction is `push %rbp`, which uprobes emulate without
/// single-stepping (~0.8 us per hit instead of ~15 us for e.g. a `lea`; measured.md).
/// Naked functions are never inlined (`#[inline(never)]` is implied and not allowed on them).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn rtl_agent_publish(data: *const u8, len: u64) {
    core::arch::naked_asm!("push rbp", "mov rbp, rsp", "pop rbp", "ret")
}

#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn rtl_agent_publish(data: *const u8, len: u64) {
    core::hint::black_box((data, len));
    std::sync::atomic::compiler_fence(SeqCst);
}

// ---------------------------------------------------------------------------------------------
// State.

pub(crate) const IDLE: u8 = 0;
pub(crate) const STARTING: u8 = 1;
pub(crate) const WAITING: u8 = 2;
pub(crate) const ACTIVE: u8 = 3;
pub(crate) const INACTIVE: u8 = 4;
pub(crate) const DONE: u8 = 5;

pub(crate) static PHASE: AtomicU8 = AtomicU8::new(IDLE);
pub(crate) static CONFIG: OnceLock<Config> = OnceLock::new();
pub(crate) static SHUTDOWN_STARTED: AtomicBool = AtomicBool::new(false);
pub(crate) static DUPLICATE: AtomicBool = AtomicBool::new(false);

pub(crate) fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_env().0)
}

pub(crate) fn config_ref() -> &'static Config {
    config()
}

/// One line on stderr, unless RTL_AGENT_QUIET.
pub(crate) fn say(msg: &str) {
    if config().quiet {
        return;
    }
    let s = format!("rtl-agent[{}]: {msg}\n", std::process::id());
    // SAFETY: valid buffer; a short or failed write to stderr is ignored.
    unsafe { libc::write(2, s.as_ptr() as *const c_void, s.len()) };
}

pub(crate) fn is_duplicate() -> bool {
    DUPLICATE.load(Relaxed)
}

/// Which source took the process: CLR (activate) or HSA (OnLoad), decided once.
pub(crate) static SOURCE: AtomicU8 = AtomicU8::new(SRC_NONE);
pub(crate) const SRC_NONE: u8 = 0;
pub(crate) const SRC_CLR: u8 = 1;
pub(crate) const SRC_HSA: u8 = 2;
pub(crate) const SRC_CUPTI: u8 = 3;

/// RTL_AGENT_GRAPH_NODES (`run --graph-nodes`): every node of every graph replay timed too
/// (HSA: capture inside multi-packet batches; CUPTI: per-node kernel records).
pub(crate) fn graph_nodes() -> bool {
    config().graph_nodes
}

/// RTL_AGENT_HSA_SPANS=0: no span around graph replays.
pub(crate) fn hsa_spans() -> bool {
    !config().hsa_no_spans
}

/// RTL_AGENT_HSA_COPIES=forward: DMA copies on a pool signal, their completion forwarded.
pub(crate) fn hsa_copies_forward() -> bool {
    config().hsa_copies_forward
}

// ---------------------------------------------------------------------------------------------
// ELF constructor and destructor.

extern "C" fn rtl_agent_ctor(_argc: c_int, _argv: *const *const c_char, _envp: *const *const c_char) {
    let _ = std::panic::catch_unwind(|| start::start(start::Trigger::Ctor));
}

extern "C" fn rtl_agent_dtor() {
    let _ = std::panic::catch_unwind(|| shutdown::shutdown(shutdown::Reason::Fini));
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = rtl_agent_ctor;

#[used]
#[unsafe(link_section = ".fini_array")]
static FINI: extern "C" fn() = rtl_agent_dtor;
