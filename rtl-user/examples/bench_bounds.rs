//! What the collector's bounds on hostile input cost and save (issue 15).
//!
//!     cargo run --release -p rtl-user --example bench_bounds
//!
//! * Demangling a name whose back-references double its text at every level: the demangler
//!   unbounded against `probe::demangle::demangle` (stops at `MAX_DEMANGLED` bytes of output).
//! * Symbols of a 3 GiB sparse copy of the HIP library: reading the whole file (as before)
//!   against reading only its ELF tables (`Symbols::read`).

use std::time::Instant;

use rtl_user::probe::demangle::{demangle, MAX_DEMANGLED};
use rtl_user::probe::symbols::Symbols;

fn exploding_name(levels: usize) -> String {
    let b36 = |mut n: usize| {
        let d = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut v = Vec::new();
        loop {
            v.push(d[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        v.reverse();
        String::from_utf8(v).unwrap()
    };
    let sub = |i: usize| if i == 0 { "S_".to_string() } else { format!("S{}_", b36(i - 1)) };
    let mut s = format!("_Z1fI1A1BI{}{}E", sub(1), sub(1));
    for k in 2..=levels {
        s.push_str(&format!("{}I{}{}E", sub(2), sub(k + 1), sub(k + 1)));
    }
    s + "EvT_"
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok()))
        .unwrap_or(0)
}

fn main() -> anyhow::Result<()> {
    println!("demangling a name that doubles at every level:");
    for levels in [16, 20, 22] {
        let name = exploding_name(levels);
        let t = Instant::now();
        let sym = cpp_demangle::Symbol::new(name.as_str())?;
        let full = sym.demangle(&cpp_demangle::DemangleOptions::default())?;
        println!(
            "  unbounded  {levels:>2} levels, {:>3}-byte name: {:>11} bytes in {:>8.3} s",
            name.len(),
            full.len(),
            t.elapsed().as_secs_f64()
        );
    }
    for levels in [22, 40] {
        let name = exploding_name(levels);
        let t = Instant::now();
        let r = demangle(&name);
        let what = match &r {
            Some(s) if s.len() > MAX_DEMANGLED => format!("cut at {} bytes", s.len()),
            Some(s) => format!("{} bytes", s.len()),
            None => "not demangled".to_string(),
        };
        println!("  bounded    {levels:>2} levels, {:>3}-byte name: {what} in {:.6} s", name.len(), t.elapsed().as_secs_f64());
    }

    let real = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench");
    std::fs::create_dir_all(&dir)?;
    let big = dir.join("libamdhip64.so.5");
    std::fs::copy(real, &big)?;
    std::fs::OpenOptions::new().write(true).open(&big)?.set_len(3 << 30)?;
    println!("symbols of a 3 GiB sparse copy of {real}:");
    let rss0 = peak_rss_kb();
    let t = Instant::now();
    let syms = Symbols::read(&big)?;
    println!(
        "  ELF tables only: {} functions in {:.4} s, peak RSS +{} kB",
        syms.len(),
        t.elapsed().as_secs_f64(),
        peak_rss_kb().saturating_sub(rss0)
    );
    let t = Instant::now();
    let data = std::fs::read(&big)?;
    let syms = Symbols::parse(&data)?;
    println!(
        "  whole file:      {} functions in {:.3} s, peak RSS +{} kB",
        syms.len(),
        t.elapsed().as_secs_f64(),
        peak_rss_kb().saturating_sub(rss0)
    );
    drop(data);
    std::fs::remove_file(&big)?;
    Ok(())
}
