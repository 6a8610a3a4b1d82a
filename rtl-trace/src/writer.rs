//! Writes trace rows into the SQLite file, one transaction per batch.
//!
//! The file is created 0600 (O_EXCL, no symlink following) and, under sudo, handed to the
//! invoking user through its descriptor. It runs in WAL mode while tracing, so a collector killed at any moment leaves
//! a consistent database up to the last committed batch; `finish` checkpoints and switches back
//! to a single-file journal.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection};

use super::schema;
use crate::error::Fatal;
use crate::rows::Row;

/// Rows written so far (after commit).
#[derive(Debug, Default, Clone, Copy)]
pub struct WriterStats {
    pub api_rows: u64,
    pub op_rows: u64,
    pub batches: u64,
}

pub struct TraceWriter {
    conn: Connection,
    /// Our own descriptors of the files we created (ownership was set through them).
    _files: CreatedFiles,
    path: PathBuf,
    strings: HashMap<String, i64>,
    /// API names by the address of their shared `Arc<str>` (kept alive here) -> string id.
    names: HashMap<usize, (std::sync::Arc<str>, i64)>,
    /// The API-row INSERTs: rocpd_api x MULTI_ROWS, x 1, rtl_api x MULTI_ROWS, x 1.
    sql: [String; 4],
    pub stats: WriterStats,
}

/// API calls per multi-row INSERT (7 values each; SQLite allows 32766 per statement).
const MULTI_ROWS: usize = 64;
const API_INSERT: &str = "INSERT INTO rocpd_api (id, pid, tid, start, end, apiName_id, correlation_id) VALUES ";
const RTL_INSERT: &str = "INSERT INTO rtl_api (api_id, ret, status, a0, a1, a2, a3) VALUES ";

/// `head` followed by `rows` groups of `cols` placeholders.
fn multi_insert(head: &str, cols: usize, rows: usize) -> String {
    let group = format!("({})", vec!["?"; cols].join(","));
    format!("{head}{}", vec![group; rows].join(","))
}

/// Binds `rows` (all of the statement's groups) in order and runs the statement once.
fn bind_rows<T: rusqlite::ToSql, const N: usize>(stmt: &mut rusqlite::Statement<'_>, rows: &[[T; N]]) -> rusqlite::Result<()> {
    let mut i = 1;
    for r in rows {
        for v in r {
            stmt.raw_bind_parameter(i, v)?;
            i += 1;
        }
    }
    stmt.raw_execute()?;
    Ok(())
}

/// The files the collector created for one trace (the database, `-wal`, `-shm`), held open.
///
/// Everything done to them after creation goes through these descriptors, never through a
/// path: a user who can write in the output directory may replace any name there with a
/// symlink at any moment, and a `chown(path)` by root would then hand the link's target (any
/// root file) to them.
struct CreatedFiles {
    /// (file, what it is) for the database, `-wal` and `-shm`, in that order.
    files: Vec<(std::fs::File, &'static str)>,
}

impl CreatedFiles {
    /// (device, inode) of each file.
    fn keys(&self) -> Result<Vec<((u64, u64), &'static str)>> {
        self.files
            .iter()
            .map(|(f, what)| {
                let m = f.metadata().with_context(|| format!("stat of the trace's {what} file"))?;
                Ok(((m.dev(), m.ino()), *what))
            })
            .collect()
    }
}

/// Creates a new file for the trace and SQLite's side files; refuses to replace an existing
/// one unless `force`. Under sudo each is given to the invoking user through its descriptor.
fn create_file(path: &Path, force: bool) -> Result<CreatedFiles> {
    if force {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let p = PathBuf::from(format!("{}{suffix}", path.display()));
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(anyhow!(Fatal::Output(format!("cannot replace {}: {e}", p.display())))),
            }
        }
    }
    let create =
        |p: &Path| OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY).open(p);
    let main = create(path).map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::AlreadyExists {
            " (it exists: choose another -o, or pass --force to replace it)"
        } else {
            ""
        };
        anyhow!(Fatal::Output(format!("cannot create trace file {}: {e}{hint}", path.display())))
    })?;
    chown_file_to_invoker(&main);
    let mut files = CreatedFiles { files: vec![(main, "database")] };
    // SQLite's side files have predictable names and SQLite opens them without O_EXCL: a file
    // planted as `<trace>-wal` by someone who can write in the directory would receive the
    // whole trace. Create them ourselves, exclusively and private; SQLite reuses them (and
    // `verify_sqlite_opened` checks that it did).
    let journal = PathBuf::from(format!("{}-journal", path.display()));
    let side = |suffix: &str| PathBuf::from(format!("{}{suffix}", path.display()));
    let mut made = Vec::new();
    let result = (|| {
        if std::fs::symlink_metadata(&journal).is_ok() {
            return Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists));
        }
        for (suffix, what) in [("-wal", "-wal"), ("-shm", "-shm")] {
            let p = side(suffix);
            let f = create(&p)?;
            made.push(p);
            chown_file_to_invoker(&f);
            files.files.push((f, what));
        }
        Ok(())
    })();
    if let Err(e) = result {
        for p in made.iter().chain(std::iter::once(&path.to_path_buf())) {
            let _ = std::fs::remove_file(p);
        }
        return Err(anyhow!(Fatal::Output(format!(
            "cannot create the side files of {} (-wal, -shm, -journal): {e}; a stale or foreign one is in the way: remove it, or pass --force",
            path.display()
        ))));
    }
    Ok(files)
}

