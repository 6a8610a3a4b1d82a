//! Finding and inspecting library files off the event loop, each step under a time limit.
//!
//! Finding libraries reads `/proc/PID/maps` of processes other users own, and inspecting one
//! reads a file they may control. Either can block: a maps read waits for the process's memory
//! map lock, which a thread stuck in a page fault on a hung file system (FUSE, NFS) holds; a
//! read of a file on such a file system waits for its server. None of that may stop the event
//! loop (signals, `--duration`, the ring buffer): the [`Scanner`] does it on a worker thread.
//! The loop submits jobs and takes results when they come; a step (one process's maps, one
//! file) that takes longer than [`STEP_LIMIT`] makes the scanner give that worker up (a thread
//! blocked in the kernel cannot be cancelled), never touch that process or file again, and
//! start a fresh worker for the jobs still to do. After [`MAX_STALLS`] stalls it stops scanning
//! (new library copies are then no longer found: said once, counted in the trace).

use std::collections::{HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::library::{self, LibKind, LibraryFile, Runtime};

/// Longest one step (one process's maps, one file's symbols) may take.
pub const STEP_LIMIT: Duration = Duration::from_secs(5);
/// Stalled workers after which the scanner stops.
pub const MAX_STALLS: u32 = 8;

/// Where to look for libraries.
#[derive(Clone, Debug)]
pub enum Find {
    /// What these processes map (`with_loader`: their dynamic loader too, for `run`).
    Mapped { pids: Vec<u32>, with_loader: bool },
    /// What any process on the node maps.
    Anywhere,
    /// The runtime's install paths (see [`library::installed_for`]).
    Installed { runtime: Runtime, ld_library_path: Option<String>, extra: Vec<PathBuf>, command: Option<String> },
    /// Files already opened (the agent).
    Opened(Vec<LibraryFile>),
    /// Test only: a step that blocks (a FIFO opened for reading, with no writer).
    #[cfg(test)]
    Stall(PathBuf),
}

/// What one job found.
#[derive(Debug, Default)]
pub struct ScanResult {
    pub id: u64,
    /// Inspected libraries not seen before, ready to attach.
    pub libs: Vec<LibraryFile>,
    /// For [`Find::Mapped`]: the kinds of libraries each process maps (or why its maps could not
    /// be read), whether seen before or not.
    pub mapped: Vec<(u32, Result<Vec<LibKind>, String>)>,
    /// Files that could not be inspected (each said once per inode).
    pub errors: Vec<String>,
    /// With [`Scanner::set_stacks`]: the executable mappings of the processes of
    /// [`Find::Mapped`], and the files among them not read before (`stacks/modules.rs`).
    pub maps: Vec<crate::stacks::ProcessMaps>,
}

/// Counts recorded in the trace's metadata.
#[derive(Debug, Default, Clone)]
pub struct ScanStats {
    pub jobs: u64,
    pub files_inspected: u64,
    pub files_refused: u64,
    /// Steps that exceeded [`STEP_LIMIT`] (each gave a worker up).
    pub stalls: u32,
}

impl ScanStats {
    /// The trace's metadata: what other users' processes and files made the scanner give up.
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        vec![("library_scan_stalls", self.stalls.to_string()), ("library_files_refused", self.files_refused.to_string())]
    }
}

/// What a worker is doing; what a stall blocks for good.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Maps(u32),
    File(u64, u64),
    Path(PathBuf),
}

#[derive(Default)]
struct Shared {
    /// The current step of the worker of each generation: (generation, step, started).
    step: Mutex<Option<(u64, Step, Instant)>>,
    /// Steps that stalled a worker: skipped from then on.
    blocked: Mutex<HashSet<Step>>,
    /// Files (device, inode) inspected already (handed over or refused): not read again.
    known: Mutex<HashSet<(u64, u64)>>,
    /// Read the mappings of [`Find::Mapped`]'s processes for their stacks too.
    stacks: std::sync::atomic::AtomicBool,
    /// Mapped files (device, inode) read for stacks already (or refused).
    known_modules: Mutex<HashSet<(u64, u64)>>,
}

struct Job {
    id: u64,
    finds: Vec<Find>,
}

