//! Graph-replay spans from CUDA events (the default for CUDA graph launches): one GPU span per
//! `cuGraphLaunch*`, at no per-node cost.
//!
//! CUPTI's graph-level records (`KIND_GRAPH_TRACE`) instrument every node of a replay (+13.5 %
//! on a 50-kernel graph on the H200), and kernel records without them record every node. So
//! instead: a CUPTI callback subscription on the driver's `cuGraphLaunch*` callback ids (found by
//! name), and around each launch
//! - kernel, memcpy and memset activity records are switched off from the launch's entry to its
//!   exit (measured: CUPTI then records none of the replay's nodes), and back on after;
//! - at exit of a successful launch an end timing event is recorded on the launch's stream;
//! - at entry a start event is recorded only when needed: when the stream's previous span end
//!   event is not known to be the last thing submitted on the stream, or has already completed
//!   (the stream may be idle). Otherwise the replay was queued behind the previous one, and its
//!   start is that end's time (`OP_START_IS_PREV_END`). "Known to be the last thing": no
//!   launch, copy, memset, event record, stream wait... ([`is_submission`]) was called by any
//!   thread of the process since (one process-wide counter: conservative, never per stream).
//!
//! Times: `cuEventElapsedTime` (float ms, ~0.5 us resolution) from an anchor event of the same
//! context whose CLOCK_MONOTONIC time is known: the publisher thread records one every
//! [`ANCHOR_EVERY_NS`] on a private non-blocking stream and spins on `cuEventQuery`; the anchor's
//! time is the midpoint of the last not-ready query's start and the ready query's end (error:
//! half that window, plus the driver's completion latency; `ANCHOR_MAX_WINDOW_NS` bounds it).
//! Finished replays are found by `cuEventQuery` in the publisher's `poll()` and published as the
//! same `GraphExecution` op a graph-level record gives, keyed by the launch's correlation id.
//!
//! Bounded: at most [`MAX_EVENTS`] events per context; a launch that finds none free is counted
//! untimed (`graphs_untimed`), never waited for.

use super::cuda::{self, Driver, CUDA_ERROR_NOT_READY, CUDA_SUCCESS};
use super::*;
use std::cell::Cell;

/// CUPTI_API_ENTER / CUPTI_API_EXIT (cupti_callbacks.h, CUpti_ApiCallbackSite).
const API_ENTER: u32 = 0;
const API_EXIT: u32 = 1;
/// Events per context, at most (start and end events of replays in flight, anchors).
pub const MAX_EVENTS: usize = 8192;
/// Events created at a context's first graph launch, and per refill (publisher thread).
const EVENTS_CHUNK: usize = 256;
/// Streams remembered per process (their last span end); beyond, idle ones are forgotten.
const MAX_STREAMS: usize = 4096;
pub const ANCHOR_EVERY_NS: u64 = 500_000_000;
/// An anchor whose query window is wider than this is not used (the next poll tries again).
pub const ANCHOR_MAX_WINDOW_NS: u64 = 200_000;
/// How long one anchor is spun for, at most.
const ANCHOR_SPIN_NS: u64 = 20_000_000;

/// CUpti_CallbackData (cupti_callbacks.h; unchanged since CUPTI 4.1, CUDA 13.0 included).
#[repr(C)]
pub struct CallbackData {
    pub callback_site: u32,
    pub function_name: *const c_char,
    pub function_params: *const c_void,
    pub function_return_value: *mut c_void,
    pub symbol_name: *const c_char,
    pub context: *mut c_void,
    pub context_uid: u32,
    pub correlation_data: *mut u64,
    pub correlation_id: u32,
}

/// cuGraphLaunch_params / cuGraphLaunch_ptsz_params (generated_cuda_meta.h, CUDA 13.0).
#[repr(C)]
pub struct GraphLaunchParams {
    pub graph_exec: *mut c_void,
    pub stream: *mut c_void,
}

