//! The summary's data: what every output format (text, JSON, HTML) shows.

use std::collections::BTreeMap;

pub use super::gaps::{IdleGap, Occupancy, QueueGaps, Window, GRAPH_LAUNCH_APIS, IDLE_GAPS_SHOWN};
pub use super::header::Header;
pub use super::samples::Percentiles;

/// Number of bins of the GPU-busy timeline (HTML report, JSON `gpu_busy[].timeline`).
pub const TIMELINE_BINS: usize = 400;

/// Lower bounds of the launch-latency histogram's buckets (ns; the first holds negative values:
/// a GPU start before its call's entry, from clock skew): 0, 1 us, 2 us, 5 us, 10 us ... 10 s.
pub const LATENCY_BUCKETS: &[i64] = &[
    i64::MIN,
    0,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
];

#[derive(Debug, Clone, Default)]
pub struct Stat {
    pub count: i64,
    pub sum: i64,
    pub min: i64,
    pub max: i64,
    pub lo: i64,
    pub hi: i64,
}

impl Stat {
    pub(crate) fn add(&mut self, v: i64, lo: i64, hi: i64) {
        if self.count == 0 {
            *self = Stat { count: 1, sum: v, min: v, max: v, lo, hi };
        } else {
            self.count += 1;
            self.sum += v;
            self.min = self.min.min(v);
            self.max = self.max.max(v);
            self.lo = self.lo.min(lo);
            self.hi = self.hi.max(hi);
        }
    }
    pub(crate) fn merge(&mut self, o: &Stat) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = o.clone();
            return;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.lo = self.lo.min(o.lo);
        self.hi = self.hi.max(o.hi);
    }
    pub(crate) fn mean(&self) -> i64 {
        if self.count == 0 {
            0
        } else {
            self.sum / self.count
        }
    }
}

/// One row of the top-GPU-op table.
#[derive(Debug, Clone)]
pub struct OpRow {
    pub name: String,
    pub op_type: String,
    pub stat: Stat,
    /// Duration percentiles.
    pub pct: Percentiles,
    pub pct_gpu_time: f64,
}

/// API calls that returned one error code.
#[derive(Debug, Clone)]
pub struct ErrorRow {
    pub api: String,
    pub code: i64,
    pub code_name: String,
    pub count: i64,
}

/// One row of the top-API table.
#[derive(Debug, Clone)]
pub struct ApiRow {
    pub name: String,
    pub stat: Stat,
    /// Duration percentiles.
    pub pct: Percentiles,
    pub errors: i64,
    pub unclosed: i64,
}

#[derive(Debug, Clone)]
pub struct QueueBusy {
    pub queue: i64,
    pub ops: i64,
    pub busy_ns: i64,
    pub busy_pct: f64,
}

#[derive(Debug, Clone)]
pub struct DeviceBusy {
    pub gpu: i64,
    pub ops: i64,
    /// Union of the device's op intervals (concurrent queues counted once).
    pub busy_ns: i64,
    pub wall_ns: i64,
    pub busy_pct: f64,
    pub queues: Vec<QueueBusy>,
    /// Busy fraction (0..1) of each of [`TIMELINE_BINS`] equal bins over the GPU span.
    pub timeline: Vec<f64>,
}

/// One lane of the HTML report's per-stream timeline: a process's ops on one stream of one GPU
/// (`stream` None: the stream is not known, `queue` names the hardware queue instead).
#[derive(Debug, Clone)]
pub struct StreamLane {
    pub gpu: i64,
    /// The process of the ops' calls (None: unlinked ops from a trace without `rtl_op.pid`).
    pub pid: Option<i64>,
    pub stream: Option<i64>,
    pub queue: Option<i64>,
    pub ops: i64,
    pub busy_ns: i64,
    pub busy_pct: f64,
    /// Busy fraction (0..1) of each of [`TIMELINE_BINS`] bins over the GPU span.
    pub timeline: Vec<f64>,
}

impl StreamLane {
    pub fn key(&self) -> (i64, Option<i64>, Option<i64>, Option<i64>) {
        (self.gpu, self.pid, self.queue, self.stream)
    }
    /// "stream 0x..." (0: "null stream"), or "queue N".
    pub fn label(&self) -> String {
        match (self.stream, self.queue) {
            (Some(0), _) => "null stream".to_string(),
            (Some(s), _) => format!("stream {s:#x}"),
            (None, Some(q)) => format!("queue {q}"),
            (None, None) => "?".to_string(),
        }
    }
}

/// The flame graph of GPU time by launch site: a node per frame, children called from it.
#[derive(Debug, Clone, Default)]
pub struct FlameNode {
    /// The function (demangled), or `file+0xADDR`.
    pub name: String,
    /// The file it lies in (basename; empty for the root).
    pub module: String,
    /// GPU time of the ops whose call's stack passes through here.
    pub gpu_ns: i64,
    pub ops: i64,
    /// By name (the children of one node are merged by function and file).
    pub children: Vec<FlameNode>,
}

#[derive(Debug, Clone)]
pub struct ProcessRow {
    pub pid: i64,
    pub exe: Option<String>,
    pub cmdline: Option<String>,
    pub api: Stat,
    pub gpu_ops: i64,
    pub gpu_time_ns: i64,
    /// The GPUs its calls' ops ran on: (gpu, ops, GPU time), by gpu.
    pub gpus: Vec<(i64, i64, i64)>,
}

