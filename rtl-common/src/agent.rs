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
const OP_FLAGS_ALL: u8 = 0x3f;

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

/// Why a batch was rejected. Offsets are byte offsets into the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a batch header.
    TooShort {
        have: usize,
    },
    BadMagic(u32),
    BadVersion(u16),
    BadHeaderLen(u16),
    /// `total_len` disagrees with the bytes given (or exceeds them, for [`decode_prefix`]).
    BadTotalLen {
        total_len: u32,
        have: usize,
    },
    /// A record header or body runs past the end of the batch (e.g. `record_count` too high).
    RecordPastEnd {
        offset: usize,
        index: u32,
    },
    /// A record length that is not a multiple of 8, too small, or wrong for its kind.
    BadRecordLen {
        offset: usize,
        kind: u16,
        len: u32,
    },
    UnknownKind {
        offset: usize,
        kind: u16,
    },
    /// A string whose `len` does not match its record length or exceeds [`STRING_MAX`].
    BadString {
        offset: usize,
        len: u32,
    },
    /// An enum field out of range (`field` names it).
    BadField {
        offset: usize,
        field: &'static str,
    },
    /// Bytes left after `record_count` records.
    TrailingBytes {
        offset: usize,
    },
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::TooShort { have } => write!(f, "agent batch too short ({have} bytes)"),
            Self::BadMagic(m) => write!(f, "agent batch: bad magic {m:#x}"),
            Self::BadVersion(v) => write!(f, "agent batch: version {v}, expected {VERSION_MIN}..={VERSION}"),
            Self::BadHeaderLen(l) => write!(f, "agent batch: header length {l}"),
            Self::BadTotalLen { total_len, have } => {
                write!(f, "agent batch: total_len {total_len} but {have} bytes")
            }
            Self::RecordPastEnd { offset, index } => {
                write!(f, "agent batch: record {index} at {offset} runs past the end")
            }
            Self::BadRecordLen { offset, kind, len } => {
                write!(f, "agent batch: record kind {kind} at {offset} has length {len}")
            }
            Self::UnknownKind { offset, kind } => {
                write!(f, "agent batch: unknown record kind {kind} at {offset}")
            }
            Self::BadString { offset, len } => {
                write!(f, "agent batch: string at {offset} with bad length {len}")
            }
            Self::BadField { offset, field } => {
                write!(f, "agent batch: record at {offset}: field {field} out of range")
            }
            Self::TrailingBytes { offset } => {
                write!(f, "agent batch: trailing bytes at {offset}")
            }
        }
    }
}

/// Reads a `T` (plain integers only, any bit pattern valid) from `bytes[off..]`.
fn read<T: Copy + Plain>(bytes: &[u8], off: usize) -> Option<T> {
    let end = off.checked_add(size_of::<T>())?;
    if end > bytes.len() {
        return None;
    }
    // SAFETY: bounds checked above; `T: Plain` is only implemented for `#[repr(C)]` structs
    // of integers, for which every bit pattern is valid; read_unaligned needs no alignment.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().add(off) as *const T) })
}

/// Reads the first `n` bytes of a `T` from `bytes[off..]` (an older, shorter layout); the rest
/// of the `T` is zero.
fn read_prefix<T: Copy + Plain + Default>(bytes: &[u8], off: usize, n: usize) -> Option<T> {
    let end = off.checked_add(n)?;
    if n > size_of::<T>() || end > bytes.len() {
        return None;
    }
    let mut v = T::default();
    // SAFETY: `T: Plain` (integers only, every bit pattern valid); n <= size_of::<T>() and the
    // source range was bounds checked.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr().add(off), &mut v as *mut T as *mut u8, n) };
    Some(v)
}

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

/// A validated record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    GpuOp(GpuOp),
    String(Str<'a>),
    ClockSync(ClockSync),
    Counters(Counters),
    Info(Info),
}

/// A string record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Str<'a> {
    pub id: u32,
    pub kind: u8,
    pub flags: u8,
    pub bytes: &'a [u8],
}

