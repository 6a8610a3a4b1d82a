use super::*;
use std::collections::HashSet;
use LaunchForm::*;

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
            Decode::Launch(Config) => check(1),
            Decode::Launch(_) => check(8),
            Decode::Copy(c) => {
                [c.dst, c.src, c.size].into_iter().for_each(check);
                if let CopyKind::Arg(k) = c.kind {
                    check(k)
                }
                c.stream.into_iter().chain(c.height).for_each(check);
            }
            Decode::Args(v) => v.into_iter().flatten().map(|f| f.pos).for_each(check),
            Decode::Alloc { size, flags, stream } => {
                check(size);
                flags.into_iter().chain(stream).for_each(check);
            }
            Decode::Free { stream } => stream.into_iter().for_each(check),
            Decode::Memset { count, value, stream, .. } => {
                check(count);
                check(value);
                stream.into_iter().for_each(check);
            }
            _ => {}
        }
        s.string_arg.into_iter().chain(s.out_arg).for_each(check);
        assert!(
            s.stack_words as usize <= rtl_common::MAX_STACK_ARGS,
            "{}: {} stack words, the probe copies at most {}",
            s.name,
            s.stack_words,
            rtl_common::MAX_STACK_ARGS
        );
    }
}

#[test]
fn every_name_belongs_to_its_library_by_prefix() {
    // The loader routes `--apis NAME` to a library by prefix: the table must agree.
    for s in APIS {
        assert_eq!(Lib::of_name(s.name), s.lib, "{}", s.name);
    }
    assert_eq!(Lib::of_name("hipFoo"), Lib::Hip);
    assert_eq!(Lib::of_name("__hipRegisterFatBinary"), Lib::Hip);
    assert_eq!(Lib::of_name("cuFoo"), Lib::Cuda);
    assert_eq!(Lib::of_name("cudaFoo"), Lib::Cudart);
    assert_eq!(Lib::of_name("__cudaRegisterFatBinary"), Lib::Cudart);
    assert_eq!(Lib::of_name("nvtxDomainRangePushEx"), Lib::Nvtx);
}

#[test]
fn cuda_default_set_is_the_driver_and_nvtx() {
    for n in [
        "cuLaunchKernel",
        "cuLaunchKernel_ptsz",
        "cuLaunchKernelEx",
        "cuGraphLaunch",
        "cuMemcpyHtoD_v2",
        "cuMemcpyDtoH_v2",
        "cuMemcpyDtoD_v2",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoDAsync_v2",
        "cuMemcpyAsync",
        "cuMemAlloc_v2",
        "cuMemAllocAsync",
        "cuMemFree_v2",
        "cuMemFreeAsync",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
        "cuEventRecord",
        "cuEventRecordWithFlags",
        "cuStreamBeginCapture_v2",
        "cuStreamEndCapture",
        "cuGraphInstantiateWithFlags",
        "cuModuleGetFunction",
        "cuLibraryGetKernel",
        "nvtxRangePushA",
        "nvtxRangePop",
        "nvtxMarkA",
        "nvtxRangeStartA",
        "nvtxRangeEnd",
    ] {
        assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
    }
    for s in APIS.iter().filter(|s| s.lib == Lib::Cudart) {
        assert!(!s.default, "{}: runtime APIs double the driver's rows", s.name);
    }
    for n in [
        "cudaLaunchKernel",
        "cudaGraphLaunch",
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "cudaMalloc",
        "cudaFree",
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
    ] {
        assert!(find(n).is_some(), "{n} missing");
    }
    assert!(!find("cuGetProcAddress_v2").unwrap().default);
}

/// What the entry probe records for a call made per the x86-64 SysV ABI: the six integer
/// argument registers, then `stack_words` words from the caller's stack (rsp + 8 on entry).
/// `eightbytes` are the arguments as the ABI splits them (a 12-byte dim3 by value is two).
fn probe_record(eightbytes: &[u64], stack_words: u8) -> [u64; rtl_common::MAX_ARGS] {
    let mut regs = [0u64; 6];
    let mut stack = Vec::new();
    for (i, &v) in eightbytes.iter().enumerate() {
        if i < 6 {
            regs[i] = v
        } else {
            stack.push(v)
        }
    }
    let mut rec = [0u64; rtl_common::MAX_ARGS];
    rec[..6].copy_from_slice(&regs);
    for (i, v) in stack.into_iter().take(stack_words as usize).enumerate() {
        rec[6 + i] = v;
    }
    rec
}

