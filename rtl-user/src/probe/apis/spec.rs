//! What the API table says about an API (the [`ApiSpec`] row and its parts): which library,
//! how its arguments are decoded into trace columns, what its return and `a0..a3` hold, whether
//! it causes GPU work or names kernels.

// What `ret` and `a0..a3` hold is the trace's vocabulary (`rtl_api_meaning`): rtl-trace
// defines it; this table says it for each API.
pub use rtl_trace::api_meaning::{hex_mask, ArgMeaning, RetKind};

/// Which library an API lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lib {
    /// libamdhip64.so (HIP runtime).
    Hip,
    /// libroctx64.so (markers).
    Roctx,
    /// libcuda.so (CUDA driver API).
    Cuda,
    /// libcudart.so (CUDA runtime API).
    Cudart,
    /// libnvToolsExt.so / libnvtx3interop.so (NVTX markers).
    Nvtx,
}

impl Lib {
    /// The library a function name belongs to, by its prefix (`--apis` names, `--apis all`).
    pub fn of_name(name: &str) -> Self {
        if name.starts_with("roctx") {
            Self::Roctx
        } else if name.starts_with("nvtx") {
            Self::Nvtx
        } else if name.starts_with("cuda") || name.starts_with("__cuda") {
            Self::Cudart
        } else if name.starts_with("cu") {
            Self::Cuda
        } else {
            Self::Hip
        }
    }

    /// The prefix `--apis all` probes every exported function of.
    pub fn all_prefix(self) -> &'static str {
        match self {
            Self::Hip => "hip",
            Self::Roctx => "roctx",
            Self::Cuda => "cu",
            Self::Cudart => "cuda",
            Self::Nvtx => "nvtx",
        }
    }
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
    /// Generic: record up to four arguments as `a0..a3`, each with its position and meaning;
    /// `a0` is the out value when the API has an output pointer.
    Args([Option<ArgField>; 4]),
    /// hipGraphLaunch(exec, stream): `a0` = graph exec, `a3` = stream.
    GraphLaunch,
    /// roctx marker; see [`MarkerKind`].
    Marker(MarkerKind),
    /// `__hipRegisterFunction(modules, hostFunction, deviceFunction, ...)`: names a host stub.
    RegisterFunction,
}

/// One of `a0..a3` for [`Decode::Args`]: which argument, and what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgField {
    /// Argument index (0-based, SysV order; 6 and up are stack words).
    pub pos: u8,
    pub meaning: ArgMeaning,
}

/// How a call names kernels (the joiner keeps (pid, handle) -> name for launches to use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelNaming {
    No,
    /// `__hipRegisterFunction`: argument 1 is the host stub launches pass, the captured string
    /// the (mangled) device function name.
    HostStub,
    /// `hipModuleGetFunction`-like: the out value is the handle, the captured string the name.
    OutHandle,
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
    /// `(const CUlaunchConfig* config, CUfunction f, void** params, void** extra)`
    /// (cuLaunchKernelEx): f = 1; grid, block, shared memory and stream are behind the config
    /// pointer, which the entry probe does not read, so the kernel row has them as 0;
    /// `a0` = f, `a1` = the config pointer.
    Config,
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
    /// What that output value is: the probe reads 8 bytes there, of which an `int*` output
    /// (hipGetDeviceCount) owns only the low 4.
    pub out_value: RetKind,
    pub decode: Decode,
    /// In `--apis default`.
    pub default: bool,
    /// What the return register holds.
    pub ret: RetKind,
    /// The call can put work on a GPU queue (or wait for it): the GPU join keeps it for
    /// matching profiler records. Launches, copies, memsets and graph launches always do.
    pub gpu_work: bool,
    pub kernel_naming: KernelNaming,
}

impl ApiSpec {
    /// What `a0..a3` hold in the trace for this API (None: nothing is recorded there).
    pub fn arg_meanings(&self) -> [Option<ArgMeaning>; 4] {
        const fn m(name: &'static str, hex: bool) -> Option<ArgMeaning> {
            Some(ArgMeaning { name, hex })
        }
        let stream = |s: Option<u8>| s.and(m("stream", true));
        match self.decode {
            Decode::None | Decode::Marker(_) => [None; 4],
            Decode::Launch(LaunchForm::Config) => [m("function", true), m("config", true), None, None],
            Decode::Launch(_) => [m("function", true), m("shared_mem_bytes", false), None, m("stream", true)],
            Decode::Copy(c) => [m("dst", true), m("bytes", false), m("copy_kind", false), stream(c.stream)],
            Decode::Alloc { flags, stream: st, .. } => [m("ptr", true), m("bytes", false), flags.and(m("flags", true)), stream(st)],
            Decode::Free { stream: st } => [m("ptr", true), None, None, stream(st)],
            Decode::Memset { stream: st, .. } => [m("dst", true), m("bytes", false), m("value", false), stream(st)],
            Decode::GraphLaunch => [m("graph_exec", true), None, None, m("stream", true)],
            Decode::RegisterFunction => [m("host_function", true), None, None, None],
            Decode::Args(v) => v.map(|f| f.map(|f| f.meaning)),
        }
    }
}
