//! Kernel names (part of the HSA source, [`crate::hsa`]): `hsa_executable_freeze` is wrapped,
//! each kernel symbol's name is interned and its kernel object mapped to the name id and to the
//! op the kernel stands for (a lock-free table the completion thread reads per dispatch).

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering::*};

use rtl_common::agent::{self as wire, OpKind};

use super::ffi::*;
use crate::publish::{self, counters, record_error};

const KSLOTS: usize = 1 << 13;
static KOBJ: [AtomicU64; KSLOTS] = [const { AtomicU64::new(0) }; KSLOTS];
static KNAME: [AtomicU32; KSLOTS] = [const { AtomicU32::new(0) }; KSLOTS];
/// What a kernel does, by its name: an `OpKind` (Copy / Memset for the HIP runtime's blit
/// kernels, Dispatch for the rest).
static KKIND: [AtomicU8; KSLOTS] = [const { AtomicU8::new(0) }; KSLOTS];

/// The kind of op a kernel named `name` stands for: CLR runs copies between device buffers,
/// and every fill, as its own blit kernels (`__amd_rocclr_copyBuffer`, `..._copyBufferRect`,
/// `..._fillBufferAligned`, ...): the runtime's name says which copy a dispatch serves.
pub(crate) fn kernel_kind(name: &[u8]) -> OpKind {
    if name.starts_with(b"__amd_rocclr_copy") {
        OpKind::Copy
    } else if name.starts_with(b"__amd_rocclr_fill") {
        OpKind::Memset
    } else {
        OpKind::Dispatch
    }
}

pub(super) fn kname_insert(kobj: u64, id: u32, kind: OpKind) {
    for p in 0..64 {
        let i = (kobj as usize >> 6).wrapping_add(p) % KSLOTS;
        match KOBJ[i].compare_exchange(0, kobj, AcqRel, Acquire) {
            Ok(_) => {}
            Err(k) if k == kobj => {}
            Err(_) => continue,
        }
        KKIND[i].store(kind as u8, Release);
        KNAME[i].store(id, Release);
        return;
    }
    counters().strings_dropped.fetch_add(1, Relaxed);
}

/// (name id, `OpKind` as u8) of a kernel object; (0, Dispatch) when unknown.
pub(super) fn kname_lookup(kobj: u64) -> (u32, u8) {
    for p in 0..64 {
        let i = (kobj as usize >> 6).wrapping_add(p) % KSLOTS;
        match KOBJ[i].load(Acquire) {
            0 => break,
            k if k == kobj => return (KNAME[i].load(Acquire), KKIND[i].load(Acquire)),
            _ => {}
        }
    }
    (0, OpKind::Dispatch as u8)
}

unsafe extern "C" fn on_symbol(_exec: u64, sym: u64, _data: *mut c_void) -> i32 {
    // SAFETY: hsa_executable_iterate_symbols' callback: `sym` is a symbol of the executable
    // being frozen; each symbol_get_info gets an out pointer of its attribute's type (u32, u64, and
    // `len + 1` bytes for the name).
    unsafe {
        let _ = std::panic::catch_unwind(|| {
            let Some(f) = FNS.get() else { return };
            let mut kind: u32 = 0;
            if (f.symbol_get_info)(sym, SYMBOL_INFO_TYPE, &mut kind as *mut u32 as *mut c_void) != HSA_STATUS_SUCCESS
                || kind != SYMBOL_KIND_KERNEL
            {
                return;
            }
            let mut kobj: u64 = 0;
            let mut len: u32 = 0;
            if (f.symbol_get_info)(sym, SYMBOL_INFO_KERNEL_OBJECT, &mut kobj as *mut u64 as *mut c_void) != HSA_STATUS_SUCCESS
                || (f.symbol_get_info)(sym, SYMBOL_INFO_NAME_LENGTH, &mut len as *mut u32 as *mut c_void) != HSA_STATUS_SUCCESS
                || kobj == 0
                || len == 0
                || len > 1 << 16
            {
                return;
            }
            let mut name = vec![0u8; len as usize + 1];
            if (f.symbol_get_info)(sym, SYMBOL_INFO_NAME, name.as_mut_ptr() as *mut c_void) != HSA_STATUS_SUCCESS {
                return;
            }
            name.truncate(len as usize);
            while name.last() == Some(&0) {
                name.pop();
            }
            if name.ends_with(b".kd") {
                name.truncate(name.len() - 3);
            }
            let id = publish::buffers().strings.intern(wire::STR_KERNEL, &name);
            kname_insert(kobj, id, kernel_kind(&name));
        });
        HSA_STATUS_SUCCESS
    }
}

pub(super) unsafe extern "C" fn freeze_wrapper(exec: u64, options: *const c_char) -> i32 {
    // SAFETY: the runtime's own hsa_executable_freeze with the application's arguments, then
    // its symbol iteration over that executable with our callback.
    unsafe {
        let Some(f) = FNS.get() else { return 1 };
        let rc = (f.freeze)(exec, options);
        if rc == HSA_STATUS_SUCCESS {
            let _ = std::panic::catch_unwind(|| {
                let r = (f.iterate_symbols)(exec, on_symbol, std::ptr::null_mut());
                if r != HSA_STATUS_SUCCESS && r != HSA_STATUS_INFO_BREAK {
                    record_error(r);
                }
            });
        }
        rc
    }
}
