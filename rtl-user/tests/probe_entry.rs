//! Where entry probes go: a library built with Intel CET (`-fcf-protection`, the default of
//! Ubuntu's, Fedora's and RHEL's compilers) starts every function with `endbr64`, which the
//! kernel would single-step out of line on every call (about 6x the cost of a `push %rbp`
//! entry here: docs/benchmarks.md). rtl-ebpf probes such functions just past the marker
//! (`probe/symbols.rs`); every call must still be traced, once, with its return.

use crate::common;

use common::*;
use rusqlite::Connection;

/// Builds tests/bench's probe target with `flag` and its driver, in `dir`.
fn build(dir: &std::path::Path, flag: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let lib = dir.join("librtlbench.so");
    let drv = dir.join("probe_driver");
    let cc = |args: &[&str]| {
        let st = std::process::Command::new("cc").args(args).status().expect("cc");
        assert!(st.success(), "cc {args:?}");
    };
    let src = root().join("tests/bench");
    cc(&[
        "-O2",
        "-fno-omit-frame-pointer",
        flag,
        "-shared",
        "-fPIC",
        "-o",
        lib.to_str().unwrap(),
        src.join("probe_target.c").to_str().unwrap(),
    ]);
    let rpath = format!("-Wl,-rpath,{}", dir.display());
    cc(&[
        "-O2",
        flag,
        "-o",
        drv.to_str().unwrap(),
        src.join("probe_driver.c").to_str().unwrap(),
        "-L",
        dir.to_str().unwrap(),
        "-lrtlbench",
        &rpath,
    ]);
    (lib, drv)
}

fn traced_calls(flag: &str) {
    require_root();
    let d = tmpdir();
    let (lib, drv) = build(d.path(), flag);
    let db = d.path().join("t.db");
    let calls = 5000;
    let out = std::process::Command::new(rtl())
        .args([
            "run",
            "--quiet",
            "--gpu",
            "none",
            "--apis",
            "hipBenchTarget",
            "--lib",
            lib.to_str().unwrap(),
            "-o",
            db.to_str().unwrap(),
            "--",
        ])
        .arg(&drv)
        .arg(calls.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "rtl-ebpf run: {}", String::from_utf8_lossy(&out.stderr));
    let c = Connection::open(&db).unwrap();
    let n: i64 = c.query_row("SELECT count(*) FROM api WHERE apiName = 'hipBenchTarget' AND end >= start", [], |r| r.get(0)).unwrap();
    assert_eq!(n, calls, "{flag}: every call traced once, with its return");
    for tag in ["probe_entries", "probe_exits"] {
        assert_eq!(meta(&db, tag).as_deref(), Some(calls.to_string().as_str()), "{flag}: {tag}");
    }
}

#[test]
fn a_cet_library_is_traced_call_for_call() {
    traced_calls("-fcf-protection=full");
}

#[test]
fn a_library_without_cet_is_traced_call_for_call() {
    traced_calls("-fcf-protection=none");
}
