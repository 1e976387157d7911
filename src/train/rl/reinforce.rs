//! REINFORCE (Williams 1992) as AlphaGo's RL policy used it: every move
//! the learner made in a game is pushed up if it won the game and down if
//! it lost, Δρ ∝ (1/n) Σ_games Σ_moves (z − b) ∇ log p(a|s).

use anyhow::{Context, Result};
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::features::{FeatureSet, PackedPlanes};
use crate::go::zobrist::mix;
use crate::go::Game;
use crate::nn::{Model, BOARD, POINTS};
use crate::selfplay::Finished;

/// What is subtracted from a game's outcome z (±1 for the learner).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Baseline {
    /// None, as AlphaGo's RL policy (b = 0).
    #[default]
    None,
    /// The mean outcome of the iteration's games: moves of a batch the
    /// learner mostly wins are pushed up less.
    Mean,
}

impl std::str::FromStr for Baseline {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Baseline> {
        match s {
            "none" | "0" => Ok(Baseline::None),
            "mean" => Ok(Baseline::Mean),
            _ => anyhow::bail!("baseline {s:?}: use none or mean"),
        }
    }
}

/// Which of the learner's moves a step learns from, and how they weigh.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Weighting {
    pub baseline: Baseline,
    /// The share of the learner's moves kept, each drawn alone (1: all,
    /// as AlphaGo). A kept move weighs 1/fraction, so the gradient's
    /// expectation is the same, and the backward pass costs that much less.
    pub move_fraction: f64,
    /// Seeds the draw.
    pub seed: u64,
}

impl Weighting {
    /// AlphaGo's: every move, no baseline.
    pub fn all_moves(baseline: Baseline) -> Weighting {
        Weighting { baseline, move_fraction: 1.0, seed: 0 }
    }

    /// Whether move `number` of game `game` is kept.
    fn keeps(&self, game: usize, number: usize) -> bool {
        if self.move_fraction >= 1.0 {
            return true;
        }
        let draw = mix(self.seed ^ mix((game as u64) << 20 ^ number as u64));
        ((draw >> 11) as f64 / (1u64 << 53) as f64) < self.move_fraction
    }
}

/// The learner's moves of a batch of games, each weighted by its game's
/// outcome less the baseline, over the number of games.
#[derive(Clone)]
pub struct Examples {
    planes: Vec<PackedPlanes>,
    actions: Vec<u32>,
    weights: Vec<f32>,
    features: FeatureSet,
}

impl Examples {
    /// The positions where side `learner` moved in `games`, encoded with
    /// `features`.
    pub fn of(games: &[Finished], learner: usize, features: FeatureSet, weighting: &Weighting) -> Result<Examples> {
        let outcome = |g: &Finished| -> f32 {
            match g.outcome.winner {
                None => 0.0,
                Some(w) if g.plan.side(w) == learner => 1.0,
                Some(_) => -1.0,
            }
        };
        let b = match weighting.baseline {
            Baseline::None => 0.0,
            Baseline::Mean => games.iter().map(outcome).sum::<f32>() / games.len().max(1) as f32,
        };
        let mut examples = Examples { planes: Vec::new(), actions: Vec::new(), weights: Vec::new(), features };
        for g in games {
            let weight = (outcome(g) - b) / (games.len() as f64 * weighting.move_fraction) as f32;
            let played = &g.outcome.game;
            let mut game = Game::new(played.size(), *played.rules());
            for (number, m) in played.moves().enumerate() {
                let Some(action) = m.mv.policy_index(played.size()) else { break };
                if g.plan.side(m.color) == learner && weighting.keeps(g.index, number) {
                    examples.planes.push(features.encode(&game));
                    examples.actions.push(action as u32);
                    examples.weights.push(weight);
                }
                game.play(m.color, m.mv).with_context(|| format!("replaying game {}", g.index))?;
            }
        }
        Ok(examples)
    }

