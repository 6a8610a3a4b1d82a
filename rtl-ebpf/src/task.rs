//! Task lifecycles of traced processes (fork, exec, exit), from raw tracepoints.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel, bpf_probe_read_kernel_str_bytes},
    macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use rtl_common::{config, counter, EventKind, ExecEvent, TaskEvent, ThreadExitEvent, EXEC_ARGS_LEN};

use crate::{
    call_slots::flush_own,
    helpers::{bump, cfg, header, next_thread_generation, traced},
    maps::{EVENTS, LOADER_TAILS, TRACED},
};

/// The current task's name, written straight into a record (zeroed if unreadable): going
/// through a `[u8; 16]` value made LLVM call byte-wise `memset`/`memmove` subprograms.
#[inline(always)]
fn comm_into(comm: &mut [u8; 16]) {
    // SAFETY: the helper writes at most 16 bytes into the record's field.
    let r = unsafe { aya_ebpf::helpers::generated::bpf_get_current_comm(comm.as_mut_ptr() as *mut _, 16) };
    if r != 0 {
        // SAFETY: 16 bytes, 8-byte aligned in every record that holds a name.
        unsafe { crate::helpers::zero_words(comm.as_mut_ptr() as *mut u64, 2) };
    }
}

#[inline(always)]
fn task_event(kind: EventKind, pid_tgid: u64, child_tgid: u32) {
    if let Some(mut slot) = EVENTS.reserve::<TaskEvent>(0) {
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot.
        unsafe {
            (*ev).hdr = header(kind, 0, pid_tgid);
            (*ev).child_tgid = child_tgid;
            (*ev)._pad = 0;
        }
        // Rare events: wake the collector now, so it reads /proc/PID while the process lives.
        const BPF_RB_FORCE_WAKEUP: u64 = 2;
        slot.submit(BPF_RB_FORCE_WAKEUP);
    } else {
        bump(counter::RINGBUF_DROPS);
    }
}

/// sched_process_fork (raw tracepoint: `(struct task_struct *parent, struct task_struct *child)`).
/// Runs in the parent. A new process of a traced one becomes traced when following forks; new
/// threads (same tgid) are not reported.
///
/// Raw tracepoints, not perf-event ones: attaching and removing a perf-event tracepoint takes
/// the kernel's event_mutex (and an RCU synchronisation on removal), which another session's
/// perf-event uprobe removal holds for seconds; raw tracepoints take neither.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn task_fork(ctx: RawTracePointContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let parent = (pid_tgid >> 32) as u32;
    // SAFETY: read-only lookup.
    if cfg(config::TRACE_ALL) != 0 || unsafe { TRACED.get(&parent) }.is_none() {
        return 0;
    }
    let (pid_off, tgid_off) = (cfg(config::TASK_PID_OFF), cfg(config::TASK_TGID_OFF));
    if pid_off == 0 || tgid_off == 0 {
        return 0;
    }
    let child: u64 = ctx.arg(1);
    // SAFETY: checked kernel reads at offsets from the kernel's own BTF.
    let (pid, tgid) = unsafe {
        let t = child as *const u8;
        (
            bpf_probe_read_kernel(t.add(pid_off as usize) as *const i32).unwrap_or(0),
            bpf_probe_read_kernel(t.add(tgid_off as usize) as *const i32).unwrap_or(-1),
        )
    };
    if pid <= 0 || pid != tgid {
        return 0; // a thread of an existing process, or unreadable
    }
    if cfg(config::FOLLOW_FORKS) != 0 {
        let _ = TRACED.insert(&(pid as u32), &1, 0);
    }
    if cfg(config::LOADER_STOP) != 0 {
        // The child has its parent's memory, library list included: it starts from the same
        // tail (a pid's stale entry from an earlier process goes).
        // SAFETY: read-only lookup.
        match unsafe { LOADER_TAILS.get(&parent) } {
            Some(t) => {
                let t = *t;
                let _ = LOADER_TAILS.insert(&(pid as u32), &t, 0);
            }
            None => {
                let _ = LOADER_TAILS.remove(&(pid as u32));
            }
        }
    }
    task_event(EventKind::Fork, pid_tgid, pid as u32);
    0
}

