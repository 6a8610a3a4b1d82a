//! A synthetic traced process for the GPU join: threads issuing calls back to back, the agent's
//! records of them (CPU times jittered as a clock conversion would, published in batches, out of
//! order if asked), and the truth: which call each record belongs to. Shared by the join tests
//! (gpu_join_sequence.rs) and the join benchmark (examples/bench_join.rs).
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use rtl_common::agent::{self, BatchWriter, ClockDomain, ClockSync, GpuOp, Info, OpKind, Source};
use rtl_common::AGENT_BATCH_MAX;
use rtl_user::join::gpu::{GpuJoiner, IndexedCall};
use rtl_user::join::rows::{LinkKind, OpRow, Row};
use rtl_user::join::thread_hash::profiler_thread_id;

pub const NAMES: [&str; 3] = ["hipLaunchKernel", "hipMemcpyAsync", "hipGraphLaunch"];
const NAME_IDS: [u32; 3] = [1, 2, 3];
const KERNEL_ID: u32 = 4;
/// CLOCK_REALTIME - CLOCK_MONOTONIC of the synthetic machine.
pub const OFFSET: i64 = 1_700_000_000_000_000_000;

#[derive(Clone, Debug)]
pub struct World {
    pub pid: u32,
    pub threads: usize,
    pub calls_per_thread: usize,
    /// Call length and the gap between one call's return and the next call (ns).
    pub dur_ns: u64,
    pub gap_ns: u64,
    /// The profiler's CPU times are off by up to this (uniform, each end on its own).
    pub jitter_ns: u64,
    pub seed: u64,
    /// The agent sends the session's start (the anchor).
    pub anchor: bool,
    /// Records are published out of order (shuffled within windows of this many; 0: in order).
    pub shuffle: usize,
    /// Every n-th call of a thread is a graph launch of `graph_nodes` ops (0: none).
    pub graph_every: usize,
    pub graph_nodes: u32,
    /// Every n-th call made no GPU work: numbered by the agent, never published (0: none).
    pub no_op_every: usize,
    /// Every record is published after the last call (threads long gone).
    pub publish_at_end: bool,
    /// One more thread whose calls the probes never saw.
    pub unseen_thread: bool,
    /// (thread, call index): a call the probes lost.
    pub lost_call: Option<(usize, usize)>,
    /// First call time (CLOCK_MONOTONIC).
    pub t0: u64,
    /// The agent numbers its records (`thread_seq`); false: an older agent.
    pub numbers: bool,
    /// Threads share fs bases with another process (a forked child): this base.
    pub fsbase: u64,
}

impl Default for World {
    fn default() -> Self {
        World {
            pid: 4242,
            threads: 4,
            calls_per_thread: 200,
            dur_ns: 800,
            gap_ns: 500,
            jitter_ns: 1_500,
            seed: 7,
            anchor: true,
            shuffle: 0,
            graph_every: 0,
            graph_nodes: 64,
            no_op_every: 0,
            publish_at_end: false,
            unseen_thread: false,
            lost_call: None,
            t0: 10_000_000_000,
            numbers: true,
            fsbase: 0x7f12_3456_0000,
        }
    }
}

pub enum Ev {
    Enter {
        pid: u32,
        hash: u64,
        name: Arc<str>,
        id: i64,
    },
    Exit {
        pid: u32,
        call: IndexedCall,
    },
    Batch {
        pid: u32,
        bytes: Vec<u8>,
    },
    /// The probes lost records here.
    Drops,
}

pub struct Feed {
    /// (time, order, event), sorted.
    pub events: Vec<(u64, u64, Ev)>,
    /// (pid, record index) -> the call id the record belongs to (None: the probes never saw it).
    pub truth: HashMap<(u32, u64), Option<i64>>,
    /// GPU ops published.
    pub ops: usize,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn jitter(&mut self, j: u64) -> i64 {
        if j == 0 {
            return 0;
        }
        (self.next() % (2 * j + 1)) as i64 - j as i64
    }
}

struct Rec {
    op: GpuOp,
    ops: u32,
    publish_after: u64,
}

