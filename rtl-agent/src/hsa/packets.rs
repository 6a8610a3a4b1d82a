//! The packet handler (part of the HSA source, [`crate::hsa`]): every packet the application
//! submits to an intercepted queue passes [`handler`], on the thread that rings the doorbell,
//! inside the launch call. A single dispatch gets a pool signal (its completion forwarded by
//! the completion thread); a single barrier, and a graph replay's batch, two barrier packets of
//! the agent's around them. This is the traced application's hot path.

use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering::*};

use rtl_common::agent::OpKind;

use super::devices::device_of;
use super::ffi::*;
use super::pool::*;
use super::watch;
use crate::clock;
use crate::publish::counters;

/// Packets about to be submitted: a completion signal among them that still holds a watched
/// copy's times is read first (the packet will overwrite them).
///
/// # Safety
/// `pkts` holds `count` 64-byte AQL packets.
unsafe fn settle_reused(f: &Fns, p: &Pool, pkts: *const c_void, count: u64) {
    if !watch::any() {
        return;
    }
    for k in 0..count as usize {
        // SAFETY: the caller's promise; completion_signal is at byte 56 of every AQL packet.
        let sig = unsafe { std::ptr::read_unaligned((pkts as *const u8).add(k * 64 + 56) as *const u64) };
        watch::settle(f, p, sig);
    }
}

/// Per intercepted queue: what the handler needs.
pub(super) struct QueueCtx {
    pub(super) agent: u64,
    pub(super) queue_id: u64,
    /// The handler ran for this queue (the interception probe waits for it).
    pub(super) seen: AtomicBool,
    /// The interception probe's own packet is on its way (not counted as the runtime's).
    pub(super) probing: AtomicBool,
}

fn u16at(pkt: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([pkt[o], pkt[o + 1]])
}
fn u32at(pkt: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([pkt[o], pkt[o + 1], pkt[o + 2], pkt[o + 3]])
}
fn u64at(pkt: &[u8], o: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&pkt[o..o + 8]);
    u64::from_le_bytes(b)
}

/// Points a kernel dispatch packet's completion signal at a pool signal. False: left as it was
/// (other packet types, counted; no pool slot, counted). Barriers reach this only inside
/// multi-packet batches, where they are not timed (single ones are: see `span_packets`).
fn capture(f: &Fns, p: &Pool, q: &QueueCtx, pkt: &mut [u8], is_graph: bool) -> bool {
    match u16at(pkt, 0) & 0xff {
        PACKET_TYPE_KERNEL_DISPATCH => {}
        PACKET_TYPE_BARRIER_AND | PACKET_TYPE_BARRIER_OR => {
            counters().barriers_untimed.fetch_add(1, Relaxed);
            return false;
        }
        _ => {
            counters().other_packets.fetch_add(1, Relaxed);
            return false;
        }
    }
    let Some((i, sig)) = take_slot(f, p) else { return false };
    let block = [(u16at(pkt, 4) as u32).max(1), (u16at(pkt, 6) as u32).max(1), (u16at(pkt, 8) as u32).max(1)];
    let grid_wi = [u32at(pkt, 12), u32at(pkt, 16), u32at(pkt, 20)];
    let info = InFlight {
        kind: K_DISPATCH,
        orig: u64at(pkt, 56),
        agent: q.agent,
        queue: q.queue_id as u32,
        device: device_of(q.agent),
        tid: cached_tid(),
        submit_ns: clock::monotonic_ns(),
        is_graph,
        kobj: u64at(pkt, 32),
        grid: [grid_wi[0].div_ceil(block[0]), grid_wi[1].div_ceil(block[1]), grid_wi[2].div_ceil(block[2])],
        block,
        ..Default::default()
    };
    arm(p, i, info);
    pkt[56..64].copy_from_slice(&sig.to_le_bytes());
    true
}

/// A barrier-AND packet with no dependency that completes pool signal `sig`.
fn barrier_packet(sig: u64) -> [u8; 64] {
    let mut b = [0u8; 64];
    b[0..2].copy_from_slice(&BARRIER_HEADER.to_le_bytes());
    b[56..64].copy_from_slice(&sig.to_le_bytes());
    b
}

