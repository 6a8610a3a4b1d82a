//! Forged GPU ops (issue 15, items 6 and 9): any process that maps a file named
//! `librtl_agent*.so` can publish GPU ops. What it publishes is tied to it (`rtl_op.pid`, the
//! pid the probe saw), a batch claiming another process is refused and counted, its ops that
//! link to no traced call are shown as such and left out by `summary --linked-only`, and what
//! the join keeps for them is bounded and counted.
//!
//! The publisher is `tests/workloads/forge_ops` with `librtl_agent_evil.so` (its own ground
//! truth: it prints how many ops it published). Needs root (eBPF) and the workloads.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use rusqlite::Connection;
use serde_json::Value;

fn m(db: &Path, tag: &str) -> u64 {
    meta(db, tag).unwrap_or_else(|| panic!("metadata {tag}")).parse().unwrap()
}

/// Runs forge_ops under `attach --pid` (claiming the test's own pid in one batch) and returns
/// the trace, the forger's pid and its ground truth (ops published under its own pid).
fn forge(d: &Path, ops: u64) -> (std::path::PathBuf, u32, u64) {
    require_root();
    let claim = std::process::id();
    let mut app = Killed(
        Command::new(workload("forge_ops"))
            .arg(workload("librtl_agent_evil.so"))
            .args([claim.to_string(), ops.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let forger = app.0.id();
    let mut out = BufReader::new(app.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let db = d.join("t.db");
    let mut tracer =
        rtl_start(&["attach", "--quiet", "--apis", "hipGetErrorString", "--pid", &forger.to_string(), "-o", db.to_str().unwrap()]);
    app.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f.first(), Some(&"done"), "{line}");
    let sent: u64 = f[1].parse().unwrap();
    assert_eq!(sent, ops);
    drop(app.0.stdin.take());
    app.0.wait().unwrap();
    // The traced process exited: the session ends by itself once everything is written.
    let status = wait_exit(&mut tracer.0, 300);
    assert!(status.success(), "{status}");
    (db, forger, sent)
}

fn summary_json(db: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["summary", "--json", db.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = rtl_run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Item 6: forged ops land under the forger's pid only, unlinked, and can be left out.
#[test]
fn forged_ops_are_tied_to_their_publisher_and_can_be_left_out() {
    let d = tmpdir();
    let (db, forger, sent) = forge(d.path(), 1000);
    let claim = std::process::id() as i64;
    let c = Connection::open(&db).unwrap();
    let q = |sql: &str| -> i64 { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    // The batch that claimed another process: refused and counted, none of its ops written.
    assert_eq!(m(&db, "agent_batches_rejected_wrong_pid"), 1);
    assert_eq!(m(&db, "gpu_ops"), sent, "only the forger's own ops are read");
    assert_eq!(q("SELECT count(*) FROM rocpd_op WHERE gpuId >= 0"), sent as i64);
    // Every op says who published it, and that it links to no traced call.
    assert_eq!(q("SELECT count(*) FROM rtl_op"), sent as i64);
    assert_eq!(q(&format!("SELECT count(*) FROM rtl_op WHERE pid = {forger} AND link = 0")), sent as i64);
    assert_eq!(q(&format!("SELECT count(*) FROM rtl_op WHERE pid = {claim}")), 0);
    // Their API rows are the forger's own profiler-only rows, never the claimed process's.
    assert_eq!(q(&format!("SELECT count(*) FROM rocpd_api WHERE pid = {claim}")), 0);
    assert_eq!(
        q(&format!("SELECT count(*) FROM rocpd_api a JOIN rtl_api r ON r.api_id = a.id WHERE a.pid = {forger} AND r.status = 5")),
        sent as i64
    );

    // summary shows them as unlinked, by publisher; --linked-only leaves them out.
    let all = summary_json(&db, &[]);
    assert_eq!(all["totals"]["gpu_ops"], sent, "{}", all["totals"]);
    assert_eq!(all["lost"]["unlinked_gpu_ops"], sent);
    assert_eq!(all["lost"]["unlinked_gpu_ops_by_publisher"], serde_json::json!([{ "pid": forger, "ops": sent }]));
    assert_eq!(all["lost"]["unlinked_gpu_ops_left_out"], false);
    assert_eq!(all["gpu_busy"]["devices"].as_array().map(Vec::len), Some(1), "the forged ops count as GPU busy");
    let linked = summary_json(&db, &["--linked-only"]);
    assert_eq!(linked["totals"]["gpu_ops"], 0, "{}", linked["totals"]);
    assert_eq!(linked["totals"]["api_calls"], 0, "profiler-only calls left out too: {}", linked["totals"]);
    assert_eq!(linked["gpu_busy"]["devices"], serde_json::json!([]));
    assert_eq!(linked["lost"]["unlinked_gpu_ops_left_out"], true);
    assert_eq!(linked["lost"]["unlinked_gpu_ops_by_publisher"], serde_json::json!([{ "pid": forger, "ops": sent }]));
    let text = rtl_run(&["summary", db.to_str().unwrap(), "--linked-only"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("GPU ops linked to no traced call, as their publishers sent them: {sent} from pid {forger}; left out")),
        "{text}"
    );
}

/// Item 9 (the join's side): 200 000 forged ops, each its own record with a profiler-only API
/// row. The join remembers at most MAX_PROFILER_ROWS of one process's rows (before: one entry
/// per forged record, for the process's lifetime) and counts what it forgot.
#[test]
fn forged_records_keep_the_join_bounded() {
    const OPS: u64 = 200_000;
    const PER_PROCESS: u64 = 1 << 16;
    let d = tmpdir();
    let (db, _, sent) = forge(d.path(), OPS);
    let summary = format!(
        "gpu ops {} profiler rows peak {} dropped {}, collector peak RSS {} kB",
        m(&db, "gpu_ops"),
        m(&db, "gpu_join_profiler_rows_peak"),
        m(&db, "gpu_join_profiler_rows_dropped"),
        m(&db, "collector_peak_rss_kb")
    );
    eprintln!("forged records: {summary}");
    assert_eq!(m(&db, "ringbuf_drops"), 0, "{summary}");
    assert_eq!(m(&db, "gpu_ops"), sent, "{summary}");
    assert_eq!(m(&db, "gpu_join_profiler_rows_peak"), PER_PROCESS, "{summary}");
    assert_eq!(m(&db, "gpu_join_profiler_rows_dropped"), sent - PER_PROCESS, "{summary}");
    // The decisions (by record) are bounded the same way; no call or lane was dropped.
    assert_eq!(m(&db, "gpu_join_decisions_dropped"), sent - PER_PROCESS, "{summary}");
    for what in ["calls", "lanes"] {
        assert_eq!(m(&db, &format!("gpu_join_{what}_dropped")), 0, "{what}: {summary}");
    }
    let c = Connection::open(&db).unwrap();
    let n: i64 = c.query_row("SELECT count(*) FROM rtl_api WHERE status = 5", [], |r| r.get(0)).unwrap();
    assert_eq!(n as u64, sent, "one profiler-only row per forged record");
}
