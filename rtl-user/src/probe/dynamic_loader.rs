//! The dynamic loader's debugger hook, `_dl_debug_state()`: where to probe it and where its
//! `_r_debug` lies from it.
//!
//! ld.so (glibc and musl alike) calls `_dl_debug_state()` around every change of its library
//! list, with `_r_debug.r_state` saying whether the list is changing (`RT_ADD`, `RT_DELETE`) or
//! consistent again (`RT_CONSISTENT`). `rtl-ebpf run` probes it so a library that the command
//! maps from a path only it knows is probed before its code runs (see `loader_notify` in the
//! eBPF programs and `collect::loader_stops`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSymbol};

use super::symbols::Symbols;
use super::untrusted::{BoundedFile, ELF_READ_BUDGET};

/// Where a dynamic loader's hook is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoaderHook {
    /// File offset of `_dl_debug_state` (the uprobe's attach point).
    pub offset: u64,
    /// `&_r_debug - &_dl_debug_state` in the loaded image (both move with the load bias), or 0
    /// when the loader does not export `_r_debug`: then the probe stops at every call.
    pub r_debug_delta: i64,
}

impl LoaderHook {
    /// Reads the hook of the loader file at `path` (a regular ELF file, already checked by
    /// [`Symbols::read`]).
    pub fn read(path: &Path, syms: &Symbols) -> Result<Self> {
        let file = super::untrusted::open_for_reading(path)?;
        Self::read_file(file, syms).with_context(|| path.display().to_string())
    }

    /// [`LoaderHook::read`] from an open file, reading only its headers and symbol tables.
    pub fn read_file(file: std::fs::File, syms: &Symbols) -> Result<Self> {
        let Some(offset) = syms.offset("_dl_debug_state") else {
            bail!("it does not export _dl_debug_state: not a dynamic loader rtl-ebpf knows");
        };
        let data = BoundedFile::new(file, ELF_READ_BUDGET)?;
        let file = object::File::parse(&data).context("not an ELF file")?;
        let vaddr = |name: &str| {
            file.dynamic_symbols()
                .find(|s| s.name().is_ok_and(|n| n.split('@').next() == Some(name)) && s.is_definition())
                .map(|s| s.address())
        };
        let r_debug_delta = match (vaddr("_dl_debug_state"), vaddr("_r_debug")) {
            (Some(f), Some(r)) => (r as i64).wrapping_sub(f as i64),
            _ => 0,
        };
        Ok(Self { offset, r_debug_delta })
    }
}

/// Is this file name an x86-64 dynamic loader's (`ld-linux-x86-64.so.2`, `ld-musl-x86_64.so.1`)?
pub fn is_loader_name(name: &str) -> bool {
    name.starts_with("ld-linux-x86-64.so") || name.starts_with("ld-musl-x86_64.so")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_names() {
        assert!(is_loader_name("ld-linux-x86-64.so.2"));
        assert!(is_loader_name("ld-musl-x86_64.so.1"));
        assert!(!is_loader_name("libld-linux.so"));
        assert!(!is_loader_name("ld-linux.so.2"), "the i386 loader: no x86-64 process maps it");
        assert!(!is_loader_name("ld.so.cache"));
    }

    /// Debian's own loader: the hook is found and `_r_debug` lies in its data, after the code.
    #[test]
    fn debian_loader_hook() {
        let p = Path::new("/lib64/ld-linux-x86-64.so.2");
        let syms = Symbols::read(p).expect("the system's dynamic loader is readable");
        let h = LoaderHook::read(p, &syms).expect("glibc's loader exports _dl_debug_state");
        assert!(h.offset > 0);
        assert!(h.r_debug_delta > 0, "glibc exports _r_debug after _dl_debug_state: {h:?}");
    }
}