/// The two barrier packets that time `count` packets written between them (a replay's batch:
/// `op` GraphExecution; one barrier packet of the runtime's: `op` Barrier), their slots armed
/// (K_SPAN_START, K_SPAN_END). The span is from the first one's completion (everything before
/// on the queue is done) to the second's (the packets between are done). The packets between
/// and their signals stay the runtime's own: nothing is forwarded, nothing waits for us. None:
/// no pool slots (counted).
fn span_packets(f: &Fns, p: &Pool, q: &QueueCtx, count: u64, op: OpKind) -> Option<([u8; 64], [u8; 64])> {
    let (a, sa) = take_slot(f, p)?;
    let Some((b, sb)) = take_slot(f, p) else {
        give_back(p, a);
        return None;
    };
    let base = InFlight {
        agent: q.agent,
        queue: q.queue_id as u32,
        device: device_of(q.agent),
        tid: cached_tid(),
        submit_ns: clock::monotonic_ns(),
        is_graph: op == OpKind::GraphExecution,
        span_op: op as u8,
        ..Default::default()
    };
    arm(p, a, InFlight { kind: K_SPAN_START, ..base });
    arm(p, b, InFlight { kind: K_SPAN_END, pair: a as u32, count: count.min(u32::MAX as u64) as u32, ..base });
    if op == OpKind::GraphExecution {
        counters().graph_spans.fetch_add(1, Relaxed);
    }
    Some((barrier_packet(sa), barrier_packet(sb)))
}

/// Most packets a batch may have for the opt-in per-node mode to copy and rewrite it.
const MAX_BATCH: u64 = 4096;

pub(super) unsafe extern "C" fn handler(pkts: *const c_void, count: u64, _user_index: u64, data: *mut c_void, writer: Writer) {
    // SAFETY: the intercept handler's contract (hsa_amd_queue_intercept_register): `pkts` holds
    // `count` 64-byte AQL packets, `data` is the QueueCtx registered with this queue (never freed),
    // `writer` the runtime's packet writer, called with packets of ours or the application's.
    unsafe {
        // Whatever happens, the application's packets are handed on exactly once: `wrote` is set
        // just before the first call to `writer`, after which nothing can fail.
        let wrote = std::cell::Cell::new(false);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if data.is_null() || count == 0 {
                return;
            }
            let q = &*(data as *const QueueCtx);
            if count == 1 && q.probing.swap(false, AcqRel) {
                q.seen.store(true, Release);
                return; // our probe packet: passed on as it is
            }
            q.seen.store(true, Release);
            let (Some(f), Some(p)) = (FNS.get(), POOL_.get()) else { return };
            settle_reused(f, p, pkts, count);
            // A dispatch was captured: its completion is to be forwarded (spans need no wake-up).
            let mut forward = false;
            if count == 1 {
                let mut pkt = [0u8; 64];
                std::ptr::copy_nonoverlapping(pkts as *const u8, pkt.as_mut_ptr(), 64);
                let header = u16at(&pkt, 0);
                if matches!(header & 0xff, PACKET_TYPE_BARRIER_AND | PACKET_TYPE_BARRIER_OR) {
                    // An event record, stream wait or the runtime's marker: timed by two barriers
                    // of ours around it, its own signal untouched (others may wait on it: no
                    // forwarding hop on their path). Without the barrier bit it does not wait for
                    // what precedes it, and ours would make it: passed on untimed.
                    if header & (1 << 8) == 0 {
                        counters().barriers_untimed.fetch_add(1, Relaxed);
                        return;
                    }
                    let Some((before, after)) = span_packets(f, p, q, 1, OpKind::Barrier) else { return };
                    wrote.set(true);
                    writer(before.as_ptr() as *const c_void, 1);
                    writer(pkts, 1);
                    writer(after.as_ptr() as *const c_void, 1);
                } else {
                    if !capture(f, p, q, &mut pkt, false) {
                        return;
                    }
                    forward = true;
                    wrote.set(true);
                    writer(pkt.as_ptr() as *const c_void, 1);
                }
            } else {
                // A multi-packet batch (graph replay). Its packets are the graph's: left alone
                // unless RTL_AGENT_GRAPH_NODES=1 (rewriting completion signals inside batches breaks
                // ROCr before 7.13, 0x1009). The replay is timed by two barriers of our own.
                let mut nodes: Option<Vec<u8>> = None;
                if crate::graph_nodes() && count <= MAX_BATCH {
                    let mut copy = vec![0u8; count as usize * 64];
                    std::ptr::copy_nonoverlapping(pkts as *const u8, copy.as_mut_ptr(), copy.len());
                    for pkt in copy.chunks_exact_mut(64) {
                        forward |= capture(f, p, q, pkt, true);
                    }
                    nodes = Some(copy);
                } else {
                    counters().graph_batches_skipped.fetch_add(1, Relaxed);
                }
                let span = if crate::hsa_spans() { span_packets(f, p, q, count, OpKind::GraphExecution) } else { None };
                if span.is_none() && nodes.is_none() {
                    return;
                }
                let batch = nodes.as_ref().map_or(pkts, |v| v.as_ptr() as *const c_void);
                wrote.set(true);
                if let Some((before, after)) = &span {
                    writer(before.as_ptr() as *const c_void, 1);
                    writer(batch, count);
                    writer(after.as_ptr() as *const c_void, 1);
                } else {
                    writer(batch, count);
                }
            }
            if forward && SLEEPING.load(SeqCst) {
                kick_completion();
            }
        }));
        if !wrote.get() {
            writer(pkts, count);
        }
    }
}
