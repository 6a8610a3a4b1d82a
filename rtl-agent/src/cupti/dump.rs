//! The raw dump (RTL_AGENT_CUPTI_DUMP): frames `[u32 tag][u32 len][payload][0-pad to 8]`,
//! read back and replayed through the decoder and the correlator.

use super::*;

pub const FRAME_RECORD: u32 = 1;
pub const FRAME_API_NAME: u32 = 2;
pub const FRAME_BUFFER_END: u32 = 3;

/// One frame of a raw dump.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DumpFrame {
    /// A record's bytes as delivered, and the kernel name it pointed to (empty if none).
    Record { rec: Vec<u8>, name: Vec<u8> },
    /// `cuptiGetCallbackName(domain, cbid)`, written before the first record that uses it.
    ApiName { domain: u32, cbid: u32, name: Vec<u8> },
    /// The end of one completed buffer.
    BufferEnd,
}

fn frame(out: &mut Vec<u8>, tag: u32, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    for p in parts {
        out.extend_from_slice(p);
    }
    out.resize(out.len() + ((8 - len % 8) % 8), 0);
}

pub fn encode_frame(out: &mut Vec<u8>, f: &DumpFrame) {
    match f {
        DumpFrame::Record { rec, name } => {
            frame(out, FRAME_RECORD, &[&(rec.len() as u32).to_le_bytes(), &(name.len() as u32).to_le_bytes(), rec, name])
        }
        DumpFrame::ApiName { domain, cbid, name } => frame(out, FRAME_API_NAME, &[&domain.to_le_bytes(), &cbid.to_le_bytes(), name]),
        DumpFrame::BufferEnd => frame(out, FRAME_BUFFER_END, &[]),
    }
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

/// Splits a raw dump into frames; an error names the byte offset of the bad frame.
pub fn read_dump(b: &[u8]) -> Result<Vec<DumpFrame>, String> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < b.len() {
        let bad = |why: &str| format!("CUPTI dump: bad frame at byte {off}: {why}");
        let (tag, len) =
            (u32_at(b, off).ok_or_else(|| bad("truncated header"))?, u32_at(b, off + 4).ok_or_else(|| bad("truncated header"))?);
        let p = b.get(off + 8..off + 8 + len as usize).ok_or_else(|| bad("payload past the end"))?;
        if off + 8 + len as usize + (8 - len as usize % 8) % 8 > b.len() {
            return Err(bad("padding past the end"));
        }
        out.push(match tag {
            FRAME_RECORD => {
                let (rl, nl) = (
                    u32_at(p, 0).ok_or_else(|| bad("short record frame"))? as usize,
                    u32_at(p, 4).ok_or_else(|| bad("short record frame"))? as usize,
                );
                if 8 + rl + nl != p.len() {
                    return Err(bad("record/name lengths disagree with the frame"));
                }
                DumpFrame::Record { rec: p[8..8 + rl].to_vec(), name: p[8 + rl..].to_vec() }
            }
            FRAME_API_NAME => DumpFrame::ApiName {
                domain: u32_at(p, 0).ok_or_else(|| bad("short name frame"))?,
                cbid: u32_at(p, 4).ok_or_else(|| bad("short name frame"))?,
                name: p.get(8..).unwrap_or_default().to_vec(),
            },
            FRAME_BUFFER_END => DumpFrame::BufferEnd,
            t => return Err(bad(&format!("unknown tag {t}"))),
        });
        off += 8 + len as usize + (8 - len as usize % 8) % 8;
    }
    Ok(out)
}

/// Runs a raw dump through the same decoding and correlation as the live source; returns the
/// ops in emission order, the correlator's counts and the API names by id.
pub fn replay(frames: &[DumpFrame], strings: &crate::publish::Strings) -> (Vec<GpuOp>, CorrStats) {
    let mut names: HashMap<(u32, u32), u32> = HashMap::new();
    let mut c = Correlator::default();
    let mut ops = Vec::new();
    for f in frames {
        match f {
            DumpFrame::ApiName { domain, cbid, name } => {
                names.insert((*domain, *cbid), strings.intern(wire::STR_API, name));
            }
            DumpFrame::Record { rec, name } => {
                let a = parse(rec);
                c.on_record(
                    &a,
                    Some(name),
                    &mut |k, b| strings.intern(k, b),
                    &mut |d, cb| names.get(&(d, cb)).copied().unwrap_or(0),
                    &mut |o| ops.push(*o),
                );
            }
            DumpFrame::BufferEnd => c.retry(&mut |o| ops.push(*o)),
        }
    }
    c.finish(&mut |o| ops.push(*o));
    (ops, c.stats)
}
