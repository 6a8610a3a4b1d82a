//! `summary A.db B.db`: two traces side by side (an rtl-ebpf run and a rocprofv3 run, before and
//! after a change): per kernel / op and per API the count and total time of each, and B - A;
//! GPU busy per device of each. Rows are matched by name (and op type); a name in one trace only
//! shows `-` for the other. Sorted by the larger total of the two.

use std::collections::BTreeMap;
use std::io::Write;

use anyhow::Result;
use serde_json::{json, Value};

use super::data::Summary;
use super::text::{clip, dur, table};
use crate::term::escape;

/// One name's (count, total ns) in A and in B.
#[derive(Debug, Clone, Default)]
pub struct Pair {
    pub name: String,
    pub a: Option<(i64, i64)>,
    pub b: Option<(i64, i64)>,
}

impl Pair {
    fn total(x: Option<(i64, i64)>) -> i64 {
        x.map_or(0, |v| v.1)
    }
    /// B's total - A's.
    pub fn diff(&self) -> i64 {
        Self::total(self.b) - Self::total(self.a)
    }
    fn key(&self) -> i64 {
        Self::total(self.a).max(Self::total(self.b))
    }
}

fn pairs(a: impl Iterator<Item = (String, i64, i64)>, b: impl Iterator<Item = (String, i64, i64)>) -> Vec<Pair> {
    let mut m: BTreeMap<String, Pair> = BTreeMap::new();
    for (n, c, t) in a {
        let p = m.entry(n.clone()).or_insert_with(|| Pair { name: n, ..Default::default() });
        let v = p.a.get_or_insert((0, 0));
        (v.0, v.1) = (v.0 + c, v.1 + t);
    }
    for (n, c, t) in b {
        let p = m.entry(n.clone()).or_insert_with(|| Pair { name: n, ..Default::default() });
        let v = p.b.get_or_insert((0, 0));
        (v.0, v.1) = (v.0 + c, v.1 + t);
    }
    let mut v: Vec<Pair> = m.into_values().collect();
    v.sort_by(|x, y| y.key().cmp(&x.key()).then(x.name.cmp(&y.name)));
    v
}

/// The kernels / ops (named `name [op type]` when the type is not a kernel's) of both.
pub fn kernel_pairs(a: &Summary, b: &Summary) -> Vec<Pair> {
    let rows = |s: &Summary| -> Vec<(String, i64, i64)> {
        s.ops
            .iter()
            .map(|o| {
                let n = if o.op_type == "KernelExecution" || o.op_type == o.name {
                    o.name.clone()
                } else {
                    format!("{} [{}]", o.name, o.op_type)
                };
                (n, o.stat.count, o.stat.sum)
            })
            .collect()
    };
    pairs(rows(a).into_iter(), rows(b).into_iter())
}

/// The APIs of both.
pub fn api_pairs(a: &Summary, b: &Summary) -> Vec<Pair> {
    let rows = |s: &Summary| -> Vec<(String, i64, i64)> { s.all_apis.iter().map(|(n, (st, _))| (n.clone(), st.count, st.sum)).collect() };
    pairs(rows(a).into_iter(), rows(b).into_iter())
}

fn pct_change(p: &Pair) -> String {
    match (p.a, p.b) {
        (Some(a), Some(_)) if a.1 > 0 => format!("{:+.1}%", p.diff() as f64 * 100.0 / a.1 as f64),
        _ => "-".into(),
    }
}

fn cells(p: &Pair, width: usize) -> Vec<String> {
    let c = |x: Option<(i64, i64)>, f: &dyn Fn((i64, i64)) -> String| x.map_or("-".to_string(), f);
    vec![
        clip(&escape(&p.name), width),
        c(p.a, &|v| v.0.to_string()),
        c(p.b, &|v| v.0.to_string()),
        c(p.a, &|v| dur(v.1)),
        c(p.b, &|v| dur(v.1)),
        dur(p.diff()),
        pct_change(p),
    ]
}

