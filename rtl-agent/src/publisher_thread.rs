//! The publisher thread: waits for the GPU runtime (then activates its source), drains it every
//! `RTL_AGENT_DRAIN_MS` and publishes what is queued, with the counters once a second. Agent
//! threads block every signal, so process-directed signals reach the application.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};

use rtl_common::agent as wire;

use crate::config::GpuSource;
use crate::publish::{self, INFO};
use crate::start::{activate, activate_cupti};
use crate::{clock, clr, config, cupti, say, ACTIVE, INACTIVE, PHASE, SOURCE, SRC_CUPTI, WAITING};

/// Futex word: 1 asks the publisher thread to stop.
pub(crate) static STOP: AtomicU32 = AtomicU32::new(0);
pub(crate) static THREAD_RUNNING: AtomicBool = AtomicBool::new(false);

/// Waits on `word` while it equals `val`, at most `ms`.
pub(crate) fn futex_wait(word: &AtomicU32, val: u32, ms: u64) {
    let ts = libc::timespec { tv_sec: (ms / 1000) as i64, tv_nsec: ((ms % 1000) * 1_000_000) as i64 };
    // SAFETY: futex on a static word with a timeout.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, val, &ts as *const _);
    }
}

/// Spawns an agent thread with every signal blocked (set before creation: no window).
pub(crate) fn spawn_blocking_signals(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    // SAFETY: plain sigset manipulation.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let r = std::thread::Builder::new().name(name.into()).stack_size(256 << 10).spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        r.map(|_| ())
    }
}

fn futex_wait_stop(ms: u64) {
    futex_wait(&STOP, 0, ms);
}

pub(crate) fn wake_publisher() {
    STOP.store(1, Release);
    // SAFETY: futex wake on our own static word.
    unsafe { libc::syscall(libc::SYS_futex, STOP.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, i32::MAX) };
}

/// Wakes the publisher thread without asking it to stop.
pub(crate) fn kick_publisher() {
    // SAFETY: futex wake on our own static word.
    unsafe { libc::syscall(libc::SYS_futex, STOP.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1) };
}

pub(crate) fn spawn_publisher() {
    THREAD_RUNNING.store(true, Release);
    let spawned = spawn_blocking_signals("rtl-agent", || {
        let _ = std::panic::catch_unwind(publisher_main);
        THREAD_RUNNING.store(false, Release);
    });
    if let Err(e) = spawned {
        THREAD_RUNNING.store(false, Release);
        say(&format!("cannot start the publisher thread ({e}); GPU records are published at exit only"));
    }
}

fn publisher_main() {
    let cfg = config();
    let t0 = clock::monotonic_ns();
    let mut backoff = 5u64;
    // A forked child publishes nothing until it has something (or a second passed): a child
    // that execs at once starts a fresh agent in the same pid (batch_seq 0 again).
    let mut last_meta = clock::monotonic_ns();
    if PHASE.load(Acquire) == ACTIVE && clr::FORK_RT.load(Relaxed) != 0 && clr::fork_child_switch_to_drain() {
        INFO.mode.fetch_and(!wire::MODE_CALLBACK, Relaxed);
    }
    while STOP.load(Acquire) == 0 {
        match PHASE.load(Acquire) {
            WAITING if cfg.gpu == GpuSource::Cupti => {
                if cupti::cuda_loaded() {
                    activate_cupti();
                    continue;
                }
                futex_wait_stop(backoff);
                backoff = (backoff * 2).min(250);
            }
            WAITING => {
                if let Some((h, name)) = clr::find_loaded_hip() {
                    activate(h, name);
                    continue;
                }
                if clock::monotonic_ns() - t0 > cfg.wait_ms * 1_000_000 {
                    INFO.status.store(wire::Status::HipNotLoaded as u8, Relaxed);
                    if PHASE.compare_exchange(WAITING, INACTIVE, AcqRel, Acquire).is_ok() {
                        publish::publish_meta(0);
                    }
                    break;
                }
                futex_wait_stop(backoff);
                backoff = (backoff * 2).min(250);
            }
            ACTIVE => {
                if SOURCE.load(Acquire) == SRC_CUPTI {
                    cupti::poll();
                } else {
                    clr::poll(false);
                }
                publish::publish_queued(0);
                publish::KICKED.store(false, Relaxed);
                let now = clock::monotonic_ns();
                if now - last_meta >= 1_000_000_000 {
                    publish::publish_meta(0);
                    last_meta = now;
                }
                futex_wait_stop(cfg.drain_ms);
            }
            _ => break,
        }
    }
}
