//! What traced processes can make the collector hold (issue 15): names from forged agent
//! batches and from kernel registrations are bounded per process and in total, demangling is
//! capped, kernel tables are shared by forked processes, not copied; and a short-lived process
//! is named by what the kernel saw at its exec, not by a /proc entry that is gone.
//!
//! Needs root (eBPF), gcc, python3 and the workloads and simulator.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use rtl_user::join::strings::PER_PROCESS_BYTES;
use rtl_user::probe::demangle::MAX_DEMANGLED;

const EVIL_AGENT_C: &str =
    "void rtl_agent_publish(const void *data, unsigned long len) { __asm__ volatile(\"\" :: \"r\"(data), \"r\"(len) : \"memory\"); }\n";

/// Publishes forged batches through a fake agent: first one kernel-name string that demangles
/// to gigabytes, then N batches of two unique 2000-byte strings each.
const FLOOD_PY: &str = r#"
import ctypes, os, struct, sys
ctypes.CDLL(sys.argv[1])
evil = ctypes.CDLL(sys.argv[2])
pub = evil.rtl_agent_publish
pub.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
pub.restype = None
N = int(sys.argv[3])
bomb = sys.argv[4].encode()
print("ready", flush=True)
sys.stdin.readline()
pid = os.getpid()
def string_rec(sid, kind, text):
    body = struct.pack("<HHIIBBHII", 2, 0, 0, sid, kind, 0, 0, len(text), 0)[:24] + text
    body += b"\0" * (-len(body) % 8)
    return body[:4] + struct.pack("<I", len(body)) + body[8:]
def batch(seq, recs):
    payload = b"".join(recs)
    return struct.pack("<IHHIIIIQ", 0x47414c52, 1, 32, 32 + len(payload), len(recs), pid, 0, seq) + payload
def send(b):
    buf = ctypes.create_string_buffer(b, len(b))
    pub(ctypes.cast(buf, ctypes.c_void_p), len(b))
send(batch(1, [string_rec(1, 1, bomb)]))
sid = 2
for i in range(N):
    recs = []
    for _ in range(2):
        recs.append(string_rec(sid, 1, (b"%08d" % sid) * 250))
        sid += 1
    send(batch(2 + i, recs))
print("done", flush=True)
"#;

