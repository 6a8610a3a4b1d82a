//! CUPTI source (NVIDIA): activity records for kernels, copies and memsets, each linked to the
//! driver or runtime API call with the same correlation id, turned into wire `GpuOp`s.
//!
//! libcupti is loaded at run time (dlopen/dlsym; no link-time dependency) and only in a process
//! that uses CUDA: from `InitializeInjection` (the driver calls it inside `cuInit` when
//! `CUDA_INJECTION64_PATH` names the agent) or, with `RTL_AGENT_GPU=cupti` and only
//! `LD_PRELOAD`, from the publisher thread once libcuda is mapped. Which copy: the one already
//! loaded, else `RTL_AGENT_CUPTI_LIB`, else next to the libcudart / libcuda the process maps
//! (the pip wheel layout puts both in `nvidia/cu13/lib`; the toolkit in `targets/*/lib`), else
//! `libcupti.so.13`, `libcupti.so` from the loader's path.
//!
//! Clock: CUPTI's own timestamps by default, whose domain is found at start by reading
//! `cuptiGetTimestamp` between system clock reads (CLOCK_REALTIME on the H200; the collector
//! converts with the process's clock offset). `RTL_AGENT_CUPTI_CLOCK=monotonic` registers
//! `cuptiActivityRegisterTimestampCallback` returning CLOCK_MONOTONIC instead: same GPU
//! durations, but every traced call was markedly slower with it (measured: docs/benchmarks.md).
//! API records: by default only for the calls that put work on the GPU ([`is_gpu_work_api`],
//! `cuptiActivityEnableDriverApi/RuntimeApi`); `RTL_AGENT_CUPTI_API=all` keeps every call's.
//! Threads: `cuptiSetThreadIdType(SYSTEM)` makes API records carry the OS tid (`OP_TID_KNOWN`).
//!
//! Record layouts are the CUDA 13.0 headers' (`cupti_activity.h`, CUPTI_API_VERSION 130001):
//! `CUpti_ActivityKernel10` (216 bytes), `CUpti_ActivityMemcpy6` (96), `CUpti_ActivityMemset4`
//! (88), `CUpti_ActivityAPI` (40). The structs are declared `packed, aligned(8)` in C; every
//! field there is naturally aligned, so plain `repr(C)` gives the same offsets (asserted in the
//! tests against the header's offsetof values). A record shorter than its struct (another CUPTI
//! major) is skipped and counted, never read past its end.
//!
//! `RTL_AGENT_CUPTI_DUMP=FILE` appends the raw records as they are delivered (see
//! [`DumpFrame`]), so decoding and correlation can be tested on recorded data ([`replay`]).

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::{Mutex, OnceLock};

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind};

mod ffi;
use ffi::{load, Api, CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_SUCCESS};

// ---------------------------------------------------------------------------------------------
// Record layouts (cupti_activity.h, CUDA 13.0).

pub const KIND_MEMCPY: u32 = 1;
pub const KIND_MEMSET: u32 = 2;
pub const KIND_KERNEL: u32 = 3;
pub const KIND_DRIVER: u32 = 4;
pub const KIND_RUNTIME: u32 = 5;
pub const KIND_CONCURRENT_KERNEL: u32 = 10;
/// One record per graph launch (its first node's start to its last node's end) instead of the
/// nodes' own kernel / memcpy / memset records (CUDA 11.7+).
pub const KIND_GRAPH_TRACE: u32 = 51;

/// CUpti_CallbackDomain.
pub const DOMAIN_DRIVER: u32 = 1;
pub const DOMAIN_RUNTIME: u32 = 2;

const FLAG_FLUSH_FORCED: u32 = 1;
const THREAD_ID_TYPE_SYSTEM: u32 = 1;

/// CUpti_ActivityKernel10.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Kernel10 {
    pub kind: u32,
    pub cache_config: u8,
    pub shared_memory_config: u8,
    pub registers_per_thread: u16,
    pub partitioned_global_cache_requested: u32,
    pub partitioned_global_cache_executed: u32,
    pub start: u64,
    pub end: u64,
    pub completed: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub local_memory_total: u32,
    pub correlation_id: u32,
    pub grid_id: i64,
    pub name: *const c_char,
    pub reserved0: *mut c_void,
    pub queued: u64,
    pub submitted: u64,
    pub launch_type: u8,
    pub is_shared_memory_carveout_requested: u8,
    pub shared_memory_carveout_requested: u8,
    pub padding: u8,
    pub shared_memory_executed: u32,
    pub graph_node_id: u64,
    pub shmem_limit_config: u32,
    pub graph_id: u32,
    pub p_access_policy_window: *mut c_void,
    pub channel_id: u32,
    pub channel_type: u32,
    pub cluster: [u32; 3],
    pub cluster_scheduling_policy: u32,
    pub local_memory_total_v2: u64,
    pub max_potential_cluster_size: u32,
    pub max_active_clusters: u32,
    pub is_device_launched: u8,
    pub padding3: [u8; 7],
}

/// CUpti_ActivityMemcpy6.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memcpy6 {
    pub kind: u32,
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub runtime_correlation_id: u32,
    pub pad: u32,
    pub reserved0: *mut c_void,
    pub graph_node_id: u64,
    pub graph_id: u32,
    pub channel_id: u32,
    pub channel_type: u32,
    pub is_device_launched: u8,
    pub pad2: [u8; 3],
    pub copy_count: u64,
}

/// CUpti_ActivityMemset4.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Memset4 {
    pub kind: u32,
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub flags: u16,
    pub memory_kind: u16,
    pub pad: u32,
    pub reserved0: *mut c_void,
    pub graph_node_id: u64,
    pub graph_id: u32,
    pub channel_id: u32,
    pub channel_type: u32,
    pub is_device_launched: u8,
    pub pad2: [u8; 3],
}

