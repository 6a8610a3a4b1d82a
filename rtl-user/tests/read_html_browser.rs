//! The HTML report in a real browser (issue 16): headless Chromium renders `summary --html` of a
//! one-process trace with stacks and of an 8-GPU trace without, takes a screenshot (a PNG of the
//! window's size that is not blank) and dumps the DOM it built, which must hold every section:
//! the header, the per-API table, the kernels, a lane per stream of each GPU, the launch-latency
//! histogram, and the flame graph exactly when the trace has stacks.
//!
//! The browser is Debian's `chromium-headless-shell` (or `chromium`), which `cargo xtask setup`
//! installs; without it these tests fail: the report is what a user opens first.
//! `RTL_KEEP_SCREENSHOTS=DIR` keeps each test's page and screenshot in DIR, to look at.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::rtl;
use crate::read_common::{gpu_trace, tmpdir, STREAM_BASE};

const WIDTH: u32 = 1280;
const HEIGHT: u32 = 2400;

fn browser() -> PathBuf {
    for b in ["chromium-headless-shell", "chromium", "chromium-browser"] {
        for dir in ["/usr/bin", "/usr/local/bin"] {
            let p = Path::new(dir).join(b);
            if p.exists() {
                return p;
            }
        }
    }
    panic!(
        "no headless Chromium on this machine (chromium-headless-shell or chromium): the HTML report test needs one; \
         `cargo xtask setup` installs it (apt-get install chromium-headless-shell)"
    );
}

/// Runs the browser on `html` with `args` (headless, no sandbox: tests run as root), under a
/// private profile directory; returns stdout.
fn chromium(dir: &Path, html: &Path, args: &[&str]) -> String {
    let profile = dir.join("profile");
    let out = Command::new(browser())
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--allow-file-access-from-files"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={WIDTH},{HEIGHT}"))
        .args(args)
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("DOM is UTF-8")
}

/// A decoded 8-bit RGB / RGBA PNG: (width, height, pixels as RGB).
fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<[u8; 3]>) {
    use std::io::Read;
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let (mut w, mut h, mut channels) = (0u32, 0u32, 0usize);
    let mut idat = vec![];
    let mut i = 8;
    while i + 8 <= bytes.len() {
        let len = u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap()) as usize;
        let kind = &bytes[i + 4..i + 8];
        let data = &bytes[i + 8..i + 8 + len];
        match kind {
            b"IHDR" => {
                w = u32::from_be_bytes(data[0..4].try_into().unwrap());
                h = u32::from_be_bytes(data[4..8].try_into().unwrap());
                assert_eq!(data[8], 8, "bit depth");
                channels = match data[9] {
                    2 => 3,
                    6 => 4,
                    t => panic!("colour type {t}"),
                };
                assert_eq!(data[12], 0, "interlaced PNG");
            }
            b"IDAT" => idat.extend_from_slice(data),
            _ => {}
        }
        i += 12 + len;
    }
    let mut raw = vec![];
    flate2::read::ZlibDecoder::new(&idat[..]).read_to_end(&mut raw).unwrap();
    let stride = w as usize * channels;
    assert_eq!(raw.len(), (stride + 1) * h as usize, "PNG data size");
    let mut prev = vec![0u8; stride];
    let mut px = Vec::with_capacity((w * h) as usize);
    for row in raw.chunks(stride + 1) {
        let (filter, line) = (row[0], &row[1..]);
        let mut cur = vec![0u8; stride];
        for x in 0..stride {
            let a = if x >= channels { cur[x - channels] as i16 } else { 0 };
            let b = prev[x] as i16;
            let c = if x >= channels { prev[x - channels] as i16 } else { 0 };
            let pred = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => (a + b) / 2,
                4 => {
                    let p = a + b - c;
                    let (pa, pb, pc) = ((p - a).abs(), (p - b).abs(), (p - c).abs());
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                f => panic!("PNG filter {f}"),
            };
            cur[x] = line[x].wrapping_add(pred as u8);
        }
        px.extend(cur.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        prev = cur;
    }
    (w, h, px)
}

