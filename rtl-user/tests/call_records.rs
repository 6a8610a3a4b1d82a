//! Fewer records per common call (the probes' per-thread call slots, docs/trace-format.md
//! `ApiCall` and `ApiCalls`): every call the workload makes is in the trace once, with its
//! arguments, return value and status, whichever path it took: held and written with the
//! thread's other finished calls (CPU-side traces) or combined in one record (with a GPU source),
//! flushed (nested and recursive calls), flushed at thread exit (a thread that ends inside a
//! call, threads that end holding calls), read at stop (a call in flight when the tracer stops,
//! finished calls still held then), or two records (threads that share a slot: more threads than
//! the 16 slots this test asks for).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;

use common::*;

const THREADS: i64 = 48;
const CALLS: i64 = 300;
const NESTS: i64 = 50;
const EXITS: i64 = 4;
/// hipSlotCall calls the main thread makes last: fewer than a slot holds, so read at the stop.
const TAIL: i64 = 3;

fn cc(args: &[&str]) {
    let st = Command::new("cc").args(args).status().expect("cc");
    assert!(st.success(), "cc {args:?}");
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    /// The default: a slot holds up to 8 finished calls (`ApiCalls` records), and the collector
    /// takes those of a thread that stopped calling out of its slot (the main thread's last
    /// calls, while it waits).
    Held,
    /// Held, never taken (`RTL_HELD_TAKE=0`): the main thread's last calls are read at the stop.
    HeldUntilStop,
    /// Each call written at its return (`ApiCall` records, `RTL_CALL_BATCH=0`).
    OneRecord,
}

#[test]
fn every_call_is_traced_once_whatever_its_record_path() {
    every_call_once(Mode::Held);
}

#[test]
fn every_call_is_traced_once_with_calls_held_until_the_stop() {
    every_call_once(Mode::HeldUntilStop);
}

#[test]
fn every_call_is_traced_once_with_one_record_per_call() {
    every_call_once(Mode::OneRecord);
}

