//! Per-thread, per-API record numbers (`GpuOp::thread_seq`): the n-th profiler record of thread
//! `thread_id` and API name `api`, counted over every record of the session (with or without GPU
//! work) in the runtime's record order. The collector counts the eBPF-traced calls of the same
//! thread and API the same way, so the two sides meet by number, not by time.
//!
//! Called from whoever converts records, one at a time (the chunk callback, or the drainer under
//! its lock): a spin flag guards the table anyway, and a forked child starts with an empty table
//! and a released flag ([`reset_in_child`]; the child's calls are counted from the fork).
//! Bounded: at most [`MAX_KEYS`] (thread, API) pairs; a record of a pair beyond that gets no
//! number (the collector links it by time).

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering::*};

/// (thread, API) pairs counted at most.
pub const MAX_KEYS: usize = 1 << 16;

/// Keys are a 64-bit hash already (the profiler's thread id) and a small string id: one
/// multiply mixes them (SipHash costs more than the rest of the numbering).
#[derive(Default)]
struct KeyHasher(u64);
impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v as u64);
    }
}

type Map = HashMap<(u64, u32), u64, BuildHasherDefault<KeyHasher>>;

struct Table {
    busy: AtomicBool,
    /// Set in a forked child: clear the table before the next use.
    stale: AtomicBool,
    map: UnsafeCell<Option<Map>>,
}

// SAFETY: `map` is only touched while `busy` is held (acquire/release).
unsafe impl Sync for Table {}

static TABLE: Table = Table { busy: AtomicBool::new(false), stale: AtomicBool::new(false), map: UnsafeCell::new(None) };

/// The counting period: bumped whenever counting restarts in this process (records were lost
/// before they could be counted), so the collector never compares numbers across a gap.
pub static EPOCH: AtomicU16 = AtomicU16::new(0);

/// The next number of (`thread_id`, `api_name_id`), or None (table full, name not interned).
pub fn next(thread_id: u64, api_name_id: u32) -> Option<u64> {
    if api_name_id == 0 {
        return None;
    }
    while TABLE.busy.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
        std::hint::spin_loop();
    }
    // SAFETY: `busy` is held.
    let map = unsafe { &mut *TABLE.map.get() };
    let map = map.get_or_insert_with(Map::default);
    if TABLE.stale.swap(false, Relaxed) {
        map.clear();
    }
    let full = map.len() >= MAX_KEYS;
    let n = match map.entry((thread_id, api_name_id)) {
        std::collections::hash_map::Entry::Occupied(mut e) => {
            *e.get_mut() += 1;
            Some(*e.get() - 1)
        }
        std::collections::hash_map::Entry::Vacant(e) if !full => {
            e.insert(1);
            Some(0)
        }
        std::collections::hash_map::Entry::Vacant(_) => None,
    };
    TABLE.busy.store(false, Release);
    n
}

/// Counting restarts (records were lost uncounted): new epoch, empty table.
pub fn restart() {
    EPOCH.fetch_add(1, Relaxed);
    TABLE.stale.store(true, Relaxed);
}

/// In a forked child (single-threaded at that point): the parent's counts are not the child's.
pub fn reset_in_child() {
    TABLE.busy.store(false, Relaxed);
    TABLE.stale.store(true, Relaxed);
    EPOCH.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_thread_and_api_and_restarts() {
        let _s = crate::clr::tests::SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        reset_in_child();
        assert_eq!(next(7, 1), Some(0));
        assert_eq!(next(7, 1), Some(1));
        assert_eq!(next(7, 2), Some(0), "another API counts on its own");
        assert_eq!(next(8, 1), Some(0), "another thread too");
        assert_eq!(next(7, 1), Some(2));
        assert_eq!(next(7, 0), None, "no name, no number");
        let e = EPOCH.load(Relaxed);
        restart();
        assert_eq!(EPOCH.load(Relaxed), e.wrapping_add(1));
        assert_eq!(next(7, 1), Some(0));
        reset_in_child();
        assert_eq!(EPOCH.load(Relaxed), 0);
        assert_eq!(next(7, 1), Some(0));
    }
}
