//! The timeline both Perfetto writers produce: process / thread tracks for API calls, one
//! process per GPU with a thread per queue for GPU ops, roctx ranges on a track beside their
//! thread, and flows from each API call to the ops it caused.
//!
//! The rows are streamed from SQLite (ordered per track) into a [`Sink`]; nothing big is held in
//! memory. Slices on one track are kept properly nested: a slice that partially overlaps an
//! earlier one on the same track (concurrent kernels on one queue, an unclosed API call) goes to
//! an extra "overlap" lane of that track instead of corrupting the nesting.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use super::GPU_PID_BASE;
use crate::api_meaning::RetKind;

/// tid offset of a thread's roctx track, and of extra overlap lanes (`lane * LANE_TID`).
pub(crate) const ROCTX_TID_BASE: i64 = 1 << 29;
pub(crate) const LANE_TID: i64 = 1 << 26;
/// Pseudo process for roctx markers whose thread could not be found.
pub(crate) const MARKER_PID: i64 = GPU_PID_BASE - 1;
/// Flow ids for correlation-id links (no rocpd_api_ops row): this plus the op id.
pub(crate) const CORR_FLOW_BASE: u64 = 1 << 40;

#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(i64),
    /// An address or raw register value: shown in hex.
    Hex(i64),
    Str(String),
}

#[derive(Debug)]
pub(crate) struct Slice<'a> {
    pub pid: i64,
    pub tid: i64,
    pub ts: i64,
    pub dur: i64,
    pub name_id: i64,
    pub name: &'a str,
    pub cat: &'static str,
    pub args: Vec<(&'a str, Arg)>,
    /// Flows leaving this slice (API side) and arriving at it (op side).
    pub flow_out: Vec<u64>,
    pub flow_in: Vec<u64>,
}

pub(crate) trait Sink {
    fn process(&mut self, pid: i64, name: &str, cmdline: Option<&str>, sort_index: i64) -> Result<()>;
    fn thread(&mut self, pid: i64, tid: i64, name: &str, sort_index: i64) -> Result<()>;
    fn slice(&mut self, s: &Slice) -> Result<()>;
    /// Called when a lane's stream of slices ends or before a slice starting at `until`:
    /// writers that emit begin/end pairs close what ended (the slice stack of a lane is LIFO).
    fn flush_track(&mut self, pid: i64, tid: i64) -> Result<()>;
}

/// Keeps slices of one logical track properly nested by spreading them over lanes.
#[derive(Default)]
struct Lanes {
    key: Option<(i64, i64)>,
    stacks: Vec<Vec<i64>>,
}

impl Lanes {
    /// Returns the lane for [start, end] (events must come ordered by start, then end desc).
    fn place(&mut self, key: (i64, i64), start: i64, end: i64) -> (usize, bool) {
        let mut new_track = false;
        if self.key != Some(key) {
            self.key = Some(key);
            self.stacks.clear();
            new_track = true;
        }
        for (i, st) in self.stacks.iter_mut().enumerate() {
            while st.last().is_some_and(|&e| e <= start) {
                st.pop();
            }
            if st.last().is_none_or(|&e| e >= end) {
                st.push(end);
                return (i, new_track);
            }
        }
        self.stacks.push(vec![end]);
        (self.stacks.len() - 1, new_track)
    }
}

fn parse_ids(s: Option<String>, base: u64) -> Vec<u64> {
    s.map(|s| s.split(',').filter_map(|x| x.trim().parse::<u64>().ok()).map(|x| x + base).collect()).unwrap_or_default()
}

