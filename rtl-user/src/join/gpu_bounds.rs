//! Bounds on what the GPU join keeps per process, in total as well as per process.
//!
//! The join keeps, for each traced process, the calls its GPU records may still link to, the
//! profiler-only API rows it wrote (by record), the decisions it made (by record) and its
//! lanes. Each is bounded per process; a per-process bound alone still lets many processes (or
//! one that forks) hold that much each, so every kind also has a total over all processes.
//!
//! The rule, the same for every kind: a process below its own bound takes a free slot while the
//! total is below its bound; at the total bound it gives up its own oldest entry for the new
//! one, and one that holds none is refused. Once a second (trace time), every process is cut
//! to its fair share (the total bound over the processes holding some), so one process cannot
//! keep the whole budget. Whatever is given up or refused is counted (`gpu_join_*_dropped` in
//! the trace's metadata): a call dropped can no longer be linked (its ops are written unlinked,
//! counted by reason); a profiler row or decision dropped is made again if another op of the
//! same record comes (a second profiler-only API row for that record).

/// One kind of per-process state: how much is held in total, and what was given up.
#[derive(Debug, Clone)]
pub struct Bound {
    /// What this kind is, for the metadata tag (`gpu_join_<what>_dropped`).
    pub what: &'static str,
    pub per_process: usize,
    pub total: usize,
    /// Entries held now, all processes together.
    pub held: usize,
    pub peak: usize,
    /// Entries given up (oldest of a process) or refused.
    pub dropped: u64,
}

/// What a process must do before adding one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Room {
    /// Add it.
    Free,
    /// Give up its own oldest entry first (then add).
    EvictOwn,
    /// Do not add it (counted).
    Refuse,
}

impl Bound {
    pub const fn new(what: &'static str, per_process: usize, total: usize) -> Self {
        Self { what, per_process, total, held: 0, peak: 0, dropped: 0 }
    }

    /// Room for one more entry of a process that holds `own`.
    pub fn room(&mut self, own: usize) -> Room {
        if own >= self.per_process || self.held >= self.total {
            if own == 0 {
                self.dropped += 1;
                return Room::Refuse;
            }
            return Room::EvictOwn;
        }
        Room::Free
    }

    pub fn added(&mut self) {
        self.held += 1;
        self.peak = self.peak.max(self.held);
    }

    /// `n` entries freed (a process exited, exec'd, pruned its old ones).
    pub fn freed(&mut self, n: usize) {
        self.held = self.held.saturating_sub(n);
    }

    /// `n` entries given up to make room (counted).
    pub fn evicted(&mut self, n: usize) {
        self.freed(n);
        self.dropped += n as u64;
    }

    /// The most one of `holders` processes may keep after the periodic trim.
    pub fn fair_share(&self, holders: usize) -> usize {
        (self.total / holders.max(1)).clamp(1, self.per_process)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_bound_evicts_own_or_refuses() {
        let mut b = Bound::new("x", 3, 4);
        for _ in 0..3 {
            assert_eq!(b.room(0), Room::Free);
            b.added();
        }
        // Per-process bound reached: its own oldest goes.
        assert_eq!(b.room(3), Room::EvictOwn);
        // Another process takes the last free slot, then the total is reached.
        assert_eq!(b.room(0), Room::Free);
        b.added();
        assert_eq!(b.room(1), Room::EvictOwn);
        assert_eq!(b.room(0), Room::Refuse);
        assert_eq!(b.dropped, 1);
        b.evicted(1);
        assert_eq!((b.held, b.peak, b.dropped), (3, 4, 2));
        assert_eq!(b.fair_share(2), 2);
        assert_eq!(b.fair_share(0), 3);
        assert_eq!(b.fair_share(100), 1);
    }
}
