//! The command line (issue 16): a closed stdout ends the program quietly (exit 0), exit codes as
//! documented, `-p` / comma lists / humantime durations, help that lists only what applies and
//! describes every argument with examples, `-q`, merge's table, `summary --json` with numbers as
//! numbers, a structured mode and nothing silently left out.
//!
//! Needs root for the tests that trace (`--all`, eBPF); the others parse or read only.

use crate::common;
use crate::read_common;

use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use clap::{CommandFactory, Parser};
use common::{require_root, rtl};
use rtl_user::cli::{Cli, Command as Sub};
use rusqlite::Connection;
use serde_json::Value;

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn rtl_out(args: &[&str]) -> Output {
    Command::new(rtl()).args(args).stdin(Stdio::null()).output().expect("cannot run rtl-ebpf")
}

/// Runs rtl-ebpf with its stdout on a pipe nobody reads any more (as `| head -1` leaves it).
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut fds = [0; 2];
    // SAFETY: a fresh pipe; the read end is closed at once, the write end owned below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    unsafe { libc::close(fds[0]) };
    let w = unsafe { OwnedFd::from_raw_fd(fds[1]) };
    Command::new(rtl()).args(args).stdin(Stdio::null()).stdout(Stdio::from(w)).stderr(Stdio::piped()).output().unwrap()
}

#[test]
fn cli_a_closed_stdout_ends_quietly_with_exit_0() {
    let d = common::tmpdir();
    let db = read_common::sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let dbs = db.to_str().unwrap();
    let lib = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
    assert!(Path::new(lib).exists(), "{lib}: Debian's libamdhip64 is needed (apt-get install libamdhip64-5)");
    for args in
        [vec!["list-apis", "--lib", lib, "--apis", "all"], vec!["summary", dbs], vec!["summary", "--json", dbs], vec!["summary", "--help"]]
    {
        let o = with_closed_stdout(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(o.stderr.is_empty(), "{args:?} must end quietly: {}", text(&o));
    }
}

#[test]
fn cli_reader_exit_codes_are_the_documented_ones() {
    let d = common::tmpdir();
    let db = read_common::sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let dbs = db.to_str().unwrap();
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, "not a trace at all, but long enough to fill a SQLite header ..............................................")
        .unwrap();
    let other = d.path().join("other.db");
    Connection::open(&other).unwrap().execute_batch("CREATE TABLE users(id)").unwrap();
    // Damaged inside (the header and the size are fine): SQLite finds it while reading.
    let damaged = d.path().join("damaged.db");
    std::fs::copy(&db, &damaged).unwrap();
    let mut bytes = std::fs::read(&damaged).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    assert!(bytes.len() >= 6 * page, "sample trace has pages to damage");
    let end = bytes.len() - page;
    bytes[2 * page..end].iter_mut().for_each(|b| *b = 0xA5);
    std::fs::write(&damaged, &bytes).unwrap();
    let damaged = damaged.to_str().unwrap().to_string();
    let missing = d.path().join("missing.db");
    let (junk, other, missing, dir) =
        (junk.to_str().unwrap(), other.to_str().unwrap(), missing.to_str().unwrap(), d.path().to_str().unwrap());
    let nowhere = d.path().join("no/such/dir/o.json");
    let nowhere = nowhere.to_str().unwrap();
    let out = d.path().join("o.json");
    let out = out.to_str().unwrap();
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // 8: the input trace cannot be read
        (vec!["summary", junk], 8),
        (vec!["summary", other], 8),
        (vec!["summary", missing], 8),
        (vec!["summary", dir], 8),
        (vec!["summary", &damaged], 8),
        (vec!["convert", &damaged, "-o", out], 8),
        (vec!["convert", junk, "-o", out], 8),
        (vec!["merge", "-o", out, dbs, junk], 8),
        // 7: the output cannot be written
        (vec!["convert", dbs, "-o", nowhere], 7),
        (vec!["summary", dbs, "--html", nowhere], 7),
        (vec!["merge", "-o", nowhere, dbs], 7),
        // 2: usage
        (vec!["convert", dbs, "--format", "chrome", "-o", out], 2),
        (vec!["summary"], 2),
        (vec!["merge", "-o", out], 2),
        (vec!["summary", dbs, "--html", dbs], 2),
        (vec!["merge", "-o", out, dbs, dbs], 2),
        (vec!["attach", "-p", "1", "--agent", "/x.so"], 2),
        (vec!["--all", "--duration", "1e300"], 2),
        (vec!["--all", "--duration", "5 fortnights"], 2),
        // 0
        (vec!["summary", dbs], 0),
    ];
    for (args, code) in cases {
        let o = rtl_out(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        if code != 0 {
            assert!(!o.stderr.is_empty(), "{args:?}: an error says why");
        }
    }
    assert!(!Path::new(out).exists(), "no output from a failed command");
}

