//! `rtl-ebpf merge -o OUT.db A.db B.db ...`: one trace from several (runs, processes, nodes).
//!
//! Every row of every table is kept. Ids are remapped by offsets (API, op), strings are
//! de-duplicated through a dictionary (`rocpd_string`, `rocpd_ustring`), correlation ids are
//! shifted so they stay unique. With `out_host_tag`, each distinct host gets RPD's multi-node
//! numbering (pid + node * pid_stride, gpuId + node * gpu_stride, as `rocpd_metadata`'s
//! `pid_stride` / `gpu_stride` say) and its timestamps are moved onto the first host's
//! CLOCK_MONOTONIC through `realtime_minus_monotonic_ns`. Each input's metadata is kept under
//! `input<N>.<tag>`, with `input<N>.path` / `input<N>.hostname` and the offsets applied.
//!
//! All of it is SQL (`INSERT ... SELECT` from the attached input), one transaction per input;
//! the output is written to a temporary file renamed into place at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use std::os::unix::fs::MetadataExt;

use rusqlite::{params, Connection, OptionalExtension};

use crate::api_meaning::ApiFacts;
use crate::error::Fatal;

use crate::schema;

/// RPD's multi-node strides (also written into the output's metadata).
pub const PID_STRIDE: i64 = 10_000_000;
pub const GPU_STRIDE: i64 = 1000;

/// Tables copied, in order.
pub const MERGED_TABLES: &[&str] = &[
    "rocpd_string",
    "rocpd_ustring",
    "rocpd_api",
    "rocpd_op",
    "rocpd_api_ops",
    "rocpd_kernelapi",
    "rocpd_copyapi",
    "rocpd_monitor",
    "rocpd_counter",
    "rocpd_stackframe",
    "rtl_api",
    "rtl_op",
    "rtl_process",
    "rtl_thread",
    "rtl_library",
    "rtl_frame",
    "rtl_stack",
    "rtl_stack_frame",
    "rtl_python_frame",
    "rtl_api_stack",
    "rtl_capture",
    "rtl_capture_call",
    "rtl_graph_launch",
    "rtl_op_site",
    "rocpd_metadata",
];

/// What happened to one input.
#[derive(Debug, Clone, Default)]
pub struct MergedInput {
    pub path: PathBuf,
    pub hostname: String,
    pub node: i64,
    pub pid_offset: i64,
    pub gpu_offset: i64,
    pub time_shift_ns: i64,
    pub api_id_offset: i64,
    pub op_id_offset: i64,
    pub correlation_offset: i64,
    /// Added to this input's `rtl_frame`, `rtl_stack` and `rtl_capture` ids (call sites).
    pub frame_id_offset: i64,
    pub stack_id_offset: i64,
    pub capture_id_offset: i64,
    /// Rows per table in this input.
    pub rows: BTreeMap<String, i64>,
}

/// Result of [`merge`].
#[derive(Debug, Clone, Default)]
pub struct MergeStats {
    pub inputs: Vec<MergedInput>,
    /// Rows per table in the output.
    pub rows: BTreeMap<String, i64>,
    /// rtl_process rows whose pid another input already had (taken as the same process: first /
    /// last seen widened). Use `out_host_tag` for inputs from different hosts.
    pub processes_combined: i64,
    /// References to strings missing from their input's string table (mapped to '').
    pub dangling_strings: i64,
    /// APIs an input describes differently from an earlier input (`rtl_api_meaning`: another
    /// return kind or argument meanings, from another rtl-ebpf version): the first input's
    /// meaning is kept, one row per API name.
    pub api_meanings_differing: i64,
}

fn meta(c: &Connection, tag: &str) -> Result<Option<String>> {
    Ok(c.query_row("SELECT CAST(value AS TEXT) FROM rocpd_metadata WHERE tag = ?1 ORDER BY id DESC LIMIT 1", [tag], |r| r.get(0))
        .optional()?
        .flatten())
}

