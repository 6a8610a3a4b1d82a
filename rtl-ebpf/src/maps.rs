//! Every map of the programs, in one place: what the collector creates, fills and reads by name.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use rtl_common::{config, counter, CallSlot, LoaderName, LoaderTail, LOADER_NAMES_MAX, LOADER_PATH_LEN, RINGBUF_BYTES};

#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(RINGBUF_BYTES, 0);

/// tgids to trace when `config::TRACE_ALL` is 0. Value unused.
#[map]
pub(crate) static TRACED: HashMap<u32, u8> = HashMap::with_max_entries(65536, 0);

/// Output-pointer argument of the call in progress on each thread (pid_tgid -> address).
#[map]
pub(crate) static OUT_PTRS: HashMap<u64, u64> = HashMap::with_max_entries(65536, 0);

/// String arguments the entry probe could not read, by thread (`pid_tgid` -> the pointer): the
/// return probe reads them once the callee has touched them ([`StringLate`]). LRU: a thread
/// that dies inside such a call leaves an entry that ages out.
#[map]
pub(crate) static LATE_STRINGS: LruHashMap<u64, u64> = LruHashMap::with_max_entries(4096, 0);

/// Dynamic-loader stops ([`EventKind::LoaderStop`]): rare, read by the collector's event loop
/// at once, never queued behind the backlog of `EVENTS`.
#[map]
pub(crate) static LOADER_EVENTS: RingBuf = RingBuf::with_byte_size(16 * 4096, 0);

/// Per traced process, where its loader's library list ended when last consistent (see
/// [`loader`]). LRU: bounded, and an evicted entry only costs one stop too many.
#[map]
pub(crate) static LOADER_TAILS: LruHashMap<u32, LoaderTail> = LruHashMap::with_max_entries(16384, 0);

/// Basename prefixes of the libraries `run` probes, written by the collector.
#[map]
pub(crate) static LOADER_NAMES: Array<LoaderName> = Array::with_max_entries(LOADER_NAMES_MAX, 0);

/// Scratch space for one library path (per CPU: the loader probe's stack is too small), with
/// room behind it for a prefix compared at any position.
#[map]
pub(crate) static LOADER_PATH: PerCpuArray<[u8; 2 * LOADER_PATH_LEN]> = PerCpuArray::with_max_entries(1, 0);

/// The last tgid found in `TRACED` on this CPU: `[(1 << 32) | tgid, config::FILTER_GEN then]`
/// (`[0, 0]`: none yet). Spares the traced process's calls the hash lookup (see `traced`).
#[map]
pub(crate) static TRACED_LAST: PerCpuArray<[u64; 2]> = PerCpuArray::with_max_entries(1, 0);

/// The fs base of the last thread that entered a probed API on this CPU: `[pid_tgid,
/// THREAD_GEN then, fs base]` (see `helpers::fsbase`).
#[map]
pub(crate) static FSBASE_LAST: PerCpuArray<[u64; 3]> = PerCpuArray::with_max_entries(1, 0);

/// The end of the stack mapping of the last thread that copied its stack on this CPU:
/// `[pid_tgid, THREAD_GEN then, vm_end]` (see `stacks::stack_end`).
#[map]
pub(crate) static STACK_END_LAST: PerCpuArray<[u64; 3]> = PerCpuArray::with_max_entries(1, 0);

/// Per CPU, for `helpers::wakeup_flags`: `[bytes this CPU wrote since it last looked at the ring
/// buffer's fill level, 1 if that look found the wake-up threshold crossed]`.
#[map]
pub(crate) static WAKE_LAST: PerCpuArray<[u64; 2]> = PerCpuArray::with_max_entries(1, 0);

/// The time of the last thread exit or exec (`helpers::next_thread_generation`).
#[map]
pub(crate) static THREAD_GEN: Array<u64> = Array::with_max_entries(1, 0);

/// Parked entries of common calls, one slot per thread id modulo the slot count (see
/// `call_slots`).
#[map]
pub(crate) static CALL_SLOTS: Array<CallSlot> = Array::with_max_entries(rtl_common::CALL_SLOTS_MAX, 0);

/// Per call slot, the entry time of the oldest finished call it holds (0: none): a hint the
/// collector reads (memory-mapped) to find threads whose held calls are getting old
/// (`call_slots::take_slot`).
#[map]
pub(crate) static HELD_SINCE: Array<u64> = Array::with_max_entries(rtl_common::CALL_SLOTS_MAX, BPF_F_MMAPABLE);

/// `BPF_F_MMAPABLE` (include/uapi/linux/bpf.h): an array user space can map.
const BPF_F_MMAPABLE: u32 = 1 << 10;

#[map]
pub(crate) static CONFIG: Array<u64> = Array::with_max_entries(config::LEN, 0);

#[map]
pub(crate) static COUNTERS: PerCpuArray<u64> = PerCpuArray::with_max_entries(counter::LEN, 0);
