//! The collector's hand on held calls: `take_held` is never attached; the collector runs it
//! (`BPF_PROG_TEST_RUN`) for the call slots whose oldest held call is getting old (it reads the
//! `HELD_SINCE` hints), so that the calls of a thread that stopped calling reach the trace
//! within a few milliseconds instead of at its next call, exit or the stop.
//!
//! Arguments: the number of slots (at most [`rtl_common::TAKE_HELD_SLOTS`]), then their indices.

use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};
use rtl_common::{counter, TAKE_HELD_SLOTS};

use crate::{call_slots::take_slot, maps::COUNTERS};

#[raw_tracepoint(tracepoint = "rtl_take_held")]
pub fn take_held(ctx: RawTracePointContext) -> u32 {
    let n: u64 = ctx.arg(0);
    // The context is read at constant offsets only (the verifier refuses a computed one).
    let slots: [u64; TAKE_HELD_SLOTS] = [
        ctx.arg(1),
        ctx.arg(2),
        ctx.arg(3),
        ctx.arg(4),
        ctx.arg(5),
        ctx.arg(6),
        ctx.arg(7),
        ctx.arg(8),
        ctx.arg(9),
        ctx.arg(10),
        ctx.arg(11),
    ];
    let mut taken = 0;
    let mut k = 0;
    while k < TAKE_HELD_SLOTS {
        if k as u64 >= n {
            break;
        }
        if let Some(&i) = slots.get(k) {
            taken += take_slot(i as u32);
        }
        k += 1;
    }
    if let Some(c) = COUNTERS.get_ptr_mut(counter::CALLS_TAKEN) {
        // SAFETY: per-CPU slot, no concurrent writer on this CPU while the program runs.
        unsafe { *c += taken };
    }
    0
}
