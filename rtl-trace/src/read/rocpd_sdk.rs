//! rocprofiler-sdk's "rocpd" SQLite database (schema 3.0, what `rocprofv3 --output-format rocpd`
//! writes), so that AMD's `rocpd` tools and a user's rocprofv3 queries read an rtl-ebpf trace.
//! See docs/reading-traces.md, "rocprofiler-sdk rocpd".
//!
//! The layout is the SDK's (a fact of its schema, written here from its description): every
//! table carries a per-run suffix (`rocpd_region_<uuid>`) and a `guid` column, and plain-named
//! views (`rocpd_region`, ...) select from them; `rocpd_metadata` holds `schema_version` 3, the
//! `uuid` suffix and the `guid`. The data views users query (`kernels`, `memory_copies`,
//! `regions`, `processes`, `threads`, `top_kernels`, `busy`, `top`, ...) are defined here over
//! those tables with the SDK's names and columns.
//!
//! What goes where:
//! - node: one row (`machine_id` and `hostname` = the trace's `hostname`);
//! - processes: `rtl_process` and every pid with API calls (`id` = the pid, as rocprofv3 writes);
//!   threads: one row per (pid, tid) with API calls;
//! - agents: the host CPU (`id` 0) and one GPU per `gpuId` (`id` = gpuId + 1, `absolute_index` =
//!   gpuId); names are not known to the trace (`GPU n`);
//! - API calls: `rocpd_region` (id = the API call's id) with a `rocpd_event` (category
//!   `HIP_RUNTIME_API_EXT`, `MARKER_CORE_API`, ...; `stack_id` = the API call's id) and the
//!   decoded argument text as a `rocpd_arg` named `args`; roctx / NVTX ranges: regions named by
//!   their text (category `MARKER_CORE_RANGE_API`, `extdata` `{"message": ...}`);
//! - kernels, fills and graph replays: `rocpd_kernel_dispatch` (kernel symbol per process and
//!   name; grid in work-items = blocks x workgroup, as HSA counts it), copies:
//!   `rocpd_memory_copy` (`MEMORY_COPY_HOST_TO_DEVICE`, ...; the host is agent 0); both with a
//!   `rocpd_event` whose `stack_id` is the causing API call's id, on queue and stream rows of
//!   their process;
//! - not written, and counted in [`SdkStats`]: barriers (schema 3.0 has no table for them) and
//!   GPU ops or markers no traced process's call accounts for (every SDK row belongs to one).

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use rusqlite::{params, Connection, OpenFlags};

use super::timeline::{self, Sink, Slice, LANE_TID, MARKER_PID};
use crate::error::Fatal;

/// The schema version written into `rocpd_metadata`.
pub const SDK_SCHEMA_VERSION: &str = "3";

/// What [`convert_rocpd_sdk`] wrote and left out.
#[derive(Debug, Default)]
pub struct SdkStats {
    pub regions: i64,
    pub markers: i64,
    pub kernel_dispatches: i64,
    pub memory_copies: i64,
    /// Barrier ops: schema 3.0 has no table for them.
    pub barriers_left_out: i64,
    /// GPU ops linked to no API call (no process to put them in).
    pub unattributed_ops_left_out: i64,
    /// roctx ranges on no traced thread.
    pub unattributed_markers_left_out: i64,
}

