//! `summary`: what a trace says at a glance — top GPU ops (kernels), top APIs, GPU busy per device
//! and queue, per-process breakdown, launch latency percentiles, drop / unlinked counters.
//!
//! Speed: each big table is read by ONE scan inside SQLite. SQLite's own GROUP BY sorts its
//! input (13 s for 10 M API rows here), so the grouping is done by small aggregate functions
//! registered on the connection (`rtl_group`, `rtl_busy`, `rtl_quantiles`, `rtl_distinct`) that
//! hash instead of sort; the scans run in parallel on separate connections. Only the grouped
//! results (one row per API name / kernel / device) reach the Rust side.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context as _, Result};
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{json, Value};

/// Options of `rtl-ebpf summary`.
#[derive(Debug, Clone)]
pub struct SummaryOptions {
    /// Print JSON instead of terminal tables.
    pub json: bool,
    /// Also write a self-contained HTML report there.
    pub html: Option<PathBuf>,
    /// Rows in the top-kernel / top-API tables (0: all).
    pub top: usize,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { json: false, html: None, top: 20 }
    }
}

/// Number of bins of the GPU-busy timeline (HTML report, JSON `gpu_busy[].timeline`).
pub const TIMELINE_BINS: usize = 400;

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
    fn add(&mut self, v: i64, lo: i64, hi: i64) {
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
    fn merge(&mut self, o: &Stat) {
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
    fn mean(&self) -> i64 {
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

#[derive(Debug, Clone)]
pub struct ProcessRow {
    pub pid: i64,
    pub exe: Option<String>,
    pub cmdline: Option<String>,
    pub api: Stat,
    pub gpu_ops: i64,
    pub gpu_time_ns: i64,
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
}

/// Everything `summary` reports (also what the HTML page is drawn from).
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub source: String,
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
    /// Metadata counters of lost data (tags naming drops / losses / overflows).
    pub dropped: Vec<(String, String)>,
    /// Why the trace is incomplete: the collector did not finish it (killed, disk full), one
    /// line per unfinished input (empty: complete, or not written by rtl-ebpf).
    pub incomplete: Vec<String>,
    pub unlinked_gpu_ops: i64,
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

// ---- aggregate functions ------------------------------------------------------------------

/// FxHash (rustc's): the default SipHash costs more than the rest of a step.
#[derive(Default, Clone, Copy)]
struct Fx(u64);
impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

fn int(ctx: &Context<'_>, i: usize) -> Option<i64> {
    match ctx.get_raw(i) {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    }
}

/// rtl_group(k1, k2, v [, lo, hi]): per (k1, k2): count, sum/min/max of v, min lo, max hi.
/// Result: JSON [[k1, k2, count, sum, min, max, lo, hi], ...].
struct Group;
impl Aggregate<FxMap<(i64, i64), Stat>, String> for Group {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<FxMap<(i64, i64), Stat>> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut FxMap<(i64, i64), Stat>) -> rusqlite::Result<()> {
        let k1 = int(ctx, 0).unwrap_or(i64::MIN);
        let k2 = int(ctx, 1).unwrap_or(i64::MIN);
        let v = int(ctx, 2).unwrap_or(0);
        let (lo, hi) = if ctx.len() >= 5 { (int(ctx, 3).unwrap_or(0), int(ctx, 4).unwrap_or(0)) } else { (0, 0) };
        acc.entry((k1, k2)).or_default().add(v, lo, hi);
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<FxMap<(i64, i64), Stat>>) -> rusqlite::Result<String> {
        let rows: Vec<Value> =
            acc.unwrap_or_default().into_iter().map(|((a, b), s)| json!([a, b, s.count, s.sum, s.min, s.max, s.lo, s.hi])).collect();
        Ok(Value::Array(rows).to_string())
    }
}

/// rtl_quantiles(v): exact percentiles of v. Result: JSON {count,min,mean,p50,p90,p99,max}.
struct Quantiles;

/// Values kept for exact percentiles; past this the kept set is thinned to every 2nd, 4th, ...
/// value (deterministic, in row order) and the percentiles are marked sampled. 2^25 values:
/// 256 MiB at most.
const QUANTILE_KEEP: usize = 1 << 25;

#[derive(Default)]
struct QAcc {
    kept: Vec<i64>,
    stride: u64,
    seen: u64,
    sum: i128,
    min: i64,
    max: i64,
}

impl Aggregate<QAcc, String> for Quantiles {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<QAcc> {
        Ok(QAcc { stride: 1, min: i64::MAX, max: i64::MIN, ..Default::default() })
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut QAcc) -> rusqlite::Result<()> {
        if let Some(v) = int(ctx, 0) {
            if acc.seen.is_multiple_of(acc.stride) {
                acc.kept.push(v);
                if acc.kept.len() >= QUANTILE_KEEP {
                    let mut i = 0;
                    acc.kept.retain(|_| {
                        i += 1;
                        i % 2 == 1
                    });
                    acc.stride *= 2;
                }
            }
            acc.seen += 1;
            acc.sum += v as i128;
            acc.min = acc.min.min(v);
            acc.max = acc.max.max(v);
        }
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<QAcc>) -> rusqlite::Result<String> {
        let Some(mut a) = acc.filter(|a| a.seen > 0) else {
            return Ok("null".into());
        };
        let v = &mut a.kept;
        let n = v.len();
        let mut pick = |p: f64| -> i64 {
            // nearest-rank percentile
            let k = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            *v.select_nth_unstable(k).1
        };
        let (p50, p90, p99) = (pick(0.50), pick(0.90), pick(0.99));
        Ok(json!({"count": a.seen, "min": a.min, "mean": (a.sum / a.seen as i128) as i64,
                  "p50": p50, "p90": p90, "p99": p99, "max": a.max, "sampled_every": a.stride})
        .to_string())
    }
}

/// rtl_distinct(x): number of distinct non-negative integers (a bitmap; for op ids).
struct Distinct;
impl Aggregate<Vec<u64>, i64> for Distinct {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Vec<u64>> {
        Ok(Vec::new())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut Vec<u64>) -> rusqlite::Result<()> {
        if let Some(x) = int(ctx, 0).filter(|&x| x >= 0) {
            let (w, b) = ((x / 64) as usize, x % 64);
            if acc.len() <= w {
                acc.resize(w + 1, 0);
            }
            acc[w] |= 1 << b;
        }
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<Vec<u64>>) -> rusqlite::Result<i64> {
        Ok(acc.unwrap_or_default().iter().map(|w| w.count_ones() as i64).sum())
    }
}

/// rtl_busy(gpu, queue, start, end): per device the union of op intervals and a timeline, per
/// queue the union too. Ops with gpu < 0 (markers) are ignored. Result: JSON.
struct Busy;
type BusyAcc = FxMap<i64, Vec<(i64, i64, i64)>>;
impl Aggregate<BusyAcc, String> for Busy {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<BusyAcc> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut BusyAcc) -> rusqlite::Result<()> {
        let gpu = int(ctx, 0).unwrap_or(-1);
        if gpu < 0 {
            return Ok(());
        }
        let (q, s, e) = (int(ctx, 1).unwrap_or(0), int(ctx, 2).unwrap_or(0), int(ctx, 3).unwrap_or(0));
        acc.entry(gpu).or_default().push((s, e.max(s), q));
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<BusyAcc>) -> rusqlite::Result<String> {
        let acc = acc.unwrap_or_default();
        let first = acc.values().flatten().map(|x| x.0).min().unwrap_or(0);
        let last = acc.values().flatten().map(|x| x.1).max().unwrap_or(0);
        let wall = (last - first).max(1);
        let bin = ((wall + TIMELINE_BINS as i64 - 1) / TIMELINE_BINS as i64).max(1);
        let mut devices = vec![];
        let mut gpus: Vec<_> = acc.into_iter().collect();
        gpus.sort_by_key(|g| g.0);
        for (gpu, mut iv) in gpus {
            iv.sort_unstable();
            let mut union = 0i64;
            let mut run_end = i64::MIN;
            let mut bins = vec![0f64; TIMELINE_BINS];
            let mut queues: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new(); // q -> (ops, union, run_end)
            let mut add_bins = |s: i64, e: i64| {
                // spread [s, e) over the bins it covers (integer ns: always progresses)
                let mut t = s;
                while t < e {
                    let b = (((t - first) / bin) as usize).min(TIMELINE_BINS - 1);
                    let bin_end = if b == TIMELINE_BINS - 1 { e } else { (first + (b as i64 + 1) * bin).min(e) };
                    bins[b] += (bin_end - t) as f64;
                    t = bin_end;
                }
            };
            let n = iv.len() as i64;
            for &(s, e, q) in &iv {
                let from = s.max(run_end);
                if e > from {
                    union += e - from;
                    add_bins(from, e);
                }
                run_end = run_end.max(e);
                let qe = queues.entry(q).or_insert((0, 0, i64::MIN));
                qe.0 += 1;
                let from = s.max(qe.2);
                if e > from {
                    qe.1 += e - from;
                }
                qe.2 = qe.2.max(e);
            }
            let timeline: Vec<f64> = bins.iter().map(|b| (b / bin as f64).clamp(0.0, 1.0)).collect();
            devices.push(json!({
                "gpu": gpu, "ops": n, "busy_ns": union, "wall_ns": last - first,
                "queues": queues.iter().map(|(q, v)| json!([q, v.0, v.1])).collect::<Vec<_>>(),
                "timeline": timeline,
            }));
        }
        Ok(json!({"first": first, "last": last, "devices": devices}).to_string())
    }
}

fn register(conn: &Connection) -> Result<()> {
    let f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_aggregate_function("rtl_group", 3, f, Group)?;
    conn.create_aggregate_function("rtl_group", 5, f, Group)?;
    conn.create_aggregate_function("rtl_quantiles", 1, f, Quantiles)?;
    conn.create_aggregate_function("rtl_distinct", 1, f, Distinct)?;
    conn.create_aggregate_function("rtl_busy", 4, f, Busy)?;
    Ok(())
}

fn groups(conn: &Connection, sql: &str) -> Result<Vec<(i64, i64, Stat)>> {
    let s: Option<String> = conn.query_row(sql, [], |r| r.get(0))?;
    let v: Value = serde_json::from_str(s.as_deref().unwrap_or("[]"))?;
    let mut out = vec![];
    for row in v.as_array().cloned().unwrap_or_default() {
        let g = |i: usize| row[i].as_i64().unwrap_or(0);
        out.push((g(0), g(1), Stat { count: g(2), sum: g(3), min: g(4), max: g(5), lo: g(6), hi: g(7) }));
    }
    Ok(out)
}

// ---- the queries ---------------------------------------------------------------------------

#[derive(Default)]
struct Scans {
    api: Vec<(i64, i64, Stat)>,
    status: Vec<(i64, i64, Stat)>,
    ops: Vec<(i64, i64, Stat)>,
    busy: Value,
    link_pid: Vec<(i64, i64, Stat)>,
    latency: Value,
    linked_ops: i64,
    links: i64,
    timings: Vec<(String, f64)>,
}

type Job = fn(&Connection, &Mutex<Scans>) -> Result<()>;

fn job_api(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let g = groups(c, "SELECT rtl_group(pid, apiName_id, end - start, start, end) FROM rocpd_api")?;
    out.lock().unwrap().api = g;
    Ok(())
}

fn job_status(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    // Calls that are not plain successes, keyed (apiName_id, ret * 16 + status * 2 + error)
    // (ret only for errors): statuses 1-4 never returned, 5 was seen by the profiler only;
    // error = a non-zero error code (the API's recorded return kind is one) on a call that did
    // return. A pointer, count or flag return is no failure, whatever its value.
    let errors = super::meaning::ERROR_KINDS_SQL;
    let g = groups(
        c,
        &format!(
            "SELECT rtl_group(a.apiName_id,
                              iif(r.ret IS NOT NULL AND r.ret != 0 AND r.status NOT BETWEEN 1 AND 4 AND m.ret_kind IN {errors},
                                  r.ret * 16 + r.status * 2 + 1, r.status * 2), 1)
             FROM rtl_api r CROSS JOIN rocpd_api a ON a.id = r.api_id
                  LEFT JOIN rtl_api_meaning m ON m.apiName_id = a.apiName_id
             WHERE r.status != 0 OR (r.ret != 0 AND m.ret_kind IN {errors})"
        ),
    )?;
    out.lock().unwrap().status = g;
    Ok(())
}

