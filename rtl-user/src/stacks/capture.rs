//! Graph replays attributed to their capture.
//!
//! Calls that put work on a stream while it is capturing (`hipStreamBeginCapture` ...
//! `hipStreamEndCapture`, and the CUDA forms) do not run: each becomes a node of the captured
//! graph. This follows captures per process and stream, in the order the calls were made
//! (streams pulled into a capture by waiting on an event recorded in it count as the same
//! capture), keeps each graph's calls, hands them to the executable graphs instantiated from it,
//! and links every graph launch (`rtl_graph_launch`) to its capture (`rtl_capture`,
//! `rtl_capture_call`). GPU records of the replayed nodes, where the GPU source gives them one by
//! one (node `i` of the launch), are linked to the call that created node `i`
//! ([`CaptureTracker::annotate`], `rtl_op_site`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::SiteRow;
use crate::join::rows::{OpRow, Row};

/// Most captures, graphs and executable graphs remembered per trace (oldest forgotten first).
pub const MAX_GRAPHS: usize = 65536;
/// Most calls remembered per capture (a longer capture keeps its first ones, counted).
pub const MAX_CAPTURE_CALLS: usize = 65536;
/// Most graph launches whose GPU records are still expected.
pub const MAX_LAUNCHES: usize = 65536;
/// Most replayed ops held back until their graph's node ids are all known (oldest let go first,
/// without a site).
pub const MAX_HELD_OPS: usize = 4096;

/// What one completed call tells the tracker.
pub enum CallFact {
    BeginCapture {
        stream: u64,
    },
    EndCapture {
        stream: u64,
        graph: u64,
    },
    Instantiate {
        exec: u64,
        graph: u64,
    },
    GraphLaunch {
        exec: u64,
    },
    /// Work on a stream (a launch, copy or memset): a node if the stream is capturing.
    Work {
        stream: u64,
        start: u64,
    },
    EventRecord {
        event: u64,
        stream: u64,
    },
    StreamWaitEvent {
        stream: u64,
        event: u64,
    },
}

/// Which fact a successful call of this API is, from its name and raw arguments (`out`: the
/// value written through its output pointer). None for everything else.
pub fn fact_of(name: &str, args: &[u64], out: Option<u64>) -> Option<CallFact> {
    let base = name.trim_end_matches("_ptsz").trim_end_matches("_v2");
    Some(match base {
        "hipStreamBeginCapture" | "cuStreamBeginCapture" | "cudaStreamBeginCapture" => CallFact::BeginCapture { stream: args[0] },
        "hipStreamEndCapture" | "cuStreamEndCapture" | "cudaStreamEndCapture" => CallFact::EndCapture { stream: args[0], graph: out? },
        "hipGraphInstantiate"
        | "hipGraphInstantiateWithFlags"
        | "cuGraphInstantiate"
        | "cuGraphInstantiateWithFlags"
        | "cudaGraphInstantiate"
        | "cudaGraphInstantiateWithFlags" => CallFact::Instantiate { exec: out?, graph: args[1] },
        "hipGraphLaunch" | "cuGraphLaunch" | "cudaGraphLaunch" => CallFact::GraphLaunch { exec: args[0] },
        "hipEventRecord" | "cuEventRecord" | "cudaEventRecord" => CallFact::EventRecord { event: args[0], stream: args[1] },
        "hipStreamWaitEvent" | "cuStreamWaitEvent" | "cudaStreamWaitEvent" => CallFact::StreamWaitEvent { stream: args[0], event: args[1] },
        _ => return None,
    })
}

struct Open {
    id: i64,
    stream: u64,
    begin_api_id: i64,
    /// (start time, call id) of the calls captured.
    calls: Vec<(u64, i64)>,
}

/// A finished capture: its row id and its calls in order (node order).
struct Captured {
    id: i64,
    calls: Arc<[i64]>,
    /// The GPU source's ids of the graph's nodes seen in replays (sorted, at most one per
    /// captured call), where the source names nodes by id (CUPTI) rather than position.
    node_ids: Mutex<Vec<u64>>,
}

