//! Types shared by the kernel-side eBPF programs (`rtl-ebpf`) and the collector (`rtl-user`).
//!
//! Everything here is `#[repr(C)]`, `Copy`, and has no padding the verifier or the decoder could
//! trip over: the eBPF side writes these bytes into the ring buffer, the collector reads them back.
#![no_std]

pub mod agent;
pub mod gpu_source;
pub mod python;

pub use gpu_source::GpuSource;

/// Kinds of records in the ring buffer. The first `u32` of every record.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// A probed API was entered ([`ApiEnter`]).
    ApiEnter = 1,
    /// A probed API returned ([`ApiExit`]).
    ApiExit = 2,
    /// Entry into an API with a string argument ([`StringEnter`]): markers, module paths, names.
    StringEnter = 3,
    /// A thread of a traced process exited ([`TaskEvent`]).
    ThreadExit = 4,
    /// A traced process called exec ([`ExecEvent`]: what it runs now, read in the kernel).
    Exec = 5,
    /// A traced process forked a child that is now traced too ([`TaskEvent`]).
    Fork = 6,
    /// A batch of GPU records handed over by the in-process agent ([`AgentBatch`]).
    AgentBatch = 7,
    /// The dynamic loader of a traced process finished changing its library list
    /// (`_dl_debug_state` with `r_state == RT_CONSISTENT`) and the process was stopped
    /// (SIGSTOP) so the collector can probe what it loaded before it runs on ([`TaskEvent`],
    /// in the `LOADER_EVENTS` ring buffer, never behind the backlog of `EVENTS`).
    LoaderStop = 8,
    /// A thread of a traced process was killed because another thread called exec
    /// ([`TaskEvent`]); its open calls end with the exec.
    ExecKill = 9,
    /// Entry into a probed API that takes no stack arguments ([`ApiEnterShort`]): the common
    /// case, 48 bytes smaller than [`ApiEnter`] (one cache line less per call).
    ApiEnterShort = 10,
    /// The string argument of the call now returning on this thread, read at its return
    /// ([`StringLate`]) because the entry probe could not read it: the page holding it was not
    /// mapped yet (a probe cannot fault pages in). The callee has read the string by then (HIP
    /// copies kernel names and marker texts), so it is mapped. Written before the [`ApiExit`].
    StringLate = 11,
    /// The user stack at the entry of a probed API whose cookie asks for it
    /// ([`cookie::USER_STACK`]): a [`UserStackHead`] followed by `len` bytes (frame addresses or a
    /// copy of the stack, by `mode`). Written right after the call's entry record, by the same
    /// thread.
    UserStack = 12,
    /// The Python frames of the calling thread at the entry of a probed API whose cookie asks
    /// for the user stack, when the process runs a CPython interpreter the collector described
    /// in `PY_PROCS` ([`python::PyStackHead`] followed by `count` [`python::PyFrameRaw`]).
    /// Written just before that call's [`EventKind::UserStack`] record, by the same thread.
    PythonStack = 13,
    /// What naming a code object needs, copied the first time the probe saw it in a process
    /// ([`python::PyCodeHead`], its texts and line table). Written before the `PythonStack`
    /// record whose frames refer to it, by the same thread.
    PythonCode = 14,
    /// Return from a probed API that has no output-pointer argument ([`ApiExitShort`]): the
    /// common case, 16 bytes smaller than [`ApiExit`].
    ApiExitShort = 15,
    /// A whole call of a probed API without stack words, string, output pointer or stack
    /// record ([`ApiCall`]): the entry parked its data in the thread's call slot (`CALL_SLOTS`)
    /// and the return wrote entry and return as one record, in place of an
    /// [`EventKind::ApiEnterShort`] + [`EventKind::ApiExitShort`] pair.
    ApiCall = 16,
    /// Finished calls of one thread, oldest first ([`ApiCalls`]): with `config::CALL_BATCH`
    /// set, a thread's call slot holds its finished calls and writes them together when it
    /// holds that many, before any other record of the thread, when the oldest is
    /// [`CALL_HELD_MAX_NS`] old at the thread's next entry, when the collector takes them out
    /// of a thread's slot that is not calling (`take_held`), or at the stop (read from the
    /// slot).
    ApiCalls = 17,
}

