//! The lock-free string intern table (kernel and API names): content-hashed, ids are slot index +
//! 1, bytes in a bump arena; each string is sent to the collector once (per process), before the
//! first op that uses it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use rtl_common::agent as wire;

use super::info::counters;

/// A claimed slot whose bytes are still being written (also the all-zero initial state).
#[allow(dead_code)]
const S_WRITING: u8 = 0;
const S_READY: u8 = 1;
const S_DEAD: u8 = 2;

struct StrSlot {
    hash: AtomicU64,
    state: AtomicU8,
    sent: AtomicBool,
    kind: UnsafeCell<u8>,
    off: UnsafeCell<u32>,
    len: UnsafeCell<u32>,
    truncated: UnsafeCell<bool>,
}

pub struct Strings {
    slots: Box<[StrSlot]>,
    arena: Box<[UnsafeCell<u8>]>,
    used: AtomicUsize,
}

// SAFETY: slot fields behind UnsafeCell are written by the one thread that claimed the slot's
// hash (CAS 0 -> h) before it publishes `state = READY` (Release); readers read them only after
// an Acquire load of READY. Arena ranges are handed out once by fetch_add.
unsafe impl Sync for Strings {}
unsafe impl Send for Strings {}

fn fnv1a(kind: u8, b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ kind as u64;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= b.len() as u64;
    if h == 0 {
        1
    } else {
        h
    }
}

impl Strings {
    pub fn new(slots: usize, arena: usize) -> Strings {
        let slots = slots.next_power_of_two();
        // Zeroed allocations (calloc: pages untouched until used): an all-zero StrSlot is an
        // empty slot (hash 0 is never a key) and the arena starts empty.
        // SAFETY: every field of StrSlot and UnsafeCell<u8> is valid as all-zero bytes.
        unsafe {
            Strings {
                slots: Box::<[StrSlot]>::new_zeroed_slice(slots).assume_init(),
                arena: Box::<[UnsafeCell<u8>]>::new_zeroed_slice(arena).assume_init(),
                used: AtomicUsize::new(0),
            }
        }
    }

    /// The id of `bytes` (cut to `STRING_MAX`, flagged), interning it on first sight; 0 when the
    /// table or arena is full (counted in `strings_dropped`).
    pub fn intern(&self, kind: u8, bytes: &[u8]) -> u32 {
        let truncated = bytes.len() > wire::STRING_MAX;
        let h = fnv1a(kind, bytes);
        let bytes = &bytes[..bytes.len().min(wire::STRING_MAX)];
        let mask = self.slots.len() - 1;
        for probe in 0..64 {
            let idx = (h as usize).wrapping_add(probe) & mask;
            let s = &self.slots[idx];
            let cur = s.hash.load(Acquire);
            if cur == h {
                return if s.state.load(Acquire) == S_DEAD { 0 } else { idx as u32 + 1 };
            }
            if cur != 0 {
                continue;
            }
            if s.hash.compare_exchange(0, h, AcqRel, Acquire).is_err() {
                if s.hash.load(Acquire) == h {
                    return if s.state.load(Acquire) == S_DEAD { 0 } else { idx as u32 + 1 };
                }
                continue;
            }
            let off = self.used.fetch_add(bytes.len(), Relaxed);
            if off + bytes.len() > self.arena.len() {
                s.state.store(S_DEAD, Release);
                counters().strings_dropped.fetch_add(1, Relaxed);
                return 0;
            }
            // SAFETY: we claimed the slot and the arena range [off, off+len).
            unsafe {
                core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.arena[off].get(), bytes.len());
                *s.kind.get() = kind;
                *s.off.get() = off as u32;
                *s.len.get() = bytes.len() as u32;
                *s.truncated.get() = truncated;
            }
            s.state.store(S_READY, Release);
            return idx as u32 + 1;
        }
        counters().strings_dropped.fetch_add(1, Relaxed);
        0
    }

    /// Interns a NUL-terminated C string (NULL -> 0).
    ///
    /// # Safety
    /// `p` is NULL or points to a readable NUL-terminated string.
    pub unsafe fn intern_c(&self, kind: u8, p: *const libc::c_char) -> u32 {
        // SAFETY: the caller's promise: `p` is a live NUL-terminated string (read up to its NUL,
        // at most 64 KiB).
        unsafe {
            if p.is_null() {
                return 0;
            }
            // Per-thread cache by address; a hit is confirmed by comparing the bytes (an address
            // reused for another string after a module unload must not get the old id).
            const WAYS: usize = 64;
            thread_local! {
                static CACHE: [core::cell::Cell<(usize, u32)>; WAYS] = const { [const { core::cell::Cell::new((0, 0)) }; WAYS] };
            }
            let key = p as usize ^ kind as usize;
            let slot = (key >> 3 ^ key >> 9) % WAYS;
            let hit = CACHE.with(|c| {
                let (k, id) = c[slot].get();
                (k == key && id != 0).then_some(id)
            });
            if let Some(id) = hit {
                if let Some((k, fl, bytes)) = self.get(id) {
                    if k == kind
                        && fl & wire::STR_TRUNCATED == 0
                        && libc::memcmp(p as *const libc::c_void, bytes.as_ptr() as *const libc::c_void, bytes.len()) == 0
                        && *p.add(bytes.len()) == 0
                    {
                        return id;
                    }
                }
            }
            let n = libc::strnlen(p, 1 << 16);
            let id = self.intern(kind, core::slice::from_raw_parts(p as *const u8, n));
            CACHE.with(|c| c[slot].set((key, id)));
            id
        }
    }

    /// (kind, flags, bytes) of a ready string; waits briefly for one still being written.
    pub fn get(&self, id: u32) -> Option<(u8, u8, &[u8])> {
        let s = self.slots.get(id.checked_sub(1)? as usize)?;
        for spin in 0..10_000 {
            match s.state.load(Acquire) {
                S_READY => {
                    // SAFETY: READY published these fields and the arena bytes.
                    return unsafe {
                        let off = *s.off.get() as usize;
                        let len = *s.len.get() as usize;
                        let bytes = core::slice::from_raw_parts(self.arena[off..].as_ptr() as *const u8, len);
                        Some((*s.kind.get(), if *s.truncated.get() { wire::STR_TRUNCATED } else { 0 }, bytes))
                    };
                }
                S_DEAD => return None,
                _ if spin < 100 => std::hint::spin_loop(),
                _ => std::thread::yield_now(),
            }
        }
        None
    }

    pub fn is_sent(&self, id: u32) -> bool {
        self.slots.get(id.wrapping_sub(1) as usize).is_none_or(|s| s.sent.load(Relaxed))
    }

    pub fn mark_sent(&self, id: u32) {
        if let Some(s) = self.slots.get(id.wrapping_sub(1) as usize) {
            s.sent.store(true, Relaxed);
        }
    }

    /// A forked child must send its strings again (the collector keys them by pid).
    pub fn reset_sent(&self) {
        for s in self.slots.iter() {
            s.sent.store(false, Relaxed);
        }
    }
}
