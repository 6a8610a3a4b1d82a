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
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::*};

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind, Source};

use crate::clock;
use ffi::*;
use layout::core_off;
use pool::*;

mod copy;
mod devices;
mod ffi;
pub mod layout;
mod pool;
mod watch;

use crate::publish::{self, counters, record_error};
use devices::{collect_agent, device_of};

/// System timestamp ticks per second.
static FREQ: AtomicU64 = AtomicU64::new(1_000_000_000);
static INTERCEPT_REFUSED: AtomicBool = AtomicBool::new(false);
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

/// Packets about to be submitted: a completion signal among them that still holds a watched
/// copy's times is read first (the packet will overwrite them).
///
/// # Safety
/// `pkts` holds `count` 64-byte AQL packets.
unsafe fn settle_reused(f: &Fns, p: &Pool, pkts: *const c_void, count: u64) {
    if !watch::any() {
        return;
    }
    for k in 0..count as usize {
        // SAFETY: the caller's promise; completion_signal is at byte 56 of every AQL packet.
        let sig = unsafe { std::ptr::read_unaligned((pkts as *const u8).add(k * 64 + 56) as *const u64) };
        watch::settle(f, p, sig);
    }
}

// ---------------------------------------------------------------------------------------------
// Kernel object -> name id.

const KSLOTS: usize = 1 << 13;
static KOBJ: [AtomicU64; KSLOTS] = [const { AtomicU64::new(0) }; KSLOTS];
static KNAME: [AtomicU32; KSLOTS] = [const { AtomicU32::new(0) }; KSLOTS];
/// What a kernel does, by its name: an `OpKind` (Copy / Memset for the HIP runtime's blit
/// kernels, Dispatch for the rest).
static KKIND: [AtomicU8; KSLOTS] = [const { AtomicU8::new(0) }; KSLOTS];

/// The kind of op a kernel named `name` stands for: CLR runs copies between device buffers,
/// and every fill, as its own blit kernels (`__amd_rocclr_copyBuffer`, `..._copyBufferRect`,
/// `..._fillBufferAligned`, ...): the runtime's name says which copy a dispatch serves.
pub(crate) fn kernel_kind(name: &[u8]) -> OpKind {
    if name.starts_with(b"__amd_rocclr_copy") {
        OpKind::Copy
    } else if name.starts_with(b"__amd_rocclr_fill") {
        OpKind::Memset
    } else {
        OpKind::Dispatch
    }
}

fn kname_insert(kobj: u64, id: u32, kind: OpKind) {
    for p in 0..64 {
        let i = (kobj as usize >> 6).wrapping_add(p) % KSLOTS;
        match KOBJ[i].compare_exchange(0, kobj, AcqRel, Acquire) {
            Ok(_) => {}
            Err(k) if k == kobj => {}
            Err(_) => continue,
        }
        KKIND[i].store(kind as u8, Release);
        KNAME[i].store(id, Release);
        return;
    }
    counters().strings_dropped.fetch_add(1, Relaxed);
}

/// (name id, `OpKind` as u8) of a kernel object; (0, Dispatch) when unknown.
fn kname_lookup(kobj: u64) -> (u32, u8) {
    for p in 0..64 {
        let i = (kobj as usize >> 6).wrapping_add(p) % KSLOTS;
        match KOBJ[i].load(Acquire) {
            0 => break,
            k if k == kobj => return (KNAME[i].load(Acquire), KKIND[i].load(Acquire)),
            _ => {}
        }
    }
    (0, OpKind::Dispatch as u8)
}

