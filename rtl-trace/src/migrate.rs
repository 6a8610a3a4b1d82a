//! Bringing an older trace file up to the current schema, in place, without losing a row.
//!
//! Handles: files from an older rtl-ebpf (missing `rtl_*` tables or columns), RPD schema v2
//! files (`rocpd_api` without `category_id` / `domain_id` / `correlation_id`, `args_id` pointing
//! into `rocpd_string`, `rocpd_op` with `completionSignal`, no `rocpd_ustring`), and
//! rocm-trace-lite files (`roctxId` / `completionSignal` columns on `rocpd_op`). Everything is
//! done with `ALTER TABLE ... ADD COLUMN` and `CREATE ... IF NOT EXISTS` inside one transaction;
//! a second run finds nothing to do and changes nothing.
//!
//! A file from before `rtl_schema_version` 2 has no `rtl_api_meaning`: migration writes one row
//! per API name from the collector's API table (the [`ApiFacts`] the caller passes; rtl-ebpf's
//! is `rtl_user::probe::apis::meaning_of`), which is what that writer meant:
//! the argument positions of the table's APIs are unchanged since version 1, and APIs added to
//! the table since record a0..a3 = arguments 0..3, as `--apis all` did for them. (Version 1
//! stored every return as a 32-bit hipError_t, roctx excepted; with the return kind known, a
//! pointer or void return there is no longer read as a failure.)
//!
//! [`check`] is the read-only variant: it says what [`migrate`] would do, and fails the same way
//! on a file that is not a trace.

use anyhow::{bail, Context, Result};
use rusqlite::{Connection, OptionalExtension};

use crate::api_meaning::{hex_mask, ApiFacts};
use crate::schema;

/// What [`migrate`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigrateReport {
    /// `schema_version` in `rocpd_metadata` before (None when the tag was missing).
    pub rpd_version_before: Option<String>,
    /// `rtl_schema_version` before (None for a file not written by rtl-ebpf).
    pub rtl_version_before: Option<String>,
    /// One line per change made (or, from [`check`], that would be made). Empty: up to date.
    pub changes: Vec<String>,
}

impl MigrateReport {
    /// True when the file was (or would be) changed.
    pub fn changed(&self) -> bool {
        !self.changes.is_empty()
    }
}

/// Tables a file must have to be read as a trace at all.
const REQUIRED: &[(&str, &[&str])] = &[
    ("rocpd_string", &["id", "string"]),
    ("rocpd_api", &["id", "pid", "tid", "start", "end", "apiName_id"]),
    ("rocpd_op", &["id", "gpuId", "queueId", "start", "end", "description_id", "opType_id"]),
];

/// Columns added to existing tables when missing: (table, column, definition).
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    ("rocpd_api", "category_id", "INTEGER NOT NULL DEFAULT 1"),
    ("rocpd_api", "domain_id", "INTEGER NOT NULL DEFAULT 1"),
    ("rocpd_api", "args_id", "INTEGER NOT NULL DEFAULT 1"),
    ("rocpd_api", "correlation_id", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_op", "sequenceId", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_op", "correlation_id", "INTEGER NOT NULL DEFAULT 0"),
    ("rtl_op", "pid", "INTEGER"),
    ("rocpd_kernelapi", "stream", "TEXT NOT NULL DEFAULT ''"),
    ("rocpd_kernelapi", "privateSegmentSize", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_copyapi", "stream", "TEXT NOT NULL DEFAULT ''"),
    ("rocpd_copyapi", "width", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_copyapi", "height", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_copyapi", "dst", "TEXT NOT NULL DEFAULT ''"),
    ("rocpd_copyapi", "src", "TEXT NOT NULL DEFAULT ''"),
    ("rocpd_copyapi", "dstDevice", "INTEGER NOT NULL DEFAULT -1"),
    ("rocpd_copyapi", "srcDevice", "INTEGER NOT NULL DEFAULT -1"),
    ("rocpd_copyapi", "sync", "INTEGER NOT NULL DEFAULT 0"),
    ("rocpd_copyapi", "pinned", "INTEGER NOT NULL DEFAULT 0"),
    ("rtl_api", "ret", "INTEGER"),
    ("rtl_api", "status", "INTEGER NOT NULL DEFAULT 0"),
    ("rtl_api", "a0", "INTEGER"),
    ("rtl_api", "a1", "INTEGER"),
    ("rtl_api", "a2", "INTEGER"),
    ("rtl_api", "a3", "INTEGER"),
    ("rtl_process", "ppid", "INTEGER"),
    ("rtl_process", "exe", "TEXT"),
    ("rtl_process", "cmdline", "TEXT"),
    ("rtl_process", "first_ns", "INTEGER"),
    ("rtl_process", "last_ns", "INTEGER"),
    ("rtl_process", "exited", "INTEGER NOT NULL DEFAULT 0"),
];

