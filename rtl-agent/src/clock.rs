//! Clocks: the profiler reports CPU times on CLOCK_REALTIME, eBPF on CLOCK_MONOTONIC; the
//! agent publishes paired readings so the collector can convert with a measured offset.

use rtl_common::agent::{ClockDomain, ClockSync};

pub fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer; clock_gettime cannot fail for these clocks.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

pub fn monotonic_ns() -> u64 {
    now(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME bracketed by two CLOCK_MONOTONIC reads; the tightest of 7 tries.
pub fn sync(gpu_clock: ClockDomain) -> ClockSync {
    let mut best = ClockSync { uncertainty_ns: u64::MAX, gpu_clock: gpu_clock as u8, ..Default::default() };
    for _ in 0..7 {
        let m1 = now(libc::CLOCK_MONOTONIC);
        let r = now(libc::CLOCK_REALTIME);
        let m2 = now(libc::CLOCK_MONOTONIC);
        let u = m2.saturating_sub(m1);
        if u < best.uncertainty_ns {
            best.uncertainty_ns = u;
            best.realtime_ns = r;
            best.monotonic_ns = m1 + u / 2;
        }
    }
    best
}

pub fn gettid() -> u32 {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sync_is_tight_and_consistent() {
        let s = super::sync(rtl_common::agent::ClockDomain::Realtime);
        assert!(s.uncertainty_ns < 1_000_000);
        let off = s.realtime_ns as i128 - s.monotonic_ns as i128;
        let s2 = super::sync(rtl_common::agent::ClockDomain::Realtime);
        let off2 = s2.realtime_ns as i128 - s2.monotonic_ns as i128;
        assert!((off - off2).abs() < 5_000_000, "offset stable: {off} vs {off2}");
    }
}
