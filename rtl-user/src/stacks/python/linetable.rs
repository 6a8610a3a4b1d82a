//! Code-unit offset -> source line, from a code object's `co_linetable` (read from a traced
//! process: any bytes at all; parsing is bounded by the table and never panics).

/// Line of the instruction at `byte_offset` in the 3.11+ location table (CPython's
/// `Objects/locations.md`): entries of a head byte `1cccclll` (code `c`, `l + 1` code units)
/// and payload bytes below 0x80. Codes 0-9: same line; 10-12: line + (code - 10); 13: a signed
/// varint line delta; 14: the same, then end line and columns; 15: no location.
pub fn line_311(table: &[u8], first_line: i64, byte_offset: u64) -> Option<i64> {
    let target = byte_offset / 2;
    let (mut i, mut unit, mut line) = (0usize, 0u64, first_line);
    while i < table.len() {
        let head = table[i];
        if head & 0x80 == 0 {
            return None;
        }
        let code = (head >> 3) & 0xf;
        let len = u64::from(head & 7) + 1;
        i += 1;
        let here = match code {
            15 => None,
            13 | 14 => {
                line = line.saturating_add(signed_varint(table, &mut i)?);
                Some(line)
            }
            10..=12 => {
                line += i64::from(code) - 10;
                Some(line)
            }
            _ => Some(line),
        };
        if (unit..unit + len).contains(&target) {
            return here;
        }
        unit += len;
        // Skip the rest of the payload: up to the next head byte.
        while i < table.len() && table[i] & 0x80 == 0 {
            i += 1;
        }
    }
    None
}

fn varint(t: &[u8], i: &mut usize) -> Option<u64> {
    let mut val = 0u64;
    let mut shift = 0;
    loop {
        let b = *t.get(*i)?;
        *i += 1;
        if shift > 56 {
            return None;
        }
        val |= u64::from(b & 63) << shift;
        shift += 6;
        if b & 64 == 0 {
            return Some(val);
        }
    }
}

fn signed_varint(t: &[u8], i: &mut usize) -> Option<i64> {
    let u = varint(t, i)?;
    let m = (u >> 1) as i64;
    Some(if u & 1 != 0 { -m } else { m })
}

/// Line of the instruction at `byte_offset` in a 3.10 line table: (bytecode bytes advanced,
/// signed line delta) pairs; a delta of -128 means the range has no line.
pub fn line_310(table: &[u8], first_line: i64, byte_offset: u64) -> Option<i64> {
    let (mut start, mut line) = (0u64, first_line);
    for pair in table.chunks_exact(2) {
        let end = start + u64::from(pair[0]);
        let delta = pair[1] as i8;
        let here = if delta == -128 {
            None
        } else {
            line = line.saturating_add(i64::from(delta));
            Some(line)
        };
        if (start..end).contains(&byte_offset) {
            return here;
        }
        start = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn location_table_forms() {
        // 2 units on the first line (short form, 1 payload byte), 1 unit one line down
        // (one-line form, 2 payload bytes), 3 units 5 lines down (no-column form, svarint 10),
        // 1 unit with no location, 2 units 2 lines up (long form: svarint 5, then 3 varints).
        let t = [0x80 | 1, 0x05, 0x80 | (11 << 3), 1, 2, 0x80 | (13 << 3) | 2, 10, 0x80 | (15 << 3), 0x80 | (14 << 3) | 1, 5, 0, 1, 2];
        let at = |u: u64| line_311(&t, 100, u * 2);
        assert_eq!(
            (at(0), at(1), at(2), at(3), at(5), at(6), at(7), at(8), at(9)),
            (Some(100), Some(100), Some(101), Some(106), Some(106), None, Some(104), Some(104), None)
        );
    }

    #[test]
    fn multi_byte_varints_and_garbage() {
        // Line delta +100: zigzag 200 = 0b11_001000 -> chunks 8 (continued), 3.
        let t = [0x80 | (13 << 3), 0x40 | 8, 3];
        assert_eq!(line_311(&t, 1, 0), Some(101));
        assert_eq!(line_311(&[0x7f, 0x80], 1, 0), None, "no head byte first");
        assert_eq!(line_311(&[0x80 | (13 << 3), 0x7f], 1, 0), None, "varint cut short");
        assert_eq!(line_311(&[0x80 | (13 << 3); 4096], 1, 50_000), None);
    }

    #[test]
    fn line_table_310() {
        // 6 bytes on line 10 (+0 from 10), 4 bytes without a line, 8 bytes on 13.
        let t = [6u8, 0, 4, 0x80, 8, 3];
        assert_eq!([0, 5, 6, 9, 10, 17, 18].map(|b| line_310(&t, 10, b)), [Some(10), Some(10), None, None, Some(13), Some(13), None]);
    }
}
