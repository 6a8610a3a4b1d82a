//! The report's sections added for issue 16: the header, long names elided in the middle (the
//! full name on hover), percentile columns, roctx / NVTX ranges, occupancy and queue gaps, the
//! largest idle gaps with the API calls in flight, and the launch-latency histogram (SVG) with
//! latency per kernel. No script: tooltips are SVG `<title>` and HTML `title` attributes.

use std::fmt::Write as _;

use super::data::{Summary, LATENCY_BUCKETS};
use super::html::esc;
use super::text::dur;

/// `s` elided in the middle to at most `n` characters (head and tail kept: a kernel's template
/// arguments and its parameter list both say something).
pub(super) fn elide_middle(s: &str, n: usize) -> String {
    let c: Vec<char> = s.chars().collect();
    if c.len() <= n || n < 5 {
        return s.to_string();
    }
    let head = (n - 1) * 2 / 3;
    let tail = n - 1 - head;
    let mut o: String = c[..head].iter().collect();
    o.push('…');
    o.extend(&c[c.len() - tail..]);
    o
}

/// A table cell with a long name elided in the middle and the full name on hover.
pub(super) fn name_cell(s: &str, n: usize) -> String {
    let short = elide_middle(s, n);
    if short == s {
        format!("<td class=\"name\">{}</td>", esc(s))
    } else {
        format!("<td class=\"name\" title=\"{}\">{}</td>", esc(s), esc(&short))
    }
}

pub(super) fn header(s: &Summary) -> String {
    let h = &s.header;
    let mut o = String::new();
    let mut rows: Vec<(&str, String)> = vec![];
    if let Some(x) = &h.host {
        rows.push(("host", x.clone()));
    }
    if let Some(x) = &h.date_utc {
        rows.push(("started", x.clone()));
    }
    if let Some(x) = &h.command {
        rows.push(("traced", x.clone()));
    }
    if let Some(x) = &h.version {
        rows.push(("rtl-ebpf", x.clone()));
    }
    for g in &h.gpu_sources {
        rows.push(("GPU times", g.clone()));
    }
    if rows.is_empty() {
        return o;
    }
    o.push_str("<table class=\"hdr\">");
    for (k, v) in rows {
        let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v.as_str()));
    }
    o.push_str("</table>");
    o
}

/// Non-zero loss counters and lost data, up front (empty when nothing was lost).
pub(super) fn losses_up_front(s: &Summary) -> String {
    let zero = |v: &str| v.split(',').all(|x| x.trim().parse::<f64>().is_ok_and(|n| n == 0.0));
    let mut items: Vec<String> = s.dropped.iter().filter(|(_, v)| !zero(v)).map(|(k, v)| format!("{}: {}", esc(k), esc(v))).collect();
    for (n, what) in [(s.unlinked_gpu_ops, "GPU ops without an API link"), (s.unclosed_apis, "unclosed API calls")] {
        if n > 0 {
            items.push(format!("{what}: {n}"));
        }
    }
    if items.is_empty() {
        return String::new();
    }
    format!("<p class=\"warn\">Lost or incomplete: {}</p>", items.join(" &middot; "))
}

pub(super) fn ranges(s: &Summary) -> String {
    let mut o = String::new();
    if s.ranges.is_empty() {
        return o;
    }
    let _ = write!(
        o,
        "<h2>roctx / NVTX ranges</h2><table><tr><th>range</th><th>style</th><th>count</th><th>total</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>min</th><th>max</th><th>% time</th></tr>"
    );
    for r in &s.ranges {
        let _ = write!(
            o,
            "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            name_cell(&r.name, 60),
            esc(&r.style),
            r.count,
            esc(&dur(r.total)),
            esc(&dur(r.mean)),
            esc(&dur(r.pct.p50)),
            esc(&dur(r.pct.p90)),
            esc(&dur(r.pct.p99)),
            esc(&dur(r.min)),
            esc(&dur(r.max)),
            r.pct_time
        );
    }
    o.push_str("</table>");
    if s.ranges.len() < s.ranges_total_names {
        let _ = write!(o, "<p class=\"meta\">{} of {} ranges shown (--top 0 shows all).</p>", s.ranges.len(), s.ranges_total_names);
    }
    o
}

pub(super) fn occupancy(s: &Summary) -> String {
    let mut o = String::new();
    if s.occupancy.is_empty() {
        return o;
    }
    let _ = write!(
        o,
        "<h2>Occupancy and inter-op gaps</h2><p class=\"meta\">Window {}: per device, graph replay (first to last op of its graph launches) where it had any, else its first to last op. Occupancy: time in the window with at least one op running. Gaps: per queue, between consecutive ops, in the window.</p>\
         <table><tr><th>device / queue</th><th>window</th><th>length</th><th>busy</th><th>occupancy</th><th>gaps &gt; 10 us</th><th>gaps &gt; 100 us</th><th>gaps &gt; 1 ms</th><th>largest gap</th></tr>",
        s.window.name()
    );
    for d in &s.occupancy {
        let frac = d.fraction.map_or("-".to_string(), |f| format!("{:.1}%", f * 100.0));
        let _ = write!(
            o,
            "<tr><td><b>GPU {}</b></td><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td></td><td></td><td></td><td></td></tr>",
            d.gpu,
            d.window,
            if d.replay_spans_only { " (whole-replay spans)" } else { "" },
            esc(&dur(d.last_ns - d.first_ns)),
            esc(&dur(d.busy_ns)),
            frac
        );
        for q in s.queue_gaps.iter().filter(|q| q.gpu == d.gpu) {
            let _ = write!(
                o,
                "<tr><td>&nbsp;&nbsp;queue {}</td><td></td><td></td><td></td><td></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                q.queue,
                q.over(10_000),
                q.over(100_000),
                q.over(1_000_000),
                q.gaps.first().map_or("-".to_string(), |g| esc(&dur(*g)))
            );
        }
    }
    o.push_str("</table>");
    o
}