/// A validated batch.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> Batch<'a> {
    /// The validated records, in order.
    pub fn records(&self) -> Records<'a> {
        Records { bytes: self.bytes, off: size_of::<BatchHeader>(), left: self.header.record_count, version: self.header.version }
    }
    /// The batch's bytes (`header.total_len` of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Iterator over the records of a [`Batch`] (already validated by [`decode`]).
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    off: usize,
    left: u32,
    version: u16,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        if self.left == 0 {
            return None;
        }
        // Cannot fail: decode() ran the same parser over the same bytes.
        match parse_record(self.bytes, self.off, 0, self.version) {
            Ok((rec, len)) => {
                self.left -= 1;
                self.off += len;
                Some(rec)
            }
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

fn parse_record(bytes: &[u8], off: usize, index: u32, version: u16) -> Result<(Record<'_>, usize), DecodeError> {
    let rh: RecordHeader = read(bytes, off).ok_or(DecodeError::RecordPastEnd { offset: off, index })?;
    let len = rh.len as usize;
    let bad_len = DecodeError::BadRecordLen { offset: off, kind: rh.kind, len: rh.len };
    if len < size_of::<RecordHeader>() || !len.is_multiple_of(8) {
        return Err(bad_len);
    }
    match off.checked_add(len) {
        Some(end) if end <= bytes.len() => {}
        _ => return Err(DecodeError::RecordPastEnd { offset: off, index }),
    }
    let kind = RecordKind::from_u16(rh.kind).ok_or(DecodeError::UnknownKind { offset: off, kind: rh.kind })?;
    let field = |field| DecodeError::BadField { offset: off, field };
    let fixed = |size: usize| if len == size { Ok(()) } else { Err(bad_len) };
    let rec = match kind {
        RecordKind::GpuOp => {
            let size = if version == 1 { GPU_OP_V1 } else { size_of::<GpuOp>() };
            fixed(size)?;
            let r: GpuOp = read_prefix(bytes, off, size).ok_or(bad_len)?;
            Source::from_u8(r.source).ok_or(field("source"))?;
            OpKind::from_u8(r.op).ok_or(field("op"))?;
            ClockDomain::from_u8(r.cpu_clock).ok_or(field("cpu_clock"))?;
            ClockDomain::from_u8(r.gpu_clock).ok_or(field("gpu_clock"))?;
            if r.flags & !OP_FLAGS_ALL != 0 || (version == 1 && r.flags & OP_HAS_THREAD_SEQ != 0) {
                return Err(field("flags"));
            }
            Record::GpuOp(r)
        }
        RecordKind::String => {
            if len < size_of::<StringHead>() {
                return Err(bad_len);
            }
            let h: StringHead = read(bytes, off).ok_or(bad_len)?;
            let slen = h.len as usize;
            if slen > STRING_MAX || align8(size_of::<StringHead>() + slen) != len {
                return Err(DecodeError::BadString { offset: off, len: h.len });
            }
            if h.kind != STR_KERNEL && h.kind != STR_API {
                return Err(field("string kind"));
            }
            if h.id == 0 {
                return Err(field("string id"));
            }
            let start = off + size_of::<StringHead>();
            Record::String(Str { id: h.id, kind: h.kind, flags: h.flags, bytes: &bytes[start..start + slen] })
        }
        RecordKind::ClockSync => {
            fixed(size_of::<ClockSync>())?;
            let r: ClockSync = read(bytes, off).ok_or(bad_len)?;
            ClockDomain::from_u8(r.gpu_clock).ok_or(field("gpu_clock"))?;
            Record::ClockSync(r)
        }
        RecordKind::Counters => {
            // The old, shorter record too: appended fields read as 0.
            if len != size_of::<Counters>() && len != COUNTERS_LEN_V1 && len != COUNTERS_LEN_V2 {
                return Err(bad_len);
            }
            Record::Counters(read_prefix(bytes, off, len).ok_or(bad_len)?)
        }
        RecordKind::Info => {
            let size = if version == 1 { INFO_V1 } else { size_of::<Info>() };
            fixed(size)?;
            let r: Info = read_prefix(bytes, off, size).ok_or(bad_len)?;
            Source::from_u8(r.source).ok_or(field("source"))?;
            Status::from_u8(r.status).ok_or(field("status"))?;
            if r.profiler_api > API_V0_1 {
                return Err(field("profiler_api"));
            }
            Record::Info(r)
        }
    };
    Ok((rec, len))
}

fn check_header(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    let h: BatchHeader = read(bytes, 0).ok_or(DecodeError::TooShort { have: bytes.len() })?;
    if h.magic != MAGIC {
        return Err(DecodeError::BadMagic(h.magic));
    }
    if !(VERSION_MIN..=VERSION).contains(&h.version) {
        return Err(DecodeError::BadVersion(h.version));
    }
    if h.header_len as usize != size_of::<BatchHeader>() {
        return Err(DecodeError::BadHeaderLen(h.header_len));
    }
    let total = h.total_len as usize;
    if total < size_of::<BatchHeader>() || total > bytes.len() || total > crate::AGENT_BATCH_MAX {
        return Err(DecodeError::BadTotalLen { total_len: h.total_len, have: bytes.len() });
    }
    Ok(h)
}

fn validate(bytes: &[u8], h: BatchHeader) -> Result<Batch<'_>, DecodeError> {
    let mut off = size_of::<BatchHeader>();
    for i in 0..h.record_count {
        let (_, len) = parse_record(bytes, off, i, h.version)?;
        off += len;
    }
    if off != bytes.len() {
        return Err(DecodeError::TrailingBytes { offset: off });
    }
    Ok(Batch { header: h, bytes })
}

