//! The probe's copies of code objects (`EventKind::PythonCode`): what the collector tells the
//! probe to copy ([`describe`]), the record read back ([`decode`]) and turned into what naming
//! frames needs ([`info`]), checked against the interpreter's own type objects like a live
//! read. The bytes came from a traced process (another user's): every length is a claim,
//! checked against the record; texts are kept as data.

use rtl_common::python::{PyCodeHead, PyProc, PyStrRaw, PY_CODE_HEAD_MAX, PY_FILE_MAX, PY_LINETABLE_MAX, PY_NAME_MAX};

use super::memory::{chars, compact_kind, CodeInfo, Types};
use super::versions::CodeLayout;

/// A `PythonCode` record: its head, the copied bytes of the name, the file name and the line
/// table (each cut to what the head says was copied).
#[derive(Debug, Clone)]
pub struct CodeRecord {
    pub head: PyCodeHead,
    pub name: Vec<u8>,
    pub file: Vec<u8>,
    pub linetable: Vec<u8>,
}

/// The probe's description of a process, completed with what copying code objects needs
/// (`code_head_len` 0, no copies, when an offset lies past what the probe reads).
pub fn describe(mut p: PyProc, c: &CodeLayout) -> PyProc {
    let name = c.qualname.unwrap_or(c.name);
    let fields = [name, c.filename, c.linetable, c.firstlineno];
    let head = fields.iter().map(|&o| o + 8).max().unwrap_or(0).max(16);
    let fits = |o: u64| u32::try_from(o).ok().filter(|&o| o <= PY_CODE_HEAD_MAX - 8);
    match (fits(name), fits(c.filename), fits(c.linetable), fits(c.firstlineno), fits(c.ascii_size), fits(c.compact_size)) {
        (Some(n), Some(f), Some(l), Some(fl), Some(a), Some(u)) if head <= u64::from(PY_CODE_HEAD_MAX) => {
            p.code_name = n;
            p.code_file = f;
            p.code_linetable = l;
            p.code_firstlineno = fl;
            p.str_ascii_data = a;
            p.str_compact_data = u;
            p.code_head_len = head as u32;
        }
        _ => p.code_head_len = 0,
    }
    p
}

/// Reads a `PythonCode` record; None when it is shorter than its fixed part or its claims.
pub fn decode(b: &[u8]) -> Option<CodeRecord> {
    let n = std::mem::size_of::<PyCodeHead>();
    let fixed = n + PY_NAME_MAX + PY_FILE_MAX;
    if b.len() < fixed {
        return None;
    }
    // SAFETY: length checked; a plain #[repr(C)] integer aggregate, valid for any bytes.
    let head: PyCodeHead = unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) };
    let name = (head.name.copied as usize).min(PY_NAME_MAX);
    let file = (head.file.copied as usize).min(PY_FILE_MAX);
    let lt = head.linetable_copied as usize;
    if lt > PY_LINETABLE_MAX || b.len() < fixed + lt {
        return None;
    }
    Some(CodeRecord {
        head,
        name: b[n..n + name].to_vec(),
        file: b[n + PY_NAME_MAX..n + PY_NAME_MAX + file].to_vec(),
        linetable: b[fixed..fixed + lt].to_vec(),
    })
}

/// What the record says of the code object, when it is one (its type, its strings' types are
/// the interpreter's) and its texts were copied whole; None: name it from the live process.
pub fn info(r: &CodeRecord, layout: &CodeLayout, types: &Types) -> Option<CodeInfo> {
    let h = &r.head;
    if h.code_type != types.code || h.linetable_type != types.bytes {
        return None;
    }
    let complete = h.linetable_len == r.linetable.len() as u64;
    if !complete && (r.linetable.len() < PY_LINETABLE_MAX || h.linetable_len < r.linetable.len() as u64) {
        // A read that failed midway, or a length that is no length: not a cut copy.
        return None;
    }
    Some(CodeInfo {
        function: text(&h.name, &r.name, types)?,
        file: text(&h.file, &r.file, types)?,
        first_line: i64::from(h.first_line),
        linetable: r.linetable.clone(),
        first_instr: layout.code_adaptive.map_or(0, |o| h.code + o),
        linetable_complete: complete,
    })
}