/// Opens one input (validated, migrated in a private copy when needed, see
/// [`super::open::open_trace`]) and reads its host name and clock offset.
fn prepare(path: &Path, facts: ApiFacts) -> Result<(super::open::Trace, String, Option<i64>)> {
    let t = super::open::open_trace(path, facts)?;
    let host = meta(&t, "hostname")?.or(meta(&t, "host")?).or(meta(&t, "node")?).unwrap_or_default();
    let rmm = meta(&t, "realtime_minus_monotonic_ns")?.and_then(|v| v.trim().parse::<i64>().ok());
    Ok((t, host, rmm))
}

fn count(c: &Connection, table: &str) -> Result<i64> {
    Ok(c.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))?)
}

/// Merges `inputs` into a new trace `out` (replaced if it exists).
pub fn merge(inputs: &[PathBuf], facts: ApiFacts, out: &Path, out_host_tag: bool) -> Result<MergeStats> {
    if inputs.is_empty() {
        bail!("merge: no input traces given");
    }
    // The same file twice would double every row; the output must not be an input.
    for (i, a) in inputs.iter().enumerate() {
        if let Ok(ma) = std::fs::metadata(a) {
            for b in &inputs[..i] {
                if std::fs::metadata(b).is_ok_and(|mb| (mb.dev(), mb.ino()) == (ma.dev(), ma.ino())) {
                    return Err(anyhow::anyhow!(Fatal::Usage(format!(
                        "merge: {} and {} are the same file: each trace may be given once",
                        crate::term::path(b),
                        crate::term::path(a)
                    ))));
                }
            }
        }
    }
    let input_refs: Vec<&Path> = inputs.iter().map(PathBuf::as_path).collect();
    super::open::refuse_output_that_is_an_input(out, &input_refs)?;
    // Validate and migrate every input before writing anything.
    let mut prepared = vec![];
    for p in inputs {
        prepared.push(prepare(p, facts)?);
    }
    // The output is built in a private directory (0700, random name) beside it and renamed into
    // place: nothing another user planted can be followed or replayed into it.
    let shown = crate::term::path(out);
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let work = tempfile::Builder::new()
        .prefix(".rtl-merge-")
        .tempdir_in(dir)
        .map_err(|e| anyhow::anyhow!(Fatal::Output(format!("{shown}: cannot create a working directory beside it: {e}"))))?;
    let tmp = work.path().join("merged.db");
    // Private like the trace (it holds command lines): made here, 0600, before SQLite opens it.
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| anyhow::anyhow!(Fatal::Output(format!("{shown}: cannot create: {e}"))))?;
    }
    let res = (|| -> Result<MergeStats> {
        let c = Connection::open(&tmp).map_err(|e| anyhow::anyhow!(Fatal::Output(format!("{shown}: cannot create: {e}"))))?;
        c.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -262144;")?;
        c.execute_batch(schema::TABLES)?;
        c.execute_batch(schema::SEED)?;
        c.execute_batch(
            "CREATE TEMP TABLE sdict (string TEXT PRIMARY KEY, id INTEGER NOT NULL);
             CREATE TEMP TABLE udict (string TEXT PRIMARY KEY, id INTEGER NOT NULL);
             INSERT INTO sdict VALUES ('', 1); INSERT INTO udict VALUES ('', 1);",
        )?;
        let mut stats = MergeStats::default();
        let mut hosts: Vec<String> = vec![];
        let ref_rmm = prepared.first().and_then(|p| p.2);
        for (i, (src, host, rmm)) in prepared.iter().enumerate() {
            // A file that does not name its host is taken as coming from a host of its own.
            let host_key = if host.is_empty() { format!("unknown-host-of-input{i}") } else { host.clone() };
            let node = match hosts.iter().position(|h| *h == host_key) {
                Some(n) => n,
                None => {
                    hosts.push(host_key.clone());
                    hosts.len() - 1
                }
            } as i64;
            let (poff, goff) = if out_host_tag { (node * PID_STRIDE, node * GPU_STRIDE) } else { (0, 0) };
            let shift = match (out_host_tag, node != 0, rmm, ref_rmm) {
                (true, true, Some(r), Some(r0)) => r - r0,
                _ => 0,
            };
            c.execute("ATTACH DATABASE ?1 AS src", [src.uri()])?;
            let mut inp = MergedInput {
                path: inputs[i].clone(),
                hostname: host.clone(),
                node,
                pid_offset: poff,
                gpu_offset: goff,
                time_shift_ns: shift,
                ..Default::default()
            };
            for t in MERGED_TABLES {
                inp.rows.insert(t.to_string(), count(&c, &format!("src.{t}"))?);
            }
            let mut step = || -> Result<(i64, i64)> {
                c.execute_batch("BEGIN")?;
                let max = |sql: &str| -> Result<i64> { Ok(c.query_row(sql, [], |r| r.get::<_, Option<i64>>(0))?.unwrap_or(0)) };
                inp.api_id_offset = max("SELECT max(id) FROM main.rocpd_api")?;
                inp.op_id_offset = max("SELECT max(id) FROM main.rocpd_op")?;
                inp.correlation_offset =
                    max("SELECT max(x) FROM (SELECT max(correlation_id) x FROM main.rocpd_api UNION ALL SELECT max(correlation_id) FROM main.rocpd_op)")?;
                inp.frame_id_offset = max("SELECT max(id) FROM main.rtl_frame")?;
                inp.stack_id_offset = max("SELECT max(id) FROM main.rtl_stack")?;
                inp.capture_id_offset = max("SELECT max(id) FROM main.rtl_capture")?;
                // String dictionaries and the old -> new id maps of this input.
                c.execute_batch(
                    "DROP TABLE IF EXISTS temp.smap; DROP TABLE IF EXISTS temp.umap;
                     CREATE TEMP TABLE smap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL);
                     CREATE TEMP TABLE umap (old INTEGER PRIMARY KEY, new INTEGER NOT NULL);",
                )?;
                for (tab, dict, map) in [("rocpd_string", "sdict", "smap"), ("rocpd_ustring", "udict", "umap")] {
                    let before = max(&format!("SELECT max(id) FROM main.{tab}"))?;
                    c.execute_batch(&format!(
                        "INSERT INTO main.{tab} (string)
                             SELECT s FROM (SELECT DISTINCT coalesce(string, '') AS s FROM src.{tab})
                             WHERE s NOT IN (SELECT string FROM temp.{dict});
                         INSERT OR IGNORE INTO temp.{dict} (string, id) SELECT string, id FROM main.{tab} WHERE id > {before};
                         INSERT INTO temp.{map} (old, new)
                             SELECT s.id, d.id FROM src.{tab} s JOIN temp.{dict} d ON d.string = coalesce(s.string, '');"
                    ))?;
                }
                let dangling: i64 = c.query_row(
                    "SELECT (SELECT count(*) FROM src.rocpd_api WHERE apiName_id NOT IN (SELECT old FROM temp.smap))
                          + (SELECT count(*) FROM src.rocpd_op WHERE description_id NOT IN (SELECT old FROM temp.smap)
                                                               OR opType_id NOT IN (SELECT old FROM temp.smap))",
                    [],
                    |r| r.get(0),
                )?;
                let s = |col: &str| format!("coalesce((SELECT new FROM temp.smap WHERE old = {col}), 1)");
                let u = |col: &str| format!("coalesce((SELECT new FROM temp.umap WHERE old = {col}), 1)");
                let corr = |col: &str| format!("CASE WHEN {col} != 0 THEN {col} + :coff ELSE 0 END");
                let aoff = inp.api_id_offset;
                let ooff = inp.op_id_offset;
                let coff = inp.correlation_offset;
                let (foff, soff, capoff) = (inp.frame_id_offset, inp.stack_id_offset, inp.capture_id_offset);
                let named = |sql: String| -> Result<()> {
                    let mut st = c.prepare(&sql)?;
                    let mut p: Vec<(&str, &dyn rusqlite::ToSql)> = vec![];
                    for (k, v) in [
                        (":aoff", &aoff),
                        (":ooff", &ooff),
                        (":coff", &coff),
                        (":poff", &poff),
                        (":goff", &goff),
                        (":shift", &shift),
                        (":foff", &foff),
                        (":soff", &soff),
                        (":capoff", &capoff),
                    ] {
                        if sql.contains(k) {
                            p.push((k, v as &dyn rusqlite::ToSql));
                        }
                    }
                    st.execute(p.as_slice())?;
                    Ok(())
                };
                named(format!(
                    "INSERT INTO main.rocpd_api (id, pid, tid, start, end, apiName_id, category_id, domain_id, args_id, correlation_id)
                     SELECT id + :aoff, pid + :poff, tid + :poff, start + :shift, end + :shift, {}, {}, {}, {}, {} FROM src.rocpd_api ORDER BY id",
                    s("apiName_id"), s("category_id"), s("domain_id"), u("args_id"), corr("correlation_id")
                ))?;
                named(format!(
                    "INSERT INTO main.rocpd_op (id, gpuId, queueId, sequenceId, start, end, description_id, opType_id, correlation_id)
                     SELECT id + :ooff, CASE WHEN gpuId >= 0 THEN gpuId + :goff ELSE gpuId END,
                            CASE WHEN gpuId < 0 AND queueId > 0 THEN queueId + :poff ELSE queueId END,
                            coalesce(sequenceId, 0), start + :shift, end + :shift, {}, {}, {} FROM src.rocpd_op ORDER BY id",
                    s("description_id"),
                    s("opType_id"),
                    corr("correlation_id")
                ))?;
                named("INSERT INTO main.rocpd_api_ops (api_id, op_id) SELECT api_id + :aoff, op_id + :ooff FROM src.rocpd_api_ops ORDER BY id".into())?;
                named(format!(
                    "INSERT INTO main.rocpd_kernelapi (api_ptr_id, stream, gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ,
                                                       groupSegmentSize, privateSegmentSize, kernelName_id)
                     SELECT api_ptr_id + :aoff, coalesce(stream, ''), gridX, gridY, gridZ, workgroupX, workgroupY, workgroupZ,
                            coalesce(groupSegmentSize, 0), coalesce(privateSegmentSize, 0), {} FROM src.rocpd_kernelapi",
                    s("kernelName_id")
                ))?;
                named(
                    "INSERT INTO main.rocpd_copyapi (api_ptr_id, stream, size, width, height, kind, dst, src, dstDevice, srcDevice, sync, pinned)
                     SELECT api_ptr_id + :aoff, coalesce(stream, ''), size, coalesce(width, 0), coalesce(height, 0), kind,
                            coalesce(dst, ''), coalesce(src, ''),
                            CASE WHEN dstDevice >= 0 THEN dstDevice + :goff ELSE coalesce(dstDevice, -1) END,
                            CASE WHEN srcDevice >= 0 THEN srcDevice + :goff ELSE coalesce(srcDevice, -1) END,
                            coalesce(sync, 0), coalesce(pinned, 0) FROM src.rocpd_copyapi"
                        .into(),
                )?;
                named(
                    "INSERT INTO main.rocpd_monitor (deviceType, deviceId, monitorType, start, end, value)
                     SELECT deviceType, deviceId + :goff, monitorType, start + :shift, end + :shift, value FROM src.rocpd_monitor ORDER BY id"
                        .into(),
                )?;
                named(format!(
                    "INSERT INTO main.rocpd_counter (value, op_id, name_id) SELECT value, op_id + :ooff, {} FROM src.rocpd_counter ORDER BY id",
                    s("name_id")
                ))?;
                named(format!(
                    "INSERT INTO main.rocpd_stackframe (api_ptr_id, depth, name_id) SELECT api_ptr_id + :aoff, depth, {} FROM src.rocpd_stackframe ORDER BY id",
                    s("name_id")
                ))?;
                named("INSERT INTO main.rtl_api (api_id, ret, status, a0, a1, a2, a3) SELECT api_id + :aoff, ret, status, a0, a1, a2, a3 FROM src.rtl_api".into())?;
                // One meaning per API name: the first input's; later differing ones counted.
                stats.api_meanings_differing += c.query_row(
                    &format!(
                        "SELECT count(*) FROM src.rtl_api_meaning s JOIN main.rtl_api_meaning m ON m.apiName_id = {}
                         WHERE m.ret_kind IS NOT s.ret_kind OR m.a0 IS NOT s.a0 OR m.a1 IS NOT s.a1
                            OR m.a2 IS NOT s.a2 OR m.a3 IS NOT s.a3 OR m.hex IS NOT s.hex",
                        s("s.apiName_id")
                    ),
                    [],
                    |r| r.get::<_, i64>(0),
                )?;
                c.execute_batch(&format!(
                    "INSERT INTO main.rtl_api_meaning (apiName_id, ret_kind, a0, a1, a2, a3, hex)
                     SELECT {}, ret_kind, a0, a1, a2, a3, hex FROM src.rtl_api_meaning WHERE true
                     ON CONFLICT (apiName_id) DO NOTHING",
                    s("apiName_id")
                ))?;
                named("INSERT INTO main.rtl_op (op_id, link, pid) SELECT op_id + :ooff, link, pid + :poff FROM src.rtl_op".into())?;
                // Call sites and captures (--stacks): every id moved by its table's offset.
                // Frames and stacks are not de-duplicated across inputs (each input's are).
                named(
                    "INSERT INTO main.rtl_frame (id, module, address, symbol, symbol_offset, runtime)
                       SELECT id + :foff, module, address, symbol, symbol_offset, runtime FROM src.rtl_frame ORDER BY id"
                        .into(),
                )?;
                named(
                    "INSERT INTO main.rtl_stack (id, depth, site_frame_id, truncated)
                       SELECT id + :soff, depth, site_frame_id + :foff, truncated FROM src.rtl_stack ORDER BY id"
                        .into(),
                )?;
                named(
                    "INSERT INTO main.rtl_stack_frame (stack_id, depth, frame_id)
                       SELECT stack_id + :soff, depth, frame_id + :foff FROM src.rtl_stack_frame"
                        .into(),
                )?;
                named(
                    "INSERT INTO main.rtl_python_frame (frame_id, line, first_line)
                       SELECT frame_id + :foff, line, first_line FROM src.rtl_python_frame"
                        .into(),
                )?;
                named(
                    "INSERT INTO main.rtl_api_stack (api_id, stack_id) SELECT api_id + :aoff, stack_id + :soff FROM src.rtl_api_stack"
                        .into(),
                )?;
                named("INSERT INTO main.rtl_capture (id, pid, stream, begin_api_id, end_api_id, graph)
                       SELECT id + :capoff, pid + :poff, stream, begin_api_id + :aoff, end_api_id + :aoff, graph FROM src.rtl_capture ORDER BY id".into())?;
                named(
                    "INSERT INTO main.rtl_capture_call (capture_id, node, api_id)
                       SELECT capture_id + :capoff, node, api_id + :aoff FROM src.rtl_capture_call"
                        .into(),
                )?;
                named("INSERT INTO main.rtl_graph_launch (api_id, capture_id) SELECT api_id + :aoff, capture_id + :capoff FROM src.rtl_graph_launch".into())?;
                named("INSERT INTO main.rtl_op_site (op_id, api_id) SELECT op_id + :ooff, api_id + :aoff FROM src.rtl_op_site".into())?;
                let procs_before = count(&c, "main.rtl_process")?;
                named(
                    "INSERT INTO main.rtl_process (pid, ppid, exe, cmdline, first_ns, last_ns, exited)
                     SELECT pid + :poff, CASE WHEN ppid > 0 THEN ppid + :poff ELSE ppid END, exe, cmdline,
                            first_ns + :shift, last_ns + :shift, exited FROM src.rtl_process WHERE true
                     ON CONFLICT (pid) DO UPDATE SET
                         first_ns = min(coalesce(first_ns, excluded.first_ns), coalesce(excluded.first_ns, first_ns)),
                         last_ns = max(coalesce(last_ns, excluded.last_ns), coalesce(excluded.last_ns, last_ns)),
                         exited = max(exited, excluded.exited),
                         exe = coalesce(exe, excluded.exe), cmdline = coalesce(cmdline, excluded.cmdline)"
                        .into(),
                )?;
                named(
                    "INSERT OR REPLACE INTO main.rtl_thread (pid, tid, comm) SELECT pid + :poff, tid + :poff, comm FROM src.rtl_thread"
                        .into(),
                )?;
                let combined = count(&c, "src.rtl_process")? - (count(&c, "main.rtl_process")? - procs_before);
                c.execute_batch("INSERT INTO main.rtl_library (path, dev, inode, probes, missing) SELECT path, dev, inode, probes, missing FROM src.rtl_library ORDER BY id")?;
                c.execute(
                    "INSERT INTO main.rocpd_metadata (tag, value) SELECT ?1 || tag, value FROM src.rocpd_metadata ORDER BY id",
                    [format!("input{i}.")],
                )?;
                let add = |tag: &str, v: String| -> Result<()> {
                    c.execute("INSERT INTO main.rocpd_metadata (tag, value) VALUES (?1, ?2)", params![format!("input{i}.{tag}"), v])?;
                    Ok(())
                };
                add("path", inputs[i].display().to_string())?;
                add("hostname", if host.is_empty() { "unknown".into() } else { host.clone() })?;
                add("node", node.to_string())?;
                add("pid_offset", poff.to_string())?;
                add("gpu_offset", goff.to_string())?;
                add("time_shift_ns", shift.to_string())?;
                add("api_id_offset", aoff.to_string())?;
                add("op_id_offset", ooff.to_string())?;
                add("correlation_id_offset", coff.to_string())?;
                add("frame_id_offset", foff.to_string())?;
                add("stack_id_offset", soff.to_string())?;
                add("capture_id_offset", capoff.to_string())?;
                c.execute_batch("COMMIT")?;
                Ok((combined, dangling))
            };
            let r = step();
            if r.is_err() {
                let _ = c.execute_batch("ROLLBACK");
            }
            let (combined, dangling) = r.with_context(|| format!("merging {}", inputs[i].display()))?;
            c.execute_batch("DETACH DATABASE src")?;
            stats.processes_combined += combined;
            stats.dangling_strings += dangling;
            stats.inputs.push(inp);
        }
        // The output's own metadata: totals of the drop counters, versions, strides.
        let first_meta = |tag: &str| -> Result<Option<String>> {
            Ok(c.query_row("SELECT value FROM rocpd_metadata WHERE tag = 'input0.' || ?1 ORDER BY id LIMIT 1", [tag], |r| {
                r.get::<_, Option<String>>(0)
            })
            .optional()?
            .flatten())
        };
        let mut own: Vec<(String, String)> = vec![
            ("schema_version".into(), schema::RPD_SCHEMA_VERSION.into()),
            ("rtl_schema_version".into(), schema::RTL_SCHEMA_VERSION.to_string()),
            ("merged_inputs".into(), inputs.len().to_string()),
            ("gpu_stride".into(), GPU_STRIDE.to_string()),
            ("pid_stride".into(), PID_STRIDE.to_string()),
            ("merge_host_tag".into(), (out_host_tag as i32).to_string()),
        ];
        for t in ["clock", "realtime_minus_monotonic_ns", "hostname"] {
            // one host: its name; several: see input<N>.hostname
            if t == "hostname" && hosts.len() > 1 {
                own.push((t.into(), hosts.join(",")));
                continue;
            }
            if let Some(v) = first_meta(t)? {
                own.push((t.into(), v));
            }
        }
        {
            let words = super::metadata::LOSS_WORDS.iter().map(|w| format!("t LIKE '%{w}%'")).collect::<Vec<_>>().join(" OR ");
            let mut st = c.prepare(&format!(
                "SELECT substr(tag, instr(tag, '.') + 1) AS t, sum(CAST(value AS INTEGER)) FROM rocpd_metadata
                 WHERE tag GLOB 'input[0-9]*.*' AND CAST(value AS INTEGER) || '' = trim(value)
                   AND ({words})
                 GROUP BY t"
            ))?;
            let rows =
                st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?.to_string())))?.collect::<Result<Vec<_>, _>>()?;
            own.extend(rows);
        }
        for (k, v) in own {
            c.execute("INSERT INTO rocpd_metadata (tag, value) VALUES (?1, ?2)", params![k, v])?;
        }
        c.execute_batch(schema::INDEXES)?;
        c.execute_batch(schema::VIEWS)?;
        for t in MERGED_TABLES {
            stats.rows.insert(t.to_string(), count(&c, t)?);
        }
        drop(c);
        crate::writer::chown_to_invoker(&tmp);
        std::fs::rename(&tmp, out).map_err(|e| anyhow::anyhow!(Fatal::Output(format!("{shown}: cannot write: {e}"))))?;
        Ok(stats)
    })();
    drop(prepared);
    drop(work);
    res
}

