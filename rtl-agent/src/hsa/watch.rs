//! Copies that complete the application's own signal (part of the HSA source, [`crate::hsa`]):
//! which application signals the agent still has to read a copy's times from, and the moment
//! it must read them at the latest.
//!
//! A DMA copy's completion signal is what the runtime's fence behind the copy waits for (and
//! through it the next copy on the stream). Giving the copy a pool signal and forwarding its
//! completion from the agent's thread puts a thread wake-up on that path for every copy. So
//! where every packet the runtime submits passes through the agent's queue handler (queue
//! interception works), a copy keeps the application's signal: the engine completes it as
//! without the agent, and the copy's start and end are read from that signal afterwards
//! (`hsa_amd_profiling_get_async_copy_time`: the engine writes them into its completion
//! signal). Nothing waits for the agent.
//!
//! The times stay in the signal only until it is used again or destroyed, so the agent reads
//! them by then at the latest: the completion thread polls the watched signals (a copy is done
//! when its end time changed from what the signal held before the copy), and every path by
//! which the runtime can reuse or free a signal reads first: a copy submitted with a watched
//! completion signal (the copy wrappers), a packet whose completion signal is watched (the
//! queue handler, before the packet reaches the queue), `hsa_signal_destroy` (wrapped). A
//! signal reused before its copy finished (the runtime would not do this: the copy's fence
//! waits for it) leaves that copy untimed, counted (`copies_untimed`).
//!
//! The table: open addressing on the signal handle, [`PROBES`] places per key, each key's
//! entry naming its pool slot. Whoever takes a slot from state ARMED to BUSY (compare and swap)
//! is the only one reading the signal until it sets TIMED (times in the slot, the signal no
//! longer referenced) or ARMED again (not done yet).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::*};

use super::ffi::{Fns, HSA_STATUS_SUCCESS};
use super::pool::{Pool, K_COPY_DIRECT};
use crate::publish::counters;

const SLOTS: usize = 8192;
/// Places an entry may sit from its key's home (insert and lookup both stop there).
const PROBES: usize = 32;
const EMPTY: u64 = 0;
const TOMB: u64 = u64::MAX;
const RESERVED: u64 = u64::MAX - 1;

static KEYS: [AtomicU64; SLOTS] = [const { AtomicU64::new(EMPTY) }; SLOTS];
static SLOT_OF: [AtomicU32; SLOTS] = [const { AtomicU32::new(0) }; SLOTS];
/// Entries in the table (0: the handler's per-packet check is one load).
static WATCHED: AtomicUsize = AtomicUsize::new(0);

/// Slot states of a direct copy (`Slot::state`; 0 is free, 1 armed as for every kind).
pub(crate) const ARMED: u8 = 1;
pub(crate) const BUSY: u8 = 5;
/// The times are in the slot (`InFlight::times`), the signal is no longer read.
pub(crate) const TIMED: u8 = 6;

