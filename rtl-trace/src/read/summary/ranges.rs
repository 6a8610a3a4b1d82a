//! roctx / NVTX range statistics (like `nsys stats --report nvtx_sum`): the marker ops
//! (`rocpd_op` rows with `gpuId < 0`) grouped by their text, with count, total, percentiles and
//! the style of the call that opened the first instance.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::OptionalExtension;

use super::data::RangeRow;
use super::samples::Kept;
use super::sql_functions::FxMap;

/// The style of a range opened by the API `api`.
fn style(api: &str) -> &'static str {
    if api.contains("Push") {
        "push/pop"
    } else if api.contains("Start") {
        "start/end"
    } else if api.contains("Mark") {
        "mark"
    } else {
        "range"
    }
}

/// The ranges by total time (then name), at most `top` (0: all), and how many names there are.
pub(super) fn ranges(
    conn: &rusqlite::Connection,
    groups: FxMap<(i64, i64), Kept>,
    name: &dyn Fn(i64) -> String,
    top: usize,
) -> Result<(Vec<RangeRow>, usize)> {
    let mut by_name: HashMap<String, Kept> = HashMap::new();
    for ((desc, _), k) in groups {
        by_name.entry(name(desc)).or_default().merge(k);
    }
    let total: i64 = by_name.values().map(|k| k.sum).sum();
    let mut api_of =
        conn.prepare_cached("SELECT s.string FROM rocpd_api a CROSS JOIN rocpd_string s ON s.id = a.apiName_id WHERE a.id = ?1")?;
    let mut rows = vec![];
    for (n, k) in by_name {
        let api: Option<String> = match k.first_tag {
            Some(id) => api_of.query_row([id], |r| r.get(0)).optional()?,
            None => None,
        };
        rows.push(RangeRow {
            name: n,
            style: api.as_deref().map_or("range", style).to_string(),
            count: k.seen as i64,
            total: k.sum,
            min: k.min,
            mean: if k.seen > 0 { k.sum / k.seen as i64 } else { 0 },
            max: k.max,
            pct_time: if total > 0 { k.sum as f64 * 100.0 / total as f64 } else { 0.0 },
            pct: k.percentiles(),
        });
    }
    rows.sort_by(|a, b| b.total.cmp(&a.total).then(b.count.cmp(&a.count)).then(a.name.cmp(&b.name)));
    let n = rows.len();
    if top > 0 {
        rows.truncate(top);
    }
    Ok((rows, n))
}