impl EventKind {
    pub fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::ApiEnter,
            2 => Self::ApiExit,
            3 => Self::StringEnter,
            4 => Self::ThreadExit,
            5 => Self::Exec,
            6 => Self::Fork,
            7 => Self::AgentBatch,
            8 => Self::LoaderStop,
            9 => Self::ExecKill,
            10 => Self::ApiEnterShort,
            11 => Self::StringLate,
            12 => Self::UserStack,
            13 => Self::PythonStack,
            14 => Self::PythonCode,
            15 => Self::ApiExitShort,
            16 => Self::ApiCall,
            17 => Self::ApiCalls,
            _ => return None,
        })
    }
}

/// The common head of every ring-buffer record.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EventHeader {
    /// An [`EventKind`] as `u32`.
    pub kind: u32,
    /// Index of the API in the collector's probe table (the uprobe cookie's low bits).
    pub api_id: u32,
    /// `bpf_get_current_pid_tgid()`: tgid in the high 32 bits, thread id in the low 32 bits.
    pub pid_tgid: u64,
    /// `bpf_ktime_get_ns()`: CLOCK_MONOTONIC, nanoseconds.
    pub ts_ns: u64,
}

/// Register arguments (rdi, rsi, rdx, rcx, r8, r9) plus this many stack words at most.
pub const MAX_STACK_ARGS: usize = 6;
/// All argument words an [`ApiEnter`] carries.
pub const MAX_ARGS: usize = 6 + MAX_STACK_ARGS;

/// Entry into a probed API: the raw argument words, decoded per API in user space.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiEnter {
    pub hdr: EventHeader,
    /// `args[0..6]` are the six integer argument registers, `args[6..]` the first stack words
    /// (arguments 7 and up), as many as the API's cookie asked for; the rest are zero.
    pub args: [u64; MAX_ARGS],
    /// The calling thread's fs base (`pthread_self()`), read from `task_struct` when the
    /// collector supplied the offset (`config::FSBASE_OFFSET`), else 0. The HIP profiler names
    /// threads by a hash of it; this is how its records are matched to our calls.
    pub fsbase: u64,
}

/// [`ApiEnter`] without the stack words: what the entry probe writes for an API whose cookie
/// asks for none. The collector reads it as an `ApiEnter` with `args[6..]` zero.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiEnterShort {
    pub hdr: EventHeader,
    /// The six integer argument registers.
    pub args: [u64; 6],
    /// As [`ApiEnter::fsbase`].
    pub fsbase: u64,
}

/// Return from a probed API.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiExit {
    pub hdr: EventHeader,
    /// The raw return register (rax). For HIP APIs a `hipError_t` in the low 32 bits.
    pub ret: u64,
    /// The value the API wrote through its output-pointer argument (hipMalloc's pointer,
    /// hipStreamCreate's stream...), read at return. Valid when `has_out` is 1.
    pub out: u64,
    pub has_out: u32,
    pub _pad: u32,
}

/// [`ApiExit`] without the output pointer's value: what the return probe writes for an API
/// whose cookie names no output pointer. The collector reads it as an `ApiExit` with
/// `has_out` 0.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiExitShort {
    pub hdr: EventHeader,
    /// As [`ApiExit::ret`].
    pub ret: u64,
}

/// A whole call in one record ([`EventKind::ApiCall`]): `hdr.ts_ns` is the return's time.
/// The collector reads it as an [`ApiEnterShort`] at `enter_ts` followed by an [`ApiExitShort`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiCall {
    pub hdr: EventHeader,
    /// The entry's `bpf_ktime_get_ns()`.
    pub enter_ts: u64,
    /// The six integer argument registers at entry.
    pub args: [u64; 6],
    /// As [`ApiEnter::fsbase`].
    pub fsbase: u64,
    /// As [`ApiExit::ret`].
    pub ret: u64,
}

