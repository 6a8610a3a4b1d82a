//! Python call sites: the CPython frames at each launch-family call (`--stacks`), merged with
//! the native stack at the interpreter's frames.
//!
//! Data flow: when a process's mappings are read ([`super::StackRecorder::set_maps`]) and one of
//! its files holds a CPython interpreter ([`elf`]), its layout ([`versions`]: the interpreter's
//! own `_Py_DebugOffsets` on 3.13+, else the table) goes to the probe's `PY_PROCS` map
//! ([`Python::take_map_ops`]). The probe then writes, before each call's user stack, the
//! thread's Python frames as raw (code object, instruction) words; here they are named while
//! the process lives ([`memory`]: code objects, their names and line tables ([`linetable`]),
//! read once per (process, code object)) and split into the runs each evaluation-loop call ran,
//! which replace that loop's native frames (`_PyEval_EvalFrameDefault`) innermost first.

pub mod code_record;
pub mod elf;
pub mod linetable;
pub mod memory;
pub mod versions;

use std::collections::HashMap;
use std::sync::Arc;

use rtl_common::python::{PyFrameRaw, PyProc, PyStackHead};

use memory::{CodeInfo, Types};
use versions::{FrameFlags, Layout};

/// Most code objects remembered (per process and code object) in a trace.
pub const MAX_CODE_OBJECTS: usize = 1 << 18;
/// Most Python processes described to the probe at once (the `PY_PROCS` map's size).
pub const MAX_PROCESSES: usize = 4096;

/// A change to the probe's `PY_PROCS` map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapOp {
    Set(u32, PyProc),
    Remove(u32),
}

/// One Python process: its interpreter's layout and where its objects are.
#[derive(Debug)]
struct Process {
    layout: Layout,
    types: Types,
    probe: PyProc,
}

/// One Python frame of a record, named (or not: `info` None when its code object could not be
/// read, e.g. the process had exited).
#[derive(Debug, Clone)]
pub struct Frame {
    pub code: u64,
    pub info: Option<Arc<CodeInfo>>,
    pub line: Option<i64>,
}

/// Counts recorded in the trace's metadata.
#[derive(Debug, Default, Clone)]
pub struct PyStats {
    pub processes: u64,
    pub records: u64,
    pub frames: u64,
    /// Frames whose code object could not be named: no usable copy from the probe and the live
    /// read failed (the process had exited, or not a code object).
    pub unresolved: u64,
    /// Code objects copied by the probe (`PythonCode` records) and usable.
    pub code_records: u64,
    /// `PythonCode` records of frames whose executable is no code object.
    pub code_records_not_code: u64,
    /// `PythonCode` records not usable (its strings not `str`, texts cut, a read failed):
    /// their frames are named from the live process.
    pub code_records_unusable: u64,
    /// Frames named from the live process (no usable copy, or a line past a cut line table).
    pub named_live: u64,
    /// Frames named without a line: it lies past the probe's cut copy of the line table and
    /// the process could no longer be read.
    pub lines_unknown: u64,
    /// Records whose call's user stack never came (or came for another call).
    pub unmatched: u64,
    pub truncated: u64,
}

pub struct Python {
    /// Python frames are walked (off: `--no-python-frames`).
    pub enabled: bool,
    procs: HashMap<u32, Arc<Process>>,
    ops: Vec<MapOp>,
    /// Per thread: the Python frames of the call just entered (api id, frames).
    pending: HashMap<u64, (u32, Vec<PyFrameRaw>)>,
    code: HashMap<(u32, u64), Option<Arc<CodeInfo>>>,
    /// Numbers the processes' descriptions (`PyProc::generation`).
    generation: u32,
    pub stats: PyStats,
}

impl Default for Python {
    fn default() -> Self {
        Self {
            enabled: true,
            procs: HashMap::new(),
            ops: Vec::new(),
            pending: HashMap::new(),
            code: HashMap::new(),
            generation: 0,
            stats: PyStats::default(),
        }
    }
}

