//! What the trace says about a process (`rtl_process`): its executable, command line and parent.
//!
//! * A process that execs while traced (with `--all`, any exec on the node) is described by the
//!   kernel's own record of that exec (`task_exec`: the path given to exec, the new command line
//!   up to `EXEC_ARGS_LEN` bytes, the parent), kept here until the process makes its first call
//!   or exits. A short-lived process has usually left `/proc` by the time its first call is
//!   decoded: this is what names it.
//! * A process that was already running is read from `/proc`: the executable link and the parent
//!   at once (neither waits on the process), the command line (at most [`MAX_CMDLINE`] bytes) on
//!   a worker thread with a time limit, because reading another process's memory waits for its
//!   memory-map lock, which a thread stuck on a hung file system can hold indefinitely.
//! * A thread's name (`rtl_thread`) is read from `/proc/PID/task/TID/comm` when its first call is
//!   decoded (the kernel copies the 16-byte name under the task's lock: nothing the process does
//!   makes that read wait), and replaced by the name its exit record carries when it exits while
//!   traced (a thread gone before its first call was decoded is named that way too).

use std::collections::HashMap;
use std::io::Read;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

/// Longest command line read from /proc (bytes); longer ones end with " ...".
pub const MAX_CMDLINE: usize = 4096;
/// Processes whose exec record waits for their first call.
pub const MAX_PENDING_EXECS: usize = 16384;
/// Threads whose name is remembered as read (beyond: not named, counted).
pub const MAX_THREADS_NAMED: usize = 1 << 18;
/// Longest wait for one command line.
pub const CMDLINE_LIMIT: Duration = Duration::from_millis(250);
/// Command-line reads given up after which none is tried any more.
pub const MAX_CMDLINE_STALLS: u32 = 4;

/// A process as the trace names it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcInfo {
    pub exe: String,
    pub cmdline: String,
    pub ppid: Option<u32>,
}

/// Counts for the trace's metadata.
#[derive(Clone, Debug, Default)]
pub struct ProcStats {
    /// Processes named from their exec record.
    pub from_exec: u64,
    /// Processes named from /proc.
    pub from_proc: u64,
    /// Exec records not kept ([`MAX_PENDING_EXECS`] waiting already).
    pub execs_not_kept: u64,
    /// Command-line reads that took longer than [`CMDLINE_LIMIT`].
    pub cmdline_stalls: u32,
    /// Threads named from /proc (`rtl_thread`).
    pub threads_named: u64,
    /// Threads gone before their name could be read at their first call (named at their exit
    /// instead: `threads_named_at_exit`).
    pub threads_unnamed: u64,
    /// Thread names (of threads that made calls) from the kernel's thread-exit record.
    pub threads_named_at_exit: u64,
    /// Threads not named because [`MAX_THREADS_NAMED`] were already.
    pub threads_not_kept: u64,
}

impl ProcStats {
    /// The trace's metadata: how processes were named.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![
            ("processes_named_at_exec", self.from_exec.to_string()),
            ("processes_named_from_proc", self.from_proc.to_string()),
            ("exec_records_not_kept", self.execs_not_kept.to_string()),
            ("cmdline_read_stalls", self.cmdline_stalls.to_string()),
            ("threads_named", self.threads_named.to_string()),
            ("threads_unnamed", self.threads_unnamed.to_string()),
            ("threads_named_at_exit", self.threads_named_at_exit.to_string()),
            ("threads_not_named_over_limit", self.threads_not_kept.to_string()),
        ]
    }
}

/// The command-line worker: pids in, (pid, command line) out.
type CmdlineWorker = (Sender<u32>, Receiver<(u32, String)>);

#[derive(Default)]
pub struct ProcReader {
    execs: HashMap<u32, ProcInfo>,
    /// Threads already named (or tried), per process; forgotten when the process exits or execs.
    threads: HashMap<u32, std::collections::HashSet<u32>>,
    threads_seen: usize,
    worker: Option<CmdlineWorker>,
    pub stats: ProcStats,
}

impl ProcReader {
    /// The kernel's record of an exec by `pid`.
    pub fn at_exec(&mut self, pid: u32, info: ProcInfo) {
        if self.execs.len() >= MAX_PENDING_EXECS && !self.execs.contains_key(&pid) {
            self.stats.execs_not_kept += 1;
            return;
        }
        self.execs.insert(pid, info);
    }

    /// The process exited: its exec record is of no more use, its threads' names are written.
    pub fn forget(&mut self, pid: u32) {
        self.execs.remove(&pid);
        self.forget_threads(pid);
    }

    /// The process exec'd (its threads are gone, the main thread renamed) or exited.
    pub fn forget_threads(&mut self, pid: u32) {
        if let Some(t) = self.threads.remove(&pid) {
            self.threads_seen -= t.len();
        }
    }

    /// Whether `tid` of `pid` made a call the joiner saw (its name was taken or tried).
    pub fn is_named(&self, pid: u32, tid: u32) -> bool {
        self.threads.get(&pid).is_some_and(|t| t.contains(&tid))
    }

    /// A thread (not the main one) exited: its tid may come back as another thread.
    pub fn thread_exited(&mut self, pid: u32, tid: u32) {
        if self.threads.get_mut(&pid).is_some_and(|t| t.remove(&tid)) {
            self.threads_seen -= 1;
        }
    }

