//! The bounded lock-free queue of GPU ops between their producers (the profiler's callback, the
//! drains, the HSA completion thread) and the publisher: D. Vyukov's sequence-numbered MPMC ring.
//! A full queue refuses the op (never blocks).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering::*};

use rtl_common::agent::GpuOp;

#[repr(align(64))]
struct Pad<T>(T);

struct Slot {
    seq: AtomicUsize,
    val: UnsafeCell<MaybeUninit<GpuOp>>,
}

pub struct Queue {
    slots: Box<[Slot]>,
    mask: usize,
    enq: Pad<AtomicUsize>,
    deq: Pad<AtomicUsize>,
}

// SAFETY: a slot's value is accessed only by the one thread that won its sequence number.
unsafe impl Sync for Queue {}
unsafe impl Send for Queue {}

impl Queue {
    pub fn new(cap: usize) -> Queue {
        let cap = cap.next_power_of_two().max(2);
        let slots = (0..cap).map(|i| Slot { seq: AtomicUsize::new(i), val: UnsafeCell::new(MaybeUninit::uninit()) }).collect();
        Queue { slots, mask: cap - 1, enq: Pad(AtomicUsize::new(0)), deq: Pad(AtomicUsize::new(0)) }
    }

    /// False when full. Never blocks.
    pub fn push(&self, v: &GpuOp) -> bool {
        let mut pos = self.enq.0.load(Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Acquire);
            let dif = seq as isize - pos as isize;
            if dif == 0 {
                match self.enq.0.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                    Ok(_) => {
                        // SAFETY: we own this slot until the Release store below.
                        unsafe { (*slot.val.get()).write(*v) };
                        slot.seq.store(pos + 1, Release);
                        return true;
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return false;
            } else {
                pos = self.enq.0.load(Relaxed);
            }
        }
    }

    pub fn pop(&self) -> Option<GpuOp> {
        let mut pos = self.deq.0.load(Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Acquire);
            let dif = seq as isize - (pos + 1) as isize;
            if dif == 0 {
                match self.deq.0.compare_exchange_weak(pos, pos + 1, Relaxed, Relaxed) {
                    Ok(_) => {
                        // SAFETY: the producer's Release store made the value visible.
                        let v = unsafe { (*slot.val.get()).assume_init_read() };
                        slot.seq.store(pos + self.mask + 1, Release);
                        return Some(v);
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = self.deq.0.load(Relaxed);
            }
        }
    }

    pub fn len(&self) -> usize {
        self.enq.0.load(Relaxed).wrapping_sub(self.deq.0.load(Relaxed))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the queue. Only with no other thread touching it (a forked child).
    pub fn reset(&self) {
        for (i, s) in self.slots.iter().enumerate() {
            s.seq.store(i, Relaxed);
        }
        self.enq.0.store(0, Relaxed);
        self.deq.0.store(0, Release);
    }
}
