//! rtl-agent: the in-process half of rtl-ebpf's GPU timing.
//!
//! Loaded with `LD_PRELOAD=.../librtl_agent.so` (an ELF constructor starts it) or
//! `HSA_TOOLS_LIB=.../librtl_agent.so` (the HSA runtime calls [`hsa::OnLoad`]). It finds the
//! libamdhip64 already loaded in the process (never loads one), turns on the runtime's built-in
//! profiler (`hipProfiler*Ext`, see [`clr`]) or, on stock ROCm and loaded as an HSA tool,
//! captures dispatch times by HSA signal capture (see [`hsa`]), converts what it gets to the wire
//! format of `rtl_common::agent` and hands batches to the collector by calling [`rtl_agent_publish`], a
//! no-op exported function the collector uprobes (it copies the bytes with
//! bpf_probe_read_user). No sockets, files or shared memory: nothing to clean up.
//!
//! # Exported symbols
//! * `rtl_agent_publish(const uint8_t *data, uint64_t len)`: the hand-off (the uprobe target).
//! * `OnLoad` / `OnUnload`: the HSA tools interface ([`hsa`]).
//!
//! # Environment
//! See [`config`]: `RTL_AGENT_GPU`, `RTL_AGENT_DRAIN_MS`, `RTL_AGENT_WAIT_MS`, `RTL_AGENT_QUIET`,
//! `RTL_AGENT_GRAPH_NODES` (`RTL_AGENT_HSA_BATCHES`), `RTL_AGENT_HSA_SPANS`, `RTL_AGENT_HSA_COPIES`, `RTL_AGENT_DUMP`. Nothing else is read (plus `LD_PRELOAD` and
//! `HSA_TOOLS_LIB`, only to learn how the agent itself was loaded).
//!
//! # Never harming the process
//! * Every `extern "C"` entry (constructor, destructor, fork handlers, TLS/atexit handlers, the
//!   profiler callback, OnLoad/OnUnload) runs inside `catch_unwind`; the crate is built with
//!   `panic = "unwind"` (a preloaded library must not abort its host).
//! * Fixed memory: a bounded lock-free queue and string table ([`publish`]); when the publisher
//!   falls behind, ops are dropped and counted, application threads never wait.
//! * The publisher thread blocks every signal, so process-directed signals reach the application.
//! * Without the API (stock ROCm) one warning is printed and nothing else happens.
//!
//! # Shutdown order (why not `atexit`)
//! The final flush (Disable, which drains pending GPU work, then drain, publish, final counters)
//! must run while libamdhip64 is still intact. `exit()` runs, in order: (1) the exiting thread's
//! TLS destructors (`__cxa_thread_atexit_impl`), (2) `atexit`/`__cxa_atexit` handlers in reverse
//! order of registration, (3) `_dl_fini`: `.fini_array` of every object, dependents first.
//! The HIP runtime registers its own teardown (C++ static destructors of lazily built singletons)
//! with `__cxa_atexit` whenever it first builds them, i.e. at an unknown time *after* any agent
//! constructor ran: a flush registered with `atexit` from the agent's constructor runs after the
//! runtime has torn itself down (the bug found in an earlier consumer). So the agent flushes from,
//! whichever comes first:
//! 1. a TLS destructor registered on the main thread by the constructor: it runs at the very
//!    start of `exit()` / return from `main`, before every atexit handler, whatever their order;
//! 2. an `atexit` handler registered when profiling is enabled (after the runtime's init-time
//!    handlers, so before them; covers `exit()` from another thread);
//! 3. the `.fini_array` destructor (before libamdhip64's own `.fini_array`: the agent does not
//!    depend on it; covers dlclose and the remaining paths);
//! 4. `OnUnload` (HSA tool mode; flushes the queue only, no call into the runtime);
//! 5. the application's own `_exit()` / `_Exit()`, which the agent interposes (forked workers
//!    commonly end with `_exit`): flush, then `exit_group` exactly like glibc's `_exit`. Skipped
//!    in a vfork child (pid differs from the agent's: it shares the parent's memory).
//!
//! The flush is idempotent, and the runtime part of it (Disable + last drain) runs on a helper
//! thread waited for at most 9 s (3 s in a forked child), so a wedged runtime cannot hang the
//! exit. `quick_exit()`, `exit_group` by other means and fatal signals skip all of them.
//! Limitation: the main thread calling `pthread_exit` while other threads go on also runs (1),
//! ending GPU capture early.
//!
//! # fork
//! `pthread_atfork`: the child resets the queue, counters and sequence numbers, marks strings
//! unsent (the collector keys them by pid; `batch_seq` restarts at 0), and restarts the
//! publisher thread. The child's runtime is a copy of its parent's, so records whose API call
//! started before the fork (CLOCK_REALTIME, the profiler's clock) are the parent's and are
//! skipped; the child's own records (a worker forked before HIP was initialised, the pattern
//! ROCm supports) are captured. A child still waiting for libamdhip64 keeps waiting and
//! activates on its own.

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering::*};
use std::sync::OnceLock;

