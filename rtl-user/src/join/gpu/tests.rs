use super::*;

/// A batch of `n` CLR dispatches from `pid` (header pid `claim`), records `first..`, none of
/// which any traced call matches.
fn forged(claim: u32, seq: u64, first: u64, n: u64) -> Vec<u8> {
    let mut buf = vec![0u8; rtl_common::AGENT_BATCH_MAX];
    let mut w = agent::BatchWriter::new(&mut buf, claim, seq).unwrap();
    if seq == 0 {
        assert!(w.push_string(1, agent::STR_API, 0, b"hipLaunchKernel"));
        assert!(w.push_string(2, agent::STR_KERNEL, 0, b"victim_kernel"));
    }
    for r in first..first + n {
        let op = GpuOp {
            source: Source::Clr as u8,
            op: OpKind::Dispatch as u8,
            flags: agent::OP_HAS_CPU_TIMES | agent::OP_HAS_THREAD_HASH,
            cpu_clock: ClockDomain::Monotonic as u8,
            gpu_clock: ClockDomain::Monotonic as u8,
            thread_id: 0x5eed,
            cpu_start_ns: 1_000 + r,
            cpu_end_ns: 2_000 + r,
            gpu_begin_ns: 3_000 + r,
            gpu_end_ns: 4_000 + r,
            kernel_name_id: 2,
            api_name_id: 1,
            record_index: r,
            op_count: 1,
            ..Default::default()
        };
        assert!(w.push_gpu_op(&op));
    }
    w.finish(0).to_vec()
}

/// Publishes `records` forged records from `pid` and decides them all; returns the op rows.
fn publish(j: &mut GpuJoiner, pid: u32, records: u64, ids: &mut i64) -> Vec<OpRow> {
    let mut rows = Vec::new();
    let (mut seq, mut r) = (0, 0);
    while r < records {
        let n = (records - r).min(20);
        let b = forged(pid, seq, r, n);
        let mut next = || {
            *ids += 1;
            *ids
        };
        j.on_batch(Publisher { pid, ns_pid: 0 }, &b, b.len() as u32, 10_000 + r, &mut next, &mut rows);
        j.retry_pending(10_000 + r, true, &mut next, &mut rows);
        seq += 1;
        r += n;
    }
    rows.into_iter().filter_map(|x| if let Row::Op(o) = x { Some(o) } else { None }).collect()
}

/// A batch is read only as the work of the process the probe saw publish it: one naming
/// another pid is refused and counted, and every op written carries its publisher's pid.
#[test]
fn ops_belong_to_their_publisher() {
    let mut j = GpuJoiner::new(0);
    let (mut rows, mut id) = (Vec::new(), 0i64);
    let b = forged(4242, 0, 0, 5);
    j.on_batch(Publisher { pid: 7, ns_pid: 0 }, &b, b.len() as u32, 1, &mut || 1, &mut rows);
    assert!(rows.is_empty());
    assert_eq!(j.stats.batches_wrong_pid, 1);
    let ops = publish(&mut j, 7, 30, &mut id);
    assert_eq!(ops.len(), 30);
    assert!(ops.iter().all(|o| o.pid == Some(7) && o.link == Some(LinkKind::UnlinkedNoThread)), "{:?}", ops[0]);
    let mut meta = Vec::new();
    j.finish_counters(&mut meta);
    let tag = |t: &str| meta.iter().find_map(|r| if let Row::Meta(m) = r { (m.tag == t).then(|| m.value.clone()) } else { None });
    assert!(j.stats.metadata().contains(&("agent_batches_rejected_wrong_pid", "1".to_string())));
    assert_eq!(tag("gpu_join_profiler_rows_peak").as_deref(), Some("30"));
}

