//! CPython frames at launch-family calls (`--stacks`, issue 17): what the collector tells the
//! probe about a process's interpreter ([`PyProc`], the `PY_PROCS` map) and the records the
//! probe writes ([`PyStackHead`] + [`PyFrameRaw`]s, `EventKind::PythonStack`; [`PyCodeHead`] +
//! texts + line table, `EventKind::PythonCode`).
//!
//! The probe stays version-agnostic: it follows pointers at the offsets given here (found by
//! the collector for the interpreter's version) and copies raw words and bytes. The first time
//! it sees a code object in a process it also copies what naming it needs (a `PythonCode`
//! record), so the collector names frames even after the process exited; it reads the live
//! process only for what the copy lacks.

use crate::EventHeader;

/// Most Python frames one record carries (innermost first); deeper stacks are cut (`truncated`).
pub const PY_FRAMES_MAX: usize = 64;
/// Most thread states the probe follows in the interpreter's list to find the calling thread's.
pub const PY_THREADS_MAX: usize = 64;
/// [`PyProc::cframe_current`] when the thread-state field is the frame pointer itself.
pub const PY_NO_CFRAME: u32 = u32::MAX;
/// [`PyProc::cstack_owner`] when no frame marks an evaluation loop's place on the C stack.
pub const PY_NO_CSTACK_OWNER: u32 = u32::MAX;

/// How to find the calling thread's Python frames in one process: the absolute address of
/// `_PyRuntime` and byte offsets of the fields followed (all below 4 KiB except the first two).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PyProc {
    /// Address of `_PyRuntime` in the process.
    pub runtime: u64,
    /// `_PyRuntime.interpreters.head` (the main interpreter is the only one followed).
    pub interp_head: u32,
    /// The interpreter's first thread state (`threads.head`; 3.10: `tstate_head`).
    pub threads_head: u32,
    /// Thread state: `next`.
    pub ts_next: u32,
    /// Thread state: `thread_id` (`pthread_self()`, the thread's fs base on x86-64 glibc).
    pub ts_thread_id: u32,
    /// Thread state: the current frame (3.10: `frame`; 3.11, 3.12: `cframe`; 3.13: `current_frame`).
    pub ts_frame: u32,
    /// `_PyCFrame.current_frame` when `ts_frame` points at a `_PyCFrame`, else [`PY_NO_CFRAME`].
    pub cframe_current: u32,
    /// Frame: the code object (`f_code`, 3.13 `f_executable`).
    pub frame_code: u32,
    /// Frame: the calling frame (`previous`, 3.10 `f_back`).
    pub frame_previous: u32,
    /// Frame: the instruction word (`prev_instr`, 3.13 `instr_ptr`, 3.10 `f_lasti`).
    pub frame_instr: u32,
    /// Frame: two bytes copied as the frame's flags (3.11 `is_entry`, `owner`; 3.12+ `owner`).
    pub frame_flags: u32,
    /// The probe reads each frame once: `frame_window_len` bytes (at most
    /// [`PY_FRAME_WINDOW_MAX`]) from `frame_window` on, which must hold the four fields above.
    pub frame_window: u32,
    pub frame_window_len: u32,
    /// Code object: the function's name (`co_qualname`; 3.10 `co_name`), file name, line table
    /// (`co_linetable`) and first line (`co_firstlineno`, an `int`).
    pub code_name: u32,
    pub code_file: u32,
    pub code_linetable: u32,
    pub code_firstlineno: u32,
    /// Bytes of the code object's head the probe reads (from its start, past the four fields
    /// above; at most [`PY_CODE_HEAD_MAX`]). 0: no `PythonCode` records for this process.
    pub code_head_len: u32,
    /// Where a compact `str`'s characters start: after `PyASCIIObject` (ASCII) or after
    /// `PyCompactUnicodeObject` (any other).
    pub str_ascii_data: u32,
    pub str_compact_data: u32,
    /// The collector's number for this description of the process: code objects already
    /// copied are remembered per (process, description), so a process described anew (exec,
    /// a reused pid) has its code objects copied again.
    pub generation: u32,
    /// 1: the interpreter keeps a thread's frames in a data stack (3.11+), callers below their
    /// callees, and the probe reads them a block at a time; 0 (3.10, frames are heap objects):
    /// one frame per read.
    pub frame_blocks: u32,
    /// The owner value (the flags' low byte) of an evaluation loop's entry frame, which lives
    /// on the C stack inside the loop's own native frame (3.12+: `FRAME_OWNED_BY_CSTACK`, 3);
    /// [`PY_NO_CSTACK_OWNER`] when none does (3.10, 3.11: `cframe` gives that place).
    pub cstack_owner: u32,
}