const _: () = {
    assert!(std::mem::offset_of!(CallbackData, context) == 40);
    assert!(std::mem::offset_of!(CallbackData, correlation_id) == 64);
    assert!(size_of::<CallbackData>() == 72);
    assert!(size_of::<GraphLaunchParams>() == 16);
};

/// What a driver callback id is to the spans (by its name).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Cb {
    Other,
    GraphLaunch { ptsz: bool },
    Submission,
}

/// Driver API names that put something on a stream (other than a graph launch): any of them
/// since a replay's end event means the next replay on that stream gets its own start event.
pub fn is_submission(name: &[u8]) -> bool {
    const FAMILIES: [&[u8]; 15] = [
        b"cuLaunch",
        b"cuMemcpy",
        b"cuMemset",
        b"cuEventRecord",
        b"cuStreamWait",
        b"cuStreamWrite",
        b"cuStreamBatchMemOp",
        b"cuStreamAddCallback",
        b"cuMemAllocAsync",
        b"cuMemAllocFromPoolAsync",
        b"cuMemFreeAsync",
        b"cuMemPrefetch",
        b"cuMemDiscard",
        b"cuSignalExternalSemaphoresAsync",
        b"cuWaitExternalSemaphoresAsync",
    ];
    FAMILIES.iter().any(|f| name.starts_with(f))
}

pub fn classify(name: &[u8]) -> Cb {
    if name.starts_with(b"cuGraphLaunch") {
        Cb::GraphLaunch { ptsz: name.ends_with(b"_ptsz") }
    } else if is_submission(name) {
        Cb::Submission
    } else {
        Cb::Other
    }
}

type Ev = usize;

struct Anchor {
    ev: Ev,
    ns: u64,
}

struct CtxState {
    device: u32,
    free: Vec<Ev>,
    created: usize,
    /// The private non-blocking stream anchors are recorded on (0: not created yet).
    anchor_stream: usize,
    anchor: Option<Anchor>,
    anchor_due: u64,
}

#[derive(Default)]
struct StreamState {
    cupti_id: u32,
    /// The last span's end event, and the submission count read right after it was recorded.
    last_end: Option<(Ev, u64, u64)>,
    /// The last published span: (its sequence number, its end time).
    last_done: Option<(u64, u64)>,
}

struct InFlight {
    corr: u32,
    start: Option<Ev>,
    /// The span this one is queued behind (its sequence number, its end event).
    queued_behind: Option<(u64, Ev)>,
    untimed: bool,
}

struct Replay {
    seq: u64,
    ctx: usize,
    stream: (usize, usize, u32),
    corr: u32,
    start: Option<Ev>,
    queued_behind: Option<u64>,
    end: Ev,
}

#[derive(Default)]
struct State {
    ctxs: HashMap<usize, CtxState>,
    streams: HashMap<(usize, usize, u32), StreamState>,
    in_flight: Vec<InFlight>,
    pending: VecDeque<Replay>,
    seq: u64,
    /// Graph launches inside their entry/exit callbacks (kernel records are off while > 0).
    launching: u32,
    pub stats: SpanStats,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct SpanStats {
    pub spans: u64,
    pub with_start_event: u64,
    pub queued: u64,
    /// Queued replays whose previous replay finished during the launch call itself: their true
    /// start lies between that end and the call's return.
    pub queued_raced: u64,
    pub untimed: u64,
}

pub struct Spans {
    drv: Driver,
    disable: unsafe extern "C" fn(u32) -> c_int,
    enable: unsafe extern "C" fn(u32) -> c_int,
    stream_id: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, u8, *mut u32) -> c_int>,
    /// Activity kinds switched off around graph launches.
    node_kinds: Vec<u32>,
    kinds: Vec<Cb>,
    state: Mutex<State>,
}

static SPANS: OnceLock<Spans> = OnceLock::new();
/// Submissions (see [`is_submission`]) by any thread, counted at their entry and exit.
static SUBMISSIONS: AtomicU64 = AtomicU64::new(0);
/// Graph launches between their entry and exit callbacks, process-wide.
static LAUNCHING: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while the agent itself calls the driver (its own event records are no submissions).
    static IN_AGENT: Cell<bool> = const { Cell::new(false) };
}

