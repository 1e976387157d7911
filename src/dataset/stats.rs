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
    /// CRC-32 of the records, in order.
    pub checksum: RecordChecksum,
}

/// CRC-32 of a sequence of records (planes, move, value, move number), the
/// same however they are cut into blocks and shards: what shows that a
/// dataset prepared in parts holds the records of a one-process `prepare`.
#[derive(Clone, Debug, Default)]
pub struct RecordChecksum(crc32fast::Hasher);

impl RecordChecksum {
    /// Adds the records of `block`, after those added so far.
    pub fn add(&mut self, block: &Block) {
        let per_record = if block.is_empty() { 0 } else { block.planes.len() / block.len() };
        for i in 0..block.len() {
            self.0.update(&block.planes[i * per_record..(i + 1) * per_record]);
            self.0.update(&block.policy[i].to_le_bytes());
            self.0.update(&block.value[i].to_le_bytes());
            self.0.update(&block.move_number[i].to_le_bytes());
        }
    }

    /// The checksum of these records followed by `other`'s.
    pub fn then(mut self, other: &RecordChecksum) -> RecordChecksum {
        self.0.combine(&other.0);
        self
    }

    pub fn value(&self) -> u32 {
        self.0.clone().finalize()
    }
}

impl PartialEq for RecordChecksum {
    fn eq(&self, other: &RecordChecksum) -> bool {
        self.value() == other.value()
    }
}

impl Eq for RecordChecksum {}

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
            checksum: RecordChecksum::default(),
        }
    }

    /// Counts every block of `split`, decoding them in parallel (one block
    /// per thread at a time, so memory stays small); `progress` counts
    /// blocks. Rayon's reduce keeps the blocks' order, which the checksum
    /// needs.
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
        self.checksum.add(block);
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
        self.checksum = self.checksum.then(&other.checksum);
        self
    }

    /// Records whose move is a pass.
    pub fn passes(&self) -> u64 {
        self.policy[self.size * self.size]
    }

    /// The `k` points most often played, most frequent first (ties by
    /// point), as (row-major point, records); points never played are not
    /// among them, so a small split may give fewer.
    pub fn top_points(&self, k: usize) -> Vec<(usize, u64)> {
        let mut points: Vec<(usize, u64)> =
            self.policy[..self.size * self.size].iter().copied().enumerate().filter(|&(_, n)| n > 0).collect();
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
        let planes = vec![0u64; crate::dataset::shard::Layout::inputs(9, crate::features::PLANES).planes_bytes() / 8];
        for (policy, value, moves) in [(81u16, 1i8, 0u16), (40, 0, 49), (40, NO_VALUE, 50), (3, 1, 149), (40, 1, 150)] {
            block.push(&planes, policy, value, moves);
        }
        let mut s = LabelStats::new(9);
        s.add(&block);
        let s = s.merge(&LabelStats::new(9));
        assert_eq!((s.records, s.passes(), s.wins, s.losses, s.no_value), (5, 1, 3, 1, 1));
        assert_eq!(s.stages, [2, 2, 1], "moves 1 and 50; 51 and 150; 151+");
        assert_eq!(s.top_points(2), vec![(40, 3), (3, 1)]);
        assert_eq!(s.top_points(5), vec![(40, 3), (3, 1)], "points never played are left out");
    }

    /// The checksum of records cut into two blocks is that of one block
    /// holding them all, and it changes with their order.
    #[test]
    fn checksum_ignores_blocks_not_order() {
        let layout = crate::dataset::shard::Layout::inputs(9, crate::features::PLANES);
        let record = |k: u64| vec![k; layout.planes_bytes() / 8];
        let (mut whole, mut first, mut second, mut swapped) =
            (Block::default(), Block::default(), Block::default(), Block::default());
        for k in 0..5u64 {
            whole.push(&record(k), k as u16, 1, k as u16);
            if k < 2 { &mut first } else { &mut second }.push(&record(k), k as u16, 1, k as u16);
        }
        for k in [1u64, 0, 2, 3, 4] {
            swapped.push(&record(k), k as u16, 1, k as u16);
        }
        let of = |blocks: &[&Block]| {
            blocks.iter().fold(LabelStats::new(9), |acc, b| {
                let mut s = LabelStats::new(9);
                s.add(b);
                acc.merge(&s)
            })
        };
        assert_eq!(of(&[&whole]).checksum, of(&[&first, &second]).checksum);
        assert_ne!(of(&[&whole]).checksum, of(&[&swapped]).checksum);
        assert_ne!(of(&[&whole]).checksum, of(&[&second, &first]).checksum);
    }
}
