//! Finding the library files to probe.
//!
//! A uprobe lives on an inode: a probe on `/opt/rocm/lib/libamdhip64.so` does not fire for a
//! process that maps its own copy from a venv or a container image. So libraries are found by
//! what processes really map (`/proc/PID/maps`, each mapping opened through
//! `/proc/PID/map_files/RANGE`: the very inode mapped, whatever its path has become since,
//! whatever mount namespace or name it has) and in the usual install paths, and are
//! deduplicated by (device, inode). Every file is opened `O_PATH` and must be a regular file
//! (`untrusted.rs`); its symbols are read by [`inspect`], on the scanner's worker thread.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};

use super::dynamic_loader::LoaderHook;
use super::symbols::Symbols;
use super::untrusted;

/// What a library file is to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LibKind {
    /// libamdhip64.so*: HIP runtime.
    Hip,
    /// libroctx64.so*: roctx markers.
    Roctx,
    /// librtl_agent.so: our in-process agent (its publish function is probed).
    Agent,
    /// libcuda.so*: the CUDA driver.
    Cuda,
    /// libcudart.so*: the CUDA runtime (PyTorch maps its wheel's own copy).
    Cudart,
    /// libnvToolsExt.so* / libnvtx3interop.so*: NVTX markers.
    Nvtx,
    /// ld-linux*.so* / ld-musl*.so*: the dynamic loader, whose `_dl_debug_state` hook tells
    /// `run` that a process mapped new libraries (probed only by `run`).
    Loader,
}

/// Which GPU runtime a session traces (`--runtime`): the libraries it looks for and probes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Runtime {
    /// HIP (libamdhip64) and roctx.
    #[default]
    Hip,
    /// CUDA: the driver (libcuda), the runtime (libcudart) and NVTX.
    Cuda,
}

impl Runtime {
    /// Does this runtime probe libraries of that kind? (The agent serves both.)
    pub fn probes(self, kind: LibKind) -> bool {
        match kind {
            LibKind::Agent | LibKind::Loader => true,
            LibKind::Hip | LibKind::Roctx => self == Self::Hip,
            LibKind::Cuda | LibKind::Cudart | LibKind::Nvtx => self == Self::Cuda,
        }
    }

    /// The library every process of this runtime maps (`attach --pid` requires it).
    pub fn primary(self) -> LibKind {
        match self {
            Self::Hip => LibKind::Hip,
            Self::Cuda => LibKind::Cuda,
        }
    }

    /// Its name in messages: the primary library's.
    pub fn library_name(self) -> &'static str {
        match self {
            Self::Hip => "libamdhip64",
            Self::Cuda => "libcuda",
        }
    }
}

/// Base-name prefixes of the libraries probed, by kind (the agent's name must also contain
/// `.so`; the dynamic loaders' are [`super::dynamic_loader::is_loader_name`]).
const NAME_PREFIXES: &[(&str, LibKind)] = &[
    ("libamdhip64.so", LibKind::Hip),
    ("libroctx64.so", LibKind::Roctx),
    ("librtl_agent", LibKind::Agent),
    ("libcuda.so", LibKind::Cuda),
    ("libcudart.so", LibKind::Cudart),
    ("libnvToolsExt.so", LibKind::Nvtx),
    ("libnvtx3interop.so", LibKind::Nvtx),
];

impl LibKind {
    /// Classifies a file by its base name.
    pub fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        let name = name.strip_suffix(" (deleted)").unwrap_or(name);
        if let Some(&(_, kind)) = NAME_PREFIXES.iter().find(|(p, _)| name.starts_with(p)) {
            return (kind != Self::Agent || name.contains(".so")).then_some(kind);
        }
        super::dynamic_loader::is_loader_name(name).then_some(Self::Loader)
    }
}

