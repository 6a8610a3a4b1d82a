//! Sequence links: a profiler record is the n-th record of its thread and API, and the traced
//! calls of one thread and API come one after another, so the record's call is found by number
//! rather than by time.
//!
//! A *lane* holds the eBPF-traced calls of one (process, profiler thread id, API name) in the
//! order they were entered, numbered from 0 (`seq`; the numbering survives pruning). A record
//! carries `thread_seq` = k (rtl-common's agent wire format). Its call has lane number
//! `k + d`, where the offset `d` counts the lane's calls the profiler did not record (those
//! before its session began) and is the same for every record of the lane, as long as neither
//! side lost a call.
//!
//! `d` is found from:
//! * the session's *anchor* (agent `Info::anchor_*`): calls that started before the session
//!   have no record, calls after it all have one, so `d` = the number of lane calls that started
//!   before it (a range when a call started during `hipProfilerEnableExt` itself). Used only when
//!   the probes were in place before the anchor (else the lane may lack early calls);
//! * each record's *time window*: the lane numbers of the calls whose interval is consistent
//!   with the profiler's times of the call (within the clock uncertainty plus slack). The true
//!   call is always inside, so `d` lies in `[lo - k, hi - k]` for every record.
//!
//! A *segment* is the intersection of these offset ranges over the records seen so far. Once it
//! is one value, every record of the segment is linked by number (kind `Correlation` when the
//! anchor alone fixed it, `Sequence` when the windows did); records wait while it is wider.
//! An empty intersection means a call was lost on one side (a ring-buffer drop, a probe that
//! came late): the segment *breaks*, its waiting records are decided by time alone, and a new
//! segment starts. Each call is claimed by at most one record (a graph launch's nodes share
//! their record), so two adjacent calls can never both take one record.

use std::collections::{HashMap, VecDeque};

use super::rows::LinkKind;

/// A traced call in its lane.
#[derive(Debug, Clone)]
pub struct LaneCall {
    pub id: i64,
    pub start: u64,
    /// `u64::MAX` while the call is open (its return not seen yet).
    pub end: u64,
    /// Record index of the record linked to this call.
    pub claimed: Option<u64>,
}

/// A closed range of offsets `d` (lane number - record number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    pub lo: i64,
    pub hi: i64,
}

impl Offsets {
    pub fn intersect(self, o: Offsets) -> Option<Offsets> {
        let r = Offsets { lo: self.lo.max(o.lo), hi: self.hi.min(o.hi) };
        (r.lo <= r.hi).then_some(r)
    }
    pub fn single(self) -> Option<i64> {
        (self.lo == self.hi).then_some(self.lo)
    }
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    epoch: u16,
    off: Offsets,
    /// The anchor alone fixed the offset (windows only confirmed it).
    by_anchor: bool,
}

/// A record of a lane waiting for its segment to narrow to one offset.
#[derive(Debug, Clone, Copy)]
pub struct Waiting {
    pub record: u64,
    pub seq: u64,
    pub cs: u64,
    pub ce: u64,
    pub tol: u64,
}

/// What the profiler says about one record, on the trace clock.
#[derive(Debug, Clone, Copy)]
pub struct Query {
    pub record: u64,
    pub seq: u64,
    pub epoch: u16,
    pub cs: u64,
    pub ce: u64,
    pub tol: u64,
}

impl Query {
    fn waiting(&self) -> Waiting {
        Waiting { record: self.record, seq: self.seq, cs: self.cs, ce: self.ce, tol: self.tol }
    }
}

/// The outcome of placing a record in its lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Linked: this record, and the earlier waiting ones the same offset resolved
    /// (`(record, call id)`), all of `kind`.
    Linked { id: i64, kind: LinkKind, resolved: Vec<(u64, i64)> },
    /// The offset is not decided yet: the record waits (kept in the lane).
    Open,
    /// No call of the lane fits the record's times.
    NoWindow,
    /// The record contradicts its segment (a call lost on one side): decide it by time.
    Broken,
}

/// Counters of the sequence join.
#[derive(Debug, Default, Clone)]
pub struct SequenceStats {
    /// Segments that broke (records disagreeing on the offset: a call lost on one side).
    pub breaks: u64,
    /// Anchors that disagreed with the records' times (not used).
    pub anchor_rejected: u64,
}

