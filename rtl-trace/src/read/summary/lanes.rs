//! The HTML report's per-stream lanes: GPU busy over time for each (GPU, process, stream) the
//! ops ran on. An op's stream is its call's stream argument (`rtl_api.a3` where
//! `rtl_api_meaning.a3` is `stream`, also on the profiler-only rows written for unlinked ops);
//! an op whose stream is unknown (no call, or an API without one) gets a lane per hardware queue.

use std::collections::BTreeMap;

use anyhow::Result;
use rusqlite::Connection;

use super::data::StreamLane;
use super::intervals::{bin_width, union_bins};

/// Lanes drawn at most; the rest are counted ([`super::data::Summary::stream_lanes_total`]).
pub const LANES_SHOWN: usize = 128;

/// Where an op ran: GPU, process (None: not known), and stream, or queue when the stream is not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Where {
    Stream(i64),
    Queue(i64),
}

/// Every lane's busy time and timeline over the GPU span `(first, last)`, by GPU, process,
/// stream; at most [`LANES_SHOWN`] of them (the busiest), and how many there are.
pub fn stream_lanes(c: &Connection, first: i64, last: i64, linked_only: bool) -> Result<(Vec<StreamLane>, usize)> {
    let only = if linked_only { " AND o.id NOT IN (SELECT op_id FROM rtl_op WHERE link IN (0, 4, 5))" } else { "" };
    let mut st = c.prepare(&format!(
        "SELECT o.gpuId, o.queueId, o.start, o.end, coalesce(a.pid, ro.pid), iif(m.a3 = 'stream', r.a3, NULL)
         FROM rocpd_op o
              LEFT JOIN rocpd_api a ON a.id = (SELECT l.api_id FROM rocpd_api_ops l WHERE l.op_id = o.id LIMIT 1)
              LEFT JOIN rtl_api r ON r.api_id = a.id
              LEFT JOIN rtl_api_meaning m ON m.apiName_id = a.apiName_id
              LEFT JOIN rtl_op ro ON ro.op_id = o.id
         WHERE o.gpuId >= 0{only}"
    ))?;
    type Key = (i64, Option<i64>, Where);
    let mut by_lane: BTreeMap<Key, Vec<(i64, i64)>> = BTreeMap::new();
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let (gpu, q, s, e): (i64, i64, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?);
        let pid: Option<i64> = r.get(4)?;
        let w = match r.get::<_, Option<i64>>(5)? {
            Some(stream) => Where::Stream(stream),
            None => Where::Queue(q),
        };
        by_lane.entry((gpu, pid, w)).or_default().push((s, e.max(s)));
    }
    let bin = bin_width(first, last);
    let wall = last - first;
    let mut lanes: Vec<StreamLane> = by_lane
        .into_iter()
        .map(|((gpu, pid, w), mut iv)| {
            iv.sort_unstable();
            let (busy_ns, timeline) = union_bins(iv.iter().copied(), first, bin);
            let (stream, queue) = match w {
                Where::Stream(s) => (Some(s), None),
                Where::Queue(q) => (None, Some(q)),
            };
            let busy_pct = if wall > 0 { busy_ns as f64 * 100.0 / wall as f64 } else { 0.0 };
            StreamLane { gpu, pid, stream, queue, ops: iv.len() as i64, busy_ns, busy_pct, timeline }
        })
        .collect();
    let total = lanes.len();
    if total > LANES_SHOWN {
        // Keep the busiest, then put them back in (GPU, process, stream) order.
        lanes.sort_by(|a, b| b.busy_ns.cmp(&a.busy_ns).then(a.key().cmp(&b.key())));
        lanes.truncate(LANES_SHOWN);
        lanes.sort_by_key(StreamLane::key);
    }
    Ok((lanes, total))
}
