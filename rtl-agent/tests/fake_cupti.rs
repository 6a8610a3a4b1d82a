//! The CUPTI source live, on a fake libcupti (tests/fixtures/fakecupti.c): which activity kinds
//! the agent enables and what it publishes for one graph launch and one eager launch. By
//! default one graph-level record per launch (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`: one
//! GraphExecution op, no node records); `RTL_AGENT_GRAPH_NODES=1` (`run --graph-nodes`): the
//! nodes; a CUPTI that refuses graph-level records: the nodes, and the agent says so.
use crate::common;
use common::*;
use rtl_common::agent::{self as wire, OpKind};
use std::path::PathBuf;
use std::process::Command;

const GRAPH_TRACE: &str = "51";

struct Fake {
    dir: PathBuf,
    lib: PathBuf,
    app: PathBuf,
}

fn build(name: &str) -> Fake {
    let dir = scratch(name);
    let fx = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let lib = dir.join("libcupti.so.13");
    sh(Command::new("cc").args(["-O2", "-shared", "-fPIC", "-o"]).arg(&lib).arg(fx.join("fakecupti.c")).arg("-lpthread"));
    let app = dir.join("cuptiapp");
    sh(Command::new("cc").args(["-O2", "-o"]).arg(&app).arg(fx.join("cuptiapp.c")).arg("-ldl"));
    Fake { dir, lib, app }
}

/// Runs the app with the agent; returns what it published, the kinds enabled (kind, rc) and stderr.
fn run(f: &Fake, tag: &str, env: &[(&str, &str)]) -> (Proc, Vec<(String, String)>, String) {
    let (dump, log) = (f.dir.join(format!("{tag}.dump")), f.dir.join(format!("{tag}.log")));
    let agent = agent_so();
    let mut c = Command::new(&f.app);
    c.env("LD_PRELOAD", &agent)
        .env("CUDA_INJECTION64_PATH", &agent)
        .env("RTL_AGENT_GPU", "cupti")
        .env("RTL_AGENT_CUPTI_LIB", &f.lib)
        .env("RTL_AGENT_DUMP", &dump)
        .env("FAKE_CUPTI_LOG", &log)
        .env_remove("RTL_AGENT_QUIET")
        .env_remove("RTL_AGENT_GRAPH_NODES")
        .env_remove("RTL_AGENT_HSA_BATCHES");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = sh(&mut c);
    assert!(String::from_utf8_lossy(&out.stdout).contains("cuptiapp done"));
    let mut procs = read_dump(&dump);
    assert_eq!(procs.len(), 1, "one process published");
    let p = procs.drain().next().unwrap().1;
    let enabled = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w[1].to_string(), w[2].to_string())
        })
        .collect();
    (p, enabled, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn captures(p: &Proc) -> u32 {
    p.infos.last().map_or(0, |i| i.captures)
}

/// The eager launch, the same in every mode: one kernel linked to cuLaunchKernel.
fn check_eager(p: &Proc) {
    let k: Vec<_> = p.ops.iter().filter(|o| o.record_index == 8).collect();
    assert_eq!(k.len(), 1, "{:?}", p.ops);
    assert_eq!(k[0].op, OpKind::Dispatch as u8);
    assert_eq!(k[0].flags & wire::OP_IS_GRAPH, 0);
    assert_eq!(p.strings[&k[0].api_name_id], "cuLaunchKernel");
    assert_eq!(p.strings[&k[0].kernel_name_id], "_Z5eagerPf");
    assert_eq!(k[0].gpu_end_ns - k[0].gpu_begin_ns, 400);
}

#[test]
fn graph_level_by_default_nodes_when_asked_or_refused() {
    let f = build("fake-cupti");

    // Default: GRAPH_TRACE enabled, one GraphExecution op spanning the nodes, linked to its call.
    let (p, enabled, _) = run(&f, "default", &[]);
    assert!(enabled.contains(&(GRAPH_TRACE.to_string(), "0".to_string())), "{enabled:?}");
    assert_eq!(p.ops.len(), 2, "{:?}", p.ops);
    let g: Vec<_> = p.ops.iter().filter(|o| o.op == OpKind::GraphExecution as u8).collect();
    assert_eq!(g.len(), 1);
    let g = g[0];
    assert_eq!(g.record_index, 7);
    assert_eq!(g.gpu_end_ns - g.gpu_begin_ns, 2 * 600 + 500, "first node's start to last node's end");
    assert!(g.flags & wire::OP_IS_GRAPH != 0 && g.flags & wire::OP_HAS_CPU_TIMES != 0 && g.flags & wire::OP_TID_KNOWN != 0);
    assert_eq!(g.cpu_end_ns - g.cpu_start_ns, 1000);
    assert_eq!(p.strings[&g.api_name_id], "cuGraphLaunch");
    check_eager(&p);
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_SPANS != 0 && c & wire::CAP_GRAPH_NODES == 0, "{c:#x}");

    // --graph-nodes: GRAPH_TRACE never enabled, the three nodes on the launch's call.
    let (p, enabled, _) = run(&f, "nodes", &[("RTL_AGENT_GRAPH_NODES", "1")]);
    assert!(!enabled.iter().any(|(k, _)| k == GRAPH_TRACE), "{enabled:?}");
    let n: Vec<_> = p.ops.iter().filter(|o| o.record_index == 7).collect();
    assert_eq!(n.len(), 3, "{:?}", p.ops);
    assert!(n.iter().all(|o| o.op == OpKind::Dispatch as u8 && o.flags & wire::OP_IS_GRAPH != 0));
    assert!(n.iter().all(|o| p.strings[&o.api_name_id] == "cuGraphLaunch" && p.strings[&o.kernel_name_id] == "_Z4nodePf"));
    assert!(!p.ops.iter().any(|o| o.op == OpKind::GraphExecution as u8));
    check_eager(&p);
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_NODES != 0 && c & wire::CAP_GRAPH_SPANS == 0, "{c:#x}");

    // A CUPTI that refuses graph-level records: the nodes, said once.
    let (p, enabled, stderr) = run(&f, "refused", &[("FAKE_CUPTI_NO_GRAPH_TRACE", "1")]);
    assert!(enabled.contains(&(GRAPH_TRACE.to_string(), "22".to_string())), "{enabled:?}");
    assert_eq!(p.ops.iter().filter(|o| o.record_index == 7 && o.op == OpKind::Dispatch as u8).count(), 3);
    assert!(stderr.contains("refuses graph-level records"), "{stderr}");
    let c = captures(&p);
    assert!(c & wire::CAP_GRAPH_NODES != 0 && c & wire::CAP_GRAPH_SPANS == 0, "{c:#x}");
}
