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

/// Runs `questions` with a reader of the ladders of `board`. Readers are
/// kept per thread: a board is large (tens of kilobytes), so it is copied
/// once into the reader's, where each line is played and each of its
/// moves taken back ([`Board::undo`]).
pub fn read<T>(board: &Board, questions: impl FnOnce(&mut Reader) -> T) -> T {
    READER.with(|cell| {
        let mut r = cell.borrow_mut();
        match &mut r.board {
            Some(b) => b.copy_from(board),
            None => r.board = Some(board.clone()),
        }
        r.hashes.clear();
        r.hashes.push(board.hash());
        // Left by a question that panicked (the GTP engine answers on).
        r.undos.clear();
        let answer = questions(&mut r);
        // A long line grew the undo records (a few hundred bytes each).
        r.undos.shrink_to(KEPT_UNDOS);
        answer
    })
}

/// Undo records (a few hundred bytes each) a reader keeps room for.
const KEPT_UNDOS: usize = 64;

thread_local! {
    static READER: RefCell<Reader> = const {
        RefCell::new(Reader {
            board: None,
            hashes: Vec::new(),
            undos: Vec::new(),
            budget: 0,
        })
    };
}

/// The ladders of one position: see [`read`]. Each question leaves the
/// position as it found it.
pub struct Reader {
    /// The position at the end of the line (`None` before the thread's
    /// first question).
    board: Option<Board>,
    /// The hash of each position of the line, the first one's first.
    hashes: Vec<u64>,
    /// What takes back each move of the line played undoably.
    undos: Vec<crate::go::Undo>,
    /// Positions left to visit.
    budget: u32,
}

impl Reader {
    fn board(&self) -> &Board {
        self.board.as_ref().expect("a question is being read")
    }

    /// Whether the opponent's move at `atari`, which leaves the string at
    /// `s` (the defender's, two liberties before) in atari, captures it in
    /// a ladder. `atari` must be legal for the attacker.
    pub fn atari_captures(&mut self, s: Point, atari: Point) -> bool {
        self.budget = BUDGET;
        let Some(defender) = self.board().color_at(s) else { return false };
        self.after(atari, defender.opponent(), |r| r.board().liberties(s) == 1 && r.captured(s)).unwrap_or(false)
    }

    /// Whether extending at the last liberty of the string at `s` (the
    /// side to move's, in atari) escapes: the string is not captured after
    /// it.
    pub fn extension_escapes(&mut self, s: Point) -> bool {
        self.budget = BUDGET;
        let board = self.board();
        let Some(defender) = board.color_at(s) else { return false };
        let Some(lib) = board.atari_liberty(s) else { return false };
        if board.check_move(lib, defender, false).is_err() {
            return false;
        }
        self.after(lib, defender, |r| !r.attacker_wins(s, defender.opponent())).unwrap_or(false)
    }

    /// `read`'s answer after `color` plays `m` (legal) at the end of the
    /// line, the move taken back after it; `None` for a suicide.
    fn after<T>(&mut self, m: Point, color: Color, read: impl FnOnce(&mut Reader) -> T) -> Option<T> {
        let board = self.board.as_mut().expect("a question is being read");
        if !board.play_undoable(m, color, &mut self.undos) {
            return None;
        }
        self.hashes.push(self.board().hash());
        let answer = read(self);
        self.hashes.pop();
        // Taken back from where it lies: moved into this frame, the record
        // would be in every frame of a long line.
        let undo = self.undos.last().expect("the move's undo was pushed");
        self.board.as_mut().expect("a question is being read").undo(undo);
        self.undos.pop();
        Some(answer)
    }

