//! Python call sites (`--stacks`, issue 17) on the ROCm simulator: tests/workloads/python_sites.py
//! makes HIP calls through ctypes from known Python functions (a plain function, a method, a
//! closure, a recursion 12 deep, one 46 deep of large frames, a generator, a second thread) and
//! writes down, from the interpreter itself, the function and line of every call. Every call's
//! recorded site must be that Python function and line: exact counts, nothing missing, nothing extra; and every
//! Python frame of every call's chain named, the outermost `<module>` (main thread) or the
//! thread's bootstrap (the second thread). One test per CPython of this machine's image and
//! `--stacks` mode: Debian 12's 3.11 (/usr/bin/python3, non-PIE, the interpreter linked in) and
//! pyenv's 3.10, 3.12 and 3.13 (`libpython3.X.so`). A missing interpreter fails its test.
//! The workload exits right after its last call: frames are named from the probe's copies of
//! their code objects, not from the live process (`*_after_exit`: the collector made to decode
//! nothing before the process is gone).

use crate::common;

use std::collections::BTreeMap;

use common::*;
use rusqlite::Connection;

const REPS: usize = 25;

type Sites = BTreeMap<(String, String, i64), usize>;

/// The interpreters: (test name, path, version).
const PY310: (&str, &str, (u8, u8)) = ("py310", "/root/.pyenv/versions/3.10.13/bin/python3", (3, 10));
const PY311: (&str, &str, (u8, u8)) = ("py311", "/usr/bin/python3", (3, 11));
const PY312: (&str, &str, (u8, u8)) = ("py312", "/root/.pyenv/versions/3.12.1/bin/python3", (3, 12));
const PY313: (&str, &str, (u8, u8)) = ("py313", "/root/.pyenv/versions/3.13.0/bin/python3", (3, 13));

