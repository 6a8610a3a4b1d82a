//! Exported function symbols of a shared library, with the file offsets uprobes attach at.
//!
//! Read once per library with the `object` crate. Versioned names (`hipMalloc@@hip_4.2` in
//! `objdump -T`) are stored in `.dynsym` under their plain name with the version kept in
//! `.gnu.version`; we key by the plain name and keep the default version when a name has several.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

/// Function symbols of one library: plain name -> file offset.
#[derive(Debug, Default)]
pub struct Symbols {
    offsets: HashMap<String, u64>,
}

impl Symbols {
    /// Reads the dynamic symbol table of the ELF file at `path`.
    pub fn read(path: &Path) -> Result<Self> {
        // Only a regular file: reading a FIFO would block forever, /dev/zero would never end.
        let md = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
        if !md.is_file() {
            bail!("{} is not a regular file", path.display());
        }
        let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::parse(&data).with_context(|| format!("{} is not a usable ELF shared library", path.display()))
    }

    /// Parses ELF bytes. Errors (never panics) on anything malformed.
    pub fn parse(data: &[u8]) -> Result<Self> {
        if data.len() < 4 || &data[..4] != b"\x7fELF" {
            bail!("not an ELF file (bad magic)");
        }
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
            if file_off as usize >= data.len() {
                continue;
            }
            offsets.entry(name.to_string()).or_insert(file_off);
        }
        if !any_dynamic {
            bail!("no dynamic symbol table (.dynsym): not a shared library");
        }
        if defined > 0 && offsets.is_empty() {
            bail!("none of its {defined} functions lies in a loadable segment (corrupt program headers)");
        }
        Ok(Self { offsets })
    }

    /// File offset of a function, by plain name.
    pub fn offset(&self, name: &str) -> Option<u64> {
        self.offsets.get(name).copied()
    }

    /// Names of all exported functions starting with `prefix`, sorted.
    pub fn names_with_prefix(&self, prefix: &str) -> Vec<&str> {
        let mut v: Vec<&str> = self.offsets.keys().map(String::as_str).filter(|n| n.starts_with(prefix)).collect();
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
}