#[test]
fn cli_durations_pids_and_their_forms() {
    use rtl_user::cli::parse_duration;
    for (s, secs) in
        [("30", 30.0), ("0.5", 0.5), ("500ms", 0.5), ("5s", 5.0), ("2m", 120.0), ("1h 30m", 5400.0), ("365days", 365.0 * 86400.0)]
    {
        assert_eq!(parse_duration(s), Ok(secs), "{s}");
    }
    for bad in ["0", "-1", "nan", "inf", "1e300", "366days", "", "5 fortnights", "2x"] {
        assert!(parse_duration(bad).is_err(), "{bad} must be refused");
    }
    let cli = Cli::try_parse_from(["rtl-ebpf", "attach", "-p", "10,11", "--pid", "12", "--duration", "2m", "-q"]).unwrap();
    match cli.command {
        Some(Sub::Attach { pids, trace, .. }) => {
            assert_eq!(pids, vec![10, 11, 12]);
            assert_eq!(trace.duration, Some(120.0));
            assert!(trace.quiet);
        }
        other => panic!("{other:?}"),
    }
    assert!(Cli::try_parse_from(["rtl-ebpf", "attach", "-p", "1,x"]).is_err());
}

#[test]
fn cli_help_lists_what_applies_describes_every_argument_and_has_examples() {
    let o = rtl_out(&["attach", "--help"]);
    assert!(o.status.success());
    let h = String::from_utf8_lossy(&o.stdout);
    assert!(!h.contains("--agent"), "attach cannot use --agent:\n{h}");
    assert!(!h.contains("--graph-nodes"), "attach cannot use --graph-nodes:\n{h}");
    let run = String::from_utf8_lossy(&rtl_out(&["run", "--help"]).stdout).into_owned();
    assert!(run.contains("--graph-nodes"), "{run}");
    assert!(h.contains("-p, --pid") && h.contains("Examples:"), "{h}");
    let top = Cli::command();
    let mut missing = vec![];
    for cmd in std::iter::once(&top).chain(top.get_subcommands()) {
        for a in cmd.get_arguments() {
            if a.is_hide_set() || ["help", "version"].contains(&a.get_id().as_str()) {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                missing.push(format!("{} {}", cmd.get_name(), a.get_id()));
            }
        }
        if cmd.get_name() != "rtl-ebpf" && !cmd.get_after_help().is_some_and(|h| h.to_string().contains("Examples:")) {
            missing.push(format!("{}: examples", cmd.get_name()));
        }
    }
    assert!(missing.is_empty(), "undocumented: {missing:?}");
}

