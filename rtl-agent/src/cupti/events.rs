//! The CUDA events mode (the default, `RTL_AGENT_CUPTI=events`): GPU times with no CUPTI activity
//! record at all. CUPTI's kernel activity instruments every kernel at launch time, graph nodes
//! included (+40 % per 50-kernel graph replay on the H200; its graph-level records +14 %), while
//! one CUDA event after each replay costs +3.7 % (docs/benchmarks.md). So:
//!
//! - a CUPTI callback subscription on the driver functions that put work on a stream
//!   (`launch_params.rs`: kernel launches, graph launches, 1-D copies, memsets) gives each call's
//!   correlation id, context and stream; enter and exit are timed on CLOCK_MONOTONIC (the op's
//!   API half: thread, call times, the function's name);
//! - at the call's exit the agent records an **end event** on the call's stream;
//! - at its entry a **start event** only when the stream may be idle: the stream's previous end
//!   event is unknown, has completed (`cuEventQuery` not NOT_READY), or something else may have
//!   been put on a stream since (any other submitting driver call by any thread: one
//!   process-wide counter, [`FOREIGN`]; and every op on the legacy default stream, which waits
//!   for other streams). Otherwise the op is queued behind the previous one on an in-order
//!   stream and its start is that op's end (`OP_START_IS_PREV_END`). Error of that start: when
//!   the previous op ends between the query and the moment the driver hands the new work to the
//!   GPU, the real start is later, by at most the call's own duration (counted: `queued_raced`,
//!   when the previous end lies before the call's exit);
//! - the publisher thread ([`Events::poll`], every 2 ms while ops are pending) finds completed
//!   end events in order per stream (`cuEventQuery`), converts event times to CLOCK_MONOTONIC
//!   with `cuEventElapsedTime` against the context's anchor event, recycles the events, and hands
//!   one GPU op per call to the Correlator under its correlation id, with its API half, exactly
//!   as CUPTI's records are (a graph replay: one `GraphExecution` op).
//!
//! Anchor: the publisher records the context's anchor event on a private non-blocking stream
//! every [`ANCHOR_EVERY_NS`] and spins on `cuEventQuery`; its time is the midpoint of the last
//! not-ready query's start and the ready query's end. Error: up to half that window (at most
//! [`ANCHOR_MAX_WINDOW_NS`], else the anchor is retaken) plus the driver's completion latency
//! (the GPU writes the event before the host sees it: all op times share this offset), plus the
//! float precision of `cuEventElapsedTime` (ms as f32: about 30 ns at 0.5 s from the anchor).
//!
//! Bounded, never silent: at most [`MAX_EVENTS`] events per context ([`EVENTS_FIRST`] created at
//! the context's first call, then one at a time on the call's path while the pool is empty); a
//! call that finds none free is not timed and counted (`cuda_event_pool_empty`), as is any op
//! not timed for another reason (`cuda_ops_untimed`: an event call failed, the previous op's
//! time is unknown, or still running 1 s after exit began).
//!
//! Hot path (the application's thread, inside the driver call): two clock reads, one driver
//! record (plus a query and perhaps a start record when the stream had work), a thread-local
//! slot, and the state mutex twice for a few map lookups (no driver call under it, no
//! allocation once a stream and its context are known).

use super::cuda::{self, Driver, CUDA_ERROR_NOT_READY, CUDA_SUCCESS};
use super::launch_params::{self as lp, CallbackData, Cb, Launch, Timed, API_ENTER, API_EXIT};
use super::*;
use std::cell::Cell;

/// Events per context, at most.
pub const MAX_EVENTS: usize = 16384;
/// Events created at a context's first timed call.
pub const EVENTS_FIRST: usize = 512;
/// Streams remembered; beyond, those without a pending end are forgotten.
const MAX_STREAMS: usize = 4096;
pub const ANCHOR_EVERY_NS: u64 = 500_000_000;
pub const ANCHOR_MAX_WINDOW_NS: u64 = 200_000;
const ANCHOR_SPIN_NS: u64 = 20_000_000;
/// Publisher period while ops are pending.
pub const POLL_MS: u64 = 2;

type Ev = usize;
/// (context, stream handle, thread id for a per-thread default stream else 0).
type Key = (usize, usize, u32);

struct Ctx {
    device: u32,
    free: Vec<Ev>,
    created: usize,
    anchor_stream: usize,
    anchor_ev: Ev,
    /// CLOCK_MONOTONIC time of the anchor event's last recording.
    anchor_ns: Option<u64>,
    anchor_due: u64,
}