unsafe extern "C" fn on_symbol(_exec: u64, sym: u64, _data: *mut c_void) -> i32 {
    // SAFETY: hsa_executable_iterate_symbols' callback: `sym` is a symbol of the executable
    // being frozen; each symbol_get_info gets an out pointer of its attribute's type (u32, u64, and
    // `len + 1` bytes for the name).
    unsafe {
        let _ = std::panic::catch_unwind(|| {
            let Some(f) = FNS.get() else { return };
            let mut kind: u32 = 0;
            if (f.symbol_get_info)(sym, SYMBOL_INFO_TYPE, &mut kind as *mut u32 as *mut c_void) != HSA_STATUS_SUCCESS
                || kind != SYMBOL_KIND_KERNEL
            {
                return;
            }
            let mut kobj: u64 = 0;
            let mut len: u32 = 0;
            if (f.symbol_get_info)(sym, SYMBOL_INFO_KERNEL_OBJECT, &mut kobj as *mut u64 as *mut c_void) != HSA_STATUS_SUCCESS
                || (f.symbol_get_info)(sym, SYMBOL_INFO_NAME_LENGTH, &mut len as *mut u32 as *mut c_void) != HSA_STATUS_SUCCESS
                || kobj == 0
                || len == 0
                || len > 1 << 16
            {
                return;
            }
            let mut name = vec![0u8; len as usize + 1];
            if (f.symbol_get_info)(sym, SYMBOL_INFO_NAME, name.as_mut_ptr() as *mut c_void) != HSA_STATUS_SUCCESS {
                return;
            }
            name.truncate(len as usize);
            while name.last() == Some(&0) {
                name.pop();
            }
            if name.ends_with(b".kd") {
                name.truncate(name.len() - 3);
            }
            let id = publish::buffers().strings.intern(wire::STR_KERNEL, &name);
            kname_insert(kobj, id, kernel_kind(&name));
        });
        HSA_STATUS_SUCCESS
    }
}

unsafe extern "C" fn freeze_wrapper(exec: u64, options: *const c_char) -> i32 {
    // SAFETY: the runtime's own hsa_executable_freeze with the application's arguments, then
    // its symbol iteration over that executable with our callback.
    unsafe {
        let Some(f) = FNS.get() else { return 1 };
        let rc = (f.freeze)(exec, options);
        if rc == HSA_STATUS_SUCCESS {
            let _ = std::panic::catch_unwind(|| {
                let r = (f.iterate_symbols)(exec, on_symbol, std::ptr::null_mut());
                if r != HSA_STATUS_SUCCESS && r != HSA_STATUS_INFO_BREAK {
                    record_error(r);
                }
            });
        }
        rc
    }
}

/// Per intercepted queue: what the handler needs.
struct QueueCtx {
    agent: u64,
    queue_id: u64,
    /// The handler ran for this queue (the interception probe waits for it).
    seen: AtomicBool,
    /// The interception probe's own packet is on its way (not counted as the runtime's).
    probing: AtomicBool,
}

fn u16at(pkt: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([pkt[o], pkt[o + 1]])
}
fn u32at(pkt: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([pkt[o], pkt[o + 1], pkt[o + 2], pkt[o + 3]])
}
fn u64at(pkt: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&pkt[o..o + 8]);
    u64::from_le_bytes(b)
}

/// Points a kernel dispatch packet's completion signal at a pool signal. False: left as it was
/// (other packet types, counted; no pool slot, counted). Barriers reach this only inside
/// multi-packet batches, where they are not timed (single ones are: see `span_packets`).
fn capture(f: &Fns, p: &Pool, q: &QueueCtx, pkt: &mut [u8], is_graph: bool) -> bool {
    match u16at(pkt, 0) & 0xff {
        PACKET_TYPE_KERNEL_DISPATCH => {}
        PACKET_TYPE_BARRIER_AND | PACKET_TYPE_BARRIER_OR => {
            counters().barriers_untimed.fetch_add(1, Relaxed);
            return false;
        }
        _ => {
            counters().other_packets.fetch_add(1, Relaxed);
            return false;
        }
    }
    let Some((i, sig)) = take_slot(f, p) else { return false };
    let block = [(u16at(pkt, 4) as u32).max(1), (u16at(pkt, 6) as u32).max(1), (u16at(pkt, 8) as u32).max(1)];
    let grid_wi = [u32at(pkt, 12), u32at(pkt, 16), u32at(pkt, 20)];
    let info = InFlight {
        kind: K_DISPATCH,
        orig: u64at(pkt, 56),
        agent: q.agent,
        queue: q.queue_id as u32,
        device: device_of(q.agent),
        tid: cached_tid(),
        submit_ns: clock::monotonic_ns(),
        is_graph,
        kobj: u64at(pkt, 32),
        grid: [grid_wi[0].div_ceil(block[0]), grid_wi[1].div_ceil(block[1]), grid_wi[2].div_ceil(block[2])],
        block,
        ..Default::default()
    };
    arm(p, i, info);
    pkt[56..64].copy_from_slice(&sig.to_le_bytes());
    true
}

