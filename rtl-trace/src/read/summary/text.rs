//! The summary as terminal tables.

use std::io::Write;

use anyhow::Result;

use super::data::Summary;

/// Human duration: 1.23 s, 4.56 ms, 7.89 us, 12 ns.
pub fn dur(ns: i64) -> String {
    let a = ns.unsigned_abs() as f64;
    let sign = if ns < 0 { "-" } else { "" };
    if a >= 1e9 {
        format!("{sign}{:.2} s", a / 1e9)
    } else if a >= 1e6 {
        format!("{sign}{:.2} ms", a / 1e6)
    } else if a >= 1e3 {
        format!("{sign}{:.2} us", a / 1e3)
    } else {
        format!("{sign}{a} ns")
    }
}

pub(super) fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Left-aligned first column, right-aligned others.
pub(super) fn table(out: &mut dyn Write, head: &[&str], rows: &[Vec<String>]) -> Result<()> {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: &[String], out: &mut dyn Write| -> Result<()> {
        let mut s = String::from("  ");
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if i == 0 || ["command", "in flight", "style", "window"].contains(&head[i]) {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        writeln!(out, "{}", s.trim_end())?;
        Ok(())
    };
    line(&head.iter().map(|h| h.to_string()).collect::<Vec<_>>(), out)?;
    line(&w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>(), out)?;
    for r in rows {
        line(r, out)?;
    }
    Ok(())
}

pub(super) fn write_text(s: &Summary, out: &mut dyn Write) -> Result<()> {
    // Every string from the trace is escaped: names, command lines and paths are another
    // user's text (crate::term).
    use crate::term::escape;
    writeln!(out, "Trace {}", escape(&s.source))?;
    for line in &s.incomplete {
        writeln!(out, "  {line}")?;
    }
    super::text_sections::header(s, out)?;
    writeln!(
        out,
        "  span {} | {} API calls | {} GPU ops ({} GPU time) | {} roctx markers | {} API->op links",
        dur(s.last_ns - s.first_ns),
        s.api_calls,
        s.gpu_ops,
        dur(s.gpu_time_ns),
        s.markers,
        s.links
    )?;
    writeln!(out)?;
    let shown = |n: usize, total: usize| {
        if n < total {
            format!(" (top {n} of {total}; {} left out: --top 0 shows all)", total - n)
        } else {
            String::new()
        }
    };
    writeln!(out, "GPU kernels and ops by total time{}", shown(s.ops.len(), s.ops_total_names))?;
    if s.ops.is_empty() {
        writeln!(out, "  (no GPU ops)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .ops
            .iter()
            .map(|o| {
                vec![
                    clip(&escape(&o.name), 60),
                    o.stat.count.to_string(),
                    dur(o.stat.sum),
                    dur(o.stat.mean()),
                    dur(o.stat.min),
                    dur(o.pct.p50),
                    dur(o.pct.p90),
                    dur(o.pct.p99),
                    dur(o.stat.max),
                    format!("{:.1}%", o.pct_gpu_time),
                ]
            })
            .collect();
        table(out, &["name", "calls", "total", "mean", "min", "p50", "p90", "p99", "max", "% GPU"], &rows)?;
    }
    writeln!(out)?;
    if !s.launch_sites.is_empty() {
        writeln!(
            out,
            "Top launch sites by GPU time (innermost user frame; replayed graph nodes at their capture){}",
            shown(s.launch_sites.len(), s.launch_sites_total)
        )?;
        let rows: Vec<Vec<String>> = s
            .launch_sites
            .iter()
            .map(|l| {
                let file = l.module.rsplit('/').next().unwrap_or("");
                vec![clip(&escape(&l.site), 60), clip(&escape(file), 30), l.ops.to_string(), l.replayed.to_string(), dur(l.gpu_ns)]
            })
            .collect();
        table(out, &["site", "module", "GPU ops", "replayed", "GPU time"], &rows)?;
        writeln!(out)?;
    }
    writeln!(out, "APIs by total time{}", shown(s.apis.len(), s.apis_total_names))?;
    if s.apis.is_empty() {
        writeln!(out, "  (no API calls)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .apis
            .iter()
            .map(|a| {
                vec![
                    clip(&escape(&a.name), 50),
                    a.stat.count.to_string(),
                    dur(a.stat.sum),
                    dur(a.stat.mean()),
                    dur(a.pct.p50),
                    dur(a.pct.p90),
                    dur(a.pct.p99),
                    dur(a.stat.max),
                    a.errors.to_string(),
                    a.unclosed.to_string(),
                ]
            })
            .collect();
        table(out, &["api", "calls", "total", "mean", "p50", "p90", "p99", "max", "errors", "unclosed"], &rows)?;
    }
    writeln!(out)?;
    super::text_sections::ranges(s, out)?;
    writeln!(out, "GPU busy (over the GPU span {})", dur(s.gpu_last_ns - s.gpu_first_ns))?;
    if s.busy.is_empty() {
        writeln!(out, "  (no GPU ops)")?;
    } else {
        let mut rows = vec![];
        for d in &s.busy {
            rows.push(vec![format!("GPU {}", d.gpu), d.ops.to_string(), dur(d.busy_ns), format!("{:.1}%", d.busy_pct)]);
            for q in &d.queues {
                rows.push(vec![format!("  queue {}", q.queue), q.ops.to_string(), dur(q.busy_ns), format!("{:.1}%", q.busy_pct)]);
            }
        }
        table(out, &["device / queue", "ops", "busy", "busy %"], &rows)?;
    }
    writeln!(out)?;
    super::text_sections::occupancy(s, out)?;
    super::text_sections::idle_gaps(s, out)?;
    writeln!(out, "Processes")?;
    if s.processes.is_empty() {
        writeln!(out, "  (none)")?;
    } else {
        let rows: Vec<Vec<String>> = s
            .processes
            .iter()
            .map(|p| {
                let cmd = p.cmdline.clone().filter(|c| !c.is_empty()).or_else(|| p.exe.clone()).unwrap_or_else(|| "(unknown)".into());
                vec![
                    p.pid.to_string(),
                    p.api.count.to_string(),
                    dur(p.api.sum),
                    p.gpu_ops.to_string(),
                    dur(p.gpu_time_ns),
                    if p.gpus.is_empty() { "-".into() } else { p.gpus.iter().map(|g| g.0.to_string()).collect::<Vec<_>>().join(",") },
                    clip(&escape(&cmd), 60),
                ]
            })
            .collect();
        table(out, &["pid", "API calls", "API time", "GPU ops", "GPU time", "GPUs", "command"], &rows)?;
    }
    writeln!(out)?;
    match &s.launch_latency {
        Some(l) => writeln!(
            out,
            "Launch latency (API entry -> GPU start, {} ops): p50 {}  p90 {}  p99 {}  (min {}, mean {}, max {}){}",
            l.count,
            dur(l.p50),
            dur(l.p90),
            dur(l.p99),
            dur(l.min),
            dur(l.mean),
            dur(l.max),
            if l.sampled_every > 1 { format!("; percentiles over every {}th link", l.sampled_every) } else { String::new() }
        )?,
        None => writeln!(out, "Launch latency: no API->op links in this trace")?,
    }
    super::text_sections::latency_detail(s, out)?;
    if !s.gpu_links.is_empty() {
        let by: Vec<String> = s.gpu_links.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(out, "GPU op links (how each op's API call was found): {}", by.join(", "))?;
    }
    writeln!(out)?;
    writeln!(out, "Lost or incomplete data")?;
    writeln!(out, "  GPU ops without an API link: {}", s.unlinked_gpu_ops)?;
    if !s.unlinked_by_publisher.is_empty() {
        let by: Vec<String> = s
            .unlinked_by_publisher
            .iter()
            .map(|(pid, n)| format!("{n} from pid {}", pid.map_or_else(|| "unknown".to_string(), |p| p.to_string())))
            .collect();
        let left_out =
            if s.linked_only { "left out of every table above (--linked-only)" } else { "counted above (--linked-only leaves them out)" };
        writeln!(out, "  GPU ops linked to no traced call, as their publishers sent them: {}; {left_out}", by.join(", "))?;
    }
    writeln!(out, "  API calls never returned (unclosed): {}", s.unclosed_apis)?;
    for (why, n) in &s.unclosed_by_reason {
        writeln!(out, "    {why}: {n}")?;
    }
    if s.profiler_only_apis > 0 {
        writeln!(out, "  API calls seen by the in-process profiler only: {}", s.profiler_only_apis)?;
    }
    writeln!(out, "  API calls that returned an error: {}", s.api_errors)?;
    for e in s.errors.iter().take(10) {
        writeln!(out, "    {} -> {} ({}): {}", escape(&e.api), escape(&e.code_name), e.code, e.count)?;
    }
    if s.errors.len() > 10 {
        writeln!(out, "    ... {} more (see --json)", s.errors.len() - 10)?;
    }
    // Collector counters: the non-zero ones (all of them are in --json).
    let zero = |v: &str| v.split(',').all(|x| x.trim().parse::<f64>().is_ok_and(|n| n == 0.0));
    let nonzero: Vec<_> = s.dropped.iter().filter(|(_, v)| !zero(v)).collect();
    if s.dropped.is_empty() {
        writeln!(out, "  collector loss counters: none recorded in this file")?;
    } else if nonzero.is_empty() {
        writeln!(out, "  collector loss counters: all {} are 0", s.dropped.len())?;
    }
    for (k, v) in nonzero {
        writeln!(out, "  {}: {}", escape(k), escape(v))?;
    }
    Ok(())
}
