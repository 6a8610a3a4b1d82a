//! Command-line interface.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
pub use rtl_common::GpuSource;

use crate::probe::library::Runtime;
use crate::probe::selection::ApiSelection;

const ABOUT: &str = "Trace what every process asks of the GPU: HIP API calls timed by eBPF uprobes \
on libamdhip64 (no code injected), written as a rocpd SQLite trace.";

const AFTER: &str = "\
Examples:
  sudo rtl-ebpf attach -p 4242 -o server.db      # a running process
  sudo rtl-ebpf --all --duration 30s -o node.db  # every process, 30 s
  sudo rtl-ebpf run -o t.db -- python3 serve.py  # a command, its tree
  rtl-ebpf summary t.db                          # top kernels and APIs
  rtl-ebpf check t.db --min-occupancy 0.8        # a CI regression guard
  rtl-ebpf convert t.db -o t.pftrace             # for ui.perfetto.dev

Exit codes: 0 ok (for `run`: the command's own code; also when stdout
is closed early, as by `| head`), 2 bad arguments, 3 not root / no BPF
permission, 4 kernel lacks uprobes/ring buffers, 5 no such process or
no HIP library in it, 6 library is not a usable ELF (or the agent is
missing), 7 output not writable, 8 input trace unreadable, 9 `check`:
a threshold not met, 1 other.
Docs: docs/tracing.md (how to trace), docs/reading-traces.md (summary,
convert, merge), docs/trace-format.md (what the columns mean);
installed: /usr/share/doc/rtl-ebpf/docs/, man rtl-ebpf.";

const ATTACH_AFTER: &str = "\
Examples:
  sudo rtl-ebpf attach -p 4242 -o server.db        # until Ctrl-C
  sudo rtl-ebpf attach -p 4242,4243 --duration 2m  # two, two minutes
  sudo rtl-ebpf attach -p 4242 --apis hipMemcpy,hipLaunchKernel

GPU times need the application started with the agent
(docs/tracing.md).";

const RUN_AFTER: &str = "\
Examples:
  sudo rtl-ebpf run -o t.db -- ./my_app --size 1024
  sudo rtl-ebpf run --duration 30s -o t.db -- python3 train.py
  sudo rtl-ebpf run --runtime cuda -o t.db -- python3 infer.py

Exit code: the command's own (128 + the signal that killed it).";

const SUMMARY_AFTER: &str = "\
Examples:
  rtl-ebpf summary t.db                     # tables on the terminal
  rtl-ebpf summary t.db --top 0             # every kernel and API
  rtl-ebpf summary t.db --json | jq .lost   # the loss counters
  rtl-ebpf summary t.db --html report.html  # also an HTML page
  rtl-ebpf summary rocprofv3.db t.db        # two runs side by side

The trace is only read, never written (an older layout is migrated
in a private copy).";

const CHECK_AFTER: &str = "\
Examples:
  rtl-ebpf check t.db --min-occupancy 0.8 --max-gaps 100us:5 \\
      --max-mean hipGraphLaunch=150us
  rtl-ebpf check t.db --thresholds ci/gpu-thresholds.toml --json
  sudo rtl-ebpf run -o t.db -- python3 bench.py && rtl-ebpf check t.db ...

Prints each metric against its threshold (pass / FAIL). Exit codes:
0 every threshold met, 9 one or more not met (also when there is
nothing to measure: no GPU ops, an API never called), 2 bad
thresholds, 8 unreadable trace. Metrics: docs/reading-traces.md.";

const CONVERT_AFTER: &str = "\
Examples:
  rtl-ebpf convert t.db -o t.pftrace   # Perfetto protobuf (big traces)
  rtl-ebpf convert t.db -o t.json.gz   # Chrome JSON, gzip
  rtl-ebpf convert t.db --format kineto -o t.json.gz   # for HTA
  rtl-ebpf convert t.db --format kineto --per-process -o run/t.json
  rtl-ebpf convert t.db --format rocpd-sdk -o sdk.db   # for AMD's rocpd

Open Perfetto output in https://ui.perfetto.dev; docs/reading-traces.md
says which tool reads which format. The output appears only when
complete.";