impl Runtime {
    /// The base-name prefixes of the libraries a session of this runtime probes when a process
    /// loads them (dynamic loaders excluded): what `run`'s loader probe compares a newly loaded
    /// library's name with before it stops the process.
    pub fn probed_name_prefixes(self) -> Vec<&'static str> {
        NAME_PREFIXES.iter().filter(|(_, k)| self.probes(*k)).map(|(p, _)| *p).collect()
    }
}

/// A library file found on the system or in a process.
///
/// It holds the file open (`O_PATH`): probes attach through `/proc/self/fd/N`, so the mapping
/// process may exit, or the file be deleted or replaced, while we attach, and we still probe
/// that inode.
#[derive(Clone, Debug)]
pub struct LibraryFile {
    /// The path it was opened by (may go through /proc/PID/map_files).
    pub path: PathBuf,
    /// The open file (`O_PATH`); attach through [`LibraryFile::attach_path`].
    pub file: Arc<fs::File>,
    /// The path as the mapping process sees it (for messages and the trace).
    pub display: String,
    pub kind: LibKind,
    pub dev: u64,
    pub ino: u64,
    /// What [`inspect`] read from it; probes are attached only to an inspected file.
    pub inspection: Option<Arc<Inspection>>,
}

/// What the probes need from a library file, read once per inode.
#[derive(Debug)]
pub struct Inspection {
    pub symbols: Symbols,
    /// For a dynamic loader: where its `_dl_debug_state` hook is.
    pub hook: Option<LoaderHook>,
}

impl LibraryFile {
    /// Opens `path` (following symlinks) without opening the file itself, and checks it is a
    /// regular file; `display` is how to name it.
    pub fn open(path: PathBuf, display: String, kind: LibKind) -> Result<Self> {
        let (file, md) = untrusted::open_regular_path(&path)?;
        Ok(Self { path, file: Arc::new(file), display, kind, dev: md.dev(), ino: md.ino(), inspection: None })
    }

    /// The path the kernel resolves to this very inode, whatever happens to the original path.
    pub fn attach_path(&self) -> PathBuf {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    pub fn key(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }
}

/// Reads what the probes need from a library file: its symbols (only the ELF tables, within a
/// budget) and, for a dynamic loader, its hook. May block on a hung file system: the scanner
/// calls it on its worker thread, under a time limit.
pub fn inspect(lib: &LibraryFile) -> Result<Inspection> {
    let f = untrusted::reopen_for_reading(&lib.file).with_context(|| format!("cannot read {}", lib.display))?;
    let f2 = f.try_clone()?;
    let symbols = Symbols::read_file(f).with_context(|| format!("{} is not a usable ELF shared library", lib.display))?;
    let hook = match lib.kind {
        LibKind::Loader => Some(LoaderHook::read_file(f2, &symbols).with_context(|| lib.display.clone())?),
        _ => None,
    };
    Ok(Inspection { symbols, hook })
}

/// Libraries of interest mapped by process `pid` (not its dynamic loader).
pub fn mapped_by(pid: u32) -> Result<Vec<LibraryFile>> {
    mapped_by_filtered(pid, false)
}

/// [`mapped_by`], with the process's dynamic loader too (`run` probes it: see
/// `dynamic_loader.rs`).
pub fn mapped_by_with_loader(pid: u32) -> Result<Vec<LibraryFile>> {
    mapped_by_filtered(pid, true)
}

fn mapped_by_filtered(pid: u32, with_loader: bool) -> Result<Vec<LibraryFile>> {
    let maps_path = format!("/proc/{pid}/maps");
    // Bytes, not UTF-8: a path that is not valid UTF-8 must not hide the rest of the process.
    let maps = fs::read(&maps_path).with_context(|| format!("cannot read {maps_path}"))?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for line in maps.split(|&b| b == b'\n') {
        let Some(m) = MapsLine::parse(line) else { continue };
        if !m.path.starts_with(b"/") || m.inode == b"0" || !seen.insert((m.dev, m.inode)) {
            continue;
        }
        // The mapped inode itself, by address range: no path is resolved again (it may have
        // been replaced by a FIFO or a link, hidden under a mount, or deleted).
        let map_file = PathBuf::from(format!("/proc/{pid}/map_files/{}", String::from_utf8_lossy(m.range)));
        // maps escapes a newline in a name as `\012`: the map_files link holds the real name.
        let name = if m.path.contains(&b'\\') {
            match fs::read_link(&map_file) {
                Ok(p) => p,
                Err(_) => continue,
            }
        } else {
            PathBuf::from(OsStr::from_bytes(m.path))
        };
        let Some(kind) = LibKind::of(&name) else { continue };
        if kind == LibKind::Loader && !with_loader {
            continue;
        }
        if let Ok(lib) = LibraryFile::open(map_file, name.display().to_string(), kind) {
            out.push(lib);
        }
    }
    Ok(out)
}

/// One line of `/proc/PID/maps`: `address perms offset dev inode pathname`.
struct MapsLine<'a> {
    range: &'a [u8],
    dev: &'a [u8],
    inode: &'a [u8],
    path: &'a [u8],
}

