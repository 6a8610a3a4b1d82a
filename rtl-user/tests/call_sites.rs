//! Call sites (`--stacks`, issue 17) on the ROCm simulator: tests/workloads/call_sites makes
//! its HIP calls from known functions (A, B, C, a graph captured in G and replayed from
//! `replay`); every call's recorded site (innermost user frame) must be that function, and every
//! replayed graph node must be linked to the call in G that created it, in capture order.
//! `call_sites` is built without frame pointers (the `.eh_frame` route must be right there);
//! `call_sites_fp` with them (where the frame-pointer route is right too).

use crate::common;

use std::collections::BTreeMap;

use common::*;
use rusqlite::Connection;

const REPS: usize = 7;
const REPLAYS: usize = 4;

/// (API, site function) -> calls, from the trace.
fn sites(c: &Connection) -> BTreeMap<(String, String), usize> {
    let mut st = c
        .prepare(
            "SELECT a.apiName, coalesce(f.symbol, '?') FROM api a JOIN rtl_api_stack s ON s.api_id = a.id \
             JOIN rtl_stack st ON st.id = s.stack_id LEFT JOIN rtl_frame f ON f.id = st.site_frame_id",
        )
        .unwrap();
    let mut m = BTreeMap::new();
    for r in st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))).unwrap() {
        let (api, sym) = r.unwrap();
        // "A()" -> "A", "replay(hipGraphExec*, int)" -> "replay"
        let f = sym.split('(').next().unwrap_or("").to_string();
        *m.entry((api, f)).or_insert(0) += 1;
    }
    m
}

fn expected() -> BTreeMap<(String, String), usize> {
    let mut m = BTreeMap::new();
    let mut put = |api: &str, f: &str, n: usize| {
        *m.entry((api.to_string(), f.to_string())).or_insert(0) += n;
    };
    put("hipLaunchKernel", "A", REPS);
    put("hipLaunchKernel", "B", REPS);
    put("hipMemsetAsync", "B", REPS);
    put("hipLaunchKernel", "C", REPS);
    put("hipMemcpyAsync", "C", REPS);
    put("hipStreamBeginCapture", "G", 1);
    put("hipLaunchKernel", "G", 3);
    put("hipMemcpyAsync", "G", 1);
    put("hipStreamEndCapture", "G", 1);
    put("hipGraphInstantiate", "G", 1);
    put("hipGraphLaunch", "replay", REPLAYS);
    m
}

fn trace(workload_name: &str, mode: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let lib = sim_lib();
    let wl = workload(workload_name);
    let (reps, replays) = (REPS.to_string(), REPLAYS.to_string());
    let out = std::process::Command::new(rtl())
        .args(["run", "--quiet", "--stacks", mode, "-o"])
        .arg(&db)
        .arg("--")
        .arg(&wl)
        .args(["--reps", &reps, "--replays", &replays])
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{workload_name}: {}", String::from_utf8_lossy(&out.stderr));
    (d, db)
}

