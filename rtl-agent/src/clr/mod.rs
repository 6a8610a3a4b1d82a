//! GPU source 1: HIP CLR's built-in profiler (`hipProfiler*Ext`, see
//! shared/reference/hip-profiler-ext.md), resolved at run time from the libamdhip64 already
//! loaded in the process.
//!
//! * v0.1.0 (`hipProfilerRegisterChunkCallbackExt` present): register the chunk callback, then
//!   `hipProfilerEnableExt(&start, 0)`. The callback copies what it needs (records, spill lists,
//!   names) before returning. If registration fails, fall back to draining.
//! * v0 (`hipProfilerResetExt` present, no callback): `hipProfilerEnableExt()`, then drain with
//!   `hipProfilerGetRecordsExt` every RTL_AGENT_DRAIN_MS and at exit; Reset (return code checked)
//!   only when the runtime holds more than `RESET_THRESHOLD` records.
//! * Draining keeps a cursor (records already consumed) and iterates chunks with the guarded loop
//!   [`chunk_ranges`]. A record whose GPU work has not finished yet (end time 0) stops the cursor
//!   until a later drain (bounded by `MAX_STALLS`), so no op is published without its times.
//! * Every record gets its per-thread, per-API number ([`crate::thread_seq`]) when the agent
//!   first passes it in record order, even when its ops are published later (deferred).
//! * [`start`] brackets `hipProfilerEnableExt` with CLOCK_MONOTONIC reads: the session's anchor
//!   (`Info::anchor_*`), valid when the runtime held no record before it.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Mutex;

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind, Source};

use crate::publish::{self, counters, record_error};

mod ffi;
pub use ffi::*;

pub const REC_HAS_GPU: u64 = 1;
/// Longest spill list followed (a graph launch with more nodes is cut and counted).
pub const MAX_SPILL: u32 = 1 << 20;
/// GPU times of CLR records: the runtime converts them to its host clock, CLOCK_REALTIME like
/// the CPU times (hip_profiler_ext.h); the collector gets the domain in every op.
pub const GPU_CLOCK: ClockDomain = ClockDomain::Realtime;

fn op_from(rec: &ApiRecord, g: &GpuActivity, version: u8, api_name_id: u32, record_index: u64, seq: Seq) -> Option<GpuOp> {
    let raw = (g.flags & 7) as u8;
    let copy_kind = ((g.flags >> 4) & 0xf) as u8;
    let op = match raw {
        0 => OpKind::Dispatch,
        1 if copy_kind == 12 => OpKind::Memset,
        1 => OpKind::Copy,
        2 => OpKind::Barrier,
        _ => return None,
    };
    let mut o = GpuOp {
        source: Source::Clr as u8,
        op: op as u8,
        copy_kind,
        flags: wire::OP_HAS_CPU_TIMES | wire::OP_HAS_THREAD_HASH | if g.flags & 8 != 0 { wire::OP_IS_GRAPH } else { 0 },
        cpu_clock: ClockDomain::Realtime as u8,
        gpu_clock: GPU_CLOCK as u8,
        device: ((g.flags >> 16) & 0xffff) as u32,
        queue: ((g.flags >> 32) & 0xffff) as u32,
        api_name_id,
        thread_id: rec.thread_id,
        cpu_start_ns: rec.start_ns,
        cpu_end_ns: rec.end_ns,
        gpu_begin_ns: g.begin_ns,
        gpu_end_ns: g.end_ns,
        stream: rec.stream,
        record_index,
        ..Default::default()
    };
    if let Some((n, epoch)) = seq {
        o.flags |= wire::OP_HAS_THREAD_SEQ;
        o.thread_seq = n;
        o.seq_epoch = epoch;
    }
    if version >= wire::API_V0_1 {
        o.chunk_id = rec.chunk_id;
        o.dst = rec.memory1;
        o.src = rec.memory2;
    }
    let p = &g.payload;
    match op {
        OpKind::Dispatch => {
            o.grid = [p[0], p[1], p[2]];
            o.block = [p[3], p[4], p[5]];
            if g.bytes_or_name != 0 {
                // SAFETY: the runtime's kernel-name C string, valid while the record is.
                o.kernel_name_id = unsafe { publish::buffers().strings.intern_c(wire::STR_KERNEL, g.bytes_or_name as *const c_char) };
            }
            o.src = 0;
            o.dst = 0;
        }
        OpKind::Copy | OpKind::Memset => {
            o.bytes = if g.bytes_or_name != 0 {
                g.bytes_or_name
            } else if version >= wire::API_V0_1 {
                rec.size
            } else {
                0
            };
            let src = p[0] as u64 | (p[1] as u64) << 32;
            let dst = p[2] as u64 | (p[3] as u64) << 32;
            if src != 0 || dst != 0 {
                o.src = src;
                o.dst = dst;
            }
        }
        OpKind::Barrier | OpKind::GraphExecution => {}
    }
    Some(o)
}