fn every_call_once(mode: Mode) {
    require_root();
    let d = tmpdir();
    let (lib, drv, db) = (d.path().join("libcallslots.so"), d.path().join("call_slots"), d.path().join("t.db"));
    let src = root().join("tests/workloads/call_slots.c");
    let (src, lib_s, drv_s) = (src.to_str().unwrap(), lib.to_str().unwrap(), drv.to_str().unwrap());
    cc(&["-O2", "-fno-omit-frame-pointer", "-fcf-protection=none", "-DCALL_SLOTS_LIB", "-shared", "-fPIC", "-pthread", "-o", lib_s, src]);
    let rpath = format!("-Wl,-rpath,{}", d.path().display());
    cc(&["-O2", "-pthread", "-o", drv_s, src, "-L", d.path().to_str().unwrap(), "-lcallslots", &rpath]);

    let apis = "hipSlotCall,hipSlotNest,hipSlotExit,hipSlotBlock";
    let mut env = vec![("RTL_CALL_SLOTS", "16")];
    match mode {
        Mode::Held => {}
        Mode::HeldUntilStop => env.push(("RTL_HELD_TAKE", "0")),
        Mode::OneRecord => env.push(("RTL_CALL_BATCH", "0")),
    }
    let tracer = rtl_start_with(&["--all", "--gpu", "none", "--apis", apis, "--lib", lib_s, "-o", db.to_str().unwrap(), "--force"], &env);
    let args = [THREADS, CALLS, NESTS, EXITS].map(|v| v.to_string());
    let mut w = Killed(Command::new(&drv).args(&args).stdout(Stdio::piped()).spawn().unwrap());
    let pid = w.id();
    let mut out = std::io::BufReader::new(w.0.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(120)).expect("the workload never reached its blocked call");
    assert_eq!(line.trim(), "blocked", "workload failed (its own checks of the return values)");
    // The blocked call is in flight when the tracer stops: its entry is still parked.
    rtl_stop(tracer);
    drop(w);

    let calls: Vec<TracedCall> = traced_calls(&db).into_iter().filter(|c| c.pid == pid).collect();
    let mut by_name: HashMap<&str, Vec<&TracedCall>> = HashMap::new();
    for c in &calls {
        by_name.entry(c.name.as_str()).or_default().push(c);
    }
    let get = |n: &str| by_name.get(n).cloned().unwrap_or_default();
    let a = |c: &TracedCall, i: usize| c.a[i].unwrap_or_else(|| panic!("argument {i} missing: {c:?}"));

    // Short calls: every a0 once, with its other arguments and return value, on one thread per base.
    let short = get("hipSlotCall");
    assert_eq!(short.len() as i64, CALLS * (THREADS + 1) + TAIL, "hipSlotCall rows");
    let mut seen = HashSet::new();
    let mut tid_of_base: HashMap<i64, u32> = HashMap::new();
    for c in &short {
        let a0 = a(c, 0);
        assert!(seen.insert(a0), "a0 {a0} twice");
        assert_eq!((a(c, 1), a(c, 2), a(c, 3)), (3 * a0, a0 ^ 5, 11), "arguments of {c:?}");
        assert_eq!(c.status, 0, "{c:?}");
        assert_eq!(c.ret.map(|r| r & 0xffff_ffff), Some(a0 % 1000 + 1), "return of {c:?}");
        assert!(c.start <= c.end, "{c:?}");
        let base = a0 / 1_000_000;
        assert!(base <= THREADS + 1 && a0 % 1_000_000 < CALLS, "a0 {a0} not the workload's");
        assert_eq!(*tid_of_base.entry(base).or_insert(c.tid), c.tid, "base {base} on two threads");
    }
    assert_eq!(tid_of_base[&0], pid, "the main thread's calls");
    assert_eq!(tid_of_base[&(THREADS + 1)], pid, "the main thread's last calls");
    let tail: Vec<i64> = short.iter().map(|c| a(c, 0)).filter(|a0| a0 / 1_000_000 == THREADS + 1).collect();
    assert_eq!(tail.len() as i64, TAIL, "the calls still held at the stop");
    assert_eq!(tid_of_base.values().collect::<HashSet<_>>().len() as i64, THREADS + 1, "one thread per base");

    // Recursive calls: four per tag, each inside the one that made it.
    let nest = get("hipSlotNest");
    assert_eq!(nest.len() as i64, 4 * NESTS, "hipSlotNest rows");
    let mut by_tag: HashMap<i64, Vec<&TracedCall>> = HashMap::new();
    for c in &nest {
        assert_eq!(c.status, 0, "{c:?}");
        assert_eq!(c.ret.map(|r| r & 0xffff_ffff), Some(a(c, 0) + 10 * a(c, 1)), "return of {c:?}");
        by_tag.entry(a(c, 1)).or_default().push(c);
    }
    assert_eq!(by_tag.len() as i64, NESTS);
    for (tag, mut v) in by_tag {
        v.sort_by_key(|c| std::cmp::Reverse(a(c, 0)));
        assert_eq!(v.iter().map(|c| a(c, 0)).collect::<Vec<_>>(), [3, 2, 1, 0], "depths of tag {tag}");
        for p in v.windows(2) {
            assert!(p[0].start <= p[1].start && p[1].end <= p[0].end, "tag {tag}: {:?} not inside {:?}", p[1], p[0]);
        }
    }

    // Threads that ended inside their call: status 1 (thread exited), argument kept.
    let exits = get("hipSlotExit");
    let mut ids: Vec<i64> = exits.iter().map(|c| a(c, 0)).collect();
    ids.sort();
    assert_eq!(ids, (100..100 + EXITS).collect::<Vec<_>>(), "hipSlotExit rows");
    assert!(exits.iter().all(|c| c.status == 1 && c.ret.is_none()), "{exits:?}");

    // The call in flight at the stop: status 3 (the trace ended inside it).
    let block = get("hipSlotBlock");
    assert_eq!(block.len(), 1, "{block:?}");
    assert_eq!((a(block[0], 0), block[0].status, block[0].ret), (77, 3, None), "{block:?}");

    assert_eq!(calls.len() as i64, CALLS * (THREADS + 1) + TAIL + 4 * NESTS + EXITS + 1, "no other rows");
    let m = |t: &str| meta(&db, t).unwrap_or_else(|| panic!("no {t}")).parse::<i64>().unwrap();
    let returns = CALLS * (THREADS + 1) + TAIL + 4 * NESTS;
    assert_eq!(m("probe_entries"), returns + EXITS + 1);
    assert_eq!(m("probe_exits"), returns);
    assert_eq!((m("returns_without_entry"), m("records_rejected"), m("ringbuf_drops")), (0, 0, 0));
    // Every path was taken: combined records, parked entries written out (3 per nest when the
    // slot was free, one per exit), and some calls that shared a slot wrote two records.
    let (combined, flushed) = (m("probe_calls_combined"), m("probe_parked_flushed"));
    assert!(combined > NESTS && combined < returns, "combined {combined} of {returns}");
    assert!(flushed >= EXITS, "flushed {flushed}");
    let (held, batches, taken) = (m("probe_call_batch"), m("probe_call_batches"), m("probe_calls_taken"));
    assert_eq!(meta(&db, "held_take_error").unwrap_or_default(), "");
    match mode {
        Mode::Held | Mode::HeldUntilStop => {
            // Each thread that had a slot wrote its calls 8 at a time (37 records for 300
            // calls, and what it held at its exit): far fewer records than calls.
            assert_eq!(held, 8);
            assert!(batches > 37 && batches * 2 < combined, "{batches} batches for {combined} calls");
        }
        Mode::OneRecord => assert_eq!((held, batches), (0, 0)),
    }
    if mode == Mode::Held {
        // The main thread waited 200 ms holding its last calls: taken out of its slot.
        assert!(taken >= TAIL && m("held_take_runs") > 0, "taken {taken}");
    } else {
        assert_eq!((taken, m("held_take_runs")), (0, 0));
    }
}
