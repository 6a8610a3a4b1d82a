//! GPU source 2: the HSA tools interface (`HSA_TOOLS_LIB=.../librtl_agent.so`, see
//! shared/reference/hsa-tools.md), for stock ROCm without hipProfiler*Ext (every released ROCm
//! 6.x and 7.x).
//!
//! The runtime dlopens the agent during `hsa_init` (our ELF constructor runs then) and calls
//! [`OnLoad`]; at `hsa_shut_down` it calls [`OnUnload`].
//!
//! * `RTL_AGENT_GPU=clr`: loading through HSA_TOOLS_LIB is just another way into the process;
//!   the CLR source starts from the publisher thread (never from inside `hsa_init`).
//! * `RTL_AGENT_GPU=auto`: as `clr` when the loaded libamdhip64 has hipProfiler*Ext, else as `hsa`.
//! * `RTL_AGENT_GPU=hsa`: signal capture, below.
//!
//! # What is timed, and how
//! Kernel times come from a completion signal the agent owns: a signal from a lock-free pool
//! takes the place of the application's own (or is added where there was none), a completion
//! thread waits for it, reads its timestamps, forwards completion to the application's signal
//! (what the hardware would have done) and recycles it. DMA copies keep the application's
//! signal (their times are read from it: [`watch`]); barriers and replays get packets of the
//! agent's around them. What needs no forward (spans, copies) is read every 1 ms in one pass.
//! * Kernel dispatches: `hsa_queue_create` is wrapped; the queue is created with
//!   `hsa_amd_queue_intercept_create`, timestamps enabled, and a packet handler registered. The
//!   handler (on the thread that rings the doorbell, inside the launch call) rewrites the
//!   completion signal of a *single-packet* dispatch and remembers the original, the kernel
//!   object, grid/block, the OS tid and the submission time. Times: `hsa_amd_profiling_get_dispatch_time`,
//!   converted with `convert_tick_to_system_domain` and the system timestamp frequency. Names:
//!   `hsa_executable_freeze` is wrapped (symbol names, `.kd` stripped; mangled: the collector
//!   demangles). The HIP runtime's blit kernels (`__amd_rocclr_copy*`, `__amd_rocclr_fill*`:
//!   device-to-device copies, memsets, graph copy nodes) are published as the copy / memset
//!   they serve, with the kernel's name.
//! * Barrier-AND/OR packets (event records, stream waits, the runtime's copy markers and
//!   fences): their completion signal is often what other work waits for (another stream, a
//!   DMA copy), so it is never replaced (that would put the completion thread's forwarding on
//!   that path). The packet is passed on untouched between two barrier packets of ours (see
//!   graph replays), its time is from the first one's completion to the second's. Barriers
//!   without the barrier bit (ours would make them wait for what precedes them) and those
//!   inside multi-packet batches are passed on untimed and counted (`barriers_untimed`);
//!   vendor-specific packets too (`other_packets`).
//! * Async copies (DMA engines): `hsa_amd_memory_async_copy`, `..._on_engine` (ROCm 6+) and
//!   `..._rect` are wrapped ([`copy`]): the copy completes the application's own signal and
//!   `hsa_amd_profiling_get_async_copy_time` (system domain) is read from it afterwards
//!   ([`watch`]: before any reuse), where queue interception works; elsewhere the call gets a
//!   pool signal whose completion is forwarded (a negative value, a copy error, as is). Copy
//!   profiling is kept on (`hsa_amd_profiling_async_copy_enable` is wrapped too: the
//!   application's "off" is remembered, not applied). Direction from the agents (or the rect
//!   call's direction), bytes, src/dst; on the calling thread, inside the hipMemcpy*.
//! * Graph replays (batches of more than one packet): by default the batch's own packets are
//!   passed on untouched (rewriting signals inside batches breaks ROCr before 7.13: HSA error
//!   0x1009) and counted (`graph_batches_skipped`); the agent writes one barrier-AND packet with
//!   a pool signal before the batch and one after it (barrier bit: each waits for everything
//!   before it), and publishes one `OpKind::GraphExecution` op per replay, from the first
//!   barrier's completion (= when the graph's first packet can start) to the second's (= its
//!   last packet completed). `RTL_AGENT_GRAPH_NODES=1` also times every packet of the batch
//!   (`OP_IS_GRAPH`), for runtimes where that is safe (ROCm 7.13+).
//!
//! If interception is refused for a queue, that queue is created normally and it is reported
//! once. Interception is probed on the first queue: a no-op barrier packet must reach our
//! handler within 500 ms, else (a runtime whose intercept queues never deliver packets would
//! hang the application) that queue is replaced by a normal one and every later queue is left
//! alone. Every wait is bounded; at OnUnload/exit the completion thread gets 1 s to finish.
//!
//! Table offsets: [`layout`] (ROCm 5's and ROCm 6/7's AMD extension tables differ).
//!
//! Not done: graph replays of a single packet are timed as that packet (not as a span); image
//! copies; demangling (the collector does it).

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