/// Most bytes of a code object's head the probe reads.
pub const PY_CODE_HEAD_MAX: u32 = 256;
/// Most bytes of a function name / file name a `PythonCode` record carries (the true length is
/// in the record: a longer text is read from the live process, if it still runs).
pub const PY_NAME_MAX: usize = 128;
pub const PY_FILE_MAX: usize = 256;
/// Most bytes of a line table a `PythonCode` record carries (a power of two). 2 KiB holds the
/// whole table of 99.6 % of the code objects of 20 standard-library modules (CPython 3.11:
/// median 60 bytes, 99th percentile 1.4 KiB, largest 5.7 KiB); a frame whose line lies past a
/// cut table is named from the live process.
pub const PY_LINETABLE_MAX: usize = 2048;

/// Most bytes of one frame the probe reads.
pub const PY_FRAME_WINDOW_MAX: u32 = 128;

/// The head of an `EventKind::PythonStack` record; `count` [`PyFrameRaw`]s follow it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PyStackHead {
    pub hdr: EventHeader,
    /// Frames after the head (at most [`PY_FRAMES_MAX`]).
    pub count: u32,
    /// 1: the chain went on past [`PY_FRAMES_MAX`] frames, or a read failed midway.
    pub truncated: u32,
    /// The thread state the frames came from.
    pub tstate: u64,
    /// [`PY_HEAD_SITE`]: this record is the call's whole site (`--stacks python`: no user-stack
    /// record follows; `caller` is the API's native caller). 0: a user-stack record follows.
    pub flags: u32,
    pub _pad: u32,
    /// With [`PY_HEAD_SITE`]: the return address at the API's entry (0: unreadable).
    pub caller: u64,
}

/// [`PyStackHead::flags`]: the record is the call's whole site, its native caller included
/// (`--stacks python` writes one record per call, not two).
pub const PY_HEAD_SITE: u32 = 1;

/// One Python frame as the probe read it: raw words, interpreted by the collector.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PyFrameRaw {
    /// The code object's address.
    pub code: u64,
    /// The word at [`PyProc::frame_instr`]: an instruction pointer (3.11+) or `f_lasti` (3.10).
    pub instr: u64,
    /// The two bytes at [`PyProc::frame_flags`] (little-endian, in the low 16 bits).
    pub flags: u64,
}

/// One `str` object as the probe found it (for a [`PyCodeHead`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PyStrRaw {
    /// The object's address (part of the code object's fingerprint).
    pub addr: u64,
    /// Its `ob_type` (the collector checks it is `str`).
    pub ob_type: u64,
    /// Its length in characters.
    pub len: u64,
    /// Its `state` bit field (kind, compact, ascii).
    pub state: u32,
    /// Bytes of character data copied (at most the text field's size).
    pub copied: u32,
}

/// The head of an `EventKind::PythonCode` record: a code object seen for the first time in a
/// process (or again with another fingerprint: its address reused). Follow it: the name's
/// bytes (a [`PY_NAME_MAX`] field), the file name's ([`PY_FILE_MAX`]), then `linetable_copied`
/// bytes of the line table. Written before the `PythonStack` record that refers to it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct PyCodeHead {
    pub hdr: EventHeader,
    /// The code object's address and `ob_type` (the collector checks it is `code`).
    pub code: u64,
    pub code_type: u64,
    pub name: PyStrRaw,
    pub file: PyStrRaw,
    /// The line table (`bytes`): address, `ob_type`, true length, bytes copied.
    pub linetable: u64,
    pub linetable_type: u64,
    pub linetable_len: u64,
    pub linetable_copied: u32,
    /// `co_firstlineno`.
    pub first_line: i32,
}