/// A call kept in its thread's call slot: the parked entry of a call in flight (`exit_ts` and
/// `ret` not yet written), or a finished call waiting to be written ([`ApiCalls`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeldCall {
    /// The API's id (the low 32 bits).
    pub api_id: u64,
    /// The entry's `bpf_ktime_get_ns()`.
    pub enter_ts: u64,
    /// The return's `bpf_ktime_get_ns()`.
    pub exit_ts: u64,
    /// The six integer argument registers at entry.
    pub args: [u64; 6],
    /// As [`ApiEnter::fsbase`].
    pub fsbase: u64,
    /// As [`ApiExit::ret`].
    pub ret: u64,
}

/// Finished calls one thread's slot holds at most (`config::CALL_BATCH` is at most this).
pub const CALL_BATCH_MAX: usize = 8;

/// A thread's held calls go out at its next entry once the oldest entered this long ago
/// (trace clock, ns), and the collector takes them out of the slot of a thread that has not
/// called since (`take_held`): no call is held much longer than this.
pub const CALL_HELD_MAX_NS: u64 = 2_000_000;

/// [`CallSlot::state`]: the finished calls held are `calls[..state & HELD_COUNT_MASK]`; the bits
/// above count the times the slot's held calls were taken (written), so that a
/// compare-and-swap on the word fails once they have been.
pub const HELD_COUNT_MASK: u64 = 0xff;
/// One in the generation bits of [`CallSlot::state`].
pub const HELD_GEN_ONE: u64 = 0x100;

/// Slots one run of the `take_held` program looks at (its arguments: the count, then the
/// indices; a raw tracepoint's test run takes at most 12 arguments).
pub const TAKE_HELD_SLOTS: usize = 11;

/// One thread's calls (the `CALL_SLOTS` array, indexed by `tid & config::CALL_SLOT_MASK`):
/// the finished calls it holds (`config::CALL_BATCH` above 1) and the entry of the call in
/// flight (`calls[parked_at]`, when `ret_sp` is not 0), kept until the call returns. The head is
/// one cache line, so that threads of neighbouring ids on different CPUs do not share the line
/// their owner word is in.
///
/// Only the owning thread writes the slot, with one exception: the collector's `take_held`
/// program may write out the held calls of a thread that is not calling (a compare-and-swap
/// on `state` decides which of the two writes them, so each is written once, and before the
/// owner's next record).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CallSlot {
    /// The owning thread's `pid_tgid`, claimed with a compare-and-swap from 0; 0: free. The
    /// owner keeps the slot while it holds a call (finished or in flight).
    pub owner: u64,
    /// The stack pointer the parked call returns with (its entry's `rsp + 8`): a return with
    /// another is not this call's (a nested call), an entry at or above it means the parked
    /// call's frame is gone (longjmp, an exception). 0: no call parked.
    pub ret_sp: u64,
    /// How many finished calls are held (`& HELD_COUNT_MASK`) and the take generation above.
    pub state: u64,
    /// Where the parked call's entry is in `calls` (where the count was when it entered).
    pub parked_at: u64,
    pub _pad: [u64; 4],
    pub calls: [HeldCall; CALL_BATCH_MAX],
}

/// A thread's held calls, written together ([`EventKind::ApiCalls`]): `hdr.ts_ns` is the last
/// one's return, `hdr.api_id` 0. `calls[..count]` are the calls, oldest first; the rest is
/// whatever the slot held before (ignored).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ApiCalls {
    pub hdr: EventHeader,
    pub count: u64,
    pub calls: [HeldCall; CALL_BATCH_MAX],
}

/// Slots of the `CALL_SLOTS` map (a power of two): threads whose ids are equal modulo this (or
/// modulo `config::CALL_SLOT_MASK + 1`, when the collector sets a smaller mask) share a slot;
/// while one holds it the others write two records per call, as without slots.
pub const CALL_SLOTS_MAX: u32 = 8192;