/// A barrier-AND packet with no dependency that completes pool signal `sig`.
fn barrier_packet(sig: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..2].copy_from_slice(&BARRIER_HEADER.to_le_bytes());
    b[56..64].copy_from_slice(&sig.to_le_bytes());
    b
}

/// The two barrier packets that time `count` packets written between them (a replay's batch:
/// `op` GraphExecution; one barrier packet of the runtime's: `op` Barrier), their slots armed
/// (K_SPAN_START, K_SPAN_END). The span is from the first one's completion (everything before
/// on the queue is done) to the second's (the packets between are done). The packets between
/// and their signals stay the runtime's own: nothing is forwarded, nothing waits for us. None:
/// no pool slots (counted).
fn span_packets(f: &Fns, p: &Pool, q: &QueueCtx, count: u64, op: OpKind) -> Option<([u8; 64], [u8; 64])> {
    let (a, sa) = take_slot(f, p)?;
    let Some((b, sb)) = take_slot(f, p) else {
        give_back(p, a);
        return None;
    };
    let base = InFlight {
        agent: q.agent,
        queue: q.queue_id as u32,
        device: device_of(q.agent),
        tid: cached_tid(),
        submit_ns: clock::monotonic_ns(),
        is_graph: op == OpKind::GraphExecution,
        span_op: op as u8,
        ..Default::default()
    };
    arm(p, a, InFlight { kind: K_SPAN_START, ..base });
    arm(p, b, InFlight { kind: K_SPAN_END, pair: a as u32, count: count.min(u32::MAX as u64) as u32, ..base });
    if op == OpKind::GraphExecution {
        counters().graph_spans.fetch_add(1, Relaxed);
    }
    Some((barrier_packet(sa), barrier_packet(sb)))
}

/// Most packets a batch may have for the opt-in per-node mode to copy and rewrite it.
const MAX_BATCH: u64 = 4096;

unsafe extern "C" fn handler(pkts: *const c_void, count: u64, _user_index: u64, data: *mut c_void, writer: Writer) {
    // SAFETY: the intercept handler's contract (hsa_amd_queue_intercept_register): `pkts` holds
    // `count` 64-byte AQL packets, `data` is the QueueCtx registered with this queue (never freed),
    // `writer` the runtime's packet writer, called with packets of ours or the application's.
    unsafe {
        // Whatever happens, the application's packets are handed on exactly once: `wrote` is set
        // just before the first call to `writer`, after which nothing can fail.
        let wrote = std::cell::Cell::new(false);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if data.is_null() || count == 0 {
                return;
            }
            let q = &*(data as *const QueueCtx);
            if count == 1 && q.probing.swap(false, AcqRel) {
                q.seen.store(true, Release);
                return; // our probe packet: passed on as it is
            }
            q.seen.store(true, Release);
            let (Some(f), Some(p)) = (FNS.get(), POOL_.get()) else { return };
            settle_reused(f, p, pkts, count);
            // A dispatch was captured: its completion is to be forwarded (spans need no wake-up).
            let mut forward = false;
            if count == 1 {
                let mut pkt = [0u8; 64];
                std::ptr::copy_nonoverlapping(pkts as *const u8, pkt.as_mut_ptr(), 64);
                let header = u16at(&pkt, 0);
                if matches!(header & 0xff, PACKET_TYPE_BARRIER_AND | PACKET_TYPE_BARRIER_OR) {
                    // An event record, stream wait or the runtime's marker: timed by two barriers
                    // of ours around it, its own signal untouched (others may wait on it: no
                    // forwarding hop on their path). Without the barrier bit it does not wait for
                    // what precedes it, and ours would make it: passed on untimed.
                    if header & (1 << 8) == 0 {
                        counters().barriers_untimed.fetch_add(1, Relaxed);
                        return;
                    }
                    let Some((before, after)) = span_packets(f, p, q, 1, OpKind::Barrier) else { return };
                    wrote.set(true);
                    writer(before.as_ptr() as *const c_void, 1);
                    writer(pkts, 1);
                    writer(after.as_ptr() as *const c_void, 1);
                } else {
                    if !capture(f, p, q, &mut pkt, false) {
                        return;
                    }
                    forward = true;
                    wrote.set(true);
                    writer(pkt.as_ptr() as *const c_void, 1);
                }
            } else {
                // A multi-packet batch (graph replay). Its packets are the graph's: left alone
                // unless RTL_AGENT_GRAPH_NODES=1 (rewriting completion signals inside batches breaks
                // ROCr before 7.13, 0x1009). The replay is timed by two barriers of our own.
                let mut nodes: Option<Vec<u8>> = None;
                if crate::graph_nodes() && count <= MAX_BATCH {
                    let mut copy = vec![0u8; count as usize * 64];
                    std::ptr::copy_nonoverlapping(pkts as *const u8, copy.as_mut_ptr(), copy.len());
                    for pkt in copy.chunks_exact_mut(64) {
                        forward |= capture(f, p, q, pkt, true);
                    }
                    nodes = Some(copy);
                } else {
                    counters().graph_batches_skipped.fetch_add(1, Relaxed);
                }
                let span = if crate::hsa_spans() { span_packets(f, p, q, count, OpKind::GraphExecution) } else { None };
                if span.is_none() && nodes.is_none() {
                    return;
                }
                let batch = nodes.as_ref().map_or(pkts, |v| v.as_ptr() as *const c_void);
                wrote.set(true);
                if let Some((before, after)) = &span {
                    writer(before.as_ptr() as *const c_void, 1);
                    writer(batch, count);
                    writer(after.as_ptr() as *const c_void, 1);
                } else {
                    writer(batch, count);
                }
            }
            if forward && SLEEPING.load(SeqCst) {
                kick_completion();
            }
        }));
        if !wrote.get() {
            writer(pkts, count);
        }
    }
}

