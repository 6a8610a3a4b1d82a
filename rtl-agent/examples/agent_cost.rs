//! The agent's own CPU cost per GPU op, without the simulator's noise: synthetic 256-byte
//! profiler records (a dispatch with a demangled kernel name, like the simulator's and CLR's)
//! go through the real conversion + lock-free queue (what the runtime's callback thread pays)
//! and the real batch building + `rtl_agent_publish` hand-off (the publisher thread).
//! The callback side is measured twice in the same run: records numbered per thread and API
//! (`clr::number`, what the agent does) and not numbered (what it did before `thread_seq`).
//! `cargo run --release -p rtl-agent --example agent_cost [RECORDS=1000000]`
use rtl_agent::clr::{convert, number, ApiRecord, GpuActivity, REC_HAS_GPU};
use rtl_agent::publish;
use std::time::Instant;

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|v| v.parse().ok()).unwrap_or(1_000_000);
    let names = [
        c"void vector_add<float>(float const*, float const*, float*, unsigned long)".as_ptr(),
        c"saxpy(float, float const*, float*, int)".as_ptr(),
    ];
    let mut g: GpuActivity = unsafe { std::mem::zeroed() };
    g.gpu_op_count = 1;
    g.payload[0] = 1024;
    g.payload[3] = 256;
    let mut base: ApiRecord = unsafe { std::mem::zeroed() };
    base.api_name = c"hipLaunchKernel".as_ptr();
    base.flags = REC_HAS_GPU;
    base.gpu = g;
    let chunk = 10_000;
    let mut recs: Vec<ApiRecord> = (0..chunk)
        .map(|i| {
            let mut r = base;
            // 16 threads.
            r.thread_id = 0x9e37_79b9_7f4a_7c15 ^ (i % 16) as u64;
            r.start_ns = 1_000 + i as u64;
            r.end_ns = 2_000 + i as u64;
            r.gpu.begin_ns = 3_000 + i as u64;
            r.gpu.end_ns = 4_000 + i as u64;
            r.gpu.bytes_or_name = names[i % 2] as u64;
            r
        })
        .collect();
    publish::buffers();
    let (mut t_conv, mut t_plain, mut t_pub) = (0f64, 0f64, 0f64);
    let mut done = 0;
    while done < n {
        for r in recs.iter_mut() {
            r.start_ns += chunk as u64;
        }
        // Without numbers (the work before thread_seq), then drained again.
        let t0 = Instant::now();
        for r in &recs {
            unsafe { convert(r, rtl_common::agent::API_V0_1, 0, None, &mut |o| publish::emit(o, false)) };
        }
        t_plain += t0.elapsed().as_nanos() as f64;
        while publish::buffers().queue.pop().is_some() {}
        let t0 = Instant::now();
        for r in &recs {
            unsafe { convert(r, rtl_common::agent::API_V0_1, 0, number(r), &mut |o| publish::emit(o, false)) };
        }
        let t1 = Instant::now();
        publish::publish_queued(0);
        let t2 = Instant::now();
        t_conv += (t1 - t0).as_nanos() as f64;
        t_pub += (t2 - t1).as_nanos() as f64;
        done += chunk;
    }
    let c = publish::counters().snapshot();
    assert_eq!(c.dropped_queue_full, 0);
    let batches = c.batches_published as f64;
    println!("{done} records / GPU ops, {} batches ({:.1} ops per batch)", c.batches_published, done as f64 / batches);
    println!("callback side (number + convert + intern + enqueue): {:.1} ns per op", t_conv / done as f64);
    println!("callback side without numbering (as before thread_seq): {:.1} ns per op", t_plain / done as f64);
    println!("publisher side (dequeue + batch + hand-off): {:.1} ns per op", t_pub / done as f64);
    for hit_ns in [800.0, 1300.0, 2800.0] {
        println!("hand-off under a uprobe costing {hit_ns:.0} ns per hit: +{:.1} ns per op", hit_ns * batches / done as f64);
    }
    for threads in [1, 2, 8] {
        println!(
            "HSA signal pool, {threads} threads taking and returning slots: {:.1} ns per pair per thread",
            rtl_agent::hsa::bench_pool(threads, 1_000_000)
        );
    }
}