impl<'a> MapsLine<'a> {
    fn parse(line: &'a [u8]) -> Option<Self> {
        let mut rest = line;
        let mut field = || {
            let end = rest.iter().position(|&b| b == b' ')?;
            let f = &rest[..end];
            rest = &rest[end + 1..];
            Some(f)
        };
        let (range, _perms, _offset, dev, inode) = (field()?, field()?, field()?, field()?, field()?);
        let start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        Some(Self { range, dev, inode, path: &rest[start..] })
    }
}

/// HIP libraries in the usual install paths, the `LD_LIBRARY_PATH` given, and the extra paths.
pub fn installed(ld_library_path: Option<&str>, extra: &[PathBuf]) -> Vec<LibraryFile> {
    installed_for(Runtime::Hip, ld_library_path, extra, None)
}

/// Directories of `runtime`'s libraries: `LD_LIBRARY_PATH`, the usual install paths, and for
/// CUDA the wheel libraries (`site-packages/nvidia/*/lib`) of the Python environment `command`
/// runs in (PyTorch maps its wheel's libcudart, not the system one).
pub fn search_dirs(runtime: Runtime, ld_library_path: Option<&str>, command: Option<&str>) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(lp) = ld_library_path {
        dirs.extend(lp.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    let subdirs = |dir: &str, prefix: &str, sub: &str| -> Vec<PathBuf> {
        let Ok(rd) = fs::read_dir(dir) else { return Vec::new() };
        let mut v: Vec<PathBuf> =
            rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(prefix)).map(|e| e.path().join(sub)).collect();
        v.sort();
        v
    };
    match runtime {
        Runtime::Hip => {
            dirs.extend(
                ["/opt/rocm/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib"].iter().map(PathBuf::from),
            );
            dirs.extend(subdirs("/opt", "rocm", "lib"));
        }
        Runtime::Cuda => {
            dirs.extend(
                [
                    "/usr/lib/x86_64-linux-gnu",
                    "/usr/lib64",
                    "/usr/lib",
                    "/usr/local/nvidia/lib64",
                    "/usr/local/cuda/lib64",
                    "/usr/local/cuda/targets/x86_64-linux/lib",
                ]
                .iter()
                .map(PathBuf::from),
            );
            dirs.extend(subdirs("/usr/local", "cuda-", "targets/x86_64-linux/lib"));
            let mut envs: Vec<PathBuf> = Vec::new();
            envs.extend(command.and_then(python_env_of));
            for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
                envs.extend(std::env::var_os(var).map(PathBuf::from));
            }
            for env in envs {
                dirs.push(env.join("lib"));
                for sp in site_packages(&env) {
                    if let Ok(rd) = fs::read_dir(sp.join("nvidia")) {
                        let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("lib")).collect();
                        v.sort();
                        dirs.extend(v);
                    }
                }
            }
        }
    }
    let mut seen = HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// The environment prefix (venv or conda) a command's program lives in: `<prefix>/bin/python3`