/// Longest string argument kept (bytes, including the terminating NUL).
pub const STRING_ARG_LEN: usize = 256;

/// Entry into an API one of whose arguments is a C string (roctxRangePushA's message,
/// hipModuleLoad's path, __hipRegisterFunction's kernel name).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StringEnter {
    pub enter: ApiEnter,
    /// NUL-terminated, truncated to [`STRING_ARG_LEN`] - 1 bytes; empty if unreadable.
    pub text: [u8; STRING_ARG_LEN],
}

/// A string argument read at the call's return ([`EventKind::StringLate`]): `hdr.api_id` and
/// `hdr.pid_tgid` name the open call it belongs to.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StringLate {
    pub hdr: EventHeader,
    /// NUL-terminated, truncated to [`STRING_ARG_LEN`] - 1 bytes.
    pub text: [u8; STRING_ARG_LEN],
}

/// A task lifecycle event of a traced process.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TaskEvent {
    pub hdr: EventHeader,
    /// For [`EventKind::Fork`]: the child's tgid. Otherwise 0.
    pub child_tgid: u32,
    pub _pad: u32,
}

/// A traced process's thread exited ([`EventKind::ThreadExit`]), with the name it had then.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ThreadExitEvent {
    pub hdr: EventHeader,
    /// The thread's name (`comm`, NUL-terminated unless 16 bytes long: TASK_COMM_LEN).
    pub comm: [u8; 16],
}

/// Longest executable path kept from an exec (bytes, including the terminating NUL).
pub const EXEC_PATH_LEN: usize = 256;
/// Most bytes of an exec's command line kept (its NUL-separated argument strings).
pub const EXEC_ARGS_LEN: usize = 2048;

/// A traced process called exec: what it runs now, read in the kernel at that moment (a
/// short-lived process has often exited, and its `/proc` entry gone, by the time the collector
/// reads its first call).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEvent {
    pub hdr: EventHeader,
    /// The parent's tgid (`real_parent`), 0 if unknown.
    pub ppid: u32,
    /// Bytes of `args` copied.
    pub args_len: u32,
    /// Bytes of the whole command line in the new image (`arg_end - arg_start`): more than
    /// `args_len` when it was cut.
    pub args_total: u32,
    pub _pad: u32,
    /// The task's name after the exec (`comm`), NUL-padded.
    pub comm: [u8; 16],
    /// The path given to exec (`linux_binprm.filename`), NUL-terminated; empty if unreadable.
    pub filename: [u8; EXEC_PATH_LEN],
    /// The new command line: argument strings, each NUL-terminated, cut at [`EXEC_ARGS_LEN`].
    pub args: [u8; EXEC_ARGS_LEN],
}

/// Largest agent payload carried by one [`AgentBatch`] record (bytes).
pub const AGENT_BATCH_MAX: usize = 4096;

/// A batch of bytes the in-process agent published through its uprobed hand-off function
/// `rtl_agent_publish(const u8 *data, u64 len)`. The payload format is the agent's wire
/// format (see `rtl-agent`), validated by the collector before use.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct AgentBatch {
    /// `hdr.api_id`: the publisher's tgid in its own (innermost) pid namespace, what the agent's
    /// `getpid()` returned and wrote into its batch header (the host's tgid outside containers);
    /// 0 when the kernel's layout is unknown.
    pub hdr: EventHeader,
    /// Bytes the agent asked to publish.
    pub len: u32,
    /// Bytes actually copied into `data` (`min(len, AGENT_BATCH_MAX)`), 0 if the read failed.
    pub copied: u32,
    pub data: [u8; AGENT_BATCH_MAX],
}

