extern crate std;
use super::*;
use std::vec::Vec;

fn op(i: u64) -> GpuOp {
    GpuOp {
        source: Source::Clr as u8,
        op: OpKind::Dispatch as u8,
        flags: OP_HAS_CPU_TIMES | OP_HAS_THREAD_HASH,
        cpu_clock: ClockDomain::Realtime as u8,
        gpu_clock: ClockDomain::Realtime as u8,
        thread_id: 0xfedc_ba98_7654_3210 ^ i,
        gpu_begin_ns: 1_000 + i,
        gpu_end_ns: 2_000 + i,
        grid: [1024, 1, 1],
        block: [256, 1, 1],
        kernel_name_id: 1,
        api_name_id: 2,
        record_index: i,
        op_count: 1,
        ..Default::default()
    }
}

fn sample(buf: &mut [u8]) -> Vec<u8> {
    let mut w = BatchWriter::new(buf, 42, 7).unwrap();
    assert!(w.push_info(&Info { source: 1, profiler_api: API_V0_1, ..Default::default() }));
    assert!(w.push_string(1, STR_KERNEL, 0, b"void k<float>(float*)"));
    assert!(w.push_string(2, STR_API, 0, b"hipLaunchKernel"));
    assert!(w.push_clock(&ClockSync { realtime_ns: 5, monotonic_ns: 3, gpu_clock: 1, ..Default::default() }));
    assert!(w.push_gpu_op(&op(0)));
    assert!(w.push_gpu_op(&op(1)));
    assert!(w.push_counters(&Counters { records_seen: 2, ..Default::default() }));
    w.finish(BATCH_FINAL).to_vec()
}

#[test]
fn roundtrip() {
    let mut buf = [0u8; crate::AGENT_BATCH_MAX];
    let bytes = sample(&mut buf);
    let b = decode(&bytes).unwrap();
    assert_eq!(b.header.pid, 42);
    assert_eq!(b.header.batch_seq, 7);
    assert_eq!(b.header.flags, BATCH_FINAL);
    let recs: Vec<_> = b.records().collect();
    assert_eq!(recs.len(), 7);
    match recs[1] {
        Record::String(s) => {
            assert_eq!(s.bytes, b"void k<float>(float*)");
            assert_eq!(s.id, 1);
        }
        r => panic!("{r:?}"),
    }
    match recs[5] {
        Record::GpuOp(o) => {
            assert_eq!(o.thread_id, 0xfedc_ba98_7654_3210 ^ 1, "64-bit thread id kept whole");
            assert_eq!(o.hdr.kind, RecordKind::GpuOp as u16);
            assert_eq!(o.record_index, 1);
        }
        r => panic!("{r:?}"),
    }
    // The stream form.
    let mut two = bytes.clone();
    two.extend_from_slice(&bytes);
    let (b1, n) = decode_prefix(&two).unwrap();
    assert_eq!(n, bytes.len());
    assert_eq!(b1.records().count(), 7);
    assert!(decode_prefix(&two[n..]).is_ok());
}

#[test]
fn rejects_bad_headers() {
    let mut buf = [0u8; crate::AGENT_BATCH_MAX];
    let bytes = sample(&mut buf);
    assert_eq!(decode(&bytes[..10]).unwrap_err(), DecodeError::TooShort { have: 10 });
    let mut b = bytes.clone();
    b[0] ^= 1;
    assert!(matches!(decode(&b), Err(DecodeError::BadMagic(_))));
    let mut b = bytes.clone();
    b[4] = 9;
    assert_eq!(decode(&b).unwrap_err(), DecodeError::BadVersion(9));
    let mut b = bytes.clone();
    b[6] = 31;
    assert_eq!(decode(&b).unwrap_err(), DecodeError::BadHeaderLen(31));
    // Truncated: total_len past the bytes.
    assert!(matches!(decode(&bytes[..bytes.len() - 8]), Err(DecodeError::BadTotalLen { .. })));
    // Extra bytes.
    let mut b = bytes.clone();
    b.extend_from_slice(&[0; 8]);
    assert!(matches!(decode(&b), Err(DecodeError::BadTotalLen { .. })));
}

fn set_u32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

