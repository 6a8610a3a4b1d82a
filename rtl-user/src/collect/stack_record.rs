//! An `EventKind::UserStack` record: a [`UserStackHead`] and the bytes it says follow, checked
//! against the record (the probe wrote it, but its length is still only a claim); and an
//! `EventKind::PythonStack` record, its Python frames, checked the same way.

use rtl_common::python::{PyFrameRaw, PyStackHead, PY_FRAMES_MAX};
use rtl_common::{UserStackHead, STACK_COPY_MAX};

/// The head and its data; None when the record is shorter than its head or its claimed length.
pub fn decode(b: &[u8]) -> Option<(UserStackHead, Vec<u8>)> {
    let n = std::mem::size_of::<UserStackHead>();
    if b.len() < n {
        return None;
    }
    // SAFETY: length checked; a plain #[repr(C)] integer aggregate, valid for any bytes.
    let head: UserStackHead = unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) };
    let len = head.len as usize;
    if len > STACK_COPY_MAX || b.len() < n + len {
        return None;
    }
    Some((head, b[n..n + len].to_vec()))
}

/// An `EventKind::PythonStack` record: its head and frames; None when shorter than it claims.
pub fn decode_python(b: &[u8]) -> Option<(PyStackHead, Vec<PyFrameRaw>)> {
    let n = std::mem::size_of::<PyStackHead>();
    if b.len() < n {
        return None;
    }
    // SAFETY: length checked; a plain #[repr(C)] integer aggregate, valid for any bytes.
    let head: PyStackHead = unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) };
    let count = head.count as usize;
    let size = std::mem::size_of::<PyFrameRaw>();
    if count > PY_FRAMES_MAX || b.len() < n + count * size {
        return None;
    }
    let frames = b[n..n + count * size]
        .chunks_exact(size)
        // SAFETY: each chunk is one frame's size; plain integers, valid for any bytes.
        .map(|c| unsafe { std::ptr::read_unaligned(c.as_ptr().cast::<PyFrameRaw>()) })
        .collect();
    Some((head, frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_longer_than_the_record_are_refused() {
        let mut h = UserStackHead { len: 16, ..Default::default() };
        h.hdr.kind = rtl_common::EventKind::UserStack as u32;
        // SAFETY: the bytes of a plain struct.
        let mut b = unsafe { std::slice::from_raw_parts((&h as *const UserStackHead).cast::<u8>(), std::mem::size_of_val(&h)) }.to_vec();
        assert!(decode(&b).is_none());
        b.extend_from_slice(&[7u8; 16]);
        assert_eq!(decode(&b).unwrap().1, vec![7u8; 16]);
        h.len = u32::MAX;
        // SAFETY: as above.
        let b = unsafe { std::slice::from_raw_parts((&h as *const UserStackHead).cast::<u8>(), std::mem::size_of_val(&h)) }.to_vec();
        assert!(decode(&b).is_none());
    }
}
