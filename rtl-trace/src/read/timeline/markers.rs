//! roctx ranges and marks as slices, on a track beside the thread that pushed them.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use super::prelude::Prelude;
use super::sink::{Arg, Sink, Slice, MARKER_PID, ROCTX_TID_BASE};
use super::tracks::Tracks;

/// roctx ranges (marker ops, gpuId < 0): on a track beside the thread that pushed them.
pub(crate) fn emit_markers(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
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
    let mut tracks = Tracks::default();
    for (pid, tid, s, e, d, text, arg) in placed {
        let ltid = tracks.place(sink, (pid, tid), (s, e), |lane| {
            let n = if pid == MARKER_PID {
                "markers".to_string()
            } else {
                format!("roctx {}{}", tid - ROCTX_TID_BASE, if lane > 0 { format!(" (overlap {lane})") } else { String::new() })
            };
            let rank = if pid == MARKER_PID { 0 } else { super::prelude::roctx_rank(pid, tid - ROCTX_TID_BASE) };
            Some((n, rank))
        })?;
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
    tracks.flush(sink)?;
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
