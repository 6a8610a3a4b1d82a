//! Just enough of the kernel's BTF (`/sys/kernel/btf/vmlinux`) to find a struct member's
//! offset: `task_struct.thread.fsbase`, which the entry probe reads so that the HIP profiler's
//! thread ids (a hash of `pthread_self()`, which is the fs base) can be matched to our threads.
//!
//! Format: a header, then type records (kind-dependent sizes), then a string table.

use anyhow::{bail, Context, Result};

const MAGIC: u16 = 0xeb9f;

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_VOLATILE: u32 = 9;
const KIND_CONST: u32 = 10;
const KIND_RESTRICT: u32 = 11;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_TYPE_TAG: u32 = 18;
const KIND_ENUM64: u32 = 19;

struct Member {
    name_off: u32,
    type_id: u32,
    bit_offset: u32,
}

struct Type {
    name_off: u32,
    kind: u32,
    /// Size (structs) or referenced type (typedefs, modifiers).
    size_or_type: u32,
    /// Structs and unions: member count, and where their member records start in
    /// [`Btf::data`] (decoded only when asked: a kernel has ~100 000 types).
    vlen: u32,
    kflag: bool,
    members_at: usize,
}

pub struct Btf {
    types: Vec<Type>,
    strings: Vec<u8>,
    /// The whole BTF blob (member records are read from it on demand).
    data: Vec<u8>,
}

fn u32_at(b: &[u8], off: usize) -> Result<u32> {
    let s = b.get(off..off + 4).context("BTF truncated")?;
    Ok(u32::from_le_bytes(s.try_into().unwrap()))
}

impl Btf {
    pub fn from_sys_fs() -> Result<Self> {
        let data = std::fs::read("/sys/kernel/btf/vmlinux").context("reading /sys/kernel/btf/vmlinux")?;
        Self::parse_owned(data)
    }

