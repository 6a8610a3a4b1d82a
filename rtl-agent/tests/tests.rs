//! rtl-agent's integration tests, one binary (one link instead of one per file): a module per
//! area, the shared helpers as modules beside them. Cargo does not discover test files here
//! (`autotests = false`): a new file is a `mod` line below, and the last test checks there is one.

mod common;

mod cupti_fixture;
mod fake_cupti;
mod fake_runtime;
mod simulator;
mod symbols;

/// Every test file is compiled into this binary: one not named above would never run.
#[test]
fn every_test_file_is_a_module_of_this_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let me = include_str!("tests.rs");
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".rs").filter(|s| *s != "tests") {
            assert!(me.contains(&format!("\nmod {stem};\n")), "tests/{name} is not a module of tests/tests.rs: its tests would never run");
        }
    }
}
