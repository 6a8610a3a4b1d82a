//! Opening a trace for reading ([`open_trace`]: checked, never written, older layouts migrated
//! in a private copy), its string table, and the outputs the readers write ([`OutFile`]).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rusqlite::{Connection, OpenFlags};

use crate::api_meaning::ApiFacts;
use crate::error::Fatal;
use crate::migrate;

/// A trace open for reading (see [`open_trace`]); derefs to its SQLite connection.
pub struct Trace {
    conn: Connection,
    /// SQLite URI of the file read: the trace itself (read-only, immutable) or its private copy.
    uri: String,
    /// The private copy's directory (0700, random name), removed when the trace is dropped.
    _copy: Option<tempfile::TempDir>,
    /// True when the data is read from a private copy (migrated, or with its journal / WAL).
    pub copied: bool,
}

impl std::ops::Deref for Trace {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        &self.conn
    }
}

impl Trace {
    /// The SQLite URI of what is read (for `ATTACH`; needs a connection opened with URIs on).
    pub fn uri(&self) -> &str {
        &self.uri
    }
}

/// Another read-only connection to a trace's data, by its [`Trace::uri`] (parallel scans).
pub(crate) fn open_read_only(uri: &str) -> Result<Connection> {
    let c =
        Connection::open_with_flags(uri, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    Ok(c)
}

/// `file:` URI of a path (the characters URIs reserve are %-escaped).
fn file_uri(p: &Path, params: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut u = String::from("file:");
    for &b in p.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            u.push(b as char);
        } else {
            u.push_str(&format!("%{b:02X}"));
        }
    }
    u.push('?');
    u.push_str(params);
    u
}

/// A side file of the trace (`-journal`, `-wal`) that SQLite would apply, checked and open.
struct Side {
    suffix: &'static str,
    file: File,
}

/// Checks `<real><suffix>`: absent or empty is fine (nothing to apply); otherwise it must be a
/// regular file (not a link) of the trace's owner that nobody else may write, or the trace is
/// refused: SQLite would replay its contents into what we read.
fn side_file(real: &Path, suffix: &'static str, trace: &std::fs::Metadata) -> Result<Option<Side>> {
    let p = PathBuf::from(format!("{}{suffix}", real.display()));
    let name = crate::term::path(&p);
    let m = match std::fs::symlink_metadata(&p) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(anyhow!("{name}: cannot inspect: {e}")),
    };
    let what = if suffix == "-wal" { "write-ahead log" } else { "rollback journal" };
    let refuse = |why: String| {
        anyhow!(
            "{name}: {why}; SQLite would apply this {what} to the trace and change what it says. \
             Not read. If it is a genuine unfinished write, the trace's owner can open the trace \
             once with sqlite3 to apply it; otherwise remove it"
        )
    };
    if m.file_type().is_symlink() {
        return Err(refuse("is a symbolic link".into()));
    }
    if !m.file_type().is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    if m.uid() != trace.uid() {
        return Err(refuse(format!("belongs to uid {}, not to the trace's owner (uid {})", m.uid(), trace.uid())));
    }
    if m.mode() & 0o022 & !trace.mode() != 0 {
        return Err(refuse(format!("is writable by others (mode {:o}) while the trace is not", m.mode() & 0o7777)));
    }
    if m.len() == 0 {
        return Ok(None); // an empty journal is not hot; an empty log adds nothing
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&p)
        .with_context(|| format!("{name}: cannot open"))?;
    let fm = file.metadata()?;
    if (fm.dev(), fm.ino()) != (m.dev(), m.ino()) {
        return Err(refuse("was replaced while being checked".into()));
    }
    Ok(Some(Side { suffix, file }))
}

/// Opens a trace for reading. Never writes the file, and never lets SQLite apply a journal or
/// write-ahead log that the trace's owner did not write:
///
/// * the file is opened and checked (regular, SQLite, not truncated) through one descriptor;
/// * `-journal` / `-wal` beside it that hold data must be regular files of the trace's owner
///   that nobody else may write, else the trace is refused (exit code 8) — a hot journal
///   planted by another user would otherwise be replayed into the trace by SQLite;
/// * with no such file, SQLite reads the trace read-only and `immutable` (it then looks for no
///   side file at all, so none planted later is read either);
/// * a trace with its owner's journal or log (a write cut short: SIGKILL, a full disk), or in
///   an older layout that needs migrating, is copied (with that file) into a private directory
///   and read there: SQLite applies the journal / log and the migration to the copy only.
///
/// `facts`: the API table for a trace that predates `rtl_api_meaning` ([`migrate::migrate`]).
///
/// Errors carry [`Fatal::BadTrace`] (exit code 8).
pub fn open_trace(path: &Path, facts: ApiFacts) -> Result<Trace> {
    open_inner(path, facts).map_err(|e| {
        if e.chain().any(|c| c.downcast_ref::<Fatal>().is_some()) {
            e
        } else {
            anyhow!(Fatal::BadTrace(format!("{e:#}")))
        }
    })
}

