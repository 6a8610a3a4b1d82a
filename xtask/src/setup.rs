//! Installs what a fresh machine lacks, idempotently (the recipe and pins of
//! ../shared/reference/toolchain.md): Debian packages, the nightly toolchain's rust-src,
//! bpf-linker built against LLVM 22, the Python packages the Perfetto check uses, and the
//! virtual environment with Holistic Trace Analysis the Kineto check uses (`target/venv-hta`).

use anyhow::{bail, Result};

use crate::util::cmd;

/// Debian packages: the eBPF build chain (LLVM 22 matches the nightly's LLVM), the real ROCm
/// runtime and headers the workloads and simulator build against, hipcc for real kernels,
/// and tools the tests cross-check with (a headless Chromium renders the HTML report).
const APT_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libclang-22-dev",
    "zlib1g-dev",
    "libzstd-dev",
    "libamdhip64-5",
    "libamdhip64-dev",
    "libhsa-runtime-dev",
    "hipcc",
    "bpftool",
    "sqlite3",
    "make",
    "g++",
    "bpftrace",
    // the HTML report's browser test (rtl-user/tests/read_html_browser.rs)
    "chromium-headless-shell",
];

const PIP_PACKAGES: &[&str] = &["perfetto", "protobuf"];

pub fn run() -> Result<()> {
    apt(APT_PACKAGES)?;
    rust()?;
    pip()?;
    hta_venv()?;
    Ok(())
}

/// The virtual environment with Holistic Trace Analysis at the version
/// rtl-user/tests/read/hta-requirements.txt pins (tests/read_interop.rs runs it; the test makes
/// the same environment itself when it is missing).
pub fn hta_venv() -> Result<()> {
    let root = crate::util::root();
    let venv = root.join("target/venv-hta");
    let python = venv.join("bin/python");
    let reqs = root.join("rtl-user/tests/read/hta-requirements.txt");
    if !python.exists() {
        eprintln!("xtask setup: installing Holistic Trace Analysis into {} (a few minutes)", venv.display());
        cmd("python3").args(["-m", "venv"]).arg(venv.to_str().unwrap()).run()?;
    }
    // Exact pins: a no-op (and no download) when they are all installed already.
    cmd(python.to_str().unwrap())
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(reqs.to_str().unwrap())
        .run()
}

/// Installs those of `packages` that are missing (one apt-get run); also used by tasks that
/// need a tool only they use (`dist`: dpkg-dev, `container`: podman, mmdebstrap).
pub fn apt(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !cmd("dpkg-query").args(["-W", "-f=${Status}", p]).output().is_ok_and(|s| s.contains("install ok installed")))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!("xtask setup: installing Debian packages: {}", missing.join(" "));
    cmd("apt-get").arg("update").env("DEBIAN_FRONTEND", "noninteractive").run()?;
    cmd("apt-get").args(["install", "-y", "--no-install-recommends"]).args(&missing).env("DEBIAN_FRONTEND", "noninteractive").run()
}

fn rust() -> Result<()> {
    let toolchains = cmd("rustup").args(["toolchain", "list"]).output()?;
    if !toolchains.lines().any(|l| l.starts_with("nightly")) {
        eprintln!("xtask setup: installing the nightly toolchain");
        cmd("rustup").args(["toolchain", "install", "nightly", "--profile", "minimal"]).run()?;
    }
    let comps = cmd("rustup").args(["component", "list", "--installed", "--toolchain", "nightly"]).output()?;
    if !comps.lines().any(|l| l.starts_with("rust-src")) {
        eprintln!("xtask setup: adding rust-src to nightly");
        cmd("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]).run()?;
    }
    if !cmd("bpf-linker").arg("--version").ok() {
        eprintln!("xtask setup: building bpf-linker 0.13 against LLVM 22 (1-2 minutes)");
        let path = format!("/usr/lib/llvm-22/bin:{}", std::env::var("PATH").unwrap_or_default());
        cmd("cargo")
            .args(["install", "bpf-linker", "--version", "0.13.0", "--locked", "--no-default-features", "--features", "llvm-22"])
            .env("PATH", path)
            .run()?;
        if !cmd("bpf-linker").arg("--version").ok() {
            bail!("bpf-linker was installed but is not on PATH: add ~/.cargo/bin to PATH");
        }
    }
    Ok(())
}

fn pip() -> Result<()> {
    let have = cmd("python3").args(["-c", "import perfetto.protos.perfetto.trace.perfetto_trace_pb2, google.protobuf"]).ok();
    if have {
        return Ok(());
    }
    eprintln!("xtask setup: installing Python packages: {}", PIP_PACKAGES.join(" "));
    let mut c = cmd("python3").args(["-m", "pip", "install", "--quiet"]);
    if cmd("python3").args(["-m", "pip", "install", "--help"]).output().is_ok_and(|h| h.contains("break-system-packages")) {
        c = c.arg("--break-system-packages");
    }
    c.args(PIP_PACKAGES).run()
}
