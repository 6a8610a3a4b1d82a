//! The `--json` keys added for issue 16: `header`, `ranges`, `launch_latency_per_kernel`,
//! `check_metrics` (what `rtl-ebpf check` tests: occupancy per device in its window, inter-op
//! gaps per queue) and `idle_gaps` (with the API calls in flight).

use serde_json::{json, Value};

use super::data::{Percentiles, Summary, LATENCY_BUCKETS};

/// `{"p50_ns", "p90_ns", "p99_ns", "percentiles_sampled_every"}` merged into `v`.
pub(super) fn add_percentiles(v: &mut Value, p: &Percentiles) {
    v["p50_ns"] = json!(p.p50);
    v["p90_ns"] = json!(p.p90);
    v["p99_ns"] = json!(p.p99);
    v["percentiles_sampled_every"] = json!(p.sampled_every);
}

/// The launch-latency histogram: the non-empty buckets, `hi_ns` null for the last bucket.
pub(super) fn histogram(h: &[i64]) -> Value {
    let rows: Vec<Value> = h
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(i, &n)| {
            json!({
                "lo_ns": if i == 0 { Value::Null } else { json!(LATENCY_BUCKETS[i]) },
                "hi_ns": LATENCY_BUCKETS.get(i + 1),
                "count": n,
            })
        })
        .collect();
    Value::Array(rows)
}

/// Gap thresholds the JSON counts per queue (ns).
pub const GAP_THRESHOLDS: &[(&str, i64)] = &[("gaps_over_10us", 10_000), ("gaps_over_100us", 100_000), ("gaps_over_1ms", 1_000_000)];

pub(super) fn add_sections(s: &Summary, doc: &mut Value) {
    let h = &s.header;
    doc["header"] = json!({
        "host": h.host, "date_utc": h.date_utc, "command": h.command, "mode": h.mode,
        "version": h.version, "gpu_sources": h.gpu_sources, "clock": h.clock,
    });
    doc["totals"]["range_names"] = json!(s.ranges_total_names);
    doc["totals"]["ranges_left_out"] = json!(s.ranges_total_names - s.ranges.len());
    doc["ranges"] = s
        .ranges
        .iter()
        .map(|r| {
            let mut v = json!({
                "name": r.name, "style": r.style, "count": r.count, "total_ns": r.total, "pct_time": r.pct_time,
                "mean_ns": r.mean, "min_ns": r.min, "max_ns": r.max,
            });
            add_percentiles(&mut v, &r.pct);
            v
        })
        .collect();
    doc["launch_latency_per_kernel"] = s
        .kernel_latency
        .iter()
        .map(|k| {
            let mut v = json!({"name": k.name, "count": k.count, "min_ns": k.min, "mean_ns": k.mean, "max_ns": k.max});
            add_percentiles(&mut v, &k.pct);
            v
        })
        .collect();
    doc["check_metrics"] = json!({
        "window": s.window.name(),
        "occupancy": s.occupancy.iter().map(|o| json!({
            "gpu": o.gpu, "window": o.window, "first_ns": o.first_ns, "last_ns": o.last_ns,
            "window_ns": o.last_ns - o.first_ns, "busy_ns": o.busy_ns, "occupancy": o.fraction,
            "replay_ops": o.replay_ops, "replay_spans_only": o.replay_spans_only,
        })).collect::<Vec<_>>(),
        "queue_gaps": s.queue_gaps.iter().map(|q| {
            let mut v = json!({"gpu": q.gpu, "queue": q.queue, "ops": q.ops, "gaps": q.gaps.len(),
                               "largest_ns": q.gaps.iter().take(5).collect::<Vec<_>>()});
            for (k, t) in GAP_THRESHOLDS {
                v[*k] = json!(q.over(*t));
            }
            v
        }).collect::<Vec<_>>(),
    });
    doc["idle_gaps"] = s
        .idle_gaps
        .iter()
        .map(|g| {
            json!({
                "gpu": g.gpu, "start_ns": g.start_ns, "end_ns": g.end_ns, "duration_ns": g.end_ns - g.start_ns,
                "in_flight": g.in_flight.iter().map(|f| json!({"api": f.api, "calls": f.calls, "overlap_ns": f.overlap_ns})).collect::<Vec<_>>(),
            })
        })
        .collect();
}
