//! Where CPython 3.10-3.13 keep what the frame walk needs, per version: the probe's offsets
//! ([`PyProc`]) and the collector's (code objects, strings, bytes).
//!
//! 3.13 and later describe themselves: `_PyRuntime` begins with `_Py_DebugOffsets` (cookie
//! `xdebugpy`), read from the process and preferred over the table. 3.10-3.12 have no such
//! description: the table below gives their x86-64 layouts, computed from CPython's headers of
//! each release (`Include/cpython/pystate.h`, `Include/internal/pycore_frame.h`,
//! `pycore_runtime.h`, `pycore_interp.h`, `Include/cpython/code.h`); 3.11's were checked against
//! the running interpreter (`stacks::python` tests). Patch releases keep these layouts.

use rtl_common::python::{PyProc, PY_FRAME_WINDOW_MAX, PY_NO_CFRAME};

/// What the collector reads of code objects and their strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeLayout {
    pub filename: u64,
    pub name: u64,
    /// `co_qualname` (3.11+); None: 3.10 has only `co_name`.
    pub qualname: Option<u64>,
    pub linetable: u64,
    /// `co_firstlineno` (an `int`).
    pub firstlineno: u64,
    /// `co_code_adaptive` (3.11+): the instructions, inside the code object. None: 3.10, whose
    /// frames hold an instruction index (`f_lasti`) instead of a pointer.
    pub code_adaptive: Option<u64>,
    /// Size of `PyASCIIObject` (compact ASCII text follows it) and of `PyCompactUnicodeObject`.
    pub ascii_size: u64,
    pub compact_size: u64,
}

/// How the frames' flags word is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFlags {
    /// 3.10: every frame is its own evaluation-loop call.
    EachFrameEntry,
    /// 3.11: low byte `is_entry` (the first frame an evaluation-loop call ran), high byte `owner`.
    IsEntry,
    /// 3.12+: low byte `owner`; `FRAME_OWNED_BY_CSTACK` (3) marks the loop's own entry shim.
    OwnerCStack,
}

/// One interpreter version's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub version: (u8, u8),
    pub probe: PyProc,
    pub code: CodeLayout,
    pub flags: FrameFlags,
}

/// The window the probe reads of each frame: from the lowest to past the highest field.
fn window(mut p: PyProc) -> PyProc {
    let lo = p.frame_code.min(p.frame_previous).min(p.frame_instr).min(p.frame_flags);
    let hi = (p.frame_code.max(p.frame_previous).max(p.frame_instr) + 8).max(p.frame_flags + 2);
    p.frame_window = lo;
    p.frame_window_len = hi - lo;
    p
}

/// The table: 3.10, 3.11, 3.12, 3.13 (the last only a fallback to `_Py_DebugOffsets`).
pub fn table(version: (u8, u8)) -> Option<Layout> {
    let old_strings = (48, 72);
    let new_strings = (40, 56);
    let (probe, code, flags, strings) = match version {
        (3, 10) => (
            PyProc {
                interp_head: 32,
                threads_head: 8,
                ts_next: 8,
                ts_thread_id: 176,
                ts_frame: 24,
                cframe_current: PY_NO_CFRAME,
                frame_code: 32,
                frame_previous: 24,
                frame_instr: 96,
                frame_flags: 32,
                ..Default::default()
            },
            (104, 112, None, 120, 40, None),
            FrameFlags::EachFrameEntry,
            old_strings,
        ),
        (3, 11) => (
            PyProc {
                interp_head: 40,
                threads_head: 16,
                ts_next: 8,
                ts_thread_id: 152,
                ts_frame: 56,
                cframe_current: 8,
                frame_code: 32,
                frame_previous: 48,
                frame_instr: 56,
                frame_flags: 68,
                ..Default::default()
            },
            (112, 120, Some(128), 136, 72, Some(184)),
            FrameFlags::IsEntry,
            old_strings,
        ),
        (3, 12) => (
            PyProc {
                interp_head: 40,
                threads_head: 72,
                ts_next: 8,
                ts_thread_id: 136,
                ts_frame: 56,
                cframe_current: 0,
                frame_code: 0,
                frame_previous: 8,
                frame_instr: 56,
                frame_flags: 70,
                ..Default::default()
            },
            (112, 120, Some(128), 136, 68, Some(192)),
            FrameFlags::OwnerCStack,
            new_strings,
        ),
        (3, 13) => (
            PyProc {
                interp_head: 632,
                threads_head: 7344,
                ts_next: 8,
                ts_thread_id: 152,
                ts_frame: 72,
                cframe_current: PY_NO_CFRAME,
                frame_code: 0,
                frame_previous: 8,
                frame_instr: 56,
                frame_flags: 70,
                ..Default::default()
            },
            (112, 120, Some(128), 136, 68, Some(200)),
            FrameFlags::OwnerCStack,
            new_strings,
        ),
        _ => return None,
    };
    let (filename, name, qualname, linetable, firstlineno, code_adaptive) = code;
    Some(Layout {
        version,
        probe: window(probe),
        code: CodeLayout {
            filename,
            name,
            qualname,
            linetable,
            firstlineno,
            code_adaptive,
            ascii_size: strings.0,
            compact_size: strings.1,
        },
        flags,
    })
}

