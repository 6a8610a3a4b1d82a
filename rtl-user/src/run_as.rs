//! Whom `rtl-ebpf run -- CMD` runs the command as.
//!
//! The collector needs root; the command does not. Under sudo it runs as the user who ran sudo
//! (`SUDO_UID`, `SUDO_GID`, that user's supplementary groups from the group database, and
//! their `HOME`, `USER` and `LOGNAME`), as `sudo -u USER CMD` would; `--as-root` keeps root.
//! Everything is looked up before the fork: the forked child of a multi-threaded process may
//! only make plain system calls (setgroups, setgid, setuid, execve).

use std::ffi::{CStr, CString};

use anyhow::{bail, Result};

/// The credentials and identity variables of the user a command runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    /// Supplementary groups (the primary group included).
    pub groups: Vec<libc::gid_t>,
    pub name: String,
    pub home: String,
}

impl RunAs {
    /// The user who ran sudo, or None when not under sudo (or sudo ran as root).
    pub fn invoking_user() -> Result<Option<Self>> {
        let Some((uid, gid)) = crate::trace::writer::invoking_user() else { return Ok(None) };
        Self::lookup(uid, gid).map(Some)
    }

    /// `uid`'s passwd entry and group list, with `gid` as the primary group.
    pub fn lookup(uid: libc::uid_t, gid: libc::gid_t) -> Result<Self> {
        let mut buf = vec![0 as libc::c_char; 16 << 10];
        // SAFETY: zeroed passwd is a valid out value; buffers sized as passed.
        let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
        let mut res: *mut libc::passwd = std::ptr::null_mut();
        let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut res) };
        if rc != 0 || res.is_null() {
            bail!("SUDO_UID={uid} has no entry in the user database: pass --as-root to run the command as root");
        }
        // SAFETY: getpwuid_r filled these with NUL-terminated strings inside `buf`.
        let name = unsafe { CStr::from_ptr(pw.pw_name) }.to_string_lossy().into_owned();
        let home = unsafe { CStr::from_ptr(pw.pw_dir) }.to_string_lossy().into_owned();
        let cname = CString::new(name.clone())?;
        let mut n: libc::c_int = 64;
        let mut groups: Vec<libc::gid_t> = vec![0; n as usize];
        loop {
            let mut got = n;
            // SAFETY: `groups` holds `n` entries; `got` says how many were written or needed.
            let r = unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut got) };
            if r >= 0 {
                groups.truncate(got as usize);
                break;
            }
            if got <= n || got > 65536 {
                bail!("cannot read the groups of user {name}");
            }
            n = got;
            groups.resize(n as usize, 0);
        }
        Ok(Self { uid, gid, groups, name, home })
    }

    /// The identity variables to set in the command's environment.
    pub fn env(&self) -> [(&'static str, String); 3] {
        [("HOME", self.home.clone()), ("USER", self.name.clone()), ("LOGNAME", self.name.clone())]
    }

    /// Takes on these credentials. Call only in a forked child, before exec: plain system calls,
    /// groups first, the user last (after setuid nothing can be changed back).
    ///
    /// # Safety
    /// Async-signal-safe; the caller must be a freshly forked child.
    pub unsafe fn become_in_child(&self) -> bool {
        // SAFETY: plain system calls with a valid array of `groups.len()` gids.
        unsafe {
            libc::setgroups(self.groups.len(), self.groups.as_ptr()) == 0 && libc::setgid(self.gid) == 0 && libc::setuid(self.uid) == 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_is_found_with_its_groups() {
        let u = RunAs::lookup(65534, 65534).expect("Debian has user nobody");
        assert_eq!(u.name, "nobody");
        assert!(u.groups.contains(&65534));
        assert!(RunAs::lookup(4_000_000_000, 1).is_err());
    }
}
