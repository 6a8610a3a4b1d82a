//! The HSA runtime's side, in one place: the API table's layout constants, the typed entries
//! the agent calls (resolved once, at OnLoad, from the runtime's table) and the constants of
//! its C API. Every raw read of the runtime's table is in [`resolve`]; the callers hold only
//! typed function pointers.

use std::ffi::{c_char, c_void};

use super::layout::{self, core_off, AmdLayout};

pub(crate) const ROOT_CORE: usize = 16;
pub(crate) const ROOT_AMD: usize = 24;

pub(crate) const HSA_STATUS_SUCCESS: i32 = 0;
pub(crate) const HSA_STATUS_ERROR: i32 = 0x1000;

pub(crate) const HSA_STATUS_INFO_BREAK: i32 = 1;
pub(crate) const SYSTEM_INFO_TIMESTAMP: u32 = 2;
pub(crate) const SYSTEM_INFO_TIMESTAMP_FREQUENCY: u32 = 3;
pub(crate) const AGENT_INFO_DEVICE: u32 = 17;
pub(crate) const DEVICE_TYPE_GPU: u32 = 1;
pub(crate) const SYMBOL_INFO_TYPE: u32 = 0;
pub(crate) const SYMBOL_INFO_NAME_LENGTH: u32 = 1;
pub(crate) const SYMBOL_INFO_NAME: u32 = 2;
pub(crate) const SYMBOL_INFO_KERNEL_OBJECT: u32 = 22;
pub(crate) const SYMBOL_KIND_KERNEL: u32 = 1;
pub(crate) const PACKET_TYPE_KERNEL_DISPATCH: u16 = 2;
pub(crate) const PACKET_TYPE_BARRIER_AND: u16 = 3;
pub(crate) const PACKET_TYPE_BARRIER_OR: u16 = 5;
/// Header of the barrier-AND packets the agent writes: barrier bit (waits for every earlier
/// packet of the queue), system-scope acquire and release fences.
pub(crate) const BARRIER_HEADER: u16 = 3 | (1 << 8) | (2 << 9) | (2 << 11);
/// Offset of `hsa_queue_t::id`.
pub(crate) const QUEUE_ID_OFF: usize = 32;

pub(crate) type QueueCallback = Option<unsafe extern "C" fn(i32, *mut c_void, *mut c_void)>;
pub(crate) type QueueCreateFn = unsafe extern "C" fn(u64, u32, u32, QueueCallback, *mut c_void, u32, u32, *mut *mut c_void) -> i32;
pub(crate) type Writer = unsafe extern "C" fn(*const c_void, u64);
pub(crate) type Handler = unsafe extern "C" fn(*const c_void, u64, u64, *mut c_void, Writer);
pub(crate) type InterceptRegisterFn = unsafe extern "C" fn(*mut c_void, Handler, *mut c_void) -> i32;
pub(crate) type SetProfilerFn = unsafe extern "C" fn(*mut c_void, i32) -> i32;
pub(crate) type DispatchTimeFn = unsafe extern "C" fn(u64, u64, *mut [u64; 2]) -> i32;
pub(crate) type ConvertTickFn = unsafe extern "C" fn(u64, u64, *mut u64) -> i32;
pub(crate) type SystemGetInfoFn = unsafe extern "C" fn(u32, *mut c_void) -> i32;
pub(crate) type IterateAgentsFn = unsafe extern "C" fn(unsafe extern "C" fn(u64, *mut c_void) -> i32, *mut c_void) -> i32;
pub(crate) type AgentGetInfoFn = unsafe extern "C" fn(u64, u32, *mut c_void) -> i32;
pub(crate) type SignalCreateFn = unsafe extern "C" fn(i64, u32, *const u64, *mut u64) -> i32;
/// `hsa_signal_destroy(signal)`.
pub(crate) type SignalDestroyFn = unsafe extern "C" fn(u64) -> i32;
pub(crate) type SignalLoadFn = unsafe extern "C" fn(u64) -> i64;
pub(crate) type SignalStoreFn = unsafe extern "C" fn(u64, i64);
pub(crate) type QueueDestroyFn = unsafe extern "C" fn(*mut c_void) -> i32;
pub(crate) type AddWriteIndexFn = unsafe extern "C" fn(*mut c_void, u64) -> u64;
pub(crate) type SignalWaitFn = unsafe extern "C" fn(u64, u32, i64, u64, u32) -> i64;
pub(crate) type FreezeFn = unsafe extern "C" fn(u64, *const c_char) -> i32;
pub(crate) type SymbolGetInfoFn = unsafe extern "C" fn(u64, u32, *mut c_void) -> i32;
pub(crate) type IterateSymbolsFn = unsafe extern "C" fn(u64, unsafe extern "C" fn(u64, u64, *mut c_void) -> i32, *mut c_void) -> i32;
/// `hsa_amd_profiling_get_async_copy_time(signal, &{start, end})`.
pub(crate) type CopyTimeFn = unsafe extern "C" fn(u64, *mut [u64; 2]) -> i32;
/// `hsa_amd_signal_wait_any(count, signals, conds, values, timeout_hint, wait_hint, &value)`.
pub(crate) type WaitAnyFn = unsafe extern "C" fn(u32, *const u64, *const u32, *const i64, u64, u32, *mut i64) -> u32;

