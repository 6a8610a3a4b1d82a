//! The summary's big scans: one pass over each large table, in parallel on separate
//! read-only connections, grouped by the functions of [`super::sql_functions`],
//! [`super::samples`] and [`super::intervals`].

use std::sync::Mutex;

use anyhow::Result;
use rusqlite::Connection;
use serde_json::Value;

use super::data::Stat;
use super::intervals::{Devices, IntervalsFn};
use super::samples::{register_samples, take, Kept};
use super::sql_functions::{groups, parse_groups, register, FxMap};

#[derive(Default)]
pub(super) struct Scans {
    pub api: Vec<(i64, i64, Stat)>,
    /// Durations per (apiName_id, 0).
    pub api_samples: FxMap<(i64, i64), Kept>,
    pub status: Vec<(i64, i64, Stat)>,
    pub ops: Vec<(i64, i64, Stat)>,
    /// GPU op durations per (description_id, opType_id).
    pub op_samples: FxMap<(i64, i64), Kept>,
    /// Marker (roctx) durations per (description_id, 0), tagged with the opening call's id.
    pub marker_samples: FxMap<(i64, i64), Kept>,
    /// Every GPU op's interval, per device.
    pub intervals: Devices,
    /// (pid, gpu) -> linked GPU ops' durations.
    pub link_pid: Vec<(i64, i64, Stat)>,
    pub latency: Value,
    /// Launch latency per (description_id, opType_id) of the op.
    pub latency_samples: FxMap<(i64, i64), Kept>,
    pub linked_ops: i64,
    pub links: i64,
    pub timings: Vec<(String, f64)>,
}

/// What the scans need to know beforehand.
#[derive(Default, Clone)]
pub(super) struct ScanInput {
    /// `rocpd_string` ids of the graph-launch API names ([`super::data::GRAPH_LAUNCH_APIS`]).
    pub graph_launch_names: Vec<i64>,
    /// `rocpd_string` id of `GraphExecution` (a whole replay as one op).
    pub graph_execution: Option<i64>,
    /// Leave out unlinked ops and profiler-only calls (`--linked-only`).
    pub linked_only: bool,
}

/// `--linked-only`: the ops and calls left out (GPU ops linked to no traced call, and the
/// profiler-only API rows written for them).
const UNLINKED_OPS: &str = "(SELECT op_id FROM rtl_op WHERE link IN (0, 4, 5))";
const PROFILER_ONLY_CALLS: &str = "(SELECT api_id FROM rtl_api WHERE status = 5)";

type Job = fn(&Connection, &ScanInput, &Mutex<Scans>) -> Result<()>;

fn job_api(c: &Connection, input: &ScanInput, out: &Mutex<Scans>) -> Result<()> {
    let samples = register_samples(c, "rtl_samples")?;
    let only = if input.linked_only { format!(" WHERE id NOT IN {PROFILER_ONLY_CALLS}") } else { String::new() };
    let g = groups(
        c,
        &format!(
            "SELECT rtl_group(pid, apiName_id, end - start, start, end), rtl_samples(apiName_id, 0, end - start) FROM rocpd_api{only}"
        ),
    )?;
    let mut o = out.lock().unwrap();
    o.api = g;
    o.api_samples = take(&samples);
    Ok(())
}

