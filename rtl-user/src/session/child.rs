//! `run`'s command: its environment (the agent preloaded, the GPU source chosen), started held
//! before exec until the probes are ready for it, and reaped when it exits.

use std::ffi::CString;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use crate::cli::GpuSource;

use crate::probe::library::Runtime;
use crate::run_as::RunAs;

/// Starts `cmd` as `run_as` (root if None) with the agent `agent` preloaded. The command is held
/// before exec until `ready` (given its pid) has made the probes trace it; returns the pid.
pub(super) fn start(
    cmd: &[String],
    agent: Option<&Path>,
    gpu: GpuSource,
    graph_nodes: bool,
    runtime: Runtime,
    run_as: Option<&RunAs>,
    ready: impl FnOnce(u32) -> Result<()>,
) -> Result<libc::pid_t> {
    let env = child_env(agent, gpu, graph_nodes, runtime, run_as);
    let c = spawn_held(cmd, &env, run_as)?;
    let pid = c.pid;
    ready(pid as u32)?;
    c.release()?;
    let user = run_as.map_or_else(|| " as root".to_string(), |u| format!(" as user {} (uid {})", u.name, u.uid));
    crate::term::info(&format!("started `{}` as PID {pid}{user}", cmd.join(" ")));
    Ok(pid)
}

/// The command's environment: ours, with the agent appended to LD_PRELOAD (never replacing what
/// the user set), the GPU source chosen and, with `--graph-nodes`, every graph node timed.
fn child_env(agent: Option<&Path>, gpu: GpuSource, graph_nodes: bool, runtime: Runtime, run_as: Option<&RunAs>) -> Vec<CString> {
    let mut vars: Vec<(String, String)> = std::env::vars().collect();
    if let Some(u) = run_as {
        for (k, v) in u.env() {
            vars.retain(|(n, _)| n != k);
            vars.push((k.to_string(), v));
        }
    }
    if let Some(a) = agent {
        let a = a.display().to_string();
        let set = |vars: &mut Vec<(String, String)>, k: &str, sep: char| {
            let old = vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let new = crate::env_list::append(old.as_deref(), &a, sep);
            vars.retain(|(n, _)| n != k);
            vars.push((k.to_string(), new));
        };
        set(&mut vars, "LD_PRELOAD", ':');
        if graph_nodes {
            vars.retain(|(n, _)| n != "RTL_AGENT_GRAPH_NODES");
            vars.push(("RTL_AGENT_GRAPH_NODES".into(), "1".into()));
        }
        if runtime == Runtime::Cuda {
            // CUDA: the driver calls the agent's InitializeInjection inside cuInit (CUDA processes
            // only); LD_PRELOAD above gives it the exit-path flushes. One injection library only:
            // a user's own is kept, and the agent then starts CUPTI once libcuda is mapped.
            if !vars.iter().any(|(n, v)| n == "CUDA_INJECTION64_PATH" && !v.is_empty()) {
                vars.retain(|(n, _)| n != "CUDA_INJECTION64_PATH");
                vars.push(("CUDA_INJECTION64_PATH".into(), a.clone()));
            }
            vars.retain(|(n, _)| n != "RTL_AGENT_GPU");
            vars.push(("RTL_AGENT_GPU".into(), GpuSource::Cupti.name().into()));
            return vars.into_iter().filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok()).collect();
        }
        // `auto`: the agent prefers hipProfiler*Ext and falls back to HSA capture, which needs it
        // loaded as an HSA tool too.
        if matches!(gpu, GpuSource::Hsa | GpuSource::Auto) {
            set(&mut vars, "HSA_TOOLS_LIB", ' ');
        }
        vars.retain(|(n, _)| n != "RTL_AGENT_GPU");
        vars.push(("RTL_AGENT_GPU".into(), gpu.name().into()));
    }
    vars.into_iter().filter_map(|(k, v)| CString::new(format!("{k}={v}")).ok()).collect()
}

/// A forked child held before exec until the probes are ready for it.
struct HeldChild {
    pid: libc::pid_t,
    go: std::fs::File,
}

impl HeldChild {
    fn release(mut self) -> Result<()> {
        self.go.write_all(b"g").context("releasing the command")?;
        Ok(())
    }
}

fn spawn_held(cmd: &[String], env: &[CString], run_as: Option<&RunAs>) -> Result<HeldChild> {
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|e| e.as_ptr()).collect();
    envp.push(std::ptr::null());
    let argv: Vec<CString> = cmd.iter().map(|a| CString::new(a.as_bytes())).collect::<Result<_, _>>().context("argument contains NUL")?;
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut fds = [0; 2];
    // SAFETY: valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error()).context("pipe");
    }
    // SAFETY: the child only calls async-signal-safe functions (read, close, setgroups, setgid,
    // setuid, execvp, write, _exit).
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error()).context("fork");
    }
    if pid == 0 {
        // SAFETY: as above: only async-signal-safe calls, on fds and NUL-terminated arrays this
        // process owns (argv and envp were built before the fork).
        unsafe {
            libc::close(fds[1]);
            let mut b = 0u8;
            let n = libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            if let Some(u) = run_as {
                if !u.become_in_child() {
                    let msg = b"rtl-ebpf: cannot switch to the invoking user (setgroups/setgid/setuid failed)\n";
                    libc::write(2, msg.as_ptr().cast(), msg.len());
                    libc::_exit(127);
                }
            }
            libc::execvpe(argv_ptrs[0], argv_ptrs.as_ptr(), envp.as_ptr());
            let msg = b"rtl-ebpf: cannot execute the command\n";
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(127);
        }
    }
    // SAFETY: closing our copy of the read end; wrapping the write end we own.
    unsafe { libc::close(fds[0]) };
    let go = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fds[1]) };
    Ok(HeldChild { pid, go })
}

/// Reaps the child if it has exited: its exit code (128 + signal if killed).
pub(super) fn reap(pid: libc::pid_t) -> Option<i32> {
    let mut status = 0;
    // SAFETY: plain waitpid on our child.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r != pid {
        return None;
    }
    if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    }
}

/// Passes a SIGTERM on to the command.
pub(super) fn terminate(pid: libc::pid_t) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::Cli;

    /// `--gpu NAME` reaches the agent as that same source: the collector's spelling (the CLI)
    /// and the agent's reading of `RTL_AGENT_GPU` (`GpuSource::parse`, what rtl-agent's config
    /// uses) round-trip for every source.
    #[test]
    fn every_gpu_source_reaches_the_agent_as_itself() {
        for g in GpuSource::ALL {
            let cli = Cli::try_parse_from(["rtl-ebpf", "--all", "--gpu", g.name()]).unwrap();
            assert_eq!(cli.trace.gpu, g);
            let env = child_env(Some(Path::new("/opt/rtl/librtl_agent.so")), g, false, Runtime::Hip, None);
            let sent: Vec<&str> = env.iter().filter_map(|e| e.to_str().ok()?.strip_prefix("RTL_AGENT_GPU=")).collect();
            assert_eq!(sent.len(), 1, "{g:?}: {sent:?}");
            assert_eq!(GpuSource::parse(sent[0]), Some(g));
        }
        assert!(Cli::try_parse_from(["rtl-ebpf", "--all", "--gpu", "off"]).is_err(), "the CLI takes the names only");
    }
}
