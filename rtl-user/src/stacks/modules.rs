//! The code a traced process maps: what unwinding and naming its stack frames need.
//!
//! A process's executable file mappings are read from `/proc/PID/maps` (on the library
//! scanner's worker, under its time limit: `probe/scan.rs`) while it lives, at its loader stops
//! (`run`) and rescans; each file (by device and inode) is read once, through
//! `/proc/PID/map_files` (the mapped inode itself, never a path resolved again), with the
//! untrusted-file reader (`probe/untrusted.rs`: regular files only, no `mmap`, within a byte
//! budget). From it we keep its unwind tables (`.eh_frame`, `.eh_frame_hdr`) and its function
//! symbols (`.symtab`, else `.dynsym`): a stack recorded while the process lived is unwound and
//! named after it exited.

use std::ffi::OsStr;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadRef, SymbolKind};

use crate::probe::untrusted::{self, BoundedFile};

/// Most bytes read from one mapped file (headers, unwind tables, symbol tables).
pub const MODULE_READ_BUDGET: u64 = 96 << 20;
/// Most executable mappings kept per process (a process that maps more has the rest unnamed).
pub const MAX_MAPPINGS: usize = 1024;
/// Most symbols kept per file.
pub const MAX_SYMBOLS: usize = 2_000_000;

/// One executable file mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    pub range: Range<u64>,
    /// File offset of `range.start`.
    pub file_offset: u64,
    /// (device, inode) of the file.
    pub key: (u64, u64),
}

/// An executable mapping found in `/proc/PID/maps`, with the path to its inode.
#[derive(Debug)]
pub struct FoundMapping {
    pub mapping: Mapping,
    /// `/proc/PID/map_files/START-END`.
    pub map_file: PathBuf,
    /// The path as the process sees it (for the trace).
    pub display: String,
}

/// The executable file mappings of process `pid` (at most [`MAX_MAPPINGS`]).
pub fn exec_mappings(pid: u32) -> Result<Vec<FoundMapping>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = std::fs::read(&maps_path).with_context(|| format!("cannot read {maps_path}"))?;
    let mut out = Vec::new();
    for line in maps.split(|&b| b == b'\n') {
        if out.len() >= MAX_MAPPINGS {
            break;
        }
        let mut fields = line.splitn(6, |&b| b == b' ');
        let (Some(range), Some(perms), Some(off), Some(_dev), Some(inode)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let path = fields.next().unwrap_or(b"").trim_ascii_start();
        if perms.get(2) != Some(&b'x') || inode == b"0" || !path.starts_with(b"/") {
            continue;
        }
        let Some((start, end)) = std::str::from_utf8(range).ok().and_then(|r| r.split_once('-')) else { continue };
        let (Ok(start), Ok(end)) = (u64::from_str_radix(start, 16), u64::from_str_radix(end, 16)) else { continue };
        let Ok(file_offset) = std::str::from_utf8(off).map_err(|_| ()).and_then(|o| u64::from_str_radix(o, 16).map_err(|_| ())) else {
            continue;
        };
        // map_files names its entries without the zero padding `maps` gives addresses below
        // 2^32 (a non-PIE executable at 0x400000 is `00400000-...` in `maps`, `400000-...` there).
        let map_file = PathBuf::from(format!("/proc/{pid}/map_files/{start:x}-{end:x}"));
        // The inode behind the mapping (not the path, which may have been replaced since).
        let Ok(md) = std::fs::metadata(&map_file) else { continue };
        if !md.is_file() {
            continue;
        }
        let display = String::from_utf8_lossy(OsStr::from_bytes(path).as_bytes()).into_owned();
        out.push(FoundMapping { mapping: Mapping { range: start..end, file_offset, key: (md.dev(), md.ino()) }, map_file, display });
    }
    Ok(out)
}

/// A function symbol: where it starts (its address as the file states it) and how long it is.
#[derive(Debug, Clone, Copy)]
struct Sym {
    start: u64,
    size: u64,
    name: u32,
}

/// What one mapped file gives the unwinder and the symbolizer.
#[derive(Debug)]
pub struct Module {
    pub key: (u64, u64),
    pub path: String,
    /// A GPU runtime or tracing library (HIP, HSA, CUDA, roctx, our agent): never a call site.
    pub runtime: bool,
    /// (file offset, vaddr, size in file) of each loadable segment.
    loads: Vec<(u64, u64, u64)>,
    pub text: Option<Range<u64>>,
    pub got: Option<Range<u64>>,
    pub eh_frame: Option<(Range<u64>, Arc<[u8]>)>,
    pub eh_frame_hdr: Option<(Range<u64>, Arc<[u8]>)>,
    syms: Vec<Sym>,
    names: Vec<Box<str>>,
    /// The CPython interpreter this file holds, if any (Python call sites).
    pub python: Option<super::python::elf::Interpreter>,
}

impl Module {
    /// Reads a mapped file (an `O_PATH` open, then a checked reopen: see `probe/untrusted.rs`).
    pub fn read(map_file: &std::path::Path, display: &str) -> Result<Self> {
        let (path_fd, md) = untrusted::open_regular_path(map_file)?;
        let f = untrusted::reopen_for_reading(&path_fd).with_context(|| format!("cannot read {display}"))?;
        let data = BoundedFile::new(f, MODULE_READ_BUDGET)?;
        Self::parse(&data, (md.dev(), md.ino()), display).map_err(|e| {
            if data.over_budget() {
                e.context(format!("{display}: its tables are larger than rtl-ebpf reads ({} MiB)", MODULE_READ_BUDGET >> 20))
            } else {
                e.context(display.to_string())
            }
        })
    }

