//! Facts about APIs come from the API table (rtl-user/src/probe/apis/) and, for `--apis all`,
//! from Debian's HIP headers: what a return holds (only error codes are failures), which
//! exports are APIs (C++-only ones and the compiler interface included), and exact counts on
//! entry points that do not start with the common `push %rbp` prologue. Run against Debian's
//! real libamdhip64 5.2 and the workloads of tests/workloads.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::*;
use rusqlite::Connection;
use serde_json::Value;

const REAL_LIB: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// The compiler interface `--apis all` probes (rocprofv3's "HIP compiler API").
const COMPILER_APIS: &[&str] = &[
    "__hipPushCallConfiguration",
    "__hipPopCallConfiguration",
    "__hipRegisterFatBinary",
    "__hipUnregisterFatBinary",
    "__hipRegisterFunction",
    "__hipRegisterVar",
    "__hipRegisterManagedVar",
    "__hipRegisterSurface",
    "__hipRegisterTexture",
];

/// Public HIP APIs Debian's ROCm 5.2 exports only under a C++ mangled name.
const CXX_ONLY: &[&str] = &["hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipCreateSurfaceObject", "hipDestroySurfaceObject"];

/// `list-apis` lines: name -> the rest of the line.
fn listed(out: &str) -> HashMap<String, String> {
    out.lines()
        .filter(|l| l.starts_with("  ") && l.contains(" offset 0x"))
        .filter_map(|l| l.trim_start().split_once(' ').map(|(n, rest)| (n.to_string(), rest.to_string())))
        .collect()
}

/// Exported function names of a library, by `nm -D` (an independent reader of the same file).
fn nm_functions(lib: &str) -> Vec<String> {
    let out = Command::new("nm").args(["-D", "--defined-only", lib]).output().expect("nm (binutils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && (f[1] == "T" || f[1] == "W")).then(|| f[2].split('@').next().unwrap().to_string())
        })
        .collect()
}

