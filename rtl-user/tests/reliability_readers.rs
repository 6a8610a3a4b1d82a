//! Reliability of the readers (issue 15): an older-format trace is readable without write access
//! and is never written; a trace the collector did not finish (SIGKILL, full disk) is read from
//! its own write-ahead log and says it is incomplete; every kind of loss the collector counts
//! (ring buffer drops, records the backlog could not keep, backlog abandoned unwritten) is shown
//! as loss by `summary` and by the end-of-session text.
//!
//! Needs root (test users; the SIGKILL test loads eBPF programs and runs tests/workloads).

use crate::common;
use crate::read_common;
use crate::users;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{require_root, rtl};
use rusqlite::Connection;
use serde_json::Value;
use users::TestUser;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// An rtl-ebpf trace from before `rtl_library` and `rtl_api.a3` existed.
fn older_trace(p: &Path) -> PathBuf {
    read_common::sample_trace(p, "nodeA", 0);
    Connection::open(p)
        .unwrap()
        .execute_batch(
            "DROP TABLE rtl_library; ALTER TABLE rtl_api DROP COLUMN a3;
             DELETE FROM rocpd_metadata WHERE tag = 'rtl_schema_version';",
        )
        .unwrap();
    p.to_path_buf()
}

#[test]
fn reliability_older_trace_is_read_without_write_access_and_never_written() {
    require_root();
    let d = common::tmpdir();
    let user = TestUser::create();
    let dir = d.path().join("home");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let db = older_trace(&dir.join("old.db"));
    for p in [&dir, &db] {
        std::os::unix::fs::chown(p, Some(user.uid), Some(user.gid)).unwrap();
    }
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&db).unwrap();
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(user.uid), Some(user.gid)).unwrap();
    let (bin, dbs) = (common::rtl_for_other_users().display().to_string(), db.display().to_string());
    let j = out.join("o.json").display().to_string();
    let m = out.join("m.db").display().to_string();

    // Its owner, who may not write it: every reader works.
    let o = user.run(&[&bin, "summary", "--json", &dbs]);
    assert!(o.status.success(), "summary as the owner of a read-only older trace: {}", text(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["totals"]["api_calls"], 10);
    assert_eq!(s["totals"]["gpu_ops"], 7);
    let o = user.run(&[&bin, "convert", &dbs, "-o", &j]);
    assert!(o.status.success(), "convert: {}", text(&o));
    let o = user.run(&[&bin, "merge", "-o", &m, &dbs]);
    assert!(o.status.success(), "merge: {}", text(&o));
    assert_eq!(read_common::counts(Path::new(&m))["rocpd_api"], 10);

    // Root, who could write it: reads it the same way and does not change it either.
    let o = Command::new(rtl()).args(["summary", "--json", &dbs]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read(&db).unwrap() == before, "a reader changed the trace");
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names.len(), 2, "nothing made beside the trace: {names:?}");
}

/// A trace cut short: WAL mode, the start tags, rows of which the last batches are only in the
/// write-ahead log, no end tags (as a SIGKILLed collector leaves it). Returns (db, API rows).
fn cut_short_trace(dir: &Path) -> (PathBuf, i64) {
    let db = dir.join("cut.db");
    read_common::sample_trace(&db, "nodeA", 0);
    let c = Connection::open(&db).unwrap();
    c.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         INSERT INTO rocpd_metadata(tag, value) VALUES ('trace_start_ns', '1000'), ('rtl_version', '0.1.0');",
    )
    .unwrap();
    // More calls, committed into the log only.
    for i in 0..25 {
        read_common::api(&c, 300, 300, 50_000 + i * 10, 50_000 + i * 10 + 5, "hipGetErrorString", "", 0, Some(0), 0);
    }
    let n: i64 = c.query_row("SELECT count(*) FROM rocpd_api", [], |r| r.get(0)).unwrap();
    // "SIGKILL": copy the files while the writer still has them open.
    let cut = dir.join("t.db");
    std::fs::copy(&db, &cut).unwrap();
    std::fs::copy(dir.join("cut.db-wal"), dir.join("t.db-wal")).unwrap();
    drop(c);
    for f in ["cut.db", "cut.db-wal", "cut.db-shm"] {
        let _ = std::fs::remove_file(dir.join(f));
    }
    (cut, n)
}

