//! Small hand-built traces for the read_* tests (schema from rtl_user::trace::schema).
#![allow(dead_code, clippy::too_many_arguments)]

use std::path::{Path, PathBuf};

use rtl_user::trace::schema;
use rusqlite::{params, Connection};

pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

pub fn new_trace(path: &Path) -> Connection {
    let c = Connection::open(path).unwrap();
    c.execute_batch(schema::TABLES).unwrap();
    c.execute_batch(schema::INDEXES).unwrap();
    c.execute_batch(schema::VIEWS).unwrap();
    c.execute_batch(schema::SEED).unwrap();
    c
}

pub fn string(c: &Connection, s: &str) -> i64 {
    if let Ok(id) = c.query_row("SELECT id FROM rocpd_string WHERE string = ?1", [s], |r| r.get(0)) {
        return id;
    }
    c.execute("INSERT INTO rocpd_string(string) VALUES (?1)", [s]).unwrap();
    c.last_insert_rowid()
}

pub fn ustring(c: &Connection, s: &str) -> i64 {
    c.execute("INSERT INTO rocpd_ustring(string) VALUES (?1)", [s]).unwrap();
    c.last_insert_rowid()
}

/// Describes an API's `ret` and `a0..a3` in `rtl_api_meaning` as the collector does with its
/// first call (from the API table), once per name.
pub fn describe(c: &Connection, name: &str) {
    use rtl_user::probe::apis::{hex_mask, spec_for, Lib};
    let n = string(c, name);
    let spec = spec_for(name, Lib::of_name(name));
    let m = spec.arg_meanings();
    let a = |i: usize| m[i].map(|a| a.name);
    c.execute(
        "INSERT OR IGNORE INTO rtl_api_meaning(apiName_id, ret_kind, a0, a1, a2, a3, hex) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![n, spec.ret.name(), a(0), a(1), a(2), a(3), hex_mask(&m)],
    )
    .unwrap();
}

/// API row (+ rtl_api row, + its API's rtl_api_meaning row); returns its id.
pub fn api(
    c: &Connection,
    pid: i64,
    tid: i64,
    start: i64,
    end: i64,
    name: &str,
    args: &str,
    corr: i64,
    ret: Option<i64>,
    status: i64,
) -> i64 {
    let n = string(c, name);
    describe(c, name);
    let a = ustring(c, args);
    c.execute(
        "INSERT INTO rocpd_api(pid, tid, start, end, apiName_id, args_id, correlation_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![pid, tid, start, end, n, a, corr],
    )
    .unwrap();
    let id = c.last_insert_rowid();
    c.execute("INSERT INTO rtl_api(api_id, ret, status, a0) VALUES (?1, ?2, ?3, ?4)", params![id, ret, status, 0x1000 + id]).unwrap();
    id
}

pub fn op(c: &Connection, gpu: i64, queue: i64, start: i64, end: i64, desc: &str, ty: &str, corr: i64) -> i64 {
    let d = string(c, desc);
    let t = string(c, ty);
    c.execute(
        "INSERT INTO rocpd_op(gpuId, queueId, sequenceId, start, end, description_id, opType_id, correlation_id) VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, ?7)",
        params![gpu, queue, start, end, d, t, corr],
    )
    .unwrap();
    c.last_insert_rowid()
}

pub fn link(c: &Connection, api: i64, op: i64) {
    c.execute("INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (?1, ?2)", params![api, op]).unwrap();
}

