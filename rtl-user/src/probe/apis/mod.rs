//! The curated API table: which functions `--apis default` probes, how many stack words each
//! needs, which argument is a string or an output pointer, and how its arguments are decoded into
//! trace columns. Two runtime profiles share it (`--runtime`): HIP (libamdhip64, libroctx64) and
//! CUDA (the driver libcuda, the runtime libcudart, NVTX); only the rows differ, not the code.
//!
//! CUDA: every runtime call PyTorch makes lands in an exported driver function (measured on an
//! H200: 1056 cudaLaunchKernel = 1056 cuLaunchKernel, cudaGraphLaunch = cuGraphLaunch,
//! cudaMemcpyAsync -> cuMemcpy{HtoD,DtoH}Async_v2), and libraries that link the runtime
//! statically (cuBLAS, cuDNN) or call the driver directly (Triton) reach only the driver. So the
//! default CUDA set is the driver's; the runtime's rows are decoded too but off by default
//! (name them with `--apis`; a runtime launch then also yields the driver launch it makes).
//!
//! Argument positions follow the x86-64 SysV ABI: integer arguments 1-6 in rdi, rsi, rdx, rcx,
//! r8, r9 (`args[0..6]`), later ones on the stack (`args[6..]`). A `dim3` (three u32, 12 bytes)
//! is passed by value in TWO registers: x | y << 32 in the first, z in the second.
//!
//! Files: `spec.rs` (the row's types), `rows.rs` (the constructors rows are written with), the
//! rows by family in `hip.rs` and `cuda.rs`; here the table as one list and its lookups.

mod cuda;
mod hip;
mod rows;
mod spec;

pub use spec::*;

use rows::{base, h};

/// `parts` as one array of `N` rows, in order (at compile time).
const fn concat<const N: usize>(parts: &[&[ApiSpec]]) -> [ApiSpec; N] {
    let mut out = [parts[0][0]; N];
    let (mut k, mut p) = (0, 0);
    while p < parts.len() {
        let mut i = 0;
        while i < parts[p].len() {
            out[k] = parts[p][i];
            k += 1;
            i += 1;
        }
        p += 1;
    }
    assert!(k == N, "the table's length is the sum of its parts");
    out
}

const ROWS: usize = hip::HIP.len() + cuda::CUDA.len();
static TABLE: [ApiSpec; ROWS] = concat(&[hip::HIP, cuda::CUDA]);

/// The curated table. Order is irrelevant; names are unique.
pub static APIS: &[ApiSpec] = &TABLE;

/// Looks an API up by its (unversioned) name in the curated table.
pub fn find(name: &str) -> Option<&'static ApiSpec> {
    APIS.iter().find(|s| s.name == name)
}

/// The return kind Debian's HIP headers declare for a function (generated: [`super::hip_returns`]).
pub fn header_return(name: &str) -> Option<RetKind> {
    let t = super::hip_returns::HIP_HEADER_RETURNS;
    t.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| t[i].1)
}

/// Is `name` a HIP API: a HIP function of the curated table, or a `hip*` function the HIP
/// headers declare. (What a global-namespace C++ export must demangle to, to be probed.)
pub fn is_hip_api(name: &str) -> bool {
    find(name).is_some_and(|s| s.lib == Lib::Hip) || (name.starts_with("hip") && header_return(name).is_some())
}

/// The spec of any probed function: the curated one, else the generic one.
pub fn spec_for(name: &str, lib: Lib) -> ApiSpec {
    find(name).copied().unwrap_or_else(|| generic(lib, name))
}

/// What this table says an API's `ret` and `a0..a3` hold ([`rtl_trace::api_meaning::ApiFacts`]):
/// what migrating a trace written before traces recorded it (`rtl_api_meaning`) fills in.
pub fn meaning_of(name: &str) -> rtl_trace::api_meaning::ApiMeaning {
    let spec = spec_for(name, Lib::of_name(name));
    rtl_trace::api_meaning::ApiMeaning { ret: spec.ret, args: spec.arg_meanings() }
}

/// The spec `--apis all` uses for an exported function outside the curated table: the first
/// four register arguments, raw, and the return kind the HIP headers declare (unknown for
/// other libraries, whose headers are not on the machine).
pub fn generic(lib: Lib, name: &str) -> ApiSpec {
    const RAW: [Option<ArgField>; 4] = [h("a0", 0), h("a1", 1), h("a2", 2), h("a3", 3)];
    let ret = match lib {
        Lib::Hip => header_return(name).unwrap_or(RetKind::Unknown),
        _ => RetKind::Unknown,
    };
    let mut s = base("", lib, Decode::Args(RAW), ret);
    s.default = false;
    s
}
#[cfg(test)]
mod tests;
