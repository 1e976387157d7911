//! Ladder reading for the ladder-capture and ladder-escape planes.
//!
//! A ladder is read the way AlphaGo's features and KataGo's
//! `searchIsLadderCaptured` read it: the defender, in atari and to move,
//! either extends at its liberty or captures an attacking string that is
//! itself in atari; the attacker answers a two-liberty string by
//! atari at either liberty. The defender escapes with three liberties or
//! more. Reading stops after a fixed number of positions, counted as an
//! escape: a feature that is sometimes absent is better than a `prepare`
//! whose time depends on the position.

use std::cell::RefCell;

use crate::go::{Board, Color, Point};

/// Positions one question may visit. Most ladders need a few dozen, but
/// an attacker's atari that drives the wrong way starts side ladders at
/// every step: 200 let a long ladder be read in one orientation and not in
/// its mirror image, which the search averages over and training
/// augments with (about 1 question in 1,000 on kgs-6d ran out; at 1,000
/// and at 20,000 the same ones are answered alike).
const BUDGET: u32 = 1_000;

/// Whether the string at `s`, in atari with its owner to move, is captured
/// by a ladder.
#[cfg(test)]
fn is_captured(board: &Board, s: Point) -> bool {
    with_reader(board, |r| r.captured(0, s))
}

/// Whether the opponent's move at `atari`, which leaves the string at `s`
/// (the defender's, two liberties before) in atari, captures it in a
/// ladder. `atari` must be legal for the attacker.
pub fn atari_captures(board: &Board, s: Point, atari: Point) -> bool {
    with_reader(board, |r| r.atari_captures(s, atari))
}

/// Whether extending at the last liberty of the string at `s` (the side
/// to move's, in atari) escapes: the string is not captured after it.
pub fn extension_escapes(board: &Board, s: Point) -> bool {
    let Some(defender) = board.color_at(s) else { return false };
    let Some(lib) = board.atari_liberty(s) else { return false };
    if board.check_move(lib, defender, false).is_err() {
        return false;
    }
    with_reader(board, |r| {
        r.child(0, lib, defender);
        !r.attacker_wins(1, s, defender.opponent())
    })
}

/// Runs `read` with a reader whose first board is `board`. Readers are
/// kept per thread: boards are large (tens of kilobytes), so the reading
/// copies them into buffers on the heap, reused, rather than cloning a
/// board onto the stack at every level of the recursion.
fn with_reader<T>(board: &Board, read: impl FnOnce(&mut Reader) -> T) -> T {
    READER.with(|cell| {
        let mut r = cell.borrow_mut();
        r.budget = BUDGET;
        match r.boards.first_mut() {
            Some(first) => first.copy_from(board),
            None => r.boards.push(board.clone()),
        }
        let answer = read(&mut r);
        // A long line grew the buffers (tens of kilobytes a board): kept
        // whole, every thread of prepare and search held megabytes.
        r.boards.truncate(KEPT_BOARDS);
        answer
    })
}

/// Boards a thread's reader keeps between questions: most lines are short.
const KEPT_BOARDS: usize = 32;

thread_local! {
    static READER: RefCell<Reader> = const { RefCell::new(Reader { boards: Vec::new(), budget: 0 }) };
}

/// The boards of the line being read, one per depth.
struct Reader {
    boards: Vec<Board>,
    /// Positions left to visit.
    budget: u32,
}

impl Reader {
    /// [`atari_captures`] on the first board.
    fn atari_captures(&mut self, s: Point, atari: Point) -> bool {
        let Some(defender) = self.boards[0].color_at(s) else { return false };
        self.child(0, atari, defender.opponent());
        self.boards[1].liberties(s) == 1 && self.captured(1, s)
    }

    /// The board at `depth + 1` becomes the one at `depth` after `color`
    /// plays `m` (legal).
    fn child(&mut self, depth: usize, m: Point, color: Color) {
        if self.boards.len() <= depth + 1 {
            let copy = self.boards[depth].clone();
            self.boards.push(copy);
        }
        let (upper, lower) = self.boards.split_at_mut(depth + 1);
        lower[0].copy_from(&upper[depth]);
        lower[0].play(m, color);
    }

