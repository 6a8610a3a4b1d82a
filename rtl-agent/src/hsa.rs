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
//! Every time comes from a completion signal the agent owns: a signal from a lock-free pool
//! takes the place of the application's own (or is added where there was none), a completion
//! thread waits for it, reads its timestamps, forwards completion to the application's signal
//! (what the hardware would have done) and recycles it.
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
//!   `..._rect` are wrapped: the call gets a pool signal as its completion signal, copy
//!   profiling is kept on (`hsa_amd_profiling_async_copy_enable` is wrapped too: the
//!   application's "off" is remembered, not applied), and the completion thread reads
//!   `hsa_amd_profiling_get_async_copy_time` (system domain). Direction from the agents (or the
//!   rect call's direction), bytes, src/dst; on the calling thread, inside the hipMemcpy*.
//!   A negative value (copy error) is forwarded as is.
//! * Graph replays (batches of more than one packet): by default the batch's own packets are
//!   passed on untouched (rewriting signals inside batches breaks ROCr before 7.13: HSA error
//!   0x1009) and counted (`graph_batches_skipped`); the agent writes one barrier-AND packet with
//!   a pool signal before the batch and one after it (barrier bit: each waits for everything
//!   before it), and publishes one `OpKind::GraphExecution` op per replay, from the first
//!   barrier's completion (= when the graph's first packet can start) to the second's (= its
//!   last packet completed). `RTL_AGENT_HSA_BATCHES=1` also times every packet of the batch
//!   (`OP_IS_GRAPH`), for runtimes where that is safe (ROCm 7.13+).
//!
//! If interception is refused for a queue, that queue is created normally and it is reported
//! once. Interception is probed on the first queue: a no-op barrier packet must reach our
//! handler within 500 ms, else (a runtime whose intercept queues never deliver packets would
//! hang the application) that queue is replaced by a normal one and every later queue is left
//! alone. Every wait is bounded; at OnUnload/exit the completion thread gets 1 s to finish.
//!
//! Table offsets: [`crate::hsa_layout`] (ROCm 5's and ROCm 6/7's AMD extension tables differ).
//!
//! Not done: graph replays of a single packet are timed as that packet (not as a span); image
//! copies; demangling (the collector does it).

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind, Source};

use crate::clock;
use crate::hsa_layout::{self as layout, core_off, AmdLayout};
use crate::publish::{self, counters, record_error};

// ---------------------------------------------------------------------------------------------
// Table layout: crate::hsa_layout.

const ROOT_CORE: usize = 16;
const ROOT_AMD: usize = 24;

pub(crate) const HSA_STATUS_SUCCESS: i32 = 0;
pub(crate) const HSA_STATUS_ERROR: i32 = 0x1000;

const HSA_STATUS_INFO_BREAK: i32 = 1;
const SYSTEM_INFO_TIMESTAMP: u32 = 2;
const SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;
const AGENT_INFO_DEVICE: u32 = 17;
const DEVICE_TYPE_GPU: u32 = 1;
const SYMBOL_INFO_TYPE: u32 = 0;
const SYMBOL_INFO_NAME_LENGTH: u32 = 1;
const SYMBOL_INFO_NAME: u32 = 2;
const SYMBOL_INFO_KERNEL_OBJECT: u32 = 22;
const SYMBOL_KIND_KERNEL: u32 = 1;
const PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
const PACKET_TYPE_BARRIER_AND: u16 = 3;
const PACKET_TYPE_BARRIER_OR: u16 = 5;
/// Header of the barrier-AND packets the agent writes: barrier bit (waits for every earlier
/// packet of the queue), system-scope acquire and release fences.
const BARRIER_HEADER: u16 = 3 | (1 << 8) | (2 << 9) | (2 << 11);
/// Offset of `hsa_queue_t::id`.
const QUEUE_ID_OFF: usize = 32;