/// sched_process_exec (raw tracepoint: `(struct task_struct *p, pid_t old_pid, struct
/// linux_binprm *bprm)`, in the new image). The process image is replaced: its open calls never
/// return. What it runs now is read here, while it exists for certain: the path given to exec,
/// its name, its parent and the start of its new command line (the collector would find the
/// `/proc` entry of a short-lived process gone). Offsets come from the kernel's BTF; a missing
/// one leaves its field empty.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn task_exec(ctx: RawTracePointContext) -> u32 {
    // Every exec, traced or not: a new image has new TLS (its fs base).
    next_thread_generation();
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // A call parked before the exec (under the thread id it had then: a thread that is not
    // the leader takes the leader's id) never returns: its entry goes before the exec.
    let old_tid: u64 = ctx.arg(1);
    flush_own((pid_tgid & !0xffff_ffff) | (old_tid & 0xffff_ffff));
    // A new image, a new library list.
    let _ = LOADER_TAILS.remove(&((pid_tgid >> 32) as u32));
    let Some(mut slot) = EVENTS.reserve::<ExecEvent>(0) else {
        bump(counter::RINGBUF_DROPS);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    let bprm: u64 = ctx.arg(2);
    // SAFETY: exclusively owned reserved slot; kernel reads are checked and at BTF offsets; the
    // user read of the command line is bounded by the buffer.
    unsafe {
        (*ev).hdr = header(EventKind::Exec, 0, pid_tgid);
        (*ev).ppid = 0;
        (*ev).args_len = 0;
        (*ev).args_total = 0;
        (*ev)._pad = 0;
        comm_into(&mut (*ev).comm);
        (*ev).filename[0] = 0;
        (*ev).args[0] = 0;
        let fname_off = cfg(config::BINPRM_FILENAME_OFF);
        if fname_off != 0 && bprm != 0 {
            if let Ok(p) = bpf_probe_read_kernel((bprm as *const u8).add(fname_off as usize) as *const u64) {
                if p != 0 && bpf_probe_read_kernel_str_bytes(p as *const u8, &mut (*ev).filename).is_err() {
                    (*ev).filename[0] = 0;
                }
            }
        }
        let task = bpf_get_current_task() as *const u8;
        let (parent_off, tgid_off) = (cfg(config::TASK_REAL_PARENT_OFF), cfg(config::TASK_TGID_OFF));
        if parent_off != 0 && tgid_off != 0 {
            if let Ok(parent) = bpf_probe_read_kernel(task.add(parent_off as usize) as *const u64) {
                if parent != 0 {
                    let tgid = bpf_probe_read_kernel((parent as *const u8).add(tgid_off as usize) as *const i32).unwrap_or(0);
                    (*ev).ppid = if tgid > 0 { tgid as u32 } else { 0 };
                }
            }
        }
        let (mm_off, start_off, end_off) = (cfg(config::TASK_MM_OFF), cfg(config::MM_ARG_START_OFF), cfg(config::MM_ARG_END_OFF));
        if mm_off != 0 && start_off != 0 && end_off != 0 {
            let mm = bpf_probe_read_kernel(task.add(mm_off as usize) as *const u64).unwrap_or(0);
            if mm != 0 {
                let m = mm as *const u8;
                let start = bpf_probe_read_kernel(m.add(start_off as usize) as *const u64).unwrap_or(0);
                let end = bpf_probe_read_kernel(m.add(end_off as usize) as *const u64).unwrap_or(0);
                if start != 0 && end > start {
                    let total = end - start;
                    (*ev).args_total = if total > u32::MAX as u64 { u32::MAX } else { total as u32 };
                    // Never past arg_end: the environment follows the arguments.
                    let n = (total as usize) & (EXEC_ARGS_LEN * 2 - 1);
                    let n = if n > EXEC_ARGS_LEN || total > EXEC_ARGS_LEN as u64 { EXEC_ARGS_LEN } else { n };
                    let dst = (*ev).args.as_mut_ptr() as *mut core::ffi::c_void;
                    if aya_ebpf::helpers::generated::bpf_probe_read_user(dst, n as u32, start as *const _) == 0 {
                        (*ev).args_len = n as u32;
                    }
                }
            }
        }
    }
    // Rare: wake the collector now.
    const BPF_RB_FORCE_WAKEUP: u64 = 2;
    slot.submit(BPF_RB_FORCE_WAKEUP);
    0
}

/// Is the current (exiting) thread being killed because another thread of its process is in
/// exec (`current->signal->group_exec_task` set and not us)?
#[inline(always)]
fn killed_by_exec() -> bool {
    let (sig_off, exec_off) = (cfg(config::TASK_SIGNAL_OFF), cfg(config::SIGNAL_EXEC_TASK_OFF));
    if sig_off == 0 || exec_off == 0 {
        return false;
    }
    // SAFETY: checked kernel reads at offsets from the kernel's own BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let Ok(sig) = bpf_probe_read_kernel(task.add(sig_off as usize) as *const u64) else {
            return false;
        };
        if sig == 0 {
            return false;
        }
        match bpf_probe_read_kernel((sig as *const u8).add(exec_off as usize) as *const u64) {
            Ok(t) => t != 0 && t != task as u64,
            Err(_) => false,
        }
    }
}

/// sched_process_exit (raw tracepoint). Fires for every exiting thread.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn task_exit(_ctx: RawTracePointContext) -> u32 {
    // Every exit, traced or not: its thread id may come back as another thread.
    next_thread_generation();
    let pid_tgid = bpf_get_current_pid_tgid();
    if traced((pid_tgid >> 32) as u32) {
        // A call it parked never returns: its entry goes before the exit.
        flush_own(pid_tgid);
        if killed_by_exec() {
            task_event(EventKind::ExecKill, pid_tgid, 0);
        } else {
            thread_exit_event(pid_tgid);
        }
    }
    0
}

/// A traced thread's exit, with its name at that moment (the trace's `rtl_thread`).
#[inline(always)]
fn thread_exit_event(pid_tgid: u64) {
    if let Some(mut slot) = EVENTS.reserve::<ThreadExitEvent>(0) {
        let ev = slot.as_mut_ptr();
        // SAFETY: exclusively owned reserved slot.
        unsafe {
            (*ev).hdr = header(EventKind::ThreadExit, 0, pid_tgid);
            comm_into(&mut (*ev).comm);
        }
        // Not a forced wake-up: the record holds all the collector needs (the name), and a
        // forced one costs the exiting thread an irq_work and a cross-CPU wake-up inside the
        // program (measured: ~14 us per thread exit under `--all` on our VMs, against the
        // few hundred ns of the record). The collector drains on its timer.
        slot.submit(crate::helpers::wakeup_flags(core::mem::size_of::<ThreadExitEvent>()));
    } else {
        bump(counter::RINGBUF_DROPS);
    }
}
