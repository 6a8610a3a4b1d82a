//! Perfetto's native protobuf trace (`.pftrace`): a stream of `TracePacket`s (each written as
//! field 1 of the `Trace` message, exactly as Perfetto writes files) with a `TrackDescriptor` per
//! process / thread / GPU queue and `TrackEvent` begin/end pairs; event names are interned
//! (iid = the rocpd_string id), flows use `flow_ids` / `terminating_flow_ids`.
//!
//! The trace's clock is declared: a `ClockSnapshot` naming CLOCK_MONOTONIC the trace's clock
//! (and CLOCK_REALTIME at the same instant, from `realtime_minus_monotonic_ns`), and each
//! sequence's `TracePacketDefaults.timestamp_clock_id` CLOCK_MONOTONIC.
//!
//! The messages are the subset of perfetto/protos/perfetto/trace/*.proto that we write, declared
//! with prost's derive (same field numbers and types as upstream).

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use prost::Message;

use super::timeline::{self, Arg, PartFiles, PartSink, Sink, Slice};

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TracePacket {
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
    #[prost(message, optional, tag = "59")]
    pub trace_packet_defaults: Option<TracePacketDefaults>,
}

/// The clocks' readings at one instant: how trace_processor relates a sequence's clock to the
/// others, and (`primary_trace_clock`) which clock the trace's time is.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct ClockSnapshot {
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// A `BuiltinClock`.
    #[prost(int32, optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct Clock {
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

/// Defaults of a sequence's packets (incremental state: sent with the packet that clears it).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TracePacketDefaults {
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
}

