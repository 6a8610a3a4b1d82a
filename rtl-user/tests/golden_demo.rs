//! Byte-for-byte: the trace the collector writes for the simulator demo (what `cargo xtask run`
//! traces) and what the readers make of a trace stay the same across refactors (issue 19).
//!
//! * `demo_trace_matches_the_golden_dump`: a fresh traced run of tests/workloads/build/demo on
//!   the ROCm simulator with the agent, dumped table by table (schema SQL and every row, every
//!   column), compared with `tests/golden/demo-trace.txt`. Masked, and only these: times (start,
//!   end, first/last seen, the timing metadata), pids and tids, row ids (a row is named by what
//!   it is: `hipMalloc#2` is the second hipMalloc call; string ids are resolved to the strings),
//!   device and inode numbers, addresses and handles (numbered by rank, so equal handles stay
//!   equal), paths (the directory part), the host name, and the collector's own measurements of
//!   itself (durations, peak memory, peak backlog).
//! * `readers_match_their_golden_output`: `summary`, `summary --json`, `convert` to Perfetto JSON
//!   and to .pftrace, and the `--html` report, of a fixed trace (`tests/golden/demo.db`, written by the collector for the
//!   same run) compared byte for byte with the files beside it; only the input's directory is
//!   masked.
//!
//! `RTL_BLESS=1 cargo test --release -p rtl-user --test integration golden_demo` rewrites the golden files
//! (and says so on stderr); anything else compares. A difference fails with a unified diff.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use rusqlite::types::ValueRef;
use rusqlite::Connection;

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn bless() -> bool {
    std::env::var_os("RTL_BLESS").is_some_and(|v| v == "1")
}

/// Compares `got` with the golden file `name` (or writes it under RTL_BLESS=1).
fn check(name: &str, got: &[u8]) {
    let p = golden_dir().join(name);
    if bless() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&p, got).unwrap();
        eprintln!("golden_demo: RTL_BLESS=1: WROTE {} ({} bytes), compared nothing", p.display(), got.len());
        return;
    }
    let want = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e} (RTL_BLESS=1 writes it)", p.display()));
    if want == got {
        return;
    }
    match (std::str::from_utf8(&want), std::str::from_utf8(got)) {
        (Ok(w), Ok(g)) => panic!("{name} differs from its golden file {}:\n{}", p.display(), diff(w, g)),
        _ => {
            let at = want.iter().zip(got).position(|(a, b)| a != b).unwrap_or(want.len().min(got.len()));
            panic!(
                "{name} differs from its golden file {}: {} bytes vs {}, first difference at byte {at}",
                p.display(),
                want.len(),
                got.len()
            )
        }
    }
}

