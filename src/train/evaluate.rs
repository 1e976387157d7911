//! Measuring a net on a split: loss and top-1/top-5 accuracy for move
//! nets, mean squared error and accuracy for value nets.

use anyhow::Result;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::dataset::{Batch, BatchOptions, Dataset, Split};
use crate::features::{Symmetry, PLANES};
use crate::nn::{Model, Output};

/// What a net scores on a set of positions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// Positions measured.
    pub positions: u64,
    /// Mean loss (cross-entropy for moves, squared error for values).
    pub loss: f64,
    /// Move nets: fraction of positions whose played move is the net's first choice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top1: Option<f64>,
    /// Move nets: fraction where the played move is among its five first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top5: Option<f64>,
    /// Value nets: fraction where the predicted winner won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
}

/// A batch's predictions, copied to the CPU once.
pub enum Predictions {
    /// Move nets: log-probabilities, one row of 362 per position.
    Moves(Vec<Vec<f32>>),
    /// Value nets: win probabilities.
    Values(Vec<f32>),
}

impl Predictions {
    pub fn of(pred: &Tensor, output: Output) -> Result<Predictions> {
        Ok(match output {
            Output::MoveLogProbs => Predictions::Moves(pred.to_vec2()?),
            Output::WinProb => Predictions::Values(pred.to_vec1()?),
        })
    }
}

/// Running sums behind [`Scores`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    positions: u64,
    loss_sum: f64,
    hits1: u64,
    hits5: u64,
    /// Whether the tally is of a move net.
    moves: bool,
}

impl Tally {
    pub fn new(output: Output) -> Tally {
        Tally { moves: output == Output::MoveLogProbs, ..Tally::default() }
    }

    /// Adds the positions `rows` of `batch`. Losses are computed per
    /// position (cross-entropy −log p(move), or squared error), so that any
    /// subset of a batch, such as a game phase, is scored alike.
    pub fn add(&mut self, pred: &Predictions, batch: &Batch, rows: impl Iterator<Item = usize>) {
        for i in rows {
            self.positions += 1;
            match pred {
                Predictions::Moves(p) => {
                    let row = &p[i];
                    let target = row[batch.policy[i] as usize];
                    // The rank of the played move: how many moves the net prefers.
                    let better = row.iter().filter(|&&q| q > target).count();
                    self.loss_sum -= target as f64;
                    self.hits1 += (better == 0) as u64;
                    self.hits5 += (better < 5) as u64;
                }
                Predictions::Values(p) => {
                    let (q, won) = (p[i] as f64, batch.value[i] as f64);
                    self.loss_sum += (q - won) * (q - won);
                    self.hits1 += ((q > 0.5) == (won > 0.5)) as u64;
                }
            }
        }
    }

    pub fn scores(&self) -> Scores {
        let n = self.positions.max(1) as f64;
        let frac = |k: u64| Some(k as f64 / n);
        Scores {
            positions: self.positions,
            loss: self.loss_sum / n,
            top1: if self.moves { frac(self.hits1) } else { None },
            top5: if self.moves { frac(self.hits5) } else { None },
            accuracy: if self.moves { None } else { frac(self.hits1) },
        }
    }
}

/// The tensors of a batch on the model's device: input planes and target.
pub fn batch_tensors(model: &Model, batch: &Batch, size: usize) -> Result<(Tensor, Tensor)> {
    let device = model.device();
    let x = Tensor::from_slice(&batch.planes, (batch.len, PLANES, size, size), device)?;
    let target = match model.output() {
        Output::MoveLogProbs => Tensor::from_slice(&batch.policy, batch.len, device)?,
        Output::WinProb => Tensor::from_slice(&batch.value, batch.len, device)?,
    };
    Ok((x, target))
}

/// Game phases of a detailed evaluation, by moves played before the
/// position: moves 1–50, 51–150, 151 on.
pub const PHASES: [(&str, std::ops::Range<u16>); 3] =
    [("moves 1-50", 0..50), ("moves 51-150", 50..150), ("moves 151+", 150..u16::MAX)];

/// Scores overall and by game phase.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub overall: Scores,
    /// One per [`PHASES`].
    pub phases: Vec<(String, Scores)>,
    /// Positions per second, net and decoding together.
    pub positions_per_second: f64,
}

