//! The probes: which APIs ([`apis`]), where ([`library`], [`symbols`]), the kernel objects
//! ([`loader`]) and tracefs ([`tracefs`]).
pub mod apis;
pub mod btf;
pub mod library;
pub mod loader;
pub mod symbols;
pub mod tracefs;

use std::path::Path;

use anyhow::Result;

/// `rtl-ebpf list-apis`: what would be probed in a library, and what it lacks.
pub fn list_apis(lib: Option<&Path>, sel: &loader::ApiSelection) -> Result<()> {
    let path = match lib {
        Some(p) => p.to_path_buf(),
        None => library::installed(None, &[])
            .into_iter()
            .find(|l| l.kind == library::LibKind::Hip)
            .map(|l| l.path)
            .ok_or_else(|| anyhow::anyhow!("no libamdhip64 found in the usual paths: pass --lib PATH"))?,
    };
    let syms = symbols::Symbols::read(&path)?;
    let names: Vec<String> = match sel {
        loader::ApiSelection::Default => apis::APIS.iter().filter(|s| s.default && s.lib == apis::Lib::Hip).map(|s| s.name.to_string()).collect(),
        loader::ApiSelection::All => syms.names_with_prefix("hip").into_iter().map(String::from).collect(),
        loader::ApiSelection::Names(v) => v.clone(),
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
