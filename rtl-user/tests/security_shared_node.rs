//! Safe on a shared node (issue 15, the collector's side): rtl-ebpf runs as root where other
//! users run code, and they can shape the files, processes and names it looks at. Each test
//! makes a real unprivileged user (useradd, removed after) and lets it attack as that user.
//!
//! Needs root (eBPF, useradd, chown), setpriv and the workloads. This machine has
//! fs.protected_symlinks=0 and fs.protected_regular=0, so planted links work as on an old or
//! permissive node.

use crate::common;
use crate::users;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use users::TestUser;

/// Running commands as a test user (`users::TestUser`, created with useradd, removed after).
trait AsUser {
    /// A command that runs `prog` as this user (no supplementary groups).
    fn command(&self, prog: &str) -> Command;
}

impl AsUser for TestUser {
    fn command(&self, prog: &str) -> Command {
        let mut c = Command::new("setpriv");
        c.args(["--reuid", &self.uid.to_string(), "--regid", &self.gid.to_string(), "--clear-groups", "--", prog]);
        c
    }
}

fn owner_mode(p: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.uid(), m.gid(), m.permissions().mode() & 0o7777)
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (inotify) for `DIR/NAME-wal` to be deleted, which SQLite does as the collector
/// finishes the trace, and at once replaces `DIR/NAME` with a symlink to VICTIM (the trace moves
/// to `DIR/NAME.real`): the race a user who can write the output directory runs against a final
/// `chown(path)`.
const SWAPPER_C: &str = r#"
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>
int main(int argc, char **argv) {
    if (argc != 4) return 2;
    char wal[PATH_MAX], path[PATH_MAX], real[PATH_MAX];
    snprintf(wal, sizeof wal, "%s-wal", argv[2]);
    snprintf(path, sizeof path, "%s/%s", argv[1], argv[2]);
    snprintf(real, sizeof real, "%s/%s.real", argv[1], argv[2]);
    int fd = inotify_init1(0);
    if (fd < 0 || inotify_add_watch(fd, argv[1], IN_DELETE) < 0) return 3;
    printf("watching\n");
    fflush(stdout);
    char buf[8192] __attribute__((aligned(8)));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return 4;
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            if (e->len && strcmp(e->name, wal) == 0) {
                if (rename(path, real) != 0 || symlink(argv[3], path) != 0) return 5;
                printf("swapped\n");
                return 0;
            }
            p += sizeof *e + e->len;
        }
    }
}
"#;