#[derive(Debug, Default)]
pub struct Lane {
    calls: VecDeque<LaneCall>,
    /// Lane number of `calls[0]`.
    base: u64,
    /// Latest start among the calls pruned (0: none): the anchor can only count calls before it
    /// while every pruned call started before the anchor.
    pruned_start: u64,
    seg: Option<Segment>,
    /// The anchor was used (or can no longer be trusted for this lane).
    anchor_spent: bool,
    /// Records of the current segment waiting for it to narrow to one offset, by record index.
    waiting: HashMap<u64, Waiting>,
    /// Records of a broken segment, not linked yet.
    orphans: Vec<Waiting>,
}

impl Lane {
    /// A call entered (calls of one thread enter in order).
    pub fn entered(&mut self, id: i64, start: u64) {
        self.calls.push_back(LaneCall { id, start, end: u64::MAX, claimed: None });
    }

    /// A call returned (or was closed); false if the lane never saw it enter.
    pub fn returned(&mut self, id: i64, end: u64) -> bool {
        // Open calls are at the back.
        for c in self.calls.iter_mut().rev() {
            if c.id == id {
                c.end = end.max(c.start);
                return true;
            }
            if c.end != u64::MAX {
                break;
            }
        }
        false
    }

    /// A complete call the lane never saw enter (its entry was lost, or a caller that indexes
    /// calls at return only): appended in start order.
    pub fn completed(&mut self, id: i64, start: u64, end: u64) {
        let at = self.calls.partition_point(|c| c.start <= start);
        if at == self.calls.len() {
            self.calls.push_back(LaneCall { id, start, end: end.max(start), claimed: None });
        } else {
            // Out of order: numbers after it shift, the segment cannot be trusted.
            self.calls.insert(at, LaneCall { id, start, end: end.max(start), claimed: None });
            if self.seg.is_some() {
                self.break_segment();
            }
        }
    }

