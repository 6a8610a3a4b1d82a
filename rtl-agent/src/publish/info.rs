//! What the agent tells the collector about itself: its counters and the Info record (source,
//! status, mode, last error, session anchor, what it captures).

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use rtl_common::agent::{self as wire, Counters, Info};

#[derive(Default)]
pub struct AtomicCounters {
    pub records_seen: AtomicU64,
    pub gpu_ops_seen: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub batches_published: AtomicU64,
    pub batches_with_spill: AtomicU64,
    pub graph_batches_skipped: AtomicU64,
    pub strings_dropped: AtomicU64,
    pub api_errors: AtomicU64,
    pub spill_truncated: AtomicU64,
    pub dump_errors: AtomicU64,
    pub graph_spans: AtomicU64,
    pub barriers_untimed: AtomicU64,
    pub other_packets: AtomicU64,
    pub copies_untimed: AtomicU64,
}

impl AtomicCounters {
    pub fn snapshot(&self) -> Counters {
        Counters {
            records_seen: self.records_seen.load(Relaxed),
            gpu_ops_seen: self.gpu_ops_seen.load(Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Relaxed),
            batches_published: self.batches_published.load(Relaxed),
            batches_with_spill: self.batches_with_spill.load(Relaxed),
            graph_batches_skipped: self.graph_batches_skipped.load(Relaxed),
            strings_dropped: self.strings_dropped.load(Relaxed),
            api_errors: self.api_errors.load(Relaxed),
            spill_truncated: self.spill_truncated.load(Relaxed),
            dump_errors: self.dump_errors.load(Relaxed),
            graph_spans: self.graph_spans.load(Relaxed),
            barriers_untimed: self.barriers_untimed.load(Relaxed),
            other_packets: self.other_packets.load(Relaxed),
            copies_untimed: self.copies_untimed.load(Relaxed),
            ..Default::default()
        }
    }
    pub fn reset(&self) {
        for c in [
            &self.records_seen,
            &self.gpu_ops_seen,
            &self.dropped_queue_full,
            &self.batches_published,
            &self.batches_with_spill,
            &self.graph_batches_skipped,
            &self.strings_dropped,
            &self.api_errors,
            &self.spill_truncated,
            &self.dump_errors,
            &self.graph_spans,
            &self.barriers_untimed,
            &self.other_packets,
            &self.copies_untimed,
        ] {
            c.store(0, Relaxed);
        }
    }
}

static COUNTERS: OnceLock<AtomicCounters> = OnceLock::new();
pub fn counters() -> &'static AtomicCounters {
    COUNTERS.get_or_init(AtomicCounters::default)
}

/// What goes into the Info record.
pub struct InfoState {
    pub source: AtomicU8,
    pub profiler_api: AtomicU8,
    pub mode: AtomicU8,
    pub status: AtomicU8,
    pub last_error: AtomicI32,
    pub start_record_id: AtomicU64,
    /// The profiler session's start instant (CLOCK_MONOTONIC bounds; 0: unknown).
    pub anchor_lo_ns: AtomicU64,
    pub anchor_hi_ns: AtomicU64,
    /// `wire::CAP_*`: what the active source captures.
    pub captures: AtomicU32,
}

impl InfoState {
    pub fn set_anchor(&self, lo: u64, hi: u64) {
        self.anchor_lo_ns.store(lo, Relaxed);
        self.anchor_hi_ns.store(hi, Relaxed);
    }
}

pub static INFO: InfoState = InfoState {
    source: AtomicU8::new(0),
    profiler_api: AtomicU8::new(0),
    mode: AtomicU8::new(0),
    status: AtomicU8::new(wire::Status::HipNotLoaded as u8),
    last_error: AtomicI32::new(0),
    start_record_id: AtomicU64::new(0),
    anchor_lo_ns: AtomicU64::new(0),
    anchor_hi_ns: AtomicU64::new(0),
    captures: AtomicU32::new(0),
};

pub fn record_error(rc: i32) {
    counters().api_errors.fetch_add(1, Relaxed);
    INFO.last_error.store(rc, Relaxed);
}

pub(super) fn info() -> Info {
    Info {
        agent_version: 1 << 8, // 0.1.0: major << 16 | minor << 8 | patch
        source: INFO.source.load(Relaxed),
        profiler_api: INFO.profiler_api.load(Relaxed),
        mode: INFO.mode.load(Relaxed),
        status: INFO.status.load(Relaxed),
        last_error: INFO.last_error.load(Relaxed),
        start_record_id: INFO.start_record_id.load(Relaxed),
        anchor_lo_ns: INFO.anchor_lo_ns.load(Relaxed),
        anchor_hi_ns: INFO.anchor_hi_ns.load(Relaxed),
        captures: INFO.captures.load(Relaxed),
        ..Default::default()
    }
}
