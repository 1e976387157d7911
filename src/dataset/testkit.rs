//! Small datasets made of real game records, for go-train's own tests
//! (unit and integration: the latter cannot see `#[cfg(test)]` code, hence
//! a public module behind the `testkit` feature, which only the tests turn
//! on). Not in the library a user builds, nor in its docs.
//!
//! Its manifest is written by hand here rather than by `prepare`, so that
//! the reader's tests check the reader against the format, not against
//! another reader of the same code.

use std::path::Path;

use anyhow::{Context, Result};

use super::manifest::{Input, Manifest, Settings, ShardEntry, SplitCounts, DATASET_VERSION};
use super::shard::{Block, ShardWriter, NO_VALUE};
use super::split::{game_key, Split, SplitFractions, ValueSampling};
use crate::features::FeatureSet;
use crate::go::Rules;
use crate::sgf::{read_file, GameRecord};

/// Seed of the split and the value sampling of the fixtures.
pub const SEED: u64 = 11;
/// Positions per game given a value label.
pub const VALUE_PER_GAME: usize = 16;

/// One record written, as the reader should give it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FixtureRecord {
    /// The split of its game.
    pub split: Split,
    /// `features::encode` of the position, as words.
    pub planes: Vec<u64>,
    /// Policy label.
    pub policy: u16,
    /// Value label ([`NO_VALUE`] when none).
    pub value: i8,
    /// Moves played before the position.
    pub move_number: u16,
}

/// Sizes of blocks and shards, in records.
pub struct Layout {
    /// Records per block.
    pub block_records: usize,
    /// Largest number of records per shard.
    pub shard_records: usize,
}

/// The first `n` games of `kgs-6d` with at least 50 moves (files in name
/// order), or `None` when the records are not at hand.
#[track_caller]
pub fn kgs_games(n: usize) -> Option<Vec<GameRecord>> {
    let games = crate::test_references::sgf_files("kgs-6d")?
        .iter()
        .filter_map(|f| read_file(f).ok())
        .flat_map(|games| games.into_iter().filter_map(Result::ok))
        .filter(|g| g.moves.len() >= 50)
        .take(n)
        .collect();
    Some(games)
}

/// The records of one game, labelled as `prepare` labels them.
fn game_records(game: &GameRecord, split: Split) -> Result<Vec<FixtureRecord>> {
    let key = game_key(game);
    let chosen = ValueSampling::PerGame(VALUE_PER_GAME).chosen(game.moves.len(), key, SEED);
    let winner = game.result.as_ref().and_then(|r| r.winner());
    let mut records = Vec::new();
    game.replay_with(game.rules_or(Rules::CHINESE), |i, position, mv| {
        let value = match winner {
            Some(w) if chosen[i] => (w == position.to_move()) as i8,
            _ => NO_VALUE,
        };
        if let Some(policy) = mv.mv.policy_index(game.size) {
            let planes = FeatureSet::Seed.encode(position).words().to_vec();
            records.push(FixtureRecord { split, planes, policy: policy as u16, value, move_number: i as u16 });
        }
    })?;
    Ok(records)
}

/// Writes `records` (all of one split) as shards named `<split>-NNNNN.shard`.
fn write_shards(dir: &Path, split: Split, records: &[FixtureRecord], layout: &Layout) -> Result<Vec<ShardEntry>> {
    let mut entries = Vec::new();
    for (n, shard) in records.chunks(layout.shard_records).enumerate() {
        let file = format!("{split}-{n:05}.shard");
        let seed_19 = super::shard::Layout::inputs(19, FeatureSet::Seed.planes());
        let mut writer = ShardWriter::create(&dir.join(&file), seed_19)?;
        for chunk in shard.chunks(layout.block_records) {
            let mut block = Block::default();
            for r in chunk {
                block.push(&r.planes, r.policy, r.value, r.move_number);
            }
            writer.write_block(&block.compress(3)?, block.len())?;
        }
        entries.push(ShardEntry::new(file, split, &writer.finish()?));
    }
    Ok(entries)
}

/// Writes a dataset of the 19×19 `games` into `dir` (split and value
/// labels drawn with [`SEED`]) and returns its records, split by split in
/// file order.
pub fn write_dataset(dir: &Path, games: &[GameRecord], layout: &Layout) -> Result<Vec<FixtureRecord>> {
    let fractions = SplitFractions::default();
    let mut all = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    for split in Split::ALL {
        let mut records = Vec::new();
        let mut c = SplitCounts::default();
        for game in games.iter().filter(|g| fractions.assign(game_key(g), SEED) == split) {
            let more = game_records(game, split).with_context(|| format!("game {:?}", game.black))?;
            c.games += 1;
            c.positions += more.len() as u64;
            c.value_positions += more.iter().filter(|r| r.value != NO_VALUE).count() as u64;
            records.extend(more);
        }
        let entries = write_shards(dir, split, &records, layout)?;
        all.push((records, entries));
        counts.insert(split, c);
    }
    let manifest = Manifest {
        dataset_version: DATASET_VERSION,
        go_train_version: env!("CARGO_PKG_VERSION").into(),
        features: FeatureSet::Seed,
        feature_version: FeatureSet::Seed.version(),
        planes: FeatureSet::Seed.planes(),
        board_size: 19,
        input: Input {
            list: "testkit".into(),
            list_crc32: "00000000".into(),
            games_listed: games.len() as u64,
            files_crc32: None,
        },
        settings: Settings {
            seed: SEED,
            split: fractions,
            value: ValueSampling::PerGame(VALUE_PER_GAME),
            default_rules: "chinese".into(),
            shard_records: layout.shard_records as u64,
            block_records: layout.block_records as u64,
            zstd_level: 3,
            ownership: false,
        },
        splits: counts,
        dropped: Default::default(),
        dropped_examples: Default::default(),
        shards: all.iter().flat_map(|(_, e)| e.clone()).collect(),
    };
    manifest.write(dir)?;
    Ok(all.into_iter().flat_map(|(r, _)| r).collect())
}
