//! The constructors the table's rows are written with: `spec` (a HIP API returning hipError_t),
//! `cu` / `rt` (CUDA driver / runtime), `roctx` / `nvtx` (markers), and modifiers (`stack`,
//! `out`, `string`, `returns`, `gpu`, `names_kernel`, `not_default`, ...); `h` / `d` name an
//! argument recorded in `a0..a3` (shown in hex / decimal), `N` none.

use super::spec::*;

/// Whether a decoding implies GPU work.
const fn decode_gpu_work(d: &Decode) -> bool {
    matches!(d, Decode::Launch(_) | Decode::Copy(_) | Decode::Memset { .. } | Decode::GraphLaunch)
}

pub(super) const fn base(name: &'static str, lib: Lib, decode: Decode, ret: RetKind) -> ApiSpec {
    let kernel_naming = if matches!(decode, Decode::RegisterFunction) { KernelNaming::HostStub } else { KernelNaming::No };
    ApiSpec {
        name,
        lib,
        stack_words: 0,
        string_arg: None,
        out_arg: None,
        out_value: RetKind::Pointer,
        gpu_work: decode_gpu_work(&decode),
        decode,
        default: true,
        ret,
        kernel_naming,
    }
}

/// A HIP API returning hipError_t.
pub(super) const fn spec(name: &'static str, decode: Decode) -> ApiSpec {
    base(name, Lib::Hip, decode, RetKind::HipError)
}

/// Overrides the return kind.
pub(super) const fn returns(mut s: ApiSpec, ret: RetKind) -> ApiSpec {
    s.ret = ret;
    s
}

/// Marks an API that puts work on (or waits for) a GPU queue beyond what its decoding implies.
pub(super) const fn gpu(mut s: ApiSpec) -> ApiSpec {
    s.gpu_work = true;
    s
}

/// Marks an API whose out value is a kernel handle named by its string argument.
pub(super) const fn names_kernel(mut s: ApiSpec) -> ApiSpec {
    s.kernel_naming = KernelNaming::OutHandle;
    s
}

pub(super) const fn stack(mut s: ApiSpec, n: u8) -> ApiSpec {
    s.stack_words = n;
    s
}

pub(super) const fn out(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.out_arg = Some(arg);
    s
}

/// The output value is an `int` (`int*` argument), not a pointer or handle.
pub(super) const fn out_int(mut s: ApiSpec) -> ApiSpec {
    s.out_value = RetKind::Int { bits: 32, signed: true };
    s
}

pub(super) const fn string(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.string_arg = Some(arg);
    s
}

/// A roctx marker. Push and Pop return the nesting level (int), StartA the range id
/// (`roctx_range_id_t`, uint64_t); Stop and Mark return nothing.
pub(super) const fn roctx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    let ret = match kind {
        MarkerKind::Push | MarkerKind::Pop => RetKind::Int { bits: 32, signed: true },
        MarkerKind::Start => RetKind::Int { bits: 64, signed: false },
        MarkerKind::Stop | MarkerKind::Mark => RetKind::Void,
    };
    let mut s = base(name, Lib::Roctx, Decode::Marker(kind), ret);
    s.string_arg = if has_text { Some(0) } else { None };
    s
}

/// A CUDA driver API (libcuda), returning CUresult.
pub(super) const fn cu(name: &'static str, decode: Decode) -> ApiSpec {
    base(name, Lib::Cuda, decode, RetKind::CuResult)
}

/// A CUDA runtime API (libcudart), returning cudaError_t: decoded, not in the default set (the
/// driver sees it all).
pub(super) const fn rt(name: &'static str, decode: Decode) -> ApiSpec {
    let mut s = base(name, Lib::Cudart, decode, RetKind::CudaError);
    s.default = false;
    s
}

pub(super) const fn nvtx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    let mut s = roctx(name, kind, has_text);
    s.lib = Lib::Nvtx;
    s
}

pub(super) const fn not_default(mut s: ApiSpec) -> ApiSpec {
    s.default = false;
    s
}

pub(super) const fn copy(dst: u8, src: u8, size: u8, kind: CopyKind, stream: Option<u8>, sync: bool) -> Decode {
    Decode::Copy(CopyForm { dst, src, size, kind, stream, height: None, sync })
}

pub(super) const fn copy2d(kind_arg: u8, stream: Option<u8>, sync: bool) -> Decode {
    // (dst, dpitch, src, spitch, width, height, kind[, stream])
    Decode::Copy(CopyForm { dst: 0, src: 2, size: 4, kind: CopyKind::Arg(kind_arg), stream, height: Some(5), sync })
}

pub(super) const fn args(a: [Option<ArgField>; 4]) -> Decode {
    Decode::Args(a)
}

/// No argument recorded in this column.
pub(super) const N: Option<ArgField> = None;
/// Argument `pos`, an address, handle or bit mask (shown in hex).
pub(super) const fn h(name: &'static str, pos: u8) -> Option<ArgField> {
    Some(ArgField { pos, meaning: ArgMeaning { name, hex: true } })
}
/// Argument `pos`, a count, size, index or enum value (shown in decimal).
pub(super) const fn d(name: &'static str, pos: u8) -> Option<ArgField> {
    Some(ArgField { pos, meaning: ArgMeaning { name, hex: false } })
}
