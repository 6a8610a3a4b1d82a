//! rtl-user's integration tests, one binary (one link instead of one per file): a module per
//! area, the shared helpers as modules beside them. Cargo does not discover test files here
//! (`autotests = false`): a new file is a `mod` line below, and the last test checks there is one.

mod common;
mod read_common;
mod synthetic_gpu;
mod users;

mod api_facts;
mod call_records;
mod call_sites;
mod cli_options;
mod cupti_join;
mod golden_demo;
mod gpu_join;
mod gpu_join_hsa;
mod gpu_join_sequence;
mod hw_validate;
mod probe_entry;
mod probe_lifecycle;
mod python_sites;
mod read_check;
mod read_golden_sim;
mod read_html_browser;
mod read_interop;
mod read_merge;
mod read_migrate;
mod read_perfetto;
mod read_sdk_input;
mod read_summary;
mod read_writer_compat;
mod reliability_collector;
mod reliability_faults;
mod reliability_input;
mod reliability_library;
mod reliability_readers;
mod security_bounded_state;
mod security_files;
mod security_forged_ops;
mod security_readers;
mod security_shared_node;
mod trace_core;

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