/// Under sudo, gives the file at `path`, one this process has just created there, to the user
/// who ran sudo, without trusting the path: it is opened `O_NOFOLLOW` (a symlink swapped in is
/// not followed) and given away through that descriptor only if it is still a regular file of
/// ours with a single link (not a file someone renamed or linked into its place).
pub fn chown_to_invoker(path: &Path) {
    if invoking_user().is_none() {
        return;
    }
    let Ok(f) =
        OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC).open(path)
    else {
        return;
    };
    let Ok(m) = f.metadata() else { return };
    // SAFETY: no preconditions.
    if m.is_file() && m.uid() == unsafe { libc::geteuid() } && m.nlink() == 1 {
        chown_file_to_invoker(&f);
    }
}

/// Under sudo (`SUDO_UID`, `SUDO_GID`), gives a file the collector created to the user who ran
/// sudo, through its open descriptor (never a path, which may have become a symlink).
fn chown_file_to_invoker(file: &std::fs::File) {
    let Some((uid, gid)) = invoking_user() else { return };
    let _ = std::os::unix::fs::fchown(file, Some(uid), Some(gid));
}

/// The user who ran sudo: `SUDO_UID` and `SUDO_GID`, when both are numbers and not root's.
pub fn invoking_user() -> Option<(u32, u32)> {
    let uid = std::env::var("SUDO_UID").ok()?.parse::<u32>().ok()?;
    let gid = std::env::var("SUDO_GID").ok()?.parse::<u32>().ok()?;
    (uid != 0).then_some((uid, gid))
}

/// Explains SQLite's "readonly database" when the file was renamed or replaced under it.
fn moved_hint(e: &rusqlite::Error) -> &'static str {
    match e.sqlite_error() {
        Some(f) if f.extended_code == rusqlite::ffi::SQLITE_READONLY_DBMOVED => {
            " (the trace file was moved or replaced by someone else while it was written: its rows so far are in the moved file; \
             write traces to a directory other users cannot write to)"
        }
        _ => "",
    }
}

/// How many of this process's descriptors refer to (device, inode).
fn descriptors_on(key: (u64, u64)) -> usize {
    let Ok(rd) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&fd| {
            // SAFETY: fstat into a zeroed struct; a descriptor closed meanwhile just fails.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
            ok && (st.st_dev, st.st_ino) == key
        })
        .count()
}

