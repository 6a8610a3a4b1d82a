//! Kineto-conventional Chrome trace JSON: what the PyTorch profiler writes, so that the tools
//! built on it (Holistic Trace Analysis, TraceLens) read an rtl-ebpf trace. See
//! docs/reading-traces.md, "Kineto".
//!
//! Conventions followed (those HTA's parser and analyses rely on):
//! - top-level `schemaVersion`, `deviceProperties` (one entry per GPU seen: its `id`),
//!   `distributedInfo` (`rank`, `world_size`; written on its own line as `"rank": N`, the form
//!   HTA's directory loader looks for), `baseTimeNanoseconds` (wall-clock ns of `ts` 0, from the
//!   trace's `realtime_minus_monotonic_ns`), `traceEvents`;
//! - API calls: `X` events, `cat` `cuda_runtime` (HIP and CUDA runtime calls) or `cuda_driver`
//!   (CUDA driver `cu*` calls), on the calling thread (`pid`, `tid`), `args` `correlation` and
//!   `External id` (both the API call's id), never a `stream` (HTA takes any event with an integer
//!   `stream` for GPU work);
//! - GPU ops: `X` events with `pid` = the device, `tid` = the queue, `cat` `kernel`,
//!   `gpu_memcpy` (named `Memcpy HtoD` / `DtoH` / `DtoD` / `Memcpy`), `gpu_memset`
//!   (`Memset (Device)`) or `cuda_sync` (barriers), `args` `device`, `stream` (the queue number),
//!   `correlation` / `External id` (the API call that caused it; 0 when none), `grid` / `block` /
//!   `shared memory` for kernels, `bytes` / `memory bandwidth (GB/s)` for copies;
//! - `ac2g` flows (`s` on the API call, `f` with `bp: e` on the op, id = the op's id);
//! - roctx / NVTX ranges: `X` events of `cat` `user_annotation` on the thread that pushed them.
//!
//! Times: `ts` / `dur` in microseconds with three decimals (every nanosecond kept), on the
//! trace's CLOCK_MONOTONIC. Streamed row by row; memory does not grow with the trace. One file
//! for the node, or (`per_process`) one per traced process, as a PyTorch job writes one per
//! rank: `NAME.pid<PID>.json[.gz]` beside `NAME.json[.gz]`, ranks numbered in pid order, plus
//! `NAME.unattributed.json[.gz]` (the last rank) when some GPU ops or markers belong to no
//! traced process, so that nothing is left out.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection};

use super::timeline::{self, Arg, Sink, Slice, LANE_TID, MARKER_PID};
use crate::error::Fatal;

/// What one output file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// Everything (one file for the node).
    All,
    /// One process: its API calls, the GPU ops they caused, its markers.
    Process(i64),
    /// GPU ops and markers that no traced process's call accounts for.
    Unattributed,
}

/// What [`convert_kineto`] wrote.
#[derive(Debug, Default)]
pub struct KinetoOutput {
    /// The files, in rank order.
    pub files: Vec<PathBuf>,
    /// GPU ops in no process's file (per process only; they are in the `unattributed` file).
    pub unattributed_ops: i64,
}

/// `out` must end in `.json` or `.json.gz` (HTA reads nothing else); returns (stem, suffix).
fn split_name(out: &Path) -> Result<(String, &'static str)> {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    for suffix in [".json.gz", ".json"] {
        if let Some(stem) = name.strip_suffix(suffix).filter(|s| !s.is_empty()) {
            return Ok((stem.to_string(), suffix));
        }
    }
    Err(anyhow!(Fatal::Usage(format!(
        "{}: --format kineto writes .json or .json.gz (what the PyTorch profiler writes and HTA reads)",
        crate::term::path(out)
    ))))
}

fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// Which GPU op belongs to which API call (and so to which process): the API call linked in
/// `rocpd_api_ops` (the lowest id when several), else the API call with the op's correlation id.
fn build_op_owners(conn: &Connection) -> Result<()> {
    conn.execute_batch(
        "DROP TABLE IF EXISTS temp.k_op;
         CREATE TEMP TABLE k_op AS
           SELECT x.op_id, x.api_id, a.pid FROM (
             SELECT o.id AS op_id,
                    coalesce((SELECT min(l.api_id) FROM rocpd_api_ops l WHERE l.op_id = o.id),
                             (SELECT min(a2.id) FROM rocpd_api a2 WHERE o.correlation_id != 0 AND a2.correlation_id = o.correlation_id)) AS api_id
             FROM rocpd_op o WHERE o.gpuId >= 0) x
           LEFT JOIN rocpd_api a ON a.id = x.api_id;
         CREATE INDEX temp.k_op_pid ON k_op(pid);",
    )
    .context("finding the API call of each GPU op")?;
    Ok(())
}