    pub fn len(&self) -> usize {
        self.calls.len()
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Forgets calls that ended before `before` (they can no longer be claimed), and the oldest
    /// beyond `max` calls. Numbers stay.
    pub fn prune(&mut self, before: u64, max: usize) {
        while let Some(c) = self.calls.front() {
            let old = c.end != u64::MAX && c.end < before;
            if !(old || self.calls.len() > max) {
                break;
            }
            if let Some(c) = self.calls.pop_front() {
                self.pruned_start = self.pruned_start.max(c.start);
            }
            self.base += 1;
        }
    }

    /// Lane numbers `[lo, hi]` of the calls consistent with a call the profiler timed at
    /// `[cs, ce]`, `tol` allowed either side: started by `cs + tol`, not ended before `ce - tol`.
    /// Calls of one lane do not overlap, so both bounds are monotone in the lane number.
    pub fn window(&self, cs: u64, ce: u64, tol: u64) -> Option<(u64, u64)> {
        let n_started = self.calls.partition_point(|c| c.start <= cs.saturating_add(tol));
        let n_ended_before = self.calls.partition_point(|c| c.end != u64::MAX && c.end.saturating_add(tol) < ce);
        if n_started == 0 || n_ended_before >= n_started {
            return None;
        }
        Some((self.base + n_ended_before as u64, self.base + n_started as u64 - 1))
    }

    /// Lane calls that started before `t` (pruned ones included).
    fn started_before(&self, t: u64) -> u64 {
        self.base + self.calls.partition_point(|c| c.start < t) as u64
    }

    /// Lane calls that started at or before `t` (pruned ones included).
    fn started_by(&self, t: u64) -> u64 {
        self.base + self.calls.partition_point(|c| c.start <= t) as u64
    }

    fn call_mut(&mut self, seq: i64) -> Option<&mut LaneCall> {
        let i = seq.checked_sub(self.base as i64)?;
        self.calls.get_mut(usize::try_from(i).ok()?)
    }

    /// Places a record. `anchor`: the session's anchor when it may be used for this lane (it is
    /// used for the lane's first segment only).
    pub fn place(&mut self, q: &Query, anchor: Option<(u64, u64)>, stats: &mut SequenceStats) -> Placement {
        let Some((wlo, whi)) = self.window(q.cs, q.ce, q.tol) else { return Placement::NoWindow };
        let w = Offsets { lo: wlo as i64 - q.seq as i64, hi: whi as i64 - q.seq as i64 };
        let fresh = Segment { epoch: q.epoch, off: w, by_anchor: false };
        let seg = match self.seg {
            Some(s) if s.epoch == q.epoch => match s.off.intersect(w) {
                Some(off) => Segment { off, ..s },
                None => {
                    stats.breaks += 1;
                    self.break_segment();
                    fresh
                }
            },
            Some(_) => {
                // The agent's numbering restarted: nothing carries over.
                self.break_segment();
                fresh
            }
            None => {
                // The lane's first segment: the anchor's range, when usable, with the window.
                let pruned = self.pruned_start;
                let a = anchor
                    .filter(|&(lo, _)| q.epoch == 0 && !self.anchor_spent && (pruned == 0 || pruned < lo))
                    .map(|(lo, hi)| Offsets { lo: self.started_before(lo) as i64, hi: self.started_by(hi) as i64 });
                self.anchor_spent = true;
                match a.map(|a| (a, a.intersect(w))) {
                    Some((a, Some(off))) => Segment { epoch: q.epoch, off, by_anchor: a.single().is_some() },
                    Some((_, None)) => {
                        stats.anchor_rejected += 1;
                        fresh
                    }
                    None => fresh,
                }
            }
        };
        self.seg = Some(seg);
        let Some(d) = seg.off.single() else {
            self.waiting.insert(q.record, q.waiting());
            return Placement::Open;
        };
        let kind = if seg.by_anchor { LinkKind::Correlation } else { LinkKind::Sequence };
        let Some(id) = self.claim(q.record, q.seq as i64 + d) else {
            // The numbered call is gone or another record's: the offset is wrong from here on.
            stats.breaks += 1;
            self.waiting.remove(&q.record);
            self.break_segment();
            return Placement::Broken;
        };
        let mut resolved = Vec::new();
        for (r, x) in std::mem::take(&mut self.waiting) {
            if r == q.record {
                continue;
            }
            match self.claim(r, x.seq as i64 + d) {
                Some(cid) => resolved.push((r, cid)),
                None => self.orphans.push(x),
            }
        }
        Placement::Linked { id, kind, resolved }
    }

    /// Ends the current segment: its waiting records become orphans (decided by time alone).
    fn break_segment(&mut self) {
        self.seg = None;
        self.anchor_spent = true;
        self.orphans.extend(std::mem::take(&mut self.waiting).into_values());
    }

    /// Calls may have been lost: the current segment ends (not counted as a break).
    pub fn distrust(&mut self) {
        if self.seg.is_some() || !self.anchor_spent {
            self.break_segment();
        }
    }

    /// Records whose segment broke before they were linked: the caller decides them by time.
    pub fn take_orphans(&mut self) -> Vec<Waiting> {
        std::mem::take(&mut self.orphans)
    }

    /// Claims lane call `seq` for `record`; None if absent or another record's.
    fn claim(&mut self, record: u64, seq: i64) -> Option<i64> {
        let c = self.call_mut(seq)?;
        match c.claimed {
            Some(r) if r != record => None,
            _ => {
                c.claimed = Some(record);
                Some(c.id)
            }
        }
    }

    /// Drops `record` from the waiting list (decided another way).
    pub fn forget_waiting(&mut self, record: u64) {
        self.waiting.remove(&record);
    }

    /// Time alone: the one unclaimed call consistent with `[cs, ce]`; `Err(n)`: n candidates.
    pub fn by_time(&mut self, record: u64, cs: u64, ce: u64, tol: u64) -> Result<i64, usize> {
        let Some((lo, hi)) = self.window(cs, ce, tol) else { return Err(0) };
        let mut found = None;
        let mut n = 0;
        for s in lo..=hi {
            let c = &self.calls[(s - self.base) as usize];
            if c.claimed.is_some_and(|r| r != record) {
                continue;
            }
            n += 1;
            found = Some(s);
        }
        match (n, found) {
            (1, Some(s)) => self.claim(record, s as i64).ok_or(0),
            _ => Err(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// n calls of 1 us each, 0.5 us apart, from t=1000.
    fn lane(n: u64) -> Lane {
        let mut l = Lane::default();
        for i in 0..n {
            let s = 1_000 + i * 1_500;
            l.entered(i as i64 + 100, s);
            assert!(l.returned(i as i64 + 100, s + 1_000));
        }
        l
    }

    fn q(record: u64, seq: u64, call: u64, jitter: i64) -> Query {
        let s = (1_000 + call * 1_500) as i64;
        Query { record, seq, epoch: 0, cs: (s + 100 + jitter) as u64, ce: (s + 900 + jitter) as u64, tol: 2_000 }
    }

    #[test]
    fn windows_cover_neighbours_so_time_alone_is_ambiguous() {
        let l = lane(10);
        let (lo, hi) = l.window(q(0, 5, 5, 0).cs, q(0, 5, 5, 0).ce, 2_000).unwrap();
        assert!(lo < 5 && hi > 5, "{lo}..{hi}");
    }

    #[test]
    fn anchor_fixes_the_offset_at_once() {
        let mut l = lane(10);
        let mut st = SequenceStats::default();
        // The session began between call 1 and call 2: records 0.. are calls 2..
        let anchor = Some((3_000 + 500, 3_000 + 600));
        match l.place(&q(7, 3, 5, 900), anchor, &mut st) {
            Placement::Linked { id, kind, .. } => assert_eq!((id, kind), (105, LinkKind::Correlation)),
            p => panic!("{p:?}"),
        }
        match l.place(&q(8, 0, 2, -900), anchor, &mut st) {
            Placement::Linked { id, kind, .. } => assert_eq!((id, kind), (102, LinkKind::Correlation)),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn windows_narrow_the_offset_then_waiting_records_resolve() {
        let mut l = lane(10);
        let mut st = SequenceStats::default();
        // No anchor. Record k is call k; alone, a middle record fits calls k-1..k+1 (offsets
        // -1..1), the last one calls 8..9 (-1..0), the first one calls 0..1 (0..1).
        assert_eq!(l.place(&q(14, 4, 4, 0), None, &mut st), Placement::Open);
        assert_eq!(l.place(&q(15, 5, 5, 0), None, &mut st), Placement::Open);
        assert_eq!(l.place(&q(19, 9, 9, 0), None, &mut st), Placement::Open);
        match l.place(&q(10, 0, 0, 0), None, &mut st) {
            Placement::Linked { id, kind, resolved } => {
                assert_eq!((id, kind), (100, LinkKind::Sequence));
                let mut r = resolved.clone();
                r.sort();
                assert_eq!(r, vec![(14, 104), (15, 105), (19, 109)]);
            }
            p => panic!("{p:?}"),
        }
        // Later records of the segment link at once.
        assert!(matches!(l.place(&q(17, 7, 7, 0), None, &mut st), Placement::Linked { id: 107, .. }));
        assert_eq!(st.breaks, 0);
    }

    #[test]
    fn a_lost_call_breaks_the_segment() {
        let mut l = Lane::default();
        // Calls 0..4 then a 100 us gap then 5..9; call 5 never reached the trace.
        for i in 0..10u64 {
            if i == 5 {
                continue;
            }
            let s = 1_000 + i * 1_500 + if i >= 5 { 100_000 } else { 0 };
            l.entered(i as i64, s);
            l.returned(i as i64, s + 1_000);
        }
        let mut st = SequenceStats::default();
        let at = |i: u64| {
            let s = 1_000 + i * 1_500 + if i >= 5 { 100_000 } else { 0 };
            Query { record: i, seq: i, epoch: 0, cs: s + 100, ce: s + 900, tol: 2_000 }
        };
        assert!(matches!(l.place(&at(0), Some((0, 10)), &mut st), Placement::Linked { id: 0, .. }));
        // From call 6 on the offset is -1. Record 9, the lane's last, fits no call numbered 9:
        // the segment breaks. (A record in between fits both neighbours: only the drop notice,
        // `distrust`, protects it; see GpuJoiner::distrust_sequences.)
        let p = l.place(&at(9), Some((0, 10)), &mut st);
        assert_eq!(st.breaks, 1, "{p:?}");
        assert_eq!(p, Placement::Open);
        // A new segment from the records' windows: record 9's own window is two calls wide.
        assert!(matches!(l.place(&at(9), None, &mut st), Placement::Open));
        assert!(matches!(l.place(&at(6), None, &mut st), Placement::Linked { id: 6, .. } | Placement::Open));
    }

    #[test]
    fn one_call_one_record() {
        let mut l = lane(3);
        assert_eq!(l.by_time(1, 1_100, 1_900, 0), Ok(100));
        assert_eq!(l.by_time(2, 1_100, 1_900, 0), Err(0), "claimed by record 1");
        assert_eq!(l.by_time(1, 1_100, 1_900, 0), Ok(100), "the same record again");
        assert_eq!(l.by_time(3, 2_600, 3_400, 2_000), Err(2), "two unclaimed neighbours");
    }

    #[test]
    fn pruning_keeps_numbers() {
        let mut l = lane(10);
        // Calls 0 and 1 ended before 5 us.
        l.prune(5_000, 100);
        assert_eq!(l.base, 2);
        let (lo, hi) = l.window(1_000 + 5 * 1_500 + 100, 1_000 + 5 * 1_500 + 900, 0).unwrap();
        assert_eq!((lo, hi), (5, 5));
        l.prune(0, 4);
        assert_eq!((l.base, l.len()), (6, 4));
    }
}
