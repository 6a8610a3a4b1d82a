//! Perfetto outputs parsed back and checked against the DB: Chrome JSON (here, with serde_json)
//! and the native protobuf (with Perfetto's own protos, by tests/read/check_pftrace.py).
use crate::read_common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use read_common::*;
use rtl_user::read::{convert_perfetto_json, convert_perfetto_proto};
use rusqlite::Connection;
use serde_json::Value;

/// A bigger trace: many threads, ops overlapping on their queues (needs overlap lanes), links.
fn big_trace(path: &Path, n: i64) -> PathBuf {
    let c = new_trace(path);
    c.execute_batch("BEGIN").unwrap();
    for (i, s) in ["hipLaunchKernel", "hipMemcpyAsync", "hipStreamSynchronize", "KernelExecution", "kern_a", "kern_b"].iter().enumerate() {
        c.execute("INSERT INTO rocpd_string(id, string) VALUES (?1, ?2)", rusqlite::params![i as i64 + 2, s]).unwrap();
    }
    c.execute(
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < ?1)
         INSERT INTO rocpd_api(id, pid, tid, start, end, apiName_id, correlation_id)
         SELECT x, 10 + x % 3, 10 + x % 3 + (x / 3) % 4, x * 1000 + (x * 7919) % 500, x * 1000 + (x * 7919) % 500 + 100 + (x * 31) % 3000,
                2 + x % 3, x FROM s",
        [n],
    )
    .unwrap();
    c.execute(
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < ?1)
         INSERT INTO rocpd_op(id, gpuId, queueId, start, end, description_id, opType_id, correlation_id)
         SELECT x, x % 2, (x / 2) % 2, 2 * x * 1000 + 3000, 2 * x * 1000 + 3000 + 500 + (x * 7919) % 9000, 6 + x % 2, 5, 2 * x FROM s",
        [n / 2],
    )
    .unwrap();
    c.execute(
        "WITH RECURSIVE s(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM s WHERE x < ?1)
         INSERT INTO rocpd_api_ops(api_id, op_id) SELECT 2 * x, x FROM s WHERE x % 10 != 0",
        [n / 2],
    )
    .unwrap();
    c.execute_batch("COMMIT").unwrap();
    path.to_path_buf()
}

/// Makes sure python3 can import Perfetto's protos, installing the `perfetto` and `protobuf`
/// packages once (tests of this binary run on several threads) when missing; never skips.
fn ensure_perfetto_python() {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let r = READY.get_or_init(|| {
        let probe = || {
            Command::new("python3")
                .args(["-c", "import google.protobuf; from perfetto.protos.perfetto.trace import perfetto_trace_pb2"])
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        if probe() {
            return Ok(());
        }
        let st = Command::new("python3").args(["-m", "pip", "install", "--quiet", "perfetto", "protobuf"]).status();
        if probe() {
            Ok(())
        } else {
            Err(format!(
                "the Perfetto protobuf check needs python3 with the `perfetto` and `protobuf` packages, \
                 and `python3 -m pip install perfetto protobuf` failed ({st:?}); install them and rerun"
            ))
        }
    });
    if let Err(e) = r {
        panic!("{e}");
    }
}

fn check_pftrace(trace: &Path, db: &Path) -> Value {
    ensure_perfetto_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/read/check_pftrace.py");
    let out = Command::new("python3").arg(&script).arg(trace).arg(db).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check_pftrace.py failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn pftrace_matches_db() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 1_000_000_000);
    let out = d.path().join("t.pftrace");
    convert_perfetto_proto(&db, &out).unwrap();
    let r = check_pftrace(&out, &db);
    assert_eq!(r["gpu_ops"], 7);
    assert_eq!(r["api_calls"], 10);
    assert_eq!(r["roctx"], 1);
    assert_eq!(r["flows"], 6, "5 rocpd_api_ops links to GPU ops + 1 by correlation id");
}

#[test]
fn pftrace_big_trace_with_overlaps() {
    let d = tmpdir();
    let db = big_trace(&d.path().join("big.db"), 20_000);
    let out = d.path().join("big.pftrace");
    convert_perfetto_proto(&db, &out).unwrap();
    let r = check_pftrace(&out, &db);
    assert_eq!(r["gpu_ops"], 10_000);
    assert_eq!(r["api_calls"], 20_000);
    assert_eq!(r["flows"], 10_000, "9000 links + 1000 by correlation id");
}

fn read_json(path: &Path) -> Value {
    let bytes = std::fs::read(path).unwrap();
    if path.extension().is_some_and(|e| e == "gz") {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut s).unwrap();
        serde_json::from_str(&s).unwrap()
    } else {
        serde_json::from_slice(&bytes).unwrap()
    }
}

