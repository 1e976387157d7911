//! Matches between agents and GTP engines: `go-train eval --match`.
//!
//! A match is `n` games between players A and B with colours alternating
//! (A takes Black in even-numbered games). go-train's rules engine referees
//! every game under Chinese rules (area scoring, positional superko, no
//! suicide): a move it refuses, or a player that fails (an error, a
//! crash, no answer within the GTP timeout), loses the game by forfeit,
//! and the next game starts fresh engines. Games end by two passes, a resignation or a move limit; counted
//! games are scored by area with dead stones found by random-playout
//! ownership ([`crate::search::ownership`]), and can be cross-checked
//! against GnuGo's `final_score`. Every game is written as SGF as soon as
//! it ends, so an interrupted match keeps the games it finished.

pub mod player;
pub mod referee;
pub mod run;
pub mod stats;

pub use player::{GtpPlayer, LocalPlayer, Player, PlayerSpec};
pub use referee::{counted, play_game, EndReason, GameConfig, GameOutcome};
pub use run::{run_match, MatchConfig, MatchSummary};