#[test]
fn reliability_a_trace_cut_short_is_read_from_its_log_and_says_incomplete() {
    require_root();
    let d = common::tmpdir();
    let (db, rows) = cut_short_trace(d.path());
    let wal = d.path().join("t.db-wal");
    let (db_before, wal_before) = (std::fs::read(&db).unwrap(), std::fs::read(&wal).unwrap());
    let o = Command::new(rtl()).args(["summary", "--json", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["totals"]["api_calls"], rows, "the calls in the log are read");
    assert_eq!(s["complete"], false);
    assert!(s["incomplete"][0].as_str().unwrap().contains("the collector did not finish"), "{}", s["incomplete"]);
    let o = Command::new(rtl()).args(["summary", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.lines().nth(1).is_some_and(|l| l.contains("incomplete: the collector did not finish")), "said at the top:\n{t}");
    let html = d.path().join("r.html");
    let o = Command::new(rtl()).args(["summary", db.to_str().unwrap(), "--html", html.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(std::fs::read_to_string(&html).unwrap().contains("incomplete: the collector did not finish"), "said in the HTML report too");
    std::fs::remove_file(&html).unwrap();
    // Read, not applied: the trace and its log are as they were, no index file was made.
    assert!(std::fs::read(&db).unwrap() == db_before, "{} changed", db.display());
    assert!(std::fs::read(&wal).unwrap() == wal_before, "{} changed", wal.display());
    assert!(!d.path().join("t.db-shm").exists());
    // A finished trace is complete.
    let f = read_common::sample_trace(&d.path().join("f.db"), "nodeA", 0);
    Connection::open(&f)
        .unwrap()
        .execute_batch("INSERT INTO rocpd_metadata(tag, value) VALUES ('trace_start_ns', '1'), ('trace_end_ns', '2')")
        .unwrap();
    let o = Command::new(rtl()).args(["summary", "--json", f.to_str().unwrap()]).output().unwrap();
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["complete"], true, "{}", s["incomplete"]);
}

#[test]
fn reliability_a_sigkilled_collector_leaves_a_trace_that_says_incomplete() {
    require_root();
    let d = common::tmpdir();
    let db = d.path().join("t.db");
    let mut c = common::rtl_start(&["--all", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap()]);
    let w = Command::new(common::workload("hot_loop"))
        .args(["--seconds", "3", "--api", "geterrorstring"])
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(w.success());
    // Wait for committed batches in the log, then kill.
    let wal = d.path().join("t.db-wal");
    let deadline = Instant::now() + Duration::from_secs(120);
    while std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) < 64 << 10 {
        assert!(Instant::now() < deadline, "nothing written to the log");
        std::thread::sleep(Duration::from_millis(50));
    }
    common::signal(c.id(), libc::SIGKILL);
    common::wait_exit(&mut c, 60);
    assert!(wal.exists(), "SIGKILL leaves the log");
    let o = Command::new(rtl()).args(["summary", "--json", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["complete"], false, "{}", s["incomplete"]);
    assert!(s["totals"]["api_calls"].as_i64().unwrap() > 0, "the committed batches are read");
    assert_eq!(std::fs::metadata(&db).unwrap().uid(), 0);
}

/// A finished trace whose collector lost data in every way it counts.
fn lossy_trace(dir: &Path) -> PathBuf {
    let db = read_common::sample_trace(&dir.join("t.db"), "nodeA", 0);
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            "INSERT INTO rocpd_metadata(tag, value) VALUES ('trace_start_ns', '1'), ('trace_end_ns', '2'),
                 ('ringbuf_drops', '0'), ('ringbuf_drops_per_cpu', '0,0'), ('spool_discarded_records', '1100000'),
                 ('spool_abandoned_bytes', '52428800'), ('spool_full_pauses', '3');",
        )
        .unwrap();
    db
}

#[test]
fn reliability_backlog_losses_count_as_loss_in_summary_and_at_the_end() {
    require_root();
    let d = common::tmpdir();
    let db = lossy_trace(d.path());
    let o = Command::new(rtl()).args(["summary", db.to_str().unwrap()]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout);
    let lost = t.split("Lost or incomplete data").nth(1).expect("a loss section");
    assert!(lost.contains("spool_discarded_records: 1100000"), "{lost}");
    assert!(lost.contains("spool_abandoned_bytes: 52428800"), "{lost}");
    assert!(!lost.contains("are 0"), "{lost}");
    let o = Command::new(rtl()).args(["summary", "--json", db.to_str().unwrap()]).output().unwrap();
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["lost"]["dropped"]["spool_discarded_records"], 1_100_000);
    assert_eq!(s["lost"]["dropped"]["spool_abandoned_bytes"], 52_428_800);
    assert!(s["lost"]["dropped"].get("spool_full_pauses").is_none(), "a pause loses nothing");

    // The collector's end line.
    let o = rtl_user::session::Outcome {
        output: db.clone(),
        written: rtl_user::trace::writer::WriterStats { api_rows: 10, op_rows: 7, batches: 1 },
        drops: 1_100_000,
        child_exit: None,
    };
    let end = rtl_user::report::session_summary_text(&o).unwrap();
    assert!(end.contains("1100000 events dropped"), "{end}");
    assert!(end.contains("50.0 MiB of read records abandoned unwritten") && end.contains("lost"), "{end}");
}
