//! GPU occupancy and idle gaps, from the ops' intervals ([`super::intervals`]):
//!
//! * **Window** of a device: `replay` — from the start of the first op linked to a graph-launch
//!   call (`hipGraphLaunch`, `cudaGraphLaunch`, `cuGraphLaunch` and their per-thread forms) on
//!   that device to the end of the last one; `span` — its first op's start to its last op's end.
//!   `auto` (the default) takes `replay` on a device that ran graph launches, else `span`.
//! * **Occupancy**: the time in the window in which the device ran at least one op (any op,
//!   graph node or not; concurrent queues counted once) / the window's length.
//! * **Inter-op gaps per queue**: on one (device, queue), ops by start; a gap is the time from
//!   the latest end so far to the next op's start, when positive, counted when it lies in the
//!   window. Ops of zero duration (barrier packets, instants) neither fill nor split a gap.
//! * **Idle gaps per device**: the same over the device's union of queues, in its `span`; the
//!   summary shows the largest with the API calls in flight then ([`super::inflight`]).

use super::intervals::{Devices, Iv, Kind};

/// Which part of the trace occupancy and queue gaps are measured over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Window {
    /// `replay` on a device with graph launches, `span` on the others.
    #[default]
    Auto,
    Replay,
    Span,
}

impl Window {
    pub fn name(self) -> &'static str {
        match self {
            Window::Auto => "auto",
            Window::Replay => "replay",
            Window::Span => "span",
        }
    }
    pub fn parse(s: &str) -> Option<Window> {
        match s {
            "auto" => Some(Window::Auto),
            "replay" => Some(Window::Replay),
            "span" => Some(Window::Span),
            _ => None,
        }
    }
}

/// API names whose calls replay a graph (their ops make the `replay` window).
pub const GRAPH_LAUNCH_APIS: &[&str] =
    &["hipGraphLaunch", "hipGraphLaunch_spt", "cudaGraphLaunch", "cudaGraphLaunch_ptsz", "cuGraphLaunch", "cuGraphLaunch_ptsz"];

/// One device's occupancy over its window.
#[derive(Debug, Clone)]
pub struct Occupancy {
    pub gpu: i64,
    /// `replay` or `span` (what `auto` became on this device); `none`: no window (with
    /// [`Window::Replay`] on a device without graph launches).
    pub window: &'static str,
    pub first_ns: i64,
    pub last_ns: i64,
    pub busy_ns: i64,
    /// busy / window length; None for an empty window.
    pub fraction: Option<f64>,
    /// Ops linked to graph launches on this device.
    pub replay_ops: i64,
    /// Every replay op is a whole replay (`GraphExecution`, HSA capture without
    /// `RTL_AGENT_HSA_BATCHES=1`): gaps between a replay's nodes are not in the trace.
    pub replay_spans_only: bool,
}

/// The inter-op gaps of one queue in its device's window.
#[derive(Debug, Clone)]
pub struct QueueGaps {
    pub gpu: i64,
    pub queue: i64,
    pub ops: i64,
    /// Every gap, longest first.
    pub gaps: Vec<i64>,
}

impl QueueGaps {
    /// Gaps longer than `ns`.
    pub fn over(&self, ns: i64) -> usize {
        self.gaps.partition_point(|&g| g > ns)
    }
}

/// A time a device ran nothing, between two of its ops.
#[derive(Debug, Clone)]
pub struct IdleGap {
    pub gpu: i64,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The API calls in flight meanwhile, by name, most overlap first.
    pub in_flight: Vec<InFlight>,
}

/// API calls of one name in flight during an idle gap.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub api: String,
    pub calls: i64,
    /// Sum over those calls of the time each overlaps the gap.
    pub overlap_ns: i64,
}

/// Idle gaps the summary lists (the largest over all devices).
pub const IDLE_GAPS_SHOWN: usize = 10;

/// The gaps between a time-sorted run of intervals: (gap start, gap end) for each positive one.
fn gaps_of<'a>(iv: impl Iterator<Item = &'a Iv>) -> Vec<(i64, i64)> {
    let mut out = vec![];
    let mut run_end: Option<i64> = None;
    for x in iv.filter(|x| x.e > x.s) {
        if let Some(r) = run_end {
            if x.s > r {
                out.push((r, x.s));
            }
        }
        run_end = Some(run_end.map_or(x.e, |r| r.max(x.e)));
    }
    out
}

/// Union of intervals clipped to [lo, hi].
fn busy_within(iv: &[Iv], lo: i64, hi: i64) -> i64 {
    let mut busy = 0;
    let mut run_end = i64::MIN;
    for x in iv {
        let (s, e) = (x.s.max(lo).max(run_end), x.e.min(hi));
        if e > s {
            busy += e - s;
        }
        run_end = run_end.max(x.e.min(hi));
    }
    busy
}

