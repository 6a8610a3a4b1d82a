//! Bad input and bad output (issue 8): malformed ELF files as `--lib`, hostile ring-buffer
//! records, command-line nonsense, PIDs that vanish between the check and the attach, a disk
//! that fills up while tracing and an output that cannot be written. Every case ends in a clear
//! one-line error with its documented exit code, never a crash, never a corrupt file.
//!
//! Needs root (eBPF; the disk-full case mounts a tmpfs) and the workloads.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use rtl_user::collect::decode::{decode, Event};
use rtl_user::probe::symbols::Symbols;
use rusqlite::Connection;

fn libc_so() -> PathBuf {
    ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("libc.so.6")
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Malformed variants of a valid x86-64 shared library (ELF64 header offsets: e_phoff 0x20,
/// e_shoff 0x28, e_phnum 0x38, e_shentsize 0x3a, e_shnum 0x3c, e_shstrndx 0x3e).
fn malformed_elves(good: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let shoff = u64_at(good, 0x28) as usize;
    let shnum = u16_at(good, 0x3c) as usize;
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = good.to_vec();
        f(&mut v);
        v
    };
    // Every .dynsym section header (sh_type 11) turned into PROGBITS.
    let no_dynsym = with(&|v| {
        for i in 0..shnum {
            let h = shoff + i * 64;
            if u32_at(v, h + 4) == 11 {
                v[h + 4..h + 8].copy_from_slice(&1u32.to_le_bytes());
            }
        }
    });
    vec![
        ("empty", Vec::new()),
        ("three bytes of magic", good[..3].to_vec()),
        ("ELF header only", good[..64].to_vec()),
        ("first page", good[..4096].to_vec()),
        ("truncated at half", good[..good.len() / 2].to_vec()),
        ("section headers cut off", good[..shoff + 10].to_vec()),
        ("wrong class (ELF32)", with(&|v| v[4] = 1)),
        ("wrong byte order", with(&|v| v[5] = 2)),
        ("wrong machine (aarch64)", with(&|v| v[18..20].copy_from_slice(&183u16.to_le_bytes()))),
        ("missing dynsym", no_dynsym),
        (
            "no section headers",
            with(&|v| {
                v[0x28..0x30].copy_from_slice(&0u64.to_le_bytes());
                v[0x3c..0x3e].copy_from_slice(&0u16.to_le_bytes());
            }),
        ),
        ("huge section count", with(&|v| v[0x3c..0x3e].copy_from_slice(&0xffffu16.to_le_bytes()))),
        ("section table past the end", with(&|v| v[0x28..0x30].copy_from_slice(&(u64::MAX - 63).to_le_bytes()))),
        ("huge program header count", with(&|v| v[0x38..0x3a].copy_from_slice(&0xffffu16.to_le_bytes()))),
        ("bad section entry size", with(&|v| v[0x3a..0x3c].copy_from_slice(&1u16.to_le_bytes()))),
        ("string table index out of range", with(&|v| v[0x3e..0x40].copy_from_slice(&0xfffeu16.to_le_bytes()))),
        ("not an ELF", b"#!/bin/sh\necho hello\n".to_vec()),
    ]
}

fn no_crash(err: &str) {
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "crash: {err}");
}

