//! tracefs: where tracepoint ids and record formats live.
//!
//! Tracepoints are attached through perf with an id read from tracefs. Some machines (ours
//! included) boot without tracefs mounted; we mount it at /sys/kernel/tracing when it is
//! missing (harmless, and what `perf` and `bpftrace` expect too) and say so.

use std::path::Path;

use anyhow::{bail, Context, Result};

pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Mounts tracefs at /sys/kernel/tracing unless it (or debugfs' tracing dir) is there.
/// Returns true if it mounted it.
pub fn ensure_mounted() -> Result<bool> {
    if Path::new(TRACEFS).join("events").is_dir() || Path::new("/sys/kernel/debug/tracing/events").is_dir() {
        return Ok(false);
    }
    let src = c"tracefs";
    let dst = c"/sys/kernel/tracing";
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe { libc::mount(src.as_ptr(), dst.as_ptr(), src.as_ptr(), 0, std::ptr::null()) };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        bail!("tracefs is not mounted and mounting it at {TRACEFS} failed: {err} (mount it: `mount -t tracefs nodev {TRACEFS}`)");
    }
    Ok(true)
}

fn events_dir() -> &'static str {
    if Path::new(TRACEFS).join("events").is_dir() {
        "/sys/kernel/tracing/events"
    } else {
        "/sys/kernel/debug/tracing/events"
    }
}

/// Field offsets of the sched_process_fork record.
pub struct ForkFormat {
    pub parent_pid_offset: u64,
    pub child_pid_offset: u64,
}

/// child_pid offsets task_fork can read (the verifier needs constants).
pub const SUPPORTED_CHILD_PID_OFFSETS: [u64; 2] = [20, 44];

pub struct FormatFile(&'static str);

pub static FORK_FORMAT: FormatFile = FormatFile("sched/sched_process_fork/format");

impl FormatFile {
    pub fn read(&self) -> Result<ForkFormat> {
        let path = format!("{}/{}", events_dir(), self.0);
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        parse_fork_format(&text).with_context(|| format!("parsing {path}"))
    }
}

/// Parses `field:pid_t parent_pid;	offset:24;	size:4;	signed:1;` lines.
pub fn parse_fork_format(text: &str) -> Result<ForkFormat> {
    let offset_of = |field: &str| -> Result<u64> {
        for line in text.lines() {
            let line = line.trim();
            let Some(rest) = line.strip_prefix("field:") else { continue };
            let decl = rest.split(';').next().unwrap_or("");
            if decl.split_whitespace().last() != Some(field) {
                continue;
            }
            let off = line
                .split(';')
                .find_map(|p| p.trim().strip_prefix("offset:"))
                .context("field without offset")?;
            return Ok(off.trim().parse()?);
        }
        bail!("no field {field}")
    };
    let f = ForkFormat { parent_pid_offset: offset_of("parent_pid")?, child_pid_offset: offset_of("child_pid")? };
    // rtl-ebpf's task_fork program reads child_pid at one of the offsets it was built for.
    if !SUPPORTED_CHILD_PID_OFFSETS.contains(&f.child_pid_offset) {
        bail!("sched_process_fork has child_pid at offset {}, which this build does not support (supported: {SUPPORTED_CHILD_PID_OFFSETS:?}); `run` cannot follow forks", f.child_pid_offset);
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_format() {
        let t = "name: sched_process_fork\nID: 300\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char parent_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t parent_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:char child_comm[16];\toffset:28;\tsize:16;\tsigned:0;\n\tfield:pid_t child_pid;\toffset:44;\tsize:4;\tsigned:1;\n";
        let f = parse_fork_format(t).unwrap();
        assert_eq!((f.parent_pid_offset, f.child_pid_offset), (24, 44));
        assert!(parse_fork_format("garbage").is_err());
    }
}
