//! Prints the batches of an `RTL_AGENT_DUMP` file: `cargo run -p rtl-agent --example agent_dump -- FILE [-v]`.
use rtl_common::agent::{decode_prefix, Record};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: agent_dump FILE [-v]");
        std::process::exit(2);
    };
    let verbose = args.iter().any(|a| a == "-v");
    let data = std::fs::read(path).expect("read dump");
    let mut off = 0;
    let (mut batches, mut ops, mut strings) = (0, 0, 0);
    while off < data.len() {
        let (b, n) = match decode_prefix(&data[off..]) {
            Ok(x) => x,
            Err(e) => {
                eprintln!("offset {off}: {e}");
                std::process::exit(1);
            }
        };
        batches += 1;
        if verbose {
            println!(
                "batch pid={} seq={} records={} len={} flags={}",
                b.header.pid, b.header.batch_seq, b.header.record_count, b.header.total_len, b.header.flags
            );
        }
        for r in b.records() {
            match r {
                Record::GpuOp(o) => {
                    ops += 1;
                    if verbose {
                        println!("  op {:?}", o);
                    }
                }
                Record::String(s) => {
                    strings += 1;
                    if verbose {
                        println!("  str {} kind={} {:?}", s.id, s.kind, String::from_utf8_lossy(s.bytes));
                    }
                }
                other => println!("  pid {} {:?}", b.header.pid, other),
            }
        }
        off += n;
    }
    println!("{batches} batches, {ops} gpu ops, {strings} strings");
}
