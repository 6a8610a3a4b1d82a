//! The final flush, whichever exit path comes first (the crate's docs: "Shutdown order"): wake
//! and wait for the publisher thread, stop the runtime's source within a bound, publish what is
//! queued and the final counters.

use std::sync::atomic::{AtomicBool, Ordering::*};

use rtl_common::agent as wire;

use crate::publish::{self, INFO};
use crate::publisher_thread::{wake_publisher, THREAD_RUNNING};
use crate::{clock, clr, cupti, hsa, say, ACTIVE, DONE, PHASE, SHUTDOWN_STARTED, SOURCE, SRC_CUPTI, WAITING};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    MainThreadExit,
    Atexit,
    Fini,
    HsaOnUnload,
    UnderscoreExit,
}

pub(crate) fn shutdown(reason: Reason) {
    if !matches!(PHASE.load(Acquire), WAITING | ACTIVE) || SHUTDOWN_STARTED.swap(true, AcqRel) {
        return;
    }
    wake_publisher();
    if PHASE.load(Acquire) == WAITING {
        // Nothing to flush; do not wait for a thread that may be inside dlopen while this
        // runs under the loader lock (.fini_array).
        PHASE.store(DONE, Release);
        return;
    }
    let t0 = clock::monotonic_ns();
    while THREAD_RUNNING.load(Acquire) && clock::monotonic_ns() - t0 < 2_000_000_000 {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    if PHASE.load(Acquire) == ACTIVE {
        publish::SHUTTING_DOWN.store(true, Release);
        if reason != Reason::HsaOnUnload {
            stop_runtime_bounded();
            // HSA: let in-flight dispatches complete (bounded); the completion thread keeps
            // forwarding completions afterwards (the runtime's own teardown may wait on them)
            // and publishes late ones itself.
            hsa::quiesce(1000);
        } else {
            hsa::stop();
        }
        publish::publish_queued(0);
        INFO.status.store(wire::Status::Stopped as u8, Relaxed);
        publish::publish_meta(wire::BATCH_FINAL);
    }
    PHASE.store(DONE, Release);
}

/// Disable + final drain on a helper thread, waited for at most `STOP_WAIT_MS` (a forked child
/// whose runtime is wedged by its parent's locks, or a runtime that never finishes its GPU
/// work, must not hang the exit). Inline only if no thread can be created, and never then in a
/// forked child.
fn stop_runtime_bounded() {
    static DONE_FLAG: AtomicBool = AtomicBool::new(false);
    DONE_FLAG.store(false, Release);
    let forked = clr::FORK_RT.load(Relaxed) != 0;
    let wait_ms = if forked { STOP_WAIT_MS / 3 } else { STOP_WAIT_MS };
    let r = std::thread::Builder::new().name("rtl-agent-stop".into()).stack_size(256 << 10).spawn(|| {
        let _ = std::panic::catch_unwind(|| {
            if clr::FORK_RT.load(Relaxed) != 0 && clr::fork_child_switch_to_drain() {
                INFO.mode.fetch_and(!wire::MODE_CALLBACK, Relaxed);
            }
            if SOURCE.load(Acquire) == SRC_CUPTI {
                cupti::stop()
            } else {
                clr::stop()
            }
        });
        DONE_FLAG.store(true, Release);
    });
    match r {
        Ok(_) => {
            let t0 = clock::monotonic_ns();
            while !DONE_FLAG.load(Acquire) && clock::monotonic_ns() - t0 < wait_ms * 1_000_000 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            if !DONE_FLAG.load(Acquire) {
                say(&format!("the HIP runtime did not finish hipProfilerDisableExt within {wait_ms} ms; exiting without its last records"));
            }
        }
        Err(_) if !forked && SOURCE.load(Acquire) == SRC_CUPTI => cupti::stop(),
        Err(_) if !forked => clr::stop(),
        Err(_) => {}
    }
}

/// Upper bound on the runtime's final Disable/drain at exit (ms).
const STOP_WAIT_MS: u64 = 9_000;