    /// Positions.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// The gradient of −Σ weight·log p(action) over all positions, for
    /// `model`'s parameters (its batch norms keep their running statistics,
    /// as in play), computed `chunk` positions at a time; that sum; and
    /// the mean log p(action), how sure the learner was of its moves.
    pub fn gradient(&self, model: &Model, chunk: usize) -> Result<(GradStore, f64, f64)> {
        let device = model.device();
        let params = model.parameters();
        let per_position = self.features.planes() * POINTS;
        let mut total = GradStore::default();
        let mut loss_sum = 0.0;
        let mut log_p_sum = 0.0;
        for start in (0..self.len()).step_by(chunk.max(1)) {
            let end = (start + chunk.max(1)).min(self.len());
            let n = end - start;
            let mut data = vec![0f32; n * per_position];
            for (planes, dst) in self.planes[start..end].iter().zip(data.chunks_exact_mut(per_position)) {
                planes.unpack_into(dst);
            }
            let x = Tensor::from_vec(data, (n, self.features.planes(), BOARD, BOARD), device)?;
            let actions = Tensor::from_slice(&self.actions[start..end], (n, 1), device)?;
            let weights = Tensor::from_slice(&self.weights[start..end], n, device)?;
            let log_p = model.forward(&x, false)?.gather(&actions, 1)?.squeeze(1)?;
            log_p_sum += log_p.sum_all()?.to_scalar::<f32>()? as f64;
            let loss = (log_p * weights)?.sum_all()?.neg()?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            let grads = loss.backward()?;
            for (_, var) in &params {
                let Some(g) = grads.get(var.as_tensor()) else { continue };
                let sum = match total.remove(var.as_tensor()) {
                    Some(before) => (before + g)?,
                    None => g.clone(),
                };
                total.insert(var.as_tensor(), sum.detach());
            }
        }
        Ok((total, loss_sum, log_p_sum / self.len().max(1) as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::arena::GameOutcome;
    use crate::go::{Color, Move, Rules, Vertex};
    use crate::nn::Arch;
    use crate::selfplay::GamePlan;
    use crate::train::optim::OptimizerConfig;
    use candle_core::Device;

    /// A game of six moves that `loser` resigns, side 0 playing Black.
    fn game(loser: Color) -> Finished {
        let mut game = Game::new(19, Rules::CHINESE);
        for (i, (x, y)) in [(3, 3), (15, 15), (3, 15), (15, 3), (9, 9), (10, 10)].into_iter().enumerate() {
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            game.play(color, Move::Play(Vertex::new(x, y))).unwrap();
        }
        game.play(Color::Black, Move::Pass).unwrap();
        let outcome = GameOutcome::lost_by(game, loser, None, [0.0; 2]);
        Finished { index: 0, plan: GamePlan { sides: [0, 1], random_move: None }, outcome, value_position: None }
    }

    /// log p of the learner's moves in `examples`, summed.
    fn log_likelihood(model: &Model, examples: &Examples) -> f32 {
        let (_, loss, mean) =
            Examples { weights: vec![-1.0; examples.len()], ..examples.clone() }.gradient(model, 3).unwrap();
        assert!((loss - mean * examples.len() as f64).abs() < 1e-3, "{loss} {mean}");
        loss as f32
    }

    #[test]
    fn won_games_make_the_learners_moves_likelier_and_lost_games_rarer() {
        let model = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 7).unwrap();
        for (loser, sign) in [(Color::White, 1.0), (Color::Black, -1.0)] {
            let games = [game(loser)];
            let examples = Examples::of(&games, 0, FeatureSet::Seed, &Weighting::all_moves(Baseline::None)).unwrap();
            assert_eq!(examples.len(), 4, "Black's three stones and its pass");
            assert_eq!(examples.actions, [3 * 19 + 3, 15 * 19 + 3, 9 * 19 + 9, 361]);
            assert!(examples.weights.iter().all(|&w| w == sign));
            let before = log_likelihood(&model, &examples);
            let mut sgd = OptimizerConfig::sgd(0.01, 0.0).build(model.parameters());
            // Chunks of 3 give the gradient of the whole, as one chunk does.
            let (grads, loss, _) = examples.gradient(&model, 3).unwrap();
            let (whole, whole_loss, _) = examples.gradient(&model, 64).unwrap();
            assert!((loss - whole_loss).abs() < 1e-4, "{loss} {whole_loss}");
            let (_, var) = &model.parameters()[0];
            let diff = (grads.get(var.as_tensor()).unwrap() - whole.get(var.as_tensor()).unwrap()).unwrap();
            assert!(diff.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap() < 1e-5);
            sgd.step(&grads).unwrap();
            let after = log_likelihood(&model, &examples);
            assert!(sign * (after - before) > 0.0, "{loser:?} lost: log p {before} -> {after}");
        }
        // The mean baseline: one game won and one lost weigh ±1 around 0,
        // two won weigh nothing.
        let games = [game(Color::White), game(Color::White)];
        let examples = Examples::of(&games, 0, FeatureSet::Seed, &Weighting::all_moves(Baseline::Mean)).unwrap();
        assert!(examples.weights.iter().all(|&w| w == 0.0));
        let examples = Examples::of(
            &[game(Color::White), game(Color::Black)],
            0,
            FeatureSet::Seed,
            &Weighting::all_moves(Baseline::None),
        )
        .unwrap();
        assert!(examples.weights.iter().all(|&w| w.abs() == 0.5), "outcomes over the number of games");
        // A fraction of the moves, each weighing that much more.
        let many: Vec<Finished> = (0..50).map(|i| Finished { index: i, ..game(Color::White) }).collect();
        let half = Weighting { move_fraction: 0.5, seed: 3, ..Weighting::all_moves(Baseline::None) };
        let examples = Examples::of(&many, 0, FeatureSet::Seed, &half).unwrap();
        assert!((70..130).contains(&examples.len()), "about half of 200 moves: {}", examples.len());
        assert!(examples.weights.iter().all(|&w| w == 2.0 / 50.0));
        assert_eq!(Examples::of(&many, 0, FeatureSet::Seed, &half).unwrap().actions, examples.actions, "the same draw");
    }
}