/// Item 1: the trace and its side files are given to the sudo user through their descriptors,
/// never through a path. The user owns the output directory and, the moment SQLite removes the
/// WAL at the end, swaps the trace for a symlink to a root-owned private file. Four sessions:
/// none may hand the file over (before the fix, the final `chown(path)` followed the link when
/// the swap landed between SQLite's close and the chown: the issue saw it in 3 of 4 tries).
#[test]
fn a_trace_swapped_for_a_symlink_never_gives_root_files_away() {
    require_root();
    let user = TestUser::create();
    let d = tmpdir();
    let out = user_dir(d.path(), &user, "out");
    let swapper = d.path().join("swapper");
    std::fs::write(d.path().join("swapper.c"), SWAPPER_C).unwrap();
    let st = Command::new("gcc").args(["-O1", "-o"]).arg(&swapper).arg(d.path().join("swapper.c")).status().expect("gcc");
    assert!(st.success());
    let victim = d.path().join("victim");
    let mut swapped = 0;
    for round in 0..4 {
        std::fs::write(&victim, b"root's own").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
        let name = format!("t{round}.db");
        let mut sw = Killed(
            user.command(swapper.to_str().unwrap())
                .args([out.to_str().unwrap(), &name, victim.to_str().unwrap()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut so = std::io::BufReader::new(sw.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut so, &mut line).unwrap();
        assert_eq!(line.trim(), "watching");
        let db = out.join(&name);
        let env = [("SUDO_UID", user.uid.to_string()), ("SUDO_GID", user.gid.to_string())];
        let (mut c, _lines) = rtl_spawn(&["run", "--quiet", "--gpu", "none", "-o", db.to_str().unwrap(), "--", "true"], &env);
        let status = exit_within(&mut c, 120, "");
        line.clear();
        std::io::BufRead::read_line(&mut so, &mut line).unwrap();
        let _ = sw.wait();
        assert_eq!(owner_mode(&victim), (0, 0, 0o600), "round {round}: the root file was handed over ({status})");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's own", "round {round}: the root file was written");
        if line.trim() == "swapped" {
            swapped += 1;
            // The collector finishes (exit 0), or, when the swap came before SQLite's last
            // write, says the file was moved (exit 7). Either way the real trace, moved by the
            // user, is theirs and sound.
            assert!(status.success() || status.code() == Some(7), "round {round}: {status}");
            let real = out.join(format!("{name}.real"));
            assert_eq!(owner_mode(&real), (user.uid, user.gid, 0o600));
            let ok: String = rusqlite::Connection::open(&real).unwrap().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
            assert_eq!(ok, "ok");
        }
    }
    assert_eq!(swapped, 4, "the swap must have happened in every round for the test to mean anything");
}

const REAL_LIB: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// A directory the test user owns, inside a test directory other users can traverse.
fn user_dir(d: &Path, user: &TestUser, name: &str) -> std::path::PathBuf {
    std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o711)).unwrap();
    let w = d.join(name);
    std::fs::create_dir_all(&w).unwrap();
    std::os::unix::fs::chown(&w, Some(user.uid), Some(user.gid)).unwrap();
    w
}

/// A copy of the real HIP library at `dir/libamdhip64.so.5`, owned by the user.
fn user_lib_copy(dir: &Path, user: &TestUser) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::os::unix::fs::chown(dir, Some(user.uid), Some(user.gid)).unwrap();
    let p = dir.join("libamdhip64.so.5");
    std::fs::copy(REAL_LIB, &p).unwrap();
    std::os::unix::fs::chown(&p, Some(user.uid), Some(user.gid)).unwrap();
    p
}

/// `sleeper --mode loop` as the user against the library in `libdir`, ready.
fn user_sleeper(user: &TestUser, libdir: &Path, truth: &Path) -> Killed {
    let mut c = user
        .command(workload("sleeper").to_str().unwrap())
        .args(["--mode", "loop", "--interval-ms", "5", "--no-init"])
        .env("LD_LIBRARY_PATH", libdir)
        .env("RTL_WORKLOAD_TRUTH", truth)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(c.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert!(line.contains("ready"), "sleeper: {line}");
    Killed(c)
}

/// rtl-ebpf with its stderr lines delivered on a channel (and echoed).
fn rtl_spawn(args: &[&str], env: &[(&str, String)]) -> (Killed, std::sync::mpsc::Receiver<String>) {
    let mut c = Command::new(rtl())
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let err = c.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(err)).map_while(Result::ok) {
            eprintln!("[rtl-ebpf] {line}");
            let _ = tx.send(line);
        }
    });
    (Killed(c), rx)
}

/// Waits for a stderr line containing `what`; fails after `secs`.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, what: &str, secs: u64) -> String {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(_) => {}
            Err(_) => panic!("no line with `{what}` within {secs} s"),
        }
    }
}

