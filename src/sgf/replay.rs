//! Replaying a record on the rules core: the positions a dataset is made of
//! and the check that a record is a legal game.

use thiserror::Error;

use super::record::{GameRecord, Setup};
use crate::go::{Board, Color, ColoredMove, Game, IllegalMove, Move, Rules};

/// Why a record cannot be replayed to its end.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum ReplayError {
    /// A move the rules forbid, e.g. "move 57 (W Q16): point is occupied".
    #[error("move {number} ({} {name}): {reason}", .color.letter())]
    IllegalMove {
        /// Move number, from 1.
        number: usize,
        /// Who moved.
        color: Color,
        /// The move in GTP form (`Q16`, `pass`).
        name: String,
        /// The rule it breaks.
        reason: IllegalMove,
    },
    /// Setup stones that cannot be placed (off the board).
    #[error("setup after {moves_before} moves: {reason}")]
    Setup {
        /// Moves played before the setup.
        moves_before: usize,
        /// What is wrong with it.
        reason: IllegalMove,
    },
    /// The record's board size is not one the rules core supports.
    #[error("unsupported board size {0}")]
    BadSize(usize),
}

/// Rules for replaying a record whose `RU` is missing or unknown: simple
/// ko. A record is what a server or a referee accepted, and superko is a
/// rule variant that records name when it applies; 4 GnuGo regression games
/// without `RU` (from NNGS, a simple-ko server) repeat a position.
pub const RECORD_DEFAULT_RULES: Rules = Rules::JAPANESE;

impl GameRecord {
    /// [`GameRecord::rules_or`] with [`RECORD_DEFAULT_RULES`].
    pub fn rules(&self) -> Rules {
        self.rules_or(RECORD_DEFAULT_RULES)
    }

    /// The rules the game was played under: its `RU` when go-train knows
    /// the name, else `default`; komi from `KM` when given. Replaying a
    /// record under its own rules matters: 8 KGS games played under
    /// Japanese rules repeat a position, which positional superko forbids.
    pub fn rules_or(&self, default: Rules) -> Rules {
        let mut rules = self.rules.as_deref().and_then(Rules::by_name).unwrap_or(default);
        if let Some(komi) = self.komi {
            rules.komi = komi;
        }
        rules
    }

    /// The game at its end: setup, `PL`, then every move, under `rules`
    /// with the record's komi when it has one.
    pub fn replay(&self, rules: Rules) -> Result<Game, ReplayError> {
        self.replay_with(rules, |_, _, _| {})
    }

    /// The game as it stands before move `n_moves` (0-based): after the
    /// first `n_moves` moves and the setup recorded after them. Past the
    /// end, the game at its end.
    pub fn replay_until(&self, rules: Rules, n_moves: usize) -> Result<Game, ReplayError> {
        self.replay_inner(rules, n_moves, |_, _, _| {})
    }

    /// [`GameRecord::replay_until`], stopping before the first illegal
    /// move rather than failing: the position reached, and the error that
    /// stopped it. What no position comes from (a bad size, bad setup)
    /// fails.
    pub fn replay_until_legal(&self, rules: Rules, n_moves: usize) -> Result<(Game, Option<ReplayError>), ReplayError> {
        match self.replay_until(rules, n_moves) {
            Ok(game) => Ok((game, None)),
            Err(e @ ReplayError::IllegalMove { number, .. }) => Ok((self.replay_until(rules, number - 1)?, Some(e))),
            Err(e) => Err(e),
        }
    }

    /// Replays the whole record, calling `visit(i, game, move)` before each
    /// move `i` (0-based) with the position it is played in; `game.to_move()`
    /// is the mover's colour (SGF says who moves; a colour may move twice).
    /// Only legal moves are visited: replay stops at the first illegal one.
    /// Returns the game at its end.
    pub fn replay_with<F>(&self, rules: Rules, visit: F) -> Result<Game, ReplayError>
    where
        F: FnMut(usize, &Game, ColoredMove),
    {
        self.replay_inner(rules, self.moves.len(), visit)
    }

