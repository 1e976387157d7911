//! Input features of the nets, seen from the side to move, in a bit-packed
//! form (for shards) and as f32 (for tensors), and the 8 symmetries of the
//! square.
//!
//! Two feature sets ([`FeatureSet`]), chosen at `prepare` and recorded in
//! the dataset's manifest and in every weights file: the seed design's 15
//! planes ([`planes`]) and those planes plus AlphaGo's richer ones
//! ([`extended`]: colour to play, ko, moves since each stone was played,
//! liberties after the move, captures, self-atari, ladders).

pub mod extended;
mod ladder;
pub mod planes;
pub mod symmetry;

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use crate::go::Game;
pub use planes::{PackedPlanes, PLANES};
pub use symmetry::Symmetry;

/// Which input planes a dataset holds and a net reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSet {
    /// The seed design's 15 planes.
    #[default]
    Seed,
    /// The seed's planes, then [`extended::EXTRA_PLANES`] more.
    Extended,
}

impl FeatureSet {
    /// Every feature set, for messages and tests.
    pub const ALL: [FeatureSet; 2] = [FeatureSet::Seed, FeatureSet::Extended];

    /// Number of planes.
    /// The plane that is all ones when Black is to move, if the set has one.
    pub fn black_to_move_plane(self) -> Option<usize> {
        match self {
            FeatureSet::Seed => None,
            FeatureSet::Extended => Some(extended::BLACK_TO_MOVE),
        }
    }

    pub fn planes(self) -> usize {
        match self {
            FeatureSet::Seed => PLANES,
            FeatureSet::Extended => PLANES + extended::EXTRA_PLANES,
        }
    }

    /// The name used on the command line, in manifests and weights files.
    pub fn name(self) -> &'static str {
        match self {
            FeatureSet::Seed => "seed",
            FeatureSet::Extended => "extended",
        }
    }

    /// Version of the set's encoding, recorded in manifests so that shards
    /// written by an older encoding are refused rather than misread.
    pub fn version(self) -> u32 {
        match self {
            FeatureSet::Seed => 1,
            FeatureSet::Extended => 1,
        }
    }

    /// Encodes the position of `game` for the side to move.
    pub fn encode(self, game: &Game) -> PackedPlanes {
        let mut planes = PackedPlanes::new(game.size(), self.planes());
        self.encode_into(game, &mut planes);
        planes
    }

    /// Like [`FeatureSet::encode`], reusing `planes` (for the same board
    /// size and this set's plane count).
    pub fn encode_into(self, game: &Game, planes: &mut PackedPlanes) {
        assert_eq!(planes.planes(), self.planes(), "planes of another feature set");
        planes::encode_seed(game, planes);
        if self == FeatureSet::Extended {
            extended::encode_extra(game, planes);
        }
    }
}

impl fmt::Display for FeatureSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for FeatureSet {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<FeatureSet> {
        match FeatureSet::ALL.into_iter().find(|f| f.name() == s) {
            Some(f) => Ok(f),
            None => bail!(
                "unknown feature set {s:?}: use seed (15 planes) or extended ({} planes)",
                FeatureSet::Extended.planes()
            ),
        }
    }
}
