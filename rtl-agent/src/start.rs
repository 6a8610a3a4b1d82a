//! Starting the agent (from the ELF constructor, the HSA runtime's `OnLoad` or the CUDA
//! driver's `InitializeInjection`): read the configuration, learn how this copy was loaded, stand
//! down for a duplicate, pick the GPU source and activate it (CLR: `hipProfiler*Ext`; CUPTI;
//! HSA signal capture, installed by [`crate::hsa`]).

use std::ffi::{c_char, c_int, c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicBool, Ordering::*};

use rtl_common::agent as wire;

use crate::config::{Config, GpuSource};
use crate::hooks::{atexit_once, install_hooks};
use crate::loaded_as::{in_shared_object, own_object, preloaded, same_file};
use crate::publish::{self, INFO};
use crate::publisher_thread::{spawn_publisher, THREAD_RUNNING};
use crate::{
    clr, config, cupti, hsa, is_duplicate, rtl_agent_publish, say, ACTIVE, CONFIG, DUPLICATE, IDLE, INACTIVE, PHASE, SHUTDOWN_STARTED,
    SOURCE, SRC_CLR, SRC_CUPTI, SRC_HSA, SRC_NONE, STARTING, WAITING,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Trigger {
    Ctor,
    HsaOnLoad,
    CudaInjection,
}

static WARNED_API: AtomicBool = AtomicBool::new(false);
/// HSA_TOOLS_LIB names this library.
static HSA_TOOL_NAMED: AtomicBool = AtomicBool::new(false);
/// CUDA_INJECTION64_PATH names this library: CUPTI starts from InitializeInjection (inside cuInit).
static CUDA_INJECTION_NAMED: AtomicBool = AtomicBool::new(false);

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

/// Signal capture installed (from OnLoad).
pub(crate) fn hsa_active() {
    INFO.source.store(wire::Source::Hsa as u8, Relaxed);
    INFO.captures.store(hsa::captures(), Relaxed);
    INFO.status.store(wire::Status::Active as u8, Relaxed);
    publish::set_gpu_clock(wire::ClockDomain::HsaSystem, Some(hsa::system_ns));
    PHASE.store(ACTIVE, Release);
    atexit_once();
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
pub(crate) fn activate(h: *mut c_void, name: &CStr) {
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
            atexit_once();
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
pub(crate) fn activate_cupti() {
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
            atexit_once();
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