#[test]
fn malformed_elf_libraries_exit_6_without_a_crash_or_a_file() {
    require_root();
    let d = tmpdir();
    let good = std::fs::read(libc_so()).unwrap();
    let db = d.path().join("t.db");
    let mut cases: Vec<(String, PathBuf)> = Vec::new();
    for (name, bytes) in malformed_elves(&good) {
        let p = d.path().join(format!("lib-{}.so", name.replace(' ', "_")));
        std::fs::write(&p, &bytes).unwrap();
        cases.push((name.to_string(), p));
    }
    // Not regular files: a directory, a missing path, an endless device and a FIFO nobody writes
    // (reading either would never end).
    let fifo = d.path().join("fifo.so");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    for (name, p) in [
        ("a directory", d.path().to_path_buf()),
        ("missing", d.path().join("nope.so")),
        ("/dev/zero", "/dev/zero".into()),
        ("a FIFO", fifo),
    ] {
        cases.push((name.to_string(), p));
    }
    for (name, p) in &cases {
        let mut child = Command::new(rtl())
            .args(["--all", "--quiet", "--duration", "0.2", "--apis", "hipGetErrorString", "--lib"])
            .arg(p)
            .args(["-o", db.to_str().unwrap()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let status = wait_exit(&mut child, 30);
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        no_crash(&err);
        assert_eq!(status.code(), Some(6), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: one line: {err}");
        assert!(err.starts_with("rtl-ebpf: error:"), "{name}: {err}");
        assert!(!db.exists(), "{name}: no trace file is created for a bad --lib");
        eprintln!("{name}: {}", err.trim());
    }
    // list-apis reads --lib the same way.
    let out = rtl_run(&["list-apis", "--lib", cases[0].1.to_str().unwrap()]);
    no_crash(&String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0));
}

/// A small xorshift generator: deterministic mutations.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn symbol_resolver_survives_random_header_mutations() {
    let good = std::fs::read(libc_so()).unwrap();
    // Only the headers matter to the parser's structure: keep the first 64 KiB and the section
    // header table so that each parse is cheap.
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let shoff = u64_at(&good, 0x28) as usize;
    let mut parsed = 0;
    for i in 0..3000 {
        let mut v = good.clone();
        for _ in 0..(1 + rng.next() % 8) {
            // Mutate the ELF header, the program headers or the section headers.
            let region = match rng.next() % 3 {
                0 => 0..64,
                1 => 64..64 + 56 * 12,
                _ => shoff..v.len(),
            };
            let at = region.start + (rng.next() as usize) % (region.end - region.start);
            v[at] = rng.next() as u8;
        }
        if i % 10 == 0 {
            v.truncate((rng.next() as usize) % v.len());
        }
        let r = std::panic::catch_unwind(|| Symbols::parse(&v).map(|s| s.len()));
        match r {
            Ok(Ok(_)) => parsed += 1,
            Ok(Err(_)) => {}
            Err(_) => panic!("Symbols::parse panicked on mutation {i}"),
        }
    }
    eprintln!("3000 mutated libc headers: {parsed} still parsed, the rest rejected, no panic");
}

#[test]
fn hostile_ring_buffer_records_are_rejected_not_trusted() {
    use rtl_common::{AgentBatch, EventKind, StringEnter};
    let mut rng = Rng(42);
    let sizes = [0usize, 1, 8, 23, 24, 25, 40, 127, 128, 129, 136, 383, 384, 385, 4200, 9000];
    let mut rejected = 0;
    let mut tried = 0;
    for kind in 0u32..10 {
        for &n in &sizes {
            for _ in 0..20 {
                let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                if n >= 4 {
                    b[..4].copy_from_slice(&kind.to_le_bytes());
                }
                tried += 1;
                match decode(&b) {
                    Err(_) => rejected += 1,
                    Ok(Event::StringEnter(_, s)) => assert!(s.len() <= 3 * rtl_common::STRING_ARG_LEN, "string bounded"),
                    Ok(Event::Agent(_, data, _)) => assert!(data.len() <= n && data.len() <= rtl_common::AGENT_BATCH_MAX),
                    Ok(_) => {}
                }
            }
        }
    }
    // A string argument without its terminator is cut at the buffer, never read past it.
    let mut s = vec![b'A'; std::mem::size_of::<StringEnter>()];
    s[..4].copy_from_slice(&(EventKind::StringEnter as u32).to_le_bytes());
    match decode(&s).unwrap() {
        Event::StringEnter(_, t) => assert_eq!(t.len(), rtl_common::STRING_ARG_LEN),
        e => panic!("{e:?}"),
    }
    // An agent batch that claims more bytes than it carries.
    let head = std::mem::offset_of!(AgentBatch, data);
    let mut a = vec![0u8; head + 16];
    a[..4].copy_from_slice(&(EventKind::AgentBatch as u32).to_le_bytes());
    a[std::mem::offset_of!(AgentBatch, len)..][..4].copy_from_slice(&u32::MAX.to_le_bytes());
    a[std::mem::offset_of!(AgentBatch, copied)..][..4].copy_from_slice(&u32::MAX.to_le_bytes());
    match decode(&a).unwrap() {
        Event::Agent(_, d, len) => assert_eq!((d.len(), len), (16, u32::MAX)),
        e => panic!("{e:?}"),
    }
    // ... and whose payload is garbage: the wire decoder rejects it.
    assert!(rtl_common::agent::decode(&[0xAB; 16]).is_err());
    // Joining hostile (but well-formed) events: unknown API ids, returns without entries,
    // exits of unknown threads. Nothing panics, the orphans are counted.
    let mut j = rtl_user::join::Joiner::new(0);
    let mut rows = Vec::new();
    for _ in 0..5000 {
        let mut b = [0u8; 136];
        for x in b.iter_mut() {
            *x = rng.next() as u8;
        }
        let kind = 1 + (rng.next() % 10) as u32;
        b[..4].copy_from_slice(&kind.to_le_bytes());
        b[8..16].copy_from_slice(&(((rng.next() % 4) << 32) | (rng.next() % 4)).to_le_bytes());
        if let Ok(ev) = decode(
            &b[..match kind {
                1 => 128,
                2 => 48,
                3 => 128 + 256,
                10 => 80,
                _ => 32,
            }
            .min(b.len())],
        ) {
            j.push(ev, &mut rows);
        }
    }
    j.finish(&mut rows);
    eprintln!("{tried} random records: {rejected} rejected; 5000 random events joined without a panic");
}

#[test]
fn command_line_nonsense_is_exit_2_with_no_file() {
    let d = tmpdir();
    let db = d.path().join("t.db");
    let o = db.to_str().unwrap();
    let cases: Vec<Vec<&str>> = vec![
        vec!["--all", "--duration", "-3", "-o", o],
        vec!["--all", "--duration", "0", "-o", o],
        vec!["--all", "--duration", "-0", "-o", o],
        vec!["--all", "--duration", "nan", "-o", o],
        vec!["--all", "--duration", "inf", "-o", o],
        vec!["--all", "--duration", "1e400", "-o", o],
        vec!["--all", "--duration", "", "-o", o],
        // "10s" is valid since issue 16 (humantime); a unit that is none, or longer than a year
        // (1e300 used to panic after attaching), is not
        vec!["--all", "--duration", "10 parsecs", "-o", o],
        vec!["--all", "--duration", "1e300", "-o", o],
        vec!["--all", "--duration", "366days", "-o", o],
        vec!["--all", "--buffer-mb", "0", "-o", o],
        vec!["--all", "--buffer-mb", "3", "-o", o],
        vec!["--all", "--buffer-mb", "4096", "-o", o],
        vec!["--all", "--buffer-mb", "-1", "-o", o],
        vec!["--all", "--buffer-mb", "99999999999", "-o", o],
        vec!["--all", "--apis", "", "-o", o],
        vec!["--all", "--apis", ",,,", "-o", o],
        vec!["attach", "-o", o],
        vec!["attach", "--pid", "-o", o],
        vec!["attach", "--pid", "abc", "-o", o],
        vec!["attach", "--pid", "-5", "-o", o],
        vec!["attach", "--pid", "99999999999", "-o", o],
        vec!["attach", "--pid", "1", "--all", "-o", o],
        vec!["run", "-o", o],
        vec!["run", "-o", o, "--"],
        vec!["--bogus"],
        vec!["--all", "--pid", "1", "-o", o],
        vec!["summary"],
        vec!["merge", "-o", o],
    ];
    for args in &cases {
        let out = rtl_run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        no_crash(&err);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!db.exists(), "{args:?} created the output");
    }
    eprintln!("{} nonsense command lines: exit 2, no file", cases.len());
}