use rtl_common::agent as wire;

pub mod clock;
pub mod clr;
pub mod config;
pub mod cupti;
pub mod hsa;
pub mod loaded;
pub mod publish;
pub mod thread_seq;

use config::{Config, GpuSource};
use publish::INFO;

// ---------------------------------------------------------------------------------------------
// The hand-off.

/// The collector's uprobe target. A no-op: the collector's eBPF program reads `len` bytes (at
/// most `AGENT_BATCH_MAX`) at `data` on entry. Written in assembly so that nothing can remove it
/// or its calls, and so that its first instruction is `push %rbp`, which uprobes emulate without
/// single-stepping (~0.8 us per hit instead of ~15 us for e.g. a `lea`; measured.md).
/// Naked functions are never inlined (`#[inline(never)]` is implied and not allowed on them).
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[unsafe(no_mangle)]
pub extern "C" fn rtl_agent_publish(data: *const u8, len: u64) {
    core::arch::naked_asm!("push rbp", "mov rbp, rsp", "pop rbp", "ret")
}

#[cfg(not(target_arch = "x86_64"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn rtl_agent_publish(data: *const u8, len: u64) {
    core::hint::black_box((data, len));
    std::sync::atomic::compiler_fence(SeqCst);
}

// ---------------------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------------------
// State.

const IDLE: u8 = 0;
const STARTING: u8 = 1;
const WAITING: u8 = 2;
const ACTIVE: u8 = 3;
const INACTIVE: u8 = 4;
const DONE: u8 = 5;

static PHASE: AtomicU8 = AtomicU8::new(IDLE);
static CONFIG: OnceLock<Config> = OnceLock::new();
/// Futex word: 1 asks the publisher thread to stop.
static STOP: AtomicU32 = AtomicU32::new(0);
static THREAD_RUNNING: AtomicBool = AtomicBool::new(false);
static SHUTDOWN_STARTED: AtomicBool = AtomicBool::new(false);
static DUPLICATE: AtomicBool = AtomicBool::new(false);
static ONCE_HOOKS: AtomicBool = AtomicBool::new(false);
static ONCE_ATEXIT: AtomicBool = AtomicBool::new(false);
static WARNED_API: AtomicBool = AtomicBool::new(false);
/// HSA_TOOLS_LIB names this library.
static HSA_TOOL_NAMED: AtomicBool = AtomicBool::new(false);

fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_env().0)
}

pub(crate) fn config_ref() -> &'static Config {
    config()
}

/// One line on stderr, unless RTL_AGENT_QUIET.
pub(crate) fn say(msg: &str) {
    if config().quiet {
        return;
    }
    let s = format!("rtl-agent[{}]: {msg}\n", std::process::id());
    // SAFETY: valid buffer; a short or failed write to stderr is ignored.
    unsafe { libc::write(2, s.as_ptr() as *const c_void, s.len()) };
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    Ctor,
    HsaOnLoad,
    CudaInjection,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    MainThreadExit,
    Atexit,
    Fini,
    HsaOnUnload,
    UnderscoreExit,
}

pub(crate) fn is_duplicate() -> bool {
    DUPLICATE.load(Relaxed)
}

