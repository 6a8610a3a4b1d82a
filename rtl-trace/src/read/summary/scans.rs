//! The summary's big scans: one pass over each large table, in parallel on separate
//! read-only connections, grouped by the functions of [`super::sql_functions`].

use std::sync::Mutex;

use anyhow::Result;
use rusqlite::Connection;
use serde_json::Value;

use super::data::Stat;
use super::sql_functions::{groups, parse_groups, register};

#[derive(Default)]
pub(super) struct Scans {
    /// Set before the scans: leave out unlinked ops and profiler-only calls (`--linked-only`).
    pub linked_only: bool,
    pub api: Vec<(i64, i64, Stat)>,
    pub status: Vec<(i64, i64, Stat)>,
    pub ops: Vec<(i64, i64, Stat)>,
    pub busy: Value,
    pub link_pid: Vec<(i64, i64, Stat)>,
    pub latency: Value,
    pub linked_ops: i64,
    pub links: i64,
    pub timings: Vec<(String, f64)>,
}

type Job = fn(&Connection, &Mutex<Scans>) -> Result<()>;

/// `--linked-only`: the ops and calls left out (GPU ops linked to no traced call, and the
/// profiler-only API rows written for them).
const UNLINKED_OPS: &str = "(SELECT op_id FROM rtl_op WHERE link IN (0, 4, 5))";
const PROFILER_ONLY_CALLS: &str = "(SELECT api_id FROM rtl_api WHERE status = 5)";

fn linked_only(out: &Mutex<Scans>) -> bool {
    out.lock().unwrap().linked_only
}

fn job_api(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let only = if linked_only(out) { format!(" WHERE id NOT IN {PROFILER_ONLY_CALLS}") } else { String::new() };
    let g = groups(c, &format!("SELECT rtl_group(pid, apiName_id, end - start, start, end) FROM rocpd_api{only}"))?;
    out.lock().unwrap().api = g;
    Ok(())
}

fn job_status(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
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
             WHERE (r.status != 0 OR (r.ret != 0 AND m.ret_kind IN {errors})){}",
            if linked_only(out) { " AND r.status != 5" } else { "" }
        ),
    )?;
    out.lock().unwrap().status = g;
    Ok(())
}

fn job_ops(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let only = if linked_only(out) { format!(" WHERE id NOT IN {UNLINKED_OPS}") } else { String::new() };
    let (ops, busy): (Option<String>, Option<String>) = c.query_row(
        &format!(
            "SELECT rtl_group(iif(gpuId >= 0, description_id, -1), opType_id, end - start, start, end),
                rtl_busy(gpuId, queueId, start, end) FROM rocpd_op{only}"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let ops = parse_groups(ops.as_deref())?;
    let busy: Value = serde_json::from_str(busy.as_deref().unwrap_or("null"))?;
    let mut o = out.lock().unwrap();
    o.ops = ops;
    o.busy = busy;
    Ok(())
}

fn job_links(c: &Connection, out: &Mutex<Scans>) -> Result<()> {
    let only = if linked_only(out) { format!(" AND o.id NOT IN {UNLINKED_OPS}") } else { String::new() };
    let (pid, lat, linked, links): (Option<String>, Option<String>, i64, i64) = c.query_row(
        &format!(
            "SELECT rtl_group(a.pid, 0, o.end - o.start), rtl_quantiles(o.start - a.start), rtl_distinct(o.id),
                (SELECT count(*) FROM rocpd_api_ops)
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
    Ok(())
}

pub(super) fn run_scans(trace: &crate::read::open::Trace, linked_only: bool) -> Result<Scans> {
    let out = Mutex::new(Scans { linked_only, ..Default::default() });
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