/// Validates one batch that is exactly `bytes` (what one `rtl_agent_publish` call carried).
pub fn decode(bytes: &[u8]) -> Result<Batch<'_>, DecodeError> {
    let h = check_header(bytes)?;
    if h.total_len as usize != bytes.len() {
        return Err(DecodeError::BadTotalLen { total_len: h.total_len, have: bytes.len() });
    }
    validate(bytes, h)
}

/// Validates the batch at the start of `bytes` (a stream of concatenated batches, e.g. a dump
/// file) and returns it with its length.
pub fn decode_prefix(bytes: &[u8]) -> Result<(Batch<'_>, usize), DecodeError> {
    let h = check_header(bytes)?;
    let total = h.total_len as usize;
    Ok((validate(&bytes[..total], h)?, total))
}

/// Builds one batch in a caller-supplied buffer (no allocation).
pub struct BatchWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    count: u32,
}

impl<'a> BatchWriter<'a> {
    /// Starts a batch; `buf` is cut to [`crate::AGENT_BATCH_MAX`]. `None` if it is too small.
    pub fn new(buf: &'a mut [u8], pid: u32, batch_seq: u64) -> Option<Self> {
        let cap = buf.len().min(crate::AGENT_BATCH_MAX);
        if cap < size_of::<BatchHeader>() {
            return None;
        }
        let mut w = BatchWriter { buf: &mut buf[..cap], len: 0, count: 0 };
        let h = BatchHeader {
            magic: MAGIC,
            version: VERSION,
            header_len: size_of::<BatchHeader>() as u16,
            total_len: 0,
            record_count: 0,
            pid,
            flags: 0,
            batch_seq,
        };
        w.put(as_bytes(&h));
        Some(w)
    }