#[test]
fn rejects_bad_counts_and_lengths() {
    let mut buf = [0u8; crate::AGENT_BATCH_MAX];
    let bytes = sample(&mut buf);
    // record_count past the buffer.
    let mut b = bytes.clone();
    set_u32(&mut b, 12, 8);
    assert!(matches!(decode(&b), Err(DecodeError::RecordPastEnd { index: 7, .. })));
    // record_count short: trailing bytes.
    let mut b = bytes.clone();
    set_u32(&mut b, 12, 6);
    assert!(matches!(decode(&b), Err(DecodeError::TrailingBytes { .. })));
    // First record (Info, at 32): wrong length for its kind.
    let mut b = bytes.clone();
    set_u32(&mut b, 32 + 4, 40);
    assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
    // Length not a multiple of 8 / zero.
    let mut b = bytes.clone();
    set_u32(&mut b, 32 + 4, 33);
    assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
    let mut b = bytes.clone();
    set_u32(&mut b, 32 + 4, 0);
    assert!(matches!(decode(&b), Err(DecodeError::BadRecordLen { .. })));
    // Unknown kind.
    let mut b = bytes.clone();
    b[32] = 99;
    assert!(matches!(decode(&b), Err(DecodeError::UnknownKind { kind: 99, .. })));
    // String (at 80): length larger than its record, and not matching it.
    let mut b = bytes.clone();
    set_u32(&mut b, 80 + 16, 200);
    assert!(matches!(decode(&b), Err(DecodeError::BadString { .. })));
    let mut b = bytes.clone();
    set_u32(&mut b, 80 + 16, 3);
    assert!(matches!(decode(&b), Err(DecodeError::BadString { .. })));
    // String id 0.
    let mut b = bytes.clone();
    set_u32(&mut b, 80 + 8, 0);
    assert!(matches!(decode(&b), Err(DecodeError::BadField { .. })));
}

/// A version-1 batch (152-byte ops, 32-byte info, what older agents and recorded fixtures
/// hold) still decodes; the new fields read as 0; a v1 op cannot claim a thread_seq.
#[test]
fn reads_version_1() {
    let mut b = Vec::new();
    let mut o = op(3);
    o.hdr = RecordHeader { kind: RecordKind::GpuOp as u16, _reserved: 0, len: 152 };
    let i = Info { hdr: RecordHeader { kind: RecordKind::Info as u16, _reserved: 0, len: 32 }, source: 1, ..Default::default() };
    let h =
        BatchHeader { magic: MAGIC, version: 1, header_len: 32, total_len: 32 + 152 + 32, record_count: 2, pid: 5, flags: 0, batch_seq: 0 };
    b.extend_from_slice(as_bytes(&h));
    b.extend_from_slice(&as_bytes(&o)[..152]);
    b.extend_from_slice(&as_bytes(&i)[..32]);
    let batch = decode(&b).unwrap();
    let recs: Vec<_> = batch.records().collect();
    match recs[0] {
        Record::GpuOp(g) => {
            assert_eq!(g.record_index, 3);
            assert_eq!(g.op_count, 1);
            assert_eq!((g.thread_seq, g.seq_epoch), (0, 0));
        }
        r => panic!("{r:?}"),
    }
    match recs[1] {
        Record::Info(x) => assert_eq!((x.source, x.anchor_lo_ns, x.anchor_hi_ns), (1, 0, 0)),
        r => panic!("{r:?}"),
    }
    // A 160-byte op in a version-1 batch is the wrong length.
    let mut long = b.clone();
    long[4] = 1;
    set_u32(&mut long, 32 + 4, 160);
    assert!(decode(&long).is_err());
    // The new flag is not a version-1 flag.
    let flags_at = 32 + 11;
    let mut f = b.clone();
    f[flags_at] |= OP_HAS_THREAD_SEQ;
    assert_eq!(decode(&f).unwrap_err(), DecodeError::BadField { offset: 32, field: "flags" });
    // Version 0 and 3 are refused.
    for v in [0u8, 3] {
        let mut x = b.clone();
        x[4] = v;
        assert_eq!(decode(&x).unwrap_err(), DecodeError::BadVersion(v as u16));
    }
}

#[test]
fn rejects_bad_enums() {
    let mut buf = [0u8; crate::AGENT_BATCH_MAX];
    let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
    let mut o = op(0);
    o.op = 7;
    assert!(w.push_gpu_op(&o));
    let b = w.finish(0).to_vec();
    assert_eq!(decode(&b).unwrap_err(), DecodeError::BadField { offset: 32, field: "op" });
}

