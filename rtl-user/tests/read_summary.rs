//! `summary`: numbers checked against a hand-built trace; text, JSON and HTML outputs.
use crate::read_common;

use read_common::*;
use rtl_user::read::{summary, SummaryOptions};
use serde_json::Value;

fn json_summary(db: &std::path::Path) -> Value {
    let mut out = Vec::new();
    summary(db, &SummaryOptions { json: true, html: None, top: 20, linked_only: false }, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn summary_numbers() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let s = json_summary(&db);
    let t = &s["totals"];
    assert_eq!(t["api_calls"], 10);
    assert_eq!(t["gpu_ops"], 7);
    assert_eq!(t["gpu_time_ns"], 42_000);
    assert_eq!(t["markers"], 1);
    assert_eq!(t["api_op_links"], 6);

    let k = s["kernels"].as_array().unwrap();
    assert_eq!(k.len(), 3);
    assert_eq!(k[0]["name"], "vectorAdd(float*, float*, float*, int)", "demangled, sorted by total");
    assert_eq!(k[0]["calls"], 2);
    assert_eq!(k[0]["total_ns"], 20_000);
    assert_eq!(k[0]["min_ns"], 10_000);
    assert_eq!(k[0]["max_ns"], 10_000);
    assert!((k[0]["pct_gpu_time"].as_f64().unwrap() - 100.0 * 20.0 / 42.0).abs() < 1e-9);
    assert_eq!(k[1]["name"], "reduce(float*, int)");
    assert_eq!(k[1]["calls"], 4);
    assert_eq!(k[1]["total_ns"], 17_000);
    assert_eq!(k[1]["min_ns"], 1_000);
    assert_eq!(k[1]["mean_ns"], 4_250);
    assert_eq!(k[2]["name"], "CopyHostToDevice", "no description: the op type names it");

    let apis = s["apis"].as_array().unwrap();
    let get = |n: &str| apis.iter().find(|a| a["name"] == n).unwrap_or_else(|| panic!("{n} missing"));
    assert_eq!(get("hipLaunchKernel")["calls"], 2);
    assert_eq!(get("hipLaunchKernel")["total_ns"], 9_000);
    assert_eq!(get("hipLaunchKernel")["mean_ns"], 4_500);
    assert_eq!(get("hipMalloc")["errors"], 1);
    assert_eq!(get("hipStreamSynchronize")["unclosed"], 1);
    assert_eq!(get("roctxRangePushA")["errors"], 0);
    assert_eq!(apis[0]["name"], "hipLaunchKernel", "sorted by total time");
    assert_eq!(apis[1]["name"], "hipMemcpyAsync");

    let dev = s["gpu_busy"]["devices"].as_array().unwrap();
    assert_eq!(s["gpu_busy"]["first_ns"], 9_000);
    assert_eq!(s["gpu_busy"]["last_ns"], 32_000);
    assert_eq!(dev[0]["gpu"], 0);
    assert_eq!(dev[0]["busy_ns"], 17_000, "union: overlapping kernels counted once");
    assert_eq!(dev[0]["wall_ns"], 23_000);
    assert_eq!(dev[0]["queues"][0]["busy_ns"], 16_000);
    assert_eq!(dev[0]["queues"][1]["busy_ns"], 5_000);
    assert_eq!(dev[1]["busy_ns"], 17_000);
    assert_eq!(dev[1]["ops"], 4);
    let tl = dev[0]["timeline"].as_array().unwrap();
    assert_eq!(tl.len(), rtl_user::read::TIMELINE_BINS);
    let mean: f64 = tl.iter().map(|x| x.as_f64().unwrap()).sum::<f64>() / tl.len() as f64;
    assert!((mean - 17.0 / 23.0).abs() < 0.01, "timeline mean {mean}");

    let p = s["processes"].as_array().unwrap();
    assert_eq!(p[0]["pid"], 100);
    assert_eq!(p[0]["api_calls"], 7);
    assert_eq!(p[0]["api_time_ns"], 17_200);
    assert_eq!(p[0]["gpu_ops"], 3);
    assert_eq!(p[0]["gpu_time_ns"], 25_000);
    assert_eq!(p[0]["cmdline"], "python3 train.py --epochs 1");
    assert_eq!(p[1]["pid"], 200);
    assert_eq!(p[1]["gpu_ops"], 2);
    assert_eq!(p[1]["gpu_time_ns"], 14_000);

    let l = &s["launch_latency"];
    assert_eq!(l["count"], 5);
    assert_eq!(l["p50_ns"], 7_000);
    assert_eq!(l["p90_ns"], 13_000);
    assert_eq!(l["p99_ns"], 13_000);
    assert_eq!(l["min_ns"], 7_000);
    assert_eq!(l["mean_ns"], 8_400);

    assert_eq!(s["lost"]["unlinked_gpu_ops"], 2);
    assert_eq!(s["lost"]["unclosed_apis"], 1);
    assert_eq!(s["lost"]["unclosed_by_reason"]["thread exited inside the call"], 1);
    assert_eq!(s["lost"]["profiler_only_apis"], 0);
    assert_eq!(s["lost"]["api_errors"], 1);
    assert_eq!(s["lost"]["errors"][0]["api"], "hipMalloc");
    assert_eq!(s["lost"]["errors"][0]["error"], "hipErrorOutOfMemory");
    assert_eq!(s["lost"]["errors"][0]["calls"], 1);
    assert_eq!(s["lost"]["dropped"]["dropped_events"], 3);
}

#[test]
fn summary_text_and_top() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let mut out = Vec::new();
    summary(&db, &SummaryOptions { json: false, html: None, top: 1, linked_only: false }, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for want in [
        "GPU kernels and ops by total time (top 1 of 3; 2 left out: --top 0 shows all)",
        "vectorAdd(float*, float*, float*, int)",
        "APIs by total time (top 1 of 7; 6 left out: --top 0 shows all)",
        "GPU 0",
        "queue 1",
        "  GPU time  GPUs  command",
        "  25.00 us     0  python3 train.py --epochs 1",
        "Launch latency (API entry -> GPU start, 5 ops): p50 7.00 us  p90 13.00 us  p99 13.00 us",
        "GPU ops without an API link: 2",
        "    hipMalloc -> hipErrorOutOfMemory (2): 1",
        "dropped_events: 3",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let kernels = &text[text.find("GPU kernels and ops").unwrap()..text.find("APIs by total time").unwrap()];
    assert!(!kernels.contains("reduce(float*, int)"), "top 1 shows one kernel");
}

#[test]
fn summary_html_is_self_contained() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let html = d.path().join("report.html");
    let mut out = Vec::new();
    summary(&db, &SummaryOptions { json: false, html: Some(html.clone()), top: 10, linked_only: false }, &mut out).unwrap();
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(page.matches("<svg").count(), 4, "timeline + stream lanes + kernel chart + launch-latency histogram");
    // The sample's calls record no stream: a lane per process and hardware queue; no stacks: no flame graph.
    assert!(page.contains(r#"<g class="lane" data-gpu="1" data-pid="200" data-stream="queue 0">"#), "{page}");
    assert!(!page.contains("flame-graph"));
    assert!(page.contains("GPU 0") && page.contains("GPU 1"));
    assert!(page.contains("vectorAdd(float*, float*, float*, int)"));
    assert!(!page.contains("<script") && !page.contains("src=") && !page.contains("<link"));
    let without_ns = page.replace("http://www.w3.org/2000/svg", "");
    assert!(!without_ns.contains("http://") && !without_ns.contains("https://"), "no network references");
}

#[test]
fn summary_of_empty_trace() {
    let d = tmpdir();
    let p = d.path().join("empty.db");
    drop(new_trace(&p));
    let mut out = Vec::new();
    summary(&p, &SummaryOptions::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("(no GPU ops)"), "{text}");
    let s = json_summary(&p);
    assert_eq!(s["totals"]["api_calls"], 0);
    assert!(s["launch_latency"].is_null());
}

/// The 10-million-row benchmark: `cargo test --release -p rtl-user --test integration read_summary:: -- --ignored --nocapture`
/// (or `cargo run --release -p rtl-user --example bench_summary`).
#[test]
#[ignore = "a benchmark, not a test: cargo run --release -p rtl-user --example bench_summary"]
fn bench_summary_10m() {
    let status = std::process::Command::new(env!("CARGO"))
        .args(["run", "--release", "-p", "rtl-user", "--example", "bench_summary"])
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn summary_status_reasons() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        for (st, ret) in [(2, None), (3, None), (3, None), (4, Some(1)), (5, Some(0)), (5, Some(3))] {
            read_common::api(&c, 100, 100, 50_000, 50_100, "hipDeviceSynchronize", "", 0, ret, st);
        }
    }
    let s = json_summary(&db);
    let l = &s["lost"];
    assert_eq!(l["unclosed_apis"], 1 + 4);
    assert_eq!(l["unclosed_by_reason"]["exec inside the call"], 1);
    assert_eq!(l["unclosed_by_reason"]["trace ended inside the call"], 2);
    assert_eq!(l["unclosed_by_reason"]["return lost (unmatched)"], 1);
    assert_eq!(l["profiler_only_apis"], 2);
    assert_eq!(l["api_errors"], 1 + 1, "hipMalloc, and the profiler-only call that returned 3");
    let codes = l["errors"].as_array().unwrap();
    assert!(codes.iter().any(|e| e["api"] == "hipDeviceSynchronize" && e["ret"] == 3 && e["error"] == "hipErrorNotInitialized"));
    let apis = s["apis"].as_array().unwrap();
    let sync = apis.iter().find(|a| a["name"] == "hipDeviceSynchronize").unwrap();
    assert_eq!(sync["unclosed"], 4);
    assert_eq!(sync["errors"], 1);
}

#[test]
fn summary_shows_nonzero_collector_loss_counters() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch(
            "INSERT INTO rocpd_metadata(tag, value) VALUES ('ringbuf_drops', '0'), ('ringbuf_drops_per_cpu', '0,0'),
                 ('calls_unclosed', '2'), ('returns_without_entry', '5'), ('gpu_ops_ambiguous', '0'), ('probe_entries', '900')",
        )
        .unwrap();
    let mut out = Vec::new();
    summary(&db, &SummaryOptions::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("calls_unclosed: 2") && text.contains("returns_without_entry: 5"), "{text}");
    assert!(!text.contains("ringbuf_drops") && !text.contains("probe_entries"), "{text}");
    let s = json_summary(&db);
    assert_eq!(s["lost"]["dropped"]["ringbuf_drops"], 0, "--json has them all");
    assert!(s["lost"]["dropped"].get("probe_entries").is_none());
}

#[test]
fn summary_error_codes_negative_and_non_hip() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        // A CUDA driver API returns CUresult: an error code, not a hipError_t.
        for ret in [-1, -1, 7] {
            read_common::api(&c, 100, 100, 60_000, 60_100, "cuLaunchKernel", "", 0, Some(ret), 0);
        }
        // A function the trace describes as returning a pointer, and one whose return it does
        // not know: whatever their values, not failures.
        for (name, ret) in [("hipGetErrorString", 0x7f00_1234_5678), ("hipApiName", -1441002499), ("hsa_queue_create", 7)] {
            read_common::api(&c, 100, 100, 61_000, 61_100, name, "", 0, Some(ret), 0);
        }
    }
    let s = json_summary(&db);
    let codes = s["lost"]["errors"].as_array().unwrap();
    let find = |r: i64| codes.iter().find(|e| e["api"] == "cuLaunchKernel" && e["ret"] == r).cloned();
    assert_eq!(find(-1).unwrap()["calls"], 2);
    assert_eq!(find(-1).unwrap()["error"], "-1", "non-HIP codes are shown as numbers");
    assert_eq!(find(7).unwrap()["calls"], 1);
    assert_eq!(s["lost"]["api_errors"], 1 + 3);
    for n in ["hipGetErrorString", "hipApiName", "hsa_queue_create"] {
        assert!(!codes.iter().any(|e| e["api"] == n), "{n} is no failure: {codes:?}");
    }
}