    fn put(&mut self, b: &[u8]) {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    /// Bytes still free.
    pub fn room(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Records written so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    fn push_fixed<T: Plain>(&mut self, kind: RecordKind, mut v: T, hdr: impl FnOnce(&mut T) -> &mut RecordHeader) -> bool {
        if self.room() < size_of::<T>() {
            return false;
        }
        *hdr(&mut v) = RecordHeader { kind: kind as u16, _reserved: 0, len: size_of::<T>() as u32 };
        self.put(as_bytes(&v));
        self.count += 1;
        true
    }

    /// Appends a GPU op (its `hdr` is filled in). False if it does not fit.
    pub fn push_gpu_op(&mut self, op: &GpuOp) -> bool {
        self.push_fixed(RecordKind::GpuOp, *op, |r| &mut r.hdr)
    }
    pub fn push_clock(&mut self, c: &ClockSync) -> bool {
        self.push_fixed(RecordKind::ClockSync, *c, |r| &mut r.hdr)
    }
    pub fn push_counters(&mut self, c: &Counters) -> bool {
        self.push_fixed(RecordKind::Counters, *c, |r| &mut r.hdr)
    }
    pub fn push_info(&mut self, i: &Info) -> bool {
        self.push_fixed(RecordKind::Info, *i, |r| &mut r.hdr)
    }

    /// Bytes a string record of `len` bytes takes (after cutting to [`STRING_MAX`]).
    pub fn string_record_len(len: usize) -> usize {
        align8(size_of::<StringHead>() + len.min(STRING_MAX))
    }

    /// Appends a string record, cut to [`STRING_MAX`] bytes (flagged). False if it does not fit
    /// or `id` is 0.
    pub fn push_string(&mut self, id: u32, kind: u8, flags: u8, bytes: &[u8]) -> bool {
        let (bytes, flags) = if bytes.len() > STRING_MAX { (&bytes[..STRING_MAX], flags | STR_TRUNCATED) } else { (bytes, flags) };
        let len = Self::string_record_len(bytes.len());
        if id == 0 || self.room() < len {
            return false;
        }
        let h = StringHead {
            hdr: RecordHeader { kind: RecordKind::String as u16, _reserved: 0, len: len as u32 },
            id,
            kind,
            flags,
            _pad0: 0,
            len: bytes.len() as u32,
            _pad1: 0,
        };
        let start = self.len;
        self.put(as_bytes(&h));
        self.put(bytes);
        let end = start + len;
        self.buf[self.len..end].fill(0);
        self.len = end;
        self.count += 1;
        true
    }

    /// Completes the header; returns the batch's bytes.
    pub fn finish(self, flags: u32) -> &'a [u8] {
        self.finish_seq(flags, None)
    }

    /// Completes the header, setting `batch_seq` now when given (a publisher numbers only the
    /// batches it actually hands over); returns the batch's bytes.
    pub fn finish_seq(self, flags: u32, batch_seq: Option<u64>) -> &'a [u8] {
        let BatchWriter { buf, len, count } = self;
        let mut h: BatchHeader = read(buf, 0).unwrap_or_default();
        h.total_len = len as u32;
        h.record_count = count;
        h.flags = flags;
        if let Some(s) = batch_seq {
            h.batch_seq = s;
        }
        buf[..size_of::<BatchHeader>()].copy_from_slice(as_bytes(&h));
        &buf[..len]
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn op(i: u64) -> GpuOp {
        GpuOp {
            source: Source::Clr as u8,
            op: OpKind::Dispatch as u8,
            flags: OP_HAS_CPU_TIMES | OP_HAS_THREAD_HASH,
            cpu_clock: ClockDomain::Realtime as u8,
            gpu_clock: ClockDomain::Realtime as u8,
            thread_id: 0xfedc_ba98_7654_3210 ^ i,
            gpu_begin_ns: 1_000 + i,
            gpu_end_ns: 2_000 + i,
            grid: [1024, 1, 1],
            block: [256, 1, 1],
            kernel_name_id: 1,
            api_name_id: 2,
            record_index: i,
            op_count: 1,
            ..Default::default()
        }
    }

    fn sample(buf: &mut [u8]) -> Vec<u8> {
        let mut w = BatchWriter::new(buf, 42, 7).unwrap();
        assert!(w.push_info(&Info { source: 1, profiler_api: API_V0_1, ..Default::default() }));
        assert!(w.push_string(1, STR_KERNEL, 0, b"void k<float>(float*)"));
        assert!(w.push_string(2, STR_API, 0, b"hipLaunchKernel"));
        assert!(w.push_clock(&ClockSync { realtime_ns: 5, monotonic_ns: 3, gpu_clock: 1, ..Default::default() }));
        assert!(w.push_gpu_op(&op(0)));
        assert!(w.push_gpu_op(&op(1)));
        assert!(w.push_counters(&Counters { records_seen: 2, ..Default::default() }));
        w.finish(BATCH_FINAL).to_vec()
    }

    #[test]
    fn roundtrip() {
        let mut buf = [0u8; crate::AGENT_BATCH_MAX];
        let bytes = sample(&mut buf);
        let b = decode(&bytes).unwrap();
        assert_eq!(b.header.pid, 42);
        assert_eq!(b.header.batch_seq, 7);
        assert_eq!(b.header.flags, BATCH_FINAL);
        let recs: Vec<_> = b.records().collect();
        assert_eq!(recs.len(), 7);
        match recs[1] {
            Record::String(s) => {
                assert_eq!(s.bytes, b"void k<float>(float*)");
                assert_eq!(s.id, 1);
            }
            r => panic!("{r:?}"),
        }
        match recs[5] {
            Record::GpuOp(o) => {
                assert_eq!(o.thread_id, 0xfedc_ba98_7654_3210 ^ 1, "64-bit thread id kept whole");
                assert_eq!(o.hdr.kind, RecordKind::GpuOp as u16);
                assert_eq!(o.record_index, 1);
            }
            r => panic!("{r:?}"),
        }
        // The stream form.
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        let (b1, n) = decode_prefix(&two).unwrap();
        assert_eq!(n, bytes.len());
        assert_eq!(b1.records().count(), 7);
        assert!(decode_prefix(&two[n..]).is_ok());
    }

    #[test]
    fn rejects_bad_headers() {
        let mut buf = [0u8; crate::AGENT_BATCH_MAX];
        let bytes = sample(&mut buf);
        assert_eq!(decode(&bytes[..10]).unwrap_err(), DecodeError::TooShort { have: 10 });
        let mut b = bytes.clone();
        b[0] ^= 1;
        assert!(matches!(decode(&b), Err(DecodeError::BadMagic(_))));
        let mut b = bytes.clone();
        b[4] = 9;
        assert_eq!(decode(&b).unwrap_err(), DecodeError::BadVersion(9));
        let mut b = bytes.clone();
        b[6] = 31;
        assert_eq!(decode(&b).unwrap_err(), DecodeError::BadHeaderLen(31));
        // Truncated: total_len past the bytes.
        assert!(matches!(decode(&bytes[..bytes.len() - 8]), Err(DecodeError::BadTotalLen { .. })));
        // Extra bytes.
        let mut b = bytes.clone();
        b.extend_from_slice(&[0; 8]);
        assert!(matches!(decode(&b), Err(DecodeError::BadTotalLen { .. })));
    }

    fn set_u32(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_le_bytes());
    }