#[test]
fn pids_that_vanish_between_check_and_attach() {
    require_root();
    let d = tmpdir();
    // A zombie: /proc/PID exists, its maps are empty.
    let mut z = Command::new("true").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let db = d.path().join("z.db");
    let out = rtl_run(&["attach", "--quiet", "--pid", &z.id().to_string(), "-o", db.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    no_crash(&err);
    assert_eq!(out.status.code(), Some(5), "zombie: {err}");
    assert!(!db.exists());
    z.wait().unwrap();
    // A pid that certainly does not exist any more.
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        let id = c.id();
        c.wait().unwrap();
        id
    };
    let out = rtl_run(&["attach", "--quiet", "--pid", &gone.to_string(), "-o", db.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(5), "{}", String::from_utf8_lossy(&out.stderr));
    // Real HIP processes that exit at every moment of the attach (they live 0..~120 ms).
    let mut outcomes = (0, 0);
    for i in 0..8u64 {
        let db = d.path().join(format!("r{i}.db"));
        let mut app = Command::new(workload("hot_loop"))
            .args(["--seconds", &format!("{:.3}", i as f64 * 0.015), "--api", "geterrorstring"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let out = rtl_run(&[
            "attach",
            "--quiet",
            "--duration",
            "0.5",
            "--apis",
            "hipGetErrorString",
            "--pid",
            &app.id().to_string(),
            "-o",
            db.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        no_crash(&err);
        app.wait().unwrap();
        match out.status.code() {
            Some(0) => {
                outcomes.0 += 1;
                let c = Connection::open(&db).unwrap();
                let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
                assert_eq!(ok, "ok");
            }
            Some(5) => {
                outcomes.1 += 1;
                assert!(err.contains("PID") || err.contains("no process") || err.contains("could be probed"), "{err}");
                assert!(!db.exists() || Connection::open(&db).is_ok());
            }
            c => panic!("vanishing pid {i}: exit {c:?}: {err}"),
        }
    }
    eprintln!("vanishing pids: {} attached then saw it go, {} refused with exit 5", outcomes.0, outcomes.1);
}

fn mount_tmpfs(dir: &Path, opts: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let st = Command::new("mount").args(["-t", "tmpfs", "-o", opts, "tmpfs"]).arg(dir).status().unwrap();
    assert!(st.success(), "mount tmpfs {opts} on {}", dir.display());
}

struct Umount(PathBuf);
impl Drop for Umount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn disk_full_is_a_clear_error_and_leaves_no_corrupt_file() {
    require_root();
    let d = tmpdir();
    let mnt = d.path().join("small");
    mount_tmpfs(&mnt, "size=2m,mode=0700");
    let _u = Umount(mnt.clone());
    let db = mnt.join("t.db");
    let hl = workload("hot_loop");
    let out = Command::new(rtl())
        .args(["run", "--quiet", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap(), "--"])
        .arg(&hl)
        .args(["--threads", "2", "--seconds", "20", "--api", "geterrorstring"])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("{err}");
    no_crash(&err);
    assert_eq!(out.status.code(), Some(7), "disk full is an output error: {err}");
    let last = err.lines().rev().find(|l| l.contains("error:")).unwrap_or("");
    assert!(last.contains("full") || last.contains("No space"), "the error says why: {last}");
    assert!(last.contains(db.to_str().unwrap()), "the error names the file: {last}");
    // No corrupt file: either none, or a database that opens and checks out.
    if db.exists() {
        let c = Connection::open(&db).unwrap();
        let ok: String = c.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
        assert_eq!(ok, "ok");
        let n: i64 = c.query_row("SELECT count(*) FROM rocpd_api", [], |r| r.get(0)).unwrap();
        eprintln!("disk full: {n} API rows kept in a consistent file");
    }
}

#[test]
fn unwritable_outputs_are_exit_7_and_touch_nothing() {
    require_root();
    let d = tmpdir();
    let ro = d.path().join("ro");
    mount_tmpfs(&ro, "size=1m,ro");
    let _u = Umount(ro.clone());
    let dir_out = d.path().join("adir");
    std::fs::create_dir(&dir_out).unwrap();
    let ro_db = ro.join("t.db");
    let cases: Vec<(&str, PathBuf)> = vec![
        ("read-only file system", ro_db.clone()),
        ("a directory", dir_out.clone()),
        ("a directory with --force", dir_out.clone()),
        ("in /proc", PathBuf::from("/proc/rtl-test.db")),
        ("missing parent", d.path().join("no/such/dir/t.db")),
    ];
    for (name, p) in cases {
        let mut args = vec!["--all", "--quiet", "--duration", "0.2", "--apis", "hipGetErrorString", "-o", p.to_str().unwrap()];
        if name.ends_with("--force") {
            args.push("--force");
        }
        let out = rtl_run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        no_crash(&err);
        assert_eq!(out.status.code(), Some(7), "{name}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{name}: one line: {err}");
    }
    assert!(!ro_db.exists());
    assert!(dir_out.is_dir(), "--force never removes a directory");
}

const EVIL_AGENT_C: &str =
    "void rtl_agent_publish(const void *data, unsigned long len) { __asm__ volatile(\"\" :: \"r\"(data), \"r\"(len) : \"memory\"); }\n";

const EVIL_PY: &str = r#"
import ctypes, os, random, struct, sys
ctypes.CDLL(sys.argv[1])                      # the HIP library: a HIP process to attach to
evil = ctypes.CDLL(sys.argv[2])               # a fake agent exporting rtl_agent_publish
pub = evil.rtl_agent_publish
pub.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
pub.restype = None
print("ready", flush=True)
sys.stdin.readline()
def send(b, n=None):
    buf = ctypes.create_string_buffer(b, max(len(b), 1))
    pub(ctypes.cast(buf, ctypes.c_void_p), len(b) if n is None else n)
rnd = random.Random(8)
G = int(sys.argv[3])
for i in range(G):                            # garbage of every size
    send(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 4096))))
send(b"")                                     # an empty batch
hdr = lambda total, count, pid: struct.pack("<IHHIIIIQ", 0x47414c52, 1, 32, total, count, pid, 0, 1)
send(hdr(32, 1000000, os.getpid()))           # a count far beyond its bytes
send(hdr(40, 1, os.getpid()) + struct.pack("<HHI", 1, 0, 0xfffffff8))  # a record longer than the batch
send(hdr(32, 0, os.getpid() + 1))             # another process's batch
send(hdr(32, 0, os.getpid()))                 # a valid (empty) batch: accepted
send(b"x" * 5000)                             # longer than a ring-buffer record
pub(None, 100)                                # a NULL pointer
pub(0x10, 64)                                 # a pointer to nowhere
print("done", flush=True)
"#;

#[test]
fn hostile_agent_batches_are_rejected_and_counted() {
    require_root();
    let d = tmpdir();
    let so = d.path().join("librtl_agent_evil.so");
    let c = d.path().join("evil.c");
    std::fs::write(&c, EVIL_AGENT_C).unwrap();
    let st = Command::new("gcc").args(["-shared", "-fPIC", "-O1", "-o"]).arg(&so).arg(&c).status().expect("gcc");
    assert!(st.success());
    let py = d.path().join("evil.py");
    std::fs::write(&py, EVIL_PY).unwrap();
    const G: u64 = 200;
    let mut app = Command::new("python3")
        .arg(&py)
        .args(["/usr/lib/x86_64-linux-gnu/libamdhip64.so.5", so.to_str().unwrap(), &G.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(app.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let db = d.path().join("t.db");
    let tracer =
        rtl_start(&["attach", "--quiet", "--apis", "hipGetErrorString", "--pid", &app.id().to_string(), "-o", db.to_str().unwrap()]);
    std::io::Write::write_all(app.stdin.as_mut().unwrap(), b"go\n").unwrap();
    line.clear();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    assert_eq!(line.trim(), "done");
    std::thread::sleep(Duration::from_millis(500));
    rtl_stop(tracer);
    app.wait().unwrap();
    let m = |t: &str| meta(&db, t).unwrap_or_else(|| panic!("metadata {t}")).parse::<u64>().unwrap();
    let summary = format!(
        "batches {} rejected {} oversized {} truncated-in-kernel {} records_rejected {} gpu_ops {}",
        m("agent_batches"),
        m("agent_batches_rejected"),
        m("agent_batches_oversized"),
        m("agent_batches_truncated"),
        m("records_rejected"),
        m("gpu_ops")
    );
    assert_eq!(m("ringbuf_drops"), 0, "{summary}");
    assert_eq!(m("agent_batches"), G + 8, "{summary}");
    // G garbage + the empty one + bad count + overlong record + another pid's batch.
    assert_eq!(m("agent_batches_rejected"), G + 4, "{summary}");
    // Oversized, NULL and nowhere: the probe copied nothing and said so.
    assert_eq!(m("agent_batches_oversized"), 3, "{summary}");
    assert_eq!(m("agent_batches_truncated"), 3, "{summary}");
    assert_eq!(m("records_rejected"), 0, "{summary}");
    assert_eq!(m("gpu_ops"), 0, "{summary}");
    let ok: String = Connection::open(&db).unwrap().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
    eprintln!("hostile agent: {summary}");
}
