//! GPU timestamps joined to the eBPF API trace, checked against the ROCm simulator's ground
//! truth (tests/rocm-sim): every GPU operation present, its GPU start/end on the trace clock,
//! linked to the very API call that caused it, none linked to a wrong one.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use rusqlite::Connection;
use serde_json::Value;

/// One GPU op of the trace with the API call it is linked to.
#[derive(Debug)]
struct TraceOp {
    start: i64,
    end: i64,
    gpu: i64,
    op_type: String,
    desc: String,
    api: Option<(u32, u32, String, i64, i64, i64)>, // pid, tid, name, start, end, status
}

fn trace_ops(db: &Path) -> Vec<TraceOp> {
    let c = Connection::open(db).unwrap();
    let mut st = c
        .prepare(
            "SELECT o.start, o.end, o.gpuId, t.string, d.string, a.pid, a.tid, n.string, a.start, a.end, coalesce(r.status, 0) \
             FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id JOIN rocpd_string d ON d.id = o.description_id \
             LEFT JOIN rocpd_api_ops l ON l.op_id = o.id LEFT JOIN rocpd_api a ON a.id = l.api_id \
             LEFT JOIN rocpd_string n ON n.id = a.apiName_id LEFT JOIN rtl_api r ON r.api_id = a.id WHERE o.gpuId >= 0",
        )
        .unwrap();
    st.query_map([], |r| {
        let pid: Option<u32> = r.get(5)?;
        Ok(TraceOp {
            start: r.get(0)?,
            end: r.get(1)?,
            gpu: r.get(2)?,
            op_type: r.get(3)?,
            desc: r.get(4)?,
            api: match pid {
                Some(pid) => Some((pid, r.get(6)?, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?)),
                None => None,
            },
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

/// Per (pid, calling thread's tid, API): (truth ops, linked to the right call).
type Groups = HashMap<(u32, u64, String), (usize, usize)>;

/// Runs `cmd` on the simulator under `rtl-ebpf run` and checks the join against the truth.
/// Returns (truth ops, linked correctly).
fn check_join(name: &str, cmd: &[&str], sim_env: &[(&str, &str)]) -> (usize, usize) {
    let (n, right, _, _) = check_join_groups(name, cmd, sim_env);
    (n, right)
}

/// [`check_join`], with the per-thread, per-API counts and the trace file's directory.
fn check_join_groups(name: &str, cmd: &[&str], sim_env: &[(&str, &str)]) -> (usize, usize, Groups, tempfile::TempDir) {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    let lib = sim_lib();
    let mut args: Vec<String> = vec!["run".into(), "--quiet".into(), "-o".into(), db.display().to_string(), "--".into(), "env".into()];
    args.push(format!("LD_LIBRARY_PATH={}", lib.display()));
    args.push(format!("ROCM_SIM_TRUTH={}", tr.display()));
    args.extend(sim_env.iter().map(|(k, v)| format!("{k}={v}")));
    args.extend(cmd.iter().map(|s| s.to_string()));
    let out = std::process::Command::new(rtl()).args(&args).env("LD_LIBRARY_PATH", &lib).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {err}");
    let truth = truth(&tr);
    let ops: Vec<&Value> = truth.iter().filter(|v| v["type"] == "op").collect();
    let apis: HashMap<(u64, u64, u64), &Value> = truth
        .iter()
        // roctx calls (libroctx64) number their own `seq`: only HIP calls cause GPU work.
        .filter(|v| v["type"] == "api" && v["lib"] != "roctx")
        .map(|v| ((v["pid"].as_u64().unwrap(), v["tid"].as_u64().unwrap(), v["seq"].as_u64().unwrap()), v))
        .collect();
    let traced = trace_ops(&db);
    assert!(!ops.is_empty(), "{name}: the workload made no GPU op");
    let tol = 1_000i64; // ns: the clock-sync uncertainty bound; observed error is a few ns
    let mut groups: Groups = HashMap::new();
    let mut used = vec![false; traced.len()];
    let (mut linked_right, mut linked_wrong, mut missing) = (0usize, Vec::new(), Vec::new());
    for o in &ops {
        let (s, e) = (o["start"].as_i64().unwrap(), o["end"].as_i64().unwrap());
        let pid = o["pid"].as_u64().unwrap() as u32;
        let api = apis.get(&(o["pid"].as_u64().unwrap(), o["api_tid"].as_u64().unwrap(), o["api_seq"].as_u64().unwrap())).copied();
        let group = groups.entry((pid, o["api_tid"].as_u64().unwrap(), o["api"].as_str().unwrap_or("").to_string())).or_default();
        group.0 += 1;
        // Candidates: same times (within tol), same process, unused; prefer the correctly linked.
        let mut best = None;
        for (i, t) in traced.iter().enumerate() {
            if used[i] || (t.start - s).abs() > tol || (t.end - e).abs() > tol {
                continue;
            }
            let Some((tpid, ttid, tname, tstart, tend, _)) = &t.api else { continue };
            if *tpid != pid {
                continue;
            }
            let right = api.is_some_and(|a| {
                a["tid"].as_u64() == Some(*ttid as u64)
                    && a["name"].as_str() == Some(tname.as_str())
                    && *tstart <= a["start"].as_i64().unwrap()
                    && a["end"].as_i64().unwrap() <= *tend
            });
            if right {
                best = Some((i, true));
                break;
            }
            if best.is_none() {
                best = Some((i, false));
            }
        }
        match best {
            Some((i, right)) => {
                used[i] = true;
                if right {
                    linked_right += 1;
                    group.1 += 1;
                } else {
                    linked_wrong.push((o, &traced[i]));
                }
            }
            None => missing.push(o),
        }
    }
    assert!(missing.is_empty(), "{name}: {} of {} truth ops missing from the trace, e.g. {}", missing.len(), ops.len(), missing[0]);
    // "Wrong" here includes ops kept unlinked (profiler-only API rows): they must be rare, and
    // none may point at a different real call.
    let wrong_real: Vec<_> = linked_wrong.iter().filter(|(_, t)| t.api.as_ref().is_some_and(|a| a.5 != 5)).collect();
    assert!(
        wrong_real.is_empty(),
        "{name}: {} ops linked to the wrong call, e.g. {:?} -> {:?}",
        wrong_real.len(),
        wrong_real[0].0,
        wrong_real[0].1
    );
    let ratio = linked_right as f64 / ops.len() as f64;
    eprintln!("{name}: {} truth ops, {} linked to the right call ({:.3} %)", ops.len(), linked_right, 100.0 * ratio);
    assert!(ratio >= 0.999, "{name}: only {:.3} % linked", 100.0 * ratio);
    // Kernel names come through, demangled.
    assert!(traced.iter().any(|t| t.op_type == "KernelExecution" && !t.desc.is_empty() && !t.desc.starts_with("_Z")));
    assert!(traced.iter().all(|t| t.gpu >= 0));
    // How each op was linked: one rtl_op row per GPU op, the metadata counts the same.
    let c = Connection::open(&db).unwrap();
    let kinds: HashMap<i64, i64> = c
        .prepare("SELECT link, count(*) FROM rtl_op GROUP BY link")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let m = |t: &str| meta(&db, t).unwrap_or_else(|| panic!("{name}: metadata {t}")).parse::<i64>().unwrap();
    assert_eq!(kinds.values().sum::<i64>(), traced.len() as i64, "{name}: every GPU op has its rtl_op row");
    assert_eq!(m("gpu_ops"), traced.len() as i64);
    let k = |code: i64| kinds.get(&code).copied().unwrap_or(0);
    assert_eq!((m("gpu_ops_linked_correlation"), m("gpu_ops_linked_sequence"), m("gpu_ops_linked_time")), (k(1), k(2), k(3)), "{name}");
    assert_eq!(m("gpu_ops_linked"), k(1) + k(2) + k(3));
    assert_eq!((m("gpu_ops_unlinked_no_thread"), m("gpu_ops_unlinked_no_call"), m("gpu_ops_ambiguous")), (k(0), k(4), k(5)), "{name}");
    eprintln!("{name}: links by correlation {}, sequence {}, time {}, unlinked {}", k(1), k(2), k(3), k(0) + k(4) + k(5));
    (ops.len(), linked_right, groups, d)
}

#[test]
fn serving_8_workers_threads_streams_graphs_join_exactly() {
    let w = workload("serve_sim");
    let (n, _) = check_join(
        "serve_sim",
        &[w.to_str().unwrap(), "--workers", "8", "--threads", "4", "--requests", "4", "--graph-nodes", "50", "--graph-replays", "2"],
        &[],
    );
    assert!(n > 1000, "expected a serving-sized op count, got {n}");
}

/// The launch loops real programs run (tests/workloads/launch_storm): per thread, back to back,
/// an H2D copy, two kernels and a D2H copy on the thread's stream, 0.5 us apart, the profiler's
/// CPU times jittered by up to 2 us (the clock uncertainty the join allows): every op of every
/// thread and API linked to its very call, none to a neighbour.
fn storm(name: &str, args: &[&str], sim_env: &[(&str, &str)], threads: usize, rounds: usize, waves: usize, graph_ops: usize) {
    let w = workload("launch_storm");
    let mut cmd = vec![w.to_str().unwrap(), "--gap-ns", "500"];
    cmd.extend_from_slice(args);
    let mut env = vec![("ROCM_SIM_TRUTH_BUFFER", "65536"), ("ROCM_SIM_PROFILER_JITTER_NS", "2000")];
    env.extend_from_slice(sim_env);
    let (n, right, groups, d) = check_join_groups(name, &cmd, &env);
    // Every calling thread has its own name in rtl_thread: "storm-wN" for the workers (their
    // pthread_setname_np), the executable's for a main thread.
    let c = rusqlite::Connection::open(d.path().join("t.db")).unwrap();
    let callers: Vec<(i64, i64, Option<String>)> = c
        .prepare("SELECT DISTINCT a.pid, a.tid, t.comm FROM rocpd_api a LEFT JOIN rtl_thread t ON t.pid = a.pid AND t.tid = a.tid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let workers = callers.iter().filter(|(p, t, _)| p != t).count();
    assert_eq!(workers, 2 * threads * waves, "{name}: worker threads calling");
    for (pid, tid, comm) in &callers {
        let comm = comm.as_deref().unwrap_or_else(|| panic!("{name}: thread {pid}/{tid} has no rtl_thread name"));
        if pid == tid {
            assert_eq!(comm, "launch_storm", "{name}: main thread {pid}");
        } else {
            assert!(comm.starts_with("storm-w") && comm[7..].parse::<usize>().is_ok(), "{name}: worker {pid}/{tid}: {comm:?}");
        }
    }
    // Exact counts: 2 processes (the parent and its forked child).
    assert_eq!(n, 2 * (threads * waves * rounds * 4 + graph_ops), "{name}: GPU ops in the truth");
    assert_eq!(right, n, "{name}: every op linked to its call");
    let pids: std::collections::HashSet<u32> = groups.keys().map(|g| g.0).collect();
    assert_eq!(pids.len(), 2, "{name}: parent and forked child");
    let threads_seen: std::collections::HashSet<(u32, u64)> =
        groups.keys().filter(|g| g.2 != "hipGraphLaunch").map(|g| (g.0, g.1)).collect();
    assert_eq!(threads_seen.len(), 2 * threads * waves, "{name}: every worker thread (waves reuse thread ids)");
    for (g, (total, ok)) in &groups {
        assert!(*ok as f64 >= 0.999 * *total as f64, "{name}: {g:?}: {ok} of {total} linked right");
    }
}

#[test]
fn launch_storm_back_to_back_every_op_of_every_thread_linked() {
    storm("storm-v0.1.0", &[], &[], 4, 20, 1, 64 * 10);
}

#[test]
fn launch_storm_v0_records_out_of_order_late_and_thread_ids_reused() {
    // v0 API (drained): kernel A takes 0.5 ms on its own queue while kernel B, on the thread's
    // second stream, takes 5 us, so B's records complete (and are published) before A's, and
    // many only after their thread exited; 3 waves of threads reuse the same pthread_self
    // (profiler thread ids) under new OS tids.
    storm(
        "storm-v0",
        &["--waves", "3", "--streams", "2", "--rounds", "10"],
        &[("ROCM_SIM_PROFILER", "v0"), ("RTL_AGENT_DRAIN_MS", "2"), ("ROCM_SIM_QUEUES", "16"), ("ROCM_SIM_KERNEL_NS", "storm_a=500000")],
        4,
        10,
        3,
        64 * 10,
    );
}

#[test]
fn graph_replay_of_hundreds_of_nodes_joins_every_node() {
    let w = workload("graph_replay");
    let (n, _) = check_join("graph_replay", &[w.to_str().unwrap(), "--nodes", "200", "--replays", "5"], &[]);
    assert!(n >= 1000, "200 nodes x 5 replays, got {n}");
}

#[test]
fn small_profiler_chunks_and_v0_api_still_join() {
    let w = workload("demo");
    check_join("demo-chunk16", &[w.to_str().unwrap()], &[("ROCM_SIM_PROFILER_CHUNK", "16")]);
    check_join("demo-v0", &[w.to_str().unwrap()], &[("ROCM_SIM_PROFILER", "v0"), ("RTL_AGENT_DRAIN_MS", "5")]);
}

#[test]
fn stock_rocm_without_the_api_gives_a_cpu_trace_and_says_why() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let lib = sim_lib();
    let w = workload("demo");
    let out = std::process::Command::new(rtl())
        .args(["run", "--gpu", "clr", "--quiet", "-o", db.to_str().unwrap(), "--", "env", "ROCM_SIM_PROFILER=none"])
        .arg(format!("LD_LIBRARY_PATH={}", lib.display()))
        .arg(&w)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("hipProfiler") || err.contains("no GPU source"), "the user is told why GPU times are missing: {err}");
    let calls = traced_calls(&db);
    assert!(calls.iter().any(|c| c.name == "hipLaunchKernel"), "CPU-side trace complete");
    assert_eq!(trace_ops(&db).len(), 0);
}

#[test]
fn all_mode_joins_a_workload_started_with_the_agent() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    let lib = sim_lib();
    let agent = rtl().with_file_name("librtl_agent.so");
    assert!(agent.exists(), "{} not built (cargo build --release -p rtl-agent)", agent.display());
    let hip = lib.join("libamdhip64.so.5");
    let tracer =
        rtl_start(&["--all", "--quiet", "-o", db.to_str().unwrap(), "--lib", hip.to_str().unwrap(), "--lib", agent.to_str().unwrap()]);
    let st = std::process::Command::new(workload("demo"))
        .env("LD_LIBRARY_PATH", &lib)
        .env("LD_PRELOAD", &agent)
        .env("ROCM_SIM_TRUTH", &tr)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    std::thread::sleep(std::time::Duration::from_millis(500));
    rtl_stop(tracer);
    let truth = truth(&tr);
    let pid = truth.iter().find_map(|v| v["pid"].as_u64()).unwrap() as u32;
    let n_truth = truth.iter().filter(|v| v["type"] == "op").count();
    assert!(n_truth >= 12, "demo's truth has its 12 kernels and its copies: {n_truth} ops");
    let ops = trace_ops(&db);
    let ours: Vec<&TraceOp> = ops.iter().filter(|o| o.api.as_ref().is_some_and(|a| a.0 == pid && a.5 == 0)).collect();
    assert_eq!(ours.len(), n_truth, "every GPU op of the agent-started process, linked to a probed call");
}

#[test]
fn attach_without_the_agent_says_why_gpu_times_are_missing() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let mut c = std::process::Command::new(workload("sleeper"))
        .args(["--mode", "loop", "--interval-ms", "20"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(c.stdout.as_mut().unwrap()), &mut line).unwrap();
    let out = rtl_run(&["attach", "--pid", &c.id().to_string(), "--duration", "1", "--quiet", "-o", db.to_str().unwrap()]);
    signal(c.id(), libc::SIGTERM);
    wait_exit(&mut c, 10);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("no rtl-ebpf agent loaded"), "{err}");
    assert!(!traced_calls(&db).is_empty(), "CPU-side trace present");
}

#[test]
fn auto_falls_back_to_hsa_capture_on_stock_rocm() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    let lib = sim_lib();
    let out = std::process::Command::new(rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "env", "ROCM_SIM_PROFILER=none"])
        .arg(format!("ROCM_SIM_TRUTH={}", tr.display()))
        .arg(format!("LD_LIBRARY_PATH={}", lib.display()))
        .arg(workload("demo"))
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dispatches = truth(&tr).iter().filter(|v| v["type"] == "op" && v["op"] == "dispatch").count();
    // demo: 4 iterations of 3 kernels (its own output says so); 0 == 0 would check nothing.
    assert_eq!(dispatches, 12, "demo's kernel launches in its truth");
    let kernels = trace_ops(&db).iter().filter(|o| o.op_type == "KernelExecution" && o.api.as_ref().is_some_and(|a| a.5 == 0)).count();
    assert_eq!(kernels, dispatches, "every dispatch captured through HSA and linked");
}