struct AgentCall;
impl AgentCall {
    fn enter() -> Option<AgentCall> {
        IN_AGENT.with(|c| (!c.replace(true)).then_some(AgentCall))
    }
}
impl Drop for AgentCall {
    fn drop(&mut self) {
        IN_AGENT.with(|c| c.set(false));
    }
}

pub fn active() -> bool {
    SPANS.get().is_some()
}

pub fn stats() -> Option<SpanStats> {
    SPANS.get().and_then(|s| s.state.lock().ok().map(|st| st.stats))
}

/// Subscribes to the driver's graph-launch and submission callbacks. `node_kinds`: the
/// activity kinds to switch off around each graph launch.
///
/// # Safety
/// `a` holds functions resolved from libcupti.
pub(super) unsafe fn start(a: &ffi::Api, node_kinds: &[u32]) -> Result<(), String> {
    let (Some(subscribe), Some(enable_cb), Some(disable), Some(name_of)) = (a.subscribe, a.enable_callback, a.disable, a.get_callback_name)
    else {
        return Err("this libcupti lacks cuptiSubscribe / cuptiEnableCallback / cuptiActivityDisable / cuptiGetCallbackName".into());
    };
    let drv = cuda::load()?;
    let mut kinds = vec![Cb::Other; 1];
    let mut misses = 0;
    for cbid in 1..8192u32 {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: out-pointer; CUPTI returns a static string.
        if unsafe { name_of(DOMAIN_DRIVER, cbid, &mut p) } != CUPTI_SUCCESS || p.is_null() {
            kinds.push(Cb::Other);
            misses += 1;
            if misses >= 256 {
                break;
            }
            continue;
        }
        misses = 0;
        // SAFETY: NUL-terminated static string from CUPTI.
        kinds.push(classify(unsafe { CStr::from_ptr(p) }.to_bytes()));
    }
    if !kinds.iter().any(|k| matches!(k, Cb::GraphLaunch { .. })) {
        return Err("CUPTI names no cuGraphLaunch callback (cuptiGetCallbackName)".into());
    }
    let spans = Spans {
        drv,
        disable,
        enable: a.enable,
        stream_id: a.get_stream_id_ex,
        node_kinds: node_kinds.to_vec(),
        kinds,
        state: Mutex::new(State::default()),
    };
    let spans = SPANS.get_or_init(|| spans);
    let mut sub: *mut c_void = std::ptr::null_mut();
    // SAFETY: out-pointer and a callback that lives for the process.
    let rc = unsafe { subscribe(&mut sub, callback, std::ptr::null_mut()) };
    if rc != CUPTI_SUCCESS {
        return Err(format!("cuptiSubscribe failed (CUptiResult {rc}; another tool may hold CUPTI's one subscription)"));
    }
    for (cbid, k) in spans.kinds.iter().enumerate() {
        if *k != Cb::Other {
            // SAFETY: a valid subscriber and callback id of the driver domain.
            let rc = unsafe { enable_cb(1, sub, DOMAIN_DRIVER, cbid as u32) };
            if rc != CUPTI_SUCCESS {
                return Err(format!("cuptiEnableCallback(driver, {cbid}) failed (CUptiResult {rc})"));
            }
        }
    }
    Ok(())
}