/// SQL condition on a process id column for a unit; `?1` is the pid.
fn pid_filter(unit: Unit, col: &str) -> String {
    match unit {
        Unit::All => "1".into(),
        Unit::Process(_) => format!("{col} = ?1"),
        Unit::Unattributed => format!("{col} IS NULL"),
    }
}

fn unit_pid(unit: Unit) -> i64 {
    match unit {
        Unit::Process(p) => p,
        _ => 0,
    }
}

struct Writer<'w> {
    w: &'w mut dyn Write,
    first: bool,
}

impl Writer<'_> {
    fn event(&mut self, text: &str) -> Result<()> {
        self.w.write_all(if self.first { b"\n" } else { b",\n" })?;
        self.first = false;
        self.w.write_all(text.as_bytes())?;
        Ok(())
    }

    fn meta(&mut self, what: &str, pid: i64, tid: Option<i64>, args: &str) -> Result<()> {
        let tid = tid.map(|t| format!(",\"tid\":{t}")).unwrap_or_default();
        self.event(&format!(r#"{{"ph":"M","name":"{what}","pid":{pid}{tid},"ts":0,"args":{args}}}"#))
    }
}

/// Processes: pid -> (name, command line).
fn processes(conn: &Connection) -> Result<Vec<(i64, String, Option<String>)>> {
    let mut out: std::collections::BTreeMap<i64, (String, Option<String>)> = Default::default();
    let mut st = conn.prepare("SELECT pid, exe, cmdline FROM rtl_process")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let pid: i64 = r.get(0)?;
        let exe: Option<String> = r.get(1)?;
        let cmd: Option<String> = r.get::<_, Option<String>>(2)?.map(|c| c.replace('\0', " ").trim().to_string()).filter(|c| !c.is_empty());
        let base = exe
            .as_deref()
            .filter(|e| !e.is_empty())
            .or_else(|| cmd.as_deref().and_then(|c| c.split(' ').next()))
            .map(|e| e.rsplit('/').next().unwrap_or(e).to_string())
            .unwrap_or_else(|| "pid".into());
        out.insert(pid, (format!("{base} {pid}"), cmd));
    }
    let mut st = conn.prepare("SELECT DISTINCT pid FROM rocpd_api")?;
    for pid in st.query_map([], |r| r.get::<_, i64>(0))? {
        let pid = pid?;
        out.entry(pid).or_insert_with(|| (format!("pid {pid}"), None));
    }
    Ok(out.into_iter().map(|(p, (n, c))| (p, n, c)).collect())
}

/// Kineto's category and name for a GPU op of type `op_type` described as `desc`.
fn op_kind(op_type: &str, desc: &str) -> (&'static str, String) {
    let named = |fallback: &str| if desc.is_empty() { fallback.to_string() } else { desc.to_string() };
    match op_type {
        "KernelExecution" => ("kernel", named("KernelExecution")),
        "GraphExecution" => ("kernel", named("GraphExecution")),
        "CopyHostToDevice" => ("gpu_memcpy", "Memcpy HtoD".into()),
        "CopyDeviceToHost" => ("gpu_memcpy", "Memcpy DtoH".into()),
        "CopyDeviceToDevice" => ("gpu_memcpy", "Memcpy DtoD".into()),
        "Copy" => ("gpu_memcpy", "Memcpy".into()),
        "FillBuffer" => ("gpu_memset", "Memset (Device)".into()),
        "Barrier" => ("cuda_sync", "Barrier".into()),
        _ => ("kernel", named(op_type)),
    }
}

fn api_cat(name: &str) -> &'static str {
    let driver = name.starts_with("cu") && !name.starts_with("cuda");
    if driver {
        "cuda_driver"
    } else {
        "cuda_runtime"
    }
}

