//! `stack-cost` (issue 17): what `--stacks` adds per launch-family call, in the traced thread.
//!
//! The probe-cost target library also exports a cheap `hipLaunchKernel`; the driver calls it
//! from 8 frames of its own. Interleaved rounds of: no probe; rtl-ebpf probing it with stacks
//! off; `--stacks fp` (bpf_get_stack); `--stacks dwarf` (8 KiB of stack copied). Printed: wall
//! ns per call (median of rounds) and the in-kernel program time per call (bpf_stats), and the
//! added cost of each stack route over stacks off.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::bench::{bench_target, bin, median, prog_ids_of, prog_stats_of, start_until, stop, time_until_unloaded, TRACER_CPU};
use crate::util::{cmd, root};

pub fn stack_cost() -> Result<()> {
    let (lib, drv) = bench_target()?;
    let lib_s = lib.display().to_string();
    let calls = 200_000u64;
    let rounds = 5;
    let modes = ["off", "fp", "dwarf"];
    let stats_was = cmd("sysctl").args(["-n", "kernel.bpf_stats_enabled"]).output()?.trim().to_string();
    cmd("sysctl").args(["-q", "-w", "kernel.bpf_stats_enabled=1"]).run()?;
    let db = root().join("target/bench/stack-cost.db");
    let mut none = Vec::new();
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut prog: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let driver = |n: u64| driver_launch_ns(&drv, n);
    let result = (|| -> Result<()> {
        for _ in 0..rounds {
            none.push(driver(calls)?);
            for (i, mode) in modes.iter().enumerate() {
                let mut ro = Command::new("taskset");
                ro.args(["-c", TRACER_CPU]).arg(bin());
                ro.args([
                    "--all",
                    "--apis",
                    "hipLaunchKernel",
                    "--lib",
                    &lib_s,
                    "--gpu",
                    "none",
                    "--quiet",
                    "--force",
                    "--stacks",
                    mode,
                    "-o",
                ])
                .arg(&db);
                let mut c = start_until(ro, "functions probed", false)?;
                // This collector's own programs (other sessions may run the same ones).
                let ids = prog_ids_of(c.id());
                std::thread::sleep(Duration::from_millis(300));
                wall[i].push(driver(calls)?);
                let (t, n) = prog_stats_of(&ids, &["api_enter", "api_exit"])?;
                prog[i].push(t as f64 / n.max(1) as f64 * 2.0);
                stop(&mut c)?;
                time_until_unloaded(&ids, Instant::now(), Duration::from_secs(180))?;
            }
        }
        Ok(())
    })();
    let _ = cmd("sysctl").args(["-q", "-w", &format!("kernel.bpf_stats_enabled={stats_was}")]).run();
    result?;
    let n = median(&mut none);
    println!("stack-cost: hipLaunchKernel (bench target) called 8 frames deep, {calls} calls x {rounds} interleaved rounds");
    println!("  per call, median ns        wall     in-kernel program time (entry + return)");
    println!("  no probe                {n:>9.1}");
    let (off_w, off_p) = (median(&mut wall[0]), median(&mut prog[0]));
    for (i, mode) in modes.iter().enumerate() {
        let (w, p) = (median(&mut wall[i]), median(&mut prog[i]));
        let extra =
            if i == 0 { String::new() } else { format!("   stacks add {:+.1} ns wall, {:+.1} ns in the program", w - off_w, p - off_p) };
        println!("  --stacks {mode:<6}         {w:>9.1}   {p:>7.1}{extra}");
    }
    let _ = std::fs::remove_file(&db);
    Ok(())
}

fn driver_launch_ns(drv: &std::path::Path, calls: u64) -> Result<f64> {
    let out = cmd("taskset").args(["-c", crate::bench::WORKLOAD_CPU]).arg(drv).arg(calls.to_string()).arg("launch").output()?;
    out.split("\"ns_per_call\":")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("probe_driver printed no ns_per_call"))
}

/// `python-stack-cost`: what walking CPython's frames adds to `--stacks dwarf` per launch, in
/// the traced thread. A Python driver (tests/bench/py_launch_driver.py) calls the bench
/// target's `hipLaunchKernel` through ctypes from 11 Python frames; interleaved rounds of: no
/// tracer; `run --stacks off`; `--stacks dwarf --no-python-frames`; `--stacks dwarf`. Printed:
/// the driver's own ns per call (median of rounds) and the differences.
pub fn python_stack_cost() -> Result<()> {
    let (lib, _) = bench_target()?;
    let lib_s = lib.display().to_string();
    let driver = root().join("tests/bench/py_launch_driver.py");
    let python = "/usr/bin/python3";
    let (calls, depth, rounds) = (200_000u64, 8, 5);
    let db = root().join("target/bench/python-stack-cost.db");
    let modes: [(&str, &[&str]); 4] = [
        ("no tracer", &[]),
        ("--stacks off", &["off"]),
        ("dwarf, no Python", &["dwarf", "--no-python-frames"]),
        ("--stacks dwarf", &["dwarf"]),
    ];
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for _ in 0..rounds {
        for (i, (_, args)) in modes.iter().enumerate() {
            let mut c = if args.is_empty() {
                Command::new("taskset")
            } else {
                let mut c = Command::new(bin());
                c.args(["run", "--apis", "hipLaunchKernel", "--lib", &lib_s, "--gpu", "none", "--quiet", "--force", "--stacks"]);
                c.args(args.iter()).arg("-o").arg(&db).arg("--").arg("taskset");
                c
            };
            c.args(["-c", crate::bench::WORKLOAD_CPU, python]).arg(&driver).arg(&lib_s).arg(calls.to_string()).arg(depth.to_string());
            let out = c.output()?;
            anyhow::ensure!(out.status.success(), "{}: {}", modes[i].0, String::from_utf8_lossy(&out.stderr));
            let text = String::from_utf8_lossy(&out.stdout);
            let v: f64 = text
                .split("\"ns_per_call\":")
                .nth(1)
                .and_then(|s| s.split(',').next())
                .and_then(|s| s.trim().parse().ok())
                .ok_or_else(|| anyhow::anyhow!("py_launch_driver printed no ns_per_call: {text}"))?;
            ns[i].push(v);
        }
    }
    let _ = std::fs::remove_file(&db);
    println!("python-stack-cost: hipLaunchKernel (bench target) through ctypes from {} Python frames, {calls} calls x {rounds} interleaved rounds", depth + 3);
    let med: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    for (i, (name, _)) in modes.iter().enumerate() {
        let extra = if i == 0 { String::new() } else { format!("   {:+.1} over the row above", med[i] - med[i - 1]) };
        println!("  {name:<18} {:>9.1} ns per call{extra}", med[i]);
    }
    println!("  Python frames add {:+.1} ns per launch to --stacks dwarf", med[3] - med[2]);
    Ok(())
}
