//! Exported function symbols of a shared library, with the file offsets uprobes attach at.
//!
//! Read once per library with the `object` crate. Versioned names (`hipMalloc@@hip_4.2` in
//! `objdump -T`) are stored in `.dynsym` under their plain name with the version kept in
//! `.gnu.version`; we key by the plain name and keep the default version when a name has several.
//!
//! C++ exports: ROCm 5.2 exports a few public HIP APIs only under C++ mangled names
//! (`_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_t...`: hip_ext.h declares them without
//! `extern "C"`). A function in the global namespace (not a method, not namespaced, not a
//! template; [`demangle::global_function_name`]) is also found under its plain name, the name
//! the API table and `--apis` use: [`Symbols::offset`]`("hipExtModuleLaunchKernel")`. One
//! export per name is probed: the C symbol when the library has one (a C++ overload beside it
//! is listed by [`Symbols::overloads`], not probed: its arguments may differ from the C
//! signature the table decodes, and if it forwards to the C function each call would be
//! counted twice), else the C++ export when there is exactly one (several overloads and no C
//! symbol: none, the call is ambiguous).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol, ReadRef, SymbolKind};

use super::untrusted::{BoundedFile, ELF_READ_BUDGET};

use super::demangle;

/// Function symbols of one library: plain name -> file offset.
#[derive(Debug, Default)]
pub struct Symbols {
    offsets: HashMap<String, u64>,
    /// Global-namespace C++ functions by their plain name, sorted by mangled name.
    cxx: HashMap<String, Vec<CxxExport>>,
}

/// A C++ export of a global-namespace function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CxxExport {
    /// The mangled symbol (without its version).
    pub mangled: String,
    /// Its demangled signature (bounded: [`demangle::MAX_DEMANGLED`]).
    pub signature: String,
    pub offset: u64,
}

