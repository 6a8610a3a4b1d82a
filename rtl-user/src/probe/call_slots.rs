//! The kernel side's per-thread call slots (`CALL_SLOTS`, see rtl-ebpf's `call_slots`): how many
//! the programs use, how many finished calls a slot holds, and what the slots still hold when
//! tracing stops: finished calls not yet written, and entries of calls in flight then (the trace
//! keeps those as calls that did not return, as it would their entry records).

use anyhow::{bail, Context, Result};
use aya::maps::{Array, MapData};
use rtl_common::{CallSlot, HeldCall, CALL_BATCH_MAX, CALL_HELD_MAX_NS, CALL_SLOTS_MAX, HELD_COUNT_MASK, TAKE_HELD_SLOTS};

use crate::collect::decode::{held_pair, Event};

/// `RTL_CALL_SLOTS`: how many slots the programs use (a power of two up to
/// [`CALL_SLOTS_MAX`]; 0: none, every call writes an entry and a return record). For tests
/// (few slots: threads share them) and measurements; unset: all of them.
pub const ENV: &str = "RTL_CALL_SLOTS";

/// `config::CALL_SLOT_MASK` for the slot count `RTL_CALL_SLOTS` asks for.
pub fn mask_from_env() -> Result<u64> {
    let Some(v) = std::env::var_os(ENV) else { return Ok(CALL_SLOTS_MAX as u64 - 1) };
    let n: u32 = v.to_str().and_then(|s| s.parse().ok()).with_context(|| format!("{ENV}={v:?}: not a number"))?;
    if n == 0 {
        return Ok(0);
    }
    if !n.is_power_of_two() || n > CALL_SLOTS_MAX {
        bail!("{ENV}={n}: a power of two up to {CALL_SLOTS_MAX}, or 0 for none");
    }
    Ok(n as u64 - 1)
}

/// `RTL_CALL_BATCH`: finished calls a slot holds before writing them together (0 or 1: each
/// call at its return; at most [`CALL_BATCH_MAX`]). For tests and measurements; unset: see
/// [`batch_for`].
pub const BATCH_ENV: &str = "RTL_CALL_BATCH";

/// `config::CALL_BATCH` for a trace with GPU source `gpu`: [`CALL_BATCH_MAX`] in CPU-side
/// traces, 0 (each call written at its return) with a GPU source, unless `RTL_CALL_BATCH` says
/// otherwise.
///
/// Held calls reach the collector when the thread has made that many calls, makes another kind
/// of call, exits, enters a call [`CALL_HELD_MAX_NS`] after the oldest held one, when the
/// [`HeldTaker`] takes them out of the slot of a thread that stopped calling (every
/// [`TAKE_PERIOD`], those older than [`CALL_HELD_MAX_NS`]), or at the stop: a few milliseconds
/// after they returned on a machine with a core to spare, more when the collector's thread
/// waits for one. The GPU join by time (HSA capture) links an operation to the calls it has
/// when the operation's time comes, and linked operations to the wrong thread's launch when a
/// launch was held (`gpu_join_hsa`, on a loaded 2-core machine), so with a GPU source calls are
/// not held.
pub fn batch_for(gpu: rtl_common::GpuSource) -> Result<u64> {
    if let Some(v) = std::env::var_os(BATCH_ENV) {
        let n: u64 = v.to_str().and_then(|s| s.parse().ok()).with_context(|| format!("{BATCH_ENV}={v:?}: not a number"))?;
        if n > CALL_BATCH_MAX as u64 {
            bail!("{BATCH_ENV}={n}: at most {CALL_BATCH_MAX}");
        }
        return Ok(n);
    }
    Ok(if gpu == rtl_common::GpuSource::None { CALL_BATCH_MAX as u64 } else { 0 })
}

/// How often the [`HeldTaker`] looks for old held calls.
pub const TAKE_PERIOD: std::time::Duration = std::time::Duration::from_millis(2);

/// `RTL_HELD_TAKE=0`: no [`HeldTaker`] (held calls wait for their thread or the stop). For tests.
pub const TAKE_ENV: &str = "RTL_HELD_TAKE";

/// Takes the held calls of threads that stopped calling out of their slots: reads the kernel
/// side's `HELD_SINCE` hints (a memory-mapped array: the entry time of each slot's oldest held
/// call) and runs the `take_held` program (`BPF_PROG_TEST_RUN`) for the slots whose calls are
/// older than [`CALL_HELD_MAX_NS`]. The program writes them to the ring buffer, racing the
/// owning thread with a compare-and-swap, so each call is written once and in its thread's
/// order.
pub struct HeldTaker {
    hints: *const u64,
    len: usize,
    slots: usize,
    prog: aya::programs::ProgramFd,
    /// Program runs, and slots handed to them.
    pub runs: u64,
    pub slots_asked: u64,
}