fn job_ops(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let (ops, busy): (Option<String>, Option<String>) = c.query_row(
        "SELECT rtl_group(iif(gpuId >= 0, description_id, -1), opType_id, end - start, start, end),
                rtl_busy(gpuId, queueId, start, end) FROM rocpd_op",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let v: Value = serde_json::from_str(ops.as_deref().unwrap_or("[]"))?;
    let ops = v
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|row| {
            let g = |i: usize| row[i].as_i64().unwrap_or(0);
            (g(0), g(1), Stat { count: g(2), sum: g(3), min: g(4), max: g(5), lo: g(6), hi: g(7) })
        })
        .collect();
    let busy: Value = serde_json::from_str(busy.as_deref().unwrap_or("null"))?;
    let mut o = out.lock().unwrap();
    o.ops = ops;
    o.busy = busy;
    Ok(())
}

fn job_links(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let (pid, lat, linked, links): (Option<String>, Option<String>, i64, i64) = c.query_row(
        "SELECT rtl_group(a.pid, 0, o.end - o.start), rtl_quantiles(o.start - a.start), rtl_distinct(o.id),
                (SELECT count(*) FROM rocpd_api_ops)
         FROM rocpd_api_ops l CROSS JOIN rocpd_op o ON o.id = l.op_id CROSS JOIN rocpd_api a ON a.id = l.api_id
         WHERE o.gpuId >= 0",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, Option<i64>>(2)?.unwrap_or(0), r.get(3)?)),
    )?;
    let v: Value = serde_json::from_str(pid.as_deref().unwrap_or("[]"))?;
    let pid = v
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|row| {
            let g = |i: usize| row[i].as_i64().unwrap_or(0);
            (g(0), g(1), Stat { count: g(2), sum: g(3), min: g(4), max: g(5), lo: g(6), hi: g(7) })
        })
        .collect();
    let mut o = out.lock().unwrap();
    o.link_pid = pid;
    o.latency = serde_json::from_str(lat.as_deref().unwrap_or("null"))?;
    o.linked_ops = linked;
    o.links = links;
    Ok(())
}

