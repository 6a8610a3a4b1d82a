//! The agent's environment variables. Nothing else in the environment is read or trusted.
//!
//! | variable | values | default | meaning |
//! | --- | --- | --- | --- |
//! | `RTL_AGENT_GPU` | `auto`, `clr`, `hsa`, `cupti`, `none` (`rtl_common::GpuSource`) | `auto` | GPU source. `clr`: hipProfiler*Ext. `hsa`: HSA signal capture (needs the agent in `HSA_TOOLS_LIB`; add it to `LD_PRELOAD` too so `_exit` is flushed). `auto`: hipProfiler*Ext when the loaded libamdhip64 has it, else HSA capture when loaded through `HSA_TOOLS_LIB`. `none`: agent off. |
//! | `RTL_AGENT_DRAIN_MS` | 1..=60000 | 100 | Period of the publisher thread: GetRecords drains (no chunk callback) and queue flushes. |
//! | `RTL_AGENT_WAIT_MS` | 0..=3600000 | 30000 | How long the publisher thread keeps looking for a libamdhip64 loaded after start (dlopen by Python etc.). |
//! | `RTL_AGENT_GRAPH_NODES` (older name: `RTL_AGENT_HSA_BATCHES`) | `1` | unset | Time every node of every graph replay (`rtl-ebpf run --graph-nodes` sets it). HSA mode: also time every packet of multi-packet batches; off by default: rewriting signals inside batches breaks ROCr before 7.13 (HSA error 0x1009), so by default such batches are passed on untouched (counted) and each is timed as one span by two barrier packets of the agent's around it. CUPTI: per-node kernel/copy/memset records instead of one graph-level record (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`) per launch. |
//! | `RTL_AGENT_HSA_SPANS` | `0` | unset | HSA mode: no span per graph replay (its batch goes on with nothing around it; no GraphExecution ops). For measuring what the spans cost, or a runtime whose queues must carry nothing but the application's packets around a replay. |
//! | `RTL_AGENT_HSA_COPIES` | `direct`, `forward` | `direct` | HSA mode: how DMA copies are timed. `direct`: the copy keeps the application's completion signal and its times are read from it afterwards (nothing on the copy's path waits for the agent), where queue interception works (else `forward`). `forward`: the copy gets a signal of the agent's whose completion the agent's thread forwards to the application's (one thread wake-up on the path of whatever waits for the copy; the behaviour before direct copies, kept for comparison). |
//! | `RTL_AGENT_QUIET` | `1` | unset | No messages on stderr (status still goes to the collector in the Info record). |
//! | `RTL_AGENT_DUMP` | a file path | unset | Debugging / tests: also append every published batch to this file (O_APPEND, batches concatenated; `rtl_common::agent::decode_prefix` splits them). |
//! | `RTL_AGENT_CUPTI_LIB` | a file path | unset | `cupti`: the libcupti to load (else the one loaded, or next to libcudart/libcuda, or `libcupti.so.13`). |
//! | `RTL_AGENT_CUPTI_DUMP` | a file path | unset | `cupti`: also append the raw activity records (`cupti::DumpFrame`s) to this file (tests, fixtures). |
//! | `RTL_AGENT_CUPTI_API` | `launches`, `all` | `launches` | `cupti`: API records CUPTI keeps to link GPU work to its call: only the launch / graph-launch / memcpy / memset families (cheaper), or every driver and runtime call. |
//! | `RTL_AGENT_CUPTI_CLOCK` | `cupti`, `monotonic` | `cupti` | `cupti`: CUPTI's own clock (found to be CLOCK_REALTIME or CLOCK_MONOTONIC at start; the collector converts), or CLOCK_MONOTONIC through CUPTI's timestamp callback (measured on the H200: makes every traced call markedly slower, same GPU durations). |
//!
//! A malformed value is reported (unless quiet) and the default is used.

use std::ffi::OsString;