unsafe extern "C" fn callback(_user: *mut c_void, domain: u32, cbid: u32, data: *const c_void) {
    if domain != DOMAIN_DRIVER || data.is_null() {
        return;
    }
    let Some(s) = SPANS.get() else { return };
    let kind = s.kinds.get(cbid as usize).copied().unwrap_or(Cb::Other);
    if kind == Cb::Other {
        return;
    }
    // SAFETY: CUPTI passes a CUpti_CallbackData for the driver domain, valid during the call.
    let d = unsafe { &*(data as *const CallbackData) };
    let _ = std::panic::catch_unwind(|| match kind {
        Cb::Submission => {
            if IN_AGENT.with(|c| c.get()) {
                return;
            }
            SUBMISSIONS.fetch_add(1, Relaxed);
            if d.callback_site == API_ENTER && LAUNCHING.load(Relaxed) > 0 {
                crate::publish::counters().ops_maybe_unrecorded.fetch_add(1, Relaxed);
            }
        }
        Cb::GraphLaunch { ptsz } => {
            if d.function_params.is_null() {
                return;
            }
            // SAFETY: the params of a cuGraphLaunch[_ptsz] callback.
            let p = unsafe { &*(d.function_params as *const GraphLaunchParams) };
            let Some(_g) = AgentCall::enter() else { return };
            let ok = d.callback_site == API_EXIT
                && !d.function_return_value.is_null()
                // SAFETY: at exit, a driver callback's return value is a CUresult.
                && unsafe { *(d.function_return_value as *const c_int) } == CUDA_SUCCESS;
            s.on_launch(d.callback_site, d.context as usize, p.stream as usize, ptsz, d.correlation_id, ok);
        }
        Cb::Other => {}
    });
}

impl Spans {
    fn stream_key(stream: usize, ptsz: bool) -> (usize, u32) {
        // The per-thread default stream is a different stream on each thread.
        let per_thread = stream == cuda::CU_STREAM_PER_THREAD || (ptsz && stream == 0);
        (stream, if per_thread { crate::clock::gettid() } else { 0 })
    }

    fn record(&self, ev: Ev, stream: usize, ptsz: bool) -> bool {
        let f = if ptsz { self.drv.event_record_ptsz.unwrap_or(self.drv.event_record) } else { self.drv.event_record };
        // SAFETY: an event of the current context, the launch's stream.
        unsafe { f(ev as *mut c_void, stream as *mut c_void) == CUDA_SUCCESS }
    }

    fn query(&self, ev: Ev) -> c_int {
        // SAFETY: an event the agent created.
        unsafe { (self.drv.event_query)(ev as *mut c_void) }
    }

    /// Creates up to `n` events in the current context.
    fn grow(&self, c: &mut CtxState, n: usize) {
        for _ in 0..n.min(MAX_EVENTS - c.created) {
            let mut e: *mut c_void = std::ptr::null_mut();
            // SAFETY: out-pointer; the context is current on this thread.
            if unsafe { (self.drv.event_create)(&mut e, cuda::CU_EVENT_DEFAULT) } != CUDA_SUCCESS || e.is_null() {
                return;
            }
            c.created += 1;
            c.free.push(e as usize);
        }
    }

