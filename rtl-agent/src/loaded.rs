//! The shared objects this process has loaded, from the dynamic loader's own list
//! (`dl_iterate_phdr`): no file is opened, nothing is loaded. The agent waits for the GPU
//! runtime this way; `dlopen(soname, RTLD_NOLOAD)` for a library that is not loaded yet walks
//! the search path and opens candidate files, on every poll, in every preloaded process.

use std::ffi::{c_int, c_void, CStr};

/// Paths of the loaded objects whose file name starts with one of `prefixes`.
pub fn objects(prefixes: &[&str]) -> Vec<String> {
    struct Ctx<'a> {
        prefixes: &'a [&'a str],
        out: Vec<String>,
    }
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: the loader passes a valid info; data is our Ctx.
        let (info, ctx) = unsafe { (&*info, &mut *(data as *mut Ctx)) };
        if info.dlpi_name.is_null() {
            return 0;
        }
        // SAFETY: the loader's NUL-terminated name of a loaded object.
        let path = unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned();
        let base = path.rsplit('/').next().unwrap_or("");
        if ctx.prefixes.iter().any(|p| base.starts_with(p)) {
            ctx.out.push(path);
        }
        0
    }
    let mut ctx = Ctx { prefixes, out: Vec::new() };
    // SAFETY: the callback only reads the loader's data.
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut ctx as *mut Ctx as *mut c_void) };
    ctx.out
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_libc_and_not_what_is_absent() {
        let libc = super::objects(&["libc.so"]);
        assert!(libc.iter().any(|p| p.contains("libc.so.6")), "{libc:?}");
        assert!(super::objects(&["libamdhip64.so"]).is_empty(), "a unit test process maps no HIP runtime");
    }
}