/// CUpti_ActivityAPI (DRIVER and RUNTIME kinds).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ApiRecord {
    pub kind: u32,
    pub cbid: u32,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// CUpti_ActivityGraphTrace (CUDA 13's CUpti_ActivityGraphTrace2 starts the same and appends
/// the last node's device and context, not read here).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GraphTrace {
    pub kind: u32,
    pub correlation_id: u32,
    pub start: u64,
    pub end: u64,
    /// Where the first node runs (INT_MAX: on the host).
    pub device_id: u32,
    pub graph_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub reserved: *mut c_void,
}

const _: () = {
    assert!(size_of::<GraphTrace>() == 48);
    assert!(size_of::<Kernel10>() == 216);
    assert!(size_of::<Memcpy6>() == 96);
    assert!(size_of::<Memset4>() == 88);
    assert!(size_of::<ApiRecord>() == 40);
};

/// Reads a `T` from the start of `b` if `b` is long enough (records may sit at any 8-aligned
/// place; read unaligned anyway).
fn read<T: Copy>(b: &[u8]) -> Option<T> {
    // SAFETY: length checked; T is a plain repr(C) record (integers and raw pointers).
    (b.len() >= size_of::<T>()).then(|| unsafe { std::ptr::read_unaligned(b.as_ptr() as *const T) })
}

/// One decoded activity record.
#[derive(Clone, Copy, Debug)]
pub enum Activity {
    Kernel(Kernel10),
    Memcpy(Memcpy6),
    Memset(Memset4),
    /// A whole graph launch (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`).
    Graph(GraphTrace),
    /// DRIVER or RUNTIME API call; `domain` is DOMAIN_DRIVER / DOMAIN_RUNTIME.
    Api {
        domain: u32,
        rec: ApiRecord,
    },
    /// A kind this source did not enable (or does not use).
    Other(u32),
    /// A known kind whose record is shorter than the 13.0 layout.
    Short(u32),
}

/// Decodes one record (its bytes as delivered).
pub fn parse(b: &[u8]) -> Activity {
    let Some(kind) = read::<u32>(b) else { return Activity::Short(0) };
    let short = Activity::Short(kind);
    match kind {
        KIND_KERNEL | KIND_CONCURRENT_KERNEL => read(b).map_or(short, Activity::Kernel),
        KIND_MEMCPY => read(b).map_or(short, Activity::Memcpy),
        KIND_MEMSET => read(b).map_or(short, Activity::Memset),
        KIND_GRAPH_TRACE => read(b).map_or(short, Activity::Graph),
        KIND_DRIVER | KIND_RUNTIME => {
            read(b).map_or(short, |rec| Activity::Api { domain: if kind == KIND_DRIVER { DOMAIN_DRIVER } else { DOMAIN_RUNTIME }, rec })
        }
        k => Activity::Other(k),
    }
}

/// CUPTI's CUpti_ActivityMemcpyKind -> the wire's copy_kind (the HIP profiler's numbering:
/// 1 H2D, 4 D2H, 7 D2D; 0 other).
pub fn wire_copy_kind(k: u8) -> u8 {
    match k {
        1 => 1,  // HTOD
        2 => 4,  // DTOH
        8 => 7,  // DTOD
        10 => 7, // PTOP (device to device across devices)
        _ => 0,
    }
}

/// The GPU half of an op (no API fields yet); `record_index` = correlation id.
pub fn gpu_op(a: &Activity, kernel_name_id: u32) -> Option<GpuOp> {
    let mut op = GpuOp {
        source: wire::Source::Cupti as u8,
        cpu_clock: CLOCK.load(Relaxed),
        gpu_clock: CLOCK.load(Relaxed),
        op_count: 1,
        ..Default::default()
    };
    let (graph, corr) = match a {
        Activity::Kernel(k) => {
            op.op = OpKind::Dispatch as u8;
            op.device = k.device_id;
            op.queue = k.stream_id;
            op.stream = k.stream_id as u64;
            op.gpu_begin_ns = k.start;
            op.gpu_end_ns = k.end;
            op.grid = k.grid.map(|g| g as u32);
            op.block = k.block.map(|g| g as u32);
            op.kernel_name_id = kernel_name_id;
            (k.graph_id, k.correlation_id)
        }
        Activity::Memcpy(m) => {
            op.op = OpKind::Copy as u8;
            op.copy_kind = wire_copy_kind(m.copy_kind);
            op.device = m.device_id;
            op.queue = m.stream_id;
            op.stream = m.stream_id as u64;
            op.gpu_begin_ns = m.start;
            op.gpu_end_ns = m.end;
            op.bytes = m.bytes;
            (m.graph_id, m.correlation_id)
        }
        Activity::Memset(m) => {
            op.op = OpKind::Memset as u8;
            op.copy_kind = 12;
            op.device = m.device_id;
            op.queue = m.stream_id;
            op.stream = m.stream_id as u64;
            op.gpu_begin_ns = m.start;
            op.gpu_end_ns = m.end;
            op.bytes = m.bytes;
            (m.graph_id, m.correlation_id)
        }
        Activity::Graph(g) => {
            op.op = OpKind::GraphExecution as u8;
            // The node count is not in the record.
            op.op_count = 0;
            // INT_MAX: the graph starts with a host node (kept as CUPTI says).
            op.device = g.device_id;
            op.queue = g.stream_id;
            op.stream = g.stream_id as u64;
            op.gpu_begin_ns = g.start;
            op.gpu_end_ns = g.end;
            (g.graph_id.max(1), g.correlation_id)
        }
        _ => return None,
    };
    if graph != 0 {
        op.flags |= wire::OP_IS_GRAPH;
    }
    op.record_index = corr as u64;
    Some(op)
}

// ---------------------------------------------------------------------------------------------
// Correlation: GPU records meet the API record with the same correlation id.

/// The API call an op came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    pub start: u64,
    pub end: u64,
    pub tid: u32,
    pub name_id: u32,
    pub domain: u32,
}

