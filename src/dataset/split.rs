//! Which split a game belongs to, and which of its positions carry a value
//! label. Both are pure functions of the game's moves and the seed, so the
//! same game lands in the same split in every run, whatever file it is in
//! (duplicates cannot leak from training into validation or test).

use std::fmt;
use std::str::FromStr;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::go::{Move, Vertex};
use crate::sgf::GameRecord;

/// The three parts of a dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    Train,
    Validation,
    Test,
}

impl Split {
    pub const ALL: [Split; 3] = [Split::Train, Split::Validation, Split::Test];

    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Validation => "validation",
            Split::Test => "test",
        }
    }
}

impl fmt::Display for Split {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // pad, not write_str: tables give a width.
        f.pad(self.name())
    }
}

impl FromStr for Split {
    type Err = String;
    fn from_str(s: &str) -> Result<Split, String> {
        match s.to_ascii_lowercase().as_str() {
            "train" => Ok(Split::Train),
            "validation" | "val" | "valid" => Ok(Split::Validation),
            "test" => Ok(Split::Test),
            _ => Err(format!("unknown split `{s}` (train, validation or test)")),
        }
    }
}

/// FNV-1a, 64 bits: tiny, and stable across Rust versions and platforms
/// (unlike `std`'s hasher), which reproducible splits need.
fn fnv1a(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

pub(crate) use crate::go::zobrist::mix;

/// Identity of a game: a hash of its board size, setup stones and moves.
/// Metadata (players, file name) is left out on purpose, so that the same
/// game recorded twice gets the same key.
pub fn game_key(record: &GameRecord) -> u64 {
    let vertex = |v: Vertex| [v.x, v.y];
    let mut bytes = vec![record.size as u8];
    for (v, c) in &record.setup {
        bytes.extend(vertex(*v));
        bytes.push(c.map_or(2, |c| c.index() as u8));
    }
    bytes.push(0xff);
    for m in &record.moves {
        bytes.push(m.color.index() as u8);
        match m.mv {
            Move::Play(v) => bytes.extend(vertex(v)),
            Move::Pass => bytes.extend([0xfe, 0xfe]),
            Move::Resign => bytes.extend([0xfd, 0xfd]),
        }
    }
    fnv1a(bytes)
}

/// Fractions of games for train, validation and test.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SplitFractions(pub [f64; 3]);

impl Default for SplitFractions {
    fn default() -> SplitFractions {
        SplitFractions([0.8, 0.1, 0.1])
    }
}

impl FromStr for SplitFractions {
    type Err = String;
    /// `0.8,0.1,0.1` (normalised, so `8,1,1` works too).
    fn from_str(s: &str) -> Result<SplitFractions, String> {
        let parts: Result<Vec<f64>, _> = s.split(',').map(|p| p.trim().parse::<f64>()).collect();
        let parts = parts.map_err(|e| format!("split `{s}`: {e}"))?;
        let total: f64 = parts.iter().sum();
        // Finite: NaN passes plain comparisons, and an infinite part
        // would make the fractions NaN.
        if parts.len() != 3 || parts.iter().any(|p| !p.is_finite() || *p < 0.0) || !total.is_finite() || total <= 0.0 {
            return Err(format!("split `{s}`: give three non-negative fractions, e.g. 0.8,0.1,0.1"));
        }
        Ok(SplitFractions([parts[0] / total, parts[1] / total, parts[2] / total]))
    }
}

impl SplitFractions {
    /// Whether they are what parsing gives: three fractions from 0, of
    /// sum 1.
    pub fn is_normalised(&self) -> bool {
        self.0.iter().all(|f| (0.0..=1.0).contains(f)) && (self.0.iter().sum::<f64>() - 1.0).abs() < 1e-9
    }

    /// The split of the game with `key` under `seed`.
    pub fn assign(&self, key: u64, seed: u64) -> Split {
        let u = (mix(key ^ mix(seed)) >> 11) as f64 / (1u64 << 53) as f64;
        if u < self.0[0] {
            Split::Train
        } else if u < self.0[0] + self.0[1] {
            Split::Validation
        } else {
            Split::Test
        }
    }
}

/// Which positions of a game get a value label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueSampling {
    /// Every position (strongly correlated within a game: value nets
    /// overfit on them).
    All,
    /// `K` positions per game, drawn with the seed (AlphaGo drew one).
    PerGame(usize),
    /// Only the last position, as the seed project did.
    Final,
    /// The one position each record marks
    /// ([`GameRecord::marked_value_position`]: self-play's AlphaGo value
    /// positions), and only it is written: the game's other positions were
    /// played by another policy, or at random, and teach no policy.
    Marked,
}

impl ValueSampling {
    /// Whether position `i` of the `n` of the game with `key` is labelled
    /// (none under [`ValueSampling::Marked`], whose choice is in the record:
    /// [`ValueSampling::chosen_in`]).
    pub fn chosen(&self, n: usize, key: u64, seed: u64) -> Vec<bool> {
        match *self {
            ValueSampling::All => vec![true; n],
            ValueSampling::Final => (0..n).map(|i| i + 1 == n).collect(),
            ValueSampling::Marked => vec![false; n],
            ValueSampling::PerGame(k) => {
                let mut rng = Pcg64Mcg::seed_from_u64(mix(key ^ mix(seed ^ 0x0056_414C_5545)));
                let mut order: Vec<usize> = (0..n).collect();
                let mut chosen = vec![false; n];
                for j in 0..k.min(n) {
                    let pick = j + (rng.next_u64() % (n - j) as u64) as usize;
                    order.swap(j, pick);
                    chosen[order[j]] = true;
                }
                chosen
            }
        }
    }

