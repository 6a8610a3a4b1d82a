//! The package test (`cargo xtask dist --check`, and a step of `cargo xtask test`): the .deb
//! (checked by lintian) and the tarball of `dist.rs` are unpacked into fresh roots under
//! `target/dist-check/`, their file lists compared with the layout, and the installed binary run
//! from there: `--version`, `list-apis`, its man page, and a real trace of the demo workload on
//! the ROCm simulator (as `cargo xtask run` does) in which the agent must come from
//! `../lib/rtl-ebpf/` and every GPU op of the simulator's ground truth must be in the trace.
//! Needs root (the trace loads eBPF).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, ensure, Context, Result};

use crate::dist::{self, Dist, Layout, PACKAGE};
use crate::util::{cmd, root};

pub fn run(d: &Dist) -> Result<()> {
    let work = root().join("target/dist-check");
    if work.exists() {
        fs::remove_dir_all(&work).with_context(|| format!("cannot clear {}", work.display()))?;
    }
    fs::create_dir_all(&work)?;
    let expected = dist::expected_files()?;
    ensure!(d.files == expected, "staged files {:?} differ from the layout {:?}", d.files, expected);

    // The .deb: control fields, file list with owners and modes, then `dpkg -x` into a root.
    control(&d.deb, &work)?;
    let listed = deb_listing(&d.deb)?;
    let want: BTreeSet<String> = expected.iter().map(|f| format!("usr/{f}")).collect();
    let got: BTreeSet<String> = listed.iter().map(|(p, _, _)| p.clone()).collect();
    same_files("the .deb", &got, &want)?;
    for (p, mode, owner) in &listed {
        let want_mode = if p == &format!("usr/{}", Layout::BIN) { "-rwxr-xr-x" } else { "-rw-r--r--" };
        ensure!(mode == want_mode && owner == "root/root", "the .deb has {p} as {mode} {owner}, not {want_mode} root/root");
    }
    // Debian's own package checker: no error, no warning.
    crate::setup::apt(&["lintian"])?;
    cmd("lintian")
        .args(["--fail-on", "error,warning", "--tag-display-limit", "0"])
        .arg(&d.deb)
        .run()
        .context("lintian found problems in the package")?;
    let sysroot = work.join("deb-root");
    cmd("dpkg").arg("-x").arg(&d.deb).arg(&sysroot).run()?;
    installed(&sysroot.join("usr"), &work, "deb")?;

    // The tarball: same files under its top directory, anywhere.
    let tar_root = work.join("tar-root");
    fs::create_dir_all(&tar_root)?;
    cmd("tar").arg("-xzf").arg(&d.tarball).arg("-C").arg(&tar_root).run()?;
    let mut tops: Vec<String> =
        fs::read_dir(&tar_root)?.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect::<Result<_, _>>()?;
    tops.sort();
    ensure!(tops == vec![d.tar_top.clone()], "the tarball's top level is {tops:?}, not [{}]", d.tar_top);
    let prefix = tar_root.join(&d.tar_top);
    let mut got = Vec::new();
    list_files(&prefix, &prefix, &mut got)?;
    same_files("the tarball", &got.into_iter().collect(), &expected.iter().cloned().collect())?;
    installed(&prefix, &work, "tarball")?;

    agent_missing(&sysroot.join("usr"), &work)?;
    println!(
        "xtask: package check passed: {} and {} install, run and trace the demo with their own agent",
        d.deb.display(),
        d.tarball.display()
    );
    Ok(())
}

/// The control fields: name, the workspace version, runtime dependencies only.
fn control(deb: &Path, work: &Path) -> Result<()> {
    let info = cmd("dpkg-deb").args(["--field"]).arg(deb).output()?;
    let field = |k: &str| info.lines().find_map(|l| l.strip_prefix(&format!("{k}: "))).map(str::to_string);
    ensure!(field("Package").as_deref() == Some(PACKAGE), "Package field: {info}");
    ensure!(field("Version").as_deref() == Some(dist::version()), "Version field is not {}: {info}", dist::version());
    let depends = field("Depends").with_context(|| format!("no Depends field: {info}"))?;
    ensure!(depends.contains("libc6 (>= "), "Depends {depends:?} lacks a versioned libc6");
    for k in ["Build-Depends", "Pre-Depends"] {
        ensure!(field(k).is_none(), "the package has a {k} field: {info}");
    }
    let ctrl = work.join("deb-control");
    cmd("dpkg-deb").arg("-e").arg(deb).arg(&ctrl).run()?;
    let mut names: Vec<String> =
        fs::read_dir(&ctrl)?.map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned())).collect::<Result<_, _>>()?;
    fs::remove_dir_all(&ctrl)?;
    names.sort();
    ensure!(names == ["control", "md5sums"], "control archive holds {names:?}: no maintainer scripts expected");
    println!("xtask: {}: Depends: {depends}", deb.display());
    Ok(())
}