/// API records kept for ops still to come (graph replays deliver their nodes later).
const MAX_APIS: usize = 1 << 18;
/// Ops waiting for their API record.
const MAX_WAITING: usize = 1 << 16;

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrStats {
    pub api_records: u64,
    pub gpu_records: u64,
    pub linked: u64,
    /// Ops published without an API call (its record never came, or was evicted).
    pub without_api: u64,
    pub short_records: u64,
    pub other_records: u64,
    /// Graph launches CUPTI could not time (start and end 0 in its record): not published.
    pub graphs_untimed: u64,
}

#[derive(Default)]
pub struct Correlator {
    apis: HashMap<u32, ApiCall>,
    max_corr: u32,
    waiting: VecDeque<GpuOp>,
    pub stats: CorrStats,
}

impl Correlator {
    pub fn on_api(&mut self, corr: u32, call: ApiCall) {
        self.stats.api_records += 1;
        // A driver record wins over a runtime one with the same id (the probes see the driver).
        if let Some(old) = self.apis.get(&corr) {
            if old.domain == DOMAIN_DRIVER && call.domain != DOMAIN_DRIVER {
                return;
            }
        }
        self.apis.insert(corr, call);
        self.max_corr = self.max_corr.max(corr);
        if self.apis.len() > MAX_APIS {
            let keep = self.max_corr.saturating_sub((MAX_APIS / 2) as u32);
            self.apis.retain(|&c, _| c >= keep);
        }
    }

    fn fill(op: &mut GpuOp, c: &ApiCall) {
        op.flags |= wire::OP_HAS_CPU_TIMES | wire::OP_TID_KNOWN;
        op.tid = c.tid;
        op.cpu_start_ns = c.start;
        op.cpu_end_ns = c.end;
        op.api_name_id = c.name_id;
    }

    /// A GPU op: emitted at once when its API record is known, else kept until one comes.
    pub fn on_gpu(&mut self, mut op: GpuOp, emit: &mut dyn FnMut(&GpuOp)) {
        self.stats.gpu_records += 1;
        if let Some(c) = self.apis.get(&(op.record_index as u32)) {
            Self::fill(&mut op, c);
            self.stats.linked += 1;
            emit(&op);
            return;
        }
        if self.waiting.len() >= MAX_WAITING {
            if let Some(old) = self.waiting.pop_front() {
                self.stats.without_api += 1;
                emit(&old);
            }
        }
        self.waiting.push_back(op);
    }

    /// After each delivered buffer: ops whose API record has arrived since.
    pub fn retry(&mut self, emit: &mut dyn FnMut(&GpuOp)) {
        let n = self.waiting.len();
        for _ in 0..n {
            let Some(mut op) = self.waiting.pop_front() else { break };
            match self.apis.get(&(op.record_index as u32)) {
                Some(c) => {
                    Self::fill(&mut op, c);
                    self.stats.linked += 1;
                    emit(&op);
                }
                None => self.waiting.push_back(op),
            }
        }
    }

