//! What the GPU join counts and tells: its stats, the agents' counters, the trace's metadata,
//! and the text naming each process's GPU source.

use super::*;

#[derive(Debug, Default, Clone)]
pub struct GpuStats {
    pub batches: u64,
    pub batches_rejected: u64,
    /// Batches whose header names another process than the one the probe saw publish them.
    pub batches_wrong_pid: u64,
    pub batches_truncated: u64,
    pub ops: u64,
    /// Linked ops, all kinds, and by kind.
    pub ops_linked: u64,
    pub ops_linked_correlation: u64,
    pub ops_linked_sequence: u64,
    pub ops_linked_time: u64,
    /// Unlinked ops, all reasons, and by reason.
    pub ops_unlinked: u64,
    pub ops_ambiguous: u64,
    pub ops_unlinked_no_thread: u64,
    pub ops_unlinked_no_call: u64,
    pub profiler_only_calls: u64,
    /// Sum over processes of the agent's latest counters.
    pub agent_dropped: u64,
    pub agent_ops_seen: u64,
    pub graph_batches_skipped: u64,
    pub sequence: SequenceStats,
    pub graph_spans: u64,
    pub barriers_untimed: u64,
    pub other_packets: u64,
    pub copies_untimed: u64,
}

impl GpuStats {
    /// The trace's metadata: what the agent sent and how its operations were linked.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            ("agent_batches_rejected", (self.batches_rejected + self.batches_wrong_pid).to_string()),
            // Part of agent_batches_rejected: batches naming another process than the one the
            // probe saw publish them (never written).
            ("agent_batches_rejected_wrong_pid", self.batches_wrong_pid.to_string()),
            ("agent_batches_oversized", self.batches_truncated.to_string()),
            ("gpu_ops", self.ops.to_string()),
            ("gpu_ops_linked", self.ops_linked.to_string()),
            ("gpu_ops_linked_correlation", self.ops_linked_correlation.to_string()),
            ("gpu_ops_linked_sequence", self.ops_linked_sequence.to_string()),
            ("gpu_ops_linked_time", self.ops_linked_time.to_string()),
            ("gpu_ops_ambiguous", self.ops_ambiguous.to_string()),
            ("gpu_ops_unlinked", self.ops_unlinked.to_string()),
            ("gpu_ops_unlinked_no_thread", self.ops_unlinked_no_thread.to_string()),
            ("gpu_ops_unlinked_no_call", self.ops_unlinked_no_call.to_string()),
            ("gpu_sequence_breaks", self.sequence.breaks.to_string()),
            ("gpu_anchors_unused", self.sequence.anchor_rejected.to_string()),
            ("gpu_profiler_only_calls", self.profiler_only_calls.to_string()),
            ("agent_dropped_queue_full", self.agent_dropped.to_string()),
            ("agent_graph_batches_skipped", self.graph_batches_skipped.to_string()),
        ]
    }
}

impl GpuJoiner {
    /// Folds the agents' latest counters into the stats and the trace's metadata (call at the
    /// end).
    pub fn finish_counters(&mut self, out: &mut Vec<Row>) {
        let procs = std::mem::take(&mut self.procs);
        for p in procs.values() {
            self.fold_counters(p);
        }
        self.procs = procs;
        for (tag, v) in [
            ("agent_graph_spans", self.stats.graph_spans),
            ("agent_barriers_untimed", self.stats.barriers_untimed),
            ("agent_other_packets", self.stats.other_packets),
            ("agent_copies_untimed", self.stats.copies_untimed),
        ] {
            out.push(Row::Meta(MetaRow { tag: tag.into(), value: v.to_string() }));
        }
        for b in self.bounds.all() {
            out.push(Row::Meta(MetaRow { tag: format!("gpu_join_{}_dropped", b.what), value: b.dropped.to_string() }));
            out.push(Row::Meta(MetaRow { tag: format!("gpu_join_{}_peak", b.what), value: b.peak.to_string() }));
        }
    }

    pub(super) fn fold_counters(&mut self, p: &Process) {
        if let Some(c) = p.counters {
            self.stats.agent_dropped += c.dropped_queue_full;
            self.stats.agent_ops_seen += c.gpu_ops_seen;
            self.stats.graph_batches_skipped += c.graph_batches_skipped;
            self.stats.graph_spans += c.graph_spans;
            self.stats.barriers_untimed += c.barriers_untimed;
            self.stats.other_packets += c.other_packets;
            self.stats.copies_untimed += c.copies_untimed;
        }
    }
}

/// What a process's GPU source times, as the user is told: "<source>: <what>; not captured:
/// <what not>". `captures` 0 (an agent from before `Info::captures`): the source only.
pub fn gpu_source_text(source: Option<Source>, captures: u32) -> String {
    let name = match source {
        Some(Source::Hsa) => "HSA capture (stock ROCm)",
        Some(Source::Clr) => "hipProfiler*Ext (HIP CLR)",
        Some(Source::Cupti) => "CUPTI",
        Some(Source::None) | None => "unknown source",
    };
    if captures == 0 {
        return name.to_string();
    }
    let has = |c: u32| captures & c != 0;
    let mut yes = Vec::new();
    let mut no = Vec::new();
    for (cap, what, missing) in [
        (agent::CAP_KERNELS, "kernels", "kernels"),
        (agent::CAP_COPIES, "copies", "copies on DMA engines"),
        (agent::CAP_MEMSETS, "memsets", "memsets"),
        (agent::CAP_BARRIERS, "barriers", "barriers"),
        (
            agent::CAP_GRAPH_SPANS,
            "graph spans",
            if captures & agent::CAP_GRAPH_NODES == 0 && source == Some(Source::Hsa) { "graph replays" } else { "" },
        ),
        (agent::CAP_GRAPH_NODES, "graph nodes", "graph nodes one by one"),
    ] {
        if has(cap) {
            yes.push(what);
        } else if !missing.is_empty() {
            no.push(missing);
        }
    }
    let mut t = format!("{name}: {}", yes.join(", "));
    if has(agent::CAP_BLIT_COPIES) {
        t.push_str(" (blit-kernel copies named as copies)");
    }
    if !no.is_empty() {
        t.push_str("; not captured: ");
        t.push_str(&no.join(", "));
        if matches!(source, Some(Source::Hsa | Source::Cupti)) && !has(agent::CAP_GRAPH_NODES) {
            t.push_str(" (opt in: run --graph-nodes)");
        }
    }
    t
}

/// Why a process has no GPU times. `hsa_tool`: the agent was loaded as an HSA tool too, so HSA
/// capture was already an option there (no advice to turn on what is on).
pub(super) fn status_text(s: Option<Status>, err: i32, hsa_tool: bool) -> String {
    match s {
        Some(Status::ApiMissing) if hsa_tool => "this ROCm has no hipProfiler*Ext API (it needs a HIP CLR build with hip_profiler_ext.h, ROCm 7.13+ nightly or custom) and HSA capture did not start".into(),
        Some(Status::ApiMissing) => "this ROCm has no hipProfiler*Ext API (it needs a HIP CLR build with hip_profiler_ext.h, ROCm 7.13+ nightly or custom); use --gpu hsa on stock ROCm".into(),
        Some(Status::HipNotLoaded) => "the process never loaded libamdhip64".into(),
        Some(other) => format!("{other:?} (last error {err})"),
        None => format!("unknown status (last error {err})"),
    }
}
