//! Statistics of a split's labels (what `dataset info` shows): how often
//! each move is the answer, at which stage of the game, and the balance of
//! the value labels. A lopsided dataset shows here before a net learns it.

use anyhow::Result;
use rayon::prelude::*;

use super::reader::Dataset;
use super::shard::Block;
use super::split::Split;
use crate::progress::Progress;

/// Names of the stages counted in [`LabelStats::stages`]: the number of the
/// move played (from 1), i.e. `move_number + 1`.
pub const STAGES: [&str; 3] = ["1-50", "51-150", "151+"];

/// Label counts of a split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelStats {
    /// Board side.
    pub size: usize,
    /// Records counted.
    pub records: u64,
    /// Records per policy label: row-major points, then pass.
    pub policy: Vec<u64>,
    /// Records per stage of the game (see [`STAGES`]).
    pub stages: [u64; 3],
    /// Value labels 1: the side to move won.
    pub wins: u64,
    /// Value labels 0: the side to move lost.
    pub losses: u64,
    /// Records without a value label.
    pub no_value: u64,
}

impl LabelStats {
    /// No records yet, on a board of `size`.
    pub fn new(size: usize) -> LabelStats {
        LabelStats {
            size,
            records: 0,
            policy: vec![0; size * size + 1],
            stages: [0; 3],
            wins: 0,
            losses: 0,
            no_value: 0,
        }
    }

    /// Counts every block of `split`, decoding them in parallel (one block
    /// per thread at a time, so memory stays small); `progress` counts
    /// blocks.
    pub fn of_split(dataset: &Dataset, split: Split, progress: &Progress) -> Result<LabelStats> {
        let size = dataset.board_size();
        dataset
            .block_refs(split)
            .into_par_iter()
            .map(|r| {
                let mut stats = LabelStats::new(size);
                stats.add(&dataset.read_block(r)?);
                progress.inc(1);
                Ok(stats)
            })
            .try_reduce(|| LabelStats::new(size), |a, b| Ok(a.merge(&b)))
    }

    /// Counts the records of `block` (its labels checked already).
    pub fn add(&mut self, block: &Block) {
        self.records += block.len() as u64;
        for &p in &block.policy {
            self.policy[p as usize] += 1;
        }
        for &m in &block.move_number {
            self.stages[stage(m)] += 1;
        }
        for &v in &block.value {
            match v {
                1 => self.wins += 1,
                0 => self.losses += 1,
                _ => self.no_value += 1,
            }
        }
    }

    /// The counts of both.
    pub fn merge(mut self, other: &LabelStats) -> LabelStats {
        self.records += other.records;
        for (a, b) in self.policy.iter_mut().zip(&other.policy) {
            *a += b;
        }
        for (a, b) in self.stages.iter_mut().zip(&other.stages) {
            *a += b;
        }
        self.wins += other.wins;
        self.losses += other.losses;
        self.no_value += other.no_value;
        self
    }

    /// Records whose move is a pass.
    pub fn passes(&self) -> u64 {
        self.policy[self.size * self.size]
    }

    /// The `k` points most often played, most frequent first (ties by
    /// point), as (row-major point, records).
    pub fn top_points(&self, k: usize) -> Vec<(usize, u64)> {
        let mut points: Vec<(usize, u64)> = self.policy[..self.size * self.size].iter().copied().enumerate().collect();
        points.sort_by_key(|&(p, n)| (std::cmp::Reverse(n), p));
        points.truncate(k);
        points
    }
}

/// Index into [`STAGES`] of a record with `move_number` moves before it.
fn stage(move_number: u16) -> usize {
    match move_number as u32 + 1 {
        ..=50 => 0,
        51..=150 => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::NO_VALUE;

    #[test]
    fn counts_add_up() {
        let mut block = Block::default();
        let planes =
            vec![
                0u64;
                crate::dataset::shard::Layout { board_size: 9, planes: crate::features::PLANES }.planes_bytes() / 8
            ];
        for (policy, value, moves) in [(81u16, 1i8, 0u16), (40, 0, 49), (40, NO_VALUE, 50), (3, 1, 149), (40, 1, 150)] {
            block.push(&planes, policy, value, moves);
        }
        let mut s = LabelStats::new(9);
        s.add(&block);
        let s = s.merge(&LabelStats::new(9));
        assert_eq!((s.records, s.passes(), s.wins, s.losses, s.no_value), (5, 1, 3, 1, 1));
        assert_eq!(s.stages, [2, 2, 1], "moves 1 and 50; 51 and 150; 151+");
        assert_eq!(s.top_points(2), vec![(40, 3), (3, 1)]);
    }
}
