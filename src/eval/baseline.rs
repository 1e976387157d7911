//! A value predictor that learns nothing about Go: the area score that
//! random playouts give a position, through a logistic fitted on the
//! training split. A value net is worth its cost only where it beats this
//! (and the constant ½).
//!
//! Each position is rebuilt from its planes (own and opponent stones; the
//! side to move from the features' black-to-move plane, or without one
//! from the move number's parity, exact in games without handicap),
//! [`Ownership`] runs random
//! playouts from it, and the expected area margin of the side to move `m`
//! (points, −361..361) gives `P(win) = σ(a·m + b·[White to move] + c)`:
//! `b` learns komi, which no plane of the seed's features shows.

use anyhow::{bail, Result};

use crate::dataset::{Batch, BatchOptions, Dataset, Split};
use crate::go::{Color, Game, Rules, Vertex};
use crate::search::ownership::{LeafMix, Ownership};

/// Playouts per position: the margin's noise is far below the
/// logistic's slope at this count, and 19×19 costs about a millisecond.
const PLAYOUTS: usize = 32;
/// The own-stone and opponent-stone planes, the first of every feature set.
const OWN: usize = 1;
const OPPONENT: usize = 2;

/// The fitted logistic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OwnershipBaseline {
    /// Per point of expected area margin.
    pub slope: f64,
    /// Added when White is to move.
    pub white: f64,
    pub bias: f64,
    /// The train positions it was fitted on: the number asked for, or all
    /// the split's value-labelled positions when they are fewer.
    pub fitted_on: usize,
}

/// How a dataset's records hold a position: the board's size and the
/// plane, if its features have one, that says Black is to move.
#[derive(Clone, Copy, Debug)]
pub struct RecordShape {
    pub size: usize,
    pub black_to_move_plane: Option<usize>,
}

impl RecordShape {
    pub fn of(dataset: &Dataset) -> RecordShape {
        RecordShape { size: dataset.board_size(), black_to_move_plane: dataset.features().black_to_move_plane() }
    }

    /// The side to move in record `row` of `batch`: from the black-to-move
    /// plane where there is one (in a handicap game White moves at even
    /// move numbers, which parity took for Black's), else from the move
    /// number's parity.
    pub fn side_to_move(&self, batch: &Batch, row: usize) -> Color {
        let black = match self.black_to_move_plane {
            Some(plane) => {
                let per = batch.planes.len() / batch.len.max(1);
                batch.planes[row * per + plane * self.size * self.size] == 1.0
            }
            None => batch.move_number[row].is_multiple_of(2),
        };
        if black {
            Color::Black
        } else {
            Color::White
        }
    }
}

/// The position of record `row` of `batch`, rebuilt from its stone planes
/// with its side to move (history and ko are not in the planes; random
/// playouts barely notice them).
pub fn position(batch: &Batch, row: usize, shape: RecordShape) -> Result<Game> {
    let size = shape.size;
    let n = size * size;
    let per = batch.planes.len() / batch.len.max(1);
    let planes = &batch.planes[row * per..(row + 1) * per];
    let me = shape.side_to_move(batch, row);
    let stones: Vec<(Vertex, Option<Color>)> = (0..n)
        .filter_map(|i| {
            let color = if planes[OWN * n + i] == 1.0 {
                me
            } else if planes[OPPONENT * n + i] == 1.0 {
                me.opponent()
            } else {
                return None;
            };
            Some((Vertex::new(i % size, i / size), Some(color)))
        })
        .collect();
    let mut game = Game::new(size, Rules::CHINESE);
    if game.setup(&stones).is_err() {
        bail!("position {row} of a batch holds a string without liberties");
    }
    game.set_to_move(me);
    Ok(game)
}

/// Each value of the side to move in `batch`, mixed with `mix.playouts`
/// random playouts from its position as an MCTS leaf mixes them
/// ([`Ownership::mix`]), with komi 7.5.
pub fn mix_with_playouts(values: &[f32], batch: &Batch, shape: RecordShape, mix: LeafMix) -> Result<Vec<f32>> {
    values.iter().enumerate().map(|(i, &v)| Ok(mix.value(&position(batch, i, shape)?, v, i as u64))).collect()
}