/// Occupancy of every device in its window, and the per-queue gaps in that window.
pub fn occupancy_and_queue_gaps(devs: &Devices, window: Window) -> (Vec<Occupancy>, Vec<QueueGaps>) {
    let (mut occ, mut queues) = (vec![], vec![]);
    for (&gpu, iv) in devs {
        let replay: Vec<&Iv> = iv.iter().filter(|x| x.kind != Kind::Plain).collect();
        let span = (iv.iter().map(|x| x.s).min().unwrap_or(0), iv.iter().map(|x| x.e).max().unwrap_or(0));
        let replay_win =
            (!replay.is_empty()).then(|| (replay.iter().map(|x| x.s).min().unwrap_or(0), replay.iter().map(|x| x.e).max().unwrap_or(0)));
        let (name, win) = match (window, replay_win) {
            (Window::Span, _) | (Window::Auto, None) => ("span", Some(span)),
            (Window::Replay | Window::Auto, Some(w)) => ("replay", Some(w)),
            (Window::Replay, None) => ("none", None),
        };
        let (first, last) = win.unwrap_or((0, 0));
        let busy = if win.is_some() { busy_within(iv, first, last) } else { 0 };
        occ.push(Occupancy {
            gpu,
            window: name,
            first_ns: first,
            last_ns: last,
            busy_ns: busy,
            fraction: (last > first).then(|| busy as f64 / (last - first) as f64),
            replay_ops: replay.len() as i64,
            replay_spans_only: !replay.is_empty() && replay.iter().all(|x| x.kind == Kind::ReplaySpan),
        });
        let mut by_queue: std::collections::BTreeMap<i64, Vec<&Iv>> = Default::default();
        for x in iv {
            by_queue.entry(x.q).or_default().push(x);
        }
        for (q, ops) in by_queue {
            let mut gaps: Vec<i64> = match win {
                Some((lo, hi)) => {
                    gaps_of(ops.iter().copied()).into_iter().filter(|&(s, e)| s >= lo && e <= hi).map(|(s, e)| e - s).collect()
                }
                None => vec![],
            };
            gaps.sort_unstable_by(|a, b| b.cmp(a));
            queues.push(QueueGaps { gpu, queue: q, ops: ops.len() as i64, gaps });
        }
    }
    (occ, queues)
}

/// The `n` longest idle gaps over all devices (each device's union of queues, in its span),
/// longest first; ties by device and time.
pub fn largest_idle_gaps(devs: &Devices, n: usize) -> Vec<IdleGap> {
    let mut all: Vec<(i64, i64, i64)> = vec![];
    for (&gpu, iv) in devs {
        all.extend(gaps_of(iv.iter()).into_iter().map(|(s, e)| (gpu, s, e)));
    }
    all.sort_by(|a, b| (b.2 - b.1).cmp(&(a.2 - a.1)).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)));
    all.truncate(n);
    all.into_iter().map(|(gpu, s, e)| IdleGap { gpu, start_ns: s, end_ns: e, in_flight: vec![] }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(s: i64, e: i64, q: i64, kind: Kind) -> Iv {
        Iv { s, e, q, kind }
    }

    #[test]
    fn replay_window_gaps_and_occupancy() {
        // queue 1: a plain op, then three replay ops with gaps 20 and 200; queue 2 overlaps one gap.
        let mut v = vec![
            iv(0, 100, 1, Kind::Plain),
            iv(1000, 1100, 1, Kind::Replay),
            iv(1120, 1200, 1, Kind::Replay),
            iv(1150, 1150, 1, Kind::Plain), // zero length: neither fills nor splits
            iv(1400, 1500, 1, Kind::Replay),
            iv(1250, 1300, 2, Kind::Plain),
        ];
        v.sort();
        let devs: Devices = [(0, v)].into_iter().collect();
        let (occ, q) = occupancy_and_queue_gaps(&devs, Window::Auto);
        assert_eq!(occ[0].window, "replay");
        assert_eq!((occ[0].first_ns, occ[0].last_ns), (1000, 1500));
        assert_eq!(occ[0].busy_ns, 100 + 80 + 50 + 100);
        assert_eq!(occ[0].fraction, Some(330.0 / 500.0));
        assert_eq!(q[0].gaps, vec![200, 20], "the gap before the window is not counted");
        assert_eq!(q[0].over(100), 1);
        assert_eq!(q[1].gaps, Vec::<i64>::new());
        let (occ, q) = occupancy_and_queue_gaps(&devs, Window::Span);
        assert_eq!((occ[0].window, occ[0].first_ns, occ[0].busy_ns), ("span", 0, 430));
        assert_eq!(q[0].gaps, vec![900, 200, 20]);
        let idle = largest_idle_gaps(&devs, 2);
        assert_eq!((idle[0].start_ns, idle[0].end_ns), (100, 1000));
        assert_eq!((idle[1].start_ns, idle[1].end_ns), (1300, 1400), "queue 2 filled part of queue 1's gap");
    }
}