/// The sections added for issue 16, exact on the hand-built two-process trace: percentiles,
/// roctx ranges, idle gaps with the calls in flight, process -> GPU, launch-latency histogram
/// and per kernel, the header.
#[test]
fn summary_percentiles_ranges_gaps_and_header() {
    let d = tmpdir();
    let db = sample_trace(&d.path().join("t.db"), "nodeA", 0);
    let s = json_summary(&db);
    let k = s["kernels"].as_array().unwrap();
    let kern = |n: &str| k.iter().find(|x| x["name"] == n).unwrap_or_else(|| panic!("{n}"));
    // reduce: op durations 10 000, 4 000, 2 000, 1 000 ns
    let r = kern("reduce(float*, int)");
    assert_eq!((r["p50_ns"].as_i64(), r["p90_ns"].as_i64(), r["p99_ns"].as_i64()), (Some(2_000), Some(10_000), Some(10_000)));
    assert_eq!(kern("vectorAdd(float*, float*, float*, int)")["p50_ns"], 10_000);
    let apis = s["apis"].as_array().unwrap();
    let api = |n: &str| apis.iter().find(|a| a["name"] == n).unwrap();
    // hipLaunchKernel: 5 000 and 4 000 ns; hipModuleLaunchKernel: 4 000, 1 000, 1 000.
    assert_eq!((api("hipLaunchKernel")["p50_ns"].as_i64(), api("hipLaunchKernel")["p99_ns"].as_i64()), (Some(4_000), Some(5_000)));
    assert_eq!(
        (api("hipModuleLaunchKernel")["p50_ns"].as_i64(), api("hipModuleLaunchKernel")["p90_ns"].as_i64()),
        (Some(1_000), Some(4_000))
    );
    assert_eq!(api("hipModuleLaunchKernel")["percentiles_sampled_every"], 1);

    // One roctx range, opened by roctxRangePushA: 1 200 .. 30 200 ns.
    let rg = &s["ranges"][0];
    assert_eq!((rg["name"].as_str(), rg["style"].as_str(), rg["count"].as_i64()), (Some("phase1"), Some("push/pop"), Some(1)));
    assert_eq!((rg["total_ns"].as_i64(), rg["p50_ns"].as_i64(), rg["pct_time"].as_f64()), (Some(29_000), Some(29_000), Some(100.0)));

    // GPU 1's union has three 1 us gaps (22-23, 27-28, 30-31 us); GPU 0 none. During 30-31 us
    // roctxRangePop (30.0-30.4 us) was in flight; during the others nothing was.
    let idle = s["idle_gaps"].as_array().unwrap();
    assert_eq!(idle.len(), 3);
    let starts: Vec<i64> = idle.iter().map(|g| g["start_ns"].as_i64().unwrap()).collect();
    assert_eq!(starts, vec![22_000, 27_000, 30_000], "equal gaps in time order");
    assert!(idle.iter().all(|g| g["gpu"] == 1 && g["duration_ns"] == 1_000));
    assert_eq!(idle[0]["in_flight"], serde_json::json!([]));
    assert_eq!(idle[2]["in_flight"], serde_json::json!([{"api": "roctxRangePop", "calls": 1, "overlap_ns": 400}]));
    // No graph launch: occupancy over each device's span.
    let occ = s["check_metrics"]["occupancy"].as_array().unwrap();
    assert_eq!((occ[0]["window"].as_str(), occ[0]["occupancy"].as_f64()), (Some("span"), Some(1.0)));
    assert_eq!((occ[1]["window_ns"].as_i64(), occ[1]["busy_ns"].as_i64()), (Some(20_000), Some(17_000)));

    // Process -> GPU.
    let p = s["processes"].as_array().unwrap();
    assert_eq!(p[0]["gpus"], serde_json::json!([{"gpu": 0, "gpu_ops": 3, "gpu_time_ns": 25_000}]));
    assert_eq!(p[1]["gpus"], serde_json::json!([{"gpu": 1, "gpu_ops": 2, "gpu_time_ns": 14_000}]));

    // Latencies 7 000, 7 000, 8 000, 7 000 (5-10 us) and 13 000 (10-20 us).
    assert_eq!(
        s["launch_latency"]["histogram"],
        serde_json::json!([{"lo_ns": 5_000, "hi_ns": 10_000, "count": 4}, {"lo_ns": 10_000, "hi_ns": 20_000, "count": 1}])
    );
    let lat = s["launch_latency_per_kernel"].as_array().unwrap();
    let red = lat.iter().find(|x| x["name"] == "reduce(float*, int)").unwrap();
    assert_eq!((red["count"].as_i64(), red["min_ns"].as_i64(), red["max_ns"].as_i64()), (Some(2), Some(7_000), Some(13_000)));

    // Header: the host; no start time or mode in this file: left out, not invented.
    assert_eq!(s["header"]["host"], "nodeA");
    assert!(s["header"]["date_utc"].is_null() && s["header"]["command"].is_null());

    // Text and HTML show the same sections.
    let mut out = Vec::new();
    summary(&db, &SummaryOptions { json: false, html: Some(d.path().join("r.html")), top: 20, linked_only: false }, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for want in [
        "  host nodeA | clock CLOCK_MONOTONIC",
        "roctx / NVTX ranges by total time",
        "  phase1  push/pop      1  29.00 us  29.00 us  29.00 us  29.00 us  29.00 us  29.00 us  29.00 us  100.0%",
        "Largest GPU idle gaps",
        "GPU 1   1.00 us  +29.00 us  roctxRangePop x1 (400 ns)",
        "GPU 1   1.00 us  +21.00 us  (no traced API call)",
        "  histogram (ops per latency bucket):",
        "Launch latency per kernel (most ops first)",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let page = std::fs::read_to_string(d.path().join("r.html")).unwrap();
    for want in [
        "<h2>roctx / NVTX ranges</h2>",
        "<h2>Largest GPU idle gaps</h2>",
        "Launch latency histogram",
        "<th>p99</th>",
        "<h2>Occupancy and inter-op gaps</h2>",
    ] {
        assert!(page.contains(want), "missing {want:?} in the HTML");
    }
}
