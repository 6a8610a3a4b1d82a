//! The completion thread (part of the HSA source, [`crate::hsa`]): reads the times of completed
//! pool signals, forwards completion to the application's signal (what the hardware would have
//! done), publishes the op and recycles the slot. What needs no forward (spans, direct copies)
//! is read every 1 ms in one pass.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};

use rtl_common::agent::{self as wire, ClockDomain, GpuOp, OpKind, Source};

use super::ffi::*;
use super::kernels::kname_lookup;
use super::pool::*;
use super::{watch, FREQ};
use crate::clock;
use crate::publish::{self, counters, record_error};

static STOP: AtomicU32 = AtomicU32::new(0);
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Most signals one wait covers (the rest are seen at the next scan).
const WAIT_MAX: usize = 63;

/// System-domain ticks to ns.
fn sys_to_ns(sys: u64) -> u64 {
    let freq = FREQ.load(Relaxed).max(1);
    if freq == 1_000_000_000 {
        sys
    } else {
        ((sys as u128) * 1_000_000_000 / freq as u128) as u64
    }
}

/// Packet timestamps of pool signal `sig` (agent `agent`'s ticks) in ns of the system domain.
fn dispatch_ns(f: &Fns, agent: u64, sig: u64) -> Result<[u64; 2], i32> {
    let mut t = [0u64; 2];
    // SAFETY: runtime functions with valid arguments.
    let rc = unsafe { (f.dispatch_time)(agent, sig, &mut t) };
    if rc != HSA_STATUS_SUCCESS {
        return Err(rc);
    }
    Ok(t.map(|tick| {
        let mut sys = tick;
        // SAFETY: as above.
        if unsafe { (f.convert_tick)(agent, tick, &mut sys) } != HSA_STATUS_SUCCESS {
            sys = tick;
        }
        sys_to_ns(sys)
    }))
}

/// Hands a pool slot back once its op is queued (in_flight going down is what quiesce() waits
/// for, so a shutdown that saw 0 publishes it).
fn release(f: &Fns, p: &Pool, i: usize) {
    let slot = &p.slots[i];
    // SAFETY: our pool signal, back to 1 for its next use.
    unsafe { (f.signal_store)(slot.sig.load(Relaxed), 1) };
    slot.state.store(0, Release);
    p.push(i);
    p.in_flight.fetch_sub(1, Release);
}

fn complete(f: &Fns, p: &Pool, i: usize) {
    let slot = &p.slots[i];
    // SAFETY: state 1 (Acquire) published `info`.
    let info = unsafe { *slot.info.get() };
    let sig = slot.sig.load(Relaxed);
    // The times first (the signal is reset on release), then completion is forwarded at once:
    // the application may be waiting on it.
    let (times, op_kind, copy_kind, kernel_name_id, pair) = match info.kind {
        K_COPY_DIRECT => {
            if info.times == [0, 0] {
                // Its signal was reused before the copy was done (counted by watch).
                release(f, p, i);
                return;
            }
            (Ok(info.times.map(sys_to_ns)), OpKind::Copy, info.copy_kind, 0, None)
        }
        K_COPY => {
            // SAFETY: our pool signal.
            let v = unsafe { (f.signal_load)(sig) };
            let mut t = [0u64; 2];
            // SAFETY: runtime function with valid arguments.
            let rc = unsafe { (f.copy_time)(sig, &mut t) };
            if info.orig != 0 {
                // SAFETY: the application's signal: decremented as the copy engine would have,
                // or set to the engine's negative error value.
                unsafe {
                    if v < 0 {
                        (f.signal_store)(info.orig, v)
                    } else {
                        (f.signal_subtract)(info.orig, 1)
                    }
                }
            }
            let times = if rc == HSA_STATUS_SUCCESS { Ok(t.map(sys_to_ns)) } else { Err(rc) };
            (times, OpKind::Copy, info.copy_kind, 0, None)
        }
        K_SPAN_END => {
            let a = info.pair as usize;
            let start = dispatch_ns(f, info.agent, p.slots[a].sig.load(Relaxed));
            let end = dispatch_ns(f, info.agent, sig);
            let times = match (start, end) {
                (Ok(s), Ok(e)) => Ok([s[1], e[1]]),
                (Err(rc), _) | (_, Err(rc)) => Err(rc),
            };
            (times, OpKind::from_u8(info.span_op).unwrap_or(OpKind::GraphExecution), 0, 0, Some(a))
        }
        _ => {
            let times = dispatch_ns(f, info.agent, sig);
            if info.orig != 0 {
                // SAFETY: the application's signal, decremented as the packet processor would have.
                unsafe { (f.signal_subtract)(info.orig, 1) };
            }
            let (name, kind) = kname_lookup(info.kobj);
            let kind = OpKind::from_u8(kind).unwrap_or(OpKind::Dispatch);
            let ck = if kind == OpKind::Memset { 12 } else { 0 };
            (times, kind, ck, name, None)
        }
    };
    match times {
        Err(rc) => record_error(rc),
        Ok([begin, end]) => {
            let op = GpuOp {
                source: Source::Hsa as u8,
                op: op_kind as u8,
                copy_kind,
                flags: wire::OP_TID_KNOWN | wire::OP_SUBMIT_TIME | if info.is_graph { wire::OP_IS_GRAPH } else { 0 },
                cpu_clock: ClockDomain::Monotonic as u8,
                gpu_clock: ClockDomain::HsaSystem as u8,
                device: info.device,
                queue: info.queue,
                tid: info.tid,
                cpu_start_ns: info.submit_ns,
                cpu_end_ns: info.submit_ns,
                gpu_begin_ns: begin,
                gpu_end_ns: end,
                grid: info.grid,
                block: info.block,
                bytes: info.bytes,
                src: info.src,
                dst: info.dst,
                kernel_name_id,
                op_count: if op_kind == OpKind::GraphExecution { info.count } else { 1 },
                ..Default::default()
            };
            counters().records_seen.fetch_add(1, Relaxed);
            publish::emit(&op, true);
        }
    }
    if let Some(a) = pair {
        release(f, p, a);
    }
    release(f, p, i);
}

