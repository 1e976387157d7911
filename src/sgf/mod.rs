//! SGF game records: reading (any charset, collections, the oddities of
//! real servers and editors), replaying on the rules core, and writing.
//!
//! ```text
//! bytes ─decode─▶ text ─split─▶ game trees ─sgf-parse─▶ nodes ─record─▶ GameRecord ─replay─▶ Game
//!                                                                        └──write──▶ FF[4] text
//! ```
//!
//! A file is read with [`read_file`] or [`parse_bytes`]: every game tree in
//! it becomes a [`ParsedGame`], a [`GameRecord`] or the [`GameError`] that
//! says why not (a bad move value, a board size, a malformed tree), so that
//! one bad game does not lose the others ([`visit_file`] hands them over
//! one at a time, for readers that keep few). Only the main line is kept. A
//! record is checked against the rules only when replayed
//! ([`GameRecord::replay`], [`GameRecord::replay_with`]), which names the
//! first illegal move.

mod date;
mod decode;
mod read;
mod record;
mod replay;
mod result;
mod split;
mod write;

pub use date::GameDate;
pub use read::{
    parse_bytes, parse_game, parse_str, read_file, read_file_up_to_damage, visit_file, visit_str, ParsedGame,
    PartialGame, SgfError,
};
pub use record::{fox_komi, written_value, GameError, GameRecord, Setup};
pub use replay::{ReplayError, RECORD_DEFAULT_RULES};
pub use result::{GameResult, WinBy};
/// A property as sgf-parse reads it (`GameRecord::extra_properties`).
pub use sgf_parse::go::Prop as Property;
pub use split::{SyntaxError, MAX_LINE_NODES, MAX_NODE_VALUES, MAX_TREE_VALUES};
pub use write::{write_annotated, write_game};
