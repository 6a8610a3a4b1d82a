//! Queue creation (part of the HSA source, [`crate::hsa`]): `hsa_queue_create` is wrapped; the
//! queue is created with `hsa_amd_queue_intercept_create`, timestamps on, and the packet handler
//! ([`super::packets`]) registered. The first intercept queue is probed (a no-op packet must
//! reach the handler); where interception is refused or broken, queues are created normally.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::*};

use super::ffi::*;
use super::packets::{handler, QueueCtx};
use crate::clock;
use crate::publish::{counters, record_error};

pub(super) static INTERCEPT_REFUSED: AtomicBool = AtomicBool::new(false);

pub(super) unsafe extern "C" fn queue_create_wrapper(
    agent: u64,
    size: u32,
    qtype: u32,
    callback: QueueCallback,
    data: *mut c_void,
    private_segment_size: u32,
    group_segment_size: u32,
    queue: *mut *mut c_void,
) -> i32 {
    // SAFETY: the application's hsa_queue_create arguments, passed to the runtime's entries of
    // the same signature; `*queue` is read only after the runtime created it (hsa_queue_t: `id` at
    // QUEUE_ID_OFF); the QueueCtx lives as long as the queue (leaked on purpose).
    unsafe {
        let Some(f) = FNS.get() else { return 1 };
        if PROBE.load(Acquire) == PROBE_BROKEN {
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        let rc = (f.intercept_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        if rc != HSA_STATUS_SUCCESS || queue.is_null() || (*queue).is_null() {
            refused(rc);
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        let q = *queue;
        let rc = (f.set_profiler)(q, 1);
        if rc != HSA_STATUS_SUCCESS {
            record_error(rc);
        }
        let ctx = Box::into_raw(Box::new(QueueCtx {
            agent,
            queue_id: std::ptr::read_unaligned((q as *const u8).add(QUEUE_ID_OFF) as *const u64),
            seen: AtomicBool::new(false),
            probing: AtomicBool::new(false),
        }));
        let rc = (f.intercept_register)(q, handler, ctx as *mut c_void);
        if rc != HSA_STATUS_SUCCESS {
            // An intercept queue without our handler still passes packets through.
            refused(rc);
            drop(Box::from_raw(ctx));
            return HSA_STATUS_SUCCESS;
        }
        if !probe_ok(f, q, &*ctx) {
            // Interception is broken here (packets never come out): replace the queue by a
            // normal one before the application puts anything into it.
            let rc = (f.queue_destroy)(q);
            if rc != HSA_STATUS_SUCCESS {
                record_error(rc);
            }
            *queue = std::ptr::null_mut();
            return (f.queue_create)(agent, size, qtype, callback, data, private_segment_size, group_segment_size, queue);
        }
        HSA_STATUS_SUCCESS
    }
}

const PROBE_UNKNOWN: u8 = 0;
const PROBE_RUNNING: u8 = 1;
pub(super) const PROBE_OK: u8 = 2;
const PROBE_BROKEN: u8 = 3;
pub(super) static PROBE: AtomicU8 = AtomicU8::new(PROBE_UNKNOWN);
/// How long the first intercept queue gets to hand a probe packet to our handler.
const PROBE_WAIT_MS: u64 = 500;

/// On the first intercept queue: submit a no-op barrier-AND packet and wait (bounded) for the
/// handler to see it. On one MI300X ROCm 7.2.1 setup intercept queues never delivered packets,
/// which hangs the application at its first wait; then every queue is created normally.
unsafe fn probe_ok(f: &Fns, q: *mut c_void, ctx: &QueueCtx) -> bool {
    // SAFETY: the caller's promise: `q` is a live intercept queue (hsa_queue_t: base_address at 8,
    // doorbell_signal at 16, size at 24) whose handler has `ctx`; the slot written is the one
    // add_write_index reserved for us.
    unsafe {
        match PROBE.compare_exchange(PROBE_UNKNOWN, PROBE_RUNNING, AcqRel, Acquire) {
            Ok(_) => {}
            Err(PROBE_OK) => return true,
            Err(PROBE_BROKEN) => return false,
            Err(_) => {
                // Another thread is probing: wait for its verdict (bounded).
                let t0 = clock::monotonic_ns();
                while PROBE.load(Acquire) == PROBE_RUNNING && clock::monotonic_ns() - t0 < 2 * PROBE_WAIT_MS * 1_000_000 {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                return PROBE.load(Acquire) != PROBE_BROKEN;
            }
        }
        let qb = q as *const u8;
        let base = std::ptr::read_unaligned(qb.add(8) as *const *mut u8);
        let doorbell = std::ptr::read_unaligned(qb.add(16) as *const u64);
        let size = std::ptr::read_unaligned(qb.add(24) as *const u32) as u64;
        let ok = if base.is_null() || size == 0 || doorbell == 0 {
            true // cannot probe; assume it works
        } else {
            let wi = (f.add_write_index)(q, 1);
            let slot = base.add(((wi % size) * 64) as usize);
            std::ptr::write_bytes(slot.add(2), 0, 62);
            // barrier-AND, barrier bit, system-scope acquire and release fences; no dependencies,
            // no completion signal: a no-op the packet processor retires at once.
            ctx.probing.store(true, Release);
            (*(slot as *const std::sync::atomic::AtomicU16)).store(BARRIER_HEADER, Release);
            (f.signal_store_release)(doorbell, wi as i64);
            let t0 = clock::monotonic_ns();
            while !ctx.seen.load(Acquire) && clock::monotonic_ns() - t0 < PROBE_WAIT_MS * 1_000_000 {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
            ctx.seen.load(Acquire)
        };
        PROBE.store(if ok { PROBE_OK } else { PROBE_BROKEN }, Release);
        if !ok {
            counters().api_errors.fetch_add(1, Relaxed);
            crate::say(&format!(
                "HSA queue interception does not deliver packets here (no probe packet within {PROBE_WAIT_MS} ms): \
             queues are left alone: no kernel, barrier or graph times (DMA-engine copies are still timed); \
             the CPU-side trace is complete"
            ));
        }
        ok
    }
}

fn refused(rc: i32) {
    record_error(rc);
    if !INTERCEPT_REFUSED.swap(true, Relaxed) {
        crate::say(&format!(
            "HSA queue interception is not supported here (hsa_status_t {rc:#x}): queues are left alone, \
             no kernel, barrier or graph times (DMA-engine copies are still timed); the CPU-side trace is complete"
        ));
    }
}
