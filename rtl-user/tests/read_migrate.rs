//! Migration of older files (RPD v2, rocm-trace-lite, older rtl-ebpf) and bad input.
use crate::read_common;

use std::path::{Path, PathBuf};

use read_common::*;
use rtl_user::read::{convert_perfetto_json, convert_perfetto_proto, merge, summary, SummaryOptions};
use rtl_user::trace::migrate::migrate;
use rusqlite::Connection;

/// An RPD schema-v2 file as rocpd's old tooling wrote it: rocpd_api without category_id /
/// domain_id / correlation_id and args in rocpd_string; rocpd_op with completionSignal; v2
/// kernelapi columns and tables; no rocpd_ustring, no rtl_* tables, no views. String id 1 is not ''.
fn rpd_v2(path: &Path) -> PathBuf {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        r#"
        CREATE TABLE rocpd_metadata(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, tag varchar(4096) NOT NULL, value varchar(4096) NOT NULL);
        CREATE TABLE rocpd_string(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, string varchar(4096) NOT NULL);
        CREATE TABLE rocpd_api(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, pid integer NOT NULL, tid integer NOT NULL, start integer NOT NULL, end integer NOT NULL, apiName_id integer NOT NULL REFERENCES rocpd_string(id), args_id integer NOT NULL REFERENCES rocpd_string(id));
        CREATE TABLE rocpd_op(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, gpuId integer NOT NULL, queueId integer NOT NULL, sequenceId integer NOT NULL, completionSignal varchar(18) NOT NULL, start integer NOT NULL, end integer NOT NULL, description_id integer NOT NULL REFERENCES rocpd_string(id), opType_id integer NOT NULL REFERENCES rocpd_string(id));
        CREATE TABLE rocpd_api_ops(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, api_id integer NOT NULL REFERENCES rocpd_api(id), op_id integer NOT NULL REFERENCES rocpd_op(id));
        CREATE TABLE rocpd_kernelapi(api_ptr_id integer NOT NULL PRIMARY KEY REFERENCES rocpd_api(id), stream varchar(18) NOT NULL, gridX integer NOT NULL, gridY integer NOT NULL, gridZ integer NOT NULL, workgroupX integer NOT NULL, workgroupY integer NOT NULL, workgroupZ integer NOT NULL, groupSegmentSize integer NOT NULL, privateSegmentSize integer NOT NULL, kernelArgAddress varchar(18) NOT NULL, aquireFence varchar(8) NOT NULL, releaseFence varchar(8) NOT NULL, codeObject_id integer NOT NULL, kernelName_id integer NOT NULL REFERENCES rocpd_string(id));
        CREATE TABLE rocpd_copyapi(api_ptr_id integer NOT NULL PRIMARY KEY REFERENCES rocpd_api(id), stream varchar(18) NOT NULL, size integer NOT NULL, width integer NOT NULL, height integer NOT NULL, kind integer NOT NULL, dst varchar(18) NOT NULL, src varchar(18) NOT NULL, dstDevice integer NOT NULL, srcDevice integer NOT NULL, sync bool NOT NULL, pinned bool NOT NULL);
        CREATE TABLE rocpd_kernelcodeobject(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, vgpr integer NOT NULL, sgpr integer NOT NULL, fbar integer NOT NULL);
        CREATE TABLE rocpd_barrierop(op_ptr_id integer NOT NULL PRIMARY KEY REFERENCES rocpd_op(id), signalCount integer NOT NULL, aquireFence varchar(8) NOT NULL, releaseFence varchar(8) NOT NULL);
        CREATE TABLE rocpd_op_inputSignals(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, op_id integer NOT NULL, inputOp_id integer NOT NULL);
        CREATE TABLE rocpd_monitor(id integer NOT NULL PRIMARY KEY AUTOINCREMENT, deviceType varchar(16) NOT NULL, deviceId integer NOT NULL, monitorType varchar(16) NOT NULL, start integer NOT NULL, end integer NOT NULL, value varchar(255) NOT NULL);
        INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', '2');
        INSERT INTO rocpd_string(id, string) VALUES (1, 'hipLaunchKernel'), (2, ''), (3, 'KernelExecution'), (4, 'Cijk_Ailk_Bljk_SB'),
            (5, 'stream=0x1 kernel=Cijk_Ailk_Bljk_SB'), (6, 'hipMemcpy'), (7, 'dst=0x1 src=0x2 size=64'), (8, 'CopyDeviceToHost');
        INSERT INTO rocpd_api(id, pid, tid, start, end, apiName_id, args_id) VALUES
            (1, 7, 7, 1000, 2000, 1, 5), (2, 7, 7, 3000, 9000, 6, 7), (3, 7, 8, 3500, 3600, 1, 2);
        INSERT INTO rocpd_op(id, gpuId, queueId, sequenceId, completionSignal, start, end, description_id, opType_id) VALUES
            (1, 0, 0, 1, '0x1234', 2500, 4500, 4, 3), (2, 0, 1, 2, '0x1238', 5000, 8000, 2, 8), (3, 0, 0, 3, '', 4600, 4700, 4, 3);
        INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (1, 1), (2, 2), (3, 3);
        INSERT INTO rocpd_kernelapi VALUES (1, '0x1', 64, 1, 1, 64, 1, 1, 0, 0, '0xdead', 'system', 'system', 0, 4);
        INSERT INTO rocpd_copyapi VALUES (2, '0x1', 64, 0, 0, 2, '0x1', '0x2', 0, -1, 1, 0);
        INSERT INTO rocpd_kernelcodeobject(vgpr, sgpr, fbar) VALUES (32, 16, 0);
        INSERT INTO rocpd_monitor(deviceType, deviceId, monitorType, start, end, value) VALUES ('gpu', 0, 'sclk', 0, 10, '1500');
        "#,
    )
    .unwrap();
    path.to_path_buf()
}