/// The runtime's original entries we call.
#[derive(Clone, Copy)]
pub(crate) struct Fns {
    pub(crate) queue_create: QueueCreateFn,
    pub(crate) intercept_create: QueueCreateFn,
    pub(crate) intercept_register: InterceptRegisterFn,
    pub(crate) set_profiler: SetProfilerFn,
    pub(crate) dispatch_time: DispatchTimeFn,
    pub(crate) convert_tick: ConvertTickFn,
    pub(crate) system_get_info: SystemGetInfoFn,
    pub(crate) signal_create: SignalCreateFn,
    pub(crate) signal_load: SignalLoadFn,
    pub(crate) signal_store: SignalStoreFn,
    pub(crate) signal_subtract: SignalStoreFn,
    pub(crate) signal_wait: SignalWaitFn,
    pub(crate) signal_store_release: SignalStoreFn,
    pub(crate) queue_destroy: QueueDestroyFn,
    pub(crate) add_write_index: AddWriteIndexFn,
    pub(crate) freeze: FreezeFn,
    pub(crate) symbol_get_info: SymbolGetInfoFn,
    pub(crate) iterate_symbols: IterateSymbolsFn,
    pub(crate) copy_time: CopyTimeFn,
    pub(crate) wait_any: Option<WaitAnyFn>,
    /// The runtime's `hsa_signal_destroy` (the agent's wrapper reads a watched copy's times
    /// first: `watch`).
    pub(crate) signal_destroy: Option<SignalDestroyFn>,
}

pub(crate) static FNS: std::sync::OnceLock<Fns> = std::sync::OnceLock::new();
pub(crate) const SIGNAL_CONDITION_LT: u32 = 2;
pub(crate) const WAIT_STATE_BLOCKED: u32 = 0;

/// The runtime's tables and the entries resolved from them.
pub(crate) struct Tables {
    pub fns: Fns,
    /// `hsa_iterate_agents` and `hsa_agent_get_info` (the callback's data), when present.
    pub agents: Option<(IterateAgentsFn, *const c_void)>,
    pub core: *mut u8,
    pub amd: *mut u8,
    pub amd_layout: AmdLayout,
}

/// Reads one entry of a table.
///
/// # Safety
/// `t` is a live API table and `off` the offset of one of its pointer-sized entries.
pub(crate) unsafe fn entry(t: *mut u8, off: usize) -> *const c_void {
    // SAFETY: the caller's promise; the tables are not aligned for us to rely on.
    unsafe { std::ptr::read_unaligned(t.add(off) as *const *const c_void) }
}

/// Replaces one entry of a table with `f` (a wrapper of the same signature).
///
/// # Safety
/// As [`entry`]; the runtime has not started calling through the table (OnLoad).
pub(crate) unsafe fn replace_entry(t: *mut u8, off: usize, f: *const c_void) {
    // SAFETY: the caller's promise.
    unsafe { std::ptr::write_unaligned(t.add(off) as *mut *const c_void, f) };
}

