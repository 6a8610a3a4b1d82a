//! What `rtl-ebpf check` tests against: thresholds from the command line (`--min-occupancy 0.8`,
//! `--max-gaps 100us:5`, `--max-mean hipGraphLaunch=150us`, `--max-p99 API=DUR`, `--window`)
//! and from a TOML file (`--thresholds FILE`, keys below); the command line adds to the file and
//! replaces its value for the same key.
//!
//! ```toml
//! min_occupancy = 0.8            # or "80%"
//! window = "auto"                # auto | replay | span
//! max_gaps = ["100us:5"]         # or one string
//! [max_mean]
//! hipGraphLaunch = "150us"
//! [max_p99]
//! hipGraphLaunch = "400us"
//! ```

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::error::Fatal;
use crate::read::summary::Window;

/// At most `max_count` gaps longer than `over_ns` on each GPU queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GapLimit {
    pub over_ns: i64,
    pub max_count: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds {
    /// Each device's occupancy in its window at least this (0..=1).
    pub min_occupancy: Option<f64>,
    pub max_gaps: Vec<GapLimit>,
    /// API name -> its mean duration at most this (ns).
    pub max_mean: Vec<(String, i64)>,
    /// API name -> its p99 duration at most this (ns).
    pub max_p99: Vec<(String, i64)>,
    pub window: Window,
}

impl Thresholds {
    pub fn is_empty(&self) -> bool {
        self.min_occupancy.is_none() && self.max_gaps.is_empty() && self.max_mean.is_empty() && self.max_p99.is_empty()
    }

    /// `o`'s thresholds added to these; the same key (gap length, API) takes `o`'s value.
    pub fn overlay(&mut self, o: Thresholds) {
        if o.min_occupancy.is_some() {
            self.min_occupancy = o.min_occupancy;
        }
        for g in o.max_gaps {
            self.max_gaps.retain(|x| x.over_ns != g.over_ns);
            self.max_gaps.push(g);
        }
        for (list, new) in [(&mut self.max_mean, o.max_mean), (&mut self.max_p99, o.max_p99)] {
            for (api, ns) in new {
                list.retain(|x| x.0 != api);
                list.push((api, ns));
            }
        }
        if o.window != Window::Auto {
            self.window = o.window;
        }
    }
}

fn usage(msg: String) -> anyhow::Error {
    anyhow!(Fatal::Usage(msg))
}

/// A duration with its unit: `150us`, `1.5 ms`, `2s`, `800ns` (`µs` too). A bare number is
/// refused: its unit would be a guess.
pub fn parse_duration_ns(s: &str) -> Result<i64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num.parse().map_err(|_| format!("`{s}` is not a duration: give a number and a unit (150us, 1.5ms, 2s)"))?;
    let scale = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "" => return Err(format!("`{s}` has no unit: write e.g. {num}us or {num}ms")),
        _ => return Err(format!("`{s}`: unknown unit `{unit}` (ns, us, ms, s)")),
    };
    let ns = v * scale;
    if !ns.is_finite() || ns > 1e18 {
        return Err(format!("`{s}` is too long"));
    }
    Ok(ns.round() as i64)
}

/// `--min-occupancy`: a fraction (0.8) or a percentage (80%), in 0..=1.
pub fn parse_occupancy(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("`{s}` is not an occupancy: give a fraction (0.8) or a percentage (80%)"))?;
    if !(0.0..=1.0).contains(&v) {
        return Err(format!("occupancy `{s}` is outside 0..1 (0%..100%)"));
    }
    Ok(v)
}

/// `--max-gaps DUR:N`: at most N gaps longer than DUR per queue.
pub fn parse_gap_limit(s: &str) -> Result<GapLimit, String> {
    let (d, n) = s.rsplit_once(':').ok_or_else(|| format!("`{s}`: write LENGTH:COUNT, e.g. 100us:5"))?;
    let over_ns = parse_duration_ns(d)?;
    let max_count = n.trim().parse().map_err(|_| format!("`{s}`: `{n}` is not a count"))?;
    Ok(GapLimit { over_ns, max_count })
}

/// `--max-mean API=DUR` / `--max-p99 API=DUR`.
pub fn parse_api_limit(s: &str) -> Result<(String, i64), String> {
    let (api, d) = s.split_once('=').ok_or_else(|| format!("`{s}`: write API=DURATION, e.g. hipGraphLaunch=150us"))?;
    let api = api.trim();
    if api.is_empty() {
        return Err(format!("`{s}`: no API name before `=`"));
    }
    Ok((api.to_string(), parse_duration_ns(d)?))
}

