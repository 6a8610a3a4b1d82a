//! CUPTI source (NVIDIA): activity records for kernels, copies and memsets, each linked to the
//! driver or runtime API call with the same correlation id, turned into wire `GpuOp`s.
//!
//! libcupti is loaded at run time (dlopen/dlsym; no link-time dependency) and only in a process
//! that uses CUDA: from `InitializeInjection` (the driver calls it inside `cuInit` when
//! `CUDA_INJECTION64_PATH` names the agent) or, with `RTL_AGENT_GPU=cupti` and only
//! `LD_PRELOAD`, from the publisher thread once libcuda is mapped. Which copy: the one already
//! loaded, else `RTL_AGENT_CUPTI_LIB`, else next to the libcudart / libcuda the process maps
//! (the pip wheel layout puts both in `nvidia/cu13/lib`; the toolkit in `targets/*/lib`), else
//! `libcupti.so.13`, `libcupti.so` from the loader's path.
//!
//! Clock: CUPTI's own timestamps by default, whose domain is found at start by reading
//! `cuptiGetTimestamp` between system clock reads (CLOCK_REALTIME on the H200; the collector
//! converts with the process's clock offset). `RTL_AGENT_CUPTI_CLOCK=monotonic` registers
//! `cuptiActivityRegisterTimestampCallback` returning CLOCK_MONOTONIC instead: same GPU
//! durations, but every traced call was markedly slower with it (measured: docs/benchmarks.md).
//! API records: by default only for the calls that put work on the GPU ([`is_gpu_work_api`],
//! `cuptiActivityEnableDriverApi/RuntimeApi`); `RTL_AGENT_CUPTI_API=all` keeps every call's.
//! Threads: `cuptiSetThreadIdType(SYSTEM)` makes API records carry the OS tid (`OP_TID_KNOWN`).
//!
//! Record layouts are the CUDA 13.0 headers' (`cupti_activity.h`, CUPTI_API_VERSION 130001):
//! `CUpti_ActivityKernel10` (216 bytes), `CUpti_ActivityMemcpy6` (96), `CUpti_ActivityMemset4`
//! (88), `CUpti_ActivityAPI` (40). The structs are declared `packed, aligned(8)` in C; every
//! field there is naturally aligned, so plain `repr(C)` gives the same offsets (asserted in the
//! tests against the header's offsetof values). A record shorter than its struct (another CUPTI
//! major) is skipped and counted, never read past its end.
//!
//! `RTL_AGENT_CUPTI_DUMP=FILE` appends the raw records as they are delivered (see
//! [`DumpFrame`]), so decoding and correlation can be tested on recorded data ([`replay`]).

use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicU8, Ordering::*};
use std::sync::{Mutex, OnceLock};

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind};

mod correlate;
mod dump;
mod ffi;
mod records;
pub use correlate::*;
pub use dump::*;
use ffi::{load, Api, CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_SUCCESS};
pub use records::*;

// ---------------------------------------------------------------------------------------------
// The live source.

/// Clock domain of every time in the records (a [`ClockDomain`]): CLOCK_MONOTONIC through the
/// timestamp callback, or what CUPTI's own clock was found to be (`RTL_AGENT_CUPTI_CLOCK=cupti`).
static CLOCK: AtomicU8 = AtomicU8::new(ClockDomain::Monotonic as u8);

/// API records kept by default: the calls that put work on the GPU (CUPTI names them
/// `cuLaunchKernel`, `cudaGraphLaunch_v10000`, `cuMemcpyHtoDAsync_v2`, `cudaMemsetAsync`...).
pub fn is_gpu_work_api(name: &[u8]) -> bool {
    const FAMILIES: [&[u8]; 8] =
        [b"cuLaunch", b"cuGraphLaunch", b"cuMemcpy", b"cuMemset", b"cudaLaunch", b"cudaGraphLaunch", b"cudaMemcpy", b"cudaMemset"];
    FAMILIES.iter().any(|f| name.starts_with(f))
}

struct Live {
    api: Api,
    state: Mutex<LiveState>,
}

