//! API calls as slices, per thread in start order, with flows to the GPU ops they caused.

use anyhow::Result;
use rusqlite::Connection;

use super::prelude::{parse_ids, Prelude};
use super::sink::{Arg, Sink, Slice, CORR_FLOW_BASE};
use super::tracks::Tracks;
use crate::api_meaning::RetKind;

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
    let stacks = crate::read::sites::stacks_by_call(conn)?;
    let mut rows = st.query([])?;
    let mut tracks = Tracks::default();
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
                args.push(("error", Arg::Str(crate::read::meaning::hip_error_name(ret))));
            }
        }
        let status = r.get::<_, Option<i64>>(9)?.unwrap_or(0);
        if status != 0 {
            args.push(("status", Arg::Str(crate::read::meaning::status_name(status).into())));
        }
        for i in 0..4 {
            if let Some(v) = r.get::<_, Option<i64>>(10 + i)? {
                let (k, hex) = crate::read::meaning::arg(meaning, status, i);
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
        if let Some(t) = stacks.of(id) {
            args.push(("stack", Arg::Str(t.to_string())));
        }
        let mut flow_out = parse_ids(r.get(25)?, 0);
        flow_out.extend(parse_ids(r.get(26)?, CORR_FLOW_BASE));
        let ltid = tracks.place(sink, (pid, tid), (start, end), |lane| {
            (lane > 0).then(|| (format!("thread {tid} (overlap {lane})"), super::prelude::thread_rank(pid, tid)))
        })?;
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
    tracks.flush(sink)?;
    drop(rows);

    Ok(())
}
