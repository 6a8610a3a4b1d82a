//! Small helpers: the workspace root and commands that fail with context.

use std::path::PathBuf;
use std::process::{Command, ExitStatus};

use anyhow::{bail, Context, Result};

/// The workspace root (xtask's parent directory).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask has a parent").to_path_buf()
}

pub struct Cmd(Command);

pub fn cmd(program: &str) -> Cmd {
    Cmd(Command::new(program))
}

impl Cmd {
    pub fn arg(mut self, a: impl AsRef<std::ffi::OsStr>) -> Self {
        self.0.arg(a);
        self
    }
    pub fn args<I, S>(mut self, a: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        self.0.args(a);
        self
    }
    pub fn env(mut self, k: &str, v: impl AsRef<std::ffi::OsStr>) -> Self {
        self.0.env(k, v);
        self
    }
    pub fn current_dir(mut self, d: impl AsRef<std::path::Path>) -> Self {
        self.0.current_dir(d);
        self
    }
    /// Runs to completion; an unsuccessful exit is an error naming the command.
    pub fn run(mut self) -> Result<()> {
        let status = self.0.status().with_context(|| format!("cannot start {:?}", self.0))?;
        if !status.success() {
            bail!("{:?} failed with {status}", self.0);
        }
        Ok(())
    }
    pub fn status(mut self) -> Result<ExitStatus> {
        self.0.status().with_context(|| format!("cannot start {:?}", self.0))
    }
    pub fn output(mut self) -> Result<String> {
        let out = self.0.output().with_context(|| format!("cannot start {:?}", self.0))?;
        if !out.status.success() {
            bail!("{:?} failed with {}: {}", self.0, out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
    /// Runs, and reports whether it succeeded (output discarded).
    pub fn ok(mut self) -> bool {
        self.0.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        self.0.status().map(|s| s.success()).unwrap_or(false)
    }
}