fn run_scans(trace: &super::Trace) -> Result<Scans> {
    let out = Mutex::new(Scans::default());
    let jobs: [(&str, Job); 4] = [("api", job_api), ("links", job_links), ("ops", job_ops), ("status", job_status)];
    let timed = |name: &str, job: Job, c: &Connection, out: &Mutex<Scans>| -> Result<()> {
        let t = std::time::Instant::now();
        job(c, out)?;
        out.lock().unwrap().timings.push((name.to_string(), t.elapsed().as_secs_f64()));
        Ok(())
    };
    // Parallel: one read-only connection per scan (the file was validated and migrated).
    let uri = trace.uri();
    std::thread::scope(|s| -> Result<()> {
        let handles: Vec<_> = jobs
            .iter()
            .map(|(name, job)| {
                let (out, timed) = (&out, &timed);
                s.spawn(move || -> Result<()> {
                    let c = super::open_read_only(uri)?;
                    c.execute_batch("PRAGMA temp_store = MEMORY; PRAGMA cache_size = -65536; PRAGMA mmap_size = 68719476736;")?;
                    register(&c)?;
                    timed(name, *job, &c, out)
                })
            })
            .collect();
        for h in handles {
            h.join().map_err(|_| anyhow::anyhow!("summary worker panicked"))??;
        }
        Ok(())
    })?;
    Ok(out.into_inner().unwrap())
}

