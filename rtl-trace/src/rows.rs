//! What the joiner hands the writer: one value per trace-table row, strings not yet interned.

/// A completed (or force-closed) API call: a `rocpd_api` row. `id` is also its correlation id.
#[derive(Debug, Clone)]
pub struct ApiRow {
    pub id: i64,
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub end: u64,
    pub name: std::sync::Arc<str>,
}

/// Why a call row was closed without its return (`rtl_api.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum CallStatus {
    Complete = 0,
    /// The thread exited (or was killed) inside the call.
    ThreadExited = 1,
    /// The process called exec inside the call.
    Exec = 2,
    /// The trace ended while the call was in progress.
    TraceEnded = 3,
    /// The return of an inner call was lost (ring-buffer drop), so this call was closed when a
    /// return further out on the same thread arrived.
    Unmatched = 4,
    /// A call the in-process profiler recorded but the probes did not see (or could not single
    /// out): written from the profiler's record so its GPU work has an API row.
    ProfilerOnly = 5,
}

/// `rtl_api_meaning`: what `rtl_api.ret` and `a0..a3` hold for one API in this trace (the
/// joiner emits it before the API's first call row).
#[derive(Debug, Clone)]
pub struct ApiMeaningRow {
    pub name: std::sync::Arc<str>,
    pub ret: crate::api_meaning::RetKind,
    pub args: [Option<crate::api_meaning::ArgMeaning>; 4],
}

/// `rtl_api`: return value, status, decoded arguments.
#[derive(Debug, Clone)]
pub struct RtlApiRow {
    pub id: i64,
    pub ret: Option<i64>,
    pub status: CallStatus,
    pub a: [Option<i64>; 4],
}

/// `rocpd_kernelapi`.
#[derive(Debug, Clone)]
pub struct KernelRow {
    pub id: i64,
    pub stream: u64,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shmem: u64,
    pub name: String,
}

/// `rocpd_copyapi`.
#[derive(Debug, Clone)]
pub struct CopyRow {
    pub id: i64,
    pub stream: u64,
    pub size: u64,
    pub width: u64,
    pub height: u64,
    pub kind: i64,
    pub dst: u64,
    pub src: u64,
    pub sync: bool,
}

/// How a GPU op was linked to its API call (`rtl_op.link`; docs/trace-format.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i64)]
pub enum LinkKind {
    /// Not linked to a traced call, the thread was never seen by the probes (the op's API row
    /// is the profiler's record, `rtl_api.status` 5).
    UnlinkedNoThread = 0,
    /// By an identity both sides count: the record's per-thread, per-API number since the
    /// profiler session began, matched to the traced call with that number; time only checked.
    Correlation = 1,
    /// By order: the offset between the record numbers and the traced calls' numbers, found from
    /// the records' time windows; each call taken by one record.
    Sequence = 2,
    /// By time alone: the one call (of the thread and API) whose interval fits the profiler's.
    Time = 3,
    /// Not linked: the thread was seen, but no traced call fits the record.
    UnlinkedNoCall = 4,
    /// Not linked: more than one call fits and nothing else tells them apart.
    UnlinkedAmbiguous = 5,
}

impl LinkKind {
    pub fn is_linked(self) -> bool {
        matches!(self, Self::Correlation | Self::Sequence | Self::Time)
    }
}

/// `rocpd_op` (+ a `rocpd_api_ops` link when `api_id` is known).
#[derive(Debug, Clone)]
pub struct OpRow {
    pub gpu: i64,
    pub queue: i64,
    pub seq: i64,
    pub start: u64,
    pub end: u64,
    pub description: String,
    pub op_type: &'static str,
    pub correlation_id: i64,
    pub api_id: Option<i64>,
    /// GPU ops: how `api_id` was found (an `rtl_op` row); None for markers.
    pub link: Option<LinkKind>,
    /// GPU ops: the process that published the op (the pid the probe saw, `rtl_op.pid`).
    pub pid: Option<u32>,
    /// A node of a graph launch: its index in the launch (the GPU source's op index).
    pub node: Option<u32>,
    /// A node of a graph launch whose GPU source names it by an id instead (CUPTI's
    /// `graphNodeId`): the collector finds its position from the ids' order.
    pub node_id: Option<u64>,
    /// A replayed node: the call that created it during stream capture (`rtl_op_site`).
    pub site_api_id: Option<i64>,
}

/// `rtl_process`.
#[derive(Debug, Clone, Default)]
pub struct ProcessRow {
    pub pid: u32,
    pub ppid: Option<u32>,
    pub exe: String,
    pub cmdline: String,
    pub first_ns: u64,
    pub last_ns: u64,
    pub exited: bool,
}

/// `rtl_thread`: a thread's name (`comm`), read when the collector first saw it call.
#[derive(Debug, Clone, Default)]
pub struct ThreadRow {
    pub pid: u32,
    pub tid: u32,
    pub comm: String,
}

/// A `rocpd_metadata` entry (replaces an earlier value of the same tag).
#[derive(Debug, Clone)]
pub struct MetaRow {
    pub tag: String,
    pub value: String,
}

#[derive(Debug, Clone)]
pub enum Row {
    ApiMeaning(ApiMeaningRow),
    Api(ApiRow),
    RtlApi(RtlApiRow),
    Kernel(KernelRow),
    Copy(CopyRow),
    Op(OpRow),
    Process(ProcessRow),
    Thread(ThreadRow),
    Meta(MetaRow),
    /// Call sites and captures (`stacks/`).
    Site(crate::sites::SiteRow),
}