    fn replay_inner<F>(&self, mut rules: Rules, n_moves: usize, mut visit: F) -> Result<Game, ReplayError>
    where
        F: FnMut(usize, &Game, ColoredMove),
    {
        if !Board::valid_size(self.size) {
            return Err(ReplayError::BadSize(self.size));
        }
        if let Some(komi) = self.komi {
            rules.komi = komi;
        }
        let mut game = Game::new(self.size, rules);
        apply_setup(&mut game, 0, &self.setup)?;
        if let Some(color) = self.player_to_move {
            game.set_to_move(color);
        }
        let mut later = self.later_setup.iter().peekable();
        let mut later_to_move = self.later_to_move.iter().peekable();
        let n_moves = n_moves.min(self.moves.len());
        for i in 0..=n_moves {
            while let Some((moves_before, setup)) = later.next_if(|(k, _)| *k <= i) {
                apply_setup(&mut game, *moves_before, setup)?;
            }
            while let Some((_, color)) = later_to_move.next_if(|(k, _)| *k <= i) {
                game.set_to_move(*color);
            }
            if i == n_moves {
                // Stopped before a recorded move: its player is to move
                // (White after a handicap setup without `PL`), as GnuGo's
                // `loadsgf FILE N` answers.
                if let Some(next) = self.moves.get(i) {
                    game.set_to_move(next.color);
                } else if self.moves.is_empty() && self.says_nobody_to_move() && self.is_handicap_setup() {
                    // A handicap position saved before White's first move.
                    game.set_to_move(Color::White);
                }
                break;
            }
            let mv = self.moves[i];
            game.check(mv.color, mv.mv).map_err(|reason| ReplayError::IllegalMove {
                number: i + 1,
                color: mv.color,
                name: move_name(mv.mv, self.size),
                reason,
            })?;
            game.set_to_move(mv.color);
            visit(i, &game, mv);
            game.play_unchecked(mv.color, mv.mv);
        }
        Ok(game)
    }

    /// Whether no `PL` says who moves.
    fn says_nobody_to_move(&self) -> bool {
        self.player_to_move.is_none() && self.later_to_move.is_empty()
    }

    /// Whether `HA` says the game has a handicap of 2 or more, as GnuGo
    /// reads it: black stones set up without `HA` are a problem's
    /// position, with Black to move.
    fn is_handicap_setup(&self) -> bool {
        self.handicap.is_some_and(|h| h >= 2)
    }
}

fn apply_setup(game: &mut Game, moves_before: usize, setup: &Setup) -> Result<(), ReplayError> {
    if setup.is_empty() {
        return Ok(());
    }
    game.setup(setup).map_err(|reason| ReplayError::Setup { moves_before, reason })
}

