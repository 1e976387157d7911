//! Measuring a net on a split: loss and top-1/top-5 accuracy for move
//! nets, mean squared error and accuracy for value nets.

use anyhow::Result;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::dataset::{Batch, BatchOptions, Dataset, Split};
use crate::nn::{Model, Output};
use crate::features::PLANES;

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

    /// Adds a batch: `pred` is the net's output for it, `batch_loss` its mean loss.
    pub fn add(&mut self, pred: &Tensor, batch: &Batch, batch_loss: f64) -> Result<()> {
        let n = batch.len;
        self.positions += n as u64;
        self.loss_sum += batch_loss * n as f64;
        if self.moves {
            let rows: Vec<Vec<f32>> = pred.to_vec2()?;
            for (row, &target) in rows.iter().zip(&batch.policy) {
                // The rank of the played move: how many moves the net prefers.
                let p = row[target as usize];
                let better = row.iter().filter(|&&q| q > p).count();
                self.hits1 += (better == 0) as u64;
                self.hits5 += (better < 5) as u64;
            }
        } else {
            let probs: Vec<f32> = pred.to_vec1()?;
            for (&q, &won) in probs.iter().zip(&batch.value) {
                self.hits1 += ((q > 0.5) == (won > 0.5)) as u64;
            }
        }
        Ok(())
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

/// Scores `model` on up to `limit` positions of `split` (0: all), in file
/// order, without symmetries.
pub fn evaluate(model: &Model, dataset: &Dataset, split: Split, batch_size: usize, limit: u64) -> Result<Scores> {
    let options = BatchOptions {
        batch_size,
        shuffle: false,
        symmetries: false,
        value_only: model.output() == Output::WinProb,
        drop_last: false,
        ..BatchOptions::default()
    };
    let mut tally = Tally::new(model.output());
    for batch in dataset.batches(split, &options) {
        let batch = batch?;
        let (x, target) = batch_tensors(model, &batch, dataset.board_size())?;
        let pred = model.forward(&x, false)?;
        let loss = model.output().loss(&pred, &target)?.to_scalar::<f32>()? as f64;
        tally.add(&pred, &batch, loss)?;
        if limit > 0 && tally.positions >= limit {
            break;
        }
    }
    Ok(tally.scores())
}
