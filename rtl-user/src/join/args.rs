//! A call's raw argument words -> the trace's typed columns, per the API table.

use crate::probe::apis::{ApiSpec, CopyKind, Decode, LaunchForm};

use super::calls::Call;
use super::rows::{CopyRow, KernelRow, RtlApiRow};

/// The rows a call's arguments produce besides its `rocpd_api` row.
pub struct Decoded {
    pub rtl: RtlApiRow,
    pub kernel: Option<KernelRow>,
    pub copy: Option<CopyRow>,
    /// Kernel function pointer / handle a launch used (for name lookup).
    pub launch_func: Option<u64>,
}

fn lo(v: u64) -> u32 {
    v as u32
}
fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}

pub fn decode(call: &Call, spec: &ApiSpec) -> Decoded {
    let decode = spec.decode;
    let a = &call.open.args;
    let arg = |i: u8| a[i as usize];
    let id = call.open.id;
    // What the return register holds is the table's fact (an error code, a pointer, nothing...).
    let ret = call.ret.and_then(|r| spec.ret.value(r));
    // The value an output pointer held at return, as wide as the table says it is.
    let out = call.out.and_then(|v| spec.out_value.value(v));
    let mut rtl = RtlApiRow { id, ret, status: call.status, a: [None; 4] };
    let mut kernel = None;
    let mut copy = None;
    let mut launch_func = None;
    match decode {
        Decode::None | Decode::Marker(_) => {}
        Decode::RegisterFunction => rtl.a = [Some(arg(1) as i64), None, None, None],
        Decode::Launch(form) => {
            let (func, grid, block, shmem, stream) = match form {
                LaunchForm::Dim3 => (
                    arg(0),
                    [lo(arg(1)), hi(arg(1)), lo(arg(2))],
                    [lo(arg(3)), hi(arg(3)), lo(arg(4))],
                    // size_t in hipLaunchKernel, unsigned int in hipLaunchCooperativeKernel:
                    // the upper half is undefined there, and no LDS is 4 GiB.
                    lo(arg(6)) as u64,
                    arg(7),
                ),
                LaunchForm::Module => {
                    (arg(0), [lo(arg(1)), lo(arg(2)), lo(arg(3))], [lo(arg(4)), lo(arg(5)), lo(arg(6))], lo(arg(7)) as u64, arg(8))
                }
                LaunchForm::ExtModule => {
                    // Global work sizes (threads): grid in blocks is global / local.
                    let l = [lo(arg(4)), lo(arg(5)), lo(arg(6))];
                    let g = [lo(arg(1)), lo(arg(2)), lo(arg(3))];
                    let blocks = |i: usize| if l[i] == 0 { 0 } else { g[i].div_ceil(l[i]) };
                    (arg(0), [blocks(0), blocks(1), blocks(2)], l, lo(arg(7)) as u64, arg(8))
                }
                // cuLaunchKernelEx(config*, f, ...): sizes and stream sit behind the pointer.
                LaunchForm::Config => (arg(1), [0; 3], [0; 3], 0, 0),
            };
            launch_func = Some(func);
            rtl.a = match form {
                LaunchForm::Config => [Some(func as i64), Some(arg(0) as i64), None, None],
                _ => [Some(func as i64), Some(shmem as i64), None, Some(stream as i64)],
            };
            kernel = Some(KernelRow { id, stream, grid, block, shmem, name: String::new() });
        }
        Decode::Copy(c) => {
            let kind = match c.kind {
                CopyKind::Arg(i) => arg(i) as u32 as i64,
                CopyKind::Fixed(k) => k,
            };
            let (width, height) = match c.height {
                Some(h) => (arg(c.size), arg(h)),
                None => (0, 0),
            };
            let size = if c.height.is_some() { width.saturating_mul(height) } else { arg(c.size) };
            let stream = c.stream.map_or(0, arg);
            rtl.a = [Some(arg(c.dst) as i64), Some(size as i64), Some(kind), c.stream.map(|s| arg(s) as i64)];
            copy = Some(CopyRow { id, stream, size, width, height, kind, dst: arg(c.dst), src: arg(c.src), sync: c.sync });
        }
        Decode::Alloc { size, flags, stream } => {
            rtl.a = [out, Some(arg(size) as i64), flags.map(|f| arg(f) as i64), stream.map(|s| arg(s) as i64)];
        }
        Decode::Free { stream } => rtl.a = [Some(arg(0) as i64), None, None, stream.map(|s| arg(s) as i64)],
        Decode::Memset { count, value, elem, stream } => {
            rtl.a = [
                Some(arg(0) as i64),
                Some(arg(count).saturating_mul(elem as u64) as i64),
                Some(arg(value) as u32 as i64),
                stream.map(|s| arg(s) as i64),
            ];
        }
        Decode::GraphLaunch => rtl.a = [Some(arg(0) as i64), None, None, Some(arg(1) as i64)],
        Decode::Args(fields) => {
            for (slot, f) in rtl.a.iter_mut().zip(fields) {
                *slot = f.map(|f| arg(f.pos) as i64);
            }
        }
    }
    // An API with an output pointer reports the value it wrote in a0 (hipStreamCreate's stream,
    // hipGraphInstantiate's exec, ...), unless a0 already holds something decoded above.
    if let (Some(v), Decode::Args(_)) = (out, decode) {
        rtl.a[0] = Some(v);
    }
    Decoded { rtl, kernel, copy, launch_func }
}
