//! Measuring a net on a split: loss and top-1/top-5 accuracy for move
//! nets, mean squared error and accuracy for value nets.

use std::path::Path;

use anyhow::{bail, Result};
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use super::baseline::{mix_with_playouts, OwnershipBaseline, RecordShape};
use crate::dataset::manifest::DatasetId;
use crate::dataset::MANIFEST;
use crate::dataset::{Batch, BatchOptions, Dataset, Split};
use crate::features::Symmetry;
use crate::go::Color;
use crate::nn::{inputs, Model, Output};
use crate::search::ownership::LeafMix;

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
    /// Value nets: the mean predicted win probability, to set against
    /// [`Scores::mean_outcome`] (a net biased for or against the side to
    /// move shows here, not in its MSE alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_prediction: Option<f64>,
    /// Value nets: the fraction of positions whose side to move won.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_outcome: Option<f64>,
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
    /// Value nets: sums of predictions and of outcomes.
    prediction_sum: f64,
    outcome_sum: f64,
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
                    let played = batch.policy[i] as usize;
                    let better = moves_ranked_above(&p[i], played);
                    self.loss_sum -= p[i][played] as f64;
                    self.hits1 += (better == 0) as u64;
                    self.hits5 += (better < 5) as u64;
                }
                Predictions::Values(p) => {
                    let (q, won) = (p[i] as f64, batch.value[i] as f64);
                    self.loss_sum += (q - won) * (q - won);
                    // A NaN is no answer, not a "lost" one.
                    // Nor is ½: it once counted as a right call of a loss.
                    self.hits1 += (!q.is_nan() && q != 0.5 && (q > 0.5) == (won > 0.5)) as u64;
                    self.prediction_sum += q;
                    self.outcome_sum += won;
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
            mean_prediction: (!self.moves).then(|| self.prediction_sum / n),
            mean_outcome: (!self.moves).then(|| self.outcome_sum / n),
        }
    }
}

/// The rank of move `played` among the log-probabilities `row`: how many
/// moves come before it, as the first of the moves a net scores highest
/// would be played. Ties go to the lower index, as an argmax takes them,
/// and a NaN ranks above everything: a net that answers NaN, or the same
/// for every move, must not score top-1 hits (it once became a run's best
/// checkpoint so).
fn moves_ranked_above(row: &[f32], played: usize) -> usize {
    let target = row[played];
    if target.is_nan() {
        return row.len();
    }
    row.iter()
        .enumerate()
        .filter(|&(j, &q)| j != played && (q.is_nan() || q > target || (q == target && j < played)))
        .count()
}