fn home(sig: u64) -> usize {
    // Signal handles are pointers: mix the bits above the alignment.
    ((sig >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % SLOTS
}

/// Watches `sig` for pool slot `slot`. False: no room near its home (the copy is then run with a
/// pool signal instead).
pub(crate) fn insert(sig: u64, slot: usize) -> bool {
    let h = home(sig);
    for p in 0..PROBES {
        let i = (h + p) % SLOTS;
        let k = KEYS[i].load(Acquire);
        if (k == EMPTY || k == TOMB) && KEYS[i].compare_exchange(k, RESERVED, AcqRel, Acquire).is_ok() {
            SLOT_OF[i].store(slot as u32, Relaxed);
            KEYS[i].store(sig, Release);
            WATCHED.fetch_add(1, SeqCst);
            return true;
        }
    }
    false
}

/// The runtime refused the copy of slot `i` (armed, not yet given back): if it was watched as
/// `sig`, its entry goes and a look by the completion thread in progress is waited out, so the
/// slot can be given back.
pub(crate) fn unwatch(p: &Pool, i: usize, sig: u64) {
    if !remove(sig, i) {
        return;
    }
    let slot = &p.slots[i];
    loop {
        match slot.state.compare_exchange(ARMED, BUSY, AcqRel, Acquire) {
            Err(BUSY) => std::hint::spin_loop(),
            _ => return,
        }
    }
}

/// Removes the entry of `sig` for `slot`; false: there was none.
fn remove(sig: u64, slot: usize) -> bool {
    let h = home(sig);
    for p in 0..PROBES {
        let i = (h + p) % SLOTS;
        if KEYS[i].load(Acquire) == sig
            && SLOT_OF[i].load(Relaxed) as usize == slot
            && KEYS[i].compare_exchange(sig, TOMB, AcqRel, Acquire).is_ok()
        {
            WATCHED.fetch_sub(1, SeqCst);
            return true;
        }
    }
    false
}

fn lookup(sig: u64) -> Option<usize> {
    let h = home(sig);
    (0..PROBES).map(|p| (h + p) % SLOTS).find(|&i| KEYS[i].load(Acquire) == sig).map(|i| SLOT_OF[i].load(Relaxed) as usize)
}

/// True when any signal is watched (cheap: the handler checks this first).
pub(crate) fn any() -> bool {
    WATCHED.load(Relaxed) != 0
}

/// The copy end time signal `sig` holds now (0 when it holds none or the runtime refuses).
pub(crate) fn end_time(f: &Fns, sig: u64) -> u64 {
    let mut t = [0u64; 2];
    // SAFETY: runtime function, valid out pointer; `sig` is a live signal of the application's.
    if unsafe { (f.copy_time)(sig, &mut t) } == HSA_STATUS_SUCCESS {
        t[1]
    } else {
        0
    }
}

/// With slot `i` BUSY (ours): reads its copy's times from the application's signal. `force`:
/// the signal is about to be reused or destroyed, so a copy not done yet is given up (counted).
/// Returns true when the slot is settled (TIMED: times stored or given up, entry removed);
/// false: not done, the slot goes back to ARMED.
fn read_times(f: &Fns, p: &Pool, i: usize, force: bool) -> bool {
    let slot = &p.slots[i];
    // SAFETY: BUSY (taken by our compare and swap, Acquire) gives us `info`.
    let info = unsafe { &mut *slot.info.get() };
    let mut t = [0u64; 2];
    // SAFETY: the application's signal, not destroyed while its entry exists (the destroy
    // wrapper settles the slot first).
    let ok = unsafe { (f.copy_time)(info.orig, &mut t) } == HSA_STATUS_SUCCESS;
    let done = ok && t[1] != 0 && t[1] != info.prior_end;
    if !done && !force {
        slot.state.store(ARMED, Release);
        return false;
    }
    if done {
        info.times = t;
    } else {
        info.times = [0, 0];
        counters().copies_untimed.fetch_add(1, Relaxed);
    }
    remove(info.orig, i);
    slot.state.store(TIMED, Release);
    true
}

/// The completion thread's look at a direct copy's slot: true when it is TIMED now (ready to
/// publish). Never waits: a slot another thread is settling is looked at again next time.
pub(crate) fn poll(f: &Fns, p: &Pool, i: usize) -> bool {
    let slot = &p.slots[i];
    match slot.state.compare_exchange(ARMED, BUSY, AcqRel, Acquire) {
        Ok(_) => read_times(f, p, i, false),
        Err(s) => s == TIMED,
    }
}

/// `sig` is about to be used again or destroyed: if a copy's times are still to be read from
/// it, read them now (or give that copy up if it is not done). Called on the application's
/// thread before the runtime sees the reuse.
pub(crate) fn settle(f: &Fns, p: &Pool, sig: u64) {
    if sig == 0 || !any() {
        return;
    }
    let Some(i) = lookup(sig) else { return };
    let slot = &p.slots[i];
    let mut spins = 0u32;
    loop {
        match slot.state.compare_exchange(ARMED, BUSY, AcqRel, Acquire) {
            Ok(_) => {
                // SAFETY: BUSY is ours. The slot may have been settled and reused for another
                // signal since the lookup: then ours is no longer watched.
                let (kind, orig) = unsafe { ((*slot.info.get()).kind, (*slot.info.get()).orig) };
                if kind != K_COPY_DIRECT || orig != sig {
                    slot.state.store(ARMED, Release);
                    return;
                }
                read_times(f, p, i, true);
                return;
            }
            // The completion thread is reading it: it settles or re-arms within microseconds.
            Err(BUSY) => {
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
            Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_lookup_remove() {
        let sigs: Vec<u64> = (0..200u64).map(|i| 0x7f00_0000_0000 + i * 64).collect();
        for (n, &s) in sigs.iter().enumerate() {
            assert!(insert(s, n));
        }
        for (n, &s) in sigs.iter().enumerate() {
            assert_eq!(lookup(s), Some(n));
        }
        for (n, &s) in sigs.iter().enumerate() {
            remove(s, n);
            assert_eq!(lookup(s), None);
        }
        // Tombstones are reused: the same keys fit again.
        for (n, &s) in sigs.iter().enumerate() {
            assert!(insert(s, n + 1));
            assert_eq!(lookup(s), Some(n + 1));
            remove(s, n + 1);
        }
        assert!(!any());
    }
}