impl Symbols {
    /// Reads the dynamic symbol table of the ELF file at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        // Only a regular file, opened without blocking (a FIFO would block the open forever,
        // /dev/zero would never end): see `untrusted.rs`.
        let file = super::untrusted::open_for_reading(path)?;
        Self::read_file(file).with_context(|| format!("{} is not a usable ELF shared library", path.display()))
    }

    /// Reads the dynamic symbol table of an open regular file, taking only the byte ranges the
    /// parser asks for (headers and symbol tables), at most [`ELF_READ_BUDGET`] bytes: a huge
    /// or sparse file costs what its tables claim, never its size.
    pub fn read_file(file: std::fs::File) -> Result<Self> {
        let data = BoundedFile::new(file, ELF_READ_BUDGET)?;
        Self::parse_from(&data).map_err(|e| {
            if data.over_budget() {
                e.context(format!("its ELF tables are larger than rtl-ebpf reads ({} MiB)", ELF_READ_BUDGET >> 20))
            } else {
                e
            }
        })
    }

    /// Parses ELF bytes. Errors (never panics) on anything malformed.
    pub fn parse(data: &[u8]) -> Result<Self> {
        Self::parse_from(data)
    }

    /// Parses an ELF file held in memory or read on demand ([`BoundedFile`]).
    fn parse_from<'d, R: ReadRef<'d>>(data: R) -> Result<Self> {
        if data.read_bytes_at(0, 4).ok() != Some(&b"\x7fELF"[..]) {
            bail!("not an ELF file (bad magic)");
        }
        let data_len = data.len().map_err(|()| anyhow::anyhow!("cannot read the file's length"))?;
        let file = object::File::parse(data).context("malformed ELF")?;
        if file.architecture() != object::Architecture::X86_64 {
            bail!("not an x86-64 ELF ({:?})", file.architecture());
        }
        // (vaddr start, vaddr end, file offset) of loadable segments.
        let segments: Vec<(u64, u64, u64)> = file
            .segments()
            .map(|s| {
                let (off, _) = s.file_range();
                (s.address(), s.address().saturating_add(s.size()), off)
            })
            .collect();
        let mut offsets = HashMap::new();
        let mut cxx: HashMap<String, Vec<CxxExport>> = HashMap::new();
        let mut any_dynamic = false;
        let mut defined = 0usize;
        for sym in file.dynamic_symbols() {
            any_dynamic = true;
            if sym.kind() != SymbolKind::Text || !sym.is_definition() || sym.address() == 0 {
                continue;
            }
            defined += 1;
            let Ok(name) = sym.name() else { continue };
            let name = name.split('@').next().unwrap_or(name);
            let addr = sym.address();
            let Some(&(start, _, off)) = segments.iter().find(|(s, e, _)| *s <= addr && addr < *e) else {
                continue;
            };
            let Some(file_off) = (addr - start).checked_add(off) else { continue };
            if file_off >= data_len {
                continue;
            }
            let file_off = entry_probe_offset(data.read_bytes_at(file_off, 6).unwrap_or(&[]), file_off);
            offsets.entry(name.to_string()).or_insert(file_off);
            if let Some(base) = demangle::global_function_name(name) {
                let v: &mut Vec<CxxExport> = cxx.entry(base.to_string()).or_default();
                if !v.iter().any(|e| e.mangled == name) {
                    let signature = demangle::demangle_or_keep(name);
                    v.push(CxxExport { mangled: name.to_string(), signature, offset: file_off });
                }
            }
        }
        for v in cxx.values_mut() {
            v.sort_by(|a, b| a.mangled.cmp(&b.mangled));
        }
        if !any_dynamic {
            bail!("no dynamic symbol table (.dynsym): not a shared library");
        }
        if defined > 0 && offsets.is_empty() {
            bail!("none of its {defined} functions lies in a loadable segment (corrupt program headers)");
        }
        Ok(Self { offsets, cxx })
    }

    /// File offset of a function, by plain name: its C symbol, else its only global-namespace
    /// C++ export (see the module doc).
    pub fn offset(&self, name: &str) -> Option<u64> {
        self.export(name).map(|e| e.1)
    }

    /// The symbol a plain name resolves to and its offset: (`None`, offset) for a C symbol,
    /// (`Some(export)`, offset) for a C++ one.
    pub fn export(&self, name: &str) -> Option<(Option<&CxxExport>, u64)> {
        if let Some(&off) = self.offsets.get(name) {
            return Some((None, off));
        }
        match self.cxx.get(name).map(Vec::as_slice) {
            Some([only]) => Some((Some(only), only.offset)),
            _ => None,
        }
    }

    /// Global-namespace C++ exports named `name` that [`Symbols::offset`] does not resolve to
    /// (overloads beside a C symbol, or several overloads): listed, not probed.
    pub fn overloads(&self, name: &str) -> &[CxxExport] {
        match (self.offsets.contains_key(name), self.cxx.get(name).map(Vec::as_slice)) {
            (_, None) | (false, Some([_])) => &[],
            (_, Some(v)) => v,
        }
    }

    /// Plain names of all exported functions starting with `prefix`, sorted: C symbols, and
    /// global-namespace C++ functions that [`Symbols::offset`] resolves.
    pub fn names_with_prefix(&self, prefix: &str) -> Vec<&str> {
        let cxx = self.cxx.iter().filter(|(n, v)| v.len() == 1 && !self.offsets.contains_key(*n)).map(|(n, _)| n);
        let mut v: Vec<&str> = self.offsets.keys().chain(cxx).map(String::as_str).filter(|n| n.starts_with(prefix)).collect();
        v.sort_unstable();
        v
    }

    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// `endbr64`: the landing marker that code built with Intel CET (`-fcf-protection`, the default
/// of Ubuntu's, Fedora's and RHEL's compilers) puts first in every function.
const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];

