//! Shared helpers of the collector's integration tests. They run the real `rtl-ebpf` binary as
//! root against Debian's real libamdhip64 and the workloads of tests/workloads (built by
//! `cargo xtask test`); none of them skips: a missing prerequisite fails the test loudly.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::Value;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The binary under test: this build's, or the one `RTL_EBPF_UNDER_TEST` names (to run a
/// regression test against the code before its fix, as docs/reliability.md reports).
pub fn rtl() -> PathBuf {
    std::env::var_os("RTL_EBPF_UNDER_TEST").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rtl-ebpf")))
}

/// A copy of the binary that an unprivileged test user can execute: the checkout may sit under a
/// directory only root can enter (a `mktemp -d` clone is 0700).
pub fn rtl_for_other_users() -> PathBuf {
    for_other_users(&rtl())
}

/// A copy of `p` (an executable of the build) in a directory every user can enter, mode 0755.
pub fn for_other_users(p: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("rtl-ebpf-test-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let copy = dir.join(p.file_name().unwrap());
    if !copy.exists() {
        let tmp = dir.join(format!(".{}.{:?}", p.file_name().unwrap().to_string_lossy(), std::thread::current().id()));
        std::fs::copy(p, &tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::rename(&tmp, &copy).unwrap();
    }
    copy
}

pub fn workload(name: &str) -> PathBuf {
    let p = root().join("tests/workloads/build").join(name);
    assert!(p.exists(), "workload {} is not built: run `make -C tests/workloads` (cargo xtask test does)", p.display());
    p
}

/// The ROCm simulator's library directory (built by `make -C tests/rocm-sim`).
pub fn sim_lib() -> PathBuf {
    let p = root().join("tests/rocm-sim/build/lib");
    assert!(p.join("libamdhip64.so.5").exists(), "the simulator is not built: run `make -C tests/rocm-sim` (cargo xtask test does)");
    p
}

pub fn require_root() {
    // SAFETY: no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "these tests load eBPF programs: run them as root (cargo xtask test)");
}

pub fn tmpdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Runs rtl-ebpf with args; returns its output.
pub fn rtl_run(args: &[&str]) -> Output {
    Command::new(rtl()).args(args).output().expect("cannot run rtl-ebpf")
}

/// The lines of a child's pipe, read on a thread of their own: waiting for one has a deadline
/// that holds whether or not the child writes anything (a silent child fails the test, it does
/// not hang it). Every line is also kept in [`Lines::text`].
pub struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Lines {
    /// Reads `pipe` to its end; `echo`: also copy each line to the test's stderr with this prefix.
    pub fn new(pipe: impl std::io::Read + Send + 'static, echo: Option<&'static str>) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let t2 = text.clone();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(pipe);
            let mut line = String::new();
            while r.read_line(&mut line).unwrap_or(0) > 0 {
                if let Some(p) = echo {
                    eprint!("{p}{line}");
                }
                t2.lock().unwrap_or_else(|e| e.into_inner()).push_str(&line);
                let _ = tx.send(std::mem::take(&mut line));
            }
        });
        Self { rx, text, reader: Some(reader) }
    }

    /// Waits for a line containing `needle`; panics (naming `what`) when the pipe ends first or
    /// `timeout` passes.
    pub fn wait_for(&self, needle: &str, timeout: Duration, what: &str) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{what}: no line with {needle:?} in {timeout:?}; so far:\n{}", self.text())
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("{what}: the output ended without a line with {needle:?}:\n{}", self.text())
                }
            }
        }
    }

    /// Everything read so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits for the pipe's end (the child exited); returns everything read.
    pub fn finish(mut self) -> String {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.text()
    }
}

/// A child process killed (SIGKILL) and reaped when dropped: a test that fails midway leaves
/// nothing running (above all no collector, often `--all`, tracing the next tests' processes).
pub struct Killed(pub Child);