/// Waits for the collector to exit; on timeout kills it and fails (a hung collector must fail
/// the test, not hang it).
fn exit_within(c: &mut Killed, secs: u64, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(s) = c.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("rtl-ebpf did not exit within {secs} s: {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stop_child(mut c: Killed) {
    signal(c.id(), libc::SIGTERM);
    let _ = wait_exit(&mut c, 30);
}

/// The traced calls of `pid` are exactly the workload's own calls over the traced window (from
/// its first traced call to its last): returns how many.
fn traced_exactly(db: &Path, truth_file: &Path, pid: u32) -> usize {
    // Complete calls (a call cut by the end of the trace, or caught half at the attach, is
    // closed by force and has no exact counterpart).
    let calls: Vec<TracedCall> = traced_calls(db).into_iter().filter(|c| c.pid == pid && c.status == 0).collect();
    assert!(!calls.is_empty(), "nothing traced for pid {pid}");
    let (from, to) = (calls.iter().map(|c| c.start).min().unwrap(), calls.iter().map(|c| c.end).max().unwrap());
    let t = truth(truth_file);
    let window: Vec<_> = truth_calls(&t)
        .into_iter()
        .filter(|v| {
            v["pid"].as_u64() == Some(pid as u64)
                && v["start_ns"].as_i64().unwrap() >= from - 1_000_000
                && v["end_ns"].as_i64().unwrap() <= to + 1_000_000
        })
        .collect();
    let matched = match_truth(&window, &calls);
    assert_eq!(matched.len(), calls.len(), "pid {pid}: traced calls without a workload call");
    matched.len()
}

/// Item 7: a process in an unprivileged user namespace maps its copy of the runtime, then hides
/// it under a tmpfs and puts a FIFO at its path. `--all` must neither block on the FIFO (before
/// the fix: open() forever, --duration and signals ignored) nor lose the process: the very inode
/// it maps is found through /proc/PID/map_files and traced.
#[test]
fn a_fifo_in_place_of_a_mapped_library_does_not_block_all() {
    require_root();
    let user = TestUser::create();
    let d = tmpdir();
    let w = user_dir(d.path(), &user, "w");
    let lib = w.join("lib");
    user_lib_copy(&lib, &user);
    let truth = w.join("truth.jsonl");
    let script = format!(
        "{sleeper} --mode loop --interval-ms 5 --no-init > {w}/out & echo $! > {w}/pid.tmp; mv {w}/pid.tmp {w}/pid; \
         while ! grep -q ready {w}/out; do sleep 0.05; done; \
         mount -t tmpfs tmpfs {lib} && mkfifo {lib}/libamdhip64.so.5 && touch {w}/armed; wait",
        // (a copy the user can run, wherever the checkout is)
        sleeper = for_other_users(&workload("sleeper")).display(),
        w = w.display(),
        lib = lib.display()
    );
    let mut attacker = Killed(
        user.command("unshare")
            .args(["-Urm", "sh", "-c", &script])
            .env("LD_LIBRARY_PATH", &lib)
            .env("RTL_WORKLOAD_TRUTH", &truth)
            .spawn()
            .unwrap(),
    );
    wait_for("the FIFO to be planted", 60, || w.join("armed").exists() || attacker.try_wait().unwrap().is_some());
    assert!(w.join("armed").exists(), "the attack could not be set up (unprivileged user namespaces?)");
    let pid: u32 = std::fs::read_to_string(w.join("pid")).unwrap().trim().parse().unwrap();
    // The sleeper runs in the user's namespace, under the shell: stopped whatever happens.
    struct Term(u32);
    impl Drop for Term {
        fn drop(&mut self) {
            signal(self.0, libc::SIGTERM);
        }
    }
    let _term = Term(pid);
    // The path the process mapped is a FIFO now, as the process sees it.
    let seen = std::fs::symlink_metadata(format!("/proc/{pid}/root{}/libamdhip64.so.5", lib.display())).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&seen.file_type()));
    let db = d.path().join("t.db");
    let (mut c, _lines) =
        rtl_spawn(&["--all", "--quiet", "--duration", "3", "--apis", "hipGetDeviceCount", "-o", db.to_str().unwrap()], &[]);
    let status = exit_within(&mut c, 120, "blocked on the FIFO?");
    signal(pid, libc::SIGTERM);
    let _ = wait_exit(&mut attacker, 30);
    assert!(status.success(), "{status}");
    let n = traced_exactly(&db, &truth, pid);
    assert!(n >= 20, "only {n} calls of the hidden library traced");
    eprintln!("FIFO planted: --all finished on time, {n} calls of the hidden copy traced exactly");
}