impl Python {
    /// Process `pid` maps `module` at `start` from file offset `file_offset`: if the module holds
    /// a CPython interpreter of a known version, the probe is told how to read its frames.
    pub fn saw_module(&mut self, pid: u32, module: &super::modules::Module, start: u64, file_offset: u64) {
        let Some(interp) = module.python.filter(|_| self.enabled) else { return };
        let Some(bias) = module.bias(start, file_offset) else { return };
        let runtime = interp.runtime.wrapping_add(bias);
        if self.procs.get(&pid).is_some_and(|p| p.probe.runtime == runtime) {
            return;
        }
        if !self.procs.contains_key(&pid) && self.procs.len() >= MAX_PROCESSES {
            return;
        }
        let mut layout = if interp.version >= (3, 13) {
            let mut b = vec![0u8; versions::DEBUG_OFFSETS_READ];
            memory::read(pid, runtime, &mut b).then(|| versions::from_debug_offsets(&b, interp.version)).flatten()
        } else {
            None
        };
        if layout.is_none() {
            layout = versions::table(interp.version);
        }
        let Some(layout) = layout else { return };
        let types = Types {
            code: interp.code_type.wrapping_add(bias),
            unicode: interp.unicode_type.wrapping_add(bias),
            bytes: interp.bytes_type.wrapping_add(bias),
        };
        self.generation = self.generation.wrapping_add(1);
        let probe = code_record::describe(
            PyProc {
                runtime,
                generation: self.generation,
                frame_blocks: u32::from(layout.flags != FrameFlags::EachFrameEntry),
                cstack_owner: if layout.flags == FrameFlags::OwnerCStack { 3 } else { rtl_common::python::PY_NO_CSTACK_OWNER },
                ..layout.probe
            },
            &layout.code,
        );
        self.forget_code(pid);
        self.procs.insert(pid, Arc::new(Process { layout, types, probe }));
        self.stats.processes += 1;
        self.ops.push(MapOp::Set(pid, probe));
    }