/// -> `<prefix>`, when that prefix has a `lib/python3*/site-packages`. The program is looked up
/// in `PATH` when it has no slash.
pub fn python_env_of(command: &str) -> Option<PathBuf> {
    let prog = if command.contains('/') {
        PathBuf::from(command)
    } else {
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).map(|d| d.join(command)).find(|c| c.is_file()))??
    };
    // A venv's bin/python is a symlink to the base interpreter: keep the venv's own path.
    let prog = if prog.is_absolute() { prog } else { std::env::current_dir().ok()?.join(prog) };
    let prefix = prog.parent()?.parent()?.to_path_buf();
    (!site_packages(&prefix).is_empty()).then_some(prefix)
}

fn site_packages(prefix: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for lib in ["lib", "lib64"] {
        if let Ok(rd) = fs::read_dir(prefix.join(lib)) {
            for e in rd.flatten() {
                let sp = e.path().join("site-packages");
                if e.file_name().to_string_lossy().starts_with("python") && sp.is_dir() {
                    v.push(sp);
                }
            }
        }
    }
    v.sort();
    v
}

/// `runtime`'s libraries in [`search_dirs`], and the extra paths (`--lib`).
pub fn installed_for(runtime: Runtime, ld_library_path: Option<&str>, extra: &[PathBuf], command: Option<&str>) -> Vec<LibraryFile> {
    let mut out = Vec::new();
    for d in search_dirs(runtime, ld_library_path, command) {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if let Some(kind) = LibKind::of(&p).filter(|k| runtime.probes(*k)).filter(|k| *k != LibKind::Loader || command.is_some()) {
                if let Ok(lib) = LibraryFile::open(p.clone(), p.display().to_string(), kind) {
                    out.push(lib);
                }
            }
        }
    }
    for p in extra {
        let kind = LibKind::of(p).unwrap_or(runtime.primary());
        if let Ok(lib) = LibraryFile::open(p.clone(), p.display().to_string(), kind) {
            out.push(lib);
        }
    }
    dedup(out)
}

/// Libraries mapped by any process on the node.
pub fn mapped_anywhere() -> Vec<LibraryFile> {
    let mut out = Vec::new();
    for pid in all_pids() {
        if let Ok(v) = mapped_by(pid) {
            out.extend(v);
        }
    }
    dedup(out)
}

/// Every pid in /proc.
pub fn all_pids() -> Vec<u32> {
    let Ok(rd) = fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()
}