fn job_status(c: &Connection, _: &ScanInput, out: &Mutex<Scans>) -> Result<()> {
    // Calls that are not plain successes, keyed (apiName_id, ret * 16 + status * 2 + error)
    // (ret only for errors): statuses 1-4 never returned, 5 was seen by the profiler only;
    // error = a non-zero error code (the API's recorded return kind is one) on a call that did
    // return. A pointer, count or flag return is no failure, whatever its value.
    let errors = crate::read::meaning::ERROR_KINDS_SQL;
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

fn id_list(ids: &[i64]) -> String {
    ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

fn job_ops(c: &Connection, input: &ScanInput, out: &Mutex<Scans>) -> Result<()> {
    let ops_samples = register_samples(c, "rtl_samples_ops")?;
    let marker_samples = register_samples(c, "rtl_samples_markers")?;
    let intervals = IntervalsFn::register(c)?;
    let only = if input.linked_only { format!(" WHERE id NOT IN {UNLINKED_OPS}") } else { String::new() };
    // An op of a graph launch: linked (rocpd_api_ops) to a call of a graph-launch API. The
    // subquery is evaluated once (not correlated), only when the trace has such a name.
    let kind = if input.graph_launch_names.is_empty() {
        "0".to_string()
    } else {
        let span = input.graph_execution.map_or("1".to_string(), |g| format!("iif(opType_id = {g}, 2, 1)"));
        format!(
            "iif(gpuId >= 0 AND id IN (SELECT l.op_id FROM rocpd_api_ops l CROSS JOIN rocpd_api a ON a.id = l.api_id
                                       WHERE a.apiName_id IN ({})), {span}, 0)",
            id_list(&input.graph_launch_names)
        )
    };
    let ops: Option<String> = c.query_row(
        &format!(
            "SELECT rtl_group(iif(gpuId >= 0, description_id, -1), opType_id, end - start, start, end),
                    rtl_intervals(gpuId, queueId, start, end, {kind}),
                    rtl_samples_ops(iif(gpuId >= 0, description_id, NULL), opType_id, end - start),
                    rtl_samples_markers(iif(gpuId < 0, description_id, NULL), 0, end - start, correlation_id)
             FROM rocpd_op{only}"
        ),
        [],
        |r| r.get(0),
    )?;
    let ops = parse_groups(ops.as_deref())?;
    let mut o = out.lock().unwrap();
    o.ops = ops;
    o.intervals = intervals.take();
    o.op_samples = take(&ops_samples);
    o.marker_samples = take(&marker_samples);
    Ok(())
}

fn job_links(c: &Connection, input: &ScanInput, out: &Mutex<Scans>) -> Result<()> {
    let lat_samples = register_samples(c, "rtl_samples")?;
    let only = if input.linked_only { format!(" AND o.id NOT IN {UNLINKED_OPS}") } else { String::new() };
    let (pid, lat, linked, links): (Option<String>, Option<String>, i64, i64) = c.query_row(
        &format!(
            "SELECT rtl_group(a.pid, o.gpuId, o.end - o.start), rtl_quantiles(o.start - a.start), rtl_distinct(o.id),
                (SELECT count(*) FROM rocpd_api_ops),
                rtl_samples(o.description_id, o.opType_id, o.start - a.start)
         FROM rocpd_api_ops l CROSS JOIN rocpd_op o ON o.id = l.op_id CROSS JOIN rocpd_api a ON a.id = l.api_id
         WHERE o.gpuId >= 0{only}"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get::<_, Option<i64>>(2)?.unwrap_or(0), r.get(3)?)),
    )?;
    let pid = parse_groups(pid.as_deref())?;
    let mut o = out.lock().unwrap();
    o.link_pid = pid;
    o.latency = serde_json::from_str(lat.as_deref().unwrap_or("null"))?;
    o.linked_ops = linked;
    o.links = links;
    o.latency_samples = take(&lat_samples);
    Ok(())
}

pub(super) fn run_scans(trace: &crate::read::open::Trace, input: &ScanInput) -> Result<Scans> {
    let out = Mutex::new(Scans::default());
    let jobs: [(&str, Job); 4] = [("api", job_api), ("links", job_links), ("ops", job_ops), ("status", job_status)];
    let timed = |name: &str, job: Job, c: &Connection, out: &Mutex<Scans>| -> Result<()> {
        let t = std::time::Instant::now();
        job(c, input, out)?;
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
                    let c = crate::read::open::open_read_only(uri)?;
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
