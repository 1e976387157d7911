//! Go rules: the board with exact strings and liberties, Zobrist hashing,
//! simple ko and superko, setup and handicap stones, scoring.

pub mod board;
pub mod color;
pub mod diagram;
pub mod game;
pub mod handicap;
pub mod rules;
pub mod scoring;
pub mod vertex;
pub mod zobrist;

#[cfg(test)]
mod tests;

pub use board::{Board, Cell, IllegalMove, MoveOutcome, Point, Undo};
pub use color::Color;
pub use diagram::diagram;
pub use game::{Event, ForbiddenMove, Game};
pub use handicap::fixed_handicap;
pub use rules::{KoRule, Rules, Scoring};
pub use scoring::{Count, Score};
pub use vertex::{ColoredMove, Move, Vertex, MAX_SIZE};