fn open_inner(path: &Path, facts: ApiFacts) -> Result<Trace> {
    let name = path.display().to_string();
    // SQLite names the side files after the file the path resolves to.
    let real = std::fs::canonicalize(path).with_context(|| format!("{name}: cannot open the trace"))?;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&real)
        .with_context(|| format!("{name}: cannot open the trace"))?;
    let meta = f.metadata().with_context(|| format!("{name}: cannot open the trace"))?;
    if meta.is_dir() {
        anyhow::bail!("{name}: is a directory, not a trace file");
    }
    if !meta.is_file() {
        anyhow::bail!("{name}: is not a regular file");
    }
    let mut sides = Vec::new();
    for suffix in ["-journal", "-wal"] {
        sides.extend(side_file(&real, suffix, &meta).with_context(|| format!("{name}: not opened"))?);
    }
    let has_wal = sides.iter().any(|s| s.suffix == "-wal");
    migrate::check_header(&name, &mut f, meta.len(), has_wal)?;
    if !sides.is_empty() {
        return private_copy(&name, &mut f, &mut sides, facts);
    }
    let uri = file_uri(&real, "mode=ro&immutable=1");
    let conn =
        Connection::open_with_flags(&uri, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX)
            .with_context(|| format!("{name}: cannot open as SQLite"))?;
    // The path must still name the file checked above.
    let now = std::fs::metadata(&real).with_context(|| format!("{name}: cannot open the trace"))?;
    if (now.dev(), now.ino()) != (meta.dev(), meta.ino()) {
        anyhow::bail!("{name}: was replaced while being opened");
    }
    tune(&conn, &name)?;
    if super::sdk_import::is_sdk(&conn)? {
        return from_sdk(&name, &conn);
    }
    let report = migrate::check(&conn)?;
    if !report.changed() {
        return Ok(Trace { conn, uri, _copy: None, copied: false });
    }
    drop(conn);
    private_copy(&name, &mut f, &mut [], facts)
}

/// Copies the trace (and its owner's journal / log) into a private directory, opens the copy
/// read-write there (SQLite applies the journal or log to the copy) and migrates it.
fn private_copy(name: &str, f: &mut File, sides: &mut [Side], facts: ApiFacts) -> Result<Trace> {
    use std::io::Seek;
    let dir = tempfile::Builder::new()
        .prefix("rtl-read-")
        .tempdir()
        .with_context(|| format!("{name}: cannot make a private directory for a working copy (set TMPDIR)"))?;
    let copy = dir.path().join("trace.db");
    let stamp = |m: &std::fs::Metadata| (m.len(), m.mtime(), m.mtime_nsec(), m.ctime_nsec());
    // A trace still being written may change under the copy (a checkpoint): copy again then.
    let mut tries = 0;
    loop {
        let before = f.metadata()?;
        for (src, suffix) in std::iter::once((&mut *f, "")).chain(sides.iter_mut().map(|s| (&mut s.file, s.suffix))) {
            let dst = PathBuf::from(format!("{}{suffix}", copy.display()));
            let _ = std::fs::remove_file(&dst);
            let mut out = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&dst)
                .with_context(|| format!("{name}: cannot write a working copy in {}", dir.path().display()))?;
            src.seek(std::io::SeekFrom::Start(0))?;
            std::io::copy(src, &mut out).with_context(|| {
                format!("{name}: cannot copy to a working copy in {} (set TMPDIR to a larger file system)", dir.path().display())
            })?;
        }
        if stamp(&f.metadata()?) == stamp(&before) {
            break;
        }
        tries += 1;
        if tries >= 5 {
            anyhow::bail!(
                "{name}: changed while being copied, {tries} times: it is still being written; read it when the collector has finished"
            );
        }
    }
    let conn = Connection::open_with_flags(&copy, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("{name}: cannot open as SQLite"))?;
    tune(&conn, name)?;
    migrate::migrate(&conn, facts).with_context(|| format!("{name} (migrated in a private copy; the file itself is not changed)"))?;
    // Fold a log into the copy, so that the read-only reopens see one plain file.
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE;")
        .with_context(|| format!("{name}: applying its write-ahead log to the working copy"))?;
    let uri = file_uri(&copy, "mode=ro&immutable=1");
    Ok(Trace { conn, uri, _copy: Some(dir), copied: true })
}