/// What the logistic reads of one position: the area margin of the side
/// to move and whether White is to move.
fn inputs(batch: &Batch, row: usize, shape: RecordShape, seed: u64) -> Result<(f64, f64)> {
    let n = shape.size * shape.size;
    let game = position(batch, row, shape)?;
    let me = game.to_move();
    let ownership = Ownership::estimate(&game, PLAYOUTS, seed);
    let mine: f64 = (0..n).map(|i| ownership.share(i, me) as f64).sum();
    Ok((2.0 * mine - n as f64, (me == Color::White) as u8 as f64))
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl OwnershipBaseline {
    /// Fits the logistic on `positions` value-labelled positions of the
    /// training split, drawn as [`fitting_batches`] reads them (Newton's
    /// method on the log-likelihood).
    pub fn fit(dataset: &Dataset, positions: usize) -> Result<OwnershipBaseline> {
        let shape = RecordShape::of(dataset);
        let mut rows: Vec<([f64; 3], f64)> = Vec::new();
        for batch in fitting_batches(dataset) {
            let batch = batch?;
            for i in 0..batch.len {
                let (margin, white) = inputs(&batch, i, shape, rows.len() as u64)?;
                rows.push(([margin / 100.0, white, 1.0], batch.value[i] as f64));
            }
            if rows.len() >= positions {
                break;
            }
        }
        if rows.is_empty() {
            bail!(
                "{}: no value-labelled positions in the train split to fit the ownership baseline on \
                 (--baseline-positions 0 leaves it out)",
                dataset.dir().display()
            );
        }
        rows.truncate(positions);
        let mut w = [0.0f64; 3];
        for _ in 0..25 {
            // Gradient and Hessian of the mean log-likelihood, with a small
            // ridge so that a separable sample cannot diverge.
            let (mut g, mut h) = ([0.0f64; 3], [[0.0f64; 3]; 3]);
            for (x, y) in &rows {
                let p = sigmoid(x.iter().zip(&w).map(|(a, b)| a * b).sum());
                for j in 0..3 {
                    g[j] += (y - p) * x[j];
                    for k in 0..3 {
                        h[j][k] += p * (1.0 - p) * x[j] * x[k];
                    }
                }
            }
            for (j, row) in h.iter_mut().enumerate() {
                row[j] += 1e-6 * rows.len() as f64;
            }
            let step = solve3(h, g);
            w.iter_mut().zip(step).for_each(|(w, s)| *w += s);
        }
        Ok(OwnershipBaseline { slope: w[0] / 100.0, white: w[1], bias: w[2], fitted_on: rows.len() })
    }

    /// The win probability of the side to move in each position of `batch`.
    pub fn predict(&self, batch: &Batch, shape: RecordShape) -> Result<Vec<f32>> {
        (0..batch.len)
            .map(|i| {
                let (margin, white) = inputs(batch, i, shape, i as u64)?;
                Ok(sigmoid(self.slope * margin + self.white * white + self.bias) as f32)
            })
            .collect()
    }
}

/// The training split's value-labelled positions in a shuffled order of a
/// fixed seed: the first few thousand come from blocks drawn across the
/// split, where file order gives the first few games only (a dataset
/// labelling every position has 2,000 in ten games).
fn fitting_batches(dataset: &Dataset) -> impl Iterator<Item = Result<Batch>> + '_ {
    let options = BatchOptions { batch_size: 256, value_only: true, shuffle: true, ..BatchOptions::default() };
    dataset.batches(Split::Train, &options)
}

