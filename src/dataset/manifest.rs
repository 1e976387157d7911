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

/// The folder inside a dataset folder where `prepare` writes a whole
/// list's dataset until it replaces the one there.
pub(crate) const STAGING: &str = ".prepare-new";
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
    /// CRC-32 of the sizes of the files the list names, each once in list
    /// order, in hex: the list's text names files relative to its own
    /// folder, so one text can name other games, and a game file edited
    /// leaves it as it was. Absent in datasets of earlier go-train.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files_crc32: Option<String>,
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
    /// The first few of them by reason, `file#game: cause`, so that a
    /// count says which games to look at.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub dropped_examples: BTreeMap<String, Vec<String>>,
    pub shards: Vec<ShardEntry>,
}

/// Examples kept of each reason a game was dropped.
pub const DROPPED_EXAMPLES: usize = 3;

impl Manifest {
    /// How a dataset prepared with `settings`, `features` and `board_size`
    /// would differ from this one, each as `name: value here, value there`
    /// (empty: the same).
    pub fn settings_differences(&self, settings: &Settings, features: FeatureSet, board_size: usize) -> Vec<String> {
        let mut differ = Vec::new();
        if features != self.features {
            differ.push(format!("features: {} here, {} there", features.name(), self.features.name()));
        }
        if board_size != self.board_size {
            differ.push(format!("board size: {board_size} here, {} there", self.board_size));
        }
        // Field by field: a field left out (ownership off) is none.
        use crate::differences::{differences, shown};
        for (key, there, here) in differences(&self.settings, settings) {
            differ.push(format!("{key}: {} here, {} there", shown(&here, "none"), shown(&there, "none")));
        }
        differ
    }

    /// The first shard of this manifest that `dir` lacks or holds at
    /// another length: a quick look, not `dataset verify`, before a
    /// dataset or a part is taken as done.
    pub fn damaged_shard(&self, dir: &Path) -> Option<&ShardEntry> {
        self.shards.iter().find(|e| shard_file_fault(dir, e).is_some())
    }

    /// Refuses a manifest whose shards `dir` lacks or holds at other
    /// lengths, seen from the files' metadata alone: what `dataset info
    /// --quick`, which reads no shard, can still check.
    pub fn check_shard_files(&self, dir: &Path) -> Result<()> {
        match self.shards.iter().find_map(|e| shard_file_fault(dir, e)) {
            Some(fault) => bail!("{fault} (go-train dataset verify {} checks it all)", dir.display()),
            None => Ok(()),
        }
    }

    /// Reads `dir/manifest.json`, refusing layouts and features this
    /// go-train cannot read.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = crate::bounded_read::read_text_at_most(&path, crate::bounded_read::TEXT_BYTES, "a manifest")
            .with_context(|| {
                let staged = dir.join(STAGING);
                match staged.join(MANIFEST).is_file() {
                    true => format!(
                        "{}: no dataset here: a `go-train prepare` killed while moving in the dataset it had finished \
                         left it in {}; run that prepare again to finish the move",
                        path.display(),
                        staged.display()
                    ),
                    false => format!("{}: no dataset here (run `go-train prepare` first)", path.display()),
                }
            })?;
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

    /// What tells this dataset's records from any other's: a CRC-32 of its
    /// shard list (each shard's name, split, counts, size and CRC-32, in
    /// order). The same wherever the folder is copied, and for the same
    /// list prepared again with the same settings; another list, other
    /// settings, or the same games prepared in parts (cut into other
    /// blocks, so read in another order) give another.
    pub fn identity(&self) -> DatasetId {
        let mut crc = crc32fast::Hasher::new();
        for s in &self.shards {
            let line = format!("{}\t{}\t{}\t{}\t{}\t{}\n", s.file, s.split, s.records, s.blocks, s.bytes, s.crc32);
            crc.update(line.as_bytes());
        }
        DatasetId(crc.finalize())
    }

    /// Games kept in all splits.
    pub fn games(&self) -> u64 {
        self.splits.values().map(|c| c.games).sum()
    }

    /// Refuses a dataset that kept no game of its list, naming why each
    /// was dropped: `prepare` writes no such dataset.
    pub fn check_not_empty(&self, dir: &Path) -> Result<()> {
        if self.games() > 0 {
            return Ok(());
        }
        let example = |reason: &String| {
            self.dropped_examples.get(reason).and_then(|e| e.first()).map(|e| format!(", e.g. {e}")).unwrap_or_default()
        };
        let why: Vec<String> =
            self.dropped.iter().map(|(reason, n)| format!("{n} {reason}{}", example(reason))).collect();
        let why = if why.is_empty() { String::new() } else { format!(" (dropped: {})", why.join(", ")) };
        bail!(
            "{}: no game of the {} that {} lists was kept{why}, so no dataset was written: check the list and \
             --size ({}x{} here)",
            dir.display(),
            self.input.games_listed,
            self.input.list,
            self.board_size,
            self.board_size
        )
    }

    /// Refuses a manifest with any of [`Manifest::inconsistencies`]: what
    /// every reader of a dataset checks first, `dataset info --quick` too.
    pub fn check(&self, dir: &Path) -> Result<()> {
        let wrong = self.inconsistencies(dir);
        if !wrong.is_empty() {
            bail!("{} (go-train dataset verify {} checks it all)", wrong.join("; "), dir.display());
        }
        Ok(())
    }