fn decode_call(name: &str, eightbytes: &[u64], out: Option<u64>) -> crate::join::args::Decoded {
    use crate::join::calls::{Call, OpenCall};
    use crate::join::rows::CallStatus;
    let s = find(name).unwrap();
    let open = OpenCall {
        id: 7,
        api_id: 0,
        pid_tgid: 1 << 32 | 1,
        start: 1,
        args: probe_record(eightbytes, s.stack_words),
        fsbase: 0,
        text: None,
    };
    let call = Call { open, end: 2, ret: Some(0), out, status: CallStatus::Complete };
    crate::join::args::decode(&call, s)
}

#[test]
fn cu_launch_kernel_grid_block_from_raw_words() {
    // cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra): 11 INTEGER
    // arguments; f..by in rdi..r9, bz/shmem/stream/params/extra on the stack.
    let (f, stream) = (0x4780_7c70u64, 0x5555_0000_1230u64);
    let words = [f, 4096, 3, 2, 256, 2, 1, 1024, stream, 0x7ffd_0000_0010, 0];
    for name in ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchCooperativeKernel"] {
        let d = decode_call(name, &words, None);
        let k = d.kernel.expect("a launch yields a kernel row");
        assert_eq!(k.grid, [4096, 3, 2], "{name}");
        assert_eq!(k.block, [256, 2, 1], "{name}");
        assert_eq!(k.shmem, 1024, "{name}");
        assert_eq!(k.stream, stream, "{name}");
        assert_eq!(d.launch_func, Some(f), "{name}");
        assert_eq!(d.rtl.a, [Some(f as i64), Some(1024), None, Some(stream as i64)], "{name}");
    }
    // The 32-bit unsigned arguments arrive with garbage in the upper half of the register
    // or stack slot (the ABI leaves it undefined): decoding must ignore it.
    let dirty = [f, 0xdead_0000_0000_0010, 1, 1, 0xbeef_0000_0000_0080, 1, 0xffff_ffff_0000_0001, 0x1_0000_0000, stream];
    let k = decode_call("cuLaunchKernel", &dirty, None).kernel.unwrap();
    assert_eq!((k.grid, k.block, k.shmem), ([16, 1, 1], [128, 1, 1], 0));
}

#[test]
fn cuda_runtime_launch_dim3_by_value() {
    // cudaLaunchKernel(func, dim3 grid, dim3 block, void** args, size_t shmem, stream): a dim3
    // (three u32, 12 bytes) is INTEGER class in two eightbytes: x | y << 32, then z.
    let dim = |x: u64, y: u64, z: u64| [x | y << 32, z];
    let (func, stream) = (0x7f12_3456_7000u64, 0x9abc_0000u64);
    let [g0, g1] = dim(640, 2, 1);
    let [b0, b1] = dim(128, 4, 2);
    let words = [func, g0, g1, b0, b1, 0x7ffd_0000_0100, 4096, stream];
    let d = decode_call("cudaLaunchKernel", &words, None);
    let k = d.kernel.unwrap();
    assert_eq!((k.grid, k.block, k.shmem, k.stream), ([640, 2, 1], [128, 4, 2], 4096, stream));
    assert_eq!(d.launch_func, Some(func));
}

