//! Reading traces: `summary` (terminal / JSON / HTML), conversion to Perfetto (Chrome JSON and
//! native protobuf), and `merge`. See docs/reading-traces.md.
//!
//! Every entry point opens its input through [`open_trace`], which checks the file (clear errors
//! for non-SQLite, truncated or non-trace files) and migrates older layouts in place
//! ([`crate::trace::migrate`]). Nothing here prints: output goes to the writer or file given.

use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{Connection, OpenFlags};

mod html;
mod meaning;
mod merge;
mod model;
mod perfetto_json;
mod perfetto_proto;
mod summary;

pub use merge::{merge, MergeStats, MergedInput, MERGED_TABLES};
pub use perfetto_json::convert_perfetto_json;
pub use perfetto_proto::convert_perfetto_proto;
pub use summary::{summary, summary_data, Summary, SummaryOptions, TIMELINE_BINS};

use crate::trace::migrate;

/// Opens a trace for reading: validates it, migrates it in place when it was written by an older
/// rtl-ebpf or is an RPD v2 / rocm-trace-lite file. A read-only file that needs migrating is
/// migrated in a private temporary copy instead (the original is left alone).
pub fn open_trace(path: &Path) -> Result<Connection> {
    migrate::check_file(path)?;
    let name = path.display();
    let rw = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    );
    let conn = match rw {
        Ok(c) if !c.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(true) => c,
        _ => {
            let ro = Connection::open_with_flags(
                path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
            )
            .with_context(|| format!("{name}: cannot open as SQLite"))?;
            tune(&ro)?;
            let report = migrate::check(&ro)?;
            if !report.changed() {
                return Ok(ro);
            }
            drop(ro);
            // Needs migrating but we may not write it: migrate a private copy.
            let tmp = std::env::temp_dir().join(format!(
                "rtl-read-{}-{}.db",
                std::process::id(),
                path.file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ));
            std::fs::copy(path, &tmp)
                .with_context(|| format!("{name}: copying read-only trace to {}", tmp.display()))?;
            let c = Connection::open(&tmp)?;
            let _ = std::fs::remove_file(&tmp); // stays readable while open
            tune(&c)?;
            migrate::migrate(&c)
                .with_context(|| format!("{name} (read-only; migrated in a temporary copy)"))?;
            return Ok(c);
        }
    };
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    tune(&conn)?;
    migrate::migrate(&conn)?;
    Ok(conn)
}

fn tune(conn: &Connection) -> Result<()> {
    let name = conn.path().unwrap_or("trace").to_string();
    // A file that passed the header check but is damaged fails here, with the file named.
    conn.execute_batch(
        "PRAGMA temp_store = MEMORY; PRAGMA cache_size = -262144; PRAGMA threads = 2; PRAGMA mmap_size = 68719476736;",
    )
    .with_context(|| format!("{name}: cannot read"))?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| anyhow::anyhow!("{name}: not a readable SQLite database: {e}"))?;
    Ok(())
}

/// Track id offset for GPU devices in the Perfetto outputs (a pid no real process has:
/// Linux pids are below 2^22).
pub const GPU_PID_BASE: i64 = 1 << 24;

/// An output file written through a temporary file beside it and renamed into place by
/// [`OutFile::commit`]; dropped uncommitted (an error), the partial file is removed.
pub(crate) struct OutFile {
    tmp: std::path::PathBuf,
    out: std::path::PathBuf,
    done: bool,
}

impl OutFile {
    /// Refuses an output that is the trace itself; creates the temporary file.
    pub(crate) fn create(db: &Path, out: &Path) -> Result<(std::fs::File, OutFile)> {
        if let (Ok(a), Ok(b)) = (std::fs::canonicalize(db), std::fs::canonicalize(out)) {
            if a == b {
                anyhow::bail!("{}: the output is the trace itself", out.display());
            }
        }
        let name = out
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .ok_or_else(|| anyhow::anyhow!("{}: not a file name", out.display()))?;
        let tmp = out.with_file_name(format!(".{name}.partial"));
        let f = std::fs::File::create(&tmp)
            .with_context(|| format!("{}: cannot create", out.display()))?;
        Ok((
            f,
            OutFile {
                tmp,
                out: out.to_path_buf(),
                done: false,
            },
        ))
    }

    pub(crate) fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.out)
            .with_context(|| format!("{}: cannot write", self.out.display()))?;
        self.done = true;
        Ok(())
    }
}

impl Drop for OutFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