/// Profiler-only rows and decisions, remembered by record: bounded per process (before: one
/// entry per forged record for the process's lifetime) and over all processes, counted.
#[test]
fn records_remembered_are_bounded_per_process_and_in_total() {
    let mut j = GpuJoiner::new(0);
    let mut id = 0i64;
    let over = MAX_PROFILER_ROWS as u64 + 1_000;
    let ops = publish(&mut j, 7, over, &mut id);
    assert_eq!(ops.len() as u64, over, "every op written");
    let p = &j.procs[&7];
    assert_eq!(p.synthesized.len(), MAX_PROFILER_ROWS);
    assert_eq!(p.decided.len(), MAX_DECIDED);
    assert_eq!(j.bounds.profiler_rows.dropped, 1_000);
    assert_eq!(j.bounds.decisions.dropped, 1_000);
    // More processes than the total holds, each at its own bound.
    let procs = (MAX_PROFILER_ROWS_TOTAL / MAX_PROFILER_ROWS) as u32 + 1;
    for pid in 100..100 + procs {
        publish(&mut j, pid, MAX_PROFILER_ROWS as u64, &mut id);
    }
    let held: usize = j.procs.values().map(|p| p.synthesized.len()).sum();
    assert_eq!(held, j.bounds.profiler_rows.held);
    assert!(held <= MAX_PROFILER_ROWS_TOTAL, "{held}");
    assert_eq!(j.bounds.profiler_rows.peak, MAX_PROFILER_ROWS_TOTAL);
    let sent = over + procs as u64 * MAX_PROFILER_ROWS as u64;
    assert_eq!(j.bounds.profiler_rows.dropped, sent - held as u64, "every record not kept is counted");
    // A process exiting gives its share back.
    let mut rows = Vec::new();
    j.process_exited(7, &mut || 0, &mut rows);
    assert_eq!(j.bounds.profiler_rows.held, held - MAX_PROFILER_ROWS);
}

/// The calls kept for matching: bounded in total, whatever the number of processes.
#[test]
fn calls_kept_are_bounded_in_total() {
    let mut j = GpuJoiner::new(0);
    let name: Arc<str> = Arc::from("hipLaunchKernel");
    let per = MAX_CALLS_PER_PID as u64;
    for pid in 1..=3u32 {
        for i in 0..per + 10 {
            let call = IndexedCall { id: i as i64, tid: pid, thread_hash: None, name: name.clone(), start: i, end: i + 1 };
            j.index_call(pid, call);
        }
    }
    let held: usize = j.procs.values().map(|p| p.calls.len()).sum();
    assert_eq!(held, j.bounds.calls.held);
    assert!(held <= MAX_CALLS_TOTAL, "{held}");
    assert!(j.procs.values().all(|p| p.calls.len() <= MAX_CALLS_PER_PID));
    assert_eq!(j.bounds.calls.dropped, 3 * (per + 10) - held as u64);
    // One process was refused everything; the periodic pass cuts every process to its fair
    // share, so it gets room.
    j.retry_pending(2_000_000_000, false, &mut || 0, &mut Vec::new());
    let lens: Vec<usize> = j.procs.values().map(|p| p.calls.len()).collect();
    assert!(lens.iter().all(|&n| n <= MAX_CALLS_TOTAL / 3), "{lens:?}");
    let starved = *j.procs.iter().find(|(_, p)| p.calls.is_empty()).expect("a process was refused").0;
    let call = IndexedCall { id: 1, tid: starved, thread_hash: None, name, start: 2_000_000_000, end: 2_000_000_001 };
    j.index_call(starved, call);
    assert_eq!(j.procs[&starved].calls.len(), 1);
}

#[test]
fn source_lines() {
    let hsa =
        agent::CAP_KERNELS | agent::CAP_COPIES | agent::CAP_MEMSETS | agent::CAP_BARRIERS | agent::CAP_GRAPH_SPANS | agent::CAP_BLIT_COPIES;
    assert_eq!(
        gpu_source_text(Some(Source::Hsa), hsa),
        "HSA capture (stock ROCm): kernels, copies, memsets, barriers, graph spans (blit-kernel copies named as copies); \
         not captured: graph nodes one by one (opt in: run --graph-nodes)"
    );
    assert_eq!(
        gpu_source_text(Some(Source::Hsa), hsa | agent::CAP_GRAPH_NODES),
        "HSA capture (stock ROCm): kernels, copies, memsets, barriers, graph spans, graph nodes (blit-kernel copies named as copies)"
    );
    assert_eq!(
        gpu_source_text(
            Some(Source::Clr),
            agent::CAP_KERNELS | agent::CAP_COPIES | agent::CAP_MEMSETS | agent::CAP_BARRIERS | agent::CAP_GRAPH_NODES
        ),
        "hipProfiler*Ext (HIP CLR): kernels, copies, memsets, barriers, graph nodes"
    );
    assert_eq!(gpu_source_text(Some(Source::Hsa), 0), "HSA capture (stock ROCm)");
    assert_eq!(
        gpu_source_text(Some(Source::Cupti), agent::CAP_KERNELS | agent::CAP_COPIES | agent::CAP_MEMSETS | agent::CAP_GRAPH_SPANS),
        "CUPTI: kernels, copies, memsets, graph spans; not captured: barriers, graph nodes one by one (opt in: run --graph-nodes)"
    );
    assert!(!status_text(Some(Status::ApiMissing), 0, true).contains("--gpu hsa"), "no advice to use what is on");
    assert!(status_text(Some(Status::ApiMissing), 0, false).contains("--gpu hsa"));
}
