//! Who plays in self-play: a move net evaluated for many games at once, or
//! any other player, one per game.

use std::sync::Arc;

use anyhow::{bail, Context, Result};
use candle_core::Device;

use crate::eval::arena::{GameConfig, Player, PlayerSpec};
use crate::gtp::GtpTimeouts;
use crate::nn::BOARD;
use crate::search::NetEval;

/// One side of self-play games.
pub struct Side {
    /// For SGF player names, messages and reports.
    name: String,
    kind: SideKind,
}

enum SideKind {
    /// A move net whose choice is one evaluation, sampled at a temperature
    /// (policy and playout agents): evaluated for every game it moves in
    /// at once. `seed` (the agent's `seed=`) shifts the seeds of the
    /// games it plays in, as it shifts a per-game player's.
    Net { net: Arc<NetEval>, temperature: f32, seed: u64 },
    /// Anything else (MCTS, random, a GTP engine): a player of its own per
    /// game, asked for one move at a time; a GTP engine forfeits a game
    /// when it does not answer within its timeouts.
    PerGame(PlayerSpec, GtpTimeouts),
}

impl Side {
    /// The side a player spec names, checked by building it once: a net
    /// that does not load fails here, not in every game. An engine is
    /// started by [`Side::check_board`].
    pub fn build(spec: PlayerSpec, device: &Device, timeouts: GtpTimeouts) -> Result<Side> {
        let (agent, seed) = match &spec {
            PlayerSpec::Agent(agent) => (agent.build(device)?, agent.search.seed),
            PlayerSpec::Gtp(_) => return Ok(Side { name: spec.label(), kind: SideKind::PerGame(spec, timeouts) }),
        };
        let name = agent.name();
        Ok(match agent.into_move_net() {
            Some((net, temperature)) => Side { name, kind: SideKind::Net { net: Arc::new(net), temperature, seed } },
            None => Side { name, kind: SideKind::PerGame(spec, timeouts) },
        })
    }

    /// A move net sampled at `temperature` (0: its most likely move), as
    /// the policy agent plays it.
    pub fn net(name: impl Into<String>, net: Arc<NetEval>, temperature: f32) -> Side {
        Side { name: name.into(), kind: SideKind::Net { net, temperature, seed: 0 } }
    }

    /// Fails unless the side plays on the board of `game`: checked before
    /// a run writes anything, rather than by every game of it failing.
    pub fn check_board(&self, game: &GameConfig, device: &Device) -> Result<()> {
        let size = game.size;
        match &self.kind {
            SideKind::Net { net, .. } if size != BOARD => {
                bail!("{} cannot play on {size}x{size}: the nets play on {BOARD}x{BOARD} only", net.source())
            }
            SideKind::Net { .. } => Ok(()),
            // A player of its own, set up for a game: an engine that does
            // not start or refuses the board size fails here.
            SideKind::PerGame(..) => {
                self.player(device, 0).expect("a per-game side has players")?.new_game(size, game.komi)
            }
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The net and temperature of a batched side.
    pub(super) fn move_net(&self) -> Option<(&NetEval, f32)> {
        match &self.kind {
            SideKind::Net { net, temperature, .. } => Some((net, *temperature)),
            SideKind::PerGame(..) => None,
        }
    }

    /// What a batched side's `seed=` adds to the seed of a game it plays
    /// in (0 for a per-game side, whose player adds its own).
    pub(super) fn seed_shift(&self) -> u64 {
        match &self.kind {
            SideKind::Net { seed, .. } => *seed,
            SideKind::PerGame(..) => 0,
        }
    }

    /// A player for one game of a per-game side, its random choices seeded
    /// by `seed`; `None` for a batched side.
    pub(super) fn player(&self, device: &Device, seed: u64) -> Option<Result<Box<dyn Player>>> {
        match &self.kind {
            SideKind::Net { .. } => None,
            SideKind::PerGame(spec, timeouts) => {
                Some(spec.build(device, seed, *timeouts).with_context(|| format!("starting {}", self.name)))
            }
        }
    }
}
