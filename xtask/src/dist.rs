//! `cargo xtask dist`: the tool in installable form, made from the release build.
//!
//! * `target/dist/rtl-ebpf_VERSION_ARCH.deb`: a Debian binary package, `dpkg-deb --build` of a
//!   staged tree. `Depends` is what `dpkg-shlibdeps` reads off the binaries themselves (libc6,
//!   libgcc-s1); no maintainer scripts, nothing is built at install time, so
//!   `apt install ./rtl-ebpf_VERSION_ARCH.deb` works on a machine without Rust or LLVM.
//! * `target/dist/rtl-ebpf-VERSION-linux-ARCH.tar.gz`: the same files under one top directory,
//!   relocatable (extract anywhere; `bin/rtl-ebpf` finds its agent in `../lib/rtl-ebpf/`).
//!
//! The layout, relative to the prefix (`/usr` in the package), is [`Layout`]; `dist_check.rs`
//! installs both and traces the demo workload with them.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::manpage;
use crate::util::{cmd, root};

pub const PACKAGE: &str = "rtl-ebpf";
/// The identity the project's commits carry.
const MAINTAINER: &str = "rtl-ebpf maintainers <maintainers@users.noreply.a-seed-bfe684b8.example>";

/// The workspace version (xtask's own is `version.workspace = true`).
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// What `cargo xtask dist` made.
pub struct Dist {
    pub deb: PathBuf,
    pub tarball: PathBuf,
    /// The tarball's top directory name (`rtl-ebpf-VERSION-linux-ARCH`).
    pub tar_top: String,
    /// Every file, relative to the prefix, sorted.
    pub files: Vec<String>,
}

/// Where each file goes, relative to the prefix.
pub struct Layout;
impl Layout {
    pub const BIN: &'static str = "bin/rtl-ebpf";
    /// `find_agent` in rtl-user/src/session/plan.rs looks in `<exe dir>/../lib/rtl-ebpf/`.
    pub const AGENT: &'static str = "lib/rtl-ebpf/librtl_agent.so";
    pub const MAN: &'static str = "share/man/man1/rtl-ebpf.1.gz";
    pub const DOC: &'static str = "share/doc/rtl-ebpf";
}

/// The documents shipped under `share/doc/rtl-ebpf/`: the README and ARCHITECTURE (whose links
/// point into `docs/`) and every file of `docs/`, at the same relative paths.
pub fn doc_files() -> Result<Vec<String>> {
    let mut out = vec!["README.md".to_string(), "ARCHITECTURE.md".to_string()];
    let mut docs = Vec::new();
    for e in fs::read_dir(root().join("docs")).context("cannot list docs/")? {
        let e = e?;
        let name = e.file_name().into_string().map_err(|n| anyhow::anyhow!("docs/{n:?}: not UTF-8"))?;
        if !e.file_type()?.is_file() {
            bail!("docs/{name} is not a regular file: the package ships docs/ flat, as plain files");
        }
        docs.push(format!("docs/{name}"));
    }
    docs.sort();
    out.extend(docs);
    Ok(out)
}

/// Every file of the package relative to the prefix, as the layout and docs/ say it must be.
pub fn expected_files() -> Result<Vec<String>> {
    let mut v: Vec<String> = vec![
        Layout::BIN.into(),
        Layout::AGENT.into(),
        Layout::MAN.into(),
        format!("{}/copyright", Layout::DOC),
        format!("{}/changelog.gz", Layout::DOC),
    ];
    v.extend(doc_files()?.into_iter().map(|d| format!("{}/{d}", Layout::DOC)));
    v.sort();
    Ok(v)
}

fn arch() -> Result<String> {
    Ok(cmd("dpkg").arg("--print-architecture").output()?.trim().to_string())
}