#[derive(Debug, Clone)]
pub struct Latency {
    pub count: i64,
    pub min: i64,
    pub mean: i64,
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub max: i64,
    /// 1: percentiles over every value; k > 1: over every k-th (more than 2^25 links).
    pub sampled_every: i64,
    /// Links per bucket of [`LATENCY_BUCKETS`] (over every link).
    pub histogram: Vec<i64>,
}

/// Launch latency of one kernel (or op) name.
#[derive(Debug, Clone)]
pub struct KernelLatency {
    pub name: String,
    pub count: i64,
    pub min: i64,
    pub mean: i64,
    pub max: i64,
    pub pct: Percentiles,
}

/// One roctx / NVTX range text's instances (like `nsys stats --report nvtx_sum`).
#[derive(Debug, Clone)]
pub struct RangeRow {
    pub name: String,
    /// `push/pop`, `start/end`, `mark` (instants), from the call that opened its first instance.
    pub style: String,
    pub count: i64,
    pub total: i64,
    pub min: i64,
    pub mean: i64,
    pub max: i64,
    pub pct: Percentiles,
    /// Share of the total time of every range.
    pub pct_time: f64,
}

/// Everything `summary` reports (also what the HTML page is drawn from).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub source: String,
    /// `--stacks` traces: GPU time by launch site (read/sites.rs), and how many sites there are.
    pub launch_sites: Vec<crate::read::sites::LaunchSite>,
    pub launch_sites_total: usize,
    /// The HTML report's lanes per GPU, process and stream (filled only for the report), and how
    /// many lanes there are (more than [`super::lanes::LANES_SHOWN`]: the busiest shown).
    pub stream_lanes: Vec<StreamLane>,
    pub stream_lanes_total: usize,
    /// The flame graph of GPU time by launch site (HTML report; None: no op's call has a stack).
    pub flame: Option<FlameNode>,
    /// Host, date, command, version, GPU source.
    pub header: Header,
    pub metadata: Vec<(String, String)>,
    pub api_calls: i64,
    pub gpu_ops: i64,
    pub markers: i64,
    pub links: i64,
    /// First / last timestamp over API calls and GPU ops.
    pub first_ns: i64,
    pub last_ns: i64,
    /// GPU span (first op start .. last op end), the busy % denominator (as RPD's `busy` view).
    pub gpu_first_ns: i64,
    pub gpu_last_ns: i64,
    pub gpu_time_ns: i64,
    pub ops: Vec<OpRow>,
    pub ops_total_names: usize,
    pub apis: Vec<ApiRow>,
    pub apis_total_names: usize,
    pub busy: Vec<DeviceBusy>,
    pub processes: Vec<ProcessRow>,
    pub launch_latency: Option<Latency>,
    /// Launch latency per kernel name, most links first (`--top` rows).
    pub kernel_latency: Vec<KernelLatency>,
    /// roctx / NVTX ranges by total time (`--top` rows), and how many names there are.
    pub ranges: Vec<RangeRow>,
    pub ranges_total_names: usize,
    /// The window occupancy and queue gaps were measured over (`auto` unless asked).
    pub window: Window,
    /// Occupancy per device in its window.
    pub occupancy: Vec<Occupancy>,
    /// Inter-op gaps per queue in its device's window.
    pub queue_gaps: Vec<QueueGaps>,
    /// The largest idle gaps over all devices, with the API calls in flight.
    pub idle_gaps: Vec<IdleGap>,
    /// Every API's stats before `--top` (for `check`): name -> (stat, percentiles).
    pub all_apis: BTreeMap<String, (Stat, Percentiles)>,
    /// Metadata counters of lost data (tags naming drops / losses / overflows).
    pub dropped: Vec<(String, String)>,
    /// Why the trace is incomplete: the collector did not finish it (killed, disk full), one
    /// line per unfinished input (empty: complete, or not written by rtl-ebpf).
    pub incomplete: Vec<String>,
    pub unlinked_gpu_ops: i64,
    /// GPU ops linked to no traced call (`rtl_op.link` 0, 4, 5), by the process that published
    /// them (`rtl_op.pid`; None: a trace from before it was recorded).
    pub unlinked_by_publisher: Vec<(Option<i64>, i64)>,
    /// True when those ops (and their profiler-only API rows) were left out (`--linked-only`).
    pub linked_only: bool,
    pub unclosed_apis: i64,
    /// Unclosed calls by `rtl_api.status` reason (thread exited, exec, trace ended, unmatched).
    pub unclosed_by_reason: BTreeMap<String, i64>,
    /// Calls recorded by the in-process profiler only (`rtl_api.status` 5).
    pub profiler_only_apis: i64,
    /// GPU ops by how they were linked (`rtl_op.link`: correlation, sequence, time, unlinked
    /// reasons); empty for a trace without `rtl_op` rows.
    pub gpu_links: BTreeMap<String, i64>,
    pub api_errors: i64,
    /// Errors by API and return code, most frequent first.
    pub errors: Vec<ErrorRow>,
    /// Seconds each table scan took (for benchmarks; not part of the outputs).
    pub timings: Vec<(String, f64)>,
}
