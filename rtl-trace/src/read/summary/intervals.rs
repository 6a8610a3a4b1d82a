//! The GPU ops' intervals per device (`rtl_intervals(gpu, queue, start, end, kind)`, collected
//! in one scan of `rocpd_op` and handed to Rust through a sink), and what is computed from them
//! here: GPU busy per device and queue, the busy timeline. Idle gaps and occupancy windows are
//! in [`super::gaps`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::Connection;

use super::data::{DeviceBusy, QueueBusy, TIMELINE_BINS};
use super::sql_functions::{int, FxMap};

/// What an op is to the occupancy window: [`Kind::Plain`], or caused by a graph launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Plain = 0,
    /// A graph node (or any op) linked to a graph-launch call.
    Replay = 1,
    /// A whole replay as one op (`GraphExecution`, HSA capture): its nodes are not in the trace.
    ReplaySpan = 2,
}

/// One GPU op: [start, end) on a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Iv {
    pub s: i64,
    pub e: i64,
    pub q: i64,
    pub kind: Kind,
}

/// Every device's ops, sorted by start (then end, queue).
pub type Devices = BTreeMap<i64, Vec<Iv>>;

type Sink = Arc<Mutex<FxMap<i64, Vec<Iv>>>>;

struct Intervals(Sink);

impl Aggregate<FxMap<i64, Vec<Iv>>, i64> for Intervals {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<FxMap<i64, Vec<Iv>>> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut FxMap<i64, Vec<Iv>>) -> rusqlite::Result<()> {
        let gpu = int(ctx, 0).unwrap_or(-1);
        if gpu < 0 {
            return Ok(()); // markers
        }
        let (q, s, e) = (int(ctx, 1).unwrap_or(0), int(ctx, 2).unwrap_or(0), int(ctx, 3).unwrap_or(0));
        let kind = match int(ctx, 4).unwrap_or(0) {
            1 => Kind::Replay,
            2 => Kind::ReplaySpan,
            _ => Kind::Plain,
        };
        acc.entry(gpu).or_default().push(Iv { s, e: e.max(s), q, kind });
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<FxMap<i64, Vec<Iv>>>) -> rusqlite::Result<i64> {
        let acc = acc.unwrap_or_default();
        let n = acc.values().map(|v| v.len() as i64).sum();
        *self.0.lock().unwrap() = acc;
        Ok(n)
    }
}

/// A registered `rtl_intervals`; [`IntervalsFn::take`] after the query that calls it.
pub(super) struct IntervalsFn(Sink);

impl IntervalsFn {
    pub(super) fn register(conn: &Connection) -> Result<Self> {
        let sink: Sink = Arc::default();
        let f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
        conn.create_aggregate_function("rtl_intervals", 5, f, Intervals(sink.clone()))?;
        Ok(IntervalsFn(sink))
    }
    /// The devices' ops, each device's sorted.
    pub(super) fn take(&self) -> Devices {
        let acc = std::mem::take(&mut *self.0.lock().unwrap());
        let mut out = Devices::new();
        for (gpu, mut v) in acc {
            v.sort_unstable();
            out.insert(gpu, v);
        }
        out
    }
}

/// The GPU span over every device: (first op start, last op end); (0, 0) without ops.
pub fn gpu_span(devs: &Devices) -> (i64, i64) {
    let first = devs.values().flatten().map(|x| x.s).min().unwrap_or(0);
    let last = devs.values().flatten().map(|x| x.e).max().unwrap_or(0);
    (first, last)
}

/// The width (ns) of each of [`TIMELINE_BINS`] bins over the GPU span `(first, last)`.
pub fn bin_width(first: i64, last: i64) -> i64 {
    let wall = (last - first).max(1);
    ((wall + TIMELINE_BINS as i64 - 1) / TIMELINE_BINS as i64).max(1)
}

/// The union (ns) of intervals `[s, e)` sorted by start, and its busy fraction (0..1) in each of
/// [`TIMELINE_BINS`] bins of `bin` ns from `first` (the last bin takes what runs past it).
pub fn union_bins(iv: impl Iterator<Item = (i64, i64)>, first: i64, bin: i64) -> (i64, Vec<f64>) {
    let mut union = 0i64;
    let mut run_end = i64::MIN;
    let mut bins = vec![0f64; TIMELINE_BINS];
    for (s, e) in iv {
        let from = s.max(run_end);
        // spread [from, e) over the bins it covers (integer ns: always progresses)
        let mut t = from;
        while t < e {
            let b = (((t - first) / bin).max(0) as usize).min(TIMELINE_BINS - 1);
            let bin_end = if b == TIMELINE_BINS - 1 { e } else { (first + (b as i64 + 1) * bin).min(e) };
            bins[b] += (bin_end - t) as f64;
            t = bin_end;
        }
        if e > from {
            union += e - from;
        }
        run_end = run_end.max(e);
    }
    // JSON shows the timeline rounded to 3 decimals; the page draws it as is.
    (union, bins.iter().map(|b| (b / bin as f64).clamp(0.0, 1.0)).collect())
}

/// GPU busy per device and queue over the GPU span `(first, last)` of every device, and each
/// device's busy timeline of [`TIMELINE_BINS`] bins.
pub fn busy(devs: &Devices) -> Vec<DeviceBusy> {
    let (first, last) = gpu_span(devs);
    let bin = bin_width(first, last);
    let pct = |x: i64| {
        if last - first > 0 {
            x as f64 * 100.0 / (last - first) as f64
        } else {
            0.0
        }
    };
    let mut out = vec![];
    for (&gpu, iv) in devs {
        let (union, timeline) = union_bins(iv.iter().map(|x| (x.s, x.e)), first, bin);
        let mut queues: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new(); // q -> (ops, union, run_end)
        for x in iv {
            let qe = queues.entry(x.q).or_insert((0, 0, i64::MIN));
            qe.0 += 1;
            let from = x.s.max(qe.2);
            if x.e > from {
                qe.1 += x.e - from;
            }
            qe.2 = qe.2.max(x.e);
        }
        out.push(DeviceBusy {
            gpu,
            ops: iv.len() as i64,
            busy_ns: union,
            wall_ns: last - first,
            busy_pct: pct(union),
            queues: queues.iter().map(|(&q, v)| QueueBusy { queue: q, ops: v.0, busy_ns: v.1, busy_pct: pct(v.1) }).collect(),
            timeline,
        });
    }
    out
}