fn ns(v: &Value) -> i64 {
    // ts/dur are microseconds with exactly 3 decimals
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// Checks a Chrome JSON trace against its DB; returns (gpu slices, api slices, flows).
fn check_json(doc: &Value, db: &Path) -> (usize, usize, usize) {
    let c = Connection::open(db).unwrap();
    let ev = doc["traceEvents"].as_array().unwrap();
    let x: Vec<&Value> = ev.iter().filter(|e| e["ph"] == "X").collect();
    // Ops: every DB op once, same start / duration.
    let mut db_ops: HashMap<i64, (i64, i64)> = HashMap::new();
    let mut st = c.prepare("SELECT id, start, end - start FROM rocpd_op WHERE gpuId >= 0").unwrap();
    for r in st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?)))).unwrap() {
        let (id, v) = r.unwrap();
        db_ops.insert(id, v);
    }
    let gpu: Vec<&&Value> = x.iter().filter(|e| e["cat"] == "gpu").collect();
    assert_eq!(gpu.len(), db_ops.len(), "one slice per GPU op");
    for e in &gpu {
        let id = e["args"]["op_id"].as_i64().unwrap();
        assert_eq!(db_ops.get(&id), Some(&(ns(&e["ts"]), ns(&e["dur"]))), "op {id}");
    }
    let mut db_api: HashMap<i64, (i64, i64, i64, i64)> = HashMap::new();
    let mut st = c.prepare("SELECT id, pid, tid, start, end - start FROM rocpd_api").unwrap();
    for r in st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))).unwrap() {
        let (id, v) = r.unwrap();
        db_api.insert(id, v);
    }
    let api: Vec<&&Value> = x.iter().filter(|e| e["cat"] == "api").collect();
    assert_eq!(api.len(), db_api.len(), "one slice per API call");
    for e in &api {
        let id = e["args"]["api_id"].as_i64().unwrap();
        let (pid, tid, start, dur) = db_api[&id];
        assert_eq!((e["pid"].as_i64().unwrap(), ns(&e["ts"]), ns(&e["dur"])), (pid, start, dur), "api {id}");
        assert_eq!(e["tid"].as_i64().unwrap() % (1 << 26), tid, "api {id} thread");
    }
    // Slices on one (pid, tid) nest properly.
    let mut per: BTreeMap<(i64, i64), Vec<(i64, i64)>> = BTreeMap::new();
    for e in &x {
        let s = ns(&e["ts"]);
        per.entry((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap())).or_default().push((s, s + ns(&e["dur"])));
    }
    for (k, mut v) in per {
        v.sort_by_key(|&(s, e)| (s, -e));
        let mut stack: Vec<i64> = vec![];
        for (s, e) in v {
            while stack.last().is_some_and(|&top| top <= s) {
                stack.pop();
            }
            assert!(stack.last().is_none_or(|&top| top >= e), "track {k:?}: [{s}, {e}] overlaps its parent partially");
            stack.push(e);
        }
    }
    // Flows: each id has one start (in an API slice) and one end (in an op slice, bp=e).
    let mut flows: HashMap<u64, (Option<&Value>, Option<&Value>)> = HashMap::new();
    for e in ev {
        match e["ph"].as_str() {
            Some("s") => flows.entry(e["id"].as_u64().unwrap()).or_default().0 = Some(e),
            Some("f") => {
                assert_eq!(e["bp"], "e");
                flows.entry(e["id"].as_u64().unwrap()).or_default().1 = Some(e)
            }
            _ => {}
        }
    }
    type Spans<'a> = Vec<(i64, i64, &'a str)>;
    let mut by_track: HashMap<(i64, i64), Spans> = HashMap::new();
    for e in &x {
        let s = ns(&e["ts"]);
        by_track.entry((e["pid"].as_i64().unwrap(), e["tid"].as_i64().unwrap())).or_default().push((
            s,
            s + ns(&e["dur"]),
            e["cat"].as_str().unwrap(),
        ));
    }
    for (id, (s, f)) in &flows {
        let (s, f) = (s.unwrap_or_else(|| panic!("flow {id} has no start")), f.unwrap_or_else(|| panic!("flow {id} has no end")));
        // the start lies inside an API slice of that thread, the end inside an op slice
        let inside = |p: &Value, cat: &str| {
            let t = ns(&p["ts"]);
            by_track[&(p["pid"].as_i64().unwrap(), p["tid"].as_i64().unwrap())].iter().any(|&(s, e, c)| c == cat && s <= t && t <= e)
        };
        assert!(inside(s, "api"), "flow {id} start not in an API slice");
        assert!(inside(f, "gpu"), "flow {id} end not in an op slice");
    }
    (gpu.len(), api.len(), flows.len())
}