pub use rtl_common::GpuSource;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub gpu: GpuSource,
    pub drain_ms: u64,
    pub wait_ms: u64,
    pub quiet: bool,
    /// `RTL_AGENT_GRAPH_NODES=1` (or `RTL_AGENT_HSA_BATCHES=1`): every graph node timed.
    pub graph_nodes: bool,
    /// `RTL_AGENT_HSA_SPANS=0`: no span packets around graph replays.
    pub hsa_no_spans: bool,
    /// `RTL_AGENT_HSA_COPIES=forward`: DMA copies on a pool signal, completion forwarded.
    pub hsa_copies_forward: bool,
    pub dump: Option<OsString>,
    pub cupti_lib: Option<String>,
    pub cupti_dump: Option<OsString>,
    /// `RTL_AGENT_CUPTI_API=all`: every driver/runtime API record, not only the launch families.
    pub cupti_api_all: bool,
    /// `RTL_AGENT_CUPTI_CLOCK=monotonic`: CUPTI's timestamp callback returns CLOCK_MONOTONIC.
    pub cupti_monotonic_clock: bool,
}

pub const DEFAULT_DRAIN_MS: u64 = 100;
pub const DEFAULT_WAIT_MS: u64 = 30_000;

impl Default for Config {
    fn default() -> Self {
        Config {
            gpu: GpuSource::Auto,
            drain_ms: DEFAULT_DRAIN_MS,
            wait_ms: DEFAULT_WAIT_MS,
            quiet: false,
            graph_nodes: false,
            hsa_no_spans: false,
            hsa_copies_forward: false,
            dump: None,
            cupti_lib: None,
            cupti_dump: None,
            cupti_api_all: false,
            cupti_monotonic_clock: false,
        }
    }
}

fn num(name: &str, v: &str, lo: u64, hi: u64, warnings: &mut Vec<String>) -> Option<u64> {
    match v.trim().parse::<u64>() {
        Ok(n) if (lo..=hi).contains(&n) => Some(n),
        _ => {
            warnings.push(format!("{name}={v:?} is not a number in {lo}..={hi}; using the default"));
            None
        }
    }
}

impl Config {
    /// Parses the agent's variables through `get`; returns the config and warnings to print.
    pub fn parse(get: impl Fn(&str) -> Option<OsString>) -> (Config, Vec<String>) {
        let mut c = Config::default();
        let mut w = Vec::new();
        let s = |k: &str| get(k).map(|v| v.to_string_lossy().into_owned());
        if let Some(v) = s("RTL_AGENT_GPU") {
            c.gpu = GpuSource::parse(&v).unwrap_or_else(|| {
                w.push(format!("RTL_AGENT_GPU={v:?} is not auto|clr|hsa|cupti|none; using auto"));
                GpuSource::Auto
            });
        }
        if let Some(v) = s("RTL_AGENT_DRAIN_MS") {
            c.drain_ms = num("RTL_AGENT_DRAIN_MS", &v, 1, 60_000, &mut w).unwrap_or(DEFAULT_DRAIN_MS);
        }
        if let Some(v) = s("RTL_AGENT_WAIT_MS") {
            c.wait_ms = num("RTL_AGENT_WAIT_MS", &v, 0, 3_600_000, &mut w).unwrap_or(DEFAULT_WAIT_MS);
        }
        if let Some(v) = s("RTL_AGENT_QUIET") {
            c.quiet = !matches!(v.trim(), "" | "0");
        }
        for k in ["RTL_AGENT_GRAPH_NODES", "RTL_AGENT_HSA_BATCHES"] {
            if let Some(v) = s(k) {
                c.graph_nodes |= !matches!(v.trim(), "" | "0");
            }
        }
        if let Some(v) = s("RTL_AGENT_HSA_SPANS") {
            c.hsa_no_spans = v.trim() == "0";
        }
        if let Some(v) = s("RTL_AGENT_HSA_COPIES") {
            match v.trim() {
                "" | "direct" => {}
                "forward" => c.hsa_copies_forward = true,
                _ => w.push(format!("RTL_AGENT_HSA_COPIES={v:?} is not direct|forward; using direct")),
            }
        }
        c.dump = get("RTL_AGENT_DUMP").filter(|v| !v.is_empty());
        c.cupti_lib = s("RTL_AGENT_CUPTI_LIB").filter(|v| !v.is_empty());
        c.cupti_dump = get("RTL_AGENT_CUPTI_DUMP").filter(|v| !v.is_empty());
        if let Some(v) = s("RTL_AGENT_CUPTI_API") {
            match v.trim() {
                "" | "launches" => {}
                "all" => c.cupti_api_all = true,
                _ => w.push(format!("RTL_AGENT_CUPTI_API={v:?} is not launches|all; using launches")),
            }
        }
        if let Some(v) = s("RTL_AGENT_CUPTI_CLOCK") {
            match v.trim() {
                "" | "cupti" => {}
                "monotonic" => c.cupti_monotonic_clock = true,
                _ => w.push(format!("RTL_AGENT_CUPTI_CLOCK={v:?} is not cupti|monotonic; using cupti")),
            }
        }
        (c, w)
    }

