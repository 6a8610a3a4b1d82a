//! The probes: which APIs ([`apis`], with [`hip_returns`] generated from the HIP headers),
//! where ([`library`], [`symbols`], [`demangle`], found and read off the event loop by [`scan`],
//! through [`untrusted`]), which of them ([`selection`]), the kernel objects ([`ebpf_object`]
//! loads them, [`loader`] attaches them, [`call_slots`] reads what they parked) and the kernel facts they need ([`btf`], [`dynamic_loader`]).
pub mod apis;
pub mod btf;
pub mod call_slots;
// Bounded demangling, shared with the trace readers.
pub use rtl_trace::demangle;
pub mod dynamic_loader;
pub mod ebpf_object;
pub mod hip_returns;
pub mod library;
pub mod loader;
pub mod scan;
pub mod selection;
pub mod symbols;
pub mod untrusted;

use std::path::Path;

use anyhow::Result;

/// `rtl-ebpf list-apis`: what would be probed in a library, and what it lacks, written to `out`
/// (names and paths escaped: they come from the library file).
pub fn list_apis(lib: Option<&Path>, sel: &selection::ApiSelection, runtime: library::Runtime, out: &mut dyn std::io::Write) -> Result<()> {
    let (path, kind) = match lib {
        Some(p) => (p.to_path_buf(), library::LibKind::of(p).unwrap_or(runtime.primary())),
        None => library::installed_for(runtime, None, &[], None)
            .into_iter()
            .find(|l| l.kind == runtime.primary())
            .map(|l| (l.path, l.kind))
            .ok_or_else(|| anyhow::anyhow!("no {} found in the usual paths: pass --lib PATH", runtime.library_name()))?,
    };
    let want = match kind {
        library::LibKind::Roctx => apis::Lib::Roctx,
        library::LibKind::Cuda => apis::Lib::Cuda,
        library::LibKind::Cudart => apis::Lib::Cudart,
        library::LibKind::Nvtx => apis::Lib::Nvtx,
        library::LibKind::Hip | library::LibKind::Agent | library::LibKind::Loader => apis::Lib::Hip,
    };
    let syms = symbols::Symbols::read(&path)?;
    let names: Vec<String> = match sel {
        // Names as given (whatever their prefix): list-apis also answers "does it export X?".
        selection::ApiSelection::Names(v) => v.clone(),
        _ => selection::select(sel, want, &syms).into_iter().map(|(n, _)| n).collect(),
    };
    writeln!(out, "{}: {} exported functions", crate::term::path(&path), syms.len())?;
    let (mut have, mut missing) = (0, Vec::new());
    for n in &names {
        let spec = apis::spec_for(n, apis::Lib::of_name(n));
        match syms.export(n) {
            Some((cxx, off)) => {
                have += 1;
                let how = if apis::find(n).is_some() { "decoded" } else { "generic" };
                let via = cxx.map(|e| format!("  C++ symbol {}", shown(&e.signature))).unwrap_or_default();
                writeln!(out, "  {:<40} offset {off:#x}  {how}  returns {}{via}", shown(n), spec.ret.name())?;
            }
            None => missing.push(shown(n)),
        }
        for o in syms.overloads(n) {
            writeln!(out, "  {:<40} not probed: C++ overload {} at {:#x}", "", shown(&o.signature), o.offset)?;
        }
    }
    writeln!(out, "{have} would be probed; not exported: {}", if missing.is_empty() { "none".into() } else { missing.join(", ") })?;
    Ok(())
}

/// A name read from a library file, safe to print on a terminal (see [`crate::term`]).
fn shown(s: &str) -> String {
    crate::term::escape(s).into_owned()
}