    #[test]
    fn rejects_bad_counts_and_lengths() {
        let mut buf = [0u8; crate::AGENT_BATCH_MAX];
        let bytes = sample(&mut buf);
        // record_count past the buffer.
        let mut b = bytes.clone();
        set_u32(&mut b, 12, 8);
        assert!(matches!(decode(&b), Err(DecodeError::RecordPastEnd { index: 7, .. })));
        // record_count short: trailing bytes.
        let mut b = bytes.clone();
        set_u32(&mut b, 12, 6);
        assert!(matches!(decode(&b), Err(DecodeError::TrailingBytes { .. })));
        // First record (Info, at 32): wrong length for its kind.
        let mut b = bytes.clone();
        set_u32(&mut b, 32 + 4, 40);
        assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
        // Length not a multiple of 8 / zero.
        let mut b = bytes.clone();
        set_u32(&mut b, 32 + 4, 33);
        assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
        let mut b = bytes.clone();
        set_u32(&mut b, 32 + 4, 0);
        assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
        // Unknown kind.
        let mut b = bytes.clone();
        b[32] = 99;
        assert!(matches!(decode(&b), Err(DecodeError::UnknownKind { kind: 99, .. })));
        // String (at 80): length larger than its record, and not matching it.
        let mut b = bytes.clone();
        set_u32(&mut b, 80 + 16, 200);
        assert!(matches!(decode(&b), Err(DecodeError::BadString { .. })));
        let mut b = bytes.clone();
        set_u32(&mut b, 80 + 16, 3);
        assert!(matches!(decode(&b), Err(DecodeError::BadString { .. })));
        // String id 0.
        let mut b = bytes.clone();
        set_u32(&mut b, 80 + 8, 0);
        assert!(matches!(decode(&b), Err(DecodeError::BadField { .. })));
    }

