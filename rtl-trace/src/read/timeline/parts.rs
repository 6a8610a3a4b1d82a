//! Emitting the timeline's slices as two parts in parallel, each into its own sink (and
//! temporary file).

use anyhow::Result;
use rusqlite::Connection;

use super::apis::emit_apis;
use super::markers::emit_markers;
use super::ops::emit_ops;
use super::prelude::Prelude;
use super::sink::Sink;

/// A sink for one part of the timeline, run on its own thread.
pub(crate) trait PartSink: Sink + Send {
    /// Closes what is open and flushes.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Settings of a converter's connections: memory bounded whatever the trace's size. The
/// per-track `ORDER BY` sorts every row, so the sorter spills to temporary files (SQLite's own:
/// random names, unlinked at once) past a 32 MiB cache instead of growing in memory, and the
/// file is read, not mapped.
pub(crate) fn bounded_memory(c: &Connection) -> Result<()> {
    c.execute_batch("PRAGMA temp_store = FILE; PRAGMA cache_size = -32768; PRAGMA mmap_size = 0;")?;
    Ok(())
}

/// Emits the API calls into `parts[0]` and the GPU ops and markers into `parts[1]`, in parallel
/// on two read-only connections when the trace can be reopened by path (else one after the
/// other on `conn`). The tracks must already be emitted.
pub(crate) fn emit_parts(trace: &crate::read::open::Trace, p: &Prelude, parts: [Box<dyn PartSink + '_>; 2]) -> Result<()> {
    let [mut apis, mut ops] = parts;
    let uri = trace.uri();
    let open = || -> Result<Connection> {
        let c = crate::read::open::open_read_only(uri)?;
        bounded_memory(&c)?;
        Ok(c)
    };
    std::thread::scope(|s| -> Result<()> {
        let a = s.spawn(|| -> Result<()> {
            let c = open()?;
            emit_apis(&c, p, apis.as_mut())?;
            apis.finish()
        });
        let b = s.spawn(|| -> Result<()> {
            let c = open()?;
            emit_ops(&c, p, ops.as_mut())?;
            emit_markers(&c, p, ops.as_mut())?;
            ops.finish()
        });
        let ra = a.join().map_err(|_| anyhow::anyhow!("the API writer thread panicked"))?;
        let rb = b.join().map_err(|_| anyhow::anyhow!("the GPU op writer thread panicked"))?;
        ra.and(rb)
    })
}

/// Unnamed temporary files beside the output for the parts (`O_TMPFILE`, or a random name
/// unlinked at once where the file system lacks it): nothing to plant, nothing to remove.
pub(crate) struct PartFiles(Vec<std::fs::File>);

impl PartFiles {
    pub(crate) fn new(out: &std::path::Path, n: usize) -> Result<(Vec<std::fs::File>, PartFiles)> {
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        let mut writers = Vec::new();
        let mut readers = Vec::new();
        for _ in 0..n {
            let f = tempfile::tempfile_in(dir)
                .map_err(|e| anyhow::anyhow!("{}: cannot create a temporary file: {e}", crate::term::path(dir)))?;
            readers.push(f.try_clone()?);
            writers.push(f);
        }
        Ok((writers, PartFiles(readers)))
    }

    /// Appends the parts to `w`, skipping `skip` bytes at the start of the first non-empty one.
    pub(crate) fn append_to(&self, w: &mut dyn std::io::Write, mut skip: u64) -> Result<()> {
        use std::io::Seek;
        for f in &self.0 {
            let mut f = f;
            let len = f.metadata()?.len();
            let from = if skip > 0 && len > 0 { std::mem::take(&mut skip) } else { 0 };
            f.seek(std::io::SeekFrom::Start(from))?;
            std::io::copy(&mut f, w)?;
        }
        Ok(())
    }
}