/// Bytes of `_Py_DebugOffsets` read (its head up to and including the code-object offsets).
pub const DEBUG_OFFSETS_READ: usize = 352;

/// A 3.13+ layout from the interpreter's own `_Py_DebugOffsets` (the first bytes of
/// `_PyRuntime`), None when the cookie or version is wrong or an offset is implausible. The
/// fields are 64-bit words; their order is 3.13's (`Include/internal/pycore_debug_offsets.h`).
pub fn from_debug_offsets(b: &[u8], version: (u8, u8)) -> Option<Layout> {
    if b.len() < DEBUG_OFFSETS_READ || &b[..8] != b"xdebugpy" {
        return None;
    }
    let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    let v = w(1);
    if ((v >> 24) as u8, (v >> 16) as u8) != version || w(2) != 0 {
        // Another version than the file says, or a free-threaded build (other layouts).
        return None;
    }
    // Words: 0 cookie, 1 version, 2 free_threaded; runtime_state 3..6 (size, finalizing,
    // interpreters_head); interpreter_state 6..19 (size, id, next, threads_head, ...);
    // thread_state 19..28 (size, prev, next, interp, current_frame, thread_id, ...);
    // interpreter_frame 28..34 (size, previous, executable, instr_ptr, localsplus, owner);
    // code_object 34..44 (size, filename, name, qualname, linetable, firstlineno, argcount,
    // localsplusnames, localspluskinds, co_code_adaptive).
    let small = |x: u64| u32::try_from(x).ok().filter(|&x| x < 1 << 16);
    let probe = PyProc {
        interp_head: small(w(5))?,
        threads_head: small(w(9))?,
        ts_next: small(w(21))?,
        ts_thread_id: small(w(24))?,
        ts_frame: small(w(23))?,
        cframe_current: PY_NO_CFRAME,
        frame_code: small(w(30))?,
        frame_previous: small(w(29))?,
        frame_instr: small(w(31))?,
        frame_flags: small(w(33))?,
        ..Default::default()
    };
    let probe = window(probe);
    if probe.frame_window_len > PY_FRAME_WINDOW_MAX {
        return None;
    }
    let off = |x: u64| (x < 4096).then_some(x);
    let fallback = table(version).map(|t| t.code);
    Some(Layout {
        version,
        probe,
        code: CodeLayout {
            filename: off(w(35))?,
            name: off(w(36))?,
            qualname: Some(off(w(37))?),
            linetable: off(w(38))?,
            firstlineno: off(w(39))?,
            code_adaptive: Some(off(w(43))?),
            ascii_size: fallback.map_or(40, |c| c.ascii_size),
            compact_size: fallback.map_or(56, |c| c.compact_size),
        },
        flags: FrameFlags::OwnerCStack,
    })
}

/// The version a file's name says (`python3.11`, `libpython3.11.so.1.0`, `python3.12d`).
pub fn version_from_name(file_name: &str) -> Option<(u8, u8)> {
    let rest = file_name.strip_prefix("libpython").or_else(|| file_name.strip_prefix("python"))?;
    let rest = rest.strip_prefix("3.")?;
    let minor: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((3, minor.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supported_version_has_a_window_the_probe_reads() {
        for minor in 10..=13 {
            let l = table((3, minor)).unwrap();
            let p = l.probe;
            assert!(p.frame_window_len > 0 && p.frame_window_len <= PY_FRAME_WINDOW_MAX, "3.{minor}");
            for f in [p.frame_code, p.frame_previous, p.frame_instr] {
                assert!(f >= p.frame_window && f + 8 <= p.frame_window + p.frame_window_len, "3.{minor}");
            }
        }
        assert!(table((3, 9)).is_none() && table((3, 14)).is_none());
    }

    #[test]
    fn versions_from_file_names() {
        assert_eq!(version_from_name("python3.11"), Some((3, 11)));
        assert_eq!(version_from_name("libpython3.10.so.1.0"), Some((3, 10)));
        assert_eq!(version_from_name("python3.12d"), Some((3, 12)));
        assert_eq!(version_from_name("python3"), None);
        assert_eq!(version_from_name("libpythonX"), None);
    }

    #[test]
    fn debug_offsets_of_3_13_match_its_table() {
        // A 3.13 `_Py_DebugOffsets` head with the values its headers give.
        let mut w = vec![0u64; DEBUG_OFFSETS_READ / 8];
        w[0] = u64::from_le_bytes(*b"xdebugpy");
        w[1] = 0x030d_00f0;
        w[5] = 632;
        w[9] = 7344;
        w[21] = 8;
        w[23] = 72;
        w[24] = 152;
        w[29] = 8;
        w[30] = 0;
        w[31] = 56;
        w[33] = 70;
        w[35] = 112;
        w[36] = 120;
        w[37] = 128;
        w[38] = 136;
        w[39] = 68;
        w[43] = 200;
        let b: Vec<u8> = w.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(from_debug_offsets(&b, (3, 13)), table((3, 13)));
        assert_eq!(from_debug_offsets(&b, (3, 12)), None, "version mismatch refused");
        let mut bad = b.clone();
        bad[0] = b'y';
        assert_eq!(from_debug_offsets(&bad, (3, 13)), None);
    }
}
