//! The agent on the ROCm simulator (tests/rocm-sim, another engineer's): every GPU op of the
//! simulator's ground truth (ROCM_SIM_TRUTH) must be in what the agent published
//! (RTL_AGENT_DUMP, decoded with rtl-common's decoder) with exact GPU times, device, queue,
//! kernel name, grid/block, bytes and copy kind, linked to the right API call (CPU times, API
//! name, 64-bit thread hash), and nothing else may be there.
//!
//! Builds the committed tests/rocm-sim and tests/workloads into target/rtl-agent-sim
//! (rtl-agent/bench/build_sim.sh; needs gcc, g++, hipcc).
//!
//! Here the set-up and one run of a workload (`truth.rs` reads the simulator's truth); the
//! checks and tests per GPU source: `clr.rs` (hipProfiler*Ext), `hsa.rs` (HSA signal capture).

mod clr;
mod hsa;
mod truth;

use crate::common;
use common::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Once;
use truth::{parse_line, Obj};

// ---- set-up ----
// The simulator and workloads, as committed, built into target/rtl-agent-sim by
// rtl-agent/bench/build_sim.sh (their owners rebuild tests/*/build at any time).
fn own_build() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().parent().unwrap().join("rtl-agent-sim")
}
fn sim_lib() -> PathBuf {
    own_build().join("rocm-sim/lib")
}
fn workload(name: &str) -> PathBuf {
    own_build().join("workloads").join(name)
}

fn ensure_built() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        sh(Command::new("sh").arg(repo_root().join("rtl-agent/bench/build_sim.sh")));
    });
}

struct Run {
    truth: Vec<Obj>,
    procs: HashMap<u32, Proc>,
    stderr: String,
}

fn run(name: &str, prog: &str, args: &[&str], env: &[(&str, &str)]) -> Run {
    run_with(name, &workload(prog), args, env, true)
}

fn run_with(name: &str, prog: &std::path::Path, args: &[&str], env: &[(&str, &str)], preload: bool) -> Run {
    ensure_built();
    let dir = scratch(name);
    let (truth, dump) = (dir.join("truth.jsonl"), dir.join("agent.dump"));
    // Bounded: a hang (an original completion signal never forwarded, a wedged exit) fails
    // the test instead of blocking it.
    let mut c = Command::new("timeout");
    c.arg("-k").arg("5").arg("120").arg(prog);
    if preload {
        c.env("LD_PRELOAD", agent_so());
    }
    c.args(args)
        .env("LD_LIBRARY_PATH", sim_lib())
        .env("ROCM_SIM_TRUTH", &truth)
        .env("RTL_AGENT_DUMP", &dump)
        .env_remove("RTL_AGENT_QUIET")
        .env_remove("GPU_CLR_PROFILE_OUTPUT");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = sh(&mut c);
    let truth = std::fs::read_to_string(&truth).unwrap().lines().map(parse_line).collect();
    Run { truth, procs: read_dump(&dump), stderr: String::from_utf8_lossy(&out.stderr).into_owned() }
}
