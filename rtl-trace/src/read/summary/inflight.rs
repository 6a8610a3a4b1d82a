//! What the CPU side was doing while a GPU sat idle: the API calls in flight during each of the
//! largest idle gaps ([`super::gaps::largest_idle_gaps`]), found by one more scan of `rocpd_api`
//! (only when there are gaps) with the gaps given to the aggregate `rtl_inflight(start, end,
//! apiName_id)`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};

use super::gaps::{IdleGap, InFlight};
use super::sql_functions::int;

/// Per gap: apiName_id -> (calls, overlap ns).
type Acc = Vec<HashMap<i64, (i64, i64)>>;

struct InFlightFn {
    gaps: Vec<(i64, i64)>,
    sink: Arc<Mutex<Acc>>,
}

impl Aggregate<Acc, i64> for InFlightFn {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Acc> {
        Ok(vec![HashMap::new(); self.gaps.len()])
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut Acc) -> rusqlite::Result<()> {
        let (Some(s), Some(e), Some(n)) = (int(ctx, 0), int(ctx, 1), int(ctx, 2)) else {
            return Ok(());
        };
        for (i, &(gs, ge)) in self.gaps.iter().enumerate() {
            let overlap = e.min(ge) - s.max(gs);
            if overlap > 0 {
                let x = acc[i].entry(n).or_default();
                x.0 += 1;
                x.1 += overlap;
            }
        }
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<Acc>) -> rusqlite::Result<i64> {
        *self.sink.lock().unwrap() = acc.unwrap_or_default();
        Ok(0)
    }
}

/// Fills each gap's `in_flight` (names by `name`), most overlap first.
pub(super) fn fill(conn: &rusqlite::Connection, gaps: &mut [IdleGap], name: &dyn Fn(i64) -> String) -> Result<()> {
    if gaps.is_empty() {
        return Ok(());
    }
    let spans: Vec<(i64, i64)> = gaps.iter().map(|g| (g.start_ns, g.end_ns)).collect();
    let (lo, hi) = (spans.iter().map(|g| g.0).min().unwrap_or(0), spans.iter().map(|g| g.1).max().unwrap_or(0));
    let sink: Arc<Mutex<Acc>> = Arc::default();
    conn.create_aggregate_function(
        "rtl_inflight",
        3,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        InFlightFn { gaps: spans, sink: sink.clone() },
    )?;
    conn.query_row("SELECT rtl_inflight(start, end, apiName_id) FROM rocpd_api WHERE end > ?1 AND start < ?2", [lo, hi], |_| Ok(()))?;
    let acc = std::mem::take(&mut *sink.lock().unwrap());
    for (g, per) in gaps.iter_mut().zip(acc) {
        let mut v: Vec<InFlight> = per.into_iter().map(|(n, (calls, overlap_ns))| InFlight { api: name(n), calls, overlap_ns }).collect();
        v.sort_by(|a, b| b.overlap_ns.cmp(&a.overlap_ns).then(a.api.cmp(&b.api)));
        g.in_flight = v;
    }
    Ok(())
}