/// True when every GPU op of the record has finished (an end time), following the spill list.
///
/// # Safety
/// `rec` is a live profiler record.
unsafe fn complete(rec: &ApiRecord) -> bool {
    // The runtime fills a record in during the call (end time last) and the GPU ops later.
    if rec.end_ns == 0 {
        return false;
    }
    if rec.flags & REC_HAS_GPU == 0 {
        return true;
    }
    let n = rec.gpu.gpu_op_count.clamp(1, MAX_SPILL);
    let mut g = rec.gpu;
    for i in 0..n {
        if g.end_ns == 0 {
            return false;
        }
        if i + 1 < n {
            if g.next.is_null() {
                return true;
            }
            // SAFETY: the caller's promise: the record's spill list is live.
            g = unsafe { read_activity(g.next) };
        }
    }
    true
}

/// A record's number among its thread's records of the same API, and the numbering's epoch.
pub type Seq = Option<(u64, u16)>;

/// True for a record a forked child holds as a copy of its parent's (the call started before
/// the fork): the parent publishes it.
fn parents(r: &ApiRecord) -> bool {
    let fork_rt = FORK_RT.load(Relaxed);
    fork_rt != 0 && r.start_ns < fork_rt
}

/// The record's per-thread, per-API number and its epoch; call once per record, in record
/// order, when the agent first passes it (None: a parent's record, or not numbered).
///
/// # Safety
/// `rec` points to a live 256-byte profiler record.
pub unsafe fn number(rec: *const ApiRecord) -> Seq {
    // SAFETY: the caller's promise.
    let r = unsafe { read_record(rec) };
    if parents(&r) {
        return None;
    }
    // SAFETY: a live record's name is a live C string (the runtime's API name table).
    let api_name_id = unsafe { publish::buffers().strings.intern_c(wire::STR_API, r.api_name) };
    let epoch = crate::thread_seq::EPOCH.load(Relaxed);
    crate::thread_seq::next(r.thread_id, api_name_id).map(|n| (n, epoch))
}

/// Turns one profiler record into GPU ops (the head op and its spill list) and hands each to
/// `emit`. Counts records, graph launches and cut spill lists. `seq`: what [`number`] gave it.
///
/// # Safety
/// `rec` points to a live 256-byte profiler record whose spill list and names are live.
pub unsafe fn convert(rec: *const ApiRecord, version: u8, record_index: u64, seq: Seq, emit: &mut dyn FnMut(&GpuOp)) {
    // SAFETY: the caller's promise.
    let r = unsafe { read_record(rec) };
    if parents(&r) {
        PARENT_RECORDS_SKIPPED.fetch_add(1, Relaxed);
        return;
    }
    counters().records_seen.fetch_add(1, Relaxed);
    if r.flags & REC_HAS_GPU == 0 {
        return;
    }
    let declared = r.gpu.gpu_op_count.max(1);
    let n = declared.min(MAX_SPILL);
    if declared > 1 {
        counters().batches_with_spill.fetch_add(1, Relaxed);
    }
    if declared > MAX_SPILL {
        counters().spill_truncated.fetch_add(1, Relaxed);
    }
    // SAFETY: the caller's promise: the record's names are live.
    let api_name_id = unsafe { publish::buffers().strings.intern_c(wire::STR_API, r.api_name) };
    let mut g = r.gpu;
    for i in 0..n {
        match op_from(&r, &g, version, api_name_id, record_index, seq) {
            Some(mut o) => {
                o.op_index = i;
                o.op_count = n;
                emit(&o);
            }
            None => record_error(-1),
        }
        if i + 1 < n {
            if g.next.is_null() {
                counters().spill_truncated.fetch_add(1, Relaxed);
                break;
            }
            // SAFETY: the caller's promise: the spill list is live.
            g = unsafe { read_activity(g.next) };
        }
    }
}

