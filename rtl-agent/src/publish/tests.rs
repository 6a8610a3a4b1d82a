use rtl_common::agent as wire;

use super::*;
use std::sync::Arc;

fn op(i: u64) -> GpuOp {
    GpuOp { record_index: i, op_count: 1, ..Default::default() }
}

#[test]
fn queue_bounded_fifo() {
    let q = Queue::new(8);
    for i in 0..8 {
        assert!(q.push(&op(i)));
    }
    assert!(!q.push(&op(99)), "full: refuse, never block");
    for i in 0..8 {
        assert_eq!(q.pop().unwrap().record_index, i);
    }
    assert!(q.pop().is_none());
    q.push(&op(1));
    q.reset();
    assert!(q.pop().is_none());
    assert_eq!(q.len(), 0);
}

#[test]
fn queue_mpmc_no_loss_no_dup() {
    let q = Arc::new(Queue::new(1024));
    let producers: Vec<_> = (0..4u64)
        .map(|t| {
            let q = q.clone();
            std::thread::spawn(move || {
                for i in 0..50_000u64 {
                    while !q.push(&op(t << 32 | i)) {
                        std::thread::yield_now();
                    }
                }
            })
        })
        .collect();
    let mut seen = [0u64; 4];
    let mut n = 0;
    while n < 200_000 {
        if let Some(o) = q.pop() {
            let t = (o.record_index >> 32) as usize;
            assert_eq!(o.record_index & 0xffff_ffff, seen[t], "per-producer order");
            seen[t] += 1;
            n += 1;
        }
    }
    for p in producers {
        p.join().unwrap();
    }
    assert!(q.pop().is_none());
}

#[test]
fn intern_cache_checks_bytes_not_just_address() {
    let s = Strings::new(64, 4096);
    let mut buf = *b"kernel_one\0";
    let p = buf.as_ptr() as *const libc::c_char;
    let a = unsafe { s.intern_c(wire::STR_KERNEL, p) };
    assert_eq!(unsafe { s.intern_c(wire::STR_KERNEL, p) }, a, "cached");
    // Same address, new contents (a name freed and the memory reused).
    buf[7..10].copy_from_slice(b"two");
    let b = unsafe { s.intern_c(wire::STR_KERNEL, buf.as_ptr() as *const libc::c_char) };
    assert_ne!(a, b);
    assert_eq!(s.get(b).unwrap().2, b"kernel_two");
    // A longer string at the same address sharing the prefix.
    let mut long = *b"kernel_two_more\0";
    let _ = &mut long;
    let c = unsafe { s.intern_c(wire::STR_API, buf.as_ptr() as *const libc::c_char) };
    assert_ne!(c, b, "kind is part of the key");
}

#[test]
fn strings_intern_once() {
    let s = Strings::new(16, 64);
    let a = s.intern(wire::STR_KERNEL, b"kernelA");
    let b = s.intern(wire::STR_KERNEL, b"kernelB");
    assert_ne!(a, 0);
    assert_ne!(a, b);
    assert_eq!(s.intern(wire::STR_KERNEL, b"kernelA"), a);
    assert_ne!(s.intern(wire::STR_API, b"kernelA"), a, "kind is part of the key");
    assert_eq!(s.get(a).unwrap().2, b"kernelA");
    // Arena exhaustion: 0, not a wrong string.
    assert_eq!(s.intern(wire::STR_KERNEL, &[b'x'; 100]), 0);
    assert!(!s.is_sent(a));
    s.mark_sent(a);
    assert!(s.is_sent(a));
    s.reset_sent();
    assert!(!s.is_sent(a));
    // Long strings are cut and flagged.
    let s = Strings::new(16, 8192);
    let id = s.intern(wire::STR_KERNEL, &[b'y'; 3000]);
    let (_, fl, bytes) = s.get(id).unwrap();
    assert_eq!(bytes.len(), wire::STRING_MAX);
    assert_eq!(fl, wire::STR_TRUNCATED);
}
