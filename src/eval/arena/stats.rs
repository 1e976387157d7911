//! Win rates with their uncertainty, and the Elo difference they imply.

/// z for a two-sided 95% interval.
pub const Z95: f64 = 1.959_964;

/// The Wilson score interval for a win rate of `wins` out of `n` (draws
/// count half a win); it stays inside 0..1 and is sound for small `n` and
/// for rates near 0 or 1, where the normal approximation is not.
pub fn wilson_interval(wins: f64, n: f64, z: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let p = wins / n;
    let z2 = z * z;
    let center = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / (1.0 + z2 / n);
    // At a rate of exactly 0 or 1 the interval touches that end; say so
    // exactly rather than leave a rounding sliver (an Elo bound of +6000).
    let lo = if wins <= 0.0 { 0.0 } else { (center - half).max(0.0) };
    let hi = if wins >= n { 1.0 } else { (center + half).min(1.0) };
    (lo, hi)
}

/// The Elo difference that makes `p` the expected score:
/// `−400·log10(1/p − 1)`. Infinite at 0 and 1.
pub fn elo_difference(p: f64) -> f64 {
    -400.0 * (1.0 / p - 1.0).log10()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_published_values() {
        // 81 of 263 (Wilson 1927 as tabulated by Newcombe 1998): 0.2553–0.3662.
        let (lo, hi) = wilson_interval(81.0, 263.0, Z95);
        assert!((lo - 0.2553).abs() < 1e-3 && (hi - 0.3662).abs() < 1e-3, "{lo} {hi}");
        // All wins: the upper end is 1, the lower end n/(n+z²).
        let (lo, hi) = wilson_interval(10.0, 10.0, Z95);
        assert_eq!(hi, 1.0);
        assert!((lo - 10.0 / (10.0 + Z95 * Z95)).abs() < 1e-9);
    }

    #[test]
    fn elo_of_familiar_scores() {
        assert_eq!(elo_difference(0.5), 0.0);
        assert!((elo_difference(0.75) - 190.85).abs() < 0.01);
        assert!((elo_difference(0.25) + 190.85).abs() < 0.01);
        assert!(elo_difference(1.0).is_infinite());
    }
}
