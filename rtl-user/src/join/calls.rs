//! Pairs entries with returns, per thread, into calls.
//!
//! Each thread (full 64-bit pid_tgid) has a stack of open calls: nested and recursive calls on
//! one thread pair LIFO, as uretprobes fire. A return matches the innermost open call of the
//! same API; calls above it (whose returns were lost to a ring-buffer drop) are closed as
//! `Unmatched`. Calls still open when their thread exits, the process execs, or the trace ends
//! are closed with that status: never leaked.

use std::collections::HashMap;

use rtl_common::{ApiEnter, MAX_ARGS};

use super::rows::CallStatus;

/// An entry waiting for its return.
#[derive(Debug, Clone)]
pub struct OpenCall {
    pub id: i64,
    pub api_id: u32,
    pub pid_tgid: u64,
    pub start: u64,
    pub args: [u64; MAX_ARGS],
    pub fsbase: u64,
    pub text: Option<String>,
}

/// A call with both ends (or closed by force).
#[derive(Debug, Clone)]
pub struct Call {
    pub open: OpenCall,
    pub end: u64,
    pub ret: Option<u64>,
    pub out: Option<u64>,
    pub status: CallStatus,
}

impl Call {
    pub fn pid(&self) -> u32 {
        (self.open.pid_tgid >> 32) as u32
    }
    pub fn tid(&self) -> u32 {
        self.open.pid_tgid as u32
    }
}

#[derive(Default)]
pub struct CallPairer {
    stacks: HashMap<u64, Vec<OpenCall>>,
    next_id: i64,
    /// Returns with no open call of that API on the thread (entry lost to a drop, or the
    /// probe attached while the call was in progress).
    pub orphan_returns: u64,
}

impl CallPairer {
    pub fn new() -> Self {
        Self { next_id: 1, ..Default::default() }
    }

    /// The id the next call will get (ids are the rocpd_api ids and correlation ids).
    pub fn next_id(&self) -> i64 {
        self.next_id
    }

    /// A fresh id for a row that is not a probed call (a profiler-only call).
    pub fn alloc_id(&mut self) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn enter(&mut self, e: &ApiEnter, text: Option<String>) -> i64 {
        let id = self.alloc_id();
        self.stacks.entry(e.hdr.pid_tgid).or_default().push(OpenCall {
            id,
            api_id: e.hdr.api_id,
            pid_tgid: e.hdr.pid_tgid,
            start: e.hdr.ts_ns,
            args: e.args,
            fsbase: e.fsbase,
            text,
        });
        id
    }

    /// The string argument of the innermost open call of `api_id` on `pid_tgid`, read at its
    /// return because the entry probe could not read it (its text is empty until then).
    pub fn late_text(&mut self, pid_tgid: u64, api_id: u32, text: String) {
        let open = self.stacks.get_mut(&pid_tgid).and_then(|s| s.iter_mut().rev().find(|c| c.api_id == api_id));
        if let Some(c) = open {
            if c.text.as_deref().is_none_or(str::is_empty) {
                c.text = Some(text);
            }
        }
    }

    /// A return of `api_id` on `pid_tgid` at `ts`. Completed calls go to `out`.
    pub fn exit(&mut self, pid_tgid: u64, api_id: u32, ts: u64, ret: u64, outv: Option<u64>, out: &mut Vec<Call>) {
        let Some(stack) = self.stacks.get_mut(&pid_tgid) else {
            self.orphan_returns += 1;
            return;
        };
        let Some(pos) = stack.iter().rposition(|c| c.api_id == api_id) else {
            self.orphan_returns += 1;
            return;
        };
        while stack.len() > pos + 1 {
            let open = stack.pop().expect("len checked");
            out.push(Call { open, end: ts, ret: None, out: None, status: CallStatus::Unmatched });
        }
        let open = stack.pop().expect("pos < len");
        out.push(Call { open, end: ts, ret: Some(ret), out: outv, status: CallStatus::Complete });
        if stack.is_empty() {
            self.stacks.remove(&pid_tgid);
        }
    }

    /// Closes every open call of one thread.
    pub fn close_thread(&mut self, pid_tgid: u64, ts: u64, status: CallStatus, out: &mut Vec<Call>) {
        if let Some(stack) = self.stacks.remove(&pid_tgid) {
            for open in stack.into_iter().rev() {
                let end = ts.max(open.start);
                out.push(Call { open, end, ret: None, out: None, status });
            }
        }
    }

    /// Closes every open call of every thread of process `pid`.
    pub fn close_process(&mut self, pid: u32, ts: u64, status: CallStatus, out: &mut Vec<Call>) {
        let threads: Vec<u64> = self.stacks.keys().copied().filter(|k| (k >> 32) as u32 == pid).collect();
        for t in threads {
            self.close_thread(t, ts, status, out);
        }
    }

    /// Closes everything (end of trace).
    pub fn close_all(&mut self, ts: u64, out: &mut Vec<Call>) {
        let threads: Vec<u64> = self.stacks.keys().copied().collect();
        for t in threads {
            self.close_thread(t, ts, CallStatus::TraceEnded, out);
        }
    }

    pub fn open_calls(&self) -> usize {
        self.stacks.values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtl_common::{EventHeader, EventKind};

    fn enter(p: &mut CallPairer, tid: u64, api: u32, ts: u64) -> i64 {
        let e = ApiEnter {
            hdr: EventHeader { kind: EventKind::ApiEnter as u32, api_id: api, pid_tgid: (1 << 32) | tid, ts_ns: ts },
            args: [0; MAX_ARGS],
            fsbase: 0,
        };
        p.enter(&e, None)
    }

    #[test]
    fn nested_and_recursive_calls_pair_lifo() {
        let mut p = CallPairer::new();
        let mut out = Vec::new();
        let a = enter(&mut p, 1, 5, 10);
        let b = enter(&mut p, 1, 5, 20); // recursion
        let c = enter(&mut p, 1, 6, 30); // nested other API
        p.exit((1 << 32) | 1, 6, 40, 0, None, &mut out);
        p.exit((1 << 32) | 1, 5, 50, 0, None, &mut out);
        p.exit((1 << 32) | 1, 5, 60, 0, None, &mut out);
        let got: Vec<(i64, u64, u64)> = out.iter().map(|c| (c.open.id, c.open.start, c.end)).collect();
        assert_eq!(got, vec![(c, 30, 40), (b, 20, 50), (a, 10, 60)]);
        assert!(out.iter().all(|c| c.status == CallStatus::Complete));
        assert_eq!(p.open_calls(), 0);
    }

    #[test]
    fn lost_inner_return_closes_inner_as_unmatched() {
        let mut p = CallPairer::new();
        let mut out = Vec::new();
        enter(&mut p, 1, 5, 10);
        enter(&mut p, 1, 6, 20);
        p.exit((1 << 32) | 1, 5, 50, 0, None, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].status, CallStatus::Unmatched);
        assert_eq!(out[1].status, CallStatus::Complete);
        p.exit((1 << 32) | 1, 9, 60, 0, None, &mut out);
        assert_eq!(p.orphan_returns, 1);
    }

    #[test]
    fn threads_are_independent_and_closing_works() {
        let mut p = CallPairer::new();
        let mut out = Vec::new();
        enter(&mut p, 1, 5, 10);
        enter(&mut p, 2, 5, 11);
        p.close_thread((1 << 32) | 1, 99, CallStatus::ThreadExited, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, CallStatus::ThreadExited);
        p.close_all(100, &mut out);
        assert_eq!(out[1].status, CallStatus::TraceEnded);
        assert_eq!(p.open_calls(), 0);
    }
}
