//! The summary's header: where and when the trace was taken, of what, by which rtl-ebpf and with
//! which GPU timestamp source, read from `rocpd_metadata` (a trace from another tool has none of
//! these: each is then absent).

use serde_json::Value;

use crate::read::metadata::mode_value;

#[derive(Debug, Clone, Default)]
pub struct Header {
    /// `hostname` (a merged file: every input's, comma-separated).
    pub host: Option<String>,
    /// The trace's start as a UTC date and time (`trace_start_ns` + `realtime_minus_monotonic_ns`).
    pub date_utc: Option<String>,
    /// The session mode, structured (`{"kind": "run", "command": [..]}`, ...).
    pub mode: Option<Value>,
    /// What was traced, in words: the command, the pids, or "every process".
    pub command: Option<String>,
    /// `rtl_version` of the collector that wrote the trace.
    pub version: Option<String>,
    /// The GPU timestamp sources (`gpu_source.PID` tags), distinct, in tag order.
    pub gpu_sources: Vec<String>,
    /// `clock`.
    pub clock: Option<String>,
}

/// Proleptic Gregorian date of a count of days since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `2026-12-01 22:40:05 UTC` for ns since the Unix epoch.
pub fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, s) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

/// What the mode says was traced, in words.
fn mode_words(v: &Value) -> Option<String> {
    let strs = |k: &str| {
        v[k].as_array().map(|a| a.iter().map(|x| x.as_str().map(str::to_string).unwrap_or_else(|| x.to_string())).collect::<Vec<_>>())
    };
    match v["kind"].as_str()? {
        "run" => strs("command").map(|c| c.join(" ")),
        "attach" => strs("pids").map(|p| format!("attach to pid {}", p.join(", "))),
        "all" => Some("every process on the node (--all)".into()),
        _ => v["text"].as_str().map(str::to_string),
    }
}

pub(super) fn header(metadata: &[(String, String)]) -> Header {
    let get = |t: &str| metadata.iter().find(|(k, _)| k == t).map(|(_, v)| v.clone());
    let all = |base: &str| -> Vec<String> {
        let mut v: Vec<String> = vec![];
        for (k, val) in metadata {
            if (k == base || k.ends_with(&format!(".{base}"))) && !v.contains(val) {
                v.push(val.clone());
            }
        }
        v
    };
    let hosts = all("hostname");
    let start = get("trace_start_ns").and_then(|v| v.trim().parse::<i64>().ok());
    let offset = get("realtime_minus_monotonic_ns").and_then(|v| v.trim().parse::<i64>().ok());
    let mode = get("mode").map(|m| mode_value(&m));
    let mut gpu_sources = vec![];
    for (k, v) in metadata {
        // gpu_source.PID; in a merged file inputN.gpu_source.PID
        if k.split('.').any(|p| p == "gpu_source") && !gpu_sources.contains(v) {
            gpu_sources.push(v.clone());
        }
    }
    Header {
        host: (!hosts.is_empty()).then(|| hosts.join(", ")),
        date_utc: start.zip(offset).map(|(s, o)| utc(s.saturating_add(o))),
        command: mode.as_ref().and_then(mode_words),
        mode,
        version: get("rtl_version"),
        gpu_sources,
        clock: get("clock"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_700_000_000_123_456_789), "2023-11-14 22:13:20 UTC");
        assert_eq!(utc(-1_000_000_000), "1969-12-31 23:59:59 UTC");
    }
}
