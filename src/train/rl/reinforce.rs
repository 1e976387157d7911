//! REINFORCE (Williams 1992) as AlphaGo's RL policy used it: every move
//! the learner made in a game is pushed up if it won the game and down if
//! it lost, Δρ ∝ (1/n) Σ_games Σ_moves (z − b) ∇ log p(a|s).

use anyhow::{Context, Result};
use candle_core::backprop::GradStore;
use candle_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::features::{FeatureSet, PackedPlanes};
use crate::go::zobrist::mix;
use crate::go::{Game, Move};
use crate::nn::{Model, BOARD, MASKED_LOGIT, MOVES, POINTS};
use crate::search::acceptable_points;
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
    /// The temperature the learner sampled its moves at: the policy whose
    /// log-likelihood a step raises or lowers is the one it played by.
    pub temperature: f32,
}

impl Weighting {
    /// AlphaGo's: every move, no baseline, temperature 1.
    pub fn all_moves(baseline: Baseline) -> Weighting {
        Weighting { baseline, move_fraction: 1.0, seed: 0, temperature: 1.0 }
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

/// The points a policy agent chooses among at a position
/// ([`crate::search::net_agent::choose_move`]: the acceptable points), as
/// bits over the 362 actions. Pass is not one of them: see [`Examples`].
type Choices = [u64; MOVES.div_ceil(64)];

fn choices(game: &Game) -> Choices {
    let mut bits = [0u64; MOVES.div_ceil(64)];
    let size = game.size();
    for p in acceptable_points(game) {
        let i = game.board().vertex(p).index(size);
        bits[i / 64] |= 1 << (i % 64);
    }
    bits
}

/// The learner's moves of a batch of games, each weighted by its game's
/// outcome less the baseline, over the number of games.
///
/// The likelihood a step pushes is that of the policy the learner played
/// by: the net's probabilities at the sampling temperature, renormalised
/// over the moves it could choose. With the net's own softmax over all 362
/// moves, every lost game pushed probability onto the moves an agent never
/// plays (its own eyes, suicides), where no game could take it back: the
/// learner's real choices grew ever less likely and it collapsed to
/// losing every game within 15 iterations.
///
/// The learner learns where to play, not when to pass: its passes are no
/// examples, and the likelihood of a point is renormalised over the
/// acceptable points alone. Lost games are the longer ones, so with pass
/// among the choices the outcomes pushed every point down against pass,
/// whatever the baseline (through the pass logit and the head's one bias,
/// which shift all points at once); two runs taught themselves to pass at
/// the first move (games of 2 moves) within 21 iterations, one with the
/// pass logit frozen. Over the points alone a shift of all of them changes
/// no likelihood, so no step moves them against pass.
#[derive(Clone)]
pub struct Examples {
    planes: Vec<PackedPlanes>,
    choices: Vec<Choices>,
    actions: Vec<u32>,
    weights: Vec<f32>,
    features: FeatureSet,
    temperature: f32,
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
        let mut examples = Examples {
            planes: Vec::new(),
            choices: Vec::new(),
            actions: Vec::new(),
            weights: Vec::new(),
            features,
            temperature: weighting.temperature,
        };
        for g in games {
            let weight = (outcome(g) - b) / (games.len() as f64 * weighting.move_fraction) as f32;
            let played = &g.outcome.game;
            let mut game = Game::new(played.size(), *played.rules());
            for (number, m) in played.moves().enumerate() {
                let Some(action) = m.mv.policy_index(played.size()) else { break };
                let is_point = matches!(m.mv, Move::Play(_));
                if is_point && g.plan.side(m.color) == learner && weighting.keeps(g.index, number) {
                    examples.planes.push(features.encode(&game));
                    examples.choices.push(choices(&game));
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

    /// The gradient of −Σ weight·log π(action) over all positions (π the
    /// policy played by, see [`Examples`]), for `model`'s parameters (its
    /// batch norms keep their running statistics, as in play), computed
    /// `chunk` positions at a time; that sum; and the mean log π(action),
    /// how sure the learner was of its moves. Runs on the
    /// [compute pool](crate::train::on_compute_pool).
    pub fn gradient(&self, model: &Model, chunk: usize) -> Result<(GradStore, f64, f64)> {
        let device = model.device();
        let params = model.parameters();
        let per_position = self.features.planes() * POINTS;
        crate::train::on_compute_pool(device, || {
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
                let mut mask = vec![MASKED_LOGIT as f32; n * MOVES];
                for (bits, row) in self.choices[start..end].iter().zip(mask.chunks_exact_mut(MOVES)) {
                    for (i, m) in row.iter_mut().enumerate() {
                        if bits[i / 64] >> (i % 64) & 1 == 1 {
                            *m = 0.0;
                        }
                    }
                }
                let mask = Tensor::from_vec(mask, (n, MOVES), device)?;
                let played = ((model.forward(&x, false)? * (1.0 / self.temperature as f64))? + mask)?;
                let log_p = (played.gather(&actions, 1)?.squeeze(1)? - played.log_sum_exp(1)?)?;
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::arena::GameOutcome;
    use crate::go::{Color, Rules, Vertex};
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

    /// The likelihood a step pushes is that of the moves the policy agent
    /// chose among, at its temperature: not the net's over all 362 moves,
    /// which gives weight to moves no agent plays (here Black's own eye).
    #[test]
    fn the_likelihood_pushed_is_that_of_the_policy_played_by() {
        let net = crate::search::NetEval::load(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/nets/policy.safetensors")),
            &Device::Cpu,
            crate::nn::Output::MoveLogProbs,
        )
        .unwrap();
        let mut game = Game::new(19, Rules::CHINESE);
        let moves = [(1, 0), (10, 10), (0, 1), (11, 11), (1, 1), (12, 12), (5, 5)];
        let mut expected = Vec::new();
        for (i, (x, y)) in moves.into_iter().enumerate() {
            let color = if i % 2 == 0 { Color::Black } else { Color::White };
            let mv = Move::Play(Vertex::new(x, y));
            if color == Color::Black {
                let probs = net.move_probs(&[&game]).unwrap().remove(0);
                let chosen: Vec<(Move, f32)> = crate::search::net_agent::scored_moves(&game, &probs)
                    .into_iter()
                    .filter(|&(m, _)| m != Move::Pass)
                    .collect();
                let total: f64 = chosen.iter().map(|&(_, p)| (p as f64).powf(2.0)).sum();
                let p = chosen.iter().find(|&&(m, _)| m == mv).unwrap().1 as f64;
                expected.push((p.powf(2.0) / total).ln());
            }
            game.play(color, mv).unwrap();
        }
        let outcome = GameOutcome::lost_by(game, Color::White, None, [0.0; 2]);
        let games =
            [Finished { index: 0, plan: GamePlan { sides: [0, 1], random_move: None }, outcome, value_position: None }];
        let weighting = Weighting { temperature: 0.5, ..Weighting::all_moves(Baseline::None) };
        let examples = Examples::of(&games, 0, FeatureSet::Extended, &weighting).unwrap();
        assert_eq!(examples.choices[0][0] & 1, 1, "the empty corner is a choice on the empty board");
        assert_eq!(examples.choices[3][0] & 1, 0, "Black's own eye in the corner is no choice");
        let (_, _, mean) = examples.gradient(net.model(), 2).unwrap();
        let want = expected.iter().sum::<f64>() / expected.len() as f64;
        assert!((mean - want).abs() < 1e-3, "mean log π {mean}, by hand {want}");
    }

    /// A lost game pushes no point against pass: neither the pass logit nor
    /// the head's bias, which shifts every point at once, gets a gradient
    /// (but for rounding).
    #[test]
    fn no_step_moves_the_points_against_pass() {
        let model = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 7).unwrap();
        let examples =
            Examples::of(&[game(Color::Black)], 0, FeatureSet::Seed, &Weighting::all_moves(Baseline::None)).unwrap();
        let (grads, _, _) = examples.gradient(&model, 64).unwrap();
        let grad = |name: &str| {
            let (_, var) = model.parameters().into_iter().find(|(n, _)| n == name).unwrap();
            grads.get(var.as_tensor()).map_or(0.0, |g| g.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap())
        };
        let points = grad("head.weight");
        assert!(points > 1e-4, "the points themselves move: {points}");
        // Rounding's share: sums over 361 points in f32, in an order that
        // the convolution path decides (without AVX-512 the bias got 2.3e-6
        // where 1e-6 was allowed).
        for name in ["pass_logit", "head.bias"] {
            assert!(grad(name) < 1e-3 * points, "{name} {}, the points {points}", grad(name));
        }
    }

    #[test]
    fn won_games_make_the_learners_moves_likelier_and_lost_games_rarer() {
        let model = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 7).unwrap();
        for (loser, sign) in [(Color::White, 1.0), (Color::Black, -1.0)] {
            let games = [game(loser)];
            let examples = Examples::of(&games, 0, FeatureSet::Seed, &Weighting::all_moves(Baseline::None)).unwrap();
            assert_eq!(examples.len(), 3, "Black's three stones, not its pass");
            assert_eq!(examples.actions, [3 * 19 + 3, 15 * 19 + 3, 9 * 19 + 9]);
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
        assert!((50..100).contains(&examples.len()), "about half of 150 moves: {}", examples.len());
        assert!(examples.weights.iter().all(|&w| w == 2.0 / 50.0));
        assert_eq!(Examples::of(&many, 0, FeatureSet::Seed, &half).unwrap().actions, examples.actions, "the same draw");
    }
}