#[derive(Default)]
struct LiveState {
    corr: Correlator,
    names: HashMap<(u32, u32), u32>,
    dump: Vec<u8>,
}

static LIVE: OnceLock<Live> = OnceLock::new();
/// Graph launches come as one graph-level record each (`KIND_GRAPH_TRACE` enabled).
static GRAPH_LEVEL: AtomicBool = AtomicBool::new(false);

/// What this source captures here (`Info::captures`), once started.
pub fn captures() -> u32 {
    let graphs = if GRAPH_LEVEL.load(Relaxed) { wire::CAP_GRAPH_SPANS } else { wire::CAP_GRAPH_NODES };
    wire::CAP_KERNELS | wire::CAP_COPIES | wire::CAP_MEMSETS | graphs
}

/// Raw dump file descriptor (RTL_AGENT_CUPTI_DUMP), -1 if none.
pub static RAW_DUMP_FD: AtomicI32 = AtomicI32::new(-1);
/// The loaded CUPTI's version (cuptiGetVersion), 0 if unknown.
pub static VERSION: AtomicU64 = AtomicU64::new(0);

const BUFFER_BYTES: usize = 4 << 20;

unsafe extern "C" fn timestamp() -> u64 {
    crate::clock::monotonic_ns()
}

unsafe extern "C" fn buffer_requested(buf: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    let _ = std::panic::catch_unwind(|| {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointers from CUPTI; posix_memalign with a power-of-two alignment.
        unsafe {
            if libc::posix_memalign(&mut p, 8, BUFFER_BYTES) != 0 {
                p = std::ptr::null_mut();
            }
            *buf = p as *mut u8;
            *size = if p.is_null() { 0 } else { BUFFER_BYTES };
            *max_records = 0;
        }
    });
}

unsafe extern "C" fn buffer_completed(_ctx: *mut c_void, _stream: u32, buf: *mut u8, _size: usize, valid: usize) {
    let _ = std::panic::catch_unwind(|| {
        if let Some(l) = LIVE.get() {
            // SAFETY: CUPTI hands us the buffer it got from buffer_requested, `valid` bytes filled.
            unsafe { l.consume(buf, valid) };
        }
    });
    // SAFETY: allocated by posix_memalign in buffer_requested (NULL is fine too).
    unsafe { libc::free(buf as *mut c_void) };
}

