//! The trace file's schema: RPD ("rocpd") schema version 3, plus `correlation_id` on
//! `rocpd_api` / `rocpd_op` and rtl-ebpf's own side tables (prefixed `rtl_`).
//!
//! RPD's tools read the `rocpd_*` tables and the `api`, `op`, `top`, `busy` views; the `rtl_*`
//! tables hold what RPD has no column for (return values, decoded arguments, processes).
//! Every timestamp is integer nanoseconds of CLOCK_MONOTONIC (what `bpf_ktime_get_ns` reads);
//! `rocpd_metadata` holds `clock`, and `realtime_minus_monotonic_ns` to convert to wall time.

/// Schema version written into `rocpd_metadata` (`schema_version`).
pub const RPD_SCHEMA_VERSION: &str = "3";
/// Version of rtl-ebpf's own additions (`rtl_schema_version`); bump on any change and migrate.
/// 2: `rtl_api_meaning` (what `ret` and `a0..a3` hold, per API), non-error returns stored by kind.
/// 3: `rtl_op` (how each GPU op was linked to its API call).
/// 4: `rtl_op.pid` (the process that published the op, as the probe saw it).
/// 5: call sites (`rtl_frame`, `rtl_stack`, `rtl_stack_frame`, `rtl_api_stack`) and graph
///    captures (`rtl_capture`, `rtl_capture_call`, `rtl_graph_launch`, `rtl_op_site`).
/// 6: Python frames (`rtl_python_frame`) and thread names (`rtl_thread`).
pub const RTL_SCHEMA_VERSION: i64 = 6;