pub struct Scanner {
    shared: Arc<Shared>,
    jobs: Option<std::sync::mpsc::Sender<Job>>,
    results_tx: UnboundedSender<(u64, ScanResult, ScanStats)>,
    results: UnboundedReceiver<(u64, ScanResult, ScanStats)>,
    /// Jobs submitted to the current worker and not answered yet.
    in_flight: VecDeque<(u64, Vec<Find>)>,
    /// Results taken while waiting for another job ([`Scanner::run_blocking`]).
    ready: VecDeque<ScanResult>,
    generation: u64,
    next_id: u64,
    pub stats: ScanStats,
    /// Set when the scanner gave up for good.
    pub stopped: bool,
}

impl Scanner {
    pub fn start() -> Result<Self> {
        let (results_tx, results) = unbounded_channel();
        let mut s = Self {
            shared: Arc::new(Shared::default()),
            jobs: None,
            results_tx,
            results,
            in_flight: VecDeque::new(),
            ready: VecDeque::new(),
            generation: 0,
            next_id: 1,
            stats: ScanStats::default(),
            stopped: false,
        };
        s.spawn_worker()?;
        Ok(s)
    }

    fn spawn_worker(&mut self) -> Result<()> {
        self.generation += 1;
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let (shared, out, generation) = (self.shared.clone(), self.results_tx.clone(), self.generation);
        std::thread::Builder::new()
            .name("rtl-scan".into())
            .spawn(move || {
                // Below the event loop: scanning is background work.
                // SAFETY: plain syscall on the calling thread.
                unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 15) };
                for job in rx {
                    let mut stats = ScanStats::default();
                    let r = run_job(&shared, generation, job, &mut stats);
                    if out.send((generation, r, stats)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| anyhow!("starting the library scanner thread: {e}"))?;
        self.jobs = Some(tx);
        Ok(())
    }

    /// Also read the processes' executable mappings for their stacks (`--stacks`).
    pub fn set_stacks(&self, on: bool) {
        self.shared.stacks.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Has it jobs not answered yet?
    /// The trace's metadata (see [`ScanStats::metadata`]).
    pub fn metadata(&self) -> Vec<(&'static str, String)> {
        self.stats.metadata()
    }

    pub fn busy(&self) -> bool {
        !self.in_flight.is_empty() || !self.ready.is_empty()
    }

    /// Queues a job; its result comes from [`Scanner::next`] (or at once, empty, when the
    /// scanner has stopped).
    pub fn submit(&mut self, finds: Vec<Find>) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.stats.jobs += 1;
        match &self.jobs {
            Some(tx) if !self.stopped => {
                if tx.send(Job { id, finds: finds.clone() }).is_ok() {
                    self.in_flight.push_back((id, finds));
                    return id;
                }
                self.ready.push_back(ScanResult { id, ..Default::default() });
            }
            _ => self.ready.push_back(ScanResult { id, ..Default::default() }),
        }
        id
    }

    /// The next result (cancel-safe: usable in `select!`).
    pub async fn next(&mut self) -> ScanResult {
        loop {
            if let Some(r) = self.ready.pop_front() {
                return r;
            }
            let Some((generation, r, stats)) = self.results.recv().await else {
                // Unreachable: we hold a sender ourselves.
                std::future::pending::<()>().await;
                unreachable!()
            };
            if let Some(r) = self.accept(generation, r, stats) {
                return r;
            }
        }
    }

    /// Takes a worker's answer: one from a worker given up (its jobs were resubmitted) is
    /// dropped.
    fn accept(&mut self, generation: u64, r: ScanResult, stats: ScanStats) -> Option<ScanResult> {
        if generation != self.generation {
            return None;
        }
        self.in_flight.retain(|(id, _)| *id != r.id);
        self.stats.files_inspected += stats.files_inspected;
        self.stats.files_refused += stats.files_refused;
        Some(r)
    }

    /// The watchdog (call it every few hundred ms): gives up a worker whose step has run past
    /// [`STEP_LIMIT`]. Returns what to tell the user.
    pub fn check(&mut self) -> Option<String> {
        let (step, since) = {
            let cur = self.shared.step.lock().unwrap_or_else(|e| e.into_inner());
            match &*cur {
                Some((g, step, since)) if *g == self.generation && since.elapsed() > STEP_LIMIT => (step.clone(), *since),
                _ => return None,
            }
        };
        self.stats.stalls += 1;
        self.shared.blocked.lock().unwrap_or_else(|e| e.into_inner()).insert(step.clone());
        let what = match &step {
            Step::Maps(pid) => format!("reading /proc/{pid}/maps"),
            Step::File(dev, ino) => format!("reading the library file (dev {dev:#x}, inode {ino})"),
            Step::Path(p) => format!("opening {}", p.display()),
        };
        let waited = since.elapsed().as_secs_f64();
        // The worker stays blocked in the kernel; its answer, if it ever comes, is dropped.
        self.jobs = None;
        let todo: Vec<(u64, Vec<Find>)> = self.in_flight.drain(..).collect();
        if self.stats.stalls >= MAX_STALLS || self.spawn_worker().is_err() {
            self.stopped = true;
            for (id, _) in todo {
                self.ready.push_back(ScanResult { id, ..Default::default() });
            }
            return Some(format!(
                "library scan: {what} has not returned after {waited:.0} s; {} stalls: no more library scans in this session \
                 (copies loaded from now on are not probed; counted in library_scan_stalls)",
                self.stats.stalls
            ));
        }
        for (id, finds) in todo {
            match &self.jobs {
                Some(tx) if tx.send(Job { id, finds: finds.clone() }).is_ok() => self.in_flight.push_back((id, finds)),
                _ => self.ready.push_back(ScanResult { id, ..Default::default() }),
            }
        }
        Some(format!("library scan: {what} has not returned after {waited:.0} s: skipped from now on (a hung file system?)"))
    }

    /// Submits a job and waits for its result, for at most the time limits allow (the
    /// watchdog runs meanwhile). The libraries of earlier jobs answered meanwhile come with it
    /// (a file is inspected and handed over once: whoever asked next must attach it).
    pub fn run_blocking(&mut self, finds: Vec<Find>, notices: &mut Vec<String>) -> ScanResult {
        let id = self.submit(finds);
        loop {
            if let Some(i) = self.ready.iter().position(|r| r.id == id) {
                let mut mine = self.ready.remove(i).unwrap_or_default();
                for other in self.ready.drain(..) {
                    mine.libs.extend(other.libs);
                    mine.errors.extend(other.errors);
                    mine.maps.extend(other.maps);
                }
                return mine;
            }
            match self.results.try_recv() {
                Ok((g, r, stats)) => {
                    if let Some(r) = self.accept(g, r, stats) {
                        self.ready.push_back(r);
                    }
                }
                Err(_) => {
                    notices.extend(self.check());
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
    }
}

/// Runs one job on the worker.
fn run_job(shared: &Shared, generation: u64, job: Job, stats: &mut ScanStats) -> ScanResult {
    let step = |s: Option<Step>| {
        *shared.step.lock().unwrap_or_else(|e| e.into_inner()) = s.map(|s| (generation, s, Instant::now()));
    };
    let blocked = |s: &Step| shared.blocked.lock().unwrap_or_else(|e| e.into_inner()).contains(s);
    let mut result = ScanResult { id: job.id, ..Default::default() };
    let mut found: Vec<LibraryFile> = Vec::new();
    for find in job.finds {
        match find {
            Find::Mapped { pids, with_loader } => {
                for pid in pids {
                    if blocked(&Step::Maps(pid)) {
                        result.mapped.push((pid, Err("its memory map could not be read in time before".into())));
                        continue;
                    }
                    step(Some(Step::Maps(pid)));
                    let r = if with_loader { library::mapped_by_with_loader(pid) } else { library::mapped_by(pid) };
                    match r {
                        Ok(v) => {
                            result.mapped.push((pid, Ok(v.iter().map(|l| l.kind).collect())));
                            found.extend(v);
                        }
                        Err(e) => result.mapped.push((pid, Err(format!("{e:#}")))),
                    }
                    if shared.stacks.load(std::sync::atomic::Ordering::Relaxed) {
                        result.maps.push(process_maps(shared, pid, &step, &blocked, &mut result.errors));
                    }
                }
            }
            Find::Anywhere => {
                for pid in library::all_pids() {
                    if blocked(&Step::Maps(pid)) {
                        continue;
                    }
                    step(Some(Step::Maps(pid)));
                    if let Ok(v) = library::mapped_by(pid) {
                        found.extend(v);
                    }
                }
            }
            Find::Installed { runtime, ld_library_path, extra, command } => {
                let s = Step::Path(PathBuf::from("(install paths)"));
                if !blocked(&s) {
                    step(Some(s));
                    found.extend(library::installed_for(runtime, ld_library_path.as_deref(), &extra, command.as_deref()));
                }
            }
            Find::Opened(v) => found.extend(v),
            #[cfg(test)]
            Find::Stall(p) => {
                let s = Step::Path(p.clone());
                if !blocked(&s) {
                    step(Some(s));
                    let _ = std::fs::File::open(&p);
                }
            }
        }
    }
    let mut seen = HashSet::new();
    for mut lib in found {
        let key = lib.key();
        if !seen.insert(key) || blocked(&Step::File(key.0, key.1)) {
            continue;
        }
        if !shared.known.lock().unwrap_or_else(|e| e.into_inner()).insert(key) {
            continue;
        }
        step(Some(Step::File(key.0, key.1)));
        match library::inspect(&lib) {
            Ok(i) => {
                stats.files_inspected += 1;
                lib.inspection = Some(Arc::new(i));
                result.libs.push(lib);
            }
            Err(e) => {
                stats.files_refused += 1;
                // One line: the path is another user's choice.
                result.errors.push(crate::term::escape(&format!("skipping {}: {e:#}", lib.display)).into_owned());
            }
        }
    }
    step(None);
    result
}

/// The executable mappings of `pid` and the files among them not read before, each read under
/// the step limit.
fn process_maps(
    shared: &Shared,
    pid: u32,
    step: &dyn Fn(Option<Step>),
    blocked: &dyn Fn(&Step) -> bool,
    errors: &mut Vec<String>,
) -> crate::stacks::ProcessMaps {
    use crate::stacks::modules::{exec_mappings, Module};
    let mut out = crate::stacks::ProcessMaps { pid, ..Default::default() };
    step(Some(Step::Maps(pid)));
    let Ok(found) = exec_mappings(pid) else { return out };
    for f in found {
        let key = f.mapping.key;
        if !blocked(&Step::File(key.0, key.1)) && shared.known_modules.lock().unwrap_or_else(|e| e.into_inner()).insert(key) {
            step(Some(Step::File(key.0, key.1)));
            match Module::read(&f.map_file, &f.display) {
                Ok(m) => out.modules.push(std::sync::Arc::new(m)),
                Err(e) => errors.push(crate::term::escape(&format!("stacks: not unwinding through {}: {e:#}", f.display)).into_owned()),
            }
        }
        out.mappings.push(f.mapping);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    /// A step that blocks forever (a FIFO nobody writes) is given up after the limit: the
    /// caller gets an answer, the next job runs on a fresh worker, and that step is skipped.
    #[test]
    fn a_stalled_step_is_given_up_and_skipped_later() {
        let d = std::env::temp_dir().join(format!("rtl-scan-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let mut s = Scanner::start().unwrap();
        let mut notes = Vec::new();
        let t = Instant::now();
        let me = std::process::id();
        let r = s.run_blocking(vec![Find::Stall(fifo.clone()), Find::Mapped { pids: vec![me], with_loader: false }], &mut notes);
        let took = t.elapsed();
        assert!(took >= STEP_LIMIT && took < STEP_LIMIT * 3, "{took:?}");
        assert_eq!(s.stats.stalls, 1);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("has not returned"), "{notes:?}");
        // The resubmitted job ran on the new worker, past the blocked step.
        assert_eq!(r.mapped.len(), 1, "{r:?}");
        assert!(r.mapped[0].1.is_ok());
        // Again: the FIFO is skipped at once.
        let t = Instant::now();
        let _ = s.run_blocking(vec![Find::Stall(fifo.clone())], &mut notes);
        assert!(t.elapsed() < STEP_LIMIT, "the blocked step ran again");
        assert_eq!(s.stats.stalls, 1);
        // Unblock the stuck worker so the test leaves no thread behind.
        let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&fifo);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