fn completion_main() {
    let Some(f) = FNS.get().copied() else { return };
    let p = pool();
    let mut stop_at: Option<u64> = None;
    let mut pending: Vec<u64> = Vec::with_capacity(WAIT_MAX + 1);
    loop {
        if STOP.load(Acquire) != 0 && stop_at.is_none() {
            stop_at = Some(clock::monotonic_ns() + 1_000_000_000);
        }
        let mut found = 0;
        let armed = p.armed.load(SeqCst);
        let armed_forward = p.armed_forward.load(SeqCst);
        pending.clear();
        let mut forwards = false;
        for i in 0..p.high.load(Relaxed) {
            let slot = &p.slots[i];
            let state = slot.state.load(Acquire);
            if state == watch::TIMED {
                // A direct copy whose signal was about to be reused: settled by that thread.
                complete(&f, p, i);
                found += 1;
                continue;
            }
            if state != 1 {
                continue;
            }
            // SAFETY: state 1 (Acquire) published `info`.
            let (kind, orig) = unsafe { ((*slot.info.get()).kind, (*slot.info.get()).orig) };
            if kind == K_SPAN_START {
                continue; // completed with its K_SPAN_END
            }
            if kind == K_COPY_DIRECT {
                // Not done yet: its times are read at a later look (nothing waits for it).
                if watch::poll(&f, p, i) {
                    complete(&f, p, i);
                    found += 1;
                }
                continue;
            }
            let sig = slot.sig.load(Relaxed);
            // SAFETY: our pool signal.
            if unsafe { (f.signal_load)(sig) } <= 0 {
                complete(&f, p, i);
                found += 1;
            } else if orig != 0 {
                // Forwarding is due when it completes: wait for it.
                forwards = true;
                if pending.len() < WAIT_MAX {
                    pending.push(sig);
                }
            }
            // Else a span (nothing to forward): read with the others at the next look.
        }
        // Publish from here after the agent's shutdown, and whenever the GPU goes idle (a
        // process may end right after its last synchronisation, e.g. with `_exit`).
        if found > 0 && (publish::SHUTTING_DOWN.load(Acquire) || p.in_flight.load(Relaxed) == 0) {
            publish::publish_queued(0);
        }
        if let Some(t) = stop_at {
            if p.in_flight.load(Relaxed) == 0 || clock::monotonic_ns() > t {
                break;
            }
        }
        // Waits: with a forward due, as soon as one of those signals completes. Without (only
        // spans and direct copies in flight: their times can wait), every 1 ms, whatever
        // completed meanwhile read in one pass: no wake-up per op.
        if found == 0 || !forwards {
            if p.in_flight.load(Relaxed) == 0 {
                let w = WAKE.load(Acquire);
                SLEEPING.store(true, SeqCst);
                if p.in_flight.load(SeqCst) == 0 && STOP.load(Acquire) == 0 {
                    crate::publisher_thread::futex_wait(&WAKE, w, 20);
                }
                SLEEPING.store(false, SeqCst);
            } else if let (Some(wait_any), w, true) = (f.wait_any, WAKE_SIG.load(Relaxed), forwards) {
                // Block in the runtime (bounded: 200 us; slots armed meanwhile are not in the
                // set) until any of them completes, or a copy is armed (WAKE_SIG); then rescan
                // everything. Completion is forwarded within microseconds.
                let timeout = (200_000 * FREQ.load(Relaxed) / 1_000_000_000).max(1);
                if w != 0 {
                    pending.push(w);
                }
                let n = pending.len();
                let (conds, vals) = ([SIGNAL_CONDITION_LT; WAIT_MAX + 1], [1i64; WAIT_MAX + 1]);
                BLOCKED.store(true, SeqCst);
                // A slot armed since the scan is not in the set: scan again instead.
                if p.armed.load(SeqCst) == armed {
                    let mut v = 0i64;
                    // SAFETY: n <= WAIT_MAX + 1 signals of ours, conditions and values alike.
                    unsafe { wait_any(n as u32, pending.as_ptr(), conds.as_ptr(), vals.as_ptr(), timeout, WAIT_STATE_BLOCKED, &mut v) };
                }
                BLOCKED.store(false, SeqCst);
                if WOKEN.load(Acquire) {
                    // SAFETY: our wake signal, armed again before anyone may set it.
                    unsafe { (f.signal_store)(w, 1) };
                    WOKEN.store(false, Release);
                }
            } else if let Some(&sig) = pending.first() {
                // No hsa_amd_signal_wait_any: block on one of them (bounded: 200 us).
                let timeout = 200_000 * FREQ.load(Relaxed) / 1_000_000_000;
                // SAFETY: our pool signal; LT 1 = completed.
                unsafe { (f.signal_wait)(sig, SIGNAL_CONDITION_LT, 1, timeout.max(1), WAIT_STATE_BLOCKED) };
            } else {
                // Nothing to forward (spans, direct copies): look again in 1 ms. A dispatch or a
                // forwarded copy submitted meanwhile kicks WAKE (SLEEPING), or changed `armed`.
                let w = WAKE.load(Acquire);
                SLEEPING.store(true, SeqCst);
                if p.armed_forward.load(SeqCst) == armed_forward && STOP.load(Acquire) == 0 {
                    crate::publisher_thread::futex_wait(&WAKE, w, 1);
                }
                SLEEPING.store(false, SeqCst);
            }
        }
    }
}

