//! `merge`: every row kept, strings and ids remapped, correlation ids unique, hosts recorded.
use crate::read_common;

use std::collections::BTreeMap;
use std::path::Path;

use read_common::*;
use rtl_user::read::{convert_perfetto_json, merge, summary, SummaryOptions, MERGED_TABLES};
use rusqlite::Connection;

fn multiset(p: &Path, sql: &str) -> BTreeMap<String, i64> {
    let c = Connection::open(p).unwrap();
    let mut st = c.prepare(sql).unwrap();
    let n = st.column_count();
    let mut m = BTreeMap::new();
    let rows = st
        .query_map([], |r| {
            Ok((0..n).map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap())).collect::<Vec<_>>().join("|"))
        })
        .unwrap();
    for r in rows {
        *m.entry(r.unwrap()).or_insert(0) += 1;
    }
    m
}

fn add(a: &BTreeMap<String, i64>, b: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    let mut m = a.clone();
    for (k, v) in b {
        *m.entry(k.clone()).or_insert(0) += v;
    }
    m
}

fn one(p: &Path, sql: &str) -> rusqlite::types::Value {
    Connection::open(p).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
}

/// Content views that must be identical (as multisets) before and after, independent of ids.
const CONTENT: &[&str] = &[
    "SELECT apiName, args, end - start FROM api",
    "SELECT description, opType, end - start FROM op",
    "SELECT kernelName, gridX, workgroupX, end - start FROM kernel",
    "SELECT apiName, size, kind, end - start FROM copy",
    "SELECT r.ret, r.status, a.end - a.start FROM rtl_api r JOIN rocpd_api a ON a.id = r.api_id",
    "SELECT A.string, O.end - O.start, P.end - P.start FROM rocpd_api_ops L JOIN rocpd_api P ON P.id = L.api_id JOIN rocpd_string A ON A.id = P.apiName_id JOIN rocpd_op O ON O.id = L.op_id",
    "SELECT exe, cmdline, last_ns - first_ns FROM rtl_process",
    "SELECT path, probes FROM rtl_library",
    "SELECT monitorType, value FROM rocpd_monitor",
];

