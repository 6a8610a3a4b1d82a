//! The GPU join alone: how many GPU ops per second it links, and that the cost stays linear.
//!
//! `cargo run --release -p rtl-user --example bench_join [OPS=1000000]` builds a synthetic
//! process (tests/synthetic_gpu: 16 threads issuing launches and copies back to back, 0.5 us
//! apart, a graph launch of 64 nodes every 50 calls, the profiler's CPU times jittered by
//! 1.5 us, records published out of order), then joins it as the collector does (call entries
//! and returns, agent batches, periodic retries) and prints ops/s for OPS/4 and OPS ops, twice
//! each: with the session anchor (links by number) and without (numbers found from the
//! records' time windows). Every link is checked against the synthetic truth.

#[path = "../tests/synthetic_gpu/mod.rs"]
mod synthetic_gpu;

use std::time::Instant;

use rtl_user::join::gpu::GpuJoiner;
use synthetic_gpu::*;

fn one(ops_wanted: usize, anchor: bool) {
    let threads = 16;
    // 50 calls: 49 of one op, 1 graph launch of 64.
    let calls_per_thread = (ops_wanted * 50 / (49 + 64)).div_ceil(threads);
    let w = World { threads, calls_per_thread, graph_every: 50, graph_nodes: 64, shuffle: 64, anchor, seed: 11, ..Default::default() };
    let mut next_id = 1;
    let feed = build(&[w], &mut next_id);
    let (ops, events) = (feed.ops, feed.events.len());
    let truth = feed.truth.clone();
    let mut j = GpuJoiner::new(OFFSET);
    let t0 = Instant::now();
    let rows = run(feed, &mut j, &mut next_id);
    let dt = t0.elapsed().as_secs_f64();
    let (right, wrong, unlinked, _) = score(&rows, &truth);
    assert_eq!(wrong, 0, "a wrong link");
    println!(
        "join: {ops} GPU ops ({} calls, {events} events), anchor {}: {dt:.2} s = {:.0} ops/s; linked right {right}, unlinked {unlinked}, by number {} (correlation {}, sequence {}), by time {}",
        threads * calls_per_thread,
        if anchor { "yes" } else { "no " },
        ops as f64 / dt,
        j.stats.ops_linked_correlation + j.stats.ops_linked_sequence,
        j.stats.ops_linked_correlation,
        j.stats.ops_linked_sequence,
        j.stats.ops_linked_time,
    );
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    for anchor in [true, false] {
        one(n / 4, anchor);
        one(n, anchor);
    }
}
