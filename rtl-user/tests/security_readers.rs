//! Security of the readers (issue 15): `summary`, `convert` and `merge` run as root on traces
//! that sit in directories other users can write to. Nothing another user plants there may
//! change what a trace says or where output goes:
//! * a hot journal or a write-ahead log planted next to a finished trace is never applied
//!   (SQLite would replay it into the trace on the next open);
//! * outputs never follow a planted symlink and are created private (0600);
//! * an output that is an input is refused, an input given twice too;
//! * text from a trace (names, command lines, paths) reaches the terminal escaped.
//!
//! Real unprivileged users plant the files (tests/users). Needs root; the last test also loads
//! eBPF programs (`--all`).

use crate::common;
use crate::read_common;
use crate::users;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{require_root, rtl};
use rusqlite::Connection;
use users::{share, TestUser};

const KERNEL: &str = "_Z9vectorAddPfS_S_i";
/// Same length as KERNEL: a replayed page keeps the file's layout.
const FORGED: &str = "_Z9PWNEDxAddPfS_S_i";

fn rtl_out(args: &[&str]) -> Output {
    Command::new(rtl()).args(args).stdin(Stdio::null()).output().expect("cannot run rtl-ebpf")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A finished trace (rollback-journal mode, like the collector leaves it) in a shared directory.
fn finished_trace(dir: &Path) -> PathBuf {
    let db = read_common::sample_trace(&dir.join("t.db"), "nodeA", 0);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o600)).unwrap();
    db
}

/// What an attacker plants: a rollback journal whose "original pages" carry a forged kernel
/// name. SQLite replaying it restores those pages into the trace. Built from a copy of the
/// trace: forge, commit, start changing the same pages again and take the journal then.
fn forged_journal(trace: &Path, work: &Path) -> PathBuf {
    let x = work.join("x.db");
    std::fs::copy(trace, &x).unwrap();
    let c = Connection::open(&x).unwrap();
    c.execute("UPDATE rocpd_string SET string = ?1 WHERE string = ?2", [FORGED, KERNEL]).unwrap();
    c.execute_batch("PRAGMA synchronous = OFF; BEGIN; UPDATE rocpd_string SET string = string || '';").unwrap();
    c.execute_batch("UPDATE rocpd_string SET string = 'x' || substr(string, 2) WHERE string = '_Z9PWNEDxAddPfS_S_i'").unwrap();
    let j = work.join("forged-journal");
    std::fs::copy(work.join("x.db-journal"), &j).unwrap();
    c.execute_batch("ROLLBACK").unwrap();
    assert!(std::fs::metadata(&j).unwrap().len() > 512, "the forged journal holds pages");
    j
}

/// A planted write-ahead log with the forged kernel name in a committed frame.
fn forged_wal(trace: &Path, work: &Path) -> PathBuf {
    let y = work.join("y.db");
    std::fs::copy(trace, &y).unwrap();
    let c = Connection::open(&y).unwrap();
    c.execute_batch("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;").unwrap();
    c.execute("UPDATE rocpd_string SET string = ?1 WHERE string = ?2", [FORGED, KERNEL]).unwrap();
    let w = work.join("forged-wal");
    std::fs::copy(work.join("y.db-wal"), &w).unwrap();
    drop(c);
    w
}

/// Kernel names as this build of `summary --json` reads them (None: it refused the file).
fn summary_kernels(trace: &Path) -> (Output, Option<Vec<String>>) {
    let o = rtl_out(&["summary", "--json", trace.to_str().unwrap()]);
    if !o.status.success() {
        return (o, None);
    }
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names = v["kernels"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap().to_string()).collect();
    (o, Some(names))
}