#[test]
fn json_matches_db() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 5_000_000_000_000);
    let out = d.path().join("t.json");
    convert_perfetto_json(&db, &out).unwrap();
    let doc = read_json(&out);
    assert_eq!(check_json(&doc, &db), (7, 10, 6));
    let ev = doc["traceEvents"].as_array().unwrap();
    // names, args on click, roctx range, process / GPU tracks
    let find = |f: &dyn Fn(&Value) -> bool| ev.iter().find(|e| f(e)).cloned();
    let err = find(&|e| e["name"] == "hipMalloc").unwrap();
    assert_eq!(err["args"]["ret"], 2);
    assert_eq!(err["args"]["error"], "hipErrorOutOfMemory");
    assert_eq!(err["args"]["args"], "size=1099511627776");
    assert_eq!(err["args"]["ptr"], "0x1006", "a0 of an allocation is the pointer");
    assert_eq!(launch_args_function(ev), "0x1002");
    let unc = find(&|e| e["name"] == "hipStreamSynchronize").unwrap();
    assert_eq!(unc["args"]["status"], "thread exited inside the call");
    let launch = find(&|e| e["name"] == "hipLaunchKernel").unwrap();
    assert_eq!(launch["args"]["kernel"], "_Z9vectorAddPfS_S_i");
    assert_eq!(launch["args"]["grid"], "256x1x1");
    let roctx = find(&|e| e["cat"] == "roctx").unwrap();
    assert_eq!(roctx["name"], "phase1");
    assert_eq!(roctx["pid"], 100, "on the pushing thread's process");
    assert_eq!(ns(&roctx["dur"]), 29_000);
    let tn = |pid: i64, name: &str| ev.iter().any(|e| e["ph"] == "M" && e["pid"] == pid && e["args"]["name"] == name);
    assert!(tn(100, "python3 100"));
    assert!(tn(rtl_user::read::GPU_PID_BASE, "GPU 0"));
    assert!(tn(rtl_user::read::GPU_PID_BASE + 1, "queue 1"));
    assert!(tn(rtl_user::read::GPU_PID_BASE, "queue 0 (overlap 1)"), "the overlapping kernel has its own lane");
    assert_eq!(doc["otherData"]["hostname"], "nodeA");
}

#[test]
fn json_gz_and_big() {
    let d = tmpdir();
    let db = big_trace(&d.path().join("big.db"), 4_000);
    let out = d.path().join("big.json.gz");
    convert_perfetto_json(&db, &out).unwrap();
    let raw = std::fs::read(&out).unwrap();
    assert_eq!(&raw[..2], &[0x1f, 0x8b], "gzip magic");
    let doc = read_json(&out);
    assert_eq!(check_json(&doc, &db), (2_000, 4_000, 2_000));
}

#[test]
fn roctx_ranges_from_api_rows_when_no_marker_ops() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    {
        let c = Connection::open(&db).unwrap();
        c.execute_batch(
            "DELETE FROM rocpd_api_ops WHERE op_id IN (SELECT id FROM rocpd_op WHERE gpuId < 0); DELETE FROM rocpd_op WHERE gpuId < 0;",
        )
        .unwrap();
        let t = c.query_row("SELECT tid FROM rocpd_api WHERE id = 1", [], |r| r.get::<_, i64>(0)).unwrap();
        read_common::api(&c, 100, t, 35_000, 35_100, "roctxMarkA", "checkpoint", 11, Some(0), 0);
    }
    let out = d.path().join("t.json");
    convert_perfetto_json(&db, &out).unwrap();
    let doc = read_json(&out);
    let rx: Vec<Value> = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "roctx").cloned().collect();
    assert_eq!(rx.len(), 2, "{rx:?}");
    let range = rx.iter().find(|e| e["name"] == "message=\"phase1\"").expect("range named by the push's text");
    assert_eq!((ns(&range["ts"]), ns(&range["dur"])), (1_000, 29_400), "push start .. pop end");
    assert_eq!(range["pid"], 100);
    assert!(rx.iter().any(|e| e["name"] == "checkpoint" && ns(&e["dur"]) == 0));
    let p = d.path().join("t.pftrace");
    convert_perfetto_proto(&db, &p).unwrap();
    let r = check_pftrace(&p, &db);
    assert_eq!(r["roctx"], 2);
}

