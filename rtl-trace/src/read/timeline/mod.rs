//! The timeline both Perfetto writers produce: process / thread tracks for API calls, one
//! process per GPU with a thread per queue for GPU ops, roctx ranges on a track beside their
//! thread, and flows from each API call to the ops it caused.
//!
//! The rows are streamed from SQLite (ordered per track) into a [`Sink`]; nothing big is held in
//! memory. Slices on one track are kept properly nested: a slice that partially overlaps an
//! earlier one on the same track (concurrent kernels on one queue, an unclosed API call) goes to
//! an extra "overlap" lane of that track instead of corrupting the nesting.

//!
//! Files: [`prelude`] (strings, processes, the process / thread / queue tracks), [`apis`],
//! [`ops`] and [`markers`] (the slices of each kind), [`tracks`] (placing slices on tracks and
//! their overlap lanes: one helper for all three kinds); [`sink`]: the [`Sink`] the
//! Perfetto writers implement; [`parts`]: running the parts in parallel ([`emit_parts`]).

mod apis;
mod markers;
mod ops;
mod parts;
mod prelude;
mod sink;
mod tracks;

pub(crate) use markers::emit_markers;
pub(crate) use parts::{bounded_memory, emit_parts, PartFiles, PartSink};
pub(crate) use prelude::{emit_tracks, prelude, Prelude};
pub use sink::GPU_PID_BASE;
pub(crate) use sink::{Arg, Sink, Slice, LANE_TID, MARKER_PID};
