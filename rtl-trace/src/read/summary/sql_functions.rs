//! The aggregate functions the summary's scans register on their connections: they group by
//! hashing (SQLite's own GROUP BY sorts its input), and hand back JSON that [`parse_groups`]
//! reads.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{json, Value};

use super::data::{Stat, TIMELINE_BINS};

/// FxHash (rustc's): the default SipHash costs more than the rest of a step.
#[derive(Default, Clone, Copy)]
struct Fx(u64);
impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(*b as u64);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, i: i64) {
        self.write_u64(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

fn int(ctx: &Context<'_>, i: usize) -> Option<i64> {
    match ctx.get_raw(i) {
        ValueRef::Integer(v) => Some(v),
        ValueRef::Real(f) => Some(f as i64),
        _ => None,
    }
}

/// rtl_group(k1, k2, v [, lo, hi]): per (k1, k2): count, sum/min/max of v, min lo, max hi.
/// Result: JSON [[k1, k2, count, sum, min, max, lo, hi], ...].
struct Group;
impl Aggregate<FxMap<(i64, i64), Stat>, String> for Group {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<FxMap<(i64, i64), Stat>> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut FxMap<(i64, i64), Stat>) -> rusqlite::Result<()> {
        let k1 = int(ctx, 0).unwrap_or(i64::MIN);
        let k2 = int(ctx, 1).unwrap_or(i64::MIN);
        let v = int(ctx, 2).unwrap_or(0);
        let (lo, hi) = if ctx.len() >= 5 { (int(ctx, 3).unwrap_or(0), int(ctx, 4).unwrap_or(0)) } else { (0, 0) };
        acc.entry((k1, k2)).or_default().add(v, lo, hi);
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<FxMap<(i64, i64), Stat>>) -> rusqlite::Result<String> {
        let rows: Vec<Value> =
            acc.unwrap_or_default().into_iter().map(|((a, b), s)| json!([a, b, s.count, s.sum, s.min, s.max, s.lo, s.hi])).collect();
        Ok(Value::Array(rows).to_string())
    }
}

/// rtl_quantiles(v): exact percentiles of v. Result: JSON {count,min,mean,p50,p90,p99,max}.
struct Quantiles;

/// Values kept for exact percentiles; past this the kept set is thinned to every 2nd, 4th, ...
/// value (deterministic, in row order) and the percentiles are marked sampled. 2^25 values:
/// 256 MiB at most.
const QUANTILE_KEEP: usize = 1 << 25;

#[derive(Default)]
struct QAcc {
    kept: Vec<i64>,
    stride: u64,
    seen: u64,
    sum: i128,
    min: i64,
    max: i64,
}

impl Aggregate<QAcc, String> for Quantiles {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<QAcc> {
        Ok(QAcc { stride: 1, min: i64::MAX, max: i64::MIN, ..Default::default() })
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut QAcc) -> rusqlite::Result<()> {
        if let Some(v) = int(ctx, 0) {
            if acc.seen.is_multiple_of(acc.stride) {
                acc.kept.push(v);
                if acc.kept.len() >= QUANTILE_KEEP {
                    let mut i = 0;
                    acc.kept.retain(|_| {
                        i += 1;
                        i % 2 == 1
                    });
                    acc.stride *= 2;
                }
            }
            acc.seen += 1;
            acc.sum += v as i128;
            acc.min = acc.min.min(v);
            acc.max = acc.max.max(v);
        }
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<QAcc>) -> rusqlite::Result<String> {
        let Some(mut a) = acc.filter(|a| a.seen > 0) else {
            return Ok("null".into());
        };
        let v = &mut a.kept;
        let n = v.len();
        let mut pick = |p: f64| -> i64 {
            // nearest-rank percentile
            let k = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            *v.select_nth_unstable(k).1
        };
        let (p50, p90, p99) = (pick(0.50), pick(0.90), pick(0.99));
        Ok(json!({"count": a.seen, "min": a.min, "mean": (a.sum / a.seen as i128) as i64,
                  "p50": p50, "p90": p90, "p99": p99, "max": a.max, "sampled_every": a.stride})
        .to_string())
    }
}

/// rtl_distinct(x): number of distinct non-negative integers (a bitmap; for op ids).
struct Distinct;
impl Aggregate<Vec<u64>, i64> for Distinct {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<Vec<u64>> {
        Ok(Vec::new())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut Vec<u64>) -> rusqlite::Result<()> {
        if let Some(x) = int(ctx, 0).filter(|&x| x >= 0) {
            let (w, b) = ((x / 64) as usize, x % 64);
            if acc.len() <= w {
                acc.resize(w + 1, 0);
            }
            acc[w] |= 1 << b;
        }
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<Vec<u64>>) -> rusqlite::Result<i64> {
        Ok(acc.unwrap_or_default().iter().map(|w| w.count_ones() as i64).sum())
    }
}

/// rtl_busy(gpu, queue, start, end): per device the union of op intervals and a timeline, per
/// queue the union too. Ops with gpu < 0 (markers) are ignored. Result: JSON.
struct Busy;
type BusyAcc = FxMap<i64, Vec<(i64, i64, i64)>>;
impl Aggregate<BusyAcc, String> for Busy {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<BusyAcc> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut BusyAcc) -> rusqlite::Result<()> {
        let gpu = int(ctx, 0).unwrap_or(-1);
        if gpu < 0 {
            return Ok(());
        }
        let (q, s, e) = (int(ctx, 1).unwrap_or(0), int(ctx, 2).unwrap_or(0), int(ctx, 3).unwrap_or(0));
        acc.entry(gpu).or_default().push((s, e.max(s), q));
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<BusyAcc>) -> rusqlite::Result<String> {
        let acc = acc.unwrap_or_default();
        let first = acc.values().flatten().map(|x| x.0).min().unwrap_or(0);
        let last = acc.values().flatten().map(|x| x.1).max().unwrap_or(0);
        let wall = (last - first).max(1);
        let bin = ((wall + TIMELINE_BINS as i64 - 1) / TIMELINE_BINS as i64).max(1);
        let mut devices = vec![];
        let mut gpus: Vec<_> = acc.into_iter().collect();
        gpus.sort_by_key(|g| g.0);
        for (gpu, mut iv) in gpus {
            iv.sort_unstable();
            let mut union = 0i64;
            let mut run_end = i64::MIN;
            let mut bins = vec![0f64; TIMELINE_BINS];
            let mut queues: BTreeMap<i64, (i64, i64, i64)> = BTreeMap::new(); // q -> (ops, union, run_end)
            let mut add_bins = |s: i64, e: i64| {
                // spread [s, e) over the bins it covers (integer ns: always progresses)
                let mut t = s;
                while t < e {
                    let b = (((t - first) / bin) as usize).min(TIMELINE_BINS - 1);
                    let bin_end = if b == TIMELINE_BINS - 1 { e } else { (first + (b as i64 + 1) * bin).min(e) };
                    bins[b] += (bin_end - t) as f64;
                    t = bin_end;
                }
            };
            let n = iv.len() as i64;
            for &(s, e, q) in &iv {
                let from = s.max(run_end);
                if e > from {
                    union += e - from;
                    add_bins(from, e);
                }
                run_end = run_end.max(e);
                let qe = queues.entry(q).or_insert((0, 0, i64::MIN));
                qe.0 += 1;
                let from = s.max(qe.2);
                if e > from {
                    qe.1 += e - from;
                }
                qe.2 = qe.2.max(e);
            }
            let timeline: Vec<f64> = bins.iter().map(|b| (b / bin as f64).clamp(0.0, 1.0)).collect();
            devices.push(json!({
                "gpu": gpu, "ops": n, "busy_ns": union, "wall_ns": last - first,
                "queues": queues.iter().map(|(q, v)| json!([q, v.0, v.1])).collect::<Vec<_>>(),
                "timeline": timeline,
            }));
        }
        Ok(json!({"first": first, "last": last, "devices": devices}).to_string())
    }
}