impl Captured {
    fn new(id: i64, calls: Arc<[i64]>) -> Self {
        Captured { id, calls, node_ids: Mutex::new(Vec::new()) }
    }

    /// Remembers a node id seen in a replay's GPU records.
    fn learn(&self, node_id: u64) {
        let mut ids = self.node_ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.len() < self.calls.len() {
            if let Err(at) = ids.binary_search(&node_id) {
                ids.insert(at, node_id);
            }
        }
    }

    /// Has one node id per captured call been seen (every rank final)?
    fn ids_complete(&self) -> bool {
        self.node_ids.lock().unwrap_or_else(|e| e.into_inner()).len() == self.calls.len()
    }

    /// The position of the node with this id: its rank among the graph's node ids, once one id
    /// per captured call has been seen (before that a rank could still move: no answer).
    fn node_of(&self, node_id: u64) -> Option<usize> {
        let ids = self.node_ids.lock().unwrap_or_else(|e| e.into_inner());
        if ids.len() != self.calls.len() {
            return None;
        }
        ids.binary_search(&node_id).ok()
    }
}

#[derive(Default)]
pub struct CaptureTracker {
    /// (pid, stream) -> index into `open` of the capture it belongs to (origin or joined).
    capturing: HashMap<(u32, u64), i64>,
    open: HashMap<i64, Open>,
    /// (pid, event) recorded in a capture -> that capture.
    events: HashMap<(u32, u64), i64>,
    graphs: HashMap<(u32, u64), Arc<Captured>>,
    execs: HashMap<(u32, u64), Arc<Captured>>,
    order: VecDeque<(bool, (u32, u64))>,
    /// Graph launch call id -> its capture's calls, for the GPU records still to come.
    launches: HashMap<i64, Arc<Captured>>,
    launch_order: VecDeque<i64>,
    next_id: i64,
    /// Calls beyond [`MAX_CAPTURE_CALLS`] in one capture.
    pub calls_not_kept: u64,
    /// Replayed ops named by node id whose graph's ids are not all known yet (a replay's
    /// records split across batches): held back, in arrival order, and placed once they are.
    held: VecDeque<(Arc<Captured>, OpRow)>,
    /// Held ops let go without a site ([`MAX_HELD_OPS`]).
    pub held_ops_released: u64,
}

