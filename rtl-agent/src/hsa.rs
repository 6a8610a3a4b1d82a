//! Loading as an HSA tool (`HSA_TOOLS_LIB=.../librtl_agent.so`): the runtime dlopens the agent
//! during `hsa_init` (our ELF constructor runs then) and calls `OnLoad`; at `hsa_shut_down` it
//! calls `OnUnload`.
//!
//! HSA *signal capture* (queue interception, issue 5) is not in this build: `RTL_AGENT_GPU=hsa`
//! reports that and leaves every queue alone. In `auto`/`clr` mode, loading through
//! HSA_TOOLS_LIB is just another way to get the agent into the process: it starts the CLR source
//! from its publisher thread (never from inside `hsa_init`, which runs under the HIP runtime's
//! initialisation).

use std::ffi::{c_char, c_void};

use rtl_common::agent as wire;

/// `bool OnLoad(HsaApiTable* table, uint64_t runtime_version, uint64_t failed_tool_count,
/// const char* const* failed_tool_names)`. Returns false (unload me) only when another copy of
/// the agent is already active in the process.
#[unsafe(no_mangle)]
pub extern "C" fn OnLoad(
    _table: *mut c_void,
    _runtime_version: u64,
    _failed_tool_count: u64,
    _failed_tool_names: *const *const c_char,
) -> bool {
    std::panic::catch_unwind(|| {
        crate::publish::INFO.mode.fetch_or(wire::MODE_HSA_TOOL, std::sync::atomic::Ordering::Relaxed);
        crate::start(crate::Trigger::HsaOnLoad);
        !crate::is_duplicate()
    })
    .unwrap_or(true)
}

/// `void OnUnload(void)`: flush what is queued. The HIP runtime may be mid-teardown here, so no
/// call goes back into it.
#[unsafe(no_mangle)]
pub extern "C" fn OnUnload() {
    let _ = std::panic::catch_unwind(|| crate::shutdown(crate::Reason::HsaOnUnload));
}
