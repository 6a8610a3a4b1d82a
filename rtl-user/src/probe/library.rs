//! Finding the library files to probe.
//!
//! A uprobe lives on an inode: a probe on `/opt/rocm/lib/libamdhip64.so` does not fire for a
//! process that maps its own copy from a venv or a container image. So libraries are found by
//! what processes really map (`/proc/PID/maps`, opened through `/proc/PID/root` so containers
//! work, through `/proc/PID/map_files` when the file was deleted) and in the usual install
//! paths, and are deduplicated by (device, inode).

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// What a library file is to us.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LibKind {
    /// libamdhip64.so*: HIP runtime.
    Hip,
    /// libroctx64.so*: roctx markers.
    Roctx,
    /// librtl_agent.so: our in-process agent (its publish function is probed).
    Agent,
}

impl LibKind {
    /// Classifies a file by its base name.
    pub fn of(path: &Path) -> Option<Self> {
        let name = path.file_name()?.to_str()?;
        let name = name.strip_suffix(" (deleted)").unwrap_or(name);
        if name.starts_with("libamdhip64.so") {
            Some(Self::Hip)
        } else if name.starts_with("libroctx64.so") {
            Some(Self::Roctx)
        } else if name.starts_with("librtl_agent") && name.contains(".so") {
            Some(Self::Agent)
        } else {
            None
        }
    }
}

/// A library file found on the system or in a process.
///
/// It holds the file open: probes attach through `/proc/self/fd/N`, so the mapping process may
/// exit, or the file be deleted or replaced, while we attach, and we still probe that inode.
#[derive(Clone, Debug)]
pub struct LibraryFile {
    /// A path this process can open (may go through /proc/PID/root or /proc/PID/map_files).
    pub path: PathBuf,
    /// The open file; attach through [`LibraryFile::attach_path`].
    pub file: std::sync::Arc<fs::File>,
    /// The path as the mapping process sees it (for messages and the trace).
    pub display: String,
    pub kind: LibKind,
    pub dev: u64,
    pub ino: u64,
}

impl LibraryFile {
    /// Stats `path`; `display` is how to name it.
    pub fn open(path: PathBuf, display: String, kind: LibKind) -> Result<Self> {
        let file = fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let md = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?;
        Ok(Self { path, file: std::sync::Arc::new(file), display, kind, dev: md.dev(), ino: md.ino() })
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

/// Libraries of interest mapped by process `pid`.
pub fn mapped_by(pid: u32) -> Result<Vec<LibraryFile>> {
    let maps_path = format!("/proc/{pid}/maps");
    let maps = fs::read_to_string(&maps_path).with_context(|| format!("cannot read {maps_path}"))?;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for line in maps.lines() {
        // address perms offset dev inode pathname
        let mut fields = line.splitn(6, ' ');
        let (Some(range), _, _, _, Some(inode)) =
            (fields.next(), fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Some(path) = fields.next().map(str::trim_start) else { continue };
        if !path.starts_with('/') || inode == "0" {
            continue;
        }
        let Some(kind) = LibKind::of(Path::new(path)) else { continue };
        if !seen.insert(path.to_string()) {
            continue;
        }
        let open_path = if let Some(p) = path.strip_suffix(" (deleted)") {
            // The file is gone from the tree; the mapping still holds the inode.
            let _ = p;
            PathBuf::from(format!("/proc/{pid}/map_files/{range}"))
        } else {
            PathBuf::from(format!("/proc/{pid}/root{path}"))
        };
        if let Ok(lib) = LibraryFile::open(open_path, path.to_string(), kind) {
            out.push(lib);
        }
    }
    Ok(out)
}

/// Libraries in the usual install paths, the `LD_LIBRARY_PATH` given, and the extra paths.
pub fn installed(ld_library_path: Option<&str>, extra: &[PathBuf]) -> Vec<LibraryFile> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(lp) = ld_library_path {
        dirs.extend(lp.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
    }
    dirs.extend(
        ["/opt/rocm/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/lib", "/usr/lib"]
            .iter()
            .map(PathBuf::from),
    );
    if let Ok(rd) = fs::read_dir("/opt") {
        for e in rd.flatten() {
            let n = e.file_name();
            if n.to_string_lossy().starts_with("rocm") {
                dirs.push(e.path().join("lib"));
            }
        }
    }
    let mut out = Vec::new();
    for d in dirs {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let p = e.path();
            if let Some(kind) = LibKind::of(&p) {
                if let Ok(lib) = LibraryFile::open(p.clone(), p.display().to_string(), kind) {
                    out.push(lib);
                }
            }
        }
    }
    for p in extra {
        let kind = LibKind::of(p).unwrap_or(LibKind::Hip);
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
    fn classifies_names() {
        assert_eq!(LibKind::of(Path::new("/x/libamdhip64.so.5")), Some(LibKind::Hip));
        assert_eq!(LibKind::of(Path::new("/x/libamdhip64.so")), Some(LibKind::Hip));
        assert_eq!(LibKind::of(Path::new("/x/libroctx64.so.4 (deleted)")), Some(LibKind::Roctx));
        assert_eq!(LibKind::of(Path::new("/x/librtl_agent.so")), Some(LibKind::Agent));
        assert_eq!(LibKind::of(Path::new("/x/libc.so.6")), None);
    }

    #[test]
    fn own_process_maps_parse() {
        // Our own maps hold no HIP library; the call must succeed and find none.
        let v = mapped_by(std::process::id()).unwrap();
        assert!(v.is_empty());
        assert!(mapped_by(u32::MAX - 1).is_err());
    }
}
