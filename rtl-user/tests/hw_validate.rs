//! `tests/hw/validate.sh` (the acceptance checks for a real AMD GPU, issue 14) on a machine
//! without one: it must say so, list every check it has as skipped with the reason, and exit
//! with its own status (3), distinct from "passed" (0), "failed" (1) and "prerequisites
//! missing" (2). The GPU device node is pointed at a path that cannot exist (`RTL_HW_KFD`), so
//! this runs the no-GPU path on any machine, with a GPU or not. (Its checks themselves run
//! against the simulator in a dry run: tests/hw/README.md.)

use crate::common;

use std::process::Command;

/// Every check of the script, group by group (its GROUP_CHECKS table).
const CHECKS: &[(&str, &[&str])] = &[
    ("hsa", &["hsa.kernel_count", "hsa.kernel_names", "hsa.no_drops", "hsa.cpu_trace"]),
    ("copies", &["hsa.kernels", "hsa.copies", "hsa.graph_spans", "hsa.barriers", "hsa.source_line"]),
    ("auto", &["auto.kernels", "auto.copies", "auto.graph_spans", "auto.barriers", "auto.source_line"]),
    ("nodes", &["nodes.graph_nodes", "nodes.kernels", "nodes.barrier_cost"]),
    ("graph", &["hsa.graph_default", "hsa.graph_opt_in", "hsa.span_contains_nodes"]),
    ("clr", &["clr"]),
    ("migration", &["migration"]),
    ("latency", &["graph_latency"]),
    ("multi", &["multi_process"]),
];

/// Runs the script with no GPU; returns (status, stdout, stderr).
fn validate_without_gpu(checks: Option<&str>) -> (i32, String, String) {
    let out_dir = std::env::temp_dir().join(format!("rtl-hw-validate-test-{}-{}", std::process::id(), checks.is_some()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut cmd = Command::new("bash");
    cmd.arg(common::root().join("tests/hw/validate.sh"))
        .env("RTL_HW_KFD", "/nonexistent/rtl-hw-validate-test/kfd")
        .env("RTL_HW_OUT", &out_dir)
        .env_remove("RTL_HW_LD_LIBRARY_PATH")
        .env_remove("RTL_HW_CHECKS");
    if let Some(c) = checks {
        cmd.env("RTL_HW_CHECKS", c);
    }
    let out = cmd.output().expect("running tests/hw/validate.sh");
    let _ = std::fs::remove_dir_all(&out_dir);
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The table's rows: (check, result, detail).
fn table(stdout: &str) -> Vec<(String, String, String)> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("CHECK "))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let name = l.split_whitespace().next().unwrap_or_default().to_string();
            let rest = l[name.len()..].trim_start();
            let (result, detail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            (name, result.to_string(), detail.trim().to_string())
        })
        .collect()
}

#[test]
fn without_a_gpu_it_says_so_skips_every_check_and_exits_3() {
    let (rc, stdout, stderr) = validate_without_gpu(None);
    assert_eq!(rc, 3, "exit status without a GPU\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("NO AMD GPU"), "says there is no GPU: {stderr}");
    let rows = table(&stdout);
    let all: Vec<&str> = CHECKS.iter().flat_map(|(_, c)| c.iter().copied()).collect();
    assert_eq!(rows.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(), all, "every check listed once, in order:\n{stdout}");
    for (name, result, detail) in &rows {
        assert_eq!(result, "SKIP", "{name}: {stdout}");
        assert!(detail.starts_with("no AMD GPU"), "{name}: the reason: {detail}");
    }
    assert!(stdout.contains(&format!("0 check(s) ran, {} skipped", all.len())), "{stdout}");
}

#[test]
fn without_a_gpu_groups_not_asked_for_are_skipped_for_that_reason() {
    let (rc, stdout, stderr) = validate_without_gpu(Some("copies nodes"));
    assert_eq!(rc, 3, "stdout:\n{stdout}\nstderr:\n{stderr}");
    let rows = table(&stdout);
    for (group, checks) in CHECKS {
        let asked = matches!(*group, "copies" | "nodes");
        for c in *checks {
            let row = rows.iter().find(|r| r.0 == *c).unwrap_or_else(|| panic!("{c} not listed:\n{stdout}"));
            assert_eq!(row.1, "SKIP", "{c}");
            let want = if asked { "no AMD GPU" } else { "group not in RTL_HW_CHECKS" };
            assert!(row.2.starts_with(want), "{c}: reason {:?}, expected {want:?}", row.2);
        }
    }
}
