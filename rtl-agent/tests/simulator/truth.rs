//! A minimal JSON reader for the simulator's flat one-object-per-line truth (ROCM_SIM_TRUTH).

use std::collections::HashMap;

pub(super) type Obj = HashMap<String, String>;

pub(super) fn parse_line(line: &str) -> Obj {
    let b = line.trim().as_bytes();
    let mut m = Obj::new();
    let mut i = 1;
    let string = |i: &mut usize| -> String {
        let mut s = Vec::new();
        *i += 1;
        while b[*i] != b'"' {
            if b[*i] == b'\\' {
                *i += 1;
                s.push(match b[*i] {
                    b'n' => b'\n',
                    b't' => b'\t',
                    c => c,
                });
            } else {
                s.push(b[*i]);
            }
            *i += 1;
        }
        *i += 1;
        String::from_utf8_lossy(&s).into_owned()
    };
    while i < b.len() && b[i] != b'}' {
        if b[i] == b',' || b[i] == b' ' {
            i += 1;
            continue;
        }
        let k = string(&mut i);
        i += 1; // ':'
        let v = if b[i] == b'"' {
            string(&mut i)
        } else {
            let start = i;
            let mut depth = 0;
            while i < b.len() && !(depth == 0 && (b[i] == b',' || b[i] == b'}')) {
                if b[i] == b'[' {
                    depth += 1;
                }
                if b[i] == b']' {
                    depth -= 1;
                }
                i += 1;
            }
            String::from_utf8_lossy(&b[start..i]).into_owned()
        };
        m.insert(k, v);
    }
    m
}

pub(super) fn u(o: &Obj, k: &str) -> u64 {
    o.get(k).and_then(|v| v.parse::<i64>().ok().map(|x| x as u64).or_else(|| v.parse().ok())).unwrap_or_else(|| panic!("{k} in {o:?}"))
}
pub(super) fn arr3(o: &Obj, k: &str) -> [u32; 3] {
    let v: Vec<u32> = o[k].trim_matches(|c| c == '[' || c == ']').split(',').map(|x| x.trim().parse().unwrap()).collect();
    [v[0], v[1], v[2]]
}
