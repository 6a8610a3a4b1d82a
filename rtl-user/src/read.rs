//! The trace readers (the `rtl-trace` crate's [`rtl_trace::read`]) with this collector's API
//! table ([`crate::probe::apis::meaning_of`]) for traces written before traces recorded what
//! their `ret` and `a0..a3` mean. What the CLI's `summary`, `convert` and `merge` call.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;

pub use rtl_trace::read::check::{CheckOptions, CheckReport, Thresholds, EXIT_CHECK_FAILED};
pub use rtl_trace::read::{
    DataOptions, KinetoOutput, MergeStats, MergedInput, SdkStats, Summary, SummaryOptions, Trace, Window, GPU_PID_BASE, MERGED_TABLES,
    SDK_SCHEMA_VERSION, TIMELINE_BINS,
};

use crate::probe::apis::meaning_of;

/// [`rtl_trace::read::open_trace`].
pub fn open_trace(path: &Path) -> Result<Trace> {
    rtl_trace::read::open_trace(path, meaning_of)
}

/// [`rtl_trace::read::summary`].
pub fn summary(db: &Path, opts: &SummaryOptions, out: &mut dyn Write) -> Result<()> {
    rtl_trace::read::summary(db, meaning_of, opts, out)
}

/// [`rtl_trace::read::summary_compare`].
pub fn summary_compare(a: &Path, b: &Path, opts: &SummaryOptions, out: &mut dyn Write) -> Result<()> {
    rtl_trace::read::summary_compare(a, b, meaning_of, opts, out)
}

/// [`rtl_trace::read::summary_data`].
pub fn summary_data(db: &Path, top: usize) -> Result<Summary> {
    rtl_trace::read::summary_data(db, meaning_of, top)
}

/// [`rtl_trace::read::summary_data_with`].
pub fn summary_data_with(db: &Path, opts: &DataOptions) -> Result<Summary> {
    rtl_trace::read::summary_data_with(db, meaning_of, opts)
}

/// [`rtl_trace::read::check::check`].
pub fn check(db: &Path, t: &Thresholds, o: CheckOptions, out: &mut dyn Write) -> Result<CheckReport> {
    rtl_trace::read::check::check(db, meaning_of, t, o, out)
}

/// [`rtl_trace::read::convert_perfetto_json`].
pub fn convert_perfetto_json(db: &Path, out: &Path) -> Result<()> {
    rtl_trace::read::convert_perfetto_json(db, meaning_of, out)
}

/// [`rtl_trace::read::convert_perfetto_proto`].
pub fn convert_perfetto_proto(db: &Path, out: &Path) -> Result<()> {
    rtl_trace::read::convert_perfetto_proto(db, meaning_of, out)
}

/// [`rtl_trace::read::convert_kineto`].
pub fn convert_kineto(db: &Path, out: &Path, per_process: bool) -> Result<KinetoOutput> {
    rtl_trace::read::convert_kineto(db, meaning_of, out, per_process)
}

/// [`rtl_trace::read::convert_rocpd_sdk`].
pub fn convert_rocpd_sdk(db: &Path, out: &Path) -> Result<SdkStats> {
    rtl_trace::read::convert_rocpd_sdk(db, meaning_of, out)
}

/// [`rtl_trace::read::merge`].
pub fn merge(inputs: &[PathBuf], out: &Path, out_host_tag: bool) -> Result<MergeStats> {
    rtl_trace::read::merge(inputs, meaning_of, out, out_host_tag)
}