/// SQLite opens the database and its side files by name, after we created them: checks that
/// the files it holds open are ours (a second descriptor on each of our inodes), so a name
/// swapped in the meantime by another user never receives the trace.
fn verify_sqlite_opened(files: &CreatedFiles, path: &Path) -> Result<()> {
    for (key, what) in files.keys()? {
        if descriptors_on(key) < 2 {
            return Err(anyhow!(Fatal::Output(format!(
                "the trace's {what} file at {} was replaced by someone else while it was being opened: not writing a trace into it \
                 (write traces to a directory other users cannot write to)",
                path.display()
            ))));
        }
    }
    Ok(())
}

impl TraceWriter {
    pub fn create(path: &Path, force: bool) -> Result<Self> {
        let files = create_file(path, force)?;
        let flags = rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn =
            Connection::open_with_flags(path, flags).map_err(|e| anyhow!(Fatal::Output(format!("cannot open {}: {e}", path.display()))))?;
        // Foreign keys are not enforced while writing (it costs a parent lookup per reference,
        // a third of the writer's time): the writer keeps them by construction (API rows go in
        // before the rows that refer to them) and the tests check `PRAGMA foreign_key_check`.
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-65536; PRAGMA foreign_keys=OFF;")
            .map_err(|e| anyhow!(Fatal::Output(format!("cannot write {}: {e}", path.display()))))?;
        for sql in [schema::TABLES, schema::TRACING_INDEXES, schema::VIEWS, schema::SEED] {
            conn.execute_batch(sql).map_err(|e| anyhow!(Fatal::Output(format!("cannot write {}: {e}", path.display()))))?;
        }
        // The schema is written: SQLite holds the database, its WAL and its shared memory open.
        verify_sqlite_opened(&files, path)?;
        let mut w = Self {
            conn,
            _files: files,
            path: path.to_path_buf(),
            strings: HashMap::new(),
            names: HashMap::new(),
            sql: [
                multi_insert(API_INSERT, 7, MULTI_ROWS),
                multi_insert(API_INSERT, 7, 1),
                multi_insert(RTL_INSERT, 7, MULTI_ROWS),
                multi_insert(RTL_INSERT, 7, 1),
            ],
            stats: WriterStats::default(),
        };
        w.strings.insert(String::new(), 1);
        w.set_meta("schema_version", schema::RPD_SCHEMA_VERSION)?;
        w.set_meta("rtl_schema_version", &schema::RTL_SCHEMA_VERSION.to_string())?;
        w.set_meta("gpu_stride", "1000")?;
        w.set_meta("pid_stride", "10000000")?;
        Ok(w)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sets (replaces) one metadata tag.
    pub fn set_meta(&mut self, tag: &str, value: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM rocpd_metadata WHERE tag = ?1", params![tag])?;
        tx.execute("INSERT INTO rocpd_metadata (tag, value) VALUES (?1, ?2)", params![tag, value])?;
        tx.commit().map_err(|e| self.io_error(e))
    }

    fn io_error(&self, e: rusqlite::Error) -> anyhow::Error {
        anyhow!(Fatal::Output(format!("writing {} failed: {e}{}", self.path.display(), moved_hint(&e))))
    }

    /// Writes one batch of rows in a single transaction.
    ///
    /// API calls are the bulk of every trace: their `rocpd_api` and `rtl_api` rows go in
    /// multi-row INSERTs of [`MULTI_ROWS`] rows (one statement execution, one AUTOINCREMENT
    /// bookkeeping step per group instead of per row); everything else row by row, in order.
    pub fn write(&mut self, rows: &[Row]) -> Result<()> {
        let path = self.path.clone();
        let io_error =
            move |e: rusqlite::Error| anyhow!(Fatal::Output(format!("writing {} failed: {e}{}", path.display(), moved_hint(&e))));
        let tx = self.conn.transaction().map_err(&io_error)?;
        let (mut apis, mut ops) = (0u64, 0u64);
        {
            let strings = &mut self.strings;
            let names = &mut self.names;
            let mut intern = |s: &str, tx: &rusqlite::Transaction| -> rusqlite::Result<i64> {
                if let Some(&id) = strings.get(s) {
                    return Ok(id);
                }
                tx.prepare_cached("INSERT INTO rocpd_string (string) VALUES (?1)")?.execute(params![s])?;
                let id = tx.last_insert_rowid();
                strings.insert(s.to_string(), id);
                Ok(id)
            };
            let sql = &self.sql;
            let mut api_multi = tx.prepare_cached(&sql[0])?;
            let mut api_one = tx.prepare_cached(&sql[1])?;
            let mut rtl_multi = tx.prepare_cached(&sql[2])?;
            let mut rtl_one = tx.prepare_cached(&sql[3])?;
            let mut pending_api: Vec<[i64; 7]> = Vec::with_capacity(MULTI_ROWS);
            let mut pending_rtl: Vec<[Option<i64>; 7]> = Vec::with_capacity(MULTI_ROWS);
            for row in rows {
                match row {
                    Row::Api(r) => {
                        // The name is an `Arc<str>` shared by every call of one API: look it up
                        // by address (the cache keeps the Arc alive, so an address is never reused).
                        let key = std::sync::Arc::as_ptr(&r.name) as *const u8 as usize;
                        let name = match names.get(&key) {
                            Some((_, id)) => *id,
                            None => {
                                let id = intern(&r.name, &tx)?;
                                names.insert(key, (r.name.clone(), id));
                                id
                            }
                        };
                        pending_api.push([r.id, r.pid as i64, r.tid as i64, r.start as i64, r.end as i64, name, r.id]);
                        if pending_api.len() == MULTI_ROWS {
                            bind_rows(&mut api_multi, &pending_api)?;
                            pending_api.clear();
                        }
                        apis += 1;
                    }
                    Row::RtlApi(r) => {
                        pending_rtl.push([Some(r.id), r.ret, Some(r.status as i64), r.a[0], r.a[1], r.a[2], r.a[3]]);
                        if pending_rtl.len() == MULTI_ROWS {
                            // rtl_api refers to rocpd_api: its rows first.
                            for r in pending_api.drain(..) {
                                bind_rows(&mut api_one, &[r])?;
                            }
                            bind_rows(&mut rtl_multi, &pending_rtl)?;
                            pending_rtl.clear();
                        }
                    }
                    other => {
                        // Rows of other tables refer to API rows: those go in first.
                        for r in pending_api.drain(..) {
                            bind_rows(&mut api_one, &[r])?;
                        }
                        for r in pending_rtl.drain(..) {
                            bind_rows(&mut rtl_one, &[r])?;
                        }
                        match other {
                            Row::ApiMeaning(m) => {
                                let name = intern(&m.name, &tx)?;
                                let arg = |i: usize| m.args[i].map(|a| a.name);
                                let hex = crate::api_meaning::hex_mask(&m.args);
                                tx.prepare_cached(
                                    "INSERT OR IGNORE INTO rtl_api_meaning (apiName_id, ret_kind, a0, a1, a2, a3, hex) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                )?
                                .execute(params![name, m.ret.name(), arg(0), arg(1), arg(2), arg(3), hex])?;
                            }
                            Row::Kernel(k) => {
                                let name = intern(&k.name, &tx)?;
                                tx.prepare_cached(
                                    "INSERT INTO rocpd_kernelapi (api_ptr_id, stream, gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ, groupSegmentSize, privateSegmentSize, kernelName_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10)",
                                )?
                                .execute(params![
                                    k.id,
                                    format!("0x{:x}", k.stream),
                                    k.grid[0], k.grid[1], k.grid[2],
                                    k.block[0], k.block[1], k.block[2],
                                    k.shmem as i64,
                                    name
                                ])?;
                            }
                            Row::Copy(c) => {
                                tx.prepare_cached(
                                    "INSERT INTO rocpd_copyapi (api_ptr_id, stream, size, width, height, kind, dst, src, sync) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                                )?
                                .execute(params![
                                    c.id,
                                    format!("0x{:x}", c.stream),
                                    c.size as i64,
                                    c.width as i64,
                                    c.height as i64,
                                    c.kind,
                                    format!("0x{:x}", c.dst),
                                    format!("0x{:x}", c.src),
                                    c.sync
                                ])?;
                            }
                            Row::Op(o) => {
                                let desc = intern(&o.description, &tx)?;
                                let ty = intern(o.op_type, &tx)?;
                                tx.prepare_cached(
                                    "INSERT INTO rocpd_op (gpuId, queueId, sequenceId, start, end, description_id, opType_id, correlation_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                                )?
                                .execute(params![o.gpu, o.queue, o.seq, o.start as i64, o.end as i64, desc, ty, o.correlation_id])?;
                                let op_id = tx.last_insert_rowid();
                                if let Some(api) = o.api_id {
                                    tx.prepare_cached("INSERT INTO rocpd_api_ops (api_id, op_id) VALUES (?1, ?2)")?
                                        .execute(params![api, op_id])?;
                                }
                                if let Some(link) = o.link {
                                    tx.prepare_cached("INSERT INTO rtl_op (op_id, link, pid) VALUES (?1, ?2, ?3)")?
                                        .execute(params![op_id, link as i64, o.pid])?;
                                }
                                if let Some(site) = o.site_api_id {
                                    tx.prepare_cached("INSERT INTO rtl_op_site (op_id, api_id) VALUES (?1, ?2)")?
                                        .execute(params![op_id, site])?;
                                }
                                ops += 1;
                            }
                            Row::Process(p) => {
                                tx.prepare_cached(
                                    "INSERT OR REPLACE INTO rtl_process (pid, ppid, exe, cmdline, first_ns, last_ns, exited) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                )?
                                .execute(params![p.pid, p.ppid, p.exe, p.cmdline, p.first_ns as i64, p.last_ns as i64, p.exited])?;
                            }
                            Row::Thread(t) => {
                                tx.prepare_cached("INSERT OR REPLACE INTO rtl_thread (pid, tid, comm) VALUES (?1, ?2, ?3)")?
                                    .execute(params![t.pid, t.tid, t.comm])?;
                            }
                            Row::Meta(m) => {
                                tx.prepare_cached("DELETE FROM rocpd_metadata WHERE tag = ?1")?.execute(params![m.tag])?;
                                tx.prepare_cached("INSERT INTO rocpd_metadata (tag, value) VALUES (?1, ?2)")?
                                    .execute(params![m.tag, m.value])?;
                            }
                            Row::Site(s) => super::sites::write(&tx, s)?,
                            Row::Api(_) | Row::RtlApi(_) => unreachable!("handled above"),
                        }
                    }
                }
            }
            for r in pending_api.chunks(1) {
                bind_rows(&mut api_one, r)?;
            }
            for r in pending_rtl.chunks(1) {
                bind_rows(&mut rtl_one, r)?;
            }
            Ok::<(), rusqlite::Error>(())
        }
        .map_err(&io_error)?;
        tx.commit().map_err(&io_error)?;
        self.stats.api_rows += apis;
        self.stats.op_rows += ops;
        self.stats.batches += 1;
        Ok(())
    }

    /// Records an attached library.
    pub fn add_library(&mut self, path: &str, dev: u64, ino: u64, probes: usize, missing: &[String]) -> Result<()> {
        self.conn
            .execute(
                "INSERT INTO rtl_library (path, dev, inode, probes, missing) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![path, dev as i64, ino as i64, probes as i64, missing.join(",")],
            )
            .map_err(|e| self.io_error(e))?;
        Ok(())
    }

    /// Checkpoints the WAL into the main file and leaves a single-file database.
    pub fn finish(self) -> Result<WriterStats> {
        self.conn
            .execute_batch(schema::INDEXES)
            .map_err(|e| anyhow!(Fatal::Output(format!("indexing {}: {e}{}", self.path.display(), moved_hint(&e)))))?;
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode=DELETE;")
            .map_err(|e| anyhow!(Fatal::Output(format!("finishing {}: {e}{}", self.path.display(), moved_hint(&e)))))?;
        // Nothing is chowned here: the files were given to the invoking user through their
        // descriptors when they were created, and SQLite rewrites the same inode.
        Ok(self.stats)
    }
}
