//! `summary --html`: one self-contained page (inline CSS and SVG, no script, no network) with a
//! GPU-busy timeline per device and per stream, the top-kernel bar chart, the flame graph of GPU
//! time by launch site (traces with stacks), plus the summary tables. Tooltips (SVG `<title>`)
//! on every bar, timeline bin and frame.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use super::data::Summary;
use super::html_sections as sec;
use super::text::dur;

pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        s.chars().take(n - 1).collect::<String>() + "…"
    }
}

const PALETTE: &[&str] = &["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#ec4899", "#14b8a6", "#f97316"];

fn timeline_svg(s: &Summary) -> String {
    let (w, lane_h, gap, left) = (1000.0, 46.0, 14.0, 90.0);
    let n = s.busy.len().max(1) as f64;
    let h = n * (lane_h + gap) + 30.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {h}" width="100%" role="img" aria-label="GPU busy timeline">"#,
        w + left + 10.0
    );
    for (i, d) in s.busy.iter().enumerate() {
        let y0 = i as f64 * (lane_h + gap) + 5.0;
        let color = PALETTE[i % PALETTE.len()];
        let _ = write!(o, r#"<text x="0" y="{}" class="lbl">GPU {}</text>"#, y0 + lane_h / 2.0 - 2.0, d.gpu);
        let _ = write!(o, r#"<text x="0" y="{}" class="sub">{:.1}% busy</text>"#, y0 + lane_h / 2.0 + 12.0, d.busy_pct);
        let name = format!("GPU {}", d.gpu);
        let _ = write!(
            o,
            r##"<g class="device" data-gpu="{}"><title>GPU {}: {} busy of {}</title><rect x="{left}" y="{y0}" width="{w}" height="{lane_h}" fill="#f3f4f6"/></g>"##,
            d.gpu,
            d.gpu,
            esc(&dur(d.busy_ns)),
            esc(&dur(d.wall_ns))
        );
        super::html_charts::bins(&mut o, s, &name, &d.timeline, (left, y0, w, lane_h), color);
    }
    let y = n * (lane_h + gap) + 18.0;
    let span = s.gpu_last_ns - s.gpu_first_ns;
    for k in 0..=4 {
        let x = left + w * k as f64 / 4.0;
        let anchor = match k {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let _ = write!(o, r#"<text x="{x}" y="{y}" class="sub" text-anchor="{anchor}">{}</text>"#, esc(&dur(span * k / 4)));
    }
    o.push_str("</svg>");
    o
}

fn kernels_svg(s: &Summary) -> String {
    let rows = &s.ops;
    let (bar_h, gap, label_w, w) = (20.0, 6.0, 420.0, 560.0);
    let h = rows.len().max(1) as f64 * (bar_h + gap) + 10.0;
    let max = rows.iter().map(|r| r.stat.sum).max().unwrap_or(1).max(1) as f64;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {h}" width="100%" role="img" aria-label="Top kernels by total GPU time">"#,
        label_w + w + 150.0
    );
    for (i, r) in rows.iter().enumerate() {
        let y = i as f64 * (bar_h + gap) + 5.0;
        let bw = (r.stat.sum as f64 / max * w).max(1.0);
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" class="lbl" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y + bar_h * 0.72,
            esc(&sec::elide_middle(&r.name, 60))
        );
        let _ = write!(
            o,
            r##"<rect x="{label_w}" y="{y}" width="{bw:.1}" height="{bar_h}" fill="#3b82f6"><title>{}: {} calls, {} total, {:.1}% of GPU time</title></rect>"##,
            esc(&r.name),
            r.stat.count,
            esc(&dur(r.stat.sum)),
            r.pct_gpu_time
        );
        let _ = write!(
            o,
            r#"<text x="{}" y="{}" class="sub">{} ({:.1}%)</text>"#,
            label_w + bw + 6.0,
            y + bar_h * 0.72,
            esc(&dur(r.stat.sum)),
            r.pct_gpu_time
        );
    }
    o.push_str("</svg>");
    o
}

/// Renders the report page.
pub fn render(s: &Summary) -> String {
    let mut o = String::new();
    o.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>rtl-ebpf summary</title><style>\n");
    o.push_str(
        "body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#111827;max-width:1200px}\
         h1{font-size:20px}h2{font-size:16px;margin-top:28px}table{border-collapse:collapse;font-size:13px}\
         td,th{padding:3px 10px;border-bottom:1px solid #e5e7eb;text-align:right}td:first-child,th:first-child{text-align:left}\
         .lbl{font-size:12px;fill:#111827}.sub{font-size:11px;fill:#6b7280}.meta{color:#6b7280;font-size:13px}\
         td.name{text-align:left;font-family:ui-monospace,monospace;font-size:12px}.hdr th{text-align:left;color:#6b7280;font-weight:normal}.hdr td{text-align:left}\
         .warn{color:#b91c1c;font-weight:600}.fl{font-size:11px;fill:#111827;pointer-events:none}\n",
    );
    o.push_str("</style></head><body>\n");
    let _ = write!(o, "<h1>rtl-ebpf trace summary</h1><p class=\"meta\">{}<br>span {} &middot; {} API calls &middot; {} GPU ops ({} GPU time) &middot; {} roctx markers</p>",
        esc(&s.source), esc(&dur(s.last_ns - s.first_ns)), s.api_calls, s.gpu_ops, esc(&dur(s.gpu_time_ns)), s.markers);
    o.push_str(&sec::header(s));
    for line in &s.incomplete {
        let _ = write!(o, "<p class=\"warn\">{}</p>", esc(line));
    }
    o.push_str(&sec::losses_up_front(s));
    o.push_str("<h2>GPU busy over time</h2><p class=\"meta\">Fraction of each interval in which the device ran at least one op (time from the first GPU op).</p>");
    if s.busy.is_empty() {
        o.push_str("<p>No GPU ops in this trace.</p>");
    } else {
        o.push_str(&timeline_svg(s));
    }
    if !s.stream_lanes.is_empty() {
        o.push_str("<h2 id=\"streams\">GPU busy per stream</h2><p class=\"meta\">One lane per GPU, process and stream (the launching call's stream argument; a hardware queue where the stream is not known).");
        if s.stream_lanes_total > s.stream_lanes.len() {
            let _ = write!(o, " The {} busiest of {} lanes are shown.", s.stream_lanes.len(), s.stream_lanes_total);
        }
        o.push_str("</p>");
        o.push_str(&super::html_charts::stream_lanes_svg(s));
    }
    o.push_str("<h2>Top kernels by total GPU time</h2>");
    if s.ops.is_empty() {
        o.push_str("<p>No GPU ops in this trace.</p>");
    } else {
        o.push_str(&kernels_svg(s));
        o.push_str(&sec::kernels_table(s));
    }
    // Tables.
    o.push_str("<h2>GPU busy per device and queue</h2><table><tr><th>device / queue</th><th>ops</th><th>busy</th><th>busy %</th></tr>");
    for d in &s.busy {
        let _ = write!(
            o,
            "<tr><td><b>GPU {}</b></td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            d.gpu,
            d.ops,
            esc(&dur(d.busy_ns)),
            d.busy_pct
        );
        for q in &d.queues {
            let _ = write!(
                o,
                "<tr><td>&nbsp;&nbsp;queue {}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
                q.queue,
                q.ops,
                esc(&dur(q.busy_ns)),
                q.busy_pct
            );
        }
    }
    o.push_str("</table>");
    o.push_str(&sec::occupancy(s));
    o.push_str(&sec::idle_gaps(s));
    if s.apis.is_empty() {
        o.push_str("<h2>Top APIs</h2><p>No API calls in this trace.</p>");
    } else {
        o.push_str("<h2>Top APIs</h2><table><tr><th>api</th><th>calls</th><th>total</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>errors</th><th>unclosed</th></tr>");
        for a in &s.apis {
            let mean = if a.stat.count > 0 { a.stat.sum / a.stat.count } else { 0 };
            let _ = write!(
                o,
                "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                sec::name_cell(&a.name, 60),
                a.stat.count,
                esc(&dur(a.stat.sum)),
                esc(&dur(mean)),
                esc(&dur(a.pct.p50)),
                esc(&dur(a.pct.p90)),
                esc(&dur(a.pct.p99)),
                esc(&dur(a.stat.max)),
                a.errors,
                a.unclosed
            );
        }
        o.push_str("</table>");
    }
    if let Some(root) = &s.flame {
        let _ = write!(
            o,
            "<h2 id=\"flame\">GPU time by launch site</h2><p class=\"meta\">Flame graph: each GPU op's time under the stack of the call that launched it (a replayed graph node: the call that created the node during capture), {} of {} GPU time; the callers below, the callees above. Hover a frame for its time.</p>",
            esc(&dur(root.gpu_ns)),
            esc(&dur(s.gpu_time_ns))
        );
        o.push_str(&super::html_charts::flame_svg(root));
    }
    o.push_str(&sec::ranges(s));
    o.push_str("<h2>Processes</h2><table><tr><th>pid</th><th>API calls</th><th>API time</th><th>GPU ops</th><th>GPU time</th><th>GPUs</th><th>command</th></tr>");
    for p in &s.processes {
        let cmd = p.cmdline.clone().filter(|c| !c.is_empty()).or_else(|| p.exe.clone()).unwrap_or_default();
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td style=\"text-align:left\">{}</td></tr>",
            p.pid,
            p.api.count,
            esc(&dur(p.api.sum)),
            p.gpu_ops,
            esc(&dur(p.gpu_time_ns)),
            if p.gpus.is_empty() { "-".to_string() } else { p.gpus.iter().map(|g| g.0.to_string()).collect::<Vec<_>>().join(", ") },
            esc(&clip(&cmd, 100))
        );
    }
    o.push_str("</table>");
    o.push_str(&sec::latency(s));
    let _ = write!(
        o,
        "<h2>Lost or incomplete data</h2><p>GPU ops without an API link: {} &middot; unclosed API calls: {} &middot; API errors: {}",
        s.unlinked_gpu_ops, s.unclosed_apis, s.api_errors
    );
    for (k, v) in &s.dropped {
        let _ = write!(o, " &middot; {}: {}", esc(k), esc(v));
    }
    o.push_str("</p></body></html>\n");
    o
}

/// Writes the report page to `path`.
/// Writes the report to `path` (never over the trace `db`; see [`crate::read::open::OutFile`]).
pub fn write_report(s: &Summary, db: &Path, path: &Path) -> Result<()> {
    use std::io::Write as _;
    let (mut f, out) = crate::read::open::OutFile::create(&[db], path)?;
    f.write_all(render(s).as_bytes()).and_then(|_| f.flush()).map_err(|e| {
        anyhow::anyhow!(crate::error::Fatal::Output(format!("{}: cannot write the HTML report: {e}", crate::term::path(path))))
    })?;
    out.commit()
}