/// Solves the 3×3 system `a·x = b` (Gaussian elimination with pivoting).
fn solve3(mut a: [[f64; 3]; 3], mut b: [f64; 3]) -> [f64; 3] {
    for col in 0..3 {
        let pivot = (col..3).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        if a[col][col].abs() < 1e-12 {
            return [0.0; 3];
        }
        for row in col + 1..3 {
            let f = a[row][col] / a[col][col];
            let pivot_row = a[col];
            for (x, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= f * p;
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = [0.0; 3];
    for row in (0..3).rev() {
        let s: f64 = (row + 1..3).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The positions it fits on are drawn from across the split, not the
    /// first games in file order (it once fitted on one or two games).
    #[test]
    fn fits_on_positions_of_many_games() {
        use crate::dataset::testkit::{self, Layout, VALUE_PER_GAME};
        use crate::features::{FeatureSet, PackedPlanes};
        let Some(games) = testkit::kgs_games(30) else { return };
        let dir = tempfile::tempdir().unwrap();
        let records = testkit::write_dataset(dir.path(), &games, &Layout { block_records: 64, shard_records: 1000 });
        let key =
            |planes: &[f32], move_number: u16| (planes.iter().map(|&x| x == 1.0).collect::<Vec<_>>(), move_number);
        // Each training position's game: a new one starts at move 0.
        let mut game_of = std::collections::HashMap::new();
        let mut game = 0usize;
        let mut floats = vec![0f32; FeatureSet::Seed.planes() * 19 * 19];
        for r in records.unwrap().iter().filter(|r| r.split == Split::Train) {
            game += (r.move_number == 0) as usize;
            PackedPlanes::from_words(19, FeatureSet::Seed.planes(), r.planes.clone()).unwrap().unpack_into(&mut floats);
            game_of.insert(key(&floats, r.move_number), game);
        }
        let dataset = Dataset::open(dir.path()).unwrap();
        // As many positions as two games label: file order gives two games.
        let wanted = 2 * VALUE_PER_GAME;
        let mut seen = std::collections::HashSet::new();
        for batch in fitting_batches(&dataset).take(1) {
            let batch = batch.unwrap();
            let per = batch.planes.len() / batch.len;
            for i in 0..wanted.min(batch.len) {
                seen.insert(game_of[&key(&batch.planes[i * per..(i + 1) * per], batch.move_number[i])]);
            }
        }
        assert!(seen.len() >= 6, "the first {wanted} positions are of {} of {game} games", seen.len());
    }

    #[test]
    fn solves_a_small_system() {
        let x = solve3([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]], [3.0, 5.0, 5.0]);
        for (got, want) in x.iter().zip([1.0, 1.0, 1.0]) {
            assert!((got - want).abs() < 1e-9, "{x:?}");
        }
    }

    #[test]
    fn a_won_position_is_judged_won_for_the_right_side() {
        // Black fills the left 11 columns, White the right 7, each with an
        // eye at every odd-odd point (alive whatever random play does):
        // Black is far ahead whoever moves. Planes from the side to move.
        let size = 19;
        let n = size * size;
        let batch_for = |move_number: u16| {
            let me_black = move_number.is_multiple_of(2);
            let mut planes = vec![0f32; 15 * n];
            for i in 0..n {
                let (x, y) = (i % size, i / size);
                if x == 11 || (x % 2 == 1 && y % 2 == 1) {
                    continue;
                }
                let own = (x < 11) == me_black;
                planes[if own { OWN } else { OPPONENT } * n + i] = 1.0;
            }
            Batch {
                len: 1,
                planes,
                planes_bits: vec![],
                policy: vec![0],
                value: vec![1.0],
                move_number: vec![move_number],
                symmetry: vec![0],
                ownership: vec![],
            }
        };
        let parity = RecordShape { size, black_to_move_plane: None };
        let (black_margin, black_white) = inputs(&batch_for(100), 0, parity, 1).unwrap();
        let (white_margin, white_white) = inputs(&batch_for(101), 0, parity, 1).unwrap();
        assert_eq!((black_white, white_white), (0.0, 1.0));
        assert!(black_margin > 50.0 && white_margin < -50.0, "{black_margin} {white_margin}");
        // In a handicap game White moves at move 100: the black-to-move
        // plane says so where parity would not (it once took it for Black).
        let plane = 14;
        let mut handicap = batch_for(101);
        handicap.move_number[0] = 100;
        let marked = RecordShape { size, black_to_move_plane: Some(plane) };
        assert_eq!(marked.side_to_move(&handicap, 0), Color::White);
        let (margin, white) = inputs(&handicap, 0, marked, 1).unwrap();
        assert_eq!(white, 1.0);
        assert!(margin < -50.0, "{margin}");
        handicap.planes[plane * n..(plane + 1) * n].fill(1.0);
        assert_eq!(marked.side_to_move(&handicap, 0), Color::Black);
    }
}