/// The guarded chunk loop: `(chunk, first_index, len)` for each chunk holding valid records.
/// Stops when `c * chunk_size >= total_count`, so `total_count - c * chunk_size` never underflows
/// when `chunk_count * chunk_size` exceeds `total_count` (the last chunk is partial).
pub fn chunk_ranges(chunk_count: usize, chunk_size: usize, total_count: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    (0..if chunk_size == 0 { 0 } else { chunk_count }).map_while(move |c| {
        let start = c.checked_mul(chunk_size)?;
        if start >= total_count {
            return None;
        }
        Some((c, start, chunk_size.min(total_count - start)))
    })
}

// ---------------------------------------------------------------------------------------------
// Drain (GetRecords) state.

/// Reset the v0 runtime buffer when it holds more records than this.
pub const RESET_THRESHOLD: usize = 1 << 20;
/// Drains a record may hold the cursor back waiting for its GPU end time (only when the
/// deferred list is full).
pub const MAX_STALLS: u32 = 50;
/// Incomplete records (call still running, GPU work not finished) remembered past the cursor.
pub const MAX_DEFERRED: usize = 1 << 16;

#[derive(Debug, Default)]
pub struct DrainState {
    /// Records consumed (index into the runtime's current buffer).
    pub cursor: usize,
    /// Cumulative records consumed before the last successful Reset (for record_index).
    pub base: u64,
    /// Reset failed once: never again (and the cursor is kept).
    pub reset_disabled: bool,
    pub stalls: u32,
    /// GetRecords used the early v0 contiguous form `(const rec** records, size_t* count)`.
    pub contiguous: bool,
    /// Records past the cursor that were not complete yet: (record_index, record address, its
    /// number). The runtime keeps records in place (until a v0 Reset, which waits for this to
    /// empty).
    pub deferred: Vec<(u64, usize, Seq)>,
}

/// One GetRecords pass: emits every complete record past the cursor. `final_pass`: emit
/// incomplete ones too (after Disable, nothing more will complete).
///
/// # Safety
/// `api` holds the runtime's functions.
pub unsafe fn drain(api: &Api, version: u8, st: &mut DrainState, final_pass: bool, emit: &mut dyn FnMut(&GpuOp)) {
    // Records deferred by earlier passes first.
    if !st.deferred.is_empty() {
        st.deferred.retain(|&(index, rec, seq)| {
            let rec = rec as *const ApiRecord;
            // SAFETY: a record the runtime handed out earlier and keeps in place (only a v0
            // Reset moves records, and it waits for this list to empty).
            if final_pass || unsafe { complete(&*rec) } {
                // SAFETY: as above.
                unsafe { convert(rec, version, index, seq, emit) };
                false
            } else {
                true
            }
        });
    }
    let mut chunks: *const c_void = std::ptr::null();
    let mut chunk_count: usize = 0;
    // Sentinels: the early v0 contiguous form writes only the first two out-parameters.
    let mut chunk_size: usize = usize::MAX;
    let mut total: usize = usize::MAX;
    // SAFETY: the caller's promise (the runtime's functions).
    let rc = unsafe { api.get_records(&mut chunks, &mut chunk_count, &mut chunk_size, &mut total) };
    if rc != 0 {
        record_error(rc);
        return;
    }
    if chunk_size == usize::MAX && total == usize::MAX {
        st.contiguous = true;
        total = chunk_count;
        if chunks.is_null() || total == 0 {
            return;
        }
        let recs = chunks as *const ApiRecord;
        // SAFETY: the contiguous form: `total` live records at `chunks`.
        unsafe { consume(recs, 0, total, version, st, final_pass, emit) };
    } else if !chunks.is_null() {
        let table = chunks as *const *const ApiRecord;
        for (c, start, len) in chunk_ranges(chunk_count, chunk_size, total) {
            if start + len <= st.cursor {
                continue;
            }
            // SAFETY: the chunk table has `chunk_count` entries (chunk_ranges stays below it).
            let p = unsafe { *table.add(c) };
            if p.is_null() {
                // A chunk the runtime already handed to a chunk callback and freed (a forked
                // child that switched from callback to draining): nothing to read there.
                st.cursor = st.cursor.max(start + len);
                continue;
            }
            // SAFETY: a live chunk of `len` valid records (chunk_ranges: never past `total`).
            if !unsafe { consume(p, start, len, version, st, final_pass, emit) } {
                break;
            }
        }
    }
    if total < st.cursor {
        // The runtime's buffer shrank under us (reset by someone else): start over; deferred
        // records are gone with it.
        st.base += st.cursor as u64;
        st.cursor = 0;
        if !st.deferred.is_empty() {
            record_error(-3);
            st.deferred.clear();
        }
        // Records may have gone uncounted: numbers restart in a new epoch.
        crate::thread_seq::restart();
    }
    if api.reset.is_some() && !st.reset_disabled && st.deferred.is_empty() && st.cursor >= RESET_THRESHOLD && st.cursor == total {
        // SAFETY: the caller's promise (the runtime's functions).
        if let Some(rc) = unsafe { api.reset() } {
            if rc == 0 {
                st.base += st.cursor as u64;
                st.cursor = 0;
            } else {
                // A failed Reset leaves the records in place: keep the cursor (re-reading from 0
                // would publish every op twice) and stop trying.
                record_error(rc);
                st.reset_disabled = true;
            }
        }
    }
}

