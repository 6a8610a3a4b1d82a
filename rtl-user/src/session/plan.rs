//! What a session traces, decided before anything is attached: preflight checks, the processes,
//! the user `run`'s command runs as, the agent, and the libraries found to probe.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};

use crate::cli::{GpuSource, TraceOpts};
use crate::error::Fatal;
use crate::pid_watch::PidWatch;
use crate::probe::library::{LibKind, LibraryFile, Runtime};
use crate::probe::scan::{Find, ScanResult, Scanner};
use crate::run_as::RunAs;
use crate::term::message as say;

/// What to trace.
#[derive(Debug, Clone)]
pub enum Mode {
    Pids(Vec<u32>),
    All,
    Run(Vec<String>),
}

impl Mode {
    /// The trace's `mode` metadata: JSON (`{"kind": "run", "command": [..]}`, `{"kind":
    /// "attach", "pids": [..]}`, `{"kind": "all"}`), shown structured by the readers (which
    /// also read the Rust debug text older traces hold).
    pub fn to_metadata(&self) -> String {
        match self {
            Mode::All => serde_json::json!({"kind": "all"}),
            Mode::Pids(p) => serde_json::json!({"kind": "attach", "pids": p}),
            Mode::Run(c) => serde_json::json!({"kind": "run", "command": c}),
        }
        .to_string()
    }
}

/// What to trace and the libraries to probe at start.
pub(super) struct Plan {
    pub mode: Mode,
    /// `attach --pid`: the processes' pidfds; the session ends when they have all exited (unless
    /// --keep-waiting).
    pub watch: Option<PidWatch>,
    /// `run`: under sudo the command runs as the user who ran sudo, unless --as-root.
    pub run_as: Option<RunAs>,
    /// `run`: the agent preloaded into the command, whose hand-off function is probed.
    pub agent: Option<PathBuf>,
    /// Libraries are found and read on the scanner's worker thread, each step under a time
    /// limit: a process or file another user controls cannot hold the session up.
    pub scanner: Scanner,
    /// The libraries to probe at start (the agent's included).
    pub libs: Vec<LibraryFile>,
    /// `--stacks`: what the processes traced from the start map (for unwinding).
    pub maps: Vec<crate::stacks::ProcessMaps>,
}

impl Plan {
    pub fn make(mode: Mode, opts: &TraceOpts) -> Result<Self> {
        for lib in &opts.libs {
            crate::probe::loader::check_library_path(lib)?;
        }
        let watch = match &mode {
            Mode::Pids(p) => Some(PidWatch::open(p)?),
            _ => None,
        };
        let run_as = match &mode {
            Mode::Run(_) if !opts.as_root => RunAs::invoking_user()?,
            _ => None,
        };
        if opts.stacks == crate::cli::StackMode::Python && opts.no_python_frames {
            return Err(anyhow!(
                "--stacks python records only Python frames (and the native caller): it cannot go with --no-python-frames"
            ));
        }
        let mut scanner = Scanner::start()?;
        scanner.set_stacks(opts.stacks != crate::cli::StackMode::Off);
        let mut found = scan(&mut scanner, initial_finds(&mode, opts));
        let maps = std::mem::take(&mut found.maps);
        if let Mode::Pids(p) = &mode {
            check_pids(p, &found, opts)?;
        }
        let mut libs = found.libs;
        let agent = agent_for(&mode, opts)?;
        if let Some(a) = &agent {
            let lib = LibraryFile::open(a.clone(), a.display().to_string(), LibKind::Agent)?;
            libs.extend(scan(&mut scanner, vec![Find::Opened(vec![lib])]).libs);
        }
        Ok(Self { mode, watch, run_as, agent, scanner, libs, maps })
    }

    /// The processes traced from the start (`attach --pid`).
    pub fn pids(&self) -> &[u32] {
        match &self.mode {
            Mode::Pids(p) => p,
            _ => &[],
        }
    }
}

/// Checks that the kernel and our privileges can do what we need, with a remedy if not.
pub fn preflight() -> Result<()> {
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(anyhow!(Fatal::Permission(
            "rtl-ebpf needs root to load eBPF programs: run it with sudo (or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)".into()
        )));
    }
    // The probes see every task by its pid in the initial PID namespace: a collector in a
    // container's own PID namespace would look for pids that never appear, and trace nothing.
    if let Some(initial) = in_initial_pid_namespace() {
        if !initial {
            return Err(anyhow!(Fatal::KernelSupport(
                "rtl-ebpf runs in a nested PID namespace (a container without --pid=host): the probes report the host's pids, \
                 so nothing it asks for would be traced; run it in the host PID namespace (docker/podman run --pid=host)"
                    .into()
            )));
        }
    }
    if !std::path::Path::new("/sys/bus/event_source/devices/uprobe").exists() {
        return Err(anyhow!(Fatal::KernelSupport(
            "this kernel has no uprobe PMU (/sys/bus/event_source/devices/uprobe): it needs CONFIG_UPROBE_EVENTS".into()
        )));
    }
    Ok(())
}

/// Is this process in the initial PID namespace? Its inode is fixed by the kernel
/// (PROC_PID_INIT_INO, 0xEFFFFFFC); a container's own namespace has another. None if unknown.
fn in_initial_pid_namespace() -> Option<bool> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(link.to_str()? == "pid:[4026531836]")
}

