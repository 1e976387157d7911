//! Self-play: many games at once between two players (or one against
//! itself), the move nets evaluated in batches across games. AlphaGo's
//! second and third stages play this way: the RL policy against earlier
//! versions of itself (`crate::train::rl` drives it), and the games whose
//! one marked position each labels the value net's data ([`Plan::AlphaGoValue`]).
//!
//! * [`side`] — who plays: a move net run in batches, or any other player
//!   (MCTS, a GTP engine) built per game.
//! * [`plan`] — which side makes each move of a game.
//! * [`engine`] — the game loop: workers, each with its own games, one net
//!   evaluation per side and step for all of them.
//! * [`run`] — `go-train selfplay`: games as SGF files, written one by one,
//!   `--resume`, and the dataset `prepare` makes of them.
//!
//! Every game is a function of the seed and its index alone (its moves are
//! drawn by a generator of its own, and a net scores a position the same
//! in any batch on the CPU), so the same seed gives the same games whatever
//! the batch size or the number of threads, and a resumed run the games an
//! uninterrupted one would have played.

pub mod engine;
pub mod plan;
pub mod run;
pub mod side;

pub use engine::{play_games, Finished, PlayConfig, PlayStats};
pub use plan::{GamePlan, Mover, Plan};
pub use run::{selfplay, SelfPlayOptions, SelfPlaySummary};
pub use side::Side;

/// The seed of game `index` of a run seeded by `seed`: its moves, its
/// agents and the judging of its dead stones.
pub fn game_seed(seed: u64, index: usize) -> u64 {
    crate::go::zobrist::mix(seed ^ crate::go::zobrist::mix(index as u64 ^ 0x5345_4C46))
}
