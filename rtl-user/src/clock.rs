//! The trace's clock: CLOCK_MONOTONIC nanoseconds (what `bpf_ktime_get_ns` reads), with the
//! offset to CLOCK_REALTIME measured so wall-clock times can be recovered.

/// A CLOCK_REALTIME / CLOCK_MONOTONIC pair read back to back (monotonic read twice, the
/// realtime read taken against their midpoint to halve the error).
#[derive(Debug, Clone, Copy)]
pub struct ClockPair {
    pub realtime_ns: i64,
    pub monotonic_ns: i64,
}

fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

impl ClockPair {
    pub fn now() -> Self {
        let m0 = read(libc::CLOCK_MONOTONIC);
        let r = read(libc::CLOCK_REALTIME);
        let m1 = read(libc::CLOCK_MONOTONIC);
        Self { realtime_ns: r, monotonic_ns: m0 + (m1 - m0) / 2 }
    }

    /// realtime - monotonic: add it to a trace timestamp to get Unix-epoch nanoseconds.
    pub fn realtime_minus_monotonic(&self) -> i64 {
        self.realtime_ns - self.monotonic_ns
    }
}