#[test]
fn cuda_copies_allocs_and_graphs_decode() {
    use crate::probe::apis::memcpy_kind::*;
    for (name, kind) in [
        ("cuMemcpyHtoD_v2", HOST_TO_DEVICE),
        ("cuMemcpyDtoH_v2", DEVICE_TO_HOST),
        ("cuMemcpyDtoD_v2", DEVICE_TO_DEVICE),
        ("cuMemcpy", DEFAULT),
    ] {
        let c = decode_call(name, &[0xd000, 0x5000, 1 << 20], None).copy.unwrap();
        assert_eq!((c.dst, c.src, c.size, c.kind, c.sync, c.stream), (0xd000, 0x5000, 1 << 20, kind, true, 0), "{name}");
    }
    for (name, kind) in [("cuMemcpyHtoDAsync_v2", HOST_TO_DEVICE), ("cuMemcpyDtoHAsync_v2", DEVICE_TO_HOST)] {
        let c = decode_call(name, &[0xd000, 0x5000, 4096, 0x77], None).copy.unwrap();
        assert_eq!((c.size, c.kind, c.sync, c.stream), (4096, kind, false, 0x77), "{name}");
    }
    // cudaMemcpyKind shares hipMemcpyKind's values.
    let c = decode_call("cudaMemcpyAsync", &[1, 2, 64, 2, 0x99], None).copy.unwrap();
    assert_eq!((c.kind, c.stream, c.sync), (DEVICE_TO_HOST, 0x99, false));
    let d = decode_call("cuMemAlloc_v2", &[0x7ffd_0000_0000, 1 << 30], Some(0x7f00_0020_0000));
    assert_eq!(d.rtl.a, [Some(0x7f00_0020_0000), Some(1 << 30), None, None]);
    let d = decode_call("cuMemAllocAsync", &[0x7ffd_0000_0000, 512, 0x42], Some(0xd000));
    assert_eq!(d.rtl.a, [Some(0xd000), Some(512), None, Some(0x42)]);
    let d = decode_call("cuGraphLaunch", &[0xe0e0, 0x42], None);
    assert_eq!(d.rtl.a, [Some(0xe0e0), None, None, Some(0x42)]);
    assert!(d.kernel.is_none());
    let d = decode_call("cuStreamSynchronize", &[0x42], None);
    assert_eq!(d.rtl.a, [None, None, None, Some(0x42)]);
    let d = decode_call("cuEventRecordWithFlags", &[0xe1, 0x42, 1], None);
    assert_eq!(d.rtl.a, [Some(0xe1), Some(1), None, Some(0x42)]);
    // cuLaunchKernelEx: the config is behind a pointer; f and the config pointer are kept,
    // and the launch still yields a kernel row (named through f), sizes unknown (0).
    let d = decode_call("cuLaunchKernelEx", &[0x7ffd_0000_0040, 0x4780_7c70, 0, 0], None);
    assert_eq!(d.rtl.a, [Some(0x4780_7c70), Some(0x7ffd_0000_0040), None, None]);
    assert_eq!(d.launch_func, Some(0x4780_7c70));
    let k = d.kernel.unwrap();
    assert_eq!((k.grid, k.block, k.shmem, k.stream), ([0; 3], [0; 3], 0, 0));
    // cuLibraryGetKernel reports the kernel handle it wrote (the name comes as text).
    let s = find("cuLibraryGetKernel").unwrap();
    assert_eq!((s.out_arg, s.string_arg), (Some(0), Some(2)));
    let d = decode_call("cuLibraryGetKernel", &[0x7ffd_0000_0000, 0x4700_0000, 0x7f00_1000], Some(0x4780_7c70));
    assert_eq!(d.rtl.a[0], Some(0x4780_7c70));
}

#[test]
fn return_kinds_are_the_headers() {
    // Every HIP API of the table that the HIP headers declare returns what they say.
    // The others are newer than ROCm 5.2's headers or the compiler's interface, declared
    // nowhere there: their kinds are given by hand (signatures in the table's comments).
    const NOT_IN_THE_HEADERS: &[&str] = &[
        "hipLaunchKernelExC",
        "hipGetDevicePropertiesR0600",
        "hipEventRecordWithFlags",
        "__hipRegisterFunction",
        "__hipRegisterFatBinary",
        "__hipUnregisterFatBinary",
        "__hipRegisterVar",
        "__hipRegisterManagedVar",
        "__hipRegisterSurface",
        "__hipRegisterTexture",
    ];
    for s in APIS.iter().filter(|s| s.lib == Lib::Hip) {
        match header_return(s.name) {
            Some(k) => assert_eq!(s.ret, k, "{}: table says {:?}, hip headers {:?}", s.name, s.ret, k),
            None => assert!(NOT_IN_THE_HEADERS.contains(&s.name), "{} is not in the HIP headers", s.name),
        }
    }
    // The ones the issue names; not error codes.
    for (n, k) in [
        ("hipApiName", RetKind::Pointer),
        ("hipGetCmdName", RetKind::Pointer),
        ("hiprtcGetErrorString", RetKind::Pointer),
        ("hipGetErrorString", RetKind::Pointer),
        ("hipEnableActivityCallback", RetKind::Bool),
        ("hipInitActivityCallback", RetKind::Void),
        ("__hipRegisterFunction", RetKind::Void),
        ("__hipRegisterFatBinary", RetKind::Pointer),
        ("__hipUnregisterFatBinary", RetKind::Void),
        ("hipGetStreamDeviceId", RetKind::Int { bits: 32, signed: true }),
        ("hipMalloc", RetKind::HipError),
        ("hipExtModuleLaunchKernel", RetKind::HipError),
        ("__hipPushCallConfiguration", RetKind::HipError),
        ("roctxRangePushA", RetKind::Int { bits: 32, signed: true }),
        ("roctxRangeStartA", RetKind::Int { bits: 64, signed: false }),
        ("roctxMarkA", RetKind::Void),
        ("cuLaunchKernel", RetKind::CuResult),
        ("cudaMalloc", RetKind::CudaError),
    ] {
        let s = spec_for(n, Lib::of_name(n));
        assert_eq!(s.ret, k, "{n}");
        assert_eq!(s.ret.is_error_code(), matches!(k, RetKind::HipError | RetKind::CuResult | RetKind::CudaError), "{n}");
    }
    // Not described anywhere: unknown, never an error.
    assert_eq!(spec_for("hipNoSuchApi", Lib::Hip).ret, RetKind::Unknown);
    assert_eq!(spec_for("cuNoSuchApi", Lib::Cuda).ret, RetKind::Unknown);
    // The header table is sorted (binary search) and names are unique.
    let t = super::super::hip_returns::HIP_HEADER_RETURNS;
    assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
}