/// roctx / NVTX ranges as `user_annotation` on their thread, through the Perfetto layout's
/// marker placement (its roctx track ids are mapped back to the thread).
struct MarkerSink<'a, 'w> {
    w: &'a mut Writer<'w>,
    unit: Unit,
}

impl Sink for MarkerSink<'_, '_> {
    fn process(&mut self, pid: i64, name: &str, _cmdline: Option<&str>, _sort_index: i64) -> Result<()> {
        if pid == MARKER_PID && !matches!(self.unit, Unit::Process(_)) {
            self.w.meta("process_name", pid, None, &format!("{{\"name\":{}}}", js(name)))?;
        }
        Ok(())
    }
    fn thread(&mut self, _pid: i64, _tid: i64, _name: &str, _sort_index: i64) -> Result<()> {
        Ok(())
    }
    fn slice(&mut self, s: &Slice) -> Result<()> {
        let keep = match self.unit {
            Unit::All => true,
            Unit::Process(p) => s.pid == p,
            Unit::Unattributed => s.pid == MARKER_PID,
        };
        if !keep {
            return Ok(());
        }
        let tid = if s.pid == MARKER_PID { 0 } else { s.tid % LANE_TID };
        let mut args = String::new();
        for (k, v) in &s.args {
            if let Arg::Int(n) = v {
                args.push_str(&format!(",\"{k}\":{n}"));
            }
        }
        self.w.event(&format!(
            r#"{{"ph":"X","cat":"user_annotation","name":{},"pid":{},"tid":{tid},"ts":{},"dur":{},"args":{{"External id":0{args}}}}}"#,
            js(s.name),
            s.pid,
            us(s.ts),
            us(s.dur)
        ))
    }
    fn flush_track(&mut self, _pid: i64, _tid: i64) -> Result<()> {
        Ok(())
    }
}

