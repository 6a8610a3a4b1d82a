//! Placing slices on tracks: slices of one track are kept properly nested by spreading them
//! over overlap lanes; each lane is named once; tracks are flushed as the rows move on.

use std::collections::HashSet;

use anyhow::Result;

use super::sink::{Sink, LANE_TID};

/// Keeps slices of one logical track properly nested by spreading them over lanes.
#[derive(Default)]
struct Lanes {
    key: Option<(i64, i64)>,
    stacks: Vec<Vec<i64>>,
}

impl Lanes {
    /// Returns the lane for [start, end] (events must come ordered by start, then end desc).
    fn place(&mut self, key: (i64, i64), start: i64, end: i64) -> (usize, bool) {
        let mut new_track = false;
        if self.key != Some(key) {
            self.key = Some(key);
            self.stacks.clear();
            new_track = true;
        }
        for (i, st) in self.stacks.iter_mut().enumerate() {
            while st.last().is_some_and(|&e| e <= start) {
                st.pop();
            }
            if st.last().is_none_or(|&e| e >= end) {
                st.push(end);
                return (i, new_track);
            }
        }
        self.stacks.push(vec![end]);
        (self.stacks.len() - 1, new_track)
    }
}

/// The tracks one kind of slice (API calls, GPU ops, roctx ranges) is placed on, in row order
/// (rows ordered per track, by start, then end descending).
#[derive(Default)]
pub(super) struct Tracks {
    lanes: Lanes,
    /// Lanes given a thread of their own.
    announced: HashSet<(i64, i64)>,
    /// Lanes written since the rows moved to this track.
    open: Vec<(i64, i64)>,
}

impl Tracks {
    /// Places the slice [start, end] of track (pid, tid) and returns the tid of its lane
    /// (`tid + lane * LANE_TID`). Moving on to another track flushes the open lanes first.
    /// `name(lane)` names a lane the first time it is used (None: it gets no thread of its own).
    pub(super) fn place(
        &mut self,
        sink: &mut dyn Sink,
        (pid, tid): (i64, i64),
        (start, end): (i64, i64),
        name: impl FnOnce(usize) -> Option<(String, i64)>,
    ) -> Result<i64> {
        let (lane, new_track) = self.lanes.place((pid, tid), start, end);
        if new_track {
            self.flush(sink)?;
        }
        let ltid = tid + lane as i64 * LANE_TID;
        if !self.announced.contains(&(pid, ltid)) {
            if let Some((n, sort_index)) = name(lane) {
                self.announced.insert((pid, ltid));
                sink.thread(pid, ltid, &n, sort_index)?;
            }
        }
        if !self.open.contains(&(pid, ltid)) {
            self.open.push((pid, ltid));
        }
        Ok(ltid)
    }

    /// Flushes the open lanes (at the end of the rows).
    pub(super) fn flush(&mut self, sink: &mut dyn Sink) -> Result<()> {
        for (p, t) in self.open.drain(..) {
            sink.flush_track(p, t)?;
        }
        Ok(())
    }
}