unsafe extern "C" fn queue_create_wrapper(
    agent: u64,
    size: u32,
    qtype: u32,
    callback: QueueCallback,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut c_void,
) -> i32 {
    // SAFETY: the application's hsa_queue_create arguments, passed to the runtime's entries of
    // the same signature; `*queue` is read only after the runtime created it (hsa_queue_t: `id` at
    // QUEUE_ID_OFF); the QueueCtx lives as long as the queue (leaked on purpose).
    unsafe {
        let Some(f) = FNS.get() else { return 1 };
        if PROBE.load(Acquire) == PROBE_BROKEN {
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        let rc = (f.intercept_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        if rc != HSA_STATUS_SUCCESS || queue.is_null() || (*queue).is_null() {
            refused(rc);
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        let q = *queue;
        let rc = (f.set_profiler)(q, 1);
        if rc != HSA_STATUS_SUCCESS {
            record_error(rc);
        }
        let ctx = Box::into_raw(Box::new(QueueCtx {
            agent,
            queue_id: std::ptr::read_unaligned((q as *const u8).add(QUEUE_ID_OFF) as *const u64),
            seen: AtomicBool::new(false),
            probing: AtomicBool::new(false),
        }));
        let rc = (f.intercept_register)(q, handler, ctx as *mut c_void);
        if rc != HSA_STATUS_SUCCESS {
            // An intercept queue without our handler still passes packets through.
            refused(rc);
            drop(Box::from_raw(ctx));
            return HSA_STATUS_SUCCESS;
        }
        if !probe_ok(f, q, &*ctx) {
            // Interception is broken here (packets never come out): replace the queue by a
            // normal one before the application puts anything into it.
            let rc = (f.queue_destroy)(q);
            if rc != HSA_STATUS_SUCCESS {
                record_error(rc);
            }
            *queue = std::ptr::null_mut();
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        HSA_STATUS_SUCCESS
    }
}

const PROBE_UNKNOWN: u8 = 0;
const PROBE_RUNNING: u8 = 1;
const PROBE_OK: u8 = 2;
const PROBE_BROKEN: u8 = 3;
static PROBE: AtomicU8 = AtomicU8::new(PROBE_UNKNOWN);
/// How long the first intercept queue gets to hand a probe packet to our handler.
const PROBE_WAIT_MS: u64 = 500;

/// On the first intercept queue: submit a no-op barrier-AND packet and wait (bounded) for the
/// handler to see it. On one MI300X ROCm 7.2.1 setup intercept queues never delivered packets,
/// which hangs the application at its first wait; then every queue is created normally.
unsafe fn probe_ok(f: &Fns, q: *mut c_void, ctx: &QueueCtx) -> bool {
    // SAFETY: the caller's promise: `q` is a live intercept queue (hsa_queue_t: base_address at 8,
    // doorbell_signal at 16, size at 24) whose handler has `ctx`; the slot written is the one
    // add_write_index reserved for us.
    unsafe {
        match PROBE.compare_exchange(PROBE_UNKNOWN, PROBE_RUNNING, AcqRel, Acquire) {
            Ok(_) => {}
            Err(PROBE_OK) => return true,
            Err(PROBE_BROKEN) => return false,
            Err(_) => {
                // Another thread is probing: wait for its verdict (bounded).
                let t0 = clock::monotonic_ns();
                while PROBE.load(Acquire) == PROBE_RUNNING && clock::monotonic_ns() - t0 < 2 * PROBE_WAIT_MS * 1_000_000 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                return PROBE.load(Acquire) != PROBE_BROKEN;
            }
        }
        let qb = q as *const u8;
        let base = std::ptr::read_unaligned(qb.add(8) as *const *mut u8);
        let doorbell = std::ptr::read_unaligned(qb.add(16) as *const u64);
        let size = std::ptr::read_unaligned(qb.add(24) as *const u32) as u64;
        let ok = if base.is_null() || size == 0 || doorbell == 0 {
            true // cannot probe; assume it works
        } else {
            let wi = (f.add_write_index)(q, 1);
            let slot = base.add(((wi % size) * 64) as usize);
            std::ptr::write_bytes(slot.add(2), 0, 62);
            // barrier-AND, barrier bit, system-scope acquire and release fences; no dependencies,
            // no completion signal: a no-op the packet processor retires at once.
            ctx.probing.store(true, Release);
            (*(slot as *const std::sync::atomic::AtomicU16)).store(BARRIER_HEADER, Release);
            (f.signal_store_release)(doorbell, wi as i64);
            let t0 = clock::monotonic_ns();
            while !ctx.seen.load(Acquire) && clock::monotonic_ns() - t0 < PROBE_WAIT_MS * 1_000_000 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            ctx.seen.load(Acquire)
        };
        PROBE.store(if ok { PROBE_OK } else { PROBE_BROKEN }, Release);
        if !ok {
            counters().api_errors.fetch_add(1, Relaxed);
            crate::say(&format!(
                "HSA queue interception does not deliver packets here (no probe packet within {PROBE_WAIT_MS} ms): \
             queues are left alone: no kernel, barrier or graph times (DMA-engine copies are still timed); \
             the CPU-side trace is complete"
            ));
        }
        ok
    }
}

fn refused(rc: i32) {
    record_error(rc);
    if !INTERCEPT_REFUSED.swap(true, Relaxed) {
        crate::say(&format!(
            "HSA queue interception is not supported here (hsa_status_t {rc:#x}): queues are left alone, \
             no kernel, barrier or graph times (DMA-engine copies are still timed); the CPU-side trace is complete"
        ));
    }
}

// ---------------------------------------------------------------------------------------------
// Completion thread.

static STOP: AtomicU32 = AtomicU32::new(0);
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Most signals one wait covers (the rest are seen at the next scan).
const WAIT_MAX: usize = 63;

/// System-domain ticks to ns.
fn sys_to_ns(sys: u64) -> u64 {
    let freq = FREQ.load(Relaxed).max(1);
    if freq == 1_000_000_000 {
        sys
    } else {
        ((sys as u128) * 1_000_000_000 / freq as u128) as u64
    }
}

/// Packet timestamps of pool signal `sig` (agent `agent`'s ticks) in ns of the system domain.
fn dispatch_ns(f: &Fns, agent: u64, sig: u64) -> Result<[u64; 2], i32> {
    let mut t = [0u64; 2];
    // SAFETY: runtime functions with valid arguments.
    let rc = unsafe { (f.dispatch_time)(agent, sig, &mut t) };
    if rc != HSA_STATUS_SUCCESS {
        return Err(rc);
    }
    Ok(t.map(|tick| {
        let mut sys = tick;
        // SAFETY: as above.
        if unsafe { (f.convert_tick)(agent, tick, &mut sys) } != HSA_STATUS_SUCCESS {
            sys = tick;
        }
        sys_to_ns(sys)
    }))
}

/// Hands a pool slot back once its op is queued (in_flight going down is what quiesce() waits
/// for, so a shutdown that saw 0 publishes it).
fn release(f: &Fns, p: &Pool, i: usize) {
    let slot = &p.slots[i];
    // SAFETY: our pool signal, back to 1 for its next use.
    unsafe { (f.signal_store)(slot.sig.load(Relaxed), 1) };
    slot.state.store(0, Release);
    p.push(i);
    p.in_flight.fetch_sub(1, Release);
}

fn complete(f: &Fns, p: &Pool, i: usize) {
    let slot = &p.slots[i];
    // SAFETY: state 1 (Acquire) published `info`.
    let info = unsafe { *slot.info.get() };
    let sig = slot.sig.load(Relaxed);
    // The times first (the signal is reset on release), then completion is forwarded at once:
    // the application may be waiting on it.
    let (times, op_kind, copy_kind, kernel_name_id, pair) = match info.kind {
        K_COPY_DIRECT => {
            if info.times == [0, 0] {
                // Its signal was reused before the copy was done (counted by watch).
                release(f, p, i);
                return;
            }
            (Ok(info.times.map(sys_to_ns)), OpKind::Copy, info.copy_kind, 0, None)
        }
        K_COPY => {
            // SAFETY: our pool signal.
            let v = unsafe { (f.signal_load)(sig) };
            let mut t = [0u64; 2];
            // SAFETY: runtime function with valid arguments.
            let rc = unsafe { (f.copy_time)(sig, &mut t) };
            if info.orig != 0 {
                // SAFETY: the application's signal: decremented as the copy engine would have,
                // or set to the engine's negative error value.
                unsafe {
                    if v < 0 {
                        (f.signal_store)(info.orig, v)
                    } else {
                        (f.signal_subtract)(info.orig, 1)
                    }
                }
            }
            let times = if rc == HSA_STATUS_SUCCESS { Ok(t.map(sys_to_ns)) } else { Err(rc) };
            (times, OpKind::Copy, info.copy_kind, 0, None)
        }
        K_SPAN_END => {
            let a = info.pair as usize;
            let start = dispatch_ns(f, info.agent, p.slots[a].sig.load(Relaxed));
            let end = dispatch_ns(f, info.agent, sig);
            let times = match (start, end) {
                (Ok(s), Ok(e)) => Ok([s[1], e[1]]),
                (Err(rc), _) | (_, Err(rc)) => Err(rc),
            };
            (times, OpKind::from_u8(info.span_op).unwrap_or(OpKind::GraphExecution), 0, 0, Some(a))
        }
        _ => {
            let times = dispatch_ns(f, info.agent, sig);
            if info.orig != 0 {
                // SAFETY: the application's signal, decremented as the packet processor would have.
                unsafe { (f.signal_subtract)(info.orig, 1) };
            }
            let (name, kind) = kname_lookup(info.kobj);
            let kind = OpKind::from_u8(kind).unwrap_or(OpKind::Dispatch);
            let ck = if kind == OpKind::Memset { 12 } else { 0 };
            (times, kind, ck, name, None)
        }
    };
    match times {
        Err(rc) => record_error(rc),
        Ok([begin, end]) => {
            let op = GpuOp {
                source: Source::Hsa as u8,
                op: op_kind as u8,
                copy_kind,
                flags: wire::OP_TID_KNOWN | wire::OP_SUBMIT_TIME | if info.is_graph { wire::OP_IS_GRAPH } else { 0 },
                cpu_clock: ClockDomain::Monotonic as u8,
                gpu_clock: ClockDomain::HsaSystem as u8,
                device: info.device,
                queue: info.queue,
                tid: info.tid,
                cpu_start_ns: info.submit_ns,
                cpu_end_ns: info.submit_ns,
                gpu_begin_ns: begin,
                gpu_end_ns: end,
                grid: info.grid,
                block: info.block,
                bytes: info.bytes,
                src: info.src,
                dst: info.dst,
                kernel_name_id,
                op_count: if op_kind == OpKind::GraphExecution { info.count } else { 1 },
                ..Default::default()
            };
            counters().records_seen.fetch_add(1, Relaxed);
            publish::emit(&op, true);
        }
    }
    if let Some(a) = pair {
        release(f, p, a);
    }
    release(f, p, i);
}

fn completion_main() {
    let Some(f) = FNS.get().copied() else { return };
    let p = pool();
    let mut stop_at: Option<u64> = None;
    let mut pending: Vec<u64> = Vec::with_capacity(WAIT_MAX + 1);
    loop {
        if STOP.load(Acquire) != 0 && stop_at.is_none() {
            stop_at = Some(clock::monotonic_ns() + 1_000_000_000);
        }
        let mut found = 0;
        let armed = p.armed.load(SeqCst);
        let armed_forward = p.armed_forward.load(SeqCst);
        pending.clear();
        let mut forwards = false;
        for i in 0..p.high.load(Relaxed) {
            let slot = &p.slots[i];
            let state = slot.state.load(Acquire);
            if state == watch::TIMED {
                // A direct copy whose signal was about to be reused: settled by that thread.
                complete(&f, p, i);
                found += 1;
                continue;
            }
            if state != 1 {
                continue;
            }
            // SAFETY: state 1 (Acquire) published `info`.
            let (kind, orig) = unsafe { ((*slot.info.get()).kind, (*slot.info.get()).orig) };
            if kind == K_SPAN_START {
                continue; // completed with its K_SPAN_END
            }
            if kind == K_COPY_DIRECT {
                // Not done yet: its times are read at a later look (nothing waits for it).
                if watch::poll(&f, p, i) {
                    complete(&f, p, i);
                    found += 1;
                }
                continue;
            }
            let sig = slot.sig.load(Relaxed);
            // SAFETY: our pool signal.
            if unsafe { (f.signal_load)(sig) } <= 0 {
                complete(&f, p, i);
                found += 1;
            } else if orig != 0 {
                // Forwarding is due when it completes: wait for it.
                forwards = true;
                if pending.len() < WAIT_MAX {
                    pending.push(sig);
                }
            }
            // Else a span (nothing to forward): read with the others at the next look.
        }
        // Publish from here after the agent's shutdown, and whenever the GPU goes idle (a
        // process may end right after its last synchronisation, e.g. with `_exit`).
        if found > 0 && (publish::SHUTTING_DOWN.load(Acquire) || p.in_flight.load(Relaxed) == 0) {
            publish::publish_queued(0);
        }
        if let Some(t) = stop_at {
            if p.in_flight.load(Relaxed) == 0 || clock::monotonic_ns() > t {
                break;
            }
        }
        // Waits: with a forward due, as soon as one of those signals completes. Without (only
        // spans and direct copies in flight: their times can wait), every 1 ms, whatever
        // completed meanwhile read in one pass: no wake-up per op.
        if found == 0 || !forwards {
            if p.in_flight.load(Relaxed) == 0 {
                let w = WAKE.load(Acquire);
                SLEEPING.store(true, SeqCst);
                if p.in_flight.load(SeqCst) == 0 && STOP.load(Acquire) == 0 {
                    crate::futex_wait(&WAKE, w, 20);
                }
                SLEEPING.store(false, SeqCst);
            } else if let (Some(wait_any), w, true) = (f.wait_any, WAKE_SIG.load(Relaxed), forwards) {
                // Block in the runtime (bounded: 200 us; slots armed meanwhile are not in the
                // set) until any of them completes, or a copy is armed (WAKE_SIG); then rescan
                // everything. Completion is forwarded within microseconds.
                let timeout = (200_000 * FREQ.load(Relaxed) / 1_000_000_000).max(1);
                if w != 0 {
                    pending.push(w);
                }
                let n = pending.len();
                let (conds, vals) = ([SIGNAL_CONDITION_LT; WAIT_MAX + 1], [1i64; WAIT_MAX + 1]);
                BLOCKED.store(true, SeqCst);
                // A slot armed since the scan is not in the set: scan again instead.
                if p.armed.load(SeqCst) == armed {
                    let mut v = 0i64;
                    // SAFETY: n <= WAIT_MAX + 1 signals of ours, conditions and values alike.
                    unsafe { wait_any(n as u32, pending.as_ptr(), conds.as_ptr(), vals.as_ptr(), timeout, WAIT_STATE_BLOCKED, &mut v) };
                }
                BLOCKED.store(false, SeqCst);
                if WOKEN.load(Acquire) {
                    // SAFETY: our wake signal, armed again before anyone may set it.
                    unsafe { (f.signal_store)(w, 1) };
                    WOKEN.store(false, Release);
                }
            } else if let Some(&sig) = pending.first() {
                // No hsa_amd_signal_wait_any: block on one of them (bounded: 200 us).
                let timeout = 200_000 * FREQ.load(Relaxed) / 1_000_000_000;
                // SAFETY: our pool signal; LT 1 = completed.
                unsafe { (f.signal_wait)(sig, SIGNAL_CONDITION_LT, 1, timeout.max(1), WAIT_STATE_BLOCKED) };
            } else {
                // Nothing to forward (spans, direct copies): look again in 1 ms. A dispatch or a
                // forwarded copy submitted meanwhile kicks WAKE (SLEEPING), or changed `armed`.
                let w = WAKE.load(Acquire);
                SLEEPING.store(true, SeqCst);
                if p.armed_forward.load(SeqCst) == armed_forward && STOP.load(Acquire) == 0 {
                    crate::futex_wait(&WAKE, w, 1);
                }
                SLEEPING.store(false, SeqCst);
            }
        }
    }
}

fn start_completion_thread() {
    RUNNING.store(true, Release);
    let r = crate::spawn_blocking_signals("rtl-agent-hsa", || {
        let _ = std::panic::catch_unwind(completion_main);
        RUNNING.store(false, Release);
    });
    if r.is_err() {
        RUNNING.store(false, Release);
    }
}

/// Stops the completion thread (it finishes in-flight dispatches for up to 1 s).
pub(crate) fn stop() {
    if !RUNNING.load(Acquire) {
        return;
    }
    STOP.store(1, Release);
    kick_completion();
    let t0 = clock::monotonic_ns();
    while RUNNING.load(Acquire) && clock::monotonic_ns() - t0 < 1_500_000_000 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A forked child: the completion thread is the parent's (gone here) and so are the in-flight
/// dispatches; nothing to wait for at exit.
pub(crate) fn reset_in_child() {
    RUNNING.store(false, Relaxed);
}

/// Waits (at most `ms`) until no dispatch is in flight.
pub(crate) fn quiesce(ms: u64) {
    let Some(p) = POOL_.get() else { return };
    if !RUNNING.load(Acquire) {
        return;
    }
    let t0 = clock::monotonic_ns();
    while p.in_flight.load(Relaxed) > 0 && clock::monotonic_ns() - t0 < ms * 1_000_000 {
        kick_completion();
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

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
    start_completion_thread();
    // SAFETY: the runtime's core table (checked non-null by resolve), during OnLoad, entries of
    // the same signatures as the originals.
    unsafe {
        ffi::replace_entry(t.core, core_off::QUEUE_CREATE, queue_create_wrapper as *const c_void);
        ffi::replace_entry(t.core, core_off::EXECUTABLE_FREEZE, freeze_wrapper as *const c_void);
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
        crate::start(crate::Trigger::HsaOnLoad);
        if crate::is_duplicate() {
            return false;
        }
        if crate::hsa_requested() {
            // SAFETY: the runtime's table, during OnLoad.
            match unsafe { install(table as *mut u8) } {
                Ok(()) => crate::hsa_active(),
                Err(why) => crate::hsa_failed(&why),
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
    let _ = std::panic::catch_unwind(|| crate::shutdown(crate::Reason::HsaOnUnload));
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