    /// End of the session: whatever still waits goes out without its API call.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&GpuOp)) {
        self.retry(emit);
        while let Some(op) = self.waiting.pop_front() {
            self.stats.without_api += 1;
            emit(&op);
        }
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// One decoded record. `kernel_name`: the kernel's name bytes (the record's `name`),
    /// `intern(kind, bytes)` gives string ids, `api_name(domain, cbid)` the API's name id.
    pub fn on_record(
        &mut self,
        a: &Activity,
        kernel_name: Option<&[u8]>,
        intern: &mut dyn FnMut(u8, &[u8]) -> u32,
        api_name: &mut dyn FnMut(u32, u32) -> u32,
        emit: &mut dyn FnMut(&GpuOp),
    ) {
        match a {
            Activity::Api { domain, rec } => {
                let name_id = api_name(*domain, rec.cbid);
                self.on_api(rec.correlation_id, ApiCall { start: rec.start, end: rec.end, tid: rec.thread_id, name_id, domain: *domain });
            }
            Activity::Graph(g) if g.start == 0 && g.end == 0 => self.stats.graphs_untimed += 1,
            Activity::Kernel(_) | Activity::Memcpy(_) | Activity::Memset(_) | Activity::Graph(_) => {
                let kid = kernel_name.filter(|n| !n.is_empty()).map_or(0, |n| intern(wire::STR_KERNEL, n));
                if let Some(op) = gpu_op(a, kid) {
                    self.on_gpu(op, emit);
                }
            }
            Activity::Short(_) => self.stats.short_records += 1,
            Activity::Other(_) => self.stats.other_records += 1,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The raw dump (RTL_AGENT_CUPTI_DUMP): frames `[u32 tag][u32 len][payload][0-pad to 8]`.

pub const FRAME_RECORD: u32 = 1;
pub const FRAME_API_NAME: u32 = 2;
pub const FRAME_BUFFER_END: u32 = 3;

/// One frame of a raw dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpFrame {
    /// A record's bytes as delivered, and the kernel name it pointed to (empty if none).
    Record { rec: Vec<u8>, name: Vec<u8> },
    /// `cuptiGetCallbackName(domain, cbid)`, written before the first record that uses it.
    ApiName { domain: u32, cbid: u32, name: Vec<u8> },
    /// The end of one completed buffer.
    BufferEnd,
}

fn frame(out: &mut Vec<u8>, tag: u32, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
    out.resize(out.len() + ((8 - len % 8) % 8), 0);
}

pub fn encode_frame(out: &mut Vec<u8>, f: &DumpFrame) {
    match f {
        DumpFrame::Record { rec, name } => {
            frame(out, FRAME_RECORD, &[&(rec.len() as u32).to_le_bytes(), &(name.len() as u32).to_le_bytes(), rec, name])
        }
        DumpFrame::ApiName { domain, cbid, name } => frame(out, FRAME_API_NAME, &[&domain.to_le_bytes(), &cbid.to_le_bytes(), name]),
        DumpFrame::BufferEnd => frame(out, FRAME_BUFFER_END, &[]),
    }
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Splits a raw dump into frames; an error names the byte offset of the bad frame.
pub fn read_dump(b: &[u8]) -> Result<Vec<DumpFrame>, String> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < b.len() {
        let bad = |why: &str| format!("CUPTI dump: bad frame at byte {off}: {why}");
        let (tag, len) =
            (u32_at(b, off).ok_or_else(|| bad("truncated header"))?, u32_at(b, off + 4).ok_or_else(|| bad("truncated header"))?);
        let p = b.get(off + 8..off + 8 + len as usize).ok_or_else(|| bad("payload past the end"))?;
        if off + 8 + len as usize + (8 - len as usize % 8) % 8 > b.len() {
            return Err(bad("padding past the end"));
        }
        out.push(match tag {
            FRAME_RECORD => {
                let (rl, nl) = (
                    u32_at(p, 0).ok_or_else(|| bad("short record frame"))? as usize,
                    u32_at(p, 4).ok_or_else(|| bad("short record frame"))? as usize,
                );
                if 8 + rl + nl != p.len() {
                    return Err(bad("record/name lengths disagree with the frame"));
                }
                DumpFrame::Record { rec: p[8..8 + rl].to_vec(), name: p[8 + rl..].to_vec() }
            }
            FRAME_API_NAME => DumpFrame::ApiName {
                domain: u32_at(p, 0).ok_or_else(|| bad("short name frame"))?,
                cbid: u32_at(p, 4).ok_or_else(|| bad("short name frame"))?,
                name: p.get(8..).unwrap_or_default().to_vec(),
            },
            FRAME_BUFFER_END => DumpFrame::BufferEnd,
            t => return Err(bad(&format!("unknown tag {t}"))),
        });
        off += 8 + len as usize + (8 - len as usize % 8) % 8;
    }
    Ok(out)
}

/// Runs a raw dump through the same decoding and correlation as the live source; returns the
/// ops in emission order, the correlator's counts and the API names by id.
pub fn replay(frames: &[DumpFrame], strings: &crate::publish::Strings) -> (Vec<GpuOp>, CorrStats) {
    let mut names: HashMap<(u32, u32), u32> = HashMap::new();
    let mut c = Correlator::default();
    let mut ops = Vec::new();
    for f in frames {
        match f {
            DumpFrame::ApiName { domain, cbid, name } => {
                names.insert((*domain, *cbid), strings.intern(wire::STR_API, name));
            }
            DumpFrame::Record { rec, name } => {
                let a = parse(rec);
                c.on_record(
                    &a,
                    Some(name),
                    &mut |k, b| strings.intern(k, b),
                    &mut |d, cb| names.get(&(d, cb)).copied().unwrap_or(0),
                    &mut |o| ops.push(*o),
                );
            }
            DumpFrame::BufferEnd => c.retry(&mut |o| ops.push(*o)),
        }
    }
    c.finish(&mut |o| ops.push(*o));
    (ops, c.stats)
}

// ---------------------------------------------------------------------------------------------
// The live source.

/// Clock domain of every time in the records (a [`ClockDomain`]): CLOCK_MONOTONIC through the
/// timestamp callback, or what CUPTI's own clock was found to be (`RTL_AGENT_CUPTI_CLOCK=cupti`).
static CLOCK: AtomicU8 = AtomicU8::new(ClockDomain::Monotonic as u8);

/// API records kept by default: the calls that put work on the GPU (CUPTI names them
/// `cuLaunchKernel`, `cudaGraphLaunch_v10000`, `cuMemcpyHtoDAsync_v2`, `cudaMemsetAsync`...).
pub fn is_gpu_work_api(name: &[u8]) -> bool {
    const FAMILIES: [&[u8]; 8] =
        [b"cuLaunch", b"cuGraphLaunch", b"cuMemcpy", b"cuMemset", b"cudaLaunch", b"cudaGraphLaunch", b"cudaMemcpy", b"cudaMemset"];
    FAMILIES.iter().any(|f| name.starts_with(f))
}

struct Live {
    api: Api,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    corr: Correlator,
    names: HashMap<(u32, u32), u32>,
    dump: Vec<u8>,
}

static LIVE: OnceLock<Live> = OnceLock::new();
/// Graph launches come as one graph-level record each (`KIND_GRAPH_TRACE` enabled).
static GRAPH_LEVEL: AtomicBool = AtomicBool::new(false);

/// What this source captures here (`Info::captures`), once started.
pub fn captures() -> u32 {
    let graphs = if GRAPH_LEVEL.load(Relaxed) { wire::CAP_GRAPH_SPANS } else { wire::CAP_GRAPH_NODES };
    wire::CAP_KERNELS | wire::CAP_COPIES | wire::CAP_MEMSETS | graphs
}

/// Raw dump file descriptor (RTL_AGENT_CUPTI_DUMP), -1 if none.
pub static RAW_DUMP_FD: AtomicI32 = AtomicI32::new(-1);
/// The loaded CUPTI's version (cuptiGetVersion), 0 if unknown.
pub static VERSION: AtomicU64 = AtomicU64::new(0);

const BUFFER_BYTES: usize = 4 << 20;

unsafe extern "C" fn timestamp() -> u64 {
    crate::clock::monotonic_ns()
}

unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let _ = std::panic::catch_unwind(|| {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointers from CUPTI; posix_memalign with a power-of-two alignment.
        unsafe {
            if libc::posix_memalign(&mut p, 8, BUFFER_BYTES) != 0 {
                p = std::ptr::null_mut();
            }
            *buf = p as *mut u8;
            *size = if p.is_null() { 0 } else { BUFFER_BYTES };
            *max_records = 0;
        }
    });
}

unsafe extern "C" fn buffer_completed(_ctx: *mut c_void, _stream: u32, buf: *mut u8, _size: usize, valid: usize) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(l) = LIVE.get() {
            // SAFETY: CUPTI hands us the buffer it got from buffer_requested, `valid` bytes filled.
            unsafe { l.consume(buf, valid) };
        }
    });
    // SAFETY: allocated by posix_memalign in buffer_requested (NULL is fine too).
    unsafe { libc::free(buf as *mut c_void) };
}

