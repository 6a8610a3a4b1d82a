//! The agent's wire format: what `rtl_agent_publish(data, len)` hands to the collector.
//!
//! One *batch* is at most [`crate::AGENT_BATCH_MAX`] bytes: a [`BatchHeader`] followed by
//! `record_count` records. Every record starts with a [`RecordHeader`] (`kind`, total `len`
//! including the header, a multiple of 8) and is `#[repr(C)]` with explicit padding, so the
//! bytes are fully defined and the layout is the same on both sides (little-endian x86-64).
//!
//! | kind | record | size |
//! | --- | --- | --- |
//! | 1 | [`GpuOp`]: one GPU operation (dispatch, copy, barrier, memset, graph replay span) and the API call that caused it | 160 (152 in version 1) |
//! | 2 | [`StringHead`] + bytes: an interned string (kernel or API name), sent once per process | 24 + len, rounded up to 8 |
//! | 3 | [`ClockSync`]: paired CLOCK_REALTIME / CLOCK_MONOTONIC readings | 48 |
//! | 4 | [`Counters`]: the agent's cumulative counters (records seen, drops, ...) | 112 (88 before the HSA copy/span counters) |
//! | 5 | [`Info`]: which GPU source is active and what it captures ([`Info::captures`]), the profiler API version, or why there is none | 48 (32 in version 1) |
//!
//! Additions that keep the version (a decoder of this crate reads both forms, whatever the
//! batch's version): [`OpKind::GraphExecution`] (a new value), `Info::captures` (was padding,
//! always sent as 0), fields appended to [`Counters`] (the 88-byte record still decodes, the
//! appended fields read 0). A collector older than the agent rejects batches carrying what it
//! does not know (counted as `agent_batches_rejected`): upgrade the collector first (they ship
//! together).
//!
//! Strings are interned per process: a `GpuOp` refers to `kernel_name_id` / `api_name_id`
//! (0 = none/unknown), and the string record with that id is published in the same batch or an
//! earlier one of the same process (batches of one process are published in order, `batch_seq`
//! counts them from 0). A forked child starts again from `batch_seq` 0 and resends its strings;
//! so does a new image after `exec` (same pid). Collector rule: on `batch_seq == 0` for a pid,
//! forget that pid's string table.
//!
//! A dump file (`RTL_AGENT_DUMP`) is batches concatenated; [`decode_prefix`] splits it.
//!
//! Versions: 2 (current) added `GpuOp::thread_seq` / `seq_epoch` and `Info::anchor_*`; [`decode`]
//! still reads version 1 batches (152-byte ops, 32-byte info; the new fields read as 0 and no
//! `OP_HAS_THREAD_SEQ`), so an older agent's batches (and recorded fixtures) join by time.
//!
//! [`decode`] validates a whole batch up front (magic, version, sizes, counts, string lengths,
//! enum values) without allocating; [`Batch::records`] then iterates over validated records.
//!
//! # For the collector (the join)
//! * `GpuOp::thread_id` is the profiler's full 64-bit hash of the submitting thread's
//!   `std::thread::id` (`_Hash_bytes(&pthread_self, 8, 0xc70f6907)`; pthread_self = fs base), so
//!   it matches `ApiEnter::fsbase` hashed the same way. `tid` is only set (`OP_TID_KNOWN`) by
//!   sources that know it (HSA, CUPTI).
//! * CUPTI (`Source::Cupti`): `tid` is the OS tid of the thread that made the API call
//!   (`OP_TID_KNOWN`, CUPTI's thread id type SYSTEM), `cpu_*`/`gpu_*` are CLOCK_MONOTONIC (the
//!   agent registers CUPTI's timestamp callback), `record_index` is CUPTI's correlation id, and
//!   the API named may be the runtime call (`cudaLaunchKernel_v7000`) around the driver call the
//!   probes saw: the collector accepts a driver call of the same family nested inside it.
//! * `cpu_start_ns`/`cpu_end_ns` are the API call as the profiler timed it, on `cpu_clock`
//!   (CLR: CLOCK_REALTIME); they lie inside the eBPF [entry, exit] of the same call once converted
//!   with a [`ClockSync`] (`monotonic = realtime - (realtime_ns - monotonic_ns)`); the API name is
//!   the string `api_name_id`.
//! * `gpu_begin_ns`/`gpu_end_ns` are on `gpu_clock` (CLR: CLOCK_REALTIME too); convert the same
//!   way. Every node of a graph launch is its own `GpuOp` (`op_index` of `op_count`, the same
//!   API fields, `OP_IS_GRAPH`).
//! * `thread_seq` (`OP_HAS_THREAD_SEQ`, CLR) is the sequence identity of the API record: it is the
//!   n-th record (from 0) of the same thread (`thread_id`) and the same API name that the agent saw
//!   in this profiler session, counting every record (with or without GPU work, failed calls
//!   too), in the runtime's record order. Calls of one thread run one after another, so the n-th
//!   eBPF-traced call of that thread and API since the session began is this record's call. The
//!   count restarts when `seq_epoch` changes (the agent lost records it could not count).
//! * `Info::anchor_lo_ns` / `anchor_hi_ns` (CLOCK_MONOTONIC; 0: unknown) bracket the instant the
//!   session began: every API call that started after `anchor_hi_ns` has a record (and a
//!   `thread_seq`), none that started before `anchor_lo_ns` has one. In a forked child it is the
//!   fork. Unknown when the runtime had records before the agent enabled it.
//! * `Info` says why a process has no GPU records (`Status`); `Counters` are cumulative per
//!   process (the last one wins); `BATCH_FINAL` marks the agent's shutdown flush (more batches
//!   may still follow it if the runtime delivers records after the agent's shutdown).

