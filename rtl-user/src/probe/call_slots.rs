//! The kernel side's per-thread call slots (`CALL_SLOTS`, see rtl-ebpf's `call_slots`): how many
//! the programs use, how many finished calls a slot holds, and what the slots still hold when
//! tracing stops: finished calls not yet written, and entries of calls in flight then (the trace
//! keeps those as calls that did not return, as it would their entry records).

use anyhow::{bail, Context, Result};
use aya::maps::{Array, MapData};
use rtl_common::{CallSlot, HeldCall, CALL_BATCH_MAX, CALL_SLOTS_MAX};

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

/// `config::CALL_BATCH` for a trace with GPU source `gpu`.
///
/// Held calls reach the collector late: when the thread has made [`CALL_BATCH_MAX`] calls, makes
/// another kind of call, exits, enters a call [`rtl_common::CALL_HELD_MAX_NS`] after the oldest
/// held one, or at the stop. The GPU join needs each thread's calls within its `READY_NS` of
/// their return (a thread that launches and then waits would hold its launches), so calls are
/// held only in CPU-side traces (`--gpu none`); with a GPU source each call is written at its
/// return.
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
    let done = (s.done as usize).min(CALL_BATCH_MAX);
    let mut out: Vec<Event> = s.calls[..done].iter().map(|c| held_call(s.owner, c)).collect();
    if s.ret_sp != 0 {
        if let Some(c) = s.calls.get(done) {
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
        let mut s = CallSlot { owner: (7 << 32) | 8, ret_sp: 0x1000, done: 2, ..Default::default() };
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
        s.ret_sp = 0;
        assert_eq!(slot_events(&s).len(), 2);
        s.done = 1000;
        assert_eq!(slot_events(&s).len(), CALL_BATCH_MAX);
    }
}