pub(crate) fn strings(conn: &Connection) -> Result<HashMap<i64, String>> {
    let mut st = conn.prepare("SELECT id, string FROM rocpd_string")?;
    let m = st
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(m)
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// What every part of the timeline needs: string table, processes, whether correlation-id-only
/// links exist.
pub(crate) struct Prelude {
    names: HashMap<i64, String>,
    /// What rtl_api's values mean per API name id, as the trace records it.
    meanings: HashMap<i64, super::meaning::Meaning>,
    has_corr_fallback: bool,
    procs: HashMap<i64, (String, Option<String>)>,
    pids: Vec<i64>,
}

impl Prelude {
    fn name_of(&self, id: i64) -> &str {
        self.names.get(&id).map(String::as_str).unwrap_or("")
    }
}

pub(crate) fn prelude(conn: &Connection) -> Result<Prelude> {
    let names = strings(conn)?;
    let has_corr_fallback: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM rocpd_op o WHERE o.gpuId >= 0 AND o.correlation_id != 0
             AND NOT EXISTS (SELECT 1 FROM rocpd_api_ops l WHERE l.op_id = o.id)
             AND EXISTS (SELECT 1 FROM rocpd_api a WHERE a.correlation_id = o.correlation_id))",
        [],
        |r| r.get(0),
    )?;

    // Processes and threads.
    let mut procs: HashMap<i64, (String, Option<String>)> = HashMap::new();
    {
        let mut st = conn.prepare("SELECT pid, exe, cmdline FROM rtl_process")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let pid: i64 = r.get(0)?;
            let exe: Option<String> = r.get(1)?;
            let cmd: Option<String> = r.get(2)?;
            let cmd = cmd.map(|c| c.replace('\0', " ").trim().to_string()).filter(|c| !c.is_empty());
            let name = exe
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(basename)
                .or_else(|| cmd.as_deref().and_then(|c| c.split(' ').next()).map(basename))
                .map(|n| format!("{n} {pid}"))
                .unwrap_or_else(|| format!("pid {pid}"));
            procs.insert(pid, (name, cmd));
        }
    }
    let mut st = conn.prepare("SELECT DISTINCT pid FROM rocpd_api")?;
    let api_pids = st.query_map([], |r| r.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
    for pid in api_pids {
        procs.entry(pid).or_insert_with(|| (format!("pid {pid}"), None));
    }
    let mut pids: Vec<_> = procs.keys().copied().collect();
    pids.sort();
    Ok(Prelude { names, meanings: super::meaning::load(conn)?, has_corr_fallback, procs, pids })
}

/// Process, thread and GPU queue tracks.
pub(crate) fn emit_tracks(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    for pid in &p.pids {
        let (n, c) = &p.procs[pid];
        sink.process(*pid, n, c.as_deref(), *pid)?;
    }
    let mut st = conn.prepare("SELECT DISTINCT pid, tid FROM rocpd_api ORDER BY pid, tid")?;
    let threads = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?;
    for (pid, tid) in &threads {
        let n = if pid == tid { format!("main thread {tid}") } else { format!("thread {tid}") };
        sink.thread(*pid, *tid, &n, if pid == tid { 0 } else { 1 })?;
    }
    let mut st = conn.prepare("SELECT DISTINCT gpuId, queueId FROM rocpd_op WHERE gpuId >= 0 ORDER BY gpuId, queueId")?;
    let queues = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?;
    let mut last_gpu = None;
    for (gpu, q) in &queues {
        if last_gpu != Some(*gpu) {
            sink.process(GPU_PID_BASE + gpu, &format!("GPU {gpu}"), None, GPU_PID_BASE + gpu)?;
            last_gpu = Some(*gpu);
        }
        sink.thread(GPU_PID_BASE + gpu, *q, &format!("queue {q}"), *q)?;
    }

    Ok(())
}

