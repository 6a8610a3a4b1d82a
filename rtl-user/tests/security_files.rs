//! Security of what the tool writes (issue 8): the trace and its SQLite side files are private
//! (0600) and, under sudo, owned by the invoking user; nothing planted next to the output (a
//! symlink, a foreign `-wal`) is followed or written into; the collector and the agent it
//! preloads create no file anywhere but the output (no predictable /tmp names); and the trace's
//! tables hold only the documented columns (docs/reliability.md, "What a trace contains").
//!
//! Needs root (eBPF, chown), strace and the workloads.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rusqlite::Connection;

const NOBODY: u32 = 65534;

fn hot_loop_args(secs: &str) -> Vec<String> {
    vec![workload("hot_loop").display().to_string(), "--seconds".into(), secs.into(), "--api".into(), "geterrorstring".into()]
}

fn mode_owner(p: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.permissions().mode() & 0o7777, m.uid(), m.gid())
}

#[test]
fn trace_and_side_files_are_0600_and_owned_by_the_sudo_user() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    // --as-root: this test is about who owns the files; the command itself stays root, so a
    // checkout under a directory only root can enter (a mktemp -d clone) still runs it.
    let mut args = vec![
        "run".to_string(),
        "--quiet".into(),
        "--as-root".into(),
        "--apis".into(),
        "hipGetErrorString".into(),
        "-o".into(),
        db.display().to_string(),
        "--".into(),
    ];
    args.extend(hot_loop_args("3"));
    let mut c = Command::new(rtl())
        .args(&args)
        .env("SUDO_UID", NOBODY.to_string())
        .env("SUDO_GID", NOBODY.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // While tracing: the database and its WAL and shared-memory files.
    let wal = d.path().join("t.db-wal");
    let shm = d.path().join("t.db-shm");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(wal.exists() && std::fs::metadata(&wal).map(|m| m.len() > 0).unwrap_or(false)) {
        assert!(Instant::now() < deadline, "no WAL written");
        std::thread::sleep(Duration::from_millis(20));
    }
    for p in [&db, &wal, &shm] {
        assert_eq!(mode_owner(p), (0o600, NOBODY, NOBODY), "{} while tracing", p.display());
    }
    assert!(wait_exit(&mut c, 120).success());
    assert_eq!(mode_owner(&db), (0o600, NOBODY, NOBODY), "finished trace");
    for p in [&wal, &shm, &d.path().join("t.db-journal")] {
        assert!(!p.exists(), "{} left behind", p.display());
    }
    let ok: String = Connection::open(&db).unwrap().query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn nothing_planted_next_to_the_output_is_followed_or_written() {
    require_root();
    let d = tmpdir();
    let dir = d.path();
    // The directory is writable by everyone, like a shared scratch directory.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let db = dir.join("t.db");
    let run = |extra: &[&str]| {
        let mut a = vec!["--all", "--quiet", "--duration", "0.3", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap()];
        a.extend(extra);
        rtl_run(&a)
    };
    // A symlink at the output path.
    std::os::unix::fs::symlink(&victim, &db).unwrap();
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(7), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // With --force the link itself is replaced, never its target.
    let out = run(&["--force"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&db).unwrap().file_type().is_file());
    std::fs::remove_file(&db).unwrap();
    // A foreign side file: another user's `t.db-wal` (which would receive the trace), a symlink
    // as `t.db-shm`, a stale `t.db-journal`. Each is refused and left as it was; no trace file
    // is left behind.
    for (side, symlink) in [("-wal", false), ("-shm", true), ("-journal", false)] {
        let p = dir.join(format!("t.db{side}"));
        if symlink {
            std::os::unix::fs::symlink(&victim, &p).unwrap();
        } else {
            std::fs::write(&p, b"").unwrap();
            std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        }
        let out = run(&[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(7), "planted {side}: {err}");
        assert!(err.contains("side files"), "planted {side}: {err}");
        assert!(!db.exists(), "planted {side}: trace file left behind");
        let m = std::fs::symlink_metadata(&p).unwrap();
        if symlink {
            assert!(m.file_type().is_symlink());
        } else {
            assert_eq!((m.len(), m.uid(), m.permissions().mode() & 0o777), (0, NOBODY, 0o666), "planted {side} untouched");
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_file(&p).unwrap();
    }
}

/// Every path a process in the strace log created (O_CREAT opens, mkdir, rename, link, symlink,
/// mknod, bind), successful calls only.
fn created_paths(log: &str) -> Vec<String> {
    let creating = ["O_CREAT", "mkdir", "rename", "link(", "linkat(", "symlink", "mknod", "bind("];
    log.lines()
        .filter(|l| creating.iter().any(|c| l.contains(c)) && !l.contains("= -1"))
        .flat_map(|l| l.split('"').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>())
        .filter(|p| p.starts_with('/') || p.starts_with('@'))
        .collect()
}

#[test]
fn no_file_is_created_outside_the_output_directory() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let log = d.path().join("strace.log");
    // `run` preloads the agent into the command: both the collector and the agent are watched.
    let mut args: Vec<String> = [
        "-f",
        "-qq",
        "-e",
        "trace=open,openat,creat,mkdir,mkdirat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,mknod,mknodat,bind",
        "-o",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(log.display().to_string());
    args.push(rtl().display().to_string());
    args.extend(["run", "--quiet", "--apis", "hipGetErrorString", "-o"].map(String::from));
    args.push(db.display().to_string());
    args.push("--".into());
    args.extend(hot_loop_args("0.3"));
    let out = Command::new("strace").args(&args).output().expect("strace is needed (apt-get install strace)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&log).unwrap();
    let created = created_paths(&text);
    assert!(created.iter().any(|p| p == db.to_str().unwrap()), "the trace itself is seen: {created:?}");
    let outside: Vec<&String> = created.iter().filter(|p| !p.starts_with(d.path().to_str().unwrap())).collect();
    assert!(outside.is_empty(), "files created outside the output directory: {outside:?}");
}

/// Every table and column of a trace must be listed in docs/reliability.md ("What a trace
/// contains") with what it records: a new column is documented before it ships.
#[test]
fn trace_columns_are_documented() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let out = rtl_run(&["--all", "--quiet", "--duration", "0.2", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc = std::fs::read_to_string(root().join("docs/reliability.md")).expect("docs/reliability.md");
    let section = doc.split("## What a trace contains").nth(1).expect("docs/reliability.md: '## What a trace contains'");
    let section = section.split("\n## ").next().unwrap();
    let conn = Connection::open(&db).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut missing = Vec::new();
    for t in &tables {
        let cols: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        // The doc has one table row per trace table: `| table | columns |`.
        let line = section.lines().find(|l| l.starts_with(&format!("| `{t}` |")));
        match line {
            None => missing.push(format!("table {t}")),
            Some(l) => {
                for c in cols {
                    if !l.contains(&format!("`{c}`")) {
                        missing.push(format!("{t}.{c}"));
                    }
                }
            }
        }
    }
    assert!(missing.is_empty(), "undocumented in docs/reliability.md: {missing:?}");
}

/// `run` preloads the agent into the command: the path it gives is absolute, and neither the
/// library nor any directory above it can be changed by another user (no redirection).
#[test]
fn the_preloaded_agent_path_cannot_be_redirected() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("t.db");
    let env_out = d.path().join("env.txt");
    let script = format!("tr '\\0' '\\n' < /proc/$$/environ | grep '^LD_PRELOAD=' > {}", env_out.display());
    let out = rtl_run(&["run", "--quiet", "--apis", "hipGetErrorString", "-o", db.to_str().unwrap(), "--", "sh", "-c", &script]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let env = std::fs::read_to_string(&env_out).unwrap();
    let value = env.trim().strip_prefix("LD_PRELOAD=").expect("run sets LD_PRELOAD");
    let agents: Vec<&str> = value.split([':', ' ']).filter(|p| p.contains("librtl_agent")).collect();
    assert_eq!(agents.len(), 1, "one agent preloaded: {value}");
    let agent = Path::new(agents[0]);
    assert!(agent.is_absolute(), "{value}");
    let mut p = Some(agent);
    while let Some(q) = p {
        let m = std::fs::metadata(q).unwrap();
        let mode = m.permissions().mode();
        let sticky = mode & 0o1000 != 0;
        assert!(m.uid() == 0, "{} is not root's", q.display());
        assert!(mode & 0o022 == 0 || (sticky && q != agent), "{} is writable by others ({:o})", q.display(), mode);
        p = q.parent();
    }
}