#[test]
fn merge_two_hosts_keeps_every_row() {
    let d = tmpdir();
    let a = sample_trace(&d.path().join("a.db"), "nodeA", 0);
    let b = sample_trace(&d.path().join("b.db"), "nodeB", 7_000_000);
    let out = d.path().join("merged.db");
    let stats = merge(&[a.clone(), b.clone()], &out, true).unwrap();

    let (ca, cb, co) = (counts(&a), counts(&b), counts(&out));
    for t in MERGED_TABLES {
        let (x, y, z) = (ca[*t], cb[*t], co[*t]);
        match *t {
            "rocpd_string" | "rocpd_ustring" => {
                let q = format!("SELECT string FROM {t}");
                let distinct = add(&multiset(&a, &q), &multiset(&b, &q)).len() as i64;
                assert_eq!(z, distinct, "{t}: deduplicated strings {x} + {y} -> {z}")
            }
            "rocpd_metadata" => assert!(z > x + y, "{t}: inputs' rows kept, plus the merge's own"),
            _ => assert_eq!(z, x + y, "{t}: every row kept"),
        }
        assert_eq!(stats.rows[*t], z);
    }
    assert_eq!(co["rocpd_string"], ca["rocpd_string"], "same strings in both inputs: fully deduplicated");
    for sql in CONTENT {
        assert_eq!(multiset(&out, sql), add(&multiset(&a, sql), &multiset(&b, sql)), "{sql}");
    }
    // Links still join API and op of the same launch (same correlation id), ids unique.
    assert_eq!(one(&out, "SELECT count(*) FROM rocpd_api_ops l JOIN rocpd_api a ON a.id = l.api_id JOIN rocpd_op o ON o.id = l.op_id WHERE a.correlation_id = o.correlation_id"), 12.into());
    assert_eq!(one(&out, "SELECT count(DISTINCT correlation_id) FROM rocpd_api"), 20.into());
    assert_eq!(one(&out, "SELECT count(*) FROM rocpd_op o WHERE correlation_id != 0 AND NOT EXISTS (SELECT 1 FROM rocpd_api a WHERE a.correlation_id = o.correlation_id)"), 0.into());
    // Node numbering and hosts.
    assert_eq!(one(&out, "SELECT count(*) FROM rtl_process WHERE pid IN (100, 200, 10000100, 10000200)"), 4.into());
    assert_eq!(one(&out, "SELECT count(DISTINCT gpuId) FROM rocpd_op WHERE gpuId >= 0"), 4.into());
    assert_eq!(one(&out, "SELECT max(gpuId) FROM rocpd_op"), 1001.into());
    assert_eq!(one(&out, "SELECT value FROM rocpd_metadata WHERE tag = 'input1.hostname'"), "nodeB".to_string().into());
    assert_eq!(one(&out, "SELECT value FROM rocpd_metadata WHERE tag = 'input0.path'"), a.display().to_string().into());
    assert_eq!(one(&out, "SELECT value FROM rocpd_metadata WHERE tag = 'input1.pid_offset'"), "10000000".to_string().into());
    assert_eq!(one(&out, "SELECT value FROM rocpd_metadata WHERE tag = 'input1.dropped_events'"), "3".to_string().into());
    assert_eq!(stats.inputs[1].hostname, "nodeB");
    // The table: one row per input (host, node, API calls, GPU ops, links, processes, pid
    // offset, time shift), then the merged totals.
    let text = stats.to_string();
    let cells = |start: &str| -> Vec<String> {
        let l = text.lines().find(|l| l.trim_start().starts_with(start)).unwrap_or_else(|| panic!("{start}: {text}"));
        l.split_whitespace().map(str::to_string).collect()
    };
    assert_eq!(cells(&b.display().to_string())[1..], ["nodeB", "1", "10", "8", "6", "2", "10000000", "+7000000"], "{text}");
    assert_eq!(cells("= merged")[2..], ["20", "16", "12", "4"], "{text}");
    // b's clock was 7 ms later in realtime_minus_monotonic: its timestamps moved onto a's clock.
    assert_eq!(stats.inputs[1].time_shift_ns, 7_000_000);
    assert_eq!(
        one(&out, "SELECT min(start) FROM rocpd_api WHERE pid >= 10000000"),
        (7_000_000i64 + 1_000 + 7_000_000).into(),
        "b's first API (its clock base 7 ms + 1 us), shifted by 7 ms"
    );

    // The readers work on the result.
    let mut o = Vec::new();
    summary(&out, &SummaryOptions { json: true, html: None, top: 10, linked_only: false }, &mut o).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&o).unwrap();
    assert_eq!(s["totals"]["api_calls"], 20);
    assert_eq!(s["totals"]["gpu_ops"], 14);
    assert_eq!(s["totals"]["api_op_links"], 12);
    assert_eq!(s["lost"]["unlinked_gpu_ops"], 4);
    assert_eq!(s["lost"]["dropped"]["dropped_events"], 6, "drop counters summed");
    assert_eq!(s["lost"]["dropped"].as_object().unwrap().len(), 1, "per-input copies not repeated: {}", s["lost"]["dropped"]);
    assert_eq!(s["processes"].as_array().unwrap().len(), 4);
    let j = d.path().join("merged.json");
    convert_perfetto_json(&out, &j).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    assert_eq!(ev.iter().filter(|e| e["cat"] == "gpu").count(), 14);
    assert_eq!(ev.iter().filter(|e| e["ph"] == "s").count(), 12, "10 links + 2 by correlation id");
}

#[test]
fn merge_per_process_files_of_one_run() {
    let d = tmpdir();
    let a = sample_trace(&d.path().join("a.db"), "nodeA", 0);
    let b = sample_trace(&d.path().join("b.db"), "nodeA", 0);
    let c = sample_trace(&d.path().join("c.db"), "nodeA", 0);
    let out = d.path().join("m.db");
    let stats = merge(&[a.clone(), b.clone(), c.clone()], &out, false).unwrap();
    let (ca, co) = (counts(&a), counts(&out));
    for t in MERGED_TABLES {
        match *t {
            "rocpd_string" | "rocpd_ustring" | "rocpd_metadata" => {}
            "rtl_process" => assert_eq!(co[*t], 2, "same pids, same host: one row per process"),
            _ => assert_eq!(co[*t], 3 * ca[*t], "{t}: every row kept"),
        }
    }
    assert_eq!(stats.processes_combined, 4);
    assert_eq!(one(&out, "SELECT count(DISTINCT pid) FROM rocpd_api"), 2.into(), "API rows of every input kept, pids as they were");
    assert_eq!(one(&out, "SELECT count(*) FROM rocpd_api"), 30.into());
    assert_eq!(one(&out, "SELECT max(gpuId) FROM rocpd_op"), 1.into());
    assert_eq!(one(&out, "SELECT count(DISTINCT correlation_id) FROM rocpd_api"), 30.into());
    assert_eq!(
        one(&out, "SELECT count(*) FROM rocpd_ustring"),
        one(&a, "SELECT count(DISTINCT string) FROM rocpd_ustring"),
        "args text deduplicated"
    );
    // merging merged output again works too
    let out2 = d.path().join("m2.db");
    merge(&[out.clone(), a.clone()], &out2, false).unwrap();
    assert_eq!(one(&out2, "SELECT count(*) FROM rocpd_api"), 40.into());
}

