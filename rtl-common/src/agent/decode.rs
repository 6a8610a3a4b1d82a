//! The decoder: a batch validated as a whole (header, every record's kind, length and
//! fields), then its records read as [`Record`]s.

use super::*;

/// Why a batch was rejected. Offsets are byte offsets into the batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than a batch header.
    TooShort {
        have: usize,
    },
    BadMagic(u32),
    BadVersion(u16),
    BadHeaderLen(u16),
    /// `total_len` disagrees with the bytes given (or exceeds them, for [`decode_prefix`]).
    BadTotalLen {
        total_len: u32,
        have: usize,
    },
    /// A record header or body runs past the end of the batch (e.g. `record_count` too high).
    RecordPastEnd {
        offset: usize,
        index: u32,
    },
    /// A record length that is not a multiple of 8, too small, or wrong for its kind.
    BadRecordLen {
        offset: usize,
        kind: u16,
        len: u32,
    },
    UnknownKind {
        offset: usize,
        kind: u16,
    },
    /// A string whose `len` does not match its record length or exceeds [`STRING_MAX`].
    BadString {
        offset: usize,
        len: u32,
    },
    /// An enum field out of range (`field` names it).
    BadField {
        offset: usize,
        field: &'static str,
    },
    /// Bytes left after `record_count` records.
    TrailingBytes {
        offset: usize,
    },
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::TooShort { have } => write!(f, "agent batch too short ({have} bytes)"),
            Self::BadMagic(m) => write!(f, "agent batch: bad magic {m:#x}"),
            Self::BadVersion(v) => write!(f, "agent batch: version {v}, expected {VERSION_MIN}..={VERSION}"),
            Self::BadHeaderLen(l) => write!(f, "agent batch: header length {l}"),
            Self::BadTotalLen { total_len, have } => {
                write!(f, "agent batch: total_len {total_len} but {have} bytes")
            }
            Self::RecordPastEnd { offset, index } => {
                write!(f, "agent batch: record {index} at {offset} runs past the end")
            }
            Self::BadRecordLen { offset, kind, len } => {
                write!(f, "agent batch: record kind {kind} at {offset} has length {len}")
            }
            Self::UnknownKind { offset, kind } => {
                write!(f, "agent batch: unknown record kind {kind} at {offset}")
            }
            Self::BadString { offset, len } => {
                write!(f, "agent batch: string at {offset} with bad length {len}")
            }
            Self::BadField { offset, field } => {
                write!(f, "agent batch: record at {offset}: field {field} out of range")
            }
            Self::TrailingBytes { offset } => {
                write!(f, "agent batch: trailing bytes at {offset}")
            }
        }
    }
}

/// Reads a `T` (plain integers only, any bit pattern valid) from `bytes[off..]`.
pub(super) fn read<T: Copy + Plain>(bytes: &[u8], off: usize) -> Option<T> {
    let end = off.checked_add(size_of::<T>())?;
    if end > bytes.len() {
        return None;
    }
    // SAFETY: bounds checked above; `T: Plain` is only implemented for `#[repr(C)]` structs
    // of integers, for which every bit pattern is valid; read_unaligned needs no alignment.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().add(off) as *const T) })
}

/// Reads the first `n` bytes of a `T` from `bytes[off..]` (an older, shorter layout); the rest
/// of the `T` is zero.
pub(super) fn read_prefix<T: Copy + Plain + Default>(bytes: &[u8], off: usize, n: usize) -> Option<T> {
    let end = off.checked_add(n)?;
    if n > size_of::<T>() || end > bytes.len() {
        return None;
    }
    let mut v = T::default();
    // SAFETY: `T: Plain` (integers only, every bit pattern valid); n <= size_of::<T>() and the
    // source range was bounds checked.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr().add(off), &mut v as *mut T as *mut u8, n) };
    Some(v)
}

/// A validated record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    GpuOp(GpuOp),
    String(Str<'a>),
    ClockSync(ClockSync),
    Counters(Counters),
    Info(Info),
}

/// A string record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Str<'a> {
    pub id: u32,
    pub kind: u8,
    pub flags: u8,
    pub bytes: &'a [u8],
}

/// A validated batch.
#[derive(Clone, Copy, Debug)]
pub struct Batch<'a> {
    pub header: BatchHeader,
    bytes: &'a [u8],
}

impl<'a> Batch<'a> {
    /// The validated records, in order.
    pub fn records(&self) -> Records<'a> {
        Records { bytes: self.bytes, off: size_of::<BatchHeader>(), left: self.header.record_count, version: self.header.version }
    }
    /// The batch's bytes (`header.total_len` of them).
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
}