/// A copied `str`: its text when it is a compact `str` copied whole.
fn text(s: &PyStrRaw, bytes: &[u8], types: &Types) -> Option<String> {
    if s.ob_type != types.unicode {
        return None;
    }
    let kind = compact_kind(s.state)?;
    let want = s.len.checked_mul(u64::from(kind))?;
    (want == bytes.len() as u64).then(|| chars(bytes, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Types {
        Types { code: 0x1000, unicode: 0x2000, bytes: 0x3000 }
    }

    fn layout() -> CodeLayout {
        super::super::versions::table((3, 11)).unwrap().code
    }

    /// A record as the probe writes it: fixed text fields, then the copied line table.
    fn record(name: &str, state: u32, lt: &[u8], lt_len: u64) -> Vec<u8> {
        let mut h = PyCodeHead { code: 0x7000, code_type: 0x1000, first_line: 40, ..Default::default() };
        h.hdr.kind = rtl_common::EventKind::PythonCode as u32;
        h.name = PyStrRaw { addr: 1, ob_type: 0x2000, len: name.len() as u64, state, copied: name.len().min(PY_NAME_MAX) as u32 };
        h.file = PyStrRaw { addr: 2, ob_type: 0x2000, len: 4, state, copied: 4 };
        (h.linetable, h.linetable_type, h.linetable_len, h.linetable_copied) = (3, 0x3000, lt_len, lt.len() as u32);
        // SAFETY: the bytes of a plain struct.
        let mut b = unsafe { std::slice::from_raw_parts((&h as *const PyCodeHead).cast::<u8>(), std::mem::size_of_val(&h)) }.to_vec();
        let mut nf = vec![0u8; PY_NAME_MAX];
        let n = name.len().min(PY_NAME_MAX);
        nf[..n].copy_from_slice(&name.as_bytes()[..n]);
        b.extend(nf);
        let mut ff = vec![0u8; PY_FILE_MAX];
        ff[..4].copy_from_slice(b"a.py");
        b.extend(ff);
        b.extend_from_slice(lt);
        b
    }

    const ASCII: u32 = (1 << 2) | (1 << 5) | (1 << 6);

    #[test]
    fn a_whole_copy_names_the_code_object() {
        let r = decode(&record("Model.forward", ASCII, &[0x80, 0x81], 2)).unwrap();
        let i = info(&r, &layout(), &types()).unwrap();
        assert_eq!((i.function.as_str(), i.file.as_str(), i.first_line), ("Model.forward", "a.py", 40));
        assert!(i.linetable_complete);
        assert_eq!(i.first_instr, 0x7000 + layout().code_adaptive.unwrap());
    }

    #[test]
    fn a_cut_line_table_is_marked_and_cut_texts_are_refused() {
        let lt = vec![0x80u8; PY_LINETABLE_MAX];
        let r = decode(&record("f", ASCII, &lt, 5000)).unwrap();
        assert!(!info(&r, &layout(), &types()).unwrap().linetable_complete);
        // A short copy that claims more was not cut by the probe's limit: a failed read.
        let r = decode(&record("f", ASCII, &[0x80; 10], 5000)).unwrap();
        assert!(info(&r, &layout(), &types()).is_none());
        let long = "x".repeat(PY_NAME_MAX + 1);
        let r = decode(&record(&long, ASCII, &[], 0)).unwrap();
        assert!(info(&r, &layout(), &types()).is_none(), "a name longer than the copy");
    }

    #[test]
    fn wrong_types_and_false_claims_are_refused() {
        let b = record("f", ASCII, &[0x80], 1);
        let mut t = types();
        t.code = 0x1001;
        assert!(info(&decode(&b).unwrap(), &layout(), &t).is_none(), "not a code object");
        assert!(decode(&b[..b.len() - 1]).is_none(), "shorter than its line table claims");
        assert!(decode(&b[..100]).is_none());
        let r = decode(&record("f", 1 << 2, &[0x80], 1)).unwrap();
        assert!(info(&r, &layout(), &types()).is_none(), "not compact");
    }

    #[test]
    fn texts_are_data() {
        let r = decode(&record("a\u{1b}[2Jb", ASCII, &[], 0)).unwrap();
        assert_eq!(info(&r, &layout(), &types()).unwrap().function, "a\u{1b}[2Jb", "kept as it is; escaped where shown");
    }

    #[test]
    fn offsets_past_the_probe_head_turn_copies_off() {
        let mut c = layout();
        let p = describe(PyProc::default(), &c);
        assert_eq!(p.code_head_len, 144);
        assert_eq!((p.code_name, p.code_file, p.code_linetable, p.code_firstlineno), (128, 112, 136, 72));
        c.linetable = 4000;
        assert_eq!(describe(PyProc::default(), &c).code_head_len, 0);
    }
}
