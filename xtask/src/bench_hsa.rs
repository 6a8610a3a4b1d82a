//! HSA capture's cost on the ROCm simulator (docs/benchmarks.md, "HSA capture"), issue 14.
//!
//! `hsa-copy`: 64 KiB host-to-device `hipMemcpyAsync`s on one stream, a synchronize every 100
//!   (`rtl-agent/bench/hsa_cost.hip copy`): wall time per copy and copies per second untraced,
//!   with the agent alone (HSA capture: copies on the application's own completion signal, the
//!   default, and `RTL_AGENT_HSA_COPIES=forward`, the agent's signal forwarded by its thread as
//!   before), and under `rtl-ebpf run --gpu none` (the probes alone) and `--gpu hsa` (collector
//!   attached).
//! `hsa-replay`: a graph of 100 kernels of 5 us replayed (`hsa_cost replay`), each launch then
//!   synchronised, with the simulator's ground truth on: per replay the latency on the
//!   simulator's timing model (from the hipGraphLaunch call's start to its last node's end, and
//!   the replay's own GPU span, first node start to last node end), the wall latency launch to
//!   synchronize returned, and the time inside hipGraphLaunch; untraced, HSA capture without
//!   replay spans (`RTL_AGENT_HSA_SPANS=0`), with them (the default), with per-node timing
//!   (`--graph-nodes`); the spans' effect is the default against no spans and against untraced.
//!
//! Configurations run interleaved, ROUNDS rounds (default 7, `RTL_BENCH_ROUNDS`), medians of
//! the rounds' medians. Needs hipcc and the simulator's sources (built into target/).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::util::{cmd, root};

struct Setup {
    sim_lib: PathBuf,
    hsa_cost: PathBuf,
    agent: PathBuf,
    collector: PathBuf,
    dir: PathBuf,
}

/// Builds the simulator (as committed), the agent, the collector and the workload.
fn setup() -> Result<Setup> {
    let r = root();
    let sim = cmd("sh").arg(r.join("rtl-agent/bench/build_sim.sh")).arg("sim-only").output()?;
    let sim_lib = PathBuf::from(sim.trim()).join("rocm-sim/lib");
    cmd("cargo").args(["build", "--release", "--ignore-rust-version", "-q", "-p", "rtl-agent", "-p", "rtl-user"]).current_dir(&r).run()?;
    let dir = r.join("target/rtl-agent-bench");
    std::fs::create_dir_all(&dir)?;
    // A private copy of the agent: a collector attached to target/release (another session's
    // --all) would add its probe cost to ours.
    let agent = dir.join("librtl_agent_hsa.so");
    std::fs::copy(r.join("target/release/librtl_agent.so"), &agent).context("copying the agent")?;
    let hsa_cost = dir.join("hsa_cost");
    let src = r.join("rtl-agent/bench/hsa_cost.hip");
    let stale = match (std::fs::metadata(&hsa_cost), std::fs::metadata(&src)) {
        (Ok(b), Ok(s)) => b.modified()? < s.modified()?,
        _ => true,
    };
    if stale {
        cmd("hipcc").args(["--offload-arch=gfx90a", "-O2"]).arg(&src).arg("-o").arg(&hsa_cost).run()?;
    }
    Ok(Setup { sim_lib, hsa_cost, agent, collector: r.join("target/release/rtl-ebpf"), dir })
}

/// One way of running the workload.
struct Config {
    name: &'static str,
    /// Agent variables (HSA_TOOLS_LIB + LD_PRELOAD set when `agent`).
    env: &'static [(&'static str, &'static str)],
    agent: bool,
    /// Under `rtl-ebpf run` with these options (`--gpu ...`).
    run: Option<&'static [&'static str]>,
}

impl Config {
    const fn new(name: &'static str, agent: bool, env: &'static [(&'static str, &'static str)]) -> Config {
        Config { name, env, agent, run: None }
    }
}

/// Runs `hsa_cost ARGS` under `c`; returns its stdout. `truth`: the simulator's ground truth file.
fn run_one(s: &Setup, c: &Config, args: &[String], truth: Option<&Path>) -> Result<String> {
    let mut k = match c.run {
        Some(opts) => {
            let db = s.dir.join("bench-trace.db");
            let _ = std::fs::remove_file(&db);
            cmd(s.collector.to_str().context("path")?)
                .args(["run", "-q", "--agent"])
                .arg(&s.agent)
                .arg("-o")
                .arg(&db)
                .args(opts)
                .arg("--")
                .arg(&s.hsa_cost)
        }
        None => cmd(s.hsa_cost.to_str().context("path")?),
    };
    k = k.args(args).env("LD_LIBRARY_PATH", &s.sim_lib).env("ROCM_SIM_PROFILER", "none").env("ROCM_SIM_KERNEL_DEFAULT_NS", "5000");
    if c.agent {
        k = k.env("LD_PRELOAD", &s.agent).env("HSA_TOOLS_LIB", &s.agent).env("RTL_AGENT_GPU", "hsa");
    }
    if c.agent || c.run.is_some() {
        k = k.env("RTL_AGENT_QUIET", "1");
    }
    for (n, v) in c.env {
        k = k.env(n, v);
    }
    if let Some(t) = truth {
        let _ = std::fs::remove_file(t);
        k = k.env("ROCM_SIM_TRUTH", t);
    }
    k.output().with_context(|| format!("hsa_cost under {}", c.name))
}