    /// The defender (owner of `s`, in atari at `depth`) to move: captured
    /// whatever it does?
    fn captured(&mut self, depth: usize, s: Point) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        let board = &self.boards[depth];
        // A capture cycle (two strings taking each other in turn) repeats a
        // position of the line; read on, it ran to the budget at every
        // question that met it. Like the budget's end, it counts as an
        // escape.
        if self.boards[..depth].iter().rev().skip(1).step_by(2).any(|b| b.hash() == board.hash()) {
            return false;
        }
        let (Some(defender), Some(lib)) = (board.color_at(s), board.atari_liberty(s)) else { return false };
        let attacker = defender.opponent();
        // Capturing an attacking string in atari next to the defender, or
        // extending at the liberty.
        let mut options = vec![lib];
        for stone in board.string_stones(s) {
            for n in board.neighbors(stone) {
                if board.color_at(n) == Some(attacker) {
                    if let Some(l) = board.atari_liberty(n) {
                        if !options.contains(&l) {
                            options.push(l);
                        }
                    }
                }
            }
        }
        for m in options {
            if self.boards[depth].check_move(m, defender, false).is_err() {
                continue;
            }
            self.child(depth, m, defender);
            if !self.attacker_wins(depth + 1, s, attacker) {
                return false;
            }
        }
        true
    }

    /// The attacker to move at `depth` against the string at `s`: can it
    /// capture?
    fn attacker_wins(&mut self, depth: usize, s: Point, attacker: Color) -> bool {
        match self.boards[depth].liberties(s) {
            0 | 1 => true,
            2 => {
                let ataris: Vec<Point> = self.boards[depth].liberty_points(s).collect();
                ataris.into_iter().any(|atari| {
                    if self.boards[depth].check_move(atari, attacker, false).is_err() {
                        return false;
                    }
                    self.child(depth, atari, attacker);
                    self.boards[depth + 1].liberties(s) == 1 && self.captured(depth + 1, s)
                })
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Game, Rules, Vertex};

    /// A 19×19 game with the stones placed (Black first in each pair list).
    fn position(black: &[&str], white: &[&str]) -> Board {
        let mut g = Game::new(19, Rules::CHINESE);
        let stones: Vec<(Vertex, Option<Color>)> = black
            .iter()
            .map(|v| (Vertex::parse_gtp(v, 19).unwrap(), Some(Color::Black)))
            .chain(white.iter().map(|v| (Vertex::parse_gtp(v, 19).unwrap(), Some(Color::White))))
            .collect();
        g.setup(&stones).unwrap();
        g.board().clone()
    }

    fn at(b: &Board, v: &str) -> Point {
        b.point(Vertex::parse_gtp(v, 19).unwrap())
    }

    #[test]
    fn a_ladder_toward_the_edge_captures_and_a_breaker_saves() {
        // White D4 with two liberties (D5, E4); Black C4, D3, E5. Black's
        // atari at E4 drives White up and left in a staircase to the edge.
        let board = position(&["C4", "D3", "E5"], &["D4"]);
        let (d4, e4, d5) = (at(&board, "D4"), at(&board, "E4"), at(&board, "D5"));
        assert_eq!(board.liberties(d4), 2);
        assert!(atari_captures(&board, d4, e4), "a ladder");
        assert!(atari_captures(&board, d4, d5), "the atari from above: a ladder toward the bottom edge");
        // Without E5 the atari at E4 lets White out at D5 with three liberties.
        let open = position(&["C4", "D3"], &["D4"]);
        assert!(!atari_captures(&open, d4, e4), "no ladder");
        // A white stone on the ladder's path breaks it.
        let broken = position(&["C4", "D3", "E5"], &["D4", "B7"]);
        assert!(!atari_captures(&broken, d4, e4), "the breaker at B7 lets White escape");
        // The same from the defender's side, White in atari and to move.
        let mut b = board.clone();
        b.play(e4, Color::Black);
        assert!(is_captured(&b, d4) && !extension_escapes(&b, d4));
        let mut b = broken.clone();
        b.play(e4, Color::Black);
        assert!(!is_captured(&b, d4) && extension_escapes(&b, d4));
    }

    /// A ladder from the upper left toward the lower right edge (from a
    /// kgs-6d game after 18 moves): White's atari at F14 captures E14.
    /// In some orientations the wrong atari comes first, and its side
    /// ladders took the whole budget of 200 positions: F14 was a ladder in
    /// the game as played and none in its mirror image.
    #[test]
    fn a_long_ladder_is_read_alike_in_every_orientation() {
        use crate::features::Symmetry;
        let black = ["B17", "C17", "E17", "D16", "E16", "C15", "F15", "C14", "E14"];
        let white = ["D17", "B16", "C16", "F16", "D15", "E15", "D14", "D13", "D12"];
        for sym in Symmetry::all() {
            let turn = |v: &str| {
                let t = sym.apply(Vertex::parse_gtp(v, 19).unwrap(), 19);
                t.to_gtp(19)
            };
            let (b, w): (Vec<String>, Vec<String>) = (black.map(turn).into(), white.map(turn).into());
            let board = position(
                &b.iter().map(String::as_str).collect::<Vec<_>>(),
                &w.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            let (e14, f14) = (at(&board, &turn("E14")), at(&board, &turn("F14")));
            assert_eq!(board.liberties(e14), 2);
            assert!(atari_captures(&board, e14, f14), "symmetry {}: F14 is no ladder", sym.number());
        }
    }

    /// A capture cycle in a corner (kgs-6d's 2000-10-24-1 after 225
    /// moves: White A17, Black E16, White A15, Black A18, White D16, Black
    /// A14, White A17 again, …): reading stops at the repeat. It ran to the
    /// budget, and the boards of its line stayed in the thread's reader.
    #[test]
    fn a_capture_cycle_stops_at_the_repeat_and_frees_its_boards() {
        let Some(files) = crate::test_references::sgf_files("kgs-6d") else { return };
        let file = files.iter().find(|f| f.ends_with("2000-10-24-1.sgf")).expect("2000-10-24-1.sgf in kgs-6d");
        let game = crate::sgf::read_file(file).unwrap().remove(0).unwrap();
        let board = game.replay_until(game.rules_or(Rules::CHINESE), 225).unwrap().board().clone();
        let (a16, a17) = (at(&board, "A16"), at(&board, "A17"));
        assert_eq!((board.color_at(a16), board.liberties(a16)), (Some(Color::Black), 2));
        let (captured, visited, depth) =
            with_reader(&board, |r| (r.atari_captures(a16, a17), BUDGET - r.budget, r.boards.len()));
        assert!(!captured && visited < 50, "captured: {captured}, {visited} positions read, {depth} deep");
        let kept = READER.with(|r| r.borrow().boards.len());
        assert!(kept <= KEPT_BOARDS, "{kept} boards kept");
    }

    #[test]
    fn capturing_an_attacker_in_atari_escapes() {
        // White D4 in atari (liberty D5), but the black stone E4 beside it is
        // itself in atari: White takes it and lives.
        let board = position(&["C4", "D3", "E4"], &["D4", "E3", "E5", "F4"]);
        let d4 = at(&board, "D4");
        assert_eq!(board.liberties(d4), 1);
        assert!(!is_captured(&board, d4));
    }
}
