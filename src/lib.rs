//! go-train: a supervised-learning pipeline for Go, after AlphaGo's first
//! stage. Data flows one way: SGF → game → board → planes → shard → batch → net.

/// `eprintln!` that never panics: a line of diagnostics on stderr, dropped
/// when stderr takes nothing more (its reader gone, `2>&1 | head`). With
/// `eprintln!` a training run or self-play whose stderr closed stopped
/// partway at its next progress line; diagnostics never stop the work.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod atomic;
pub mod bounded_read;
pub mod bounds;
pub mod cpu_time;
pub mod dataset;
pub mod differences;
pub mod eval;
pub mod features;
pub mod go;
pub mod gtp;
pub mod lock;
pub mod memory;
pub mod nn;
pub mod plot;
pub mod progress;
pub mod search;
pub mod selfplay;
pub mod sgf;
#[cfg(any(test, feature = "testkit"))]
#[doc(hidden)]
pub mod test_references;
pub mod train;
