//! Which APIs are probed (`--apis`: the default set, `all`, or names) in each library, and the
//! api ids the probes report them by ([`ProbeTable`], shared by every attached library).

use std::collections::HashMap;

use anyhow::{anyhow, bail, Result};

use super::apis::{self, ApiSpec, Lib};
use super::symbols::Symbols;

/// Which APIs to probe (`--apis`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApiSelection {
    Default,
    All,
    Names(Vec<String>),
}

impl std::str::FromStr for ApiSelection {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "default" => Self::Default,
            "all" => Self::All,
            _ => {
                let v: Vec<String> = s.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect();
                if v.is_empty() {
                    bail!("--apis needs `default`, `all` or a comma-separated list of function names");
                }
                Self::Names(v)
            }
        })
    }
}

/// One probed API: its name and spec. Its index in [`ProbeTable::entries`] is the api id the
/// probes report.
#[derive(Clone, Debug)]
pub struct ProbeEntry {
    pub name: String,
    pub spec: ApiSpec,
}

/// Api id <-> name, shared by every attached library.
#[derive(Debug, Default)]
pub struct ProbeTable {
    pub entries: Vec<ProbeEntry>,
    by_name: HashMap<String, u16>,
}

impl ProbeTable {
    pub(super) fn intern(&mut self, name: &str, spec: ApiSpec) -> Result<u16> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(id);
        }
        let id = u16::try_from(self.entries.len()).map_err(|_| anyhow!("more than 65535 probed APIs"))?;
        self.entries.push(ProbeEntry { name: name.to_string(), spec });
        self.by_name.insert(name.to_string(), id);
        Ok(id)
    }

    pub fn get(&self, id: u32) -> Option<&ProbeEntry> {
        self.entries.get(id as usize)
    }
}

/// The APIs of `selection` that a library of kind `want` gets, with their specs. Names outside
/// the table get the generic spec; names belong to a library by prefix ([`Lib::of_name`]).
/// `all`: every exported function with the library's prefix (C++-only exports under their plain
/// name when they demangle to a HIP API, see [`Symbols`]), plus the table's APIs without the
/// prefix that the library exports (`__hip*` compiler interface, `__cudaRegisterFunction`).
pub fn select(selection: &ApiSelection, want: Lib, syms: &Symbols) -> Vec<(String, ApiSpec)> {
    match selection {
        ApiSelection::Default => apis::APIS.iter().filter(|s| s.default && s.lib == want).map(|s| (s.name.to_string(), *s)).collect(),
        ApiSelection::All => {
            let prefix = want.all_prefix();
            let mut v: Vec<(String, ApiSpec)> = syms
                .names_with_prefix(prefix)
                .into_iter()
                .filter(|n| Lib::of_name(n) == want)
                .filter(|n| match syms.export(n) {
                    Some((Some(_cxx), _)) => apis::find(n).is_some() || (want == Lib::Hip && apis::is_hip_api(n)),
                    _ => true,
                })
                .map(|n| (n.to_string(), apis::spec_for(n, want)))
                .collect();
            v.extend(
                apis::APIS
                    .iter()
                    .filter(|s| s.lib == want && !s.name.starts_with(prefix) && syms.offset(s.name).is_some())
                    .map(|s| (s.name.to_string(), *s)),
            );
            v
        }
        ApiSelection::Names(names) => {
            names.iter().filter(|n| Lib::of_name(n) == want).map(|n| (n.clone(), apis::spec_for(n, want))).collect()
        }
    }
}