impl CaptureTracker {
    /// A completed, successful call of process `pid` (call id `api_id`).
    pub fn on_call(&mut self, pid: u32, api_id: i64, fact: CallFact, out: &mut Vec<Row>) {
        match fact {
            CallFact::BeginCapture { stream } => {
                self.next_id += 1;
                let id = self.next_id;
                self.open.insert(id, Open { id, stream, begin_api_id: api_id, calls: Vec::new() });
                self.capturing.insert((pid, stream), id);
            }
            CallFact::Work { stream, start } => {
                if let Some(c) = self.capturing.get(&(pid, stream)).and_then(|id| self.open.get_mut(id)) {
                    if c.calls.len() < MAX_CAPTURE_CALLS {
                        c.calls.push((start, api_id));
                    } else {
                        self.calls_not_kept += 1;
                    }
                }
            }
            CallFact::EventRecord { event, stream } => match self.capturing.get(&(pid, stream)) {
                Some(&id) => {
                    self.events.insert((pid, event), id);
                }
                None => {
                    self.events.remove(&(pid, event));
                }
            },
            CallFact::StreamWaitEvent { stream, event } => {
                if let Some(&id) = self.events.get(&(pid, event)) {
                    if self.open.contains_key(&id) {
                        self.capturing.insert((pid, stream), id);
                    }
                }
            }
            CallFact::EndCapture { stream, graph } => {
                let Some(id) = self.capturing.get(&(pid, stream)).copied() else { return };
                let Some(mut c) = self.open.remove(&id) else { return };
                self.capturing.retain(|_, v| *v != id);
                self.events.retain(|_, v| *v != id);
                // Node order is the order the calls were made (streams of one capture may be
                // fed by several threads).
                c.calls.sort_by_key(|&(t, id)| (t, id));
                let calls: Arc<[i64]> = c.calls.iter().map(|&(_, id)| id).collect();
                out.push(Row::Site(SiteRow::Capture {
                    id: c.id,
                    pid,
                    stream: c.stream,
                    begin_api_id: c.begin_api_id,
                    end_api_id: api_id,
                    graph,
                    calls: calls.to_vec(),
                }));
                self.remember(false, (pid, graph), Arc::new(Captured::new(c.id, calls)));
            }
            CallFact::Instantiate { exec, graph } => {
                if let Some(g) = self.graphs.get(&(pid, graph)).cloned() {
                    self.remember(true, (pid, exec), g);
                }
            }
            CallFact::GraphLaunch { exec } => {
                let Some(g) = self.execs.get(&(pid, exec)).cloned() else { return };
                out.push(Row::Site(SiteRow::GraphLaunch { api_id, capture_id: g.id }));
                if self.launches.len() >= MAX_LAUNCHES {
                    if let Some(old) = self.launch_order.pop_front() {
                        self.launches.remove(&old);
                    }
                }
                self.launches.insert(api_id, g);
                self.launch_order.push_back(api_id);
            }
        }
    }

    fn remember(&mut self, exec: bool, key: (u32, u64), c: Arc<Captured>) {
        if self.order.len() >= MAX_GRAPHS {
            if let Some((e, k)) = self.order.pop_front() {
                if e {
                    self.execs.remove(&k);
                } else {
                    self.graphs.remove(&k);
                }
            }
        }
        if exec {
            self.execs.insert(key, c);
        } else {
            self.graphs.insert(key, c);
        }
        self.order.push_back((exec, key));
    }

    /// Process `pid` is gone or exec'd: its handles mean nothing any more.
    pub fn forget(&mut self, pid: u32) {
        self.capturing.retain(|k, _| k.0 != pid);
        self.events.retain(|k, _| k.0 != pid);
        self.graphs.retain(|k, _| k.0 != pid);
        self.execs.retain(|k, _| k.0 != pid);
    }

    /// Links replayed nodes among `rows[from..]` to the calls that created them
    /// (`OpRow::site_api_id`). An op named by node id whose graph's ids are not all known yet
    /// is taken out of `rows` and held until they are (a later batch of the same replay, or the
    /// next replay); held ops now placeable are appended to `rows`. `finish`: the trace ends,
    /// every held op goes out, placed if it can be.
    pub fn annotate(&mut self, rows: &mut Vec<Row>, from: usize, finish: bool) {
        if self.launches.is_empty() && self.held.is_empty() {
            return;
        }
        // Node ids first, from every op of the batch: a replay's records usually arrive
        // together, so its ids are all known before any of them is placed.
        for r in &rows[from..] {
            if let Row::Op(OpRow { api_id: Some(api), node_id: Some(id), .. }) = r {
                if let Some(c) = self.launches.get(api) {
                    c.learn(*id);
                }
            }
        }
        // Placed where they are; only when some op has to wait are the rows moved.
        let mut waits = false;
        for r in &mut rows[from..] {
            let Row::Op(o) = r else { continue };
            let Some(c) = o.api_id.and_then(|api| self.launches.get(&api)) else { continue };
            if !finish && must_wait(c, o) {
                waits = true;
            } else {
                o.site_api_id = site_of(c, o);
            }
        }
        if waits {
            let tail: Vec<Row> = rows.drain(from..).collect();
            for r in tail {
                match r {
                    Row::Op(o) => match o.api_id.and_then(|api| self.launches.get(&api)) {
                        Some(c) if must_wait(c, &o) => self.held.push_back((c.clone(), o)),
                        _ => rows.push(Row::Op(o)),
                    },
                    other => rows.push(other),
                }
            }
        }
        if self.held.is_empty() {
            return;
        }
        // Held ops whose graph's ids are now all known (or all of them, at the end), in order.
        let mut keep = VecDeque::new();
        while let Some((c, mut o)) = self.held.pop_front() {
            if finish || c.ids_complete() {
                o.site_api_id = site_of(&c, &o);
                rows.push(Row::Op(o));
            } else {
                keep.push_back((c, o));
            }
        }
        while keep.len() > MAX_HELD_OPS {
            if let Some((_, o)) = keep.pop_front() {
                self.held_ops_released += 1;
                rows.push(Row::Op(o));
            }
        }
        self.held = keep;
    }
}

