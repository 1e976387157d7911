//! go-train: a supervised-learning pipeline for Go, after AlphaGo's first
//! stage. Data flows one way: SGF → game → board → planes → shard → batch → net.

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