/// Renders the report of `db`, checks the screenshot, returns the DOM after the page loaded.
fn render(dir: &Path, db: &Path) -> String {
    let html = dir.join("report.html");
    let o = Command::new(rtl()).args(["summary", "--html"]).arg(&html).arg(db).output().unwrap();
    assert!(o.status.success(), "summary --html: {}", String::from_utf8_lossy(&o.stderr));
    let png = dir.join("shot.png");
    chromium(dir, &html, &[&format!("--screenshot={}", png.display())]);
    if let Some(keep) = std::env::var_os("RTL_KEEP_SCREENSHOTS") {
        // To look at them: RTL_KEEP_SCREENSHOTS=DIR keeps each test's page and screenshot there.
        let name = std::thread::current().name().unwrap_or("report").rsplit(':').next().unwrap_or("report").to_string();
        std::fs::copy(&png, Path::new(&keep).join(format!("{name}.png"))).unwrap();
        std::fs::copy(&html, Path::new(&keep).join(format!("{name}.html"))).unwrap();
    }
    let (w, h, px) = decode_png(&std::fs::read(&png).expect("screenshot written"));
    assert_eq!((w, h), (WIDTH, HEIGHT), "screenshot size");
    // Not blank: many pixels that are not the white page, and the charts' colours among them.
    let inked = px.iter().filter(|p| p.iter().any(|&c| c < 200)).count();
    assert!(inked > px.len() / 100, "screenshot nearly blank: {inked} of {} pixels drawn", px.len());
    let blue = px.iter().filter(|p| **p == [0x3b, 0x82, 0xf6]).count();
    assert!(blue > 1000, "the charts' bars are not on the screenshot ({blue} blue pixels)");
    chromium(dir, &html, &["--dump-dom"])
}

fn count(dom: &str, needle: &str) -> usize {
    dom.matches(needle).count()
}

/// Every section the report always has.
fn check_common_sections(dom: &str) {
    assert!(dom.contains("<h1>rtl-ebpf trace summary</h1>"), "title");
    assert!(dom.contains("<table class=\"hdr\">") && dom.contains("node7"), "header with the host");
    assert!(dom.contains("<h2>Top APIs</h2>") && dom.contains(">hipLaunchKernel</td>"), "per-API table");
    assert!(dom.contains("aria-label=\"Top kernels by total GPU time\"") && dom.contains("gemm_a(float*, float*, int)"), "kernels");
    assert!(dom.contains("aria-label=\"Launch latency histogram\""), "launch-latency histogram");
    assert!(dom.contains("id=\"stream-lanes\""), "per-stream lanes");
    // Tooltips on the timeline bins.
    assert!(count(dom, "<rect class=\"bin\"") > 10 && dom.contains("% busy</title></rect>"), "bins with tooltips");
}

#[test]
fn html_report_in_chromium_one_process_with_stacks() {
    let d = tmpdir();
    let db = gpu_trace(&d.path().join("t.db"), 1, 1, 3, 12, true);
    let dom = render(d.path(), &db);
    check_common_sections(&dom);
    // One process, 3 streams on GPU 0: 3 lanes, each named by its stream.
    assert_eq!(count(&dom, "<g class=\"lane\""), 3, "{dom}");
    for s in 0..3 {
        let lane = format!("<g class=\"lane\" data-gpu=\"0\" data-pid=\"1000\" data-stream=\"stream {:#x}\">", STREAM_BASE + s);
        assert!(dom.contains(&lane), "no lane {lane}");
    }
    // The flame graph: every frame of the stacks, launch_s0 the widest site.
    assert!(dom.contains("id=\"flame-graph\""), "flame graph missing");
    for f in ["main (train)", "train_step(int) (train)", "launch_s0(float*) (train)", "hipLaunchKernel (libamdhip64.so.6)"] {
        assert!(dom.contains(&format!("<title>{f}: ")), "flame graph lacks {f}");
    }
    // All GPU time has a site: the root and main both hold 100 %.
    assert!(dom.contains("<title>main (train): ") && dom.contains("GPU time (100.0%), 36 ops</title>"), "main holds every op");
}

#[test]
fn html_report_in_chromium_eight_gpus_without_stacks() {
    let d = tmpdir();
    let db = gpu_trace(&d.path().join("t.db"), 2, 8, 2, 3, false);
    let dom = render(d.path(), &db);
    check_common_sections(&dom);
    // 2 processes x 8 GPUs x 2 streams: a lane each, under each GPU's heading.
    assert_eq!(count(&dom, "<g class=\"lane\""), 32);
    for g in 0..8 {
        assert_eq!(count(&dom, &format!("<g class=\"lane\" data-gpu=\"{g}\"")), 4, "GPU {g}'s lanes");
        assert!(dom.contains(&format!("<g class=\"device\" data-gpu=\"{g}\">")), "GPU {g}'s busy timeline");
    }
    assert!(!dom.contains("flame-graph") && !dom.contains("GPU time by launch site"), "no stacks: no flame graph");
}
