//! Per-group duration samples for percentiles (`rtl_samples(k1, k2, value [, tag])`, grouped by (k1, k2)): per API name,
//! kernel, roctx range text or kernel's launch latency, the values are kept (exactly up to
//! [`GROUP_KEEP`] per group, then every 2nd, 4th, ... value in row order) and handed to Rust
//! through a shared sink instead of as JSON, so that groups with the same shown name (two string
//! ids that demangle alike) can be merged before the percentiles are taken.

use std::sync::{Arc, Mutex};

use anyhow::Result;
use rusqlite::functions::{Aggregate, Context, FunctionFlags};
use rusqlite::Connection;

use super::sql_functions::{int, FxMap};

/// Values kept per group before thinning: 2^16 (512 KiB). A trace of N rows holds at most
/// min(N, groups x 2^16) values at once.
pub const GROUP_KEEP: usize = 1 << 16;

/// The values of one group.
#[derive(Debug, Clone, Default)]
pub struct Kept {
    pub values: Vec<i64>,
    /// 1: every value kept; k: every k-th.
    pub stride: u64,
    pub seen: u64,
    /// Sum, min and max over every value (kept or not).
    pub sum: i64,
    pub min: i64,
    pub max: i64,
    /// The `tag` of the group's first row (roctx ranges: the id of the call that opened it).
    pub first_tag: Option<i64>,
}

impl Kept {
    fn push(&mut self, v: i64) {
        if self.stride == 0 {
            self.stride = 1;
        }
        if self.seen == 0 {
            (self.min, self.max) = (v, v);
        } else {
            (self.min, self.max) = (self.min.min(v), self.max.max(v));
        }
        self.sum = self.sum.saturating_add(v);
        if self.seen.is_multiple_of(self.stride) {
            self.values.push(v);
            if self.values.len() >= GROUP_KEEP {
                let mut i = 0;
                self.values.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.seen += 1;
    }

    /// Adds another group's values (two string ids shown under one name).
    pub fn merge(&mut self, o: Kept) {
        if o.seen == 0 {
            return;
        }
        if self.seen == 0 {
            *self = o;
            return;
        }
        (self.min, self.max) = (self.min.min(o.min), self.max.max(o.max));
        self.sum = self.sum.saturating_add(o.sum);
        self.values.extend(o.values);
        self.stride = self.stride.max(o.stride).max(1);
        self.seen += o.seen;
        if self.first_tag.is_none() {
            self.first_tag = o.first_tag;
        }
    }

    /// Nearest-rank percentiles of the kept values.
    pub fn percentiles(mut self) -> Percentiles {
        let n = self.values.len();
        if n == 0 {
            return Percentiles::default();
        }
        let v = &mut self.values;
        let mut pick = |p: f64| -> i64 {
            let k = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            *v.select_nth_unstable(k).1
        };
        let (p50, p90, p99) = (pick(0.50), pick(0.90), pick(0.99));
        Percentiles { p50, p90, p99, sampled_every: self.stride.max(1) as i64 }
    }
}

/// p50 / p90 / p99 (nearest rank) of a group; `sampled_every` 1 when over every value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Percentiles {
    pub p50: i64,
    pub p90: i64,
    pub p99: i64,
    pub sampled_every: i64,
}

/// Where an `rtl_samples` function leaves its groups when its query finishes.
pub(super) type Sink = Arc<Mutex<FxMap<(i64, i64), Kept>>>;

struct Samples(Sink);

impl Aggregate<FxMap<(i64, i64), Kept>, i64> for Samples {
    fn init(&self, _: &mut Context<'_>) -> rusqlite::Result<FxMap<(i64, i64), Kept>> {
        Ok(FxMap::default())
    }
    fn step(&self, ctx: &mut Context<'_>, acc: &mut FxMap<(i64, i64), Kept>) -> rusqlite::Result<()> {
        // A NULL k1 or value: the row is not of this group set (iif(..., k1, NULL)).
        let (Some(k1), Some(v)) = (int(ctx, 0), int(ctx, 2)) else {
            return Ok(());
        };
        let g = acc.entry((k1, int(ctx, 1).unwrap_or(0))).or_default();
        if g.seen == 0 && ctx.len() >= 4 {
            g.first_tag = int(ctx, 3);
        }
        g.push(v);
        Ok(())
    }
    fn finalize(&self, _: &mut Context<'_>, acc: Option<FxMap<(i64, i64), Kept>>) -> rusqlite::Result<i64> {
        let acc = acc.unwrap_or_default();
        let n = acc.len() as i64;
        *self.0.lock().unwrap() = acc;
        Ok(n)
    }
}

/// Registers `name(k1, k2, value [, tag])` on `conn`; its groups land in the returned sink when the
/// query that calls it finishes.
pub(super) fn register_samples(conn: &Connection, name: &str) -> Result<Sink> {
    let sink: Sink = Arc::default();
    let f = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_aggregate_function(name, 3, f, Samples(sink.clone()))?;
    conn.create_aggregate_function(name, 4, f, Samples(sink.clone()))?;
    Ok(sink)
}

/// Takes the groups out of a sink.
pub(super) fn take(sink: &Sink) -> FxMap<(i64, i64), Kept> {
    std::mem::take(&mut *sink.lock().unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_and_thinning() {
        let mut k = Kept::default();
        for v in 1..=100 {
            k.push(v);
        }
        let p = k.clone().percentiles();
        assert_eq!((p.p50, p.p90, p.p99, p.sampled_every), (50, 90, 99, 1));
        let mut big = Kept::default();
        for v in 0..(GROUP_KEEP as i64 * 2 - 10) {
            big.push(v);
        }
        assert!(big.values.len() <= GROUP_KEEP);
        assert_eq!(big.stride, 2);
        let p = big.percentiles();
        assert_eq!(p.sampled_every, 2);
        assert!((p.p50 - GROUP_KEEP as i64).abs() <= 16, "{p:?}");
    }
}