/// The tensors of a batch on the model's device: input planes (from
/// their bits when the batch holds them so) and target.
pub fn batch_tensors(model: &Model, batch: &Batch, size: usize) -> Result<(Tensor, Tensor)> {
    let device = model.device();
    let shape = (batch.len, model.features().planes(), size, size);
    let x = match batch.planes_bits.is_empty() {
        true => inputs::tensor(&batch.planes, shape, device)?,
        false => inputs::planes_from_bits(&batch.planes_bits, (shape.0, shape.1, size), device)?,
    };
    let target = match model.output() {
        Output::MoveLogProbs => inputs::tensor(&batch.policy, batch.len, device)?,
        Output::WinProb => inputs::tensor(&batch.value, batch.len, device)?,
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
    /// One per [`PHASES`] that holds positions.
    pub phases: Vec<(String, Scores)>,
    /// Value nets on inputs that show the colour to play: Black to move,
    /// then White, each where it holds positions (empty otherwise).
    pub sides: Vec<(String, Scores)>,
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
    check_inputs(model, dataset)?;
    report_by_phase(model.output(), dataset, split, batch_size, limit, |batch| {
        model_predictions(model, batch, dataset.board_size(), average_symmetries)
    })
}

/// Scores a value net's predictions mixed with random-playout outcomes as
/// an MCTS leaf mixes them (`mix=λ`, `mix-playouts=n`, [`Ownership::mix`](crate::search::ownership::Ownership::mix)),
/// on the positions [`evaluate_by_phase`] scores the net alone on.
pub fn mixed_by_phase(
    model: &Model,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
    mix: LeafMix,
    average_symmetries: bool,
) -> Result<Report> {
    check_inputs(model, dataset)?;
    let shape = RecordShape::of(dataset);
    report_by_phase(model.output(), dataset, split, batch_size, limit, |batch| {
        let Predictions::Values(net) = model_predictions(model, batch, shape.size, average_symmetries)? else {
            bail!("mixing with playouts needs a value net, not a {} net", model.arch());
        };
        Ok(Predictions::Values(mix_with_playouts(&net, batch, shape, mix)?))
    })
}

/// Whether Black is to move in record `i` of `batch`, when its planes say.
fn black_to_move(dataset: &Dataset, batch: &Batch, i: usize) -> Option<bool> {
    let shape = RecordShape::of(dataset);
    shape.black_to_move_plane.map(|_| shape.side_to_move(batch, i) == Color::Black)
}

/// Scores the ownership baseline on the positions [`evaluate_by_phase`]
/// scores a value net on.
pub fn baseline_by_phase(
    baseline: &OwnershipBaseline,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
) -> Result<Report> {
    report_by_phase(Output::WinProb, dataset, split, batch_size, limit, |batch| {
        Ok(Predictions::Values(baseline.predict(batch, RecordShape::of(dataset))?))
    })
}

/// Scores the predictions of `predict` for an `output` over up to `limit`
/// positions of `split`, overall and by game phase.
fn report_by_phase(
    output: Output,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
    predict: impl FnMut(&Batch) -> Result<Predictions>,
) -> Result<Report> {
    let started = std::time::Instant::now();
    let mut overall = Tally::new(output);
    let mut phases = vec![Tally::new(output); PHASES.len()];
    let by_side = output == Output::WinProb && dataset.features().black_to_move_plane().is_some();
    let mut sides = vec![Tally::new(output); 2];
    for_each_batch(output, dataset, split, batch_size, limit, predict, |pred, batch, rows| {
        overall.add(pred, batch, 0..rows);
        for (tally, (_, range)) in phases.iter_mut().zip(PHASES.iter()) {
            tally.add(pred, batch, (0..rows).filter(|&i| range.contains(&batch.move_number[i])));
        }
        if by_side {
            for (tally, black) in sides.iter_mut().zip([true, false]) {
                tally.add(pred, batch, (0..rows).filter(|&i| black_to_move(dataset, batch, i) == Some(black)));
            }
        }
    })?;
    let overall = overall.scores();
    let side_names = ["Black to move", "White to move"];
    Ok(Report {
        positions_per_second: overall.positions as f64 / started.elapsed().as_secs_f64(),
        overall,
        phases: scored(PHASES.iter().map(|(name, _)| *name).zip(&phases)),
        sides: if by_side { scored(side_names.into_iter().zip(&sides)) } else { vec![] },
    })
}

/// The scores of the named tallies that hold positions: an empty phase
/// has no error or accuracy, and a 0 would read as one.
fn scored<'a>(tallies: impl Iterator<Item = (&'a str, &'a Tally)>) -> Vec<(String, Scores)> {
    tallies.filter(|(_, t)| t.positions > 0).map(|(name, t)| (name.to_string(), t.scores())).collect()
}

/// The net's predictions for `batch`, averaged over the symmetries or not.
fn model_predictions(model: &Model, batch: &Batch, size: usize, average_symmetries: bool) -> Result<Predictions> {
    if average_symmetries {
        symmetry_average(model, batch, size)
    } else {
        let (x, _) = batch_tensors(model, batch, size)?;
        Predictions::of(&model.forward(&x, false)?, model.output())
    }
}

/// Runs `predict` over up to `limit` positions of `split` in file order
/// (value-labelled ones for an `output` of win probabilities), calling
/// `visit(predictions, batch, rows)` per batch, where the first `rows`
/// positions of the batch are within the limit.
fn for_each_batch(
    output: Output,
    dataset: &Dataset,
    split: Split,
    batch_size: usize,
    limit: u64,
    mut predict: impl FnMut(&Batch) -> Result<Predictions>,
    mut visit: impl FnMut(&Predictions, &Batch, usize),
) -> Result<()> {
    let options = BatchOptions {
        batch_size: if limit > 0 { batch_size.min(limit as usize) } else { batch_size },
        shuffle: false,
        symmetries: false,
        value_only: output == Output::WinProb,
        drop_last: false,
        ..BatchOptions::default()
    };
    let mut seen = 0;
    // The next batches decode while the net judges this one: on a GPU,
    // training's validation otherwise left it idle through each decode.
    for batch in dataset.batches(split, &options).prefetch(2) {
        let batch = batch?;
        let predictions = predict(&batch)?;
        let rows = if limit > 0 { batch.len.min((limit - seen) as usize) } else { batch.len };
        visit(&predictions, &batch, rows);
        seen += rows as u64;
        if limit > 0 && seen >= limit {
            break;
        }
    }
    Ok(())
}

/// Refuses a dataset whose positions the net cannot read: other input
/// planes, or another board than the nets' 19×19.
pub fn check_inputs(model: &Model, dataset: &Dataset) -> Result<()> {
    let manifest = dataset.dir().join(MANIFEST);
    if dataset.features() != model.features() {
        bail!(
            "{}: the dataset holds {} features ({} planes), the net reads {} features ({} planes)",
            manifest.display(),
            dataset.features(),
            dataset.features().planes(),
            model.features(),
            model.features().planes()
        );
    }
    let size = dataset.board_size();
    if size != crate::nn::BOARD {
        bail!(
            "{}: the dataset's board is {size}x{size}; the nets play {b}x{b} only (prepare it with --size {b})",
            manifest.display(),
            b = crate::nn::BOARD
        );
    }
    Ok(())
}

