//! Real unprivileged users for the security tests: created with `useradd` for one test, removed
//! (with their group) when dropped. Files they plant are created by them (`runuser`), as an
//! attacker sharing the machine would.
#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static NEXT: AtomicU32 = AtomicU32::new(0);

pub struct TestUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

fn id_of(name: &str, flag: &str) -> u32 {
    let o = Command::new("id").args([flag, name]).output().expect("id");
    assert!(o.status.success(), "id {flag} {name}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

impl TestUser {
    /// A new system user without a home or a login shell. Needs root.
    pub fn create() -> TestUser {
        // SAFETY: no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "creating test users needs root");
        let name = format!("rtlt{}x{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        // useradd locks /etc/passwd: tests running at once may have to wait for each other.
        let mut last = String::new();
        for _ in 0..50 {
            let o = Command::new("useradd")
                .args(["--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", &name])
                .output()
                .expect("useradd (passwd package) is needed");
            if o.status.success() {
                return TestUser { uid: id_of(&name, "-u"), gid: id_of(&name, "-g"), name };
            }
            last = String::from_utf8_lossy(&o.stderr).into_owned();
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("useradd {name} failed: {last}");
    }

    /// Runs a command as this user (`runuser -u`).
    pub fn run(&self, argv: &[&str]) -> Output {
        Command::new("runuser").args(["-u", &self.name, "--"]).args(argv).output().expect("runuser (util-linux)")
    }

    /// Runs a command as this user and asserts it succeeded.
    pub fn ok(&self, argv: &[&str]) {
        let o = self.run(argv);
        assert!(o.status.success(), "as {}: {argv:?}: {}", self.name, String::from_utf8_lossy(&o.stderr));
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        for _ in 0..50 {
            let o = Command::new("userdel").arg(&self.name).output();
            if o.is_ok_and(|o| o.status.success()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

/// Makes `dir` a shared scratch directory: everyone may create files, only owners remove them
/// (mode 1777, like /tmp).
pub fn share(dir: &Path) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
}