use core::mem::size_of;

mod decode;
mod writer;

pub use decode::*;
pub use writer::*;

/// `b"RLAG"` read as a little-endian `u32`.
pub const MAGIC: u32 = u32::from_le_bytes(*b"RLAG");
/// Bumped on any incompatible change of this module.
pub const VERSION: u16 = 2;
/// The oldest version [`decode`] still reads.
pub const VERSION_MIN: u16 = 1;

/// `BatchHeader::flags`: the last batch the process publishes (agent shutdown).
pub const BATCH_FINAL: u32 = 1 << 0;

/// Head of every batch.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BatchHeader {
    /// [`MAGIC`].
    pub magic: u32,
    /// [`VERSION`].
    pub version: u16,
    /// `size_of::<BatchHeader>()`.
    pub header_len: u16,
    /// Bytes of the whole batch, header included.
    pub total_len: u32,
    /// Records following the header.
    pub record_count: u32,
    /// `getpid()` of the publishing process.
    pub pid: u32,
    /// `BATCH_*` flags.
    pub flags: u32,
    /// Per-process batch sequence number, from 0.
    pub batch_seq: u64,
}

/// Head of every record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordHeader {
    /// A [`RecordKind`] as `u16`.
    pub kind: u16,
    pub _reserved: u16,
    /// Bytes of the record, this header included; a multiple of 8.
    pub len: u32,
}

#[repr(u16)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    GpuOp = 1,
    String = 2,
    ClockSync = 3,
    Counters = 4,
    Info = 5,
}

impl RecordKind {
    pub fn from_u16(v: u16) -> Option<Self> {
        Some(match v {
            1 => Self::GpuOp,
            2 => Self::String,
            3 => Self::ClockSync,
            4 => Self::Counters,
            5 => Self::Info,
            _ => return None,
        })
    }
}

/// Where a GPU record came from (`GpuOp::source`, `Info::source`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    None = 0,
    /// HIP CLR's built-in profiler (hipProfiler*Ext).
    Clr = 1,
    /// HSA tools interface, signal capture.
    Hsa = 2,
    /// NVIDIA CUPTI activity records (kernels, copies, memsets; the API call by correlation id).
    Cupti = 3,
}

impl Source {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::None,
            1 => Self::Clr,
            2 => Self::Hsa,
            3 => Self::Cupti,
            _ => return None,
        })
    }
}

/// `GpuOp::op`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    Dispatch = 0,
    Copy = 1,
    Barrier = 2,
    /// A fill (the profiler's copy with copy_kind 12).
    Memset = 3,
    /// One graph replay as a whole: from when its first packet could start to when its last
    /// packet completed (HSA: timed by the agent's barrier packets around the replay's batch,
    /// the graph's own packets untouched); `op_count` = packets in the batch.
    GraphExecution = 4,
}

impl OpKind {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Dispatch,
            1 => Self::Copy,
            2 => Self::Barrier,
            3 => Self::Memset,
            4 => Self::GraphExecution,
            _ => return None,
        })
    }
}

