//! `cargo xtask container` (and a step of `cargo xtask test`): builds docker/Dockerfile, which
//! installs the .deb of `dist.rs` into a Debian 12 image, and runs that image: `--version`,
//! `list-apis`, and a trace of the demo workload on the ROCm simulator made inside the container
//! (the agent found at /usr/lib/rtl-ebpf/), checked against the simulator's ground truth.
//!
//! No registry is reachable from here, so the base image is made locally: `mmdebstrap` builds a
//! minimal Debian 12 root file system from deb.debian.org and `podman import` turns it into
//! `localhost/rtl-ebpf-base:bookworm` (once; later runs reuse it). Podman runs as root with
//! runc (crun refuses this machine's hybrid cgroup layout) and explicit ulimits (podman's
//! defaults are above what this machine lets a process raise its limits to).

use std::fs;
use std::path::Path;

use anyhow::{ensure, Context, Result};

use crate::dist::{self, Dist};
use crate::dist_check::demo_trace_matches_truth;
use crate::util::{cmd, root};

pub const BASE_IMAGE: &str = "localhost/rtl-ebpf-base:bookworm";
const MIRROR: &str = "http://deb.debian.org/debian";

pub fn run(d: &Dist) -> Result<()> {
    crate::setup::apt(&["podman", "runc", "mmdebstrap"])?;
    let dir = root().join("target/container");
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("cannot clear {}", dir.display()))?;
    }
    fs::create_dir_all(dir.join("out"))?;
    let conf = dir.join("containers.conf");
    fs::write(
        &conf,
        "[containers]\ndefault_ulimits = [\"nofile=16384:16384\", \"nproc=16384:16384\"]\n\
         [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\n",
    )?;
    let podman = || cmd("podman").env("CONTAINERS_CONF", &conf);

    if !podman().args(["image", "exists", BASE_IMAGE]).ok() {
        let tar = dir.join("debian12.tar");
        println!("xtask: making the base image {BASE_IMAGE} (Debian 12 minbase from {MIRROR}, 1-3 minutes)");
        cmd("mmdebstrap").args(["--variant=minbase", "--mode=root", "bookworm"]).arg(&tar).arg(MIRROR).run()?;
        podman().args(["import", "--quiet"]).arg(&tar).arg(BASE_IMAGE).run()?;
        fs::remove_file(&tar)?;
    }
    let image = format!("localhost/rtl-ebpf:{}", dist::version());
    let context = d.deb.parent().unwrap();
    podman()
        .args(["build", "--quiet", "--network=none", "--pull=never", "-f"])
        .arg(root().join("docker/Dockerfile"))
        .args(["--build-arg", &format!("BASE={BASE_IMAGE}"), "-t", &image])
        .arg(context)
        .run()
        .context("building docker/Dockerfile")?;

    let version = podman().args(["run", "--rm", "--network=none", &image, "--version"]).output()?;
    ensure!(version.trim() == format!("rtl-ebpf {}", dist::version()), "the image's rtl-ebpf --version printed {version:?}");
    // The workloads and the simulator come from the source tree (read only); the image has no
    // HIP runtime of its own.
    let tests = root().join("tests");
    let tests_ro = format!("{}:/src/tests:ro", tests.display());
    let apis = podman()
        .args(["run", "--rm", "--network=none", "-v", &tests_ro, &image])
        .args(["list-apis", "--lib", "/src/tests/rocm-sim/build/lib/libamdhip64.so.5"])
        .output()?;
    ensure!(apis.contains("hipLaunchKernel"), "the image's list-apis printed {apis:?}");
    // No Rust, no compiler: the package brought everything it needs.
    let absent = podman()
        .args(["run", "--rm", "--network=none", "--entrypoint", "sh", &image, "-c"])
        .arg("for t in cargo rustc cc gcc clang; do command -v $t && exit 1; done; dpkg-query -W rtl-ebpf")
        .output()
        .context("the image has a compiler or no rtl-ebpf package")?;
    ensure!(absent.trim() == format!("rtl-ebpf\t{}", dist::version()), "dpkg-query in the image printed {absent:?}");

    // The demo traced inside the container; the trace and the truth go to target/container/out.
    let out = dir.join("out");
    // The narrowest set that traces (docker/README.md): CAP_BPF + CAP_PERFMON, a seccomp
    // profile that lets bpf() through (podman's default allows it only with CAP_SYS_ADMIN),
    // and the host's PID namespace (the probes see host PIDs; in a private one the trace is empty).
    podman()
        .args(["run", "--rm", "--network=none", "--cap-add=BPF", "--cap-add=PERFMON", "--security-opt", "seccomp=unconfined", "--pid=host"])
        .args(["-v", &tests_ro])
        .arg("-v")
        .arg(format!("{}:/out", out.display()))
        .args(["-e", "LD_LIBRARY_PATH=/src/tests/rocm-sim/build/lib", &image])
        .args(["run", "--quiet", "-o", "/out/demo.db", "--", "env", "ROCM_SIM_TRUTH=/out/truth.jsonl", "/src/tests/workloads/build/demo"])
        .run()
        .context("tracing the demo inside the container")?;
    demo_trace_matches_truth("container", &out.join("demo.db"), &out.join("truth.jsonl"), Path::new("/usr/lib/rtl-ebpf/librtl_agent.so"))?;
    println!("xtask: container check passed: docker/Dockerfile builds {image} from {}", d.deb.display());
    Ok(())
}