/// The tables, `{S}` = the run's suffix, `{G}` = its guid.
const TABLES: &str = r#"
CREATE TABLE `rocpd_metadata{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "tag" TEXT NOT NULL, "value" TEXT NOT NULL);
CREATE TABLE `rocpd_string{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE `rocpd_info_node{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "hash" BIGINT NOT NULL UNIQUE,
    "machine_id" TEXT NOT NULL UNIQUE, "system_name" TEXT, "hostname" TEXT, "release" TEXT, "version" TEXT, "hardware_name" TEXT, "domain_name" TEXT);
CREATE TABLE `rocpd_info_process{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "ppid" INTEGER, "pid" INTEGER NOT NULL, "init" BIGINT, "fini" BIGINT, "start" BIGINT, "end" BIGINT, "command" TEXT,
    "environment" JSONB DEFAULT '{}' NOT NULL, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node{S}` (id) ON UPDATE CASCADE);
CREATE TABLE `rocpd_info_thread{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "ppid" INTEGER, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, "name" TEXT, "start" BIGINT, "end" BIGINT, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node{S}` (id) ON UPDATE CASCADE,
    FOREIGN KEY (pid) REFERENCES `rocpd_info_process{S}` (id) ON UPDATE CASCADE);
CREATE TABLE `rocpd_info_agent{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "type" TEXT CHECK ("type" IN ('CPU', 'GPU')), "absolute_index" INTEGER, "logical_index" INTEGER, "type_index" INTEGER,
    "uuid" INTEGER, "name" TEXT, "model_name" TEXT, "vendor_name" TEXT, "product_name" TEXT, "user_name" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node{S}` (id) ON UPDATE CASCADE,
    FOREIGN KEY (pid) REFERENCES `rocpd_info_process{S}` (id) ON UPDATE CASCADE);
CREATE TABLE `rocpd_info_queue{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node{S}` (id) ON UPDATE CASCADE,
    FOREIGN KEY (pid) REFERENCES `rocpd_info_process{S}` (id) ON UPDATE CASCADE);
CREATE TABLE `rocpd_info_stream{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "name" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL,
    FOREIGN KEY (nid) REFERENCES `rocpd_info_node{S}` (id) ON UPDATE CASCADE,
    FOREIGN KEY (pid) REFERENCES `rocpd_info_process{S}` (id) ON UPDATE CASCADE);
CREATE TABLE `rocpd_info_pmc{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "agent_id" INTEGER, "target_arch" TEXT CHECK ("target_arch" IN ('CPU', 'GPU')), "event_code" INT, "instance_id" INTEGER,
    "name" TEXT NOT NULL, "symbol" TEXT NOT NULL, "description" TEXT, "long_description" TEXT DEFAULT '', "component" TEXT, "units" TEXT DEFAULT '',
    "value_type" TEXT CHECK ("value_type" IN ('ABS', 'ACCUM', 'RELATIVE')), "block" TEXT, "expression" TEXT, "is_constant" INTEGER, "is_derived" INTEGER,
    "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_info_code_object{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "agent_id" INTEGER, "uri" TEXT, "load_base" BIGINT, "load_size" BIGINT, "load_delta" BIGINT,
    "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')), "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_info_kernel_symbol{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
    "kernarg_segment_size" INTEGER, "kernarg_segment_alignment" INTEGER, "group_segment_size" INTEGER, "private_segment_size" INTEGER,
    "sgpr_count" INTEGER, "arch_vgpr_count" INTEGER, "accum_vgpr_count" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_track{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER, "tid" INTEGER, "name_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_event{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "category_id" INTEGER,
    "stack_id" INTEGER, "parent_stack_id" INTEGER, "correlation_id" INTEGER, "call_stack" JSONB DEFAULT '{}' NOT NULL,
    "line_info" JSONB DEFAULT '{}' NOT NULL, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_arg{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "event_id" INTEGER NOT NULL,
    "position" INTEGER NOT NULL, "type" TEXT NOT NULL, "name" TEXT NOT NULL, "value" TEXT, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_pmc_event{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "event_id" INTEGER,
    "pmc_id" INTEGER NOT NULL, "value" REAL DEFAULT 0.0, "extdata" JSONB DEFAULT '{}');
CREATE TABLE `rocpd_region{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "event_id" INTEGER,
    "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_sample{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "track_id" INTEGER NOT NULL,
    "timestamp" BIGINT NOT NULL, "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_kernel_dispatch{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL,
    "queue_id" INTEGER NOT NULL, "stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "private_segment_size" INTEGER,
    "group_segment_size" INTEGER, "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, "workgroup_size_z" INTEGER NOT NULL,
    "grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL, "region_name_id" INTEGER, "event_id" INTEGER,
    "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_memory_copy{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "tid" INTEGER, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "dst_agent_id" INTEGER,
    "dst_address" INTEGER, "src_agent_id" INTEGER, "src_address" INTEGER, "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER,
    "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
CREATE TABLE `rocpd_memory_allocate{S}` ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT, "guid" TEXT DEFAULT '{G}' NOT NULL, "nid" INTEGER NOT NULL,
    "pid" INTEGER NOT NULL, "tid" INTEGER, "agent_id" INTEGER, "type" TEXT CHECK ("type" IN ('ALLOC', 'FREE', 'REALLOC', 'RECLAIM')),
    "level" TEXT CHECK ("level" IN ('REAL', 'VIRTUAL', 'SCRATCH')), "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "address" INTEGER,
    "size" INTEGER NOT NULL, "queue_id" INTEGER, "stream_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT '{}' NOT NULL);
"#;

/// The tables behind a plain-named view each.
const BASE_TABLES: &[&str] = &[
    "rocpd_metadata",
    "rocpd_string",
    "rocpd_info_node",
    "rocpd_info_process",
    "rocpd_info_thread",
    "rocpd_info_agent",
    "rocpd_info_queue",
    "rocpd_info_stream",
    "rocpd_info_pmc",
    "rocpd_info_code_object",
    "rocpd_info_kernel_symbol",
    "rocpd_track",
    "rocpd_event",
    "rocpd_arg",
    "rocpd_pmc_event",
    "rocpd_region",
    "rocpd_sample",
    "rocpd_kernel_dispatch",
    "rocpd_memory_copy",
    "rocpd_memory_allocate",
];

/// The data and summary views (the SDK's names and columns; our own definitions). Times in
/// `top_kernels` / `top` are microseconds, `busy` in nanoseconds, as the SDK's.
const VIEWS: &str = r#"
CREATE VIEW processes AS
  SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release, N.version AS system_version,
         P.guid, P.ppid, P.pid, P.init, P.start, P.end, P.fini, P.command
  FROM rocpd_info_process P JOIN rocpd_info_node N ON N.id = P.nid AND N.guid = P.guid;
CREATE VIEW threads AS
  SELECT N.id AS nid, N.machine_id, N.system_name, N.hostname, N.release AS system_release, N.version AS system_version,
         P.guid, P.ppid, P.pid, T.tid, T.start, T.end, T.name
  FROM rocpd_info_thread T JOIN rocpd_info_node N ON N.id = T.nid AND N.guid = T.guid
  JOIN rocpd_info_process P ON P.id = T.pid AND P.guid = T.guid;
CREATE VIEW regions AS
  SELECT R.id, R.guid, (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
         S.string AS name, R.nid, P.pid, T.tid, R.start, R.end, (R.end - R.start) AS duration, R.event_id, E.stack_id,
         E.parent_stack_id, E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
  FROM rocpd_region R JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
  JOIN rocpd_string S ON S.id = R.name_id AND S.guid = R.guid
  JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid
  JOIN rocpd_info_thread T ON T.id = R.tid AND T.guid = R.guid;
CREATE VIEW region_args AS
  SELECT R.id, R.guid, R.nid, P.pid, A.type, A.name, A.value
  FROM rocpd_region R JOIN rocpd_arg A ON A.event_id = R.event_id AND A.guid = R.guid
  JOIN rocpd_info_process P ON P.id = R.pid AND P.guid = R.guid;
CREATE VIEW samples AS
  SELECT R.id, R.guid, (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
         (SELECT string FROM rocpd_string RS WHERE RS.id = T.name_id AND RS.guid = T.guid) AS name, T.nid, P.pid, TH.tid,
         R.timestamp, R.event_id, E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id, E.extdata, E.call_stack, E.line_info
  FROM rocpd_sample R JOIN rocpd_track T ON T.id = R.track_id AND T.guid = R.guid
  JOIN rocpd_event E ON E.id = R.event_id AND E.guid = R.guid
  JOIN rocpd_info_process P ON P.id = T.pid AND P.guid = T.guid
  JOIN rocpd_info_thread TH ON TH.id = T.tid AND TH.guid = T.guid;
CREATE VIEW sample_regions AS
  SELECT id, guid, category, name, nid, pid, tid, timestamp AS start, timestamp AS end, 0 AS duration, event_id, stack_id,
         parent_stack_id, corr_id, extdata, call_stack, line_info
  FROM samples;
CREATE VIEW regions_and_samples AS SELECT * FROM regions UNION ALL SELECT * FROM sample_regions;
CREATE VIEW kernel_symbols AS
  SELECT KS.id, KS.guid, KS.nid, P.pid, KS.code_object_id, KS.kernel_name, KS.display_name, KS.kernel_object, KS.kernarg_segment_size,
         KS.kernarg_segment_alignment, KS.group_segment_size, KS.private_segment_size, KS.sgpr_count, KS.arch_vgpr_count, KS.accum_vgpr_count,
         JSON_EXTRACT(KS.extdata, '$.size') AS kernel_symbol_size, JSON_EXTRACT(KS.extdata, '$.kernel_id') AS kernel_id,
         JSON_EXTRACT(KS.extdata, '$.kernel_code_entry_byte_offset') AS kernel_code_entry_byte_offset,
         JSON_EXTRACT(KS.extdata, '$.formatted_kernel_name') AS formatted_kernel_name,
         JSON_EXTRACT(KS.extdata, '$.demangled_kernel_name') AS demangled_kernel_name,
         JSON_EXTRACT(KS.extdata, '$.truncated_kernel_name') AS truncated_kernel_name,
         JSON_EXTRACT(KS.extdata, '$.kernel_address.handle') AS kernel_address
  FROM rocpd_info_kernel_symbol KS JOIN rocpd_info_process P ON KS.pid = P.id AND KS.guid = P.guid;
CREATE VIEW kernels AS
  SELECT K.id, K.guid, T.tid, (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
         R.string AS region, S.display_name AS name, K.nid, P.pid, A.absolute_index AS agent_abs_index, A.logical_index AS agent_log_index,
         A.type_index AS agent_type_index, A.type AS agent_type, S.code_object_id, K.kernel_id, K.dispatch_id, K.stream_id, K.queue_id,
         Q.name AS queue, ST.name AS stream, K.start, K.end, (K.end - K.start) AS duration,
         K.grid_size_x AS grid_x, K.grid_size_y AS grid_y, K.grid_size_z AS grid_z,
         K.workgroup_size_x AS workgroup_x, K.workgroup_size_y AS workgroup_y, K.workgroup_size_z AS workgroup_z,
         K.group_segment_size AS lds_size, K.private_segment_size AS scratch_size, S.arch_vgpr_count AS vgpr_count, S.accum_vgpr_count,
         S.sgpr_count, S.group_segment_size AS static_lds_size, S.private_segment_size AS static_scratch_size,
         E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
  FROM rocpd_kernel_dispatch K
  JOIN rocpd_info_agent A ON A.id = K.agent_id AND A.guid = K.guid
  JOIN rocpd_event E ON E.id = K.event_id AND E.guid = K.guid
  JOIN rocpd_string R ON R.id = K.region_name_id AND R.guid = K.guid
  JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
  LEFT JOIN rocpd_info_stream ST ON ST.id = K.stream_id AND ST.guid = K.guid
  LEFT JOIN rocpd_info_queue Q ON Q.id = K.queue_id AND Q.guid = K.guid
  JOIN rocpd_info_process P ON P.id = K.pid AND P.guid = K.guid
  JOIN rocpd_info_thread T ON T.id = K.tid AND T.guid = K.guid;
CREATE VIEW memory_copies AS
  SELECT M.id, M.guid, (SELECT string FROM rocpd_string RS WHERE RS.id = E.category_id AND RS.guid = E.guid) AS category,
         M.nid, P.pid, T.tid, M.start, M.end, (M.end - M.start) AS duration, S.string AS name, R.string AS region_name,
         M.stream_id, M.queue_id, ST.name AS stream_name, Q.name AS queue_name, M.size,
         D.name AS dst_device, D.absolute_index AS dst_agent_abs_index, D.logical_index AS dst_agent_log_index,
         D.type_index AS dst_agent_type_index, D.type AS dst_agent_type, M.dst_address,
         SA.name AS src_device, SA.absolute_index AS src_agent_abs_index, SA.logical_index AS src_agent_log_index,
         SA.type_index AS src_agent_type_index, SA.type AS src_agent_type, M.src_address,
         E.stack_id, E.parent_stack_id, E.correlation_id AS corr_id
  FROM rocpd_memory_copy M
  JOIN rocpd_string S ON S.id = M.name_id AND S.guid = M.guid
  LEFT JOIN rocpd_string R ON R.id = M.region_name_id AND R.guid = M.guid
  JOIN rocpd_info_agent D ON D.id = M.dst_agent_id AND D.guid = M.guid
  JOIN rocpd_info_agent SA ON SA.id = M.src_agent_id AND SA.guid = M.guid
  LEFT JOIN rocpd_info_queue Q ON Q.id = M.queue_id AND Q.guid = M.guid
  LEFT JOIN rocpd_info_stream ST ON ST.id = M.stream_id AND ST.guid = M.guid
  JOIN rocpd_event E ON E.id = M.event_id AND E.guid = M.guid
  JOIN rocpd_info_process P ON P.id = M.pid AND P.guid = M.guid
  JOIN rocpd_info_thread T ON T.id = M.tid AND T.guid = M.guid;
CREATE VIEW top_kernels AS
  SELECT S.display_name AS name, count(K.kernel_id) AS total_calls, sum(K.end - K.start) / 1000.0 AS total_duration,
         (sum(K.end - K.start) / count(K.kernel_id)) / 1000.0 AS average,
         sum(K.end - K.start) * 100.0 / (SELECT sum(A.end - A.start) FROM rocpd_kernel_dispatch A) AS percentage
  FROM rocpd_kernel_dispatch K JOIN rocpd_info_kernel_symbol S ON S.id = K.kernel_id AND S.guid = K.guid
  GROUP BY name ORDER BY total_duration DESC;
CREATE VIEW busy AS
  SELECT A.agent_id, AG.type, A.GpuTime, W.WallTime, A.GpuTime * 1.0 / W.WallTime AS Busy
  FROM (SELECT agent_id, guid, sum(end - start) AS GpuTime
        FROM (SELECT agent_id, guid, end, start FROM rocpd_kernel_dispatch
              UNION ALL SELECT dst_agent_id AS agent_id, guid, end, start FROM rocpd_memory_copy)
        GROUP BY agent_id, guid) A
  JOIN (SELECT max(end) - min(start) AS WallTime
        FROM (SELECT end, start FROM rocpd_kernel_dispatch UNION ALL SELECT end, start FROM rocpd_memory_copy)) W
  JOIN rocpd_info_agent AG ON AG.id = A.agent_id AND AG.guid = A.guid;
CREATE VIEW top AS
  SELECT name, count(*) AS total_calls, sum(duration) / 1000.0 AS total_duration, (sum(duration) / count(*)) / 1000.0 AS average,
         sum(duration) * 100.0 / total_time AS percentage
  FROM (SELECT ks.display_name AS name, (kd.end - kd.start) AS duration
        FROM rocpd_kernel_dispatch kd JOIN rocpd_info_kernel_symbol ks ON kd.kernel_id = ks.id AND kd.guid = ks.guid
        UNION ALL SELECT rs.string, (mc.end - mc.start) FROM rocpd_memory_copy mc JOIN rocpd_string rs ON rs.id = mc.name_id AND rs.guid = mc.guid
        UNION ALL SELECT rs.string, (rr.end - rr.start) FROM rocpd_region rr JOIN rocpd_string rs ON rs.id = rr.name_id AND rs.guid = rr.guid)
  CROSS JOIN (SELECT sum(end - start) AS total_time
              FROM (SELECT end, start FROM rocpd_kernel_dispatch UNION ALL SELECT end, start FROM rocpd_memory_copy
                    UNION ALL SELECT end, start FROM rocpd_region))
  GROUP BY name ORDER BY total_duration DESC;
"#;

/// A version-7 UUID (RFC 9562: unix milliseconds, then random bits), as the SDK names its runs.
fn uuid_v7(unix_ms: u64) -> Result<String> {
    let mut r = [0u8; 10];
    // SAFETY: writes at most r.len() bytes into r.
    let n = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), 0) };
    if n != r.len() as isize {
        return Err(anyhow!("getrandom failed: {}", std::io::Error::last_os_error()));
    }
    let ms = unix_ms & 0xffff_ffff_ffff;
    let a = (u16::from(r[0]) << 8 | u16::from(r[1])) & 0x0fff | 0x7000;
    let b = (u16::from(r[2]) << 8 | u16::from(r[3])) & 0x3fff | 0x8000;
    let tail: String = r[4..10].iter().map(|x| format!("{x:02x}")).collect();
    Ok(format!("{:08x}-{:04x}-{a:04x}-{b:04x}-{tail}", ms >> 16, ms & 0xffff))
}

/// FNV-1a, 63 bits (the node table's `hash` is a signed BIGINT).
fn hash63(s: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 1) as i64
}

/// roctx / NVTX ranges collected from the Perfetto layout's placement (thread ids recovered).
#[derive(Default)]
struct Markers(Vec<(i64, i64, i64, i64, String)>, i64);

impl Sink for Markers {
    fn process(&mut self, _: i64, _: &str, _: Option<&str>, _: i64) -> Result<()> {
        Ok(())
    }
    fn thread(&mut self, _: i64, _: i64, _: &str, _: i64) -> Result<()> {
        Ok(())
    }
    fn slice(&mut self, s: &Slice) -> Result<()> {
        if s.pid == MARKER_PID {
            self.1 += 1;
        } else {
            self.0.push((s.pid, s.tid % LANE_TID, s.ts, s.ts + s.dur, s.name.to_string()));
        }
        Ok(())
    }
    fn flush_track(&mut self, _: i64, _: i64) -> Result<()> {
        Ok(())
    }
}

fn meta(src: &Connection, tag: &str) -> Result<Option<String>> {
    match src.query_row("SELECT value FROM rocpd_metadata WHERE tag = ?1 ORDER BY id LIMIT 1", [tag], |r| r.get::<_, String>(0)) {
        Ok(v) => Ok(Some(v)),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Writes `db` as a rocprofiler-sdk rocpd database (schema 3.0) to `out`.
pub fn convert_rocpd_sdk(db: &Path, facts: crate::api_meaning::ApiFacts, out: &Path) -> Result<SdkStats> {
    let trace = super::open::open_trace(db, facts)?;
    timeline::bounded_memory(&trace)?;
    super::open::refuse_output_that_is_an_input(out, &[db])?;
    let shown = crate::term::path(out);
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let work = tempfile::Builder::new()
        .prefix(".rtl-rocpd-sdk-")
        .tempdir_in(dir)
        .map_err(|e| anyhow!(Fatal::Output(format!("{shown}: cannot create a working directory beside it: {e}"))))?;
    let tmp = work.path().join("rocpd.db");
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| anyhow!(Fatal::Output(format!("{shown}: cannot create: {e}"))))?;
    }
    let stats = write(&trace, &tmp).with_context(|| format!("converting {} to {}", db.display(), out.display()))?;
    crate::writer::chown_to_invoker(&tmp);
    std::fs::rename(&tmp, out).map_err(|e| anyhow!(Fatal::Output(format!("{shown}: cannot write: {e}"))))?;
    Ok(stats)
}

fn write(trace: &super::open::Trace, tmp: &Path) -> Result<SdkStats> {
    let src: &Connection = trace;
    let c =
        Connection::open_with_flags(tmp, OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    c.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA temp_store = FILE; PRAGMA cache_size = -32768;")?;
    c.execute("ATTACH DATABASE ?1 AS src", [trace.uri()]).context("attaching the trace")?;

    let start_ns: i64 = src.query_row("SELECT coalesce(min(start), 0) FROM rocpd_api", [], |r| r.get(0))?;
    let offset = meta(src, "realtime_minus_monotonic_ns")?.and_then(|v| v.trim().parse::<i64>().ok()).unwrap_or(0);
    let unix_ms = u64::try_from((start_ns + offset) / 1_000_000).unwrap_or(0);
    let guid = uuid_v7(unix_ms)?;
    let suffix = format!("_{}", guid.replace('-', "_"));
    c.execute_batch("BEGIN")?;
    c.execute_batch(&TABLES.replace("{S}", &suffix).replace("{G}", &guid))?;
    for t in BASE_TABLES {
        c.execute_batch(&format!("CREATE VIEW `{t}` AS SELECT * FROM `{t}{suffix}`;"))?;
    }
    c.execute_batch(VIEWS)?;
    let t = |name: &str| format!("`{name}{suffix}`");

    // Metadata: what the SDK writes, then where this came from.
    for (k, v) in [("schema_version", SDK_SCHEMA_VERSION.to_string()), ("uuid", suffix.clone()), ("guid", guid.clone())] {
        c.execute(&format!("INSERT INTO {} (tag, value) VALUES (?1, ?2)", t("rocpd_metadata")), params![k, v])?;
    }
    c.execute(
        &format!(
            "INSERT INTO {} (tag, value) VALUES ('rtl_ebpf_converted_from', 'rtl-ebpf trace (rocpd schema 3, RPD layout)')",
            t("rocpd_metadata")
        ),
        [],
    )?;
    for tag in ["hostname", "clock", "realtime_minus_monotonic_ns", "rtl_version"] {
        if let Some(v) = meta(src, tag)? {
            c.execute(&format!("INSERT INTO {} (tag, value) VALUES (?1, ?2)", t("rocpd_metadata")), params![format!("rtl_ebpf.{tag}"), v])?;
        }
    }

    // Node.
    let host = meta(src, "hostname")?.unwrap_or_else(|| "unknown host".into());
    c.execute(
        &format!("INSERT INTO {} (id, hash, machine_id, hostname) VALUES (1, ?1, ?2, ?2)", t("rocpd_info_node")),
        params![hash63(&host), host],
    )?;

    // Strings: '' first (id 1), then every name used.
    let st = t("rocpd_string");
    c.execute_batch(&format!(
        "INSERT INTO {st} (id, string) VALUES (1, '');
         INSERT OR IGNORE INTO {st} (string) SELECT DISTINCT s.string FROM src.rocpd_string s
           WHERE s.id IN (SELECT apiName_id FROM src.rocpd_api) AND s.string != '';
         INSERT OR IGNORE INTO {st} (string) VALUES ('HIP_RUNTIME_API_EXT'), ('MARKER_CORE_API'), ('MARKER_CORE_RANGE_API'),
           ('CUDA_RUNTIME_API'), ('CUDA_DRIVER_API'), ('KERNEL_DISPATCH'), ('MEMORY_COPY'),
           ('MEMORY_COPY_HOST_TO_DEVICE'), ('MEMORY_COPY_DEVICE_TO_HOST'), ('MEMORY_COPY_DEVICE_TO_DEVICE'), ('MEMORY_COPY_NONE');"
    ))?;

    // Processes and threads.
    c.execute_batch(&format!(
        "INSERT INTO {p} (id, nid, ppid, pid, init, fini, start, end, command)
           SELECT x.pid, 1, r.ppid, x.pid, r.first_ns, r.last_ns, coalesce(r.first_ns, x.s), coalesce(r.last_ns, x.e), replace(r.cmdline, char(0), ' ')
           FROM (SELECT pid, min(s) AS s, max(e) AS e FROM (
                   SELECT pid, min(start) AS s, max(end) AS e FROM src.rocpd_api GROUP BY pid
                   UNION ALL SELECT pid, first_ns, last_ns FROM src.rtl_process) GROUP BY pid) x
           LEFT JOIN src.rtl_process r ON r.pid = x.pid;
         INSERT INTO {th} (nid, ppid, pid, tid, name, start, end)
           SELECT 1, p.ppid, a.pid, a.tid, CASE WHEN a.pid = a.tid THEN 'main thread' END, min(a.start), max(a.end)
           FROM src.rocpd_api a JOIN {p} p ON p.id = a.pid GROUP BY a.pid, a.tid ORDER BY a.pid, a.tid;
         CREATE TEMP TABLE w_thread AS SELECT id, pid, tid FROM {th};
         CREATE UNIQUE INDEX temp.w_thread_key ON w_thread(pid, tid);",
        p = t("rocpd_info_process"),
        th = t("rocpd_info_thread"),
    ))?;
    let first_pid: Option<i64> = c.query_row(&format!("SELECT min(id) FROM {}", t("rocpd_info_process")), [], |r| r.get(0))?;

    // Which API call (and so thread) each GPU op belongs to.
    c.execute_batch(
        "CREATE TEMP TABLE w_op AS
           SELECT x.op_id, x.api_id, a.pid, a.tid FROM (
             SELECT o.id AS op_id,
                    coalesce((SELECT min(l.api_id) FROM src.rocpd_api_ops l WHERE l.op_id = o.id),
                             (SELECT min(a2.id) FROM src.rocpd_api a2 WHERE o.correlation_id != 0 AND a2.correlation_id = o.correlation_id)) AS api_id
             FROM src.rocpd_op o WHERE o.gpuId >= 0) x
           LEFT JOIN src.rocpd_api a ON a.id = x.api_id;
         CREATE INDEX temp.w_op_id ON w_op(op_id);",
    )?;
    let mut stats = SdkStats {
        unattributed_ops_left_out: c.query_row("SELECT count(*) FROM w_op WHERE pid IS NULL", [], |r| r.get(0))?,
        barriers_left_out: c.query_row(
            "SELECT count(*) FROM w_op w JOIN src.rocpd_op o ON o.id = w.op_id JOIN src.rocpd_string s ON s.id = o.opType_id
             WHERE w.pid IS NOT NULL AND s.string = 'Barrier'",
            [],
            |r| r.get(0),
        )?,
        ..Default::default()
    };

    // Agents: the host CPU and the GPUs.
    if let Some(fp) = first_pid {
        let ag = t("rocpd_info_agent");
        c.execute(&format!("INSERT INTO {ag} (id, nid, pid, type, absolute_index, logical_index, type_index, name) VALUES (0, 1, ?1, 'CPU', NULL, NULL, 0, 'CPU (host)')"), [fp])?;
        c.execute(
            &format!(
                "INSERT INTO {ag} (id, nid, pid, type, absolute_index, logical_index, type_index, name)
                 SELECT DISTINCT gpuId + 1, 1, ?1, 'GPU', gpuId, gpuId, gpuId, 'GPU ' || gpuId FROM src.rocpd_op WHERE gpuId >= 0"
            ),
            [fp],
        )?;
    }

    // The ops written, with what they need: kind, queue and stream keys, kernel name.
    c.execute_batch(
        "CREATE TEMP TABLE w_gpu AS
           SELECT w.op_id, w.api_id, w.pid, th.id AS thread_id, o.gpuId AS gpu, o.queueId AS queue, o.start, max(o.end, o.start) AS end,
                  ty.string AS op_type, d.string AS descr,
                  CASE WHEN ty.string IN ('CopyHostToDevice', 'CopyDeviceToHost', 'CopyDeviceToDevice', 'Copy') THEN 'copy' ELSE 'dispatch' END AS kind,
                  coalesce(nullif(ka.stream, ''), nullif(ca.stream, ''), '') AS stream,
                  ka.gridX, ka.gridY, ka.gridZ, ka.workgroupX, ka.workgroupY, ka.workgroupZ, ka.groupSegmentSize, ka.privateSegmentSize,
                  ca.size, ca.dst, ca.src
           FROM w_op w JOIN src.rocpd_op o ON o.id = w.op_id
           JOIN src.rocpd_string ty ON ty.id = o.opType_id JOIN src.rocpd_string d ON d.id = o.description_id
           JOIN w_thread th ON th.pid = w.pid AND th.tid = w.tid
           LEFT JOIN src.rocpd_kernelapi ka ON ka.api_ptr_id = w.api_id
           LEFT JOIN src.rocpd_copyapi ca ON ca.api_ptr_id = w.api_id
           WHERE ty.string != 'Barrier';",
    )?;
    let (q, s, co, ks) = (t("rocpd_info_queue"), t("rocpd_info_stream"), t("rocpd_info_code_object"), t("rocpd_info_kernel_symbol"));
    c.execute_batch(&format!(
        "INSERT INTO {q} (nid, pid, name, extdata)
           SELECT DISTINCT 1, pid, 'GPU ' || gpu || ' queue ' || queue, json_object('gpu', gpu, 'queue', queue) FROM w_gpu ORDER BY pid, gpu, queue;
         CREATE TEMP TABLE w_queue AS SELECT id, pid, json_extract(extdata, '$.gpu') AS gpu, json_extract(extdata, '$.queue') AS queue FROM {q};
         INSERT INTO {s} (nid, pid, name, extdata)
           SELECT DISTINCT 1, pid, CASE stream WHEN '' THEN 'stream not recorded' ELSE 'Stream ' || stream END, json_object('stream', stream)
           FROM w_gpu ORDER BY pid, stream;
         CREATE TEMP TABLE w_stream AS SELECT id, pid, json_extract(extdata, '$.stream') AS stream FROM {s};
         INSERT INTO {co} (nid, pid, extdata)
           SELECT DISTINCT 1, pid, json_object('rtl_ebpf', 'code objects are not recorded in rtl-ebpf traces') FROM w_gpu WHERE kind = 'dispatch' ORDER BY pid;
         INSERT INTO {ks} (nid, pid, code_object_id, kernel_name, display_name, group_segment_size)
           SELECT DISTINCT 1, g.pid, co.id,
                  CASE WHEN g.descr != '' THEN g.descr ELSE g.op_type END, CASE WHEN g.descr != '' THEN g.descr ELSE g.op_type END, NULL
           FROM w_gpu g JOIN {co} co ON co.pid = g.pid WHERE g.kind = 'dispatch' ORDER BY g.pid;"
    ))?;

    // Events and regions of API calls (event id = API id), and their argument text.
    let max_api: i64 = src.query_row("SELECT coalesce(max(id), 0) FROM rocpd_api", [], |r| r.get(0))?;
    let (ev, rg, ar) = (t("rocpd_event"), t("rocpd_region"), t("rocpd_arg"));
    let cat_of = |col: &str| {
        format!(
            "(SELECT id FROM {st} WHERE string = CASE WHEN {col} GLOB 'roctx*' OR {col} GLOB 'nvtx*' THEN 'MARKER_CORE_API'
                WHEN {col} GLOB 'cuda*' THEN 'CUDA_RUNTIME_API' WHEN {col} GLOB 'cu*' THEN 'CUDA_DRIVER_API' ELSE 'HIP_RUNTIME_API_EXT' END)"
        )
    };
    c.execute_batch(&format!(
        "INSERT INTO {ev} (id, category_id, stack_id, parent_stack_id, correlation_id)
           SELECT a.id, {cat}, a.id, a.id, 0 FROM src.rocpd_api a JOIN src.rocpd_string n ON n.id = a.apiName_id;
         INSERT INTO {rg} (id, nid, pid, tid, start, end, name_id, event_id)
           SELECT a.id, 1, a.pid, th.id, a.start, max(a.end, a.start), coalesce(s.id, 1), a.id
           FROM src.rocpd_api a JOIN src.rocpd_string n ON n.id = a.apiName_id LEFT JOIN {st} s ON s.string = n.string
           JOIN w_thread th ON th.pid = a.pid AND th.tid = a.tid;
         INSERT INTO {ar} (event_id, position, type, name, value)
           SELECT a.id, 0, 'text', 'args', u.string FROM src.rocpd_api a JOIN src.rocpd_ustring u ON u.id = a.args_id WHERE u.string != '';",
        cat = cat_of("n.string"),
    ))?;
    stats.regions = c.query_row(&format!("SELECT count(*) FROM {rg}"), [], |r| r.get(0))?;

    // GPU ops: events (id = max API id + op id), dispatches and copies.
    c.execute_batch(&format!(
        "INSERT INTO {ev} (id, category_id, stack_id, parent_stack_id, correlation_id)
           SELECT {max_api} + g.op_id, (SELECT id FROM {st} WHERE string = CASE g.kind WHEN 'copy' THEN 'MEMORY_COPY' ELSE 'KERNEL_DISPATCH' END),
                  g.api_id, g.api_id, 0 FROM w_gpu g;
         INSERT INTO {kd} (id, nid, pid, tid, agent_id, kernel_id, dispatch_id, queue_id, stream_id, start, end, private_segment_size, group_segment_size,
                           workgroup_size_x, workgroup_size_y, workgroup_size_z, grid_size_x, grid_size_y, grid_size_z, region_name_id, event_id, extdata)
           SELECT g.op_id, 1, g.pid, g.thread_id, g.gpu + 1, k.id, g.op_id, q.id, s.id, g.start, g.end, g.privateSegmentSize, g.groupSegmentSize,
                  coalesce(g.workgroupX, 0), coalesce(g.workgroupY, 0), coalesce(g.workgroupZ, 0),
                  coalesce(g.gridX * g.workgroupX, 0), coalesce(g.gridY * g.workgroupY, 0), coalesce(g.gridZ * g.workgroupZ, 0),
                  1, {max_api} + g.op_id, json_object('rtl_op_type', g.op_type)
           FROM w_gpu g JOIN {ks} k ON k.pid = g.pid AND k.display_name = CASE WHEN g.descr != '' THEN g.descr ELSE g.op_type END
           JOIN w_queue q ON q.pid = g.pid AND q.gpu = g.gpu AND q.queue = g.queue
           JOIN w_stream s ON s.pid = g.pid AND s.stream = g.stream
           WHERE g.kind = 'dispatch';
         INSERT INTO {mc} (id, nid, pid, tid, start, end, name_id, dst_agent_id, dst_address, src_agent_id, src_address, size, queue_id, stream_id,
                           region_name_id, event_id, extdata)
           SELECT g.op_id, 1, g.pid, g.thread_id, g.start, g.end,
                  (SELECT id FROM {st} WHERE string = CASE g.op_type WHEN 'CopyHostToDevice' THEN 'MEMORY_COPY_HOST_TO_DEVICE'
                       WHEN 'CopyDeviceToHost' THEN 'MEMORY_COPY_DEVICE_TO_HOST' WHEN 'CopyDeviceToDevice' THEN 'MEMORY_COPY_DEVICE_TO_DEVICE'
                       ELSE 'MEMORY_COPY_NONE' END),
                  CASE g.op_type WHEN 'CopyDeviceToHost' THEN 0 ELSE g.gpu + 1 END, NULL,
                  CASE g.op_type WHEN 'CopyHostToDevice' THEN 0 ELSE g.gpu + 1 END, NULL,
                  coalesce(g.size, 0), q.id, s.id, 1, {max_api} + g.op_id,
                  json_object('rtl_op_type', g.op_type, 'description', g.descr, 'dst', g.dst, 'src', g.src)
           FROM w_gpu g JOIN w_queue q ON q.pid = g.pid AND q.gpu = g.gpu AND q.queue = g.queue
           JOIN w_stream s ON s.pid = g.pid AND s.stream = g.stream
           WHERE g.kind = 'copy';",
        kd = t("rocpd_kernel_dispatch"),
        mc = t("rocpd_memory_copy"),
    ))?;
    stats.kernel_dispatches = c.query_row(&format!("SELECT count(*) FROM {}", t("rocpd_kernel_dispatch")), [], |r| r.get(0))?;
    stats.memory_copies = c.query_row(&format!("SELECT count(*) FROM {}", t("rocpd_memory_copy")), [], |r| r.get(0))?;

    // roctx / NVTX ranges: regions named by their text.
    let prelude = timeline::prelude(src)?;
    let mut markers = Markers::default();
    timeline::emit_markers(src, &prelude, &mut markers)?;
    stats.unattributed_markers_left_out = markers.1;
    let max_op: i64 = src.query_row("SELECT coalesce(max(id), 0) FROM rocpd_op", [], |r| r.get(0))?;
    let mut next = max_api + max_op + 1;
    let range_cat: i64 = c.query_row(&format!("SELECT id FROM {st} WHERE string = 'MARKER_CORE_RANGE_API'"), [], |r| r.get(0))?;
    let mut thread_ids: HashMap<(i64, i64), Option<i64>> = HashMap::new();
    for (pid, tid, s0, e0, text) in markers.0 {
        let th = match thread_ids.get(&(pid, tid)) {
            Some(v) => *v,
            None => {
                let v = c
                    .query_row("SELECT id FROM w_thread WHERE pid = ?1 AND tid = ?2", params![pid, tid], |r| r.get::<_, i64>(0))
                    .map(Some)
                    .or_else(|e| if matches!(e, rusqlite::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) })?;
                thread_ids.insert((pid, tid), v);
                v
            }
        };
        let Some(th) = th else {
            stats.unattributed_markers_left_out += 1;
            continue;
        };
        c.execute(&format!("INSERT OR IGNORE INTO {st} (string) VALUES (?1)"), [&text])?;
        c.execute(
            &format!("INSERT INTO {ev} (id, category_id, stack_id, parent_stack_id, correlation_id, extdata) VALUES (?1, ?2, ?1, ?1, 0, json_object('message', ?3))"),
            params![next, range_cat, text],
        )?;
        c.execute(
            &format!("INSERT INTO {rg} (id, nid, pid, tid, start, end, name_id, event_id) VALUES (?1, 1, ?2, ?3, ?4, ?5, (SELECT id FROM {st} WHERE string = ?6), ?1)"),
            params![next, pid, th, s0, e0, text],
        )?;
        next += 1;
        stats.markers += 1;
    }
    c.execute_batch("COMMIT")?;
    c.execute_batch("DETACH DATABASE src")?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_is_version_7() {
        let u = uuid_v7(0x0192_3456_789a).unwrap();
        assert_eq!(u.len(), 36);
        assert!(u.starts_with("01923456-789a-7"), "{u}");
        assert!(matches!(u.as_bytes()[19], b'8' | b'9' | b'a' | b'b'), "{u}");
    }
}
