//! The kernel side's per-thread call slots (`CALL_SLOTS`, see rtl-ebpf's `call_slots`): how many
//! the programs use, and the entries still parked there when tracing stops (calls in flight
//! then: the trace keeps them as calls that did not return, as it would their entry records).

use anyhow::{bail, Context, Result};
use aya::maps::{Array, MapData};
use rtl_common::{ApiEnter, CallSlot, EventHeader, EventKind, CALL_SLOTS_MAX, MAX_ARGS};

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

#[derive(Clone, Copy)]
#[repr(transparent)]
struct SlotValue(CallSlot);

// SAFETY: plain #[repr(C)] u64s, no padding.
unsafe impl aya::Pod for SlotValue {}

/// The entries parked in the first `mask + 1` slots, as the `ApiEnterShort` records they stand
/// for, oldest first. Read once the programs are quiesced and the ring buffer drained: a parked
/// entry is the newest record of its thread, so it goes after everything read before.
pub fn parked_entries(map: &aya::maps::Map, mask: u64) -> Result<Vec<ApiEnter>> {
    let slots: Array<&MapData, SlotValue> = Array::try_from(map).context("CALL_SLOTS map")?;
    let mut out = Vec::new();
    for i in 0..=mask.min(CALL_SLOTS_MAX as u64 - 1) as u32 {
        let s = slots.get(&i, 0).with_context(|| format!("reading call slot {i}"))?.0;
        if s.owner == 0 {
            continue;
        }
        let mut args = [0; MAX_ARGS];
        args[..6].copy_from_slice(&s.args);
        let hdr = EventHeader { kind: EventKind::ApiEnterShort as u32, api_id: s.api_id as u32, pid_tgid: s.owner, ts_ns: s.ts_ns };
        out.push(ApiEnter { hdr, args, fsbase: s.fsbase });
    }
    out.sort_by_key(|e| e.hdr.ts_ns);
    Ok(out)
}