#[test]
fn return_values_are_stored_by_kind() {
    let raw = 0xdead_beef_ffff_fffe_u64;
    assert_eq!(RetKind::HipError.value(raw), Some(-2));
    assert_eq!(RetKind::HipError.value(101), Some(101));
    assert_eq!(RetKind::Pointer.value(0x7f12_3456_7890), Some(0x7f12_3456_7890));
    assert_eq!(RetKind::Bool.value(0xffff_ff00), Some(0));
    assert_eq!(RetKind::Bool.value(0xffff_ff01), Some(1));
    assert_eq!(RetKind::Int { bits: 32, signed: true }.value(raw), Some(-2));
    assert_eq!(RetKind::Int { bits: 32, signed: false }.value(raw), Some(0xffff_fffe));
    assert_eq!(RetKind::Int { bits: 8, signed: false }.value(raw), Some(0xfe));
    assert_eq!(RetKind::Int { bits: 64, signed: false }.value(raw), Some(raw as i64));
    assert_eq!(RetKind::Void.value(raw), None);
    assert_eq!(RetKind::Other.value(raw), None);
    assert_eq!(RetKind::Unknown.value(raw), Some(raw as i64));
    for k in [
        RetKind::HipError,
        RetKind::CuResult,
        RetKind::CudaError,
        RetKind::Pointer,
        RetKind::Bool,
        RetKind::Void,
        RetKind::Other,
        RetKind::Unknown,
        RetKind::Int { bits: 8, signed: true },
        RetKind::Int { bits: 16, signed: false },
        RetKind::Int { bits: 32, signed: true },
        RetKind::Int { bits: 64, signed: false },
    ] {
        assert_eq!(RetKind::parse(k.name()), Some(k));
    }
    assert_eq!(RetKind::parse("hipError_t; DROP TABLE"), None);
}

