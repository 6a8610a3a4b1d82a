//! Recognizing a CPython interpreter in a mapped file (the `python3.X` executable or
//! `libpython3.X.so`): the data symbols the frame walk starts from, and the version.

use object::{Object, ObjectSection, ObjectSymbol, ReadRef};

/// What a file that holds a CPython interpreter gives: addresses as the file states them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interpreter {
    pub version: (u8, u8),
    /// `_PyRuntime`.
    pub runtime: u64,
    /// `PyCode_Type`, `PyUnicode_Type`, `PyBytes_Type`: what the collector checks objects
    /// against before trusting their layout.
    pub code_type: u64,
    pub unicode_type: u64,
    pub bytes_type: u64,
}

/// The interpreter in `file`, if it defines `_PyRuntime` and its version is known (from
/// `Py_Version`, 3.11+, else from the file name).
pub fn find<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, display: &str) -> Option<Interpreter> {
    let (mut runtime, mut code_type, mut unicode_type, mut bytes_type, mut version_sym) = (None, None, None, None, None);
    for sym in file.dynamic_symbols().chain(file.symbols()) {
        if !sym.is_definition() || sym.address() == 0 {
            continue;
        }
        let slot = match sym.name() {
            Ok("_PyRuntime") => &mut runtime,
            Ok("PyCode_Type") => &mut code_type,
            Ok("PyUnicode_Type") => &mut unicode_type,
            Ok("PyBytes_Type") => &mut bytes_type,
            Ok("Py_Version") => &mut version_sym,
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(sym);
        }
    }
    let runtime = runtime?.address();
    let from_symbol = version_sym.and_then(|s| {
        let section = file.section_by_index(s.section_index()?).ok()?;
        let b = section.data_range(s.address(), 4).ok()??;
        let v = u32::from_le_bytes(b.try_into().ok()?);
        Some(((v >> 24) as u8, (v >> 16) as u8))
    });
    let name = std::path::Path::new(display).file_name()?.to_string_lossy().into_owned();
    let version = from_symbol.or_else(|| super::versions::version_from_name(&name))?;
    Some(Interpreter {
        version,
        runtime,
        code_type: code_type?.address(),
        unicode_type: unicode_type?.address(),
        bytes_type: bytes_type?.address(),
    })
}
