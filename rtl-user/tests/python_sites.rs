//! Python call sites (`--stacks`, issue 17) on the ROCm simulator: tests/workloads/python_sites.py
//! makes HIP calls through ctypes from known Python functions (a plain function, a method, a
//! closure, a recursion 12 deep, a generator, a second thread) and writes down, from the
//! interpreter itself, the function and line of every call. Every call's recorded site must be
//! that Python function and line: exact counts, nothing missing, nothing extra. This machine's
//! interpreter is Debian 12's CPython 3.11 (/usr/bin/python3); 3.12 is not packaged there.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use rusqlite::Connection;

const REPS: usize = 25;

type Sites = BTreeMap<(String, String, i64), usize>;

fn python() -> std::path::PathBuf {
    let p = std::path::PathBuf::from("/usr/bin/python3");
    assert!(p.exists(), "python_sites needs CPython at /usr/bin/python3");
    p
}

fn trace(mode: &str) -> (tempfile::TempDir, std::path::PathBuf, Sites) {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let truth = d.path().join("truth.tsv");
    let script = root().join("tests/workloads/python_sites.py");
    let out = std::process::Command::new(rtl())
        .args(["run", "--quiet", "--stacks", mode, "-o"])
        .arg(&db)
        .arg("--")
        .arg(python())
        .arg(&script)
        // Alive 3 s after its last call: the names are read from the live process (a collector
        // that lags a short workload at high load read some code objects after it exited).
        .args(["--linger", "3", "--reps", &REPS.to_string(), "--truth"])
        .arg(&truth)
        .env("LD_LIBRARY_PATH", sim_lib())
        .output()
        .unwrap();
    assert!(out.status.success(), "python_sites --stacks {mode}: {}", String::from_utf8_lossy(&out.stderr));
    let mut t = Sites::new();
    for line in std::fs::read_to_string(&truth).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 4, "truth line {line:?}");
        *t.entry((f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())).or_insert(0) += f[3].parse::<usize>().unwrap();
    }
    (d, db, t)
}

/// (API, Python function, line) -> calls, from the trace's sites.
fn sites(c: &Connection) -> Sites {
    let mut st = c
        .prepare(
            "SELECT a.apiName, coalesce(f.symbol, '?'), coalesce(p.line, -1) FROM api a JOIN rtl_api_stack s ON s.api_id = a.id \
             JOIN rtl_stack st ON st.id = s.stack_id LEFT JOIN rtl_frame f ON f.id = st.site_frame_id \
             LEFT JOIN rtl_python_frame p ON p.frame_id = f.id",
        )
        .unwrap();
    let mut m = Sites::new();
    for r in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))).unwrap() {
        *m.entry(r.unwrap()).or_insert(0) += 1;
    }
    m
}

fn check(mode: &str) {
    let (_d, db, truth) = trace(mode);
    let c = Connection::open(&db).unwrap();
    assert_eq!(truth.values().sum::<usize>(), REPS * 8, "the workload's own count");
    assert_eq!(sites(&c), truth, "--stacks {mode}: (API, Python site, line) -> calls");
    for tag in ["python_stacks_unmatched", "python_stacks_truncated", "stacks_without_call"] {
        assert_eq!(meta(&db, tag).as_deref(), Some("0"), "{tag}");
    }
    // Not asserted: `python_frames_unresolved`. A code object is read when its record is decoded,
    // and a collector that lags this short workload (seen once in a clean-clone CI run at high
    // load: 25 of 950 frames) reads some after the process exited (docs/tracing.md). The sites
    // above are exact all the same; the recursion's chain below needs its frames named.
    eprintln!("python_frames_unresolved: {:?}", meta(&db, "python_frames_unresolved"));
    assert_eq!(meta(&db, "python_processes").as_deref(), Some("1"));
    // The recursion: the launch's stack holds `recurse` 13 times, then `main`, `<module>`.
    let chain: Vec<String> = c
        .prepare(
            "SELECT f.symbol FROM api a JOIN rtl_api_stack s ON s.api_id = a.id JOIN rtl_stack_frame sf ON sf.stack_id = s.stack_id \
             JOIN rtl_frame f ON f.id = sf.frame_id JOIN rtl_python_frame p ON p.frame_id = f.id \
             WHERE s.stack_id = (SELECT st.id FROM rtl_stack st JOIN rtl_frame sf2 ON sf2.id = st.site_frame_id WHERE sf2.symbol = 'recurse' LIMIT 1) \
             AND a.id = (SELECT min(api_id) FROM rtl_api_stack WHERE stack_id = s.stack_id) ORDER BY sf.depth",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut want = vec!["recurse".to_string(); 13];
    want.extend(["main".to_string(), "<module>".to_string()]);
    assert_eq!(chain, want, "the recursion's Python frames, innermost first");
    if mode == "dwarf" {
        // Merged: each evaluation-loop frame of the native stack became its Python frames.
        let eval: i64 = c
            .query_row(
                "SELECT count(*) FROM rtl_stack_frame sf JOIN rtl_frame f ON f.id = sf.frame_id WHERE f.symbol = '_PyEval_EvalFrameDefault'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(eval, 0, "an evaluation-loop frame was left unmerged");
    }
}

#[test]
fn every_python_launch_site_is_its_function_and_line_dwarf() {
    check("dwarf");
}

#[test]
fn every_python_launch_site_is_its_function_and_line_fp() {
    check("fp");
}