/// perfetto.protos.BuiltinClock: every time in a trace is CLOCK_MONOTONIC (docs/trace-format.md).
const CLOCK_REALTIME: u32 = 1;
const CLOCK_MONOTONIC: u32 = 3;

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrackDescriptor {
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
    #[prost(int32, optional, tag = "12")]
    pub sibling_order_rank: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ProcessDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(string, repeated, tag = "2")]
    pub cmdline: Vec<String>,
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct ThreadDescriptor {
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    #[prost(int64, optional, tag = "2")]
    pub tid: Option<i64>,
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct TrackEvent {
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    #[prost(uint64, repeated, packed = "false", tag = "3")]
    pub category_iids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct DebugAnnotation {
    #[prost(uint64, optional, tag = "1")]
    pub name_iid: Option<u64>,
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    #[prost(uint64, optional, tag = "7")]
    pub pointer_value: Option<u64>,
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
pub(crate) struct InternedData {
    #[prost(message, repeated, tag = "1")]
    pub event_categories: Vec<InternedString>,
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<InternedString>,
    #[prost(message, repeated, tag = "3")]
    pub debug_annotation_names: Vec<InternedString>,
}

/// EventName and DebugAnnotationName share this shape (iid = 1, name = 2).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct InternedString {
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

const TYPE_SLICE_BEGIN: i32 = 1;
const TYPE_SLICE_END: i32 = 2;
const SEQ_ID: u32 = 1;
const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u32 = 2;

/// Event categories, interned once (iid = index + 1).
const CATEGORIES: &[&str] = &["api", "gpu", "roctx"];

/// Debug annotation names, interned once (iid = index + 1).
const ANNOTATIONS: &[&str] = &[
    "api_id",
    "args",
    "correlation_id",
    "ret",
    "status",
    "a0",
    "a1",
    "a2",
    "a3",
    "kernel",
    "grid",
    "workgroup",
    "stream",
    "bytes",
    "copy_kind",
    "op_id",
    "opType",
    "sequenceId",
    "graph_exec",
    "dst",
    "value",
    "ptr",
    "flags",
    "function",
    "shared_mem_bytes",
    "handle",
    "device",
    "error",
];

fn track_uuid(pid: i64, tid: Option<i64>) -> u64 {
    // Distinct, stable, non-zero ids: processes in the low half, threads hashed above.
    match tid {
        None => (pid as u64) << 1 | 1,
        Some(t) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            std::hash::Hash::hash(&(pid, t), &mut h);
            std::hash::Hasher::finish(&h) | (1 << 63)
        }
    }
}

struct ProtoSink<W: Write> {
    w: W,
    /// trusted_packet_sequence_id: one sequence (with its own interning) per writer thread.
    seq: u32,
    buf: Vec<u8>,
    names_sent: HashSet<i64>,
    /// Pending slice ends per track (LIFO within a lane).
    ends: HashMap<u64, Vec<i64>>,
    threads: HashSet<(i64, i64)>,
}

impl<W: Write> ProtoSink<W> {
    fn packet(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        p.encode(&mut self.buf)?;
        // Trace.packet (field 1, length-delimited)
        let mut hdr = Vec::with_capacity(11);
        hdr.push(0x0a);
        prost::encoding::encode_varint(self.buf.len() as u64, &mut hdr);
        self.w.write_all(&hdr)?;
        self.w.write_all(&self.buf)?;
        Ok(())
    }
    fn end(&mut self, uuid: u64, ts: i64) -> Result<()> {
        self.packet(&TracePacket {
            timestamp: Some(ts as u64),
            trusted_packet_sequence_id: Some(self.seq),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            track_event: Some(TrackEvent { r#type: Some(TYPE_SLICE_END), track_uuid: Some(uuid), ..Default::default() }),
            ..Default::default()
        })
    }
    fn close_until(&mut self, uuid: u64, until: Option<i64>) -> Result<()> {
        let mut stack = self.ends.remove(&uuid).unwrap_or_default();
        while let Some(&e) = stack.last() {
            if until.is_some_and(|u| e > u) {
                break;
            }
            stack.pop();
            self.end(uuid, e)?;
        }
        if !stack.is_empty() {
            self.ends.insert(uuid, stack);
        }
        Ok(())
    }
}

impl<W: Write> Sink for ProtoSink<W> {
    fn process(&mut self, pid: i64, name: &str, cmdline: Option<&str>, sort_index: i64) -> Result<()> {
        let real = pid < timeline::GPU_PID_BASE - 1;
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(self.seq),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(track_uuid(pid, None)),
                name: if real { None } else { Some(name.to_string()) },
                process: real.then(|| ProcessDescriptor {
                    pid: Some(pid as i32),
                    cmdline: cmdline.map(|c| vec![c.to_string()]).unwrap_or_default(),
                    process_name: Some(name.to_string()),
                }),
                sibling_order_rank: Some(sort_index.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
    fn thread(&mut self, pid: i64, tid: i64, name: &str, sort_index: i64) -> Result<()> {
        self.threads.insert((pid, tid));
        // Real threads get a ThreadDescriptor; GPU queues, roctx and overlap lanes are named
        // child tracks of their process (a ThreadDescriptor would claim a tid that does not exist).
        let real = pid < timeline::GPU_PID_BASE - 1 && tid < timeline::LANE_TID;
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(self.seq),
            track_descriptor: Some(TrackDescriptor {
                uuid: Some(track_uuid(pid, Some(tid))),
                name: (!real).then(|| name.to_string()),
                parent_uuid: (!real).then(|| track_uuid(pid, None)),
                thread: real.then(|| ThreadDescriptor { pid: Some(pid as i32), tid: Some(tid), thread_name: Some(name.to_string()) }),
                sibling_order_rank: Some(sort_index.clamp(i32::MIN as i64, i32::MAX as i64) as i32),
                ..Default::default()
            }),
            ..Default::default()
        })
    }
    fn slice(&mut self, s: &Slice) -> Result<()> {
        if !self.threads.contains(&(s.pid, s.tid)) {
            self.thread(s.pid, s.tid, &format!("track {}", s.tid), 0)?;
        }
        let uuid = track_uuid(s.pid, Some(s.tid));
        self.close_until(uuid, Some(s.ts))?;
        let interned = if self.names_sent.insert(s.name_id) {
            Some(InternedData {
                event_names: vec![InternedString { iid: Some(s.name_id as u64 + 1), name: Some(s.name.to_string()) }],
                ..Default::default()
            })
        } else {
            None
        };
        let debug_annotations = s
            .args
            .iter()
            .map(|(k, v)| {
                let iid = ANNOTATIONS.iter().position(|a| a == k).map(|i| i as u64 + 1);
                let mut d = DebugAnnotation {
                    name_iid: iid,
                    // names outside the interned list go by value
                    name: iid.is_none().then(|| k.to_string()),
                    ..Default::default()
                };
                match v {
                    Arg::Int(i) => d.int_value = Some(*i),
                    Arg::Hex(i) => d.pointer_value = Some(*i as u64),
                    Arg::Str(t) => d.string_value = Some(t.clone()),
                }
                d
            })
            .collect();
        self.packet(&TracePacket {
            timestamp: Some(s.ts as u64),
            trusted_packet_sequence_id: Some(self.seq),
            sequence_flags: Some(SEQ_NEEDS_INCREMENTAL_STATE),
            interned_data: interned,
            track_event: Some(TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                // +1: iid 0 means "not interned"; rocpd_string ids start at 1 but may be 0 in odd files.
                name_iid: Some(s.name_id as u64 + 1),
                track_uuid: Some(uuid),
                category_iids: vec![CATEGORIES.iter().position(|c| *c == s.cat).map_or(0, |i| i as u64 + 1)],
                debug_annotations,
                flow_ids: s.flow_out.clone(),
                terminating_flow_ids: s.flow_in.clone(),
            }),
            ..Default::default()
        })?;
        self.ends.entry(uuid).or_default().push(s.ts + s.dur);
        Ok(())
    }
    fn flush_track(&mut self, pid: i64, tid: i64) -> Result<()> {
        self.close_until(track_uuid(pid, Some(tid)), None)
    }
}

impl<W: Write> ProtoSink<W> {
    fn new(w: W, seq: u32, threads: HashSet<(i64, i64)>) -> Self {
        ProtoSink { w, seq, buf: Vec::with_capacity(4096), names_sent: HashSet::new(), ends: HashMap::new(), threads }
    }

    /// First packet of a sequence: clears its incremental state and interns the fixed names.
    fn start_sequence(&mut self) -> Result<()> {
        let interned = |names: &[&str]| -> Vec<InternedString> {
            names.iter().enumerate().map(|(i, n)| InternedString { iid: Some(i as u64 + 1), name: Some(n.to_string()) }).collect()
        };
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(self.seq),
            sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
            trace_packet_defaults: Some(TracePacketDefaults { timestamp_clock_id: Some(CLOCK_MONOTONIC) }),
            interned_data: Some(InternedData {
                event_categories: interned(CATEGORIES),
                debug_annotation_names: interned(ANNOTATIONS),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// The trace's clock declared: CLOCK_MONOTONIC is the trace's time (so the times shown are
    /// the file's), with CLOCK_REALTIME beside it where the trace recorded the offset.
    fn clock_snapshot(&mut self, conn: &rusqlite::Connection) -> Result<()> {
        let meta = |tag: &str| -> Result<Option<i64>> {
            let v: Option<String> = conn
                .query_row("SELECT CAST(value AS TEXT) FROM rocpd_metadata WHERE tag = ?1 ORDER BY id DESC LIMIT 1", [tag], |r| r.get(0))
                .map(Some)
                .or_else(|e| if matches!(e, rusqlite::Error::QueryReturnedNoRows) { Ok(None) } else { Err(e) })?;
            Ok(v.and_then(|v| v.trim().parse::<i64>().ok()))
        };
        let t = meta("trace_start_ns")?.filter(|t| *t >= 0).unwrap_or(0);
        let mut clocks = vec![Clock { clock_id: Some(CLOCK_MONOTONIC), timestamp: Some(t as u64) }];
        if let Some(real) = meta("realtime_minus_monotonic_ns")?.and_then(|d| d.checked_add(t)).filter(|r| *r >= 0) {
            clocks.push(Clock { clock_id: Some(CLOCK_REALTIME), timestamp: Some(real as u64) });
        }
        self.packet(&TracePacket {
            timestamp: Some(t as u64),
            trusted_packet_sequence_id: Some(self.seq),
            clock_snapshot: Some(ClockSnapshot { clocks, primary_trace_clock: Some(CLOCK_MONOTONIC as i32) }),
            ..Default::default()
        })
    }

    fn close_all(&mut self) -> Result<()> {
        let open: Vec<u64> = self.ends.keys().copied().collect();
        for u in open {
            self.close_until(u, None)?;
        }
        self.w.flush()?;
        Ok(())
    }
}

impl<W: Write + Send> PartSink for ProtoSink<W> {
    fn finish(mut self: Box<Self>) -> Result<()> {
        self.close_all()
    }
}

/// Writes `db` as a Perfetto protobuf trace to `out`.
pub fn convert_perfetto_proto(db: &Path, facts: crate::api_meaning::ApiFacts, out: &Path) -> Result<()> {
    let conn = super::open::open_trace(db, facts)?;
    timeline::bounded_memory(&conn)?;
    let (f, guard) = super::open::OutFile::create(&[db], out)?;
    let mut sink = ProtoSink::new(BufWriter::with_capacity(1 << 20, f), SEQ_ID, HashSet::new());
    let mut run = || -> Result<()> {
        // Track descriptors on the first sequence; API calls and GPU ops written in parallel on
        // sequences of their own into part files, appended after (packet order across
        // sequences does not matter: readers sort by timestamp).
        sink.start_sequence()?;
        sink.clock_snapshot(&conn)?;
        let p = timeline::prelude(&conn)?;
        timeline::emit_tracks(&conn, &p, &mut sink)?;
        let (files, parts) = PartFiles::new(out, 2)?;
        let mut sinks = files
            .into_iter()
            .enumerate()
            .map(|(i, f)| ProtoSink::new(BufWriter::with_capacity(1 << 20, f), SEQ_ID + 1 + i as u32, sink.threads.clone()));
        let (mut a, mut b) = (sinks.next().unwrap(), sinks.next().unwrap());
        a.start_sequence()?;
        b.start_sequence()?;
        timeline::emit_parts(&conn, &p, [Box::new(a), Box::new(b)])?;
        sink.close_all()?;
        parts.append_to(&mut sink.w, 0)?;
        sink.w.flush()?;
        Ok(())
    };
    run().with_context(|| format!("converting {} to {}", db.display(), out.display()))?;
    drop(sink);
    guard.commit()
}
