//! Chrome trace-event JSON (opened by ui.perfetto.dev and chrome://tracing), gzip when the
//! output name ends in `.gz`. Streamed: memory does not grow with the trace.
//!
//! Layout: `M` metadata names processes/threads; API calls and GPU ops are `X` events (ts/dur in
//! microseconds with nanosecond decimals); each API -> op link is a flow: `s` inside the API
//! slice and `f` with `"bp":"e"` inside the op slice, same `id`.

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::json;

use super::timeline::{self, Arg, PartFiles, PartSink, Sink, Slice};

struct JsonSink<W: Write> {
    w: W,
    first: bool,
}

fn us(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:03}", a / 1000, a % 1000)
}

impl<W: Write> JsonSink<W> {
    fn sep(&mut self) -> Result<()> {
        if self.first {
            self.first = false;
            self.w.write_all(b"\n")?;
        } else {
            self.w.write_all(b",\n")?;
        }
        Ok(())
    }
    fn meta(&mut self, pid: i64, tid: Option<i64>, name: &str, args: serde_json::Value) -> Result<()> {
        self.sep()?;
        let mut v = json!({"ph": "M", "name": name, "pid": pid, "args": args});
        if let Some(t) = tid {
            v["tid"] = json!(t);
        }
        serde_json::to_writer(&mut self.w, &v)?;
        Ok(())
    }
}

impl<W: Write> Sink for JsonSink<W> {
    fn process(&mut self, pid: i64, name: &str, cmdline: Option<&str>, sort_index: i64) -> Result<()> {
        self.meta(pid, None, "process_name", json!({"name": name}))?;
        self.meta(pid, None, "process_sort_index", json!({"sort_index": sort_index}))?;
        if let Some(c) = cmdline {
            self.meta(pid, None, "process_labels", json!({"labels": c}))?;
        }
        Ok(())
    }
    fn thread(&mut self, pid: i64, tid: i64, name: &str, sort_index: i64) -> Result<()> {
        self.meta(pid, Some(tid), "thread_name", json!({"name": name}))?;
        self.meta(pid, Some(tid), "thread_sort_index", json!({"sort_index": sort_index}))
    }
    fn slice(&mut self, s: &Slice) -> Result<()> {
        self.sep()?;
        // Hand-formatted (no per-event JSON tree) so ts/dur keep exact nanoseconds.
        write!(self.w, r#"{{"ph":"X","cat":"{}","name":"#, s.cat)?;
        serde_json::to_writer(&mut self.w, s.name)?;
        write!(self.w, r#","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"#, s.pid, s.tid, us(s.ts), us(s.dur))?;
        for (i, (k, v)) in s.args.iter().enumerate() {
            // keys are identifiers (fixed, or checked by read::meaning): no escaping needed
            write!(self.w, r#"{}"{k}":"#, if i > 0 { "," } else { "" })?;
            match v {
                Arg::Int(n) => write!(self.w, "{n}")?,
                Arg::Hex(n) => write!(self.w, r#""{n:#x}""#)?,
                Arg::Str(t) => serde_json::to_writer(&mut self.w, t)?,
            }
        }
        self.w.write_all(b"}}")?;
        // Flow points 1 ns inside the slice so they bind to it, not to a neighbour.
        let inside = s.ts + s.dur.min(1);
        for id in &s.flow_out {
            self.sep()?;
            write!(self.w, r#"{{"ph":"s","cat":"launch","name":"launch","id":{id},"pid":{},"tid":{},"ts":{}}}"#, s.pid, s.tid, us(inside))?;
        }
        for id in &s.flow_in {
            self.sep()?;
            write!(
                self.w,
                r#"{{"ph":"f","bp":"e","cat":"launch","name":"launch","id":{id},"pid":{},"tid":{},"ts":{}}}"#,
                s.pid,
                s.tid,
                us(inside)
            )?;
        }
        Ok(())
    }
    fn flush_track(&mut self, _pid: i64, _tid: i64) -> Result<()> {
        Ok(())
    }
}

impl<W: Write + Send> PartSink for JsonSink<W> {
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.w.flush()?;
        Ok(())
    }
}

fn write_all(conn: &super::open::Trace, db: &Path, out: &Path, w: &mut dyn Write) -> Result<()> {
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"otherData\":")?;
    let mut meta = serde_json::Map::new();
    meta.insert("source".into(), json!(db.display().to_string()));
    let mut st = conn.prepare("SELECT tag, value FROM rocpd_metadata ORDER BY id")?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let v: rusqlite::types::Value = r.get(1)?;
        let v = match v {
            rusqlite::types::Value::Integer(i) => i.to_string(),
            rusqlite::types::Value::Real(f) => f.to_string(),
            rusqlite::types::Value::Text(t) => t,
            _ => String::new(),
        };
        meta.insert(r.get::<_, String>(0)?, json!(v));
    }
    serde_json::to_writer(&mut *w, &serde_json::Value::Object(meta))?;
    w.write_all(b",\"traceEvents\":[")?;
    let p = timeline::prelude(conn)?;
    let mut sink = JsonSink { w: &mut *w, first: true };
    timeline::emit_tracks(conn, &p, &mut sink)?;
    let wrote_any = !sink.first;
    // API calls and GPU ops in parallel, each into a part file; then appended in order. Part
    // events all start with ",\n": drop the first one when nothing came before.
    let (files, parts) = PartFiles::new(out, 2)?;
    let mut files = files.into_iter().map(|f| JsonSink { w: BufWriter::with_capacity(1 << 20, f), first: false });
    let (a, b) = (files.next().unwrap(), files.next().unwrap());
    timeline::emit_parts(conn, &p, [Box::new(a), Box::new(b)])?;
    parts.append_to(w, if wrote_any { 0 } else { 2 })?;
    w.write_all(b"\n]}\n")?;
    Ok(())
}

/// Writes `db` as Chrome trace JSON to `out` (gzip-compressed when `out` ends in `.gz`).
pub fn convert_perfetto_json(db: &Path, facts: crate::api_meaning::ApiFacts, out: &Path) -> Result<()> {
    let conn = super::open::open_trace(db, facts)?;
    timeline::bounded_memory(&conn)?;
    let (f, guard) = super::open::OutFile::create(&[db], out)?;
    let gz = out.extension().is_some_and(|e| e == "gz");
    let res = if gz {
        // Buffer in front of the encoder: it compresses poorly and slowly in tiny writes.
        let mut w = BufWriter::with_capacity(
            1 << 20,
            flate2::write::GzEncoder::new(BufWriter::with_capacity(1 << 20, f), flate2::Compression::fast()),
        );
        write_all(&conn, db, out, &mut w).and_then(|_| {
            let enc = w.into_inner().map_err(|e| e.into_error())?;
            Ok(enc.finish()?.flush()?)
        })
    } else {
        let mut w = BufWriter::with_capacity(1 << 20, f);
        write_all(&conn, db, out, &mut w).and_then(|_| Ok(w.flush()?))
    };
    res.with_context(|| format!("converting {} to {}", db.display(), out.display()))?;
    guard.commit()
}