/// Builds the events of one or more worlds (merged by time). Call ids come from `next_id`.
pub fn build(worlds: &[World], next_id: &mut i64) -> Feed {
    let mut events = Vec::new();
    let mut truth = HashMap::new();
    let mut ops = 0;
    let mut order = 0u64;
    for w in worlds {
        let mut rng = Rng(w.seed | 1);
        let mut recs: Vec<Rec> = Vec::new();
        let mut record_index = 0u64;
        let threads = w.threads + w.unseen_thread as usize;
        // The threads' calls, interleaved in time; numbering per (thread, API).
        let mut seq: HashMap<(usize, usize), u64> = HashMap::new();
        for t in 0..threads {
            let hash = profiler_thread_id(w.fsbase + 0x1_0000 * t as u64);
            let unseen = w.unseen_thread && t == w.threads;
            let mut ts = w.t0 + 137 * t as u64;
            for i in 0..w.calls_per_thread {
                let graph = w.graph_every > 0 && i % w.graph_every == w.graph_every - 1;
                let kind = if graph { 2 } else { i % 2 };
                let dur = w.dur_ns + rng.next() % 200;
                let (start, end) = (ts, ts + dur);
                ts = end + w.gap_ns;
                let id = *next_id;
                *next_id += 1;
                let n = seq.entry((t, kind)).or_insert(0);
                let thread_seq = *n;
                *n += 1;
                let lost = w.lost_call == Some((t, i));
                let name: Arc<str> = Arc::from(NAMES[kind]);
                if !unseen && !lost {
                    events.push((start, order, Ev::Enter { pid: w.pid, hash, name: name.clone(), id }));
                    order += 1;
                    let call = IndexedCall { id, tid: 1000 + t as u32, thread_hash: Some(hash), name, start, end };
                    events.push((end, order, Ev::Exit { pid: w.pid, call }));
                    order += 1;
                }
                if lost {
                    events.push((end, order, Ev::Drops));
                    order += 1;
                }
                if w.no_op_every > 0 && i % w.no_op_every == w.no_op_every - 1 {
                    continue; // a record without GPU work: numbered, never published
                }
                let (cs, ce) = {
                    let a = (start + 50) as i64 + rng.jitter(w.jitter_ns);
                    let b = (end - 50) as i64 + rng.jitter(w.jitter_ns);
                    (a, b.max(a))
                };
                let op = GpuOp {
                    source: Source::Clr as u8,
                    op: if kind == 1 { OpKind::Copy as u8 } else { OpKind::Dispatch as u8 },
                    copy_kind: if kind == 1 { 1 } else { 0 },
                    flags: agent::OP_HAS_CPU_TIMES
                        | agent::OP_HAS_THREAD_HASH
                        | if w.numbers { agent::OP_HAS_THREAD_SEQ } else { 0 }
                        | if graph { agent::OP_IS_GRAPH } else { 0 },
                    cpu_clock: ClockDomain::Realtime as u8,
                    gpu_clock: ClockDomain::Realtime as u8,
                    queue: w.pid,
                    api_name_id: NAME_IDS[kind],
                    kernel_name_id: if kind == 1 { 0 } else { KERNEL_ID },
                    thread_id: hash,
                    thread_seq,
                    cpu_start_ns: (cs + OFFSET) as u64,
                    cpu_end_ns: (ce + OFFSET) as u64,
                    gpu_begin_ns: (end as i64 + 1_000 + OFFSET) as u64,
                    gpu_end_ns: (end as i64 + 3_000 + OFFSET) as u64,
                    record_index,
                    op_count: if graph { w.graph_nodes } else { 1 },
                    ..Default::default()
                };
                truth.insert((w.pid, record_index), (!unseen && !lost).then_some(id));
                record_index += 1;
                let publish_after = if w.publish_at_end { u64::MAX } else { end + 5_000_000 };
                recs.push(Rec { op, ops: op.op_count, publish_after });
            }
        }
        // Publication: in completion order (or shuffled), batches as the agent builds them.
        recs.sort_by_key(|r| r.op.gpu_end_ns);
        if w.shuffle > 1 {
            for chunk in recs.chunks_mut(w.shuffle) {
                for i in (1..chunk.len()).rev() {
                    let j = (rng.next() % (i as u64 + 1)) as usize;
                    chunk.swap(i, j);
                }
            }
        }
        let last = events.iter().map(|e| e.0).max().unwrap_or(w.t0);
        let mut buf = vec![0u8; AGENT_BATCH_MAX];
        let mut batch_seq = 0u64;
        let mut meta = BatchWriter::new(&mut buf, w.pid, batch_seq).unwrap();
        let anchor = if w.anchor { (w.t0 - 1_000, w.t0 - 500) } else { (0, 0) };
        meta.push_info(&Info {
            source: Source::Clr as u8,
            status: 0,
            anchor_lo_ns: anchor.0,
            anchor_hi_ns: anchor.1,
            ..Default::default()
        });
        meta.push_clock(&ClockSync {
            realtime_ns: (w.t0 as i64 + OFFSET) as u64,
            monotonic_ns: w.t0,
            uncertainty_ns: 50,
            gpu_clock: 1,
            ..Default::default()
        });
        for (id, s) in NAME_IDS.iter().zip(NAMES) {
            meta.push_string(*id, agent::STR_API, 0, s.as_bytes());
        }
        meta.push_string(KERNEL_ID, agent::STR_KERNEL, 0, b"storm_a");
        events.push((w.t0 - 100, order, Ev::Batch { pid: w.pid, bytes: meta.finish(0).to_vec() }));
        order += 1;
        batch_seq += 1;
        // Every op of every record (a graph launch's nodes one by one), in publication order,
        // cut into batches as full as they go.
        let flat: Vec<(GpuOp, u64)> = recs
            .iter()
            .flat_map(|r| (0..r.ops).map(move |k| (GpuOp { op_index: k, ..r.op }, r.publish_after.min(last + 1_000_000))))
            .collect();
        let per = (AGENT_BATCH_MAX - 32) / std::mem::size_of::<GpuOp>();
        for chunk in flat.chunks(per) {
            let mut wtr = BatchWriter::new(&mut buf, w.pid, batch_seq).unwrap();
            for (o, _) in chunk {
                assert!(wtr.push_gpu_op(o));
            }
            ops += chunk.len();
            let when = chunk.iter().map(|c| c.1).max().unwrap();
            events.push((when, order, Ev::Batch { pid: w.pid, bytes: wtr.finish(0).to_vec() }));
            order += 1;
            batch_seq += 1;
        }
    }
    events.sort_by_key(|e| (e.0, e.1));
    Feed { events, truth, ops }
}

