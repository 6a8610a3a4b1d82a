//! The report's charts drawn per bin or per frame: the busy timelines (per GPU, and per GPU,
//! process and stream), each non-empty bin a rectangle with its own tooltip, and the flame graph
//! of GPU time by launch site. No script: tooltips are SVG `<title>`s.

use std::fmt::Write as _;

use super::data::{FlameNode, Summary};
use super::html::esc;
use super::html_sections::elide_middle;
use super::intervals::bin_width;
use super::text::dur;

/// The bins of one lane at `(left, y0)`, `w` wide and `h` high: a column per non-empty bin,
/// height = busy fraction, its tooltip naming the lane, the bin's time range and how busy it was.
pub(super) fn bins(o: &mut String, s: &Summary, lane: &str, timeline: &[f64], (left, y0, w, h): (f64, f64, f64, f64), color: &str) {
    let nb = timeline.len().max(1) as f64;
    let bw = w / nb;
    let bin = bin_width(s.gpu_first_ns, s.gpu_last_ns);
    let _ = write!(o, r#"<g fill="{color}">"#);
    for (b, f) in timeline.iter().enumerate() {
        if *f <= 0.0 {
            continue;
        }
        let x = left + b as f64 * bw;
        let bh = (f * h).max(0.5);
        let (from, to) = (b as i64 * bin, ((b as i64 + 1) * bin).min(s.gpu_last_ns - s.gpu_first_ns));
        let _ = write!(
            o,
            r#"<rect class="bin" x="{x:.2}" y="{:.2}" width="{bw:.2}" height="{bh:.2}"><title>{}: {} to {}: {:.0}% busy</title></rect>"#,
            y0 + h - bh,
            esc(lane),
            esc(&dur(from)),
            esc(&dur(to)),
            f * 100.0
        );
    }
    o.push_str("</g>");
}

const PALETTE: &[&str] = &["#3b82f6", "#ef4444", "#10b981", "#f59e0b", "#8b5cf6", "#ec4899", "#14b8a6", "#f97316"];

/// One lane per GPU, process and stream (or hardware queue where the stream is not known),
/// grouped by GPU under a heading row.
pub(super) fn stream_lanes_svg(s: &Summary) -> String {
    let (w, lane_h, gap, left, head_h) = (1000.0, 22.0, 4.0, 300.0, 20.0);
    let gpus: Vec<i64> = {
        let mut g: Vec<i64> = s.stream_lanes.iter().map(|l| l.gpu).collect();
        g.dedup();
        g
    };
    let h = gpus.len() as f64 * head_h + s.stream_lanes.len() as f64 * (lane_h + gap) + 10.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg id="stream-lanes" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {} {h}" width="100%" role="img" aria-label="GPU busy per stream">"#,
        w + left + 10.0
    );
    let mut y = 0.0;
    let mut last_gpu = None;
    for l in &s.stream_lanes {
        if last_gpu != Some(l.gpu) {
            last_gpu = Some(l.gpu);
            let _ = write!(o, r#"<text x="0" y="{}" class="lbl gpu-head" font-weight="600">GPU {}</text>"#, y + 15.0, l.gpu);
            y += head_h;
        }
        let who = l.pid.map_or("process ?".to_string(), |p| format!("pid {p}"));
        let name = format!("GPU {} {who} {}", l.gpu, l.label());
        let color = PALETTE[(l.gpu.unsigned_abs() as usize) % PALETTE.len()];
        let _ = write!(
            o,
            r#"<g class="lane" data-gpu="{}" data-pid="{}" data-stream="{}"><title>{}: {} ops, {} busy ({:.1}%)</title>"#,
            l.gpu,
            l.pid.map_or(String::new(), |p| p.to_string()),
            esc(&l.label()),
            esc(&name),
            l.ops,
            esc(&dur(l.busy_ns)),
            l.busy_pct
        );
        let _ = write!(o, r#"<text x="8" y="{}" class="sub">{} &#183; {}</text>"#, y + 15.0, esc(&who), esc(&l.label()));
        let _ = write!(o, r##"<rect x="{left}" y="{y}" width="{w}" height="{lane_h}" fill="#f3f4f6"/>"##);
        o.push_str("</g>");
        bins(&mut o, s, &name, &l.timeline, (left, y, w, lane_h), color);
        y += lane_h + gap;
    }
    o.push_str("</svg>");
    o
}

/// Drawn nodes at most (narrower ones are left out first).
const FLAME_NODES: usize = 4000;

/// The flame graph: the root at the bottom, each frame above the one that called it, widths
/// proportional to GPU time. Frames narrower than a pixel are left out (with their callees).
pub(super) fn flame_svg(root: &FlameNode) -> String {
    let (w, row_h) = (1200.0, 18.0);
    fn depth(n: &FlameNode) -> usize {
        1 + n.children.iter().map(depth).max().unwrap_or(0)
    }
    let rows = depth(root);
    let h = rows as f64 * row_h + 4.0;
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<svg id="flame-graph" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="Flame graph of GPU time by launch site">"#
    );
    let total = root.gpu_ns.max(1) as f64;
    let mut drawn = 0usize;
    // (node, x, depth), drawn breadth-first so the widest frames come first.
    let mut queue = std::collections::VecDeque::from([(root, 0.0f64, 0usize)]);
    while let Some((n, x, d)) = queue.pop_front() {
        let nw = n.gpu_ns as f64 / total * w;
        if nw < 1.0 || drawn >= FLAME_NODES {
            continue;
        }
        drawn += 1;
        let y = h - (d as f64 + 1.0) * row_h;
        let full = if n.module.is_empty() { n.name.clone() } else { format!("{} ({})", n.name, n.module) };
        let color = if d == 0 { "#9ca3af".to_string() } else { warm(&n.name) };
        let _ = write!(
            o,
            r##"<g class="frame"><title>{}: {} GPU time ({:.1}%), {} ops</title><rect x="{x:.2}" y="{y:.2}" width="{:.2}" height="{}" fill="{color}" stroke="#fff" stroke-width="0.5"/>"##,
            esc(&full),
            esc(&dur(n.gpu_ns)),
            n.gpu_ns as f64 * 100.0 / total,
            n.ops,
            nw,
            row_h - 1.0
        );
        // ~6.5 px per character at 11 px.
        let fits = ((nw - 6.0) / 6.5).floor();
        if fits >= 5.0 {
            let _ = write!(
                o,
                r#"<text x="{:.2}" y="{:.2}" class="fl">{}</text>"#,
                x + 3.0,
                y + row_h - 5.0,
                esc(&elide_middle(&n.name, fits as usize))
            );
        }
        o.push_str("</g>");
        let mut cx = x;
        for c in &n.children {
            queue.push_back((c, cx, d + 1));
            cx += c.gpu_ns as f64 / total * w;
        }
    }
    o.push_str("</svg>");
    o
}

/// A warm color from a name (the same function, the same color).
fn warm(name: &str) -> String {
    let h = name.bytes().fold(2166136261u32, |h, b| (h ^ b as u32).wrapping_mul(16777619));
    let (r, g, b) = (205 + (h % 50), 80 + ((h >> 8) % 120), 40 + ((h >> 16) % 50));
    format!("#{r:02x}{g:02x}{b:02x}")
}
