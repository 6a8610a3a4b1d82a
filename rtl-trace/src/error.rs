//! Fatal conditions with a one-line remedy and a distinct exit code each.
//!
//! | code | meaning |
//! | --- | --- |
//! | 1 | any other error |
//! | 2 | bad command line (clap, or an output that is one of the inputs) |
//! | 3 | not root / no BPF permission |
//! | 4 | kernel lacks uprobes, ring buffers or BTF |
//! | 5 | no such process, or it maps no HIP library |
//! | 6 | a library path that is not a usable ELF shared library |
//! | 7 | the output file cannot be written |
//! | 8 | the input trace is not a readable rtl-ebpf / rocpd trace |
//! | 9 | `check`: a threshold was not met (not an error: the report says which; [`crate::read::check::EXIT_CHECK_FAILED`]) |

use std::fmt;

#[derive(Debug)]
pub enum Fatal {
    /// A command line that cannot be right (exit code 2, like clap's own errors).
    Usage(String),
    Permission(String),
    KernelSupport(String),
    NoProcess(String),
    BadLibrary(String),
    Output(String),
    BadTrace(String),
}

impl Fatal {
    pub fn exit_code(&self) -> i32 {
        match self {
            Fatal::Usage(_) => 2,
            Fatal::Permission(_) => 3,
            Fatal::KernelSupport(_) => 4,
            Fatal::NoProcess(_) => 5,
            Fatal::BadLibrary(_) => 6,
            Fatal::Output(_) => 7,
            Fatal::BadTrace(_) => 8,
        }
    }
}

impl fmt::Display for Fatal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Fatal::Usage(m)
        | Fatal::Permission(m)
        | Fatal::KernelSupport(m)
        | Fatal::NoProcess(m)
        | Fatal::BadLibrary(m)
        | Fatal::Output(m)
        | Fatal::BadTrace(m)) = self;
        f.write_str(m)
    }
}

impl std::error::Error for Fatal {}

/// The exit code for an error chain: the first [`Fatal`] in it decides; a trace SQLite finds
/// damaged while reading it (past the checks on opening) is an unreadable input too (8); else 1.
pub fn exit_code(e: &anyhow::Error) -> i32 {
    if let Some(f) = e.chain().find_map(|c| c.downcast_ref::<Fatal>()) {
        return f.exit_code();
    }
    let damaged = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<rusqlite::Error>(),
            Some(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
        )
    });
    if damaged {
        8
    } else {
        1
    }
}
