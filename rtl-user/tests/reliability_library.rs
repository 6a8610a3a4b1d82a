//! The traced library changes under the collector (issue 8): a private copy deleted and replaced
//! by a new file while a process runs from it, a copy deleted before the collector starts, and
//! one process that maps two different copies (dlmopen). A uprobe lives on an inode: the
//! collector must keep tracing the inode the process really runs, and find the new one.
//!
//! Needs root (eBPF), the workloads and python3 (for dlmopen through ctypes).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rusqlite::Connection;

const REAL_LIB: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

fn copy_lib(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join("libamdhip64.so.5");
    // Write a new file and rename it into place: a new inode, like a package upgrade.
    let tmp = dir.join(".libamdhip64.so.5.new");
    std::fs::copy(REAL_LIB, &tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p
}

fn inode(p: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(p).unwrap())
}

fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// sleeper --mode loop against the library in `libdir`, ready (library mapped).
fn sleeper(libdir: &Path, truth: &Path) -> Child {
    let mut c = Command::new(workload("sleeper"))
        .args(["--mode", "loop", "--interval-ms", "5", "--no-init"])
        .env("LD_LIBRARY_PATH", libdir)
        .env("RTL_WORKLOAD_TRUTH", truth)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(c.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
    assert!(line.contains("ready"), "{line}");
    c
}

fn stop(mut c: Child) {
    signal(c.id(), libc::SIGTERM);
    assert!(wait_exit(&mut c, 20).success());
}

/// Truth calls that started inside [from, to], and the traced calls of that pid: every one of the
/// former is in the latter.
fn traced_between(truth_file: &Path, calls: &[TracedCall], pid: u32, from: i64, to: i64) -> usize {
    let t = truth(truth_file);
    let tc: Vec<_> = truth_calls(&t)
        .into_iter()
        .filter(|v| v["pid"].as_u64() == Some(pid as u64) && v["start_ns"].as_i64().unwrap() >= from && v["end_ns"].as_i64().unwrap() <= to)
        .collect();
    let mine: Vec<TracedCall> = calls.iter().filter(|c| c.pid == pid && c.status == 0).cloned().collect();
    match_truth(&tc, &mine).len()
}

#[test]
fn library_deleted_and_replaced_while_attached() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let (dir1, dir3) = (d.path().join("venv1"), d.path().join("venv3"));
    let lib1 = copy_lib(&dir1);
    let old_ino = inode(&lib1);
    // S3 runs from a copy that is deleted before the collector even starts (found through
    // /proc/PID/map_files).
    let lib3 = copy_lib(&dir3);
    let (t1, t2, t3) = (d.path().join("s1.jsonl"), d.path().join("s2.jsonl"), d.path().join("s3.jsonl"));
    let s3 = sleeper(&dir3, &t3);
    std::fs::remove_file(&lib3).unwrap();
    let s1 = sleeper(&dir1, &t1);
    let tracer = rtl_start(&["--all", "--quiet", "--apis", "hipGetDeviceCount", "-o", db.to_str().unwrap()]);
    let attached = monotonic_ns();
    std::thread::sleep(Duration::from_millis(700));
    // Delete S1's library, then put a new file (another inode) at the same path.
    std::fs::remove_file(&lib1).unwrap();
    let deleted = monotonic_ns();
    std::thread::sleep(Duration::from_millis(700));
    let lib2 = copy_lib(&dir1);
    let new_ino = inode(&lib2);
    assert_ne!(old_ino, new_ino);
    // S2 starts from the replacement; the collector's rescan (about once a second) attaches it.
    let s2 = sleeper(&dir1, &t2);
    // The event, not a guess at how long a rescan takes on a loaded machine: the new inode is in
    // the trace's library table (attaching can wait on a kernel mutex another session's probe
    // removal holds: the same generous limit as every attach). Then S2 runs on for a second.
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let n: i64 = Connection::open(&db)
            .and_then(|c| c.query_row("SELECT count(*) FROM rtl_library WHERE inode = ?1", [new_ino as i64], |r| r.get(0)))
            .unwrap_or(0);
        if n > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the replacement library (inode {new_ino}) was not attached in 240 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1000));
    let end = monotonic_ns();
    let (p1, p2, p3) = (s1.id(), s2.id(), s3.id());
    rtl_stop(tracer);
    for s in [s1, s2, s3] {
        stop(s);
    }
    let calls = traced_calls(&db);
    // S1: every call from the attach to the end, before and after its file was deleted.
    let n1 = traced_between(&t1, &calls, p1, attached, end);
    let after_delete = calls.iter().filter(|c| c.pid == p1 && c.start > deleted).count();
    assert!(n1 > 100 && after_delete > 100, "S1: {n1} calls, {after_delete} after the delete");
    // S3: traced though its file was gone before the collector started.
    let n3 = traced_between(&t3, &calls, p3, attached, end);
    assert!(n3 > 100, "S3 (deleted library): {n3} calls");
    // S2: traced from the moment the rescan (about once a second) attached the new inode, every
    // call from then on.
    // (The call in flight while the entry and return probes go in may be caught half: the
    // first complete call is the reference.)
    let first2 =
        calls.iter().filter(|c| c.pid == p2 && c.status == 0).map(|c| c.start).min().expect("S2 (replacement library) never traced");
    let n2 = traced_between(&t2, &calls, p2, first2, end);
    assert!(n2 > 20, "S2 (replacement library): {n2} calls");
    // Both inodes of dir1 and the deleted one of dir3 are in the library table.
    let conn = Connection::open(&db).unwrap();
    let inodes: Vec<i64> = conn
        .prepare("SELECT inode FROM rtl_library WHERE path LIKE ?1")
        .unwrap()
        .query_map([format!("{}%", d.path().display())], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for ino in [old_ino, new_ino] {
        assert!(inodes.contains(&(ino as i64)), "inode {ino} not attached: {inodes:?}");
    }
    assert_eq!(inodes.len(), 3, "{inodes:?}");
    eprintln!("deleted/replaced: S1 {n1} calls ({after_delete} after the delete), S2 {n2}, S3 {n3}");
}

