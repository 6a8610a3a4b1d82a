//! Reading traces: `summary` (terminal / JSON / HTML), conversion to Perfetto (Chrome JSON and
//! native protobuf), and `merge`. See docs/reading-traces.md.
//!
//! Every entry point opens its input through [`open_trace`], which checks the file (clear errors
//! for non-SQLite, truncated or non-trace files), never writes it, and never lets SQLite replay a
//! journal or write-ahead log that the trace's owner did not write (see [`open_trace`]). Older
//! layouts are migrated ([`crate::migrate`]) in a private copy. Every output is created
//! new, private (0600) and under a random name beside it, then renamed into place
//! ([`open::OutFile`]): nothing planted at a predictable name is followed or written through. Nothing
//! here prints: output goes to the writer or file given.
//!
//! Files: [`open`] (opening a trace, outputs), [`summary`] (text, JSON, HTML), [`timeline`]
//! (what the Perfetto, Kineto and rocprofiler-sdk writers emit) with [`perfetto_json`],
//! [`perfetto_proto`], [`kineto`], [`rocpd_sdk`]; [`merge`];
//! [`meaning`] and [`metadata`]: what `rtl_api`'s values and `rocpd_metadata`'s tags mean.

pub mod check;
mod kineto;
mod meaning;
mod merge;
mod metadata;
mod open;
mod perfetto_json;
mod perfetto_proto;
mod rocpd_sdk;
mod sdk_import;
pub mod sites;
mod summary;
mod timeline;

pub use kineto::{convert_kineto, KinetoOutput};
pub use merge::{merge, MergeStats, MergedInput, MERGED_TABLES};
pub use open::{open_trace, Trace};
pub use perfetto_json::convert_perfetto_json;
pub use perfetto_proto::convert_perfetto_proto;
pub use rocpd_sdk::{convert_rocpd_sdk, SdkStats, SDK_SCHEMA_VERSION};
pub use summary::{
    summary, summary_compare, summary_data, summary_data_of, summary_data_with, DataOptions, Summary, SummaryOptions, Window, TIMELINE_BINS,
};
pub use timeline::GPU_PID_BASE;