/// rocm-trace-lite's layout: rocpd_op with completionSignal and roctxId, api without category,
/// its own top / busy views.
fn trace_lite(path: &Path) -> PathBuf {
    let c = Connection::open(path).unwrap();
    c.execute_batch(
        r#"
        CREATE TABLE rocpd_string(id INTEGER PRIMARY KEY, string TEXT);
        CREATE TABLE rocpd_op(id INTEGER PRIMARY KEY, gpuId INTEGER, queueId INTEGER, sequenceId INTEGER, completionSignal TEXT, start INTEGER, end INTEGER, description_id INTEGER, opType_id INTEGER, roctxId INTEGER);
        CREATE TABLE rocpd_api(id INTEGER PRIMARY KEY, pid INTEGER, tid INTEGER, start INTEGER, end INTEGER, apiName_id INTEGER, args_id INTEGER);
        CREATE TABLE rocpd_api_ops(id INTEGER PRIMARY KEY, api_id INTEGER, op_id INTEGER);
        CREATE TABLE rocpd_metadata(id INTEGER PRIMARY KEY, tag TEXT, value TEXT);
        CREATE VIEW top AS SELECT s.string AS Name, count(*) AS Calls, sum(o.end - o.start) AS TotalNs FROM rocpd_op o JOIN rocpd_string s ON s.id = o.description_id GROUP BY Name;
        CREATE VIEW busy AS SELECT gpuId, 100.0 * sum(end - start) / (max(end) - min(start)) AS utilization_pct FROM rocpd_op WHERE gpuId >= 0 GROUP BY gpuId;
        INSERT INTO rocpd_string VALUES (1, ''), (2, 'KernelExecution'), (3, 'my_kernel'), (4, 'UserMarker'), (5, 'epoch 1'), (6, 'hipLaunchKernel');
        INSERT INTO rocpd_op VALUES (1, 0, 0, 0, '', 100, 200, 3, 2, 0), (2, 0, 0, 1, '', 300, 450, 3, 2, 0), (3, -1, 42, 0, '', 50, 500, 5, 4, 1);
        INSERT INTO rocpd_api VALUES (1, 42, 42, 10, 20, 6, 1), (2, 42, 42, 30, 40, 6, 1);
        INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (1, 1), (2, 2);
        "#,
    )
    .unwrap();
    path.to_path_buf()
}