/// Builds the .deb and the tarball from `target/release/` (already built).
pub fn make() -> Result<Dist> {
    let release = root().join("target/release");
    let (bin, agent) = (release.join("rtl-ebpf"), release.join("librtl_agent.so"));
    for f in [&bin, &agent] {
        if !f.is_file() {
            bail!("{} is missing: build it first (cargo xtask build)", f.display());
        }
    }
    let (v, arch) = (version(), arch()?);
    let out = root().join("target/dist");
    let stage = root().join("target/dist-stage");
    for d in [&out, &stage] {
        if d.exists() {
            fs::remove_dir_all(d).with_context(|| format!("cannot clear {}", d.display()))?;
        }
        fs::create_dir_all(d)?;
    }

    // The package: /usr/...
    let tree = stage.join("deb");
    let files = install_tree(&tree.join("usr"), &bin, &agent)?;
    let depends = shlib_depends(&stage, &[tree.join("usr").join(Layout::BIN), tree.join("usr").join(Layout::AGENT)])?;
    write_control(&tree, v, &arch, &depends)?;
    let deb = out.join(format!("{PACKAGE}_{v}_{arch}.deb"));
    cmd("dpkg-deb").args(["--root-owner-group", "-Zxz", "--build"]).arg(&tree).arg(&deb).run()?;

    // The tarball: the same files under rtl-ebpf-VERSION-linux-ARCH/.
    let tar_top = format!("{PACKAGE}-{v}-linux-{arch}");
    let tar_files = install_tree(&stage.join("tar").join(&tar_top), &bin, &agent)?;
    if tar_files != files {
        bail!("the tarball's files differ from the package's: {tar_files:?} vs {files:?}");
    }
    let tarball = out.join(format!("{tar_top}.tar.gz"));
    cmd("tar")
        .args(["--owner=0", "--group=0", "--numeric-owner", "--sort=name", "-czf"])
        .arg(&tarball)
        .arg("-C")
        .arg(stage.join("tar"))
        .arg(&tar_top)
        .run()?;
    Ok(Dist { deb, tarball, tar_top, files })
}

/// Installs every file under `prefix` with its final mode; returns them, relative and sorted.
fn install_tree(prefix: &Path, bin: &Path, agent: &Path) -> Result<Vec<String>> {
    // Stripped as dh_strip does: executables lose every symbol; the shared library keeps its
    // dynamic symbols (`rtl_agent_publish`, which the collector probes, is one).
    strip(bin, &prefix.join(Layout::BIN), &["--strip-all"], 0o755)?;
    strip(agent, &prefix.join(Layout::AGENT), &["--strip-unneeded"], 0o644)?;
    let man = prefix.join(Layout::MAN);
    let page = manpage::render(&prefix.join(Layout::BIN), version())?;
    let plain = man.with_extension("");
    write_file(&plain, page.as_bytes(), 0o644)?;
    cmd("gzip").args(["-9", "-n", "-f"]).arg(&plain).run()?;
    let doc = prefix.join(Layout::DOC);
    for d in doc_files()? {
        let src = root().join(&d);
        let bytes = fs::read(&src).with_context(|| format!("cannot read {}", src.display()))?;
        write_file(&doc.join(&d), &bytes, 0o644)?;
    }
    let commit = Commit::head()?;
    write_file(&doc.join("copyright"), copyright(&commit).as_bytes(), 0o644)?;
    // Debian policy: every package has a changelog; this one says what it was built from.
    let changelog = doc.join("changelog");
    write_file(&changelog, changelog_text(&commit).as_bytes(), 0o644)?;
    cmd("gzip").args(["-9", "-n", "-f"]).arg(&changelog).run()?;
    let mut files = Vec::new();
    walk(prefix, prefix, &mut files)?;
    files.sort();
    Ok(files)
}

fn strip(src: &Path, dst: &Path, how: &[&str], mode: u32) -> Result<()> {
    mkdirs(dst.parent().unwrap())?;
    cmd("strip").args(how).args(["--remove-section=.comment", "--remove-section=.note", "-o"]).arg(dst).arg(src).run()?;
    fs::set_permissions(dst, fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Creates the directories with mode 0755 whatever the umask.
fn mkdirs(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(p) = dir.parent() {
        mkdirs(p)?;
    }
    fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))?;
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    mkdirs(path.parent().unwrap())?;
    fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for e in fs::read_dir(dir)? {
        let e = e?;
        let t = e.file_type()?;
        if t.is_dir() {
            walk(base, &e.path(), out)?;
        } else if t.is_file() {
            out.push(e.path().strip_prefix(base)?.to_string_lossy().into_owned());
        } else {
            bail!("{}: not a file or directory", e.path().display());
        }
    }
    Ok(())
}

/// `Depends` from the binaries' own dynamic dependencies and symbol versions (dpkg-shlibdeps
/// reads the shlibs/symbols files of the packages that own the libraries they link).
fn shlib_depends(stage: &Path, binaries: &[PathBuf]) -> Result<String> {
    crate::setup::apt(&["dpkg-dev"])?;
    // dpkg-shlibdeps reads debian/control of a source tree: a minimal one names the package.
    let src = stage.join("shlibdeps");
    write_file(&src.join("debian/control"), format!("Source: {PACKAGE}\n\nPackage: {PACKAGE}\nArchitecture: any\n").as_bytes(), 0o644)?;
    let mut c = cmd("dpkg-shlibdeps").arg("-O").current_dir(&src);
    for b in binaries {
        c = c.arg(format!("-e{}", b.display()));
    }
    let out = c.output()?;
    let deps = out
        .lines()
        .find_map(|l| l.strip_prefix("shlibs:Depends="))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .with_context(|| format!("dpkg-shlibdeps printed no shlibs:Depends: {out:?}"))?;
    Ok(deps.to_string())
}

