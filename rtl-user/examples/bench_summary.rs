//! Benchmark of `summary` on a large synthetic trace.
//!
//!     cargo run --release -p rtl-user --example bench_summary [-- ROWS [DB]]
//!
//! Generates (once; reused while the file exists) a trace with ROWS API rows (default 10 million),
//! one GPU op per two API calls (with its rocpd_api_ops link and rtl_api row), then times
//! `summary` (terminal text) and `summary --json` and prints the seconds.

use std::path::PathBuf;
use std::time::Instant;

use rtl_user::read::{summary, SummaryOptions};
use rtl_user::trace::schema;

fn generate(db: &PathBuf, rows: i64) -> anyhow::Result<()> {
    let tmp = db.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let c = rusqlite::Connection::open(&tmp)?;
    c.execute_batch("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -1000000;")?;
    c.execute_batch(schema::TABLES)?;
    c.execute_batch(schema::VIEWS)?;
    c.execute_batch(schema::SEED)?;
    c.execute_batch("BEGIN")?;
    c.execute(
        "INSERT INTO rocpd_metadata(tag, value) VALUES ('schema_version', ?1), ('rtl_schema_version', ?2),
             ('clock', 'CLOCK_MONOTONIC'), ('realtime_minus_monotonic_ns', '1700000000000000000'),
             ('dropped_events', '12'), ('hostname', 'bench')",
        rusqlite::params![schema::RPD_SCHEMA_VERSION, schema::RTL_SCHEMA_VERSION.to_string()],
    )?;
    // 40 API names (ids 2..41), 200 kernel names (42..241), op types (242, 243).
    let apis = [
        "hipLaunchKernel",
        "hipMemcpyAsync",
        "hipStreamSynchronize",
        "hipGetDevice",
        "hipSetDevice",
        "hipEventRecord",
        "hipEventSynchronize",
        "hipMalloc",
        "hipFree",
        "hipMemsetAsync",
    ];
    for i in 0..40 {
        c.execute(
            "INSERT INTO rocpd_string(id, string) VALUES (?1, ?2)",
            rusqlite::params![
                2 + i,
                format!("{}{}", apis[i as usize % apis.len()], if i >= 10 { format!("_v{i}") } else { String::new() })
            ],
        )?;
    }
    for i in 0..200 {
        c.execute(
            "INSERT INTO rocpd_string(id, string) VALUES (?1, ?2)",
            rusqlite::params![42 + i, format!("void gemm_kernel<float, {i}>(float const*, float*, int)")],
        )?;
    }
    c.execute_batch("INSERT INTO rocpd_string(id, string) VALUES (242, 'KernelExecution'), (243, 'CopyHostToDevice');")?;
    for p in 0..4 {
        c.execute(
            "INSERT INTO rtl_process(pid, ppid, exe, cmdline, first_ns, last_ns, exited) VALUES (?1, 1, '/usr/bin/python3', ?2, 0, ?3, 1)",
            rusqlite::params![1000 + p, format!("python3 train.py --rank {p}"), rows * 1000],
        )?;
    }
    // x = 1..rows. API x: pid 1000 + x%4, 8 threads each, 1 us apart; even x launch an op.
    c.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
         INSERT INTO rocpd_api(id, pid, tid, start, end, apiName_id, correlation_id)
         SELECT x, 1000 + x % 4, 1000 + x % 4 + (x / 4) % 8, x * 1000, x * 1000 + 200 + (x * 7919) % 5000,
                CASE WHEN x % 2 = 0 THEN 2 ELSE 3 + (x * 31) % 39 END, x FROM n",
        [rows],
    )?;
    c.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
         INSERT INTO rtl_api(api_id, ret, status, a0)
         SELECT x, CASE WHEN x % 1000 = 1 THEN 1 ELSE 0 END, CASE WHEN x % 100001 = 0 THEN 1 ELSE 0 END, x FROM n",
        [rows],
    )?;
    c.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
         INSERT INTO rocpd_op(id, gpuId, queueId, sequenceId, start, end, description_id, opType_id, correlation_id)
         SELECT x, x % 8, (x / 8) % 2, x, 2 * x * 1000 + 4000 + x % 3000, 2 * x * 1000 + 4000 + x % 3000 + 2000 + (x * 13) % 12000,
                42 + (x * 7) % 200, 242, 2 * x FROM n",
        [rows / 2],
    )?;
    c.execute(
        "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < ?1)
         INSERT INTO rocpd_api_ops(api_id, op_id) SELECT 2 * x, x FROM n",
        [rows / 2],
    )?;
    c.execute_batch("COMMIT")?;
    c.execute_batch(schema::INDEXES)?;
    drop(c);
    std::fs::rename(&tmp, db)?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let rows: i64 = args.next().map(|s| s.replace('_', "").parse()).transpose()?.unwrap_or(10_000_000);
    let db = args.next().map(PathBuf::from).unwrap_or_else(|| std::env::temp_dir().join(format!("rtl-bench-summary-{rows}.db")));
    if !db.exists() {
        let t = Instant::now();
        generate(&db, rows)?;
        eprintln!("generated {} ({rows} API rows) in {:.1} s", db.display(), t.elapsed().as_secs_f64());
    }
    let t = Instant::now();
    let data = rtl_user::read::summary_data(&db, 20)?;
    println!("summary_data: {:.2} s; scans (parallel): {:?}", t.elapsed().as_secs_f64(), data.timings);
    let mut text = Vec::new();
    let t = Instant::now();
    summary(&db, &SummaryOptions { json: false, html: None, top: 20, linked_only: false }, &mut text)?;
    let s_text = t.elapsed().as_secs_f64();
    let mut json = Vec::new();
    let t = Instant::now();
    summary(&db, &SummaryOptions { json: true, html: None, top: 20, linked_only: false }, &mut json)?;
    let s_json = t.elapsed().as_secs_f64();
    if std::env::var_os("BENCH_SHOW").is_some() {
        println!("{}", String::from_utf8_lossy(&text));
    }
    println!("summary of {rows} API rows ({}): {s_text:.2} s (text), {s_json:.2} s (--json)", db.display());
    Ok(())
}