fn all_rows(path: &Path) -> Vec<(String, Vec<String>)> {
    // every row of every old table, as text, to compare before / after
    let c = Connection::open(path).unwrap();
    let mut st = c.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").unwrap();
    let tables: Vec<String> = st.query_map([], |r| r.get(0)).unwrap().map(|r| r.unwrap()).collect();
    tables
        .into_iter()
        .map(|t| {
            let mut st = c.prepare(&format!("SELECT * FROM {t} ORDER BY rowid")).unwrap();
            let n = st.column_count();
            let rows = st
                .query_map([], |r| {
                    Ok((0..n).map(|i| format!("{:?}", r.get::<_, rusqlite::types::Value>(i).unwrap())).collect::<Vec<_>>().join("|"))
                })
                .unwrap()
                .map(|r| r.unwrap())
                .collect();
            (t, rows)
        })
        .collect()
}

fn sha(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn rpd_v2_migrates_without_losing_a_row() {
    let d = tmpdir();
    let p = rpd_v2(&d.path().join("v2.rpd"));
    let before = all_rows(&p);
    let c = Connection::open(&p).unwrap();
    let r = migrate(&c).unwrap();
    assert_eq!(r.rpd_version_before.as_deref(), Some("2"));
    assert!(r.changes.iter().any(|x| x.contains("rocpd_api.correlation_id")), "{:?}", r.changes);
    assert!(r.changes.iter().any(|x| x.contains("rocpd_ustring")), "{:?}", r.changes);
    drop(c);
    let after = all_rows(&p);
    // Every old row is still there with its old values (new columns appended at the end).
    for (t, rows) in &before {
        let (_, now) = after.iter().find(|(n, _)| n == t).unwrap_or_else(|| panic!("table {t} lost"));
        if t == "rocpd_metadata" || t == "rocpd_string" {
            assert!(now.len() >= rows.len(), "{t}");
            continue;
        }
        assert_eq!(now.len(), rows.len(), "{t}: row count");
        for (a, b) in rows.iter().zip(now) {
            assert!(b.starts_with(a.as_str()), "{t}: {a} became {b}");
        }
    }
    let c = Connection::open(&p).unwrap();
    // RPD's views work: args come through rocpd_ustring with the same ids.
    let args: Vec<(String, String)> = c
        .prepare("SELECT apiName, args FROM api ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(args[0], ("hipLaunchKernel".into(), "stream=0x1 kernel=Cijk_Ailk_Bljk_SB".into()));
    assert_eq!(args[1], ("hipMemcpy".into(), "dst=0x1 src=0x2 size=64".into()));
    assert_eq!(args.len(), 3);
    // category / domain point at '' (string 1 is an API name in this file).
    let cat: String = c
        .query_row("SELECT s.string FROM rocpd_api a JOIN rocpd_string s ON s.id = a.category_id WHERE a.id = 1", [], |r| r.get(0))
        .unwrap();
    assert_eq!(cat, "");
    let top: i64 = c.query_row("SELECT count(*) FROM top", [], |r| r.get(0)).unwrap();
    assert_eq!(top, 2);
    let busy: f64 = c.query_row("SELECT Busy FROM busy WHERE gpuId = 0", [], |r| r.get(0)).unwrap();
    assert!(busy > 0.0);
    let v: String = c.query_row("SELECT value FROM rocpd_metadata WHERE tag = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(v, "3");
    drop(c);

    // Twice: nothing to do, file unchanged byte for byte.
    let bytes = sha(&p);
    let r2 = migrate(&Connection::open(&p).unwrap()).unwrap();
    assert!(!r2.changed(), "{:?}", r2.changes);
    assert_eq!(sha(&p), bytes);

    // And the readers work on it.
    let mut out = Vec::new();
    summary(&p, &SummaryOptions { json: true, html: None, top: 10, linked_only: false }, &mut out).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["totals"]["gpu_ops"], 3);
    assert_eq!(s["totals"]["api_calls"], 3);
    assert_eq!(s["lost"]["unlinked_gpu_ops"], 0);
    convert_perfetto_json(&p, &d.path().join("v2.json")).unwrap();
    convert_perfetto_proto(&p, &d.path().join("v2.pftrace")).unwrap();
}

#[test]
fn trace_lite_file_migrates_and_keeps_its_views() {
    let d = tmpdir();
    let p = trace_lite(&d.path().join("lite.db"));
    let before = all_rows(&p);
    let r = migrate(&Connection::open(&p).unwrap()).unwrap();
    assert!(r.changed());
    let after = all_rows(&p);
    for (t, rows) in &before {
        let (_, now) = after.iter().find(|(n, _)| n == t).unwrap();
        if t != "rocpd_metadata" {
            assert_eq!(now.len(), rows.len(), "{t}");
        }
    }
    let c = Connection::open(&p).unwrap();
    // its own views are left alone (its users' scripts read those columns)
    let pct: f64 = c.query_row("SELECT utilization_pct FROM busy WHERE gpuId = 0", [], |r| r.get(0)).unwrap();
    assert!(pct > 0.0);
    let calls: i64 = c.query_row("SELECT Calls FROM top WHERE Name = 'my_kernel'", [], |r| r.get(0)).unwrap();
    assert_eq!(calls, 2);
    drop(c);
    let bytes = sha(&p);
    assert!(!migrate(&Connection::open(&p).unwrap()).unwrap().changed());
    assert_eq!(sha(&p), bytes);
    let mut out = Vec::new();
    summary(&p, &SummaryOptions { json: true, html: None, top: 10, linked_only: false }, &mut out).unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(s["totals"]["gpu_ops"], 2);
    assert_eq!(s["totals"]["markers"], 1);
    let out = d.path().join("lite.json");
    convert_perfetto_json(&p, &out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let roctx = doc["traceEvents"].as_array().unwrap().iter().find(|e| e["cat"] == "roctx").unwrap().clone();
    assert_eq!(roctx["name"], "epoch 1");
    assert_eq!(roctx["pid"], 42, "marker queueId names a traced pid");
}

#[test]
fn older_rtl_file_gets_new_tables_and_columns() {
    let d = tmpdir();
    let p = d.path().join("old.db");
    sample_trace(&p, "nodeA", 0);
    {
        let c = Connection::open(&p).unwrap();
        c.execute_batch(
            "DROP TABLE rtl_library; DROP INDEX rocpd_op_correlation_id; DROP VIEW top;
             ALTER TABLE rtl_api DROP COLUMN a3;
             DELETE FROM rocpd_metadata WHERE tag = 'rtl_schema_version';",
        )
        .unwrap();
    }
    let before = counts_without_library(&p);
    let r = migrate(&Connection::open(&p).unwrap()).unwrap();
    let text = r.changes.join("; ");
    for want in ["rtl_library", "rtl_api.a3", "rocpd_op_correlation_id", "top", "rtl_schema_version"] {
        assert!(text.contains(want), "{want} not in {text}");
    }
    assert_eq!(counts_without_library(&p), before);
    assert!(!migrate(&Connection::open(&p).unwrap()).unwrap().changed());
}

fn counts_without_library(p: &Path) -> Vec<(String, i64)> {
    counts(p).into_iter().filter(|(t, _)| t != "rtl_library" && t != "rocpd_metadata").collect()
}

#[test]
fn newer_rtl_file_is_refused() {
    let d = tmpdir();
    let p = sample_trace(&d.path().join("new.db"), "nodeA", 0);
    Connection::open(&p).unwrap().execute("UPDATE rocpd_metadata SET value = '99' WHERE tag = 'rtl_schema_version'", []).unwrap();
    let e = format!("{:#}", migrate(&Connection::open(&p).unwrap()).unwrap_err());
    assert!(e.contains("newer rtl-ebpf") && e.contains("new.db"), "{e}");
}

/// Every reader gives the same clear error, naming the file.
fn all_fail(p: &Path, want: &str) {
    let name = p.file_name().unwrap().to_string_lossy().to_string();
    let d = tmpdir();
    let errs = [
        summary(p, &SummaryOptions::default(), &mut Vec::new()).map(|_| ()),
        convert_perfetto_json(p, &d.path().join("o.json")),
        convert_perfetto_proto(p, &d.path().join("o.pftrace")),
        merge(&[p.to_path_buf()], &d.path().join("m.db"), false).map(|_| ()),
    ];
    for e in errs {
        let e = format!("{:#}", e.expect_err("bad input must fail"));
        assert!(e.contains(&name) && e.contains(want), "error {e:?} should name {name} and say {want:?}");
    }
}

#[test]
fn bad_inputs_get_clear_errors() {
    let d = tmpdir();
    let text = d.path().join("notes.txt");
    std::fs::write(&text, "this is not a database, just some text that is long enough to fill a header ........................").unwrap();
    all_fail(&text, "not a SQLite database");

    let empty = d.path().join("empty.db");
    std::fs::write(&empty, "").unwrap();
    all_fail(&empty, "empty file");

    let truncated = d.path().join("truncated.db");
    sample_trace(&truncated, "nodeA", 0);
    let len = std::fs::metadata(&truncated).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&truncated).unwrap();
    f.set_len(len / 2).unwrap();
    all_fail(&truncated, "truncated");

    let wrong = d.path().join("wrong.db");
    Connection::open(&wrong)
        .unwrap()
        .execute_batch("CREATE TABLE users(id INTEGER, name TEXT); INSERT INTO users VALUES (1, 'x');")
        .unwrap();
    all_fail(&wrong, "not an rtl-ebpf / rocpd trace: table `rocpd_string` is missing");

    let half = d.path().join("half.db");
    Connection::open(&half)
        .unwrap()
        .execute_batch("CREATE TABLE rocpd_string(id, string); CREATE TABLE rocpd_api(id, start, end); CREATE TABLE rocpd_op(id);")
        .unwrap();
    all_fail(&half, "table `rocpd_api` has no column `pid`");

    let missing = d.path().join("missing.db");
    all_fail(&missing, "cannot open");
    assert!(!missing.exists(), "reading must not create the file");

    let dir = d.path().join("adir.db");
    std::fs::create_dir(&dir).unwrap();
    all_fail(&dir, "directory");

    // The wrong-schema file was not modified.
    let c = Connection::open(&wrong).unwrap();
    let n: i64 = c.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 1);
}

#[test]
fn conversion_never_overwrites_the_trace_or_leaves_partial_output() {
    let d = tmpdir();
    let p = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let before = std::fs::read(&p).unwrap();
    for r in [convert_perfetto_json(&p, &p), convert_perfetto_proto(&p, &p)] {
        let e = format!("{:#}", r.unwrap_err());
        assert!(e.contains("the output is the input trace"), "{e}");
    }
    assert_eq!(std::fs::read(&p).unwrap(), before);
    // a failing conversion leaves no file behind
    let bad = d.path().join("bad.db");
    std::fs::write(&bad, "not a trace").unwrap();
    let out = d.path().join("out.json");
    assert!(convert_perfetto_json(&bad, &out).is_err());
    assert!(!out.exists());
    let names: Vec<_> = std::fs::read_dir(d.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

/// The API slices of a converted trace, by name (first one of each).
fn api_slices(db: &Path, out: &Path) -> std::collections::HashMap<String, serde_json::Value> {
    convert_perfetto_json(db, out).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap();
    let mut m = std::collections::HashMap::new();
    for ev in doc["traceEvents"].as_array().unwrap() {
        if ev["cat"] == "api" {
            m.entry(ev["name"].as_str().unwrap().to_string()).or_insert_with(|| ev["args"].clone());
        }
    }
    m
}

#[test]
fn version_1_file_is_read_with_the_meaning_it_was_written_with() {
    // rtl_schema_version 1 had no rtl_api_meaning and stored every return (roctx aside) as a
    // 32-bit hipError_t: hipApiName's pointer came out as -1441002499, a "failure".
    let d = tmpdir();
    let p = d.path().join("v1.db");
    {
        let c = new_trace(&p);
        c.execute_batch(
            "DROP TABLE rtl_api_meaning;
             INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', '3'), ('rtl_schema_version', '1');
             INSERT INTO rocpd_string(id, string) VALUES (2, 'hipApiName'), (3, 'hipStreamWaitEvent'), (4, 'hipMalloc');
             INSERT INTO rocpd_api(id, pid, tid, start, end, apiName_id, correlation_id) VALUES
                 (1, 10, 10, 100, 200, 2, 1), (2, 10, 10, 300, 400, 3, 2), (3, 10, 10, 500, 600, 4, 3);
             INSERT INTO rtl_api(api_id, ret, status, a0, a1, a2, a3) VALUES
                 (1, -1441002499, 0, 1, 0, 0, 0),
                 (2, 0, 0, 225, 0, NULL, 66),
                 (3, 101, 0, 0, 4096, NULL, NULL);",
        )
        .unwrap();
    }
    let r = migrate(&Connection::open(&p).unwrap()).unwrap();
    assert!(r.changes.iter().any(|c| c.contains("rtl_api_meaning")), "{:?}", r.changes);
    assert!(!migrate(&Connection::open(&p).unwrap()).unwrap().changed(), "a second run changes nothing");
    let s = summary_json(&p);
    assert_eq!(s["lost"]["api_errors"], 1, "hipMalloc only: {}", s["lost"]);
    let ev = api_slices(&p, &d.path().join("v1.json"));
    let wait = &ev["hipStreamWaitEvent"];
    assert_eq!((&wait["event"], &wait["flags"], &wait["stream"]), (&"0xe1".into(), &"0x0".into(), &"0x42".into()), "{wait}");
    let name = &ev["hipApiName"];
    assert!(name.get("error").is_none(), "a pointer return is no error: {name}");
    assert_eq!(name["ret"], format!("{:#x}", -1441002499i64), "{name}");
    assert_eq!(name["a0"], "0x1", "--apis all recorded arguments 0..3 raw: {name}");
    let malloc = &ev["hipMalloc"];
    assert_eq!((&malloc["error"], &malloc["bytes"]), (&"hipErrorInvalidDevice".into(), &4096.into()), "{malloc}");
}

#[test]
fn readers_take_the_argument_names_the_trace_recorded() {
    // A trace whose writer described hipMemcpy otherwise than today's table is read as it says;
    // a name that is not an identifier (the file may come from anyone) is shown as the column.
    let d = tmpdir();
    let p = d.path().join("names.db");
    {
        let c = new_trace(&p);
        c.execute(
            "INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', '3'), ('rtl_schema_version', ?1)",
            [rtl_user::trace::schema::RTL_SCHEMA_VERSION.to_string()],
        )
        .unwrap();
        c.execute_batch(
            "INSERT INTO rocpd_string(id, string) VALUES (2, 'hipMemcpy');
             INSERT INTO rtl_api_meaning(apiName_id, ret_kind, a0, a1, a2, a3, hex) VALUES
                 (2, 'uint32', 'destination', 'size_in_bytes', 'bad\"name', NULL, 1);
             INSERT INTO rocpd_api(id, pid, tid, start, end, apiName_id, correlation_id) VALUES (1, 10, 10, 100, 200, 2, 1);
             INSERT INTO rtl_api(api_id, ret, status, a0, a1, a2, a3) VALUES (1, 7, 0, 4096, 64, 5, 9);",
        )
        .unwrap();
    }
    let ev = api_slices(&p, &d.path().join("n.json"));
    let m = &ev["hipMemcpy"];
    assert_eq!(m["destination"], "0x1000", "{m}");
    assert_eq!(m["size_in_bytes"], 64, "{m}");
    assert_eq!(m["a2"], 5, "a hostile name is replaced by the column's: {m}");
    assert_eq!(m["a3"], "0x9", "a value without a meaning is shown raw: {m}");
    assert_eq!(m["ret"], 7);
    assert!(m.get("error").is_none() && m.get("dst").is_none() && m.get("bytes").is_none(), "{m}");
    assert_eq!(summary_json(&p)["lost"]["api_errors"], 0, "uint32 is no error code");
}

fn summary_json(p: &Path) -> serde_json::Value {
    let mut out = Vec::new();
    summary(p, &SummaryOptions { json: true, ..Default::default() }, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}