#[derive(Clone, Copy)]
struct LastEnd {
    ev: Ev,
    seq: u64,
    /// [`FOREIGN`] just before the end event was recorded.
    epoch: u64,
    /// The publisher has seen it complete (then it is recycled when replaced, not before).
    completed: bool,
}

#[derive(Default)]
struct Stream {
    cupti_id: u32,
    last_end: Option<LastEnd>,
    /// The last op converted: (its seq, its end time).
    last_done: Option<(u64, u64)>,
}

/// A call between its entry and exit (one per thread: driver calls do not nest).
#[derive(Clone, Copy)]
struct InFlight {
    corr: u32,
    key: Key,
    legacy: bool,
    t_enter: u64,
    start: Ev,
    spare: Ev,
    end: Ev,
    queued_behind: u64,
    what: Timed,
    launch: Launch,
    kernel_name: u32,
}

struct Pending {
    seq: u64,
    f: InFlight,
    t_exit: u64,
    tid: u32,
    api_name: u32,
}

#[derive(Default, Clone, Copy, Debug)]
pub struct EventStats {
    pub ops: u64,
    pub with_start_event: u64,
    pub queued: u64,
    pub queued_raced: u64,
    pub untimed: u64,
    pub pool_empty: u64,
}

#[derive(Default)]
struct State {
    ctxs: HashMap<usize, Ctx>,
    streams: HashMap<Key, Stream>,
    pending: VecDeque<Pending>,
    seq: u64,
    stats: EventStats,
}

pub struct Events {
    drv: Driver,
    stream_id: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, u8, *mut u32) -> c_int>,
    /// Per driver callback id: what it is, and its name's string id.
    kinds: Vec<(Cb, u32)>,
    state: Mutex<State>,
    /// One poll at a time (the publisher and the exit path): the anchor is re-recorded there.
    polling: Mutex<()>,
}

static EVENTS: OnceLock<Events> = OnceLock::new();
/// Submissions other than timed ops (see [`lp::is_submission`]), counted at entry and exit.
pub static FOREIGN: AtomicU64 = AtomicU64::new(0);
static PENDING: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set while the agent itself calls the driver (its own calls are neither timed nor counted).
    static IN_AGENT: Cell<bool> = const { Cell::new(false) };
    static SLOT: Cell<Option<InFlight>> = const { Cell::new(None) };
    static TID: Cell<u32> = const { Cell::new(0) };
    /// Kernel name ids by CUfunction (direct-mapped).
    static NAMES: [Cell<(usize, u32)>; 64] = const { [const { Cell::new((0, 0)) }; 64] };
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

fn tid() -> u32 {
    TID.with(|t| {
        if t.get() == 0 {
            t.set(crate::clock::gettid());
        }
        t.get()
    })
}

pub(super) fn get() -> Option<&'static Events> {
    EVENTS.get()
}

/// Ops recorded and not yet converted (the publisher polls faster while there are).
pub fn pending() -> u64 {
    PENDING.load(Relaxed)
}

pub fn stats() -> Option<EventStats> {
    EVENTS.get().and_then(|e| e.state.lock().ok().map(|s| s.stats))
}