/// Meaning of `rtl_api.status` (the writer's `CallStatus`).
pub(crate) fn status_name(status: i64) -> &'static str {
    match status {
        0 => "complete",
        1 => "thread exited inside the call",
        2 => "exec inside the call",
        3 => "trace ended inside the call",
        4 => "return lost (unmatched)",
        5 => "seen by the profiler only",
        _ => "unknown status",
    }
}

/// Words that make a `rocpd_metadata` tag a counter of lost or incomplete data (the collector
/// writes e.g. ringbuf_drops, calls_unclosed, returns_without_entry, records_rejected,
/// gpu_ops_unlinked, gpu_ops_ambiguous, agent_dropped_queue_full, agent_batches_truncated).
pub(crate) const LOSS_WORDS: &[&str] = &[
    "drop",
    "lost",
    "overflow",
    "missed",
    "truncat",
    "unlinked",
    "unclosed",
    "without",
    "rejected",
    "oversized",
    "ambiguous",
    "skipped",
    // spool_discarded_records (read but not kept: backlog full), spool_abandoned_bytes (backlog
    // left unwritten when interrupted twice)
    "discard",
    "abandon",
];

fn is_drop_tag(tag: &str) -> bool {
    let t = tag.to_ascii_lowercase();
    LOSS_WORDS.iter().any(|k| t.contains(k))
}

/// Demangles C++ kernel names (`_Z...`, bounded); others unchanged.
pub(crate) fn pretty_name(s: &str) -> String {
    crate::demangle::demangle_or_keep(s)
}

