use super::*;

// ---- A fake runtime behind the real function-pointer interface. ----
use std::sync::Mutex as StdMutex;

struct Fake {
    chunk_size: usize,
    chunks: Vec<Box<[ApiRecord]>>,
    table: Vec<*const ApiRecord>,
    total: usize,
    reset_rc: HipError,
    resets: u32,
    contiguous: bool,
    #[allow(clippy::vec_box)] // the fake runtime hands out pointers into each Box: they must not move
    spills: Vec<Box<GpuActivity>>,
}
unsafe impl Send for Fake {}

static FAKE: StdMutex<Option<Fake>> = StdMutex::new(None);
/// Serialises the tests that use FAKE and the global counters.
pub(crate) static SERIAL: StdMutex<()> = StdMutex::new(());

fn blank_gpu() -> GpuActivity {
    GpuActivity {
        flags: 0,
        begin_ns: 0,
        end_ns: 0,
        bytes_or_name: 0,
        gpu_op_count: 0,
        _r0: 0,
        next: std::ptr::null(),
        payload: [0; 10],
        _r1: [0; 40],
    }
}

fn record(i: u64, thread_id: u64) -> ApiRecord {
    let mut g = blank_gpu();
    g.flags = (3 << 16) | (5 << 32);
    g.begin_ns = 1_000_000 + i * 10;
    g.end_ns = 1_000_005 + i * 10;
    g.bytes_or_name = c"void kern<int>(int*)".as_ptr() as u64;
    g.gpu_op_count = 1;
    g.payload[0] = 64;
    g.payload[3] = 256;
    ApiRecord {
        api_name: c"hipLaunchKernel".as_ptr(),
        flags: REC_HAS_GPU,
        thread_id,
        start_ns: 500 + i,
        end_ns: 600 + i,
        stream: 0xabc,
        _spill_tail: 0,
        memory1: 0,
        memory2: 0,
        size: 0,
        chunk_id: i as u32,
        _reserved: [0; 44],
        gpu: g,
    }
}

fn push(f: &mut Fake, r: ApiRecord) {
    let c = f.total / f.chunk_size;
    if c == f.chunks.len() {
        let mut v = Vec::with_capacity(f.chunk_size);
        v.resize(f.chunk_size, record(0, 0));
        f.chunks.push(v.into_boxed_slice());
        f.table.push(f.chunks[c].as_ptr());
    }
    f.chunks[c][f.total % f.chunk_size] = r;
    f.total += 1;
}

unsafe extern "C" fn fake_get(chunks: *mut *const c_void, cc: *mut usize, cs: *mut usize, total: *mut usize) -> HipError {
    // SAFETY: the out pointers of GetRecords, valid (the code under test passes its locals).
    unsafe {
        let g = FAKE.lock().unwrap();
        let f = g.as_ref().unwrap();
        if f.contiguous {
            *chunks = f.table.first().map_or(std::ptr::null(), |p| *p as *const c_void);
            *cc = f.total;
            return 0;
        }
        *chunks = f.table.as_ptr() as *const c_void;
        // Report one chunk more than needed: the guarded loop must not underflow.
        *cc = f.chunks.len() + 1;
        *cs = f.chunk_size;
        *total = f.total;
        0
    }
}
unsafe extern "C" fn fake_reset() -> HipError {
    let mut g = FAKE.lock().unwrap();
    let f = g.as_mut().unwrap();
    f.resets += 1;
    if f.reset_rc == 0 {
        f.chunks.clear();
        f.table.clear();
        f.total = 0;
    }
    f.reset_rc
}
unsafe extern "C" fn fake_void() -> HipError {
    0
}

fn fake(chunk_size: usize, reset_rc: HipError, contiguous: bool) -> Api {
    let mut f = Fake { chunk_size, chunks: vec![], table: vec![], total: 0, reset_rc, resets: 0, contiguous, spills: vec![] };
    // One extra allocated chunk so the table has room (fake_get reports it).
    f.table.reserve(1024);
    *FAKE.lock().unwrap() = Some(f);
    Api {
        enable: fake_void as *const c_void,
        disable: fake_void as *const c_void,
        get_records: fake_get as *const c_void,
        reset: Some(fake_reset as *const c_void),
        register: None,
    }
}

fn add(n: u64, from: u64) {
    let mut g = FAKE.lock().unwrap();
    let f = g.as_mut().unwrap();
    for i in from..from + n {
        push(f, record(i, 0xdead_beef_0000_0000 | i));
    }
}

fn run(api: &Api, st: &mut DrainState, out: &mut Vec<GpuOp>) {
    unsafe { drain(api, wire::API_V0, st, false, &mut |o| out.push(*o)) };
}