/// A table for the terminal: one row per input, then the output's row counts (paths and
/// host names escaped).
impl std::fmt::Display for MergeStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::term::{escape, path};
        let rows = |m: &BTreeMap<String, i64>, t: &str| m.get(t).copied().unwrap_or(0);
        let head = ["input", "host", "node", "API calls", "GPU ops", "links", "processes", "pid offset", "time shift ns"];
        let mut cells: Vec<Vec<String>> = self
            .inputs
            .iter()
            .map(|inp| {
                vec![
                    path(&inp.path),
                    if inp.hostname.is_empty() { "unknown".into() } else { escape(&inp.hostname).into_owned() },
                    inp.node.to_string(),
                    rows(&inp.rows, "rocpd_api").to_string(),
                    rows(&inp.rows, "rocpd_op").to_string(),
                    rows(&inp.rows, "rocpd_api_ops").to_string(),
                    rows(&inp.rows, "rtl_process").to_string(),
                    inp.pid_offset.to_string(),
                    format!("{:+}", inp.time_shift_ns),
                ]
            })
            .collect();
        cells.push(vec![
            "= merged".into(),
            String::new(),
            String::new(),
            rows(&self.rows, "rocpd_api").to_string(),
            rows(&self.rows, "rocpd_op").to_string(),
            rows(&self.rows, "rocpd_api_ops").to_string(),
            rows(&self.rows, "rtl_process").to_string(),
            String::new(),
            String::new(),
        ]);
        let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
        for r in &cells {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |f: &mut std::fmt::Formatter<'_>, r: &[String]| -> std::fmt::Result {
            let mut s = String::from("  ");
            for (i, c) in r.iter().enumerate() {
                let pad = " ".repeat(w[i] - c.chars().count());
                if i < 2 {
                    s.push_str(&format!("{c}{pad}  "));
                } else {
                    s.push_str(&format!("{pad}{c}  "));
                }
            }
            writeln!(f, "{}", s.trim_end())
        };
        line(f, &head.map(String::from))?;
        line(f, &w.iter().map(|n| "-".repeat(*n)).collect::<Vec<_>>())?;
        for r in &cells {
            line(f, r)?;
        }
        if self.processes_combined > 0 {
            writeln!(f, "  {} process rows seen in several inputs were combined (same host and pid)", self.processes_combined)?;
        }
        if self.api_meanings_differing > 0 {
            writeln!(f, "  {} APIs described differently by a later input (the first input's meaning kept)", self.api_meanings_differing)?;
        }
        if self.dangling_strings > 0 {
            writeln!(f, "  {} references to missing strings were mapped to ''", self.dangling_strings)?;
        }
        Ok(())
    }
}