    /// `tid` of `pid` made a call: its name, the first time only (None: known already, gone, or
    /// over [`MAX_THREADS_NAMED`]).
    pub fn name_thread(&mut self, pid: u32, tid: u32) -> Option<String> {
        if self.threads.get(&pid).is_some_and(|t| t.contains(&tid)) {
            return None;
        }
        if self.threads_seen >= MAX_THREADS_NAMED {
            self.stats.threads_not_kept += 1;
            return None;
        }
        self.threads.entry(pid).or_default().insert(tid);
        self.threads_seen += 1;
        match read_comm(pid, tid) {
            Some(c) => {
                self.stats.threads_named += 1;
                Some(c)
            }
            None => {
                self.stats.threads_unnamed += 1;
                None
            }
        }
    }

    /// How to name `pid`, seen for the first time: its exec record, or /proc.
    pub fn describe(&mut self, pid: u32) -> ProcInfo {
        if let Some(i) = self.execs.remove(&pid) {
            self.stats.from_exec += 1;
            return i;
        }
        self.stats.from_proc += 1;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).map(|p| p.display().to_string()).unwrap_or_default();
        ProcInfo { exe, cmdline: self.cmdline(pid), ppid: read_ppid(pid) }
    }

    /// `pid`'s command line from /proc, on the worker, within [`CMDLINE_LIMIT`].
    fn cmdline(&mut self, pid: u32) -> String {
        if self.stats.cmdline_stalls >= MAX_CMDLINE_STALLS {
            return String::new();
        }
        if self.worker.is_none() {
            let (tx, rx) = channel::<u32>();
            let (otx, orx) = channel();
            let spawned = std::thread::Builder::new().name("rtl-cmdline".into()).spawn(move || {
                for pid in rx {
                    if otx.send((pid, read_cmdline(pid))).is_err() {
                        break;
                    }
                }
            });
            if spawned.is_err() {
                return String::new();
            }
            self.worker = Some((tx, orx));
        }
        let Some((tx, rx)) = &self.worker else { return String::new() };
        if tx.send(pid).is_err() {
            self.worker = None;
            return String::new();
        }
        let deadline = std::time::Instant::now() + CMDLINE_LIMIT;
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(std::time::Instant::now())) {
                Ok((p, text)) if p == pid => return text,
                Ok(_) => continue, // a late answer for a read given up before
                Err(_) => {
                    // The worker is stuck in the kernel: leave it, start another next time.
                    self.stats.cmdline_stalls += 1;
                    self.worker = None;
                    return String::new();
                }
            }
        }
    }
}

/// The command line in `/proc/PID/cmdline`, arguments joined by spaces, cut at [`MAX_CMDLINE`].
pub fn read_cmdline(pid: u32) -> String {
    let mut buf = Vec::new();
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/cmdline")) else { return String::new() };
    if f.take(MAX_CMDLINE as u64 + 1).read_to_end(&mut buf).is_err() {
        return String::new();
    }
    let cut = buf.len() > MAX_CMDLINE;
    buf.truncate(MAX_CMDLINE);
    join_args(&buf, cut)
}

/// NUL-separated argument strings as one line; " ..." when cut.
pub fn join_args(bytes: &[u8], cut: bool) -> String {
    let mut s = bytes.split(|&c| c == 0).filter(|s| !s.is_empty()).map(String::from_utf8_lossy).collect::<Vec<_>>().join(" ");
    if cut {
        s.push_str(" ...");
    }
    s
}

/// `/proc/PID/task/TID/comm`: at most 64 bytes read (the kernel's name is 15), the newline
/// dropped; None when the thread is gone.
pub fn read_comm(pid: u32, tid: u32) -> Option<String> {
    let f = std::fs::File::open(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    let mut buf = Vec::with_capacity(64);
    f.take(64).read_to_end(&mut buf).ok()?;
    if buf.last() == Some(&b'\n') {
        buf.pop();
    }
    Some(String::from_utf8_lossy(&buf).into_owned())
}

fn read_ppid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find_map(|l| l.strip_prefix("PPid:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_records_come_first_and_are_bounded() {
        let mut r = ProcReader::default();
        let me = std::process::id();
        let mine = r.describe(me);
        assert!(mine.exe.ends_with(std::env::current_exe().unwrap().file_name().unwrap().to_str().unwrap()), "{mine:?}");
        assert!(!mine.cmdline.is_empty() && mine.ppid.is_some());
        let rec = ProcInfo { exe: "/bin/true".into(), cmdline: "true x".into(), ppid: Some(1) };
        r.at_exec(me, rec.clone());
        assert_eq!(r.describe(me), rec);
        assert_eq!((r.stats.from_exec, r.stats.from_proc), (1, 1));
        for pid in 0..MAX_PENDING_EXECS as u32 + 10 {
            r.at_exec(pid + 1_000_000, rec.clone());
        }
        assert_eq!(r.stats.execs_not_kept, 10);
        assert_eq!(join_args(b"a\0b c\0\0", true), "a b c ...");
    }

    #[test]
    fn a_thread_is_named_once_by_its_own_name() {
        let mut r = ProcReader::default();
        let me = std::process::id();
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("rtl-named-test".into())
            .spawn(move || {
                // SAFETY: gettid has no arguments.
                tx.send(unsafe { libc::gettid() } as u32).unwrap();
                done_rx.recv().unwrap();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        assert_eq!(r.name_thread(me, tid).as_deref(), Some("rtl-named-test"));
        assert_eq!(r.name_thread(me, tid), None, "named once");
        done_tx.send(()).unwrap();
        t.join().unwrap();
        assert_eq!(r.name_thread(me, u32::MAX - 1), None, "a thread that does not exist");
        assert_eq!((r.stats.threads_named, r.stats.threads_unnamed), (1, 1));
        r.forget(me);
        assert_eq!(r.threads_seen, 0);
    }
}
