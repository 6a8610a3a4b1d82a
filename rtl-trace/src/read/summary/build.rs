//! Builds the [`Summary`] of a trace: the scans' results, the metadata and the small tables.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::{Context as _, Result};

use super::data::*;
use super::gaps::{largest_idle_gaps, occupancy_and_queue_gaps};
use super::samples::Kept;
use super::scans::{run_scans, ScanInput};
use crate::read::meaning::status_name;
use crate::read::metadata::is_drop_tag;

/// Demangles C++ kernel names (`_Z...`, bounded); others unchanged.
pub(crate) fn pretty_name(s: &str) -> String {
    crate::demangle::demangle_or_keep(s)
}

/// What [`summary_data_with`] computes beyond the defaults.
#[derive(Debug, Clone, Copy, Default)]
pub struct DataOptions {
    /// Rows in the kernel, API, range and per-kernel latency tables (0: all).
    pub top: usize,
    /// The window of occupancy and queue gaps.
    pub window: Window,
    /// See [`super::SummaryOptions::linked_only`].
    pub linked_only: bool,
    /// Also what only the HTML report draws: the per-stream lanes and the flame graph.
    pub report: bool,
}

/// Computes the summary of `db` (the data behind every output format).
pub fn summary_data(db: &Path, facts: crate::api_meaning::ApiFacts, top: usize) -> Result<Summary> {
    summary_data_with(db, facts, &DataOptions { top, ..Default::default() })
}

/// [`summary_data`]; `linked_only`: see [`super::SummaryOptions::linked_only`].
pub fn summary_data_of(db: &Path, facts: crate::api_meaning::ApiFacts, top: usize, linked_only: bool) -> Result<Summary> {
    summary_data_with(db, facts, &DataOptions { top, linked_only, ..Default::default() })
}

/// The `rocpd_string` ids of `names` (any of them may be absent).
fn string_ids(conn: &rusqlite::Connection, names: &[&str]) -> Result<Vec<i64>> {
    let mut st = conn.prepare_cached("SELECT id FROM rocpd_string WHERE string = ?1")?;
    let mut out = vec![];
    for n in names {
        let mut rows = st.query([n])?;
        while let Some(r) = rows.next()? {
            out.push(r.get(0)?);
        }
    }
    Ok(out)
}

/// Groups of samples merged by the name `key` gives them, percentiles taken.
fn merge_by<K: std::hash::Hash + Eq>(
    groups: impl IntoIterator<Item = ((i64, i64), Kept)>,
    key: impl Fn(i64, i64) -> K,
) -> HashMap<K, Kept> {
    let mut out: HashMap<K, Kept> = HashMap::new();
    for ((a, b), k) in groups {
        out.entry(key(a, b)).or_default().merge(k);
    }
    out
}