/// Computes the summary of `db` (the data behind every output format).
pub fn summary_data(db: &Path, facts: crate::api_meaning::ApiFacts, top: usize) -> Result<Summary> {
    let conn = super::open_trace(db, facts)?;
    let scans = run_scans(&conn).with_context(|| format!("{}: summarising", db.display()))?;
    let names = super::model::strings(&conn)?;
    let name = |id: i64| names.get(&id).cloned().unwrap_or_else(|| format!("<string {id}>"));
    let mut s = Summary { source: db.display().to_string(), timings: scans.timings.clone(), ..Default::default() };

    let mut st = conn.prepare("SELECT tag, CAST(value AS TEXT) FROM rocpd_metadata ORDER BY id")?;
    s.metadata = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
        .collect::<Result<Vec<_>, _>>()?;
    // In a merged file the per-input copies (input<N>.tag) are summed under the plain tag.
    let merged = s.metadata.iter().any(|(t, _)| t == "merged_inputs");
    let per_input = |t: &str| {
        t.strip_prefix("input").and_then(|r| r.split_once('.')).is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    s.dropped = s.metadata.iter().filter(|(t, _)| is_drop_tag(t) && !(merged && per_input(t))).cloned().collect();

    // A collector that finished wrote trace_end_ns with its counters; one that was killed or
    // stopped by a full disk did not (its start tag is there, the rows up to its last batch).
    let tags: std::collections::HashSet<&str> = s.metadata.iter().map(|(t, _)| t.as_str()).collect();
    let mut prefixes = vec![String::new()];
    prefixes.extend(tags.iter().filter_map(|t| t.strip_suffix("trace_start_ns")).filter(|p| !p.is_empty()).map(str::to_string));
    prefixes.sort();
    prefixes.dedup();
    for p in prefixes {
        if tags.contains(format!("{p}trace_start_ns").as_str()) && !tags.contains(format!("{p}trace_end_ns").as_str()) {
            let what = if p.is_empty() { "this trace".to_string() } else { format!("input {}", p.trim_end_matches('.')) };
            s.incomplete.push(format!(
                "incomplete: the collector did not finish {what} (killed, or the disk filled): rows up to its last written batch are here; its end-of-trace loss counters are missing"
            ));
        }
    }

    // APIs: per name and per pid from the (pid, name) groups.
    let mut by_name: HashMap<i64, Stat> = HashMap::new();
    let mut by_pid: BTreeMap<i64, Stat> = BTreeMap::new();
    for (pid, n, st) in &scans.api {
        by_name.entry(*n).or_default().merge(st);
        by_pid.entry(*pid).or_default().merge(st);
    }
    let mut errors: HashMap<i64, i64> = HashMap::new();
    let mut unclosed: HashMap<i64, i64> = HashMap::new();
    let mut by_code: HashMap<(i64, i64), i64> = HashMap::new();
    for (n, key, st) in &scans.status {
        let (ret, low) = (key.div_euclid(16), key.rem_euclid(16));
        let (status, error) = (low / 2, low % 2 == 1);
        if (1..=4).contains(&status) {
            *unclosed.entry(*n).or_default() += st.count;
            *s.unclosed_by_reason.entry(status_name(status).to_string()).or_default() += st.count;
        } else if status == 5 {
            s.profiler_only_apis += st.count;
        }
        if error {
            *errors.entry(*n).or_default() += st.count;
            *by_code.entry((*n, ret)).or_default() += st.count;
        }
    }
    let meanings = super::meaning::load(&conn)?;
    let mut codes: Vec<ErrorRow> = by_code
        .into_iter()
        .map(|((n, code), count)| {
            let api = name(n);
            let code_name = if meanings.get(&n).is_some_and(|m| m.ret == crate::api_meaning::RetKind::HipError) {
                super::model::hip_error_name(code)
            } else {
                code.to_string()
            };
            ErrorRow { api, code, code_name, count }
        })
        .collect();
    codes.sort_by(|a, b| b.count.cmp(&a.count).then(a.api.cmp(&b.api)).then(a.code.cmp(&b.code)));
    s.errors = codes;
    s.api_calls = by_name.values().map(|x| x.count).sum();
    s.api_errors = errors.values().sum();
    s.unclosed_apis = unclosed.values().sum();
    let mut apis: Vec<ApiRow> = by_name
        .iter()
        .map(|(n, st)| ApiRow {
            name: name(*n),
            stat: st.clone(),
            errors: errors.get(n).copied().unwrap_or(0),
            unclosed: unclosed.get(n).copied().unwrap_or(0),
        })
        .collect();
    apis.sort_by(|a, b| b.stat.sum.cmp(&a.stat.sum).then(a.name.cmp(&b.name)));
    s.apis_total_names = apis.len();
    if top > 0 {
        apis.truncate(top);
    }
    s.apis = apis;

    // GPU ops by name (description, or the op type when there is none), as RPD's `top` view.
    let mut by_op: HashMap<(String, String), Stat> = HashMap::new();
    for (desc, ty, st) in &scans.ops {
        if *desc == -1 {
            s.markers += st.count;
            continue;
        }
        let d = name(*desc);
        let t = name(*ty);
        let n = if d.is_empty() { t.clone() } else { pretty_name(&d) };
        by_op.entry((n, t)).or_default().merge(st);
    }
    s.gpu_ops = by_op.values().map(|x| x.count).sum();
    s.gpu_time_ns = by_op.values().map(|x| x.sum).sum();
    let mut ops: Vec<OpRow> = by_op
        .into_iter()
        .map(|((n, t), st)| OpRow {
            name: n,
            op_type: t,
            pct_gpu_time: if s.gpu_time_ns > 0 { st.sum as f64 * 100.0 / s.gpu_time_ns as f64 } else { 0.0 },
            stat: st,
        })
        .collect();
    ops.sort_by(|a, b| b.stat.sum.cmp(&a.stat.sum).then(a.name.cmp(&b.name)));
    s.ops_total_names = ops.len();
    if top > 0 {
        ops.truncate(top);
    }
    s.ops = ops;

    // Busy.
    s.gpu_first_ns = scans.busy["first"].as_i64().unwrap_or(0);
    s.gpu_last_ns = scans.busy["last"].as_i64().unwrap_or(0);
    for d in scans.busy["devices"].as_array().cloned().unwrap_or_default() {
        let wall = d["wall_ns"].as_i64().unwrap_or(0);
        let pct = |x: i64| {
            if wall > 0 {
                x as f64 * 100.0 / wall as f64
            } else {
                0.0
            }
        };
        let busy_ns = d["busy_ns"].as_i64().unwrap_or(0);
        s.busy.push(DeviceBusy {
            gpu: d["gpu"].as_i64().unwrap_or(0),
            ops: d["ops"].as_i64().unwrap_or(0),
            busy_ns,
            wall_ns: wall,
            busy_pct: pct(busy_ns),
            queues: d["queues"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|q| {
                    let b = q[2].as_i64().unwrap_or(0);
                    QueueBusy { queue: q[0].as_i64().unwrap_or(0), ops: q[1].as_i64().unwrap_or(0), busy_ns: b, busy_pct: pct(b) }
                })
                .collect(),
            timeline: d["timeline"].as_array().cloned().unwrap_or_default().iter().filter_map(|x| x.as_f64()).collect(),
        });
    }

    // Span over APIs and ops.
    let api_lo = scans.api.iter().map(|g| g.2.lo).min();
    let api_hi = scans.api.iter().map(|g| g.2.hi).max();
    let op_lo = scans.ops.iter().map(|g| g.2.lo).min();
    let op_hi = scans.ops.iter().map(|g| g.2.hi).max();
    s.first_ns = [api_lo, op_lo].into_iter().flatten().min().unwrap_or(0);
    s.last_ns = [api_hi, op_hi].into_iter().flatten().max().unwrap_or(0);

    // Processes.
    let mut procs: BTreeMap<i64, ProcessRow> = BTreeMap::new();
    for (pid, st) in by_pid {
        procs.insert(pid, ProcessRow { pid, exe: None, cmdline: None, api: st, gpu_ops: 0, gpu_time_ns: 0 });
    }
    for (pid, _, st) in &scans.link_pid {
        let p = procs.entry(*pid).or_insert_with(|| ProcessRow {
            pid: *pid,
            exe: None,
            cmdline: None,
            api: Stat::default(),
            gpu_ops: 0,
            gpu_time_ns: 0,
        });
        p.gpu_ops += st.count;
        p.gpu_time_ns += st.sum;
    }
    let mut st = conn.prepare("SELECT pid, exe, cmdline FROM rtl_process")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let pid: i64 = r.get(0)?;
        let p = procs.entry(pid).or_insert_with(|| ProcessRow {
            pid,
            exe: None,
            cmdline: None,
            api: Stat::default(),
            gpu_ops: 0,
            gpu_time_ns: 0,
        });
        p.exe = r.get(1)?;
        p.cmdline = r.get::<_, Option<String>>(2)?.map(|c| c.replace('\0', " ").trim().to_string());
    }
    drop(rows);
    s.processes = procs.into_values().collect();

    // Links, and how they were made.
    let has_links: bool =
        conn.query_row("SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'rtl_op'", [], |r| r.get(0))?;
    let q = if has_links { "SELECT link, count(*) FROM rtl_op GROUP BY link" } else { "SELECT 0, 0 WHERE false" };
    let mut st = conn.prepare(q)?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (link, n): (i64, i64) = (r.get(0)?, r.get(1)?);
        let name = match link {
            1 => "correlation",
            2 => "sequence",
            3 => "time",
            0 => "unlinked: thread never seen",
            4 => "unlinked: no call fits",
            5 => "unlinked: ambiguous",
            _ => "unknown",
        };
        *s.gpu_links.entry(name.to_string()).or_default() += n;
    }
    drop(rows);
    s.links = scans.links;
    s.unlinked_gpu_ops = (s.gpu_ops - scans.linked_ops).max(0);
    let l = &scans.latency;
    if !l.is_null() {
        let g = |k: &str| l[k].as_i64().unwrap_or(0);
        s.launch_latency = Some(Latency {
            count: g("count"),
            min: g("min"),
            mean: g("mean"),
            p50: g("p50"),
            p90: g("p90"),
            p99: g("p99"),
            max: g("max"),
            sampled_every: g("sampled_every").max(1),
        });
    }
    Ok(s)
}