/// [`UserStackHead::mode`]: the frame addresses `bpf_get_stack(BPF_F_USER_STACK)` found by
/// walking frame pointers (`data` is `len / 8` addresses, innermost first).
pub const STACK_MODE_FRAME_POINTERS: u32 = 1;
/// [`UserStackHead::mode`]: `len` bytes of the user stack from `sp` up, copied as they are, to be
/// unwound in user space from the binaries' `.eh_frame`.
pub const STACK_MODE_COPY: u32 = 2;
/// [`UserStackHead::mode`]: no native stack, only the caller's return address (`len` 0): the
/// Python frames (a `PythonStack` record before it) are the call site (`--stacks python`).
pub const STACK_MODE_PYTHON: u32 = 3;
/// Or'ed into a copy's [`UserStackHead::mode`]: the copy stops at the innermost Python
/// evaluation loop's frame (the Python walk gave its place on the stack), on purpose: the Python
/// frames stand for what lies beyond, so a native stack that ends there is not cut short.
pub const STACK_CUT_AT_PYTHON: u32 = 1 << 8;
/// Most bytes of user stack one [`EventKind::UserStack`] record carries.
pub const STACK_COPY_MAX: usize = 16384;

/// The head of an [`EventKind::UserStack`] record; `len` bytes of data follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UserStackHead {
    pub hdr: EventHeader,
    /// [`STACK_MODE_FRAME_POINTERS`] or [`STACK_MODE_COPY`] (with [`STACK_CUT_AT_PYTHON`]).
    pub mode: u32,
    /// Bytes of data after the head.
    pub len: u32,
    /// Registers at the probe (the entry of the probed function): rip, rsp, rbp.
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    /// The return address at `*sp` (the caller), 0 if unreadable.
    pub ret_addr: u64,
}

/// The uprobe cookie: how one generic entry program knows what it is probing.
///
/// Bits 0..16: API index. Bits 16..24: stack words to copy. Bits 24..28: 1 + index of a
/// string argument (0: none). Bits 28..32: 1 + index of an output-pointer argument (0: none).
/// Bit 32: record the user stack ([`USER_STACK`](cookie::USER_STACK)).
pub mod cookie {
    pub const API_MASK: u64 = 0xffff;
    pub const STACK_SHIFT: u64 = 16;
    pub const STACK_MASK: u64 = 0xff;
    pub const STRING_SHIFT: u64 = 24;
    pub const OUT_SHIFT: u64 = 28;
    pub const NIBBLE: u64 = 0xf;
    /// Record the caller's user stack at this API's entry (an [`EventKind::UserStack`](super::EventKind::UserStack) record).
    pub const USER_STACK: u64 = 1 << 32;

    pub const fn make(api_id: u16, stack_words: u8, string_arg: Option<u8>, out_arg: Option<u8>) -> u64 {
        let s = match string_arg {
            Some(i) => i as u64 + 1,
            None => 0,
        };
        let o = match out_arg {
            Some(i) => i as u64 + 1,
            None => 0,
        };
        (api_id as u64) | ((stack_words as u64) << STACK_SHIFT) | (s << STRING_SHIFT) | (o << OUT_SHIFT)
    }
}

