//! `rtl-ebpf check` (issue 16): exit codes and messages of the CLI on a hand-built graph-replay
//! trace whose occupancy, gaps and API durations are known exactly, the thresholds file, and the
//! same metrics in `summary --json`; then a traced graph replay on the ROCm simulator, whose
//! occupancy and inter-op gaps are computed from the simulator's ground truth.
use crate::{common, read_common};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use read_common::{api, link, new_trace, op, tmpdir};
use serde_json::Value;

/// GPU 0, queue 1: a plain kernel [0, 100 us), then three graph launches:
/// - hipGraphLaunch calls of 10, 40 and 3 us (mean 17.667 us, p99 40 us);
/// - nodes (queue 1) 250-300, 300-350 | 360-400, 400-450 | 600-650, 650-660 us: in the replay
///   window [250, 660) the queue's gaps are 10 us and 150 us;
/// - a plain op on queue 2 at 500-520 us.
///
/// Replay window 410 us, busy 270 us: occupancy 0.658536...; span window [0, 660 us): busy 370 us,
/// queue 1 gaps 150 (before the window), 10, 150 us.
fn graph_trace(path: &Path) -> PathBuf {
    let c = new_trace(path);
    c.execute_batch("BEGIN").unwrap();
    let us = |x: i64| x * 1000;
    let plain = api(&c, 7, 7, 0, us(1), "hipLaunchKernel", "", 1, Some(0), 0);
    let o = op(&c, 0, 1, 0, us(100), "warmup", "KernelExecution", plain);
    link(&c, plain, o);
    let g1 = api(&c, 7, 7, us(200), us(210), "hipGraphLaunch", "", 2, Some(0), 0);
    let g2 = api(&c, 7, 7, us(300), us(340), "hipGraphLaunch", "", 3, Some(0), 0);
    let g3 = api(&c, 7, 7, us(400), us(403), "hipGraphLaunch", "", 4, Some(0), 0);
    for (g, s, e) in [(g1, 250, 300), (g1, 300, 350), (g2, 360, 400), (g2, 400, 450), (g3, 600, 650), (g3, 650, 660)] {
        let o = op(&c, 0, 1, us(s), us(e), "node", "KernelExecution", g);
        link(&c, g, o);
    }
    let other = api(&c, 7, 8, us(480), us(490), "hipLaunchKernel", "", 5, Some(0), 0);
    let o = op(&c, 0, 2, us(500), us(520), "side", "KernelExecution", other);
    link(&c, other, o);
    c.execute_batch("COMMIT").unwrap();
    path.to_path_buf()
}

fn check(db: &Path, args: &[&str]) -> Output {
    Command::new(common::rtl()).arg("check").arg(db).args(args).output().unwrap()
}

