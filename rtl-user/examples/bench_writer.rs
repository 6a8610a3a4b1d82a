//! The SQLite writer alone: how many API calls per second it stores.
//!
//! `cargo run --release -p rtl-user --example bench_writer [CALLS]` writes CALLS (default
//! 2 000 000) API calls (a `rocpd_api` + an `rtl_api` row each, in batches of 8192 rows as the
//! collector sends them) into a fresh file under target/bench and prints calls/s and bytes/row.
//! This is the stage that bounds how fast the collector can empty its backlog.

use std::sync::Arc;
use std::time::Instant;

use rtl_user::join::rows::{ApiRow, CallStatus, Row, RtlApiRow};
use rtl_user::trace::writer::TraceWriter;

fn main() -> anyhow::Result<()> {
    let calls: i64 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(2_000_000);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("writer.db");
    let mut w = TraceWriter::create(&path, true)?;
    let names: Vec<Arc<str>> = ["hipGetErrorString", "hipLaunchKernel", "hipMemcpyAsync"].iter().map(|s| Arc::from(*s)).collect();
    let t0 = Instant::now();
    let mut batch = Vec::with_capacity(8192);
    let mut ts = 1_000_000_000u64;
    for id in 1..=calls {
        ts += 1000;
        batch.push(Row::Api(ApiRow {
            id,
            pid: 4242,
            tid: 4242 + (id % 4) as u32,
            start: ts,
            end: ts + 400,
            name: names[(id % 3) as usize].clone(),
        }));
        batch.push(Row::RtlApi(RtlApiRow { id, ret: Some(0), status: CallStatus::Complete, a: [Some(id), None, None, None] }));
        if batch.len() >= 8192 {
            w.write(&batch)?;
            batch.clear();
        }
    }
    w.write(&batch)?;
    let t_write = t0.elapsed().as_secs_f64();
    w.finish()?;
    let t_all = t0.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path)?.len();
    println!(
        "writer: {calls} API calls in {t_write:.2} s = {:.0} calls/s while tracing; {t_all:.2} s with finish (index build, checkpoint) = {:.0} calls/s; {:.1} bytes per API row",
        calls as f64 / t_write,
        calls as f64 / t_all,
        size as f64 / calls as f64
    );
    std::fs::remove_file(&path)?;
    Ok(())
}