/// Slots of the `CONFIG` array map, written by the collector before attaching.
pub mod config {
    /// 1: trace every process; 0: only tgids in the `TRACED` map.
    pub const TRACE_ALL: u32 = 0;
    /// 1: a fork of a traced process makes the child traced (for `rtl-ebpf run`).
    pub const FOLLOW_FORKS: u32 = 1;
    /// Byte offset of `pid` in `struct task_struct` (from kernel BTF).
    pub const TASK_PID_OFF: u32 = 2;
    /// Byte offset of `tgid` in `struct task_struct` (from kernel BTF).
    pub const TASK_TGID_OFF: u32 = 3;
    /// Byte offset of `thread.fsbase` in `struct task_struct` (from kernel BTF); 0: do not read.
    pub const FSBASE_OFFSET: u32 = 4;
    /// Wake the collector when at least this many bytes wait in the ring buffer.
    pub const WAKEUP_BYTES: u32 = 5;
    /// 1: stop a traced process when its dynamic loader has mapped new libraries, until the
    /// collector has probed them and sends SIGCONT (`rtl-ebpf run`).
    pub const LOADER_STOP: u32 = 6;
    /// Byte offset of `signal` in `struct task_struct` (from kernel BTF); 0: unknown.
    pub const TASK_SIGNAL_OFF: u32 = 7;
    /// Byte offset of `group_exec_task` in `struct signal_struct`; 0: unknown (then a thread
    /// killed by another thread's exec is reported as a plain exit).
    pub const SIGNAL_EXEC_TASK_OFF: u32 = 8;
    /// Byte offset of `real_parent` in `struct task_struct`; 0: unknown (no ppid at exec).
    pub const TASK_REAL_PARENT_OFF: u32 = 9;
    /// Byte offset of `filename` in `struct linux_binprm`; 0: unknown (no path at exec).
    pub const BINPRM_FILENAME_OFF: u32 = 10;
    /// Byte offset of `mm` in `struct task_struct`; 0: unknown (no command line at exec).
    pub const TASK_MM_OFF: u32 = 11;
    /// Byte offsets of `arg_start` and `arg_end` in `struct mm_struct`.
    pub const MM_ARG_START_OFF: u32 = 12;
    pub const MM_ARG_END_OFF: u32 = 13;
    /// Byte offsets of `task_struct.group_leader`, `task_struct.thread_pid`, `pid.level` and
    /// `pid.numbers`, and the size of `struct upid`: the publish probe reads the publisher's
    /// tgid in its own pid namespace ([`crate::AgentBatch`]); 0: unknown.
    pub const TASK_GROUP_LEADER_OFF: u32 = 14;
    pub const TASK_THREAD_PID_OFF: u32 = 15;
    pub const PID_LEVEL_OFF: u32 = 16;
    pub const PID_NUMBERS_OFF: u32 = 17;
    pub const UPID_SIZE: u32 = 18;
    /// How user stacks are taken where the cookie asks for one: 0 not at all,
    /// [`STACK_MODE_FRAME_POINTERS`](super::STACK_MODE_FRAME_POINTERS) or
    /// [`STACK_MODE_COPY`](super::STACK_MODE_COPY).
    pub const STACK_MODE: u32 = 19;
    /// Bytes of user stack to copy (mode copy), at most [`STACK_COPY_MAX`](super::STACK_COPY_MAX).
    pub const STACK_BYTES: u32 = 20;
    /// Generation of the `TRACED` map's removals: the collector increments it after it removes
    /// tgids (it is the only remover and the only writer of this slot). A program remembers,
    /// per CPU, the last tgid it found in `TRACED` and the generation it found it in, and skips
    /// the hash lookup while both still match (see the eBPF side's `traced`).
    pub const FILTER_GEN: u32 = 21;
    /// Byte offset of `vm_end` in `struct vm_area_struct` (from kernel BTF); 0: unknown (then a
    /// stack copy is read page by page until a page fails, instead of to the mapping's end).
    pub const VMA_END_OFF: u32 = 22;
    /// `tid & this` picks a thread's `CALL_SLOTS` slot (a power of two minus one, below
    /// [`CALL_SLOTS_MAX`](super::CALL_SLOTS_MAX)); 0: no slots, every call writes two records.
    pub const CALL_SLOT_MASK: u32 = 23;
    /// Generation of the eBPF side's `PY_PROCS` map: the collector increments it after every
    /// batch of changes. A CPU keeps the last description it copied, with its tgid and this
    /// generation, and reuses it while both match (no hash lookup, no copy).
    pub const PY_PROCS_GEN: u32 = 24;
    /// Finished calls a thread's call slot holds before it writes them as one
    /// [`ApiCalls`](super::ApiCalls) record (2 up to [`CALL_BATCH_MAX`](super::CALL_BATCH_MAX));
    /// 0 or 1: each call is written at its return ([`ApiCall`](super::ApiCall)).
    pub const CALL_BATCH: u32 = 25;
    pub const LEN: u32 = 26;
}