/// Does `o`, a replayed op of `c`'s graph named by node id, have to wait for the graph's other
/// ids (its rank is not final yet)?
fn must_wait(c: &Captured, o: &OpRow) -> bool {
    o.node.is_none() && o.node_id.is_some() && !c.ids_complete()
}

/// The call that created replayed op `o`'s node in `c`'s capture: by its position in the
/// launch, or by the rank of its node id.
fn site_of(c: &Captured, o: &OpRow) -> Option<i64> {
    let node = match (o.node, o.node_id) {
        (Some(n), _) => Some(n as usize),
        (None, Some(id)) => c.node_of(id),
        (None, None) => None,
    };
    node.and_then(|n| c.calls.get(n).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replayed kernel's row for call `api`: its node by position or by the source's id.
    fn op(api: i64, node: Option<u32>, node_id: Option<u64>) -> Row {
        Row::Op(OpRow {
            gpu: 0,
            queue: 0,
            seq: 0,
            start: 0,
            end: 0,
            description: String::new(),
            op_type: "KernelExecution",
            correlation_id: api,
            api_id: Some(api),
            link: None,
            pid: Some(7),
            node,
            node_id,
            site_api_id: None,
        })
    }

    /// The site each row was given.
    fn sites(ops: &[Row]) -> Vec<Option<i64>> {
        ops.iter()
            .map(|r| match r {
                Row::Op(o) => o.site_api_id,
                _ => None,
            })
            .collect()
    }

    fn captures(rows: &[Row]) -> Vec<(i64, Vec<i64>)> {
        rows.iter()
            .filter_map(|r| match r {
                Row::Site(SiteRow::Capture { id, calls, .. }) => Some((*id, calls.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_capture_follows_its_stream_and_joined_streams_into_launches() {
        let mut t = CaptureTracker::default();
        let mut out = Vec::new();
        t.on_call(7, 1, CallFact::BeginCapture { stream: 0xa }, &mut out);
        t.on_call(7, 2, CallFact::Work { stream: 0xa, start: 10 }, &mut out);
        t.on_call(7, 3, CallFact::Work { stream: 0xb, start: 11 }, &mut out); // not capturing
        t.on_call(7, 4, CallFact::EventRecord { event: 0xe, stream: 0xa }, &mut out);
        t.on_call(7, 5, CallFact::StreamWaitEvent { stream: 0xb, event: 0xe }, &mut out);
        t.on_call(7, 6, CallFact::Work { stream: 0xb, start: 13 }, &mut out); // joined
        t.on_call(8, 7, CallFact::Work { stream: 0xa, start: 14 }, &mut out); // other process
        t.on_call(7, 8, CallFact::EndCapture { stream: 0xa, graph: 0x9 }, &mut out);
        t.on_call(7, 9, CallFact::Work { stream: 0xb, start: 16 }, &mut out); // joined back
        assert_eq!(captures(&out), vec![(1, vec![2, 6])]);
        t.on_call(7, 10, CallFact::Instantiate { exec: 0x55, graph: 0x9 }, &mut out);
        t.on_call(7, 11, CallFact::GraphLaunch { exec: 0x55 }, &mut out);
        t.on_call(8, 12, CallFact::GraphLaunch { exec: 0x55 }, &mut out); // not its exec
        let launches: Vec<_> = out.iter().filter(|r| matches!(r, Row::Site(SiteRow::GraphLaunch { .. }))).collect();
        assert_eq!(launches.len(), 1);
        let mk = |node| op(11, node, None);
        let mut ops = vec![mk(Some(0)), mk(Some(1)), mk(Some(2)), mk(None)];
        t.annotate(&mut ops, 0, false);
        assert_eq!(sites(&ops), vec![Some(2), Some(6), None, None]);
    }

    #[test]
    fn replayed_nodes_named_by_id_are_placed_by_the_ids_order() {
        let mut t = CaptureTracker::default();
        let mut out = Vec::new();
        t.on_call(7, 1, CallFact::BeginCapture { stream: 0xa }, &mut out);
        for (i, call) in [2, 3, 4].into_iter().enumerate() {
            t.on_call(7, call, CallFact::Work { stream: 0xa, start: 10 + i as u64 }, &mut out);
        }
        t.on_call(7, 5, CallFact::EndCapture { stream: 0xa, graph: 0x9 }, &mut out);
        t.on_call(7, 6, CallFact::Instantiate { exec: 0x55, graph: 0x9 }, &mut out);
        t.on_call(7, 7, CallFact::GraphLaunch { exec: 0x55 }, &mut out);
        t.on_call(7, 8, CallFact::GraphLaunch { exec: 0x55 }, &mut out);
        let mk = |api: i64, id: u64| op(api, None, Some(id));
        // A first batch with only two of the three nodes: no rank is certain yet, so both are
        // held back (rows before `from` are not touched).
        let mut ops = vec![op(99, None, None), mk(7, 1042), mk(7, 1040)];
        t.annotate(&mut ops, 1, false);
        assert_eq!(sites(&ops), vec![None]);
        // The rest of that replay and the whole next one, out of order: every op placed by the
        // ids' order (1040 < 1041 < 1042), the held ones after this batch's.
        let mut ops = vec![mk(7, 1041), mk(8, 1042), mk(8, 1040), mk(8, 1041), mk(8, 9999)];
        t.annotate(&mut ops, 0, false);
        assert_eq!(sites(&ops), vec![Some(3), Some(4), Some(2), Some(3), None, Some(4), Some(2)]);
        assert_eq!(t.held_ops_released, 0);
    }

    #[test]
    fn held_ops_go_out_at_the_end_and_beyond_the_bound() {
        let mut t = CaptureTracker::default();
        let mut out = Vec::new();
        t.on_call(7, 1, CallFact::BeginCapture { stream: 0xa }, &mut out);
        for call in [2, 3] {
            t.on_call(7, call, CallFact::Work { stream: 0xa, start: call as u64 }, &mut out);
        }
        t.on_call(7, 5, CallFact::EndCapture { stream: 0xa, graph: 0x9 }, &mut out);
        t.on_call(7, 6, CallFact::Instantiate { exec: 0x55, graph: 0x9 }, &mut out);
        t.on_call(7, 7, CallFact::GraphLaunch { exec: 0x55 }, &mut out);
        // A graph whose second node id never shows: its ops wait, at most MAX_HELD_OPS of them.
        let mut ops: Vec<Row> = (0..MAX_HELD_OPS + 3).map(|_| op(7, None, Some(500))).collect();
        t.annotate(&mut ops, 0, false);
        assert_eq!(ops.len(), 3);
        assert_eq!(t.held_ops_released, 3);
        // The end: the rest go out, unplaced (their rank was never certain).
        let mut ops = Vec::new();
        t.annotate(&mut ops, 0, true);
        assert_eq!(ops.len(), MAX_HELD_OPS);
        assert!(sites(&ops).iter().all(Option::is_none));
    }
}
