//! Deciding an op's call: by its lane's numbering (correlation / sequence) or by time.

use super::*;

/// The profiler's timing of an op's call on the trace clock (`cs`..`ce`), and the tolerance a
/// call's probe times are given around it.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuWindow {
    pub(super) cs: u64,
    pub(super) ce: u64,
    pub(super) tol: u64,
}

/// How one API record was decided (all its ops share it).
#[derive(Debug, Clone, Copy)]
pub(super) enum Decision {
    Call(i64, LinkKind),
    Unlinked(LinkKind),
}

impl GpuJoiner {
    /// The profiler's timing of the op's call on the trace clock, and the tolerance.
    pub(super) fn cpu_window(&self, pid: u32, op: &GpuOp) -> CpuWindow {
        // HSA ops carry the submission instant instead (inside the launching call, same thread,
        // CLOCK_MONOTONIC = the probes' clock): contained without slack, or a call that starts
        // right after the launch returned would make it ambiguous.
        let submit = op.flags & agent::OP_SUBMIT_TIME != 0;
        let (cs, ce) = (self.to_trace_clock(pid, op.cpu_clock, op.cpu_start_ns), self.to_trace_clock(pid, op.cpu_clock, op.cpu_end_ns));
        let tol = if submit && op.flags & agent::OP_HAS_CPU_TIMES == 0 { 0 } else { self.offset(pid).1 + SLACK_NS };
        CpuWindow { cs, ce, tol }
    }

    pub(super) fn offset(&self, pid: u32) -> (i64, u64) {
        self.procs.get(&pid).and_then(|p| p.clock).unwrap_or((self.fallback_offset, 0))
    }

    pub(super) fn to_trace_clock(&self, pid: u32, domain: u8, t: u64) -> u64 {
        match ClockDomain::from_u8(domain) {
            Some(ClockDomain::Realtime) => (t as i64 - self.offset(pid).0).max(0) as u64,
            // Monotonic and HSA system time (CLOCK_MONOTONIC-based on Linux) need no change.
            _ => t,
        }
    }