type QueueCallback = Option<unsafe extern "C" fn(i32, *mut c_void, *mut c_void)>;
type QueueCreateFn = unsafe extern "C" fn(u64, u32, u32, QueueCallback, *mut c_void, u32, u32, *mut *mut c_void) -> i32;
type Writer = unsafe extern "C" fn(*const c_void, u64);
type Handler = unsafe extern "C" fn(*const c_void, u64, u64, *mut c_void, Writer);
type InterceptRegisterFn = unsafe extern "C" fn(*mut c_void, Handler, *mut c_void) -> i32;
type SetProfilerFn = unsafe extern "C" fn(*mut c_void, i32) -> i32;
type DispatchTimeFn = unsafe extern "C" fn(u64, u64, *mut [u64; 2]) -> i32;
type ConvertTickFn = unsafe extern "C" fn(u64, u64, *mut u64) -> i32;
type SystemGetInfoFn = unsafe extern "C" fn(u32, *mut c_void) -> i32;
type IterateAgentsFn = unsafe extern "C" fn(unsafe extern "C" fn(u64, *mut c_void) -> i32, *mut c_void) -> i32;
type AgentGetInfoFn = unsafe extern "C" fn(u64, u32, *mut c_void) -> i32;
type SignalCreateFn = unsafe extern "C" fn(i64, u32, *const u64, *mut u64) -> i32;
type SignalLoadFn = unsafe extern "C" fn(u64) -> i64;
type SignalStoreFn = unsafe extern "C" fn(u64, i64);
type QueueDestroyFn = unsafe extern "C" fn(*mut c_void) -> i32;
type AddWriteIndexFn = unsafe extern "C" fn(*mut c_void, u64) -> u64;
type SignalWaitFn = unsafe extern "C" fn(u64, u32, i64, u64, u32) -> i64;
type FreezeFn = unsafe extern "C" fn(u64, *const c_char) -> i32;
type SymbolGetInfoFn = unsafe extern "C" fn(u64, u32, *mut c_void) -> i32;
type IterateSymbolsFn = unsafe extern "C" fn(u64, unsafe extern "C" fn(u64, u64, *mut c_void) -> i32, *mut c_void) -> i32;
/// `hsa_amd_profiling_get_async_copy_time(signal, &{start, end})`.
type CopyTimeFn = unsafe extern "C" fn(u64, *mut [u64; 2]) -> i32;
/// `hsa_amd_signal_wait_any(count, signals, conds, values, timeout_hint, wait_hint, &value)`.
type WaitAnyFn = unsafe extern "C" fn(u32, *const u64, *const u32, *const i64, u64, u32, *mut i64) -> u32;

/// The runtime's original entries we call.
#[derive(Clone, Copy)]
pub(crate) struct Fns {
    queue_create: QueueCreateFn,
    intercept_create: QueueCreateFn,
    intercept_register: InterceptRegisterFn,
    set_profiler: SetProfilerFn,
    dispatch_time: DispatchTimeFn,
    convert_tick: ConvertTickFn,
    system_get_info: SystemGetInfoFn,
    signal_create: SignalCreateFn,
    pub(crate) signal_load: SignalLoadFn,
    pub(crate) signal_store: SignalStoreFn,
    pub(crate) signal_subtract: SignalStoreFn,
    signal_wait: SignalWaitFn,
    signal_store_release: SignalStoreFn,
    queue_destroy: QueueDestroyFn,
    add_write_index: AddWriteIndexFn,
    freeze: FreezeFn,
    symbol_get_info: SymbolGetInfoFn,
    iterate_symbols: IterateSymbolsFn,
    copy_time: CopyTimeFn,
    wait_any: Option<WaitAnyFn>,
}

pub(crate) static FNS: std::sync::OnceLock<Fns> = std::sync::OnceLock::new();
/// System timestamp ticks per second.
static FREQ: AtomicU64 = AtomicU64::new(1_000_000_000);
static INTERCEPT_REFUSED: AtomicBool = AtomicBool::new(false);

// ---------------------------------------------------------------------------------------------
// GPU agents (HIP device ordinal = index among GPU agents).

