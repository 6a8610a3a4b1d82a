//! Golden traces from the simulator: a real traced run of the demo workload on the ROCm
//! simulator, read back by `summary --json` and converted to both Perfetto formats; every figure
//! is compared with the simulator's ground truth (kernel counts and GPU time per kernel name,
//! API call counts), and the .pftrace is parsed by Perfetto's own protos.

use crate::common;

use std::collections::HashMap;
use std::process::Command;

use common::*;
use serde_json::Value;

#[test]
fn demo_on_the_simulator_reads_back_as_its_ground_truth() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("golden.db"), d.path().join("truth.jsonl"));
    let lib = sim_lib();
    let out = Command::new(rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "env"])
        .arg(format!("ROCM_SIM_TRUTH={}", tr.display()))
        .arg(workload("demo"))
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let truth = truth(&tr);

    // Expected per kernel: calls and total GPU ns; per API: calls.
    let mut kernels: HashMap<String, (u64, i64)> = HashMap::new();
    for o in truth.iter().filter(|v| v["type"] == "op" && v["op"] == "dispatch") {
        let name = o["kernel_demangled"].as_str().or(o["kernel"].as_str()).unwrap().to_string();
        let base = name.split('(').next().unwrap().to_string();
        let e = kernels.entry(base).or_default();
        e.0 += 1;
        e.1 += o["end"].as_i64().unwrap() - o["start"].as_i64().unwrap();
    }
    let mut apis: HashMap<String, u64> = HashMap::new();
    // Trivial getters are outside the default probe set; `__hip*` are compiler plumbing.
    const NOT_DEFAULT: &[&str] = &[
        "hipGetLastError",
        "hipPeekAtLastError",
        "hipGetDevice",
        "hipGetErrorString",
        "hipGetErrorName",
        "hipDeviceGetAttribute",
        "hipPointerGetAttributes",
        "hipStreamIsCapturing",
        "hipStreamGetCaptureInfo",
    ];
    for a in truth.iter().filter(|v| {
        let n = v["name"].as_str().unwrap_or("");
        v["type"] == "api" && v["lib"] != "roctx" && !n.starts_with("__") && !NOT_DEFAULT.contains(&n)
    }) {
        *apis.entry(a["name"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert!(!kernels.is_empty());

    let s = Command::new(rtl()).args(["summary", "--json", "--top", "0"]).arg(&db).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let sum: Value = serde_json::from_slice(&s.stdout).unwrap();
    for (name, (calls, total)) in &kernels {
        let k = sum["kernels"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["op_type"] == "KernelExecution" && k["name"].as_str().unwrap().split('(').next() == Some(name))
            .unwrap_or_else(|| panic!("kernel {name} missing from the summary"));
        assert_eq!(k["calls"].as_u64().unwrap(), *calls, "{name} calls");
        assert!((k["total_ns"].as_i64().unwrap() - total).abs() <= 2 * *calls as i64, "{name} total GPU ns {k} vs {total}");
    }
    for (name, calls) in &apis {
        let a = sum["apis"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name.as_str())
            .unwrap_or_else(|| panic!("API {name} missing from the summary"));
        assert_eq!(a["calls"].as_u64().unwrap(), *calls, "{name} calls");
    }

    // Both Perfetto formats; the protobuf one checked by Perfetto's own protos.
    let json = d.path().join("golden.json.gz");
    let pf = d.path().join("golden.pftrace");
    for o in [&json, &pf] {
        let c = Command::new(rtl())
            .args(["convert", db.to_str().unwrap(), "--format", "perfetto", "-o", o.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(c.status.success(), "{}", String::from_utf8_lossy(&c.stderr));
    }
    let script = root().join("rtl-user/tests/read/check_pftrace.py");
    let c = Command::new("python3").arg(&script).arg(&pf).arg(&db).output().unwrap();
    assert!(c.status.success(), "check_pftrace.py: {}\n{}", String::from_utf8_lossy(&c.stdout), String::from_utf8_lossy(&c.stderr));
}
