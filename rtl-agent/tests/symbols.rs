//! The built library exports exactly the hand-off, HSA tool and CUDA injection entry points (plus the `_exit`
//! interposers), and `rtl_agent_publish` starts with `push %rbp`, which uprobes emulate without
//! single-stepping (shared/reference/measured.md: ~0.8 us per hit vs ~15 us for a `lea`).
use crate::common;
use common::*;
use std::process::Command;

#[test]
fn exports_and_first_instruction() {
    let so = agent_so();
    let t = sh(Command::new("objdump").arg("-T").arg(&so));
    let t = String::from_utf8_lossy(&t.stdout);
    let exported: Vec<&str> =
        t.lines().filter(|l| l.contains(" g ") && l.contains(".text")).filter_map(|l| l.split_whitespace().last()).collect();
    for s in ["rtl_agent_publish", "OnLoad", "OnUnload", "InitializeInjection", "_exit", "_Exit"] {
        assert!(exported.contains(&s), "{s} not exported: {exported:?}");
    }
    assert_eq!(exported.len(), 6, "nothing else exported: {exported:?}");
    let d = sh(Command::new("objdump").args(["-d", "--no-show-raw-insn", "--disassemble=rtl_agent_publish"]).arg(&so));
    let d = String::from_utf8_lossy(&d.stdout);
    let body: Vec<&str> = d
        .lines()
        .skip_while(|l| !l.contains("<rtl_agent_publish>:"))
        .skip(1)
        .take(4)
        .map(|l| l.split(':').nth(1).unwrap_or("").trim())
        .collect();
    assert_eq!(body[0], "push   %rbp", "{d}");
    assert_eq!(body[1..], ["mov    %rsp,%rbp", "pop    %rbp", "ret"], "{d}");
    let ldd = sh(Command::new("ldd").arg(&so));
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    assert!(!ldd.contains("amdhip64") && !ldd.contains("hsa"), "never links the runtime: {ldd}");
}