/// What to say of the dataset the net in `weights` was trained on, when
/// it matters to its scores on `split` of `dataset`: another dataset
/// (evaluating on it is legitimate, but the reader should know), or the
/// train split of the same one (positions the net learned). `None` for
/// nets whose files name no dataset (written before files did).
pub fn trained_on_note(weights: &Path, dataset: &Dataset, split: Split) -> Result<Option<String>> {
    let Some(trained) = crate::nn::weights::read_meta(weights)?.dataset.map(DatasetId) else { return Ok(None) };
    let here = dataset.manifest().identity();
    let (file, dir) = (weights.display(), dataset.dir().display());
    Ok(if trained != here {
        Some(format!("note: {file} was trained on dataset {trained}, not on {dir} (dataset {here})"))
    } else if split == Split::Train {
        Some(format!("note: {file} was trained on this split of {dir}: its scores here are not held-out scores"))
    } else {
        None
    })
}

/// Scores `model` on up to `limit` positions of `split` (0: all), in file
/// order, without symmetries.
pub fn evaluate(model: &Model, dataset: &Dataset, split: Split, batch_size: usize, limit: u64) -> Result<Scores> {
    check_inputs(model, dataset)?;
    let mut tally = Tally::new(model.output());
    let predict = |batch: &Batch| model_predictions(model, batch, dataset.board_size(), false);
    for_each_batch(model.output(), dataset, split, batch_size, limit, predict, |pred, batch, rows| {
        tally.add(pred, batch, 0..rows)
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
        let x = Tensor::from_slice(&planes, (batch.len, model.features().planes(), size, size), model.device())?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_scores_set_the_mean_prediction_against_the_outcomes() {
        let batch = Batch {
            len: 4,
            planes: vec![],
            planes_bits: vec![],
            policy: vec![0; 4],
            value: vec![1.0, 0.0, 1.0, 1.0],
            move_number: vec![0; 4],
            symmetry: vec![0; 4],
            ownership: vec![],
        };
        let mut tally = Tally::new(Output::WinProb);
        tally.add(&Predictions::Values(vec![0.5, 0.25, 0.75, 0.5]), &batch, 0..4);
        let s = tally.scores();
        assert_eq!((s.mean_prediction, s.mean_outcome), (Some(0.5), Some(0.75)));
        assert_eq!(s.loss, (0.25 + 0.0625 + 0.0625 + 0.25) / 4.0);
        assert_eq!(s.accuracy, Some(0.5), "0.25 for a loss and 0.75 for a win are right; ½ is no call");
        // Nor for a loss.
        let mut lost = Tally::new(Output::WinProb);
        lost.add(&Predictions::Values(vec![0.5, 0.5]), &Batch { value: vec![0.0, 0.0], len: 2, ..batch.clone() }, 0..2);
        assert_eq!(lost.scores().accuracy, Some(0.0));
        let moves = Tally::new(Output::MoveLogProbs).scores();
        assert_eq!((moves.mean_prediction, moves.mean_outcome), (None, None));
        let mut nan = Tally::new(Output::WinProb);
        nan.add(&Predictions::Values(vec![f32::NAN; 4]), &batch, 0..4);
        assert_eq!(nan.scores().accuracy, Some(0.0), "a NaN calls no game, lost or won");
    }

    /// A net that answers NaN, or the same for every move, scored 100%
    /// top-1 and top-5, and became its run's best checkpoint.
    #[test]
    fn nan_or_tied_predictions_are_no_hits() {
        let batch = Batch {
            len: 3,
            planes: vec![],
            planes_bits: vec![],
            policy: vec![7, 7, 7],
            value: vec![],
            move_number: vec![0; 3],
            symmetry: vec![0; 3],
            ownership: vec![],
        };
        let tied = vec![-5.9; 362];
        let mut nan_elsewhere = vec![-7.0; 362];
        nan_elsewhere[3] = f32::NAN;
        let rows = vec![vec![f32::NAN; 362], tied, nan_elsewhere];
        let mut tally = Tally::new(Output::MoveLogProbs);
        tally.add(&Predictions::Moves(rows), &batch, 0..3);
        let s = tally.scores();
        assert_eq!((s.top1, s.top5), (Some(0.0), Some(0.0)), "{s:?}");
        // Ties go to the lower index, as an argmax takes them.
        let mut ahead = vec![-9.0; 362];
        (ahead[2], ahead[7]) = (-1.0, -1.0);
        assert_eq!(moves_ranked_above(&ahead, 7), 1);
        assert_eq!(moves_ranked_above(&ahead, 2), 0);
    }
}