    fn on_launch(&self, site: u32, ctx: usize, stream: usize, ptsz: bool, corr: u32, ok: bool) {
        let Ok(mut st) = self.state.lock() else { return };
        let st = &mut *st;
        if site == API_ENTER {
            if st.launching == 0 {
                for &k in &self.node_kinds {
                    // SAFETY: resolved from libcupti.
                    unsafe { (self.disable)(k) };
                }
            }
            st.launching += 1;
            LAUNCHING.fetch_add(1, Relaxed);
            let c = st.ctxs.entry(ctx).or_insert_with(|| {
                let mut dev: c_int = 0;
                // SAFETY: out-pointer; the launch's context is current.
                unsafe { (self.drv.ctx_get_device)(&mut dev) };
                CtxState { device: dev.max(0) as u32, free: Vec::new(), created: 0, anchor_stream: 0, anchor: None, anchor_due: 0 }
            });
            if c.created == 0 {
                self.grow(c, EVENTS_CHUNK);
            }
            let (h, tid) = Self::stream_key(stream, ptsz);
            let s = st.streams.entry((ctx, h, tid)).or_default();
            let queued_behind = match s.last_end {
                Some((ev, subs, seq)) if subs == SUBMISSIONS.load(Relaxed) && self.query(ev) == CUDA_ERROR_NOT_READY => Some((seq, ev)),
                _ => None,
            };
            let mut f = InFlight { corr, start: None, queued_behind, untimed: false };
            if queued_behind.is_none() {
                match c.free.pop() {
                    Some(ev) if self.record(ev, stream, ptsz) => f.start = Some(ev),
                    Some(ev) => {
                        c.free.push(ev);
                        f.untimed = true;
                    }
                    None => f.untimed = true,
                }
            }
            st.in_flight.push(f);
            return;
        }
        // Exit.
        if site != API_EXIT {
            return;
        }
        st.launching = st.launching.saturating_sub(1);
        LAUNCHING.fetch_sub(1, Relaxed);
        if st.launching == 0 {
            for &k in &self.node_kinds {
                // SAFETY: resolved from libcupti.
                unsafe { (self.enable)(k) };
            }
        }
        let Some(i) = st.in_flight.iter().rposition(|f| f.corr == corr) else { return };
        let f = st.in_flight.swap_remove(i);
        let (h, tid) = Self::stream_key(stream, ptsz);
        let key = (ctx, h, tid);
        let Some(c) = st.ctxs.get_mut(&ctx) else { return };
        let give_back = |c: &mut CtxState, ev: Option<Ev>| c.free.extend(ev);
        if !ok {
            // A failed launch put nothing on the stream but perhaps the start event.
            give_back(c, f.start);
            if let Some(s) = st.streams.get_mut(&key) {
                s.last_end = None;
            }
            return;
        }
        let mut end = if f.untimed { None } else { c.free.pop() };
        if let Some(ev) = end.filter(|&ev| !self.record(ev, stream, ptsz)) {
            c.free.push(ev);
            end = None;
        }
        let Some(end) = end else {
            give_back(c, f.start);
            st.stats.untimed += 1;
            crate::publish::counters().graphs_untimed.fetch_add(1, Relaxed);
            if let Some(s) = st.streams.get_mut(&key) {
                s.last_end = None;
            }
            return;
        };
        if let Some((_, prev)) = f.queued_behind {
            // The previous end still pending (not yet recycled by poll) and not reached: the
            // replay was submitted before the previous one finished, so its start is that end.
            let still_last = st.streams.get(&key).is_some_and(|s| s.last_end.is_some_and(|l| l.0 == prev));
            if !still_last || self.query(prev) != CUDA_ERROR_NOT_READY {
                st.stats.queued_raced += 1;
            }
        }
        st.seq += 1;
        let seq = st.seq;
        if st.streams.len() >= MAX_STREAMS && !st.streams.contains_key(&key) {
            st.streams.retain(|_, s| s.last_end.is_some());
        }
        let cupti_id = self.cupti_stream_id(ctx, stream, ptsz);
        let s = st.streams.entry(key).or_default();
        s.cupti_id = cupti_id;
        s.last_end = Some((end, SUBMISSIONS.load(Relaxed), seq));
        st.pending.push_back(Replay { seq, ctx, stream: key, corr, start: f.start, queued_behind: f.queued_behind.map(|q| q.0), end });
    }

    fn cupti_stream_id(&self, ctx: usize, stream: usize, ptsz: bool) -> u32 {
        let Some(f) = self.stream_id else { return 0 };
        let mut id = 0u32;
        // SAFETY: the launch's context and stream; out-pointer.
        if unsafe { f(ctx as *mut c_void, stream as *mut c_void, ptsz as u8, &mut id) } == CUPTI_SUCCESS {
            id
        } else {
            0
        }
    }

    /// Elapsed ns from `a` to `b` (both completed events of one context), signed.
    fn elapsed_ns(&self, a: Ev, b: Ev) -> Option<i64> {
        let mut ms = 0f32;
        // SAFETY: two completed events the agent created in one context.
        let rc = unsafe { (self.drv.event_elapsed)(&mut ms, a as *mut c_void, b as *mut c_void) };
        (rc == CUDA_SUCCESS && ms.is_finite()).then(|| (ms as f64 * 1e6).round() as i64)
    }

