//! The readers on a file written by the collector's own writer (`trace::writer::TraceWriter`),
//! including one still in WAL mode (a collector that has not finished).
use crate::read_common;

use std::sync::Arc;

use read_common::*;
use rtl_user::join::rows::{ApiMeaningRow, ApiRow, CallStatus, KernelRow, LinkKind, OpRow, ProcessRow, Row, RtlApiRow};
use rtl_user::probe::apis;
use rtl_user::read::{convert_perfetto_json, convert_perfetto_proto, merge, summary, SummaryOptions};
use rtl_user::trace::writer::TraceWriter;

fn rows() -> Vec<Row> {
    let name: Arc<str> = Arc::from("hipLaunchKernel");
    let push: Arc<str> = Arc::from("roctxRangePushA");
    let mut v = vec![Row::Process(ProcessRow {
        pid: 4242,
        ppid: Some(1),
        exe: "/usr/bin/app".into(),
        cmdline: "app --size 1024".into(),
        first_ns: 1_000,
        last_ns: 90_000,
        exited: true,
    })];
    // The joiner describes each API with its first call, from the API table.
    for n in [&push, &name] {
        let spec = apis::find(n).unwrap();
        v.push(Row::ApiMeaning(ApiMeaningRow { name: n.clone(), ret: spec.ret, args: spec.arg_meanings() }));
    }
    v.push(Row::Api(ApiRow { id: 1, pid: 4242, tid: 4242, start: 1_000, end: 60_000, name: push }));
    v.push(Row::RtlApi(RtlApiRow { id: 1, ret: Some(0), status: CallStatus::Complete, a: [None; 4] }));
    for i in 0..4i64 {
        let id = 2 + i;
        let t = 2_000 + i as u64 * 10_000;
        v.push(Row::Api(ApiRow { id, pid: 4242, tid: 4242, start: t, end: t + 3_000, name: name.clone() }));
        let status = if i == 3 { CallStatus::TraceEnded } else { CallStatus::Complete };
        v.push(Row::RtlApi(RtlApiRow { id, ret: if i == 3 { None } else { Some(0) }, status, a: [Some(0x7f00 + i), None, None, None] }));
        v.push(Row::Kernel(KernelRow { id, stream: 0, grid: [64, 1, 1], block: [256, 1, 1], shmem: 0, name: "_Z4axpyfPfS_".into() }));
        v.push(Row::Op(OpRow {
            gpu: 0,
            queue: 0,
            seq: i,
            start: t + 4_000,
            end: t + 9_000,
            description: "_Z4axpyfPfS_".into(),
            op_type: "KernelExecution",
            correlation_id: id,
            api_id: Some(id),
            link: Some(LinkKind::Correlation),
            pid: Some(4242),
            node: None,
            node_id: None,
            site_api_id: None,
        }));
    }
    v.push(Row::Op(OpRow {
        gpu: -1,
        queue: 4242,
        seq: 0,
        start: 1_000,
        end: 60_000,
        description: "forward".into(),
        op_type: "UserMarker",
        correlation_id: 1,
        api_id: Some(1),
        link: None,
        pid: None,
        node: None,
        node_id: None,
        site_api_id: None,
    }));
    v
}

#[test]
fn readers_work_on_writer_output() {
    let d = tmpdir();
    let db = d.path().join("app.rpd");
    let mut w = TraceWriter::create(&db, false).unwrap();
    w.write(&rows()).unwrap();
    w.add_library("/opt/rocm/lib/libamdhip64.so", 1, 2, 100, &[]).unwrap();
    w.set_meta("hostname", "nodeW").unwrap();

    // While the collector is still writing (WAL mode, writer open), the readers already work.
    let mut out = Vec::new();
    summary(&db, &SummaryOptions { json: true, html: None, top: 5, linked_only: false }, &mut out).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["totals"]["gpu_ops"], 4);
    w.finish().unwrap();

    let mut out = Vec::new();
    summary(&db, &SummaryOptions { json: true, html: None, top: 5, linked_only: false }, &mut out).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["totals"]["api_calls"], 5);
    assert_eq!(s["totals"]["gpu_ops"], 4);
    assert_eq!(s["totals"]["markers"], 1);
    assert_eq!(s["kernels"][0]["name"], "axpy(float, float*, float*)");
    assert_eq!(s["lost"]["unlinked_gpu_ops"], 0);
    assert_eq!(s["lost"]["unclosed_by_reason"]["trace ended inside the call"], 1);
    assert_eq!(s["launch_latency"]["p50_ns"], 4_000);
    assert_eq!(s["processes"][0]["cmdline"], "app --size 1024");
    // How each GPU op was linked: one rtl_op row per GPU op, none for the marker.
    assert_eq!(s["lost"]["gpu_links"]["correlation"], 4);

    let j = d.path().join("app.json");
    convert_perfetto_json(&db, &j).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    assert_eq!(ev.iter().filter(|e| e["cat"] == "gpu").count(), 4);
    assert_eq!(ev.iter().filter(|e| e["ph"] == "s").count(), 4);
    let rx = ev.iter().find(|e| e["cat"] == "roctx").unwrap();
    assert_eq!((rx["name"].as_str(), rx["pid"].as_i64(), rx["tid"].as_i64()), (Some("forward"), Some(4242), Some((1 << 29) + 4242)));
    convert_perfetto_proto(&db, &d.path().join("app.pftrace")).unwrap();

    let c = rusqlite::Connection::open(&db).unwrap();
    let meanings: Vec<(String, String, Option<String>, i64)> = c
        .prepare(
            "SELECT s.string, m.ret_kind, m.a0, m.hex FROM rtl_api_meaning m JOIN rocpd_string s ON s.id = m.apiName_id ORDER BY s.string",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        meanings,
        [
            ("hipLaunchKernel".into(), "hipError_t".into(), Some("function".into()), 0b1001),
            ("roctxRangePushA".into(), "int32".into(), None, 0)
        ]
    );
    let launch = ev.iter().find(|e| e["name"] == "hipLaunchKernel").unwrap();
    assert_eq!(launch["args"]["function"], "0x7f00", "a0 named as the trace says: {launch}");

    let m = d.path().join("m.rpd");
    // The same file twice is refused (it would double every row); a copy is another trace.
    assert!(merge(&[db.clone(), db.clone()], &m, false).is_err());
    let copy = d.path().join("copy.rpd");
    std::fs::copy(&db, &copy).unwrap();
    let st = merge(&[db.clone(), copy], &m, false).unwrap();
    assert_eq!(st.api_meanings_differing, 0);
    let mc = rusqlite::Connection::open(&m).unwrap();
    assert_eq!(mc.query_row("SELECT count(*) FROM rtl_api_meaning", [], |r| r.get::<_, i64>(0)).unwrap(), 2, "one row per API name");
    assert_eq!(st.rows["rocpd_api"], 10);
    assert_eq!(st.rows["rocpd_kernelapi"], 8);
    assert_eq!(st.rows["rtl_library"], 2);
    assert_eq!(st.rows["rtl_op"], 8, "rtl_op rows merged with their ops");
}