/// The numbers of hsa_cost's result line (the last line of five numbers).
fn figures(out: &str) -> Result<Vec<f64>> {
    out.lines()
        .rev()
        .find_map(|l| {
            let v: Vec<f64> = l.split_whitespace().filter_map(|w| w.parse().ok()).collect();
            (v.len() == 5).then_some(v)
        })
        .with_context(|| format!("no result line in {out:?}"))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rounds() -> usize {
    std::env::var("RTL_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(7)
}

fn pct(v: f64, base: f64) -> String {
    if base == 0.0 || !base.is_finite() {
        return "n/a".into();
    }
    format!("{:+.2} %", (v - base) * 100.0 / base)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split_whitespace().next().unwrap_or("?").to_string()
}

pub fn copy() -> Result<()> {
    let s = setup()?;
    let n = 3000;
    let configs = [
        Config::new("untraced", false, &[]),
        Config::new("agent, HSA capture (copies on the application's signal)", true, &[]),
        Config::new("agent, HSA capture, RTL_AGENT_HSA_COPIES=forward (before)", true, &[("RTL_AGENT_HSA_COPIES", "forward")]),
        Config { name: "rtl-ebpf run --gpu none (probes only)", env: &[], agent: false, run: Some(&["--gpu", "none"]) },
        Config { name: "rtl-ebpf run --gpu hsa", env: &[], agent: false, run: Some(&["--gpu", "hsa"]) },
    ];
    let args: Vec<String> = ["copy".to_string(), n.to_string(), "65536".to_string()].to_vec();
    let mut res: Vec<Vec<Vec<f64>>> = vec![Vec::new(); configs.len()];
    let rounds = rounds();
    for _ in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            res[i].push(figures(&run_one(&s, c, &args, None)?)?);
        }
    }
    let med = |i: usize, f: usize| median(res[i].iter().map(|v| v[f]).collect());
    println!(
        "hsa-copy: {n} hipMemcpyAsync of 64 KiB host->device on one stream (a synchronize every 100), simulator, \
         {} CPUs, load {}, {rounds} rounds interleaved, medians:",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load()
    );
    println!("  {:<60} {:>12} {:>10} {:>12} {:>14} {:>14}", "", "us/copy", "copies/s", "vs untraced", "us in call", "agent CPU us");
    let base = med(0, 2);
    for (i, c) in configs.iter().enumerate() {
        let wall = med(i, 2);
        println!(
            "  {:<60} {:>12.1} {:>10.0} {:>12} {:>14.2} {:>14.2}",
            c.name,
            wall / 1e3,
            1e9 / wall,
            format!("x{:.2}", wall / base),
            med(i, 0) / 1e3,
            med(i, 4) / 1e3
        );
    }
    Ok(())
}

/// A JSON line's unsigned number field `"key":N` (the truth's flat objects).
fn field(line: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\":");
    let i = line.find(&pat)? + pat.len();
    line[i..].chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()
}

/// Per measured replay (the last `n` of the truth): (launch call start -> last node end, first
/// node start -> last node end, launch call start -> first node start), ns on the simulator's
/// clock.
fn truth_replays(truth: &Path, n: usize) -> Result<Vec<(f64, f64, f64)>> {
    let text = std::fs::read_to_string(truth).with_context(|| format!("reading {}", truth.display()))?;
    let mut launch: HashMap<(u64, u64), u64> = HashMap::new();
    let mut spans = Vec::new();
    for l in text.lines() {
        let pid = field(l, "pid").unwrap_or(0);
        if l.contains("\"type\":\"api\"") && l.contains("\"name\":\"hipGraphLaunch\"") {
            if let (Some(seq), Some(start)) = (field(l, "seq"), field(l, "start")) {
                launch.insert((pid, seq), start);
            }
        } else if l.contains("\"type\":\"replay\"") {
            if let (Some(seq), Some(start), Some(end)) = (field(l, "api_seq"), field(l, "start"), field(l, "end")) {
                spans.push((pid, seq, start, end));
            }
        }
    }
    spans.sort_by_key(|s| s.1);
    if spans.len() < n {
        bail!("{} replays in the truth, expected at least {n}", spans.len());
    }
    spans[spans.len() - n..]
        .iter()
        .map(|&(pid, seq, start, end)| {
            let l = launch.get(&(pid, seq)).with_context(|| format!("no hipGraphLaunch seq {seq} in the truth"))?;
            Ok(((end - l) as f64, (end - start) as f64, start.saturating_sub(*l) as f64))
        })
        .collect()
}

