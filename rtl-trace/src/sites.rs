//! Call-site and capture rows (the collector's `stacks/` makes them) and writing them into
//! their tables (`schema.rs`: `rtl_frame`, `rtl_python_frame`, `rtl_stack`, `rtl_stack_frame`, `rtl_api_stack`,
//! `rtl_capture`, `rtl_capture_call`, `rtl_graph_launch`).

use std::sync::Arc;

use rusqlite::{params, Transaction};

/// `rtl_frame`: one distinct frame (a code address in a file, or an unknown absolute address).
#[derive(Debug, Clone)]
pub struct FrameRow {
    pub id: i64,
    /// The file (as the process mapped it), empty when the address was in no known mapping.
    pub module: String,
    /// The address as the file states it (its ELF vaddr); the absolute address when `module`
    /// is empty.
    pub address: u64,
    /// Demangled function name, None when no symbol covers the address.
    pub symbol: Option<String>,
    pub symbol_offset: Option<u64>,
    /// In a GPU runtime or tracing library: never the call site.
    pub runtime: bool,
    /// A Python frame (`rtl_python_frame`): `module` is the code's file (`co_filename`),
    /// `symbol` its function (`co_qualname`, 3.10 `co_name`), `address` the line (0: unknown).
    /// A Python frame whose code object could not be read has an empty `module`, no symbol and
    /// the code object's address.
    pub python: Option<PythonFrame>,
}

/// `rtl_python_frame`: what a Python frame adds to its `rtl_frame` row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PythonFrame {
    /// The line being run (for a caller, the line of its call); None when not known.
    pub line: Option<i64>,
    /// The function's first line (`co_firstlineno`).
    pub first_line: Option<i64>,
}

/// Rows of the call-site tables (`docs/trace-format.md`).
#[derive(Debug, Clone)]
pub enum SiteRow {
    Frame(FrameRow),
    /// `rtl_stack` (+ `rtl_stack_frame`): frames innermost first; `site` the call site frame.
    Stack {
        id: i64,
        frames: Arc<[i64]>,
        site: Option<i64>,
        truncated: bool,
    },
    /// `rtl_api_stack`: the stack of one call.
    ApiStack {
        api_id: i64,
        stack_id: i64,
    },
    /// `rtl_capture`: one stream capture (Begin..End), its calls (`rtl_capture_call`) in order.
    Capture {
        id: i64,
        pid: u32,
        stream: u64,
        begin_api_id: i64,
        end_api_id: i64,
        graph: u64,
        calls: Vec<i64>,
    },
    /// `rtl_graph_launch`: a graph launch and the capture its executable graph came from.
    GraphLaunch {
        api_id: i64,
        capture_id: i64,
    },
}

pub fn write(tx: &Transaction, row: &SiteRow) -> rusqlite::Result<()> {
    match row {
        SiteRow::Frame(f) => {
            tx.prepare_cached(
                "INSERT INTO rtl_frame (id, module, address, symbol, symbol_offset, runtime) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![f.id, f.module, f.address as i64, f.symbol, f.symbol_offset.map(|o| o as i64), f.runtime])?;
            if let Some(p) = f.python {
                tx.prepare_cached("INSERT INTO rtl_python_frame (frame_id, line, first_line) VALUES (?1, ?2, ?3)")?.execute(params![
                    f.id,
                    p.line,
                    p.first_line
                ])?;
            }
        }
        SiteRow::Stack { id, frames, site, truncated } => {
            tx.prepare_cached("INSERT INTO rtl_stack (id, depth, site_frame_id, truncated) VALUES (?1, ?2, ?3, ?4)")?.execute(params![
                id,
                frames.len() as i64,
                site,
                truncated
            ])?;
            let mut st = tx.prepare_cached("INSERT INTO rtl_stack_frame (stack_id, depth, frame_id) VALUES (?1, ?2, ?3)")?;
            for (depth, frame) in frames.iter().enumerate() {
                st.execute(params![id, depth as i64, frame])?;
            }
        }
        SiteRow::ApiStack { api_id, stack_id } => {
            tx.prepare_cached("INSERT INTO rtl_api_stack (api_id, stack_id) VALUES (?1, ?2)")?.execute(params![api_id, stack_id])?;
        }
        SiteRow::Capture { id, pid, stream, begin_api_id, end_api_id, graph, calls } => {
            tx.prepare_cached(
                "INSERT INTO rtl_capture (id, pid, stream, begin_api_id, end_api_id, graph) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![id, pid, *stream as i64, begin_api_id, end_api_id, *graph as i64])?;
            let mut st = tx.prepare_cached("INSERT INTO rtl_capture_call (capture_id, node, api_id) VALUES (?1, ?2, ?3)")?;
            for (node, api) in calls.iter().enumerate() {
                st.execute(params![id, node as i64, api])?;
            }
        }
        SiteRow::GraphLaunch { api_id, capture_id } => {
            tx.prepare_cached("INSERT INTO rtl_graph_launch (api_id, capture_id) VALUES (?1, ?2)")?.execute(params![api_id, capture_id])?;
        }
    }
    Ok(())
}