    /// Whether each position of `record` (the game with `key`) is labelled;
    /// `None` when the record marks no position it has, which
    /// [`ValueSampling::Marked`] needs.
    pub fn chosen_in(&self, record: &GameRecord, key: u64, seed: u64) -> Option<Vec<bool>> {
        let n = record.moves.len();
        match self {
            ValueSampling::Marked => {
                let marked = record.marked_value_position().filter(|&i| i < n)?;
                Some((0..n).map(|i| i == marked).collect())
            }
            _ => Some(self.chosen(n, key, seed)),
        }
    }

    /// Whether positions without a value label are written too (as policy
    /// data).
    pub fn writes_unlabelled(&self) -> bool {
        *self != ValueSampling::Marked
    }
}

impl fmt::Display for ValueSampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSampling::All => f.write_str("all"),
            ValueSampling::PerGame(k) => write!(f, "per-game:{k}"),
            ValueSampling::Final => f.write_str("final"),
            ValueSampling::Marked => f.write_str("marked"),
        }
    }
}

impl FromStr for ValueSampling {
    type Err = String;
    fn from_str(s: &str) -> Result<ValueSampling, String> {
        match s {
            "all" => Ok(ValueSampling::All),
            "final" => Ok(ValueSampling::Final),
            "marked" => Ok(ValueSampling::Marked),
            _ => s
                .strip_prefix("per-game:")
                .and_then(|k| k.parse().ok())
                .filter(|&k| k > 0)
                .map(ValueSampling::PerGame)
                .ok_or_else(|| {
                    // A K past the largest number once read as "K ≥ 1".
                    format!("value sampling `{s}`: use all, final, marked or per-game:K (K from 1 to {})", usize::MAX)
                }),
        }
    }
}

impl Serialize for ValueSampling {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ValueSampling {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ValueSampling, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_name_fills_the_width_a_table_gives() {
        assert_eq!(format!("{:<10}|{:>6}|", Split::Test, Split::Train), "test      | train|");
    }

    #[test]
    fn assignment_follows_the_fractions_and_the_seed() {
        let f = SplitFractions::default();
        let mut counts = [0usize; 3];
        for key in 0..20_000u64 {
            counts[f.assign(mix(key), 7) as usize] += 1;
        }
        assert!((15_600..16_400).contains(&counts[0]), "{counts:?}");
        assert!((1_800..2_200).contains(&counts[1]) && (1_800..2_200).contains(&counts[2]), "{counts:?}");
        let moved = (0..1000u64).filter(|&k| f.assign(k, 1) != f.assign(k, 2)).count();
        assert!(moved > 100, "another seed gives another split");
        assert_eq!("8,1,1".parse::<SplitFractions>().unwrap(), f);
        assert!("0.5,0.5".parse::<SplitFractions>().is_err());
    }

    #[test]
    fn value_sampling_is_reproducible_and_takes_k() {
        let s: ValueSampling = "per-game:3".parse().unwrap();
        let a = s.chosen(200, 42, 1);
        assert_eq!(a.iter().filter(|&&c| c).count(), 3);
        assert_eq!(a, s.chosen(200, 42, 1));
        assert_ne!(a, s.chosen(200, 43, 1));
        assert_eq!(s.chosen(2, 1, 1), vec![true, true]);
        assert_eq!(ValueSampling::Final.chosen(3, 0, 0), vec![false, false, true]);
        assert_eq!("final".parse::<ValueSampling>().unwrap().to_string(), "final");
        assert!("per-game:0".parse::<ValueSampling>().is_err());
        let huge = "per-game:99999999999999999999".parse::<ValueSampling>().unwrap_err();
        assert!(huge.contains(&format!("K from 1 to {}", usize::MAX)), "{huge}");
    }

    #[test]
    fn marked_sampling_labels_the_records_mark_alone_and_drops_a_game_without_one() {
        let mut record = GameRecord::new(19);
        record.moves = (0..5)
            .map(|i| crate::go::ColoredMove { color: crate::go::Color::Black, mv: Move::Play(Vertex::new(i, 0)) })
            .collect();
        let marked: ValueSampling = "marked".parse().unwrap();
        assert_eq!(marked.to_string(), "marked");
        assert!(!marked.writes_unlabelled() && ValueSampling::All.writes_unlabelled());
        assert_eq!(marked.chosen_in(&record, 1, 1), None, "no mark");
        record.mark_value_position(3);
        assert_eq!(marked.chosen_in(&record, 1, 1), Some(vec![false, false, false, true, false]));
        record.mark_value_position(5);
        assert_eq!(marked.chosen_in(&record, 1, 1), None, "the position after the last move has no record");
        assert_eq!(ValueSampling::Final.chosen_in(&record, 1, 1), Some(ValueSampling::Final.chosen(5, 1, 1)));
    }
}
