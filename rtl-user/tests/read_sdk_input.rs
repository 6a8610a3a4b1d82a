//! Issue 18: `summary`, `check` and `convert` read a rocprofiler-sdk rocpd database. The golden
//! demo trace is converted to the SDK's schema, then read back (through our views, and through
//! the SDK's own view SQL, unchanged, in place of ours): kernels, copies, API calls, links and
//! GPU busy come back as the trace had them (barriers aside: the SDK schema has no table for
//! them, and `convert` leaves them out).
use crate::{common, read_common};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rusqlite::Connection;
use serde_json::Value;

fn golden() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/demo.db")
}

fn summary(db: &Path) -> Value {
    let o = Command::new(common::rtl()).args(["summary", "--json", "--top", "0"]).arg(db).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn sdk_sql(file: &str, uuid: &str, guid: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rocprofiler-sdk-rocpd").join(file);
    std::fs::read_to_string(&p).unwrap().replace("{{uuid}}", uuid).replace("{{guid}}", guid)
}

/// What must survive the round trip: kernels and copies (calls, total ns) by name, API calls by
/// name, GPU busy per device, the links to non-barrier ops.
/// (kernels: name -> (calls, total ns), APIs: name -> calls, busy ns per GPU, links to non-barrier ops)
type Essentials = (BTreeMap<String, (i64, i64)>, BTreeMap<String, i64>, Vec<i64>, i64);

fn essentials(s: &Value) -> Essentials {
    let kernels = s["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["op_type"] != "Barrier")
        .map(|k| (k["name"].as_str().unwrap().to_string(), (k["calls"].as_i64().unwrap(), k["total_ns"].as_i64().unwrap())))
        .collect();
    let apis =
        s["apis"].as_array().unwrap().iter().map(|a| (a["name"].as_str().unwrap().to_string(), a["calls"].as_i64().unwrap())).collect();
    let busy = s["gpu_busy"]["devices"].as_array().unwrap().iter().map(|d| d["busy_ns"].as_i64().unwrap()).collect();
    let barriers =
        s["kernels"].as_array().unwrap().iter().filter(|k| k["op_type"] == "Barrier").map(|k| k["calls"].as_i64().unwrap()).sum::<i64>();
    (kernels, apis, busy, s["totals"]["api_op_links"].as_i64().unwrap() - barriers)
}

#[test]
fn an_sdk_rocpd_file_reads_back_as_the_trace_it_came_from() {
    let d = read_common::tmpdir();
    let sdk = d.path().join("sdk.db");
    let o = Command::new(common::rtl()).arg("convert").arg(golden()).args(["--format", "rocpd-sdk", "-o"]).arg(&sdk).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let before = std::fs::read(&sdk).unwrap();

    let want = essentials(&summary(&golden()));
    assert!(!want.0.is_empty() && want.3 > 0);
    let ours = summary(&sdk);
    assert_eq!(essentials(&ours), want, "through the file's own views");
    assert_eq!(ours["metadata"]["source_format"], "rocprofiler-sdk rocpd");
    assert_eq!(ours["header"]["host"], summary(&golden())["header"]["host"]);
    assert_eq!(std::fs::read(&sdk).unwrap(), before, "the SDK file is only read");

    // The SDK's own view SQL in place of ours.
    let c = Connection::open(&sdk).unwrap();
    let meta: BTreeMap<String, String> = c
        .prepare("SELECT tag, value FROM rocpd_metadata")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let views: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'view'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    for v in views {
        c.execute_batch(&format!("DROP VIEW `{v}`")).unwrap();
    }
    for f in ["rocpd_views.sql", "data_views.sql", "marker_views.sql", "summary_views.sql"] {
        c.execute_batch(&sdk_sql(f, &meta["uuid"], &meta["guid"])).unwrap();
    }
    drop(c);
    assert_eq!(essentials(&summary(&sdk)), want, "through the SDK's own views");

    // convert and check read it too.
    let pf = d.path().join("sdk.pftrace");
    let o = Command::new(common::rtl()).arg("convert").arg(&sdk).arg("-o").arg(&pf).output().unwrap();
    assert!(o.status.success() && pf.metadata().unwrap().len() > 0, "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(common::rtl()).arg("check").arg(&sdk).args(["--max-mean", "hipLaunchKernel=1s"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn summary_of_two_traces_shows_both_and_the_differences() {
    let d = read_common::tmpdir();
    let sdk = d.path().join("sdk.db");
    let o = Command::new(common::rtl()).arg("convert").arg(golden()).args(["--format", "rocpd-sdk", "-o"]).arg(&sdk).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A: the SDK file; B: the trace, with two calls of hipLaunchKernel made 1 us longer.
    let b = d.path().join("b.db");
    std::fs::copy(golden(), &b).unwrap();
    let c = Connection::open(&b).unwrap();
    let n = c
        .execute(
            "UPDATE rocpd_api SET end = end + 1000 WHERE id IN (SELECT a.id FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id
             WHERE s.string = 'hipLaunchKernel' ORDER BY a.id LIMIT 2)",
            [],
        )
        .unwrap();
    assert_eq!(n, 2);
    drop(c);
    let o = Command::new(common::rtl()).args(["summary", "--json"]).arg(&sdk).arg(&b).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["a"]["metadata"]["source_format"], "rocprofiler-sdk rocpd");
    assert!(j["b"]["metadata"]["source_format"].is_null());
    for k in j["diff"]["kernels"].as_array().unwrap() {
        if k["name"] == "Barrier" {
            assert!(k["a"].is_null() && k["b"]["calls"].as_i64().unwrap() > 0, "{k}: barriers are not in the SDK schema");
        } else {
            assert_eq!(k["diff_total_ns"], 0, "{k}");
            assert_eq!(k["a"]["calls"], k["b"]["calls"], "{k}");
        }
    }
    let apis = j["diff"]["apis"].as_array().unwrap();
    for a in apis {
        let want = if a["name"] == "hipLaunchKernel" { 2000 } else { 0 };
        assert_eq!(a["diff_total_ns"], want, "{a}");
    }
    assert_eq!(j["diff"]["gpu_busy"][0]["diff_busy_ns"], 0);

    let o = Command::new(common::rtl()).args(["summary", "--top", "0"]).arg(&sdk).arg(&b).output().unwrap();
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{t}");
    for want in
        ["Comparing A = ", "  A: rocprofiler-sdk rocpd | host ", "  B: rtl-ebpf | host ", "GPU kernels and ops: A vs B", "GPU busy: A vs B"]
    {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    let line = t.lines().find(|l| l.trim_start().starts_with("hipLaunchKernel ")).unwrap();
    assert!(line.contains(" 2.00 us ") && line.contains("12       12"), "{line}");
    assert!(t.lines().any(|l| l.trim_start().starts_with("Barrier ") && l.contains(" - ")), "{t}");

    let o = Command::new(common::rtl())
        .args(["summary", "--html", d.path().join("r.html").to_str().unwrap()])
        .arg(&sdk)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--html reports one trace"));
    let o = Command::new(common::rtl()).arg("summary").arg(&sdk).arg(&b).arg(&b).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "three traces: a usage error");
}
