//! Builds the kernel-side crate (`rtl-ebpf`) for bpfel-unknown-none with the nightly toolchain
//! and bpf-linker, and leaves the object in OUT_DIR for `include_bytes_aligned!`.
use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").context("CARGO_MANIFEST_DIR")?;
    let root = std::path::Path::new(&manifest).join("../rtl-ebpf");
    let root = root.to_str().context("non-UTF-8 path")?;
    println!("cargo:rerun-if-changed=../rtl-common/src");
    aya_build::build_ebpf(
        [aya_build::Package { name: "rtl-ebpf", root_dir: root, ..Default::default() }],
        aya_build::Toolchain::Custom("nightly"),
    )
    .context(
        "building the eBPF programs failed: run `cargo xtask setup` (nightly rust-src, \
         llvm-22 and bpf-linker), or see docs/building.md",
    )
}
