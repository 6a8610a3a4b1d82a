//! The outputs other tools read, checked with those tools' own code on a real traced run of the
//! demo workload on the ROCm simulator:
//! - `convert --format kineto`: Holistic Trace Analysis (pinned in tests/read/hta-requirements.txt,
//!   in target/venv-hta: `cargo xtask setup` installs it, and this test does when it is missing;
//!   it fails, never skips, when it cannot) loads the file and the per-process directory, and its
//!   temporal, kernel and idle-time breakdowns agree with `summary --json` within 1 %;
//! - `convert --format rocpd-sdk`: the tables have rocprofiler-sdk's columns, and the SDK's own
//!   view SQL (tests/fixtures/rocprofiler-sdk-rocpd/, unchanged) runs on the file; its `kernels`,
//!   `top_kernels` and `busy` agree with `summary --json`, and so do the file's own views.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rusqlite::Connection;
use serde_json::Value;

/// A traced run of the demo on the simulator, and its `summary --json`.
fn demo_trace(dir: &Path) -> (PathBuf, Value) {
    require_root();
    let db = dir.join("demo.db");
    let out = Command::new(rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "env"])
        .arg(workload("demo"))
        .env("LD_LIBRARY_PATH", sim_lib())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (db.clone(), summary(&db))
}

fn summary(db: &Path) -> Value {
    let s = Command::new(rtl()).args(["summary", "--json", "--top", "0"]).arg(db).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    serde_json::from_slice(&s.stdout).unwrap()
}

fn convert(db: &Path, args: &[&str]) {
    let out = Command::new(rtl()).arg("convert").arg(db).args(args).output().unwrap();
    assert!(out.status.success(), "convert {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn within_1pct(what: &str, got: f64, want: f64) {
    assert!(want > 0.0, "{what}: nothing to compare (expected a positive figure)");
    assert!((got - want).abs() <= want * 0.01, "{what}: {got} vs our summary's {want} (more than 1 % apart)");
}

/// The Kineto name of a summary kernel row (memcpy / memset named as Kineto names them).
fn kineto_name(row: &Value) -> String {
    match row["op_type"].as_str().unwrap() {
        "CopyHostToDevice" => "Memcpy HtoD".into(),
        "CopyDeviceToHost" => "Memcpy DtoH".into(),
        "CopyDeviceToDevice" => "Memcpy DtoD".into(),
        "Copy" => "Memcpy".into(),
        "FillBuffer" => "Memset (Device)".into(),
        _ => row["name"].as_str().unwrap().to_string(),
    }
}

fn hta_python() -> PathBuf {
    root().join("target/venv-hta/bin/python")
}

/// The HTA environment, made once when missing (as `cargo xtask setup` does); a failure to
/// make it fails the test with what to do.
fn ensure_hta() -> PathBuf {
    static READY: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let py = hta_python();
    let r = READY.get_or_init(|| {
        let venv = root().join("target/venv-hta");
        let reqs = root().join("rtl-user/tests/read/hta-requirements.txt");
        let made = if hta_python().exists() { None } else { Some(Command::new("python3").args(["-m", "venv"]).arg(&venv).status()) };
        // Exact pins: nothing is downloaded when they are all installed (by `cargo xtask setup`).
        let inst =
            Command::new(hta_python()).args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"]).arg(&reqs).status();
        let usable = Command::new(hta_python()).args(["-c", "import hta.trace_analysis"]).status().is_ok_and(|s| s.success());
        if usable && inst.as_ref().is_ok_and(|s| s.success()) {
            Ok(())
        } else {
            Err(format!(
                "the Kineto check needs Holistic Trace Analysis as {} pins it, in {}: making the venv gave {made:?}, \
                 pip install gave {inst:?}. Run `cargo xtask setup` (it needs PyPI) and rerun",
                reqs.display(),
                venv.display()
            ))
        }
    });
    if let Err(e) = r {
        panic!("{e}");
    }
    py
}

fn run_hta(dir: &Path) -> Value {
    let py = ensure_hta();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/read/check_hta.py");
    let out = Command::new(py).arg(&script).arg(dir).env("HTA_DISABLE_NS_ROUNDING", "1").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "check_hta.py failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap()).unwrap()
}

#[test]
fn kineto_trace_reads_in_hta_as_our_summary() {
    let d = tmpdir();
    let (db, sum) = demo_trace(d.path());
    let dev = &sum["gpu_busy"]["devices"].as_array().unwrap()[0];
    assert_eq!(sum["gpu_busy"]["devices"].as_array().unwrap().len(), 1, "the demo uses one GPU");
    let kernels = sum["kernels"].as_array().unwrap();

    // One file for the node (gzip), and one per process: HTA reads both.
    for (sub, args) in [("node", vec!["--format", "kineto", "-o"]), ("per-process", vec!["--format", "kineto", "--per-process", "-o"])] {
        let dir = d.path().join(sub);
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join("demo.json.gz");
        let mut a = args.clone();
        a.push(out.to_str().unwrap());
        convert(&db, &a);
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        let pid = sum["processes"][0]["pid"].as_i64().unwrap();
        let expect = if sub == "node" { "demo.json.gz".to_string() } else { format!("demo.pid{pid}.json.gz") };
        assert_eq!(files, vec![expect], "{sub}");

        let h = run_hta(&dir);
        assert_eq!(h["ranks"], serde_json::json!([0]), "{sub}: one rank");
        // Temporal breakdown: the span of the GPU work and the time it was busy.
        let t = &h["temporal"][0];
        let span = t["kernel_time_ns"].as_f64().unwrap();
        let busy = span - t["idle_time_ns"].as_f64().unwrap();
        within_1pct(&format!("{sub}: HTA GPU busy time"), busy, dev["busy_ns"].as_f64().unwrap());
        within_1pct(&format!("{sub}: HTA GPU span"), span, dev["wall_ns"].as_f64().unwrap());
        // Kernel breakdown: per name, calls and total time.
        let mut hta_sum: HashMap<String, f64> = HashMap::new();
        for k in h["kernels"].as_array().unwrap() {
            *hta_sum.entry(k["name"].as_str().unwrap().to_string()).or_default() += k["sum_ns"].as_f64().unwrap();
        }
        let mut compared = 0;
        for k in kernels.iter().filter(|k| k["total_ns"].as_i64().unwrap() > 0) {
            let name = kineto_name(k);
            let got = *hta_sum.get(&name).unwrap_or_else(|| panic!("{sub}: {name} missing from HTA's kernel breakdown: {}", h["kernels"]));
            within_1pct(&format!("{sub}: HTA total of {name}"), got, k["total_ns"].as_f64().unwrap());
            let calls = h["calls"][format!("0/{name}")].as_i64().unwrap_or(0);
            assert_eq!(calls, k["calls"].as_i64().unwrap(), "{sub}: calls of {name}");
            compared += 1;
        }
        assert!(compared >= 4, "{sub}: too few kernels compared ({compared})");
        // Idle time breakdown: one entry per category and stream, on the queues we saw.
        let queues: std::collections::BTreeSet<i64> =
            dev["queues"].as_array().unwrap().iter().map(|q| q["queue"].as_i64().unwrap()).collect();
        let streams: std::collections::BTreeSet<i64> =
            h["idle"].as_array().unwrap().iter().map(|i| i["stream"].as_i64().unwrap()).collect();
        assert_eq!(streams, queues, "{sub}: HTA's idle-time breakdown streams");
        assert!(h["idle"].as_array().unwrap().iter().all(|i| i["idle_ns"].as_f64().unwrap() >= 0.0));
    }
}

/// Replaces the SDK loader's template variables, as its loader does (the `uuid` value carries
/// the leading underscore the loader adds).
fn sdk_sql(file: &str, uuid: &str, guid: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rocprofiler-sdk-rocpd").join(file);
    std::fs::read_to_string(&p).unwrap().replace("{{uuid}}", uuid).replace("{{guid}}", guid)
}

fn columns(c: &Connection, table: &str) -> Vec<(String, String)> {
    let mut st = c.prepare(&format!("PRAGMA table_info(`{table}`)")).unwrap();
    st.query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, String>(2)?))).unwrap().collect::<Result<_, _>>().unwrap()
}