/// Clock domain of a timestamp pair (`GpuOp::cpu_clock`, `GpuOp::gpu_clock`, `ClockSync::gpu_clock`).
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockDomain {
    Unknown = 0,
    /// CLOCK_REALTIME, ns (what hipProfiler*Ext documents for its CPU times).
    Realtime = 1,
    /// CLOCK_MONOTONIC, ns (`bpf_ktime_get_ns`).
    Monotonic = 2,
    /// HSA system timestamp domain converted to ns (HSA mode).
    HsaSystem = 3,
}

impl ClockDomain {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Unknown,
            1 => Self::Realtime,
            2 => Self::Monotonic,
            3 => Self::HsaSystem,
            _ => return None,
        })
    }
}

/// `GpuOp::queue` of a copy made by a DMA (SDMA) engine rather than on an AQL queue (HSA
/// source): `QUEUE_DMA` when the runtime picked the engine (`hsa_amd_memory_async_copy[_rect]`),
/// `QUEUE_DMA + 1 + n` for engine n asked for with `hsa_amd_memory_async_copy_on_engine`.
pub const QUEUE_DMA: u32 = 1_000_000;

/// `GpuOp::flags`: part of a graph launch (the profiler's is_graph bit).
pub const OP_IS_GRAPH: u8 = 1 << 0;
/// `GpuOp::flags`: `tid` holds the submitting thread's OS thread id.
pub const OP_TID_KNOWN: u8 = 1 << 1;
/// `GpuOp::flags`: `cpu_start_ns` / `cpu_end_ns` are the API call's times.
pub const OP_HAS_CPU_TIMES: u8 = 1 << 2;
/// `GpuOp::flags`: `thread_id` holds the profiler's 64-bit thread hash.
pub const OP_HAS_THREAD_HASH: u8 = 1 << 3;
/// `GpuOp::flags`: `cpu_start_ns` (= `cpu_end_ns`) is the instant the op was submitted, inside
/// the launching API call, on `cpu_clock` (HSA mode: CLOCK_MONOTONIC, on thread `tid`).
pub const OP_SUBMIT_TIME: u8 = 1 << 4;
/// `GpuOp::flags`: `thread_seq` / `seq_epoch` hold the record's per-thread, per-API sequence number.
pub const OP_HAS_THREAD_SEQ: u8 = 1 << 5;
/// `GpuOp::flags` (with `OP_IS_GRAPH`): `op_index` is the source's id of the graph node (CUPTI's
/// `graphNodeId`, low 32 bits), not the node's position in the launch. The collector turns ids
/// into positions by their order among the graph's node ids (nodes are numbered as they are
/// created, which for a captured graph is the order of the captured calls).
pub const OP_NODE_IS_ID: u8 = 1 << 6;
const OP_FLAGS_ALL: u8 = 0x7f;

/// One GPU operation, with the API call that caused it. 160 bytes (152 in version 1).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuOp {
    pub hdr: RecordHeader,
    /// A [`Source`].
    pub source: u8,
    /// An [`OpKind`].
    pub op: u8,
    /// The profiler's copy_kind (0 unknown, 1 H2D, ... 7 D2D, ... 12 fill).
    pub copy_kind: u8,
    /// `OP_*` flags.
    pub flags: u8,
    /// [`ClockDomain`] of `cpu_start_ns` / `cpu_end_ns`.
    pub cpu_clock: u8,
    /// [`ClockDomain`] of `gpu_begin_ns` / `gpu_end_ns`.
    pub gpu_clock: u8,
    /// Counting period of `thread_seq`: bumped when the agent's count restarts.
    pub seq_epoch: u16,
    pub device: u32,
    pub queue: u32,
    /// OS thread id of the submitting thread when known (`OP_TID_KNOWN`), else 0.
    pub tid: u32,
    /// Id of the API name string (e.g. "hipLaunchKernel"), 0 if none.
    pub api_name_id: u32,
    /// The profiler's 64-bit thread id (a hash of std::thread::id), full width.
    pub thread_id: u64,
    /// The API call as the profiler timed it.
    pub cpu_start_ns: u64,
    pub cpu_end_ns: u64,
    pub gpu_begin_ns: u64,
    pub gpu_end_ns: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Copy/memset bytes; 0 for dispatches.
    pub bytes: u64,
    /// hipStream_t of the call (0: default / none).
    pub stream: u64,
    /// Copy source / destination pointers (or the API record's memory2 / memory1).
    pub src: u64,
    pub dst: u64,
    /// Id of the kernel name string, 0 if none.
    pub kernel_name_id: u32,
    /// The profiler record's chunk_id (delivery sequence), 0 where the profiler has none (v0).
    pub chunk_id: u32,
    /// Index of the API record in the profiler's session (GetRecords), or the agent's own
    /// sequence number of callback-delivered records.
    pub record_index: u64,
    /// Position of this op among the API record's GPU ops (0-based) and their number.
    pub op_index: u32,
    pub op_count: u32,
    /// The API record's number among the records of its thread and API name (`OP_HAS_THREAD_SEQ`).
    pub thread_seq: u64,
}