pub(super) fn register(conn: &Connection) -> Result<()> {
    let f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_aggregate_function("rtl_group", 3, f, Group)?;
    conn.create_aggregate_function("rtl_group", 5, f, Group)?;
    conn.create_aggregate_function("rtl_quantiles", 1, f, Quantiles)?;
    conn.create_aggregate_function("rtl_distinct", 1, f, Distinct)?;
    conn.create_aggregate_function("rtl_busy", 4, f, Busy)?;
    Ok(())
}

/// Reads `rtl_group`'s result (`[[k1, k2, count, sum, min, max, lo, hi], ...]`; NULL: no
/// rows): the one parser of that shape.
pub(super) fn parse_groups(json: Option<&str>) -> Result<Vec<(i64, i64, Stat)>> {
    let v: Value = serde_json::from_str(json.unwrap_or("[]"))?;
    let mut out = vec![];
    for row in v.as_array().cloned().unwrap_or_default() {
        let g = |i: usize| row[i].as_i64().unwrap_or(0);
        out.push((g(0), g(1), Stat { count: g(2), sum: g(3), min: g(4), max: g(5), lo: g(6), hi: g(7) }));
    }
    Ok(out)
}

/// Runs a query whose one value is an `rtl_group(...)` and parses it.
pub(super) fn groups(conn: &Connection, sql: &str) -> Result<Vec<(i64, i64, Stat)>> {
    let s: Option<String> = conn.query_row(sql, [], |r| r.get(0))?;
    parse_groups(s.as_deref())
}
