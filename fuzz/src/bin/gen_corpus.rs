//! Writes the seed corpora under fuzz/corpus/ (run from fuzz/: `cargo run --bin gen_corpus`).
//! Seeds are small valid inputs plus their interesting truncations; libFuzzer mutates from there.

use std::fs;
use std::path::Path;

use rtl_common::agent::{self, BatchWriter, ClockSync, Counters, GpuOp};
use rtl_common::{AgentBatch, ApiEnter, ApiExit, EventHeader, EventKind, StringEnter, TaskEvent, MAX_ARGS};

fn bytes<T>(v: &T) -> Vec<u8> {
    // SAFETY: reading the bytes of a plain #[repr(C)] value.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }.to_vec()
}

fn put(dir: &str, name: &str, b: &[u8]) {
    let d = Path::new("corpus").join(dir);
    fs::create_dir_all(&d).unwrap();
    fs::write(d.join(name), b).unwrap();
}

fn hdr(kind: EventKind) -> EventHeader {
    EventHeader { kind: kind as u32, api_id: 3, pid_tgid: (4242 << 32) | 4243, ts_ns: 1_000_000 }
}

fn batch() -> Vec<u8> {
    let mut buf = vec![0u8; 4096];
    let mut w = BatchWriter::new(&mut buf, 4242, 7).unwrap();
    w.push_clock(&ClockSync { realtime_ns: 2, monotonic_ns: 1, uncertainty_ns: 10, gpu_clock: 2, ..Default::default() });
    w.push_string(1, 1, 0, b"hipLaunchKernel");
    w.push_string(2, 2, 0, b"_Z6vecAddPfS_S_i");
    w.push_gpu_op(&GpuOp {
        source: 1,
        op: 0,
        cpu_clock: 2,
        gpu_clock: 2,
        device: 0,
        api_name_id: 1,
        kernel_name_id: 2,
        cpu_start_ns: 100,
        cpu_end_ns: 200,
        gpu_begin_ns: 300,
        gpu_end_ns: 400,
        grid: [1, 1, 1],
        block: [64, 1, 1],
        ..Default::default()
    });
    w.push_counters(&Counters { records_seen: 1, gpu_ops_seen: 1, ..Default::default() });
    w.finish(0).to_vec()
}

fn main() {
    // Ring-buffer records.
    let enter = ApiEnter { hdr: hdr(EventKind::ApiEnter), args: [7; MAX_ARGS], fsbase: 0x7f00_0000_0000 };
    let exit = ApiExit { hdr: hdr(EventKind::ApiExit), ret: 0, out: 0x1000, has_out: 1, _pad: 0 };
    let mut text = [0u8; rtl_common::STRING_ARG_LEN];
    text[..7].copy_from_slice(b"marker!");
    let senter = StringEnter { enter: ApiEnter { hdr: hdr(EventKind::StringEnter), ..enter }, text };
    let mut unterminated = senter;
    unterminated.text = [b'x'; rtl_common::STRING_ARG_LEN];
    let task = TaskEvent { hdr: hdr(EventKind::Fork), child_tgid: 4244, _pad: 0 };
    let b = batch();
    let mut ab = AgentBatch { hdr: hdr(EventKind::AgentBatch), len: b.len() as u32, copied: b.len() as u32, data: [0; 4096] };
    ab.data[..b.len()].copy_from_slice(&b);
    let ab_bytes = bytes(&ab);
    let ab_short = ab_bytes[..std::mem::offset_of!(AgentBatch, data) + b.len()].to_vec();
    for (name, rec) in [
        ("enter", bytes(&enter)),
        ("exit", bytes(&exit)),
        ("string_enter", bytes(&senter)),
        ("string_unterminated", bytes(&unterminated)),
        ("fork", bytes(&task)),
        ("thread_exit", bytes(&TaskEvent { hdr: hdr(EventKind::ThreadExit), ..task })),
        ("agent_batch", ab_short),
        ("enter_truncated", bytes(&enter)[..40].to_vec()),
        ("header_only", bytes(&hdr(EventKind::ApiExit))),
    ] {
        put("record_decode", &format!("{name}.bin"), &rec);
    }
    // Agent batches.
    assert!(agent::decode(&b).is_ok(), "seed batch must be valid");
    put("agent_decode", "batch.bin", &b);
    put("agent_decode", "two_batches.bin", &[b.clone(), b.clone()].concat());
    put("agent_decode", "header_only.bin", &b[..32.min(b.len())]);
    put("agent_decode", "truncated.bin", &b[..b.len() - 8]);
    // Symbols: a small real shared library (built by the caller, see fuzz/README.md) and cuts.
    if let Ok(so) = fs::read("corpus/seed.so") {
        put("symbols", "small.so", &so);
        put("symbols", "cut_64.so", &so[..64]);
        put("symbols", "cut_half.so", &so[..so.len() / 2]);
        let mut elf32 = so.clone();
        elf32[4] = 1;
        put("symbols", "class32.so", &elf32);
        let _ = fs::remove_file("corpus/seed.so");
    }
    eprintln!("corpora written under corpus/");
}