pub(super) fn start_completion_thread() {
    RUNNING.store(true, Release);
    let r = crate::publisher_thread::spawn_blocking_signals("rtl-agent-hsa", || {
        let _ = std::panic::catch_unwind(completion_main);
        RUNNING.store(false, Release);
    });
    if r.is_err() {
        RUNNING.store(false, Release);
    }
}

/// Stops the completion thread (it finishes in-flight dispatches for up to 1 s).
pub(crate) fn stop() {
    if !RUNNING.load(Acquire) {
        return;
    }
    STOP.store(1, Release);
    kick_completion();
    let t0 = clock::monotonic_ns();
    while RUNNING.load(Acquire) && clock::monotonic_ns() - t0 < 1_500_000_000 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// A forked child: the completion thread is the parent's (gone here) and so are the in-flight
/// dispatches; nothing to wait for at exit.
pub(crate) fn reset_in_child() {
    RUNNING.store(false, Relaxed);
}

/// Waits (at most `ms`) until no dispatch is in flight.
pub(crate) fn quiesce(ms: u64) {
    let Some(p) = POOL_.get() else { return };
    if !RUNNING.load(Acquire) {
        return;
    }
    let t0 = clock::monotonic_ns();
    while p.in_flight.load(Relaxed) > 0 && clock::monotonic_ns() - t0 < ms * 1_000_000 {
        kick_completion();
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}