/// Where a function's uprobe goes, given its first bytes: past a leading `endbr64` when a
/// `push` follows it, else the entry itself. The kernel single-steps an `endbr64` out of line
/// (measured here: ~12 us per call against ~2 us for a function that starts with `push %rbp`,
/// which it emulates); `endbr64` changes no register and no memory, so the probe 4 bytes on sees
/// the same arguments, stack pointer and return address. Only before a `push`: that is a
/// prologue, which no loop or tail call jumps back to (a loop head right after `endbr64` would
/// fire the entry probe once per iteration).
fn entry_probe_offset(first: &[u8], file_off: u64) -> u64 {
    match first {
        [a, b, c, d, 0x50..=0x57, ..] | [a, b, c, d, 0x41, 0x50..=0x57] if [*a, *b, *c, *d] == ENDBR64 => file_off + 4,
        _ => file_off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_garbage_without_panicking() {
        assert!(Symbols::parse(b"").is_err());
        assert!(Symbols::parse(b"hello world").is_err());
        assert!(Symbols::parse(b"\x7fELF\x02\x01\x01").is_err());
        let mut v = b"\x7fELF".to_vec();
        v.resize(4096, 0xff);
        assert!(Symbols::parse(&v).is_err());
    }

    #[test]
    fn cxx_only_apis_resolve_by_plain_name() {
        // Debian's ROCm 5.2 exports hipExtModuleLaunchKernel only as a C++ symbol.
        let s = Symbols::read(Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"))
            .expect("Debian's libamdhip64 (apt-get install libamdhip64-5)");
        let mangled = "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j";
        let (e, off) = s.export("hipExtModuleLaunchKernel").expect("resolved through its C++ symbol");
        let e = e.expect("a C++ export");
        assert_eq!(e.mangled, mangled);
        assert!(e.signature.starts_with("hipExtModuleLaunchKernel(ihipModuleSymbol_t*, unsigned int,"), "{}", e.signature);
        assert_eq!(Some(off), s.offsets.get(mangled).copied());
        for n in ["hipHccModuleLaunchKernel", "hipCreateSurfaceObject", "hipDestroySurfaceObject"] {
            assert!(matches!(s.export(n), Some((Some(_), _))), "{n}");
        }
        // A C symbol resolves as itself; namespaced C++ functions do not resolve.
        assert!(matches!(s.export("hipMalloc"), Some((None, _))));
        assert_eq!(s.offset("hipLaunchKernelGGLImpl"), None);
        let hip = s.names_with_prefix("hip");
        assert!(hip.contains(&"hipExtModuleLaunchKernel") && hip.contains(&"hipMalloc"));
        assert!(!hip.iter().any(|n| n.starts_with("_Z")));
    }

    #[test]
    fn reads_own_libc() {
        // Every Linux test machine has a libc with dynamic symbols.
        let libc = ["/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("libc.so.6 not found");
        let s = Symbols::read(Path::new(libc)).unwrap();
        assert!(s.offset("malloc").is_some());
        assert!(s.offset("memcpy").is_some());
    }

    #[test]
    fn entry_probes_go_past_endbr64_only_before_a_push() {
        let e = |b: &[u8]| entry_probe_offset(b, 0x1000);
        assert_eq!(e(&[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48]), 0x1004, "endbr64; push %rbp");
        assert_eq!(e(&[0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57]), 0x1004, "endbr64; push %r15");
        assert_eq!(e(&[0xf3, 0x0f, 0x1e, 0xfa, 0xc3, 0x90]), 0x1000, "endbr64; ret (_dl_debug_state)");
        assert_eq!(e(&[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x89]), 0x1000, "endbr64; mov: maybe a loop head");
        assert_eq!(e(&[0x55, 0x48, 0x89, 0xe5, 0x41, 0x57]), 0x1000, "push %rbp: no marker");
        assert_eq!(e(&[0xf3, 0x0f, 0x1e]), 0x1000, "cut short");
        assert_eq!(e(&[]), 0x1000);
    }

    /// A library built with CET (`-fcf-protection=full`): its functions are probed 4 bytes in;
    /// the same source without CET at the symbol itself.
    #[test]
    fn a_cet_library_is_probed_after_its_endbr64() {
        let d = tempfile::tempdir().unwrap();
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/bench/probe_target.c");
        for (flag, shift) in [("-fcf-protection=full", 4u64), ("-fcf-protection=none", 0)] {
            let so = d.path().join(format!("lib{shift}.so"));
            let st = std::process::Command::new("cc")
                .args(["-O2", "-fno-omit-frame-pointer", flag, "-shared", "-fPIC", "-o"])
                .arg(&so)
                .arg(src)
                .status()
                .expect("cc");
            assert!(st.success(), "cc {flag}");
            let bytes = std::fs::read(&so).unwrap();
            let f = object::File::parse(&*bytes).unwrap();
            let sym = f.dynamic_symbols().find(|s| s.name() == Ok("hipBenchTarget")).unwrap();
            let seg = f.segments().find(|s| s.address() <= sym.address() && sym.address() < s.address() + s.size()).unwrap();
            let file_off = sym.address() - seg.address() + seg.file_range().0;
            assert_eq!(bytes[file_off as usize..][..4] == ENDBR64, shift == 4, "{flag}: the first instruction");
            let s = Symbols::parse(&bytes).unwrap();
            assert_eq!(s.offset("hipBenchTarget"), Some(file_off + shift), "{flag}");
        }
    }
}