/// Scores `model` on up to `limit` positions of `split` (0: all), overall
/// and by game phase; with `average_symmetries`, each prediction is the
/// mean over the 8 symmetries of the position (8 times the work).
pub fn evaluate_by_phase(
    model: &Model,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
    average_symmetries: bool,
) -> Result<Report> {
    let started = std::time::Instant::now();
    let mut overall = Tally::new(model.output());
    let mut phases = vec![Tally::new(model.output()); PHASES.len()];
    for_each_batch(model, dataset, split, batch_size, limit, average_symmetries, |pred, batch| {
        overall.add(pred, batch, 0..batch.len);
        for (tally, (_, range)) in phases.iter_mut().zip(PHASES.iter()) {
            tally.add(pred, batch, (0..batch.len).filter(|&i| range.contains(&batch.move_number[i])));
        }
    })?;
    let overall = overall.scores();
    Ok(Report {
        positions_per_second: overall.positions as f64 / started.elapsed().as_secs_f64(),
        overall,
        phases: PHASES.iter().zip(&phases).map(|((name, _), t)| (name.to_string(), t.scores())).collect(),
    })
}

/// Runs `model` over up to `limit` positions of `split` in file order,
/// calling `visit(predictions, batch)` per batch.
fn for_each_batch(
    model: &Model,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
    average_symmetries: bool,
    mut visit: impl FnMut(&Predictions, &Batch),
) -> Result<()> {
    let options = BatchOptions {
        batch_size,
        shuffle: false,
        symmetries: false,
        value_only: model.output() == Output::WinProb,
        drop_last: false,
        ..BatchOptions::default()
    };
    let mut seen = 0;
    for batch in dataset.batches(split, &options) {
        let batch = batch?;
        let predictions = if average_symmetries {
            symmetry_average(model, &batch, dataset.board_size())?
        } else {
            let (x, _) = batch_tensors(model, &batch, dataset.board_size())?;
            Predictions::of(&model.forward(&x, false)?, model.output())?
        };
        visit(&predictions, &batch);
        seen += batch.len as u64;
        if limit > 0 && seen >= limit {
            break;
        }
    }
    Ok(())
}

/// Scores `model` on up to `limit` positions of `split` (0: all), in file
/// order, without symmetries.
pub fn evaluate(model: &Model, dataset: &Dataset, split: Split, batch_size: usize, limit: u64) -> Result<Scores> {
    let mut tally = Tally::new(model.output());
    for_each_batch(model, dataset, split, batch_size, limit, false, |pred, batch| {
        tally.add(pred, batch, 0..batch.len)
    })?;
    Ok(tally.scores())
}

/// The predictions for `batch` averaged over the 8 symmetries: each
/// transformed copy is run through the net and its answer mapped back
/// (move probabilities, not log-probabilities, are averaged).
fn symmetry_average(model: &Model, batch: &Batch, size: usize) -> Result<Predictions> {
    let points = size * size;
    let mut moves = vec![vec![0f32; points + 1]; batch.len];
    let mut values = vec![0f32; batch.len];
    let mut planes = vec![0f32; batch.planes.len()];
    for symmetry in Symmetry::all() {
        symmetry.apply_f32(&batch.planes, &mut planes, size);
        let x = Tensor::from_slice(&planes, (batch.len, PLANES, size, size), model.device())?;
        match Predictions::of(&model.forward(&x, false)?, model.output())? {
            Predictions::Moves(rows) => {
                for (sum, row) in moves.iter_mut().zip(rows) {
                    // Move `label` of the position is move `apply_label(label)` of its copy.
                    for (label, s) in sum.iter_mut().enumerate() {
                        *s += row[symmetry.apply_label(label, size)].exp() / 8.0;
                    }
                }
            }
            Predictions::Values(v) => values.iter_mut().zip(v).for_each(|(s, v)| *s += v / 8.0),
        }
    }
    Ok(match model.output() {
        Output::MoveLogProbs => {
            Predictions::Moves(moves.into_iter().map(|r| r.into_iter().map(f32::ln).collect()).collect())
        }
        Output::WinProb => Predictions::Values(values),
    })
}
