//! Reading a traced process's memory (`process_vm_readv`): every size bounded by the caller,
//! every object's type checked against the interpreter's own type objects before its layout is
//! trusted, nothing kept but what was asked for.

use super::versions::CodeLayout;

/// Longest name or file name read (characters).
pub const MAX_TEXT: u64 = 4096;
/// Largest line table read.
pub const MAX_LINETABLE: u64 = 256 << 10;

/// Reads `buf.len()` bytes at `addr` of process `pid`; false unless all were read.
pub fn read(pid: u32, addr: u64, buf: &mut [u8]) -> bool {
    if buf.is_empty() {
        return true;
    }
    let local = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    let remote = libc::iovec { iov_base: addr as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: one local buffer of its own length; the remote side is only read by the kernel.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    n == buf.len() as isize
}

fn word(b: &[u8], at: u64) -> Option<u64> {
    let at = usize::try_from(at).ok()?;
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// The absolute addresses of the interpreter's type objects in one process.
#[derive(Debug, Clone, Copy)]
pub struct Types {
    pub code: u64,
    pub unicode: u64,
    pub bytes: u64,
}

/// A `str` object's text (compact strings only: every code object's names are), None when it
/// is not a `str`, too long, or unreadable.
pub fn text(pid: u32, addr: u64, layout: &CodeLayout, types: &Types) -> Option<String> {
    let mut head = [0u8; 80];
    let n = (layout.compact_size as usize).min(head.len());
    if !read(pid, addr, &mut head[..n]) || word(&head, 8)? != types.unicode {
        return None;
    }
    let len = word(&head, 16)?;
    let state = u32::from_le_bytes(head.get(32..36)?.try_into().ok()?);
    let kind = compact_kind(state)?;
    if len > MAX_TEXT {
        return None;
    }
    let data = if (state >> 6) & 1 == 1 { layout.ascii_size } else { layout.compact_size };
    let mut b = vec![0u8; (len * u64::from(kind)) as usize];
    if !read(pid, addr + data, &mut b) {
        return None;
    }
    Some(chars(&b, kind))
}

/// The character width (1, 2 or 4 bytes) of a `str` whose `state` word says it is compact;
/// None for any other `str` (legacy, or a width no `str` has).
pub fn compact_kind(state: u32) -> Option<u32> {
    let (kind, compact) = ((state >> 2) & 7, (state >> 5) & 1);
    (compact == 1 && matches!(kind, 1 | 2 | 4)).then_some(kind)
}

/// A compact `str`'s character data of `kind` (1: Latin-1, 2: UCS-2, 4: UCS-4) as text; a
/// value that is no character is U+FFFD.
pub fn chars(b: &[u8], kind: u32) -> String {
    match kind {
        1 => b.iter().map(|&c| c as char).collect(),
        2 => b.chunks_exact(2).map(|c| char::from_u32(u32::from(u16::from_le_bytes([c[0], c[1]]))).unwrap_or('\u{fffd}')).collect(),
        _ => b.chunks_exact(4).map(|c| char::from_u32(u32::from_le_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('\u{fffd}')).collect(),
    }
}

/// A `bytes` object's contents (at most [`MAX_LINETABLE`]).
pub fn bytes(pid: u32, addr: u64, types: &Types) -> Option<Vec<u8>> {
    let mut head = [0u8; 32];
    if !read(pid, addr, &mut head) || word(&head, 8)? != types.bytes {
        return None;
    }
    let len = word(&head, 16)?;
    if len > MAX_LINETABLE {
        return None;
    }
    let mut b = vec![0u8; len as usize];
    read(pid, addr + 32, &mut b).then_some(b)
}

/// What naming a code object's frames needs.
#[derive(Debug)]
pub struct CodeInfo {
    pub function: String,
    pub file: String,
    pub first_line: i64,
    pub linetable: Vec<u8>,
    /// Absolute address of the first instruction (3.11+); 0 for 3.10 (its frames give an index).
    pub first_instr: u64,
    /// The whole line table (false: the probe's copy was cut: a line past it is unknown).
    pub linetable_complete: bool,
}

/// Reads code object `addr`: None when it is not a code object or a part is unreadable.
pub fn code(pid: u32, addr: u64, layout: &CodeLayout, types: &Types) -> Option<CodeInfo> {
    let mut head = [0u8; 256];
    if !read(pid, addr, &mut head) || word(&head, 8)? != types.code {
        return None;
    }
    let name = layout.qualname.unwrap_or(layout.name);
    let first_line = i64::from(u32::from_le_bytes(head.get(layout.firstlineno as usize..)?.get(..4)?.try_into().ok()?) as i32);
    Some(CodeInfo {
        function: text(pid, word(&head, name)?, layout, types)?,
        file: text(pid, word(&head, layout.filename)?, layout, types)?,
        first_line,
        linetable: bytes(pid, word(&head, layout.linetable)?, types)?,
        first_instr: layout.code_adaptive.map_or(0, |o| addr + o),
        linetable_complete: true,
    })
}
