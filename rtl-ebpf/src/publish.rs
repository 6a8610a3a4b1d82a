//! The in-process agent's hand-off: each batch of GPU records it publishes, copied with the
//! publisher's identity as the kernel sees it.

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_get_current_task, bpf_probe_read_kernel},
    macros::uprobe,
    programs::ProbeContext,
};
use rtl_common::{config, counter, AgentBatch, EventKind, AGENT_BATCH_MAX};

use crate::{
    call_slots::flush_own,
    helpers::{bump, cfg, header, traced, wakeup_flags},
    maps::EVENTS,
};

/// The agent's hand-off function (uprobe_multi link).
#[unsafe(no_mangle)]
#[unsafe(link_section = "uprobe.multi")]
pub extern "C" fn agent_publish(ctx: *mut core::ffi::c_void) -> u32 {
    publish(ProbeContext::new(ctx))
}

/// The agent's hand-off function (per-probe perf link).
#[uprobe]
pub fn agent_publish_single(ctx: ProbeContext) -> u32 {
    publish(ctx)
}

/// `rtl_agent_publish(const u8 *data, u64 len)` in the in-process agent: copy the batch.
#[inline(always)]
fn publish(ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !traced((pid_tgid >> 32) as u32) {
        return 0;
    }
    // A batch published from inside a parked call comes after that call's entry.
    flush_own(pid_tgid);
    let data: u64 = ctx.arg(0).unwrap_or(0);
    let len: u64 = ctx.arg(1).unwrap_or(0);
    let Some(mut slot) = EVENTS.reserve::<AgentBatch>(0) else {
        bump(counter::RINGBUF_DROPS);
        return 0;
    };
    let ev = slot.as_mut_ptr();
    // SAFETY: exclusively owned reserved slot; the copy is bounded by AGENT_BATCH_MAX.
    unsafe {
        (*ev).hdr = header(EventKind::AgentBatch, ns_tgid(), pid_tgid);
        (*ev).len = len.min(u32::MAX as u64) as u32;
        (*ev).copied = 0;
        if len > AGENT_BATCH_MAX as u64 {
            bump(counter::AGENT_TRUNCATED);
        } else if len > 0 {
            let n = (len as usize) & (AGENT_BATCH_MAX * 2 - 1);
            let n = if n > AGENT_BATCH_MAX { AGENT_BATCH_MAX } else { n };
            let dst = (*ev).data.as_mut_ptr() as *mut core::ffi::c_void;
            if aya_ebpf::helpers::generated::bpf_probe_read_user(dst, n as u32, data as *const _) == 0 {
                (*ev).copied = n as u32;
            } else {
                bump(counter::AGENT_TRUNCATED);
            }
        }
    }
    slot.submit(wakeup_flags(core::mem::size_of::<AgentBatch>()));
    0
}

/// The current process's tgid in its own (innermost) pid namespace: what `getpid()` returns
/// inside a container. 0 when the kernel's layout is unknown or a read fails.
#[inline(always)]
fn ns_tgid() -> u32 {
    let (leader_off, pid_off, level_off, numbers_off, upid) = (
        cfg(config::TASK_GROUP_LEADER_OFF),
        cfg(config::TASK_THREAD_PID_OFF),
        cfg(config::PID_LEVEL_OFF),
        cfg(config::PID_NUMBERS_OFF),
        cfg(config::UPID_SIZE),
    );
    if pid_off == 0 || numbers_off == 0 || upid == 0 {
        return 0;
    }
    // SAFETY (all reads): checked kernel reads at offsets from the kernel's own BTF.
    unsafe {
        let task = bpf_get_current_task() as *const u8;
        let Ok(leader) = bpf_probe_read_kernel(task.add(leader_off as usize) as *const u64) else {
            return 0;
        };
        let Ok(pid) = bpf_probe_read_kernel((leader as *const u8).add(pid_off as usize) as *const u64) else {
            return 0;
        };
        let Ok(level) = bpf_probe_read_kernel((pid as *const u8).add(level_off as usize) as *const u32) else {
            return 0;
        };
        // Nesting is at most 32 levels (MAX_PID_NS_LEVEL).
        let at = numbers_off + (level as u64 & 31) * upid;
        bpf_probe_read_kernel((pid as *const u8).add(at as usize) as *const i32).map(|v| v as u32).unwrap_or(0)
    }
}