#[test]
fn cli_merge_prints_a_table() {
    let d = common::tmpdir();
    let a = read_common::sample_trace(&d.path().join("a.db"), "nodeA", 0);
    let b = read_common::sample_trace(&d.path().join("b.db"), "nodeB", 0);
    let m = d.path().join("m.db");
    let o = rtl_out(&["merge", "-o", m.to_str().unwrap(), a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!e.contains('{') && !e.contains("MergeStats"), "not a debug dump:\n{e}");
    let head = e.lines().find(|l| l.contains("input") && l.contains("API calls")).unwrap_or_else(|| panic!("a table header:\n{e}"));
    assert!(head.contains("GPU ops") && head.contains("host"), "{head}");
    let merged = e.lines().find(|l| l.trim_start().starts_with("= merged")).unwrap_or_else(|| panic!("a total row:\n{e}"));
    assert!(merged.split_whitespace().any(|w| w == "20"), "20 API calls merged: {merged}");
}

#[test]
fn cli_summary_json_has_numbers_a_structured_mode_and_says_what_is_left_out() {
    let d = common::tmpdir();
    let db = read_common::sample_trace(&d.path().join("t.db"), "nodeA", 0);
    Connection::open(&db)
        .unwrap()
        .execute_batch(
            r#"INSERT INTO rocpd_metadata(tag, value) VALUES ('mode', 'Run(["python3", "tr\"ain.py", "--lr=1e-3"])'),
                 ('ringbuf_drops_per_cpu', '1,2'), ('attach_ms', '12.5');"#,
        )
        .unwrap();
    let o = rtl_out(&["summary", "--json", "--top", "1", db.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["metadata"]["dropped_events"], 3);
    assert_eq!(s["metadata"]["attach_ms"], 12.5);
    assert_eq!(s["metadata"]["ringbuf_drops_per_cpu"], serde_json::json!([1, 2]));
    assert_eq!(s["metadata"]["hostname"], "nodeA");
    assert_eq!(s["metadata"]["mode"], serde_json::json!({"kind": "run", "command": ["python3", "tr\"ain.py", "--lr=1e-3"]}));
    assert_eq!(s["lost"]["dropped"]["dropped_events"], 3);
    assert_eq!(s["kernels"].as_array().unwrap().len(), 1);
    assert_eq!(s["totals"]["kernels_left_out"], 2);
    assert_eq!(s["totals"]["apis_left_out"], s["totals"]["api_names"].as_i64().unwrap() - 1);
    let o = rtl_out(&["summary", "--top", "1", db.to_str().unwrap()]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("(top 1 of 3; 2 left out: --top 0 shows all)"), "{t}");
    let o = rtl_out(&["summary", "--json", "--top", "0", db.to_str().unwrap()]);
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!((s["totals"]["kernels_left_out"].as_i64(), s["totals"]["apis_left_out"].as_i64()), (Some(0), Some(0)));
    for (mode, want) in
        [("All", serde_json::json!({"kind": "all"})), ("Pids([4242, 7])", serde_json::json!({"kind": "attach", "pids": [4242, 7]}))]
    {
        Connection::open(&db).unwrap().execute("UPDATE rocpd_metadata SET value = ?1 WHERE tag = 'mode'", [mode]).unwrap();
        let o = rtl_out(&["summary", "--json", db.to_str().unwrap()]);
        let s: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(s["metadata"]["mode"], want);
    }
}

#[test]
fn cli_quiet_leaves_out_the_status_and_the_table() {
    require_root();
    let d = common::tmpdir();
    let db = d.path().join("t.db");
    let args = ["--all", "--duration", "200ms", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap()];
    let loud = rtl_out(&args);
    assert!(loud.status.success(), "{}", text(&loud));
    assert!(String::from_utf8_lossy(&loud.stderr).contains("top APIs by total time"), "{}", text(&loud));
    std::fs::remove_file(&db).unwrap();
    let mut q = vec!["-q"];
    q.extend(args);
    let o = rtl_out(&q);
    assert!(o.status.success(), "{}", text(&o));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!e.contains("top APIs by total time") && !e.contains('\x1b'), "-q: no table, no status line:\n{e}");
    // Quiet: no progress (what was attached, started, removed); what it says on this run is that
    // tracing has begun, why it stopped, the totals (nothing was lost) and the trace's path.
    for progress in ["attached ", "probes removed", "started `"] {
        assert!(!e.contains(progress), "-q printed progress ({progress:?}):\n{e}");
    }
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "-q prints the attach line, why it stopped, the totals and the path when all went well:\n{e}");
    assert!(lines[0].contains(" functions probed (entry + return) in "), "{e}");
    assert!(lines[1].contains("stopping: "), "{e}");
    assert!(lines[2].contains(" API calls from ") && lines[2].contains("written"), "{e}");
    assert_eq!(lines[3], format!("trace: {}", db.display()), "{e}");
    assert!(o.stdout.is_empty());
}
