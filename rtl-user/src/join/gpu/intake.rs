//! The batch intake: an agent batch validated, checked against its publisher, and its records
//! taken in.

use super::*;

impl GpuJoiner {
    /// One agent batch, from `publisher` (as the probe saw it).
    pub fn on_batch(
        &mut self,
        publisher: Publisher,
        data: &[u8],
        asked_len: u32,
        now: u64,
        next_id: &mut dyn FnMut() -> i64,
        out: &mut Vec<Row>,
    ) {
        let Publisher { pid, ns_pid } = publisher;
        self.stats.batches += 1;
        self.advance(now);
        if asked_len as usize != data.len() {
            // Larger than one ring-buffer record, or unreadable: the probe copied nothing usable.
            self.stats.batches_truncated += 1;
            return;
        }
        let batch = match agent::decode(data) {
            Ok(b) => b,
            Err(_) => {
                self.stats.batches_rejected += 1;
                return;
            }
        };
        // The agent writes getpid(): the host's pid, or inside a container its own namespace's.
        if batch.header.pid != pid && (ns_pid == 0 || batch.header.pid != ns_pid) {
            self.stats.batches_wrong_pid += 1;
            return;
        }
        if batch.header.batch_seq == 0 {
            // A new image (exec) or a forked child: its string ids and record numbers start again.
            if let Some(p) = self.procs.get_mut(&pid) {
                p.strings.clear();
                p.forget_records(&mut self.bounds);
                p.anchor = None;
            }
        }
        for rec in batch.records() {
            match rec {
                Record::String(s) => {
                    let p = self.procs.entry(pid).or_default();
                    let text = name_from_process(&String::from_utf8_lossy(s.bytes), p.strings.counters());
                    p.strings.insert(s.id, text);
                }
                Record::ClockSync(c) => {
                    let off = c.realtime_ns as i64 - c.monotonic_ns as i64;
                    self.procs.entry(pid).or_default().clock = Some((off, c.uncertainty_ns));
                }
                Record::Counters(c) => self.procs.entry(pid).or_default().counters = Some(c),
                Record::Info(i) => {
                    let p = self.procs.entry(pid).or_default();
                    if i.anchor_lo_ns != 0 && i.anchor_hi_ns >= i.anchor_lo_ns {
                        p.anchor = Some((i.anchor_lo_ns, i.anchor_hi_ns));
                    }
                    let status = Status::from_u8(i.status);
                    let text = match status {
                        Some(Status::Active) => Some(gpu_source_text(Source::from_u8(i.source), i.captures)),
                        // Shutting down: what it captured stands.
                        Some(Status::Stopped) => None,
                        _ => Some(format!("none: {}", status_text(status, i.last_error, i.mode & agent::MODE_HSA_TOOL != 0))),
                    };
                    if let Some(text) = text.filter(|t| p.source_text.as_ref() != Some(t)) {
                        if status == Some(Status::Active) {
                            self.notices.push(format!("pid {pid}: GPU times: {text}"));
                        } else if !p.status_reported {
                            p.status_reported = true;
                            self.notices.push(format!("pid {pid}: the agent has no GPU source: {}", &text["none: ".len()..]));
                        }
                        out.push(Row::Meta(MetaRow { tag: format!("gpu_source.{pid}"), value: text.clone() }));
                        p.source_text = Some(text);
                    }
                }
                Record::GpuOp(op) => {
                    self.stats.ops += 1;
                    let w = (pid, op, self.now);
                    let t = self.try_link(&w, next_id, out, false, false);
                    self.wait(w, t);
                    self.bound(next_id, out);
                }
            }
        }
    }
}
