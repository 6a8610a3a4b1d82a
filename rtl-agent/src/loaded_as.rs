//! How this copy of the agent was loaded: the file it lives in, whether that is a shared object
//! (not the rlib linked into the collector), and whether `LD_PRELOAD` names it.

use std::ffi::{c_void, CStr, OsStr};
use std::os::unix::ffi::OsStrExt;

use crate::rtl_agent_publish;

/// Path of the object this code lives in (None: not found).
pub(crate) fn own_object() -> Option<(String, usize)> {
    // SAFETY: dladdr on our own function; the name lives as long as the object.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(rtl_agent_publish as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some((CStr::from_ptr(info.dli_fname).to_string_lossy().into_owned(), info.dli_fbase as usize))
    }
}

/// True when this code is in a shared object (the cdylib), false when the rlib was linked
/// into an executable (the collector appends it with `env_list::append`): then the agent stays off.
pub(crate) fn in_shared_object() -> bool {
    let Some((path, base)) = own_object() else { return false };
    // SAFETY: getauxval has no preconditions.
    let exe_phdr = unsafe { libc::getauxval(libc::AT_PHDR) } as usize;
    let name = path.rsplit('/').next().unwrap_or("");
    (name.contains(".so")) && !(exe_phdr >= base && exe_phdr < base + 4096)
}

pub(crate) fn same_file(a: &OsStr, b: &OsStr) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Whether LD_PRELOAD names this library.
pub(crate) fn preloaded(own: &str) -> bool {
    let Some(v) = std::env::var_os("LD_PRELOAD") else { return false };
    let own_base = own.rsplit('/').next().unwrap_or(own);
    v.as_bytes().split(|&c| c == b':' || c.is_ascii_whitespace()).filter(|e| !e.is_empty()).any(|e| {
        let e = OsStr::from_bytes(e);
        if e.as_bytes().contains(&b'/') {
            same_file(e, OsStr::new(own))
        } else {
            e.as_bytes() == own_base.as_bytes()
        }
    })
}