/// Resolves every entry the agent calls, once. Err: why capture cannot work with this runtime.
///
/// # Safety
/// `table` is the `HsaApiTable*` the runtime passed to OnLoad.
pub(crate) unsafe fn resolve(table: *mut u8) -> Result<Tables, String> {
    if table.is_null() {
        return Err("no API table".into());
    }
    // SAFETY (every read below): `table` is the runtime's root table (the caller's promise),
    // whose core and AMD extension pointers sit at ROOT_CORE / ROOT_AMD; each sub-table starts
    // with its ApiTableVersion (major_id first), and its entries are at the offsets the layout
    // of that version gives (checked by `layout` before any entry is read).
    let (core, amd) = unsafe { (entry(table, ROOT_CORE) as *mut u8, entry(table, ROOT_AMD) as *mut u8) };
    if core.is_null() || amd.is_null() {
        return Err("API table without core or AMD extension table".into());
    }
    layout::core_known(unsafe { std::ptr::read_unaligned(core as *const u32) })?;
    let amd_l: AmdLayout = layout::amd_layout(unsafe { std::ptr::read_unaligned(amd as *const u32) })?;
    let get = |t: *mut u8, off: usize| -> *const c_void { unsafe { entry(t, off) } };
    let needed = [
        get(core, core_off::QUEUE_CREATE),
        get(core, core_off::SIGNAL_CREATE),
        get(core, core_off::SIGNAL_LOAD_RELAXED),
        get(core, core_off::SIGNAL_STORE_RELAXED),
        get(core, core_off::SIGNAL_SUBTRACT_SCRELEASE),
        get(core, core_off::EXECUTABLE_FREEZE),
        get(core, core_off::EXECUTABLE_SYMBOL_GET_INFO),
        get(core, core_off::EXECUTABLE_ITERATE_SYMBOLS),
        get(core, core_off::SYSTEM_GET_INFO),
        get(amd, amd_l.queue_intercept_create),
        get(amd, amd_l.queue_intercept_register),
        get(amd, amd_l.profiling_set_profiler_enabled),
        get(amd, amd_l.profiling_get_dispatch_time),
        get(amd, amd_l.profiling_convert_tick),
        get(core, core_off::SIGNAL_WAIT_SCACQUIRE),
        get(core, core_off::SIGNAL_STORE_SCRELEASE),
        get(core, core_off::QUEUE_DESTROY),
        get(core, core_off::QUEUE_ADD_WRITE_INDEX_SCRELEASE),
        get(amd, amd_l.profiling_get_async_copy_time),
    ];
    if needed.iter().any(|p| p.is_null()) {
        return Err("API table entries missing".into());
    }
    // SAFETY (every transmute below): a non-null entry of the runtime's table at the offset of
    // that function, whose C signature is the one its type spells (hsa.h, hsa_ext_amd.h).
    let fns = unsafe {
        Fns {
            queue_create: std::mem::transmute::<*const c_void, QueueCreateFn>(needed[0]),
            signal_create: std::mem::transmute::<*const c_void, SignalCreateFn>(needed[1]),
            signal_load: std::mem::transmute::<*const c_void, SignalLoadFn>(needed[2]),
            signal_store: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[3]),
            signal_subtract: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[4]),
            freeze: std::mem::transmute::<*const c_void, FreezeFn>(needed[5]),
            symbol_get_info: std::mem::transmute::<*const c_void, SymbolGetInfoFn>(needed[6]),
            iterate_symbols: std::mem::transmute::<*const c_void, IterateSymbolsFn>(needed[7]),
            system_get_info: std::mem::transmute::<*const c_void, SystemGetInfoFn>(needed[8]),
            intercept_create: std::mem::transmute::<*const c_void, QueueCreateFn>(needed[9]),
            intercept_register: std::mem::transmute::<*const c_void, InterceptRegisterFn>(needed[10]),
            set_profiler: std::mem::transmute::<*const c_void, SetProfilerFn>(needed[11]),
            dispatch_time: std::mem::transmute::<*const c_void, DispatchTimeFn>(needed[12]),
            convert_tick: std::mem::transmute::<*const c_void, ConvertTickFn>(needed[13]),
            signal_wait: std::mem::transmute::<*const c_void, SignalWaitFn>(needed[14]),
            signal_store_release: std::mem::transmute::<*const c_void, SignalStoreFn>(needed[15]),
            queue_destroy: std::mem::transmute::<*const c_void, QueueDestroyFn>(needed[16]),
            add_write_index: std::mem::transmute::<*const c_void, AddWriteIndexFn>(needed[17]),
            copy_time: std::mem::transmute::<*const c_void, CopyTimeFn>(needed[18]),
            wait_any: Some(get(amd, amd_l.signal_wait_any))
                .filter(|p| !p.is_null())
                .map(|p| std::mem::transmute::<*const c_void, WaitAnyFn>(p)),
            signal_destroy: Some(get(core, core_off::SIGNAL_DESTROY))
                .filter(|p| !p.is_null())
                .map(|p| std::mem::transmute::<*const c_void, SignalDestroyFn>(p)),
        }
    };
    let (iterate, agent_info) = (get(core, core_off::ITERATE_AGENTS), get(core, core_off::AGENT_GET_INFO));
    let agents = (!iterate.is_null() && !agent_info.is_null())
        // SAFETY: as above (hsa_iterate_agents).
        .then(|| (unsafe { std::mem::transmute::<*const c_void, IterateAgentsFn>(iterate) }, agent_info));
    Ok(Tables { fns, agents, core, amd, amd_layout: amd_l })
}
