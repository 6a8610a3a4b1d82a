//! The aggregate functions the summary's scans register on their connections: they group by
//! hashing (SQLite's own GROUP BY sorts its input), and hand back JSON that [`parse_groups`]
//! reads.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::Connection;
use serde_json::{json, Value};

use super::data::{Stat, LATENCY_BUCKETS};

/// FxHash (rustc's): the default SipHash costs more than the rest of a step.
#[derive(Default, Clone, Copy)]
pub(super) struct Fx(u64);
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
pub(super) type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

pub(super) fn int(ctx: &Context<'_>, i: usize) -> Option<i64> {
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

/// rtl_quantiles(v): exact percentiles of v and a histogram over [`LATENCY_BUCKETS`] (of every
/// value). Result: JSON {count,min,mean,p50,p90,p99,max,sampled_every,histogram}.
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
    /// Values per bucket: [i] counts values in [LATENCY_BUCKETS[i], LATENCY_BUCKETS[i + 1]).
    buckets: Vec<u64>,
}

impl Aggregate<QAcc, String> for Quantiles {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<QAcc> {
        Ok(QAcc { stride: 1, min: i64::MAX, max: i64::MIN, buckets: vec![0; LATENCY_BUCKETS.len()], ..Default::default() })
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
            acc.buckets[LATENCY_BUCKETS.partition_point(|&lo| lo <= v).saturating_sub(1)] += 1;
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
                  "p50": p50, "p90": p90, "p99": p99, "max": a.max, "sampled_every": a.stride, "histogram": a.buckets})
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

pub(super) fn register(conn: &Connection) -> Result<()> {
    let f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_aggregate_function("rtl_group", 3, f, Group)?;
    conn.create_aggregate_function("rtl_group", 5, f, Group)?;
    conn.create_aggregate_function("rtl_quantiles", 1, f, Quantiles)?;
    conn.create_aggregate_function("rtl_distinct", 1, f, Distinct)?;
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
