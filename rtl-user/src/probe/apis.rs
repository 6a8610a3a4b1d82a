//! The curated HIP / roctx API table: which functions `--apis default` probes, how many stack
//! words each needs, which argument is a string or an output pointer, and how its arguments are
//! decoded into trace columns.
//!
//! Argument positions follow the x86-64 SysV ABI: integer arguments 1-6 in rdi, rsi, rdx, rcx,
//! r8, r9 (`args[0..6]`), later ones on the stack (`args[6..]`). A `dim3` (three u32, 12 bytes)
//! is passed by value in TWO registers: x | y << 32 in the first, z in the second.

/// Which library an API lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lib {
    /// libamdhip64.so (HIP runtime).
    Hip,
    /// libroctx64.so (markers).
    Roctx,
}

/// How a call's arguments become trace columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decode {
    /// Nothing beyond the generic row. `--apis all` uses it for APIs outside this table.
    None,
    /// Kernel launch; positions of the function/grid/block/shared-memory/stream arguments.
    Launch(LaunchForm),
    /// Memory copy.
    Copy(CopyForm),
    /// Allocation: `a0` = returned pointer (out arg), `a1` = size, `a2` = flags, `a3` = stream.
    Alloc { size: u8, flags: Option<u8>, stream: Option<u8> },
    /// Free: `a0` = pointer, `a3` = stream.
    Free { stream: Option<u8> },
    /// Memset: `a0` = dst, `a1` = bytes, `a2` = value, `a3` = stream. `elem` = element size.
    Memset { count: u8, value: u8, elem: u8, stream: Option<u8> },
    /// Generic: record up to four arguments (positions) as `a0..a3`; `a0` may be the out value.
    Args([Option<u8>; 4]),
    /// hipGraphLaunch(exec, stream): `a0` = graph exec, `a3` = stream.
    GraphLaunch,
    /// roctx marker; see [`MarkerKind`].
    Marker(MarkerKind),
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, ...)`: names a host stub.
    RegisterFunction,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerKind {
    Push,
    Pop,
    Start,
    Stop,
    Mark,
}

/// Where a launch form keeps its arguments (argument indices, 0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaunchForm {
    /// `(const void* f, dim3 grid, dim3 block, void** args, size_t shmem, hipStream_t stream, ...)`
    /// f = 0, grid = 1|2, block = 3|4, shmem = 6, stream = 7.
    Dim3,
    /// `(hipFunction_t f, gx, gy, gz, bx, by, bz, shmem, stream, ...)`: grid in blocks.
    Module,
    /// hipExtModuleLaunchKernel: like Module but the sizes are global work sizes (threads).
    ExtModule,
}

/// Where a copy form keeps its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyForm {
    pub dst: u8,
    pub src: u8,
    pub size: u8,
    /// Argument holding a hipMemcpyKind, or a fixed kind for the typed forms.
    pub kind: CopyKind,
    pub stream: Option<u8>,
    /// 2D copies: width / height arguments (size = width * height).
    pub height: Option<u8>,
    pub sync: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyKind {
    Arg(u8),
    Fixed(i64),
}

/// hipMemcpyKind values (hip/driver_types.h).
pub mod memcpy_kind {
    pub const HOST_TO_HOST: i64 = 0;
    pub const HOST_TO_DEVICE: i64 = 1;
    pub const DEVICE_TO_HOST: i64 = 2;
    pub const DEVICE_TO_DEVICE: i64 = 3;
    pub const DEFAULT: i64 = 4;

    pub fn name(k: i64) -> &'static str {
        match k {
            HOST_TO_HOST => "HostToHost",
            HOST_TO_DEVICE => "HostToDevice",
            DEVICE_TO_HOST => "DeviceToHost",
            DEVICE_TO_DEVICE => "DeviceToDevice",
            DEFAULT => "Default",
            _ => "Unknown",
        }
    }
}

/// One API in the table.
#[derive(Clone, Copy, Debug)]
pub struct ApiSpec {
    pub name: &'static str,
    pub lib: Lib,
    /// Stack words the entry probe copies (arguments 7 and up that decoding needs).
    pub stack_words: u8,
    /// Argument that is a C string to capture (marker text, module path, kernel name).
    pub string_arg: Option<u8>,
    /// Argument that points at an output value to read at return (hipMalloc's `void**`).
    pub out_arg: Option<u8>,
    pub decode: Decode,
    /// In `--apis default`.
    pub default: bool,
}

const fn spec(name: &'static str, decode: Decode) -> ApiSpec {
    ApiSpec { name, lib: Lib::Hip, stack_words: 0, string_arg: None, out_arg: None, decode, default: true }
}

const fn stack(mut s: ApiSpec, n: u8) -> ApiSpec {
    s.stack_words = n;
    s
}

const fn out(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.out_arg = Some(arg);
    s
}

const fn string(mut s: ApiSpec, arg: u8) -> ApiSpec {
    s.string_arg = Some(arg);
    s
}

const fn roctx(name: &'static str, kind: MarkerKind, has_text: bool) -> ApiSpec {
    ApiSpec {
        name,
        lib: Lib::Roctx,
        stack_words: 0,
        string_arg: if has_text { Some(0) } else { None },
        out_arg: None,
        decode: Decode::Marker(kind),
        default: true,
    }
}

const fn not_default(mut s: ApiSpec) -> ApiSpec {
    s.default = false;
    s
}

const fn copy(dst: u8, src: u8, size: u8, kind: CopyKind, stream: Option<u8>, sync: bool) -> Decode {
    Decode::Copy(CopyForm { dst, src, size, kind, stream, height: None, sync })
}

const fn copy2d(kind_arg: u8, stream: Option<u8>, sync: bool) -> Decode {
    // (dst, dpitch, src, spitch, width, height, kind[, stream])
    Decode::Copy(CopyForm { dst: 0, src: 2, size: 4, kind: CopyKind::Arg(kind_arg), stream, height: Some(5), sync })
}

const fn args(a: [Option<u8>; 4]) -> Decode {
    Decode::Args(a)
}

const N: Option<u8> = None;
const fn a(i: u8) -> Option<u8> {
    Some(i)
}

use memcpy_kind::*;
use CopyKind::{Arg, Fixed};
use LaunchForm::*;

/// The curated table. Order is irrelevant; names are unique.
pub static APIS: &[ApiSpec] = &[
    // Kernel launches.
    stack(spec("hipLaunchKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchKernel_spt", Decode::Launch(Dim3)), 2),
    stack(spec("hipExtLaunchKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchCooperativeKernel", Decode::Launch(Dim3)), 2),
    stack(spec("hipLaunchCooperativeKernel_spt", Decode::Launch(Dim3)), 2),
    stack(spec("hipModuleLaunchKernel", Decode::Launch(Module)), 3),
    stack(spec("hipExtModuleLaunchKernel", Decode::Launch(ExtModule)), 3),
    stack(spec("hipHccModuleLaunchKernel", Decode::Launch(ExtModule)), 3),
    spec("hipLaunchKernelExC", args([a(1), a(0), N, N])),
    spec("hipLaunchByPtr", args([a(0), N, N, N])),
    string(spec("__hipRegisterFunction", Decode::RegisterFunction), 2),
    // Graphs and stream capture.
    spec("hipGraphLaunch", Decode::GraphLaunch),
    out(spec("hipGraphInstantiate", args([a(0), a(1), N, N])), 0),
    out(spec("hipGraphInstantiateWithFlags", args([a(0), a(1), a(2), N])), 0),
    spec("hipGraphExecDestroy", args([a(0), N, N, N])),
    spec("hipGraphDestroy", args([a(0), N, N, N])),
    spec("hipStreamBeginCapture", args([N, a(1), N, a(0)])),
    out(spec("hipStreamEndCapture", args([a(1), N, N, a(0)])), 1),
    // Allocation.
    out(spec("hipMalloc", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(spec("hipExtMallocWithFlags", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocManaged", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocAsync", Decode::Alloc { size: 1, flags: None, stream: Some(2) }), 0),
    out(spec("hipMallocFromPoolAsync", Decode::Alloc { size: 1, flags: None, stream: Some(3) }), 0),
    out(spec("hipHostMalloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocHost", Decode::Alloc { size: 1, flags: None, stream: None }), 0),
    out(spec("hipHostAlloc", Decode::Alloc { size: 1, flags: Some(2), stream: None }), 0),
    out(spec("hipMallocPitch", Decode::Alloc { size: 2, flags: None, stream: None }), 0),
    spec("hipFree", Decode::Free { stream: None }),
    spec("hipFreeAsync", Decode::Free { stream: Some(1) }),
    spec("hipHostFree", Decode::Free { stream: None }),
    spec("hipFreeHost", Decode::Free { stream: None }),
    // Copies: (dst, src, size, kind[, stream]).
    spec("hipMemcpy", copy(0, 1, 2, Arg(3), None, true)),
    spec("hipMemcpy_spt", copy(0, 1, 2, Arg(3), None, true)),
    spec("hipMemcpyAsync", copy(0, 1, 2, Arg(3), Some(4), false)),
    spec("hipMemcpyAsync_spt", copy(0, 1, 2, Arg(3), Some(4), false)),
    spec("hipMemcpyWithStream", copy(0, 1, 2, Arg(3), Some(4), true)),
    spec("hipMemcpyHtoD", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), None, true)),
    spec("hipMemcpyDtoH", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), None, true)),
    spec("hipMemcpyDtoD", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), None, true)),
    spec("hipMemcpyHtoDAsync", copy(0, 1, 2, Fixed(HOST_TO_DEVICE), Some(3), false)),
    spec("hipMemcpyDtoHAsync", copy(0, 1, 2, Fixed(DEVICE_TO_HOST), Some(3), false)),
    spec("hipMemcpyDtoDAsync", copy(0, 1, 2, Fixed(DEVICE_TO_DEVICE), Some(3), false)),
    // (dst, dstDevice, src, srcDevice, size[, stream])
    spec("hipMemcpyPeer", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), None, true)),
    spec("hipMemcpyPeerAsync", copy(0, 2, 4, Fixed(DEVICE_TO_DEVICE), Some(5), false)),
    stack(spec("hipMemcpy2D", copy2d(6, None, true)), 1),
    stack(spec("hipMemcpy2D_spt", copy2d(6, None, true)), 1),
    stack(spec("hipMemcpy2DAsync", copy2d(6, Some(7), false)), 2),
    // (symbol, src, size, offset, kind[, stream]) / (dst, symbol, size, offset, kind[, stream])
    spec("hipMemcpyToSymbol", copy(0, 1, 2, Arg(4), None, true)),
    spec("hipMemcpyToSymbolAsync", copy(0, 1, 2, Arg(4), Some(5), false)),
    spec("hipMemcpyFromSymbol", copy(0, 1, 2, Arg(4), None, true)),
    spec("hipMemcpyFromSymbolAsync", copy(0, 1, 2, Arg(4), Some(5), false)),
    // Memsets: (dst, value, count[, stream]).
    spec("hipMemset", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemset_spt", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemsetAsync", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    spec("hipMemsetD8", Decode::Memset { count: 2, value: 1, elem: 1, stream: None }),
    spec("hipMemsetD8Async", Decode::Memset { count: 2, value: 1, elem: 1, stream: Some(3) }),
    spec("hipMemsetD16", Decode::Memset { count: 2, value: 1, elem: 2, stream: None }),
    spec("hipMemsetD16Async", Decode::Memset { count: 2, value: 1, elem: 2, stream: Some(3) }),
    spec("hipMemsetD32", Decode::Memset { count: 2, value: 1, elem: 4, stream: None }),
    spec("hipMemsetD32Async", Decode::Memset { count: 2, value: 1, elem: 4, stream: Some(3) }),
    // (dst, pitch, value, width, height[, stream]): a1 = width, a2 = value.
    spec("hipMemset2D", args([a(0), a(3), a(2), N])),
    spec("hipMemset2DAsync", args([a(0), a(3), a(2), a(5)])),
    // Streams.
    out(spec("hipStreamCreate", args([a(0), N, N, N])), 0),
    out(spec("hipStreamCreateWithFlags", args([a(0), a(1), N, N])), 0),
    out(spec("hipStreamCreateWithPriority", args([a(0), a(1), a(2), N])), 0),
    spec("hipStreamDestroy", args([N, N, N, a(0)])),
    spec("hipStreamSynchronize", args([N, N, N, a(0)])),
    spec("hipStreamQuery", args([N, N, N, a(0)])),
    spec("hipStreamWaitEvent", args([a(1), a(2), N, a(0)])),
    // Events.
    out(spec("hipEventCreate", args([a(0), N, N, N])), 0),
    out(spec("hipEventCreateWithFlags", args([a(0), a(1), N, N])), 0),
    spec("hipEventDestroy", args([a(0), N, N, N])),
    spec("hipEventRecord", args([a(0), N, N, a(1)])),
    spec("hipEventSynchronize", args([a(0), N, N, N])),
    spec("hipEventQuery", args([a(0), N, N, N])),
    spec("hipEventElapsedTime", args([a(1), a(2), N, N])),
    // Device.
    spec("hipDeviceSynchronize", Decode::None),
    spec("hipDeviceReset", Decode::None),
    spec("hipSetDevice", args([a(0), N, N, N])),
    out(spec("hipGetDeviceCount", args([a(0), N, N, N])), 0),
    spec("hipGetDeviceProperties", args([N, a(1), N, N])),
    spec("hipGetDevicePropertiesR0600", args([N, a(1), N, N])),
    spec("hipInit", args([a(0), N, N, N])),
    // Modules.
    string(out(spec("hipModuleLoad", args([a(0), N, N, N])), 0), 1),
    out(spec("hipModuleLoadData", args([a(0), a(1), N, N])), 0),
    out(spec("hipModuleLoadDataEx", args([a(0), a(1), N, N])), 0),
    string(out(spec("hipModuleGetFunction", args([a(0), a(1), N, N])), 0), 2),
    spec("hipModuleUnload", args([a(0), N, N, N])),
    // Trivial getters: only with --apis all or by name.
    not_default(out(spec("hipGetDevice", args([a(0), N, N, N])), 0)),
    not_default(spec("hipGetLastError", Decode::None)),
    not_default(spec("hipPeekAtLastError", Decode::None)),
    not_default(spec("hipGetErrorString", args([a(0), N, N, N]))),
    not_default(spec("hipGetErrorName", args([a(0), N, N, N]))),
    not_default(spec("hipDeviceGetAttribute", args([N, a(1), a(2), N]))),
    not_default(spec("hipPointerGetAttributes", args([a(1), N, N, N]))),
    not_default(spec("hipStreamIsCapturing", args([N, N, N, a(0)]))),
    not_default(spec("hipStreamGetCaptureInfo", args([N, N, N, a(0)]))),
    not_default(spec("hipCtxGetCurrent", Decode::None)),
    // roctx markers (libroctx64).
    roctx("roctxRangePushA", MarkerKind::Push, true),
    roctx("roctxRangePop", MarkerKind::Pop, false),
    roctx("roctxRangeStartA", MarkerKind::Start, true),
    roctx("roctxRangeStop", MarkerKind::Stop, false),
    roctx("roctxMarkA", MarkerKind::Mark, true),
];

/// Looks an API up by its (unversioned) name.
pub fn find(name: &str) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.name == name)
}

/// The spec `--apis all` uses for an exported function outside the curated table: the first
/// four register arguments, raw.
pub fn generic(lib: Lib) -> ApiSpec {
    ApiSpec {
        name: "",
        lib,
        stack_words: 0,
        string_arg: None,
        out_arg: None,
        decode: Decode::Args([a(0), a(1), a(2), a(3)]),
        default: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn names_are_unique() {
        let mut seen = HashSet::new();
        for s in APIS {
            assert!(seen.insert(s.name), "duplicate {}", s.name);
        }
    }

    #[test]
    fn argument_positions_fit_what_the_probe_copies() {
        for s in APIS {
            let max = 6 + s.stack_words as usize;
            let check = |i: u8| assert!((i as usize) < max, "{}: arg {i} beyond {max}", s.name);
            match s.decode {
                Decode::Launch(Dim3) => check(7),
                Decode::Launch(_) => check(8),
                Decode::Copy(c) => {
                    [c.dst, c.src, c.size].into_iter().for_each(check);
                    if let CopyKind::Arg(k) = c.kind {
                        check(k)
                    }
                    c.stream.into_iter().chain(c.height).for_each(check);
                }
                Decode::Args(v) => v.into_iter().flatten().for_each(check),
                _ => {}
            }
        }
    }

    #[test]
    fn issue_minimum_set_is_in_default() {
        for n in [
            "hipLaunchKernel", "hipExtLaunchKernel", "hipModuleLaunchKernel", "hipLaunchCooperativeKernel",
            "hipGraphLaunch", "hipGraphInstantiate", "hipStreamBeginCapture", "hipStreamEndCapture",
            "hipMalloc", "hipHostMalloc", "hipMallocAsync", "hipMallocManaged", "hipFree", "hipHostFree",
            "hipMemcpy", "hipMemcpyAsync", "hipMemset", "hipMemsetAsync", "hipStreamCreate",
            "hipStreamDestroy", "hipStreamSynchronize", "hipStreamQuery", "hipStreamWaitEvent",
            "hipEventRecord", "hipEventElapsedTime", "hipDeviceSynchronize", "hipSetDevice",
            "hipModuleLoad", "hipModuleGetFunction", "roctxRangePushA", "roctxRangePop",
            "roctxRangeStartA", "roctxRangeStop", "roctxMarkA",
        ] {
            assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
        }
        assert!(!find("hipGetDevice").unwrap().default);
        assert!(!find("hipGetLastError").unwrap().default);
    }
}