/// An agent from before the appended counters (88-byte Counters record) still decodes; the
/// appended fields read 0. A record of any other length is rejected.
#[test]
fn old_counters_record_and_new_values() {
    let mut buf = [0u8; 1024];
    let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
    let mut o = op(0);
    o.op = OpKind::GraphExecution as u8;
    o.op_count = 21;
    assert!(w.push_gpu_op(&o));
    assert!(w.push_info(&Info { source: Source::Hsa as u8, captures: CAP_KERNELS | CAP_GRAPH_SPANS, ..Default::default() }));
    let b = w.finish(0).to_vec();
    let recs: Vec<_> = decode(&b).unwrap().records().collect();
    assert!(matches!(recs[0], Record::GpuOp(g) if g.op == 4 && g.op_count == 21));
    assert!(matches!(recs[1], Record::Info(i) if i.captures == CAP_KERNELS | CAP_GRAPH_SPANS));
    // Hand-made old batch: header + an 88-byte counters record.
    let c = Counters { records_seen: 5, dump_errors: 9, graph_spans: 77, ..Default::default() };
    let mut old = Vec::new();
    let h = BatchHeader {
        magic: MAGIC,
        version: VERSION,
        header_len: 32,
        total_len: (32 + COUNTERS_LEN_V1) as u32,
        record_count: 1,
        pid: 1,
        flags: 0,
        batch_seq: 0,
    };
    old.extend_from_slice(as_bytes(&h));
    old.extend_from_slice(&as_bytes(&c)[..COUNTERS_LEN_V1]);
    set_u32(&mut old, 32, RecordKind::Counters as u32);
    set_u32(&mut old, 36, COUNTERS_LEN_V1 as u32);
    match decode(&old).unwrap().records().next().unwrap() {
        Record::Counters(d) => {
            assert_eq!((d.records_seen, d.dump_errors), (5, 9));
            assert_eq!((d.graph_spans, d.barriers_untimed, d.other_packets), (0, 0, 0), "appended fields absent: 0");
        }
        r => panic!("{r:?}"),
    }
    let mut bad = old.clone();
    bad.extend_from_slice(&[0; 8]);
    set_u32(&mut bad, 8, (32 + COUNTERS_LEN_V1 + 8) as u32);
    set_u32(&mut bad, 36, (COUNTERS_LEN_V1 + 8) as u32);
    assert!(matches!(decode(&bad), Err(DecodeError::BadRecordLen { .. })));
}

#[test]
fn writer_limits() {
    let mut buf = [0u8; 8192];
    let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
    let mut n = 0;
    while w.push_gpu_op(&op(n)) {
        n += 1;
    }
    assert_eq!(n as usize, (crate::AGENT_BATCH_MAX - 32) / 160);
    let b = w.finish(0);
    assert!(b.len() <= crate::AGENT_BATCH_MAX);
    assert_eq!(decode(b).unwrap().records().count() as u64, n);
    // Long strings are cut and flagged.
    let mut buf = [0u8; 4096];
    let mut w = BatchWriter::new(&mut buf, 1, 0).unwrap();
    let long = [b'x'; 3000];
    assert!(w.push_string(3, STR_KERNEL, 0, &long));
    assert!(!w.push_string(0, STR_KERNEL, 0, b"id zero"));
    let b = w.finish(0);
    match decode(b).unwrap().records().next().unwrap() {
        Record::String(s) => {
            assert_eq!(s.bytes.len(), STRING_MAX);
            assert_eq!(s.flags, STR_TRUNCATED);
        }
        r => panic!("{r:?}"),
    }
}

/// xorshift64*: deterministic, no deps.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Property: decode never panics, and whatever it accepts iterates to exactly
/// `record_count` records inside the buffer. Inputs: random bytes, random mutations and
/// truncations of valid batches, random headers with random counts.
#[test]
fn fuzz_random_and_truncated() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; crate::AGENT_BATCH_MAX];
    let valid = sample(&mut buf);
    let mut accepted = 0;
    for iter in 0..200_000u32 {
        let mut b: Vec<u8> = match iter % 4 {
            0 => {
                let n = (rng.next() % 600) as usize;
                (0..n).map(|_| rng.next() as u8).collect()
            }
            1 => valid[..(rng.next() as usize % (valid.len() + 1))].to_vec(),
            2 => {
                let mut v = valid.clone();
                for _ in 0..1 + rng.next() % 4 {
                    let i = rng.next() as usize % v.len();
                    v[i] = rng.next() as u8;
                }
                v
            }
            _ => {
                let mut v = valid[..32].to_vec();
                let n = (rng.next() % 400) as usize;
                v.extend((0..n).map(|_| rng.next() as u8));
                let len = v.len() as u32;
                set_u32(&mut v, 8, len);
                set_u32(&mut v, 12, (rng.next() % 6) as u32);
                v
            }
        };
        if iter % 7 == 0 && !b.is_empty() {
            let cut = rng.next() as usize % b.len();
            b.truncate(cut);
        }
        for (batch, n) in [decode(&b).map(|x| (x, b.len())), decode_prefix(&b)].into_iter().flatten() {
            accepted += 1;
            assert!(n <= b.len());
            assert_eq!(batch.bytes().len(), batch.header.total_len as usize);
            assert_eq!(batch.records().count(), batch.header.record_count as usize);
        }
    }
    assert!(accepted > 0, "some mutations keep the batch valid");
}
