//! What a trace's `rtl_api.ret` and `a0..a3` mean, per API, as the trace itself records them
//! (`rtl_api_meaning`, written by the collector with each API's first call, or by migration for
//! older files): readers never guess from an API's name. The names come from a file another
//! user may have shaped: anything but a short identifier is replaced by the column's own name.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use crate::api_meaning::RetKind;
use crate::schema::PROFILER_ONLY_ARGS;

/// `rtl_api_meaning.ret_kind` values whose non-zero returns are failures, for SQL `IN`.
pub(crate) const ERROR_KINDS_SQL: &str = "('hipError_t', 'CUresult', 'cudaError_t')";

/// The raw column names, for values without a recorded meaning.
pub(crate) const RAW: [&str; 4] = ["a0", "a1", "a2", "a3"];

/// One API's meaning.
#[derive(Debug, Clone)]
pub(crate) struct Meaning {
    pub ret: RetKind,
    /// Name and "show in hex" of a0..a3; None: nothing is recorded there.
    pub args: [Option<(String, bool)>; 4],
}

fn identifier(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// apiName_id -> meaning, for every API the trace describes.
pub(crate) fn load(conn: &Connection) -> Result<HashMap<i64, Meaning>> {
    let mut st = conn.prepare("SELECT apiName_id, ret_kind, a0, a1, a2, a3, hex FROM rtl_api_meaning")?;
    let mut rows = st.query([])?;
    let mut out = HashMap::new();
    while let Some(r) = rows.next()? {
        let id: i64 = r.get(0)?;
        let ret = r.get::<_, Option<String>>(1)?.as_deref().and_then(RetKind::parse).unwrap_or(RetKind::Unknown);
        let hex: i64 = r.get::<_, Option<i64>>(6)?.unwrap_or(0);
        let mut args: [Option<(String, bool)>; 4] = Default::default();
        for (i, a) in args.iter_mut().enumerate() {
            let name: Option<String> = r.get(2 + i)?;
            *a = name.map(|n| {
                let n = if identifier(&n) { n } else { RAW[i].to_string() };
                (n, hex & (1 << i) != 0)
            });
        }
        out.insert(id, Meaning { ret, args });
    }
    Ok(out)
}

/// The name and "show in hex" of column `i` (0..4) on a row of API `m` with status `status`.
/// Profiler-only rows (status 5) have their own fixed meaning; a value the trace does not
/// describe is shown raw (`aN`, hex).
pub(crate) fn arg(m: Option<&Meaning>, status: i64, i: usize) -> (&str, bool) {
    if status == 5 {
        return match PROFILER_ONLY_ARGS[i] {
            Some(n) => (n, n == "stream"),
            None => (RAW[i], true),
        };
    }
    match m.and_then(|m| m.args[i].as_ref()) {
        Some((n, hex)) => (n.as_str(), *hex),
        None => (RAW[i], true),
    }
}

/// Meaning of `rtl_api.status` (the writer's `CallStatus`).
pub(crate) fn status_name(status: i64) -> &'static str {
    match status {
        0 => "complete",
        1 => "thread exited inside the call",
        2 => "exec inside the call",
        3 => "trace ended inside the call",
        4 => "return lost (unmatched)",
        5 => "seen by the profiler only",
        _ => "unknown status",
    }
}

/// hipError_t names (hip_runtime_api.h) for the values a call can return.
pub(crate) fn hip_error_name(code: i64) -> String {
    let n = match code {
        0 => "hipSuccess",
        1 => "hipErrorInvalidValue",
        2 => "hipErrorOutOfMemory",
        3 => "hipErrorNotInitialized",
        4 => "hipErrorDeinitialized",
        5 => "hipErrorProfilerDisabled",
        6 => "hipErrorProfilerNotInitialized",
        7 => "hipErrorProfilerAlreadyStarted",
        8 => "hipErrorProfilerAlreadyStopped",
        9 => "hipErrorInvalidConfiguration",
        12 => "hipErrorInvalidPitchValue",
        13 => "hipErrorInvalidSymbol",
        17 => "hipErrorInvalidDevicePointer",
        21 => "hipErrorInvalidMemcpyDirection",
        35 => "hipErrorInsufficientDriver",
        52 => "hipErrorMissingConfiguration",
        53 => "hipErrorPriorLaunchFailure",
        98 => "hipErrorInvalidDeviceFunction",
        100 => "hipErrorNoDevice",
        101 => "hipErrorInvalidDevice",
        200 => "hipErrorInvalidImage",
        201 => "hipErrorInvalidContext",
        202 => "hipErrorContextAlreadyCurrent",
        205 => "hipErrorMapFailed",
        206 => "hipErrorUnmapFailed",
        207 => "hipErrorArrayIsMapped",
        208 => "hipErrorAlreadyMapped",
        209 => "hipErrorNoBinaryForGpu",
        210 => "hipErrorAlreadyAcquired",
        211 => "hipErrorNotMapped",
        212 => "hipErrorNotMappedAsArray",
        213 => "hipErrorNotMappedAsPointer",
        214 => "hipErrorECCNotCorrectable",
        215 => "hipErrorUnsupportedLimit",
        216 => "hipErrorContextAlreadyInUse",
        217 => "hipErrorPeerAccessUnsupported",
        218 => "hipErrorInvalidKernelFile",
        219 => "hipErrorInvalidGraphicsContext",
        300 => "hipErrorInvalidSource",
        301 => "hipErrorFileNotFound",
        302 => "hipErrorSharedObjectSymbolNotFound",
        303 => "hipErrorSharedObjectInitFailed",
        304 => "hipErrorOperatingSystem",
        400 => "hipErrorInvalidHandle",
        401 => "hipErrorIllegalState",
        500 => "hipErrorNotFound",
        600 => "hipErrorNotReady",
        700 => "hipErrorIllegalAddress",
        701 => "hipErrorLaunchOutOfResources",
        702 => "hipErrorLaunchTimeOut",
        704 => "hipErrorPeerAccessAlreadyEnabled",
        705 => "hipErrorPeerAccessNotEnabled",
        708 => "hipErrorSetOnActiveProcess",
        709 => "hipErrorContextIsDestroyed",
        710 => "hipErrorAssert",
        712 => "hipErrorHostMemoryAlreadyRegistered",
        713 => "hipErrorHostMemoryNotRegistered",
        719 => "hipErrorLaunchFailure",
        720 => "hipErrorCooperativeLaunchTooLarge",
        801 => "hipErrorNotSupported",
        900 => "hipErrorStreamCaptureUnsupported",
        901 => "hipErrorStreamCaptureInvalidated",
        902 => "hipErrorStreamCaptureMerge",
        903 => "hipErrorStreamCaptureUnmatched",
        904 => "hipErrorStreamCaptureUnjoined",
        905 => "hipErrorStreamCaptureIsolation",
        906 => "hipErrorStreamCaptureImplicit",
        907 => "hipErrorCapturedEvent",
        908 => "hipErrorStreamCaptureWrongThread",
        910 => "hipErrorGraphExecUpdateFailure",
        999 => "hipErrorUnknown",
        1052 => "hipErrorRuntimeMemory",
        1053 => "hipErrorRuntimeOther",
        _ => return format!("hipError_t {code}"),
    };
    n.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_names_are_replaced() {
        assert!(identifier("shared_mem_bytes") && identifier("a0") && identifier("_x"));
        for bad in ["", "x\"y", "a b", "\u{1b}[31m", "1abc", &"a".repeat(65)] {
            assert!(!identifier(bad), "{bad:?}");
        }
    }
}
