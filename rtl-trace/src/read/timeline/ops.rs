//! GPU ops as slices: one process per GPU, a thread per queue, and a thread per stream of each
//! process (the launching call's stream argument: `rtl_api.a3` where `rtl_api_meaning.a3` is
//! `stream`), so each op shows twice, on its hardware queue and on its stream.

use anyhow::Result;
use rusqlite::Connection;

use super::prelude::{parse_ids, Prelude};
use super::sink::{Arg, Sink, Slice, CORR_FLOW_BASE, GPU_PID_BASE};
use super::tracks::Tracks;

/// GPU ops, per queue in start order.
pub(crate) fn emit_ops(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
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
    let mut tracks = Tracks::default();
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
        let ltid = tracks.place(sink, (pid, q), (start, end), |lane| (lane > 0).then(|| (format!("queue {q} (overlap {lane})"), q)))?;
        sink.slice(&Slice { pid, tid: ltid, ts: start, dur: end - start, name_id, name, cat: "gpu", args, flow_out: vec![], flow_in })?;
    }
    tracks.flush(sink)?;
    drop(rows);
    drop(st);
    emit_streams(conn, p, sink)
}

/// tid of a GPU process's stream tracks: this plus the stream's index on that GPU (queue tids
/// are the queue ids, below it; overlap lanes add `lane * LANE_TID` above).
pub(crate) const STREAM_TID_BASE: i64 = 1 << 25;

/// The ops again, on a track per (process, stream) of their GPU; ops whose stream is not known
/// (no call, or an API without a stream) are on their queue's track only. No flows: those
/// arrive at the queue's slice.
fn emit_streams(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    let name_of = |id: i64| p.name_of(id);
    let mut st = conn.prepare(
        "SELECT o.id, o.gpuId, coalesce(a.pid, ro.pid) AS pid, r.a3, o.start, o.end, o.description_id, o.opType_id
         FROM rocpd_op o
              JOIN rocpd_api a ON a.id = (SELECT l.api_id FROM rocpd_api_ops l WHERE l.op_id = o.id LIMIT 1)
              JOIN rtl_api r ON r.api_id = a.id
              JOIN rtl_api_meaning m ON m.apiName_id = a.apiName_id AND m.a3 = 'stream'
              LEFT JOIN rtl_op ro ON ro.op_id = o.id
         WHERE o.gpuId >= 0 AND r.a3 IS NOT NULL
         ORDER BY o.gpuId, pid, r.a3, o.start, o.end DESC",
    )?;
    let mut rows = st.query([])?;
    let mut tracks = Tracks::default();
    let mut index: std::collections::HashMap<(i64, Option<i64>, i64), i64> = std::collections::HashMap::new();
    let mut per_gpu: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    while let Some(r) = rows.next()? {
        let (id, gpu, pid, stream, start, end): (i64, i64, Option<i64>, i64, i64, i64) =
            (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
        let end = end.max(start);
        let (desc, ty): (i64, i64) = (r.get(6)?, r.get(7)?);
        let (name_id, name) = if name_of(desc).is_empty() { (ty, name_of(ty)) } else { (desc, name_of(desc)) };
        let n = per_gpu.entry(gpu).or_insert(0);
        let idx = *index.entry((gpu, pid, stream)).or_insert_with(|| {
            *n += 1;
            *n - 1
        });
        let tid = STREAM_TID_BASE + idx;
        let label = match (stream, pid) {
            (0, Some(pid)) => format!("null stream (pid {pid})"),
            (s, Some(pid)) => format!("stream {s:#x} (pid {pid})"),
            (0, None) => "null stream".to_string(),
            (s, None) => format!("stream {s:#x}"),
        };
        let gpid = GPU_PID_BASE + gpu;
        let ltid = tracks.place(sink, (gpid, tid), (start, end), |lane| {
            Some((if lane > 0 { format!("{label} (overlap {lane})") } else { label.clone() }, tid))
        })?;
        let args: Vec<(&'static str, Arg)> =
            vec![("op_id", Arg::Int(id)), ("opType", Arg::Str(name_of(ty).to_string())), ("stream", Arg::Hex(stream))];
        sink.slice(&Slice {
            pid: gpid,
            tid: ltid,
            ts: start,
            dur: end - start,
            name_id,
            name,
            cat: "gpu",
            args,
            flow_out: vec![],
            flow_in: vec![],
        })?;
    }
    tracks.flush(sink)?;
    Ok(())
}