#[test]
fn security_planted_hot_journal_is_never_replayed() {
    require_root();
    let d = common::tmpdir();
    let dir = d.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    share(&dir);
    let work = common::tmpdir();
    let db = finished_trace(&dir);
    let before = std::fs::read(&db).unwrap();
    let forged = forged_journal(&db, work.path());
    std::fs::set_permissions(&forged, std::fs::Permissions::from_mode(0o644)).unwrap();
    let staged = dir.join("staged");
    std::fs::copy(&forged, &staged).unwrap();
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mallory = TestUser::create();
    let journal = dir.join("t.db-journal");
    mallory.ok(&["cp", staged.to_str().unwrap(), journal.to_str().unwrap()]);
    assert_eq!(std::fs::metadata(&journal).unwrap().uid(), mallory.uid);

    // Every reader, as root: the trace is refused (exit 8, the journal named), never changed.
    let (o, kernels) = summary_kernels(&db);
    assert_eq!(
        o.status.code(),
        Some(8),
        "summary must refuse; it read kernels {kernels:?}; stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let err = text(&o);
    assert!(err.contains("t.db-journal") && err.contains(&format!("uid {}", mallory.uid)), "{err}");
    let out = work.path().join("o.json");
    let o = rtl_out(&["convert", db.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(8), "convert: {}", text(&o));
    let m = work.path().join("m.db");
    let o = rtl_out(&["merge", "-o", m.to_str().unwrap(), db.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(8), "merge: {}", text(&o));
    assert!(!out.exists() && !m.exists());
    assert!(std::fs::read(&db).unwrap() == before, "the trace was changed");
    assert!(journal.exists(), "the planted journal is left for its owner to explain");

    // The same journal with the trace's owner: it is the owner's unfinished write and is
    // applied, in a private copy only.
    std::os::unix::fs::chown(&journal, Some(0), Some(0)).unwrap();
    let (o, kernels) = summary_kernels(&db);
    assert!(o.status.success(), "{}", text(&o));
    assert!(kernels.unwrap().iter().any(|k| k.contains("PWNED")), "the owner's journal is applied");
    assert!(std::fs::read(&db).unwrap() == before, "applied to a private copy only");
    assert!(journal.exists());
}

#[test]
fn security_planted_wal_is_never_read() {
    require_root();
    let d = common::tmpdir();
    let dir = d.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    share(&dir);
    let work = common::tmpdir();
    let db = finished_trace(&dir);
    let before = std::fs::read(&db).unwrap();
    let forged = forged_wal(&db, work.path());
    let staged = dir.join("staged");
    std::fs::copy(&forged, &staged).unwrap();
    std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o644)).unwrap();

    let mallory = TestUser::create();
    let wal = dir.join("t.db-wal");
    mallory.ok(&["cp", staged.to_str().unwrap(), wal.to_str().unwrap()]);
    let (o, kernels) = summary_kernels(&db);
    assert_eq!(
        o.status.code(),
        Some(8),
        "summary must refuse; it read kernels {kernels:?}; stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text(&o).contains("t.db-wal"), "{}", text(&o));
    assert!(std::fs::read(&db).unwrap() == before, "the trace was changed");
    assert!(!dir.join("t.db-shm").exists(), "no shared-memory file made for the planted log");

    // A symlink as the log, even to a file of the trace's owner: refused too.
    std::fs::remove_file(&wal).unwrap();
    let owned = work.path().join("owned-wal");
    std::fs::copy(&forged, &owned).unwrap();
    mallory.ok(&["ln", "-s", owned.to_str().unwrap(), wal.to_str().unwrap()]);
    let (o, _) = summary_kernels(&db);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    assert!(text(&o).contains("symbolic link"), "{}", text(&o));
    assert!(std::fs::read(&db).unwrap() == before, "{} changed", db.display());
}

#[test]
fn security_reader_outputs_never_follow_planted_links_and_are_private() {
    require_root();
    let d = common::tmpdir();
    let dir = d.path().join("shared");
    std::fs::create_dir(&dir).unwrap();
    share(&dir);
    let safe = common::tmpdir(); // root's own, 0700
    let victim = safe.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let db = finished_trace(&dir);

    let mallory = TestUser::create();
    let plant = |name: &str| mallory.ok(&["ln", "-s", victim.to_str().unwrap(), dir.join(name).to_str().unwrap()]);
    // The output names themselves, and the temporary names the readers used to write through.
    for n in [
        "report.html",
        "out.json",
        ".out.json.partial",
        ".out.json.part0",
        ".out.json.part1",
        ".out.pftrace.partial",
        ".out.pftrace.part0",
        ".out.pftrace.part1",
        ".m.db.merging",
    ] {
        plant(n);
    }
    let html = dir.join("report.html");
    let json = dir.join("out.json");
    let pftrace = dir.join("out.pftrace");
    let merged = dir.join("m.db");
    let dbs = db.to_str().unwrap();
    for args in [
        vec!["summary", dbs, "--html", html.to_str().unwrap()],
        vec!["convert", dbs, "-o", json.to_str().unwrap()],
        vec!["convert", dbs, "-o", pftrace.to_str().unwrap()],
        vec!["merge", "-o", merged.to_str().unwrap(), dbs],
    ] {
        let o = rtl_out(&args);
        assert!(o.status.success(), "{args:?}: {}", text(&o));
        assert!(std::fs::read(&victim).unwrap() == b"precious", "{args:?} wrote through a planted link");
    }
    for out in [&html, &json, &pftrace, &merged] {
        let m = std::fs::symlink_metadata(out).unwrap();
        assert!(m.file_type().is_file(), "{} is not a regular file", out.display());
        assert_eq!(m.mode() & 0o777, 0o600, "{} must be private: it holds command lines", out.display());
        assert_eq!(m.uid(), 0);
    }
    // Nothing left behind but what was planted and the outputs.
    let planted = [
        ".out.json.partial",
        ".out.json.part0",
        ".out.json.part1",
        ".out.pftrace.partial",
        ".out.pftrace.part0",
        ".out.pftrace.part1",
        ".m.db.merging",
    ];
    let outputs = ["m.db", "out.json", "out.pftrace", "report.html", "t.db"];
    let names: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    let extra: Vec<&String> = names.iter().filter(|n| !planted.contains(&n.as_str()) && !outputs.contains(&n.as_str())).collect();
    assert!(extra.is_empty(), "left behind: {extra:?}");
}

#[test]
fn security_an_output_that_is_an_input_is_refused() {
    require_root();
    let d = common::tmpdir();
    let db = finished_trace(d.path());
    let before = std::fs::read(&db).unwrap();
    let hard = d.path().join("hard.db");
    std::fs::hard_link(&db, &hard).unwrap();
    let soft = d.path().join("soft.db");
    std::os::unix::fs::symlink(&db, &soft).unwrap();
    let dbs = db.to_str().unwrap();
    for out in [&db, &hard, &soft] {
        let o = out.to_str().unwrap();
        for args in [vec!["summary", dbs, "--html", o], vec!["convert", dbs, "-o", o], vec!["merge", "-o", o, dbs]] {
            let r = rtl_out(&args);
            assert_eq!(r.status.code(), Some(2), "{args:?}: {}", text(&r));
            assert!(text(&r).contains("is the input trace"), "{args:?}: {}", text(&r));
            assert!(std::fs::read(&db).unwrap() == before, "{args:?} changed the trace");
        }
    }
    // The same trace twice (by another name too) would double every row.
    let m = d.path().join("m.db");
    for twice in [[dbs, dbs], [dbs, hard.to_str().unwrap()]] {
        let r = rtl_out(&["merge", "-o", m.to_str().unwrap(), twice[0], twice[1]]);
        assert_eq!(r.status.code(), Some(2), "{twice:?}: {}", text(&r));
        assert!(text(&r).contains("are the same file"), "{}", text(&r));
        assert!(!m.exists());
    }
}

const HOSTILE: &str = "evil\x1b]0;owned\x07\x1b[2J\u{9b}31m\u{202e}gnp.exe\rX";

/// No byte that a terminal acts on: ESC, BEL, CR, the C1 CSI (as UTF-8), the RTL override.
fn assert_no_controls(what: &str, bytes: &[u8]) {
    let s = String::from_utf8_lossy(bytes);
    let bad: Vec<(usize, char)> =
        s.char_indices().filter(|(_, c)| (c.is_control() && *c != '\n') || ('\u{202a}'..='\u{202e}').contains(c)).take(5).collect();
    assert!(bad.is_empty(), "{what}: control characters reach the terminal at {bad:?}:\n{s}");
}

#[test]
fn security_terminal_escapes_in_traces_and_paths_are_escaped() {
    require_root();
    let d = common::tmpdir();
    let db = finished_trace(d.path());
    {
        let c = Connection::open(&db).unwrap();
        c.execute("UPDATE rocpd_string SET string = ?1 WHERE string = ?2", [format!("_Z4{HOSTILE}v"), KERNEL.to_string()]).unwrap();
        c.execute("UPDATE rocpd_string SET string = ?1 WHERE string = 'hipMalloc'", [format!("hipMalloc{HOSTILE}")]).unwrap();
        c.execute("UPDATE rtl_process SET cmdline = ?1, exe = ?1", [format!("python3 {HOSTILE}")]).unwrap();
        c.execute("UPDATE rocpd_metadata SET tag = ?1 WHERE tag = 'dropped_events'", [format!("dropped_{HOSTILE}")]).unwrap();
        c.execute("UPDATE rocpd_metadata SET value = ?1 WHERE tag = 'hostname'", [HOSTILE]).unwrap();
    }
    let o = rtl_out(&["summary", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\\x1b]0;owned\\x07") && out.contains("python3 evil"), "shown escaped:\n{out}");
    assert_no_controls("summary", &o.stdout);
    assert_no_controls("summary stderr", &o.stderr);
    // A path with escapes: in merge's table, convert's message, and errors.
    let evil = d.path().join(format!("t{HOSTILE}.db"));
    std::fs::copy(&db, &evil).unwrap();
    let m = d.path().join(format!("m{HOSTILE}.db"));
    let o = rtl_out(&["merge", "-o", m.to_str().unwrap(), evil.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_no_controls("merge", &o.stderr);
    let j = d.path().join(format!("o{HOSTILE}.json"));
    let o = rtl_out(&["convert", evil.to_str().unwrap(), "-o", j.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert_no_controls("convert", &o.stderr);
    let junk = d.path().join(format!("junk{HOSTILE}"));
    std::fs::write(
        &junk,
        format!(
            "{HOSTILE} not SQLite, long enough to fill a header ........................................................................."
        ),
    )
    .unwrap();
    let o = rtl_out(&["summary", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
    assert_no_controls("error message", &o.stderr);
    // The collector's messages and end summary (eBPF).
    let t = d.path().join(format!("run{HOSTILE}.db"));
    let o = rtl_out(&["--all", "--duration", "0.2", "--apis", "hipGetErrorString", "-o", t.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("trace: "), "{}", text(&o));
    assert_no_controls("collector", &o.stderr);
}