const MAX_AGENTS: usize = 64;
static AGENTS: [AtomicU64; MAX_AGENTS] = [const { AtomicU64::new(0) }; MAX_AGENTS];
static N_AGENTS: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn collect_agent(agent: u64, data: *mut c_void) -> i32 {
    let get: AgentGetInfoFn = std::mem::transmute(data);
    let mut dev: u32 = 0;
    if get(agent, AGENT_INFO_DEVICE, &mut dev as *mut u32 as *mut c_void) == HSA_STATUS_SUCCESS && dev == DEVICE_TYPE_GPU {
        let n = N_AGENTS.load(Relaxed);
        if n < MAX_AGENTS {
            AGENTS[n].store(agent, Relaxed);
            N_AGENTS.store(n + 1, Relaxed);
        }
    }
    HSA_STATUS_SUCCESS
}

/// HIP device ordinal of a GPU agent; 0xffff for the CPU agent / unknown.
pub(crate) fn device_of(agent: u64) -> u32 {
    (0..N_AGENTS.load(Relaxed)).find(|&i| AGENTS[i].load(Relaxed) == agent).unwrap_or(0xffff) as u32
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

unsafe extern "C" fn freeze_wrapper(exec: u64, options: *const c_char) -> i32 {
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

// ---------------------------------------------------------------------------------------------
// The signal pool: a lock-free free list (tagged Treiber stack) of slots, each owning one pool
// signal created on first use.

const POOL: usize = 4096;

pub(crate) struct Slot {
    sig: AtomicU64,
    state: AtomicU8,
    info: UnsafeCell<InFlight>,
}

/// What a pool signal stands in for (`InFlight::kind`).
pub(crate) const K_DISPATCH: u8 = 0;
pub(crate) const K_COPY: u8 = 2;
/// Our barrier before the packets a span times (a replay's batch, or one barrier packet of the
/// runtime's): completed together with its K_SPAN_END, never alone.
pub(crate) const K_SPAN_START: u8 = 3;
/// Our barrier after them; `pair` is its K_SPAN_START slot, `span_op` what the span is.
pub(crate) const K_SPAN_END: u8 = 4;

#[derive(Clone, Copy, Default)]
pub(crate) struct InFlight {
    pub kind: u8,
    /// The application's completion signal, forwarded to on completion (0: none).
    pub orig: u64,
    /// The agent whose clock the times are on (dispatch/barrier: the queue's GPU).
    pub agent: u64,
    pub kobj: u64,
    /// `GpuOp::queue`: the HSA queue id, or `wire::QUEUE_DMA..` for engine copies.
    pub queue: u32,
    pub device: u32,
    pub tid: u32,
    pub submit_ns: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub is_graph: bool,
    pub copy_kind: u8,
    pub bytes: u64,
    pub src: u64,
    pub dst: u64,
    pub pair: u32,
    /// Packets of a replay's batch (K_SPAN_END).
    pub count: u32,
    /// K_SPAN_END: the `OpKind` published (GraphExecution or Barrier).
    pub span_op: u8,
}

pub(crate) struct Pool {
    slots: Box<[Slot]>,
    next: Box<[AtomicU32]>,
    /// (tag << 32) | (index + 1); 0 = empty.
    head: AtomicU64,
    in_flight: AtomicUsize,
    /// Slots armed so far (the completion thread sees whether one was armed while it scanned).
    armed: AtomicU64,
    /// One past the highest slot index ever handed out (the completion thread scans below it).
    high: AtomicUsize,
}

// SAFETY: a slot's `info` is written by the thread that popped it from the free list before
// `state = 1` (Release) and read by the completion thread after an Acquire load of 1.
unsafe impl Sync for Pool {}

impl Pool {
    fn new() -> Pool {
        let slots = (0..POOL)
            .map(|_| Slot { sig: AtomicU64::new(0), state: AtomicU8::new(0), info: UnsafeCell::new(InFlight::default()) })
            .collect();
        let next = (0..POOL).map(|i| AtomicU32::new(if i + 1 < POOL { i as u32 + 2 } else { 0 })).collect();
        Pool { slots, next, head: AtomicU64::new(1), in_flight: AtomicUsize::new(0), armed: AtomicU64::new(0), high: AtomicUsize::new(0) }
    }
    fn pop(&self) -> Option<usize> {
        let mut h = self.head.load(Acquire);
        loop {
            let idx = (h & 0xffff_ffff) as u32;
            if idx == 0 {
                return None;
            }
            let nxt = self.next[idx as usize - 1].load(Relaxed) as u64;
            let new = ((h >> 32).wrapping_add(1) << 32) | nxt;
            match self.head.compare_exchange_weak(h, new, AcqRel, Acquire) {
                Ok(_) => return Some(idx as usize - 1),
                Err(x) => h = x,
            }
        }
    }
    fn push(&self, i: usize) {
        let mut h = self.head.load(Acquire);
        loop {
            self.next[i].store((h & 0xffff_ffff) as u32, Relaxed);
            let new = ((h >> 32).wrapping_add(1) << 32) | (i as u64 + 1);
            match self.head.compare_exchange_weak(h, new, AcqRel, Acquire) {
                Ok(_) => return,
                Err(x) => h = x,
            }
        }
    }
}

static POOL_: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
fn pool() -> &'static Pool {
    POOL_.get_or_init(Pool::new)
}
pub(crate) fn pool_if_ready() -> Option<&'static Pool> {
    POOL_.get()
}

