//! The policy-net agent (and, with the fast net, the playout-net agent):
//! the net's most likely acceptable move, or a sample at a temperature.

use std::time::Duration;

use anyhow::Result;
use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

use super::nets::NetEval;
use super::{acceptable_points, sample_index, Agent};
use crate::go::{Game, Move};
use crate::nn::{BOARD, PASS};

/// Plays the move a move net likes best among the acceptable ones (legal,
/// not filling an own eye), or passes when the net's pass probability is
/// higher than every acceptable point's, or when no point is acceptable.
pub struct NetAgent {
    /// The policy or playout net.
    net: NetEval,
    /// 0 plays the most likely move; above 0 samples from p^(1/T).
    temperature: f32,
    /// Draws samples; seeded, so games are reproducible.
    rng: Pcg64Mcg,
    /// `policy` or `playout`, for names.
    role: &'static str,
}

impl NetAgent {
    pub fn new(net: NetEval, role: &'static str, temperature: f32, seed: u64) -> NetAgent {
        NetAgent { net, temperature, rng: Pcg64Mcg::seed_from_u64(seed), role }
    }
}

impl Agent for NetAgent {
    fn genmove(&mut self, game: &Game, _budget: Option<Duration>) -> Result<Move> {
        let probs = self.net.move_probs(&[game])?;
        Ok(choose_move(game, &probs[0], self.temperature, &mut self.rng))
    }

    fn supports_size(&self, size: usize) -> bool {
        size == BOARD
    }

    fn into_move_net(self: Box<Self>) -> Option<(NetEval, f32)> {
        Some((self.net, self.temperature))
    }

    fn name(&self) -> String {
        if self.temperature > 0.0 {
            format!("{} net {} (temperature {})", self.role, self.net.source(), self.temperature)
        } else {
            format!("{} net {}", self.role, self.net.source())
        }
    }
}

/// The acceptable moves of `game` (see [`acceptable_points`]) and pass,
/// with their probabilities from `probs` (a move net's 362 outputs).
pub fn scored_moves(game: &Game, probs: &[f32]) -> Vec<(Move, f32)> {
    let board = game.board();
    let mut moves: Vec<(Move, f32)> = acceptable_points(game)
        .into_iter()
        .map(|p| {
            let mv = Move::Play(board.vertex(p));
            (mv, move_prob(game, probs, mv))
        })
        .collect();
    moves.push((Move::Pass, move_prob(game, probs, Move::Pass)));
    moves
}

/// The probability a move net's `probs` give `mv` in `game` (none to
/// resigning, which the nets do not predict).
pub fn move_prob(game: &Game, probs: &[f32], mv: Move) -> f32 {
    match mv {
        Move::Play(v) => probs[v.index(game.board().size())],
        Move::Pass => probs[PASS.min(probs.len() - 1)],
        Move::Resign => 0.0,
    }
}

/// A move for the side to move in `game` from a move net's `probs`: the most
/// likely acceptable move at temperature 0, else a draw with weights
/// p^(1/temperature). Pass competes with its own probability, and is the
/// answer when no point is acceptable.
pub fn choose_move(game: &Game, probs: &[f32], temperature: f32, rng: &mut Pcg64Mcg) -> Move {
    let moves = scored_moves(game, probs);
    if temperature <= 0.0 {
        // Ties go to the earlier move, so the choice is deterministic.
        let best = moves.iter().fold(None::<(Move, f32)>, |best, &(m, p)| match best {
            Some((_, bp)) if bp >= p => best,
            _ => Some((m, p)),
        });
        return best.map_or(Move::Pass, |(m, _)| m);
    }
    let weights: Vec<f32> = moves.iter().map(|&(_, p)| p.max(0.0).powf(1.0 / temperature)).collect();
    match sample_index(&weights, rng) {
        Some(i) => moves[i].0,
        // Every weight underflowed: fall back to the most likely move.
        None => choose_move(game, probs, 0.0, rng),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Color, Rules, Vertex};
    use crate::nn::POINTS;

    /// 19×19 all Black but for single-point eyes at (3i+1, 3j+1).
    fn board_of_eyes() -> Game {
        let mut game = Game::new(19, Rules::CHINESE);
        let stones: Vec<(Vertex, Option<Color>)> = (0..POINTS)
            .map(|i| Vertex::from_index(i, 19))
            .filter(|v| !(v.x % 3 == 1 && v.y % 3 == 1))
            .map(|v| (v, Some(Color::Black)))
            .collect();
        game.setup(&stones).unwrap();
        game
    }

    #[test]
    fn never_fills_an_own_eye_and_passes_when_only_eyes_remain() {
        let mut game = board_of_eyes();
        let eye = Vertex::new(4, 4);
        let mut probs = vec![0.0; 362];
        probs[eye.index(19)] = 0.99;
        let mut rng = Pcg64Mcg::seed_from_u64(0);
        for t in [0.0, 1.0] {
            assert_eq!(choose_move(&game, &probs, t, &mut rng), Move::Pass);
        }
        // White may not play there either (suicide): also a pass.
        game.set_to_move(Color::White);
        assert_eq!(choose_move(&game, &probs, 0.0, &mut rng), Move::Pass);
    }

    #[test]
    fn plays_the_most_likely_acceptable_move_or_samples_by_probability() {
        let game = Game::new(19, Rules::CHINESE);
        let mut probs = vec![0.0; 362];
        let (a, b) = (Vertex::new(3, 3), Vertex::new(15, 15));
        probs[a.index(19)] = 0.7;
        probs[b.index(19)] = 0.3;
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        assert_eq!(choose_move(&game, &probs, 0.0, &mut rng), Move::Play(a));
        let draws: Vec<Move> = (0..2000).map(|_| choose_move(&game, &probs, 1.0, &mut rng)).collect();
        let share_a = draws.iter().filter(|&&m| m == Move::Play(a)).count() as f64 / 2000.0;
        assert!((0.65..0.75).contains(&share_a), "{share_a}");
        assert!(draws.iter().all(|&m| m == Move::Play(a) || m == Move::Play(b)));
        // Pass wins when the net likes it best.
        probs[PASS] = 0.9;
        assert_eq!(choose_move(&game, &probs, 0.0, &mut rng), Move::Pass);
    }
}