#[test]
fn hip_header_return_table_is_current() {
    // rtl-user/src/probe/hip_returns.rs is generated from /usr/include/hip by this script.
    let out = Command::new("python3").arg(root().join("tests/tools/gen_hip_returns.py")).arg("--check").output().expect("python3");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

#[test]
fn list_apis_all_has_the_cxx_only_apis_and_the_compiler_interface() {
    let out = rtl_run(&["list-apis", "--lib", REAL_LIB, "--apis", "all"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let apis = listed(&text);
    for n in CXX_ONLY {
        let l = apis.get(*n).unwrap_or_else(|| panic!("{n} missing from list-apis --apis all:\n{text}"));
        assert!(l.contains(&format!("C++ symbol {n}(")), "{n}: {l}");
        assert!(l.contains("returns hipError_t"), "{n}: {l}");
    }
    for n in COMPILER_APIS {
        let l = apis.get(*n).unwrap_or_else(|| panic!("{n} missing from list-apis --apis all:\n{text}"));
        assert!(!l.contains("C++ symbol"), "{n}: {l}");
    }
    for (n, kind) in [
        ("hipApiName", "pointer"),
        ("hipGetCmdName", "pointer"),
        ("hiprtcGetErrorString", "pointer"),
        ("hipGetErrorString", "pointer"),
        ("hipEnableActivityCallback", "bool"),
        ("hipInitActivityCallback", "void"),
        ("hipGetStreamDeviceId", "int32"),
        ("__hipRegisterFunction", "void"),
        ("__hipRegisterFatBinary", "pointer"),
        ("__hipPushCallConfiguration", "hipError_t"),
        ("hipMalloc", "hipError_t"),
        ("hipExtModuleLaunchKernel", "hipError_t"),
    ] {
        assert!(apis[n].contains(&format!("returns {kind} ")) || apis[n].ends_with(&format!("returns {kind}")), "{n}: {}", apis[n]);
    }
    // Namespaced C++ functions and non-HIP exports are not APIs; no mangled name is listed.
    assert!(!apis.contains_key("hipLaunchKernelGGLImpl"));
    assert!(!apis.keys().any(|n| n.starts_with("_Z") || n.starts_with("amd_dbgapi") || n.starts_with("__gnu")));
    assert!(!apis.contains_key("__hipGetPCH"), "not part of the compiler API rocprofv3 traces");
    // Exactly: every exported C function named hip*, the C++-only ones, the compiler interface.
    let nm = nm_functions(REAL_LIB);
    let c_hip = nm.iter().filter(|n| n.starts_with("hip")).count();
    let want = c_hip + CXX_ONLY.len() + COMPILER_APIS.len();
    assert_eq!(apis.len(), want, "{c_hip} hip* C functions + {} C++-only + {} compiler APIs", CXX_ONLY.len(), COMPILER_APIS.len());
    assert!(text.contains(&format!("{want} would be probed; not exported: none")), "{text}");

    // The default set probes the C++-only launches too (MIGraphX launches through
    // hipExtModuleLaunchKernel); it used to list them as not exported.
    let out = rtl_run(&["list-apis", "--lib", REAL_LIB]);
    let text = String::from_utf8(out.stdout).unwrap();
    let apis = listed(&text);
    for n in ["hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel"] {
        assert!(apis.get(n).is_some_and(|l| l.contains("decoded") && l.contains("C++ symbol")), "{n}:\n{text}");
    }
    let missing = text.lines().last().unwrap();
    assert!(!missing.contains("hipExtModuleLaunchKernel") && !missing.contains("hipHccModuleLaunchKernel"), "{missing}");
}

#[test]
fn a_cxx_overload_beside_the_c_symbol_is_listed_not_probed() {
    // The simulator exports hipExtModuleLaunchKernel both ways, like ROCm 6+ (C,
    // `@hip_6.0`) next to 5.2's C++ symbol: the API is probed once, at its C symbol.
    let lib = sim_lib().join("libamdhip64.so.5");
    let out = rtl_run(&["list-apis", "--lib", lib.to_str().unwrap(), "--apis", "hipExtModuleLaunchKernel"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let i = lines.iter().position(|l| l.trim_start().starts_with("hipExtModuleLaunchKernel ")).expect(&text);
    assert!(!lines[i].contains("C++ symbol"), "the C symbol is the one probed: {}", lines[i]);
    assert!(lines[i + 1].contains("not probed: C++ overload hipExtModuleLaunchKernel(ihipModuleSymbol_t*"), "{text}");
    assert!(text.contains("1 would be probed; not exported: none"), "{text}");
}

/// (name, first byte of its code) for an exported function, read from the file.
fn first_byte(lib: &str, name: &str) -> u8 {
    let syms = rtl_user::probe::symbols::Symbols::read(Path::new(lib)).unwrap();
    let off = syms.offset(name).unwrap_or_else(|| panic!("{name} not exported by {lib}"));
    std::fs::read(lib).unwrap()[off as usize]
}

#[test]
fn only_error_codes_count_as_failures() {
    require_root();
    let d = tmpdir();
    let (db, tr) = (d.path().join("t.db"), d.path().join("truth.jsonl"));
    // Every function ret_kinds calls, by name (outside the default set but the two last).
    let apis = "hipApiName,hipGetCmdName,hiprtcGetErrorString,hipGetErrorString,hipEnableActivityCallback,hipInitActivityCallback,hipMalloc,hipGetDeviceCount";
    let out = Command::new(rtl())
        .args(["run", "--quiet", "--apis", apis, "-o", db.to_str().unwrap(), "--", "env"])
        .arg(format!("RTL_WORKLOAD_TRUTH={}", tr.display()))
        .arg(workload("ret_kinds"))
        .args(["--reps", "3"])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let truth = truth(&tr);
    let tcalls = truth_calls(&truth);
    assert_eq!(tcalls.len(), 27);
    let calls = traced_calls(&db);
    // Every call once, on its thread, inside the workload's timing of it, with the value it
    // returned: the pointers exactly, the bools 0/1, the hipError_t codes.
    let matched = match_truth(&tcalls, &calls);
    assert_eq!(matched.len(), 27);
    assert_eq!(calls.len(), 27, "nothing else traced: {calls:?}");
    for (t, c) in &matched {
        match t["api"].as_str().unwrap() {
            "hipInitActivityCallback" => assert_eq!(c.ret, None, "void: no value kept: {c:?}"),
            "hipApiName" | "hipGetCmdName" | "hiprtcGetErrorString" | "hipGetErrorString" => {
                assert_eq!(c.ret, t["ret"].as_i64(), "the full 64-bit pointer: {c:?}");
                assert!(c.ret.unwrap() > u32::MAX as i64);
            }
            _ => assert_eq!(c.ret, t["ret"].as_i64(), "{c:?}"),
        }
    }
    // The trace says what each API's ret and a0..a3 hold.
    let c = Connection::open(&db).unwrap();
    let meaning = |n: &str| -> (String, Option<String>, Option<String>) {
        c.query_row(
            "SELECT m.ret_kind, m.a0, m.a1 FROM rtl_api_meaning m JOIN rocpd_string s ON s.id = m.apiName_id WHERE s.string = ?1",
            [n],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap_or_else(|e| panic!("no rtl_api_meaning row for {n}: {e}"))
    };
    assert_eq!(meaning("hipApiName"), ("pointer".into(), Some("a0".into()), Some("a1".into())));
    assert_eq!(meaning("hipEnableActivityCallback").0, "bool");
    assert_eq!(meaning("hipInitActivityCallback").0, "void");
    assert_eq!(meaning("hipGetErrorString"), ("pointer".into(), Some("error".into()), None));
    assert_eq!(meaning("hipMalloc"), ("hipError_t".into(), Some("ptr".into()), Some("bytes".into())));

    // The summary counts only the error codes: 3 hipMalloc (101) and 3 hipGetDeviceCount (100).
    let s = Command::new(rtl()).args(["summary", "--json", "--top", "0"]).arg(&db).output().unwrap();
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let sum: Value = serde_json::from_slice(&s.stdout).unwrap();
    assert_eq!(sum["lost"]["api_errors"], 6, "{}", sum["lost"]);
    let mut errors: Vec<(String, i64, String, i64)> = sum["lost"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["api"].as_str().unwrap().into(),
                e["ret"].as_i64().unwrap(),
                e["error"].as_str().unwrap().into(),
                e["calls"].as_i64().unwrap(),
            )
        })
        .collect();
    errors.sort();
    assert_eq!(
        errors,
        [("hipGetDeviceCount".into(), 100, "hipErrorNoDevice".into(), 3), ("hipMalloc".into(), 101, "hipErrorInvalidDevice".into(), 3)]
    );
}

#[test]
fn entry_points_without_push_rbp_are_counted_exactly() {
    // The probe-cost figures assume the common `push %rbp` prologue; these entry points of
    // Debian's library start otherwise (a jmp thunk, a cmp, an xor, `push %r15`), and are
    // probed all the same: every call, exactly.
    const PUSH_RBP: u8 = 0x55;
    for (n, first) in [
        ("hipGetErrorString", 0xe9),         // jmp rel32
        ("hipGetCmdName", 0xe9),             // jmp rel32
        ("hipApiName", 0x81),                // cmp $imm32, %edi
        ("hipEnableActivityCallback", 0x31), // xor %eax, %eax
        ("__hipRegisterFunction", 0x41),     // push %r15 (REX.B)
    ] {
        let b = first_byte(REAL_LIB, n);
        assert_eq!(b, first, "{n}: first byte {b:#04x}");
        assert_ne!(b, PUSH_RBP);
    }
    assert_eq!(first_byte(REAL_LIB, "hipMalloc"), PUSH_RBP, "the common prologue, for contrast");
    // The figure docs/benchmarks.md quotes: how many exported APIs do not start with it.
    let syms = rtl_user::probe::symbols::Symbols::read(Path::new(REAL_LIB)).unwrap();
    let code = std::fs::read(REAL_LIB).unwrap();
    for prefix in ["hip", "__hip"] {
        let names = syms.names_with_prefix(prefix);
        let other: Vec<&str> = names.iter().copied().filter(|n| code[syms.offset(n).unwrap() as usize] != PUSH_RBP).collect();
        eprintln!("{prefix}*: {} of {} exported functions do not start with push %rbp: {}", other.len(), names.len(), other.join(" "));
    }
    require_root();

    // hipGetErrorString (a jmp thunk) in a hot loop: 20000 calls, 20000 rows.
    let d = tmpdir();
    let (db, tr) = (d.path().join("h.db"), d.path().join("h.jsonl"));
    let out = Command::new(rtl())
        .args(["run", "--quiet", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap(), "--", "env"])
        .arg(format!("RTL_WORKLOAD_TRUTH={}", tr.display()))
        .arg(workload("hot_loop"))
        .args(["--api", "geterrorstring", "--calls", "20000"])
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let hot = truth(&tr);
    let agg = hot.iter().find(|v| v["aggregate"] == true).expect("aggregate truth line");
    assert_eq!(agg["calls"], 20000);
    let calls = traced_calls(&db);
    let tid = agg["tid"].as_u64().unwrap() as u32;
    assert_eq!(calls.iter().filter(|c| c.name == "hipGetErrorString" && c.tid == tid && c.status == 0).count(), 20000);
    assert_eq!(calls.len(), 20000);

    // __hipRegisterFunction (push %r15): once per kernel the binary's module constructor
    // registers, i.e. once per call site in it (straight-line code, run once at load).
    let demo = workload("demo");
    let dis = Command::new("objdump").arg("-d").arg(&demo).output().expect("objdump (binutils)");
    let sites =
        |f: &str| String::from_utf8_lossy(&dis.stdout).lines().filter(|l| l.contains("call") && l.contains(&format!("<{f}@plt>"))).count();
    let (reg_fn, reg_bin) = (sites("__hipRegisterFunction"), sites("__hipRegisterFatBinary"));
    assert!(reg_fn > 0 && reg_bin > 0, "{reg_fn} {reg_bin}");
    let (db, tr) = (d.path().join("demo.db"), d.path().join("demo.jsonl"));
    let out = Command::new(rtl())
        .args([
            "run",
            "--quiet",
            "--apis",
            "__hipRegisterFunction,__hipRegisterFatBinary,__hipPushCallConfiguration",
            "-o",
            db.to_str().unwrap(),
            "--",
            "env",
        ])
        .arg(format!("RTL_WORKLOAD_TRUTH={}", tr.display()))
        .arg(&demo)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = traced_calls(&db);
    let count = |n: &str| calls.iter().filter(|c| c.name == n).count();
    assert_eq!(count("__hipRegisterFunction"), reg_fn);
    assert_eq!(count("__hipRegisterFatBinary"), reg_bin);
    // Every <<<>>> launch pushes its configuration (the truth records each push).
    let pushes = truth_calls(&truth(&tr)).iter().filter(|t| t["api"] == "__hipPushCallConfiguration").count();
    assert!(pushes > 0);
    assert_eq!(count("__hipPushCallConfiguration"), pushes);
    // Their returns: void, a pointer, hipError_t (101 on the real library: not counted as
    // the registrations' failures).
    assert!(calls.iter().filter(|c| c.name == "__hipRegisterFunction").all(|c| c.ret.is_none()));
    assert!(calls.iter().filter(|c| c.name == "__hipRegisterFatBinary").all(|c| c.ret.is_some_and(|r| r != 0)));
    assert!(calls.iter().filter(|c| c.name == "__hipPushCallConfiguration").all(|c| c.ret == Some(101)));
}