/// Bytes of a version-1 `GpuOp` (without `thread_seq`).
const GPU_OP_V1: usize = 152;
/// Bytes of a version-1 `Info` (without the anchor).
const INFO_V1: usize = 32;

/// `StringHead::kind`.
pub const STR_KERNEL: u8 = 1;
pub const STR_API: u8 = 2;
/// `StringHead::flags`: the string was cut to fit a batch.
pub const STR_TRUNCATED: u8 = 1 << 0;
/// Longest string carried (bytes); longer ones are cut and flagged `STR_TRUNCATED`.
pub const STRING_MAX: usize = 2048;

/// Head of a string record; `len` bytes (no NUL) follow, then zero padding to a multiple of 8.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StringHead {
    pub hdr: RecordHeader,
    pub id: u32,
    /// `STR_KERNEL` or `STR_API`.
    pub kind: u8,
    /// `STR_*` flags.
    pub flags: u8,
    pub _pad0: u16,
    pub len: u32,
    pub _pad1: u32,
}

/// Paired clock readings: `monotonic_ns` is the midpoint of two CLOCK_MONOTONIC reads taken
/// around the CLOCK_REALTIME read; `uncertainty_ns` is their distance.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClockSync {
    pub hdr: RecordHeader,
    pub realtime_ns: u64,
    pub monotonic_ns: u64,
    pub uncertainty_ns: u64,
    /// [`ClockDomain`] of the GPU times of this process's `GpuOp`s.
    pub gpu_clock: u8,
    pub _pad0: [u8; 7],
    /// A reading of the GPU clock domain taken with the others, 0 if not read (same domain).
    pub gpu_ns: u64,
}

/// The agent's cumulative counters for this process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub hdr: RecordHeader,
    /// Profiler API records seen (with or without GPU activity).
    pub records_seen: u64,
    /// GPU ops seen (every spill-list node counts).
    pub gpu_ops_seen: u64,
    /// GPU ops dropped because the agent's queue was full.
    pub dropped_queue_full: u64,
    /// Batches handed to `rtl_agent_publish` (this one not included).
    pub batches_published: u64,
    /// API records with a GPU spill list (graph launches, gpu_op_count > 1).
    pub batches_with_spill: u64,
    /// Multi-packet (graph) batches left untouched (HSA mode).
    pub graph_batches_skipped: u64,
    /// Strings not interned (table full); ops then carry id 0.
    pub strings_dropped: u64,
    /// Profiler/runtime calls that returned an error.
    pub api_errors: u64,
    /// Spill lists cut short (NULL before gpu_op_count, or over the agent's bound).
    pub spill_truncated: u64,
    /// Batches that could not be written to the dump file.
    pub dump_errors: u64,
    // ---- appended (records of 88 bytes end here; a decoder reads these as 0 then) ----
    /// HSA: graph replays (multi-packet batches) timed as one span.
    pub graph_spans: u64,
    /// HSA: barrier packets without a completion signal (the runtime wants no completion):
    /// passed on untouched and untimed.
    pub barriers_untimed: u64,
    /// HSA: packets of other types (vendor-specific, invalid) passed on untouched.
    pub other_packets: u64,
    // ---- appended (records of 112 bytes end here) ----
    /// HSA: DMA copies on the application's own completion signal whose signal was reused or
    /// destroyed before the copy's end time could be read from it (not published).
    pub copies_untimed: u64,
}

/// Bytes of a [`Counters`] record from agents before `graph_spans` was appended.
pub const COUNTERS_LEN_V1: usize = 88;
/// Bytes of a [`Counters`] record from agents before `copies_untimed` was appended.
pub const COUNTERS_LEN_V2: usize = 112;