#[test]
fn drain_v0_cursor_no_dups_and_full_thread_ids() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let api = fake(10, 0, false);
    let mut st = DrainState::default();
    let mut out = vec![];
    add(25, 0);
    run(&api, &mut st, &mut out);
    add(7, 25);
    run(&api, &mut st, &mut out);
    run(&api, &mut st, &mut out);
    assert_eq!(out.len(), 32);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(o.record_index, i as u64);
        // 64-bit profiler thread ids are never truncated (the reviewed bug: cast to int).
        assert_eq!(o.thread_id, 0xdead_beef_0000_0000 | i as u64);
        assert_eq!(o.gpu_begin_ns, 1_000_000 + i as u64 * 10);
        assert_eq!((o.device, o.queue), (3, 5));
        assert_eq!((o.grid[0], o.block[0]), (64, 256));
        assert_ne!(o.kernel_name_id, 0);
        assert_ne!(o.api_name_id, 0);
        assert_eq!(o.op, OpKind::Dispatch as u8);
    }
    assert!(!st.contiguous);
}

#[test]
fn drain_reset_failure_checked() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // The reviewed bug: Reset's return ignored, cursor set back to 0 -> every record
    // published again. A failing Reset must keep the cursor and stop resetting.
    let api = fake(1 << 16, 801, false);
    let mut st = DrainState::default();
    let mut out = vec![];
    let errs0 = counters().api_errors.load(Relaxed);
    add(RESET_THRESHOLD as u64, 0);
    run(&api, &mut st, &mut out);
    assert_eq!(FAKE.lock().unwrap().as_ref().unwrap().resets, 1);
    assert!(st.reset_disabled);
    assert_eq!(st.cursor, RESET_THRESHOLD);
    assert_eq!(counters().api_errors.load(Relaxed), errs0 + 1);
    assert_eq!(publish::INFO.last_error.load(Relaxed), 801);
    add(3, RESET_THRESHOLD as u64);
    run(&api, &mut st, &mut out);
    run(&api, &mut st, &mut out);
    assert_eq!(FAKE.lock().unwrap().as_ref().unwrap().resets, 1, "no retry");
    assert_eq!(out.len(), RESET_THRESHOLD + 3, "no duplicates, nothing lost");
    for (i, o) in out.iter().enumerate() {
        assert_eq!(o.record_index, i as u64);
    }
    // A working Reset: the cursor restarts, record indices keep counting.
    let api = fake(1 << 16, 0, false);
    let mut st = DrainState::default();
    let mut out = vec![];
    add(RESET_THRESHOLD as u64, 0);
    run(&api, &mut st, &mut out);
    assert_eq!(st.cursor, 0);
    add(2, 0);
    run(&api, &mut st, &mut out);
    assert_eq!(out.len(), RESET_THRESHOLD + 2);
    assert_eq!(out.last().unwrap().record_index, RESET_THRESHOLD as u64 + 1);
}

/// Records are numbered per thread and API in record order, when the agent first passes
/// them, even when a deferred record's ops are published after later ones.
#[test]
fn drain_numbers_records_in_record_order() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    crate::thread_seq::reset_in_child();
    let api = fake(8, 0, false);
    let mut st = DrainState::default();
    let mut out = vec![];
    {
        let mut g = FAKE.lock().unwrap();
        let f = g.as_mut().unwrap();
        for i in 0..6u64 {
            // Two threads, alternating; record 2 (thread 0's second) not finished yet.
            let mut r = record(i, 0x1111 + (i % 2));
            if i == 2 {
                r.gpu.end_ns = 0;
            }
            push(f, r);
        }
    }
    run(&api, &mut st, &mut out);
    let got: Vec<(u64, u64, u64)> = out.iter().map(|o| (o.record_index, o.thread_id, o.thread_seq)).collect();
    assert_eq!(got, vec![(0, 0x1111, 0), (1, 0x1112, 0), (3, 0x1112, 1), (4, 0x1111, 2), (5, 0x1112, 2)]);
    assert!(out.iter().all(|o| o.flags & wire::OP_HAS_THREAD_SEQ != 0 && o.seq_epoch == 0));
    // Finished later: published after its successors, with the number of its place.
    FAKE.lock().unwrap().as_mut().unwrap().chunks[0][2].gpu.end_ns = 77;
    run(&api, &mut st, &mut out);
    assert_eq!((out[5].record_index, out[5].thread_id, out[5].thread_seq), (2, 0x1111, 1));
    // Records lost uncounted (the buffer shrank under the agent): a new epoch.
    {
        let mut g = FAKE.lock().unwrap();
        let f = g.as_mut().unwrap();
        f.total = 1;
    }
    run(&api, &mut st, &mut out);
    push(FAKE.lock().unwrap().as_mut().unwrap(), record(9, 0x1111));
    run(&api, &mut st, &mut out);
    // The runtime's buffer now starts again with one old record, then the new one: both
    // counted from 0 in the next epoch.
    let n = out.len();
    assert_eq!((out[n - 2].thread_seq, out[n - 2].seq_epoch), (0, 1), "counting restarts in a new epoch");
    assert_eq!((out[n - 1].record_index, out[n - 1].thread_seq, out[n - 1].seq_epoch), (7, 1, 1));
    crate::thread_seq::reset_in_child();
}