/// Emits records `[max(start, cursor), start+len)` of one chunk; false if it stopped at an
/// incomplete record.
///
/// # Safety
/// `p` points to `len` live profiler records (whose spill lists and names are live).
unsafe fn consume(
    p: *const ApiRecord,
    start: usize,
    len: usize,
    version: u8,
    st: &mut DrainState,
    final_pass: bool,
    emit: &mut dyn FnMut(&GpuOp),
) -> bool {
    let from = st.cursor.max(start);
    for i in from..start + len {
        // SAFETY (this loop): the caller's promise; `i - start < len`.
        let rec = unsafe { p.add(i - start) };
        if !final_pass && !unsafe { complete(&*rec) } {
            if st.deferred.len() < MAX_DEFERRED {
                st.deferred.push((st.base + i as u64, rec as usize, unsafe { number(rec) }));
                st.cursor = i + 1;
                continue;
            }
            st.stalls += 1;
            if st.stalls <= MAX_STALLS {
                return false;
            }
        }
        st.stalls = 0;
        unsafe { convert(rec, version, st.base + i as u64, number(rec), emit) };
        st.cursor = i + 1;
    }
    true
}

// ---------------------------------------------------------------------------------------------
// The active source.

pub struct Active {
    pub api: Api,
    pub version: u8,
    /// Records arrive through the chunk callback (else: GetRecords drains).
    pub callback: AtomicBool,
    pub drain: Mutex<DrainState>,
}

static ACTIVE: std::sync::OnceLock<Active> = std::sync::OnceLock::new();
static CB_SEQ: AtomicU64 = AtomicU64::new(0);
/// In a forked child: CLOCK_REALTIME at the fork. The child's runtime is a copy of its
/// parent's, including records the parent will publish itself: records whose call started
/// before the fork are skipped here.
pub static FORK_RT: AtomicU64 = AtomicU64::new(0);
/// Records skipped in a forked child as its parent's.
pub static PARENT_RECORDS_SKIPPED: AtomicU64 = AtomicU64::new(0);

pub fn active() -> Option<&'static Active> {
    ACTIVE.get()
}

/// The chunk callback: runs on a runtime thread; copies everything before returning.
unsafe extern "C" fn on_chunk(records: *const u8, count: u32, _chunk_id: u32, _user: *mut c_void) {
    let _ = std::panic::catch_unwind(|| {
        if records.is_null() {
            return;
        }
        let version = ACTIVE.get().map_or(wire::API_V0_1, |a| a.version);
        let base = CB_SEQ.fetch_add(count as u64, Relaxed);
        let recs = records as *const ApiRecord;
        for i in 0..count as usize {
            // SAFETY: the runtime hands the callback `count` live records, valid until it
            // returns (hip_profiler_ext.h); everything is copied before that.
            unsafe {
                let rec = recs.add(i);
                convert(rec, version, base + i as u64, number(rec), &mut |o| publish::emit(o, false));
            }
        }
        // After the agent's own shutdown (e.g. GPU_CLR_PROFILE_OUTPUT also holds a profiling
        // reference, so the runtime delivers its last slab from its own finaliser): publish
        // here, nobody else will.
        if publish::SHUTTING_DOWN.load(Acquire) {
            publish::publish_queued(0);
        }
    });
}

