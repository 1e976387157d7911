//! `manifest.json`: what a dataset was made from, with which settings, and
//! what each shard holds. Written last, so a dataset without one is not
//! finished. It holds no time or thread count: the same inputs and settings
//! give a byte-identical manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::shard::Layout;
use super::split::{Split, SplitFractions, ValueSampling};
use crate::features::FeatureSet;

/// File name of the manifest inside a dataset folder.
pub const MANIFEST: &str = "manifest.json";
/// Version of the dataset layout (manifest and shards).
pub const DATASET_VERSION: u32 = 1;

/// The games a dataset was made from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// The game list, as given to `prepare`.
    pub list: String,
    /// CRC-32 of the list file, in hex.
    pub list_crc32: String,
    /// Games named in the list.
    pub games_listed: u64,
}

/// Every setting that changes the output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Seed of the split and of value sampling.
    pub seed: u64,
    /// Fractions of games in train, validation, test.
    pub split: SplitFractions,
    /// Which positions carry a value label.
    pub value: ValueSampling,
    /// Rules for records whose `RU` go-train does not know.
    pub default_rules: String,
    /// Largest number of records in a shard.
    pub shard_records: u64,
    /// Records per compressed block (the unit of random access).
    pub block_records: u64,
    /// zstd level.
    pub zstd_level: i32,
    /// Whether each record carries its game's final ownership as label
    /// planes ([`super::ownership`]); absent before there was a choice.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ownership: bool,
}

/// Counts of one split.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitCounts {
    pub games: u64,
    pub positions: u64,
    /// Positions with a value label.
    pub value_positions: u64,
}

/// One shard file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardEntry {
    /// File name inside the dataset folder.
    pub file: String,
    pub split: Split,
    pub records: u64,
    pub blocks: u32,
    pub bytes: u64,
    /// CRC-32 of the whole file, in hex.
    pub crc32: String,
}

impl ShardEntry {
    /// The entry of a finished shard named `file`.
    pub fn new(file: String, split: Split, s: &super::shard::ShardSummary) -> ShardEntry {
        ShardEntry {
            file,
            split,
            records: s.records,
            blocks: s.blocks,
            bytes: s.bytes,
            crc32: format!("{:08x}", s.crc32),
        }
    }
}

/// The manifest of a dataset.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub dataset_version: u32,
    /// Version of go-train that wrote it.
    pub go_train_version: String,
    /// The input planes of its records (absent in manifests written before
    /// there was a choice: the seed's).
    #[serde(default)]
    pub features: FeatureSet,
    /// [`FeatureSet::version`] of the planes.
    pub feature_version: u32,
    pub planes: usize,
    pub board_size: usize,
    pub input: Input,
    pub settings: Settings,
    pub splits: BTreeMap<Split, SplitCounts>,
    /// Games of the list that were not written, by reason.
    pub dropped: BTreeMap<String, u64>,
    pub shards: Vec<ShardEntry>,
}

impl Manifest {
    /// Reads `dir/manifest.json`, refusing layouts and features this
    /// go-train cannot read.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("{}: no dataset here (run `go-train prepare` first)", path.display()))?;
        let m: Manifest =
            serde_json::from_str(&text).with_context(|| format!("{}: not a valid manifest", path.display()))?;
        if m.dataset_version != DATASET_VERSION {
            bail!("{}: dataset version {}, this go-train reads {DATASET_VERSION}", path.display(), m.dataset_version);
        }
        if m.feature_version != m.features.version() || m.planes != m.features.planes() {
            bail!(
                "{}: {} features version {} with {} planes; this go-train writes version {} with {} planes: run prepare again",
                path.display(),
                m.features,
                m.feature_version,
                m.planes,
                m.features.version(),
                m.features.planes()
            );
        }
        Ok(m)
    }

    /// Writes the manifest atomically (see [`crate::atomic::write_atomic`]).
    pub fn write(&self, dir: &Path) -> Result<()> {
        crate::atomic::write_atomic(&dir.join(MANIFEST), self.text()?.as_bytes())
    }

    /// Writes the manifest atomically when other processes may write the
    /// same one at once: parts of a dataset that finish together
    /// ([`crate::atomic::write_atomic_shared`]).
    pub fn write_shared(&self, dir: &Path) -> Result<()> {
        crate::atomic::write_atomic_shared(&dir.join(MANIFEST), self.text()?.as_bytes())
    }

    fn text(&self) -> Result<String> {
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        Ok(text)
    }

    /// Board size and planes of its records.
    pub fn layout(&self) -> Layout {
        Layout { board_size: self.board_size, planes: self.planes, ownership: self.settings.ownership }
    }

    /// The shards of one split, as paths under `dir`.
    pub fn shard_paths(&self, dir: &Path, split: Split) -> Vec<PathBuf> {
        self.shards.iter().filter(|s| s.split == split).map(|s| dir.join(&s.file)).collect()
    }
}
