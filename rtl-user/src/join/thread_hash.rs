//! The HIP profiler's thread id: `std::hash<std::thread::id>` under libstdc++, which is
//! `std::_Hash_bytes(&pthread_self(), 8, 0xc70f6907)`; `pthread_self()` is the thread's fs base,
//! which the entry probe reads from `task_struct`. A 64-bit value: never truncated.

const SEED: u64 = 0xc70f6907;
const MUL: u64 = (0xc6a4a793u64 << 32) + 0x5bd1e995;

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

/// libstdc++'s `_Hash_bytes` (64-bit size_t variant) over `bytes`.
pub fn hash_bytes(bytes: &[u8], seed: u64) -> u64 {
    let len = bytes.len();
    let mut hash = seed ^ (len as u64).wrapping_mul(MUL);
    let aligned = len & !7;
    for chunk in bytes[..aligned].chunks_exact(8) {
        let data = shift_mix(u64::from_le_bytes(chunk.try_into().unwrap()).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    if len & 7 != 0 {
        let mut tail = 0u64;
        for (i, &b) in bytes[aligned..].iter().enumerate() {
            tail |= (b as u64) << (8 * i);
        }
        hash ^= tail;
        hash = hash.wrapping_mul(MUL);
    }
    hash = shift_mix(hash).wrapping_mul(MUL);
    shift_mix(hash)
}

/// The profiler's thread id of the thread whose fs base (pthread_self) is `fsbase`.
pub fn profiler_thread_id(fsbase: u64) -> u64 {
    hash_bytes(&fsbase.to_le_bytes(), SEED)
}

#[cfg(test)]
mod tests {
    use super::*;

    type HashBytes = unsafe extern "C" fn(*const u8, usize, usize) -> usize;

    /// Checks against libstdc++'s own `std::_Hash_bytes`, loaded at run time.
    #[test]
    fn equals_libstdcxx() {
        // SAFETY: dlopen/dlsym of a system library; the symbol has the declared C++ signature.
        unsafe {
            let h = libc::dlopen(c"libstdc++.so.6".as_ptr(), libc::RTLD_NOW);
            assert!(!h.is_null(), "libstdc++.so.6 is needed to check the hash");
            let f = libc::dlsym(h, c"_ZSt11_Hash_bytesPKvmm".as_ptr());
            assert!(!f.is_null());
            let f: HashBytes = std::mem::transmute(f);
            for v in [0u64, 1, 0x7f12_3456_7000, 0x7ffff7d8a740, u64::MAX] {
                let b = v.to_le_bytes();
                assert_eq!(profiler_thread_id(v), f(b.as_ptr(), 8, SEED as usize) as u64, "fsbase {v:#x}");
            }
            for len in 0..20usize {
                let data: Vec<u8> = (0..len as u8).map(|i| i.wrapping_mul(37)).collect();
                assert_eq!(hash_bytes(&data, 42), f(data.as_ptr(), len, 42) as u64, "len {len}");
            }
        }
    }
}