/// Asserts that one line of `t` holds each of `cells`, in order, separated by column padding.
fn row(t: &str, cells: &[&str]) {
    let found = t.lines().any(|l| {
        let mut rest = l.trim_start();
        for c in cells {
            match rest.strip_prefix(c) {
                Some(r) if r.is_empty() || r.starts_with("  ") => rest = r.trim_start(),
                _ => return false,
            }
        }
        rest.is_empty()
    });
    assert!(found, "no row {cells:?} in:\n{t}");
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn passing_thresholds_exit_0_and_print_each_metric() {
    let d = tmpdir();
    let db = graph_trace(&d.path().join("g.db"));
    let o = check(
        &db,
        &["--min-occupancy", "0.65", "--max-gaps", "100us:1", "--max-mean", "hipGraphLaunch=18us", "--max-p99", "hipGraphLaunch=40us"],
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    for want in [
        "Check ",
        "(window auto)",
        "65.9%",
        ">= 65.0%",
        "1 (largest 150.00 us)",
        "<= 1",
        "17.67 us (3 calls)",
        "<= 18.00 us",
        "40.00 us (3 calls)",
        "all 5 checks passed",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    assert!(!t.contains("FAIL"), "{t}");
    row(&t, &["occupancy", "GPU 0 (replay)", "65.9%", ">= 65.0%", "pass"]);
    row(&t, &["gaps > 100.00 us", "GPU 0 queue 1", "1 (largest 150.00 us)", "<= 1", "pass"]);
    row(&t, &["mean", "hipGraphLaunch", "17.67 us (3 calls)", "<= 18.00 us", "pass"]);
    row(&t, &["p99", "hipGraphLaunch", "40.00 us (3 calls)", "<= 40.00 us", "pass"]);
    // queue 2 has one op: no gap.
    row(&t, &["gaps > 100.00 us", "GPU 0 queue 2", "0", "<= 1", "pass"]);
}

#[test]
fn each_threshold_not_met_fails_with_exit_9() {
    let d = tmpdir();
    let db = graph_trace(&d.path().join("g.db"));
    for (args, want) in [
        (vec!["--min-occupancy", "70%"], vec!["occupancy", "GPU 0 (replay)", "65.9%", ">= 70.0%", "FAIL"]),
        (vec!["--max-gaps", "100us:0"], vec!["gaps > 100.00 us", "GPU 0 queue 1", "1 (largest 150.00 us)", "<= 0", "FAIL"]),
        (vec!["--max-gaps", "5us:1"], vec!["gaps > 5.00 us", "GPU 0 queue 1", "2 (largest 150.00 us)", "<= 1", "FAIL"]),
        (
            vec!["--window", "span", "--max-gaps", "100us:1"],
            vec!["gaps > 100.00 us", "GPU 0 queue 1", "2 (largest 150.00 us)", "<= 1", "FAIL"],
        ),
        (vec!["--max-mean", "hipGraphLaunch=17us"], vec!["mean", "hipGraphLaunch", "17.67 us (3 calls)", "<= 17.00 us", "FAIL"]),
        (vec!["--max-p99", "hipGraphLaunch=39.9us"], vec!["p99", "hipGraphLaunch", "40.00 us (3 calls)", "<= 39.90 us", "FAIL"]),
        (vec!["--max-mean", "hipNoSuchApi=1ms"], vec!["mean", "hipNoSuchApi", "-", "<= 1.00 ms", "FAIL"]),
        (vec!["--window", "replay", "--min-occupancy", "0.1"], vec!["occupancy", "GPU 0 (replay)", "65.9%", ">= 10.0%", "pass"]),
    ] {
        let o = check(&db, &args);
        let t = text(&o);
        row(&t, &want);
        if args.contains(&"hipNoSuchApi=1ms") {
            assert!(t.contains("(no calls of this API in the trace)"), "{t}");
        }
        if want.last() == Some(&"pass") {
            assert_eq!(o.status.code(), Some(0), "{args:?}: {t}");
        } else {
            assert_eq!(o.status.code(), Some(9), "{args:?}: {t}");
            assert!(t.contains("1 of ") && t.contains("checks FAILED"), "{t}");
        }
    }
    // Span window: occupancy over [0, 660 us).
    let o = check(&db, &["--window", "span", "--min-occupancy", "0.56", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let j: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(j["passed"], true);
    assert_eq!(j["window"], "span");
    assert_eq!(j["checks"][0]["subject"], "GPU 0 (span)");
    assert!((j["checks"][0]["value"].as_f64().unwrap() - 370.0 / 660.0).abs() < 1e-12);
}

#[test]
fn nothing_to_measure_fails_and_bad_input_is_a_usage_error() {
    let d = tmpdir();
    let db = graph_trace(&d.path().join("g.db"));
    let o = check(&db, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("nothing to check"), "{}", text(&o));
    for (args, want) in [
        (vec!["--max-gaps", "100:5"], "has no unit"),
        (vec!["--max-gaps", "100us"], "LENGTH:COUNT"),
        (vec!["--min-occupancy", "1.2"], "outside 0..1"),
        (vec!["--max-mean", "150us"], "API=DURATION"),
        (vec!["--window", "later", "--min-occupancy", "1"], "invalid value 'later'"),
    ] {
        let o = check(&db, &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: missing {want:?} in {}", text(&o));
    }
    // An empty trace: occupancy and gaps have nothing to measure: FAIL, not pass.
    let empty = d.path().join("empty.db");
    drop(new_trace(&empty));
    let o = check(&empty, &["--min-occupancy", "0.5", "--max-gaps", "1ms:0"]);
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    assert!(text(&o).contains("(no GPU ops in this trace)") && text(&o).contains("2 of 2 checks FAILED"), "{}", text(&o));
    // Not a trace: 8.
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, "not sqlite").unwrap();
    let o = check(&junk, &["--min-occupancy", "0.5"]);
    assert_eq!(o.status.code(), Some(8), "{}", text(&o));
}

#[test]
fn thresholds_file_and_command_line_together() {
    let d = tmpdir();
    let db = graph_trace(&d.path().join("g.db"));
    let f = d.path().join("t.toml");
    std::fs::write(&f, "min_occupancy = \"60%\"\nmax_gaps = [\"100us:1\", \"5us:2\"]\n[max_mean]\nhipGraphLaunch = \"150us\"\n").unwrap();
    let o = check(&db, &["--thresholds", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("all 6 checks passed"), "{}", text(&o));
    // The command line replaces the file's value for the same gap length.
    let o = check(&db, &["--thresholds", f.to_str().unwrap(), "--max-gaps", "5us:1"]);
    assert_eq!(o.status.code(), Some(9), "{}", text(&o));
    assert!(text(&o).contains("1 of 6 checks FAILED"), "{}", text(&o));
    // Unknown keys, wrong types, a missing file, a link: usage errors (2) naming the problem.
    std::fs::write(&f, "min_ocupancy = 0.8\n").unwrap();
    let o = check(&db, &["--thresholds", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("unknown key `min_ocupancy`"), "{}", text(&o));
    std::fs::write(&f, "[max_mean]\nhipGraphLaunch = 150\n").unwrap();
    let o = check(&db, &["--thresholds", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("with its unit"), "{}", text(&o));
    let o = check(&db, &["--thresholds", d.path().join("missing.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("cannot read the thresholds"), "{}", text(&o));
    let l = d.path().join("link.toml");
    std::os::unix::fs::symlink(&f, &l).unwrap();
    let o = check(&db, &["--thresholds", l.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "a link is not followed: {}", text(&o));
}

#[test]
fn summary_json_has_the_same_metrics() {
    let d = tmpdir();
    let db = graph_trace(&d.path().join("g.db"));
    let o = Command::new(common::rtl()).args(["summary", "--json"]).arg(&db).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let s: Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &s["check_metrics"];
    assert_eq!(m["window"], "auto");
    let occ = &m["occupancy"][0];
    assert_eq!(occ["gpu"], 0);
    assert_eq!(occ["window"], "replay");
    assert_eq!(occ["first_ns"], 250_000);
    assert_eq!(occ["last_ns"], 660_000);
    assert_eq!(occ["busy_ns"], 270_000);
    assert_eq!(occ["replay_ops"], 6);
    assert!((occ["occupancy"].as_f64().unwrap() - 270.0 / 410.0).abs() < 1e-12);
    let q = &m["queue_gaps"][0];
    assert_eq!((q["queue"].as_i64(), q["ops"].as_i64(), q["gaps"].as_i64()), (Some(1), Some(7), Some(2)));
    assert_eq!(q["gaps_over_10us"], 1, "10 us is not over 10 us");
    assert_eq!(q["gaps_over_100us"], 1);
    assert_eq!(q["gaps_over_1ms"], 0);
    assert_eq!(q["largest_ns"], serde_json::json!([150_000, 10_000]));
    let api = s["apis"].as_array().unwrap().iter().find(|a| a["name"] == "hipGraphLaunch").unwrap();
    assert_eq!(api["mean_ns"], 17_666);
    assert_eq!(api["p50_ns"], 10_000);
    assert_eq!(api["p99_ns"], 40_000);
    // Idle gaps of the device (both queues): 100 -> 250 us, 520 -> 600, 450 -> 500, 350 -> 360.
    let idle: Vec<i64> = s["idle_gaps"].as_array().unwrap().iter().map(|g| g["duration_ns"].as_i64().unwrap()).collect();
    assert_eq!(idle, vec![150_000, 80_000, 50_000, 10_000]);
    // During 100-250 us the CPU was in two hipGraphLaunch calls (200-210 us: 10 us of overlap).
    let g0 = &s["idle_gaps"][0];
    assert_eq!(g0["in_flight"], serde_json::json!([{"api": "hipGraphLaunch", "calls": 1, "overlap_ns": 10_000}]));
    // 450-500 us: hipLaunchKernel 480-490 us.
    assert_eq!(s["idle_gaps"][2]["in_flight"][0]["api"], "hipLaunchKernel");
    assert_eq!(s["idle_gaps"][2]["in_flight"][0]["overlap_ns"], 10_000);
}

/// The simulator's truth: per GPU the ops (start, end, queue, caused by a graph launch).
fn truth_ops(truth: &[Value]) -> std::collections::BTreeMap<i64, Vec<(i64, i64, i64, bool)>> {
    let mut m: std::collections::BTreeMap<i64, Vec<(i64, i64, i64, bool)>> = Default::default();
    for o in truth.iter().filter(|v| v["type"] == "op") {
        let (s, e) = (o["start"].as_i64().unwrap(), o["end"].as_i64().unwrap());
        m.entry(o["gpu"].as_i64().unwrap()).or_default().push((s, e, o["queue"].as_i64().unwrap(), o["api"] == "hipGraphLaunch"));
    }
    for v in m.values_mut() {
        v.sort();
    }
    m
}

#[test]
fn graph_replay_on_the_simulator_matches_its_ground_truth() {
    common::require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("replay.db"), d.path().join("truth.jsonl"));
    // Two streams alternate replays of a 40-node graph of 1 us kernels: a replay (40 us) is
    // done before the host has made the next launch on that stream, so each queue waits for the
    // host between replays (gaps whose lengths the truth records). No copies.
    let out = Command::new(common::rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "env"])
        .arg(format!("ROCM_SIM_TRUTH={}", tr.display()))
        .arg("ROCM_SIM_KERNEL_DEFAULT_NS=1000")
        .arg(common::workload("graph_replay"))
        .args(["--nodes", "40", "--replays", "6", "--copy-every", "0"])
        .env("LD_LIBRARY_PATH", common::sim_lib())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let truth = common::truth(&tr);
    let by_gpu = truth_ops(&truth);
    assert!(!by_gpu.is_empty(), "the simulator ran no op");

    let s = Command::new(common::rtl()).args(["summary", "--json", "--top", "0"]).arg(&db).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let s: Value = serde_json::from_slice(&s.stdout).unwrap();
    let m = &s["check_metrics"];
    for (gpu, ops) in &by_gpu {
        // Expected, by the documented definitions, from the truth.
        let replay: Vec<_> = ops.iter().filter(|o| o.3).collect();
        assert!(!replay.is_empty(), "GPU {gpu}: no replay ops in the truth");
        let (lo, hi) = (replay.iter().map(|o| o.0).min().unwrap(), replay.iter().map(|o| o.1).max().unwrap());
        let mut busy = 0;
        let mut run = i64::MIN;
        for o in ops.iter().filter(|o| o.1 > o.0) {
            let (s, e) = (o.0.max(lo).max(run), o.1.min(hi));
            if e > s {
                busy += e - s;
            }
            run = run.max(o.1.min(hi));
        }
        let occ = m["occupancy"].as_array().unwrap().iter().find(|o| o["gpu"] == *gpu).unwrap();
        assert_eq!(occ["window"], "replay");
        assert_eq!(occ["replay_ops"].as_i64().unwrap(), replay.len() as i64, "GPU {gpu}: ops linked to hipGraphLaunch");
        // The trace's GPU times are the truth's shifted by the clock conversion (a few ns).
        assert!(
            (occ["first_ns"].as_i64().unwrap() - lo).abs() <= 10 && (occ["last_ns"].as_i64().unwrap() - hi).abs() <= 10,
            "{occ} vs {lo}..{hi}"
        );
        assert!((occ["window_ns"].as_i64().unwrap() - (hi - lo)).abs() <= 2, "{occ} vs {lo}..{hi}");
        assert!((occ["busy_ns"].as_i64().unwrap() - busy).abs() <= 2 * ops.len() as i64, "GPU {gpu}: busy {occ} vs truth {busy}");
        let want_occ = busy as f64 / (hi - lo) as f64;
        assert!((occ["occupancy"].as_f64().unwrap() - want_occ).abs() < 1e-4, "{occ} vs {want_occ}");

        // Per queue: the gaps in the window (queues compared as a multiset: the trace numbers
        // hardware queues its own way). Times in the trace may differ from the truth's by a
        // nanosecond or two (clock conversion), so counts are compared over thresholds far
        // from any gap: half the longest gap, and 1 us.
        let mut queues: std::collections::BTreeMap<i64, Vec<(i64, i64)>> = Default::default();
        for o in ops {
            queues.entry(o.2).or_default().push((o.0, o.1));
        }
        let want: Vec<Vec<i64>> = queues
            .values()
            .map(|q| {
                let mut gaps = vec![];
                let mut run: Option<i64> = None;
                for &(s, e) in q.iter().filter(|o| o.1 > o.0) {
                    if let Some(r) = run {
                        if s > r && r >= lo && s <= hi {
                            gaps.push(s - r);
                        }
                    }
                    run = Some(run.map_or(e, |r| r.max(e)));
                }
                gaps
            })
            .collect();
        let longest = want.iter().flatten().copied().max().unwrap_or(0);
        assert!(longest > 2_000, "GPU {gpu}: the workload made no gap between replays: {want:?}");
        let half = longest / 2;
        let over = |g: &Vec<i64>, t: i64| g.iter().filter(|&&x| x > t).count() as i64;
        let mut want_counts: Vec<(i64, i64)> = want.iter().map(|g| (over(g, 1_000), over(g, half))).collect();
        let mut got: Vec<(i64, i64)> = vec![];
        let queues_json: Vec<&Value> = m["queue_gaps"].as_array().unwrap().iter().filter(|q| q["gpu"] == *gpu).collect();
        // Count over 1 us and over `half` through `check`'s own counting (exact thresholds).
        let o = check(&db, &["--json", "--max-gaps", "1us:0", "--max-gaps", &format!("{half}ns:0")]);
        let j: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
        let rows = j["checks"].as_array().unwrap();
        for q in &queues_json {
            let subject = format!("GPU {gpu} queue {}", q["queue"]);
            let count = |first: bool| {
                let r = rows.iter().find(|r| r["subject"] == subject.as_str() && (r["metric"] == "gaps > 1.00 us") == first).unwrap();
                r["value"].as_f64().unwrap() as i64
            };
            got.push((count(true), count(false)));
        }
        got.sort();
        want_counts.sort();
        assert_eq!(got, want_counts, "GPU {gpu}: per queue (gaps over 1 us, over {half} ns)");

        // check against thresholds either side of the truth's values.
        let max_half = want_counts.iter().map(|c| c.1).max().unwrap();
        assert!(max_half >= 1);
        let under = format!("{:.4}", (want_occ - 0.001).max(0.0));
        let o = check(&db, &["--min-occupancy", &under, "--max-gaps", &format!("{half}ns:{max_half}")]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let o = check(&db, &["--max-gaps", &format!("{half}ns:{}", max_half - 1)]);
        assert_eq!(o.status.code(), Some(9), "{}", text(&o));
        if want_occ < 0.999 {
            let over = format!("{:.4}", want_occ + 0.001);
            let o = check(&db, &["--min-occupancy", &over]);
            assert_eq!(o.status.code(), Some(9), "{}", text(&o));
        }
    }
    // hipGraphLaunch as traced: each call's probes fire outside the simulator's own clock reads,
    // so the traced durations are at least the truth's; check's thresholds bite at the exact
    // mean and p99 the summary reports.
    let mut launches: Vec<i64> = truth
        .iter()
        .filter(|v| v["type"] == "api" && v["name"] == "hipGraphLaunch")
        .map(|v| v["end"].as_i64().unwrap() - v["start"].as_i64().unwrap())
        .collect();
    launches.sort();
    assert_eq!(launches.len(), 6);
    let api = s["apis"].as_array().unwrap().iter().find(|a| a["name"] == "hipGraphLaunch").unwrap();
    assert_eq!(api["calls"], 6);
    let (mean, p99) = (api["mean_ns"].as_i64().unwrap(), api["p99_ns"].as_i64().unwrap());
    assert!(api["min_ns"].as_i64().unwrap() >= launches[0], "{api} vs truth {launches:?}");
    assert!(mean >= launches.iter().sum::<i64>() / 6 && p99 >= launches[5], "{api} vs truth {launches:?}");
    let o = check(&db, &["--max-mean", &format!("hipGraphLaunch={mean}ns"), "--max-p99", &format!("hipGraphLaunch={p99}ns")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for t in [format!("--max-mean=hipGraphLaunch={}ns", mean - 1), format!("--max-p99=hipGraphLaunch={}ns", p99 - 1)] {
        let o = check(&db, &[t.as_str()]);
        assert_eq!(o.status.code(), Some(9), "{t}: {}", text(&o));
    }
}