/// A rocprofiler-sdk rocpd file: its data read into a trace in a private directory
/// ([`super::sdk_import`]); the file itself is only read.
fn from_sdk(name: &str, sdk: &Connection) -> Result<Trace> {
    let dir = tempfile::Builder::new()
        .prefix("rtl-read-")
        .tempdir()
        .with_context(|| format!("{name}: cannot make a private directory for a working copy (set TMPDIR)"))?;
    let copy = dir.path().join("trace.db");
    super::sdk_import::import(name, sdk, &copy).with_context(|| format!("{name}: reading a rocprofiler-sdk rocpd database"))?;
    let conn = Connection::open_with_flags(&copy, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
        .with_context(|| format!("{name}: cannot open its working copy"))?;
    tune(&conn, name)?;
    let uri = file_uri(&copy, "mode=ro&immutable=1");
    Ok(Trace { conn, uri, _copy: Some(dir), copied: true })
}

fn tune(conn: &Connection, name: &str) -> Result<()> {
    // A file that passed the header check but is damaged fails here, with the file named.
    conn.execute_batch("PRAGMA temp_store = MEMORY; PRAGMA cache_size = -262144; PRAGMA threads = 2; PRAGMA mmap_size = 68719476736;")
        .with_context(|| format!("{name}: cannot read"))?;
    conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get::<_, i64>(0))
        .map_err(|e| anyhow!("{name}: not a readable SQLite database: {e}"))?;
    Ok(())
}

/// Refuses an output that is one of the inputs (the same file: device and inode, whatever the
/// path says, links included): a usage error (exit code 2).
pub(crate) fn refuse_output_that_is_an_input(out: &Path, inputs: &[&Path]) -> Result<()> {
    let Ok(o) = std::fs::metadata(out) else { return Ok(()) };
    for i in inputs {
        if let Ok(m) = std::fs::metadata(i) {
            if (m.dev(), m.ino()) == (o.dev(), o.ino()) {
                return Err(anyhow!(Fatal::Usage(format!(
                    "{}: the output is the input trace {} itself: choose another output file",
                    crate::term::path(out),
                    crate::term::path(i)
                ))));
            }
        }
    }
    Ok(())
}

/// The string table: id -> string.
pub(crate) fn strings(conn: &Connection) -> Result<HashMap<i64, String>> {
    let mut st = conn.prepare("SELECT id, string FROM rocpd_string")?;
    let m = st
        .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?.unwrap_or_default())))?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(m)
}

/// An output file written through a temporary file beside it (random name, created
/// exclusively, mode 0600: outputs hold command lines like the trace) and renamed into place by
/// [`OutFile::commit`] (a symlink at the output's name is replaced, never followed); under sudo
/// it is given to the invoking user, like the trace. Dropped uncommitted (an error), the
/// temporary file is removed.
pub(crate) struct OutFile {
    tmp: tempfile::TempPath,
    out: PathBuf,
}

impl OutFile {
    /// Refuses an output that is one of `inputs`; creates the temporary file.
    pub(crate) fn create(inputs: &[&Path], out: &Path) -> Result<(File, OutFile)> {
        refuse_output_that_is_an_input(out, inputs)?;
        let shown = crate::term::path(out);
        let name = out
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .ok_or_else(|| anyhow!(Fatal::Output(format!("{shown}: not a file name"))))?;
        let dir = match out.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(dir)
            .map_err(|e| anyhow!(Fatal::Output(format!("{shown}: cannot create: {e}"))))?;
        let (f, tmp) = tmp.into_parts();
        Ok((f, OutFile { tmp, out: out.to_path_buf() }))
    }

    pub(crate) fn commit(self) -> Result<()> {
        crate::writer::chown_to_invoker(&self.tmp);
        let shown = crate::term::path(&self.out);
        self.tmp.persist(&self.out).map_err(|e| anyhow!(Fatal::Output(format!("{shown}: cannot write: {}", e.error))))?;
        Ok(())
    }
}