use rtl_common::agent as wire;

use ffi::*;
use layout::core_off;
use pool::*;

mod completion;
mod copy;
mod devices;
mod ffi;
mod kernels;
pub mod layout;
mod packets;
mod pool;
mod queue;
mod watch;

pub(crate) use completion::{quiesce, reset_in_child, stop};

use crate::publish::{self, record_error};
use devices::collect_agent;
use queue::{INTERCEPT_REFUSED, PROBE, PROBE_OK};

/// System timestamp ticks per second.
static FREQ: AtomicU64 = AtomicU64::new(1_000_000_000);
/// `hsa_signal_destroy` is wrapped (a watched signal's copy times are read before it goes).
static DESTROY_WRAPPED: AtomicBool = AtomicBool::new(false);

/// DMA copies keep the application's completion signal ([`watch`]): only where every packet
/// the runtime submits passes our handler (interception probed and never refused) and signal
/// destruction is wrapped, so that no reuse of a signal goes unseen.
pub(crate) fn direct_copies() -> bool {
    PROBE.load(Acquire) == PROBE_OK && !INTERCEPT_REFUSED.load(Relaxed) && DESTROY_WRAPPED.load(Relaxed) && !crate::hsa_copies_forward()
}

unsafe extern "C" fn signal_destroy_wrapper(sig: u64) -> i32 {
    let Some(f) = FNS.get() else { return HSA_STATUS_ERROR };
    let Some(destroy) = f.signal_destroy else { return HSA_STATUS_ERROR };
    if let Some(p) = POOL_.get() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| watch::settle(f, p, sig)));
    }
    // SAFETY: the runtime's hsa_signal_destroy with the application's argument.
    unsafe { destroy(sig) }
}

// ---------------------------------------------------------------------------------------------
// Installing capture; OnLoad and OnUnload.

/// A reading of the HSA system clock in ns (for ClockSync::gpu_ns), 0 if unavailable.
pub(crate) fn system_ns() -> u64 {
    let Some(f) = FNS.get() else { return 0 };
    let mut ts: u64 = 0;
    // SAFETY: runtime function with a valid out pointer.
    if unsafe { (f.system_get_info)(SYSTEM_INFO_TIMESTAMP, &mut ts as *mut u64 as *mut c_void) } != HSA_STATUS_SUCCESS {
        return 0;
    }
    let freq = FREQ.load(Relaxed).max(1);
    ((ts as u128) * 1_000_000_000 / freq as u128) as u64
}