impl Live {
    /// Walks a completed buffer: each record's length is the distance to the next one (the
    /// last one: to the end of the valid bytes).
    ///
    /// # Safety
    /// `buf` is a buffer CUPTI completed, with `valid` bytes of records.
    unsafe fn consume(&self, buf: *mut u8, valid: usize) {
        if buf.is_null() || valid == 0 {
            return;
        }
        let mut ptrs: Vec<*mut u8> = Vec::with_capacity(valid / 40 + 1);
        let mut rec: *mut u8 = std::ptr::null_mut();
        loop {
            // SAFETY: resolved from libcupti; the caller's buffer.
            let rc = unsafe { (self.api.get_next_record)(buf, valid, &mut rec) };
            if rc == CUPTI_ERROR_MAX_LIMIT_REACHED {
                break;
            }
            if rc != CUPTI_SUCCESS || rec.is_null() {
                crate::publish::record_error(rc);
                break;
            }
            ptrs.push(rec);
        }
        // SAFETY: one past the valid bytes of the caller's buffer.
        let end = unsafe { buf.add(valid) };
        let Ok(mut st) = self.state.lock() else { return };
        let st = &mut *st;
        let fd = RAW_DUMP_FD.load(Relaxed);
        let b = crate::publish::buffers();
        crate::publish::counters().records_seen.fetch_add(ptrs.len() as u64, Relaxed);
        for (i, &p) in ptrs.iter().enumerate() {
            let next = ptrs.get(i + 1).copied().filter(|&n| n > p).unwrap_or(end);
            if next <= p || next > end {
                continue;
            }
            // SAFETY: a record CUPTI returned inside the buffer, up to the next one (or the end of
            // the valid bytes): `p < next <= end`, checked above.
            let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, next.offset_from(p) as usize) };
            let a = parse(bytes);
            let kname: Option<&[u8]> = match &a {
                // SAFETY: a kernel record's name is CUPTI's NUL-terminated string, live while the
                // buffer is.
                Activity::Kernel(k) if !k.name.is_null() => Some(unsafe { CStr::from_ptr(k.name) }.to_bytes()),
                _ => None,
            };
            if let Activity::Api { domain, rec } = &a {
                if let std::collections::hash_map::Entry::Vacant(slot) = st.names.entry((*domain, rec.cbid)) {
                    let name = self.callback_name(*domain, rec.cbid);
                    let id = b.strings.intern(wire::STR_API, &name);
                    slot.insert(id);
                    if fd >= 0 {
                        encode_frame(&mut st.dump, &DumpFrame::ApiName { domain: *domain, cbid: rec.cbid, name });
                    }
                }
            }
            if fd >= 0 && !matches!(a, Activity::Other(_)) {
                encode_frame(&mut st.dump, &DumpFrame::Record { rec: bytes.to_vec(), name: kname.unwrap_or_default().to_vec() });
            }
            let names = &st.names;
            st.corr.on_record(
                &a,
                kname,
                &mut |k, n| b.strings.intern(k, n),
                &mut |d, c| names.get(&(d, c)).copied().unwrap_or(0),
                &mut |o| crate::publish::emit(o, true),
            );
        }
        st.corr.retry(&mut |o| crate::publish::emit(o, true));
        if fd >= 0 {
            encode_frame(&mut st.dump, &DumpFrame::BufferEnd);
            write_all(fd, &st.dump);
            st.dump.clear();
        }
    }

    fn callback_name(&self, domain: u32, cbid: u32) -> Vec<u8> {
        if let Some(f) = self.api.get_callback_name {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: resolved from libcupti; the name is a static string of CUPTI's.
            if unsafe { f(domain, cbid, &mut p) } == CUPTI_SUCCESS && !p.is_null() {
                return unsafe { CStr::from_ptr(p) }.to_bytes().to_vec();
            }
        }
        format!("{}#{cbid}", if domain == DOMAIN_DRIVER { "cu" } else { "cuda" }).into_bytes()
    }
}

fn write_all(fd: c_int, mut rest: &[u8]) {
    while !rest.is_empty() {
        // SAFETY: valid buffer.
        let n = unsafe { libc::write(fd, rest.as_ptr() as *const c_void, rest.len()) };
        if n < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        if n <= 0 {
            crate::publish::counters().dump_errors.fetch_add(1, Relaxed);
            return;
        }
        rest = &rest[n as usize..];
    }
}

/// True when this process maps libcuda (never loads it).
pub fn cuda_loaded() -> bool {
    !crate::loaded::objects(&["libcuda.so"]).is_empty()
}

/// Candidate libcupti paths, in order (see the module doc).
pub fn candidates(env: Option<&str>, loaded_cupti: &[String], runtime_libs: &[String]) -> Vec<String> {
    let mut v: Vec<String> = loaded_cupti.to_vec();
    if let Some(e) = env.filter(|e| !e.is_empty()) {
        v.push(e.to_string());
    }
    for lib in runtime_libs {
        if let Some((dir, _)) = lib.rsplit_once('/') {
            for n in ["libcupti.so.13", "libcupti.so"] {
                v.push(format!("{dir}/{n}"));
            }
            // The toolkit's older layout: lib64/../extras/CUPTI/lib64.
            if let Some((up, _)) = dir.rsplit_once('/') {
                v.push(format!("{up}/extras/CUPTI/lib64/libcupti.so.13"));
            }
        }
    }
    v.push("libcupti.so.13".into());
    v.push("libcupti.so".into());
    let mut seen = std::collections::HashSet::new();
    v.retain(|p| seen.insert(p.clone()));
    v
}

