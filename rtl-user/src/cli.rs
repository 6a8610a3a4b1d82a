//! Command-line interface.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::probe::library::Runtime;
use crate::probe::loader::ApiSelection;

const ABOUT: &str = "Trace what every process asks of the GPU: HIP API calls timed by eBPF uprobes \
on libamdhip64 (no code injected), written as a rocpd SQLite trace.";

const AFTER: &str = "\
Examples:
  sudo rtl-ebpf attach --pid 4242 -o server.db    # a running process
  sudo rtl-ebpf --all --duration 30 -o node.db   # every process, 30 s
  sudo rtl-ebpf run -o t.db -- python3 serve.py  # a command, its tree
  rtl-ebpf summary t.db                          # top kernels and APIs
  rtl-ebpf convert t.db --format perfetto -o t.json.gz

Exit codes: 0 ok (for `run`: the command's own code), 2 bad arguments,
3 not root / no BPF permission, 4 kernel lacks uprobes/ring buffers,
5 no such process or no HIP library in it, 6 library is not a usable ELF
(or the agent is missing), 7 output not writable, 8 input trace
unreadable, 1 other.
Docs: docs/tracing.md (how to trace), docs/trace-format.md (what the
columns mean); installed: /usr/share/doc/rtl-ebpf/docs/, man rtl-ebpf.";

#[derive(Parser, Debug)]
#[command(name = "rtl-ebpf", version, about = ABOUT, after_help = AFTER)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Cli {
    /// Trace every process on the node (system-wide), until Ctrl-C or --duration.
    #[arg(long)]
    pub all: bool,

    #[command(flatten)]
    pub trace: TraceOpts,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Trace one or more running processes by PID.
    Attach {
        /// Process to trace (repeatable). Its HIP library is found in /proc/PID/maps.
        #[arg(long = "pid", required = true, value_name = "PID")]
        pids: Vec<u32>,
        #[command(flatten)]
        trace: TraceOpts,
    },
    /// Launch a command, trace it and every process it forks or execs, exit with its code.
    Run {
        #[command(flatten)]
        trace: TraceOpts,
        /// The command and its arguments (after `--`).
        #[arg(required = true, last = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Summarise a trace: top kernels, top APIs, GPU busy, per process, latency, drops.
    Summary {
        trace: PathBuf,
        /// Machine-readable JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Also write a self-contained HTML report (timeline and charts).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Rows per table.
        #[arg(long, default_value_t = 15)]
        top: usize,
    },
    /// Convert a trace for a timeline viewer (Perfetto UI, chrome://tracing).
    Convert {
        trace: PathBuf,
        /// Output format. `perfetto` writes Chrome JSON for .json / .json.gz and Perfetto's
        /// native protobuf for .pftrace.
        #[arg(long, default_value = "perfetto")]
        format: String,
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Merge traces (several runs or nodes) into one, remapping ids and strings.
    Merge {
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        #[arg(required = true, num_args = 1..)]
        inputs: Vec<PathBuf>,
    },
    /// List the APIs that would be probed in a library, and those it lacks.
    ListApis {
        /// Library to inspect (default: the runtime's installed library, libamdhip64 or libcuda).
        #[arg(long)]
        lib: Option<PathBuf>,
        #[arg(long, default_value = "default")]
        apis: ApiSelection,
        /// Which runtime's table and default library.
        #[arg(long, value_enum, default_value_t = Runtime::Hip)]
        runtime: Runtime,
    },
}

/// Options shared by the tracing modes.
#[derive(Args, Debug, Clone)]
pub struct TraceOpts {
    /// Trace file to write (SQLite, rocpd schema).
    #[arg(short, long, value_name = "FILE", default_value = "rtl-trace.db")]
    pub output: PathBuf,

    /// Replace the output file if it exists.
    #[arg(long)]
    pub force: bool,

    /// Stop after this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub duration: Option<f64>,

    /// GPU runtime to trace: `hip` (libamdhip64, roctx) or `cuda` (libcuda driver API, NVTX;
    /// libcudart by name with --apis). Libraries are found in the runtime's install paths, the
    /// command's Python environment (CUDA wheels) and what the traced processes map.
    #[arg(long, value_enum, default_value_t = Runtime::Hip)]
    pub runtime: Runtime,

    /// APIs to probe: `default` (curated, no trivial getters), `all` (every exported hip* /
    /// cu* / cuda* / nvtx* function), or a comma-separated list of names.
    #[arg(long, default_value = "default")]
    pub apis: ApiSelection,

    /// Also probe this library file (repeatable), e.g. a copy outside the usual paths.
    #[arg(long = "lib", value_name = "PATH")]
    pub libs: Vec<PathBuf>,

    /// Ring buffer size in MiB (power of two).
    #[arg(long, default_value_t = 64, value_name = "MIB", value_parser = parse_buffer)]
    pub buffer_mb: u32,

    /// Largest backlog, in MiB, of records read from the ring buffer but not yet written:
    /// bursts faster than SQLite are kept (64 MiB in memory, the rest in an unlinked file next
    /// to the trace) and written after; beyond this the kernel side drops and counts records.
    #[arg(long, default_value_t = 4096, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub spool_mb: u64,

    /// No live status line.
    #[arg(short, long)]
    pub quiet: bool,

    /// GPU timestamps: `auto` (HIP: the agent uses hipProfiler*Ext when the runtime has it;
    /// CUDA: CUPTI), `clr`, `hsa`, `cupti` (CUDA activity records), or `none` (CPU side only, no
    /// agent). `run` loads the agent into the command; for `attach`/`--all`, start the
    /// application with the agent (docs/tracing.md).
    #[arg(long, default_value = "auto", value_parser = ["auto", "clr", "hsa", "cupti", "none"])]
    pub gpu: String,

    /// The agent library `run` preloads (default: librtl_agent.so next to this binary, else
    /// ../lib/rtl-ebpf/librtl_agent.so from the binary's directory, where packages install it).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
}

fn parse_duration(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("duration must be a positive number of seconds, got {s}"));
    }
    Ok(v)
}

fn parse_buffer(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|_| format!("`{s}` is not a number of MiB"))?;
    if v == 0 || !v.is_power_of_two() || v > 2048 {
        return Err(format!("--buffer-mb must be a power of two between 1 and 2048, got {s}"));
    }
    Ok(v)
}