// SAFETY: the mapping is read-only and owned by this value (unmapped on drop); the kernel writes
// it concurrently, which is why every read is volatile.
unsafe impl Send for HeldTaker {}

impl HeldTaker {
    /// `hints`: the `HELD_SINCE` map; `prog`: the loaded `take_held` program; `mask`:
    /// `config::CALL_SLOT_MASK`.
    pub fn new(hints: &aya::maps::MapData, prog: aya::programs::ProgramFd, mask: u64) -> Result<Self> {
        use std::os::fd::{AsFd, AsRawFd};
        let len = CALL_SLOTS_MAX as usize * 8;
        // SAFETY: a read-only shared mapping of a BPF_F_MMAPABLE array's values; checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, hints.fd().as_fd().as_raw_fd(), 0) };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error()).context("mapping the HELD_SINCE map");
        }
        Ok(Self { hints: p as *const u64, len, slots: (mask as usize + 1).min(CALL_SLOTS_MAX as usize), prog, runs: 0, slots_asked: 0 })
    }

    /// The slots whose oldest held call entered before `before_ns` (CLOCK_MONOTONIC, the
    /// probes' clock).
    fn old_slots(&self, before_ns: u64) -> Vec<u64> {
        let mut out = Vec::new();
        for i in 0..self.slots {
            // SAFETY: inside the mapping; the kernel writes these words concurrently.
            let t = unsafe { std::ptr::read_volatile(self.hints.add(i)) };
            if t != 0 && t < before_ns {
                out.push(i as u64);
            }
        }
        out
    }

    /// One pass: the held calls older than [`CALL_HELD_MAX_NS`] at `now_ns` go out.
    pub fn take_old(&mut self, now_ns: u64) -> Result<()> {
        let old = self.old_slots(now_ns.saturating_sub(CALL_HELD_MAX_NS));
        for chunk in old.chunks(TAKE_HELD_SLOTS) {
            let mut args = [0u64; TAKE_HELD_SLOTS + 1];
            args[0] = chunk.len() as u64;
            args[1..=chunk.len()].copy_from_slice(chunk);
            test_run_raw_tp(&self.prog, &args).context("running the take_held program")?;
            self.runs += 1;
            self.slots_asked += chunk.len() as u64;
        }
        Ok(())
    }
}

impl Drop for HeldTaker {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.hints as *mut libc::c_void, self.len) };
    }
}