    /// A version-1 batch (152-byte ops, 32-byte info, what older agents and recorded fixtures
    /// hold) still decodes; the new fields read as 0; a v1 op cannot claim a thread_seq.
    #[test]
    fn reads_version_1() {
        let mut b = Vec::new();
        let mut o = op(3);
        o.hdr = RecordHeader { kind: RecordKind::GpuOp as u16, _reserved: 0, len: 152 };
        let i = Info { hdr: RecordHeader { kind: RecordKind::Info as u16, _reserved: 0, len: 32 }, source: 1, ..Default::default() };
        let h = BatchHeader {
            magic: MAGIC,
            version: 1,
            header_len: 32,
            total_len: 32 + 152 + 32,
            record_count: 2,
            pid: 5,
            flags: 0,
            batch_seq: 0,
        };
        b.extend_from_slice(as_bytes(&h));
        b.extend_from_slice(&as_bytes(&o)[..152]);
        b.extend_from_slice(&as_bytes(&i)[..32]);
        let batch = decode(&b).unwrap();
        let recs: Vec<_> = batch.records().collect();
        match recs[0] {
            Record::GpuOp(g) => {
                assert_eq!(g.record_index, 3);
                assert_eq!(g.op_count, 1);
                assert_eq!((g.thread_seq, g.seq_epoch), (0, 0));
            }
            r => panic!("{r:?}"),
        }
        match recs[1] {
            Record::Info(x) => assert_eq!((x.source, x.anchor_lo_ns, x.anchor_hi_ns), (1, 0, 0)),
            r => panic!("{r:?}"),
        }
        // A 160-byte op in a version-1 batch is the wrong length.
        let mut long = b.clone();
        long[4] = 1;
        set_u32(&mut long, 32 + 4, 160);
        assert!(decode(&long).is_err());
        // The new flag is not a version-1 flag.
        let flags_at = 32 + 11;
        let mut f = b.clone();
        f[flags_at] |= OP_HAS_THREAD_SEQ;
        assert_eq!(decode(&f).unwrap_err(), DecodeError::BadField { offset: 32, field: "flags" });
        // Version 0 and 3 are refused.
        for v in [0u8, 3] {
            let mut x = b.clone();
            x[4] = v;
            assert_eq!(decode(&x).unwrap_err(), DecodeError::BadVersion(v as u16));
        }
    }

    #[test]
    fn rejects_bad_enums() {
        let mut buf = [0u8; crate::AGENT_BATCH_MAX];
        let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
        let mut o = op(0);
        o.op = 7;
        assert!(w.push_gpu_op(&o));
        let b = w.finish(0).to_vec();
        assert_eq!(decode(&b).unwrap_err(), DecodeError::BadField { offset: 32, field: "op" });
    }

    /// An agent from before the appended counters (88-byte Counters record) still decodes; the
    /// appended fields read 0. A record of any other length is rejected.
    #[test]
    fn old_counters_record_and_new_values() {
        let mut buf = [0u8; 1024];
        let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
        let mut o = op(0);
        o.op = OpKind::GraphExecution as u8;
        o.op_count = 21;
        assert!(w.push_gpu_op(&o));
        assert!(w.push_info(&Info { source: Source::Hsa as u8, captures: CAP_KERNELS | CAP_GRAPH_SPANS, ..Default::default() }));
        let b = w.finish(0).to_vec();
        let recs: Vec<_> = decode(&b).unwrap().records().collect();
        assert!(matches!(recs[0], Record::GpuOp(g) if g.op == 4 && g.op_count == 21));
        assert!(matches!(recs[1], Record::Info(i) if i.captures == CAP_KERNELS | CAP_GRAPH_SPANS));
        // Hand-made old batch: header + an 88-byte counters record.
        let c = Counters { records_seen: 5, dump_errors: 9, graph_spans: 77, ..Default::default() };
        let mut old = Vec::new();
        let h = BatchHeader {
            magic: MAGIC,
            version: VERSION,
            header_len: 32,
            total_len: (32 + COUNTERS_LEN_V1) as u32,
            record_count: 1,
            pid: 1,
            flags: 0,
            batch_seq: 0,
        };
        old.extend_from_slice(as_bytes(&h));
        old.extend_from_slice(&as_bytes(&c)[..COUNTERS_LEN_V1]);
        set_u32(&mut old, 32, RecordKind::Counters as u32);
        set_u32(&mut old, 36, COUNTERS_LEN_V1 as u32);
        match decode(&old).unwrap().records().next().unwrap() {
            Record::Counters(d) => {
                assert_eq!((d.records_seen, d.dump_errors), (5, 9));
                assert_eq!((d.graph_spans, d.barriers_untimed, d.other_packets), (0, 0, 0), "appended fields absent: 0");
            }
            r => panic!("{r:?}"),
        }
        let mut bad = old.clone();
        bad.extend_from_slice(&[0; 8]);
        set_u32(&mut bad, 8, (32 + COUNTERS_LEN_V1 + 8) as u32);
        set_u32(&mut bad, 36, (COUNTERS_LEN_V1 + 8) as u32);
        assert!(matches!(decode(&bad), Err(DecodeError::BadRecordLen { .. })));
    }