/// The interpreter at `path`, of the version the test is for; a missing one fails the test.
fn python((name, path, version): (&str, &str, (u8, u8))) -> std::path::PathBuf {
    let p = std::path::PathBuf::from(path);
    assert!(
        p.exists(),
        "python_sites::{name}_* needs CPython {}.{} at {path}, which is missing (this machine image's interpreter: install it there)",
        version.0,
        version.1
    );
    let out = std::process::Command::new(&p).args(["-c", "import sys; print(*sys.version_info[:2])"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{} {}", version.0, version.1), "{path}: its version");
    p
}

fn trace(py: &std::path::Path, mode: &str, decode_after_exit: bool) -> (tempfile::TempDir, std::path::PathBuf, Sites) {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let truth = d.path().join("truth.tsv");
    let script = root().join("tests/workloads/python_sites.py");
    let mut cmd = std::process::Command::new(rtl());
    if decode_after_exit {
        // The collector decodes no record before the workload has exited and been reaped.
        cmd.env("RTL_TEST_DECODE_AFTER_EXIT", "1");
    }
    let out = cmd
        .args(["run", "--quiet", "--stacks", mode, "-o"])
        .arg(&db)
        .arg("--")
        .arg(py)
        .arg(&script)
        .args(["--reps", &REPS.to_string(), "--truth"])
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

fn check(interp: (&str, &str, (u8, u8)), mode: &str, decode_after_exit: bool) {
    let py = python(interp);
    let (_d, db, truth) = trace(&py, mode, decode_after_exit);
    let c = Connection::open(&db).unwrap();
    assert_eq!(truth.values().sum::<usize>(), REPS * 9, "the workload's own count");
    assert_eq!(sites(&c), truth, "--stacks {mode}: (API, Python site, line) -> calls");
    // Every frame named, with its line: from the probe's copies, whenever the records are decoded.
    for tag in [
        "python_stacks_unmatched",
        "python_stacks_truncated",
        "stacks_without_call",
        "python_frame_lines_unknown",
        "python_code_records_unusable",
        "python_code_records_lost_in_probe",
        "python_code_objects_unreadable_in_probe",
    ] {
        assert_eq!(meta(&db, tag).as_deref(), Some("0"), "{tag}");
    }
    let copies: u64 = meta(&db, "python_code_records").and_then(|v| v.parse().ok()).unwrap_or(0);
    // The workload's code objects on the calls' stacks: <module>, main, plain, Model.forward...
    assert!(copies >= 8, "code objects copied by the probe: {copies}");
    if decode_after_exit {
        assert_eq!(meta(&db, "python_code_objects_read_live").as_deref(), Some("0"), "nothing could be read from the exited process");
    }
    assert_eq!(meta(&db, "python_processes").as_deref(), Some("1"));
    chains_named(&c, interp.2, mode);
    // The recursions: the launch's stack holds `recurse` 13 times (`deep` 46 times: several
    // pages, two data-stack chunks), then `main`, `<module>`.
    for (f, n) in [("recurse", 13), ("deep", 46)] {
        let mut want = vec![f.to_string(); n];
        want.extend(["main".to_string(), "<module>".to_string()]);
        assert_eq!(chain_of(&c, f), want, "--stacks {mode}: the recursion's Python frames, innermost first");
    }
    if mode == "python" {
        // The native caller and the Python frames: whole by design.
        assert_eq!(meta(&db, "stacks_truncated").as_deref(), Some("0"), "--stacks python: stacks_truncated");
    }
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
        // 3.11+: every copy stopped at the innermost evaluation loop (the Python walk gave its
        // place), and unwound that far, or is counted cut short: a few may be on a loaded
        // machine (seen once: a stack decoded before the collector had read a library's
        // mapping unwinds no further than that library). 3.10 gives no such place (and its
        // 46-deep recursion, one native frame per Python frame, outgrows the 8 KiB copy).
        let cut = meta(&db, "stacks_cut_at_python");
        if interp.2 >= (3, 11) {
            let n = |v: Option<String>| v.and_then(|v| v.parse::<usize>().ok()).unwrap_or(usize::MAX);
            let (c, t) = (n(cut), n(meta(&db, "stacks_truncated")));
            let calls = REPS * 9;
            assert!(
                c.checked_add(t) == Some(calls) && c >= calls * 95 / 100,
                "(stacks_cut_at_python, stacks_truncated) = ({c}, {t}) of {calls} calls"
            );
        } else {
            assert_eq!(cut.as_deref(), Some("0"), "stacks_cut_at_python");
        }
    }
}

/// The Python frames (innermost first) of the first call whose site is function `f`.
fn chain_of(c: &Connection, f: &str) -> Vec<String> {
    c.prepare(
        "SELECT f.symbol FROM api a JOIN rtl_api_stack s ON s.api_id = a.id JOIN rtl_stack_frame sf ON sf.stack_id = s.stack_id \
         JOIN rtl_frame f ON f.id = sf.frame_id JOIN rtl_python_frame p ON p.frame_id = f.id \
         WHERE s.stack_id = (SELECT st.id FROM rtl_stack st JOIN rtl_frame sf2 ON sf2.id = st.site_frame_id WHERE sf2.symbol = ?1 LIMIT 1) \
         AND a.id = (SELECT min(api_id) FROM rtl_api_stack WHERE stack_id = s.stack_id) ORDER BY sf.depth",
    )
    .unwrap()
    .query_map([f], |r| r.get(0))
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Every Python frame of every call's chain is named (none left '?': the `<module>` frame of
/// each main-thread call was, on CPython 3.12, when its code object had been freed by the time
/// the collector read it), and each chain ends where its thread began.
fn chains_named(c: &Connection, version: (u8, u8), mode: &str) {
    let unnamed: i64 = c
        .query_row(
            "SELECT count(*) FROM rtl_api_stack s JOIN rtl_stack_frame sf ON sf.stack_id = s.stack_id \
             JOIN rtl_frame f ON f.id = sf.frame_id JOIN rtl_python_frame p ON p.frame_id = f.id WHERE f.symbol IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let unresolved = meta_of(c, "python_frames_unresolved");
    assert_eq!((unnamed, unresolved.as_str()), (0, "0"), "--stacks {mode}: (calls' unnamed Python frames, python_frames_unresolved)");
    let mut outermost = BTreeMap::<String, usize>::new();
    let mut st = c
        .prepare(
            "SELECT coalesce(f.symbol, '?') FROM rtl_api_stack s JOIN rtl_stack_frame sf ON sf.stack_id = s.stack_id \
             JOIN rtl_frame f ON f.id = sf.frame_id JOIN rtl_python_frame p ON p.frame_id = f.id \
             WHERE sf.depth = (SELECT max(sf2.depth) FROM rtl_stack_frame sf2 JOIN rtl_python_frame p2 ON p2.frame_id = sf2.frame_id \
                               WHERE sf2.stack_id = s.stack_id)",
        )
        .unwrap();
    for r in st.query_map([], |r| r.get::<_, String>(0)).unwrap() {
        *outermost.entry(r.unwrap()).or_insert(0) += 1;
    }
    // 3.10 names functions by `co_name`; 3.11+ by `co_qualname`.
    let bootstrap = if version == (3, 10) { "_bootstrap" } else { "Thread._bootstrap" };
    let want = BTreeMap::from([("<module>".to_string(), REPS * 8), (bootstrap.to_string(), REPS)]);
    assert_eq!(outermost, want, "--stacks {mode}: each call's outermost Python frame");
}

fn meta_of(c: &Connection, tag: &str) -> String {
    c.query_row("SELECT value FROM rocpd_metadata WHERE tag = ?1", [tag], |r| r.get(0)).unwrap_or_else(|_| format!("no {tag}"))
}

#[test]
fn py310_dwarf() {
    check(PY310, "dwarf", false);
}

#[test]
fn py310_fp() {
    check(PY310, "fp", false);
}

#[test]
fn py311_dwarf() {
    check(PY311, "dwarf", false);
}

#[test]
fn py311_fp() {
    check(PY311, "fp", false);
}

#[test]
fn py312_dwarf() {
    check(PY312, "dwarf", false);
}

#[test]
fn py312_fp() {
    check(PY312, "fp", false);
}

#[test]
fn py313_dwarf() {
    check(PY313, "dwarf", false);
}

#[test]
fn py313_fp() {
    check(PY313, "fp", false);
}

/// A collector that decodes nothing before the workload has exited (the lag of a loaded
/// machine, made total): every site still exact, every frame named, nothing read live.
#[test]
fn py310_after_exit() {
    check(PY310, "dwarf", true);
}

#[test]
fn py311_after_exit() {
    check(PY311, "dwarf", true);
}

#[test]
fn py312_after_exit() {
    check(PY312, "fp", true);
}

#[test]
fn py313_after_exit() {
    check(PY313, "dwarf", true);
}

#[test]
fn py310_python() {
    check(PY310, "python", false);
}

#[test]
fn py311_python() {
    check(PY311, "python", false);
}

#[test]
fn py312_python() {
    check(PY312, "python", false);
}

#[test]
fn py313_python() {
    check(PY313, "python", false);
}