/// RTL_AGENT_GPU=hsa and this copy is the active agent.
pub(crate) fn hsa_requested() -> bool {
    if is_duplicate() || !in_shared_object() {
        return false;
    }
    let want = match config().gpu {
        GpuSource::Hsa => true,
        // auto prefers hipProfiler*Ext: HSA capture only when the loaded runtime lacks it (or
        // this is an HSA program without libamdhip64).
        GpuSource::Auto => {
            SOURCE.load(Acquire) == SRC_NONE
                // SAFETY: handle from dlopen(RTLD_NOLOAD), never closed.
                && clr::find_loaded_hip().is_none_or(|(h, _)| unsafe { clr::resolve(h) }.is_none())
        }
        _ => false,
    };
    want && SOURCE.compare_exchange(SRC_NONE, SRC_HSA, AcqRel, Acquire).is_ok()
}

/// Which source took the process: CLR (activate) or HSA (OnLoad), decided once.
static SOURCE: AtomicU8 = AtomicU8::new(SRC_NONE);
const SRC_NONE: u8 = 0;
const SRC_CLR: u8 = 1;
const SRC_HSA: u8 = 2;
const SRC_CUPTI: u8 = 3;
/// CUDA_INJECTION64_PATH names this library: CUPTI starts from InitializeInjection (inside cuInit).
static CUDA_INJECTION_NAMED: AtomicBool = AtomicBool::new(false);

/// RTL_AGENT_GRAPH_NODES (`run --graph-nodes`): every node of every graph replay timed too
/// (HSA: capture inside multi-packet batches; CUPTI: per-node kernel records).
pub(crate) fn graph_nodes() -> bool {
    config().graph_nodes
}

/// RTL_AGENT_HSA_SPANS=0: no span around graph replays.
pub(crate) fn hsa_spans() -> bool {
    !config().hsa_no_spans
}

/// RTL_AGENT_HSA_COPIES=forward: DMA copies on a pool signal, their completion forwarded.
pub(crate) fn hsa_copies_forward() -> bool {
    config().hsa_copies_forward
}

/// Signal capture installed (from OnLoad).
pub(crate) fn hsa_active() {
    INFO.source.store(wire::Source::Hsa as u8, Relaxed);
    INFO.captures.store(hsa::captures(), Relaxed);
    INFO.status.store(wire::Status::Active as u8, Relaxed);
    publish::set_gpu_clock(wire::ClockDomain::HsaSystem, Some(hsa::system_ns));
    PHASE.store(ACTIVE, Release);
    if !ONCE_ATEXIT.swap(true, Relaxed) {
        // SAFETY: a plain function pointer.
        unsafe { libc::atexit(at_exit) };
    }
    if !THREAD_RUNNING.load(Acquire) {
        spawn_publisher();
    }
    publish::publish_meta(0);
}

/// Signal capture could not be installed.
pub(crate) fn hsa_failed(why: &str) {
    INFO.status.store(wire::Status::Unsupported as u8, Relaxed);
    say(&format!("HSA signal capture not installed ({why}); queues are left alone, no GPU times"));
    publish::publish_meta(0);
}

/// Waits on `word` while it equals `val`, at most `ms`.
pub(crate) fn futex_wait(word: &AtomicU32, val: u32, ms: u64) {
    let ts = libc::timespec { tv_sec: (ms / 1000) as i64, tv_nsec: ((ms % 1000) * 1_000_000) as i64 };
    // SAFETY: futex on a static word with a timeout.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, val, &ts as *const _);
    }
}

/// Spawns an agent thread with every signal blocked (set before creation: no window).
pub(crate) fn spawn_blocking_signals(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    // SAFETY: plain sigset manipulation.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = std::thread::Builder::new().name(name.into()).stack_size(256 << 10).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r.map(|_| ())
    }
}

/// Path of the object this code lives in (None: not found).
fn own_object() -> Option<(String, usize)> {
    // SAFETY: dladdr on our own function; the name lives as long as the object.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(rtl_agent_publish as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some((CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned(), info.dli_fbase as usize))
    }
}

