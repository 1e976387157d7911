//! One match game: the referee keeps the official game with go-train's
//! rules, asks each player for moves in turn, and scores the end.

use std::time::Instant;

use super::player::Player;
use crate::go::{Color, Game, Move, Rules, Score};
use crate::search::ownership::Ownership;
use crate::sgf::{GameRecord, GameResult, Property, WinBy};

/// How match games are played and scored.
#[derive(Clone, Copy, Debug)]
pub struct GameConfig {
    /// Board side.
    pub size: usize,
    /// Komi (area scoring, Chinese rules: positional superko, no suicide).
    pub komi: f32,
    /// Moves after which the game stops and is scored as it stands.
    pub max_moves: usize,
    /// Random playouts that decide dead stones at the end.
    pub ownership_playouts: usize,
}

impl GameConfig {
    pub fn rules(&self) -> Rules {
        Rules { komi: self.komi, ..Rules::CHINESE }
    }
}

/// Why a game ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EndReason {
    /// Two passes in a row; scored.
    Passes,
    /// A player resigned.
    Resignation,
    /// The move limit; scored as it stood.
    MoveLimit,
    /// A player made an illegal move or failed (crashed, answered
    /// nonsense, went silent past its timeout).
    Forfeit,
}

/// A finished game.
#[derive(Clone)]
pub struct GameOutcome {
    /// The official game.
    pub game: Game,
    /// The winner (`None`: a draw).
    pub winner: Option<Color>,
    /// How it ended.
    pub reason: EndReason,
    /// The score, for games that were counted.
    pub score: Option<Score>,
    /// What went wrong, for forfeits.
    pub error: Option<String>,
    /// Seconds each colour spent choosing moves.
    pub seconds: [f64; 2],
}

impl GameOutcome {
    /// The game lost by `loser`, by resignation (`error: None`) or by
    /// forfeit (what went wrong).
    pub fn lost_by(game: Game, loser: Color, error: Option<String>, seconds: [f64; 2]) -> GameOutcome {
        let reason = if error.is_some() { EndReason::Forfeit } else { EndReason::Resignation };
        GameOutcome { game, winner: Some(loser.opponent()), reason, score: None, error, seconds }
    }

    /// The SGF record, with player names and the result.
    pub fn record(&self, black: &str, white: &str) -> GameRecord {
        let mut record = GameRecord::from_game(&self.game);
        record.black = Some(black.to_string());
        record.white = Some(white.to_string());
        record.rules = Some("Chinese".to_string());
        record.result = Some(match (self.winner, self.reason, self.score) {
            (None, _, _) => GameResult::Draw,
            (Some(w), EndReason::Resignation, _) => GameResult::Win { winner: w, by: WinBy::Resignation },
            (Some(w), EndReason::Forfeit, _) => GameResult::Win { winner: w, by: WinBy::Forfeit },
            (Some(w), _, Some(s)) => GameResult::Win { winner: w, by: WinBy::Points(s.black_lead.abs()) },
            (Some(w), _, None) => GameResult::Win { winner: w, by: WinBy::Unknown },
        });
        if let Some(e) = &self.error {
            record.extra_properties.push(Property::C(e.as_str().into()));
        }
        record
    }
}

/// Plays one game between `black` and `white`; `seed` fixes the dead-stone
/// estimate. Errors of the players, from the game's setup on, end the game
/// as forfeits.
pub fn play_game(black: &mut dyn Player, white: &mut dyn Player, config: &GameConfig, seed: u64) -> GameOutcome {
    let mut game = Game::new(config.size, config.rules());
    let mut seconds = [0.0; 2];
    let forfeit =
        |game: Game, loser: Color, error: String, seconds| GameOutcome::lost_by(game, loser, Some(error), seconds);
    let set_up = (black.new_game(config.size, config.komi).map_err(|e| (Color::Black, e)))
        .and_then(|_| white.new_game(config.size, config.komi).map_err(|e| (Color::White, e)));
    if let Err((color, e)) = set_up {
        return forfeit(game, color, format!("{color} failed to set up the game: {e:#}"), seconds);
    }
    let mut reason = EndReason::MoveLimit;
    while game.move_count() < config.max_moves {
        let color = game.to_move();
        let (mover, other): (&mut dyn Player, &mut dyn Player) =
            if color == Color::Black { (&mut *black, &mut *white) } else { (&mut *white, &mut *black) };
        let started = Instant::now();
        let mv = mover.genmove(color);
        seconds[color.index()] += started.elapsed().as_secs_f64();
        let mv = match mv {
            Ok(mv) => mv,
            Err(e) => return forfeit(game, color, format!("{color} failed: {e:#}"), seconds),
        };
        if mv == Move::Resign {
            game.play_unchecked(color, mv);
            return GameOutcome::lost_by(game, color, None, seconds);
        }
        if let Err(e) = game.play(color, mv) {
            let error = format!("{color} played an illegal move {}: {e}", mv.to_gtp(config.size));
            return forfeit(game, color, error, seconds);
        }
        if let Err(e) = other.play(color, mv) {
            let error = format!("{} failed to take {color} {}: {e:#}", color.opponent(), mv.to_gtp(config.size));
            return forfeit(game, color.opponent(), error, seconds);
        }
        if game.is_over() {
            reason = EndReason::Passes;
            break;
        }
    }
    counted(game, reason, config, seed, seconds)
}

/// The outcome of a game that ended on the board (two passes or the move
/// limit): scored by area under its rules, the dead stones judged by
/// `config.ownership_playouts` scoring playouts seeded by `seed`.
pub fn counted(game: Game, reason: EndReason, config: &GameConfig, seed: u64, seconds: [f64; 2]) -> GameOutcome {
    let score = Ownership::judge(&game, config.ownership_playouts, seed).score(&game);
    GameOutcome { winner: score.winner(), game, reason, score: Some(score), error: None, seconds }
}