type Rows = Vec<Vec<String>>;

fn rows(c: &Connection, sql: &str) -> Rows {
    let mut st = c.prepare(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let n = st.column_count();
    st.query_map([], |r| {
        (0..n)
            .map(|i| {
                Ok(match r.get::<_, rusqlite::types::Value>(i)? {
                    rusqlite::types::Value::Null => "NULL".to_string(),
                    rusqlite::types::Value::Integer(v) => v.to_string(),
                    rusqlite::types::Value::Real(v) => format!("{v:.6}"),
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Blob(b) => format!("{b:?}"),
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

#[test]
fn rocpd_sdk_file_runs_the_sdks_own_views() {
    let d = tmpdir();
    let (db, sum) = demo_trace(d.path());
    let ours = d.path().join("sdk.db");
    convert(&db, &["--format", "rocpd-sdk", "-o", ours.to_str().unwrap()]);

    let c = Connection::open(&ours).unwrap();
    let meta: BTreeMap<String, String> =
        rows(&c, "SELECT tag, value FROM rocpd_metadata").into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    assert_eq!(meta["schema_version"], "3");
    let (uuid, guid) = (meta["uuid"].clone(), meta["guid"].clone());
    assert_eq!(uuid, format!("_{}", guid.replace('-', "_")));

    // The SDK's tables, column by column (names and declared types), in a scratch database.
    let sdk = Connection::open_in_memory().unwrap();
    sdk.execute_batch(&sdk_sql("rocpd_tables.sql", &uuid, &guid)).unwrap();
    let sdk_tables: Vec<String> = rows(&sdk, "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rocpd%' ORDER BY name")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert!(sdk_tables.len() >= 20, "{sdk_tables:?}");
    for t in &sdk_tables {
        assert_eq!(columns(&c, t), columns(&sdk, t), "table {t}: our columns vs the SDK's");
    }
    assert_eq!(
        rows(&sdk, &format!("SELECT tag, value FROM `rocpd_metadata{uuid}` ORDER BY id")),
        rows(&c, "SELECT tag, value FROM rocpd_metadata WHERE tag IN ('schema_version', 'uuid', 'guid') ORDER BY id"),
        "the metadata rows the SDK writes"
    );

    // What the file's own views say, before they are replaced by the SDK's.
    const QUERIES: &[&str] = &[
        "SELECT name, count(*), sum(duration) FROM kernels GROUP BY name ORDER BY name",
        "SELECT name, total_calls, total_duration FROM top_kernels ORDER BY name",
        "SELECT agent_id, type, GpuTime, WallTime FROM busy ORDER BY agent_id",
        "SELECT name, count(*), sum(duration), sum(size) FROM memory_copies GROUP BY name ORDER BY name",
        "SELECT name, count(*) FROM regions GROUP BY name ORDER BY name",
        "SELECT name, total_calls, total_duration FROM top ORDER BY name",
        "SELECT pid, command FROM processes",
    ];
    let own: Vec<Rows> = QUERIES.iter().map(|q| rows(&c, q)).collect();

    // The SDK's views, unchanged, on a copy of the file whose views are dropped.
    let copy = d.path().join("sdk-views.db");
    std::fs::copy(&ours, &copy).unwrap();
    let v = Connection::open(&copy).unwrap();
    for r in rows(&v, "SELECT name FROM sqlite_master WHERE type = 'view'") {
        v.execute_batch(&format!("DROP VIEW `{}`", r[0])).unwrap();
    }
    for f in ["rocpd_views.sql", "data_views.sql", "marker_views.sql", "summary_views.sql"] {
        v.execute_batch(&sdk_sql(f, &uuid, &guid)).unwrap_or_else(|e| panic!("the SDK's {f} on our file: {e}"));
    }
    // Every view the SDK defines runs on our file.
    for r in rows(&v, "SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name") {
        v.prepare(&format!("SELECT * FROM `{}`", r[0]))
            .and_then(|mut s| s.query([])?.next().map(|_| ()))
            .unwrap_or_else(|e| panic!("the SDK's view {} on our file: {e}", r[0]));
    }
    let theirs: Vec<Rows> = QUERIES.iter().map(|q| rows(&v, q)).collect();
    for ((q, a), b) in QUERIES.iter().zip(&own).zip(&theirs) {
        assert_eq!(a, b, "{q}: our views vs the SDK's");
    }

    // And both agree with our summary: kernels per name (calls, total ns).
    let kernels: BTreeMap<String, (i64, i64)> = sum["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["op_type"] == "KernelExecution")
        .map(|k| (k["name"].as_str().unwrap().to_string(), (k["calls"].as_i64().unwrap(), k["total_ns"].as_i64().unwrap())))
        .collect();
    assert!(kernels.len() >= 3);
    let from_view: BTreeMap<String, (i64, i64)> =
        theirs[0].iter().map(|r| (r[0].clone(), (r[1].parse().unwrap(), r[2].parse().unwrap()))).collect();
    assert_eq!(from_view, kernels, "the SDK's kernels view vs our summary");
    for r in &theirs[1] {
        let (calls, ns) = kernels[&r[0]];
        assert_eq!(r[1].parse::<i64>().unwrap(), calls, "top_kernels calls of {}", r[0]);
        assert!((r[2].parse::<f64>().unwrap() - ns as f64 / 1000.0).abs() < 1e-6, "top_kernels total_duration (us) of {}", r[0]);
    }
    // busy: GPU time summed over agents (copies count on their destination, as the SDK does) is
    // every op's time but the barriers' (the schema has no table for them); the wall time is
    // the span of those ops.
    let barrier_ns: i64 =
        sum["kernels"].as_array().unwrap().iter().filter(|k| k["op_type"] == "Barrier").map(|k| k["total_ns"].as_i64().unwrap()).sum();
    let gpu_time: i64 = theirs[2].iter().map(|r| r[2].parse::<i64>().unwrap()).sum();
    assert_eq!(gpu_time, sum["totals"]["gpu_time_ns"].as_i64().unwrap() - barrier_ns, "busy GpuTime vs our summary: {:?}", theirs[2]);
    let src = Connection::open(&db).unwrap();
    let span: i64 = src
        .query_row(
            "SELECT max(o.end) - min(o.start) FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id WHERE o.gpuId >= 0 AND t.string != 'Barrier'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(theirs[2].iter().all(|r| r[3] == span.to_string()), "busy WallTime vs the ops' span {span}: {:?}", theirs[2]);
    // Every API call is a region.
    let api_calls: i64 = theirs[4].iter().map(|r| r[1].parse::<i64>().unwrap()).sum();
    assert_eq!(api_calls, sum["totals"]["api_calls"].as_i64().unwrap(), "regions vs API calls");
}