#[test]
fn merge_refuses_output_among_inputs() {
    let d = tmpdir();
    let a = sample_trace(&d.path().join("a.db"), "nodeA", 0);
    let e = format!("{:#}", merge(std::slice::from_ref(&a), &a, false).unwrap_err());
    assert!(e.contains("is the input trace"), "{e}");
    assert!(format!("{:#}", merge(&[], &d.path().join("x.db"), false).unwrap_err()).contains("no input"));
}

#[test]
fn merge_host_tag_without_hostnames_numbers_each_input() {
    let d = tmpdir();
    let a = sample_trace(&d.path().join("a.db"), "x", 0);
    let b = sample_trace(&d.path().join("b.db"), "x", 0);
    for p in [&a, &b] {
        Connection::open(p).unwrap().execute("DELETE FROM rocpd_metadata WHERE tag = 'hostname'", []).unwrap();
    }
    let out = d.path().join("m.db");
    let stats = merge(&[a.clone(), b.clone()], &out, true).unwrap();
    assert_eq!(stats.inputs[1].node, 1);
    assert_eq!(stats.processes_combined, 0);
    assert_eq!(one(&out, "SELECT count(*) FROM rtl_process"), 4.into());
    assert_eq!(one(&out, "SELECT value FROM rocpd_metadata WHERE tag = 'input1.hostname'"), "unknown".to_string().into());
    // RPD's multi-node decoding: node = pid / pid_stride
    assert_eq!(
        one(&out, "SELECT count(DISTINCT pid / (SELECT value FROM rocpd_metadata WHERE tag = 'pid_stride')) FROM rocpd_api"),
        2.into()
    );
}

#[test]
fn merge_keeps_one_meaning_per_api_and_counts_the_differing_ones() {
    // Two files whose writers described hipLaunchKernel differently (another rtl-ebpf
    // version): the output keeps the first input's meaning, says how many differed, and
    // holds one rtl_api_meaning row per API name whose name points at the right string.
    let d = tmpdir();
    let a = sample_trace(&d.path().join("a.db"), "nodeA", 0);
    let b = sample_trace(&d.path().join("b.db"), "nodeB", 0);
    Connection::open(&b)
        .unwrap()
        .execute(
            "UPDATE rtl_api_meaning SET a0 = 'func', hex = 1
             WHERE apiName_id = (SELECT id FROM rocpd_string WHERE string = 'hipLaunchKernel')",
            [],
        )
        .unwrap();
    let out = d.path().join("m.db");
    let stats = merge(&[a.clone(), b], &out, true).unwrap();
    assert_eq!(stats.api_meanings_differing, 1);
    assert!(stats.to_string().contains("1 APIs described differently"), "{stats}");
    let q = "SELECT s.string, m.ret_kind, m.a0, m.a1, m.a2, m.a3, m.hex FROM rtl_api_meaning m JOIN rocpd_string s ON s.id = m.apiName_id";
    assert_eq!(multiset(&out, q), multiset(&a, q), "the first input's meanings, one row per API");
    assert_eq!(
        one(&out, "SELECT m.a0 FROM rtl_api_meaning m JOIN rocpd_string s ON s.id = m.apiName_id WHERE s.string = 'hipLaunchKernel'"),
        rusqlite::types::Value::Text("function".into())
    );
}