pub(super) fn idle_gaps(s: &Summary) -> String {
    let mut o = String::new();
    if s.idle_gaps.is_empty() {
        return o;
    }
    o.push_str("<h2>Largest GPU idle gaps</h2><p class=\"meta\">No op on any queue of the device; the API calls in flight meanwhile (calls, time overlapping the gap).</p><table><tr><th>device</th><th>idle</th><th>at</th><th style=\"text-align:left\">in flight</th></tr>");
    for g in &s.idle_gaps {
        let calls = if g.in_flight.is_empty() {
            "(no traced API call)".to_string()
        } else {
            g.in_flight
                .iter()
                .take(5)
                .map(|f| format!("{} &times;{} ({})", esc(&f.api), f.calls, esc(&dur(f.overlap_ns))))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let _ = write!(
            o,
            "<tr><td>GPU {}</td><td>{}</td><td>+{}</td><td style=\"text-align:left\">{}</td></tr>",
            g.gpu,
            esc(&dur(g.end_ns - g.start_ns)),
            esc(&dur(g.start_ns - s.first_ns)),
            calls
        );
    }
    o.push_str("</table>");
    o
}

/// The launch-latency histogram as SVG bars, each with its bucket and count on hover.
fn histogram_svg(h: &[i64]) -> String {
    let (Some(a), Some(b)) = (h.iter().position(|&n| n > 0), h.iter().rposition(|&n| n > 0)) else {
        return String::new();
    };
    let max = h.iter().copied().max().unwrap_or(1).max(1) as f64;
    let n = b - a + 1;
    let (bw, gap, hgt, base) = (56.0, 6.0, 140.0, 160.0);
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} 200" width="{}" role="img" aria-label="Launch latency histogram">"#,
        n as f64 * (bw + gap) + 10.0,
        (n as f64 * (bw + gap) + 10.0).min(1100.0)
    );
    for (k, i) in (a..=b).enumerate() {
        let x = 5.0 + k as f64 * (bw + gap);
        let bh = (h[i] as f64 / max * hgt).max(if h[i] > 0 { 1.0 } else { 0.0 });
        let label = match (i, LATENCY_BUCKETS.get(i + 1)) {
            (0, _) => "< 0".to_string(),
            (_, Some(hi)) => format!("{} - {}", dur(LATENCY_BUCKETS[i]), dur(*hi)),
            (_, None) => format!(">= {}", dur(LATENCY_BUCKETS[i])),
        };
        let _ = write!(
            o,
            r##"<rect x="{x}" y="{}" width="{bw}" height="{bh:.1}" fill="#8b5cf6"><title>{}: {} ops</title></rect><text x="{}" y="{}" class="sub" text-anchor="middle">{}</text><text x="{}" y="{}" class="sub" text-anchor="middle">{}</text>"##,
            base - bh,
            esc(&label),
            h[i],
            x + bw / 2.0,
            base + 14.0,
            esc(&if i == 0 { "<0".to_string() } else { dur(LATENCY_BUCKETS[i]) }),
            x + bw / 2.0,
            base - bh - 4.0,
            h[i]
        );
    }
    o.push_str("</svg>");
    o
}

pub(super) fn latency(s: &Summary) -> String {
    let mut o = String::new();
    let Some(l) = &s.launch_latency else { return o };
    let _ = write!(
        o,
        "<h2>Launch latency</h2><p>API entry &rarr; GPU start over {} ops: p50 {} &middot; p90 {} &middot; p99 {} (min {}, mean {}, max {})</p>",
        l.count,
        esc(&dur(l.p50)),
        esc(&dur(l.p90)),
        esc(&dur(l.p99)),
        esc(&dur(l.min)),
        esc(&dur(l.mean)),
        esc(&dur(l.max))
    );
    o.push_str(&histogram_svg(&l.histogram));
    if !s.kernel_latency.is_empty() {
        o.push_str("<table><tr><th>kernel / op</th><th>ops</th><th>min</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>");
        for k in &s.kernel_latency {
            let _ = write!(
                o,
                "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                name_cell(&k.name, 70),
                k.count,
                esc(&dur(k.min)),
                esc(&dur(k.pct.p50)),
                esc(&dur(k.pct.p90)),
                esc(&dur(k.pct.p99)),
                esc(&dur(k.max))
            );
        }
        o.push_str("</table>");
    }
    o
}

/// The kernel table under the chart: counts, totals, percentiles (long names elided).
pub(super) fn kernels_table(s: &Summary) -> String {
    let mut o = String::new();
    if s.ops.is_empty() {
        return o;
    }
    o.push_str("<table><tr><th>kernel / op</th><th>calls</th><th>total</th><th>mean</th><th>min</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>% GPU</th></tr>");
    for k in &s.ops {
        let _ = write!(
            o,
            "<tr>{}<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            name_cell(&k.name, 70),
            k.stat.count,
            esc(&dur(k.stat.sum)),
            esc(&dur(k.stat.mean())),
            esc(&dur(k.stat.min)),
            esc(&dur(k.pct.p50)),
            esc(&dur(k.pct.p90)),
            esc(&dur(k.pct.p99)),
            esc(&dur(k.stat.max)),
            k.pct_gpu_time
        );
    }
    o.push_str("</table>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elides_in_the_middle() {
        assert_eq!(elide_middle("short", 10), "short");
        let e = elide_middle("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, float*)", 40);
        assert_eq!(e.chars().count(), 40);
        assert!(e.starts_with("void at::native::vectorize…") && e.ends_with("(int, float*)"), "{e}");
    }
}