/// (path, mode, owner) of every regular file in the package (`dpkg-deb -c`).
fn deb_listing(deb: &Path) -> Result<Vec<(String, String, String)>> {
    let out = cmd("dpkg-deb").arg("-c").arg(deb).output()?;
    let mut v = Vec::new();
    for l in out.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        ensure!(f.len() >= 6, "unexpected dpkg-deb -c line {l:?}");
        let path = f[5].trim_start_matches("./").trim_end_matches('/').to_string();
        match f[0].chars().next() {
            Some('d') => ensure!(f[0] == "drwxr-xr-x" && f[1] == "root/root", "directory {path} is {} {}", f[0], f[1]),
            Some('-') => v.push((path, f[0].to_string(), f[1].to_string())),
            _ => bail!("the package holds {path}, which is not a file or directory ({})", f[0]),
        }
    }
    Ok(v)
}

fn same_files(what: &str, got: &BTreeSet<String>, want: &BTreeSet<String>) -> Result<()> {
    let extra: Vec<_> = got.difference(want).collect();
    let missing: Vec<_> = want.difference(got).collect();
    ensure!(extra.is_empty() && missing.is_empty(), "{what}: unexpected files {extra:?}, missing files {missing:?}");
    Ok(())
}

fn list_files(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let t = e.file_type()?;
        if t.is_dir() {
            list_files(base, &e.path(), out)?;
        } else {
            ensure!(t.is_file(), "{} is not a regular file", e.path().display());
            out.push(e.path().strip_prefix(base)?.to_string_lossy().into_owned());
        }
    }
    Ok(())
}

/// Runs the installed binary under `prefix` (`<prefix>/bin/rtl-ebpf`, agent in
/// `<prefix>/lib/rtl-ebpf/`) and traces the demo with it.
fn installed(prefix: &Path, work: &Path, label: &str) -> Result<()> {
    let bin = prefix.join(Layout::BIN);
    let agent = fs::canonicalize(prefix.join(Layout::AGENT))?;
    ensure!(!prefix.join("bin/librtl_agent.so").exists(), "{label}: an agent next to the binary would hide the ../lib/rtl-ebpf lookup");
    let b = bin.to_str().unwrap();

    for f in [&bin, &agent] {
        let sections = cmd("readelf").args(["-S", "-W"]).arg(f).output()?;
        // (.debug_gdb_scripts is loaded, not debug information: strip keeps it.)
        let left: Vec<&str> = [" .symtab ", " .strtab ", " .debug_info ", " .debug_line ", " .debug_str "]
            .into_iter()
            .filter(|s| sections.contains(s))
            .collect();
        ensure!(left.is_empty(), "{label}: {} is not stripped: it has {left:?}", f.display());
    }
    let dynsym = cmd("readelf").args(["--dyn-syms", "-W"]).arg(&agent).output()?;
    ensure!(dynsym.contains(" rtl_agent_publish"), "{label}: the stripped agent lost its rtl_agent_publish symbol");

    let v = cmd(b).arg("--version").output()?;
    ensure!(v.trim() == format!("rtl-ebpf {}", dist::version()), "{label}: --version printed {v:?}");
    let apis = cmd(b).arg("list-apis").output()?;
    ensure!(apis.lines().count() > 10 && apis.contains("hipLaunchKernel"), "{label}: list-apis printed {apis:?}");

    // The man page renders without a warning and documents every subcommand.
    let man = prefix.join(Layout::MAN);
    let out = std::process::Command::new("man")
        .args(["--warnings", "-E", "UTF-8", "-l"])
        .arg(&man)
        .env("MANWIDTH", "80")
        .output()
        .context("cannot start man (Debian: man-db)")?;
    let (page, warn) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success() && warn.trim().is_empty(), "{label}: man -l {} failed or warned: {warn}", man.display());
    for s in [
        "rtl-ebpf attach",
        "rtl-ebpf run",
        "rtl-ebpf summary",
        "rtl-ebpf convert",
        "rtl-ebpf list-apis",
        "/usr/lib/rtl-ebpf/librtl_agent.so",
    ] {
        ensure!(page.contains(s), "{label}: the man page does not mention {s}");
    }

    // The demo on the simulator, as `cargo xtask run` traces it; the agent is not passed.
    let db = work.join(format!("{label}-demo.db"));
    let truth = work.join(format!("{label}-truth.jsonl"));
    let sim = root().join("tests/rocm-sim/build/lib");
    let demo = root().join("tests/workloads/build/demo");
    ensure!(demo.is_file() && sim.is_dir(), "{} or {} is missing: cargo xtask build makes them", demo.display(), sim.display());
    cmd(b)
        .args(["run", "--quiet", "-o"])
        .arg(&db)
        .args(["--", "env"])
        .arg(format!("LD_LIBRARY_PATH={}", sim.display()))
        .arg(format!("ROCM_SIM_TRUTH={}", truth.display()))
        .arg(&demo)
        .env("LD_LIBRARY_PATH", &sim)
        .current_dir(work)
        .run()
        .with_context(|| format!("{label}: tracing the demo with the installed binary"))?;

    demo_trace_matches_truth(label, &db, &truth, &agent)
}