/// Tables. Written so that running it on an existing file is harmless (IF NOT EXISTS).
pub const TABLES: &str = r#"
CREATE TABLE IF NOT EXISTS rocpd_metadata (id INTEGER PRIMARY KEY AUTOINCREMENT, tag TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rocpd_string (id INTEGER PRIMARY KEY AUTOINCREMENT, string TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rocpd_ustring (id INTEGER PRIMARY KEY AUTOINCREMENT, string TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rocpd_api (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL, tid INTEGER NOT NULL,
    start INTEGER NOT NULL, end INTEGER NOT NULL,
    apiName_id INTEGER NOT NULL REFERENCES rocpd_string(id),
    category_id INTEGER NOT NULL DEFAULT 1 REFERENCES rocpd_string(id),
    domain_id INTEGER NOT NULL DEFAULT 1 REFERENCES rocpd_string(id),
    args_id INTEGER NOT NULL DEFAULT 1 REFERENCES rocpd_ustring(id),
    correlation_id INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS rocpd_op (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    gpuId INTEGER NOT NULL, queueId INTEGER NOT NULL, sequenceId INTEGER NOT NULL DEFAULT 0,
    start INTEGER NOT NULL, end INTEGER NOT NULL,
    description_id INTEGER NOT NULL REFERENCES rocpd_string(id),
    opType_id INTEGER NOT NULL REFERENCES rocpd_string(id),
    correlation_id INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS rocpd_api_ops (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    api_id INTEGER NOT NULL REFERENCES rocpd_api(id),
    op_id INTEGER NOT NULL REFERENCES rocpd_op(id));
CREATE TABLE IF NOT EXISTS rocpd_kernelapi (
    api_ptr_id INTEGER PRIMARY KEY REFERENCES rocpd_api(id),
    stream TEXT NOT NULL DEFAULT '',
    gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL,
    workgroupX INTEGER NOT NULL, workgroupY INTEGER NOT NULL, workgroupZ INTEGER NOT NULL,
    groupSegmentSize INTEGER NOT NULL, privateSegmentSize INTEGER NOT NULL DEFAULT 0,
    kernelName_id INTEGER NOT NULL REFERENCES rocpd_string(id));
CREATE TABLE IF NOT EXISTS rocpd_copyapi (
    api_ptr_id INTEGER PRIMARY KEY REFERENCES rocpd_api(id),
    stream TEXT NOT NULL DEFAULT '',
    size INTEGER NOT NULL, width INTEGER NOT NULL DEFAULT 0, height INTEGER NOT NULL DEFAULT 0,
    kind INTEGER NOT NULL, dst TEXT NOT NULL DEFAULT '', src TEXT NOT NULL DEFAULT '',
    dstDevice INTEGER NOT NULL DEFAULT -1, srcDevice INTEGER NOT NULL DEFAULT -1,
    sync INTEGER NOT NULL DEFAULT 0, pinned INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS rocpd_monitor (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceType TEXT NOT NULL, deviceId INTEGER NOT NULL, monitorType TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rocpd_counter (id INTEGER PRIMARY KEY AUTOINCREMENT, value REAL NOT NULL, op_id INTEGER NOT NULL, name_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rocpd_stackframe (id INTEGER PRIMARY KEY AUTOINCREMENT, api_ptr_id INTEGER NOT NULL, depth INTEGER NOT NULL, name_id INTEGER NOT NULL);

-- rtl-ebpf additions ------------------------------------------------------------------
-- One row per API call (same id as rocpd_api): what RPD has no column for.
--   ret: the return value, as rtl_api_meaning.ret_kind says (NULL: never seen, or none)
--   status: 0 complete, 1 return never seen (thread exited / exec / trace ended while inside)
--   a0..a3: the decoded arguments that matter for this API (meaning: rtl_api_meaning)
CREATE TABLE IF NOT EXISTS rtl_api (
    api_id INTEGER PRIMARY KEY REFERENCES rocpd_api(id),
    ret INTEGER, status INTEGER NOT NULL DEFAULT 0,
    a0 INTEGER, a1 INTEGER, a2 INTEGER, a3 INTEGER);
-- What rtl_api's values mean for each API in this trace, written with its first call (so a
-- trace is read with the meaning it was written with):
--   ret_kind: hipError_t | CUresult | cudaError_t (error codes: non-zero = failure) | pointer |
--             bool | int8..int64 | uint8..uint64 | void | other (not stored) | unknown (raw)
--   a0..a3: what rtl_api.a0..a3 hold (NULL: nothing is recorded there)
--   hex: bit N set = aN is an address, handle or bit mask (shown in hex)
CREATE TABLE IF NOT EXISTS rtl_api_meaning (
    apiName_id INTEGER PRIMARY KEY REFERENCES rocpd_string(id),
    ret_kind TEXT NOT NULL,
    a0 TEXT, a1 TEXT, a2 TEXT, a3 TEXT,
    hex INTEGER NOT NULL DEFAULT 0);
-- One row per GPU op (same id as rocpd_op; markers have none): how its API call was found.
--   link: 1 correlation (record number since the profiler session began), 2 sequence (order +
--   time windows), 3 time alone; not linked: 0 thread never seen, 4 no call fits, 5 ambiguous
--   pid: the process that published the op (the pid the kernel probe saw call
--        rtl_agent_publish, never what the batch says); NULL in traces from before version 4
CREATE TABLE IF NOT EXISTS rtl_op (
    op_id INTEGER PRIMARY KEY REFERENCES rocpd_op(id),
    link INTEGER NOT NULL,
    pid INTEGER);
-- Traced processes.
CREATE TABLE IF NOT EXISTS rtl_process (
    pid INTEGER PRIMARY KEY, ppid INTEGER, exe TEXT, cmdline TEXT,
    first_ns INTEGER, last_ns INTEGER, exited INTEGER NOT NULL DEFAULT 0);
-- Threads that made traced calls: the name the kernel gave the thread (comm, at most 15
-- bytes, as the thread set it: pthread_setname_np / prctl) when the collector first saw it call.
CREATE TABLE IF NOT EXISTS rtl_thread (
    pid INTEGER NOT NULL, tid INTEGER NOT NULL, comm TEXT NOT NULL, PRIMARY KEY (pid, tid));
-- Call sites (--stacks; docs/trace-format.md). One row per distinct frame: a code address in a
-- file (module, its ELF address) or, outside any known mapping, an absolute address (module '').
--   symbol: the demangled function (NULL: none covers it); runtime: 1 in a GPU runtime library
CREATE TABLE IF NOT EXISTS rtl_frame (
    id INTEGER PRIMARY KEY, module TEXT NOT NULL, address INTEGER NOT NULL,
    symbol TEXT, symbol_offset INTEGER, runtime INTEGER NOT NULL DEFAULT 0);
-- Python frames (CPython processes, --stacks): their rtl_frame row has module = the code's
-- file, symbol = its function (qualified name), address = line; here the line (NULL: unknown)
-- and the function's first line. A Python frame whose code object could not be read has a row
-- here with NULLs and an rtl_frame row with an empty module and the code object's address.
CREATE TABLE IF NOT EXISTS rtl_python_frame (
    frame_id INTEGER PRIMARY KEY REFERENCES rtl_frame(id), line INTEGER, first_line INTEGER);
-- One row per distinct stack; its frames innermost first in rtl_stack_frame. site_frame_id: the
-- innermost frame of user code (not a runtime library, not a compiler's kernel launch stub).
CREATE TABLE IF NOT EXISTS rtl_stack (
    id INTEGER PRIMARY KEY, depth INTEGER NOT NULL,
    site_frame_id INTEGER REFERENCES rtl_frame(id), truncated INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS rtl_stack_frame (
    stack_id INTEGER NOT NULL REFERENCES rtl_stack(id), depth INTEGER NOT NULL,
    frame_id INTEGER NOT NULL REFERENCES rtl_frame(id), PRIMARY KEY (stack_id, depth));
-- The stack of each call that recorded one.
CREATE TABLE IF NOT EXISTS rtl_api_stack (
    api_id INTEGER PRIMARY KEY REFERENCES rocpd_api(id), stack_id INTEGER NOT NULL REFERENCES rtl_stack(id));
-- Stream captures (Begin..EndCapture) and the calls captured into their graph, in node order.
CREATE TABLE IF NOT EXISTS rtl_capture (
    id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, stream INTEGER NOT NULL,
    begin_api_id INTEGER NOT NULL, end_api_id INTEGER NOT NULL, graph INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS rtl_capture_call (
    capture_id INTEGER NOT NULL REFERENCES rtl_capture(id), node INTEGER NOT NULL,
    api_id INTEGER NOT NULL REFERENCES rocpd_api(id), PRIMARY KEY (capture_id, node));
-- Each graph launch whose executable graph came from a traced capture.
CREATE TABLE IF NOT EXISTS rtl_graph_launch (
    api_id INTEGER PRIMARY KEY REFERENCES rocpd_api(id), capture_id INTEGER NOT NULL REFERENCES rtl_capture(id));
-- A replayed graph node's GPU op -> the call that created the node during capture.
CREATE TABLE IF NOT EXISTS rtl_op_site (
    op_id INTEGER PRIMARY KEY REFERENCES rocpd_op(id), api_id INTEGER NOT NULL REFERENCES rocpd_api(id));
-- Libraries probes were attached to.
CREATE TABLE IF NOT EXISTS rtl_library (
    id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, dev INTEGER NOT NULL,
    inode INTEGER NOT NULL, probes INTEGER NOT NULL, missing TEXT NOT NULL DEFAULT '');
"#;

/// Every index of a finished trace (migration adds whichever a file lacks).
pub const INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS rocpd_api_correlation_id ON rocpd_api(correlation_id);
CREATE INDEX IF NOT EXISTS rocpd_op_correlation_id ON rocpd_op(correlation_id);
CREATE INDEX IF NOT EXISTS rocpd_api_ops_api_id ON rocpd_api_ops(api_id);
CREATE INDEX IF NOT EXISTS rocpd_api_ops_op_id ON rocpd_api_ops(op_id);
"#;

/// The indexes kept live while tracing: those on the (small) GPU op tables. The index on
/// `rocpd_api.correlation_id` (one entry per API call, the bulk of the file) is built once at
/// the end from [`INDEXES`]; keeping it live costs the writer about a sixth of its throughput.
pub const TRACING_INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS rocpd_op_correlation_id ON rocpd_op(correlation_id);
CREATE INDEX IF NOT EXISTS rocpd_api_ops_api_id ON rocpd_api_ops(api_id);
CREATE INDEX IF NOT EXISTS rocpd_api_ops_op_id ON rocpd_api_ops(op_id);
"#;

/// Views RPD's tools use (`api`, `op`, `top`, `busy`, `kernel`, `copy`), defined over our tables.
pub const VIEWS: &str = r#"
CREATE VIEW IF NOT EXISTS api AS
    SELECT rocpd_api.id, pid, tid, start, end, A.string AS apiName, B.string AS args,
           C.string AS category, D.string AS domain, correlation_id
    FROM rocpd_api INNER JOIN rocpd_string A ON A.id = rocpd_api.apiName_id
                   INNER JOIN rocpd_ustring B ON B.id = rocpd_api.args_id
                   INNER JOIN rocpd_string C ON C.id = rocpd_api.category_id
                   INNER JOIN rocpd_string D ON D.id = rocpd_api.domain_id;
CREATE VIEW IF NOT EXISTS op AS
    SELECT rocpd_op.id, gpuId, queueId, sequenceId, start, end, A.string AS description,
           B.string AS opType, correlation_id
    FROM rocpd_op INNER JOIN rocpd_string A ON A.id = rocpd_op.description_id
                  INNER JOIN rocpd_string B ON B.id = rocpd_op.opType_id;
CREATE VIEW IF NOT EXISTS busy AS
    SELECT A.gpuId, GpuTime, WallTime, GpuTime * 1.0 / WallTime AS Busy
    FROM (SELECT gpuId, sum(end - start) AS GpuTime FROM rocpd_op WHERE gpuId >= 0 GROUP BY gpuId) A
    INNER JOIN (SELECT max(end) - min(start) AS WallTime FROM rocpd_op WHERE gpuId >= 0);
CREATE VIEW IF NOT EXISTS top AS
    SELECT C.string AS Name, count(C.string) AS TotalCalls, sum(A.end - A.start) / 1000 AS TotalDuration_us,
           (sum(A.end - A.start) / count(C.string)) / 1000 AS Ave_us,
           sum(A.end - A.start) * 100.0 / (SELECT sum(end - start) FROM rocpd_op WHERE gpuId >= 0) AS Percentage
    FROM (SELECT opType_id AS name_id, start, end FROM rocpd_op
              WHERE gpuId >= 0 AND description_id IN (SELECT id FROM rocpd_string WHERE string = '')
          UNION ALL
          SELECT description_id, start, end FROM rocpd_op
              WHERE gpuId >= 0 AND description_id NOT IN (SELECT id FROM rocpd_string WHERE string = '')) A
    JOIN rocpd_string C ON C.id = A.name_id
    GROUP BY Name ORDER BY TotalDuration_us DESC;
CREATE VIEW IF NOT EXISTS kernel AS
    SELECT B.id, B.pid, B.tid, B.start, B.end, A.stream, A.gridX, A.gridY, A.gridZ,
           A.workgroupX, A.workgroupY, A.workgroupZ, A.groupSegmentSize, C.string AS kernelName
    FROM rocpd_kernelapi A JOIN rocpd_api B ON B.id = A.api_ptr_id
                           JOIN rocpd_string C ON C.id = A.kernelName_id;
CREATE VIEW IF NOT EXISTS copy AS
    SELECT B.id, B.pid, B.tid, B.start, B.end, C.string AS apiName, A.stream, A.size,
           A.width, A.height, A.kind, A.dst, A.src, A.dstDevice, A.srcDevice, A.sync, A.pinned
    FROM rocpd_copyapi A JOIN rocpd_api B ON B.id = A.api_ptr_id
                         JOIN rocpd_string C ON C.id = B.apiName_id;
"#;

/// The first rows of `rocpd_string` / `rocpd_ustring`: id 1 is the empty string in both, so
/// `category_id`, `domain_id` and `args_id` default to it.
pub const SEED: &str = r#"
INSERT OR IGNORE INTO rocpd_string (id, string) VALUES (1, '');
INSERT OR IGNORE INTO rocpd_ustring (id, string) VALUES (1, '');
"#;

/// What `rtl_api.a0..a3` hold on rows of `status` 5 (calls the in-process profiler recorded and
/// the probes did not see), whatever the API: the profiler's thread id and the stream.
pub const PROFILER_ONLY_ARGS: [Option<&str>; 4] = [Some("profiler_thread_id"), None, None, Some("stream")];