fn write_control(tree: &Path, v: &str, arch: &str, depends: &str) -> Result<()> {
    let mut files = Vec::new();
    walk(tree, tree, &mut files)?;
    files.sort();
    // Installed-Size: KiB, as dpkg-gencontrol counts it (each file rounded up, 1 per directory).
    let mut kib: u64 = 0;
    let mut dirs = std::collections::BTreeSet::new();
    for f in &files {
        kib += fs::metadata(tree.join(f))?.len().div_ceil(1024);
        let mut p = Path::new(f).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(d.to_path_buf());
            p = d.parent();
        }
    }
    kib += dirs.len() as u64;
    let control = format!(
        "Package: {PACKAGE}\n\
         Version: {v}\n\
         Architecture: {arch}\n\
         Maintainer: {MAINTAINER}\n\
         Installed-Size: {kib}\n\
         Depends: {depends}\n\
         Section: devel\n\
         Priority: optional\n\
         Description: eBPF-assisted GPU tracer for ROCm HIP and CUDA programs\n \
         rtl-ebpf times every HIP API call of one process, of every process on the\n \
         node, or of a launched command tree with eBPF uprobes (no code injected),\n \
         adds GPU start/end times from a small in-process agent\n \
         (/usr/lib/rtl-ebpf/librtl_agent.so), and writes one SQLite trace in the\n \
         rocpd schema. It reads and converts traces too (summary, Perfetto, merge).\n \
         .\n \
         Tracing needs root (eBPF programs, uprobes) and a kernel with BTF, uprobes\n \
         and BPF ring buffers.\n"
    );
    write_file(&tree.join("DEBIAN/control"), control.as_bytes(), 0o644)?;
    let sums = cmd("md5sum").args(&files).current_dir(tree).output()?;
    write_file(&tree.join("DEBIAN/md5sums"), sums.as_bytes(), 0o644)
}

/// The commit the package is built from (its hash, date and year), for the changelog and the
/// copyright year.
struct Commit {
    hash: String,
    date: String,
    year: String,
}

impl Commit {
    fn head() -> Result<Self> {
        let out = cmd("git").args(["log", "-1", "--format=%H%n%aD%n%ad", "--date=format:%Y"]).current_dir(root()).output()?;
        let mut l = out.lines();
        match (l.next(), l.next(), l.next()) {
            (Some(h), Some(d), Some(y)) => Ok(Self { hash: h.into(), date: d.into(), year: y.into() }),
            _ => bail!("git log printed {out:?}: the package is built from a git checkout"),
        }
    }
}

fn changelog_text(c: &Commit) -> String {
    let dirty = if cmd("git").args(["diff", "--quiet", "HEAD"]).current_dir(root()).ok() { "" } else { ", with uncommitted changes" };
    format!(
        "{PACKAGE} ({v}) unstable; urgency=medium\n\n  * Built by `cargo xtask dist` from commit\n    {h}{dirty}.\n\n -- {MAINTAINER}  {d}\n",
        v = version(),
        h = c.hash,
        d = c.date
    )
}

fn copyright(c: &Commit) -> String {
    let year = &c.year;
    format!(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
         Upstream-Name: {PACKAGE}\n\
         Upstream-Contact: {MAINTAINER}\n\
         \n\
         Files: *\n\
         Copyright: {year} the rtl-ebpf authors\n\
         License: MIT or Apache-2.0\n\
         Comment: the workspace's Cargo.toml declares `license = \"MIT OR Apache-2.0\"`: use it\n \
         under either.\n\
         \n\
         License: Apache-2.0\n \
         On Debian systems the Apache License 2.0 is in /usr/share/common-licenses/Apache-2.0.\n\
         \n\
         License: MIT\n \
         Permission is hereby granted, free of charge, to any person obtaining a copy\n \
         of this software and associated documentation files (the \"Software\"), to deal\n \
         in the Software without restriction, including without limitation the rights\n \
         to use, copy, modify, merge, publish, distribute, sublicense, and/or sell\n \
         copies of the Software, and to permit persons to whom the Software is\n \
         furnished to do so, subject to the following conditions:\n \
         .\n \
         The above copyright notice and this permission notice shall be included in all\n \
         copies or substantial portions of the Software.\n \
         .\n \
         THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR\n \
         IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,\n \
         FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE\n \
         AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER\n \
         LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,\n \
         OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE\n \
         SOFTWARE.\n"
    )
}