/// Iterator over the records of a [`Batch`] (already validated by [`decode`]).
#[derive(Clone, Debug)]
pub struct Records<'a> {
    bytes: &'a [u8],
    off: usize,
    left: u32,
    version: u16,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;
    fn next(&mut self) -> Option<Record<'a>> {
        if self.left == 0 {
            return None;
        }
        // Cannot fail: decode() ran the same parser over the same bytes.
        match parse_record(self.bytes, self.off, 0, self.version) {
            Ok((rec, len)) => {
                self.left -= 1;
                self.off += len;
                Some(rec)
            }
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

pub(super) fn parse_record(bytes: &[u8], off: usize, index: u32, version: u16) -> Result<(Record<'_>, usize), DecodeError> {
    let rh: RecordHeader = read(bytes, off).ok_or(DecodeError::RecordPastEnd { offset: off, index })?;
    let len = rh.len as usize;
    let bad_len = DecodeError::BadRecordLen { offset: off, kind: rh.kind, len: rh.len };
    if len < size_of::<RecordHeader>() || !len.is_multiple_of(8) {
        return Err(bad_len);
    }
    match off.checked_add(len) {
        Some(end) if end <= bytes.len() => {}
        _ => return Err(DecodeError::RecordPastEnd { offset: off, index }),
    }
    let kind = RecordKind::from_u16(rh.kind).ok_or(DecodeError::UnknownKind { offset: off, kind: rh.kind })?;
    let field = |field| DecodeError::BadField { offset: off, field };
    let fixed = |size: usize| if len == size { Ok(()) } else { Err(bad_len) };
    let rec = match kind {
        RecordKind::GpuOp => {
            let size = if version == 1 { GPU_OP_V1 } else { size_of::<GpuOp>() };
            fixed(size)?;
            let r: GpuOp = read_prefix(bytes, off, size).ok_or(bad_len)?;
            Source::from_u8(r.source).ok_or(field("source"))?;
            OpKind::from_u8(r.op).ok_or(field("op"))?;
            ClockDomain::from_u8(r.cpu_clock).ok_or(field("cpu_clock"))?;
            ClockDomain::from_u8(r.gpu_clock).ok_or(field("gpu_clock"))?;
            if r.flags & !OP_FLAGS_ALL != 0 || (version == 1 && r.flags & OP_HAS_THREAD_SEQ != 0) {
                return Err(field("flags"));
            }
            Record::GpuOp(r)
        }
        RecordKind::String => {
            if len < size_of::<StringHead>() {
                return Err(bad_len);
            }
            let h: StringHead = read(bytes, off).ok_or(bad_len)?;
            let slen = h.len as usize;
            if slen > STRING_MAX || align8(size_of::<StringHead>() + slen) != len {
                return Err(DecodeError::BadString { offset: off, len: h.len });
            }
            if h.kind != STR_KERNEL && h.kind != STR_API {
                return Err(field("string kind"));
            }
            if h.id == 0 {
                return Err(field("string id"));
            }
            let start = off + size_of::<StringHead>();
            Record::String(Str { id: h.id, kind: h.kind, flags: h.flags, bytes: &bytes[start..start + slen] })
        }
        RecordKind::ClockSync => {
            fixed(size_of::<ClockSync>())?;
            let r: ClockSync = read(bytes, off).ok_or(bad_len)?;
            ClockDomain::from_u8(r.gpu_clock).ok_or(field("gpu_clock"))?;
            Record::ClockSync(r)
        }
        RecordKind::Counters => {
            // The old, shorter record too: appended fields read as 0.
            if len != size_of::<Counters>() && len != COUNTERS_LEN_V1 && len != COUNTERS_LEN_V2 {
                return Err(bad_len);
            }
            Record::Counters(read_prefix(bytes, off, len).ok_or(bad_len)?)
        }
        RecordKind::Info => {
            let size = if version == 1 { INFO_V1 } else { size_of::<Info>() };
            fixed(size)?;
            let r: Info = read_prefix(bytes, off, size).ok_or(bad_len)?;
            Source::from_u8(r.source).ok_or(field("source"))?;
            Status::from_u8(r.status).ok_or(field("status"))?;
            if r.profiler_api > API_V0_1 {
                return Err(field("profiler_api"));
            }
            Record::Info(r)
        }
    };
    Ok((rec, len))
}

pub(super) fn check_header(bytes: &[u8]) -> Result<BatchHeader, DecodeError> {
    let h: BatchHeader = read(bytes, 0).ok_or(DecodeError::TooShort { have: bytes.len() })?;
    if h.magic != MAGIC {
        return Err(DecodeError::BadMagic(h.magic));
    }
    if !(VERSION_MIN..=VERSION).contains(&h.version) {
        return Err(DecodeError::BadVersion(h.version));
    }
    if h.header_len as usize != size_of::<BatchHeader>() {
        return Err(DecodeError::BadHeaderLen(h.header_len));
    }
    let total = h.total_len as usize;
    if total < size_of::<BatchHeader>() || total > bytes.len() || total > crate::AGENT_BATCH_MAX {
        return Err(DecodeError::BadTotalLen { total_len: h.total_len, have: bytes.len() });
    }
    Ok(h)
}

pub(super) fn validate(bytes: &[u8], h: BatchHeader) -> Result<Batch<'_>, DecodeError> {
    let mut off = size_of::<BatchHeader>();
    for i in 0..h.record_count {
        let (_, len) = parse_record(bytes, off, i, h.version)?;
        off += len;
    }
    if off != bytes.len() {
        return Err(DecodeError::TrailingBytes { offset: off });
    }
    Ok(Batch { header: h, bytes })
}

/// Validates one batch that is exactly `bytes` (what one `rtl_agent_publish` call carried).
pub fn decode(bytes: &[u8]) -> Result<Batch<'_>, DecodeError> {
    let h = check_header(bytes)?;
    if h.total_len as usize != bytes.len() {
        return Err(DecodeError::BadTotalLen { total_len: h.total_len, have: bytes.len() });
    }
    validate(bytes, h)
}

/// Validates the batch at the start of `bytes` (a stream of concatenated batches, e.g. a dump
/// file) and returns it with its length.
pub fn decode_prefix(bytes: &[u8]) -> Result<(Batch<'_>, usize), DecodeError> {
    let h = check_header(bytes)?;
    let total = h.total_len as usize;
    Ok((validate(&bytes[..total], h)?, total))
}
