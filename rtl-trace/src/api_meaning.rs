//! What `rtl_api.ret` and `a0..a3` hold for an API: the vocabulary of `rtl_api_meaning`, which
//! the collector writes with each API's first call (from its API table, `probe/apis/` in
//! rtl-user) and the readers read back (`read/meaning.rs`).

/// What a trace column `a0..a3` holds for an API: a name (`stream`, `bytes`, ...) and whether
/// it is an address, handle or bit mask (shown in hex) rather than a count or a number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArgMeaning {
    pub name: &'static str,
    pub hex: bool,
}

/// What a function's return register (rax) holds, per its C return type. The trace stores the
/// value as [`RetKind::value`] says, and only error codes (`hipError_t`, `CUresult`,
/// `cudaError_t`) count as failures when not 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetKind {
    /// `hipError_t` (32-bit enum): 0 success, anything else a failure.
    HipError,
    /// `CUresult` (CUDA driver): 0 success.
    CuResult,
    /// `cudaError_t` (CUDA runtime): 0 success.
    CudaError,
    /// Any pointer (`const char*`, `void**`, a handle): the full 64-bit value.
    Pointer,
    /// `bool`: the low byte.
    Bool,
    /// A C integer or a non-error enum, `bits` wide (8, 16, 32 or 64).
    Int { bits: u8, signed: bool },
    /// `void`: the register holds nothing; not stored.
    Void,
    /// A return the register does not hold as a value (a float, a struct returned by value):
    /// not stored.
    Other,
    /// Not known (a function neither the table nor the HIP headers describe): the raw register
    /// is stored and shown as it is, never counted as a failure.
    Unknown,
}

impl RetKind {
    /// An error code, whose non-zero values are failures.
    pub const fn is_error_code(self) -> bool {
        matches!(self, Self::HipError | Self::CuResult | Self::CudaError)
    }

    /// The value `rtl_api.ret` stores for a raw return register, or None when it holds none.
    pub fn value(self, raw: u64) -> Option<i64> {
        match self {
            Self::HipError | Self::CuResult | Self::CudaError => Some(raw as u32 as i32 as i64),
            Self::Pointer | Self::Unknown => Some(raw as i64),
            Self::Bool => Some((raw as u8 != 0) as i64),
            Self::Int { bits, signed } => {
                let shift = 64 - u32::from(bits.clamp(8, 64));
                Some(if signed { ((raw << shift) as i64) >> shift } else { ((raw << shift) >> shift) as i64 })
            }
            Self::Void | Self::Other => None,
        }
    }

    /// The name the trace records (`rtl_api_meaning.ret_kind`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::HipError => "hipError_t",
            Self::CuResult => "CUresult",
            Self::CudaError => "cudaError_t",
            Self::Pointer => "pointer",
            Self::Bool => "bool",
            Self::Int { bits: 8, signed: true } => "int8",
            Self::Int { bits: 8, signed: false } => "uint8",
            Self::Int { bits: 16, signed: true } => "int16",
            Self::Int { bits: 16, signed: false } => "uint16",
            Self::Int { bits: 32, signed: true } => "int32",
            Self::Int { bits: 32, signed: false } => "uint32",
            Self::Int { bits: _, signed: true } => "int64",
            Self::Int { bits: _, signed: false } => "uint64",
            Self::Void => "void",
            Self::Other => "other",
            Self::Unknown => "unknown",
        }
    }

    /// Reads a name written by [`RetKind::name`]; None for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let int = |bits, signed| Some(Self::Int { bits, signed });
        match s {
            "hipError_t" => Some(Self::HipError),
            "CUresult" => Some(Self::CuResult),
            "cudaError_t" => Some(Self::CudaError),
            "pointer" => Some(Self::Pointer),
            "bool" => Some(Self::Bool),
            "int8" => int(8, true),
            "uint8" => int(8, false),
            "int16" => int(16, true),
            "uint16" => int(16, false),
            "int32" => int(32, true),
            "uint32" => int(32, false),
            "int64" => int(64, true),
            "uint64" => int(64, false),
            "void" => Some(Self::Void),
            "other" => Some(Self::Other),
            "unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

/// The trace's `rtl_api_meaning.hex`: bit N set when aN is shown in hex.
pub fn hex_mask(m: &[Option<ArgMeaning>; 4]) -> i64 {
    (0..4).filter(|&i| m[i].is_some_and(|a| a.hex)).fold(0, |h, i| h | 1 << i)
}

/// One API's meaning: what its return and `a0..a3` hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiMeaning {
    pub ret: RetKind,
    pub args: [Option<ArgMeaning>; 4],
}

/// A collector's API table, asked only when migrating a trace written before traces recorded
/// their meanings (rtl_schema_version 1, no `rtl_api_meaning`): API name -> meaning. rtl-user
/// passes its table (`rtl_user::probe::apis::meaning_of`); without one, [`unknown`].
pub type ApiFacts = fn(&str) -> ApiMeaning;

/// No API table: returns of unknown kind (shown raw, never counted as failures) and `a0..a3`
/// described as nothing (shown raw, in hex).
pub fn unknown(_api: &str) -> ApiMeaning {
    ApiMeaning { ret: RetKind::Unknown, args: [None; 4] }
}