/// GTP name of a move; a point off the board (only in records built by
/// hand) as its coordinates, since GTP has no name for it.
fn move_name(mv: Move, size: usize) -> String {
    match mv {
        Move::Play(v) if v.x as usize >= size || v.y as usize >= size => v.to_string(),
        mv => mv.to_gtp(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::Vertex;
    use crate::sgf::parse_game;

    /// The replay's error (`Game` has no `Debug` for `unwrap_err`).
    fn replay_error(record: &GameRecord, rules: Rules) -> ReplayError {
        record.replay(rules).err().expect("the replay should fail")
    }

    #[test]
    fn illegal_moves_name_number_move_and_rule() {
        let record = parse_game("(;SZ[19];B[pd];W[dp];B[pp];W[pd])").unwrap();
        let err = replay_error(&record, Rules::CHINESE);
        assert_eq!(err.to_string(), "move 4 (W Q16): point is occupied");
        // White retakes the ko at once.
        let record = parse_game("(;SZ[5];B[ab];W[ca];B[ba];W[db];B[bc];W[cc];B[ee];W[bb];B[cb];W[bb])").unwrap();
        let err = replay_error(&record, Rules::JAPANESE);
        assert_eq!(err.to_string(), "move 10 (W B4): retakes a ko immediately");
    }

    #[test]
    fn visitor_sees_each_position_before_its_move() {
        let record = parse_game("(;SZ[9]AB[cc]PL[W];W[ee];W[ff];B[];AW[aa];B[gg])").unwrap();
        let mut seen = Vec::new();
        let game = record
            .replay_with(Rules::CHINESE, |i, game, mv| {
                assert_eq!(game.to_move(), mv.color);
                assert_eq!(game.move_count(), i);
                seen.push((i, game.board().stone_counts(), mv.color));
            })
            .unwrap();
        assert_eq!(
            seen,
            [
                (0, [1, 0], Color::White),
                (1, [1, 1], Color::White),
                (2, [1, 2], Color::Black),
                (3, [1, 3], Color::Black)
            ]
        );
        assert_eq!(game.board().stone_counts(), [2, 3]);
        assert_eq!(game.to_move(), Color::White);
    }

    #[test]
    fn replay_until_stops_before_a_move() {
        let record = parse_game("(;SZ[9]KM[0.5];B[ee];W[ff];AB[aa];B[gg])").unwrap();
        assert_eq!(record.replay_until(Rules::CHINESE, 0).unwrap().move_count(), 0);
        let before_third = record.replay_until(Rules::CHINESE, 2).unwrap();
        assert_eq!(before_third.board().stone_counts(), [2, 1]);
        assert_eq!(before_third.rules().komi, 0.5);
        assert_eq!(record.replay_until(Rules::CHINESE, 99).unwrap().move_count(), 3);
        // A handicap game without `PL`: White plays first, and is to move
        // before it (it once read "Black to move", as alternation has it).
        let handicap = parse_game("(;SZ[9]HA[2]AB[cc][gg];W[ee];B[ce];W[ec])").unwrap();
        assert_eq!(handicap.replay_until(Rules::CHINESE, 0).unwrap().to_move(), Color::White);
        assert_eq!(handicap.replay_until(Rules::CHINESE, 1).unwrap().to_move(), Color::Black);
        assert_eq!(handicap.replay_until(Rules::CHINESE, 3).unwrap().to_move(), Color::Black);
        // `PL` in a later node, as GnuGo saves a position (`AW…AB…PL[W]`
        // after the moves): it says who moves, and survives writing.
        let saved = parse_game("(;SZ[9];B[ee];W[ff];AB[aa]AW[bb]PL[W])").unwrap();
        assert_eq!(saved.later_to_move, [(2, Color::White)]);
        assert_eq!(saved.replay(Rules::CHINESE).unwrap().to_move(), Color::White);
        let written = crate::sgf::write_game(&saved);
        assert!(written.contains("PL[W]"), "{written}");
        assert_eq!(parse_game(&written).unwrap().replay(Rules::CHINESE).unwrap().to_move(), Color::White);
        // And so does the game played from it, saved again (GTP's
        // `printsgf` after `loadsgf`).
        let again = crate::sgf::write_game(&GameRecord::from_game(&saved.replay(Rules::CHINESE).unwrap()));
        assert!(again.contains("PL[W]"), "{again}");
        assert_eq!(parse_game(&again).unwrap().replay(Rules::CHINESE).unwrap().to_move(), Color::White);
        // Who moves after a setup is written only where the moves do not
        // say it already.
        let plain = parse_game("(;SZ[9];B[ee];W[ff];AB[aa];B[gg])").unwrap();
        let plain = crate::sgf::write_game(&GameRecord::from_game(&plain.replay(Rules::CHINESE).unwrap()));
        assert!(!plain.contains("PL["), "{plain}");
    }

    #[test]
    fn a_handicap_position_without_moves_has_white_to_move() {
        let to_move = |sgf: &str| parse_game(sgf).unwrap().replay(Rules::CHINESE).unwrap().to_move();
        assert_eq!(to_move("(;SZ[19]KM[0.5]HA[2]AB[pd][dp])"), Color::White);
        assert_eq!(to_move("(;SZ[19]HA[2])"), Color::White);
        assert_eq!(to_move("(;SZ[19]HA[2]AB[pd]AW[dp])"), Color::White);
        // As GnuGo answers `loadsgf`: black stones without HA are a problem.
        assert_eq!(to_move("(;SZ[19]AB[pd][dp])"), Color::Black);
        // `PL`, or no HA, leaves Black to move.
        assert_eq!(to_move("(;SZ[19]HA[2]AB[pd][dp]PL[B])"), Color::Black);
        assert_eq!(to_move("(;SZ[19]AB[pd]AW[dp])"), Color::Black);
        assert_eq!(to_move("(;SZ[19]AW[pd])"), Color::Black);
        assert_eq!(to_move("(;SZ[19])"), Color::Black);
        // After moves, the moves say it.
        assert_eq!(to_move("(;SZ[19]HA[2]AB[pd][dp];W[dd];B[pp])"), Color::White);
    }

    #[test]
    fn hand_built_records_fail_cleanly() {
        let mut record = GameRecord::new(9);
        record.moves.push(ColoredMove { color: Color::Black, mv: Move::Play(Vertex { x: 30, y: 2 }) });
        assert_eq!(replay_error(&record, Rules::CHINESE).to_string(), "move 1 (B (30,2)): point is not on the board");
        record.size = 1;
        assert_eq!(replay_error(&record, Rules::CHINESE), ReplayError::BadSize(1));
        let mut record = GameRecord::new(9);
        record.later_setup.push((0, vec![(Vertex { x: 9, y: 0 }, None)]));
        assert_eq!(replay_error(&record, Rules::CHINESE).to_string(), "setup after 0 moves: point is not on the board");
    }
}