/// Runs a feed through a joiner as the collector would; returns the rows.
pub fn run(feed: Feed, j: &mut GpuJoiner, next_id: &mut i64) -> Vec<Row> {
    let mut out = Vec::new();
    let mut last = 0;
    for (n, (ts, _, ev)) in feed.events.into_iter().enumerate() {
        last = ts;
        j.advance(ts);
        match ev {
            Ev::Enter { pid, hash, name, id } => j.call_entered(pid, Some(hash), &name, id, ts),
            Ev::Exit { pid, call } => j.index_call(pid, call),
            Ev::Batch { pid, bytes } => {
                let len = bytes.len() as u32;
                j.on_batch(
                    rtl_user::join::gpu::Publisher { pid, ns_pid: 0 },
                    &bytes,
                    len,
                    ts,
                    &mut || {
                        *next_id += 1;
                        *next_id
                    },
                    &mut out,
                )
            }
            Ev::Drops => j.distrust_sequences(),
        }
        if n % 4096 == 4095 {
            j.retry_pending(
                ts,
                false,
                &mut || {
                    *next_id += 1;
                    *next_id
                },
                &mut out,
            );
        }
    }
    j.retry_pending(
        last + 1_000_000_000,
        true,
        &mut || {
            *next_id += 1;
            *next_id
        },
        &mut out,
    );
    out
}

/// GPU op rows (pid in `queue`).
pub fn ops(rows: &[Row]) -> Vec<&OpRow> {
    rows.iter().filter_map(|r| if let Row::Op(o) = r { Some(o) } else { None }).collect()
}

/// Counts: (right, wrong, unlinked) against the truth, and links by kind.
pub fn score(rows: &[Row], truth: &HashMap<(u32, u64), Option<i64>>) -> (usize, usize, usize, HashMap<LinkKind, usize>) {
    let (mut right, mut wrong, mut unlinked) = (0, 0, 0);
    let mut kinds = HashMap::new();
    for o in ops(rows) {
        let link = o.link.expect("a GPU op says how it was linked");
        *kinds.entry(link).or_insert(0) += 1;
        let want = truth.get(&(o.queue as u32, o.seq as u64)).copied().flatten();
        if !link.is_linked() {
            unlinked += 1;
        } else if o.api_id == want && want.is_some() {
            right += 1;
        } else {
            wrong += 1;
        }
    }
    (right, wrong, unlinked, kinds)
}
