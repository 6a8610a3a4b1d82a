//! What a trace's `rtl_api.ret` and `a0..a3` mean, per API, as the trace itself records them
//! (`rtl_api_meaning`, written by the collector with each API's first call, or by migration for
//! older files): readers never guess from an API's name. The names come from a file another
//! user may have shaped: anything but a short identifier is replaced by the column's own name.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use crate::api_meaning::RetKind;
use crate::schema::PROFILER_ONLY_ARGS;

/// `rtl_api_meaning.ret_kind` values whose non-zero returns are failures, for SQL `IN`.
pub(crate) const ERROR_KINDS_SQL: &str = "('hipError_t', 'CUresult', 'cudaError_t')";

/// The raw column names, for values without a recorded meaning.
pub(crate) const RAW: [&str; 4] = ["a0", "a1", "a2", "a3"];

/// One API's meaning.
#[derive(Debug, Clone)]
pub(crate) struct Meaning {
    pub ret: RetKind,
    /// Name and "show in hex" of a0..a3; None: nothing is recorded there.
    pub args: [Option<(String, bool)>; 4],
}

fn identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// apiName_id -> meaning, for every API the trace describes.
pub(crate) fn load(conn: &Connection) -> Result<HashMap<i64, Meaning>> {
    let mut st = conn.prepare("SELECT apiName_id, ret_kind, a0, a1, a2, a3, hex FROM rtl_api_meaning")?;
    let mut rows = st.query([])?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let ret = r.get::<_, Option<String>>(1)?.as_deref().and_then(RetKind::parse).unwrap_or(RetKind::Unknown);
        let hex: i64 = r.get::<_, Option<i64>>(6)?.unwrap_or(0);
        let mut args: [Option<(String, bool)>; 4] = Default::default();
        for (i, a) in args.iter_mut().enumerate() {
            let name: Option<String> = r.get(2 + i)?;
            *a = name.map(|n| {
                let n = if identifier(&n) { n } else { RAW[i].to_string() };
                (n, hex & (1 << i) != 0)
            });
        }
        out.insert(id, Meaning { ret, args });
    }
    Ok(out)
}

/// The name and "show in hex" of column `i` (0..4) on a row of API `m` with status `status`.
/// Profiler-only rows (status 5) have their own fixed meaning; a value the trace does not
/// describe is shown raw (`aN`, hex).
pub(crate) fn arg(m: Option<&Meaning>, status: i64, i: usize) -> (&str, bool) {
    if status == 5 {
        return match PROFILER_ONLY_ARGS[i] {
            Some(n) => (n, n == "stream"),
            None => (RAW[i], true),
        };
    }
    match m.and_then(|m| m.args[i].as_ref()) {
        Some((n, hex)) => (n.as_str(), *hex),
        None => (RAW[i], true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_replaced() {
        assert!(identifier("shared_mem_bytes") && identifier("a0") && identifier("_x"));
        for bad in ["", "x\"y", "a b", "\u{1b}[31m", "1abc", &"a".repeat(65)] {
            assert!(!identifier(bad), "{bad:?}");
        }
    }
}