    /// Parses an ELF file (read on demand or in memory). Errors, never panics, on bad input.
    pub fn parse<'d, R: ReadRef<'d>>(data: R, key: (u64, u64), display: &str) -> Result<Self> {
        if data.read_bytes_at(0, 4).ok() != Some(&b"\x7fELF"[..]) {
            bail!("not an ELF file");
        }
        let file = object::File::parse(data).context("malformed ELF")?;
        if file.architecture() != object::Architecture::X86_64 {
            bail!("not an x86-64 ELF");
        }
        let loads = file
            .segments()
            .map(|s| {
                let (off, len) = s.file_range();
                (off, s.address(), len)
            })
            .collect();
        let bytes = |name: &str| -> Option<(Range<u64>, Arc<[u8]>)> {
            let s = file.section_by_name(name)?;
            let d = s.data().ok()?;
            Some((s.address()..s.address().saturating_add(s.size()), Arc::from(d)))
        };
        let text = file.section_by_name(".text").map(|s| s.address()..s.address().saturating_add(s.size()));
        let got = file.section_by_name(".got").map(|s| s.address()..s.address().saturating_add(s.size()));
        let (eh_frame, eh_frame_hdr) = (bytes(".eh_frame"), bytes(".eh_frame_hdr"));
        let python = super::python::elf::find(&file, display);
        let mut syms = Vec::new();
        let mut names: Vec<Box<str>> = Vec::new();
        let table = |from_dynamic: bool, syms: &mut Vec<Sym>, names: &mut Vec<Box<str>>| {
            let it: Box<dyn Iterator<Item = object::Symbol<'_, '_, R>>> =
                if from_dynamic { Box::new(file.dynamic_symbols()) } else { Box::new(file.symbols()) };
            for sym in it {
                if syms.len() >= MAX_SYMBOLS {
                    break;
                }
                if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.address() == 0 {
                    continue;
                }
                let Ok(name) = sym.name() else { continue };
                let name = name.split('@').next().unwrap_or(name);
                syms.push(Sym { start: sym.address(), size: sym.size(), name: names.len() as u32 });
                names.push(name.into());
            }
        };
        table(false, &mut syms, &mut names);
        if names.is_empty() {
            table(true, &mut syms, &mut names);
        }
        // By address; of several names for one address, the first (symtab order) is kept.
        syms.sort_by_key(|s| s.start);
        syms.dedup_by_key(|s| s.start);
        let base = std::path::Path::new(display).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let runtime = is_runtime_library(&base);
        Ok(Self { key, path: display.to_string(), runtime, loads, text, got, eh_frame, eh_frame_hdr, syms, names, python })
    }

    /// The load bias of a mapping of this file at `start` from file offset `file_offset`: what
    /// is added to the file's stated addresses to get the process's.
    pub fn bias(&self, start: u64, file_offset: u64) -> Option<u64> {
        // The loader maps a segment from its page-aligned offset: a mapping at offset X maps
        // the segment whose offset rounds down to X (the one before it may reach into that page).
        let page = |o: u64| o & !0xfff;
        let &(off, vaddr, _) = self
            .loads
            .iter()
            .find(|(off, _, _)| page(*off) == file_offset)
            .or_else(|| self.loads.iter().find(|(off, _, len)| *off <= file_offset && file_offset < off.saturating_add(*len)))?;
        // `start` maps the file's `file_offset`, which lies `off - file_offset` before `vaddr`.
        Some(start.wrapping_add(off.wrapping_sub(file_offset)).wrapping_sub(vaddr))
    }

    /// The function containing `svma` (an address as the file states it): its name (raw, as
    /// in the symbol table) and the offset into it.
    pub fn symbol(&self, svma: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.start <= svma).checked_sub(1)?;
        let s = self.syms[i];
        let off = svma - s.start;
        // A size of 0 (hand-written assembly) is taken to run to the next symbol.
        if s.size != 0 && off >= s.size {
            return None;
        }
        Some((&self.names[s.name as usize], off))
    }
}

/// Libraries whose frames are never the call site: the GPU runtimes the probes sit on, the
/// tracer's own agent.
pub fn is_runtime_library(file_name: &str) -> bool {
    const PREFIXES: [&str; 9] = [
        "libamdhip64.so",
        "libhsa-runtime64.so",
        "libroctx64.so",
        "libroctracer64.so",
        "libcuda.so",
        "libcudart.so",
        "libnvToolsExt.so",
        "librtl_agent.so",
        "libhiprtc.so",
    ];
    PREFIXES.iter().any(|p| file_name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[unsafe(no_mangle)]
    #[inline(never)]
    extern "C" fn rtl_stacks_test_marker() -> u64 {
        std::hint::black_box(42)
    }

    #[test]
    fn own_executable_mappings_read_and_name_a_function() {
        let maps = exec_mappings(std::process::id()).unwrap();
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let me = maps.iter().find(|m| std::path::Path::new(&m.display) == exe).expect("our own executable is mapped");
        let module = Module::read(&me.map_file, &me.display).unwrap();
        assert!(module.eh_frame.is_some() && module.eh_frame_hdr.is_some());
        let bias = module.bias(me.mapping.range.start, me.mapping.file_offset).unwrap();
        let f = rtl_stacks_test_marker as *const () as u64;
        let (name, off) = module.symbol(f.wrapping_sub(bias)).expect("a symbol");
        assert_eq!((name, off), ("rtl_stacks_test_marker", 0));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Module::parse(&b"\x7fELFxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"[..], (0, 0), "x").is_err());
        assert!(Module::parse(&b"nope"[..], (0, 0), "x").is_err());
    }
}
