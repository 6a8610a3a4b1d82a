//! One traced process's address space, and unwinding the stacks the probe recorded in it.
//!
//! Two kinds of record (`rtl_common::UserStackHead::mode`):
//! * copy: the top bytes of the user stack as they were at the API's entry, unwound here with
//!   `framehop` from the mapped files' `.eh_frame` (works for code built without frame
//!   pointers, as distributions build it);
//! * frame pointers: the addresses the kernel found by walking `rbp` (right only where every
//!   caller keeps frame pointers).
//!
//! At a probe the thread is at the first instruction of the API (in the runtime library): the
//! caller's return address is at `sp`, its frame starts at `sp + 8`, and `rbp` is still the
//! caller's. Unwinding starts from that return address, so the runtime library's own unwind
//! tables are never needed.

use std::ops::Deref;
use std::sync::Arc;

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Unwinder};

use super::modules::{Mapping, Module};

/// Most frames kept per stack (the innermost ones).
pub const MAX_FRAMES: usize = 128;

/// Section bytes shared between the module cache and the unwinders of every process mapping
/// the file.
#[derive(Clone)]
pub struct Bytes(Arc<[u8]>);

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// A mapping of a module, with its load bias.
struct Mapped {
    mapping: Mapping,
    module: Arc<Module>,
    bias: u64,
}

/// The executable mappings of one process, as last read.
pub struct AddressSpace {
    /// Sorted by start address, not overlapping.
    maps: Vec<Mapped>,
    unwinder: UnwinderX86_64<Bytes>,
}

/// An unwound stack: return addresses, innermost (the API's caller) first.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unwound {
    pub frames: Vec<u64>,
    /// The walk stopped before reaching the outermost frame (bytes copied, frame limit, no
    /// unwind information).
    pub truncated: bool,
}

impl AddressSpace {
    pub fn new(mappings: Vec<(Mapping, Arc<Module>)>) -> Self {
        let mut maps: Vec<Mapped> = mappings
            .into_iter()
            .filter_map(|(mapping, module)| {
                let bias = module.bias(mapping.range.start, mapping.file_offset)?;
                Some(Mapped { mapping, module, bias })
            })
            .collect();
        maps.sort_by_key(|m| m.mapping.range.start);
        maps.dedup_by(|b, a| b.mapping.range.start < a.mapping.range.end);
        let mut unwinder = UnwinderX86_64::new();
        for m in &maps {
            let md = &m.module;
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: md.text.clone(),
                got_svma: md.got.clone(),
                eh_frame_svma: md.eh_frame.as_ref().map(|(r, _)| r.clone()),
                eh_frame: md.eh_frame.as_ref().map(|(_, d)| Bytes(d.clone())),
                eh_frame_hdr_svma: md.eh_frame_hdr.as_ref().map(|(r, _)| r.clone()),
                eh_frame_hdr: md.eh_frame_hdr.as_ref().map(|(_, d)| Bytes(d.clone())),
                text: None,
                stubs_svma: None,
                stub_helper_svma: None,
                unwind_info: None,
                debug_frame: None,
                text_segment_svma: None,
                text_segment: None,
            };
            unwinder.add_module(framehop::Module::new(md.path.clone(), m.mapping.range.clone(), m.bias, info));
        }
        Self { maps, unwinder }
    }

    /// The module mapped at `addr` and the address as the file states it.
    pub fn find(&self, addr: u64) -> Option<(&Arc<Module>, u64)> {
        let i = self.maps.partition_point(|m| m.mapping.range.start <= addr).checked_sub(1)?;
        let m = &self.maps[i];
        (addr < m.mapping.range.end).then(|| (&m.module, addr.wrapping_sub(m.bias)))
    }

    /// Unwinds a copied stack: `data` is the stack from `sp` up.
    pub fn unwind_copy(&self, cache: &mut CacheX86_64, ret_addr: u64, sp: u64, bp: u64, data: &[u8]) -> Unwound {
        let mut out = Unwound::default();
        if ret_addr == 0 {
            out.truncated = true;
            return out;
        }
        let end = sp.saturating_add(data.len() as u64);
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            if addr < sp || addr.checked_add(8).is_none_or(|e| e > end) {
                return Err(());
            }
            let o = (addr - sp) as usize;
            Ok(u64::from_le_bytes(data[o..o + 8].try_into().map_err(|_| ())?))
        };
        let mut regs = UnwindRegsX86_64::new(ret_addr, sp.wrapping_add(8), bp);
        out.frames.push(ret_addr);
        let Some(mut addr) = FrameAddress::from_return_address(ret_addr) else {
            out.truncated = true;
            return out;
        };
        loop {
            if out.frames.len() >= MAX_FRAMES {
                out.truncated = true;
                break;
            }
            match self.unwinder.unwind_frame(addr, &mut regs, cache, &mut read_stack) {
                Ok(Some(ra)) => {
                    let Some(next) = FrameAddress::from_return_address(ra) else { break };
                    out.frames.push(ra);
                    addr = next;
                }
                Ok(None) => break,
                Err(_) => {
                    out.truncated = true;
                    break;
                }
            }
        }
        out
    }
}

/// The frames of a frame-pointer record: `addrs` as the kernel wrote them (the probed
/// function's address first). The caller's return address comes from `*sp`: at a function's
/// first instruction the frame-pointer chain starts at the caller's caller.
pub fn frames_from_fp(ret_addr: u64, addrs: &[u64], full: bool) -> Unwound {
    let mut frames = Vec::with_capacity(addrs.len().min(MAX_FRAMES));
    if ret_addr != 0 {
        frames.push(ret_addr);
    }
    for &a in addrs.iter().skip(1) {
        if a == 0 || frames.len() >= MAX_FRAMES {
            break;
        }
        // Kernels that add the return address at a function-entry uprobe themselves.
        if frames.len() == 1 && a == ret_addr {
            continue;
        }
        frames.push(a);
    }
    let truncated = full || frames.len() >= MAX_FRAMES;
    Unwound { frames, truncated }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp_frames_start_at_the_caller_once() {
        assert_eq!(frames_from_fp(0x10, &[0x1, 0x20, 0x30], false).frames, vec![0x10, 0x20, 0x30]);
        assert_eq!(frames_from_fp(0x10, &[0x1, 0x10, 0x20], false).frames, vec![0x10, 0x20]);
        assert!(frames_from_fp(0x10, &[0x1], true).truncated);
    }

    #[test]
    fn an_empty_address_space_keeps_the_caller_and_reads_only_the_copy() {
        let space = AddressSpace::new(Vec::new());
        let mut cache = CacheX86_64::new();
        // No module: framehop falls back to the frame pointer; the chain points outside the copy.
        let data = [0u8; 64];
        let u = space.unwind_copy(&mut cache, 0x401000, 0x7000_0000, 0x1234, &data);
        assert_eq!(u.frames[0], 0x401000);
        assert!(u.frames.len() <= MAX_FRAMES);
    }
}