/// Item 5: libraries in directories whose names hold a newline (maps shows `\012`) or bytes
/// that are not UTF-8 are found and traced like any other (before the fix: skipped, and the
/// second hid the whole process).
#[test]
fn libraries_are_found_whatever_their_path_holds() {
    require_root();
    use std::os::unix::ffi::OsStrExt;
    let user = TestUser::create();
    let d = tmpdir();
    let w = user_dir(d.path(), &user, "w");
    let dirs = [w.join("new\nline"), w.join(std::ffi::OsStr::from_bytes(b"not-utf8-\xff\xfe"))];
    let mut sleepers = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        user_lib_copy(dir, &user);
        let truth = w.join(format!("truth{i}.jsonl"));
        sleepers.push((user_sleeper(&user, dir, &truth), truth));
    }
    let db = d.path().join("t.db");
    let (mut c, _lines) =
        rtl_spawn(&["--all", "--quiet", "--duration", "3", "--apis", "hipGetDeviceCount", "-o", db.to_str().unwrap()], &[]);
    let status = exit_within(&mut c, 120, "");
    assert!(status.success(), "{status}");
    let mut counts = Vec::new();
    for (s, truth) in sleepers {
        let pid = s.id();
        stop_child(s);
        counts.push(traced_exactly(&db, &truth, pid));
    }
    assert!(counts.iter().all(|&n| n >= 20), "{counts:?}");
    // The trace names the library by its real path, newline included.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let with_newline: i64 = conn.query_row("SELECT count(*) FROM rtl_library WHERE instr(path, char(10)) > 0", [], |r| r.get(0)).unwrap();
    assert_eq!(with_newline, 1);
    eprintln!("odd paths: calls traced {counts:?}");
}

/// Item 8: a 3 GiB sparse file named like the runtime (a valid library with a hole after it) is
/// probed by reading its ELF tables only: the collector's memory stays small (before the fix it
/// read all 3 GiB into memory).
#[test]
fn a_huge_sparse_library_costs_its_tables_not_its_size() {
    require_root();
    let user = TestUser::create();
    let d = tmpdir();
    let w = user_dir(d.path(), &user, "w");
    let dir = w.join("big");
    let lib = user_lib_copy(&dir, &user);
    std::fs::OpenOptions::new().write(true).open(&lib).unwrap().set_len(3 << 30).unwrap();
    let truth = w.join("truth.jsonl");
    let s = user_sleeper(&user, &dir, &truth);
    let db = d.path().join("t.db");
    let (mut c, _lines) =
        rtl_spawn(&["--all", "--quiet", "--duration", "3", "--apis", "hipGetDeviceCount", "-o", db.to_str().unwrap()], &[]);
    let status = exit_within(&mut c, 120, "");
    let pid = s.id();
    stop_child(s);
    assert!(status.success(), "{status}");
    let n = traced_exactly(&db, &truth, pid);
    let rss_kb: u64 = meta(&db, "collector_peak_rss_kb").unwrap().parse().unwrap();
    eprintln!("3 GiB sparse library: {n} calls traced, collector peak RSS {rss_kb} kB");
    assert!(n >= 20);
    assert!(rss_kb < 1 << 20, "collector peak RSS {rss_kb} kB: the file was read whole");
}