#[test]
fn empty_and_markers_only_traces_convert() {
    let d = tmpdir();
    let empty = d.path().join("empty.db");
    drop(new_trace(&empty));
    let only_markers = d.path().join("markers.db");
    {
        let c = new_trace(&only_markers);
        read_common::op(&c, -1, 77, 10, 20, "lonely range", "UserMarker", 0);
    }
    for (db, n) in [(&empty, 0), (&only_markers, 1)] {
        let j = d.path().join("o.json");
        convert_perfetto_json(db, &j).unwrap();
        let doc = read_json(&j);
        let rx = doc["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "roctx").count();
        assert_eq!(rx, n);
        let p = d.path().join("o.pftrace");
        convert_perfetto_proto(db, &p).unwrap();
        assert_eq!(check_pftrace(&p, db)["roctx"], n);
    }
}

fn launch_args_function(ev: &[Value]) -> String {
    let l = ev.iter().find(|e| e["name"] == "hipLaunchKernel").unwrap();
    l["args"]["function"].as_str().unwrap().to_string()
}

/// GPU lanes per stream as well as per queue, threads named by their command, roctx beside its
/// thread, the clock declared: 2 processes x 2 GPUs x 3 streams, 4 launches each, a roctx
/// range on a second thread.
fn streams_trace(path: &Path) -> PathBuf {
    let db = gpu_trace(path, 2, 2, 3, 4, false);
    let c = Connection::open(&db).unwrap();
    let push = api(&c, 1000, 1007, 10, 20, "roctxRangePushA", "message=\"step\"", 9_000_000, Some(0), 0);
    api(&c, 1000, 1007, 900, 910, "roctxRangePop", "", 9_000_001, Some(0), 0);
    let mk = op(&c, -1, 1000, 15, 905, "step", "UserMarker", 9_000_000);
    link(&c, push, mk);
    db
}

#[test]
fn pftrace_streams_threads_and_clock() {
    let d = tmpdir();
    let db = streams_trace(&d.path().join("t.db"));
    let out = d.path().join("t.pftrace");
    convert_perfetto_proto(&db, &out).unwrap();
    let r = check_pftrace(&out, &db);
    assert_eq!(r["gpu_ops"], 48);
    assert_eq!(r["gpu_ops_on_streams"], 48, "every op again on its stream's track");
    assert_eq!(r["roctx"], 1);
}

#[test]
fn json_streams_threads_and_roctx_beside_its_thread() {
    let d = tmpdir();
    let db = streams_trace(&d.path().join("t.db"));
    let out = d.path().join("t.json");
    convert_perfetto_json(&db, &out).unwrap();
    let doc = read_json(&out);
    let ev = doc["traceEvents"].as_array().unwrap();
    let meta = |pid: i64, what: &str| -> Vec<(i64, Value)> {
        ev.iter()
            .filter(|e| e["ph"] == "M" && e["pid"] == pid && e["name"] == what)
            .map(|e| (e["tid"].as_i64().unwrap(), e["args"].clone()))
            .collect()
    };
    let names: HashMap<i64, String> =
        meta(1000, "thread_name").into_iter().map(|(t, a)| (t, a["name"].as_str().unwrap().to_string())).collect();
    let ranks: HashMap<i64, i64> =
        meta(1000, "thread_sort_index").into_iter().map(|(t, a)| (t, a["sort_index"].as_i64().unwrap())).collect();
    assert_eq!(names[&1000], "train 1000", "the main thread named by its command");
    assert_eq!(names[&1007], "thread 1007");
    let roctx_tid = names.iter().find(|(_, n)| n.starts_with("roctx 1007")).map(|(t, _)| *t).expect("roctx track");
    assert_eq!(ranks[&roctx_tid], ranks[&1007] + 1, "roctx sorts right after its thread");
    assert!(ranks[&1000] < ranks[&1007]);
    // Each GPU: 3 queues, and 2 processes x 3 streams.
    for g in 0..2 {
        let gpid = rtl_user::read::GPU_PID_BASE + g;
        let tracks: Vec<String> = meta(gpid, "thread_name").into_iter().map(|(_, a)| a["name"].as_str().unwrap().to_string()).collect();
        for s in 0..3 {
            assert!(tracks.contains(&format!("queue {s}")), "GPU {g}: {tracks:?}");
            for pid in [1000, 1001] {
                assert!(tracks.contains(&format!("stream {:#x} (pid {pid})", STREAM_BASE + s)), "GPU {g}: {tracks:?}");
            }
        }
        let on_gpu = ev.iter().filter(|e| e["ph"] == "X" && e["pid"] == gpid).count();
        assert_eq!(on_gpu, 2 * 24, "GPU {g}: each of its 24 ops on its queue and on its stream");
    }
}