    /// Links (or, if `give_up`, writes unlinked) one operation; says how it waits otherwise.
    /// `all_in`: every event of the trace has been seen.
    pub(super) fn try_link(
        &mut self,
        w: &Waiter,
        next_id: &mut dyn FnMut() -> i64,
        out: &mut Vec<Row>,
        all_in: bool,
        give_up: bool,
    ) -> Try {
        let (pid, op) = (w.0, &w.1);
        let win = self.cpu_window(pid, op);
        // CLR and CUPTI ops name their API record (record index / correlation id); HSA ops do not.
        let identity = matches!(Source::from_u8(op.source), Some(Source::Clr | Source::Cupti)) && op.flags & agent::OP_HAS_CPU_TIMES != 0;
        if identity {
            if let Some(&d) = self.procs.get(&pid).and_then(|p| p.decided.get(&op.record_index)) {
                self.emit(pid, op, d, win, next_id, out);
                return Try::Done;
            }
            if !give_up && self.parked.contains_key(&(pid, op.record_index)) {
                return Try::Parked; // the record's other ops wait in its lane already
            }
        }
        let by_number = op.source == Source::Clr as u8
            && op.flags & (agent::OP_HAS_THREAD_SEQ | agent::OP_HAS_THREAD_HASH | agent::OP_HAS_CPU_TIMES)
                == agent::OP_HAS_THREAD_SEQ | agent::OP_HAS_THREAD_HASH | agent::OP_HAS_CPU_TIMES
            && self.procs.get(&pid).is_some_and(|p| !p.lanes.is_empty() && !p.lanes_full && p.strings.contains_key(&op.api_name_id));
        let decision = if by_number {
            // Every call of the thread that entered before the record's call ended must be in.
            let ready = win.ce.saturating_add(READY_NS);
            if !(all_in || give_up || self.now >= ready) {
                return Try::NotBefore(ready);
            }
            let (mine, others) = self.decide_by_number(pid, op, win, give_up);
            self.release(pid, &others, next_id, out);
            match mine {
                Some(d) => d,
                None => return Try::Parked,
            }
        } else {
            match self.decide_by_time(pid, op, win, identity, give_up) {
                Some(d) => d,
                None => return Try::Later,
            }
        };
        if identity {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.remember(&mut self.bounds.decisions, op.record_index, decision);
            }
        }
        self.emit(pid, op, decision, win, next_id, out);
        Try::Done
    }

    /// The sequence join (see [`crate::join::sequence`]): this record's decision (None: it waits in
    /// its lane) and those of other records of the lane it settled.
    pub(super) fn decide_by_number(
        &mut self,
        pid: u32,
        op: &GpuOp,
        w: CpuWindow,
        give_up: bool,
    ) -> (Option<Decision>, Vec<(u64, Decision)>) {
        let CpuWindow { cs, ce, tol } = w;
        let probes_since = self.probes_since;
        let Some(p) = self.procs.get_mut(&pid) else { return (Some(Decision::Unlinked(LinkKind::UnlinkedNoThread)), Vec::new()) };
        let Some(name) = p.strings.get(&op.api_name_id).cloned() else {
            return (Some(Decision::Unlinked(LinkKind::UnlinkedNoCall)), Vec::new());
        };
        let anchor = p.anchor.filter(|&(lo, _)| lo > probes_since);
        let seen_thread = p.progress.contains_key(&op.thread_id);
        let Some(lane) = p.lanes.get_mut(&(op.thread_id, name)) else {
            // Every call of the thread that entered before the record's call ended is in: the
            // call was not traced (or the thread never was).
            let why = if seen_thread { LinkKind::UnlinkedNoCall } else { LinkKind::UnlinkedNoThread };
            return (Some(Decision::Unlinked(why)), Vec::new());
        };
        let q = Query { record: op.record_index, seq: op.thread_seq, epoch: op.seq_epoch, cs, ce, tol };
        let placement = lane.place(&q, anchor, &mut self.stats.sequence);
        let mut decided: Vec<(u64, Decision)> = lane
            .take_orphans()
            .into_iter()
            .filter(|w| w.record != op.record_index)
            .map(|w| (w.record, by_time_in(lane, w.record, w.cs, w.ce, w.tol)))
            .collect();
        let mine = match placement {
            Placement::Linked { id, kind, resolved } => {
                decided.extend(resolved.into_iter().map(|(r, cid)| (r, Decision::Call(cid, kind))));
                Some(Decision::Call(id, kind))
            }
            Placement::Open if give_up => {
                lane.forget_waiting(op.record_index);
                Some(by_time_in(lane, op.record_index, cs, ce, tol))
            }
            Placement::Open => None,
            Placement::Broken => Some(by_time_in(lane, op.record_index, cs, ce, tol)),
            Placement::NoWindow => Some(Decision::Unlinked(LinkKind::UnlinkedNoCall)),
        };
        for &(r, d) in &decided {
            p.remember(&mut self.bounds.decisions, r, d);
        }
        (mine, decided)
    }

    /// The time join; None: wait.
    pub(super) fn decide_by_time(&mut self, pid: u32, op: &GpuOp, w: CpuWindow, identity: bool, give_up: bool) -> Option<Decision> {
        let CpuWindow { cs, ce, tol } = w;
        let submit = op.flags & agent::OP_SUBMIT_TIME != 0;
        let has_cpu = op.flags & agent::OP_HAS_CPU_TIMES != 0 || submit;
        let Some(p) = self.procs.get_mut(&pid) else {
            return give_up.then_some(Decision::Unlinked(LinkKind::UnlinkedNoThread));
        };
        let api_name = p.strings.get(&op.api_name_id).cloned();
        let cupti = op.source == agent::Source::Cupti as u8;
        let fam = api_name.as_deref().and_then(cupti_family);
        let same_thread = |c: &IndexedCall| {
            if op.flags & agent::OP_TID_KNOWN != 0 && c.tid != op.tid {
                return false;
            }
            if op.flags & agent::OP_HAS_THREAD_HASH != 0 {
                if let Some(h) = c.thread_hash {
                    return h == op.thread_id;
                }
            }
            true
        };
        let mut found: Option<usize> = None;
        let mut ambiguous = false;
        let mut newest_end = 0u64;
        for (i, c) in p.calls.iter().enumerate().rev() {
            // Whether the op's own call may still be open: with the submitting thread known,
            // only that thread's calls say so (another thread's later call does not close it:
            // a synchronous hipMemcpy's copy is published while the call still waits for it).
            if op.flags & agent::OP_TID_KNOWN == 0 || c.tid == op.tid {
                newest_end = newest_end.max(c.end);
            }
            if has_cpu && c.end + tol < cs {
                break; // calls are in completion order; older ones cannot contain it
            }
            let contains = c.start <= cs + tol && ce <= c.end + tol;
            let nested = cupti && cs <= c.start + tol && c.end <= ce + tol;
            if has_cpu && !(contains || nested) {
                continue;
            }
            if !same_thread(c) {
                continue;
            }
            if let Some(n) = &api_name {
                let same = n.as_ref() == c.name.as_ref();
                if !same && !(cupti && fam.is_some() && fam == cupti_family(&c.name)) {
                    continue;
                }
            }
            if identity && p.claimed.get(&c.id).is_some_and(|&r| r != op.record_index) {
                continue; // another record's call
            }
            if found.is_some() {
                ambiguous = true;
                break;
            }
            found = Some(i);
            if !has_cpu {
                break;
            }
        }
        if ambiguous {
            // Another record may still take one of them (its ops not in yet): wait, for records
            // that can claim; HSA ops cannot.
            return (!identity || give_up).then_some(Decision::Unlinked(LinkKind::UnlinkedAmbiguous));
        }
        match found {
            Some(i) => {
                let id = p.calls[i].id;
                if identity {
                    p.claimed.insert(id, op.record_index);
                }
                Some(Decision::Call(id, LinkKind::Time))
            }
            // The call may still be open (its return not decoded yet): wait, unless told not to.
            None if !give_up && (!has_cpu || newest_end < ce) => None,
            None => {
                let seen = p.calls.iter().any(same_thread);
                Some(Decision::Unlinked(if seen { LinkKind::UnlinkedNoCall } else { LinkKind::UnlinkedNoThread }))
            }
        }
    }
}

/// Families of CUDA calls that put work on a GPU queue, for CUPTI's runtime-level records:
/// `cudaLaunchKernel_v7000` and `cuLaunchKernel_ptsz` are both launches.
pub fn cupti_family(name: &str) -> Option<u8> {
    let base = name.strip_prefix("cuda").or_else(|| name.strip_prefix("cu"))?;
    if base.starts_with("GraphLaunch") {
        Some(1)
    } else if base.starts_with("Launch") {
        Some(2)
    } else if base.starts_with("Memcpy") {
        Some(3)
    } else if base.starts_with("Memset") {
        Some(4)
    } else {
        None
    }
}

/// Time alone within a lane (the records a sequence could not place).
pub(super) fn by_time_in(lane: &mut Lane, record: u64, cs: u64, ce: u64, tol: u64) -> Decision {
    match lane.by_time(record, cs, ce, tol) {
        Ok(id) => Decision::Call(id, LinkKind::Time),
        Err(0) => Decision::Unlinked(LinkKind::UnlinkedNoCall),
        Err(_) => Decision::Unlinked(LinkKind::UnlinkedAmbiguous),
    }
}