/// True when this code is in a shared object (the cdylib), false when the rlib was linked
/// into an executable (the collector appends it with `env_list::append`): then the agent stays off.
fn in_shared_object() -> bool {
    let Some((path, base)) = own_object() else { return false };
    // SAFETY: getauxval has no preconditions.
    let exe_phdr = unsafe { libc::getauxval(libc::AT_PHDR) } as usize;
    let name = path.rsplit('/').next().unwrap_or("");
    (name.contains(".so")) && !(exe_phdr >= base && exe_phdr < base + 4096)
}

fn same_file(a: &OsStr, b: &OsStr) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Whether LD_PRELOAD names this library.
fn preloaded(own: &str) -> bool {
    let Some(v) = std::env::var_os("LD_PRELOAD") else { return false };
    let own_base = own.rsplit('/').next().unwrap_or(own);
    v.as_bytes().split(|&c| c == b':' || c.is_ascii_whitespace()).filter(|e| !e.is_empty()).any(|e| {
        let e = OsStr::from_bytes(e);
        if e.as_bytes().contains(&b'/') {
            same_file(e, OsStr::new(own))
        } else {
            e.as_bytes() == own_base.as_bytes()
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Start.

pub(crate) fn start(trigger: Trigger) {
    if PHASE.compare_exchange(IDLE, STARTING, AcqRel, Acquire).is_err() {
        return;
    }
    if !in_shared_object() {
        PHASE.store(INACTIVE, Release);
        return;
    }
    publish::PID.store(std::process::id(), Relaxed);
    let (cfg, warnings) = Config::from_env();
    let _ = CONFIG.set(cfg);
    for w in warnings {
        say(&w);
    }
    let cfg = config();
    if let Some(path) = &cfg.dump {
        let mut p = path.as_bytes().to_vec();
        p.push(0);
        // SAFETY: NUL-terminated path.
        let fd =
            unsafe { libc::open(p.as_ptr() as *const c_char, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC, 0o644) };
        if fd < 0 {
            say(&format!("RTL_AGENT_DUMP: cannot open {path:?}: {}", std::io::Error::last_os_error()));
        }
        publish::DUMP_FD.store(fd, Relaxed);
    }
    let own = own_object().map(|o| o.0).unwrap_or_default();
    if preloaded(&own) {
        INFO.mode.fetch_or(wire::MODE_PRELOAD, Relaxed);
    }
    // Another copy of the agent (a different file) already global in this process: stand down.
    // SAFETY: dlsym with RTLD_DEFAULT.
    let other = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"rtl_agent_publish".as_ptr()) };
    if !other.is_null() && !std::ptr::eq(other as *const (), rtl_agent_publish as *const ()) {
        DUPLICATE.store(true, Relaxed);
        PHASE.store(INACTIVE, Release);
        return;
    }
    let tools = std::env::var("HSA_TOOLS_LIB").unwrap_or_default();
    let own_base = own.rsplit('/').next().unwrap_or(&own).to_string();
    let named =
        tools.split_ascii_whitespace().any(|e| if e.contains('/') { same_file(OsStr::new(e), OsStr::new(&own)) } else { e == own_base });
    HSA_TOOL_NAMED.store(named, Relaxed);
    let inj = std::env::var("CUDA_INJECTION64_PATH").unwrap_or_default();
    let inj_named = !inj.is_empty() && (same_file(OsStr::new(&inj), OsStr::new(&own)) || inj == own_base);
    CUDA_INJECTION_NAMED.store(inj_named, Relaxed);
    match cfg.gpu {
        GpuSource::Cupti => {
            INFO.source.store(wire::Source::Cupti as u8, Relaxed);
            install_hooks();
            if trigger == Trigger::CudaInjection {
                activate_cupti();
                return;
            }
            // Loaded through CUDA_INJECTION64_PATH: the driver calls InitializeInjection inside
            // cuInit, in CUDA processes only. Preloaded only: the publisher thread waits for
            // libcuda to be mapped (libcupti is never loaded into a process without CUDA).
            let _ = PHASE.compare_exchange(STARTING, WAITING, AcqRel, Acquire);
            if !inj_named {
                spawn_publisher();
            }
            return;
        }
        GpuSource::None => {
            INFO.status.store(wire::Status::Disabled as u8, Relaxed);
            PHASE.store(INACTIVE, Release);
            publish::publish_meta(0);
            return;
        }
        GpuSource::Hsa => {
            // Signal capture starts in OnLoad, when the HSA runtime loads this library as a tool.
            INFO.source.store(wire::Source::Hsa as u8, Relaxed);
            INFO.status.store(wire::Status::Unsupported as u8, Relaxed);
            install_hooks();
            PHASE.store(INACTIVE, Release);
            if !HSA_TOOL_NAMED.load(Relaxed) {
                say(&format!("RTL_AGENT_GPU=hsa needs the agent in HSA_TOOLS_LIB (HSA_TOOLS_LIB={own}); no GPU times"));
                publish::publish_meta(0);
            }
            return;
        }
        GpuSource::Auto | GpuSource::Clr => {}
    }
    install_hooks();
    // Preloaded: libamdhip64 (a dependency of the program) was initialised before this
    // constructor, so enable now and miss nothing. Loaded by dlopen (HSA_TOOLS_LIB, inside
    // hsa_init under the HIP runtime's own initialisation): leave it to the publisher thread.
    if trigger == Trigger::Ctor && INFO.mode.load(Relaxed) & wire::MODE_PRELOAD != 0 {
        if let Some((h, name)) = clr::find_loaded_hip() {
            activate(h, name);
        }
    }
    let _ = PHASE.compare_exchange(STARTING, WAITING, AcqRel, Acquire);
    if matches!(PHASE.load(Acquire), WAITING | ACTIVE) {
        spawn_publisher();
    }
}

/// Resolves and enables the CLR source on the loaded runtime `h`.
fn activate(h: *mut c_void, name: &CStr) {
    // SAFETY: h comes from dlopen(RTLD_NOLOAD) and is never closed.
    let Some(api) = (unsafe { clr::resolve(h) }) else {
        if SOURCE.load(Acquire) == SRC_HSA {
            return; // HSA capture (OnLoad) took over
        }
        INFO.status.store(wire::Status::ApiMissing as u8, Relaxed);
        let _ = PHASE.compare_exchange(WAITING, INACTIVE, AcqRel, Acquire);
        let _ = PHASE.compare_exchange(STARTING, INACTIVE, AcqRel, Acquire);
        // auto + HSA_TOOLS_LIB: HSA capture takes over in OnLoad; no warning.
        let hsa_fallback = config().gpu == GpuSource::Auto && HSA_TOOL_NAMED.load(Relaxed);
        if !hsa_fallback && !WARNED_API.swap(true, Relaxed) {
            say(&format!(
                "{} has no hipProfiler*Ext API (stock ROCm): no GPU timestamps from this process. \
                 They need a HIP runtime (CLR) built with hip_profiler_ext.h (ROCm 7.13+ nightly or a \
                 custom build), or HSA mode (rtl-ebpf --gpu hsa). The application runs unchanged; \
                 the CPU-side trace is complete.",
                // SAFETY: as above.
                unsafe { clr::object_path(h, name) }
            ));
        }
        // With the HSA fallback coming (OnLoad, inside hsa_init), "no hipProfiler*Ext" is not
        // this process's status: OnLoad publishes the real one (HSA capture, or why not).
        if !hsa_fallback {
            publish::publish_meta(0);
        }
        return;
    };
    if SOURCE.compare_exchange(SRC_NONE, SRC_CLR, AcqRel, Acquire).is_err() {
        return;
    }
    INFO.source.store(wire::Source::Clr as u8, Relaxed);
    INFO.captures.store(wire::CAP_KERNELS | wire::CAP_COPIES | wire::CAP_MEMSETS | wire::CAP_BARRIERS | wire::CAP_GRAPH_NODES, Relaxed);
    INFO.profiler_api.store(api.version(), Relaxed);
    publish::set_gpu_clock(clr::GPU_CLOCK, None);
    publish::buffers();
    // SAFETY: api resolved from the loaded runtime.
    match unsafe { clr::start(api) } {
        Ok(a) => {
            if a.callback.load(Relaxed) {
                INFO.mode.fetch_or(wire::MODE_CALLBACK, Relaxed);
            }
            INFO.status.store(wire::Status::Active as u8, Relaxed);
            PHASE.store(ACTIVE, Release);
            if !ONCE_ATEXIT.swap(true, Relaxed) {
                // SAFETY: a plain function pointer.
                unsafe { libc::atexit(at_exit) };
            }
        }
        Err(rc) => {
            INFO.status.store(wire::Status::EnableFailed as u8, Relaxed);
            PHASE.store(INACTIVE, Release);
            say(&format!("hipProfilerEnableExt failed (hipError_t {rc}); no GPU timestamps from this process"));
        }
    }
    publish::publish_meta(0);
}

/// Loads libcupti and enables its activity records (from InitializeInjection, or the publisher
/// thread once libcuda is mapped). Idempotent; any failure leaves the process untouched.
fn activate_cupti() {
    if is_duplicate() || SHUTDOWN_STARTED.load(Acquire) {
        return;
    }
    if SOURCE.compare_exchange(SRC_NONE, SRC_CUPTI, AcqRel, Acquire).is_err() {
        return;
    }
    INFO.source.store(wire::Source::Cupti as u8, Relaxed);
    INFO.captures.store(wire::CAP_KERNELS | wire::CAP_COPIES | wire::CAP_MEMSETS | wire::CAP_GRAPH_NODES, Relaxed);
    publish::set_gpu_clock(wire::ClockDomain::Monotonic, None);
    match cupti::start() {
        Ok(path) => {
            INFO.captures.store(cupti::captures(), Relaxed);
            INFO.status.store(wire::Status::Active as u8, Relaxed);
            PHASE.store(ACTIVE, Release);
            if !ONCE_ATEXIT.swap(true, Relaxed) {
                // SAFETY: a plain function pointer.
                unsafe { libc::atexit(at_exit) };
            }
            if !THREAD_RUNNING.load(Acquire) {
                spawn_publisher();
            }
            if std::env::var_os("RTL_AGENT_CUPTI_VERBOSE").is_some() {
                say(&format!("CUPTI activity records on ({path}, version {})", cupti::VERSION.load(Relaxed)));
            }
        }
        Err((why, rc)) => {
            INFO.status.store(wire::Status::CuptiFailed as u8, Relaxed);
            INFO.last_error.store(rc, Relaxed);
            PHASE.store(INACTIVE, Release);
            say(&format!("{why}; no GPU timestamps from this process (the CPU-side trace is complete)"));
        }
    }
    publish::publish_meta(0);
}

/// The CUDA driver's injection entry (`CUDA_INJECTION64_PATH`): called once inside `cuInit`.
/// Starts the CUPTI source unless RTL_AGENT_GPU picks another (or none).
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> c_int {
    let _ = std::panic::catch_unwind(|| {
        start(Trigger::CudaInjection);
        if matches!(config().gpu, GpuSource::Cupti | GpuSource::Auto) {
            activate_cupti();
        }
    });
    1
}

// ---------------------------------------------------------------------------------------------
// The publisher thread.

fn futex_wait_stop(ms: u64) {
    futex_wait(&STOP, 0, ms);
}

fn wake_publisher() {
    STOP.store(1, Release);
    // SAFETY: futex wake on our own static word.
    unsafe { libc::syscall(libc::SYS_futex, STOP.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
}

/// Wakes the publisher thread without asking it to stop.
pub(crate) fn kick_publisher() {
    // SAFETY: futex wake on our own static word.
    unsafe { libc::syscall(libc::SYS_futex, STOP.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
}

fn spawn_publisher() {
    THREAD_RUNNING.store(true, Release);
    let spawned = spawn_blocking_signals("rtl-agent", || {
        let _ = std::panic::catch_unwind(publisher_main);
        THREAD_RUNNING.store(false, Release);
    });
    if let Err(e) = spawned {
        THREAD_RUNNING.store(false, Release);
        say(&format!("cannot start the publisher thread ({e}); GPU records are published at exit only"));
    }
}

fn publisher_main() {
    let cfg = config();
    let t0 = clock::monotonic_ns();
    let mut backoff = 5u64;
    // A forked child publishes nothing until it has something (or a second passed): a child
    // that execs at once starts a fresh agent in the same pid (batch_seq 0 again).
    let mut last_meta = clock::monotonic_ns();
    if PHASE.load(Acquire) == ACTIVE && clr::FORK_RT.load(Relaxed) != 0 && clr::fork_child_switch_to_drain() {
        INFO.mode.fetch_and(!wire::MODE_CALLBACK, Relaxed);
    }
    while STOP.load(Acquire) == 0 {
        match PHASE.load(Acquire) {
            WAITING if cfg.gpu == GpuSource::Cupti => {
                if cupti::cuda_loaded() {
                    activate_cupti();
                    continue;
                }
                futex_wait_stop(backoff);
                backoff = (backoff * 2).min(250);
            }
            WAITING => {
                if let Some((h, name)) = clr::find_loaded_hip() {
                    activate(h, name);
                    continue;
                }
                if clock::monotonic_ns() - t0 > cfg.wait_ms * 1_000_000 {
                    INFO.status.store(wire::Status::HipNotLoaded as u8, Relaxed);
                    if PHASE.compare_exchange(WAITING, INACTIVE, AcqRel, Acquire).is_ok() {
                        publish::publish_meta(0);
                    }
                    break;
                }
                futex_wait_stop(backoff);
                backoff = (backoff * 2).min(250);
            }
            ACTIVE => {
                if SOURCE.load(Acquire) == SRC_CUPTI {
                    cupti::poll();
                } else {
                    clr::poll(false);
                }
                publish::publish_queued(0);
                publish::KICKED.store(false, Relaxed);
                let now = clock::monotonic_ns();
                if now - last_meta >= 1_000_000_000 {
                    publish::publish_meta(0);
                    last_meta = now;
                }
                futex_wait_stop(cfg.drain_ms);
            }
            _ => break,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shutdown.

pub(crate) fn shutdown(reason: Reason) {
    if !matches!(PHASE.load(Acquire), WAITING | ACTIVE) || SHUTDOWN_STARTED.swap(true, AcqRel) {
        return;
    }
    wake_publisher();
    if PHASE.load(Acquire) == WAITING {
        // Nothing to flush; do not wait for a thread that may be inside dlopen while this
        // runs under the loader lock (.fini_array).
        PHASE.store(DONE, Release);
        return;
    }
    let t0 = clock::monotonic_ns();
    while THREAD_RUNNING.load(Acquire) && clock::monotonic_ns() - t0 < 2_000_000_000 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if PHASE.load(Acquire) == ACTIVE {
        publish::SHUTTING_DOWN.store(true, Release);
        if reason != Reason::HsaOnUnload {
            stop_runtime_bounded();
            // HSA: let in-flight dispatches complete (bounded); the completion thread keeps
            // forwarding completions afterwards (the runtime's own teardown may wait on them)
            // and publishes late ones itself.
            hsa::quiesce(1000);
        } else {
            hsa::stop();
        }
        publish::publish_queued(0);
        INFO.status.store(wire::Status::Stopped as u8, Relaxed);
        publish::publish_meta(wire::BATCH_FINAL);
    }
    PHASE.store(DONE, Release);
}

/// Disable + final drain on a helper thread, waited for at most `STOP_WAIT_MS` (a forked child
/// whose runtime is wedged by its parent's locks, or a runtime that never finishes its GPU
/// work, must not hang the exit). Inline only if no thread can be created, and never then in a
/// forked child.
fn stop_runtime_bounded() {
    static DONE_FLAG: AtomicBool = AtomicBool::new(false);
    DONE_FLAG.store(false, Release);
    let forked = clr::FORK_RT.load(Relaxed) != 0;
    let wait_ms = if forked { STOP_WAIT_MS / 3 } else { STOP_WAIT_MS };
    let r = std::thread::Builder::new().name("rtl-agent-stop".into()).stack_size(256 << 10).spawn(|| {
        let _ = std::panic::catch_unwind(|| {
            if clr::FORK_RT.load(Relaxed) != 0 && clr::fork_child_switch_to_drain() {
                INFO.mode.fetch_and(!wire::MODE_CALLBACK, Relaxed);
            }
            if SOURCE.load(Acquire) == SRC_CUPTI {
                cupti::stop()
            } else {
                clr::stop()
            }
        });
        DONE_FLAG.store(true, Release);
    });
    match r {
        Ok(_) => {
            let t0 = clock::monotonic_ns();
            while !DONE_FLAG.load(Acquire) && clock::monotonic_ns() - t0 < wait_ms * 1_000_000 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if !DONE_FLAG.load(Acquire) {
                say(&format!("the HIP runtime did not finish hipProfilerDisableExt within {wait_ms} ms; exiting without its last records"));
            }
        }
        Err(_) if !forked && SOURCE.load(Acquire) == SRC_CUPTI => cupti::stop(),
        Err(_) if !forked => clr::stop(),
        Err(_) => {}
    }
}

/// Upper bound on the runtime's final Disable/drain at exit (ms).
const STOP_WAIT_MS: u64 = 9_000;

/// `_exit` / `_Exit` from the application (not the ones glibc's `exit` calls internally): flush
/// first, when this is the agent's own process (not a vfork child sharing its memory) and a
/// source is active. Forked workers that end with `_exit` (a common pattern) keep their records.
fn exit_now(status: c_int) -> ! {
    if std::process::id() == publish::PID.load(Relaxed) && PHASE.load(Acquire) == ACTIVE {
        let _ = std::panic::catch_unwind(|| shutdown(Reason::UnderscoreExit));
    }
    // What glibc's _exit does: exit_group, no loader call (dlsym is not safe in a fork child).
    loop {
        // SAFETY: exit_group never returns.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// Interposes libc's `_exit` (see [`exit_now`]).
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    exit_now(status)
}

/// Interposes libc's `_Exit` (see [`exit_now`]).
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(status)
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| shutdown(Reason::Atexit));
}

unsafe extern "C" fn main_thread_tls_dtor(_: *mut c_void) {
    let _ = std::panic::catch_unwind(|| shutdown(Reason::MainThreadExit));
}

extern "C" fn at_fork_child() {
    let _ = std::panic::catch_unwind(|| {
        let phase = PHASE.load(Acquire);
        THREAD_RUNNING.store(false, Relaxed);
        STOP.store(0, Relaxed);
        if phase == ACTIVE {
            clr::FORK_RT.store(clock::now(libc::CLOCK_REALTIME), Relaxed);
            // The child's own records are those of calls after the fork: its session anchor.
            let now = clock::monotonic_ns();
            INFO.set_anchor(now, now);
        }
        thread_seq::reset_in_child();
        publish::reset_in_child();
        hsa::reset_in_child();
        if matches!(phase, WAITING | ACTIVE) && !SHUTDOWN_STARTED.load(Relaxed) {
            spawn_publisher();
        }
    });
}

extern "C" {
    fn __cxa_thread_atexit_impl(dtor: unsafe extern "C" fn(*mut c_void), obj: *mut c_void, dso: *mut c_void) -> c_int;
    static __dso_handle: u8;
}

fn install_hooks() {
    if ONCE_HOOKS.swap(true, Relaxed) {
        return;
    }
    // SAFETY: registering plain functions; __dso_handle identifies this object.
    unsafe {
        libc::pthread_atfork(None, None, Some(at_fork_child));
        if clock::gettid() == std::process::id() {
            let dso = &__dso_handle as *const u8 as *mut c_void;
            __cxa_thread_atexit_impl(main_thread_tls_dtor, std::ptr::null_mut(), dso);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ELF constructor and destructor.

extern "C" fn rtl_agent_ctor(_argc: c_int, _argv: *const *const c_char, _envp: *const *const c_char) {
    let _ = std::panic::catch_unwind(|| start(Trigger::Ctor));
}

extern "C" fn rtl_agent_dtor() {
    let _ = std::panic::catch_unwind(|| shutdown(Reason::Fini));
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = rtl_agent_ctor;

#[used]
#[unsafe(link_section = ".fini_array")]
static FINI: extern "C" fn() = rtl_agent_dtor;
