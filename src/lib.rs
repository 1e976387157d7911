//! go-train: a supervised-learning pipeline for Go, after AlphaGo's first
//! stage. Data flows one way: SGF → game → board → planes → shard → batch → net.

pub mod features;
pub mod go;
pub mod nn;
pub mod search;
pub mod sgf;
pub mod train;