/// `BPF_PROG_TEST_RUN` of a raw tracepoint program with `args` as its arguments, on this CPU.
fn test_run_raw_tp(prog: &aya::programs::ProgramFd, args: &[u64]) -> Result<()> {
    use std::os::fd::{AsFd, AsRawFd};
    // union bpf_attr's `test` member (include/uapi/linux/bpf.h).
    #[repr(C)]
    #[derive(Default)]
    struct TestRun {
        prog_fd: u32,
        retval: u32,
        data_size_in: u32,
        data_size_out: u32,
        data_in: u64,
        data_out: u64,
        repeat: u32,
        duration: u32,
        ctx_size_in: u32,
        ctx_size_out: u32,
        ctx_in: u64,
        ctx_out: u64,
        flags: u32,
        cpu: u32,
        batch_size: u32,
        _pad: u32,
    }
    const BPF_PROG_TEST_RUN: libc::c_long = 10;
    let attr = TestRun {
        prog_fd: prog.as_fd().as_raw_fd() as u32,
        ctx_size_in: std::mem::size_of_val(args) as u32,
        ctx_in: args.as_ptr() as u64,
        ..Default::default()
    };
    // SAFETY: the attribute and the arguments outlive the call; the kernel only reads `args`.
    let r = unsafe { libc::syscall(libc::SYS_bpf, BPF_PROG_TEST_RUN, &attr as *const TestRun, std::mem::size_of::<TestRun>()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// The [`HeldTaker`] on its own thread, every [`TAKE_PERIOD`] until stopped.
pub struct TakerThread {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<(HeldTaker, Option<anyhow::Error>)>,
}

impl TakerThread {
    pub fn start(mut taker: HeldTaker) -> Result<Self> {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rtl-held".into())
            .spawn(move || {
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(TAKE_PERIOD);
                    if let Err(e) = taker.take_old(crate::clock::ClockPair::now().monotonic_ns as u64) {
                        return (taker, Some(e));
                    }
                }
                (taker, None)
            })
            .context("starting the held-call thread")?;
        Ok(Self { stop, thread })
    }

    /// Stops it; its counts (program runs, slots asked) and the error that stopped it early.
    pub fn stop(self) -> (u64, u64, Option<anyhow::Error>) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        match self.thread.join() {
            Ok((t, e)) => (t.runs, t.slots_asked, e),
            Err(_) => (0, 0, Some(anyhow::anyhow!("the held-call thread panicked"))),
        }
    }
}

#[derive(Clone, Copy)]
#[repr(transparent)]
struct SlotValue(CallSlot);

// SAFETY: plain #[repr(C)] u64s, no padding.
unsafe impl aya::Pod for SlotValue {}

/// What the first `mask + 1` slots hold, as the records they stand for: each thread's finished
/// calls (as `ApiCall` pairs), then its parked entry (an `ApiEnterShort`), threads ordered by
/// their oldest. Read once the programs are quiesced and the ring buffer drained: what a slot
/// holds is the newest data of its thread, so it goes after everything read before.
pub fn parked_entries(map: &aya::maps::Map, mask: u64) -> Result<Vec<Event>> {
    let slots: Array<&MapData, SlotValue> = Array::try_from(map).context("CALL_SLOTS map")?;
    let mut threads = Vec::new();
    for i in 0..=mask.min(CALL_SLOTS_MAX as u64 - 1) as u32 {
        let s = slots.get(&i, 0).with_context(|| format!("reading call slot {i}"))?.0;
        if s.owner == 0 {
            continue;
        }
        let held = slot_events(&s);
        if let Some(first) = held.first() {
            threads.push((first_ts(first), held));
        }
    }
    threads.sort_by_key(|t| t.0);
    Ok(threads.into_iter().flat_map(|t| t.1).collect())
}

/// One owned slot's calls, oldest first.
fn slot_events(s: &CallSlot) -> Vec<Event> {
    let done = ((s.state & HELD_COUNT_MASK) as usize).min(CALL_BATCH_MAX);
    let mut out: Vec<Event> = s.calls[..done].iter().map(|c| held_call(s.owner, c)).collect();
    if s.ret_sp != 0 {
        if let Some(c) = s.calls.get(s.parked_at as usize) {
            let (enter, _) = held_pair(s.owner, c);
            out.push(Event::Enter(enter));
        }
    }
    out
}

fn first_ts(e: &Event) -> u64 {
    match e {
        Event::Call(enter, _) | Event::Enter(enter) => enter.hdr.ts_ns,
        _ => 0,
    }
}

fn held_call(pid_tgid: u64, c: &HeldCall) -> Event {
    let (e, x) = held_pair(pid_tgid, c);
    Event::Call(e, x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtl_common::EventKind;

    fn call(api_id: u64, t: u64) -> HeldCall {
        HeldCall { api_id, enter_ts: t, exit_ts: t + 1, args: [t, 2, 3, 4, 5, 6], fsbase: 9, ret: t * 10 }
    }

    #[test]
    fn a_slot_gives_its_finished_calls_then_its_parked_entry() {
        let mut s = CallSlot { owner: (7 << 32) | 8, ret_sp: 0x1000, state: 2 | (5 << 8), parked_at: 2, ..Default::default() };
        s.calls[0] = call(1, 100);
        s.calls[1] = call(2, 200);
        s.calls[2] = HeldCall { exit_ts: 0, ret: 0, ..call(3, 300) };
        let ev = slot_events(&s);
        assert_eq!(ev.len(), 3);
        let Event::Call(e, x) = &ev[1] else { panic!("{:?}", ev[1]) };
        assert_eq!((e.hdr.api_id, e.hdr.ts_ns, e.hdr.pid_tgid, e.args[0], e.args[6], e.fsbase), (2, 200, (7 << 32) | 8, 200, 0, 9));
        assert_eq!((x.hdr.ts_ns, x.ret, x.hdr.kind), (201, 2000, EventKind::ApiExitShort as u32));
        let Event::Enter(p) = &ev[2] else { panic!("{:?}", ev[2]) };
        assert_eq!((p.hdr.api_id, p.hdr.ts_ns, p.hdr.kind), (3, 300, EventKind::ApiEnterShort as u32));
        // Nothing parked: only the finished calls; a count beyond the array is cut to it.
        // Held calls taken by the collector while a call was in flight: none held, the parked
        // entry where it entered.
        s.state = 6 << 8;
        let ev = slot_events(&s);
        assert_eq!(ev.len(), 1);
        assert!(matches!(&ev[0], Event::Enter(p) if p.hdr.api_id == 3 && p.hdr.ts_ns == 300), "{ev:?}");
        s.state = 2 | (5 << 8);
        s.ret_sp = 0;
        assert_eq!(slot_events(&s).len(), 2);
        s.state = 0xff;
        assert_eq!(slot_events(&s).len(), CALL_BATCH_MAX);
    }
}