/// `Info::status`.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Active = 0,
    /// libamdhip64 was never loaded (within the wait bound).
    HipNotLoaded = 1,
    /// libamdhip64 has no hipProfiler*Ext API (stock ROCm).
    ApiMissing = 2,
    /// hipProfilerEnableExt failed (`last_error`).
    EnableFailed = 3,
    /// RTL_AGENT_GPU=none.
    Disabled = 4,
    /// The requested source is not supported by this agent build (HSA capture).
    Unsupported = 5,
    /// Another copy of the agent is active in this process.
    Duplicate = 6,
    /// Shut down.
    Stopped = 7,
    /// CUPTI source: libcupti not found or its activity API refused (`last_error`: CUptiResult).
    CuptiFailed = 8,
}

impl Status {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Self::Active,
            1 => Self::HipNotLoaded,
            2 => Self::ApiMissing,
            3 => Self::EnableFailed,
            4 => Self::Disabled,
            5 => Self::Unsupported,
            6 => Self::Duplicate,
            7 => Self::Stopped,
            8 => Self::CuptiFailed,
            _ => return None,
        })
    }
}

/// `Info::profiler_api`.
pub const API_NONE: u8 = 0;
/// v0: hipProfilerResetExt present, no chunk callback.
pub const API_V0: u8 = 1;
/// v0.1.0: hipProfilerRegisterChunkCallbackExt present.
pub const API_V0_1: u8 = 2;

/// `Info::captures` bits: what the active source times in this process (0 from agents before
/// the field existed: unknown).
pub const CAP_KERNELS: u32 = 1 << 0;
/// Copies (DMA engine copies; CLR/CUPTI: every copy).
pub const CAP_COPIES: u32 = 1 << 1;
pub const CAP_MEMSETS: u32 = 1 << 2;
/// Barrier / marker packets (event records, stream waits).
pub const CAP_BARRIERS: u32 = 1 << 3;
/// Every graph replay as one [`OpKind::GraphExecution`] span.
pub const CAP_GRAPH_SPANS: u32 = 1 << 4;
/// Every kernel / copy of a graph replay on its own (per node).
pub const CAP_GRAPH_NODES: u32 = 1 << 5;
/// Copies the runtime makes with blit kernels, named as copies (HSA: `__amd_rocclr_copy*`).
pub const CAP_BLIT_COPIES: u32 = 1 << 6;

/// `Info::mode` flags.
pub const MODE_CALLBACK: u8 = 1 << 0;
pub const MODE_HSA_TOOL: u8 = 1 << 1;
pub const MODE_PRELOAD: u8 = 1 << 2;

/// What the agent is doing in this process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Info {
    pub hdr: RecordHeader,
    /// The agent's own version: major << 16 | minor << 8 | patch.
    pub agent_version: u32,
    /// A [`Source`].
    pub source: u8,
    /// `API_*`.
    pub profiler_api: u8,
    /// `MODE_*` flags.
    pub mode: u8,
    /// A [`Status`].
    pub status: u8,
    /// The last failing return code (hipError_t), 0 if none.
    pub last_error: i32,
    /// `CAP_*` bits: what this source captures here (was padding, always 0, before).
    pub captures: u32,
    /// Record index at which this session started (hipProfilerEnableExt's start_record_id).
    pub start_record_id: u64,
    /// CLOCK_MONOTONIC bounds of the instant the profiler session began (0: unknown); see the
    /// module documentation.
    pub anchor_lo_ns: u64,
    pub anchor_hi_ns: u64,
}

const fn align8(n: usize) -> usize {
    (n + 7) & !7
}

const _: () = {
    assert!(size_of::<BatchHeader>() == 32);
    assert!(size_of::<RecordHeader>() == 8);
    assert!(size_of::<GpuOp>() == 160);
    assert!(size_of::<StringHead>() == 24);
    assert!(size_of::<ClockSync>() == 48);
    assert!(size_of::<Counters>() == 120);
    assert!(size_of::<Info>() == 48);
};

/// Marker for the wire structs: `#[repr(C)]`, integers only, no implicit padding.
///
/// # Safety
/// Implement only for such types.
pub unsafe trait Plain: Copy {}
unsafe impl Plain for BatchHeader {}
unsafe impl Plain for RecordHeader {}
unsafe impl Plain for GpuOp {}
unsafe impl Plain for StringHead {}
unsafe impl Plain for ClockSync {}
unsafe impl Plain for Counters {}
unsafe impl Plain for Info {}

/// The bytes of a wire struct.
pub fn as_bytes<T: Plain>(v: &T) -> &[u8] {
    // SAFETY: `T: Plain` has no padding, so all `size_of::<T>()` bytes are initialised.
    unsafe { core::slice::from_raw_parts(v as *const T as *const u8, size_of::<T>()) }
}

#[cfg(test)]
mod tests;