/// `_Z1fI...`: each level doubles the demangled text (the issue's 458-byte name became 126 MB).
fn exploding_name(levels: usize) -> String {
    let b36 = |mut n: usize| {
        let d = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut v = Vec::new();
        loop {
            v.push(d[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        v.reverse();
        String::from_utf8(v).unwrap()
    };
    let sub = |i: usize| if i == 0 { "S_".to_string() } else { format!("S{}_", b36(i - 1)) };
    let mut s = format!("_Z1fI1A1BI{}{}E", sub(1), sub(1));
    for k in 2..=levels {
        s.push_str(&format!("{}I{}{}E", sub(2), sub(k + 1), sub(k + 1)));
    }
    s + "EvT_"
}

fn m(db: &std::path::Path, tag: &str) -> u64 {
    meta(db, tag).unwrap_or_else(|| panic!("metadata {tag}")).parse().unwrap()
}

/// A metadata value as text, "-" when absent (for messages).
fn t(db: &std::path::Path, tag: &str) -> String {
    meta(db, tag).unwrap_or_else(|| "-".into())
}

/// Item 9: 300 000 unique 2000-byte strings in forged batches, and a 460-byte name that would
/// demangle to gigabytes. The collector keeps at most PER_PROCESS_BYTES of one process's names,
/// counts every string it refused, cuts the bomb's demangled text, and its memory stays bounded
/// (before the fix: every string kept, ~95 MB/s of growth).
#[test]
fn forged_agent_strings_are_bounded_and_counted() {
    require_root();
    let d = tmpdir();
    let so = d.path().join("librtl_agent_evil.so");
    std::fs::write(d.path().join("evil.c"), EVIL_AGENT_C).unwrap();
    let st = Command::new("gcc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&so).arg(d.path().join("evil.c")).status().expect("gcc");
    assert!(st.success());
    let py = d.path().join("flood.py");
    std::fs::write(&py, FLOOD_PY).unwrap();
    const N: u64 = 150_000;
    let bomb = exploding_name(40);
    assert!(bomb.len() <= 512, "{}", bomb.len());
    let mut app = Killed(
        Command::new("python3")
            .arg(&py)
            .args(["/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", so.to_str().unwrap(), &N.to_string(), &bomb])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = BufReader::new(app.0.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let db = d.path().join("t.db");
    let mut tracer =
        rtl_start(&["attach", "--quiet", "--apis", "hipGetErrorString", "--pid", &app.0.id().to_string(), "-o", db.to_str().unwrap()]);
    app.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    drop(app.0.stdin.take());
    app.0.wait().unwrap();
    // The traced process exited: the session ends by itself once it has written everything.
    let status = wait_exit(&mut tracer.0, 240);
    assert!(status.success(), "{status}");
    let sent = 2 * N + 1;
    let summary = format!(
        "batches {} rejected {} drops {} refused {} peak {} B demangled-cut {} collector RSS {} kB, CPU {} s",
        t(&db, "agent_batches"),
        t(&db, "agent_batches_rejected"),
        t(&db, "ringbuf_drops"),
        t(&db, "agent_strings_refused"),
        t(&db, "agent_strings_peak_bytes"),
        t(&db, "names_demangled_cut"),
        t(&db, "collector_peak_rss_kb"),
        t(&db, "collector_cpu_s")
    );
    eprintln!("forged strings: {summary}");
    assert_eq!(m(&db, "ringbuf_drops"), 0, "{summary}");
    assert_eq!(m(&db, "agent_batches"), N + 1, "{summary}");
    assert_eq!(m(&db, "agent_batches_rejected"), 0, "{summary}");
    // Every string either kept or counted: the bomb (demangled, cut at MAX_DEMANGLED bytes and
    // "...") and as many 2000-byte strings as fit in one process's budget (each costs its
    // bytes + 64).
    let kept_big = (PER_PROCESS_BYTES - (MAX_DEMANGLED + 3 + 64)) / (2000 + 64);
    assert_eq!(m(&db, "agent_strings_refused"), sent - 1 - kept_big as u64, "{summary}");
    assert!(m(&db, "agent_strings_peak_bytes") <= PER_PROCESS_BYTES as u64, "{summary}");
    assert_eq!(m(&db, "names_demangled_cut"), 1, "{summary}");
    // 600 MB of strings were sent: the collector held at most PER_PROCESS_BYTES of them.
    assert!(m(&db, "collector_peak_rss_kb") < 450 << 10, "{summary}");
}

/// Registers K kernels through the simulator's __hipRegisterFunction, then forks F children
/// that exit at once.
const FORKER_PY: &str = r#"
import ctypes, os, sys
hip = ctypes.CDLL(sys.argv[1])
reg = hip.__hipRegisterFunction
reg.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint,
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
K, F = int(sys.argv[2]), int(sys.argv[3])
for i in range(K):
    name = b"_Z18kernel_number_%06dPfS_i" % i
    reg(None, 0x100000 + 16 * i, name, name, 0, None, None, None, None, None)
for _ in range(F):
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
print("registered", K, "forked", F, flush=True)
"#;

fn kernels_then_forks(d: &std::path::Path, forks: u32) -> (u64, f64) {
    let py = d.join("forker.py");
    std::fs::write(&py, FORKER_PY).unwrap();
    let db = d.join(format!("t{forks}.db"));
    let lib = sim_lib().join("libamdhip64.so.5");
    let out = Command::new(rtl())
        .args(["run", "--quiet", "--gpu", "none", "--apis", "__hipRegisterFunction", "-o", db.to_str().unwrap(), "--", "python3"])
        .arg(&py)
        .args([lib.to_str().unwrap(), "20000", &forks.to_string()])
        .env("LD_LIBRARY_PATH", sim_lib())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let calls = traced_calls(&db).iter().filter(|c| c.name == "__hipRegisterFunction").count();
    assert_eq!(calls, 20_000, "every registration traced");
    let r = (m(&db, "collector_peak_rss_kb"), meta(&db, "collector_cpu_s").unwrap().parse().unwrap());
    eprintln!("20 000 kernels, {forks} forks: peak RSS {} kB, CPU {:.2} s", r.0, r.1);
    assert_eq!(m(&db, "kernel_names_refused"), 0);
    r
}

/// Item 10: 20 000 registered kernels and 300 forks cost the collector what 20 000 kernels cost
/// (before the fix each fork copied the whole table: 751 MB against 158 MB, 7.7 s of CPU).
#[test]
fn forked_children_share_their_parents_kernel_names() {
    require_root();
    let d = tmpdir();
    let (rss0, cpu0) = kernels_then_forks(d.path(), 0);
    let (rss300, cpu300) = kernels_then_forks(d.path(), 300);
    eprintln!("20 000 kernels: peak RSS {rss0} kB, CPU {cpu0:.2} s; with 300 forks: peak RSS {rss300} kB, CPU {cpu300:.2} s");
    let _ = (cpu0, cpu300);
    assert!(rss300 < rss0 + (48 << 10), "300 forks grew the collector from {rss0} kB to {rss300} kB");
}

/// Exec capture: 40 processes that exec, make 100 calls and exit while the collector is stopped
/// (so their /proc entries are gone before their first call is decoded) are still named in the
/// trace: the executable, the command line and the parent, as the kernel saw them at the exec
/// (before the fix: empty).
#[test]
fn short_lived_processes_are_named_from_their_exec() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let tracer = rtl_start(&["--all", "--quiet", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap()]);
    signal(tracer.id(), libc::SIGSTOP);
    let hot = workload("hot_loop");
    let script = format!("for i in $(seq 40); do {} --calls 100 --api geterrorstring >/dev/null & done; wait; echo $$", hot.display());
    let out = Command::new("sh").args(["-c", &script]).output().unwrap();
    let shell: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    signal(tracer.id(), libc::SIGCONT);
    std::thread::sleep(Duration::from_millis(300));
    rtl_stop(tracer);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut st = conn
        .prepare("SELECT p.pid, p.ppid, p.exe, p.cmdline FROM rtl_process p WHERE p.pid IN (SELECT DISTINCT pid FROM rocpd_api)")
        .unwrap();
    let rows: Vec<(u32, Option<u32>, String, String)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))).unwrap().map(Result::unwrap).collect();
    let mine: Vec<_> = rows.iter().filter(|r| r.1 == Some(shell)).collect();
    assert_eq!(mine.len(), 40, "40 short-lived processes with calls and their parent: {rows:?}");
    for (pid, _, exe, cmdline) in &mine {
        assert_eq!(exe, hot.to_str().unwrap(), "pid {pid}");
        assert!(cmdline.starts_with(&format!("{} --calls 100 --api geterrorstring", hot.display())), "pid {pid}: {cmdline}");
    }
    let calls = traced_calls(&db);
    for (pid, ..) in &mine {
        assert_eq!(calls.iter().filter(|c| c.pid == *pid && c.status == 0).count(), 100, "pid {pid}");
    }
    assert_eq!(m(&db, "ringbuf_drops"), 0);
}

/// Item 10, the other half: a process's kernel names are freed when it exits. Five processes
/// in a row, each registering 20 000 kernels, hold at most about two tables at once (the next
/// one's registrations may be decoded in the same chunk as the previous one's exit); before the
/// fix all five stayed until the end.
#[test]
fn exited_processes_free_their_kernel_names() {
    require_root();
    let d = tmpdir();
    let py = d.path().join("forker.py");
    std::fs::write(&py, FORKER_PY).unwrap();
    let lib = sim_lib().join("libamdhip64.so.5");
    let peak = |runs: u32| -> u64 {
        let db = d.path().join(format!("seq{runs}.db"));
        let script = format!("for i in $(seq {runs}); do python3 {} {} 20000 0 || exit 1; done", py.display(), lib.display());
        let out = Command::new(rtl())
            .args([
                "run",
                "--quiet",
                "--gpu",
                "none",
                "--apis",
                "__hipRegisterFunction",
                "-o",
                db.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &script,
            ])
            .env("LD_LIBRARY_PATH", sim_lib())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let calls = traced_calls(&db).iter().filter(|c| c.name == "__hipRegisterFunction").count();
        assert_eq!(calls, 20_000 * runs as usize, "every registration traced");
        let p = meta(&db, "kernel_names_peak_bytes").map(|v| v.parse().unwrap());
        eprintln!(
            "{runs} processes x 20 000 kernels: kernel-name tables peak {p:?} bytes, collector RSS {} kB",
            t(&db, "collector_peak_rss_kb")
        );
        p.expect("metadata kernel_names_peak_bytes")
    };
    let one = peak(1);
    let five = peak(5);
    assert!(five < one * 5 / 2, "5 processes in a row held {five} bytes of kernel names, one holds {one}");
}
