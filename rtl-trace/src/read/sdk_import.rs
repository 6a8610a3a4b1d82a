//! Reading a rocprofiler-sdk "rocpd" database (schema 3.0: what `rocprofv3 --output-format
//! rocpd` writes, and what `convert --format rocpd-sdk` writes) as a trace: its data views
//! (`regions`, `kernels`, `memory_copies`, which every SDK file defines over its per-run
//! tables) are read into a trace of our layout in a private directory, so that `summary`,
//! `check` and `convert` read it like any trace. The file itself is only read.
//!
//! What becomes what:
//! - a region of a marker-range category (`MARKER_CORE_RANGE_API`, ...) -> a roctx range
//!   (`rocpd_op` with `gpuId` -1, `UserMarker`, on its thread); every other region -> an API call
//!   (`rocpd_api`: its pid, tid, start, end, name);
//! - a kernel dispatch -> a `KernelExecution` op on GPU `agent_type_index` (the GPU's index
//!   among GPUs), queue `queue_id`; a memory copy -> a `CopyHostToDevice` / `CopyDeviceToHost` /
//!   `CopyDeviceToDevice` / `Copy` op on the GPU end of the copy;
//! - each op is linked (`rocpd_api_ops`) to the API call whose region has its event's
//!   `stack_id` (the SDK's id of the causing call; `corr_id` when a file leaves `stack_id` empty);
//! - metadata: `source_format` = `rocprofiler-sdk rocpd`, `hostname` from `rocpd_info_node`.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

/// True when `conn` holds a rocprofiler-sdk rocpd database (its data views) and not a trace
/// of our layout.
pub(crate) fn is_sdk(conn: &Connection) -> Result<bool> {
    let has = |kind: &str, name: &str| -> Result<bool> {
        Ok(conn.query_row("SELECT count(*) > 0 FROM sqlite_master WHERE type = ?1 AND name = ?2", [kind, name], |r| r.get(0))?)
    };
    Ok(!has("table", "rocpd_op")? && has("view", "regions")? && has("view", "kernels")? && has("view", "memory_copies")?)
}

/// The op type of an SDK copy category / name.
fn copy_type(name: &str) -> &'static str {
    let n = name.to_ascii_uppercase();
    if n.contains("HOST_TO_DEVICE") {
        "CopyHostToDevice"
    } else if n.contains("DEVICE_TO_HOST") {
        "CopyDeviceToHost"
    } else if n.contains("DEVICE_TO_DEVICE") {
        "CopyDeviceToDevice"
    } else {
        "Copy"
    }
}