/// [`summary_data`] with options.
pub fn summary_data_with(db: &Path, facts: crate::api_meaning::ApiFacts, opts: &DataOptions) -> Result<Summary> {
    let (top, linked_only) = (opts.top, opts.linked_only);
    let conn = crate::read::open::open_trace(db, facts)?;
    let input = ScanInput {
        graph_launch_names: string_ids(&conn, GRAPH_LAUNCH_APIS)?,
        graph_execution: string_ids(&conn, &["GraphExecution"])?.first().copied(),
        linked_only,
    };
    let mut scans = run_scans(&conn, &input).with_context(|| format!("{}: summarising", db.display()))?;
    let names = crate::read::open::strings(&conn)?;
    let name = |id: i64| names.get(&id).cloned().unwrap_or_else(|| format!("<string {id}>"));
    let mut s = Summary { source: db.display().to_string(), timings: scans.timings.clone(), window: opts.window, ..Default::default() };

    let mut st = conn.prepare("SELECT tag, CAST(value AS TEXT) FROM rocpd_metadata ORDER BY id")?;
    s.metadata = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
        .collect::<Result<Vec<_>, _>>()?;
    // In a merged file the per-input copies (input<N>.tag) are summed under the plain tag.
    let merged = s.metadata.iter().any(|(t, _)| t == "merged_inputs");
    let per_input = |t: &str| {
        t.strip_prefix("input").and_then(|r| r.split_once('.')).is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    s.header = super::header::header(&s.metadata);
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
    let meanings = crate::read::meaning::load(&conn)?;
    let mut codes: Vec<ErrorRow> = by_code
        .into_iter()
        .map(|((n, code), count)| {
            let api = name(n);
            let code_name = if meanings.get(&n).is_some_and(|m| m.ret == crate::api_meaning::RetKind::HipError) {
                crate::read::meaning::hip_error_name(code)
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
    let mut api_pct: HashMap<i64, Percentiles> =
        std::mem::take(&mut scans.api_samples).into_iter().map(|((n, _), k)| (n, k.percentiles())).collect();
    let mut apis: Vec<ApiRow> = by_name
        .iter()
        .map(|(n, st)| ApiRow {
            name: name(*n),
            stat: st.clone(),
            pct: api_pct.remove(n).unwrap_or_default(),
            errors: errors.get(n).copied().unwrap_or(0),
            unclosed: unclosed.get(n).copied().unwrap_or(0),
        })
        .collect();
    apis.sort_by(|a, b| b.stat.sum.cmp(&a.stat.sum).then(a.name.cmp(&b.name)));
    s.apis_total_names = apis.len();
    for a in &apis {
        // Two ids of one name (a merged file): the first's percentiles, the stats summed.
        let e = s.all_apis.entry(a.name.clone()).or_insert_with(|| (Stat::default(), a.pct));
        e.0.merge(&a.stat);
    }
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
    let op_name = |desc: i64, ty: i64| {
        let d = name(desc);
        if d.is_empty() {
            name(ty)
        } else {
            pretty_name(&d)
        }
    };
    let mut op_pct = merge_by(std::mem::take(&mut scans.op_samples), |d, t| (op_name(d, t), name(t)));
    s.gpu_ops = by_op.values().map(|x| x.count).sum();
    s.gpu_time_ns = by_op.values().map(|x| x.sum).sum();
    let mut ops: Vec<OpRow> = by_op
        .into_iter()
        .map(|((n, t), st)| OpRow {
            pct: op_pct.remove(&(n.clone(), t.clone())).map(Kept::percentiles).unwrap_or_default(),
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
    (s.launch_sites, s.launch_sites_total) = crate::read::sites::top_launch_sites(&conn, top)?;

    // Busy, occupancy, gaps.
    let devs = std::mem::take(&mut scans.intervals);
    (s.gpu_first_ns, s.gpu_last_ns) = super::intervals::gpu_span(&devs);
    s.busy = super::intervals::busy(&devs);
    (s.occupancy, s.queue_gaps) = occupancy_and_queue_gaps(&devs, opts.window);
    s.idle_gaps = largest_idle_gaps(&devs, IDLE_GAPS_SHOWN);
    drop(devs);
    super::inflight::fill(&conn, &mut s.idle_gaps, &name)?;
    if opts.report {
        (s.stream_lanes, s.stream_lanes_total) = super::lanes::stream_lanes(&conn, s.gpu_first_ns, s.gpu_last_ns, linked_only)?;
        s.flame = super::flame::flame(&conn, linked_only)?;
    }

    // roctx / NVTX ranges.
    (s.ranges, s.ranges_total_names) = super::ranges::ranges(&conn, std::mem::take(&mut scans.marker_samples), &name, top)?;

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
        procs.insert(pid, ProcessRow { pid, exe: None, cmdline: None, api: st, gpu_ops: 0, gpu_time_ns: 0, gpus: vec![] });
    }
    for (pid, gpu, st) in &scans.link_pid {
        let p = procs.entry(*pid).or_insert_with(|| ProcessRow {
            pid: *pid,
            exe: None,
            cmdline: None,
            api: Stat::default(),
            gpu_ops: 0,
            gpu_time_ns: 0,
            gpus: vec![],
        });
        p.gpu_ops += st.count;
        p.gpu_time_ns += st.sum;
        p.gpus.push((*gpu, st.count, st.sum));
    }
    for p in procs.values_mut() {
        p.gpus.sort();
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
            gpus: vec![],
        });
        p.exe = r.get(1)?;
        p.cmdline = r.get::<_, Option<String>>(2)?.map(|c| c.replace('\0', " ").trim().to_string());
    }
    drop(rows);
    s.processes = procs.into_values().collect();

    // Links, and how they were made.
    let has_links: bool =
        conn.query_row("SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'rtl_op'", [], |r| r.get(0))?;
    let q = match (has_links, linked_only) {
        (false, _) => "SELECT 0, 0 WHERE false",
        (true, false) => "SELECT link, count(*) FROM rtl_op GROUP BY link",
        (true, true) => "SELECT link, count(*) FROM rtl_op WHERE link IN (1, 2, 3) GROUP BY link",
    };
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
    // Ops linked to no traced call, by who published them (what the agent alone says).
    s.linked_only = linked_only;
    if has_links {
        let mut st = conn.prepare("SELECT pid, count(*) FROM rtl_op WHERE link IN (0, 4, 5) GROUP BY pid ORDER BY 2 DESC, 1")?;
        s.unlinked_by_publisher = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
        if !linked_only {
            // Ops with a profiler-only API row are in rocpd_api_ops too: count them here.
            s.unlinked_gpu_ops = s.unlinked_gpu_ops.max(s.unlinked_by_publisher.iter().map(|x| x.1).sum());
        }
    }
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
            histogram: l["histogram"].as_array().map(|a| a.iter().map(|x| x.as_i64().unwrap_or(0)).collect()).unwrap_or_default(),
        });
    }
    let mut lat: Vec<KernelLatency> = merge_by(std::mem::take(&mut scans.latency_samples), op_name)
        .into_iter()
        .map(|(n, k)| KernelLatency {
            name: n,
            count: k.seen as i64,
            min: k.min,
            mean: if k.seen > 0 { k.sum / k.seen as i64 } else { 0 },
            max: k.max,
            pct: k.percentiles(),
        })
        .collect();
    lat.sort_by(|a, b| b.count.cmp(&a.count).then(a.name.cmp(&b.name)));
    if top > 0 {
        lat.truncate(top);
    }
    s.kernel_latency = lat;
    Ok(s)
}
