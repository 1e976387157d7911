//! Move generation: agents that choose a move for the side to move.
//!
//! * [`RandomAgent`] — uniform among legal moves that do not fill an own eye.
//! * [`NetAgent`] — the policy net's (or the fast playout net's) best legal
//!   move, or a sample at a temperature.
//! * [`Mcts`] — the seed design's tree search: top-k expansion from the
//!   policy net, short rollouts with the playout net, value-net leaves.
//!
//! Every agent implements [`Agent`]; [`AgentSpec`] names one on the command
//! line (`random`, `policy:temperature=0.5`, `mcts:iterations=400`, ...)
//! and builds it; [`config`] declares the search's settings and presets. [`ownership`] estimates who owns each point, which decides
//! dead stones when a game is scored.

pub mod analysis;
pub mod config;
pub mod mcts;
pub mod net_agent;
pub mod nets;
pub mod ownership;
pub mod random;
pub mod restrict;
pub mod spec;
pub mod tactics;

use std::time::Duration;

use anyhow::Result;
use rand::RngExt;

pub use analysis::{Analysis, MoveInfo};
pub use config::{LeafEval, MctsConfig, Preset, Selection};
pub use mcts::Mcts;
pub use net_agent::NetAgent;
pub use nets::{DefaultNets, NetChoice, NetEval, NetSource};
pub use ownership::Ownership;
pub use random::RandomAgent;
pub use restrict::MoveFilter;
pub use spec::{AgentKind, AgentSpec};

use crate::go::{Game, Move, Point};

/// Something that picks moves.
pub trait Agent: Send {
    /// The move for the side to move in `game`: a legal move, a pass, or a
    /// resignation; never an illegal move. `budget` is the time it may take
    /// (from the GTP clock), when it can use one.
    fn genmove(&mut self, game: &Game, budget: Option<Duration>) -> Result<Move>;

    /// Whether it can play on a board of `size` (the nets are built for
    /// 19×19 only).
    fn supports_size(&self, size: usize) -> bool {
        let _ = size;
        true
    }

    /// A short description, for logs, SGF player names and match reports.
    fn name(&self) -> String;

    /// The tree search that chooses this agent's moves, for live analysis
    /// (`None`: the agent has none).
    fn tree_search(&mut self) -> Option<&mut Mcts> {
        None
    }

    /// The move net and temperature this agent's moves come from, when a
    /// move is [`net_agent::choose_move`] of one net evaluation and nothing
    /// more: self-play then evaluates the positions of many games in one
    /// batch and chooses for each as the agent would. `None` (the agent is
    /// dropped): it does more, and plays its games one move at a time.
    fn into_move_net(self: Box<Self>) -> Option<(NetEval, f32)> {
        None
    }
}

impl Agent for RandomAgent {
    fn genmove(&mut self, game: &Game, _budget: Option<Duration>) -> Result<Move> {
        Ok(self.select(game))
    }

    fn name(&self) -> String {
        "random".to_string()
    }
}

/// The points the side to move may sensibly play: legal, and not one of its
/// own eyes (filling an own eye never helps and can kill the group, so no
/// agent here ever does it).
pub fn acceptable_points(game: &Game) -> Vec<Point> {
    let board = game.board();
    let color = game.to_move();
    board.empty_points().filter(|&p| !board.is_eye(p, color) && game.check_point(p, color).is_ok()).collect()
}

/// Index of a draw from unnormalised non-negative `weights`; `None` when
/// they sum to zero (or are not finite).
pub fn sample_index(weights: &[f32], rng: &mut impl RngExt) -> Option<usize> {
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    if !(total > 0.0 && total.is_finite()) {
        return None;
    }
    let mut x = rng.random::<f64>() * total;
    for (i, &w) in weights.iter().enumerate() {
        x -= w as f64;
        if x < 0.0 {
            return Some(i);
        }
    }
    // Rounding left a sliver past the end: the last positive weight.
    weights.iter().rposition(|&w| w > 0.0)
}