    #[test]
    fn writer_limits() {
        let mut buf = [0u8; 8192];
        let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
        let mut n = 0;
        while w.push_gpu_op(&op(n)) {
            n += 1;
        }
        assert_eq!(n as usize, (crate::AGENT_BATCH_MAX - 32) / 160);
        let b = w.finish(0);
        assert!(b.len() <= crate::AGENT_BATCH_MAX);
        assert_eq!(decode(b).unwrap().records().count() as u64, n);
        // Long strings are cut and flagged.
        let mut buf = [0u8; 4096];
        let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
        let long = [b'x'; 3000];
        assert!(w.push_string(3, STR_KERNEL, 0, &long));
        assert!(!w.push_string(0, STR_KERNEL, 0, b"id zero"));
        let b = w.finish(0);
        match decode(b).unwrap().records().next().unwrap() {
            Record::String(s) => {
                assert_eq!(s.bytes.len(), STRING_MAX);
                assert_eq!(s.flags, STR_TRUNCATED);
            }
            r => panic!("{r:?}"),
        }
    }

    /// xorshift64*: deterministic, no deps.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Property: decode never panics, and whatever it accepts iterates to exactly
    /// `record_count` records inside the buffer. Inputs: random bytes, random mutations and
    /// truncations of valid batches, random headers with random counts.
    #[test]
    fn fuzz_random_and_truncated() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut buf = [0u8; crate::AGENT_BATCH_MAX];
        let valid = sample(&mut buf);
        let mut accepted = 0;
        for iter in 0..200_000u32 {
            let mut b: Vec<u8> = match iter % 4 {
                0 => {
                    let n = (rng.next() % 600) as usize;
                    (0..n).map(|_| rng.next() as u8).collect()
                }
                1 => valid[..(rng.next() as usize % (valid.len() + 1))].to_vec(),
                2 => {
                    let mut v = valid.clone();
                    for _ in 0..1 + rng.next() % 4 {
                        let i = rng.next() as usize % v.len();
                        v[i] = rng.next() as u8;
                    }
                    v
                }
                _ => {
                    let mut v = valid[..32].to_vec();
                    let n = (rng.next() % 400) as usize;
                    v.extend((0..n).map(|_| rng.next() as u8));
                    let len = v.len() as u32;
                    set_u32(&mut v, 8, len);
                    set_u32(&mut v, 12, (rng.next() % 6) as u32);
                    v
                }
            };
            if iter % 7 == 0 && !b.is_empty() {
                let cut = rng.next() as usize % b.len();
                b.truncate(cut);
            }
            for (batch, n) in [decode(&b).map(|x| (x, b.len())), decode_prefix(&b)].into_iter().flatten() {
                accepted += 1;
                assert!(n <= b.len());
                assert_eq!(batch.bytes().len(), batch.header.total_len as usize);
                assert_eq!(batch.records().count(), batch.header.record_count as usize);
            }
        }
        assert!(accepted > 0, "some mutations keep the batch valid");
    }
}
