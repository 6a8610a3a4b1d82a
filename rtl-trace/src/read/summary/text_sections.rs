//! The terminal sections added for issue 16: the header, roctx / NVTX ranges, occupancy and
//! queue gaps (what `check` tests), the largest idle gaps with the API calls in flight, and
//! launch latency per kernel. Every string from the trace is escaped ([`crate::term`]).

use std::io::Write;

use anyhow::Result;

use super::data::{Summary, LATENCY_BUCKETS};
use super::text::{clip, dur, table};
use crate::term::escape;

/// Lines under "Trace FILE": host, date, version, GPU source, what was traced.
pub(super) fn header(s: &Summary, out: &mut dyn Write) -> Result<()> {
    let h = &s.header;
    let mut parts = vec![];
    if let Some(x) = &h.host {
        parts.push(format!("host {}", escape(x)));
    }
    if let Some(x) = &h.date_utc {
        parts.push(format!("started {x}"));
    }
    if let Some(x) = &h.version {
        parts.push(format!("rtl-ebpf {}", escape(x)));
    }
    if let Some(x) = &h.clock {
        parts.push(format!("clock {}", escape(x)));
    }
    if !parts.is_empty() {
        writeln!(out, "  {}", parts.join(" | "))?;
    }
    if let Some(c) = &h.command {
        writeln!(out, "  traced: {}", clip(&escape(c), 200))?;
    }
    for g in &h.gpu_sources {
        writeln!(out, "  GPU times: {}", escape(g))?;
    }
    Ok(())
}

pub(super) fn ranges(s: &Summary, out: &mut dyn Write) -> Result<()> {
    if s.ranges.is_empty() {
        return Ok(());
    }
    let shown = if s.ranges.len() < s.ranges_total_names {
        format!(" (top {} of {}; --top 0 shows all)", s.ranges.len(), s.ranges_total_names)
    } else {
        String::new()
    };
    writeln!(out, "roctx / NVTX ranges by total time{shown}")?;
    let rows: Vec<Vec<String>> = s
        .ranges
        .iter()
        .map(|r| {
            vec![
                clip(&escape(&r.name), 50),
                r.style.clone(),
                r.count.to_string(),
                dur(r.total),
                dur(r.mean),
                dur(r.pct.p50),
                dur(r.pct.p90),
                dur(r.pct.p99),
                dur(r.min),
                dur(r.max),
                format!("{:.1}%", r.pct_time),
            ]
        })
        .collect();
    table(out, &["range", "style", "count", "total", "mean", "p50", "p90", "p99", "min", "max", "% time"], &rows)?;
    writeln!(out)?;
    Ok(())
}

pub(super) fn occupancy(s: &Summary, out: &mut dyn Write) -> Result<()> {
    if s.occupancy.is_empty() {
        return Ok(());
    }
    writeln!(out, "GPU occupancy and inter-op gaps per queue (window {}; what `rtl-ebpf check` tests)", s.window.name())?;
    let mut rows = vec![];
    for o in &s.occupancy {
        let frac = o.fraction.map_or("-".to_string(), |f| format!("{:.1}%", f * 100.0));
        let win = if o.replay_spans_only { format!("{} (whole-replay spans)", o.window) } else { o.window.to_string() };
        rows.push(vec![
            format!("GPU {}", o.gpu),
            win,
            dur(o.last_ns - o.first_ns),
            dur(o.busy_ns),
            frac,
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        for q in s.queue_gaps.iter().filter(|q| q.gpu == o.gpu) {
            rows.push(vec![
                format!("  queue {}", q.queue),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                q.over(10_000).to_string(),
                q.over(100_000).to_string(),
                q.over(1_000_000).to_string(),
                q.gaps.first().map_or("-".to_string(), |g| dur(*g)),
            ]);
        }
    }
    table(out, &["device / queue", "window", "length", "busy", "occupancy", "gaps>10us", "gaps>100us", "gaps>1ms", "largest gap"], &rows)?;
    writeln!(out)?;
    Ok(())
}

pub(super) fn idle_gaps(s: &Summary, out: &mut dyn Write) -> Result<()> {
    if s.idle_gaps.is_empty() {
        return Ok(());
    }
    writeln!(out, "Largest GPU idle gaps (no op on any queue of the device) and the API calls in flight then")?;
    let rows: Vec<Vec<String>> = s
        .idle_gaps
        .iter()
        .map(|g| {
            let calls = if g.in_flight.is_empty() {
                "(no traced API call)".to_string()
            } else {
                let mut v: Vec<String> =
                    g.in_flight.iter().take(3).map(|f| format!("{} x{} ({})", escape(&f.api), f.calls, dur(f.overlap_ns))).collect();
                if g.in_flight.len() > 3 {
                    v.push(format!("+{} more", g.in_flight.len() - 3));
                }
                v.join(", ")
            };
            vec![format!("GPU {}", g.gpu), dur(g.end_ns - g.start_ns), format!("+{}", dur(g.start_ns - s.first_ns)), calls]
        })
        .collect();
    table(out, &["device", "idle", "at", "in flight"], &rows)?;
    writeln!(out)?;
    Ok(())
}

/// The histogram as one line per non-empty bucket with a bar.
pub(super) fn latency_detail(s: &Summary, out: &mut dyn Write) -> Result<()> {
    let Some(l) = &s.launch_latency else { return Ok(()) };
    let max = l.histogram.iter().copied().max().unwrap_or(0).max(1);
    let label = |i: usize| -> String {
        match (i, LATENCY_BUCKETS.get(i + 1)) {
            (0, _) => "< 0".to_string(),
            (_, Some(hi)) => format!("{} - {}", dur(LATENCY_BUCKETS[i]), dur(*hi)),
            (_, None) => format!(">= {}", dur(LATENCY_BUCKETS[i])),
        }
    };
    let (first, last) = (l.histogram.iter().position(|&n| n > 0), l.histogram.iter().rposition(|&n| n > 0));
    if let (Some(a), Some(b)) = (first, last) {
        writeln!(out, "  histogram (ops per latency bucket):")?;
        for i in a..=b {
            let n = l.histogram[i];
            let line = format!("  {:>21}  {:>8}  {}", label(i), n, "#".repeat(((n * 40 + max - 1) / max) as usize));
            writeln!(out, "{}", line.trim_end())?;
        }
    }
    if !s.kernel_latency.is_empty() {
        writeln!(out)?;
        writeln!(out, "Launch latency per kernel (most ops first)")?;
        let rows: Vec<Vec<String>> = s
            .kernel_latency
            .iter()
            .map(|k| {
                vec![
                    clip(&escape(&k.name), 60),
                    k.count.to_string(),
                    dur(k.min),
                    dur(k.pct.p50),
                    dur(k.pct.p90),
                    dur(k.pct.p99),
                    dur(k.max),
                ]
            })
            .collect();
        table(out, &["kernel / op", "ops", "min", "p50", "p90", "p99", "max"], &rows)?;
    }
    Ok(())
}