    /// The running kernel's BTF, parsed once per process (a session asks it
    /// for several offsets while attaching).
    pub fn kernel() -> Result<&'static Self> {
        static KERNEL: std::sync::OnceLock<Result<Btf, String>> = std::sync::OnceLock::new();
        KERNEL.get_or_init(|| Self::from_sys_fs().map_err(|e| format!("{e:#}"))).as_ref().map_err(|e| anyhow::anyhow!("{e}"))
    }

    pub fn parse(b: &[u8]) -> Result<Self> {
        Self::parse_owned(b.to_vec())
    }

    fn parse_owned(data: Vec<u8>) -> Result<Self> {
        let b = &data[..];
        if b.len() < 24 || u16::from_le_bytes([b[0], b[1]]) != MAGIC {
            bail!("not little-endian BTF");
        }
        let hdr_len = u32_at(b, 4)? as usize;
        let (type_off, type_len) = (u32_at(b, 8)? as usize, u32_at(b, 12)? as usize);
        let (str_off, str_len) = (u32_at(b, 16)? as usize, u32_at(b, 20)? as usize);
        let tstart = hdr_len.checked_add(type_off).context("BTF header")?;
        let tend = tstart.checked_add(type_len).context("BTF header")?;
        let sstart = hdr_len.checked_add(str_off).context("BTF header")?;
        let strings = b.get(sstart..sstart.checked_add(str_len).context("BTF header")?).context("BTF strings")?.to_vec();
        // id 0 = void
        let mut types = vec![Type { name_off: 0, kind: 0, size_or_type: 0, vlen: 0, kflag: false, members_at: 0 }];
        let mut off = tstart;
        while off < tend {
            let name_off = u32_at(b, off)?;
            let info = u32_at(b, off + 4)?;
            let size_or_type = u32_at(b, off + 8)?;
            off += 12;
            let vlen = (info & 0xffff) as usize;
            let kind = (info >> 24) & 0x1f;
            let kflag = info >> 31 == 1;
            let members_at = off;
            match kind {
                KIND_INT | KIND_VAR | KIND_DECL_TAG => off += 4,
                KIND_ARRAY => off += 12,
                KIND_STRUCT | KIND_UNION => {
                    off += 12 * vlen;
                    if off > tend {
                        bail!("BTF truncated");
                    }
                }
                KIND_ENUM | KIND_FUNC_PROTO => off += 8 * vlen,
                KIND_DATASEC | KIND_ENUM64 => off += 12 * vlen,
                _ => {}
            }
            let vlen = if matches!(kind, KIND_STRUCT | KIND_UNION) { vlen as u32 } else { 0 };
            types.push(Type { name_off, kind, size_or_type, vlen, kflag, members_at });
        }
        Ok(Self { types, strings, data })
    }

    /// The members of a struct or union (empty for other kinds).
    fn members(&self, t: &Type) -> impl Iterator<Item = Member> + '_ {
        let (at, kflag) = (t.members_at, t.kflag);
        (0..t.vlen as usize).filter_map(move |i| {
            let off = at + 12 * i;
            let m_off = u32_at(&self.data, off + 8).ok()?;
            Some(Member {
                name_off: u32_at(&self.data, off).ok()?,
                type_id: u32_at(&self.data, off + 4).ok()?,
                bit_offset: if kflag { m_off & 0xff_ffff } else { m_off },
            })
        })
    }

    fn name(&self, off: u32) -> &[u8] {
        let s = self.strings.get(off as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
    }

    /// Follows typedefs and qualifiers to the underlying type id.
    fn resolve(&self, mut id: u32) -> u32 {
        for _ in 0..32 {
            match self.types.get(id as usize) {
                Some(t) if matches!(t.kind, KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG) => {
                    id = t.size_or_type
                }
                _ => break,
            }
        }
        id
    }

    fn struct_named(&self, name: &str) -> Option<u32> {
        self.types.iter().position(|t| t.kind == KIND_STRUCT && t.vlen > 0 && self.name(t.name_off) == name.as_bytes()).map(|i| i as u32)
    }

    /// Byte offset of a dotted member path in a struct, e.g. ("task_struct", "thread.fsbase").
    /// Members of anonymous structs and unions (`mm_struct`'s fields live in one) are found
    /// as if they were the parent's own.
    pub fn member_offset(&self, strukt: &str, path: &str) -> Result<u64> {
        let mut id = self.struct_named(strukt).with_context(|| format!("BTF has no struct {strukt}"))?;
        let mut bits = 0u64;
        for part in path.split('.') {
            let (b, t) = self.find_member(id, part.as_bytes(), 0).with_context(|| format!("BTF: no member {part} in {strukt}.{path}"))?;
            bits += b;
            id = t;
        }
        if !bits.is_multiple_of(8) {
            bail!("{strukt}.{path} is a bitfield");
        }
        Ok(bits / 8)
    }

    /// (bit offset, resolved type) of member `name` of struct/union `id`, looking inside
    /// anonymous members too (depth-limited).
    fn find_member(&self, id: u32, name: &[u8], depth: u32) -> Option<(u64, u32)> {
        let t = self.types.get(id as usize)?;
        if let Some(m) = self.members(t).find(|m| self.name(m.name_off) == name) {
            return Some((m.bit_offset as u64, self.resolve(m.type_id)));
        }
        if depth >= 8 {
            return None;
        }
        self.members(t).filter(|m| m.name_off == 0 || self.name(m.name_off).is_empty()).find_map(|m| {
            let inner = self.resolve(m.type_id);
            let k = self.types.get(inner as usize)?.kind;
            if k != KIND_STRUCT && k != KIND_UNION {
                return None;
            }
            self.find_member(inner, name, depth + 1).map(|(b, t)| (b + m.bit_offset as u64, t))
        })
    }
}