/// An application in its own pid namespace (a container traced from the host): its agent writes
/// the pid it sees (`getpid()`, the namespace's), the probe sees the host's. Its batches are its
/// own, not forged: every op is in the trace, linked, under the host pid. (Every batch was
/// refused as naming another process before the publish probe read the namespace pid.)
#[test]
fn an_application_in_its_own_pid_namespace_gets_its_gpu_times() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    let lib = sim_lib();
    let out = std::process::Command::new(rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "unshare", "--pid", "--fork", "--mount-proc", "env"])
        .arg(format!("LD_LIBRARY_PATH={}", lib.display()))
        .arg(format!("ROCM_SIM_TRUTH={}", tr.display()))
        .arg(workload("demo"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let truth = truth(&tr);
    // The simulator writes the pid the application sees: its namespace's.
    let ns_pids: std::collections::HashSet<u64> = truth.iter().filter_map(|v| v["pid"].as_u64()).collect();
    let ops = truth.iter().filter(|v| v["type"] == "op").count() as i64;
    assert!(ops >= 12, "the demo's 12 kernels at least: {ops}");
    let m = |t: &str| meta(&db, t).unwrap_or_else(|| panic!("metadata {t}")).parse::<i64>().unwrap();
    assert_eq!(m("agent_batches_rejected_wrong_pid"), 0);
    assert_eq!(m("gpu_ops"), ops, "every op of the namespaced application");
    assert_eq!(m("gpu_ops_linked"), ops, "each linked to its call");
    let c = Connection::open(&db).unwrap();
    let pids: Vec<i64> =
        c.prepare("SELECT DISTINCT pid FROM rtl_op").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    let api_pids: Vec<i64> = c
        .prepare("SELECT DISTINCT a.pid FROM rocpd_api a JOIN rocpd_api_ops l ON l.api_id = a.id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(pids, api_pids, "ops under the host pid of the calls that caused them");
    assert!(!ns_pids.contains(&(pids[0] as u64)), "the host pid {} differs from the namespace's {ns_pids:?}", pids[0]);
}
