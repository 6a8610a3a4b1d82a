//! Opening and reading files that another user may control (a library a process maps, a copy
//! in someone's venv), as root.
//!
//! * Opening never blocks: `O_PATH` (no open of the file itself: a FIFO or a device is not
//!   touched), then `fstat`, and only a regular file is reopened for reading, `O_NONBLOCK |
//!   O_NOCTTY`.
//! * Reading takes only the byte ranges the ELF parser asks for (the headers and the symbol
//!   tables, tens of KiB for a real runtime), within a budget: a 3 GiB sparse file named like a
//!   runtime costs what its tables claim, and a table that claims more than
//!   [`ELF_READ_BUDGET`] is refused before anything is allocated. No `mmap`: a file truncated
//!   under a mapping would kill the collector with SIGBUS.
//! * A file on a hung file system (FUSE, NFS) can still block a read: inspection runs on the
//!   library scanner's worker thread, with a time limit (`probe/scan.rs`).

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use anyhow::{bail, Context, Result};

/// Most bytes of one file the ELF parser may read (headers, section table, symbol tables).
pub const ELF_READ_BUDGET: u64 = 64 << 20;

/// Opens `path` without opening the file itself (`O_PATH`, following symlinks), and checks that
/// it is a regular file. The descriptor serves as an attach path (`/proc/self/fd/N`) and to
/// reopen the same inode for reading ([`reopen_for_reading`]).
pub fn open_regular_path(path: &Path) -> Result<(File, std::fs::Metadata)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let md = file.metadata().with_context(|| format!("cannot stat {}", path.display()))?;
    if !md.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    Ok((file, md))
}

/// Opens the inode behind an `O_PATH` descriptor for reading, without blocking, and checks
/// that it is still that inode.
pub fn reopen_for_reading(path_fd: &File) -> Result<File> {
    let before = path_fd.metadata()?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", path_fd.as_raw_fd()))?;
    let after = f.metadata()?;
    if !after.is_file() || (after.dev(), after.ino()) != (before.dev(), before.ino()) {
        bail!("the file changed while being opened");
    }
    Ok(f)
}

/// Opens a path for reading the way [`open_regular_path`] + [`reopen_for_reading`] do.
pub fn open_for_reading(path: &Path) -> Result<File> {
    let (p, _) = open_regular_path(path)?;
    reopen_for_reading(&p).with_context(|| format!("cannot read {}", path.display()))
}

/// A file read on demand by the ELF parser (`object::ReadRef`), within a byte budget.
///
/// Every range asked for is read with `pread` into a buffer of its own that lives as long as
/// the reader (the parser keeps references to them); nothing else of the file is read.
pub struct BoundedFile {
    file: File,
    len: u64,
    budget: u64,
    used: Cell<u64>,
    /// A read was refused because it would have gone over the budget.
    over: Cell<bool>,
    /// The ranges read so far. `u64` storage keeps every buffer 8-byte aligned, as ELF64
    /// structures need.
    bufs: RefCell<Vec<Box<[u64]>>>,
}

impl BoundedFile {
    pub fn new(file: File, budget: u64) -> Result<Self> {
        let len = file.metadata()?.len();
        Ok(Self { file, len, budget, used: Cell::new(0), over: Cell::new(false), bufs: RefCell::new(Vec::new()) })
    }

    /// Was a read refused for the budget?
    pub fn over_budget(&self) -> bool {
        self.over.get()
    }

    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.used.get()
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads `size` bytes at `offset` into a new buffer, if the budget allows.
    fn read_new(&self, offset: u64, size: usize) -> Result<&[u8], ()> {
        let used = self.used.get().checked_add(size as u64).ok_or(())?;
        if used > self.budget {
            self.over.set(true);
            return Err(());
        }
        self.used.set(used);
        let mut words = vec![0u64; size.div_ceil(8)].into_boxed_slice();
        // SAFETY: a u64 slice viewed as its bytes (u8 has no alignment or validity needs).
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), size) };
        self.file.read_exact_at(bytes, offset).map_err(|_| ())?;
        let ptr = words.as_ptr().cast::<u8>();
        self.bufs.borrow_mut().push(words);
        // SAFETY: the boxed buffer is owned by `self.bufs`, which only grows: its heap memory
        // neither moves nor is freed while `self` lives (the returned lifetime).
        Ok(unsafe { std::slice::from_raw_parts(ptr, size) })
    }
}

impl<'a> object::ReadRef<'a> for &'a BoundedFile {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let end = offset.checked_add(size).ok_or(())?;
        if end > self.len {
            return Err(());
        }
        self.read_new(offset, usize::try_from(size).map_err(|_| ())?)
    }

    fn read_bytes_at_until(self, range: Range<u64>, delimiter: u8) -> Result<&'a [u8], ()> {
        if range.start > range.end || range.end > self.len {
            return Err(());
        }
        // Names are short: look at most 4 KiB ahead, 256 bytes at a time.
        let max = (range.end - range.start).min(4096) as usize;
        let mut have = 0usize;
        let mut chunk = [0u8; 256];
        let mut text: Vec<u8> = Vec::new();
        while have < max {
            let n = chunk.len().min(max - have);
            let got = self.file.read_at(&mut chunk[..n], range.start + have as u64).map_err(|_| ())?;
            if got == 0 {
                return Err(());
            }
            if let Some(i) = chunk[..got].iter().position(|&c| c == delimiter) {
                text.extend_from_slice(&chunk[..i]);
                let bytes = self.read_new_from(&text)?;
                return Ok(bytes);
            }
            text.extend_from_slice(&chunk[..got]);
            have += got;
        }
        Err(())
    }
}

impl BoundedFile {
    /// Keeps a copy of `data` for the reader's lifetime, counted against the budget.
    fn read_new_from(&self, data: &[u8]) -> Result<&[u8], ()> {
        let used = self.used.get().checked_add(data.len() as u64).ok_or(())?;
        if used > self.budget {
            self.over.set(true);
            return Err(());
        }
        self.used.set(used);
        let mut words = vec![0u64; data.len().div_ceil(8)].into_boxed_slice();
        // SAFETY: as in `read_new`.
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), data.len()) };
        bytes.copy_from_slice(data);
        let ptr = words.as_ptr().cast::<u8>();
        self.bufs.borrow_mut().push(words);
        // SAFETY: as in `read_new`.
        Ok(unsafe { std::slice::from_raw_parts(ptr, data.len()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::ReadRef;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = std::env::temp_dir().join(format!("rtl-untrusted-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("libamdhip64.so.5");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_for_reading(&fifo).unwrap_err();
        assert!(format!("{e:#}").contains("not a regular file"), "{e:#}");
        assert!(open_regular_path(Path::new("/dev/zero")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn reads_only_what_is_asked_within_the_budget() {
        let f = open_for_reading(Path::new("/proc/self/exe")).unwrap();
        let r = BoundedFile::new(f, 4096).unwrap();
        assert_eq!((&r).read_bytes_at(0, 4).unwrap(), b"\x7fELF");
        assert_eq!(r.bytes_read(), 4);
        assert!((&r).read_bytes_at(0, 8192).is_err(), "over the budget");
        assert_eq!(r.bytes_read(), 4, "a refused read costs nothing");
        assert!((&r).read_bytes_at(r.len() - 1, 2).is_err(), "past the end");
    }
}