/// Writes the SDK file open on `sdk` as a trace at `out` (a new file); returns the counts
/// (api calls, markers, kernel ops, copy ops).
pub(crate) fn import(name: &str, sdk: &Connection, out: &Path) -> Result<(i64, i64, i64, i64)> {
    let db = Connection::open_with_flags(
        out,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .with_context(|| format!("{name}: cannot write its working copy"))?;
    db.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")?;
    db.execute_batch(crate::schema::TABLES)?;
    db.execute_batch(crate::schema::SEED)?;
    db.execute_batch("BEGIN")?;
    let mut strings: HashMap<String, i64> = HashMap::new();
    let mut string = |db: &Connection, s: &str| -> Result<i64> {
        if let Some(&id) = strings.get(s) {
            return Ok(id);
        }
        let id = match db.query_row("SELECT id FROM rocpd_string WHERE string = ?1", [s], |r| r.get(0)) {
            Ok(id) => id,
            Err(rusqlite::Error::QueryReturnedNoRows) => {
                db.execute("INSERT INTO rocpd_string(string) VALUES (?1)", [s])?;
                db.last_insert_rowid()
            }
            Err(e) => return Err(e.into()),
        };
        strings.insert(s.to_string(), id);
        Ok(id)
    };
    let empty = string(&db, "")?;
    let read = |what: &str| format!("{name}: reading the rocprofiler-sdk view `{what}`");

    // Regions: API calls and marker ranges. The region's stack id -> our API id.
    let mut calls: HashMap<i64, i64> = HashMap::new();
    let (mut n_api, mut n_markers) = (0i64, 0i64);
    {
        let mut st = sdk
            .prepare("SELECT coalesce(category, ''), coalesce(name, ''), pid, tid, start, end, coalesce(stack_id, corr_id) FROM regions ORDER BY start")
            .with_context(|| read("regions"))?;
        let mut rows = st.query([]).with_context(|| read("regions"))?;
        while let Some(r) = rows.next()? {
            let (cat, nm): (String, String) = (r.get(0)?, r.get(1)?);
            let (pid, tid, start, end): (i64, Option<i64>, i64, i64) = (r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?);
            let stack: Option<i64> = r.get(6)?;
            let tid = tid.unwrap_or(pid);
            let n = string(&db, &nm)?;
            if cat.starts_with("MARKER") && cat.contains("RANGE") {
                let ty = string(&db, "UserMarker")?;
                db.execute(
                    "INSERT INTO rocpd_op(gpuId, queueId, sequenceId, start, end, description_id, opType_id) VALUES (-1, ?1, 0, ?2, ?3, ?4, ?5)",
                    params![tid, start, end.max(start), n, ty],
                )?;
                n_markers += 1;
                continue;
            }
            db.execute(
                "INSERT INTO rocpd_api(pid, tid, start, end, apiName_id, args_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![pid, tid, start, end.max(start), n, 1],
            )?;
            let id = db.last_insert_rowid();
            db.execute("UPDATE rocpd_api SET correlation_id = ?1 WHERE id = ?1", [id])?;
            if let Some(s) = stack {
                calls.entry(s).or_insert(id);
            }
            n_api += 1;
        }
    }
    let op = |db: &Connection, gpu: i64, queue: i64, start: i64, end: i64, desc: i64, ty: i64, stack: Option<i64>| -> Result<()> {
        let api = stack.and_then(|s| calls.get(&s).copied());
        db.execute(
            "INSERT INTO rocpd_op(gpuId, queueId, sequenceId, start, end, description_id, opType_id, correlation_id) VALUES (?1, ?2, 0, ?3, ?4, ?5, ?6, ?7)",
            params![gpu, queue, start, end.max(start), desc, ty, api.unwrap_or(0)],
        )?;
        let id = db.last_insert_rowid();
        if let Some(a) = api {
            db.execute("INSERT INTO rocpd_api_ops(api_id, op_id) VALUES (?1, ?2)", [a, id])?;
        }
        Ok(())
    };
    let mut n_kernels = 0i64;
    {
        let kt = string(&db, "KernelExecution")?;
        let mut st = sdk
            .prepare("SELECT coalesce(name, ''), coalesce(agent_type_index, agent_abs_index, 0), coalesce(queue_id, 0), start, end, coalesce(stack_id, corr_id) FROM kernels ORDER BY start")
            .with_context(|| read("kernels"))?;
        let mut rows = st.query([]).with_context(|| read("kernels"))?;
        while let Some(r) = rows.next()? {
            let nm: String = r.get(0)?;
            let d = string(&db, &nm)?;
            op(&db, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, d, kt, r.get(5)?)?;
            n_kernels += 1;
        }
    }
    let mut n_copies = 0i64;
    {
        let mut st = sdk
            .prepare(
                "SELECT coalesce(name, ''), coalesce(category, ''),
                        iif(dst_agent_type = 'GPU', dst_agent_type_index, src_agent_type_index), coalesce(queue_id, 0), start, end,
                        coalesce(stack_id, corr_id)
                 FROM memory_copies ORDER BY start",
            )
            .with_context(|| read("memory_copies"))?;
        let mut rows = st.query([]).with_context(|| read("memory_copies"))?;
        while let Some(r) = rows.next()? {
            let (nm, _cat): (String, String) = (r.get(0)?, r.get(1)?);
            let ty = string(&db, copy_type(&nm))?;
            let gpu: Option<i64> = r.get(2)?;
            op(&db, gpu.unwrap_or(0), r.get(3)?, r.get(4)?, r.get(5)?, empty, ty, r.get(6)?)?;
            n_copies += 1;
        }
    }
    let host: Option<String> = sdk
        .query_row("SELECT hostname FROM rocpd_info_node LIMIT 1", [], |r| r.get(0))
        .optional()
        .with_context(|| read("rocpd_info_node"))?
        .flatten();
    for (tag, v) in [
        ("schema_version", crate::schema::RPD_SCHEMA_VERSION.to_string()),
        ("rtl_schema_version", crate::schema::RTL_SCHEMA_VERSION.to_string()),
        ("source_format", "rocprofiler-sdk rocpd".to_string()),
    ]
    .into_iter()
    .chain(host.map(|h| ("hostname", h)))
    {
        db.execute("INSERT INTO rocpd_metadata(tag, value) VALUES (?1, ?2)", params![tag, v])?;
    }
    db.execute_batch("COMMIT")?;
    db.execute_batch(crate::schema::INDEXES)?;
    db.execute_batch(crate::schema::VIEWS)?;
    Ok((n_api, n_markers, n_kernels, n_copies))
}