/// Reads a thresholds file (TOML, keys in the module's doc; anything else is refused). The file
/// is read with the readers' checks: a regular file, no link followed, at most 1 MiB.
pub fn from_file(path: &Path) -> Result<Thresholds> {
    let name = crate::term::path(path);
    let text = read_small(path).map_err(|e| usage(format!("{name}: cannot read the thresholds: {e}")))?;
    from_toml(&text).map_err(|e| usage(format!("{name}: {e}")))
}

fn read_small(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut s = String::new();
    f.take(1 << 20).read_to_string(&mut s)?;
    Ok(s)
}

/// Parses a thresholds TOML document.
pub fn from_toml(text: &str) -> Result<Thresholds, String> {
    let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message()))?;
    let mut t = Thresholds::default();
    let dur = |key: &str, v: &toml::Value| -> Result<i64, String> {
        v.as_str().ok_or_else(|| format!("{key}: give the duration as a string with its unit, e.g. \"150us\"")).and_then(parse_duration_ns)
    };
    for (k, v) in &doc {
        match k.as_str() {
            "min_occupancy" => {
                t.min_occupancy = Some(match v {
                    toml::Value::Float(f) => parse_occupancy(&f.to_string())?,
                    toml::Value::Integer(i) => parse_occupancy(&i.to_string())?,
                    toml::Value::String(s) => parse_occupancy(s)?,
                    _ => return Err("min_occupancy: give a fraction (0.8) or a percentage string (\"80%\")".into()),
                })
            }
            "window" => {
                t.window = v.as_str().and_then(Window::parse).ok_or_else(|| "window: one of \"auto\", \"replay\", \"span\"".to_string())?
            }
            "max_gaps" => {
                let items: Vec<&toml::Value> = match v {
                    toml::Value::Array(a) => a.iter().collect(),
                    other => vec![other],
                };
                for i in items {
                    let s = i.as_str().ok_or("max_gaps: strings LENGTH:COUNT, e.g. \"100us:5\"")?;
                    t.overlay(Thresholds { max_gaps: vec![parse_gap_limit(s)?], ..Default::default() });
                }
            }
            "max_mean" | "max_p99" => {
                let tab = v.as_table().ok_or_else(|| format!("[{k}]: a table of API = \"DURATION\""))?;
                for (api, d) in tab {
                    let entry = (api.clone(), dur(&format!("{k}.{api}"), d)?);
                    if k == "max_mean" {
                        t.max_mean.push(entry);
                    } else {
                        t.max_p99.push(entry);
                    }
                }
            }
            other => return Err(format!("unknown key `{other}` (known: min_occupancy, window, max_gaps, [max_mean], [max_p99])")),
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("150us"), Ok(150_000));
        assert_eq!(parse_duration_ns("1.5 ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns("800ns"), Ok(800));
        assert!(parse_duration_ns("150").unwrap_err().contains("no unit"));
        assert!(parse_duration_ns("3h").unwrap_err().contains("unknown unit"));
        assert_eq!(parse_gap_limit("100us:5"), Ok(GapLimit { over_ns: 100_000, max_count: 5 }));
        assert_eq!(parse_occupancy("80%"), Ok(0.8));
        assert!(parse_occupancy("1.5").is_err());
        assert_eq!(parse_api_limit("hipGraphLaunch=150us"), Ok(("hipGraphLaunch".into(), 150_000)));
    }

    #[test]
    fn toml_file_and_overlay() {
        let mut t = from_toml(
            "min_occupancy = 0.8\nwindow = \"span\"\nmax_gaps = [\"100us:5\", \"1ms:0\"]\n[max_mean]\nhipGraphLaunch = \"150us\"\n[max_p99]\nhipGraphLaunch = \"400us\"\n",
        )
        .unwrap();
        assert_eq!(t.min_occupancy, Some(0.8));
        assert_eq!(t.window, Window::Span);
        assert_eq!(t.max_gaps.len(), 2);
        assert_eq!(t.max_mean, vec![("hipGraphLaunch".to_string(), 150_000)]);
        t.overlay(Thresholds { max_gaps: vec![GapLimit { over_ns: 100_000, max_count: 9 }], ..Default::default() });
        assert_eq!(t.max_gaps, vec![GapLimit { over_ns: 1_000_000, max_count: 0 }, GapLimit { over_ns: 100_000, max_count: 9 }]);
        assert!(from_toml("min_ocupancy = 0.8").unwrap_err().contains("unknown key `min_ocupancy`"));
        assert!(from_toml("[max_mean]\nhipGraphLaunch = 150").unwrap_err().contains("with its unit"));
    }
}