    /// A forked child runs the same interpreter at the same addresses.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(p) = self.procs.get(&parent).cloned() {
            if self.procs.len() < MAX_PROCESSES {
                self.ops.push(MapOp::Set(child, p.probe));
                self.procs.insert(child, p);
            }
        }
    }

    /// The process exited or called exec: its description and code objects go.
    pub fn forget(&mut self, pid: u32) {
        if self.procs.remove(&pid).is_some() {
            self.ops.push(MapOp::Remove(pid));
        }
        self.pending.retain(|k, _| (k >> 32) as u32 != pid);
        self.forget_code(pid);
    }

    fn forget_code(&mut self, pid: u32) {
        self.code.retain(|(p, _), _| *p != pid);
    }

    /// Changes for the probe's map since the last call.
    pub fn take_map_ops(&mut self) -> Vec<MapOp> {
        std::mem::take(&mut self.ops)
    }

    /// A call entered on this thread: frames of an earlier call not taken are dropped.
    pub fn entered(&mut self, pid_tgid: u64) {
        if self.pending.remove(&pid_tgid).is_some() {
            self.stats.unmatched += 1;
        }
    }

    /// A Python-frames record: kept until the call's user-stack record comes.
    pub fn on_record(&mut self, head: &PyStackHead, frames: Vec<PyFrameRaw>) {
        self.stats.records += 1;
        if head.truncated != 0 {
            self.stats.truncated += 1;
        }
        if self.pending.insert(head.hdr.pid_tgid, (head.hdr.api_id, frames)).is_some() {
            self.stats.unmatched += 1;
        }
    }

    /// The Python frames of the call whose user stack is being recorded, split into the runs
    /// of each evaluation-loop call (innermost first), named.
    pub fn take(&mut self, pid_tgid: u64, api_id: u32) -> Vec<Vec<Frame>> {
        let Some((api, raw)) = self.pending.remove(&pid_tgid) else { return Vec::new() };
        if api != api_id {
            self.stats.unmatched += 1;
            return Vec::new();
        }
        let pid = (pid_tgid >> 32) as u32;
        let Some(proc_) = self.procs.get(&pid).cloned() else {
            self.stats.unmatched += 1;
            return Vec::new();
        };
        let mut runs: Vec<Vec<Frame>> = vec![Vec::new()];
        for f in raw {
            let lo = (f.flags & 0xff) as u8;
            let entry = match proc_.layout.flags {
                FrameFlags::EachFrameEntry => true,
                FrameFlags::IsEntry => lo != 0,
                FrameFlags::OwnerCStack => {
                    // The evaluation loop's entry shim: not a Python frame; it ends a run.
                    if lo == 3 {
                        if runs.last().is_some_and(|r| !r.is_empty()) {
                            runs.push(Vec::new());
                        }
                        continue;
                    }
                    false
                }
            };
            if let Some(frame) = self.name(pid, &proc_, &f) {
                self.stats.frames += 1;
                if let Some(run) = runs.last_mut() {
                    run.push(frame);
                }
            }
            if entry && runs.last().is_some_and(|r| !r.is_empty()) {
                runs.push(Vec::new());
            }
        }
        runs.retain(|r| !r.is_empty());
        runs
    }

    /// A `PythonCode` record: the probe's copy of a code object, which names its frames from
    /// now on (replacing what was known at that address: the probe sends a code object again
    /// when its fingerprint changed).
    pub fn on_code(&mut self, rec: &code_record::CodeRecord) {
        let pid = (rec.head.hdr.pid_tgid >> 32) as u32;
        let Some(p) = self.procs.get(&pid) else { return };
        if rec.head.code_type != p.types.code {
            // Not a code object: 3.13's evaluation-loop entry frame has `None` as its executable
            // (such frames are no Python frames and are never named).
            self.stats.code_records_not_code += 1;
            self.code.remove(&(pid, rec.head.code));
            return;
        }
        match code_record::info(rec, &p.layout.code, &p.types) {
            Some(info) => {
                self.stats.code_records += 1;
                if self.code.len() < MAX_CODE_OBJECTS || self.code.contains_key(&(pid, rec.head.code)) {
                    self.code.insert((pid, rec.head.code), Some(Arc::new(info)));
                }
            }
            None => {
                self.stats.code_records_unusable += 1;
                // What was known at this address is another code object's: read it anew.
                self.code.remove(&(pid, rec.head.code));
            }
        }
    }

    /// Names one frame; None for a frame that has not started (its instruction before the
    /// code's first: 3.11's incomplete frames). The probe's copy first; the live process when
    /// there is none or the line lies past the copy's cut line table.
    fn name(&mut self, pid: u32, p: &Process, f: &PyFrameRaw) -> Option<Frame> {
        let known = self.code.get(&(pid, f.code)).cloned();
        let mut info = match known {
            Some(i) => i,
            None => self.read_live(pid, p, f.code),
        };
        let mut line = None;
        if let Some(i) = &info {
            line = line_of(p, i, f)?;
            if line.is_none() && !i.linetable_complete {
                match memory::code(pid, f.code, &p.layout.code, &p.types) {
                    Some(live) => {
                        self.stats.named_live += 1;
                        let live = Arc::new(live);
                        line = line_of(p, &live, f)?;
                        self.code.insert((pid, f.code), Some(live.clone()));
                        info = Some(live);
                    }
                    // The line is past what was copied and the process is gone: no line
                    // rather than a wrong one.
                    None => self.stats.lines_unknown += 1,
                }
            }
        }
        let Some(info) = info else {
            self.stats.unresolved += 1;
            return Some(Frame { code: f.code, info: None, line: None });
        };
        Some(Frame { code: f.code, info: Some(info), line })
    }

    /// Reads a code object from the live process (None when unreadable), remembering the answer.
    fn read_live(&mut self, pid: u32, p: &Process, code: u64) -> Option<Arc<CodeInfo>> {
        let i = memory::code(pid, code, &p.layout.code, &p.types).map(Arc::new);
        if i.is_some() {
            self.stats.named_live += 1;
        }
        if self.code.len() < MAX_CODE_OBJECTS || self.code.contains_key(&(pid, code)) {
            self.code.insert((pid, code), i.clone());
        }
        i
    }

    pub fn meta(&self) -> Vec<(&'static str, String)> {
        let s = &self.stats;
        vec![
            ("python_processes", s.processes.to_string()),
            ("python_stack_records", s.records.to_string()),
            ("python_frames", s.frames.to_string()),
            ("python_frames_unresolved", s.unresolved.to_string()),
            ("python_code_records", s.code_records.to_string()),
            ("python_code_records_unusable", s.code_records_unusable.to_string()),
            ("python_code_records_not_code", s.code_records_not_code.to_string()),
            ("python_code_objects_read_live", s.named_live.to_string()),
            ("python_frame_lines_unknown", s.lines_unknown.to_string()),
            ("python_stacks_unmatched", s.unmatched.to_string()),
            ("python_stacks_truncated", s.truncated.to_string()),
        ]
    }
}