/// Slots of the per-CPU `COUNTERS` array map.
pub mod counter {
    /// Records lost because the ring buffer was full (a lost [`ApiCalls`](crate::ApiCalls)
    /// record counts as the `ApiCall` records it stands for, one per call).
    pub const RINGBUF_DROPS: u32 = 0;
    /// Probe hits seen by the entry program (after the process filter).
    pub const ENTRIES: u32 = 1;
    /// Probe hits seen by the return program (after the process filter).
    pub const EXITS: u32 = 2;
    /// Agent batches longer than `AGENT_BATCH_MAX` or unreadable.
    pub const AGENT_TRUNCATED: u32 = 3;
    /// Processes stopped at a dynamic-loader event (each is continued by the collector).
    pub const LOADER_STOPS: u32 = 4;
    /// Loader events not reported (`LOADER_EVENTS` full): the process was not stopped.
    pub const LOADER_EVENTS_LOST: u32 = 5;
    /// Dynamic-loader events after which the process ran on unstopped: the library list was
    /// consistent again and none of its new entries has a name in `LOADER_NAMES`.
    pub const LOADER_SKIPPED: u32 = 6;
    /// String arguments the entry probe could not read (page not mapped yet), read at the
    /// call's return instead ([`crate::EventKind::StringLate`]).
    pub const STRINGS_LATE: u32 = 7;
    /// String arguments unreadable at entry and at return (or not remembered: map full): the
    /// call is in the trace with an empty text.
    pub const STRINGS_LOST: u32 = 8;
    /// User stacks not recorded: the ring buffer was full, or the stack could not be read.
    pub const STACKS_LOST: u32 = 9;
    /// Python frame records not written (ring buffer full) for a process in `PY_PROCS`.
    pub const PY_STACKS_LOST: u32 = 10;
    /// Python frame walks that found no thread state for the calling thread (a thread that
    /// never ran Python, or more threads than the walk follows).
    pub const PY_NO_THREAD: u32 = 11;
    /// Code objects first seen whose `PythonCode` record was not written (ring buffer full):
    /// retried at the next call that has them; meanwhile named from the live process.
    pub const PY_CODES_LOST: u32 = 12;
    /// Code objects whose head the probe could not read (named from the live process).
    pub const PY_CODES_UNREADABLE: u32 = 13;
    /// Calls written as one [`crate::EventKind::ApiCall`] record (each also counted in
    /// `ENTRIES` and `EXITS`).
    pub const CALLS_COMBINED: u32 = 14;
    /// Parked entries written as an `ApiEnterShort` before their return: another record of
    /// the thread came first (a nested call, a thread exit, an exec, a frame unwound past).
    pub const PARKED_FLUSHED: u32 = 15;
    /// Calls lost to a full ring buffer in `ApiCall` and `ApiCalls` records (the records also
    /// in `RINGBUF_DROPS`): each was a call's entry and its return.
    pub const CALLS_DROPPED: u32 = 16;
    /// [`ApiCalls`](crate::ApiCalls) records written (each holds up to `config::CALL_BATCH`
    /// calls; a lost one counts its calls in `CALLS_DROPPED`).
    pub const CALL_BATCHES: u32 = 17;
    /// Held calls the collector took out of the slots of threads that were not calling
    /// (`take_held`), counted per call.
    pub const CALLS_TAKEN: u32 = 18;
    pub const LEN: u32 = 19;
}

/// Offsets in glibc's (and musl's) `struct r_debug` and `struct link_map` on x86-64
/// (<link.h>: `int r_version; struct link_map *r_map; ...`; `ElfW(Addr) l_addr; char *l_name;
/// ElfW(Dyn) *l_ld; struct link_map *l_next, *l_prev;`).
pub mod link_map {
    /// `r_debug.r_map`: the first entry of the (base namespace's) library list.
    pub const R_MAP: u64 = 8;
    /// `link_map.l_name`: the path the library was loaded from (`""` for the program).
    pub const L_NAME: u64 = 8;
    /// `link_map.l_next`.
    pub const L_NEXT: u64 = 24;
    /// `r_state` values.
    pub const RT_CONSISTENT: u32 = 0;
    pub const RT_ADD: u32 = 1;
    pub const RT_DELETE: u32 = 2;
}

