//! The short summary printed when a tracing session ends (the full one is `rtl-ebpf summary`).

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Result;
use rusqlite::Connection;

use crate::session::Outcome;

pub fn print_session_summary(o: &Outcome) -> Result<()> {
    let conn = Connection::open_with_flags(&o.output, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut st = conn.prepare(
        "SELECT s.string, count(*), sum(a.end - a.start), \
                sum(CASE WHEN r.ret IS NOT NULL AND r.ret != 0 THEN 1 ELSE 0 END) \
         FROM rocpd_api a JOIN rocpd_string s ON s.id = a.apiName_id \
         LEFT JOIN rtl_api r ON r.api_id = a.id \
         GROUP BY a.apiName_id ORDER BY 3 DESC LIMIT 10",
    )?;
    let rows: Vec<(String, i64, i64, i64)> =
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?.collect::<Result<_, _>>()?;
    let procs: i64 = conn.query_row("SELECT count(*) FROM rtl_process", [], |r| r.get(0))?;
    // Built first, written once, errors ignored: a closed stderr must not turn a finished trace
    // into a panic (exit code 101).
    let mut w = String::new();
    let _ = writeln!(w);
    let _ = writeln!(w, "{:<32} {:>10} {:>14} {:>10} {:>8}", "top APIs by total time", "calls", "total us", "mean us", "errors");
    for (name, calls, total, errors) in &rows {
        let _ = writeln!(
            w,
            "{:<32} {:>10} {:>14.1} {:>10.2} {:>8}",
            name,
            calls,
            *total as f64 / 1e3,
            *total as f64 / 1e3 / (*calls).max(1) as f64,
            errors
        );
    }
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "{} API calls from {} processes written, {} GPU/marker ops; {} events dropped{}",
        o.written.api_rows,
        procs,
        o.written.op_rows,
        o.drops,
        if o.drops > 0 { " (ring buffer full: raise --spool-mb or --buffer-mb; see docs/tracing.md)" } else { "" }
    );
    let _ = writeln!(w, "trace: {}", o.output.display());
    let _ = std::io::stderr().write_all(w.as_bytes());
    Ok(())
}