/// Offset of `thread.fsbase` in `task_struct` on this kernel (x86-64).
pub fn fsbase_offset() -> Result<u64> {
    Btf::kernel()?.member_offset("task_struct", "thread.fsbase")
}

/// Offsets of `task_struct.pid` and `task_struct.tgid`: the fork probe reads the child's.
/// Byte offset of `vm_end` in `struct vm_area_struct`: the stack probe copies up to the end of
/// the stack's mapping (`bpf_find_vma`) instead of reading until a page fails.
pub fn vma_end_offset() -> Result<u64> {
    Btf::kernel()?.member_offset("vm_area_struct", "vm_end")
}

pub fn task_pid_offsets() -> Result<(u64, u64)> {
    let btf = Btf::kernel()?;
    Ok((btf.member_offset("task_struct", "pid")?, btf.member_offset("task_struct", "tgid")?))
}

/// Offsets of `task_struct.signal` and `signal_struct.group_exec_task` (kernel 5.16+): the
/// exit probe tells a thread killed by another thread's exec from one that exited.
pub fn exec_task_offsets() -> Result<(u64, u64)> {
    let btf = Btf::kernel()?;
    Ok((btf.member_offset("task_struct", "signal")?, btf.member_offset("signal_struct", "group_exec_task")?))
}

/// Offsets the publish probe reads to find the publisher's tgid in its own pid namespace:
/// `task_struct.group_leader`, `task_struct.thread_pid`, `pid.level`, `pid.numbers` and the
/// size of `struct upid` (`{ int nr; struct pid_namespace *ns; }`).
pub fn ns_pid_offsets() -> Result<[u64; 5]> {
    let btf = Btf::kernel()?;
    Ok([
        btf.member_offset("task_struct", "group_leader")?,
        btf.member_offset("task_struct", "thread_pid")?,
        btf.member_offset("pid", "level")?,
        btf.member_offset("pid", "numbers")?,
        btf.member_offset("upid", "ns")? + 8,
    ])
}

/// Offsets the exec probe reads (`task_exec`): `task_struct.real_parent`,
/// `linux_binprm.filename`, `task_struct.mm`, `mm_struct.arg_start` and `mm_struct.arg_end`.
pub struct ExecOffsets {
    pub real_parent: u64,
    pub binprm_filename: u64,
    pub mm: u64,
    pub arg_start: u64,
    pub arg_end: u64,
}

pub fn exec_offsets() -> Result<ExecOffsets> {
    let btf = Btf::kernel()?;
    Ok(ExecOffsets {
        real_parent: btf.member_offset("task_struct", "real_parent")?,
        binprm_filename: btf.member_offset("linux_binprm", "filename")?,
        mm: btf.member_offset("task_struct", "mm")?,
        arg_start: btf.member_offset("mm_struct", "arg_start")?,
        arg_end: btf.member_offset("mm_struct", "arg_end")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exec_offsets_on_this_kernel() {
        let o = exec_offsets().expect("kernel BTF with the exec probe's fields");
        assert!(o.real_parent > 0 && o.mm > 0 && o.binprm_filename > 0);
        // arg_start and arg_end are neighbours (unsigned long each) inside mm_struct's anonymous struct.
        assert_eq!(o.arg_end, o.arg_start + 8);
    }

    #[test]
    fn finds_exec_task_offsets_on_this_kernel() {
        let (sig, exec) = exec_task_offsets().expect("kernel BTF with signal_struct.group_exec_task (5.16+)");
        assert!(sig > 0 && sig < 16384 && exec > 0 && exec < 4096, "implausible offsets {sig} {exec}");
    }

    #[test]
    fn finds_fsbase_on_this_kernel() {
        let off = fsbase_offset().expect("kernel BTF at /sys/kernel/btf/vmlinux is required");
        assert!(off > 0 && off < 16384, "implausible offset {off}");
    }

    #[test]
    fn rejects_garbage() {
        assert!(Btf::parse(b"").is_err());
        assert!(Btf::parse(&[0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