/// The side-by-side tables (at most `top` rows each, 0: all).
pub fn write_compare(a: &Summary, b: &Summary, top: usize, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "Comparing A = {}", escape(&a.source))?;
    writeln!(out, "      and B = {}", escape(&b.source))?;
    for (tag, s) in [("A", a), ("B", b)] {
        let h = &s.header;
        let src = s.metadata.iter().find(|(k, _)| k == "source_format").map_or("rtl-ebpf", |(_, v)| v.as_str());
        writeln!(
            out,
            "  {tag}: {} | host {} | {} API calls | {} GPU ops ({} GPU time) | span {}",
            escape(src),
            escape(h.host.as_deref().unwrap_or("?")),
            s.api_calls,
            s.gpu_ops,
            dur(s.gpu_time_ns),
            dur(s.last_ns - s.first_ns)
        )?;
    }
    writeln!(out)?;
    let show = |v: Vec<Pair>| -> (Vec<Pair>, usize) {
        let n = v.len();
        (if top > 0 { v.into_iter().take(top).collect() } else { v }, n)
    };
    for (title, head, (rows, n)) in
        [("GPU kernels and ops", "kernel / op", show(kernel_pairs(a, b))), ("APIs", "api", show(api_pairs(a, b)))]
    {
        let left = if rows.len() < n { format!(" (top {} of {n}; --top 0 shows all)", rows.len()) } else { String::new() };
        writeln!(out, "{title}: A vs B, by the larger total{left}")?;
        if rows.is_empty() {
            writeln!(out, "  (none in either)")?;
        } else {
            let r: Vec<Vec<String>> = rows.iter().map(|p| cells(p, 60)).collect();
            table(out, &[head, "A calls", "B calls", "A total", "B total", "B - A", "change"], &r)?;
        }
        writeln!(out)?;
    }
    writeln!(out, "GPU busy: A vs B (each over its own GPU span)")?;
    let mut gpus: Vec<i64> = a.busy.iter().chain(&b.busy).map(|d| d.gpu).collect();
    gpus.sort();
    gpus.dedup();
    if gpus.is_empty() {
        writeln!(out, "  (no GPU ops in either)")?;
    } else {
        let busy = |s: &Summary, g: i64| s.busy.iter().find(|d| d.gpu == g).map(|d| (d.busy_ns, d.busy_pct));
        let r: Vec<Vec<String>> = gpus
            .iter()
            .map(|&g| {
                let (x, y) = (busy(a, g), busy(b, g));
                vec![
                    format!("GPU {g}"),
                    x.map_or("-".into(), |v| dur(v.0)),
                    y.map_or("-".into(), |v| dur(v.0)),
                    x.map_or("-".into(), |v| format!("{:.1}%", v.1)),
                    y.map_or("-".into(), |v| format!("{:.1}%", v.1)),
                    dur(y.map_or(0, |v| v.0) - x.map_or(0, |v| v.0)),
                ]
            })
            .collect();
        table(out, &["device", "A busy", "B busy", "A busy %", "B busy %", "B - A"], &r)?;
    }
    Ok(())
}

fn pairs_json(v: &[Pair]) -> Value {
    let side = |x: Option<(i64, i64)>| x.map(|v| json!({"calls": v.0, "total_ns": v.1}));
    Value::Array(v.iter().map(|p| json!({"name": p.name, "a": side(p.a), "b": side(p.b), "diff_total_ns": p.diff()})).collect())
}

/// `{"a": summary A, "b": summary B, "diff": {"kernels", "apis", "gpu_busy"}}`.
pub fn compare_json(a: &Summary, b: &Summary) -> Value {
    let busy = |s: &Summary| s.busy.iter().map(|d| (d.gpu, d.busy_ns)).collect::<BTreeMap<_, _>>();
    let (ba, bb) = (busy(a), busy(b));
    let mut gpus: Vec<i64> = ba.keys().chain(bb.keys()).copied().collect();
    gpus.sort();
    gpus.dedup();
    json!({
        "a": a.to_json(),
        "b": b.to_json(),
        "diff": {
            "kernels": pairs_json(&kernel_pairs(a, b)),
            "apis": pairs_json(&api_pairs(a, b)),
            "gpu_busy": gpus.iter().map(|g| json!({"gpu": g, "a_busy_ns": ba.get(g), "b_busy_ns": bb.get(g),
                "diff_busy_ns": bb.get(g).copied().unwrap_or(0) - ba.get(g).copied().unwrap_or(0)})).collect::<Vec<_>>(),
        },
    })
}
