//! CPython frames at launch-family calls (`--stacks`, issue 17): what the collector tells the
//! probe about a process's interpreter ([`PyProc`], the `PY_PROCS` map) and the record the probe
//! writes ([`PyStackHead`] + [`PyFrameRaw`]s, `EventKind::PythonStack`).
//!
//! The probe stays version-agnostic: it follows pointers at the offsets given here (found by
//! the collector for the interpreter's version) and copies raw words; the collector turns them
//! into functions, files and lines while the process lives.

use crate::EventHeader;

/// Most Python frames one record carries (innermost first); deeper stacks are cut (`truncated`).
pub const PY_FRAMES_MAX: usize = 64;
/// Most thread states the probe follows in the interpreter's list to find the calling thread's.
pub const PY_THREADS_MAX: usize = 64;
/// [`PyProc::cframe_current`] when the thread-state field is the frame pointer itself.
pub const PY_NO_CFRAME: u32 = u32::MAX;

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
}

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
}

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