/// Takes a free slot and its signal (created on first use, value 1). None: the pool is empty
/// (counted as a drop) or the signal could not be created.
pub(crate) fn take_slot(f: &Fns, p: &Pool) -> Option<(usize, u64)> {
    let Some(i) = p.pop() else {
        counters().dropped_queue_full.fetch_add(1, Relaxed);
        return None;
    };
    let slot = &p.slots[i];
    let sig = slot.sig.load(Relaxed);
    if sig != 0 {
        return Some((i, sig));
    }
    let mut s = 0u64;
    // SAFETY: runtime function, valid out pointer.
    let rc = unsafe { (f.signal_create)(1, 0, std::ptr::null(), &mut s) };
    if rc != HSA_STATUS_SUCCESS || s == 0 {
        record_error(rc);
        p.push(i);
        return None;
    }
    slot.sig.store(s, Relaxed);
    Some((i, s))
}

/// Puts a taken slot in flight with `info` (the completion thread watches it from now on).
pub(crate) fn arm(p: &Pool, i: usize, info: InFlight) {
    let slot = &p.slots[i];
    // SAFETY: the slot was popped by this thread and is not in flight: nobody else reads info.
    unsafe { *slot.info.get() = info };
    slot.state.store(1, Release);
    p.in_flight.fetch_add(1, SeqCst);
    p.high.fetch_max(i + 1, Relaxed);
    p.armed.fetch_add(1, SeqCst);
    // A copy's completion signal is often what other work waits for (the runtime's fence that
    // keeps the stream in order behind it): if the completion thread is blocked on signals that
    // do not include this one, wake it (once per wait) so the forward is not late. Dispatches do
    // not pay for this.
    // While only spans are in flight (nothing to forward) the thread waits long; then a new
    // dispatch wakes it too (its completion must be forwarded). A new span need not: it is
    // picked up at the next wake-up (on one queue, when the previous span completes).
    let wake = info.kind == K_COPY || (info.kind == K_DISPATCH && LONG_WAIT.load(SeqCst));
    if wake && BLOCKED.load(SeqCst) && !WOKEN.swap(true, AcqRel) {
        let w = WAKE_SIG.load(Relaxed);
        if let (Some(f), true) = (FNS.get(), w != 0) {
            // SAFETY: our wake signal.
            unsafe { (f.signal_store_release)(w, 0) };
        }
    }
}

/// Takes an armed slot out of flight again (its signal never got used: the runtime refused the
/// call), and gives it back.
pub(crate) fn disarm(p: &Pool, i: usize) {
    p.slots[i].state.store(0, Release);
    p.push(i);
    p.in_flight.fetch_sub(1, Release);
}

/// Gives back a taken slot that was never armed.
pub(crate) fn give_back(p: &Pool, i: usize) {
    p.push(i);
}