impl Live {
    /// Walks a completed buffer: each record's length is the distance to the next one (the
    /// last one: to the end of the valid bytes).
    ///
    /// # Safety
    /// `buf` is a buffer CUPTI completed, with `valid` bytes of records.
    unsafe fn consume(&self, buf: *mut u8, valid: usize) {
        if buf.is_null() || valid == 0 {
            return;
        }
        let mut ptrs: Vec<*mut u8> = Vec::with_capacity(valid / 40 + 1);
        let mut rec: *mut u8 = std::ptr::null_mut();
        loop {
            // SAFETY: resolved from libcupti; the caller's buffer.
            let rc = unsafe { (self.api.get_next_record)(buf, valid, &mut rec) };
            if rc == CUPTI_ERROR_MAX_LIMIT_REACHED {
                break;
            }
            if rc != CUPTI_SUCCESS || rec.is_null() {
                crate::publish::record_error(rc);
                break;
            }
            ptrs.push(rec);
        }
        // SAFETY: one past the valid bytes of the caller's buffer.
        let end = unsafe { buf.add(valid) };
        let Ok(mut st) = self.state.lock() else { return };
        let st = &mut *st;
        let fd = RAW_DUMP_FD.load(Relaxed);
        let b = crate::publish::buffers();
        crate::publish::counters().records_seen.fetch_add(ptrs.len() as u64, Relaxed);
        for (i, &p) in ptrs.iter().enumerate() {
            let next = ptrs.get(i + 1).copied().filter(|&n| n > p).unwrap_or(end);
            if next <= p || next > end {
                continue;
            }
            // SAFETY: a record CUPTI returned inside the buffer, up to the next one (or the end of
            // the valid bytes): `p < next <= end`, checked above.
            let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, next.offset_from(p) as usize) };
            let a = parse(bytes);
            let kname: Option<&[u8]> = match &a {
                // SAFETY: a kernel record's name is CUPTI's NUL-terminated string, live while the
                // buffer is.
                Activity::Kernel(k) if !k.name.is_null() => Some(unsafe { CStr::from_ptr(k.name) }.to_bytes()),
                _ => None,
            };
            if let Activity::Api { domain, rec } = &a {
                if let std::collections::hash_map::Entry::Vacant(slot) = st.names.entry((*domain, rec.cbid)) {
                    let name = self.callback_name(*domain, rec.cbid);
                    let id = b.strings.intern(wire::STR_API, &name);
                    slot.insert(id);
                    if fd >= 0 {
                        encode_frame(&mut st.dump, &DumpFrame::ApiName { domain: *domain, cbid: rec.cbid, name });
                    }
                }
            }
            if fd >= 0 && !matches!(a, Activity::Other(_)) {
                encode_frame(&mut st.dump, &DumpFrame::Record { rec: bytes.to_vec(), name: kname.unwrap_or_default().to_vec() });
            }
            let names = &st.names;
            st.corr.on_record(
                &a,
                kname,
                &mut |k, n| b.strings.intern(k, n),
                &mut |d, c| names.get(&(d, c)).copied().unwrap_or(0),
                &mut |o| crate::publish::emit(o, true),
            );
        }
        st.corr.retry(&mut |o| crate::publish::emit(o, true));
        if fd >= 0 {
            encode_frame(&mut st.dump, &DumpFrame::BufferEnd);
            write_all(fd, &st.dump);
            st.dump.clear();
        }
    }

    fn callback_name(&self, domain: u32, cbid: u32) -> Vec<u8> {
        if let Some(f) = self.api.get_callback_name {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: resolved from libcupti; the name is a static string of CUPTI's.
            if unsafe { f(domain, cbid, &mut p) } == CUPTI_SUCCESS && !p.is_null() {
                return unsafe { CStr::from_ptr(p) }.to_bytes().to_vec();
            }
        }
        format!("{}#{cbid}", if domain == DOMAIN_DRIVER { "cu" } else { "cuda" }).into_bytes()
    }
}

fn write_all(fd: c_int, mut rest: &[u8]) {
    while !rest.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, rest.as_ptr() as *const c_void, rest.len()) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            crate::publish::counters().dump_errors.fetch_add(1, Relaxed);
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// True when this process maps libcuda (never loads it).
pub fn cuda_loaded() -> bool {
    !crate::loaded::objects(&["libcuda.so"]).is_empty()
}

/// Candidate libcupti paths, in order (see the module doc).
pub fn candidates(env: Option<&str>, loaded_cupti: &[String], runtime_libs: &[String]) -> Vec<String> {
    let mut v: Vec<String> = loaded_cupti.to_vec();
    if let Some(e) = env.filter(|e| !e.is_empty()) {
        v.push(e.to_string());
    }
    for lib in runtime_libs {
        if let Some((dir, _)) = lib.rsplit_once('/') {
            for n in ["libcupti.so.13", "libcupti.so"] {
                v.push(format!("{dir}/{n}"));
            }
            // The toolkit's older layout: lib64/../extras/CUPTI/lib64.
            if let Some((up, _)) = dir.rsplit_once('/') {
                v.push(format!("{up}/extras/CUPTI/lib64/libcupti.so.13"));
            }
        }
    }
    v.push("libcupti.so.13".into());
    v.push("libcupti.so".into());
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
    v
}