/// Registers the callback (v0.1.0) and enables profiling. Err: Enable's return code.
///
/// # Safety
/// `api` holds the runtime's functions.
pub unsafe fn start(api: Api) -> Result<&'static Active, HipError> {
    let version = api.version();
    let mut callback = false;
    // SAFETY: the caller's promise (the runtime's functions); on_chunk copies what it needs.
    if let Some(rc) = unsafe { api.register(Some(on_chunk)) } {
        if rc == 0 {
            callback = true;
        } else {
            record_error(rc);
        }
    }
    let _ = ACTIVE.set(Active { api, version, callback: AtomicBool::new(callback), drain: Mutex::new(DrainState::default()) });
    // The session's anchor: every call that starts after `hi` has a record, none that started
    // before `lo` has one, unless the runtime was already recording (then: unknown).
    let mut fresh = true;
    let lo = crate::clock::monotonic_ns();
    if version < wire::API_V0_1 {
        // SAFETY: the caller's promise (the runtime's functions).
        fresh = unsafe { buffered_records(&api) } == Some(0);
    }
    // SAFETY: the caller's promise (the runtime's functions).
    let (rc, start_id) = unsafe { api.enable() };
    if let (0, Some(start_id)) = (rc, start_id) {
        publish::INFO.start_record_id.store(start_id, Relaxed);
        fresh = start_id == 0;
    }
    let hi = crate::clock::monotonic_ns();
    if rc != 0 {
        record_error(rc);
        return Err(rc);
    }
    if fresh {
        publish::INFO.set_anchor(lo, hi);
    }
    Ok(ACTIVE.get().expect("set above"))
}

/// Records the runtime holds now (v0, before Enable), None if GetRecords fails.
///
/// # Safety
/// `api` holds the runtime's functions.
unsafe fn buffered_records(api: &Api) -> Option<usize> {
    let mut chunks: *const c_void = std::ptr::null();
    let (mut count, mut size, mut total) = (0usize, usize::MAX, usize::MAX);
    // SAFETY: the caller's promise (the runtime's functions).
    if unsafe { api.get_records(&mut chunks, &mut count, &mut size, &mut total) } != 0 {
        return None;
    }
    // The early contiguous form writes only the first two.
    Some(if size == usize::MAX && total == usize::MAX { count } else { total })
}

/// In a forked child: the runtime thread that ran the chunk callback in the parent does not
/// exist here, so unregister the callback (records then stay buffered in the runtime) and
/// drain them with GetRecords. Called from the child's publisher thread (never from the fork
/// handler: the runtime's locks may have been held by a parent thread at the fork).
pub fn fork_child_switch_to_drain() -> bool {
    let Some(a) = ACTIVE.get() else { return false };
    if a.api.register.is_none() || !a.callback.load(Acquire) {
        return false;
    }
    // SAFETY: the API was resolved from the loaded runtime; NULL unregisters.
    let rc = unsafe { a.api.register(None) }.unwrap_or(0);
    if rc != 0 {
        record_error(rc);
        return false;
    }
    if let Ok(mut st) = a.drain.lock() {
        *st = DrainState::default();
    }
    a.callback.store(false, Release);
    true
}

/// A periodic drain (no callback). `may_publish`: caller is an agent thread.
pub fn poll(final_pass: bool) {
    let Some(a) = ACTIVE.get() else { return };
    if a.callback.load(Acquire) {
        return;
    }
    let Ok(mut st) = a.drain.try_lock() else { return };
    // SAFETY: the API was resolved from the loaded runtime.
    unsafe { drain(&a.api, a.version, &mut st, final_pass, &mut |o| publish::emit(o, true)) };
}

/// Shutdown: Disable (v0.1.0 drains pending GPU work and flushes callback slabs), then a final
/// GetRecords pass when there is no callback. Return codes checked and counted.
pub fn stop() {
    let Some(a) = ACTIVE.get() else { return };
    if !a.callback.load(Acquire) {
        poll(false);
    }
    // SAFETY: the API was resolved from the loaded runtime.
    let rc = unsafe { a.api.disable() };
    if rc != 0 {
        record_error(rc);
    }
    if !a.callback.load(Acquire) {
        poll(true);
    }
}

#[cfg(test)]
pub(crate) mod tests;