    /// Publisher thread: anchors, refills, and every finished replay as a GraphExecution op.
    pub fn poll(&self, out: &mut dyn FnMut(GpuOp)) {
        let Some(_g) = AgentCall::enter() else { return };
        let now = crate::clock::monotonic_ns();
        let due: Vec<usize> = match self.state.lock() {
            Ok(st) => st
                .ctxs
                .iter()
                .filter(|(_, c)| c.anchor.is_none() || c.anchor_due <= now || c.free.len() < EVENTS_CHUNK / 4)
                .map(|(&k, _)| k)
                .collect(),
            Err(_) => return,
        };
        for ctx in due {
            self.refresh_context(ctx);
        }
        let Ok(mut st) = self.state.lock() else { return };
        let st = &mut *st;
        let mut blocked: Vec<(usize, usize, u32)> = Vec::new();
        let mut keep = VecDeque::with_capacity(st.pending.len());
        while let Some(r) = st.pending.pop_front() {
            if blocked.contains(&r.stream) {
                keep.push_back(r);
                continue;
            }
            let rc = self.query(r.end);
            if rc == CUDA_ERROR_NOT_READY {
                blocked.push(r.stream);
                keep.push_back(r);
                continue;
            }
            let Some(c) = st.ctxs.get_mut(&r.ctx) else { continue };
            let s = st.streams.entry(r.stream).or_default();
            let times = (rc == CUDA_SUCCESS)
                .then_some(())
                .and_then(|_| c.anchor.as_ref())
                .and_then(|a| Some((a.ns, self.elapsed_ns(a.ev, r.end)?, a.ev)))
                .and_then(|(ans, e_end, aev)| {
                    let end = ans.checked_add_signed(e_end)?;
                    let start = match (r.start, r.queued_behind) {
                        (Some(sev), _) => ans.checked_add_signed(self.elapsed_ns(aev, sev)?)?,
                        (None, Some(prev)) => match s.last_done {
                            Some((seq, t)) if seq == prev => t,
                            _ => return None,
                        },
                        (None, None) => return None,
                    };
                    Some((start.min(end), end))
                });
            if s.last_end.is_some_and(|(ev, _, _)| ev == r.end) {
                s.last_end = None;
            }
            c.free.extend(r.start);
            c.free.push(r.end);
            match times {
                Some((start, end)) => {
                    s.last_done = Some((r.seq, end));
                    st.stats.spans += 1;
                    if r.start.is_some() {
                        st.stats.with_start_event += 1;
                    } else {
                        st.stats.queued += 1;
                    }
                    crate::publish::counters().graph_spans.fetch_add(1, Relaxed);
                    out(span_op(c.device, s.cupti_id, start, end, r.start.is_none(), r.corr));
                }
                None => {
                    s.last_done = None;
                    st.stats.untimed += 1;
                    crate::publish::counters().graphs_untimed.fetch_add(1, Relaxed);
                }
            }
        }
        st.pending = keep;
    }

    /// A context's anchor (when due) and event refill, on the publisher thread with the context
    /// pushed; the state lock is not held while spinning.
    fn refresh_context(&self, ctx: usize) {
        // SAFETY: a context a graph launch ran in (a destroyed one makes every call fail).
        if unsafe { (self.drv.ctx_push)(ctx as *mut c_void) } != CUDA_SUCCESS {
            return;
        }
        let (ev, stream) = {
            let Ok(mut st) = self.state.lock() else { return self.pop() };
            let Some(c) = st.ctxs.get_mut(&ctx) else { return self.pop() };
            if c.free.len() < EVENTS_CHUNK / 4 {
                self.grow(c, EVENTS_CHUNK);
            }
            if c.anchor.is_some() && c.anchor_due > crate::clock::monotonic_ns() {
                return self.pop();
            }
            if c.anchor_stream == 0 {
                let mut s: *mut c_void = std::ptr::null_mut();
                // SAFETY: out-pointer; the context is pushed.
                if unsafe { (self.drv.stream_create)(&mut s, cuda::CU_STREAM_NON_BLOCKING) } != CUDA_SUCCESS || s.is_null() {
                    return self.pop();
                }
                c.anchor_stream = s as usize;
            }
            let Some(ev) = c.free.pop() else { return self.pop() };
            (ev, c.anchor_stream)
        };
        let got = self.measure_anchor(ev, stream);
        if let Ok(mut st) = self.state.lock() {
            if let Some(c) = st.ctxs.get_mut(&ctx) {
                match got {
                    Some(ns) => {
                        if let Some(old) = c.anchor.replace(Anchor { ev, ns }) {
                            c.free.push(old.ev);
                        }
                        c.anchor_due = crate::clock::monotonic_ns() + ANCHOR_EVERY_NS;
                    }
                    None => c.free.push(ev),
                }
            }
        }
        self.pop();
    }