pub(crate) fn cached_tid() -> u32 {
    thread_local! { static TID: core::cell::Cell<u32> = const { core::cell::Cell::new(0) }; }
    TID.with(|t| {
        if t.get() == 0 {
            t.set(clock::gettid());
        }
        t.get()
    })
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
                wrote.set(true);
                writer(pkt.as_ptr() as *const c_void, 1);
            }
        } else {
            // A multi-packet batch (graph replay). Its packets are the graph's: left alone
            // unless RTL_AGENT_HSA_BATCHES=1 (rewriting completion signals inside batches breaks
            // ROCr before 7.13, 0x1009). The replay is timed by two barriers of our own.
            let mut nodes: Option<Vec<u8>> = None;
            if crate::hsa_batches() && count <= MAX_BATCH {
                let mut copy = vec![0u8; count as usize * 64];
                std::ptr::copy_nonoverlapping(pkts as *const u8, copy.as_mut_ptr(), copy.len());
                for pkt in copy.chunks_exact_mut(64) {
                    capture(f, p, q, pkt, true);
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
        if SLEEPING.load(SeqCst) {
            crate::kick_completion();
        }
    }));
    if !wrote.get() {
        writer(pkts, count);
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
/// Futex word the handler bumps to wake the completion thread.
pub(crate) static WAKE: AtomicU32 = AtomicU32::new(0);
/// The completion thread is (about to be) asleep on WAKE: only then does the handler pay for a
/// wake-up system call.
pub(crate) static SLEEPING: AtomicBool = AtomicBool::new(false);
const SIGNAL_CONDITION_LT: u32 = 2;
/// The completion thread is blocked in `hsa_amd_signal_wait_any` on the signals it found in
/// flight plus WAKE_SIG; WOKEN: WAKE_SIG was set (0) since, reset (1) after the wait.
static BLOCKED: AtomicBool = AtomicBool::new(false);
static WOKEN: AtomicBool = AtomicBool::new(false);
static WAKE_SIG: AtomicU64 = AtomicU64::new(0);
/// The blocked wait is a long one (nothing in flight needs forwarding: only spans).
static LONG_WAIT: AtomicBool = AtomicBool::new(false);
/// Most signals one wait covers (the rest are seen at the next scan).
const WAIT_MAX: usize = 63;
const WAIT_STATE_BLOCKED: u32 = 0;

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
    let mut spans: Vec<u64> = Vec::with_capacity(WAIT_MAX + 1);
    loop {
        if STOP.load(Acquire) != 0 && stop_at.is_none() {
            stop_at = Some(clock::monotonic_ns() + 1_000_000_000);
        }
        let mut found = 0;
        let armed = p.armed.load(SeqCst);
        pending.clear();
        spans.clear();
        let mut forwards = false;
        for i in 0..p.high.load(Relaxed) {
            let slot = &p.slots[i];
            if slot.state.load(Acquire) != 1 {
                continue;
            }
            // SAFETY: state 1 (Acquire) published `info`.
            let (kind, orig) = unsafe { ((*slot.info.get()).kind, (*slot.info.get()).orig) };
            if kind == K_SPAN_START {
                continue; // completed with its K_SPAN_END
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
            } else if spans.len() < WAIT_MAX {
                // A span (nothing to forward): waited for only when nothing else is pending.
                spans.push(sig);
            }
        }
        if !forwards {
            std::mem::swap(&mut pending, &mut spans);
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
        if found == 0 {
            if p.in_flight.load(Relaxed) == 0 {
                let w = WAKE.load(Acquire);
                SLEEPING.store(true, SeqCst);
                if p.in_flight.load(SeqCst) == 0 && STOP.load(Acquire) == 0 {
                    crate::futex_wait(&WAKE, w, 20);
                }
                SLEEPING.store(false, SeqCst);
            } else if let (Some(wait_any), w, false) = (f.wait_any, WAKE_SIG.load(Relaxed), pending.is_empty()) {
                // Block in the runtime (bounded: 200 us) until any of them completes, or a
                // barrier / copy is armed (WAKE_SIG); then rescan everything. Completion is
                // forwarded within microseconds.
                // Something to forward: look again every 200 us at most (slots armed meanwhile
                // are not in the set). Only spans: 20 ms (a new dispatch or copy wakes us).
                let ns: u64 = if forwards || w == 0 { 200_000 } else { 20_000_000 };
                let timeout = (ns * FREQ.load(Relaxed) / 1_000_000_000).max(1);
                if w != 0 {
                    pending.push(w);
                }
                LONG_WAIT.store(!forwards && w != 0, SeqCst);
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
                LONG_WAIT.store(false, Relaxed);
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
                std::thread::sleep(std::time::Duration::from_micros(20));
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
    crate::kick_completion();
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
        crate::kick_completion();
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
    if table.is_null() {
        return Err("no API table".into());
    }
    let core = *(table.add(ROOT_CORE) as *const *mut u8);
    let amd = *(table.add(ROOT_AMD) as *const *mut u8);
    if core.is_null() || amd.is_null() {
        return Err("API table without core or AMD extension table".into());
    }
    // Each sub-table starts with its ApiTableVersion: major_id first.
    layout::core_known(*(core as *const u32))?;
    let amd_l: AmdLayout = layout::amd_layout(*(amd as *const u32))?;
    let get = |t: *mut u8, off: usize| -> *const c_void { *(t.add(off) as *const *const c_void) };
    let needed = [
        get(core, core_off::QUEUE_CREATE),
        get(core, core_off::SIGNAL_CREATE),
        get(core, core_off::SIGNAL_LOAD_RELAXED),
        get(core, core_off::SIGNAL_STORE_RELAXED),
        get(core, core_off::SIGNAL_SUBTRACT_SCRELEASE),
        get(core, core_off::EXECUTABLE_FREEZE),
        get(core, core_off::EXECUTABLE_SYMBOL_GET_INFO),
        get(core, core_off::EXECUTABLE_ITERATE_SYMBOLS),
        get(core, core_off::SYSTEM_GET_INFO),
        get(amd, amd_l.queue_intercept_create),
        get(amd, amd_l.queue_intercept_register),
        get(amd, amd_l.profiling_set_profiler_enabled),
        get(amd, amd_l.profiling_get_dispatch_time),
        get(amd, amd_l.profiling_convert_tick),
        get(core, core_off::SIGNAL_WAIT_SCACQUIRE),
        get(core, core_off::SIGNAL_STORE_SCRELEASE),
        get(core, core_off::QUEUE_DESTROY),
        get(core, core_off::QUEUE_ADD_WRITE_INDEX_SCRELEASE),
        get(amd, amd_l.profiling_get_async_copy_time),
    ];
    if needed.iter().any(|p| p.is_null()) {
        return Err("API table entries missing".into());
    }
    let t = std::mem::transmute::<*const c_void, QueueCreateFn>;
    let fns = Fns {
        queue_create: t(needed[0]),
        signal_create: std::mem::transmute::<*const c_void, SignalCreateFn>(needed[1]),
        signal_load: std::mem::transmute::<*const c_void, SignalLoadFn>(needed[2]),
        signal_store: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[3]),
        signal_subtract: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[4]),
        freeze: std::mem::transmute::<*const c_void, FreezeFn>(needed[5]),
        symbol_get_info: std::mem::transmute::<*const c_void, SymbolGetInfoFn>(needed[6]),
        iterate_symbols: std::mem::transmute::<*const c_void, IterateSymbolsFn>(needed[7]),
        system_get_info: std::mem::transmute::<*const c_void, SystemGetInfoFn>(needed[8]),
        intercept_create: t(needed[9]),
        intercept_register: std::mem::transmute::<*const c_void, InterceptRegisterFn>(needed[10]),
        set_profiler: std::mem::transmute::<*const c_void, SetProfilerFn>(needed[11]),
        dispatch_time: std::mem::transmute::<*const c_void, DispatchTimeFn>(needed[12]),
        convert_tick: std::mem::transmute::<*const c_void, ConvertTickFn>(needed[13]),
        signal_wait: std::mem::transmute::<*const c_void, SignalWaitFn>(needed[14]),
        signal_store_release: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[15]),
        queue_destroy: std::mem::transmute::<*const c_void, QueueDestroyFn>(needed[16]),
        add_write_index: std::mem::transmute::<*const c_void, AddWriteIndexFn>(needed[17]),
        copy_time: std::mem::transmute::<*const c_void, CopyTimeFn>(needed[18]),
        wait_any: Some(get(amd, amd_l.signal_wait_any))
            .filter(|p| !p.is_null())
            .map(|p| std::mem::transmute::<*const c_void, WaitAnyFn>(p)),
    };
    if FNS.set(fns).is_err() {
        return Err("installed twice".into());
    }
    let mut freq: u64 = 0;
    if (fns.system_get_info)(SYSTEM_INFO_TIMESTAMP_FREQUENCY, &mut freq as *mut u64 as *mut c_void) == HSA_STATUS_SUCCESS && freq > 0 {
        FREQ.store(freq, Relaxed);
    }
    let iter: IterateAgentsFn = std::mem::transmute(get(core, core_off::ITERATE_AGENTS));
    let agent_info = get(core, core_off::AGENT_GET_INFO);
    if !agent_info.is_null() && !get(core, core_off::ITERATE_AGENTS).is_null() {
        let rc = iter(collect_agent, agent_info as *mut c_void);
        if rc != HSA_STATUS_SUCCESS {
            record_error(rc);
        }
    }
    let mut w = 0u64;
    if (fns.signal_create)(1, 0, std::ptr::null(), &mut w) == HSA_STATUS_SUCCESS {
        WAKE_SIG.store(w, Relaxed);
    }
    publish::buffers();
    pool();
    start_completion_thread();
    *(core.add(core_off::QUEUE_CREATE) as *mut *const c_void) = queue_create_wrapper as *const c_void;
    *(core.add(core_off::EXECUTABLE_FREEZE) as *mut *const c_void) = freeze_wrapper as *const c_void;
    crate::hsa_copy::install(amd, &amd_l);
    Ok(())
}

/// What HSA capture times in this process (`Info::captures`).
pub(crate) fn captures() -> u32 {
    let mut c = wire::CAP_KERNELS | wire::CAP_MEMSETS | wire::CAP_BLIT_COPIES | wire::CAP_BARRIERS;
    if crate::hsa_spans() {
        c |= wire::CAP_GRAPH_SPANS;
    }
    if crate::hsa_copy::WRAPPED.load(Relaxed) {
        c |= wire::CAP_COPIES;
    }
    if crate::hsa_batches() {
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
mod tests {
    use super::*;

    #[test]
    fn pool_free_list() {
        let p = Pool::new();
        let mut got = vec![];
        while let Some(i) = p.pop() {
            got.push(i);
        }
        assert_eq!(got.len(), POOL);
        got.sort();
        got.dedup();
        assert_eq!(got.len(), POOL, "each slot once");
        for i in got {
            p.push(i);
        }
        let p = std::sync::Arc::new(p);
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let p = p.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Some(i) = p.pop() {
                            assert_eq!(p.slots[i].state.swap(1, AcqRel), 0, "slot handed out twice");
                            p.slots[i].state.store(0, Release);
                            p.push(i);
                        }
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        let mut n = 0;
        while p.pop().is_some() {
            n += 1;
        }
        assert_eq!(n, POOL, "none lost");
    }

    #[test]
    fn kernel_name_table() {
        kname_insert(0x1000, 7, OpKind::Dispatch);
        kname_insert(0x2000, 8, kernel_kind(b"__amd_rocclr_copyBuffer"));
        kname_insert(0x3040, 9, kernel_kind(b"__amd_rocclr_fillBufferAligned"));
        assert_eq!(kname_lookup(0x1000), (7, OpKind::Dispatch as u8));
        assert_eq!(kname_lookup(0x2000), (8, OpKind::Copy as u8));
        assert_eq!(kname_lookup(0x3040), (9, OpKind::Memset as u8));
        assert_eq!(kname_lookup(0x3000), (0, OpKind::Dispatch as u8));
        assert_eq!(kernel_kind(b"__amd_rocclr_copyBufferRect"), OpKind::Copy);
        assert_eq!(kernel_kind(b"__amd_rocclr_scheduler"), OpKind::Dispatch);
        assert_eq!(kernel_kind(b"_Z4copyPfS_"), OpKind::Dispatch);
    }
}
