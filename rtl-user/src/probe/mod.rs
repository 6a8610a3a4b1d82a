//! The probes: which APIs ([`apis`]), where ([`library`], [`symbols`]), the kernel objects
//! ([`loader`]) and the kernel facts they need ([`btf`], [`dynamic_loader`]).
pub mod apis;
pub mod btf;
pub mod dynamic_loader;
pub mod library;
pub mod loader;
pub mod symbols;

use std::path::Path;

use anyhow::Result;

/// `rtl-ebpf list-apis`: what would be probed in a library, and what it lacks.
pub fn list_apis(lib: Option<&Path>, sel: &loader::ApiSelection, runtime: library::Runtime) -> Result<()> {
    let (path, kind) = match lib {
        Some(p) => (p.to_path_buf(), library::LibKind::of(p).unwrap_or(runtime.primary())),
        None => library::installed_for(runtime, None, &[], None)
            .into_iter()
            .find(|l| l.kind == runtime.primary())
            .map(|l| (l.path, l.kind))
            .ok_or_else(|| {
                anyhow::anyhow!("no {} found in the usual paths: pass --lib PATH", runtime.library_name())
            })?,
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
        loader::ApiSelection::Names(v) => v.clone(),
        _ => loader::select(sel, want, &syms).into_iter().map(|(n, _)| n).collect(),
    };
    println!("{}: {} exported functions", path.display(), syms.len());
    let (mut have, mut missing) = (0, Vec::new());
    for n in &names {
        match syms.offset(n) {
            Some(off) => {
                have += 1;
                let how = if apis::find(n).is_some() { "decoded" } else { "generic" };
                println!("  {n:<40} offset {off:#x}  {how}");
            }
            None => missing.push(n.as_str()),
        }
    }
    println!("{have} would be probed; not exported: {}", if missing.is_empty() { "none".into() } else { missing.join(", ") });
    Ok(())
}
