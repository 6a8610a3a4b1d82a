//! Loading the eBPF object (on its own thread, overlapping the session's library scan): its
//! maps (the ring buffer's pages included), its programs for the uprobe link kind this kernel
//! supports ([`LinkKind`]), the kernel's BTF, and where the time went ([`LoadTimings`]).

use anyhow::{anyhow, Context, Result};
use aya::programs::{RawTracePoint, UProbe};
use aya::sys::{is_uprobe_multi_supported, UProbeMultiFeature};
use aya::{Ebpf, EbpfLoader};

/// The eBPF object, built by build.rs from the rtl-ebpf crate.
static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/rtl-ebpf"));

/// How uprobes are attached: chosen once at load, from what the kernel supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// `uprobe_multi` links (kernel 6.6+): one link for every entry probe of a library and one for
    /// every return probe. Removal costs one RCU synchronisation per link, so detaching takes
    /// milliseconds and never holds up another session's attach for long.
    Multi,
    /// One perf-event link per probe and kind (older kernels): each costs the kernel one RCU
    /// synchronisation to remove (~0.25 s here), under a mutex other attaches wait on.
    PerProbe,
}

impl LinkKind {
    /// The name recorded in the trace's metadata (`uprobe_links`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Multi => "uprobe_multi",
            Self::PerProbe => "perf_event",
        }
    }

    /// The eBPF program that serves `role` ("api_enter", "api_exit", "agent_publish") for links
    /// of this kind: the object holds each program once per kind (rtl-ebpf/src/api_enter.rs, ...).
    pub(super) fn program(self, role: &str) -> String {
        match self {
            Self::Multi => role.to_string(),
            Self::PerProbe => format!("{role}_single"),
        }
    }

    /// Detects the kind the running kernel supports (`RTL_EBPF_LINKS=perf_event` forces the
    /// fallback, for tests and for kernels whose multi links misbehave).
    fn detect() -> Self {
        if std::env::var("RTL_EBPF_LINKS").is_ok_and(|v| v == "perf_event") {
            return Self::PerProbe;
        }
        match is_uprobe_multi_supported(UProbeMultiFeature::LinkCreation) {
            Ok(true) => Self::Multi,
            _ => Self::PerProbe,
        }
    }
}

/// Where the time of [`Probes::load`] went (milliseconds), recorded in the trace's metadata
/// (`load_*_ms`) and printed by `cargo xtask bench lifecycle`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LoadTimings {
    /// Parsing the kernel's BTF for the offsets the programs read (0 when an earlier caller had
    /// parsed it already).
    pub btf_ms: f64,
    /// The object: parsing it, the kernel feature probes aya runs once, creating the maps
    /// (the ring buffer's pages included).
    pub maps_ms: f64,
    /// Detecting the link kind (a test link) and loading the programs (the verifier).
    pub programs_ms: f64,
    /// Writing the configuration (after the wait).
    pub config_ms: f64,
    /// How long the session waited for the loading thread ([`Probes::start_loading`]): the
    /// part of the three above that its library scan did not cover.
    pub waited_ms: f64,
}

impl LoadTimings {
    /// (metadata tag, value) pairs.
    pub fn meta(&self) -> [(&'static str, String); 5] {
        [
            ("load_waited_ms", format!("{:.1}", self.waited_ms)),
            ("load_btf_ms", format!("{:.1}", self.btf_ms)),
            ("load_maps_ms", format!("{:.1}", self.maps_ms)),
            ("load_programs_ms", format!("{:.1}", self.programs_ms)),
            ("load_config_ms", format!("{:.1}", self.config_ms)),
        ]
    }
}

/// The kernel work of [`Probes::load`]: the object and its maps, the programs (verified for
/// the link kind this kernel supports), the kernel's BTF (parsed once per process).
pub(super) fn load_object(ringbuf_bytes: u32) -> Result<(Ebpf, LinkKind, LoadTimings)> {
    let ms = |t: std::time::Instant| t.elapsed().as_secs_f64() * 1e3;
    let mut timings = LoadTimings::default();
    let t = std::time::Instant::now();
    let mut ebpf = EbpfLoader::new().map_max_entries("EVENTS", ringbuf_bytes).load(EBPF_OBJECT).map_err(load_error)?;
    timings.maps_ms = ms(t);
    let t = std::time::Instant::now();
    let links = LinkKind::detect();
    for role in ["api_enter", "api_exit", "agent_publish", "loader_notify"] {
        let name = links.program(role);
        let p: &mut UProbe = program(&mut ebpf, &name)?.try_into()?;
        p.load().map_err(|e| anyhow!("loading eBPF program {name}: {e}"))?;
    }
    // `take_held` is never attached: the collector runs it (call_slots::HeldTaker).
    for name in ["task_fork", "task_exec", "task_exit", "take_held"] {
        let p: &mut RawTracePoint = program(&mut ebpf, name)?.try_into()?;
        p.load().map_err(|e| anyhow!("loading eBPF program {name}: {e}"))?;
    }
    timings.programs_ms = ms(t);
    let t = std::time::Instant::now();
    // The error, if any, is reported where an offset is asked for.
    let _ = super::btf::Btf::kernel();
    timings.btf_ms = ms(t);
    Ok((ebpf, links, timings))
}

/// An eBPF object being loaded ([`Probes::start_loading`]).
pub struct PendingLoad {
    pub(super) ringbuf_bytes: u32,
    pub(super) thread: std::io::Result<std::thread::JoinHandle<Result<(Ebpf, LinkKind, LoadTimings)>>>,
}

pub(super) fn program<'a>(ebpf: &'a mut Ebpf, name: &str) -> Result<&'a mut aya::programs::Program> {
    ebpf.program_mut(name).with_context(|| format!("eBPF program {name} missing from the object"))
}

fn load_error(e: aya::EbpfError) -> anyhow::Error {
    // The whole chain, with the OS error at its end ("failed to create map X: Operation not
    // permitted (os error 1)"): aya's top-level message alone does not say why.
    let mut msg = e.to_string();
    let mut denied = false;
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            denied |= matches!(io.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES));
        }
        src = s.source();
    }
    if denied || msg.contains("Operation not permitted") || msg.contains("Permission denied") {
        anyhow!(crate::error::Fatal::Permission(format!(
            "loading eBPF programs was refused ({msg}): run as root (sudo) or grant CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN"
        )))
    } else {
        anyhow!("loading the eBPF object failed: {msg}")
    }
}