#[test]
fn drain_contiguous_v0_form() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let api = fake(100, 0, true);
    let mut st = DrainState::default();
    let mut out = vec![];
    add(40, 0);
    run(&api, &mut st, &mut out);
    add(10, 40);
    run(&api, &mut st, &mut out);
    assert!(st.contiguous);
    assert_eq!(out.len(), 50);
    assert_eq!(out[49].record_index, 49);
}

#[test]
fn drain_waits_for_gpu_end_then_spill_list() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let api = fake(8, 0, false);
    let mut st = DrainState::default();
    let mut out = vec![];
    // A graph launch of 4 ops: head + 3 spill nodes, the last not finished yet.
    let mut spill: Vec<Box<GpuActivity>> = (0..3)
        .map(|k| {
            let mut g = blank_gpu();
            g.flags = 1 | (7 << 4) | 8; // copy D2D, graph
            g.begin_ns = 10 + k;
            g.end_ns = if k == 2 { 0 } else { 20 + k };
            g.bytes_or_name = 4096;
            Box::new(g)
        })
        .collect();
    spill[1].next = &*spill[2];
    spill[0].next = &*spill[1];
    let mut r = record(0, 7);
    r.api_name = c"hipGraphLaunch".as_ptr();
    r.gpu.flags |= 8;
    r.gpu.gpu_op_count = 4;
    r.gpu.next = &*spill[0];
    {
        let mut g = FAKE.lock().unwrap();
        let f = g.as_mut().unwrap();
        push(f, r);
        push(f, record(1, 7));
    }
    run(&api, &mut st, &mut out);
    assert_eq!(out.len(), 1, "the incomplete graph launch is deferred, the next record goes");
    assert_eq!(out[0].record_index, 1);
    assert_eq!(st.deferred.len(), 1);
    run(&api, &mut st, &mut out);
    assert_eq!(out.len(), 1, "still incomplete");
    spill[2].end_ns = 99;
    let spills0 = counters().batches_with_spill.load(Relaxed);
    run(&api, &mut st, &mut out);
    assert_eq!(out.len(), 5);
    assert!(st.deferred.is_empty());
    assert_eq!(counters().batches_with_spill.load(Relaxed), spills0 + 1);
    let out: Vec<GpuOp> = out[1..].to_vec();
    for (k, o) in out[..4].iter().enumerate() {
        assert_eq!(o.op_index, k as u32);
        assert_eq!(o.op_count, 4);
        assert_ne!(o.flags & wire::OP_IS_GRAPH, 0);
    }
    assert_eq!(out[1].op, OpKind::Copy as u8);
    assert_eq!(out[1].copy_kind, 7);
    assert_eq!(out[1].bytes, 4096);
    assert_eq!(out[3].gpu_end_ns, 99);
    // A call still running (no end time) is deferred too, and emitted by the final pass.
    let mut r = record(2, 7);
    r.end_ns = 0;
    push(FAKE.lock().unwrap().as_mut().unwrap(), r);
    let mut out = vec![];
    run(&api, &mut st, &mut out);
    assert!(out.is_empty());
    unsafe { drain(&api, wire::API_V0, &mut st, true, &mut |o| out.push(*o)) };
    assert_eq!(out.len(), 1);
    FAKE.lock().unwrap().as_mut().unwrap().spills = spill;
}

#[test]
fn chunk_loop_guard_no_underflow() {
    // The reviewed bug: 2 chunks of 10 000 with 4 159 valid records; a naive
    // `total - c * chunk_size` for c = 1 underflows.
    let r: Vec<_> = chunk_ranges(2, 10_000, 4_159).collect();
    assert_eq!(r, vec![(0, 0, 4_159)]);
    let r: Vec<_> = chunk_ranges(3, 10, 25).collect();
    assert_eq!(r, vec![(0, 0, 10), (1, 10, 10), (2, 20, 5)]);
    assert_eq!(chunk_ranges(3, 10, 30).count(), 3);
    assert_eq!(chunk_ranges(5, 10, 0).count(), 0);
    assert_eq!(chunk_ranges(5, 0, 10).count(), 0, "chunk_size 0: nothing, no division or loop");
    assert_eq!(
        chunk_ranges(usize::MAX, usize::MAX / 2, usize::MAX).count(),
        3,
        "no overflow: 3rd chunk holds 1, 4th start overflows and stops"
    );
    // Exhaustive small cases: never more than total, never past a chunk.
    for cc in 0..6 {
        for cs in 0..6 {
            for total in 0..40 {
                let mut n = 0;
                for (c, start, len) in chunk_ranges(cc, cs, total) {
                    assert_eq!(start, c * cs);
                    assert!(len <= cs && len > 0);
                    n += len;
                }
                assert_eq!(n, total.min(cc * cs));
            }
        }
    }
}