    /// What the manifest says that contradicts itself or go-train, each
    /// naming `dir`'s manifest: split totals against the shards', counts
    /// that cannot be, a shard named twice, a board size go-train does not
    /// play. Costs nothing to check (the shards' own records and sizes are
    /// checked against their entries as they are opened).
    pub fn inconsistencies(&self, dir: &Path) -> Vec<String> {
        let path = dir.join(MANIFEST);
        let mut errors = Vec::new();
        if !crate::go::Board::valid_size(self.board_size) {
            errors.push(format!(
                "{}: board size {} is not one go-train plays (2 to 25)",
                path.display(),
                self.board_size
            ));
        }
        let Settings { block_records, shard_records, .. } = self.settings;
        if block_records == 0 || shard_records < block_records {
            errors.push(format!(
                "{}: {shard_records} records a shard and {block_records} a block: prepare cuts a shard into whole \
                 blocks of at least one record",
                path.display()
            ));
        }
        if !self.settings.split.is_normalised() {
            errors.push(format!(
                "{}: split {:?}: not three fractions from 0 of sum 1, as prepare writes them",
                path.display(),
                self.settings.split.0
            ));
        }
        // Prepare names each shard by its split: one listed in another
        // split (a hand edit) would train on validation games.
        for entry in &self.shards {
            let named = entry.file.split(|c: char| !c.is_ascii_lowercase()).next().unwrap_or_default();
            if let Some(other) = Split::ALL.into_iter().find(|s| s.name() == named && *s != entry.split) {
                errors.push(format!(
                    "{}: {} is a {other} shard by its name, and listed in {}",
                    path.display(),
                    entry.file,
                    entry.split
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for entry in self.shards.iter().filter(|e| !seen.insert(&e.file)) {
            errors.push(format!("{}: {} is named more than once", path.display(), entry.file));
        }
        // A dataset is its folder: a shard elsewhere (`../other/x.shard`)
        // would be read, and moved or merged, as if it were one of its own.
        let own = |file: &str| {
            let mut parts = Path::new(file).components();
            matches!((parts.next(), parts.next()), (Some(std::path::Component::Normal(_)), None))
        };
        for entry in self.shards.iter().filter(|e| !own(&e.file)) {
            errors.push(format!("{}: {} is no file name of the dataset's folder", path.display(), entry.file));
        }
        for split in Split::ALL {
            let counts = self.splits.get(&split).cloned().unwrap_or_default();
            let records: u64 = self.shards.iter().filter(|e| e.split == split).map(|e| e.records).sum();
            if counts.positions != records {
                errors.push(format!(
                    "{}: {split} has {} positions, its shards' entries {records}",
                    path.display(),
                    counts.positions
                ));
            }
            if counts.value_positions > counts.positions || counts.games > counts.positions {
                errors.push(format!(
                    "{}: {split} has {} games, {} positions and {} value positions: more games or value positions \
                     than positions",
                    path.display(),
                    counts.games,
                    counts.positions,
                    counts.value_positions
                ));
            }
        }
        errors
    }
}

/// A dataset's identity ([`Manifest::identity`]), written as 8 hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct DatasetId(pub u32);

impl std::fmt::Display for DatasetId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

impl From<DatasetId> for String {
    fn from(id: DatasetId) -> String {
        id.to_string()
    }
}

impl TryFrom<String> for DatasetId {
    type Error = String;
    fn try_from(text: String) -> Result<DatasetId, String> {
        u32::from_str_radix(&text, 16).map(DatasetId).map_err(|_| format!("`{text}` is no dataset identity"))
    }
}

/// What is wrong with the file of the shard `entry` in `dir`, seen from its
/// metadata: missing, not a file, or another length than the manifest's.
fn shard_file_fault(dir: &Path, entry: &ShardEntry) -> Option<String> {
    let path = dir.join(&entry.file);
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(missing_shard(&path)),
        Err(e) => Some(format!("{}: {e}", path.display())),
        Ok(m) if !m.is_file() => Some(format!("{}: not a file (the manifest names a shard)", path.display())),
        Ok(m) if m.len() != entry.bytes => Some(shard_of_another_length(&path, m.len(), entry)),
        Ok(_) => None,
    }
}

/// What a reader says of a shard the manifest names and the folder lacks.
pub(crate) fn missing_shard(path: &Path) -> String {
    format!("{}: missing (the manifest names it)", path.display())
}

/// What a reader says of a shard cut short or swapped for another.
pub(crate) fn shard_of_another_length(path: &Path, bytes: u64, entry: &ShardEntry) -> String {
    format!("{}: {bytes} bytes, the manifest says {}", path.display(), entry.bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::testkit::{self, Layout};

    /// The identity follows the records, not where the folder is or which
    /// go-train wrote it; it reads back from its text.
    #[test]
    fn the_identity_is_the_records_not_the_folder() {
        let Some(games) = testkit::kgs_games(4) else { return };
        let dir = tempfile::tempdir().unwrap();
        testkit::write_dataset(dir.path(), &games, &Layout { block_records: 64, shard_records: 400 }).unwrap();
        let manifest = Manifest::read(dir.path()).unwrap();
        let id = manifest.identity();
        let moved = Manifest {
            go_train_version: "0.0.1".into(),
            input: Input { list: "elsewhere/games.list".into(), ..manifest.input.clone() },
            ..manifest.clone()
        };
        assert_eq!(moved.identity(), id);
        let mut other = manifest.clone();
        other.shards[0].crc32 = "00000000".into();
        assert_ne!(other.identity(), id);
        let text = serde_json::to_string(&id).unwrap();
        assert_eq!(text, format!("\"{id}\""));
        assert_eq!(serde_json::from_str::<DatasetId>(&text).unwrap(), id);
        assert!(serde_json::from_str::<DatasetId>("\"not hex\"").is_err());
    }
}