fn file_name(conn: &Connection) -> String {
    match conn.path() {
        Some(p) if !p.is_empty() => p.to_string(),
        _ => "<in-memory trace>".to_string(),
    }
}

fn objects(conn: &Connection, kind: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare("SELECT name FROM sqlite_master WHERE type = ?1 ORDER BY name")?;
    let names = st.query_map([kind], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    Ok(names)
}

/// Column names of `table` (empty when it does not exist).
pub(crate) fn columns(conn: &Connection, table: &str) -> Result<Vec<String>> {
    let mut st = conn.prepare("SELECT name FROM pragma_table_info(?1)")?;
    let cols = st.query_map([table], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
    Ok(cols)
}

fn metadata(conn: &Connection, tag: &str) -> Result<Option<String>> {
    if columns(conn, "rocpd_metadata")?.is_empty() {
        return Ok(None);
    }
    Ok(conn
        .query_row("SELECT CAST(value AS TEXT) FROM rocpd_metadata WHERE tag = ?1 ORDER BY id DESC LIMIT 1", [tag], |r| {
            r.get::<_, Option<String>>(0)
        })
        .optional()?
        .flatten())
}

/// Validates that `conn` holds a trace and lists what [`migrate`] would change.
fn plan(conn: &Connection) -> Result<(MigrateReport, Vec<Step>)> {
    let name = file_name(conn);
    let tables = objects(conn, "table").map_err(|e| anyhow::anyhow!("{name}: cannot read the SQLite schema ({e}); is it a trace file?"))?;
    for (t, cols) in REQUIRED {
        if !tables.iter().any(|x| x == t) {
            bail!(
                "{name}: not an rtl-ebpf / rocpd trace: table `{t}` is missing (found tables: {})",
                if tables.is_empty() { "none".to_string() } else { tables.join(", ") }
            );
        }
        let have = columns(conn, t)?;
        for c in *cols {
            if !have.iter().any(|h| h.eq_ignore_ascii_case(c)) {
                bail!("{name}: not an rtl-ebpf / rocpd trace: table `{t}` has no column `{c}` (has {})", have.join(", "));
            }
        }
    }
    let mut report = MigrateReport {
        rpd_version_before: metadata(conn, "schema_version")?,
        rtl_version_before: metadata(conn, "rtl_schema_version")?,
        changes: vec![],
    };
    let mut steps = vec![];

    // Tables: which ones the schema would create.
    let wanted = schema_objects(schema::TABLES, "TABLE");
    let missing: Vec<String> = wanted.iter().filter(|t| !tables.contains(t)).cloned().collect();
    let v2_args = !tables.iter().any(|t| t == "rocpd_ustring");
    if !missing.is_empty() {
        report.changes.push(format!("create tables: {}", missing.join(", ")));
        steps.push(Step::Tables);
    }
    // Columns.
    for (t, c, def) in ADDED_COLUMNS {
        let have = columns(conn, t)?;
        if !have.is_empty() && !have.iter().any(|h| h.eq_ignore_ascii_case(c)) {
            report.changes.push(format!("add column {t}.{c}"));
            steps.push(Step::Column(t, c, def));
        }
    }
    // rtl_schema_version < 2: no rtl_api_meaning rows; write them from the API table.
    let before_meanings = report.rtl_version_before.as_deref().and_then(|v| v.parse::<i64>().ok()).is_none_or(|v| v < 2);
    if before_meanings {
        report.changes.push("describe each API's ret and a0..a3 in rtl_api_meaning (from the API table)".into());
        steps.push(Step::Meanings);
    }
    // RPD v2: args_id pointed into rocpd_string; v3 points into rocpd_ustring.
    if v2_args {
        report.changes.push("copy API argument strings from rocpd_string into rocpd_ustring (RPD v2 args_id)".into());
        steps.push(Step::V2Args);
    }
    // Seed rows.
    let seeded = |t: &str| -> Result<bool> {
        if !tables.iter().any(|x| x == t) {
            return Ok(false);
        }
        Ok(conn.query_row(&format!("SELECT count(*) FROM {t} WHERE id = 1"), [], |r| r.get::<_, i64>(0))? > 0)
    };
    if !seeded("rocpd_string")? || !seeded("rocpd_ustring")? {
        report.changes.push("insert the empty string as id 1".into());
        steps.push(Step::Seed);
    }
    // Indexes and views.
    let indexes = objects(conn, "index")?;
    let missing_idx: Vec<String> = schema_objects(schema::INDEXES, "INDEX").into_iter().filter(|i| !indexes.contains(i)).collect();
    if !missing_idx.is_empty() {
        report.changes.push(format!("create indexes: {}", missing_idx.join(", ")));
        steps.push(Step::Indexes);
    }
    let views = objects(conn, "view")?;
    let missing_views: Vec<String> = schema_objects(schema::VIEWS, "VIEW").into_iter().filter(|v| !views.contains(v)).collect();
    if !missing_views.is_empty() {
        report.changes.push(format!("create views: {}", missing_views.join(", ")));
        steps.push(Step::Views);
    }
    // Version tags.
    if report.rpd_version_before.as_deref() != Some(schema::RPD_SCHEMA_VERSION) {
        report.changes.push(format!(
            "set schema_version {} -> {}",
            report.rpd_version_before.as_deref().unwrap_or("(none)"),
            schema::RPD_SCHEMA_VERSION
        ));
        steps.push(Step::RpdVersion);
    }
    let rtl_now = schema::RTL_SCHEMA_VERSION.to_string();
    if report.rtl_version_before.as_deref() != Some(rtl_now.as_str()) {
        let older = report.rtl_version_before.as_deref().and_then(|v| v.parse::<i64>().ok()).is_none_or(|v| v < schema::RTL_SCHEMA_VERSION);
        if older {
            report
                .changes
                .push(format!("set rtl_schema_version {} -> {rtl_now}", report.rtl_version_before.as_deref().unwrap_or("(none)")));
            steps.push(Step::RtlVersion);
        } else {
            bail!(
                "{name}: written by a newer rtl-ebpf (rtl_schema_version {}, this build reads up to {rtl_now}); upgrade rtl-ebpf",
                report.rtl_version_before.as_deref().unwrap_or("?")
            );
        }
    }
    Ok((report, steps))
}

#[derive(Debug)]
enum Step {
    Tables,
    Column(&'static str, &'static str, &'static str),
    Meanings,
    V2Args,
    Seed,
    Indexes,
    Views,
    RpdVersion,
    RtlVersion,
}

/// Names of `CREATE <kind> IF NOT EXISTS name` statements in a schema constant.
fn schema_objects(sql: &str, kind: &str) -> Vec<String> {
    let pat = format!("CREATE {kind} IF NOT EXISTS ");
    sql.match_indices(&pat)
        .map(|(i, _)| sql[i + pat.len()..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
        .collect()
}

/// Id of '' in a string table, inserted when missing.
fn empty_string_id(conn: &Connection, table: &str) -> Result<i64> {
    if let Some(id) = conn.query_row(&format!("SELECT min(id) FROM {table} WHERE string = ''"), [], |r| r.get::<_, Option<i64>>(0))? {
        return Ok(id);
    }
    let free1: bool = conn.query_row(&format!("SELECT count(*) = 0 FROM {table} WHERE id = 1"), [], |r| r.get(0))?;
    if free1 {
        conn.execute(&format!("INSERT INTO {table} (id, string) VALUES (1, '')"), [])?;
        return Ok(1);
    }
    conn.execute(&format!("INSERT INTO {table} (string) VALUES ('')"), [])?;
    Ok(conn.last_insert_rowid())
}

/// One `rtl_api_meaning` row, from the API table, for every API name of the trace that has none.
fn write_meanings(conn: &Connection, facts: ApiFacts) -> Result<()> {
    let names: Vec<(i64, String)> = conn
        .prepare(
            "SELECT id, coalesce(string, '') FROM rocpd_string
             WHERE id IN (SELECT DISTINCT apiName_id FROM rocpd_api)
               AND id NOT IN (SELECT apiName_id FROM rtl_api_meaning)",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut ins =
        conn.prepare("INSERT INTO rtl_api_meaning (apiName_id, ret_kind, a0, a1, a2, a3, hex) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
    for (id, name) in names {
        let meaning = facts(&name);
        let m = meaning.args;
        let hex = hex_mask(&m);
        let a = |i: usize| m[i].map(|a| a.name);
        ins.execute(rusqlite::params![id, meaning.ret.name(), a(0), a(1), a(2), a(3), hex])?;
    }
    Ok(())
}

/// Says what [`migrate`] would change, without writing. Fails like [`migrate`] on bad input.
pub fn check(conn: &Connection) -> Result<MigrateReport> {
    Ok(plan(conn)?.0)
}

/// Migrates the trace open on `conn` to the current schema in place (one transaction).
/// Idempotent: on an up-to-date file it changes nothing and returns an empty report. `facts`
/// describes the APIs of a file that predates `rtl_api_meaning` (see the module's text).
pub fn migrate(conn: &Connection, facts: ApiFacts) -> Result<MigrateReport> {
    let name = file_name(conn);
    let (report, steps) = plan(conn)?;
    if steps.is_empty() {
        return Ok(report);
    }
    if conn.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(false) {
        bail!("{name}: needs migrating ({}) but is open read-only", report.changes.join("; "));
    }
    let run = || -> Result<()> {
        conn.execute_batch("BEGIN IMMEDIATE")?;
        for step in &steps {
            match step {
                Step::Tables => conn.execute_batch(schema::TABLES)?,
                Step::Column(t, c, def) => {
                    let def = if def.contains("DEFAULT 1") && matches!(*c, "category_id" | "domain_id") {
                        // Must name the empty string; in old files id 1 may be something else.
                        def.replace("DEFAULT 1", &format!("DEFAULT {}", empty_string_id(conn, "rocpd_string")?))
                    } else if *c == "args_id" {
                        def.replace("DEFAULT 1", &format!("DEFAULT {}", empty_string_id(conn, "rocpd_ustring")?))
                    } else {
                        def.to_string()
                    };
                    conn.execute_batch(&format!("ALTER TABLE {t} ADD COLUMN {c} {def}"))?
                }
                Step::Meanings => write_meanings(conn, facts)?,
                Step::V2Args => {
                    // rocpd_ustring was just created (empty): keep the ids, so args_id is unchanged.
                    conn.execute_batch(
                        "INSERT OR IGNORE INTO rocpd_ustring (id, string)
                             SELECT id, string FROM rocpd_string
                             WHERE id IN (SELECT DISTINCT args_id FROM rocpd_api);",
                    )?
                }
                Step::Seed => conn.execute_batch(schema::SEED)?,
                Step::Indexes => conn.execute_batch(schema::INDEXES)?,
                Step::Views => conn.execute_batch(schema::VIEWS)?,
                Step::RpdVersion => {
                    conn.execute(
                        "INSERT INTO rocpd_metadata (tag, value) VALUES ('migrated_from_schema_version', ?1)",
                        [report.rpd_version_before.clone().unwrap_or_else(|| "none".into())],
                    )?;
                    conn.execute("DELETE FROM rocpd_metadata WHERE tag = 'schema_version'", [])?;
                    conn.execute("INSERT INTO rocpd_metadata (tag, value) VALUES ('schema_version', ?1)", [schema::RPD_SCHEMA_VERSION])?;
                }
                Step::RtlVersion => {
                    conn.execute("DELETE FROM rocpd_metadata WHERE tag = 'rtl_schema_version'", [])?;
                    conn.execute(
                        "INSERT INTO rocpd_metadata (tag, value) VALUES ('rtl_schema_version', ?1)",
                        [schema::RTL_SCHEMA_VERSION.to_string()],
                    )?;
                }
            }
        }
        conn.execute_batch("COMMIT")?;
        Ok(())
    };
    if let Err(e) = run() {
        let _ = conn.execute_batch("ROLLBACK");
        return Err(e.context(format!("{name}: migrating to the current schema failed; the file is unchanged")));
    }
    Ok(report)
}

/// Checks the first bytes and the size of a file before SQLite opens it, for clear errors:
/// not SQLite at all, or truncated (shorter than its header says).
pub fn check_file(path: &std::path::Path) -> Result<()> {
    let name = path.display().to_string();
    let meta = std::fs::metadata(path).with_context(|| format!("{name}: cannot open the trace"))?;
    if meta.is_dir() {
        bail!("{name}: is a directory, not a trace file");
    }
    let mut f = std::fs::File::open(path).with_context(|| format!("{name}: cannot open the trace"))?;
    let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
    check_header(&name, &mut f, meta.len(), wal.exists())
}

/// [`check_file`] on a file already open (read from its start): `len` is its size, `has_wal`
/// whether a write-ahead log beside it may hold the rest of a short file.
pub fn check_header(name: &str, f: &mut std::fs::File, len: u64, has_wal: bool) -> Result<()> {
    use std::io::{Read, Seek};
    let mut header = [0u8; 100];
    f.seek(std::io::SeekFrom::Start(0)).with_context(|| format!("{name}: cannot read"))?;
    let mut n = 0;
    while n < header.len() {
        match f.read(&mut header[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).with_context(|| format!("{name}: cannot read")),
        }
    }
    if n == 0 {
        bail!("{name}: empty file, not a trace");
    }
    if n < 100 || &header[..16] != b"SQLite format 3\0" {
        bail!(
            "{name}: not a SQLite database (a trace is a rocpd SQLite file; the file starts with {:?})",
            String::from_utf8_lossy(&header[..n.min(16)])
        );
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65536u64,
        s => s as u64,
    };
    let pages = u32::from_be_bytes(header[28..32].try_into().unwrap()) as u64;
    let change = &header[24..28];
    let valid_for = &header[92..96];
    if pages > 0 && change == valid_for {
        let want = pages * page_size;
        // A WAL file next to it may hold the rest; only complain when there is none.
        if len < want && !has_wal {
            bail!(
                "{name}: truncated SQLite file: its header says {pages} pages of {page_size} bytes ({want} bytes) but the file has {len} bytes"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_object_names() {
        let t = schema_objects(schema::TABLES, "TABLE");
        assert!(t.contains(&"rocpd_api".to_string()) && t.contains(&"rtl_library".to_string()));
        assert!(schema_objects(schema::VIEWS, "VIEW").contains(&"busy".to_string()));
    }

    #[test]
    fn fresh_file_needs_nothing() {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(schema::TABLES).unwrap();
        c.execute_batch(schema::INDEXES).unwrap();
        c.execute_batch(schema::VIEWS).unwrap();
        c.execute_batch(schema::SEED).unwrap();
        c.execute_batch(&format!(
            "INSERT INTO rocpd_metadata(tag,value) VALUES('schema_version','{}'),('rtl_schema_version','{}')",
            schema::RPD_SCHEMA_VERSION,
            schema::RTL_SCHEMA_VERSION
        ))
        .unwrap();
        let r = migrate(&c, crate::api_meaning::unknown).unwrap();
        assert!(!r.changed(), "{:?}", r.changes);
    }
}