pub fn replay() -> Result<()> {
    let s = setup()?;
    let (n, nodes) = (200usize, 100usize);
    let configs = [
        Config::new("untraced", false, &[]),
        Config::new("agent, HSA capture, no replay spans (RTL_AGENT_HSA_SPANS=0)", true, &[("RTL_AGENT_HSA_SPANS", "0")]),
        Config::new("agent, HSA capture (one span per replay, the default)", true, &[]),
        Config::new("agent, HSA capture, every node (--graph-nodes)", true, &[("RTL_AGENT_GRAPH_NODES", "1")]),
        Config { name: "rtl-ebpf run --gpu hsa", env: &[], agent: false, run: Some(&["--gpu", "hsa"]) },
        Config { name: "rtl-ebpf run --gpu hsa --graph-nodes", env: &[], agent: false, run: Some(&["--gpu", "hsa", "--graph-nodes"]) },
    ];
    let args: Vec<String> = ["replay".to_string(), n.to_string(), nodes.to_string()].to_vec();
    let truth = s.dir.join("replay-truth.jsonl");
    // Per config and round: [model latency median, model p10, gpu span median, wall median,
    // wall p10, in-call median, agent CPU per replay, launch -> first node median, its p10].
    let mut res: Vec<Vec<[f64; 9]>> = vec![Vec::new(); configs.len()];
    let rounds = rounds();
    for _ in 0..rounds {
        for (i, c) in configs.iter().enumerate() {
            let f = figures(&run_one(&s, c, &args, Some(&truth))?)?;
            let t = truth_replays(&truth, n)?;
            let mut lat: Vec<f64> = t.iter().map(|x| x.0).collect();
            lat.sort_by(f64::total_cmp);
            let p10 = lat[lat.len() / 10];
            let mut first: Vec<f64> = t.iter().map(|x| x.2).collect();
            first.sort_by(f64::total_cmp);
            let first_p10 = first[first.len() / 10];
            res[i].push([median(lat), p10, median(t.iter().map(|x| x.1).collect()), f[0], f[1], f[2], f[4], median(first), first_p10]);
        }
    }
    let _ = std::fs::remove_file(&truth);
    let med = |i: usize, k: usize| median(res[i].iter().map(|v| v[k]).collect());
    println!(
        "hsa-replay: {n} replays of a {nodes}-kernel graph (5 us per kernel: {} us of GPU work), hipGraphLaunch then \
         hipStreamSynchronize, simulator with ground truth, {} CPUs, load {}, {rounds} rounds interleaved, medians:",
        nodes * 5,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load()
    );
    println!(
        "  {:<62} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "", "model us", "model p10", "GPU span", "to 1st", "1st p10", "wall us", "wall p10", "in call", "agent CPU"
    );
    for (i, c) in configs.iter().enumerate() {
        println!(
            "  {:<62} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>9.2} {:>9.1}",
            c.name,
            med(i, 0) / 1e3,
            med(i, 1) / 1e3,
            med(i, 2) / 1e3,
            med(i, 7) / 1e3,
            med(i, 8) / 1e3,
            med(i, 3) / 1e3,
            med(i, 4) / 1e3,
            med(i, 5) / 1e3,
            med(i, 6) / 1e3
        );
    }
    println!(
        "  (model: hipGraphLaunch's start to the replay's last node's end on the simulator's timing model; GPU span: first node \
         start to last node end; to 1st: hipGraphLaunch's start to the first node's start, where the span's leading barrier sits)"
    );
    for (label, k) in [
        ("model latency, median", 0),
        ("model latency, p10", 1),
        ("launch to first node, median", 7),
        ("launch to first node, p10", 8),
        ("wall latency, median", 3),
        ("wall latency, p10", 4),
    ] {
        println!(
            "  replay spans' effect on {label}: {} vs no spans, {} vs untraced; per-node timing: {} vs untraced",
            pct(med(2, k), med(1, k)),
            pct(med(2, k), med(0, k)),
            pct(med(3, k), med(0, k))
        );
    }
    Ok(())
}