/// Keeps the first file of each (device, inode).
pub fn dedup(v: Vec<LibraryFile>) -> Vec<LibraryFile> {
    let mut seen = HashSet::new();
    v.into_iter().filter(|l| seen.insert(l.key())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_probe_prefixes_match_what_of_classifies() {
        // What `run`'s loader probe compares a dlopened library's basename with must agree with
        // LibKind::of for every kind the runtime probes (else a dlopen runs on unstopped).
        for rt in [Runtime::Hip, Runtime::Cuda] {
            let names: Vec<rtl_common::LoaderName> =
                rt.probed_name_prefixes().iter().map(|p| rtl_common::LoaderName::new(p.as_bytes()).expect("fits the probe")).collect();
            assert!(!names.is_empty() && names.len() <= rtl_common::LOADER_NAMES_MAX as usize);
            for f in [
                "libamdhip64.so.5",
                "libamdhip64.so",
                "libroctx64.so.4",
                "librtl_agent.so",
                "libcuda.so.1",
                "libcudart.so.13",
                "libnvToolsExt.so.1",
                "libnvtx3interop.so.1",
                "libc.so.6",
                "libpython3.11.so.1.0",
                "libamdhip6.so",
                "libcud.so",
                "ld-linux-x86-64.so.2",
            ] {
                let kind = LibKind::of(Path::new(f)).filter(|k| rt.probes(*k) && *k != LibKind::Loader);
                assert_eq!(names.iter().any(|n| n.matches(f.as_bytes())), kind.is_some(), "{f} under {rt:?}");
            }
        }
    }

    #[test]
    fn classifies_names() {
        assert_eq!(LibKind::of(Path::new("/x/libamdhip64.so.5")), Some(LibKind::Hip));
        assert_eq!(LibKind::of(Path::new("/x/libamdhip64.so")), Some(LibKind::Hip));
        assert_eq!(LibKind::of(Path::new("/x/libroctx64.so.4 (deleted)")), Some(LibKind::Roctx));
        assert_eq!(LibKind::of(Path::new("/x/librtl_agent.so")), Some(LibKind::Agent));
        assert_eq!(LibKind::of(Path::new("/x/libc.so.6")), None);
        assert_eq!(LibKind::of(Path::new("/usr/lib/libcuda.so.1")), Some(LibKind::Cuda));
        assert_eq!(LibKind::of(Path::new("/usr/local/nvidia/lib64/libcuda.so.580.159.04")), Some(LibKind::Cuda));
        assert_eq!(LibKind::of(Path::new("/venv/site-packages/nvidia/cu13/lib/libcudart.so.13")), Some(LibKind::Cudart));
        assert_eq!(LibKind::of(Path::new("/x/libnvtx3interop.so.1")), Some(LibKind::Nvtx));
        assert_eq!(LibKind::of(Path::new("/x/libnvToolsExt.so.1")), Some(LibKind::Nvtx));
        assert_eq!(LibKind::of(Path::new("/x/libcudadebugger.so.1")), None);
        assert_eq!(LibKind::of(Path::new("/x/libcudnn.so.9")), None);
    }

    #[test]
    fn runtimes_split_the_kinds() {
        use LibKind::*;
        for k in [Hip, Roctx, Agent] {
            assert!(Runtime::Hip.probes(k));
        }
        for k in [Cuda, Cudart, Nvtx] {
            assert!(!Runtime::Hip.probes(k));
            assert!(Runtime::Cuda.probes(k));
        }
        assert!(!Runtime::Cuda.probes(Hip) && !Runtime::Cuda.probes(Roctx) && Runtime::Cuda.probes(Agent));
        assert_eq!(Runtime::default(), Runtime::Hip);
    }

    #[test]
    fn cuda_search_finds_the_wheel_libraries_of_the_command_venv() {
        // A fake venv: bin/python3 and lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13.
        let d = std::env::temp_dir().join(format!("rtl-venv-{}", std::process::id()));
        let lib = d.join("lib/python3.12/site-packages/nvidia/cu13/lib");
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(d.join("bin")).unwrap();
        fs::write(d.join("bin/python3"), b"").unwrap();
        fs::write(lib.join("libcudart.so.13"), b"not an ELF, found by name").unwrap();
        let py = d.join("bin/python3");
        assert_eq!(python_env_of(py.to_str().unwrap()), Some(d.clone()));
        let dirs = search_dirs(Runtime::Cuda, None, py.to_str());
        assert!(dirs.contains(&lib), "{dirs:?}");
        assert!(!search_dirs(Runtime::Hip, None, py.to_str()).contains(&lib));
        let found = installed_for(Runtime::Cuda, None, &[], py.to_str());
        assert!(found.iter().any(|l| l.path == lib.join("libcudart.so.13") && l.kind == LibKind::Cudart));
        // Not a Python environment: nothing.
        assert_eq!(python_env_of("/bin/sh"), None);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn own_process_maps_parse() {
        // Our own maps hold no HIP library; the call must succeed and find none.
        let v = mapped_by(std::process::id()).unwrap();
        assert!(v.is_empty());
        assert!(mapped_by(u32::MAX - 1).is_err());
    }
}
