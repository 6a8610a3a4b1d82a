//! `summary`: what a trace says at a glance — top GPU ops (kernels), top APIs, GPU busy per device
//! and queue, per-process breakdown, launch latency percentiles, drop / unlinked counters.
//!
//! Speed: each big table is read by ONE scan inside SQLite. SQLite's own GROUP BY sorts its
//! input (13 s for 10 M API rows here), so the grouping is done by small aggregate functions
//! registered on the connection (`rtl_group`, `rtl_busy`, `rtl_quantiles`, `rtl_distinct`) that
//! hash instead of sort; the scans run in parallel on separate connections. Only the grouped
//! results (one row per API name / kernel / device) reach the Rust side.

//!
//! Files by job: [`sql_functions`] (the aggregate functions), [`scans`] (the parallel scans),
//! [`build`] (the scans' results and small queries -> [`Summary`]), [`data`] (the summary's
//! types), [`text`] (terminal tables), [`json`] (`--json`), [`html`] (the `--html` report);
//! the sections added for issue 16 each in their own file: [`samples`] (per-group percentiles),
//! [`intervals`] (the GPU ops' intervals, busy), [`gaps`] (occupancy windows, queue and idle
//! gaps), [`inflight`] (API calls in flight during idle gaps), [`ranges`] (roctx / NVTX ranges),
//! [`header`] (host, date, command, version, GPU source), and their outputs
//! [`text_sections`], [`json_sections`], [`html_sections`]; what only the report draws:
//! [`lanes`] (busy per GPU, process and stream) and [`flame`] (GPU time by launch site), drawn
//! by [`html_charts`].

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

mod build;
mod compare;
mod data;
mod flame;
mod gaps;
mod header;
mod html;
mod html_charts;
mod html_sections;
mod inflight;
mod intervals;
mod json;
mod json_sections;
mod lanes;
mod ranges;
mod samples;
mod scans;
mod sql_functions;
mod text;
mod text_sections;

pub use build::{summary_data, summary_data_of, summary_data_with, DataOptions};
pub use data::*;
pub use text::dur;

/// Options of `rtl-ebpf summary`.
#[derive(Debug, Clone)]
pub struct SummaryOptions {
    /// Print JSON instead of terminal tables.
    pub json: bool,
    /// Also write a self-contained HTML report there.
    pub html: Option<PathBuf>,
    /// Rows in the top-kernel / top-API tables (0: all).
    pub top: usize,
    /// Leave out GPU ops linked to no traced call (`rtl_op.link` 0, 4, 5) and the
    /// profiler-only API rows written for them (`rtl_api.status` 5): what the in-process agent
    /// alone says, which the traced process could forge (docs/tracing.md, the agent channel).
    pub linked_only: bool,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions { json: false, html: None, top: 20, linked_only: false }
    }
}

/// `rtl-ebpf summary`: writes the summary of `db` to `out` (tables, or JSON with `opts.json`),
/// and the HTML report to `opts.html` when given.
pub fn summary(db: &Path, facts: crate::api_meaning::ApiFacts, opts: &SummaryOptions, out: &mut dyn Write) -> Result<()> {
    if let Some(h) = &opts.html {
        crate::read::open::refuse_output_that_is_an_input(h, &[db])?;
    }
    let data = DataOptions { top: opts.top, linked_only: opts.linked_only, report: opts.html.is_some(), ..Default::default() };
    let s = summary_data_with(db, facts, &data)?;
    if let Some(h) = &opts.html {
        html::write_report(&s, db, h)?;
    }
    if opts.json {
        // Strings in it come from traced processes: no control reaches a terminal (term::json).
        out.write_all(crate::term::json(serde_json::to_string_pretty(&s.to_json())?).as_bytes())?;
        writeln!(out)?;
    } else {
        text::write_text(&s, out)?;
    }
    Ok(())
}

/// `rtl-ebpf summary A B`: the two traces side by side with their differences
/// ([`compare`]): tables, or JSON (`{"a", "b", "diff"}`) with `opts.json`. `--html` takes one
/// trace.
pub fn summary_compare(a: &Path, b: &Path, facts: crate::api_meaning::ApiFacts, opts: &SummaryOptions, out: &mut dyn Write) -> Result<()> {
    if opts.html.is_some() {
        return Err(anyhow::anyhow!(crate::error::Fatal::Usage(
            "--html reports one trace: give one TRACE with --html (the comparison of two is text or --json)".into()
        )));
    }
    let data =
        |db: &Path| build::summary_data_with(db, facts, &DataOptions { top: 0, linked_only: opts.linked_only, ..Default::default() });
    let (sa, sb) = (data(a)?, data(b)?);
    if opts.json {
        out.write_all(crate::term::json(serde_json::to_string_pretty(&compare::compare_json(&sa, &sb))?).as_bytes())?;
        writeln!(out)?;
    } else {
        compare::write_compare(&sa, &sb, opts.top, out)?;
    }
    Ok(())
}