/// Loads libcupti and enables the activity kinds. Err: why not (the process runs on untouched).
pub fn start() -> Result<String, (String, i32)> {
    if LIVE.get().is_some() {
        return Ok("already active".into());
    }
    let (api, path) = load().map_err(|e| (e, 0))?;
    if let Some(f) = api.get_version {
        let mut v = 0u32;
        // SAFETY: resolved from libcupti.
        if unsafe { f(&mut v) } == CUPTI_SUCCESS {
            VERSION.store(v as u64, Relaxed);
        }
    }
    if let Some(dump) = &crate::config_ref().cupti_dump {
        let mut p = dump.as_encoded_bytes().to_vec();
        p.push(0);
        // SAFETY: NUL-terminated path.
        let fd =
            unsafe { libc::open(p.as_ptr() as *const c_char, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC, 0o644) };
        RAW_DUMP_FD.store(fd, Relaxed);
    }
    crate::publish::buffers();
    let live = LIVE.get_or_init(|| Live { api, state: Mutex::new(LiveState::default()) });
    let a = &live.api;
    let check = |rc: c_int, what: &str| if rc == CUPTI_SUCCESS { Ok(()) } else { Err((format!("{what} failed (CUptiResult {rc})"), rc)) };
    // SAFETY: functions resolved from libcupti, called with their documented arguments.
    unsafe {
        if crate::config_ref().cupti_monotonic_clock {
            // Before any kind is enabled, so every record is on CLOCK_MONOTONIC.
            match a.register_timestamp {
                Some(f) => check(f(timestamp), "cuptiActivityRegisterTimestampCallback")?,
                None => return Err(("this libcupti has no cuptiActivityRegisterTimestampCallback (CUDA 12.6+ needed)".into(), 0)),
            }
        } else {
            // CUPTI's own clock: cheaper (with a timestamp callback every traced call got
            // markedly slower on the H200), and the collector converts a CLOCK_REALTIME domain.
            let d = native_clock_domain(a);
            if d == ClockDomain::Unknown {
                return Err((
                    "CUPTI's clock is neither CLOCK_REALTIME nor CLOCK_MONOTONIC here; set RTL_AGENT_CUPTI_CLOCK=monotonic".into(),
                    0,
                ));
            }
            CLOCK.store(d as u8, Relaxed);
        }
        match a.set_thread_id_type {
            Some(f) => check(f(THREAD_ID_TYPE_SYSTEM), "cuptiSetThreadIdType(SYSTEM)")?,
            None => return Err(("this libcupti has no cuptiSetThreadIdType".into(), 0)),
        }
        check((a.register_callbacks)(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks")?;
        let api_kinds: &[(u32, &str)] = if crate::config_ref().cupti_api_all {
            &[(KIND_DRIVER, "DRIVER"), (KIND_RUNTIME, "RUNTIME")]
        } else {
            match enable_gpu_work_apis(a) {
                Ok(n) if n > 0 => &[],
                Ok(_) => {
                    return Err(("CUPTI names no launch/memcpy/memset API (cuptiGetCallbackName); set RTL_AGENT_CUPTI_API=all".into(), 0))
                }
                Err(e) => return Err((format!("{e}; set RTL_AGENT_CUPTI_API=all"), 0)),
            }
        };
        for &(k, what) in api_kinds {
            check((a.enable)(k), &format!("cuptiActivityEnable({what})"))?;
        }
        // Graph launches: one graph-level record each (CUPTI then keeps no node records for
        // them), unless every node is asked for (RTL_AGENT_GRAPH_NODES, run --graph-nodes). A
        // CUPTI that refuses graph-level records gives the nodes, as asked for or not (said).
        if !crate::graph_nodes() {
            let rc = (a.enable)(KIND_GRAPH_TRACE);
            GRAPH_LEVEL.store(rc == CUPTI_SUCCESS, Relaxed);
            if rc != CUPTI_SUCCESS {
                crate::say(&format!(
                    "this CUPTI refuses graph-level records (cuptiActivityEnable(GRAPH_TRACE): CUptiResult {rc}): \
                     every node of every graph replay is recorded instead (more cost per replay)"
                ));
            }
        }
        for (k, what) in [(KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"), (KIND_MEMCPY, "MEMCPY"), (KIND_MEMSET, "MEMSET")] {
            check((a.enable)(k), &format!("cuptiActivityEnable({what})"))?;
        }
    }
    Ok(path)
}

/// Enables API records for the driver and runtime calls that put work on the GPU only
/// ([`is_gpu_work_api`]), found by name through `cuptiGetCallbackName` so no callback id of a
/// particular CUDA version is hard-coded. Returns how many were enabled.
///
/// # Safety
/// `a` holds functions resolved from libcupti.
unsafe fn enable_gpu_work_apis(a: &Api) -> Result<usize, String> {
    let (Some(name_of), Some(drv), Some(rt)) = (a.get_callback_name, a.enable_driver_api, a.enable_runtime_api) else {
        return Err("this libcupti lacks cuptiGetCallbackName / cuptiActivityEnableDriverApi / cuptiActivityEnableRuntimeApi".into());
    };
    let mut n = 0;
    for (domain, enable) in [(DOMAIN_DRIVER, drv), (DOMAIN_RUNTIME, rt)] {
        // Callback ids are dense from 1 to the domain's size; stop after a long run of unknown ids.
        let mut misses = 0;
        for cbid in 1..8192u32 {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: out-pointer; CUPTI returns a static string.
            if unsafe { name_of(domain, cbid, &mut p) } != CUPTI_SUCCESS || p.is_null() {
                misses += 1;
                if misses >= 256 {
                    break;
                }
                continue;
            }
            misses = 0;
            // SAFETY: NUL-terminated static string from CUPTI.
            if is_gpu_work_api(unsafe { CStr::from_ptr(p) }.to_bytes()) {
                // SAFETY: a valid callback id of this domain.
                let rc = unsafe { enable(cbid, 1) };
                if rc != CUPTI_SUCCESS {
                    return Err(format!(
                        "cuptiActivityEnable{}Api({cbid}) failed (CUptiResult {rc})",
                        if domain == DOMAIN_DRIVER { "Driver" } else { "Runtime" }
                    ));
                }
                n += 1;
            }
        }
    }
    Ok(n)
}

/// What CUPTI's own clock is, from one reading of it between two of each system clock.
fn native_clock_domain(a: &Api) -> ClockDomain {
    let Some(f) = a.get_timestamp else { return ClockDomain::Unknown };
    let (r0, m0) = (crate::clock::now(libc::CLOCK_REALTIME), crate::clock::monotonic_ns());
    let mut t = 0u64;
    // SAFETY: out-pointer.
    if unsafe { f(&mut t) } != CUPTI_SUCCESS {
        return ClockDomain::Unknown;
    }
    let (r1, m1) = (crate::clock::now(libc::CLOCK_REALTIME), crate::clock::monotonic_ns());
    let near = |lo: u64, hi: u64| t + 1_000_000 >= lo && t <= hi + 1_000_000;
    if near(m0, m1) {
        ClockDomain::Monotonic
    } else if near(r0, r1) {
        ClockDomain::Realtime
    } else {
        ClockDomain::Unknown
    }
}

/// Publisher period: hand over the buffers whose records are all complete.
pub fn poll() {
    if let Some(l) = LIVE.get() {
        // SAFETY: resolved from libcupti.
        let rc = unsafe { (l.api.flush_all)(0) };
        if rc != CUPTI_SUCCESS {
            crate::publish::record_error(rc);
        }
    }
}

/// Shutdown: a forced flush (every buffer, complete or not), then ops still waiting for their
/// API record go out without it.
pub fn stop() {
    let Some(l) = LIVE.get() else { return };
    // SAFETY: resolved from libcupti.
    let rc = unsafe { (l.api.flush_all)(FLAG_FLUSH_FORCED) };
    if rc != CUPTI_SUCCESS {
        crate::publish::record_error(rc);
    }
    if let Ok(mut st) = l.state.lock() {
        st.corr.finish(&mut |o| crate::publish::emit(o, true));
        let s = st.corr.stats;
        if !crate::config_ref().quiet && s.without_api + s.short_records > 0 {
            crate::say(&format!(
                "CUPTI: {} GPU records, {} without their API record, {} records shorter than the CUDA 13.0 layout",
                s.gpu_records, s.without_api, s.short_records
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_calls_that_put_work_on_the_gpu_keep_api_records() {
        for n in [
            "cuLaunchKernel",
            "cuLaunchKernelEx",
            "cuGraphLaunch",
            "cuMemcpyHtoDAsync_v2",
            "cuMemsetD32Async",
            "cudaLaunchKernel_v7000",
            "cudaGraphLaunch_v10000",
            "cudaMemcpyAsync_v3020",
            "cudaMemsetAsync_ptsz_v7000",
        ] {
            assert!(is_gpu_work_api(n.as_bytes()), "{n}");
        }
        for n in [
            "cuCtxSynchronize",
            "cuStreamSynchronize",
            "cudaGetDevice_v3020",
            "cuMemAlloc_v2",
            "cudaStreamGetCaptureInfo",
            "cuGraphInstantiate",
        ] {
            assert!(!is_gpu_work_api(n.as_bytes()), "{n}");
        }
    }

    use super::*;
    use std::mem::offset_of;

    /// Offsets from the CUDA 13.0 header (gcc offsetof on cupti_activity.h, CUPTI_API_VERSION 130001).
    #[test]
    fn layouts_match_the_13_0_header() {
        assert_eq!(offset_of!(Kernel10, start), 16);
        assert_eq!(offset_of!(Kernel10, end), 24);
        assert_eq!(offset_of!(Kernel10, device_id), 40);
        assert_eq!(offset_of!(Kernel10, stream_id), 48);
        assert_eq!(offset_of!(Kernel10, grid), 52);
        assert_eq!(offset_of!(Kernel10, block), 64);
        assert_eq!(offset_of!(Kernel10, correlation_id), 92);
        assert_eq!(offset_of!(Kernel10, grid_id), 96);
        assert_eq!(offset_of!(Kernel10, name), 104);
        assert_eq!(offset_of!(Kernel10, queued), 120);
        assert_eq!(offset_of!(Kernel10, launch_type), 136);
        assert_eq!(offset_of!(Kernel10, graph_node_id), 144);
        assert_eq!(offset_of!(Kernel10, shmem_limit_config), 152);
        assert_eq!(offset_of!(Kernel10, graph_id), 156);
        assert_eq!(offset_of!(Kernel10, p_access_policy_window), 160);
        assert_eq!(offset_of!(Kernel10, channel_id), 168);
        assert_eq!(offset_of!(Kernel10, local_memory_total_v2), 192);
        assert_eq!(offset_of!(Kernel10, is_device_launched), 208);
        assert_eq!(size_of::<Kernel10>(), 216);
        assert_eq!(offset_of!(Memcpy6, copy_kind), 4);
        assert_eq!(offset_of!(Memcpy6, bytes), 8);
        assert_eq!(offset_of!(Memcpy6, start), 16);
        assert_eq!(offset_of!(Memcpy6, device_id), 32);
        assert_eq!(offset_of!(Memcpy6, stream_id), 40);
        assert_eq!(offset_of!(Memcpy6, correlation_id), 44);
        assert_eq!(offset_of!(Memcpy6, runtime_correlation_id), 48);
        assert_eq!(offset_of!(Memcpy6, reserved0), 56);
        assert_eq!(offset_of!(Memcpy6, graph_node_id), 64);
        assert_eq!(offset_of!(Memcpy6, graph_id), 72);
        assert_eq!(offset_of!(Memcpy6, channel_type), 80);
        assert_eq!(offset_of!(Memcpy6, is_device_launched), 84);
        assert_eq!(offset_of!(Memcpy6, copy_count), 88);
        assert_eq!(size_of::<Memcpy6>(), 96);
        assert_eq!(offset_of!(Memset4, value), 4);
        assert_eq!(offset_of!(Memset4, bytes), 8);
        assert_eq!(offset_of!(Memset4, start), 16);
        assert_eq!(offset_of!(Memset4, device_id), 32);
        assert_eq!(offset_of!(Memset4, stream_id), 40);
        assert_eq!(offset_of!(Memset4, correlation_id), 44);
        assert_eq!(offset_of!(Memset4, flags), 48);
        assert_eq!(offset_of!(Memset4, memory_kind), 50);
        assert_eq!(offset_of!(Memset4, graph_node_id), 64);
        assert_eq!(offset_of!(Memset4, graph_id), 72);
        assert_eq!(offset_of!(Memset4, is_device_launched), 84);
        assert_eq!(size_of::<Memset4>(), 88);
        assert_eq!(offset_of!(ApiRecord, cbid), 4);
        assert_eq!(offset_of!(ApiRecord, start), 8);
        assert_eq!(offset_of!(ApiRecord, process_id), 24);
        assert_eq!(offset_of!(ApiRecord, thread_id), 28);
        assert_eq!(offset_of!(ApiRecord, correlation_id), 32);
        assert_eq!(offset_of!(ApiRecord, return_value), 36);
        assert_eq!(size_of::<ApiRecord>(), 40);
    }

    fn api_bytes(kind: u32, cbid: u32, corr: u32, start: u64, end: u64, tid: u32) -> Vec<u8> {
        let r = ApiRecord { kind, cbid, start, end, process_id: 7, thread_id: tid, correlation_id: corr, return_value: 0 };
        // SAFETY: plain repr(C) struct without padding.
        unsafe { std::slice::from_raw_parts(&r as *const ApiRecord as *const u8, size_of::<ApiRecord>()) }.to_vec()
    }

    fn kernel_bytes(corr: u32, start: u64, end: u64, graph: u32) -> Vec<u8> {
        let mut b = vec![0u8; 216];
        b[0..4].copy_from_slice(&KIND_CONCURRENT_KERNEL.to_le_bytes());
        b[16..24].copy_from_slice(&start.to_le_bytes());
        b[24..32].copy_from_slice(&end.to_le_bytes());
        b[52..56].copy_from_slice(&4i32.to_le_bytes());
        b[64..68].copy_from_slice(&128i32.to_le_bytes());
        b[92..96].copy_from_slice(&corr.to_le_bytes());
        b[156..160].copy_from_slice(&graph.to_le_bytes());
        b
    }

    #[test]
    fn correlates_in_either_order_and_graph_nodes_share_the_call() {
        let s = crate::publish::Strings::new(64, 4096);
        let mut frames = vec![DumpFrame::ApiName { domain: DOMAIN_DRIVER, cbid: 307, name: b"cuLaunchKernel".to_vec() }];
        // Kernel before its API record (different buffers), then the API record.
        frames.push(DumpFrame::Record { rec: kernel_bytes(10, 500, 600, 0), name: b"_Z1kv".to_vec() });
        frames.push(DumpFrame::BufferEnd);
        frames.push(DumpFrame::Record { rec: api_bytes(KIND_DRIVER, 307, 10, 100, 200, 42), name: vec![] });
        frames.push(DumpFrame::BufferEnd);
        // A graph launch: one API record, three kernels.
        frames.push(DumpFrame::ApiName { domain: DOMAIN_DRIVER, cbid: 514, name: b"cuGraphLaunch".to_vec() });
        frames.push(DumpFrame::Record { rec: api_bytes(KIND_DRIVER, 514, 11, 300, 400, 43), name: vec![] });
        for i in 0..3 {
            frames.push(DumpFrame::Record { rec: kernel_bytes(11, 700 + i, 750 + i, 5), name: b"_Z1gv".to_vec() });
        }
        // A kernel whose API record never comes.
        frames.push(DumpFrame::Record { rec: kernel_bytes(99, 900, 950, 0), name: b"_Z1kv".to_vec() });
        // A truncated record.
        frames.push(DumpFrame::Record { rec: kernel_bytes(12, 1, 2, 0)[..100].to_vec(), name: vec![] });
        let mut dump = Vec::new();
        for f in &frames {
            encode_frame(&mut dump, f);
        }
        let back = read_dump(&dump).unwrap();
        assert_eq!(back, frames);
        assert!(read_dump(&dump[..dump.len() - 3]).is_err());
        let (ops, st) = replay(&back, &s);
        assert_eq!(ops.len(), 5);
        assert_eq!(st.linked, 4);
        assert_eq!(st.without_api, 1);
        assert_eq!(st.short_records, 1);
        let first = ops.iter().find(|o| o.record_index == 10).unwrap();
        assert_eq!((first.cpu_start_ns, first.cpu_end_ns, first.tid), (100, 200, 42));
        assert_eq!((first.gpu_begin_ns, first.gpu_end_ns, first.grid[0], first.block[0]), (500, 600, 4, 128));
        assert_eq!(s.get(first.api_name_id).unwrap().2, b"cuLaunchKernel");
        assert_eq!(s.get(first.kernel_name_id).unwrap().2, b"_Z1kv");
        let graph: Vec<_> = ops.iter().filter(|o| o.record_index == 11).collect();
        assert_eq!(graph.len(), 3);
        assert!(graph.iter().all(|o| o.flags & wire::OP_IS_GRAPH != 0 && o.tid == 43 && o.cpu_start_ns == 300));
        let lost = ops.iter().find(|o| o.record_index == 99).unwrap();
        assert_eq!(lost.flags & wire::OP_HAS_CPU_TIMES, 0);
    }

    #[test]
    fn candidate_order() {
        let c = candidates(
            Some("/x/libcupti.so.13"),
            &[],
            &["/v/site-packages/nvidia/cu13/lib/libcudart.so.13".into(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1".into()],
        );
        assert_eq!(c[0], "/x/libcupti.so.13");
        assert_eq!(c[1], "/v/site-packages/nvidia/cu13/lib/libcupti.so.13");
        assert_eq!(c.last().unwrap(), "libcupti.so");
        let c = candidates(None, &["/a/libcupti.so.13".into()], &[]);
        assert_eq!(c[0], "/a/libcupti.so.13", "a copy already loaded (torch's kineto) comes first");
    }
}