/// Runs a scan on the scanner's thread and waits for it; says what it could not read.
fn scan(scanner: &mut Scanner, finds: Vec<Find>) -> ScanResult {
    let mut notices = Vec::new();
    let mut found = scanner.run_blocking(finds, &mut notices);
    for n in notices.into_iter().chain(std::mem::take(&mut found.errors)) {
        say(&n);
    }
    found
}

/// Where the libraries to probe at start are looked for.
fn initial_finds(mode: &Mode, opts: &TraceOpts) -> Vec<Find> {
    match mode {
        Mode::Pids(p) => {
            let extra: Vec<LibraryFile> = opts
                .libs
                .iter()
                .filter_map(|p| {
                    LibraryFile::open(p.clone(), p.display().to_string(), LibKind::of(p).unwrap_or(opts.runtime.primary())).ok()
                })
                .collect();
            vec![Find::Mapped { pids: p.clone(), with_loader: false }, Find::Opened(extra)]
        }
        Mode::All => {
            vec![Find::Installed { runtime: opts.runtime, ld_library_path: None, extra: opts.libs.clone(), command: None }, Find::Anywhere]
        }
        // The command's runtime is looked for as its loader would: with our LD_LIBRARY_PATH, which it inherits.
        Mode::Run(cmd) => vec![Find::Installed {
            runtime: opts.runtime,
            ld_library_path: std::env::var("LD_LIBRARY_PATH").ok(),
            extra: opts.libs.clone(),
            command: cmd.first().cloned(),
        }],
    }
}

/// `attach --pid`: every process must map the runtime (or `--lib` names what to probe).
fn check_pids(pids: &[u32], found: &ScanResult, opts: &TraceOpts) -> Result<()> {
    for &pid in pids {
        let kinds = match found.mapped.iter().find(|(q, _)| *q == pid) {
            Some((_, Ok(k))) => k,
            Some((_, Err(e))) => return Err(anyhow!(Fatal::NoProcess(format!("PID {pid}: {e}")))),
            None => return Err(anyhow!(Fatal::NoProcess(format!("PID {pid}: its libraries could not be read")))),
        };
        if !kinds.contains(&opts.runtime.primary()) && opts.libs.is_empty() {
            return Err(anyhow!(Fatal::NoProcess(format!(
                "PID {pid} maps no {} (not a {} process, or it has not loaded the runtime yet); pass --lib PATH to probe a library anyway",
                opts.runtime.library_name(),
                runtime_name(opts.runtime),
            ))));
        }
        if opts.gpu != GpuSource::None && !kinds.contains(&LibKind::Agent) {
            say(&format!(
                "PID {pid} has no rtl-ebpf agent loaded: its trace will have API calls but no GPU times \
                 (start it with LD_PRELOAD=<dir>/librtl_agent.so to get them; docs/tracing.md)"
            ));
        }
    }
    Ok(())
}

/// `run` preloads the agent into the command (its GPU source), unless there is none to use.
fn agent_for(mode: &Mode, opts: &TraceOpts) -> Result<Option<PathBuf>> {
    match (mode, opts.gpu) {
        (_, GpuSource::Cupti) if opts.runtime != Runtime::Cuda => Err(anyhow!("--gpu cupti needs --runtime cuda")),
        // CUDA's GPU source is CUPTI (`auto` or `cupti`); clr/hsa are HIP's.
        (Mode::Run(_), GpuSource::Clr | GpuSource::Hsa) if opts.runtime == Runtime::Cuda => Ok(None),
        (Mode::Run(_), GpuSource::None) | (Mode::Pids(_) | Mode::All, _) => Ok(None),
        (Mode::Run(_), _) => find_agent(opts).map(Some),
    }
}

/// The agent library: `--agent`, or librtl_agent.so next to this binary, or in
/// ../lib/rtl-ebpf/ from the binary's directory.
fn find_agent(opts: &TraceOpts) -> Result<PathBuf> {
    // --agent PATH, else the agent next to the binary (a build tree: target/release/), else
    // <exe dir>/../lib/rtl-ebpf/ (an install: /usr/bin + /usr/lib/rtl-ebpf, or a tarball).
    let looked: Vec<PathBuf> = match &opts.agent {
        Some(p) => vec![p.clone()],
        None => {
            let exe = std::env::current_exe().context("cannot find the rtl-ebpf binary's own path (/proc/self/exe)")?;
            let dir = exe.parent().unwrap_or(std::path::Path::new("/"));
            vec![dir.join("librtl_agent.so"), dir.join("../lib/rtl-ebpf/librtl_agent.so")]
        }
    };
    match looked.iter().find(|p| p.is_file()) {
        Some(p) => std::fs::canonicalize(p).with_context(|| format!("cannot resolve the agent library {}", p.display())),
        None => {
            let list = looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            let how = if opts.agent.is_some() {
                "check the --agent path"
            } else {
                "install the package (its agent is /usr/lib/rtl-ebpf/librtl_agent.so), build it \
                 (cargo build --release --ignore-rust-version -p rtl-agent), pass --agent PATH"
            };
            Err(anyhow!(Fatal::BadLibrary(format!(
                "the agent library librtl_agent.so was not found (looked for {list}): {how}, or use --gpu none"
            ))))
        }
    }
}

pub(super) fn runtime_name(r: Runtime) -> &'static str {
    match r {
        Runtime::Hip => "HIP",
        Runtime::Cuda => "CUDA",
    }
}