/// Loads libcupti and enables the activity kinds. Err: why not (the process runs on untouched).
pub fn start() -> Result<String, (String, i32)> {
    if LIVE.get().is_some() {
        return Ok("already active".into());
    }
    let (api, path) = load().map_err(|e| (e, 0))?;
    if let Some(f) = api.get_version {
        let mut v = 0u32;
        // SAFETY: resolved from libcupti.
        if unsafe { f(&mut v) } == CUPTI_SUCCESS {
            VERSION.store(v as u64, Relaxed);
        }
    }
    if let Some(dump) = &crate::config_ref().cupti_dump {
        let mut p = dump.as_encoded_bytes().to_vec();
        p.push(0);
        // SAFETY: NUL-terminated path.
        let fd =
            unsafe { libc::open(p.as_ptr() as *const c_char, libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC, 0o644) };
        RAW_DUMP_FD.store(fd, Relaxed);
    }
    crate::publish::buffers();
    let live = LIVE.get_or_init(|| Live { api, state: Mutex::new(LiveState::default()) });
    let a = &live.api;
    let check = |rc: c_int, what: &str| if rc == CUPTI_SUCCESS { Ok(()) } else { Err((format!("{what} failed (CUptiResult {rc})"), rc)) };
    // SAFETY: functions resolved from libcupti, called with their documented arguments.
    unsafe {
        if crate::config_ref().cupti_monotonic_clock {
            // Before any kind is enabled, so every record is on CLOCK_MONOTONIC.
            match a.register_timestamp {
                Some(f) => check(f(timestamp), "cuptiActivityRegisterTimestampCallback")?,
                None => return Err(("this libcupti has no cuptiActivityRegisterTimestampCallback (CUDA 12.6+ needed)".into(), 0)),
            }
        } else {
            // CUPTI's own clock: cheaper (with a timestamp callback every traced call got
            // markedly slower on the H200), and the collector converts a CLOCK_REALTIME domain.
            let d = native_clock_domain(a);
            if d == ClockDomain::Unknown {
                return Err((
                    "CUPTI's clock is neither CLOCK_REALTIME nor CLOCK_MONOTONIC here; set RTL_AGENT_CUPTI_CLOCK=monotonic".into(),
                    0,
                ));
            }
            CLOCK.store(d as u8, Relaxed);
        }
        match a.set_thread_id_type {
            Some(f) => check(f(THREAD_ID_TYPE_SYSTEM), "cuptiSetThreadIdType(SYSTEM)")?,
            None => return Err(("this libcupti has no cuptiSetThreadIdType".into(), 0)),
        }
        check((a.register_callbacks)(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks")?;
        let api_kinds: &[(u32, &str)] = if crate::config_ref().cupti_api_all {
            &[(KIND_DRIVER, "DRIVER"), (KIND_RUNTIME, "RUNTIME")]
        } else {
            match enable_gpu_work_apis(a) {
                Ok(n) if n > 0 => &[],
                Ok(_) => {
                    return Err(("CUPTI names no launch/memcpy/memset API (cuptiGetCallbackName); set RTL_AGENT_CUPTI_API=all".into(), 0))
                }
                Err(e) => return Err((format!("{e}; set RTL_AGENT_CUPTI_API=all"), 0)),
            }
        };
        for &(k, what) in api_kinds {
            check((a.enable)(k), &format!("cuptiActivityEnable({what})"))?;
        }
        // Graph launches: one graph-level record each (CUPTI then keeps no node records for
        // them), unless every node is asked for (RTL_AGENT_GRAPH_NODES, run --graph-nodes). A
        // CUPTI that refuses graph-level records gives the nodes, as asked for or not (said).
        if !crate::graph_nodes() {
            let rc = (a.enable)(KIND_GRAPH_TRACE);
            GRAPH_LEVEL.store(rc == CUPTI_SUCCESS, Relaxed);
            if rc != CUPTI_SUCCESS {
                crate::say(&format!(
                    "this CUPTI refuses graph-level records (cuptiActivityEnable(GRAPH_TRACE): CUptiResult {rc}): \
                     every node of every graph replay is recorded instead (more cost per replay)"
                ));
            }
        }
        for (k, what) in [(KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"), (KIND_MEMCPY, "MEMCPY"), (KIND_MEMSET, "MEMSET")] {
            check((a.enable)(k), &format!("cuptiActivityEnable({what})"))?;
        }
    }
    Ok(path)
}

/// Enables API records for the driver and runtime calls that put work on the GPU only
/// ([`is_gpu_work_api`]), found by name through `cuptiGetCallbackName` so no callback id of a
/// particular CUDA version is hard-coded. Returns how many were enabled.
///
/// # Safety
/// `a` holds functions resolved from libcupti.
unsafe fn enable_gpu_work_apis(a: &Api) -> Result<usize, String> {
    let (Some(name_of), Some(drv), Some(rt)) = (a.get_callback_name, a.enable_driver_api, a.enable_runtime_api) else {
        return Err("this libcupti lacks cuptiGetCallbackName / cuptiActivityEnableDriverApi / cuptiActivityEnableRuntimeApi".into());
    };
    let mut n = 0;
    for (domain, enable) in [(DOMAIN_DRIVER, drv), (DOMAIN_RUNTIME, rt)] {
        // Callback ids are dense from 1 to the domain's size; stop after a long run of unknown ids.
        let mut misses = 0;
        for cbid in 1..8192u32 {
            let mut p: *const c_char = std::ptr::null();
            // SAFETY: out-pointer; CUPTI returns a static string.
            if unsafe { name_of(domain, cbid, &mut p) } != CUPTI_SUCCESS || p.is_null() {
                misses += 1;
                if misses >= 256 {
                    break;
                }
                continue;
            }
            misses = 0;
            // SAFETY: NUL-terminated static string from CUPTI.
            if is_gpu_work_api(unsafe { CStr::from_ptr(p) }.to_bytes()) {
                // SAFETY: a valid callback id of this domain.
                let rc = unsafe { enable(cbid, 1) };
                if rc != CUPTI_SUCCESS {
                    return Err(format!(
                        "cuptiActivityEnable{}Api({cbid}) failed (CUptiResult {rc})",
                        if domain == DOMAIN_DRIVER { "Driver" } else { "Runtime" }
                    ));
                }
                n += 1;
            }
        }
    }
    Ok(n)
}

/// What CUPTI's own clock is, from one reading of it between two of each system clock.
fn native_clock_domain(a: &Api) -> ClockDomain {
    let Some(f) = a.get_timestamp else { return ClockDomain::Unknown };
    let (r0, m0) = (crate::clock::now(libc::CLOCK_REALTIME), crate::clock::monotonic_ns());
    let mut t = 0u64;
    // SAFETY: out-pointer.
    if unsafe { f(&mut t) } != CUPTI_SUCCESS {
        return ClockDomain::Unknown;
    }
    let (r1, m1) = (crate::clock::now(libc::CLOCK_REALTIME), crate::clock::monotonic_ns());
    let near = |lo: u64, hi: u64| t + 1_000_000 >= lo && t <= hi + 1_000_000;
    if near(m0, m1) {
        ClockDomain::Monotonic
    } else if near(r0, r1) {
        ClockDomain::Realtime
    } else {
        ClockDomain::Unknown
    }
}

/// Publisher period: hand over the buffers whose records are all complete.
pub fn poll() {
    if let Some(l) = LIVE.get() {
        // SAFETY: resolved from libcupti.
        let rc = unsafe { (l.api.flush_all)(0) };
        if rc != CUPTI_SUCCESS {
            crate::publish::record_error(rc);
        }
    }
}

/// Shutdown: a forced flush (every buffer, complete or not), then ops still waiting for their
/// API record go out without it.
pub fn stop() {
    let Some(l) = LIVE.get() else { return };
    // SAFETY: resolved from libcupti.
    let rc = unsafe { (l.api.flush_all)(FLAG_FLUSH_FORCED) };
    if rc != CUPTI_SUCCESS {
        crate::publish::record_error(rc);
    }
    if let Ok(mut st) = l.state.lock() {
        st.corr.finish(&mut |o| crate::publish::emit(o, true));
        let s = st.corr.stats;
        if !crate::config_ref().quiet && s.without_api + s.short_records > 0 {
            crate::say(&format!(
                "CUPTI: {} GPU records, {} without their API record, {} records shorter than the CUDA 13.0 layout",
                s.gpu_records, s.without_api, s.short_records
            ));
        }
    }
}

#[cfg(test)]
mod tests;