/// Basename prefixes of the libraries `run` probes (`LOADER_NAMES` map, written by the
/// collector): at most this many, each at most [`LOADER_NAME_LEN`] bytes. With none written,
/// the loader probe stops the process at every consistent library list.
pub const LOADER_NAMES_MAX: u32 = 8;
pub const LOADER_NAME_WORDS: usize = 4;
pub const LOADER_NAME_LEN: usize = 8 * LOADER_NAME_WORDS;

/// One basename prefix for the loader probe: a name matches when its first
/// [`LOADER_NAME_LEN`] bytes, as little-endian words, equal `word` under `mask`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoaderName {
    /// The prefix's bytes, zero past its end.
    pub word: [u64; LOADER_NAME_WORDS],
    /// 0xff for each byte of the prefix, 0 past its end. All zero: unused slot.
    pub mask: [u64; LOADER_NAME_WORDS],
}

impl LoaderName {
    /// `None` for an empty prefix or one longer than [`LOADER_NAME_LEN`].
    pub fn new(prefix: &[u8]) -> Option<Self> {
        if prefix.is_empty() || prefix.len() > LOADER_NAME_LEN {
            return None;
        }
        let (mut b, mut m) = ([0u8; LOADER_NAME_LEN], [0u8; LOADER_NAME_LEN]);
        b[..prefix.len()].copy_from_slice(prefix);
        m[..prefix.len()].fill(0xff);
        let mut n = Self::default();
        let mut i = 0;
        while i < LOADER_NAME_WORDS {
            let mut wb = [0u8; 8];
            wb.copy_from_slice(&b[8 * i..8 * i + 8]);
            n.word[i] = u64::from_le_bytes(wb);
            wb.copy_from_slice(&m[8 * i..8 * i + 8]);
            n.mask[i] = u64::from_le_bytes(wb);
            i += 1;
        }
        Some(n)
    }

    /// Does `name` (a basename) start with this prefix? (What the probe computes.)
    pub fn matches(&self, name: &[u8]) -> bool {
        let mut b = [0u8; LOADER_NAME_LEN];
        let n = name.len().min(LOADER_NAME_LEN);
        b[..n].copy_from_slice(&name[..n]);
        (0..LOADER_NAME_WORDS).all(|i| {
            let mut wb = [0u8; 8];
            wb.copy_from_slice(&b[8 * i..8 * i + 8]);
            u64::from_le_bytes(wb) & self.mask[i] == self.word[i]
        })
    }
}
/// Longest library path the loader probe reads from `l_name` (bytes, NUL included); a longer
/// one makes it stop the process (the collector then decides).
pub const LOADER_PATH_LEN: usize = 256;
/// Library-list entries the loader probe looks at per event; past this it stops the process
/// (and carries on from there at the next event).
pub const LOADER_WALK_MAX: u32 = 256;

/// Per traced process: the last library-list entry the loader probe has seen and the change
/// `_dl_debug_state` announced last (`RT_ADD` / `RT_DELETE`; `RT_CONSISTENT` when none is
/// pending). The entries after `tail` are the ones a `dlopen` added.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct LoaderTail {
    pub tail: u64,
    pub pending: u32,
    pub _pad: u32,
}

/// Offset of `r_state` in glibc's `struct r_debug` on x86-64 (`int r_version; struct link_map
/// *r_map; ElfW(Addr) r_brk; enum r_state; ...`, <link.h>).
pub const R_DEBUG_STATE_OFFSET: u64 = 24;

/// Default ring buffer size in bytes (a power of two, a multiple of the page size).
pub const RINGBUF_BYTES: u32 = 16 << 20;