/// A two-process trace on two GPUs:
/// - pid 100 (threads 100, 101), pid 200 (thread 200)
/// - 6 GPU ops: 5 linked through rocpd_api_ops, one linked only by correlation id, one unlinked;
///   two ops overlap on GPU 0 queue 0 (concurrent kernels)
/// - one API returned an error, one never returned, one roctx range (marker op, gpuId -1)
pub fn sample_trace(path: &Path, host: &str, base: i64) -> PathBuf {
    let c = new_trace(path);
    c.execute_batch("BEGIN").unwrap();
    c.execute(
        "INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', ?1), ('rtl_schema_version', ?2), ('clock', 'CLOCK_MONOTONIC'),
             ('realtime_minus_monotonic_ns', ?3), ('hostname', ?4), ('dropped_events', '3')",
        params![
            schema::RPD_SCHEMA_VERSION,
            schema::RTL_SCHEMA_VERSION.to_string(),
            (1_700_000_000_000_000_000i64 + base).to_string(),
            host
        ],
    )
    .unwrap();
    let t = |x: i64| base + x;
    c.execute("INSERT INTO rtl_process(pid, ppid, exe, cmdline, first_ns, last_ns, exited) VALUES (100, 1, '/usr/bin/python3', 'python3 train.py --epochs 1', ?1, ?2, 1)", params![t(0), t(100_000)]).unwrap();
    c.execute("INSERT INTO rtl_process(pid, ppid, exe, cmdline, first_ns, last_ns, exited) VALUES (200, 1, '/opt/app/bench', 'bench -n 3', ?1, ?2, 0)", params![t(0), t(100_000)]).unwrap();
    c.execute(
        "INSERT INTO rtl_library(path, dev, inode, probes, missing) VALUES ('/opt/rocm/lib/libamdhip64.so.6', 2049, 1234, 120, '')",
        [],
    )
    .unwrap();

    // pid 100 main thread: a roctx range around two launches and a copy.
    let push = api(&c, 100, 100, t(1_000), t(1_500), "roctxRangePushA", "message=\"phase1\"", 1, Some(0), 0);
    let l1 = api(
        &c,
        100,
        100,
        t(2_000),
        t(7_000),
        "hipLaunchKernel",
        "function=vectorAdd grid=(256,1,1) block=(64,1,1) stream=0x0",
        2,
        Some(0),
        0,
    );
    let l2 = api(
        &c,
        100,
        100,
        t(8_000),
        t(12_000),
        "hipLaunchKernel",
        "function=vectorAdd grid=(256,1,1) block=(64,1,1) stream=0x0",
        3,
        Some(0),
        0,
    );
    let cp = api(&c, 100, 100, t(13_000), t(20_000), "hipMemcpyAsync", "dst=0x7f00 src=0x5500 size=4096 kind=1", 4, Some(0), 0);
    let pop = api(&c, 100, 100, t(30_000), t(30_400), "roctxRangePop", "", 5, Some(0), 0);
    // pid 100 thread 101: an error and a call that never returned.
    let _err = api(&c, 100, 101, t(3_000), t(3_300), "hipMalloc", "size=1099511627776", 6, Some(2), 0);
    let _unc = api(&c, 100, 101, t(40_000), t(40_000), "hipStreamSynchronize", "stream=0x0", 7, None, 1);
    // pid 200: three launches on GPU 1 (one linked only by correlation id), one op unlinked.
    let m1 = api(&c, 200, 200, t(5_000), t(9_000), "hipModuleLaunchKernel", "f=_Z6reducePfi", 8, Some(0), 0);
    let m2 = api(&c, 200, 200, t(10_000), t(11_000), "hipModuleLaunchKernel", "f=_Z6reducePfi", 9, Some(0), 0);
    let m3 = api(&c, 200, 200, t(11_500), t(12_500), "hipModuleLaunchKernel", "f=_Z6reducePfi", 10, Some(0), 0);

    let k = "_Z9vectorAddPfS_S_i";
    let o1 = op(&c, 0, 0, t(9_000), t(19_000), k, "KernelExecution", 2);
    let o2 = op(&c, 0, 0, t(15_000), t(25_000), k, "KernelExecution", 3); // overlaps o1 on the same queue
    let o3 = op(&c, 0, 1, t(21_000), t(26_000), "", "CopyHostToDevice", 4);
    let o4 = op(&c, 1, 0, t(12_000), t(22_000), "_Z6reducePfi", "KernelExecution", 8);
    let o5 = op(&c, 1, 0, t(23_000), t(27_000), "_Z6reducePfi", "KernelExecution", 9);
    let _o6 = op(&c, 1, 0, t(28_000), t(30_000), "_Z6reducePfi", "KernelExecution", 10); // correlation id only
    let _o7 = op(&c, 1, 1, t(31_000), t(32_000), "_Z6reducePfi", "KernelExecution", 0); // unlinked
    let mk = op(&c, -1, 100, t(1_200), t(30_200), "phase1", "UserMarker", 1);
    for (a, o) in [(l1, o1), (l2, o2), (cp, o3), (m1, o4), (m2, o5), (push, mk)] {
        link(&c, a, o);
    }
    let _ = (pop, m3);
    let kn = string(&c, k);
    for a in [l1, l2] {
        c.execute("INSERT INTO rocpd_kernelapi(api_ptr_id, stream, gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ, groupSegmentSize, kernelName_id) VALUES (?1, '0x0', 256, 1, 1, 64, 1, 1, 0, ?2)", params![a, kn]).unwrap();
    }
    c.execute(
        "INSERT INTO rocpd_copyapi(api_ptr_id, stream, size, kind, dst, src) VALUES (?1, '0x0', 4096, 1, '0x7f00', '0x5500')",
        params![cp],
    )
    .unwrap();
    c.execute(
        "INSERT INTO rocpd_monitor(deviceType, deviceId, monitorType, start, end, value) VALUES ('gpu', 0, 'temp', ?1, ?2, '55')",
        params![t(0), t(100)],
    )
    .unwrap();
    c.execute_batch("COMMIT").unwrap();
    path.to_path_buf()
}

