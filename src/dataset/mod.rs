//! Datasets: position records in zstd-compressed, memory-mapped shards, a
//! manifest, a deterministic split by game, and the reader the trainers use.

pub mod filter;
pub mod manifest;
pub mod ownership;
pub mod parts;
pub mod prepare;
pub mod reader;
pub mod shard;
pub mod split;
pub mod stats;
#[cfg(any(test, feature = "testkit"))]
#[doc(hidden)]
pub mod testkit;
pub mod verify;

pub use manifest::{Manifest, MANIFEST};
pub use reader::{decode_rate, Batch, BatchOptions, Batches, Dataset, DecodeRate, Prefetch};
pub use shard::{Block, Shard, ShardWriter, NO_VALUE};
pub use split::{game_key, Split, SplitFractions, ValueSampling};
pub use stats::LabelStats;
pub use verify::{verify, ShardReport, VerifyReport};