const MERGE_AFTER: &str = "\
Examples:
  rtl-ebpf merge -o all.db node1.db node2.db
  rtl-ebpf merge -o week.db mon.db tue.db wed.db

Each input may be given once; the output must not be one of them.";

const LIST_APIS_AFTER: &str = "\
Examples:
  rtl-ebpf list-apis                        # default set, installed HIP
  rtl-ebpf list-apis --apis all --lib ./libamdhip64.so
  rtl-ebpf list-apis --apis hipMemcpy,hipFoo  # is hipFoo exported?";

#[derive(Parser, Debug)]
#[command(name = "rtl-ebpf", version, about = ABOUT, after_help = AFTER)]
#[command(args_conflicts_with_subcommands = true)]
#[command(mut_arg("agent", |a| a.hide(true)), mut_arg("graph_nodes", |a| a.hide(true)))]
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
    #[command(after_help = ATTACH_AFTER, mut_arg("agent", |a| a.hide(true)), mut_arg("graph_nodes", |a| a.hide(true)))]
    Attach {
        /// Process to trace: -p 1 -p 2, or -p 1,2. Its HIP library is found in /proc/PID/maps.
        #[arg(short = 'p', long = "pid", required = true, value_name = "PID", value_delimiter = ',')]
        pids: Vec<u32>,
        /// Keep tracing after every PID has exited, until Ctrl-C or --duration (by default the
        /// session stops, and says so, when the last one exits).
        #[arg(long)]
        keep_waiting: bool,
        #[command(flatten)]
        trace: TraceOpts,
    },
    /// Launch a command, trace it and every process it forks or execs, exit with its code.
    #[command(after_help = RUN_AFTER)]
    Run {
        #[command(flatten)]
        trace: TraceOpts,
        /// Run the command as root. By default, under sudo, it runs as the user who ran sudo
        /// (SUDO_UID, SUDO_GID, their groups, HOME, USER and LOGNAME), like `sudo -u USER CMD`.
        #[arg(long)]
        as_root: bool,
        /// The command and its arguments (after `--`).
        #[arg(required = true, last = true, value_name = "CMD")]
        cmd: Vec<String>,
    },
    /// Summarise a trace: top kernels, top APIs, GPU busy, per process, latency, drops.
    #[command(after_help = SUMMARY_AFTER)]
    Summary {
        /// The trace to read (an rtl-ebpf, RPD, rocm-trace-lite or rocprofiler-sdk rocpd SQLite
        /// file); with a second one, the two side by side with their differences (B - A).
        #[arg(value_name = "TRACE", required = true, num_args = 1..=2)]
        traces: Vec<PathBuf>,
        /// Machine-readable JSON instead of tables.
        #[arg(long)]
        json: bool,
        /// Also write a self-contained HTML report (timeline and charts) to FILE (created
        /// private, 0600; replaced if it exists; never the trace itself).
        #[arg(long, value_name = "FILE")]
        html: Option<PathBuf>,
        /// Rows in the kernel and API tables; 0 shows them all. The tables say how many rows
        /// were left out (JSON: `totals.kernels_left_out`, `totals.apis_left_out`).
        #[arg(long, default_value_t = 15, value_name = "N")]
        top: usize,
        /// Leave out GPU ops linked to no traced API call (rtl_op.link 0, 4, 5) and the
        /// profiler-only calls written for them: keep only what the probes confirm. The
        /// unlinked ops are what the traced process's agent alone says (docs/tracing.md).
        #[arg(long)]
        linked_only: bool,
    },
    /// Test a trace against thresholds (GPU occupancy, inter-kernel gaps, API latency) for CI.
    #[command(after_help = CHECK_AFTER)]
    Check {
        /// The trace to read.
        #[arg(value_name = "TRACE")]
        trace: PathBuf,
        /// Every GPU busy at least this fraction of its window (0.8, or 80%).
        #[arg(long, value_name = "FRACTION", value_parser = rtl_trace::read::check::thresholds::parse_occupancy)]
        min_occupancy: Option<f64>,
        /// At most COUNT gaps longer than LENGTH between consecutive ops on each GPU queue, in
        /// the window (repeatable): 100us:5.
        #[arg(long, value_name = "LENGTH:COUNT", value_parser = rtl_trace::read::check::thresholds::parse_gap_limit)]
        max_gaps: Vec<rtl_trace::read::check::GapLimit>,
        /// The API's mean call duration at most this (repeatable): hipGraphLaunch=150us.
        #[arg(long, value_name = "API=DURATION", value_parser = rtl_trace::read::check::thresholds::parse_api_limit)]
        max_mean: Vec<(String, i64)>,
        /// The API's p99 call duration at most this (repeatable): hipGraphLaunch=400us.
        #[arg(long, value_name = "API=DURATION", value_parser = rtl_trace::read::check::thresholds::parse_api_limit)]
        max_p99: Vec<(String, i64)>,
        /// Thresholds from a TOML file (keys: min_occupancy, window, max_gaps, [max_mean],
        /// [max_p99]); options given here add to it or replace its value.
        #[arg(long, value_name = "FILE")]
        thresholds: Option<PathBuf>,
        /// What occupancy and gaps are measured over, per GPU: `replay` (first to last op of its
        /// graph launches), `span` (first to last op), `auto` (replay where there are graph
        /// launches, else span).
        #[arg(long, value_name = "WINDOW", value_parser = ["auto", "replay", "span"])]
        window: Option<String>,
        /// Measure only GPU ops linked to traced calls (as `summary --linked-only`): on a shared
        /// node another process could publish ops that fill or open gaps.
        #[arg(long)]
        linked_only: bool,
        /// JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace for a timeline viewer (Perfetto UI, chrome://tracing).
    #[command(after_help = CONVERT_AFTER)]
    Convert {
        /// The trace to read.
        #[arg(value_name = "TRACE")]
        trace: PathBuf,
        /// Output format. `perfetto` writes Chrome JSON for .json / .json.gz and Perfetto's
        /// native protobuf for .pftrace; `kineto` writes the PyTorch profiler's Chrome JSON
        /// (.json / .json.gz) for Holistic Trace Analysis and TraceLens; `rocpd-sdk` writes
        /// rocprofiler-sdk's rocpd SQLite database (.db) for AMD's `rocpd` tools.
        #[arg(long, default_value = "perfetto", value_parser = ["perfetto", "kineto", "rocpd-sdk"])]
        format: String,
        /// With `--format kineto`: one file per traced process (NAME.pid<PID>.json[.gz] beside
        /// the output name, ranks in pid order), as a PyTorch job writes one per rank.
        #[arg(long)]
        per_process: bool,
        /// File to write: .pftrace (Perfetto protobuf), .json or .json.gz (Chrome JSON).
        /// Created private (0600), replaced if it exists, never the trace itself.
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
    },
    /// Merge traces (several runs or nodes) into one, remapping ids and strings.
    #[command(after_help = MERGE_AFTER)]
    Merge {
        /// The merged trace to write (created private, 0600; replaced if it exists).
        #[arg(short, long, value_name = "FILE")]
        output: PathBuf,
        /// The traces to merge, each once.
        #[arg(required = true, num_args = 1.., value_name = "TRACE")]
        inputs: Vec<PathBuf>,
    },
    /// List the APIs that would be probed in a library, and those it lacks.
    #[command(after_help = LIST_APIS_AFTER)]
    ListApis {
        /// Library to inspect (default: the runtime's installed library, libamdhip64 or libcuda).
        #[arg(long, value_name = "PATH")]
        lib: Option<PathBuf>,
        /// APIs to look for: `default`, `all`, or a comma-separated list of names.
        #[arg(long, default_value = "default", value_name = "APIS")]
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

    /// Stop after this long: seconds (`30`, `0.5`) or with a unit (`500ms`, `5s`, `2m`,
    /// `1h 30m`); at most 365 days.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
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

    /// Quiet: only the line that says tracing has begun ("N functions probed ..."), why it waits
    /// or stops (a traced process exited, the stop reason, a backlog being written), warnings, errors and, at the
    /// end, the totals line (rows written, what was lost) and the trace's path: no other progress
    /// messages, no live status line, no table.
    #[arg(short, long)]
    pub quiet: bool,

    /// GPU timestamps: `auto` (HIP: the agent uses hipProfiler*Ext when the runtime has it;
    /// CUDA: CUPTI), `clr`, `hsa`, `cupti` (CUDA activity records), or `none` (CPU side only, no
    /// agent). `run` loads the agent into the command; for `attach`/`--all`, start the
    /// application with the agent (docs/tracing.md).
    #[arg(long, default_value = "auto", value_parser = gpu_source_parser())]
    pub gpu: GpuSource,

    /// The agent library `run` preloads (default: librtl_agent.so next to this binary, else
    /// ../lib/rtl-ebpf/librtl_agent.so from the binary's directory, where packages install it).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,

    /// Time every node of every graph replay (`run` only). By default a replay is one GPU
    /// span (`GraphExecution`): HSA capture's two barrier packets around its batch, CUPTI's
    /// graph-level record. With this flag every kernel, copy and memset of the replay is timed
    /// too (HSA: its packets' completion signals are rewritten: safe on ROCm 7.13+ only; CUPTI:
    /// per-node records). Costs more per replay (docs/benchmarks.md).
    #[arg(long)]
    pub graph_nodes: bool,

    /// Call sites: record the user stack at kernel launches, graph launches, copies, memsets
    /// and stream-capture calls. `dwarf`: the probe copies the top of the stack
    /// (--stack-bytes) and the collector unwinds it from the binaries' .eh_frame (right for
    /// code built without frame pointers); `fp`: the probe walks frame pointers (cheaper; ends at the first
    /// caller built without them); `python`: CPython frames only, and the native
    /// caller (the cheapest: for Python applications, where the Python line is the site); `off`.
    /// Stacks go to rtl_stack / rtl_frame (docs/trace-format.md).
    #[arg(long, value_enum, default_value_t = StackMode::Off, value_name = "MODE")]
    pub stacks: StackMode,

    /// Bytes of user stack `--stacks dwarf` copies per call (at most 16384): deeper frames are
    /// cut (rtl_stack.truncated).
    #[arg(long, default_value_t = 8192, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(64..=16384))]
    pub stack_bytes: u32,

    /// With --stacks: do not walk CPython's frames (Python call sites are on by default for
    /// processes running CPython 3.10-3.13; this measures or avoids their cost).
    #[arg(long)]
    pub no_python_frames: bool,

    /// `attach --keep-waiting` (set by the subcommand).
    #[arg(skip)]
    pub keep_waiting: bool,

    /// `run --as-root` (set by the subcommand).
    #[arg(skip)]
    pub as_root: bool,
}

/// Longest `--duration`: a year (a bound, so that the deadline can always be computed).
pub const MAX_DURATION_S: f64 = 365.0 * 24.0 * 3600.0;

/// `--duration`: a plain number of seconds, or a humantime duration (`5s`, `2m`, `1h 30m`).
/// Returns seconds, positive and at most [`MAX_DURATION_S`].
/// `--gpu`: exactly the names of [`GpuSource`] (what the agent reads in `RTL_AGENT_GPU`).
fn gpu_source_parser() -> impl clap::builder::TypedValueParser<Value = GpuSource> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(GpuSource::ALL.map(GpuSource::name))
        .try_map(|s| GpuSource::parse(&s).ok_or_else(|| format!("{s:?} is not a GPU source")))
}

pub fn parse_duration(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.parse::<f64>() {
        Ok(v) => v,
        Err(_) => humantime::parse_duration(t)
            .map_err(|e| format!("`{s}` is not a duration ({e}): give seconds (30, 0.5) or a unit (500ms, 5s, 2m, 1h)"))?
            .as_secs_f64(),
    };
    if !(v > 0.0 && v.is_finite()) {
        return Err(format!("duration must be positive, got {s}"));
    }
    if v > MAX_DURATION_S {
        return Err(format!("duration {s} is longer than a year (365 days)"));
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

/// `--stacks`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackMode {
    Off,
    Dwarf,
    Fp,
    Python,
}

impl StackMode {
    /// The probe's `config::STACK_MODE` value.
    pub fn probe_mode(self) -> u32 {
        match self {
            Self::Off => 0,
            Self::Dwarf => rtl_common::STACK_MODE_COPY,
            Self::Fp => rtl_common::STACK_MODE_FRAME_POINTERS,
            Self::Python => rtl_common::STACK_MODE_PYTHON,
        }
    }
}