fn check_sites(workload_name: &str, mode: &str) {
    let (_d, db) = trace(workload_name, mode);
    let c = Connection::open(&db).unwrap();
    assert_eq!(sites(&c), expected(), "{workload_name} --stacks {mode}: (API, site) -> calls");
    // Every probed launch-family call has its stack: none lost, none without its call.
    assert_eq!(meta(&db, "stacks_lost_in_probe").as_deref(), Some("0"));
    assert_eq!(meta(&db, "stacks_without_call").as_deref(), Some("0"));
    // De-duplicated: one row per distinct stack and frame, fewer than the calls.
    let (stacks, calls): (i64, i64) = c
        .query_row("SELECT (SELECT count(*) FROM rtl_stack), (SELECT count(*) FROM rtl_api_stack)", [], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap();
    assert!(stacks < calls, "{stacks} stacks for {calls} calls");
    let dup: i64 = c
        .query_row("SELECT count(*) FROM (SELECT module, address FROM rtl_frame GROUP BY module, address HAVING count(*) > 1)", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(dup, 0, "a frame written twice");
}

/// The graph: one capture of 4 nodes in G's order, every launch linked to it, every replayed
/// node's GPU op linked to the call that created it.
fn check_graph(workload_name: &str) {
    let (_d, db) = trace(workload_name, "dwarf");
    let c = Connection::open(&db).unwrap();
    let nodes: Vec<String> = c
        .prepare(
            "SELECT a.apiName || ':' || coalesce(k.kernelName, '') FROM rtl_capture_call cc JOIN api a ON a.id = cc.api_id \
             LEFT JOIN kernel k ON k.id = a.id ORDER BY cc.capture_id, cc.node",
        )
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        nodes,
        ["hipLaunchKernel:kernel_g1(float*)", "hipLaunchKernel:kernel_g2(float*)", "hipMemcpyAsync:", "hipLaunchKernel:kernel_g3(float*)"],
        "the captured calls in node order"
    );
    let launches: i64 = c.query_row("SELECT count(*) FROM rtl_graph_launch", [], |r| r.get(0)).unwrap();
    assert_eq!(launches, REPLAYS as i64);
    // Replayed nodes: every GPU op of a graph launch, linked to its node's call, sited in G.
    let rows: Vec<(String, String, Option<String>, Option<String>)> = c
        .prepare(
            "SELECT o.opType, o.description, ka.kernelName, f.symbol FROM op o JOIN rocpd_api_ops l ON l.op_id = o.id \
             JOIN rtl_graph_launch g ON g.api_id = l.api_id LEFT JOIN rtl_op_site s ON s.op_id = o.id \
             LEFT JOIN kernel ka ON ka.id = s.api_id LEFT JOIN rtl_api_stack x ON x.api_id = s.api_id \
             LEFT JOIN rtl_stack st ON st.id = x.stack_id LEFT JOIN rtl_frame f ON f.id = st.site_frame_id",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 4 * REPLAYS, "replayed node ops: {rows:?}");
    for (ty, desc, kernel_of_site, site) in &rows {
        assert_eq!(site.as_deref(), Some("G()"), "{ty} {desc}: not attributed to G");
        if ty == "KernelExecution" {
            assert_eq!(kernel_of_site.as_deref(), Some(desc.as_str()), "a replayed kernel linked to another node's launch");
        }
    }
}

#[test]
fn every_site_right_without_frame_pointers() {
    check_sites("call_sites", "dwarf");
}

#[test]
fn every_site_right_with_frame_pointers_both_ways() {
    check_sites("call_sites_fp", "dwarf");
    check_sites("call_sites_fp", "fp");
}

#[test]
fn replayed_nodes_link_to_their_capture_calls() {
    check_graph("call_sites");
}

/// The stack of A's launches as "f <- g <- ..." (function names only).
fn stack_of_a(c: &Connection) -> String {
    c.query_row(
        "SELECT group_concat(name, ' <- ') FROM (SELECT coalesce(substr(f.symbol, 1, instr(f.symbol || '(', '(') - 1), '?') AS name \
         FROM rtl_stack_frame sf JOIN rtl_frame f ON f.id = sf.frame_id WHERE sf.stack_id = (SELECT st.id FROM rtl_stack st \
         JOIN rtl_frame f ON f.id = st.site_frame_id WHERE f.symbol = 'A()' LIMIT 1) ORDER BY sf.depth)",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

/// Why `.eh_frame` unwinding (`--stacks dwarf`): without frame pointers, the frame-pointer walk
/// keeps only the caller (its chain ends at once); the copy route walks the whole stack.
#[test]
fn whole_stacks_without_frame_pointers_need_eh_frame() {
    let (_d, db) = trace("call_sites", "dwarf");
    let dwarf = stack_of_a(&Connection::open(&db).unwrap());
    assert!(dwarf.starts_with("A <- run_round <- main"), "{dwarf}");
    let (_d2, db2) = trace("call_sites", "fp");
    let fp = stack_of_a(&Connection::open(&db2).unwrap());
    assert!(!fp.contains("run_round"), "the frame-pointer walk unwound code without frame pointers: {fp}");
    let (_d3, db3) = trace("call_sites_fp", "fp");
    let fp_built = stack_of_a(&Connection::open(&db3).unwrap());
    assert!(fp_built.starts_with("A <- run_round <- main"), "{fp_built}");
}

/// The readers: `summary` ranks launch sites by GPU time (replayed nodes at G), Perfetto API
/// slices carry their stack.
#[test]
fn readers_show_sites() {
    let (d, db) = trace("call_sites", "dwarf");
    let out = rtl_run(&["summary", "--json", db.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sites: BTreeMap<String, (i64, i64)> = v["launch_sites"]
        .as_array()
        .expect("launch_sites")
        .iter()
        .map(|s| (s["site"].as_str().unwrap().to_string(), (s["gpu_ops"].as_i64().unwrap(), s["replayed_nodes"].as_i64().unwrap())))
        .collect();
    let r = REPS as i64;
    let want: BTreeMap<String, (i64, i64)> =
        [("A()", (r, 0)), ("B()", (2 * r, 0)), ("C()", (2 * r, 0)), ("G()", (4 * REPLAYS as i64, 4 * REPLAYS as i64))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    assert_eq!(sites, want, "site -> (GPU ops, of them replayed nodes)");
    let json = d.path().join("t.json");
    let out = rtl_run(&["convert", db.to_str().unwrap(), "-o", json.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().or_else(|| v.as_array()).expect("trace events");
    let stacks: Vec<&str> =
        events.iter().filter(|e| e["name"] == "hipGraphLaunch" && e["ph"] == "X").filter_map(|e| e["args"]["stack"].as_str()).collect();
    assert_eq!(stacks.len(), REPLAYS, "every graph launch slice carries its stack");
    for s in stacks {
        assert!(s.starts_with("replay(hipGraphExec*, int) (call_sites)\nmain (call_sites)"), "{s}");
    }
}