#[test]
fn argument_meanings_come_from_the_table() {
    // hipStreamWaitEvent(stream, event, flags): a0 event, a1 flags, a3 stream.
    let m = find("hipStreamWaitEvent").unwrap().arg_meanings();
    let names: Vec<Option<&str>> = m.iter().map(|a| a.map(|a| a.name)).collect();
    assert_eq!(names, [Some("event"), Some("flags"), None, Some("stream")]);
    let m = find("hipLaunchKernel").unwrap().arg_meanings();
    assert_eq!(m[1], Some(ArgMeaning { name: "shared_mem_bytes", hex: false }));
    assert_eq!(find("hipMemcpy").unwrap().arg_meanings()[3], None, "no stream argument");
    assert_eq!(generic(Lib::Hip, "hipApiName").arg_meanings()[2], Some(ArgMeaning { name: "a2", hex: true }));
    for s in APIS {
        let m = s.arg_meanings();
        for (i, a) in m.iter().enumerate().filter_map(|(i, a)| a.map(|a| (i, a))) {
            assert!(!a.name.is_empty() && a.name.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'), "{}", s.name);
            assert!(!m[..i].iter().flatten().any(|b| b.name == a.name), "{}: {} twice", s.name, a.name);
        }
    }
}

#[test]
fn an_int_output_keeps_only_its_four_bytes() {
    // hipGetDeviceCount(int*): the probe reads 8 bytes at the pointer; the next 4 are not
    // the count.
    let d = decode_call("hipGetDeviceCount", &[0x7ffd_0000_0010], Some(0xdead_beef_0000_0002));
    assert_eq!(d.rtl.a[0], Some(2));
    let d = decode_call("hipGetDevice", &[0x7ffd_0000_0010], Some(0x1234_5678_ffff_ffff));
    assert_eq!(d.rtl.a[0], Some(-1));
    // A pointer output is kept whole.
    let d = decode_call("hipStreamCreate", &[0x7ffd_0000_0010], Some(0x5555_0000_1230));
    assert_eq!(d.rtl.a[0], Some(0x5555_0000_1230));
}

#[test]
fn gpu_work_and_kernel_naming_are_table_facts() {
    for n in [
        "hipLaunchKernel",
        "hipMemcpyAsync",
        "hipMemsetAsync",
        "hipGraphLaunch",
        "hipEventRecord",
        "hipEventRecordWithFlags",
        "hipStreamWaitEvent",
        "hipLaunchHostFunc",
        "hipStreamAddCallback",
        "hipMemset2D",
        "hipMemset2DAsync",
        "hipMemPrefetchAsync",
        "hipLaunchKernelExC",
        "hipLaunchByPtr",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "cuLaunchKernel",
        "cuMemcpyAsync",
    ] {
        assert!(find(n).unwrap().gpu_work, "{n}");
    }
    for n in ["hipMalloc", "hipGetDeviceCount", "hipEventQuery", "hipStreamCreate", "__hipRegisterFunction"] {
        assert!(!find(n).unwrap().gpu_work, "{n}");
    }
    assert!(!generic(Lib::Hip, "hipApiName").gpu_work);
    assert_eq!(find("__hipRegisterFunction").unwrap().kernel_naming, KernelNaming::HostStub);
    assert_eq!(find("__cudaRegisterFunction").unwrap().kernel_naming, KernelNaming::HostStub);
    for n in ["hipModuleGetFunction", "cuModuleGetFunction", "cuLibraryGetKernel"] {
        let s = find(n).unwrap();
        assert_eq!((s.kernel_naming, s.out_arg.is_some(), s.string_arg.is_some()), (KernelNaming::OutHandle, true, true), "{n}");
    }
}

#[test]
fn hip_apis_are_recognised() {
    for n in ["hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipCreateSurfaceObject", "hipDestroySurfaceObject", "hipMalloc"] {
        assert!(is_hip_api(n), "{n}");
    }
    for n in ["hipLaunchKernelGGLImpl", "amd_dbgapi_get_build_id", "hipNoSuchApi", "cuLaunchKernel", "malloc"] {
        assert!(!is_hip_api(n), "{n}");
    }
}

#[test]
fn issue_minimum_set_is_in_default() {
    for n in [
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipLaunchCooperativeKernel",
        "hipGraphLaunch",
        "hipGraphInstantiate",
        "hipStreamBeginCapture",
        "hipStreamEndCapture",
        "hipMalloc",
        "hipHostMalloc",
        "hipMallocAsync",
        "hipMallocManaged",
        "hipFree",
        "hipHostFree",
        "hipMemcpy",
        "hipMemcpyAsync",
        "hipMemset",
        "hipMemsetAsync",
        "hipStreamCreate",
        "hipStreamDestroy",
        "hipStreamSynchronize",
        "hipStreamQuery",
        "hipStreamWaitEvent",
        "hipEventRecord",
        "hipEventElapsedTime",
        "hipDeviceSynchronize",
        "hipSetDevice",
        "hipModuleLoad",
        "hipModuleGetFunction",
        "roctxRangePushA",
        "roctxRangePop",
        "roctxRangeStartA",
        "roctxRangeStop",
        "roctxMarkA",
    ] {
        assert!(find(n).is_some_and(|s| s.default), "{n} missing from the default set");
    }
    assert!(!find("hipGetDevice").unwrap().default);
    assert!(!find("hipGetLastError").unwrap().default);
}