    /// Records `ev` on the idle private stream and spins until it completes: its time is the
    /// midpoint of the last not-ready query's start and the ready query's end.
    fn measure_anchor(&self, ev: Ev, stream: usize) -> Option<u64> {
        let t0 = crate::clock::monotonic_ns();
        // SAFETY: the agent's event and stream, context pushed.
        if unsafe { (self.drv.event_record)(ev as *mut c_void, stream as *mut c_void) } != CUDA_SUCCESS {
            return None;
        }
        let mut before = t0;
        loop {
            let q0 = crate::clock::monotonic_ns();
            let rc = self.query(ev);
            let q1 = crate::clock::monotonic_ns();
            match rc {
                CUDA_SUCCESS => return (q1 - before <= ANCHOR_MAX_WINDOW_NS).then_some(before + (q1 - before) / 2),
                CUDA_ERROR_NOT_READY if q1 - t0 < ANCHOR_SPIN_NS => before = q0,
                _ => return None,
            }
        }
    }

    fn pop(&self) {
        let mut c: *mut c_void = std::ptr::null_mut();
        // SAFETY: pops what refresh_context pushed.
        unsafe { (self.drv.ctx_pop)(&mut c) };
    }

    pub fn in_flight(&self) -> usize {
        self.state.lock().map_or(0, |st| st.pending.len())
    }

    /// Shutdown: what is still pending is counted untimed.
    pub fn finish(&self) {
        if let Ok(mut st) = self.state.lock() {
            let n = st.pending.len() as u64;
            st.pending.clear();
            st.stats.untimed += n;
            crate::publish::counters().graphs_untimed.fetch_add(n, Relaxed);
        }
    }
}

/// The GraphExecution op of one replay (its API call is filled in by the Correlator).
pub fn span_op(device: u32, stream: u32, start: u64, end: u64, start_is_prev_end: bool, corr: u32) -> GpuOp {
    GpuOp {
        source: wire::Source::Cupti as u8,
        op: OpKind::GraphExecution as u8,
        cpu_clock: CLOCK.load(Relaxed),
        gpu_clock: ClockDomain::Monotonic as u8,
        flags: wire::OP_IS_GRAPH | if start_is_prev_end { wire::OP_START_IS_PREV_END } else { 0 },
        device,
        queue: stream,
        stream: stream as u64,
        gpu_begin_ns: start,
        gpu_end_ns: end,
        record_index: corr as u64,
        ..Default::default()
    }
}

/// The live spans, if started.
pub(super) fn get() -> Option<&'static Spans> {
    SPANS.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_names_are_classified() {
        assert_eq!(classify(b"cuGraphLaunch"), Cb::GraphLaunch { ptsz: false });
        assert_eq!(classify(b"cuGraphLaunch_ptsz"), Cb::GraphLaunch { ptsz: true });
        for n in
            ["cuLaunchKernel", "cuLaunchKernelEx_ptsz", "cuMemcpyHtoDAsync_v2", "cuMemsetD8Async", "cuEventRecord", "cuStreamWaitEvent"]
        {
            assert_eq!(classify(n.as_bytes()), Cb::Submission, "{n}");
        }
        for n in ["cuEventQuery", "cuCtxSynchronize", "cuStreamSynchronize", "cuGraphInstantiate", "cuMemAlloc_v2"] {
            assert_eq!(classify(n.as_bytes()), Cb::Other, "{n}");
        }
    }
}
