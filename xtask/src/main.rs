//! Project tasks. `cargo xtask <task>`:
//!
//! | task | what it does |
//! | --- | --- |
//! | `setup` | installs what is missing (Debian packages, nightly rust-src, bpf-linker); idempotent |
//! | `build` | setup, then builds the CLI (`target/release/rtl-ebpf`), the agent, workloads, simulator |
//! | `run [-- ARGS]` | build, then traces the bundled demo workload (or runs rtl-ebpf with ARGS) |
//! | `test` | build, then every test: unit, integration (as root, real BPF), simulator self-test |
//! | `bench` | build, then the benchmarks of docs/benchmarks.md, printing each figure |
//! | `sim` | builds the ROCm runtime simulator; prints its library directory last |
//! | `dist [--check]` | build, then the .deb and the tarball in `target/dist/`; `--check` installs both into fresh roots and traces the demo with them |
//! | `container` | dist, then builds docker/Dockerfile (the .deb in Debian 12, base image made locally) with podman and traces the demo inside it |

mod bench;
mod bench_hsa;
mod bench_stacks;
mod container;
mod dist;
mod dist_check;
mod manpage;
mod setup;
mod util;

use anyhow::{bail, Context, Result};
use util::{cmd, root};

fn main() {
    if let Err(e) = real_main() {
        eprintln!("xtask: error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (task, rest) = match args.split_first() {
        Some((t, r)) => (t.as_str(), r),
        None => ("help", &[][..]),
    };
    match task {
        "setup" => setup::run(),
        "build" => build(),
        "run" => run(rest),
        "test" => test(rest),
        "bench" => {
            build()?;
            bench::run(rest)
        }
        "sim" => {
            setup::run()?;
            let dir = sim()?;
            println!("{}", dir.display());
            Ok(())
        }
        "dist" => match rest {
            [] => {
                build_binaries()?;
                let d = dist::make()?;
                println!("{}\n{}", d.deb.display(), d.tarball.display());
                Ok(())
            }
            [c] if c == "--check" => {
                require_root("the package check traces the demo with the installed binary")?;
                build()?;
                dist_check::run(&dist::make()?)
            }
            _ => bail!("usage: cargo xtask dist [--check]"),
        },
        "container" => {
            require_root("podman builds and runs the image as root; the trace in it loads eBPF")?;
            build()?;
            container::run(&dist::make()?)
        }
        "help" | "--help" | "-h" => {
            println!("usage: cargo xtask <setup|build|run [-- ARGS]|test [FILTER]|bench [NAME]|sim|dist [--check]|container>");
            Ok(())
        }
        other => bail!("unknown task `{other}`: try `cargo xtask help`"),
    }
}

/// Builds the simulator; returns its library directory.
pub fn sim() -> Result<std::path::PathBuf> {
    cmd("make").args(["-s", "-C", "tests/rocm-sim"]).current_dir(root()).run()?;
    Ok(root().join("tests/rocm-sim/build/lib"))
}

/// Setup, then the collector and the agent (`target/release/`).
fn build_binaries() -> Result<()> {
    setup::run()?;
    cmd("cargo").args(["build", "--release", "--ignore-rust-version", "-p", "rtl-user", "-p", "rtl-agent"]).current_dir(root()).run()
}

fn build() -> Result<()> {
    build_binaries()?;
    cmd("make").args(["-s", "-C", "tests/workloads"]).current_dir(root()).run()?;
    sim()?;
    Ok(())
}

/// The embedded default: trace the demo workload on the simulated runtime with the agent.
fn run(rest: &[String]) -> Result<()> {
    build()?;
    let bin = root().join("target/release/rtl-ebpf");
    let rest: Vec<String> = rest.iter().skip_while(|a| *a == "--").cloned().collect();
    if !rest.is_empty() {
        let status = cmd(bin.to_str().unwrap()).args(&rest).current_dir(root()).status()?;
        std::process::exit(status.code().unwrap_or(1));
    }
    let out = root().join("rtl-demo.db");
    let demo = root().join("tests/workloads/build/demo");
    let sim = root().join("tests/rocm-sim/build/lib");
    // The demo (built with hipcc against Debian's ROCm 5.2 headers and library) runs on the
    // ROCm simulator, which has a GPU to give it and the built-in profiler the agent uses; on
    // Debian's real library without a GPU every call would fail and no kernel would run.
    println!("xtask: tracing the bundled demo workload ({}) on the ROCm simulator, with GPU times", demo.display());
    let status = cmd(bin.to_str().unwrap())
        .args(["run", "--force", "-o", out.to_str().unwrap(), "--", "env"])
        .arg(format!("LD_LIBRARY_PATH={}", sim.display()))
        .arg(demo.to_str().unwrap())
        .env("LD_LIBRARY_PATH", &sim)
        .current_dir(root())
        .status()?;
    if !status.success() {
        bail!("rtl-ebpf run exited with {status}");
    }
    cmd(bin.to_str().unwrap()).arg("summary").arg(&out).current_dir(root()).run()?;
    println!("xtask: trace written to {}; more: `target/release/rtl-ebpf summary --html report.html {}`", out.display(), out.display());
    Ok(())
}

fn test(rest: &[String]) -> Result<()> {
    build()?;
    require_root("the test suite loads eBPF programs")?;
    house_rules()?;
    // rtl-ebpf only builds for the BPF target (rtl-user's build.rs builds it).
    let mut args = vec!["test", "--workspace", "--exclude", "rtl-ebpf", "--release", "--ignore-rust-version", "--no-fail-fast"];
    args.extend(rest.iter().map(String::as_str));
    // One test at a time: each crate's integration tests are one binary, and its heavy tests
    // (bursts at full speed, 4x4 load, ring-buffer overflow) measure the collector only when
    // nothing else runs beside them on a 2-core machine. RUST_TEST_THREADS set by the caller wins.
    let threads = std::env::var("RUST_TEST_THREADS").unwrap_or_else(|_| "1".into());
    cmd("cargo").args(&args).env("RUST_TEST_THREADS", threads).current_dir(root()).run()?;
    // The self-tests the READMEs name: the simulator's (against the real ABIs), and the
    // workloads' own truth on Debian's real libamdhip64 (no GPU: calls fail) and on the simulator.
    // A missing script is a failure, not a skip.
    let rocm_sim = root().join("tests/rocm-sim/selftest.sh");
    let workloads = root().join("tests/workloads/selftest.sh");
    for script in [&rocm_sim, &workloads] {
        if !script.is_file() {
            bail!("{} is missing: the self-test cannot run", script.display());
        }
    }
    cmd("bash").arg(&rocm_sim).current_dir(root()).run().context("tests/rocm-sim/selftest.sh failed")?;
    cmd("bash").arg(&workloads).current_dir(root()).run().context("tests/workloads/selftest.sh (real library) failed")?;
    cmd("bash")
        .arg(&workloads)
        .args(["--sim", "tests/rocm-sim/build/lib"])
        .current_dir(root())
        .run()
        .context("tests/workloads/selftest.sh --sim failed")?;
    // The package, installed into fresh roots and in a container, traces the demo.
    let d = dist::make()?;
    dist_check::run(&d)?;
    container::run(&d)?;
    println!("xtask: all test suites passed");
    Ok(())
}

/// The house rules, checked before the tests: formatted as rustfmt.toml says (the eBPF crate and
/// the fuzz targets too), and clippy-clean with warnings as errors on every host crate and target.
fn house_rules() -> Result<()> {
    cmd("cargo").args(["fmt", "--all", "--check"]).current_dir(root()).run().context("the code is not formatted: run `cargo fmt --all`")?;
    cmd("cargo")
        .args(["fmt", "--check"])
        .current_dir(root().join("fuzz"))
        .run()
        .context("fuzz/ is not formatted: run `cargo fmt` in fuzz/")?;
    let clippy =
        ["clippy", "--workspace", "--exclude", "rtl-ebpf", "--release", "--ignore-rust-version", "--all-targets", "--", "-D", "warnings"];
    cmd("cargo")
        .args(clippy)
        .current_dir(root())
        .run()
        .context("clippy found warnings (fix them, or allow one with a comment that says why)")?;
    println!("xtask: formatted, clippy-clean");
    Ok(())
}

fn require_root(why: &str) -> Result<()> {
    // SAFETY: no preconditions.
    if unsafe { libc_geteuid() } != 0 {
        bail!("this must run as root (sudo cargo xtask ...): {why}");
    }
    Ok(())
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
