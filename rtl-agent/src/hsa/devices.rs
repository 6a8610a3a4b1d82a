//! The GPU agents of the process: HIP device ordinal = index among the GPU agents, in the order
//! `hsa_iterate_agents` reports them.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

use super::ffi::{AgentGetInfoFn, AGENT_INFO_DEVICE, DEVICE_TYPE_GPU, HSA_STATUS_SUCCESS};

const MAX_AGENTS: usize = 64;
static AGENTS: [AtomicU64; MAX_AGENTS] = [const { AtomicU64::new(0) }; MAX_AGENTS];
static N_AGENTS: AtomicUsize = AtomicUsize::new(0);

pub(crate) unsafe extern "C" fn collect_agent(agent: u64, data: *mut c_void) -> i32 {
    // SAFETY: hsa_iterate_agents' callback: `data` is the hsa_agent_get_info entry `install`
    // passed, `agent` a live agent; the out pointer is a u32 (HSA_AGENT_INFO_DEVICE's type).
    unsafe {
        let get: AgentGetInfoFn = std::mem::transmute(data);
        let mut dev: u32 = 0;
        if get(agent, AGENT_INFO_DEVICE, &mut dev as *mut u32 as *mut c_void) == HSA_STATUS_SUCCESS && dev == DEVICE_TYPE_GPU {
            let n = N_AGENTS.load(Relaxed);
            if n < MAX_AGENTS {
                AGENTS[n].store(agent, Relaxed);
                N_AGENTS.store(n + 1, Relaxed);
            }
        }
        HSA_STATUS_SUCCESS
    }
}

/// HIP device ordinal of a GPU agent; 0xffff for the CPU agent / unknown.
pub(crate) fn device_of(agent: u64) -> u32 {
    (0..N_AGENTS.load(Relaxed)).find(|&i| AGENTS[i].load(Relaxed) == agent).unwrap_or(0xffff) as u32
}
