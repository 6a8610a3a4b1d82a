//! What the timeline is made of ([`Slice`]s with [`Arg`]s on tracks) and the [`Sink`] each
//! Perfetto writer implements; the track-id layout.

use anyhow::Result;

/// Track id offset for GPU devices in the Perfetto outputs (a pid no real process has:
/// Linux pids are below 2^22).
pub const GPU_PID_BASE: i64 = 1 << 24;

/// tid offset of a thread's roctx track, and of extra overlap lanes (`lane * LANE_TID`).
pub(crate) const ROCTX_TID_BASE: i64 = 1 << 29;
pub(crate) const LANE_TID: i64 = 1 << 26;
/// Pseudo process for roctx markers whose thread could not be found.
pub(crate) const MARKER_PID: i64 = GPU_PID_BASE - 1;
/// Flow ids for correlation-id links (no rocpd_api_ops row): this plus the op id.
pub(crate) const CORR_FLOW_BASE: u64 = 1 << 40;

#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(i64),
    /// An address or raw register value: shown in hex.
    Hex(i64),
    Str(String),
}

#[derive(Debug)]
pub(crate) struct Slice<'a> {
    pub pid: i64,
    pub tid: i64,
    pub ts: i64,
    pub dur: i64,
    pub name_id: i64,
    pub name: &'a str,
    pub cat: &'static str,
    pub args: Vec<(&'a str, Arg)>,
    /// Flows leaving this slice (API side) and arriving at it (op side).
    pub flow_out: Vec<u64>,
    pub flow_in: Vec<u64>,
}

pub(crate) trait Sink {
    fn process(&mut self, pid: i64, name: &str, cmdline: Option<&str>, sort_index: i64) -> Result<()>;
    fn thread(&mut self, pid: i64, tid: i64, name: &str, sort_index: i64) -> Result<()>;
    fn slice(&mut self, s: &Slice) -> Result<()>;
    /// Called when a lane's stream of slices ends or before a slice starting at `until`:
    /// writers that emit begin/end pairs close what ended (the slice stack of a lane is LIFO).
    fn flush_track(&mut self, pid: i64, tid: i64) -> Result<()>;
}
