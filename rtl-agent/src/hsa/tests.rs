use rtl_common::agent::OpKind;

use super::kernels::{kernel_kind, kname_insert, kname_lookup};
use super::*;

#[test]
fn pool_free_list() {
    let p = Pool::new();
    let mut got = vec![];
    while let Some(i) = p.pop() {
        got.push(i);
    }
    assert_eq!(got.len(), POOL);
    got.sort();
    got.dedup();
    assert_eq!(got.len(), POOL, "each slot once");
    for i in got {
        p.push(i);
    }
    let p = std::sync::Arc::new(p);
    let ts: Vec<_> = (0..4)
        .map(|_| {
            let p = p.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    if let Some(i) = p.pop() {
                        assert_eq!(p.slots[i].state.swap(1, AcqRel), 0, "slot handed out twice");
                        p.slots[i].state.store(0, Release);
                        p.push(i);
                    }
                }
            })
        })
        .collect();
    for t in ts {
        t.join().unwrap();
    }
    let mut n = 0;
    while p.pop().is_some() {
        n += 1;
    }
    assert_eq!(n, POOL, "none lost");
}

#[test]
fn kernel_name_table() {
    kname_insert(0x1000, 7, OpKind::Dispatch);
    kname_insert(0x2000, 8, kernel_kind(b"__amd_rocclr_copyBuffer"));
    kname_insert(0x3040, 9, kernel_kind(b"__amd_rocclr_fillBufferAligned"));
    assert_eq!(kname_lookup(0x1000), (7, OpKind::Dispatch as u8));
    assert_eq!(kname_lookup(0x2000), (8, OpKind::Copy as u8));
    assert_eq!(kname_lookup(0x3040), (9, OpKind::Memset as u8));
    assert_eq!(kname_lookup(0x3000), (0, OpKind::Dispatch as u8));
    assert_eq!(kernel_kind(b"__amd_rocclr_copyBufferRect"), OpKind::Copy);
    assert_eq!(kernel_kind(b"__amd_rocclr_scheduler"), OpKind::Dispatch);
    assert_eq!(kernel_kind(b"_Z4copyPfS_"), OpKind::Dispatch);
}