/// Installs signal capture into the runtime's table. Err: why not.
///
/// # Safety
/// `table` is the `HsaApiTable*` the runtime passed to OnLoad.
unsafe fn install(table: *mut u8) -> Result<(), String> {
    // SAFETY: the caller's promise: the runtime's table, during OnLoad.
    let t = unsafe { ffi::resolve(table) }?;
    let fns = t.fns;
    if FNS.set(fns).is_err() {
        return Err("installed twice".into());
    }
    let mut freq: u64 = 0;
    // SAFETY: a resolved runtime entry, with an out pointer to a u64 (the frequency's type).
    if unsafe { (fns.system_get_info)(SYSTEM_INFO_TIMESTAMP_FREQUENCY, &mut freq as *mut u64 as *mut c_void) } == HSA_STATUS_SUCCESS
        && freq > 0
    {
        FREQ.store(freq, Relaxed);
    }
    if let Some((iterate, agent_info)) = t.agents {
        // SAFETY: hsa_iterate_agents with a callback that reads `data` as hsa_agent_get_info.
        let rc = unsafe { iterate(collect_agent, agent_info as *mut c_void) };
        if rc != HSA_STATUS_SUCCESS {
            record_error(rc);
        }
    }
    let mut w = 0u64;
    // SAFETY: a resolved runtime entry, valid out pointer.
    if unsafe { (fns.signal_create)(1, 0, std::ptr::null(), &mut w) } == HSA_STATUS_SUCCESS {
        WAKE_SIG.store(w, Relaxed);
    }
    publish::buffers();
    pool();
    completion::start_completion_thread();
    // SAFETY: the runtime's core table (checked non-null by resolve), during OnLoad, entries of
    // the same signatures as the originals.
    unsafe {
        ffi::replace_entry(t.core, core_off::QUEUE_CREATE, queue::queue_create_wrapper as *const c_void);
        ffi::replace_entry(t.core, core_off::EXECUTABLE_FREEZE, kernels::freeze_wrapper as *const c_void);
        if fns.signal_destroy.is_some() {
            ffi::replace_entry(t.core, core_off::SIGNAL_DESTROY, signal_destroy_wrapper as *const c_void);
            DESTROY_WRAPPED.store(true, Relaxed);
        }
        copy::install(t.amd, &t.amd_layout);
    }
    Ok(())
}

/// What HSA capture times in this process (`Info::captures`).
pub(crate) fn captures() -> u32 {
    let mut c = wire::CAP_KERNELS | wire::CAP_MEMSETS | wire::CAP_BLIT_COPIES | wire::CAP_BARRIERS;
    if crate::hsa_spans() {
        c |= wire::CAP_GRAPH_SPANS;
    }
    if copy::WRAPPED.load(Relaxed) {
        c |= wire::CAP_COPIES;
    }
    if crate::graph_nodes() {
        c |= wire::CAP_GRAPH_NODES;
    }
    c
}

/// `bool OnLoad(HsaApiTable* table, uint64_t runtime_version, uint64_t failed_tool_count,
/// const char* const* failed_tool_names)`. Returns false (unload me) only when another copy of
/// the agent is already active in the process.
#[unsafe(no_mangle)]
pub extern "C" fn OnLoad(
    table: *mut c_void,
    _runtime_version: u64,
    _failed_tool_count: u64,
    _failed_tool_names: *const *const c_char,
) -> bool {
    std::panic::catch_unwind(|| {
        publish::INFO.mode.fetch_or(wire::MODE_HSA_TOOL, Relaxed);
        crate::start::start(crate::start::Trigger::HsaOnLoad);
        if crate::is_duplicate() {
            return false;
        }
        if crate::start::hsa_requested() {
            // SAFETY: the runtime's table, during OnLoad.
            match unsafe { install(table as *mut u8) } {
                Ok(()) => crate::start::hsa_active(),
                Err(why) => crate::start::hsa_failed(&why),
            }
        }
        true
    })
    .unwrap_or(true)
}

/// `void OnUnload(void)`: flush what is queued. The HIP runtime may be mid-teardown here, so no
/// call goes back into it; the HSA completion thread finishes in-flight dispatches (bounded).
#[unsafe(no_mangle)]
pub extern "C" fn OnUnload() {
    let _ = std::panic::catch_unwind(|| crate::shutdown::shutdown(crate::shutdown::Reason::HsaOnUnload));
}

/// Bench helper: `threads` threads each take and return a pool slot `iters` times (what the
/// packet handler and the completion thread do per dispatch); returns ns per take+return pair
/// per thread (wall time / iters).
#[doc(hidden)]
pub fn bench_pool(threads: usize, iters: usize) -> f64 {
    let p = std::sync::Arc::new(Pool::new());
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
    let t0 = std::time::Instant::now();
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let (p, b) = (p.clone(), barrier.clone());
            std::thread::spawn(move || {
                b.wait();
                for _ in 0..iters {
                    if let Some(i) = p.pop() {
                        p.in_flight.fetch_add(1, SeqCst);
                        p.push(i);
                        p.in_flight.fetch_sub(1, Release);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        let _ = h.join();
    }
    t0.elapsed().as_nanos() as f64 / iters as f64
}

#[cfg(test)]
mod tests;