impl std::ops::Deref for Killed {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Killed {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            eprintln!("[common] killing pid {} left running by the test", self.0.id());
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Starts rtl-ebpf and waits until it has attached (its "functions probed" line).
pub fn rtl_start(args: &[&str]) -> Killed {
    rtl_start_with(args, &[])
}

/// [`rtl_start`] with extra environment variables.
pub fn rtl_start_with(args: &[&str], env: &[(&str, &str)]) -> Killed {
    let mut c = Command::new(rtl()).args(args).envs(env.iter().copied()).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let lines = Lines::new(c.stderr.take().unwrap(), Some("[rtl-ebpf] "));
    // Guarded from here: a collector that never says it attached is killed with the test.
    let t = Killed(c);
    // Attaching waits on a kernel mutex that another session's probe removal may hold for a
    // while (tests run concurrently): allow for it.
    lines.wait_for("functions probed", Duration::from_secs(240), "rtl-ebpf attaching");
    // The reader thread goes on echoing the collector's messages until it exits.
    std::mem::forget(lines);
    t
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: plain kill.
    unsafe { libc::kill(pid as i32, sig) };
}

pub fn wait_exit(c: &mut Child, secs: u64) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "process {} did not exit in {secs} s", c.id());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops a tracer with SIGINT and checks it exited cleanly.
pub fn rtl_stop(mut c: Killed) {
    signal(c.id(), libc::SIGINT);
    let s = wait_exit(&mut c, 60);
    assert!(s.success(), "rtl-ebpf exited with {s}");
}

/// Reads a JSON-lines truth file.
pub fn truth(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("truth file {}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Truth records of API calls (not summaries / markers-skipped notes).
pub fn truth_calls(t: &[Value]) -> Vec<&Value> {
    t.iter().filter(|v| v.get("api").is_some() && v.get("start_ns").is_some()).collect()
}

/// One traced API call, with everything the tests compare.
#[derive(Debug, Clone)]
pub struct TracedCall {
    pub id: i64,
    pub pid: u32,
    pub tid: u32,
    pub start: i64,
    pub end: i64,
    pub name: String,
    pub ret: Option<i64>,
    pub status: i64,
    pub a: [Option<i64>; 4],
}

/// The trace's references all resolve (the writer runs with foreign-key enforcement off, for
/// speed, and must keep them by construction): `PRAGMA foreign_key_check` finds nothing.
pub fn assert_foreign_keys_hold(c: &Connection) {
    let mut st = c.prepare("PRAGMA foreign_key_check").unwrap();
    let bad: Vec<(String, i64, String)> = st
        .query_map([], |r| Ok((r.get(0)?, r.get::<_, Option<i64>>(1)?.unwrap_or(-1), r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .take(5)
        .collect();
    assert!(bad.is_empty(), "rows whose references do not resolve (table, rowid, parent): {bad:?}");
}

pub fn traced_calls(db: &Path) -> Vec<TracedCall> {
    let c = Connection::open(db).unwrap();
    assert_foreign_keys_hold(&c);
    let mut st = c
        .prepare(
            // No rtl_api row means returned 0 (or nothing), complete, no arguments kept
            // (docs/trace-format.md); a row with a NULL ret is a return never seen.
            "SELECT a.id, a.pid, a.tid, a.start, a.end, s.string, CASE WHEN r.api_id IS NULL THEN 0 ELSE r.ret END, coalesce(r.status, 0), r.a0, r.a1, r.a2, r.a3 \
             FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id LEFT JOIN rtl_api r ON r.api_id = a.id ORDER BY a.id",
        )
        .unwrap();
    st.query_map([], |r| {
        Ok(TracedCall {
            id: r.get(0)?,
            pid: r.get(1)?,
            tid: r.get(2)?,
            start: r.get(3)?,
            end: r.get(4)?,
            name: r.get(5)?,
            ret: r.get(6)?,
            status: r.get(7)?,
            a: [r.get(8)?, r.get(9)?, r.get(10)?, r.get(11)?],
        })
    })
    .unwrap()
    .map(Result::unwrap)
    .collect()
}

pub fn meta(db: &Path, tag: &str) -> Option<String> {
    let c = Connection::open(db).unwrap();
    c.query_row("SELECT value FROM rocpd_metadata WHERE tag = ?1", [tag], |r| r.get(0)).ok()
}

/// Checks that every truth call is in the trace exactly once, on the right pid/tid, inside the
/// workload's own timing of it, with the right return value; returns the matched pairs.
pub fn match_truth<'a>(truth: &[&'a Value], calls: &'a [TracedCall]) -> Vec<(&'a Value, &'a TracedCall)> {
    let mut by_thread: HashMap<(u32, u32, &str), Vec<&TracedCall>> = HashMap::new();
    for c in calls {
        by_thread.entry((c.pid, c.tid, c.name.as_str())).or_default().push(c);
    }
    let mut used = std::collections::HashSet::new();
    let mut out = Vec::new();
    for t in truth {
        let pid = t["pid"].as_u64().unwrap() as u32;
        let tid = t["tid"].as_u64().unwrap() as u32;
        let api = t["api"].as_str().unwrap();
        let (s, e) = (t["start_ns"].as_i64().unwrap(), t["end_ns"].as_i64().unwrap());
        let cands = by_thread.get(&(pid, tid, api)).unwrap_or_else(|| panic!("no traced {api} on {pid}/{tid}: truth {t}"));
        let c = cands
            .iter()
            .find(|c| !used.contains(&c.id) && c.start >= s && c.end <= e)
            .unwrap_or_else(|| panic!("truth call {t} has no traced call inside [{s}, {e}] on {pid}/{tid}"));
        used.insert(c.id);
        assert!(c.start <= c.end, "entry after exit: {c:?}");
        assert_eq!(c.status, 0, "call not closed normally: {c:?}");
        if let Some(ret) = t["ret"].as_i64() {
            // A lost return is not a 0.
            assert_eq!(c.ret, Some(ret), "return value of {t} vs {c:?}");
        }
        out.push((*t, *c));
    }
    out
}