/// Call sites and captures through their ids: each op's call and that call's frames, each
/// capture's calls, each graph launch's capture, each replayed node's capture-time call.
const SITE_CONTENT: &[&str] = &[
    "SELECT a.pid, a.start, o.start, st.depth, st.truncated, sf.string,
            (SELECT group_concat(f.symbol || '@' || f.module || '+' || f.address || '/' || f.runtime, ' < ')
             FROM (SELECT * FROM rtl_stack_frame x WHERE x.stack_id = s.stack_id ORDER BY x.depth) y JOIN rtl_frame f ON f.id = y.frame_id)
     FROM rocpd_op o JOIN rocpd_api_ops l ON l.op_id = o.id JOIN rocpd_api a ON a.id = l.api_id
          JOIN rtl_api_stack s ON s.api_id = a.id JOIN rtl_stack st ON st.id = s.stack_id
          JOIN (SELECT f.id, f.symbol AS string FROM rtl_frame f) sf ON sf.id = st.site_frame_id",
    "SELECT c.pid, c.stream, c.graph, b.start, e.start, n.node, x.start FROM rtl_capture c
          JOIN rocpd_api b ON b.id = c.begin_api_id JOIN rocpd_api e ON e.id = c.end_api_id
          JOIN rtl_capture_call n ON n.capture_id = c.id JOIN rocpd_api x ON x.id = n.api_id",
    "SELECT g.start, c.graph, b.start FROM rtl_graph_launch gl JOIN rocpd_api g ON g.id = gl.api_id
          JOIN rtl_capture c ON c.id = gl.capture_id JOIN rocpd_api b ON b.id = c.begin_api_id",
    "SELECT o.start, o.end, a.start, a.pid FROM rtl_op_site s JOIN rocpd_op o ON o.id = s.op_id JOIN rocpd_api a ON a.id = s.api_id",
];

#[test]
fn merge_carries_call_sites_and_captures_with_ids_remapped() {
    let d = tmpdir();
    let a = gpu_trace(&d.path().join("a.db"), 1, 1, 3, 4, true);
    let b = gpu_trace(&d.path().join("b.db"), 2, 2, 2, 3, true);
    // A capture in each: the first two calls captured, the third a replay of it, its op a node.
    for (p, graph) in [(&a, 0x99), (&b, 0x77)] {
        Connection::open(p)
            .unwrap()
            .execute_batch(&format!(
                "INSERT INTO rtl_capture(id, pid, stream, begin_api_id, end_api_id, graph) VALUES (1, 1000, {STREAM_BASE}, 1, 2, {graph});
                 INSERT INTO rtl_capture_call(capture_id, node, api_id) VALUES (1, 0, 1), (1, 1, 2);
                 INSERT INTO rtl_graph_launch(api_id, capture_id) VALUES (3, 1);
                 INSERT INTO rtl_op_site(op_id, api_id) VALUES (3, 1);"
            ))
            .unwrap();
    }
    let out = d.path().join("merged.db");
    let stats = merge(&[a.clone(), b.clone()], &out, false).unwrap();
    let (ca, cb, co) = (counts(&a), counts(&b), counts(&out));
    for t in
        ["rtl_frame", "rtl_stack", "rtl_stack_frame", "rtl_api_stack", "rtl_capture", "rtl_capture_call", "rtl_graph_launch", "rtl_op_site"]
    {
        assert!(ca[t] > 0 && cb[t] > 0, "{t}: the inputs have rows");
        assert_eq!(co[t], ca[t] + cb[t], "{t}: every row kept");
    }
    for sql in SITE_CONTENT {
        let (ma, mb, mo) = (multiset(&a, sql), multiset(&b, sql), multiset(&out, sql));
        assert!(!ma.is_empty() && !mb.is_empty(), "{sql}: nothing to compare");
        assert_eq!(mo, add(&ma, &mb), "{sql}");
    }
    // The second input's ids moved past the first's.
    let second = &stats.inputs[1];
    assert_eq!((second.frame_id_offset, second.stack_id_offset, second.capture_id_offset), (12, 3, 1));
    // No dangling reference.
    for sql in [
        "SELECT count(*) FROM rtl_stack_frame WHERE frame_id NOT IN (SELECT id FROM rtl_frame) OR stack_id NOT IN (SELECT id FROM rtl_stack)",
        "SELECT count(*) FROM rtl_api_stack WHERE api_id NOT IN (SELECT id FROM rocpd_api) OR stack_id NOT IN (SELECT id FROM rtl_stack)",
        "SELECT count(*) FROM rtl_op_site WHERE op_id NOT IN (SELECT id FROM rocpd_op) OR api_id NOT IN (SELECT id FROM rocpd_api)",
        "SELECT count(*) FROM rtl_graph_launch WHERE capture_id NOT IN (SELECT id FROM rtl_capture)",
    ] {
        assert_eq!(one(&out, sql), rusqlite::types::Value::Integer(0), "{sql}");
    }
    // The readers see the merged sites: the summary's top launch site over both inputs.
    let mut text = Vec::new();
    summary(&out, &SummaryOptions::default(), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("launch_s0(float*)"), "{text}");
}