/// Everything of one unit, as the `traceEvents` array's elements.
fn write_events(
    conn: &Connection,
    prelude: &timeline::Prelude,
    unit: Unit,
    procs: &[(i64, String, Option<String>)],
    w: &mut Writer,
) -> Result<()> {
    let p = unit_pid(unit);
    // Process and thread names.
    for (pid, name, cmd) in procs {
        if matches!(unit, Unit::Process(q) if q != *pid) || unit == Unit::Unattributed {
            continue;
        }
        w.meta("process_name", *pid, None, &format!("{{\"name\":{}}}", js(name)))?;
        w.meta("process_sort_index", *pid, None, &format!("{{\"sort_index\":{}}}", pid + (1 << 24)))?;
        if let Some(c) = cmd {
            w.meta("process_labels", *pid, None, &format!("{{\"labels\":{}}}", js(c)))?;
        }
    }
    {
        let sql = format!("SELECT DISTINCT pid, tid FROM rocpd_api WHERE {}", pid_filter(unit, "pid"));
        let mut st = conn.prepare(&sql)?;
        let mut rows = if matches!(unit, Unit::Process(_)) { st.query(params![p])? } else { st.query([])? };
        while let Some(r) = rows.next()? {
            let (pid, tid): (i64, i64) = (r.get(0)?, r.get(1)?);
            let n = if pid == tid { format!("thread {tid} (main)") } else { format!("thread {tid}") };
            w.meta("thread_name", pid, Some(tid), &format!("{{\"name\":{}}}", js(&n)))?;
        }
    }
    {
        let sql = format!(
            "SELECT DISTINCT o.gpuId, o.queueId FROM k_op k JOIN rocpd_op o ON o.id = k.op_id WHERE {} ORDER BY 1, 2",
            pid_filter(unit, "k.pid")
        );
        let mut st = conn.prepare(&sql)?;
        let mut rows = if matches!(unit, Unit::Process(_)) { st.query(params![p])? } else { st.query([])? };
        let mut last = None;
        while let Some(r) = rows.next()? {
            let (gpu, q): (i64, i64) = (r.get(0)?, r.get(1)?);
            if last != Some(gpu) {
                w.meta("process_name", gpu, None, &format!("{{\"name\":\"GPU {gpu}\"}}"))?;
                w.meta("process_labels", gpu, None, &format!("{{\"labels\":\"GPU {gpu}\"}}"))?;
                w.meta("process_sort_index", gpu, None, &format!("{{\"sort_index\":{gpu}}}"))?;
                last = Some(gpu);
            }
            w.meta("thread_name", gpu, Some(q), &format!("{{\"name\":\"stream {q}\"}}"))?;
        }
    }

    // API calls.
    {
        let sql = format!(
            "SELECT a.id, a.pid, a.tid, a.start, a.end, s.string, u.string, ks.string, c.size
             FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id
             LEFT JOIN rocpd_ustring u ON u.id = a.args_id
             LEFT JOIN rocpd_kernelapi k ON k.api_ptr_id = a.id LEFT JOIN rocpd_string ks ON ks.id = k.kernelName_id
             LEFT JOIN rocpd_copyapi c ON c.api_ptr_id = a.id
             WHERE {}",
            pid_filter(unit, "a.pid")
        );
        let mut st = conn.prepare(&sql)?;
        let mut rows = if matches!(unit, Unit::Process(_)) { st.query(params![p])? } else { st.query([])? };
        while let Some(r) = rows.next()? {
            let (id, pid, tid, start, end): (i64, i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
            let name: String = r.get(5)?;
            let mut args = format!("\"External id\":{id},\"correlation\":{id}");
            if let Some(t) = r.get::<_, Option<String>>(6)?.filter(|t| !t.is_empty()) {
                args.push_str(&format!(",\"args\":{}", js(&t)));
            }
            if let Some(k) = r.get::<_, Option<String>>(7)?.filter(|t| !t.is_empty()) {
                args.push_str(&format!(",\"kernel\":{}", js(&k)));
            }
            if let Some(b) = r.get::<_, Option<i64>>(8)? {
                args.push_str(&format!(",\"bytes\":{b}"));
            }
            w.event(&format!(
                r#"{{"ph":"X","cat":"{}","name":{},"pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{{args}}}}}"#,
                api_cat(&name),
                js(&name),
                us(start),
                us(end.max(start) - start)
            ))?;
        }
    }

    // GPU ops, and a flow from each op's API call to it.
    {
        let sql = format!(
            "SELECT o.id, o.gpuId, o.queueId, o.start, o.end, d.string, t.string, k.api_id, a.pid, a.tid, a.start,
                    ka.gridX, ka.gridY, ka.gridZ, ka.workgroupX, ka.workgroupY, ka.workgroupZ, ka.groupSegmentSize, c.size
             FROM k_op k JOIN rocpd_op o ON o.id = k.op_id
             JOIN rocpd_string d ON d.id = o.description_id JOIN rocpd_string t ON t.id = o.opType_id
             LEFT JOIN rocpd_api a ON a.id = k.api_id
             LEFT JOIN rocpd_kernelapi ka ON ka.api_ptr_id = k.api_id
             LEFT JOIN rocpd_copyapi c ON c.api_ptr_id = k.api_id
             WHERE {}",
            pid_filter(unit, "k.pid")
        );
        let mut st = conn.prepare(&sql)?;
        let mut rows = if matches!(unit, Unit::Process(_)) { st.query(params![p])? } else { st.query([])? };
        while let Some(r) = rows.next()? {
            let (id, gpu, q, start, end): (i64, i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
            let end = end.max(start);
            let (desc, op_type): (String, String) = (r.get(5)?, r.get(6)?);
            let (cat, name) = op_kind(&op_type, &desc);
            let api: Option<i64> = r.get(7)?;
            let corr = api.unwrap_or(0);
            let mut args = format!("\"External id\":{corr},\"correlation\":{corr},\"device\":{gpu},\"stream\":{q},\"op_id\":{id}");
            if name != desc && !desc.is_empty() {
                args.push_str(&format!(",\"description\":{}", js(&desc)));
            }
            if cat == "kernel" {
                if let Some(g) = r.get::<_, Option<i64>>(11)? {
                    let v: Vec<i64> = (12..18).map(|i| r.get::<_, Option<i64>>(i).map(|x| x.unwrap_or(0))).collect::<Result<_, _>>()?;
                    args.push_str(&format!(
                        ",\"grid\":[{g},{},{}],\"block\":[{},{},{}],\"shared memory\":{}",
                        v[0], v[1], v[2], v[3], v[4], v[5]
                    ));
                }
            }
            if cat == "gpu_memcpy" || cat == "gpu_memset" {
                if let Some(b) = r.get::<_, Option<i64>>(18)? {
                    args.push_str(&format!(",\"bytes\":{b}"));
                    if end > start {
                        args.push_str(&format!(",\"memory bandwidth (GB/s)\":{:.6}", b as f64 / (end - start) as f64));
                    }
                }
            }
            w.event(&format!(
                r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{gpu},"tid":{q},"ts":{},"dur":{},"args":{{{args}}}}}"#,
                js(&name),
                us(start),
                us(end - start)
            ))?;
            if let (Some(_), Some(apid), Some(atid), Some(ats)) =
                (api, r.get::<_, Option<i64>>(8)?, r.get::<_, Option<i64>>(9)?, r.get::<_, Option<i64>>(10)?)
            {
                w.event(&format!(r#"{{"ph":"s","id":{id},"pid":{apid},"tid":{atid},"ts":{},"cat":"ac2g","name":"ac2g"}}"#, us(ats)))?;
                w.event(&format!(
                    r#"{{"ph":"f","id":{id},"pid":{gpu},"tid":{q},"ts":{},"cat":"ac2g","name":"ac2g","bp":"e"}}"#,
                    us(start)
                ))?;
            }
        }
    }

    // roctx / NVTX ranges.
    let mut ms = MarkerSink { w, unit };
    timeline::emit_markers(conn, prelude, &mut ms)?;
    Ok(())
}

fn realtime_offset(conn: &Connection) -> Result<Option<i64>> {
    let v: Option<String> = conn
        .query_row("SELECT value FROM rocpd_metadata WHERE tag = 'realtime_minus_monotonic_ns' ORDER BY id LIMIT 1", [], |r| r.get(0))
        .or_else(|e| if matches!(e, rusqlite::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) })?;
    Ok(v.and_then(|s| s.trim().parse::<i64>().ok()))
}

/// One file: the Kineto header, then the unit's events.
#[allow(clippy::too_many_arguments)]
fn write_file(
    conn: &Connection,
    prelude: &timeline::Prelude,
    db: &Path,
    out: &Path,
    unit: Unit,
    rank: usize,
    world: usize,
    procs: &[(i64, String, Option<String>)],
) -> Result<()> {
    let (f, guard) = super::open::OutFile::create(&[db], out)?;
    let gz = out.extension().is_some_and(|e| e == "gz");
    let body = |w: &mut dyn Write| -> Result<()> {
        let mut gpus = Vec::new();
        {
            let sql = format!(
                "SELECT DISTINCT o.gpuId FROM k_op k JOIN rocpd_op o ON o.id = k.op_id WHERE {} ORDER BY 1",
                pid_filter(unit, "k.pid")
            );
            let mut st = conn.prepare(&sql)?;
            let mut rows = if matches!(unit, Unit::Process(_)) { st.query(params![unit_pid(unit)])? } else { st.query([])? };
            while let Some(r) = rows.next()? {
                gpus.push(r.get::<_, i64>(0)?);
            }
        }
        let devices: Vec<String> = gpus.iter().map(|g| format!("{{\"id\": {g}, \"name\": \"GPU {g}\"}}")).collect();
        writeln!(w, "{{")?;
        writeln!(w, "  \"schemaVersion\": 1,")?;
        writeln!(w, "  \"distributedInfo\": {{\"backend\": \"none\", \"rank\": {rank}, \"world_size\": {world}}},")?;
        writeln!(w, "  \"deviceProperties\": [{}],", devices.join(", "))?;
        if let Some(off) = realtime_offset(conn)? {
            writeln!(w, "  \"baseTimeNanoseconds\": {off},")?;
        }
        let what = match unit {
            Unit::All => "all processes".to_string(),
            Unit::Process(p) => format!("process {p}"),
            Unit::Unattributed => "GPU ops and markers of no traced process".to_string(),
        };
        writeln!(w, "  \"traceName\": {},", js(&format!("rtl-ebpf {} ({what})", db.display())))?;
        writeln!(w, "  \"displayTimeUnit\": \"ms\",")?;
        write!(w, "  \"traceEvents\": [")?;
        let mut wr = Writer { w, first: true };
        write_events(conn, prelude, unit, procs, &mut wr)?;
        w.write_all(b"\n  ]\n}\n")?;
        Ok(())
    };
    let res = if gz {
        let mut w = BufWriter::with_capacity(
            1 << 20,
            flate2::write::GzEncoder::new(BufWriter::with_capacity(1 << 20, f), flate2::Compression::fast()),
        );
        body(&mut w).and_then(|_| {
            let enc = w.into_inner().map_err(|e| e.into_error())?;
            Ok(enc.finish()?.flush()?)
        })
    } else {
        let mut w = BufWriter::with_capacity(1 << 20, f);
        body(&mut w).and_then(|_| Ok(w.flush()?))
    };
    res.with_context(|| format!("converting {} to {}", db.display(), out.display()))?;
    guard.commit()
}

/// Writes `db` as Kineto-conventional Chrome trace JSON: to `out`, or with `per_process` one
/// file per traced process beside it (`NAME.pid<PID>.json[.gz]`, plus `NAME.unattributed...`
/// when needed). `out` must end in `.json` or `.json.gz` (gzip for the latter).
pub fn convert_kineto(db: &Path, facts: crate::api_meaning::ApiFacts, out: &Path, per_process: bool) -> Result<KinetoOutput> {
    let (stem, suffix) = split_name(out)?;
    let trace = super::open::open_trace(db, facts)?;
    let conn: &Connection = &trace;
    timeline::bounded_memory(conn)?;
    build_op_owners(conn)?;
    let prelude = timeline::prelude(conn)?;
    let procs = processes(conn)?;
    let mut result = KinetoOutput::default();
    if !per_process {
        write_file(conn, &prelude, db, out, Unit::All, 0, 1, &procs)?;
        result.files.push(out.to_path_buf());
        return Ok(result);
    }
    let unattributed_ops: i64 = conn.query_row("SELECT count(*) FROM k_op WHERE pid IS NULL", [], |r| r.get(0))?;
    let unplaced_markers = {
        let mut probe = MarkerCount::default();
        timeline::emit_markers(conn, &prelude, &mut probe)?;
        probe.0
    };
    let with_rest = unattributed_ops > 0 || unplaced_markers > 0;
    let world = procs.len() + usize::from(with_rest);
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    for (rank, (pid, _, _)) in procs.iter().enumerate() {
        let path = dir.join(format!("{stem}.pid{pid}{suffix}"));
        write_file(conn, &prelude, db, &path, Unit::Process(*pid), rank, world, &procs)?;
        result.files.push(path);
    }
    if with_rest {
        let path = dir.join(format!("{stem}.unattributed{suffix}"));
        write_file(conn, &prelude, db, &path, Unit::Unattributed, procs.len(), world, &procs)?;
        result.files.push(path);
    }
    result.unattributed_ops = unattributed_ops;
    Ok(result)
}

/// Counts markers placed on no traced thread.
#[derive(Default)]
struct MarkerCount(i64);

impl Sink for MarkerCount {
    fn process(&mut self, _: i64, _: &str, _: Option<&str>, _: i64) -> Result<()> {
        Ok(())
    }
    fn thread(&mut self, _: i64, _: i64, _: &str, _: i64) -> Result<()> {
        Ok(())
    }
    fn slice(&mut self, s: &Slice) -> Result<()> {
        if s.pid == MARKER_PID {
            self.0 += 1;
        }
        Ok(())
    }
    fn flush_track(&mut self, _: i64, _: i64) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_json() {
        assert_eq!(split_name(Path::new("a/t.json")).unwrap(), ("t".into(), ".json"));
        assert_eq!(split_name(Path::new("t.json.gz")).unwrap(), ("t".into(), ".json.gz"));
        assert!(split_name(Path::new("t.pftrace")).is_err());
        assert!(split_name(Path::new(".json")).is_err());
    }

    #[test]
    fn op_kinds_follow_kineto() {
        assert_eq!(op_kind("CopyHostToDevice", "__amd_rocclr_copyBuffer"), ("gpu_memcpy", "Memcpy HtoD".into()));
        assert_eq!(op_kind("FillBuffer", ""), ("gpu_memset", "Memset (Device)".into()));
        assert_eq!(op_kind("KernelExecution", "vadd"), ("kernel", "vadd".into()));
        assert_eq!(api_cat("cuLaunchKernel"), "cuda_driver");
        assert_eq!(api_cat("cudaLaunchKernel"), "cuda_runtime");
        assert_eq!(api_cat("hipLaunchKernel"), "cuda_runtime");
    }
}
