//! `rtl-ebpf check TRACE`: a regression guard for CI. Each threshold ([`thresholds`]) is
//! measured on the trace with the summary's own metrics ([`crate::read::summary`]: occupancy
//! per device in its window, inter-op gaps per queue, API duration mean and p99) and printed
//! against it, pass or FAIL; [`CheckReport::passed`] says whether all passed (the CLI exits
//! [`EXIT_CHECK_FAILED`] otherwise). A threshold with nothing to measure (no GPU ops, an API
//! never called, replays recorded only as whole spans) FAILs: a guard does not pass on data
//! it does not have.

pub mod thresholds;

use std::io::Write;
use std::path::Path;

use anyhow::Result;
use serde_json::{json, Value};

use crate::read::summary::{dur, summary_data_with, DataOptions, Summary};
use crate::term::escape;
pub use thresholds::{GapLimit, Thresholds};

/// The exit code of `check` when a threshold is not met (docs/reading-traces.md).
pub const EXIT_CHECK_FAILED: i32 = 9;

/// One threshold against one measured value.
#[derive(Debug, Clone)]
pub struct CheckRow {
    /// `occupancy`, `gaps > 100.00 us`, `mean`, `p99`.
    pub metric: String,
    /// `GPU 0 (replay)`, `GPU 0 queue 1`, `hipGraphLaunch`.
    pub subject: String,
    /// The measured value (ns for durations, a fraction for occupancy, a count for gaps); None
    /// when there was nothing to measure.
    pub value: Option<f64>,
    pub shown_value: String,
    pub limit: f64,
    pub shown_limit: String,
    pub pass: bool,
    /// Why a value is missing, or what to know about it.
    pub note: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CheckReport {
    pub trace: String,
    pub window: &'static str,
    pub rows: Vec<CheckRow>,
    /// Lost or incomplete data that may bias the metrics.
    pub warnings: Vec<String>,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.rows.iter().all(|r| r.pass)
    }
    pub fn failed(&self) -> usize {
        self.rows.iter().filter(|r| !r.pass).count()
    }
}

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

/// Measures `t` on the summary `s`.
pub fn evaluate(s: &Summary, t: &Thresholds) -> CheckReport {
    let mut rows = vec![];
    let no_ops = s.occupancy.is_empty();
    if let Some(min) = t.min_occupancy {
        let limit = format!(">= {}", pct(min));
        if no_ops {
            rows.push(missing("occupancy", "every GPU", min, limit.clone(), "no GPU ops in this trace"));
        }
        for o in &s.occupancy {
            let subject = format!("GPU {} ({})", o.gpu, o.window);
            if o.replay_spans_only {
                rows.push(missing(
                    "occupancy",
                    &subject,
                    min,
                    limit.clone(),
                    "each graph replay is one op in this trace (HSA capture): the time between its nodes is not recorded; trace with --gpu clr, or RTL_AGENT_HSA_BATCHES=1",
                ));
                continue;
            }
            match o.fraction {
                Some(f) => rows.push(CheckRow {
                    metric: "occupancy".into(),
                    subject,
                    value: Some(f),
                    shown_value: pct(f),
                    limit: min,
                    shown_limit: limit.clone(),
                    pass: f >= min,
                    note: None,
                }),
                None if o.window == "none" => {
                    rows.push(missing("occupancy", &subject, min, limit.clone(), "no graph-launch ops on this GPU (--window replay)"))
                }
                None => rows.push(missing("occupancy", &subject, min, limit.clone(), "the window has no length")),
            }
        }
    }
    for g in &t.max_gaps {
        let metric = format!("gaps > {}", dur(g.over_ns));
        let limit = format!("<= {}", g.max_count);
        if no_ops {
            rows.push(missing(&metric, "every GPU queue", g.max_count as f64, limit.clone(), "no GPU ops in this trace"));
        }
        for q in &s.queue_gaps {
            let n = q.over(g.over_ns);
            let window = s.occupancy.iter().find(|o| o.gpu == q.gpu).map_or("span", |o| o.window);
            rows.push(CheckRow {
                metric: metric.clone(),
                subject: format!("GPU {} queue {}", q.gpu, q.queue),
                value: Some(n as f64),
                shown_value: if n > 0 { format!("{n} (largest {})", dur(q.gaps[0])) } else { "0".into() },
                limit: g.max_count as f64,
                shown_limit: limit.clone(),
                pass: n <= g.max_count,
                note: (window == "none").then(|| "no window on this GPU: no gap counted".to_string()),
            });
        }
    }
    for (what, list) in [("mean", &t.max_mean), ("p99", &t.max_p99)] {
        for (api, limit_ns) in list {
            let limit = format!("<= {}", dur(*limit_ns));
            match s.all_apis.get(api) {
                Some((st, p)) if st.count > 0 => {
                    let v = if what == "mean" { st.mean() } else { p.p99 };
                    rows.push(CheckRow {
                        metric: what.into(),
                        subject: api.clone(),
                        value: Some(v as f64),
                        shown_value: format!("{} ({} calls)", dur(v), st.count),
                        limit: *limit_ns as f64,
                        shown_limit: limit,
                        pass: v <= *limit_ns,
                        note: (what == "p99" && p.sampled_every > 1).then(|| format!("p99 over every {}th call", p.sampled_every)),
                    });
                }
                _ => rows.push(missing(what, api, *limit_ns as f64, limit, "no calls of this API in the trace")),
            }
        }
    }
    let mut warnings: Vec<String> = s.incomplete.clone();
    let zero = |v: &str| v.split(',').all(|x| x.trim().parse::<f64>().is_ok_and(|n| n == 0.0));
    for (k, v) in s.dropped.iter().filter(|(_, v)| !zero(v)) {
        warnings.push(format!("lost data ({k}: {v}): the metrics may miss what was lost"));
    }
    CheckReport { trace: s.source.clone(), window: s.window.name(), rows, warnings }
}