const TWO_COPIES_PY: &str = r#"
import ctypes, sys
a = ctypes.CDLL(sys.argv[1])
libc = ctypes.CDLL(None)
libc.dlmopen.restype = ctypes.c_void_p
libc.dlmopen.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_int]
libc.dlerror.restype = ctypes.c_char_p
h = libc.dlmopen(-1, sys.argv[2].encode(), 2)  # LM_ID_NEWLM, RTLD_NOW: a second, separate copy
if not h:
    print("dlmopen failed:", libc.dlerror(), flush=True)
    sys.exit(1)
libc.dlsym.restype = ctypes.c_void_p
libc.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
fb = ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_int)(libc.dlsym(h, b"hipGetErrorString"))
fa = a.hipGetErrorString
fa.restype = ctypes.c_char_p
print("ready", flush=True)
sys.stdin.readline()
for i in range(int(sys.argv[3])): fa(1)
for i in range(int(sys.argv[4])): fb(1)
print("done", flush=True)
"#;

#[test]
fn a_process_mapping_two_different_copies_is_traced_in_both() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let (la, lb) = (copy_lib(&d.path().join("a")), copy_lib(&d.path().join("b")));
    let py = d.path().join("two.py");
    std::fs::write(&py, TWO_COPIES_PY).unwrap();
    let mut app = Command::new("python3")
        .arg(&py)
        .args([la.to_str().unwrap(), lb.to_str().unwrap(), "300", "500"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(app.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "{line}");
    let tracer =
        rtl_start(&["attach", "--quiet", "--apis", "hipGetErrorString", "--pid", &app.id().to_string(), "-o", db.to_str().unwrap()]);
    app.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    std::thread::sleep(Duration::from_millis(300));
    rtl_stop(tracer);
    assert!(app.wait().unwrap().success());
    let calls: Vec<_> = traced_calls(&db).into_iter().filter(|c| c.pid == app.id()).collect();
    // 300 through copy A plus 500 through copy B: one copy alone would give 300 or 500.
    assert_eq!(calls.len(), 800, "calls through both copies");
    assert!(calls.iter().all(|c| c.status == 0 && c.name == "hipGetErrorString"));
    let conn = Connection::open(&db).unwrap();
    let n: i64 = conn
        .query_row("SELECT count(DISTINCT inode) FROM rtl_library WHERE path LIKE ?1", [format!("{}%", d.path().display())], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 2, "both copies attached");
}