    /// The defender (owner of `s`, in atari at the end of the line) to
    /// move: captured whatever it does?
    fn captured(&mut self, s: Point) -> bool {
        if self.budget == 0 {
            return false;
        }
        self.budget -= 1;
        // A capture cycle (two strings taking each other in turn) repeats a
        // position of the line; read on, it ran to the budget at every
        // question that met it. Like the budget's end, it counts as an
        // escape.
        let (now, before) = self.hashes.split_last().expect("the line starts with the first position");
        if before.iter().rev().skip(1).step_by(2).any(|h| h == now) {
            return false;
        }
        let board = self.board();
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
            if self.board().check_move(m, defender, false).is_err() {
                continue;
            }
            if self.after(m, defender, |r| r.attacker_wins(s, attacker)) == Some(false) {
                return false;
            }
        }
        true
    }

    /// The attacker to move at the end of the line against the string at
    /// `s`: can it capture?
    fn attacker_wins(&mut self, s: Point, attacker: Color) -> bool {
        match self.board().liberties(s) {
            0 | 1 => true,
            2 => {
                let ataris: Vec<Point> = self.board().liberty_points(s).collect();
                ataris.into_iter().any(|atari| {
                    if self.board().check_move(atari, attacker, false).is_err() {
                        return false;
                    }
                    self.after(atari, attacker, |r| r.board().liberties(s) == 1 && r.captured(s)).unwrap_or(false)
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

    /// Whether the string at `s`, in atari with its owner to move, is
    /// captured by a ladder.
    fn is_captured(board: &Board, s: Point) -> bool {
        read(board, |r| {
            r.budget = BUDGET;
            r.captured(s)
        })
    }

    fn atari_captures(board: &Board, s: Point, atari: Point) -> bool {
        read(board, |r| r.atari_captures(s, atari))
    }

    fn extension_escapes(board: &Board, s: Point) -> bool {
        read(board, |r| r.extension_escapes(s))
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
    /// budget.
    #[test]
    fn a_capture_cycle_stops_at_the_repeat() {
        let Some(files) = crate::test_references::sgf_files("kgs-6d") else { return };
        let file = files.iter().find(|f| f.ends_with("2000-10-24-1.sgf")).expect("2000-10-24-1.sgf in kgs-6d");
        let game = crate::sgf::read_file(file).unwrap().remove(0).unwrap();
        let board = game.replay_until(game.rules_or(Rules::CHINESE), 225).unwrap().board().clone();
        let (a16, a17) = (at(&board, "A16"), at(&board, "A17"));
        assert_eq!((board.color_at(a16), board.liberties(a16)), (Some(Color::Black), 2));
        let (captured, visited) = read(&board, |r| (r.atari_captures(a16, a17), BUDGET - r.budget));
        assert!(!captured && visited < 50, "captured: {captured}, {visited} positions read");
    }

    /// The longest line read in kgs-6d's games of 2002 (2002-03-02-9 after
    /// 64 moves: 145 positions deep), on a thread with a 512 KB stack. A
    /// board cloned on the way to the heap in each frame of the recursion
    /// (17 KB) overflowed the 2 MB stack of a `prepare` worker. The line's
    /// undo records are not all kept after it.
    #[test]
    fn the_longest_line_of_2002_is_read_on_a_small_stack() {
        use crate::features::{FeatureSet, PackedPlanes};
        let Some(files) = crate::test_references::sgf_files("kgs-6d") else { return };
        let file = files.iter().find(|f| f.ends_with("2002-03-02-9.sgf")).expect("2002-03-02-9.sgf in kgs-6d");
        let game = crate::sgf::read_file(file).unwrap().remove(0).unwrap();
        let position = game.replay_until(Rules::CHINESE, 64).unwrap();
        let encode = move || {
            let mut planes = PackedPlanes::new(19, FeatureSet::Extended.planes());
            FeatureSet::Extended.encode_into(&position, &mut planes);
            (planes.words().to_vec(), READER.with(|r| r.borrow().undos.capacity()))
        };
        let small = std::thread::Builder::new().stack_size(512 << 10).spawn(encode.clone()).unwrap();
        let (planes, kept) = small.join().unwrap();
        assert_eq!(planes, encode().0);
        assert!(kept <= KEPT_UNDOS, "room for {kept} undo records kept");
    }

    #[test]
    fn capturing_an_attacker_in_atari_escapes() {
        // White D4 in atari (liberty D5), but the black stone E4 beside it is
        // itself in atari (liberty F4): White takes it and lives. (With F4
        // White's too, E4 had no liberty: a position setup now refuses.)
        let board = position(&["C4", "D3", "E4"], &["D4", "E3", "E5"]);
        let d4 = at(&board, "D4");
        assert_eq!(board.liberties(d4), 1);
        assert!(!is_captured(&board, d4));
    }
}