fn missing(metric: &str, subject: &str, limit: f64, shown_limit: String, why: &str) -> CheckRow {
    CheckRow {
        metric: metric.into(),
        subject: subject.into(),
        value: None,
        shown_value: "-".into(),
        limit,
        shown_limit,
        pass: false,
        note: Some(why.into()),
    }
}

/// How `check` reads and reports.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// JSON instead of the table.
    pub json: bool,
    /// Measure only GPU ops linked to traced calls (see `SummaryOptions::linked_only`).
    pub linked_only: bool,
}

/// `rtl-ebpf check`: measures `t` on `db` and writes the report (a table, or JSON).
pub fn check(db: &Path, facts: crate::api_meaning::ApiFacts, t: &Thresholds, o: CheckOptions, out: &mut dyn Write) -> Result<CheckReport> {
    if t.is_empty() {
        return Err(anyhow::anyhow!(crate::error::Fatal::Usage(
            "nothing to check: give --min-occupancy, --max-gaps, --max-mean, --max-p99 or --thresholds FILE".into()
        )));
    }
    let s = summary_data_with(db, facts, &DataOptions { top: 0, window: t.window, linked_only: o.linked_only, report: false })?;
    let r = evaluate(&s, t);
    if o.json {
        serde_json::to_writer_pretty(&mut *out, &r.to_json())?;
        writeln!(out)?;
    } else {
        r.write_text(out)?;
    }
    Ok(r)
}

impl CheckReport {
    pub fn to_json(&self) -> Value {
        json!({
            "trace": self.trace,
            "window": self.window,
            "passed": self.passed(),
            "failed": self.failed(),
            "checks": self.rows.iter().map(|r| json!({
                "metric": r.metric, "subject": r.subject, "value": r.value, "limit": r.limit,
                "shown": format!("{} {}", r.shown_value, r.shown_limit), "pass": r.pass, "note": r.note,
            })).collect::<Vec<_>>(),
            "warnings": self.warnings,
        })
    }

    pub fn write_text(&self, out: &mut dyn Write) -> Result<()> {
        writeln!(out, "Check {} (window {})", escape(&self.trace), self.window)?;
        let w = |f: &dyn Fn(&CheckRow) -> usize, h: &str| self.rows.iter().map(f).max().unwrap_or(0).max(h.len());
        let (wm, ws, wv, wl) = (
            w(&|r| r.metric.chars().count(), "metric"),
            w(&|r| escape(&r.subject).chars().count(), "subject"),
            w(&|r| r.shown_value.chars().count(), "value"),
            w(&|r| r.shown_limit.chars().count(), "threshold"),
        );
        writeln!(out, "  {:wm$}  {:ws$}  {:>wv$}  {:wl$}  result", "metric", "subject", "value", "threshold")?;
        writeln!(out, "  {}  {}  {}  {}  ------", "-".repeat(wm), "-".repeat(ws), "-".repeat(wv), "-".repeat(wl))?;
        for r in &self.rows {
            let line = format!(
                "  {:wm$}  {:ws$}  {:>wv$}  {:wl$}  {}",
                r.metric,
                escape(&r.subject),
                r.shown_value,
                r.shown_limit,
                if r.pass { "pass" } else { "FAIL" }
            );
            writeln!(out, "{}", line.trim_end())?;
            if let Some(n) = &r.note {
                writeln!(out, "      ({})", escape(n))?;
            }
        }
        for w in &self.warnings {
            writeln!(out, "  warning: {}", escape(w))?;
        }
        if self.passed() {
            writeln!(out, "all {} checks passed", self.rows.len())?;
        } else {
            writeln!(out, "{} of {} checks FAILED", self.failed(), self.rows.len())?;
        }
        Ok(())
    }
}