/// API calls, per thread in start order.
pub(crate) fn emit_apis(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
    let flows_fallback = if p.has_corr_fallback {
        "(SELECT group_concat(o.id) FROM rocpd_op o WHERE a.correlation_id != 0 AND o.correlation_id = a.correlation_id AND o.gpuId >= 0
              AND NOT EXISTS (SELECT 1 FROM rocpd_api_ops l WHERE l.op_id = o.id)
              AND a.id = (SELECT min(a2.id) FROM rocpd_api a2 WHERE a2.correlation_id = a.correlation_id))"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT a.id, a.pid, a.tid, a.start, a.end, a.apiName_id, u.string, a.correlation_id,
                r.ret, r.status, r.a0, r.a1, r.a2, r.a3,
                k.kernelName_id, k.gridX, k.gridY, k.gridZ, k.workgroupX, k.workgroupY, k.workgroupZ, k.stream,
                c.size, c.kind, c.stream,
                (SELECT group_concat(l.id) FROM rocpd_api_ops l JOIN rocpd_op lo ON lo.id = l.op_id WHERE l.api_id = a.id AND lo.gpuId >= 0),
                {flows_fallback}
         FROM rocpd_api a
         LEFT JOIN rocpd_ustring u ON u.id = a.args_id
         LEFT JOIN rtl_api r ON r.api_id = a.id
         LEFT JOIN rocpd_kernelapi k ON k.api_ptr_id = a.id
         LEFT JOIN rocpd_copyapi c ON c.api_ptr_id = a.id
         ORDER BY a.pid, a.tid, a.start, a.end DESC"
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    let mut lanes = Lanes::default();
    let mut announced: std::collections::HashSet<(i64, i64)> = std::collections::HashSet::new();
    let mut open_tracks: Vec<(i64, i64)> = vec![];
    while let Some(r) = rows.next()? {
        let (id, pid, tid, start, end): (i64, i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        let end = end.max(start);
        let name_id: i64 = r.get(5)?;
        let mut args: Vec<(&str, Arg)> = vec![("api_id", Arg::Int(id))];
        if let Some(t) = r.get::<_, Option<String>>(6)?.filter(|t| !t.is_empty()) {
            args.push(("args", Arg::Str(t)));
        }
        let corr: i64 = r.get(7)?;
        if corr != 0 {
            args.push(("correlation_id", Arg::Int(corr)));
        }
        // What ret and a0..a3 mean is what the trace recorded for this API.
        let meaning = p.meanings.get(&name_id);
        let ret_kind = meaning.map_or(RetKind::Unknown, |m| m.ret);
        if let Some(ret) = r.get::<_, Option<i64>>(8)? {
            match ret_kind {
                RetKind::Void | RetKind::Other => {}
                RetKind::Pointer | RetKind::Unknown => args.push(("ret", Arg::Hex(ret))),
                _ => args.push(("ret", Arg::Int(ret))),
            }
            if ret != 0 && ret_kind == RetKind::HipError {
                args.push(("error", Arg::Str(hip_error_name(ret))));
            }
        }
        let status = r.get::<_, Option<i64>>(9)?.unwrap_or(0);
        if status != 0 {
            args.push(("status", Arg::Str(super::summary::status_name(status).into())));
        }
        for i in 0..4 {
            if let Some(v) = r.get::<_, Option<i64>>(10 + i)? {
                let (k, hex) = super::meaning::arg(meaning, status, i);
                args.push((k, if hex { Arg::Hex(v) } else { Arg::Int(v) }));
            }
        }
        if let Some(kn) = r.get::<_, Option<i64>>(14)? {
            args.push(("kernel", Arg::Str(name_of(kn).to_string())));
            let g: Vec<i64> = (15..21).map(|i| r.get::<_, Option<i64>>(i).map(|v| v.unwrap_or(0))).collect::<Result<_, _>>()?;
            args.push(("grid", Arg::Str(format!("{}x{}x{}", g[0], g[1], g[2]))));
            args.push(("workgroup", Arg::Str(format!("{}x{}x{}", g[3], g[4], g[5]))));
            if let Some(s) = r.get::<_, Option<String>>(21)?.filter(|s| !s.is_empty()) {
                args.push(("stream", Arg::Str(s)));
            }
        }
        if let Some(size) = r.get::<_, Option<i64>>(22)? {
            args.push(("bytes", Arg::Int(size)));
            args.push(("copy_kind", Arg::Int(r.get::<_, Option<i64>>(23)?.unwrap_or(0))));
            if let Some(s) = r.get::<_, Option<String>>(24)?.filter(|s| !s.is_empty()) {
                args.push(("stream", Arg::Str(s)));
            }
        }
        let mut flow_out = parse_ids(r.get(25)?, 0);
        flow_out.extend(parse_ids(r.get(26)?, CORR_FLOW_BASE));
        let (lane, new_track) = lanes.place((pid, tid), start, end);
        if new_track {
            for (p, t) in open_tracks.drain(..) {
                sink.flush_track(p, t)?;
            }
        }
        let ltid = tid + lane as i64 * LANE_TID;
        if lane > 0 && announced.insert((pid, ltid)) {
            sink.thread(pid, ltid, &format!("thread {tid} (overlap {lane})"), 2)?;
        }
        if !open_tracks.contains(&(pid, ltid)) {
            open_tracks.push((pid, ltid));
        }
        sink.slice(&Slice {
            pid,
            tid: ltid,
            ts: start,
            dur: end - start,
            name_id,
            name: name_of(name_id),
            cat: "api",
            args,
            flow_out,
            flow_in: vec![],
        })?;
    }
    for (p, t) in open_tracks.drain(..) {
        sink.flush_track(p, t)?;
    }
    drop(rows);

    Ok(())
}

/// GPU ops, per queue in start order.
pub(crate) fn emit_ops(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
    let mut announced: std::collections::HashSet<(i64, i64)> = std::collections::HashSet::new();
    let mut open_tracks: Vec<(i64, i64)> = vec![];
    let flows_fallback = if p.has_corr_fallback {
        "CASE WHEN o.correlation_id != 0 AND NOT EXISTS (SELECT 1 FROM rocpd_api_ops l WHERE l.op_id = o.id)
              AND EXISTS (SELECT 1 FROM rocpd_api a WHERE a.correlation_id = o.correlation_id) THEN o.id END"
    } else {
        "NULL"
    };
    let sql = format!(
        "SELECT o.id, o.gpuId, o.queueId, o.start, o.end, o.description_id, o.opType_id, o.correlation_id, o.sequenceId,
                (SELECT group_concat(l.id) FROM rocpd_api_ops l WHERE l.op_id = o.id), {flows_fallback}
         FROM rocpd_op o WHERE o.gpuId >= 0 ORDER BY o.gpuId, o.queueId, o.start, o.end DESC"
    );
    let mut st = conn.prepare(&sql)?;
    let mut rows = st.query([])?;
    let mut lanes = Lanes::default();
    while let Some(r) = rows.next()? {
        let (id, gpu, q, start, end): (i64, i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        let end = end.max(start);
        let (desc, ty): (i64, i64) = (r.get(5)?, r.get(6)?);
        let (name_id, name) = if name_of(desc).is_empty() { (ty, name_of(ty)) } else { (desc, name_of(desc)) };
        let mut args: Vec<(&'static str, Arg)> = vec![("op_id", Arg::Int(id)), ("opType", Arg::Str(name_of(ty).to_string()))];
        let corr: i64 = r.get(7)?;
        if corr != 0 {
            args.push(("correlation_id", Arg::Int(corr)));
        }
        args.push(("sequenceId", Arg::Int(r.get::<_, Option<i64>>(8)?.unwrap_or(0))));
        let mut flow_in = parse_ids(r.get(9)?, 0);
        if let Some(x) = r.get::<_, Option<i64>>(10)? {
            flow_in.push(x as u64 + CORR_FLOW_BASE);
        }
        let pid = GPU_PID_BASE + gpu;
        let (lane, new_track) = lanes.place((pid, q), start, end);
        if new_track {
            for (p, t) in open_tracks.drain(..) {
                sink.flush_track(p, t)?;
            }
        }
        let ltid = q + lane as i64 * LANE_TID;
        if lane > 0 && announced.insert((pid, ltid)) {
            sink.thread(pid, ltid, &format!("queue {q} (overlap {lane})"), q)?;
        }
        if !open_tracks.contains(&(pid, ltid)) {
            open_tracks.push((pid, ltid));
        }
        sink.slice(&Slice { pid, tid: ltid, ts: start, dur: end - start, name_id, name, cat: "gpu", args, flow_out: vec![], flow_in })?;
    }
    for (p, t) in open_tracks.drain(..) {
        sink.flush_track(p, t)?;
    }
    drop(rows);

    Ok(())
}

/// roctx ranges (marker ops, gpuId < 0): on a track beside the thread that pushed them.
pub(crate) fn emit_markers(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
    let mut announced: std::collections::HashSet<(i64, i64)> = std::collections::HashSet::new();
    let mut open_tracks: Vec<(i64, i64)> = vec![];
    let sql = "SELECT o.id, o.start, o.end, o.description_id, o.queueId,
                  coalesce((SELECT a.pid FROM rocpd_api_ops l JOIN rocpd_api a ON a.id = l.api_id WHERE l.op_id = o.id LIMIT 1),
                           (SELECT a.pid FROM rocpd_api a WHERE o.correlation_id != 0 AND a.correlation_id = o.correlation_id LIMIT 1)),
                  coalesce((SELECT a.tid FROM rocpd_api_ops l JOIN rocpd_api a ON a.id = l.api_id WHERE l.op_id = o.id LIMIT 1),
                           (SELECT a.tid FROM rocpd_api a WHERE o.correlation_id != 0 AND a.correlation_id = o.correlation_id LIMIT 1))
           FROM rocpd_op o WHERE o.gpuId < 0";
    let mut st = conn.prepare(sql)?;
    let mut markers = st
        .query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<i64>>(6)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    // Place each marker: its API's thread, else the process named by queueId, else a global track.
    let known: std::collections::HashSet<i64> = p.pids.iter().copied().collect();
    let mut placed: Vec<Marker> = markers
        .drain(..)
        .map(|(id, s, e, d, q, pid, tid)| {
            let (pid, tid) = match (pid, tid) {
                (Some(p), Some(t)) => (p, ROCTX_TID_BASE + t),
                _ if known.contains(&q) => (q, ROCTX_TID_BASE + q),
                _ => (MARKER_PID, 0),
            };
            (pid, tid, s, e.max(s), d, name_of(d).to_string(), ("op_id", id))
        })
        .collect();
    if placed.is_empty() {
        placed = roctx_from_apis(conn)?;
    }
    placed.sort_by_key(|m| (m.0, m.1, m.2, -m.3));
    if placed.iter().any(|m| m.0 == MARKER_PID) {
        sink.process(MARKER_PID, "roctx markers", None, MARKER_PID)?;
    }
    let mut lanes = Lanes::default();
    for (pid, tid, s, e, d, text, arg) in placed {
        let (lane, new_track) = lanes.place((pid, tid), s, e);
        if new_track {
            for (p, t) in open_tracks.drain(..) {
                sink.flush_track(p, t)?;
            }
        }
        let ltid = tid + lane as i64 * LANE_TID;
        if announced.insert((pid, ltid)) {
            let n = if pid == MARKER_PID {
                "markers".to_string()
            } else {
                format!("roctx {}{}", tid - ROCTX_TID_BASE, if lane > 0 { format!(" (overlap {lane})") } else { String::new() })
            };
            sink.thread(pid, ltid, &n, 3)?;
        }
        if !open_tracks.contains(&(pid, ltid)) {
            open_tracks.push((pid, ltid));
        }
        sink.slice(&Slice {
            pid,
            tid: ltid,
            ts: s,
            dur: e - s,
            name_id: d,
            name: &text,
            cat: "roctx",
            args: vec![(arg.0, Arg::Int(arg.1))],
            flow_out: vec![],
            flow_in: vec![],
        })?;
    }
    for (p, t) in open_tracks.drain(..) {
        sink.flush_track(p, t)?;
    }
    Ok(())
}

/// A roctx slice: (pid, tid, start, end, name id, text, (arg name, id)).
type Marker = (i64, i64, i64, i64, i64, String, (&'static str, i64));

/// Name ids of roctx texts that are not in rocpd_string (API-derived ranges): above this.
pub(crate) const ROCTX_NAME_BASE: i64 = 1 << 40;

/// Traces without marker ops: pairs roctxRangePush*/roctxRangePop per thread from the API rows
/// (text = the push's argument text); roctxMark* become zero-length slices; RPD-style
/// `UserMarker` API rows are ranges as they are. Only roctx rows are
/// read (an index-less scan filtered in SQL).
fn roctx_from_apis(conn: &Connection) -> Result<Vec<Marker>> {
    let mut st = conn.prepare(
        "SELECT a.id, a.pid, a.tid, a.start, a.end, s.string, coalesce(u.string, '')
         FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id LEFT JOIN rocpd_ustring u ON u.id = a.args_id
         WHERE a.apiName_id IN (SELECT id FROM rocpd_string WHERE string GLOB 'roctx*' OR string = 'UserMarker')
         ORDER BY a.pid, a.tid, a.start, a.id",
    )?;
    let mut rows = st.query([])?;
    let mut out = vec![];
    type Open = Vec<(i64, i64, String)>;
    let mut stacks: HashMap<(i64, i64), Open> = HashMap::new();
    let mut ids: HashMap<String, i64> = HashMap::new();
    let mut name_id = |t: &str| -> i64 {
        let n = ids.len() as i64;
        *ids.entry(t.to_string()).or_insert(ROCTX_NAME_BASE + n)
    };
    let mut last_end: HashMap<(i64, i64), i64> = HashMap::new();
    while let Some(r) = rows.next()? {
        let (id, pid, tid, start, end): (i64, i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?);
        let name: String = r.get(5)?;
        let text: String = r.get(6)?;
        last_end.insert((pid, tid), end.max(start));
        if name.starts_with("roctxRangePush") {
            stacks.entry((pid, tid)).or_default().push((id, start, text));
        } else if name.starts_with("roctxRangePop") {
            if let Some((pid0, s0, t)) = stacks.get_mut(&(pid, tid)).and_then(|v| v.pop()) {
                let t = if t.is_empty() { "roctx range".to_string() } else { t };
                out.push((pid, ROCTX_TID_BASE + tid, s0, end.max(s0), name_id(&t), t, ("api_id", pid0)));
            }
        } else if name == "UserMarker" {
            // RPD's own tracer records roctx ranges as API rows named UserMarker (args = text)
            let t = if text.is_empty() { name.clone() } else { text };
            out.push((pid, ROCTX_TID_BASE + tid, start, end.max(start), name_id(&t), t, ("api_id", id)));
        } else if name.starts_with("roctxMark") {
            let t = if text.is_empty() { name.clone() } else { text };
            out.push((pid, ROCTX_TID_BASE + tid, start, start, name_id(&t), t, ("api_id", id)));
        }
    }
    // Ranges never popped end with their thread's last roctx call.
    for ((pid, tid), v) in stacks {
        for (id, s0, t) in v {
            let e = last_end.get(&(pid, tid)).copied().unwrap_or(s0).max(s0);
            let t = if t.is_empty() { "roctx range (not popped)".to_string() } else { t };
            out.push((pid, ROCTX_TID_BASE + tid, s0, e, name_id(&t), t, ("api_id", id)));
        }
    }
    Ok(out)
}

/// A sink for one part of the timeline, run on its own thread.
pub(crate) trait PartSink: Sink + Send {
    /// Closes what is open and flushes.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Emits the API calls into `parts[0]` and the GPU ops and markers into `parts[1]`, in parallel
/// on two read-only connections when the trace can be reopened by path (else one after the
/// other on `conn`). The tracks must already be emitted.
/// Settings of a converter's connections: memory bounded whatever the trace's size. The
/// per-track `ORDER BY` sorts every row, so the sorter spills to temporary files (SQLite's own:
/// random names, unlinked at once) past a 32 MiB cache instead of growing in memory, and the
/// file is read, not mapped.
pub(crate) fn bounded_memory(c: &Connection) -> Result<()> {
    c.execute_batch("PRAGMA temp_store = FILE; PRAGMA cache_size = -32768; PRAGMA mmap_size = 0;")?;
    Ok(())
}

pub(crate) fn emit_parts(trace: &super::Trace, p: &Prelude, parts: [Box<dyn PartSink + '_>; 2]) -> Result<()> {
    let [mut apis, mut ops] = parts;
    let uri = trace.uri();
    let open = || -> Result<Connection> {
        let c = super::open_read_only(uri)?;
        bounded_memory(&c)?;
        Ok(c)
    };
    std::thread::scope(|s| -> Result<()> {
        let a = s.spawn(|| -> Result<()> {
            let c = open()?;
            emit_apis(&c, p, apis.as_mut())?;
            apis.finish()
        });
        let b = s.spawn(|| -> Result<()> {
            let c = open()?;
            emit_ops(&c, p, ops.as_mut())?;
            emit_markers(&c, p, ops.as_mut())?;
            ops.finish()
        });
        let ra = a.join().map_err(|_| anyhow::anyhow!("the API writer thread panicked"))?;
        let rb = b.join().map_err(|_| anyhow::anyhow!("the GPU op writer thread panicked"))?;
        ra.and(rb)
    })
}

/// Unnamed temporary files beside the output for the parts (`O_TMPFILE`, or a random name
/// unlinked at once where the file system lacks it): nothing to plant, nothing to remove.
pub(crate) struct PartFiles(Vec<std::fs::File>);

impl PartFiles {
    pub(crate) fn new(out: &std::path::Path, n: usize) -> Result<(Vec<std::fs::File>, PartFiles)> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..n {
            let f = tempfile::tempfile_in(dir)
                .map_err(|e| anyhow::anyhow!("{}: cannot create a temporary file: {e}", crate::term::path(dir)))?;
            readers.push(f.try_clone()?);
            writers.push(f);
        }
        Ok((writers, PartFiles(readers)))
    }

    /// Appends the parts to `w`, skipping `skip` bytes at the start of the first non-empty one.
    pub(crate) fn append_to(&self, w: &mut dyn std::io::Write, mut skip: u64) -> Result<()> {
        use std::io::Seek;
        for f in &self.0 {
            let mut f = f;
            let len = f.metadata()?.len();
            let from = if skip > 0 && len > 0 { std::mem::take(&mut skip) } else { 0 };
            f.seek(std::io::SeekFrom::Start(from))?;
            std::io::copy(&mut f, w)?;
        }
        Ok(())
    }
}

/// hipError_t names (hip_runtime_api.h) for the values a call can return.
pub(crate) fn hip_error_name(code: i64) -> String {
    let n = match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        4 => "hipErrorDeinitialized",
        5 => "hipErrorProfilerDisabled",
        6 => "hipErrorProfilerNotInitialized",
        7 => "hipErrorProfilerAlreadyStarted",
        8 => "hipErrorProfilerAlreadyStopped",
        9 => "hipErrorInvalidConfiguration",
        12 => "hipErrorInvalidPitchValue",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        53 => "hipErrorPriorLaunchFailure",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        202 => "hipErrorContextAlreadyCurrent",
        205 => "hipErrorMapFailed",
        206 => "hipErrorUnmapFailed",
        207 => "hipErrorArrayIsMapped",
        208 => "hipErrorAlreadyMapped",
        209 => "hipErrorNoBinaryForGpu",
        210 => "hipErrorAlreadyAcquired",
        211 => "hipErrorNotMapped",
        212 => "hipErrorNotMappedAsArray",
        213 => "hipErrorNotMappedAsPointer",
        214 => "hipErrorECCNotCorrectable",
        215 => "hipErrorUnsupportedLimit",
        216 => "hipErrorContextAlreadyInUse",
        217 => "hipErrorPeerAccessUnsupported",
        218 => "hipErrorInvalidKernelFile",
        219 => "hipErrorInvalidGraphicsContext",
        300 => "hipErrorInvalidSource",
        301 => "hipErrorFileNotFound",
        302 => "hipErrorSharedObjectSymbolNotFound",
        303 => "hipErrorSharedObjectInitFailed",
        304 => "hipErrorOperatingSystem",
        400 => "hipErrorInvalidHandle",
        401 => "hipErrorIllegalState",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        702 => "hipErrorLaunchTimeOut",
        704 => "hipErrorPeerAccessAlreadyEnabled",
        705 => "hipErrorPeerAccessNotEnabled",
        708 => "hipErrorSetOnActiveProcess",
        709 => "hipErrorContextIsDestroyed",
        710 => "hipErrorAssert",
        712 => "hipErrorHostMemoryAlreadyRegistered",
        713 => "hipErrorHostMemoryNotRegistered",
        719 => "hipErrorLaunchFailure",
        720 => "hipErrorCooperativeLaunchTooLarge",
        801 => "hipErrorNotSupported",
        900 => "hipErrorStreamCaptureUnsupported",
        901 => "hipErrorStreamCaptureInvalidated",
        902 => "hipErrorStreamCaptureMerge",
        903 => "hipErrorStreamCaptureUnmatched",
        904 => "hipErrorStreamCaptureUnjoined",
        905 => "hipErrorStreamCaptureIsolation",
        906 => "hipErrorStreamCaptureImplicit",
        907 => "hipErrorCapturedEvent",
        908 => "hipErrorStreamCaptureWrongThread",
        910 => "hipErrorGraphExecUpdateFailure",
        999 => "hipErrorUnknown",
        1052 => "hipErrorRuntimeMemory",
        1053 => "hipErrorRuntimeOther",
        _ => return format!("hipError_t {code}"),
    };
    n.to_string()
}
