//! Datasets: position records in zstd-compressed, memory-mapped shards, a
//! manifest, a deterministic split by game, and the reader the trainers use.

pub mod filter;
pub mod manifest;
pub mod prepare;
pub mod shard;
pub mod split;

pub use manifest::{Manifest, MANIFEST};
pub use shard::{Block, Shard, ShardWriter, NO_VALUE};
pub use split::{game_key, Split, SplitFractions, ValueSampling};
