//! The short summary printed when a tracing session ends (the full one is `rtl-ebpf summary`).

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Result;
use rusqlite::OptionalExtension;

use crate::session::Outcome;
use crate::term::escape;

/// The integer metadata counter `tag` (0 when absent).
fn counter(conn: &rusqlite::Connection, tag: &str) -> Result<u64> {
    let v: Option<String> = conn
        .query_row("SELECT CAST(value AS TEXT) FROM rocpd_metadata WHERE tag = ?1 ORDER BY id DESC LIMIT 1", [tag], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(v.and_then(|v| v.trim().parse().ok()).unwrap_or(0))
}

/// Prints [`session_summary_text`] on stderr (errors ignored: a closed stderr must not turn a
/// finished trace into a panic, exit code 101).
pub fn print_session_summary(o: &Outcome) -> Result<()> {
    let w = session_summary_text(o)?;
    let _ = std::io::stderr().write_all(w.as_bytes());
    Ok(())
}

/// `-q`: only the totals lines of [`session_summary_text`] (rows written, every kind of loss or
/// that nothing was lost, the file), without the table.
pub fn print_session_totals(o: &Outcome) -> Result<()> {
    let w = session_summary_text(o)?;
    let tail: String = w.lines().filter(|l| l.contains(" API calls from ") || l.starts_with("trace: ")).map(|l| format!("{l}\n")).collect();
    let _ = std::io::stderr().write_all(tail.as_bytes());
    Ok(())
}

/// The end-of-session text: top APIs, rows written, and every kind of loss.
pub fn session_summary_text(o: &Outcome) -> Result<String> {
    // Read like any trace (read-only, no side file another user planted is applied).
    let conn = crate::read::open_trace(&o.output)?;
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
    let mut w = String::new();
    let _ = writeln!(w);
    let _ = writeln!(w, "{:<32} {:>10} {:>14} {:>10} {:>8}", "top APIs by total time", "calls", "total us", "mean us", "errors");
    for (name, calls, total, errors) in &rows {
        let _ = writeln!(
            w,
            "{:<32} {:>10} {:>14.1} {:>10.2} {:>8}",
            escape(name),
            calls,
            *total as f64 / 1e3,
            *total as f64 / 1e3 / (*calls).max(1) as f64,
            errors
        );
    }
    let _ = writeln!(w);
    // Every kind of loss: records the ring buffer dropped or the backlog could not keep (both in
    // o.drops), and backlog abandoned unwritten when interrupted twice while draining it.
    let abandoned = counter(&conn, "spool_abandoned_bytes")?;
    let mut loss = format!("{} events dropped", o.drops);
    if o.drops > 0 {
        loss += " (ring buffer or backlog full: raise --spool-mb or --buffer-mb; see docs/tracing.md)";
    }
    if abandoned > 0 {
        loss += &format!(
            " and {:.1} MiB of read records abandoned unwritten (interrupted again while the backlog was written): the calls in them are lost (spool_abandoned_bytes)",
            abandoned as f64 / (1u64 << 20) as f64
        );
    }
    let _ = writeln!(w, "{} API calls from {} processes written, {} GPU/marker ops; {loss}", o.written.api_rows, procs, o.written.op_rows,);
    for line in gpu_source_lines(&conn)? {
        let _ = writeln!(w, "{line}");
    }
    let _ = writeln!(w, "trace: {}", crate::term::path(&o.output));
    Ok(w)
}

/// "GPU times: <what>" per distinct GPU source of the traced processes (metadata
/// `gpu_source.<pid>`, written by the GPU join from each agent's Info record), with the pids
/// that use it.
pub fn gpu_source_lines(conn: &rusqlite::Connection) -> Result<Vec<String>> {
    let mut st = conn.prepare("SELECT tag, value FROM rocpd_metadata WHERE tag LIKE 'gpu_source.%'")?;
    let rows: Vec<(String, String)> = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<_, _>>()?;
    let mut by_text: Vec<(String, Vec<u32>)> = Vec::new();
    for (tag, text) in rows {
        let Ok(pid) = tag["gpu_source.".len()..].parse::<u32>() else { continue };
        match by_text.iter_mut().find(|(t, _)| *t == text) {
            Some((_, pids)) => pids.push(pid),
            None => by_text.push((text, vec![pid])),
        }
    }
    Ok(by_text
        .into_iter()
        .map(|(text, mut pids)| {
            pids.sort_unstable();
            let shown: Vec<String> = pids.iter().take(8).map(u32::to_string).collect();
            let more = if pids.len() > 8 { format!(" and {} more", pids.len() - 8) } else { String::new() };
            let who = if pids.len() == 1 { "pid" } else { "pids" };
            // Terminal-safe: the text is ours, but the metadata of a file is input.
            format!("GPU times: {} ({who} {}{more})", escape(&text), shown.join(", "))
        })
        .collect())
}