/// Subscribes to the driver's callbacks (timed ops and other submissions, found by name).
///
/// # Safety
/// `a` holds functions resolved from libcupti.
pub(super) unsafe fn start(a: &ffi::Api) -> Result<(), String> {
    let (Some(subscribe), Some(enable_cb), Some(name_of)) = (a.subscribe, a.enable_callback, a.get_callback_name) else {
        return Err("this libcupti lacks cuptiSubscribe / cuptiEnableCallback / cuptiGetCallbackName".into());
    };
    let drv = cuda::load()?;
    let strings = &crate::publish::buffers().strings;
    let mut kinds = vec![(Cb::Other, 0)];
    let mut misses = 0;
    for cbid in 1..8192u32 {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: out-pointer; CUPTI returns a static string.
        if unsafe { name_of(DOMAIN_DRIVER, cbid, &mut p) } != CUPTI_SUCCESS || p.is_null() {
            kinds.push((Cb::Other, 0));
            misses += 1;
            if misses >= 256 {
                break;
            }
            continue;
        }
        misses = 0;
        // SAFETY: NUL-terminated static string from CUPTI.
        let name = unsafe { CStr::from_ptr(p) }.to_bytes();
        let k = lp::classify(name);
        let id = if matches!(k, Cb::Timed { .. }) { strings.intern(wire::STR_API, name) } else { 0 };
        kinds.push((k, id));
    }
    if !kinds.iter().any(|k| matches!(k.0, Cb::Timed { what: Timed::Graph, .. })) {
        return Err("CUPTI names no cuGraphLaunch callback (cuptiGetCallbackName)".into());
    }
    let ev = EVENTS.get_or_init(|| Events {
        drv,
        stream_id: a.get_stream_id_ex,
        kinds,
        state: Mutex::new(State::default()),
        polling: Mutex::new(()),
    });
    let mut sub: *mut c_void = std::ptr::null_mut();
    // SAFETY: out-pointer and a callback that lives for the process.
    let rc = unsafe { subscribe(&mut sub, callback, std::ptr::null_mut()) };
    if rc != CUPTI_SUCCESS {
        return Err(format!("cuptiSubscribe failed (CUptiResult {rc}; another tool may hold CUPTI's one subscription)"));
    }
    for (cbid, k) in ev.kinds.iter().enumerate() {
        if k.0 != Cb::Other {
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
    if domain != DOMAIN_DRIVER || data.is_null() || IN_AGENT.with(|c| c.get()) {
        return;
    }
    let Some(e) = EVENTS.get() else { return };
    let (kind, api_name) = e.kinds.get(cbid as usize).copied().unwrap_or((Cb::Other, 0));
    // SAFETY: CUPTI passes a CUpti_CallbackData for the driver domain, valid during the call.
    let d = unsafe { &*(data as *const CallbackData) };
    match kind {
        Cb::Submission => {
            FOREIGN.fetch_add(1, Relaxed);
        }
        Cb::Timed { what, ptsz } => {
            let _ = std::panic::catch_unwind(|| {
                let Some(_g) = AgentCall::enter() else { return };
                if d.callback_site == API_ENTER {
                    e.enter(d, what, ptsz);
                } else if d.callback_site == API_EXIT {
                    let ok = !d.function_return_value.is_null()
                        // SAFETY: at exit, a driver callback's return value is a CUresult.
                        && unsafe { *(d.function_return_value as *const c_int) } == CUDA_SUCCESS;
                    e.exit(d.correlation_id, ok, api_name);
                }
            });
        }
        Cb::Other => {}
    }
}

fn count_untimed(pool_empty: bool) {
    let c = crate::publish::counters();
    c.cuda_ops_untimed.fetch_add(1, Relaxed);
    if pool_empty {
        c.cuda_event_pool_empty.fetch_add(1, Relaxed);
    }
}

impl Events {
    fn key(ctx: usize, stream: usize, ptsz: bool) -> (Key, bool) {
        // The per-thread default stream is another stream on each thread; the legacy default
        // stream (0 without _ptsz, or CU_STREAM_LEGACY) waits for every blocking stream.
        let per_thread = stream == cuda::CU_STREAM_PER_THREAD || (ptsz && stream == 0);
        let legacy = !per_thread && (stream == 0 || stream == cuda::CU_STREAM_LEGACY);
        ((ctx, stream, if per_thread { tid() } else { 0 }), legacy)
    }

    fn record(&self, ev: Ev, stream: usize) -> bool {
        // SAFETY: an event of the current context, the call's stream (its own handle: 0 and
        // CU_STREAM_PER_THREAD keep their meaning, as the call's `_ptsz` variant had them).
        unsafe { (self.drv.event_record)(ev as *mut c_void, stream as *mut c_void) == CUDA_SUCCESS }
    }

    fn query(&self, ev: Ev) -> c_int {
        // SAFETY: an event the agent created.
        unsafe { (self.drv.event_query)(ev as *mut c_void) }
    }

    fn create(&self, c: &mut Ctx, n: usize) {
        for _ in 0..n.min(MAX_EVENTS - c.created) {
            let mut e: *mut c_void = std::ptr::null_mut();
            // SAFETY: out-pointer; the context is current on this thread.
            if unsafe { (self.drv.event_create)(&mut e, cuda::CU_EVENT_DEFAULT) } != CUDA_SUCCESS || e.is_null() {
                c.created = MAX_EVENTS;
                return;
            }
            c.created += 1;
            c.free.push(e as usize);
        }
    }

    fn new_ctx(&self) -> Ctx {
        let mut dev: c_int = 0;
        let mut anchor: *mut c_void = std::ptr::null_mut();
        // SAFETY: out-pointers; the call's context is current.
        unsafe {
            (self.drv.ctx_get_device)(&mut dev);
            if (self.drv.event_create)(&mut anchor, cuda::CU_EVENT_DEFAULT) != CUDA_SUCCESS {
                anchor = std::ptr::null_mut();
            }
        }
        let mut c = Ctx {
            device: dev.max(0) as u32,
            free: Vec::with_capacity(MAX_EVENTS),
            created: 0,
            anchor_stream: 0,
            anchor_ev: anchor as usize,
            anchor_ns: None,
            anchor_due: 0,
        };
        self.create(&mut c, EVENTS_FIRST);
        c
    }

    fn kernel_name(what: Timed, l: &Launch, symbol: *const c_char) -> u32 {
        if !matches!(what, Timed::Kernel | Timed::KernelEx) || symbol.is_null() {
            return 0;
        }
        let slot = (l.function >> 4 ^ l.function >> 10) % 64;
        if let Some(id) = NAMES.with(|n| Some(n[slot].get()).filter(|&(f, id)| f == l.function && id != 0).map(|x| x.1)) {
            return id;
        }
        // SAFETY: CUPTI's symbol name, live during the callback.
        let id = unsafe { crate::publish::buffers().strings.intern_c(wire::STR_KERNEL, symbol) };
        NAMES.with(|n| n[slot].set((l.function, id)));
        id
    }

    fn enter(&self, d: &CallbackData, what: Timed, ptsz: bool) {
        // SAFETY: the params CUPTI passed for a function of this kind.
        let Some(l) = (unsafe { lp::read(what, d.function_params) }) else { return };
        let t_enter = crate::clock::monotonic_ns();
        let ctx = d.context as usize;
        let (key, legacy) = Self::key(ctx, l.stream, ptsz);
        let kernel_name = Self::kernel_name(what, &l, d.symbol_name);
        // Events go on the call's stream: a `_ptsz` call's stream 0 is the per-thread one.
        let mut l = l;
        if ptsz && l.stream == 0 {
            l.stream = cuda::CU_STREAM_PER_THREAD;
        }
        let (end, spare, prev) = {
            let Ok(mut st) = self.state.lock() else { return };
            let st = &mut *st;
            let c = st.ctxs.entry(ctx).or_insert_with(|| self.new_ctx());
            if c.free.is_empty() {
                self.create(c, 1);
            }
            let Some(end) = c.free.pop() else {
                st.stats.untimed += 1;
                st.stats.pool_empty += 1;
                count_untimed(true);
                return;
            };
            if c.free.is_empty() {
                self.create(c, 1);
            }
            let spare = c.free.pop().unwrap_or(0);
            if !st.streams.contains_key(&key) {
                if st.streams.len() >= MAX_STREAMS {
                    self.forget_idle_streams(st);
                }
                let id = self.cupti_stream_id(ctx, l.stream, ptsz);
                st.streams.insert(key, Stream { cupti_id: id, ..Default::default() });
            }
            let s = &st.streams[&key];
            let epoch = FOREIGN.load(Relaxed);
            let prev = s.last_end.filter(|p| !legacy && !p.completed && p.epoch == epoch);
            (end, spare, prev)
        };
        let queued_behind = prev.filter(|p| self.query(p.ev) == CUDA_ERROR_NOT_READY).map_or(0, |p| p.seq);
        let mut f =
            InFlight { corr: d.correlation_id, key, legacy, t_enter, start: 0, spare, end, queued_behind, what, launch: l, kernel_name };
        if queued_behind == 0 {
            if spare != 0 && self.record(spare, l.stream) {
                f.start = spare;
                f.spare = 0;
            } else {
                // No event for the start (pool empty) or the record failed: not timed.
                self.give_back(ctx, &[end, spare]);
                if let Ok(mut st) = self.state.lock() {
                    st.stats.untimed += 1;
                    st.stats.pool_empty += (spare == 0) as u64;
                }
                count_untimed(spare == 0);
                return;
            }
        }
        SLOT.with(|s| s.set(Some(f)));
    }

    fn give_back(&self, ctx: usize, evs: &[Ev]) {
        if let Ok(mut st) = self.state.lock() {
            if let Some(c) = st.ctxs.get_mut(&ctx) {
                c.free.extend(evs.iter().copied().filter(|&e| e != 0));
            }
        }
    }

    fn exit(&self, corr: u32, ok: bool, api_name: u32) {
        let Some(f) = SLOT.with(|s| s.take()) else { return };
        let ctx = f.key.0;
        if f.corr != corr || !ok {
            // A failed call put nothing on the stream (but perhaps the start event).
            self.give_back(ctx, &[f.start, f.spare, f.end]);
            return;
        }
        let epoch = FOREIGN.load(Relaxed);
        if !self.record(f.end, f.launch.stream) {
            self.give_back(ctx, &[f.start, f.spare, f.end]);
            if let Ok(mut st) = self.state.lock() {
                st.stats.untimed += 1;
            }
            count_untimed(false);
            return;
        }
        let t_exit = crate::clock::monotonic_ns();
        let tid = tid();
        if let Ok(mut st) = self.state.lock() {
            let st = &mut *st;
            st.seq += 1;
            let seq = st.seq;
            let old = st.streams.get_mut(&f.key).and_then(|s| s.last_end.replace(LastEnd { ev: f.end, seq, epoch, completed: false }));
            if let Some(c) = st.ctxs.get_mut(&ctx) {
                // A replaced end the publisher has converted is free now (else it frees it).
                c.free.extend(old.filter(|o| o.completed).map(|o| o.ev));
                c.free.extend(Some(f.spare).filter(|&e| e != 0));
            }
            st.pending.push_back(Pending { seq, f, t_exit, tid, api_name });
            PENDING.fetch_add(1, Relaxed);
        }
        if f.legacy {
            FOREIGN.fetch_add(1, Relaxed);
        }
    }

    fn forget_idle_streams(&self, st: &mut State) {
        let ctxs = &mut st.ctxs;
        st.streams.retain(|k, s| match s.last_end {
            Some(l) if !l.completed => true,
            Some(l) => {
                if let Some(c) = ctxs.get_mut(&k.0) {
                    c.free.push(l.ev);
                }
                false
            }
            None => false,
        });
    }

    fn cupti_stream_id(&self, ctx: usize, stream: usize, ptsz: bool) -> u32 {
        let Some(f) = self.stream_id else { return 0 };
        let mut id = 0u32;
        // SAFETY: the call's context and stream; out-pointer.
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

    /// Publisher thread: anchors, then every op whose end event completed, in order per stream.
    pub fn poll(&self, out: &mut dyn FnMut(GpuOp, ApiCall)) {
        let Some(_g) = AgentCall::enter() else { return };
        let Ok(_one) = self.polling.lock() else { return };
        let now = crate::clock::monotonic_ns();
        let due: Vec<usize> = match self.state.lock() {
            Ok(st) => st.ctxs.iter().filter(|(_, c)| c.anchor_ns.is_none() || c.anchor_due <= now).map(|(&k, _)| k).collect(),
            Err(_) => return,
        };
        for ctx in due {
            self.refresh_anchor(ctx);
        }
        let Ok(mut st) = self.state.lock() else { return };
        let st = &mut *st;
        let mut blocked: Vec<Key> = Vec::new();
        let mut keep = VecDeque::new();
        while let Some(r) = st.pending.pop_front() {
            let Some(c) = st.ctxs.get_mut(&r.f.key.0) else { continue };
            if blocked.contains(&r.f.key) || c.anchor_ns.is_none() || self.query(r.f.end) == CUDA_ERROR_NOT_READY {
                blocked.push(r.f.key);
                keep.push_back(r);
                continue;
            }
            PENDING.fetch_sub(1, Relaxed);
            let s = st.streams.entry(r.f.key).or_default();
            let anchor = c.anchor_ns.unwrap_or(0);
            let at = |ev: Ev| anchor.checked_add_signed(self.elapsed_ns(c.anchor_ev, ev)?);
            let end = at(r.f.end);
            let start = if r.f.start != 0 { at(r.f.start) } else { s.last_done.filter(|d| d.0 == r.f.queued_behind).map(|d| d.1) };
            match s.last_end.as_mut() {
                Some(l) if l.ev == r.f.end => l.completed = true,
                _ => c.free.push(r.f.end),
            }
            c.free.extend(Some(r.f.start).filter(|&e| e != 0));
            let Some((start, end)) = start.zip(end) else {
                s.last_done = None;
                st.stats.untimed += 1;
                count_untimed(false);
                continue;
            };
            s.last_done = Some((r.seq, end));
            st.stats.ops += 1;
            if r.f.start != 0 {
                st.stats.with_start_event += 1;
            } else {
                st.stats.queued += 1;
                st.stats.queued_raced += (start < r.t_exit) as u64;
            }
            let call = ApiCall { start: r.f.t_enter, end: r.t_exit, tid: r.tid, name_id: r.api_name, domain: DOMAIN_DRIVER };
            out(event_op(&r.f, c.device, s.cupti_id, start.min(end), end), call);
        }
        st.pending = keep;
    }

    /// The context's anchor, on the publisher thread with the context pushed.
    fn refresh_anchor(&self, ctx: usize) {
        // SAFETY: a context a timed call ran in (a destroyed one makes every call fail).
        if unsafe { (self.drv.ctx_push)(ctx as *mut c_void) } != CUDA_SUCCESS {
            return;
        }
        let target = self.state.lock().ok().and_then(|mut st| {
            let c = st.ctxs.get_mut(&ctx)?;
            if c.anchor_stream == 0 {
                let mut s: *mut c_void = std::ptr::null_mut();
                // SAFETY: out-pointer; the context is pushed.
                if unsafe { (self.drv.stream_create)(&mut s, cuda::CU_STREAM_NON_BLOCKING) } != CUDA_SUCCESS || s.is_null() {
                    return None;
                }
                c.anchor_stream = s as usize;
            }
            (c.anchor_ev != 0).then_some((c.anchor_ev, c.anchor_stream))
        });
        // While the anchor is re-recorded no op is converted against it (`polling` is held).
        let got = target.and_then(|(ev, stream)| self.measure_anchor(ev, stream));
        if let Ok(mut st) = self.state.lock() {
            if let Some(c) = st.ctxs.get_mut(&ctx) {
                if target.is_some() {
                    c.anchor_ns = got;
                }
                c.anchor_due = crate::clock::monotonic_ns() + if got.is_some() { ANCHOR_EVERY_NS } else { 10_000_000 };
            }
        }
        let mut c: *mut c_void = std::ptr::null_mut();
        // SAFETY: pops what was pushed above.
        unsafe { (self.drv.ctx_pop)(&mut c) };
    }

    /// Records `ev` on the idle private stream and spins until it completes: its time is the
    /// midpoint of the last not-ready query's start and the ready query's end.
    fn measure_anchor(&self, ev: Ev, stream: usize) -> Option<u64> {
        let t0 = crate::clock::monotonic_ns();
        if !self.record(ev, stream) {
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

    pub fn in_flight(&self) -> usize {
        self.state.lock().map_or(0, |st| st.pending.len())
    }

    /// Shutdown: what is still pending is counted untimed.
    pub fn finish(&self) {
        if let Ok(mut st) = self.state.lock() {
            let n = st.pending.len() as u64;
            st.pending.clear();
            PENDING.store(0, Relaxed);
            st.stats.untimed += n;
            crate::publish::counters().cuda_ops_untimed.fetch_add(n, Relaxed);
        }
    }
}

/// The GPU op of one timed call (its API half comes from the Correlator).
fn event_op(f: &InFlight, device: u32, stream: u32, start: u64, end: u64) -> GpuOp {
    let (op, graph) = match f.what {
        Timed::Kernel | Timed::KernelEx => (OpKind::Dispatch, false),
        Timed::Graph => (OpKind::GraphExecution, true),
        Timed::CopyAsync { .. } | Timed::Copy { .. } => (OpKind::Copy, false),
        Timed::MemsetAsync { .. } | Timed::Memset { .. } => (OpKind::Memset, false),
    };
    let mut flags = if f.start == 0 { wire::OP_START_IS_PREV_END } else { 0 };
    if graph {
        flags |= wire::OP_IS_GRAPH;
    }
    GpuOp {
        source: wire::Source::Cupti as u8,
        op: op as u8,
        cpu_clock: ClockDomain::Monotonic as u8,
        gpu_clock: ClockDomain::Monotonic as u8,
        op_count: if graph { 0 } else { 1 },
        flags,
        device,
        queue: stream,
        stream: stream as u64,
        gpu_begin_ns: start,
        gpu_end_ns: end,
        grid: f.launch.grid,
        block: f.launch.block,
        bytes: f.launch.bytes,
        copy_kind: f.launch.copy_kind,
        kernel_name_id: f.kernel_name,
        record_index: f.corr as u64,
        ..Default::default()
    }
}
