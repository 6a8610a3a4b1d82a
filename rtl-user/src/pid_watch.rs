//! The processes `attach --pid` traces, watched through pidfds: the session stops when every one
//! of them has exited (unless `--keep-waiting`). A pidfd names the process itself, not its
//! number: a pid reused by a new process after the traced one exited is not mistaken for it,
//! and a zombie (exited, not yet reaped by its parent) counts as exited.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{anyhow, Result};

use crate::error::Fatal;

pub struct PidWatch {
    /// (pid, its pidfd, seen exited)
    pids: Vec<(u32, OwnedFd, bool)>,
}

impl PidWatch {
    /// Opens a pidfd for each pid; a pid with no process is an error (exit code 5).
    pub fn open(pids: &[u32]) -> Result<Self> {
        let mut v = Vec::with_capacity(pids.len());
        for &pid in pids {
            // SAFETY: pidfd_open(pid, 0) returns a new descriptor or -1.
            let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                return Err(anyhow!(Fatal::NoProcess(match e.raw_os_error() {
                    Some(libc::ESRCH) | Some(libc::EINVAL) => format!("no process with PID {pid}"),
                    _ => format!("PID {pid}: cannot watch it (pidfd_open: {e})"),
                })));
            }
            // SAFETY: a descriptor we own from here on.
            v.push((pid, unsafe { OwnedFd::from_raw_fd(fd as i32) }, false));
        }
        Ok(Self { pids: v })
    }

    /// Pids that exited since the last call (each reported once).
    pub fn newly_exited(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        for (pid, fd, seen) in &mut self.pids {
            if *seen {
                continue;
            }
            let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd, no wait.
            if unsafe { libc::poll(&mut p, 1, 0) } == 1 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0 {
                *seen = true;
                out.push(*pid);
            }
        }
        out
    }

    /// Have all of them exited (and is there at least one)?
    pub fn all_exited(&self) -> bool {
        !self.pids.is_empty() && self.pids.iter().all(|(_, _, seen)| *seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_seen_exiting_even_as_a_zombie() {
        let mut c = std::process::Command::new("sleep").arg("0.2").spawn().unwrap();
        let mut w = PidWatch::open(&[c.id()]).unwrap();
        assert!(w.newly_exited().is_empty() && !w.all_exited());
        let t = std::time::Instant::now();
        while !w.all_exited() {
            assert!(t.elapsed().as_secs() < 30, "exit never seen");
            std::thread::sleep(std::time::Duration::from_millis(10));
            w.newly_exited();
        }
        // Not reaped yet: a zombie counts as exited.
        c.wait().unwrap();
        assert!(PidWatch::open(&[u32::MAX / 2]).is_err());
    }
}
