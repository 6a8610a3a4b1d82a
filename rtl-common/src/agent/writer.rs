//! The writer: one batch built in a caller-supplied buffer (no allocation).

use super::*;

/// Builds one batch in a caller-supplied buffer (no allocation).
pub struct BatchWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    count: u32,
}

impl<'a> BatchWriter<'a> {
    /// Starts a batch; `buf` is cut to [`crate::AGENT_BATCH_MAX`]. `None` if it is too small.
    pub fn new(buf: &'a mut [u8], pid: u32, batch_seq: u64) -> Option<Self> {
        let cap = buf.len().min(crate::AGENT_BATCH_MAX);
        if cap < size_of::<BatchHeader>() {
            return None;
        }
        let mut w = BatchWriter { buf: &mut buf[..cap], len: 0, count: 0 };
        let h = BatchHeader {
            magic: MAGIC,
            version: VERSION,
            header_len: size_of::<BatchHeader>() as u16,
            total_len: 0,
            record_count: 0,
            pid,
            flags: 0,
            batch_seq,
        };
        w.put(as_bytes(&h));
        Some(w)
    }

    fn put(&mut self, b: &[u8]) {
        self.buf[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    /// Bytes still free.
    pub fn room(&self) -> usize {
        self.buf.len() - self.len
    }

    /// Records written so far.
    pub fn count(&self) -> u32 {
        self.count
    }

    fn push_fixed<T: Plain>(&mut self, kind: RecordKind, mut v: T, hdr: impl FnOnce(&mut T) -> &mut RecordHeader) -> bool {
        if self.room() < size_of::<T>() {
            return false;
        }
        *hdr(&mut v) = RecordHeader { kind: kind as u16, _reserved: 0, len: size_of::<T>() as u32 };
        self.put(as_bytes(&v));
        self.count += 1;
        true
    }

    /// Appends a GPU op (its `hdr` is filled in). False if it does not fit.
    pub fn push_gpu_op(&mut self, op: &GpuOp) -> bool {
        self.push_fixed(RecordKind::GpuOp, *op, |r| &mut r.hdr)
    }
    pub fn push_clock(&mut self, c: &ClockSync) -> bool {
        self.push_fixed(RecordKind::ClockSync, *c, |r| &mut r.hdr)
    }
    pub fn push_counters(&mut self, c: &Counters) -> bool {
        self.push_fixed(RecordKind::Counters, *c, |r| &mut r.hdr)
    }
    pub fn push_info(&mut self, i: &Info) -> bool {
        self.push_fixed(RecordKind::Info, *i, |r| &mut r.hdr)
    }

    /// Bytes a string record of `len` bytes takes (after cutting to [`STRING_MAX`]).
    pub fn string_record_len(len: usize) -> usize {
        align8(size_of::<StringHead>() + len.min(STRING_MAX))
    }

    /// Appends a string record, cut to [`STRING_MAX`] bytes (flagged). False if it does not fit
    /// or `id` is 0.
    pub fn push_string(&mut self, id: u32, kind: u8, flags: u8, bytes: &[u8]) -> bool {
        let (bytes, flags) = if bytes.len() > STRING_MAX { (&bytes[..STRING_MAX], flags | STR_TRUNCATED) } else { (bytes, flags) };
        let len = Self::string_record_len(bytes.len());
        if id == 0 || self.room() < len {
            return false;
        }
        let h = StringHead {
            hdr: RecordHeader { kind: RecordKind::String as u16, _reserved: 0, len: len as u32 },
            id,
            kind,
            flags,
            _pad0: 0,
            len: bytes.len() as u32,
            _pad1: 0,
        };
        let start = self.len;
        self.put(as_bytes(&h));
        self.put(bytes);
        let end = start + len;
        self.buf[self.len..end].fill(0);
        self.len = end;
        self.count += 1;
        true
    }

    /// Completes the header; returns the batch's bytes.
    pub fn finish(self, flags: u32) -> &'a [u8] {
        self.finish_seq(flags, None)
    }

    /// Completes the header, setting `batch_seq` now when given (a publisher numbers only the
    /// batches it actually hands over); returns the batch's bytes.
    pub fn finish_seq(self, flags: u32, batch_seq: Option<u64>) -> &'a [u8] {
        let BatchWriter { buf, len, count } = self;
        let mut h: BatchHeader = read(buf, 0).unwrap_or_default();
        h.total_len = len as u32;
        h.record_count = count;
        h.flags = flags;
        if let Some(s) = batch_seq {
            h.batch_seq = s;
        }
        buf[..size_of::<BatchHeader>()].copy_from_slice(as_bytes(&h));
        &buf[..len]
    }
}