// ---- output --------------------------------------------------------------------------------

impl Summary {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let stat = |s: &Stat| json!({"calls": s.count, "total_ns": s.sum, "mean_ns": s.mean(), "min_ns": s.min, "max_ns": s.max});
        json!({
            "trace": self.source,
            "metadata": self.metadata.iter().map(|(k, v)| (k.clone(), meta_value(k, v))).collect::<serde_json::Map<_, _>>(),
            "complete": self.incomplete.is_empty(),
            "incomplete": self.incomplete,
            "span": {"first_ns": self.first_ns, "last_ns": self.last_ns, "duration_ns": self.last_ns - self.first_ns},
            "totals": {
                "api_calls": self.api_calls, "api_names": self.apis_total_names,
                "apis_left_out": self.apis_total_names - self.apis.len(),
                "gpu_ops": self.gpu_ops, "gpu_op_names": self.ops_total_names, "gpu_time_ns": self.gpu_time_ns,
                "kernels_left_out": self.ops_total_names - self.ops.len(),
                "markers": self.markers, "api_op_links": self.links,
            },
            "kernels": self.ops.iter().map(|o| {
                let mut v = stat(&o.stat);
                v["name"] = json!(o.name);
                v["op_type"] = json!(o.op_type);
                v["pct_gpu_time"] = json!(o.pct_gpu_time);
                v
            }).collect::<Vec<_>>(),
            "apis": self.apis.iter().map(|a| {
                let mut v = stat(&a.stat);
                v["name"] = json!(a.name);
                v["errors"] = json!(a.errors);
                v["unclosed"] = json!(a.unclosed);
                v
            }).collect::<Vec<_>>(),
            "gpu_busy": {
                "first_ns": self.gpu_first_ns, "last_ns": self.gpu_last_ns,
                "devices": self.busy.iter().map(|d| json!({
                    "gpu": d.gpu, "ops": d.ops, "busy_ns": d.busy_ns, "wall_ns": d.wall_ns, "busy_pct": d.busy_pct,
                    "queues": d.queues.iter().map(|q| json!({"queue": q.queue, "ops": q.ops, "busy_ns": q.busy_ns, "busy_pct": q.busy_pct})).collect::<Vec<_>>(),
                    "timeline": d.timeline.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            },
            "processes": self.processes.iter().map(|p| json!({
                "pid": p.pid, "exe": p.exe, "cmdline": p.cmdline,
                "api_calls": p.api.count, "api_time_ns": p.api.sum,
                "first_ns": if p.api.count > 0 { json!(p.api.lo) } else { Value::Null },
                "last_ns": if p.api.count > 0 { json!(p.api.hi) } else { Value::Null },
                "gpu_ops": p.gpu_ops, "gpu_time_ns": p.gpu_time_ns,
            })).collect::<Vec<_>>(),
            "launch_latency": self.launch_latency.as_ref().map(|l| json!({
                "count": l.count, "min_ns": l.min, "mean_ns": l.mean, "p50_ns": l.p50, "p90_ns": l.p90, "p99_ns": l.p99, "max_ns": l.max,
                "percentiles_sampled_every": l.sampled_every,
            })),
            "lost": {
                "dropped": self.dropped.iter().map(|(k, v)| (k.clone(), meta_value(k, v))).collect::<serde_json::Map<_, _>>(),
                "unlinked_gpu_ops": self.unlinked_gpu_ops,
                "unclosed_apis": self.unclosed_apis,
                "unclosed_by_reason": self.unclosed_by_reason,
                "profiler_only_apis": self.profiler_only_apis,
                "gpu_links": self.gpu_links,
                "api_errors": self.api_errors,
                "errors": self.errors.iter().map(|e| json!({
                    "api": e.api, "ret": e.code, "error": e.code_name, "calls": e.count,
                })).collect::<Vec<_>>(),
            },
        })
    }
}

/// Metadata tags that hold text even when it looks like a number.
const TEXT_TAGS: &[&str] = &["hostname", "host", "node", "rtl_version", "clock", "path"];

/// A metadata value for JSON: integers and decimals as numbers, comma-separated integers (per
/// CPU counters) as arrays, the session mode structured (see [`mode_value`]), the rest as text.
fn meta_value(tag: &str, v: &str) -> Value {
    let base = tag.rsplit('.').next().unwrap_or(tag);
    if base == "mode" {
        return mode_value(v);
    }
    if TEXT_TAGS.contains(&base) {
        return json!(v);
    }
    let t = v.trim();
    if let Ok(i) = t.parse::<i64>() {
        return json!(i);
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-') {
        if let Ok(f) = t.parse::<f64>() {
            if f.is_finite() {
                return json!(f);
            }
        }
    }
    if t.contains(',') {
        let parts: Option<Vec<i64>> = t.split(',').map(|x| x.trim().parse::<i64>().ok()).collect();
        if let Some(parts) = parts {
            return json!(parts);
        }
    }
    json!(v)
}

/// The session mode the collector records (`All`, `Pids([1, 2])`, `Run(["cmd", "arg"])`, as
/// Rust prints them; or already JSON) as `{"kind": "all"}`, `{"kind": "attach", "pids": [..]}`,
/// `{"kind": "run", "command": [..]}`; anything else as `{"kind": "unknown", "text": ..}`.
pub(crate) fn mode_value(v: &str) -> Value {
    let t = v.trim();
    if t.starts_with('{') {
        if let Ok(j @ Value::Object(_)) = serde_json::from_str::<Value>(t) {
            return j;
        }
    }
    let unknown = || json!({"kind": "unknown", "text": v});
    if t == "All" {
        return json!({"kind": "all"});
    }
    if let Some(inner) = t.strip_prefix("Pids([").and_then(|r| r.strip_suffix("])")) {
        let pids: Option<Vec<u64>> = inner.split(',').filter(|x| !x.trim().is_empty()).map(|x| x.trim().parse().ok()).collect();
        return pids.map_or_else(unknown, |p| json!({"kind": "attach", "pids": p}));
    }
    if let Some(inner) = t.strip_prefix("Run([").and_then(|r| r.strip_suffix("])")) {
        return debug_strings(inner).map_or_else(unknown, |c| json!({"kind": "run", "command": c}));
    }
    unknown()
}

/// Parses `"a", "b\"c"` (strings as Rust's `{:?}` writes them) into the strings.
fn debug_strings(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            it.next();
        }
        match it.next() {
            None => return Some(out),
            Some('"') => {}
            Some(_) => return None,
        }
        let mut cur = String::new();
        loop {
            match it.next()? {
                '"' => break,
                '\\' => match it.next()? {
                    'n' => cur.push('\n'),
                    'r' => cur.push('\r'),
                    't' => cur.push('\t'),
                    '0' => cur.push('\0'),
                    'u' => {
                        if it.next()? != '{' {
                            return None;
                        }
                        let mut hex = String::new();
                        loop {
                            match it.next()? {
                                '}' => break,
                                c => hex.push(c),
                            }
                        }
                        cur.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    c => cur.push(c), // \\ \" \'
                },
                c => cur.push(c),
            }
        }
        out.push(cur);
    }
}

/// Human duration: 1.23 s, 4.56 ms, 7.89 us, 12 ns.
pub(crate) fn dur(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if a >= 1e9 {
        format!("{sign}{:.2} s", a / 1e9)
    } else if a >= 1e6 {
        format!("{sign}{:.2} ms", a / 1e6)
    } else if a >= 1e3 {
        format!("{sign}{:.2} us", a / 1e3)
    } else {
        format!("{sign}{a} ns")
    }
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Left-aligned first column, right-aligned others.
fn table(out: &mut dyn Write, head: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String], out: &mut dyn Write| -> Result<()> {
        let mut s = String::from("  ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if i == 0 || head[i] == "command" {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        writeln!(out, "{}", s.trim_end())?;
        Ok(())
    };
    line(&head.iter().map(|h| h.to_string()).collect::<Vec<_>>(), out)?;
    line(&w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>(), out)?;
    for r in rows {
        line(r, out)?;
    }
    Ok(())
}

fn write_text(s: &Summary, out: &mut dyn Write) -> Result<()> {
    // Every string from the trace is escaped: names, command lines and paths are another
    // user's text (crate::term).
    use crate::term::escape;
    writeln!(out, "Trace {}", escape(&s.source))?;
    for line in &s.incomplete {
        writeln!(out, "  {line}")?;
    }
    writeln!(
        out,
        "  span {} | {} API calls | {} GPU ops ({} GPU time) | {} roctx markers | {} API->op links",
        dur(s.last_ns - s.first_ns),
        s.api_calls,
        s.gpu_ops,
        dur(s.gpu_time_ns),
        s.markers,
        s.links
    )?;
    writeln!(out)?;
    let shown = |n: usize, total: usize| {
        if n < total {
            format!(" (top {n} of {total}; {} left out: --top 0 shows all)", total - n)
        } else {
            String::new()
        }
    };
    writeln!(out, "GPU kernels and ops by total time{}", shown(s.ops.len(), s.ops_total_names))?;
    if s.ops.is_empty() {
        writeln!(out, "  (no GPU ops)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .ops
            .iter()
            .map(|o| {
                vec![
                    clip(&escape(&o.name), 70),
                    o.stat.count.to_string(),
                    dur(o.stat.sum),
                    dur(o.stat.mean()),
                    dur(o.stat.min),
                    dur(o.stat.max),
                    format!("{:.1}%", o.pct_gpu_time),
                ]
            })
            .collect();
        table(out, &["name", "calls", "total", "mean", "min", "max", "% GPU"], &rows)?;
    }
    writeln!(out)?;
    writeln!(out, "APIs by total time{}", shown(s.apis.len(), s.apis_total_names))?;
    if s.apis.is_empty() {
        writeln!(out, "  (no API calls)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .apis
            .iter()
            .map(|a| {
                vec![
                    clip(&escape(&a.name), 50),
                    a.stat.count.to_string(),
                    dur(a.stat.sum),
                    dur(a.stat.mean()),
                    dur(a.stat.max),
                    a.errors.to_string(),
                    a.unclosed.to_string(),
                ]
            })
            .collect();
        table(out, &["api", "calls", "total", "mean", "max", "errors", "unclosed"], &rows)?;
    }
    writeln!(out)?;
    writeln!(out, "GPU busy (over the GPU span {})", dur(s.gpu_last_ns - s.gpu_first_ns))?;
    if s.busy.is_empty() {
        writeln!(out, "  (no GPU ops)")?;
    } else {
        let mut rows = vec![];
        for d in &s.busy {
            rows.push(vec![format!("GPU {}", d.gpu), d.ops.to_string(), dur(d.busy_ns), format!("{:.1}%", d.busy_pct)]);
            for q in &d.queues {
                rows.push(vec![format!("  queue {}", q.queue), q.ops.to_string(), dur(q.busy_ns), format!("{:.1}%", q.busy_pct)]);
            }
        }
        table(out, &["device / queue", "ops", "busy", "busy %"], &rows)?;
    }
    writeln!(out)?;
    writeln!(out, "Processes")?;
    if s.processes.is_empty() {
        writeln!(out, "  (none)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .processes
            .iter()
            .map(|p| {
                let cmd = p.cmdline.clone().filter(|c| !c.is_empty()).or_else(|| p.exe.clone()).unwrap_or_else(|| "(unknown)".into());
                vec![
                    p.pid.to_string(),
                    p.api.count.to_string(),
                    dur(p.api.sum),
                    p.gpu_ops.to_string(),
                    dur(p.gpu_time_ns),
                    clip(&escape(&cmd), 60),
                ]
            })
            .collect();
        table(out, &["pid", "API calls", "API time", "GPU ops", "GPU time", "command"], &rows)?;
    }
    writeln!(out)?;
    match &s.launch_latency {
        Some(l) => writeln!(
            out,
            "Launch latency (API entry -> GPU start, {} ops): p50 {}  p90 {}  p99 {}  (min {}, mean {}, max {}){}",
            l.count,
            dur(l.p50),
            dur(l.p90),
            dur(l.p99),
            dur(l.min),
            dur(l.mean),
            dur(l.max),
            if l.sampled_every > 1 { format!("; percentiles over every {}th link", l.sampled_every) } else { String::new() }
        )?,
        None => writeln!(out, "Launch latency: no API->op links in this trace")?,
    }
    if !s.gpu_links.is_empty() {
        let by: Vec<String> = s.gpu_links.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(out, "GPU op links (how each op's API call was found): {}", by.join(", "))?;
    }
    writeln!(out)?;
    writeln!(out, "Lost or incomplete data")?;
    writeln!(out, "  GPU ops without an API link: {}", s.unlinked_gpu_ops)?;
    writeln!(out, "  API calls never returned (unclosed): {}", s.unclosed_apis)?;
    for (why, n) in &s.unclosed_by_reason {
        writeln!(out, "    {why}: {n}")?;
    }
    if s.profiler_only_apis > 0 {
        writeln!(out, "  API calls seen by the in-process profiler only: {}", s.profiler_only_apis)?;
    }
    writeln!(out, "  API calls that returned an error: {}", s.api_errors)?;
    for e in s.errors.iter().take(10) {
        writeln!(out, "    {} -> {} ({}): {}", escape(&e.api), escape(&e.code_name), e.code, e.count)?;
    }
    if s.errors.len() > 10 {
        writeln!(out, "    ... {} more (see --json)", s.errors.len() - 10)?;
    }
    // Collector counters: the non-zero ones (all of them are in --json).
    let zero = |v: &str| v.split(',').all(|x| x.trim().parse::<f64>().is_ok_and(|n| n == 0.0));
    let nonzero: Vec<_> = s.dropped.iter().filter(|(_, v)| !zero(v)).collect();
    if s.dropped.is_empty() {
        writeln!(out, "  collector loss counters: none recorded in this file")?;
    } else if nonzero.is_empty() {
        writeln!(out, "  collector loss counters: all {} are 0", s.dropped.len())?;
    }
    for (k, v) in nonzero {
        writeln!(out, "  {}: {}", escape(k), escape(v))?;
    }
    Ok(())
}

/// `rtl-ebpf summary`: writes the summary of `db` to `out` (tables, or JSON with `opts.json`),
/// and the HTML report to `opts.html` when given.
pub fn summary(db: &Path, facts: crate::api_meaning::ApiFacts, opts: &SummaryOptions, out: &mut dyn Write) -> Result<()> {
    if let Some(h) = &opts.html {
        super::refuse_output_that_is_an_input(h, &[db])?;
    }
    let s = summary_data(db, facts, opts.top)?;
    if let Some(h) = &opts.html {
        super::html::write_report(&s, db, h)?;
    }
    if opts.json {
        serde_json::to_writer_pretty(&mut *out, &s.to_json())?;
        writeln!(out)?;
    } else {
        write_text(&s, out)?;
    }
    Ok(())
}