/// The lines only in one of the two texts (a minimal line diff: enough to see what changed).
fn diff(want: &str, got: &str) -> String {
    let (w, g): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    // Longest common subsequence, then walk it.
    let mut l = vec![vec![0u32; g.len() + 1]; w.len() + 1];
    for i in (0..w.len()).rev() {
        for j in (0..g.len()).rev() {
            l[i][j] = if w[i] == g[j] { l[i + 1][j + 1] + 1 } else { l[i + 1][j].max(l[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out, mut shown) = (0, 0, String::new(), 0);
    while (i < w.len() || j < g.len()) && shown < 200 {
        if i < w.len() && j < g.len() && w[i] == g[j] {
            i += 1;
            j += 1;
        } else if j < g.len() && (i == w.len() || l[i][j + 1] >= l[i + 1][j]) {
            out += &format!("+ {}\n", g[j]);
            j += 1;
            shown += 1;
        } else {
            out += &format!("- {}\n", w[i]);
            i += 1;
            shown += 1;
        }
    }
    out
}

/// Replaces the directory part of every path-like token (a run of path characters holding a
/// `/`) with `<dir>/`, keeping the file name.
fn mask_paths(s: &str) -> String {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "/._-+~".contains(c);
    let mut out = String::with_capacity(s.len());
    let mut tok = String::new();
    let flush = |tok: &mut String, out: &mut String| {
        match tok.rfind('/') {
            Some(k) => {
                out.push_str("<dir>/");
                out.push_str(&tok[k + 1..]);
            }
            None => out.push_str(tok),
        }
        tok.clear();
    };
    for c in s.chars() {
        if is_path_char(c) {
            tok.push(c);
        } else {
            flush(&mut tok, &mut out);
            out.push(c);
        }
    }
    flush(&mut tok, &mut out);
    out
}

/// A value of the dump.
#[derive(Clone, PartialEq)]
enum V {
    Text(String),
    Int(i64),
    Real(f64),
    Null,
    Blob(usize),
}

/// User-space addresses and handles (above 4 GiB, below 2^48): masked, numbered by rank.
fn address(v: &V) -> Option<u64> {
    let n = match v {
        V::Int(n) => u64::try_from(*n).ok()?,
        V::Text(s) => u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()?,
        _ => return None,
    };
    (1 << 32..1 << 48).contains(&n).then_some(n)
}

struct Dump<'a> {
    c: &'a Connection,
    strings: HashMap<(String, i64), String>,
    /// rocpd_api id -> `name#k` (k-th call of that API by start time).
    api_key: HashMap<i64, String>,
    /// rocpd_op id -> `type description (of api key)`.
    op_key: HashMap<i64, String>,
    addrs: BTreeMap<u64, usize>,
}

/// Columns that hold times, pids/tids, or numbers of this machine's files.
const TIME_COLS: &[&str] = &["start", "end", "first_ns", "last_ns"];
const PID_COLS: &[&str] = &["pid", "tid", "ppid"];
const FILE_ID_COLS: &[&str] = &["dev", "inode"];
/// Metadata that the run's timing decides (the collector's own resource peaks, and every
/// `*_peak`: how much state was held at once depends on when the agent's batches arrived); tags ending in
/// `_ns`, `_ms`, `_s`, `_ms_max`, `_ms_total` are times.
// strings_read_at_return: how many string arguments sat on pages not mapped yet at the call,
// which depends on the page cache, not on the collector.
// events_decoded / spool_records: one more when a string was read at return. agent_batches: when
// the agent flushes is timing. fsbase_offset and ringbuf_drops_per_cpu: this kernel's layout and
// this machine's CPU count. threads_named / threads_unnamed: whether the thread was still there
// when its first call was decoded (threads_named_at_exit follows from the exit record).
const MEASURED_META: &[&str] = &[
    "threads_named",
    "threads_unnamed",
    "collector_peak_rss_kb",
    "spool_peak_bytes",
    "strings_read_at_return",
    "events_decoded",
    "spool_records",
    "agent_batches",
    "fsbase_offset",
    "ringbuf_drops_per_cpu",
];
const TIME_SUFFIXES: &[&str] = &["_ns", "_ms", "_s", "_ms_max", "_ms_total"];

impl<'a> Dump<'a> {
    fn new(c: &'a Connection) -> Self {
        let mut strings = HashMap::new();
        for t in ["rocpd_string", "rocpd_ustring"] {
            let mut st = c.prepare(&format!("SELECT id, string FROM {t}")).unwrap();
            for r in st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))).unwrap() {
                let (id, s) = r.unwrap();
                strings.insert((t.to_string(), id), s);
            }
        }
        let mut d = Dump { c, strings, api_key: HashMap::new(), op_key: HashMap::new(), addrs: BTreeMap::new() };
        let mut st = c.prepare("SELECT id, apiName_id FROM rocpd_api ORDER BY start, id").unwrap();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for r in st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))).unwrap() {
            let (id, name) = r.unwrap();
            let name = d.string("rocpd_string", name);
            let k = seen.entry(name.clone()).or_default();
            *k += 1;
            d.api_key.insert(id, format!("{name}#{k}"));
        }
        let mut st = c.prepare("SELECT id, opType_id, description_id, correlation_id FROM rocpd_op ORDER BY start, id").unwrap();
        let mut seen: HashMap<String, usize> = HashMap::new();
        for r in st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))).unwrap() {
            let (id, ty, desc, corr) = r.unwrap();
            let base = format!("{} '{}' of {}", d.string("rocpd_string", ty), d.string("rocpd_string", desc), d.api(corr));
            let k = seen.entry(base.clone()).or_default();
            *k += 1;
            d.op_key.insert(id, if *k == 1 { base } else { format!("{base} #{k}") });
        }
        d
    }

    fn string(&self, table: &str, id: i64) -> String {
        self.strings.get(&(table.to_string(), id)).map(|s| mask_paths(s)).unwrap_or_else(|| format!("<no {table} {id}>"))
    }

    fn api(&self, id: i64) -> String {
        match self.api_key.get(&id) {
            Some(k) => format!("api {k}"),
            None if id == 0 => "no api".into(),
            None => format!("<no api {id}>"),
        }
    }

    fn tables(&self, kind: &str) -> Vec<(String, String)> {
        let mut st = self
            .c
            .prepare("SELECT name, coalesce(sql, '') FROM sqlite_master WHERE type = ?1 AND name NOT LIKE 'sqlite_%' ORDER BY name")
            .unwrap();
        st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(|r| r.unwrap()).collect()
    }

    fn rows(&self, table: &str) -> (Vec<String>, Vec<Vec<V>>) {
        let mut st = self.c.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let cols: Vec<String> = st.column_names().iter().map(|s| s.to_string()).collect();
        let n = cols.len();
        let rows = st
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| match r.get_ref(i).unwrap() {
                        ValueRef::Null => V::Null,
                        ValueRef::Integer(v) => V::Int(v),
                        ValueRef::Real(v) => V::Real(v),
                        ValueRef::Text(t) => V::Text(String::from_utf8_lossy(t).into_owned()),
                        ValueRef::Blob(b) => V::Blob(b.len()),
                    })
                    .collect::<Vec<_>>())
            })
            .unwrap()
            .map(|r| r.unwrap())
            .collect();
        (cols, rows)
    }

    /// Foreign keys of a table: column -> referenced table.
    fn fks(&self, table: &str) -> HashMap<String, String> {
        let mut st = self.c.prepare(&format!("PRAGMA foreign_key_list(\"{table}\")")).unwrap();
        st.query_map([], |r| Ok((r.get::<_, String>(3)?, r.get::<_, String>(2)?))).unwrap().map(|r| r.unwrap()).collect()
    }

    fn render(&self, table: &str, col: &str, fk: Option<&String>, v: &V) -> String {
        let int = |v: &V| if let V::Int(n) = v { Some(*n) } else { None };
        if TIME_COLS.contains(&col) {
            return if *v == V::Null { "NULL".into() } else { "<time>".into() };
        }
        if PID_COLS.contains(&col) {
            return if *v == V::Null { "NULL".into() } else { "<pid>".into() };
        }
        if FILE_ID_COLS.contains(&col) {
            return "<file id>".into();
        }
        let reference = match (fk.map(String::as_str), col) {
            (Some(t), _) => Some(t),
            (None, "correlation_id") => Some("rocpd_api"),
            _ => None,
        };
        if let (Some(t), Some(n)) = (reference, int(v)) {
            return match t {
                "rocpd_string" | "rocpd_ustring" => format!("{:?}", self.string(t, n)),
                "rocpd_api" => self.api(n),
                "rocpd_op" => self.op_key.get(&n).map(|k| format!("op {k}")).unwrap_or_else(|| format!("<no op {n}>")),
                _ => format!("<{t} id>"),
            };
        }
        if col == "id" && table != "rocpd_metadata" {
            return "<id>".into();
        }
        if let Some(a) = address(v) {
            return format!("<addr {}>", self.addrs[&a]);
        }
        match v {
            V::Text(s) => format!("{:?}", mask_paths(s)),
            V::Int(n) => n.to_string(),
            V::Real(r) => format!("{r:?}"),
            V::Null => "NULL".into(),
            V::Blob(n) => format!("<blob {n} bytes>"),
        }
    }

    fn dump(mut self) -> String {
        let mut out = String::new();
        for kind in ["table", "index", "view"] {
            for (name, sql) in self.tables(kind) {
                out += &format!("{kind} {name}: {}\n", sql.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
        let tables = self.tables("table");
        // Addresses, numbered by rank over the whole file.
        let mut all = Vec::new();
        for (t, _) in &tables {
            let (cols, rows) = self.rows(t);
            for r in &rows {
                for (c, v) in cols.iter().zip(r) {
                    if !TIME_COLS.contains(&c.as_str()) {
                        all.extend(address(v));
                    }
                }
            }
        }
        all.sort_unstable();
        all.dedup();
        self.addrs = all.into_iter().enumerate().map(|(i, a)| (a, i)).collect();
        for (t, _) in &tables {
            let (cols, rows) = self.rows(t);
            let fks = self.fks(t);
            let mut lines: Vec<String> = rows
                .iter()
                .map(|r| {
                    if t == "rocpd_metadata" {
                        let tag = match &r[1] {
                            V::Text(s) => s.clone(),
                            _ => String::new(),
                        };
                        let value = if TIME_SUFFIXES.iter().any(|x| tag.ends_with(x)) {
                            "<time>".to_string()
                        } else if MEASURED_META.contains(&tag.as_str()) || tag.ends_with("_peak") {
                            "<measured>".to_string()
                        } else if tag == "hostname" {
                            "<host>".to_string()
                        } else {
                            self.render(t, "value", None, &r[2])
                        };
                        // gpu_source.<pid>
                        let tag: String = match tag.split_once('.') {
                            Some((a, b)) if b.bytes().all(|c| c.is_ascii_digit()) => format!("{a}.<pid>"),
                            _ => tag,
                        };
                        return format!("{t}: {tag} = {value}");
                    }
                    let cells: Vec<String> = cols.iter().zip(r).map(|(c, v)| format!("{c}={}", self.render(t, c, fks.get(c), v))).collect();
                    format!("{t}: {}", cells.join(" "))
                })
                .collect();
            lines.sort();
            out += &format!("-- {t}: {} rows\n", lines.len());
            for l in lines {
                out += &l;
                out.push('\n');
            }
        }
        out
    }
}

fn dump(db: &Path) -> String {
    let c = Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    Dump::new(&c).dump()
}

#[test]
fn demo_trace_matches_the_golden_dump() {
    require_root();
    let d = tmpdir();
    let db = d.path().join("demo.db");
    let lib = sim_lib();
    // As `cargo xtask run` traces it: the demo on the simulator, the agent preloaded by `run`.
    let out = Command::new(rtl())
        .args(["run", "--quiet", "-o", db.to_str().unwrap(), "--", "env"])
        .arg(format!("LD_LIBRARY_PATH={}", lib.display()))
        .arg(workload("demo"))
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    check("demo-trace.txt", dump(&db).as_bytes());
    if bless() {
        // The readers' fixed input: this very trace.
        std::fs::copy(&db, golden_dir().join("demo.db")).unwrap();
        eprintln!("golden_demo: RTL_BLESS=1: WROTE {}", golden_dir().join("demo.db").display());
    }
}

#[test]
fn readers_match_their_golden_output() {
    let input = golden_dir().join("demo.db");
    assert!(input.exists(), "{}: missing (RTL_BLESS=1 with demo_trace_matches_the_golden_dump writes it)", input.display());
    let d = tmpdir();
    let db = d.path().join("demo.db");
    std::fs::copy(&input, &db).unwrap();
    let dir = d.path().to_str().unwrap().to_string();
    let run = |args: &[&str]| -> Vec<u8> {
        let out = Command::new(rtl()).args(args).output().unwrap();
        assert!(out.status.success(), "rtl-ebpf {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let masked = |b: Vec<u8>| String::from_utf8(b).unwrap().replace(&dir, "<dir>").into_bytes();
    let dbs = db.to_str().unwrap();
    check("demo-summary.txt", &masked(run(&["summary", dbs])));
    check("demo-summary.json", &masked(run(&["summary", "--json", "--top", "0", dbs])));
    let html = d.path().join("demo.html");
    let text = run(&["summary", "--html", html.to_str().unwrap(), dbs]);
    check("demo-summary-html.txt", &masked(text));
    check("demo-summary.html", &masked(std::fs::read(&html).unwrap()));
    let json = d.path().join("demo.json");
    run(&["convert", dbs, "-o", json.to_str().unwrap()]);
    check("demo-perfetto.json", &masked(std::fs::read(&json).unwrap()));
    let proto = d.path().join("demo.pftrace");
    run(&["convert", dbs, "-o", proto.to_str().unwrap()]);
    let p = std::fs::read(&proto).unwrap();
    assert!(!p.windows(dir.len()).any(|w| w == dir.as_bytes()), "the .pftrace names the input's directory: mask it");
    check("demo.pftrace", &p);
}
