//! CUPTI activity record layouts (cupti_activity.h, CUDA 13.0), read within their
//! length, and turned into wire `GpuOp`s.

use super::*;

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

pub(super) const FLAG_FLUSH_FORCED: u32 = 1;
pub(super) const THREAD_ID_TYPE_SYSTEM: u32 = 1;

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

/// Where and when an op ran: its device, its stream (also its queue: CUPTI has no other), its GPU times.
fn place(op: &mut GpuOp, device: u32, stream: u32, start: u64, end: u64) {
    op.device = device;
    op.queue = stream;
    op.stream = stream as u64;
    op.gpu_begin_ns = start;
    op.gpu_end_ns = end;
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
    let (graph, node_id, corr) = match a {
        Activity::Kernel(k) => {
            op.op = OpKind::Dispatch as u8;
            place(&mut op, k.device_id, k.stream_id, k.start, k.end);
            op.grid = k.grid.map(|g| g as u32);
            op.block = k.block.map(|g| g as u32);
            op.kernel_name_id = kernel_name_id;
            (k.graph_id, k.graph_node_id, k.correlation_id)
        }
        Activity::Memcpy(m) => {
            op.op = OpKind::Copy as u8;
            op.copy_kind = wire_copy_kind(m.copy_kind);
            place(&mut op, m.device_id, m.stream_id, m.start, m.end);
            op.bytes = m.bytes;
            (m.graph_id, m.graph_node_id, m.correlation_id)
        }
        Activity::Memset(m) => {
            op.op = OpKind::Memset as u8;
            op.copy_kind = 12;
            place(&mut op, m.device_id, m.stream_id, m.start, m.end);
            op.bytes = m.bytes;
            (m.graph_id, m.graph_node_id, m.correlation_id)
        }
        Activity::Graph(g) => {
            op.op = OpKind::GraphExecution as u8;
            // The node count is not in the record.
            op.op_count = 0;
            // INT_MAX: the graph starts with a host node (kept as CUPTI says).
            place(&mut op, g.device_id, g.stream_id, g.start, g.end);
            (g.graph_id.max(1), 0, g.correlation_id)
        }
        _ => return None,
    };
    if graph != 0 {
        op.flags |= wire::OP_IS_GRAPH;
        if node_id != 0 {
            // A node of a replay: which node, by CUPTI's id (the collector orders them).
            op.flags |= wire::OP_NODE_IS_ID;
            op.op_index = node_id as u32;
        }
    }
    op.record_index = corr as u64;
    Some(op)
}