/// Item 14: `attach --pid` stops by itself, and says so, once every traced process has exited;
/// with `--keep-waiting` it keeps tracing until told to stop.
#[test]
fn attach_stops_when_every_traced_process_has_exited() {
    require_root();
    let d = tmpdir();
    for keep_waiting in [false, true] {
        let start = |t: &str| {
            let mut c = Command::new(workload("sleeper"))
                .args(["--mode", "loop", "--interval-ms", "5", "--no-init"])
                .env("RTL_WORKLOAD_TRUTH", d.path().join(t))
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(c.stdout.as_mut().unwrap()), &mut line).unwrap();
            assert!(line.contains("ready"));
            Killed(c)
        };
        let (a, b) = (start("a.jsonl"), start("b.jsonl"));
        let (pa, pb) = (a.id().to_string(), b.id().to_string());
        let db = d.path().join(format!("t{keep_waiting}.db"));
        let mut args = vec!["attach", "--quiet", "--apis", "hipGetDeviceCount", "--pid", &pa, "--pid", &pb, "-o", db.to_str().unwrap()];
        if keep_waiting {
            args.push("--keep-waiting");
        }
        let (mut c, lines) = rtl_spawn(&args, &[]);
        wait_line(&lines, "functions probed", 240);
        // Both are traced (calls of each written) before they are stopped.
        let q = format!("SELECT count(DISTINCT pid) FROM rocpd_api WHERE pid IN ({pa}, {pb})");
        wait_for("calls of both processes in the trace", 120, || {
            rusqlite::Connection::open(&db).ok().and_then(|c| c.query_row(&q, [], |r| r.get::<_, i64>(0)).ok()) == Some(2)
        });
        stop_child(a);
        wait_line(&lines, &format!("PID {pa} exited"), 60);
        assert!(c.try_wait().unwrap().is_none(), "stopped while PID {pb} still runs");
        stop_child(b);
        if keep_waiting {
            wait_line(&lines, "still tracing (--keep-waiting)", 60);
            assert!(c.try_wait().unwrap().is_none(), "--keep-waiting: stopped anyway");
            signal(c.id(), libc::SIGINT);
        } else {
            wait_line(&lines, "every traced process exited", 60);
        }
        let status = exit_within(&mut c, 60, "after every traced process exited");
        assert!(status.success(), "{status}");
        let calls = traced_calls(&db);
        assert!(calls.iter().any(|c| c.pid.to_string() == pa) && calls.iter().any(|c| c.pid.to_string() == pb));
    }
}

/// `sudo rtl-ebpf run -- CMD` runs CMD as the user who ran sudo (uid, gid, groups, HOME, USER,
/// LOGNAME), not as root; `--as-root` keeps root.
#[test]
fn run_under_sudo_runs_the_command_as_the_invoking_user() {
    require_root();
    let user = TestUser::create();
    let d = tmpdir();
    let w = user_dir(d.path(), &user, "w");
    let home = {
        let o = Command::new("getent").args(["passwd", &user.name]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().split(':').nth(5).unwrap().to_string()
    };
    let env = [("SUDO_UID", user.uid.to_string()), ("SUDO_GID", user.gid.to_string()), ("SUDO_USER", user.name.clone())];
    for as_root in [false, true] {
        let ids = w.join(format!("ids-{as_root}"));
        let db = w.join(format!("t-{as_root}.db"));
        let script = format!("(id -u; id -g; id -G; echo \"$HOME\"; echo \"$USER\"; echo \"$LOGNAME\") > {}", ids.display());
        let mut args = vec!["run", "--quiet", "--apis", "hipGetDeviceCount", "-o", db.to_str().unwrap()];
        if as_root {
            args.push("--as-root");
        }
        args.extend(["--", "sh", "-c", &script]);
        let (mut c, _lines) = rtl_spawn(&args, &env);
        let status = exit_within(&mut c, 120, "");
        assert!(status.success(), "{status}");
        let got = std::fs::read_to_string(&ids).unwrap();
        let got: Vec<&str> = got.lines().collect();
        if as_root {
            assert_eq!(&got[..2], ["0", "0"], "--as-root: {got:?}");
        } else {
            let (u, g) = (user.uid.to_string(), user.gid.to_string());
            assert_eq!(
                got,
                [u.as_str(), g.as_str(), g.as_str(), home.as_str(), user.name.as_str(), user.name.as_str()],
                "the command's identity"
            );
            assert_eq!(owner_mode(&ids).0, user.uid, "the file the command wrote is the user's");
        }
    }
}