    pub fn from_env() -> (Config, Vec<String>) {
        Self::parse(|k| std::env::var_os(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn parse(kv: &[(&str, &str)]) -> (Config, Vec<String>) {
        let m: HashMap<String, OsString> = kv.iter().map(|(k, v)| (k.to_string(), OsString::from(v))).collect();
        Config::parse(|k| m.get(k).cloned())
    }

    #[test]
    fn cupti_api_and_clock() {
        let (c, w) = parse(&[("RTL_AGENT_CUPTI_API", "all"), ("RTL_AGENT_CUPTI_CLOCK", "monotonic")]);
        assert!(w.is_empty() && c.cupti_api_all && c.cupti_monotonic_clock);
        let (c, w) = parse(&[("RTL_AGENT_CUPTI_API", "some"), ("RTL_AGENT_CUPTI_CLOCK", "tsc")]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(!c.cupti_api_all && !c.cupti_monotonic_clock, "bad values keep the defaults");
    }

    #[test]
    fn defaults_and_values() {
        assert_eq!(parse(&[]).0, Config::default());
        let (c, w) =
            parse(&[("RTL_AGENT_GPU", "HSA"), ("RTL_AGENT_DRAIN_MS", "5"), ("RTL_AGENT_QUIET", "1"), ("RTL_AGENT_DUMP", "/tmp/x")]);
        assert!(w.is_empty());
        assert_eq!(c.gpu, GpuSource::Hsa);
        assert_eq!(c.drain_ms, 5);
        assert!(c.quiet);
        assert_eq!(c.dump.as_deref(), Some(std::ffi::OsStr::new("/tmp/x")));
        assert_eq!(parse(&[("RTL_AGENT_GPU", "cupti")]).0.gpu, GpuSource::Cupti);
        assert!(parse(&[("RTL_AGENT_GRAPH_NODES", "1")]).0.graph_nodes);
        assert!(parse(&[("RTL_AGENT_HSA_BATCHES", "1")]).0.graph_nodes, "the older name");
        assert!(!parse(&[("RTL_AGENT_GRAPH_NODES", "0")]).0.graph_nodes);
        assert!(parse(&[("RTL_AGENT_HSA_COPIES", "forward")]).0.hsa_copies_forward);
        assert_eq!(parse(&[("RTL_AGENT_HSA_COPIES", "relay")]).1.len(), 1);
        let (c, w) = parse(&[("RTL_AGENT_GPU", "cuda"), ("RTL_AGENT_DRAIN_MS", "0"), ("RTL_AGENT_WAIT_MS", "x"), ("RTL_AGENT_QUIET", "0")]);
        assert_eq!(w.len(), 3);
        assert_eq!(c, Config::default());
    }

    /// `RTL_AGENT_GPU` as the collector writes it (`GpuSource::name`, rtl-user's
    /// `session/child.rs`) selects that source here, every one of them.
    #[test]
    fn every_source_the_collector_names_is_the_one_used() {
        for g in GpuSource::ALL {
            let (c, w) = parse(&[("RTL_AGENT_GPU", g.name())]);
            assert!(w.is_empty(), "{g:?}: {w:?}");
            assert_eq!(c.gpu, g);
        }
        assert_eq!(parse(&[("RTL_AGENT_GPU", "off")]).0.gpu, GpuSource::None);
        assert_eq!(parse(&[("RTL_AGENT_GPU", "")]).0.gpu, GpuSource::Auto);
    }
}