/// The trace `db` of the demo has every GPU op of the simulator's `truth` (kernels counted
/// apart), and its agent is `agent` (as the collector saw the path), with probes on it.
pub fn demo_trace_matches_truth(label: &str, db: &Path, truth: &Path, agent: &Path) -> Result<()> {
    let libs = sql(db, "SELECT path || '|' || probes FROM rtl_library WHERE path LIKE '%librtl_agent.so'")?;
    ensure!(libs.trim() != "", "{label}: the trace probed no agent");
    for l in libs.lines() {
        let (path, probes) = l.rsplit_once('|').unwrap();
        ensure!(
            Path::new(path) == agent && probes != "0",
            "{label}: the trace's agent is {path} ({probes} probes), not the installed {}",
            agent.display()
        );
    }
    let truth_text = fs::read_to_string(truth).with_context(|| format!("the simulator wrote no truth to {}", truth.display()))?;
    let want_ops = truth_text.lines().filter(|l| l.starts_with("{\"type\":\"op\",")).count();
    let want_kernels = truth_text.lines().filter(|l| l.starts_with("{\"type\":\"op\",\"op\":\"dispatch\",")).count();
    ensure!(want_kernels > 0, "{label}: the demo dispatched no kernel on the simulator (truth {})", truth.display());
    let ops: usize = sql(db, "SELECT count(*) FROM rocpd_op WHERE gpuId >= 0")?.trim().parse()?;
    let kernels: usize = sql(
        db,
        "SELECT count(*) FROM rocpd_op o JOIN rocpd_string t ON t.id = o.opType_id WHERE o.gpuId >= 0 AND t.string = 'KernelExecution'",
    )?
    .trim()
    .parse()?;
    ensure!(
        ops == want_ops && kernels == want_kernels,
        "{label}: the trace has {ops} GPU ops ({kernels} kernels), the simulator's truth {want_ops} ({want_kernels} kernels)"
    );
    println!(
        "xtask: {label}: the installed binary traced the demo: {ops} GPU ops ({kernels} kernels) = the truth; agent {}",
        agent.display()
    );
    Ok(())
}

/// The binary alone (no agent next to it or in ../lib/rtl-ebpf): `run` must stop with exit
/// code 6 and name both places it looked.
fn agent_missing(usr: &Path, work: &Path) -> Result<()> {
    let lone: PathBuf = work.join("lone/bin");
    fs::create_dir_all(&lone)?;
    let bin = lone.join("rtl-ebpf");
    fs::copy(usr.join(Layout::BIN), &bin)?;
    let out = std::process::Command::new(&bin)
        .args(["run", "--quiet", "-o"])
        .arg(work.join("lone.db"))
        .args(["--", "true"])
        .output()
        .context("cannot start the lone binary")?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(6), "without an agent `run` exited with {:?}, not 6: {err}", out.status);
    for p in [lone.join("librtl_agent.so"), lone.join("../lib/rtl-ebpf/librtl_agent.so")] {
        ensure!(err.contains(&p.display().to_string()), "the missing-agent error does not name {}: {err}", p.display());
    }
    println!("xtask: without an agent, run stops with exit 6: {}", err.trim());
    Ok(())
}

fn sql(db: &Path, q: &str) -> Result<String> {
    cmd("sqlite3").args(["-batch", "-noheader", "-readonly"]).arg(db).arg(q).output()
}
