//! The CPU time this process has used: what gomill's `gomill-cpu_time`
//! reports, and what the benchmarks print beside wall time (on a shared
//! machine, CPU time well under threads × wall time means the run was
//! starved of cores and its rate is low).

/// User plus system CPU seconds of this process, all its threads, so far;
/// `None` where the system will not say.
pub fn process_cpu_seconds() -> Option<f64> {
    // SAFETY: an all-zero rusage is a valid value of the plain C struct,
    // and getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Some(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_grows_with_work() {
        let before = process_cpu_seconds().expect("getrusage works on Linux");
        // A fifth of a second of busy work the optimiser cannot remove.
        let start = std::time::Instant::now();
        let mut x = 1u64;
        while start.elapsed().as_secs_f64() < 0.2 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let after = process_cpu_seconds().unwrap();
        assert!(after > before && after - before < 10.0, "{before} s, then {after} s");
    }
}
