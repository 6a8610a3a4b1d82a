//! What `rocpd_metadata`'s tags mean to the readers: which count lost data, and how their
//! values are shown (`summary --json`, the HTML report).

use serde_json::{json, Value};

/// Words that make a `rocpd_metadata` tag a counter of lost or incomplete data (the collector
/// writes e.g. ringbuf_drops, calls_unclosed, returns_without_entry, records_rejected,
/// gpu_ops_unlinked, gpu_ops_ambiguous, agent_dropped_queue_full, agent_batches_truncated).
pub(crate) const LOSS_WORDS: &[&str] = &[
    "drop",
    "lost",
    "overflow",
    "missed",
    "truncat",
    "unlinked",
    "unclosed",
    "without",
    "rejected",
    "oversized",
    "ambiguous",
    "skipped",
    // spool_discarded_records (read but not kept: backlog full), spool_abandoned_bytes (backlog
    // left unwritten when interrupted twice)
    "discard",
    "abandon",
    // strings_unreadable (a string argument kept empty), agent_copies_untimed (copies whose
    // times were never read)
    "unreadable",
    "copies_untimed",
];

/// Tags with a loss word that count no loss: loader events after which the process ran on
/// because it had loaded nothing rtl-ebpf probes.
const NOT_LOSS: &[&str] = &["loader_events_skipped"];

pub(crate) fn is_drop_tag(tag: &str) -> bool {
    let t = tag.to_ascii_lowercase();
    let base = t.rsplit('.').next().unwrap_or(&t);
    !NOT_LOSS.contains(&base) && LOSS_WORDS.iter().any(|k| t.contains(k))
}

/// Metadata tags that hold text even when it looks like a number.
const TEXT_TAGS: &[&str] = &["hostname", "host", "node", "rtl_version", "clock", "path"];

/// A metadata value for JSON: integers and decimals as numbers, comma-separated integers (per
/// CPU counters) as arrays, the session mode structured (see [`mode_value`]), the rest as text.
pub(crate) fn meta_value(tag: &str, v: &str) -> Value {
    let base = tag.rsplit('.').next().unwrap_or(tag);
    if base == "mode" {
        return mode_value(v);
    }
    if TEXT_TAGS.contains(&base) {
        return json!(v);
    }
    let t = v.trim();
    if let Ok(i) = t.parse::<i64>() {
        return json!(i);
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.' || b == b'-') {
        if let Ok(f) = t.parse::<f64>() {
            if f.is_finite() {
                return json!(f);
            }
        }
    }
    if t.contains(',') {
        let parts: Option<Vec<i64>> = t.split(',').map(|x| x.trim().parse::<i64>().ok()).collect();
        if let Some(parts) = parts {
            return json!(parts);
        }
    }
    json!(v)
}

/// The session mode the collector records (`All`, `Pids([1, 2])`, `Run(["cmd", "arg"])`, as
/// Rust prints them; or already JSON) as `{"kind": "all"}`, `{"kind": "attach", "pids": [..]}`,
/// `{"kind": "run", "command": [..]}`; anything else as `{"kind": "unknown", "text": ..}`.
pub(crate) fn mode_value(v: &str) -> Value {
    let t = v.trim();
    if t.starts_with('{') {
        if let Ok(j @ Value::Object(_)) = serde_json::from_str::<Value>(t) {
            return j;
        }
    }
    let unknown = || json!({"kind": "unknown", "text": v});
    if t == "All" {
        return json!({"kind": "all"});
    }
    if let Some(inner) = t.strip_prefix("Pids([").and_then(|r| r.strip_suffix("])")) {
        let pids: Option<Vec<u64>> = inner.split(',').filter(|x| !x.trim().is_empty()).map(|x| x.trim().parse().ok()).collect();
        return pids.map_or_else(unknown, |p| json!({"kind": "attach", "pids": p}));
    }
    if let Some(inner) = t.strip_prefix("Run([").and_then(|r| r.strip_suffix("])")) {
        return debug_strings(inner).map_or_else(unknown, |c| json!({"kind": "run", "command": c}));
    }
    unknown()
}

/// Parses `"a", "b\"c"` (strings as Rust's `{:?}` writes them) into the strings.
fn debug_strings(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut it = s.chars().peekable();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            it.next();
        }
        match it.next() {
            None => return Some(out),
            Some('"') => {}
            Some(_) => return None,
        }
        let mut cur = String::new();
        loop {
            match it.next()? {
                '"' => break,
                '\\' => match it.next()? {
                    'n' => cur.push('\n'),
                    'r' => cur.push('\r'),
                    't' => cur.push('\t'),
                    '0' => cur.push('\0'),
                    'u' => {
                        if it.next()? != '{' {
                            return None;
                        }
                        let mut hex = String::new();
                        loop {
                            match it.next()? {
                                '}' => break,
                                c => hex.push(c),
                            }
                        }
                        cur.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    c => cur.push(c), // \\ \" \'
                },
                c => cur.push(c),
            }
        }
        out.push(cur);
    }
}

#[cfg(test)]
mod loss_tag_tests {
    use super::is_drop_tag;

    #[test]
    fn loss_counters_are_told_from_others() {
        for t in ["ringbuf_drops", "strings_unreadable", "agent_copies_untimed", "agent_graph_batches_skipped", "gpu_join_calls_dropped"] {
            assert!(is_drop_tag(t), "{t} counts lost data");
        }
        for t in ["loader_events_skipped", "strings_read_at_return", "loader_stops", "gpu_join_calls_peak", "agent_batches"] {
            assert!(!is_drop_tag(t), "{t} counts no loss");
        }
    }
}