/// Row counts of every table the merge keeps.
pub fn counts(path: &Path) -> std::collections::BTreeMap<String, i64> {
    let c = Connection::open(path).unwrap();
    let mut m = std::collections::BTreeMap::new();
    for t in rtl_user::read::MERGED_TABLES {
        m.insert(t.to_string(), c.query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0)).unwrap_or(-1));
    }
    m
}

/// Streams of [`gpu_trace`]'s processes: stream `s` of each process is this plus `s`.
pub const STREAM_BASE: i64 = 0x5500_0000;

/// A trace of `procs` processes (pids 1000, 1001, ...) each launching `launches` kernels on
/// each of `streams` streams of each of `gpus` GPUs (queue = stream index): every launch linked
/// to its op, its stream in `rtl_api.a3`. With `stacks`, every launch has a stack
/// `main -> train_step -> launch_s<s> -> hipLaunchKernel` (the first three in the app, the last
/// in the runtime), and 10 us more GPU time per op on stream 0 (`launch_s0` the largest site).
pub fn gpu_trace(path: &Path, procs: i64, gpus: i64, streams: i64, launches: i64, stacks: bool) -> PathBuf {
    let c = new_trace(path);
    c.execute_batch("BEGIN").unwrap();
    c.execute(
        "INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', ?1), ('rtl_schema_version', ?2), ('clock', 'CLOCK_MONOTONIC'),
             ('realtime_minus_monotonic_ns', '1700000000000000000'), ('hostname', 'node7')",
        params![schema::RPD_SCHEMA_VERSION, schema::RTL_SCHEMA_VERSION.to_string()],
    )
    .unwrap();
    if stacks {
        // frames: 1 main, 2 train_step, 3.. launch_s<s> (app), then hipLaunchKernel (runtime)
        let frame = |id: i64, module: &str, symbol: &str, runtime: i64| {
            c.execute(
                "INSERT INTO rtl_frame(id, module, address, symbol, symbol_offset, runtime) VALUES (?1, ?2, ?3, ?4, 4, ?5)",
                params![id, module, 0x1000 + id * 0x40, symbol, runtime],
            )
            .unwrap();
        };
        frame(1, "/opt/app/train", "main", 0);
        frame(2, "/opt/app/train", "train_step(int)", 0);
        frame(3, "/opt/rocm/lib/libamdhip64.so.6", "hipLaunchKernel", 1);
        for s in 0..streams {
            frame(10 + s, "/opt/app/train", &format!("launch_s{s}(float*)"), 0);
            c.execute("INSERT INTO rtl_stack(id, depth, site_frame_id, truncated) VALUES (?1, 4, ?2, 0)", params![s + 1, 10 + s]).unwrap();
            for (depth, f) in [3, 10 + s, 2, 1].iter().enumerate() {
                c.execute("INSERT INTO rtl_stack_frame(stack_id, depth, frame_id) VALUES (?1, ?2, ?3)", params![s + 1, depth as i64, f])
                    .unwrap();
            }
        }
    }
    let mut t = 1_000_000i64;
    for p in 0..procs {
        let pid = 1000 + p;
        c.execute(
            "INSERT INTO rtl_process(pid, ppid, exe, cmdline, first_ns, last_ns, exited) VALUES (?1, 1, '/opt/app/train', ?2, 0, 0, 1)",
            params![pid, format!("train --rank {p}")],
        )
        .unwrap();
        for g in 0..gpus {
            for s in 0..streams {
                for k in 0..launches {
                    let kernel = format!("_Z6gemm_{}PfS_i", (b'a' + (k % 3) as u8) as char);
                    let a = api(&c, pid, pid, t, t + 3_000, "hipLaunchKernel", "", t, Some(0), 0);
                    c.execute("UPDATE rtl_api SET a3 = ?2 WHERE api_id = ?1", params![a, STREAM_BASE + s]).unwrap();
                    let d = 20_000 + if s == 0 { 10_000 } else { 0 } + k * 1_000;
                    let o = op(&c, g, s, t + 8_000, t + 8_000 + d, &kernel, "KernelExecution", t);
                    link(&c, a, o);
                    c.execute("INSERT INTO rtl_op(op_id, link, pid) VALUES (?1, 1, ?2)", params![o, pid]).unwrap();
                    if stacks {
                        c.execute("INSERT INTO rtl_api_stack(api_id, stack_id) VALUES (?1, ?2)", params![a, s + 1]).unwrap();
                    }
                    t += 7_000 + 2_000 * g;
                }
            }
        }
    }
    c.execute_batch("COMMIT").unwrap();
    path.to_path_buf()
}
