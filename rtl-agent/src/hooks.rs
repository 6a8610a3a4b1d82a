//! The process hooks that lead to the flush or restart the agent: a TLS destructor on the main
//! thread, an `atexit` handler, the interposed `_exit` / `_Exit`, and the fork child handler
//! (the crate's docs: "Shutdown order", "fork").

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering::*};

use crate::publish::{self, INFO};
use crate::publisher_thread::{spawn_publisher, STOP, THREAD_RUNNING};
use crate::shutdown::{shutdown, Reason};
use crate::{clock, clr, hsa, thread_seq, ACTIVE, PHASE, SHUTDOWN_STARTED, WAITING};

static ONCE_HOOKS: AtomicBool = AtomicBool::new(false);
static ONCE_ATEXIT: AtomicBool = AtomicBool::new(false);

/// Registers the `atexit` flush, once (when a source is enabled: after the runtime's init-time
/// handlers, so it runs before them).
pub(crate) fn atexit_once() {
    if !ONCE_ATEXIT.swap(true, Relaxed) {
        // SAFETY: a plain function pointer.
        unsafe { libc::atexit(at_exit) };
    }
}

/// `_exit` / `_Exit` from the application (not the ones glibc's `exit` calls internally): flush
/// first, when this is the agent's own process (not a vfork child sharing its memory) and a
/// source is active. Forked workers that end with `_exit` (a common pattern) keep their records.
fn exit_now(status: c_int) -> ! {
    if std::process::id() == publish::PID.load(Relaxed) && PHASE.load(Acquire) == ACTIVE {
        let _ = std::panic::catch_unwind(|| shutdown(Reason::UnderscoreExit));
    }
    // What glibc's _exit does: exit_group, no loader call (dlsym is not safe in a fork child).
    loop {
        // SAFETY: exit_group never returns.
        unsafe { libc::syscall(libc::SYS_exit_group, status) };
    }
}

/// Interposes libc's `_exit` (see [`exit_now`]).
#[unsafe(no_mangle)]
pub extern "C" fn _exit(status: c_int) -> ! {
    exit_now(status)
}

/// Interposes libc's `_Exit` (see [`exit_now`]).
#[unsafe(no_mangle)]
pub extern "C" fn _Exit(status: c_int) -> ! {
    exit_now(status)
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| shutdown(Reason::Atexit));
}

unsafe extern "C" fn main_thread_tls_dtor(_: *mut c_void) {
    let _ = std::panic::catch_unwind(|| shutdown(Reason::MainThreadExit));
}

extern "C" fn at_fork_child() {
    let _ = std::panic::catch_unwind(|| {
        let phase = PHASE.load(Acquire);
        THREAD_RUNNING.store(false, Relaxed);
        STOP.store(0, Relaxed);
        if phase == ACTIVE {
            clr::FORK_RT.store(clock::now(libc::CLOCK_REALTIME), Relaxed);
            // The child's own records are those of calls after the fork: its session anchor.
            let now = clock::monotonic_ns();
            INFO.set_anchor(now, now);
        }
        thread_seq::reset_in_child();
        publish::reset_in_child();
        hsa::reset_in_child();
        if matches!(phase, WAITING | ACTIVE) && !SHUTDOWN_STARTED.load(Relaxed) {
            spawn_publisher();
        }
    });
}

extern "C" {
    fn __cxa_thread_atexit_impl(dtor: unsafe extern "C" fn(*mut c_void), obj: *mut c_void, dso: *mut c_void) -> c_int;
    static __dso_handle: u8;
}

pub(crate) fn install_hooks() {
    if ONCE_HOOKS.swap(true, Relaxed) {
        return;
    }
    // SAFETY: registering plain functions; __dso_handle identifies this object.
    unsafe {
        libc::pthread_atfork(None, None, Some(at_fork_child));
        if clock::gettid() == std::process::id() {
            let dso = &__dso_handle as *const u8 as *mut c_void;
            __cxa_thread_atexit_impl(main_thread_tls_dtor, std::ptr::null_mut(), dso);
        }
    }
}
