//! The GPU source an agent uses: the contract between the collector's `--gpu` and the agent's
//! `RTL_AGENT_GPU` (the collector writes [`GpuSource::name`], the agent reads it back with
//! [`GpuSource::parse`]).

/// Where a process's GPU times come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuSource {
    /// HIP: `hipProfiler*Ext` when the runtime has it, else HSA capture (when the agent is loaded
    /// as an HSA tool too); CUDA: CUPTI.
    Auto,
    /// HIP CLR's `hipProfiler*Ext`.
    Clr,
    /// HSA signal capture (stock ROCm).
    Hsa,
    /// NVIDIA CUPTI activity records.
    Cupti,
    /// No GPU times: the CPU side only.
    None,
}

impl GpuSource {
    /// Every source, in the order the collector's `--gpu` lists them.
    pub const ALL: [GpuSource; 5] = [GpuSource::Auto, GpuSource::Clr, GpuSource::Hsa, GpuSource::Cupti, GpuSource::None];

    /// Its spelling, on the collector's command line (`--gpu`) and in `RTL_AGENT_GPU`.
    pub const fn name(self) -> &'static str {
        match self {
            GpuSource::Auto => "auto",
            GpuSource::Clr => "clr",
            GpuSource::Hsa => "hsa",
            GpuSource::Cupti => "cupti",
            GpuSource::None => "none",
        }
    }

    /// Reads a spelling as the agent takes `RTL_AGENT_GPU`: a [`name`](Self::name) in any case,
    /// surrounding whitespace ignored; empty means `auto` and `off` means `none`. `None`: not a
    /// source.
    pub fn parse(s: &str) -> Option<GpuSource> {
        let s = s.trim();
        if s.is_empty() {
            return Some(GpuSource::Auto);
        }
        if s.eq_ignore_ascii_case("off") {
            return Some(GpuSource::None);
        }
        GpuSource::ALL.into_iter().find(|g| s.eq_ignore_ascii_case(g.name()))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_source() {
        for g in GpuSource::ALL {
            assert_eq!(GpuSource::parse(g.name()), Some(g), "{g:?}");
            assert_eq!(GpuSource::parse(&std::format!("  {}\n", g.name().to_ascii_uppercase())), Some(g), "{g:?}");
        }
        assert_eq!(GpuSource::parse(""), Some(GpuSource::Auto));
        assert_eq!(GpuSource::parse("off"), Some(GpuSource::None));
        assert_eq!(GpuSource::parse("rocprof"), None);
    }
}
