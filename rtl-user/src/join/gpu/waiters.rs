//! Ops that wait: for their call to return, for their events, or for their lane's numbering.

use super::*;

/// An op waiting: its process, the op, and when it arrived (trace clock).
pub(super) type Waiter = (u32, GpuOp, u64);

/// An op whose record may only be placed in its lane from `at` on (see READY_NS).
pub(super) struct Unready {
    pub(super) at: u64,
    pub(super) n: u64,
    pub(super) w: Waiter,
}
impl PartialEq for Unready {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.n) == (o.at, o.n)
    }
}
impl Eq for Unready {}
impl PartialOrd for Unready {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Unready {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.n).cmp(&(o.at, o.n))
    }
}

/// What became of one try.
pub(super) enum Try {
    Done,
    /// Retry on the next pass (its call may still be open).
    Later,
    /// Not before this trace time.
    NotBefore(u64),
    /// Its record waits for its lane's numbering: parked until decided (or given up on).
    Parked,
}

impl GpuJoiner {
    /// Puts an op that has to wait where it waits.
    pub(super) fn wait(&mut self, w: Waiter, t: Try) {
        match t {
            Try::Done => {}
            Try::Later => self.pending.push_back(w),
            Try::NotBefore(at) => {
                self.unready_n += 1;
                self.unready.push(Reverse(Unready { at, n: self.unready_n, w }));
            }
            Try::Parked => {
                let key = (w.0, w.1.record_index);
                let e = self.parked.entry(key).or_default();
                if e.is_empty() {
                    self.parked_order.push_back((w.2, key.0, key.1));
                }
                e.push(w);
            }
        }
    }

    pub(super) fn waiting(&self) -> usize {
        self.pending.len() + self.unready.len() + self.parked_order.len()
    }

    /// Keeps the waiting ops bounded: the oldest is decided as things stand.
    pub(super) fn bound(&mut self, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        while self.waiting() > MAX_PENDING {
            if let Some(w) = self.pending.pop_front() {
                self.try_link(&w, next_id, out, true, true);
            } else if let Some(Reverse(u)) = self.unready.pop() {
                self.try_link(&u.w, next_id, out, true, true);
            } else if let Some((_, pid, rec)) = self.parked_order.pop_front() {
                self.give_up_parked(pid, rec, next_id, out);
            } else {
                break;
            }
        }
    }

    /// Retries operations whose call had not returned yet (or whose numbering was undecided);
    /// gives up on old ones, or on all at the end of the trace (`finish`: every event is in).
    pub fn retry_pending(&mut self, now: u64, finish: bool, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        self.advance(now);
        if self.now.saturating_sub(self.last_prune) > 1_000_000_000 {
            self.last_prune = self.now;
            self.prune_lanes();
        }
        let passes: &[bool] = if finish { &[false, true] } else { &[false] };
        for &last in passes {
            // Ops whose time came (all of them at the end).
            while self.unready.peek().is_some_and(|u| finish || u.0.at <= self.now) {
                let Some(Reverse(u)) = self.unready.pop() else { break };
                let give_up = last || self.now.saturating_sub(u.w.2) > PENDING_GIVE_UP_NS;
                let t = self.try_link(&u.w, next_id, out, finish, give_up);
                self.wait(u.w, t);
            }
            let n = self.pending.len();
            for _ in 0..n {
                let Some(w) = self.pending.pop_front() else { break };
                let give_up = last || self.now.saturating_sub(w.2) > PENDING_GIVE_UP_NS;
                let t = self.try_link(&w, next_id, out, finish, give_up);
                self.wait(w, t);
            }
            // Records whose lane never decided them: by time alone.
            while let Some(&(seen, pid, rec)) = self.parked_order.front() {
                if !(last || self.now.saturating_sub(seen) > PENDING_GIVE_UP_NS) {
                    break;
                }
                self.parked_order.pop_front();
                self.give_up_parked(pid, rec, next_id, out);
            }
        }
    }

    /// A parked record's lane did not decide it in time: decided by time within the lane.
    pub(super) fn give_up_parked(&mut self, pid: u32, rec: u64, next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        let Some(ws) = self.parked.remove(&(pid, rec)) else { return };
        let Some(first) = ws.first() else { return };
        let op = first.1;
        let w = self.cpu_window(pid, &op);
        let d = match self.procs.get_mut(&pid) {
            Some(p) => {
                let name = p.strings.get(&op.api_name_id).cloned();
                let d = match name.and_then(|n| p.lanes.get_mut(&(op.thread_id, n))) {
                    Some(lane) => {
                        lane.forget_waiting(rec);
                        by_time_in(lane, rec, w.cs, w.ce, w.tol)
                    }
                    None => Decision::Unlinked(LinkKind::UnlinkedNoCall),
                };
                p.remember(&mut self.bounds.decisions, rec, d);
                d
            }
            None => Decision::Unlinked(LinkKind::UnlinkedNoThread),
        };
        for waiter in ws {
            self.emit(pid, &waiter.1, d, w, next_id, out);
        }
    }

    /// Emits the parked ops of records a lane just decided.
    pub(super) fn release(&mut self, pid: u32, decided: &[(u64, Decision)], next_id: &mut dyn FnMut() -> i64, out: &mut Vec<Row>) {
        for &(rec, d) in decided {
            if let Some(ws) = self.parked.remove(&(pid, rec)) {
                for waiter in ws {
                    let w = self.cpu_window(pid, &waiter.1);
                    self.emit(pid, &waiter.1, d, w, next_id, out);
                }
            }
        }
    }
}
