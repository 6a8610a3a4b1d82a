//! Helpers shared by rtl-agent's integration tests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use rtl_common::agent::{decode_prefix, BatchHeader, ClockSync, Counters, GpuOp, Info, Record};

/// The cdylib built alongside this test (cargo builds every crate type of the lib target).
pub fn agent_so() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for p in [deps.join("librtl_agent.so"), deps.parent().unwrap().join("librtl_agent.so")] {
        if p.exists() {
            return p;
        }
    }
    panic!("librtl_agent.so not found next to {}", exe.display());
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// A fresh scratch directory under target/.
pub fn scratch(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let d = exe.parent().unwrap().parent().unwrap().join("rtl-agent-tests").join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn sh(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?} failed: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    out
}

/// Everything one process published.
#[derive(Default, Debug)]
pub struct Proc {
    pub batches: Vec<BatchHeader>,
    pub ops: Vec<GpuOp>,
    pub strings: HashMap<u32, String>,
    pub infos: Vec<Info>,
    pub clocks: Vec<ClockSync>,
    pub counters: Vec<Counters>,
    /// Ops whose string ids had not been sent (in this or an earlier batch) when they arrived.
    pub dangling_ids: usize,
}

/// Decodes a dump file (every batch must validate) into per-pid records.
pub fn read_dump(path: &Path) -> HashMap<u32, Proc> {
    // No dump is not "no ops": the agent did not write (or the test looked in the wrong place).
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("the agent's dump {}: {e}", path.display()));
    let mut out: HashMap<u32, Proc> = HashMap::new();
    let mut off = 0;
    while off < data.len() {
        let (b, n) = decode_prefix(&data[off..]).unwrap_or_else(|e| panic!("{}: offset {off}: {e}", path.display()));
        let p = out.entry(b.header.pid).or_default();
        p.batches.push(b.header);
        for r in b.records() {
            match r {
                Record::GpuOp(o) => {
                    for id in [o.api_name_id, o.kernel_name_id] {
                        if id != 0 && !p.strings.contains_key(&id) {
                            p.dangling_ids += 1;
                        }
                    }
                    p.ops.push(o)
                }
                Record::String(s) => {
                    p.strings.insert(s.id, String::from_utf8_lossy(s.bytes).into_owned());
                }
                Record::Info(i) => p.infos.push(i),
                Record::ClockSync(c) => p.clocks.push(c),
                Record::Counters(c) => p.counters.push(c),
            }
        }
        off += n;
    }
    out
}