/// The line of a frame in its code object: Some(None) when the table has none for it, None
/// for a frame that has not started.
fn line_of(p: &Process, info: &CodeInfo, f: &PyFrameRaw) -> Option<Option<i64>> {
    Some(if p.layout.code.code_adaptive.is_some() {
        let off = f.instr.checked_sub(info.first_instr)?;
        linetable::line_311(&info.linetable, info.first_line, off)
    } else {
        // 3.10: `f_lasti`, an int index of code units (-1 before the first).
        let lasti = f.instr as u32 as i32;
        if lasti < 0 {
            return None;
        }
        linetable::line_310(&info.linetable, info.first_line, lasti as u64 * 2)
    })
}

/// Is this native function the interpreter's evaluation loop (each call runs one run of
/// Python frames)?
pub fn is_eval_loop(symbol: &str) -> bool {
    symbol == "_PyEval_EvalFrameDefault" || symbol.starts_with("_PyEval_EvalFrameDefault.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::modules::{exec_mappings, Module};
    use std::io::{BufRead, Write};

    /// A process that is gone: frames are named from the probe's copy; a line past its cut
    /// line table is unknown (counted), never another line.
    #[test]
    fn copies_name_frames_of_a_gone_process_and_a_cut_table_gives_no_wrong_line() {
        use rtl_common::python::{PyCodeHead, PyStrRaw, PY_LINETABLE_MAX};
        // No process has this pid (above the kernel's pid_max limit of 2^22).
        let pid = (1u32 << 22) + 5;
        let layout = versions::table((3, 11)).unwrap();
        let types = Types { code: 0x1000, unicode: 0x2000, bytes: 0x3000 };
        let mut py = Python::default();
        py.procs.insert(pid, Arc::new(Process { layout, types, probe: layout.probe }));
        // Line table: 2048 entries of one code unit each, the first on line 10, then +1 each
        // (code 11: one line down); the true table is longer.
        let mut lt = vec![0x80 | (11 << 3); PY_LINETABLE_MAX];
        lt[0] = 0x80;
        let ascii = (1 << 2) | (1 << 5) | (1 << 6);
        let mut h = PyCodeHead { code: 0x7000, code_type: 0x1000, first_line: 10, ..Default::default() };
        h.hdr.pid_tgid = u64::from(pid) << 32;
        h.name = PyStrRaw { addr: 1, ob_type: 0x2000, len: 1, state: ascii, copied: 1 };
        h.file = PyStrRaw { addr: 2, ob_type: 0x2000, len: 4, state: ascii, copied: 4 };
        (h.linetable, h.linetable_type, h.linetable_len, h.linetable_copied) = (3, 0x3000, 9000, PY_LINETABLE_MAX as u32);
        py.on_code(&code_record::CodeRecord { head: h, name: b"f".to_vec(), file: b"m.py".to_vec(), linetable: lt });
        assert_eq!(py.stats.code_records, 1);
        let first = 0x7000 + layout.code.code_adaptive.unwrap();
        let frame = |unit: u64| PyFrameRaw { code: 0x7000, instr: first + 2 * unit, flags: 0 };
        let f = py.name(pid, &layout_proc(&py, pid), &frame(5)).unwrap();
        assert_eq!((f.info.as_ref().unwrap().function.as_str(), f.line), ("f", Some(15)));
        let f = py.name(pid, &layout_proc(&py, pid), &frame(PY_LINETABLE_MAX as u64 + 3)).unwrap();
        assert_eq!((f.info.as_ref().unwrap().file.as_str(), f.line), ("m.py", None), "past the copy: no line");
        assert_eq!((py.stats.lines_unknown, py.stats.unresolved, py.stats.named_live), (1, 0, 0));
        // A code object never copied, in a gone process: unnamed, counted.
        let f = py.name(pid, &layout_proc(&py, pid), &PyFrameRaw { code: 0x9000, instr: 0, flags: 0 }).unwrap();
        assert!(f.info.is_none());
        assert_eq!(py.stats.unresolved, 1);
    }

    fn layout_proc(py: &Python, pid: u32) -> Arc<Process> {
        py.procs.get(&pid).cloned().unwrap()
    }

    /// This machine's CPython (Debian 12: 3.11): recognized in its executable, and the table's
    /// offsets lead from `_PyRuntime` to the main thread's state (its `thread_id` is what the
    /// interpreter itself reports) and to a code object named by what the interpreter says.
    #[test]
    fn the_running_interpreter_is_recognized_and_its_layout_holds() {
        let py = std::path::Path::new("/usr/bin/python3");
        assert!(py.exists(), "this test needs CPython at /usr/bin/python3");
        let script = "import sys, threading\n\
                      def probe_me():\n    return sys._getframe().f_code\n\
                      c = probe_me()\n\
                      print(threading.get_ident(), id(c), c.co_firstlineno, flush=True)\n\
                      sys.stdin.readline()\n";
        let mut child = std::process::Command::new(py)
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let v: Vec<u64> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        let pid = child.id();
        let mut py = Python::default();
        for f in exec_mappings(pid).unwrap() {
            if let Ok(m) = Module::read(&f.map_file, &f.display) {
                py.saw_module(pid, &m, f.mapping.range.start, f.mapping.file_offset);
            }
        }
        let ops = py.take_map_ops();
        let p = py.procs.get(&pid).cloned();
        let checked = std::panic::catch_unwind(|| {
            assert_eq!(ops.len(), 1, "one interpreter found: {ops:?}");
            let p = p.unwrap();
            let pr = p.probe;
            let rd = |a: u64| {
                let mut b = [0u8; 8];
                assert!(memory::read(pid, a, &mut b), "read at {a:#x}");
                u64::from_le_bytes(b)
            };
            let interp = rd(pr.runtime + u64::from(pr.interp_head));
            let ts = rd(interp + u64::from(pr.threads_head));
            assert_eq!(rd(ts + u64::from(pr.ts_thread_id)), v[0], "the main thread's thread_id");
            let code = memory::code(pid, v[1], &p.layout.code, &p.types).expect("the code object read");
            assert_eq!((code.function.as_str(), code.first_line), ("probe_me", v[2] as i64));
            assert_eq!(code.file, "<string>");
            assert!(memory::code(pid, v[1] + 8, &p.layout.code, &p.types).is_none(), "not a code object");
        });
        let _ = child.stdin.take().unwrap().write_all(b"\n");
        let _ = child.wait();
        if let Err(e) = checked {
            std::panic::resume_unwind(e);
        }
    }
}
