//! A stone move taken back: what the ladder reader plays down a line and
//! back up, where a copy of the whole board at every step (tens of
//! kilobytes) was most of the time of `prepare --features extended`.

use super::{Board, Cell, Chain, LibSets};
use crate::go::{Color, Point};

/// Words of the widest liberty set.
const MAX_WORDS: usize = LibSets::WIDTHS[3];

/// A string beside the new stone or its captures, as it was before.
#[derive(Clone, Copy)]
struct SavedString {
    root: u16,
    chain: Chain,
    libs: [u64; MAX_WORDS],
}

/// What [`Board::play_undoable`] changed, for [`Board::undo`].
pub struct Undo {
    point: u16,
    /// The point's place in the empty list.
    empty_pos: u16,
    hash: u64,
    ko: Option<(Point, Color)>,
    captures: [u32; 2],
    /// The point's string entries, stale data of an empty point: restored
    /// too, so that the board is the same bit for bit (but for the stale
    /// places in the empty list of the stones captured, read by nothing).
    chain_of: u16,
    next_stone: u16,
    chain: Chain,
    /// The strings around the point (up to four), the mover's first.
    strings: [SavedString; 4],
    count: usize,
    /// How many of `strings` are the mover's.
    own: usize,
    /// The mover's other strings next to the stones captured, which the
    /// capture gave liberties (none without a capture).
    beside_captures: Vec<SavedString>,
    /// The strings joined, in order, as (kept root, root gone).
    merges: [(u16, u16); 4],
    merge_count: usize,
}

impl Board {
    /// Plays a legal stone move that is no suicide and pushes onto `undos`
    /// what [`Board::undo`] needs to take it back; `false`, and nothing
    /// played, for a suicide. Never inlined, and the record on the heap: a
    /// caller that recurses down a long line keeps its frames small.
    #[inline(never)]
    pub fn play_undoable(&mut self, p: Point, color: Color, undos: &mut Vec<Undo>) -> bool {
        let pi = p.idx();
        debug_assert_eq!(self.cells[pi], Cell::Empty, "play on occupied point");
        let (own_cell, opp_cell) = (Cell::stone(color), Cell::stone(color.opponent()));
        let (own, n_own) = self.neighbour_roots(pi, self.dirs(pi, own_cell));
        let (opp, n_opp) = self.neighbour_roots(pi, self.dirs(pi, opp_cell));
        let (own, opp) = (&own[..n_own], &opp[..n_opp]);
        let lib_count = |root: u16| self.chains[root as usize].lib_count;
        let captured = || opp.iter().copied().filter(|&r| lib_count(r) == 1);
        let lives = self.dirs(pi, Cell::Empty) != 0 || own.iter().any(|&r| lib_count(r) > 1);
        if !lives && captured().next().is_none() {
            return false;
        }
        let save = |root: u16| {
            let mut libs = [0; MAX_WORDS];
            libs[..self.libs.words].copy_from_slice(self.libs.set(root as usize));
            SavedString { root, chain: self.chains[root as usize], libs }
        };
        let mut strings = [SavedString { root: 0, chain: Chain::NONE, libs: [0; MAX_WORDS] }; 4];
        for (k, &root) in own.iter().chain(opp).enumerate() {
            strings[k] = save(root);
        }
        let mut beside_captures: Vec<SavedString> = Vec::new();
        for root in captured() {
            let mut s = root as usize;
            loop {
                let (beside, n) = self.neighbour_roots(s, self.dirs(s, own_cell));
                for &r in &beside[..n] {
                    if !own.contains(&r) && !beside_captures.iter().any(|b| b.root == r) {
                        beside_captures.push(save(r));
                    }
                }
                s = self.next_stone[s] as usize;
                if s == root as usize {
                    break;
                }
            }
        }
        let mut undo = Undo {
            point: p.0,
            empty_pos: self.empty_pos[pi],
            hash: self.hash,
            ko: self.ko,
            captures: self.captures,
            chain_of: self.chain_of[pi],
            next_stone: self.next_stone[pi],
            chain: self.chains[pi],
            strings,
            count: n_own + n_opp,
            own: n_own,
            beside_captures,
            merges: [(0, 0); 4],
            merge_count: 0,
        };
        let merges = &mut undo.merges;
        let mut count = 0;
        self.play_joining(p, color, |kept, gone| {
            merges[count] = (kept as u16, gone as u16);
            count += 1;
        });
        undo.merge_count = count;
        undos.push(undo);
        true
    }

    /// Takes back the move `undo` was made for, which must be the last
    /// one played.
    pub fn undo(&mut self, undo: &Undo) {
        let pi = undo.point as usize;
        let stone = self.cells[pi];
        // The captured strings' stones back, and off the end of the empty
        // list, where the capture put them. Their strings' rings and roots
        // were left as they were.
        let opp_cell = Cell::stone(stone.color().expect("the move's stone").opponent());
        let mut back = 0;
        for saved in &undo.strings[undo.own..undo.count] {
            if saved.chain.lib_count != 1 {
                continue;
            }
            let root = saved.root as usize;
            let mut s = root;
            loop {
                self.cells[s] = opp_cell;
                self.update_neighbours(s, Cell::Empty, opp_cell);
                back += 1;
                s = self.next_stone[s] as usize;
                if s == root {
                    break;
                }
            }
        }
        self.empty.truncate(self.empty.len() - back);
        // Joining swapped successors; swapped back in reverse order, each
        // string's ring of stones is as it was.
        for &(kept, gone) in undo.merges[..undo.merge_count].iter().rev() {
            self.next_stone.swap(kept as usize, gone as usize);
        }
        self.cells[pi] = Cell::Empty;
        self.update_neighbours(pi, stone, Cell::Empty);
        let pos = undo.empty_pos as usize;
        if pos < self.empty.len() {
            // The point's place went to the list's last point: moved back.
            let moved = self.empty[pos];
            self.empty_pos[moved as usize] = self.empty.len() as u16;
            self.empty.push(moved);
            self.empty[pos] = undo.point;
        } else {
            self.empty.push(undo.point);
        }
        self.empty_pos[pi] = undo.empty_pos;
        let words = self.libs.words;
        self.libs.bits[pi * words..(pi + 1) * words].fill(0);
        for (k, saved) in undo.strings[..undo.count].iter().chain(&undo.beside_captures).enumerate() {
            let root = saved.root as usize;
            self.chains[root] = saved.chain;
            self.libs.bits[root * words..(root + 1) * words].copy_from_slice(&saved.libs[..words]);
            if k < undo.own {
                let mut s = root;
                loop {
                    self.chain_of[s] = saved.root;
                    s = self.next_stone[s] as usize;
                    if s == root {
                        break;
                    }
                }
            }
        }
        self.chain_of[pi] = undo.chain_of;
        self.next_stone[pi] = undo.next_stone;
        self.chains[pi] = undo.chain;
        (self.hash, self.ko, self.captures) = (undo.hash, undo.ko, undo.captures);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Game, Rules, Vertex};

    /// Whether two boards are the same in every field, stale data and the
    /// order of the empty list included.
    fn same_bits(a: &Board, b: &Board) -> bool {
        let chains = |x: &Board| x.chains.map(|c| (c.lib_count, c.size, c.hash));
        a.cells == b.cells
            && a.nbr == b.nbr
            && a.chain_of == b.chain_of
            && a.next_stone == b.next_stone
            && chains(a) == chains(b)
            && a.libs.bits == b.libs.bits
            && a.empty == b.empty
            // A captured stone's place in the list, kept from when it was
            // empty, is read by nothing.
            && a.empty.iter().all(|&p| a.empty_pos[p as usize] == b.empty_pos[p as usize])
            && (a.hash, a.ko, a.captures) == (b.hash, b.ko, b.captures)
    }

    /// Plays `m` undoably on a copy of `board`, checks it against `play`,
    /// takes it back and checks that against `board`.
    fn play_and_take_back(board: &Board, m: Point, color: Color) {
        let (mut work, mut played) = (board.clone(), board.clone());
        let mut undos = Vec::new();
        assert!(work.play_undoable(m, color, &mut undos), "{m:?} refused");
        played.play(m, color);
        assert!(same_bits(&work, &played), "{m:?} played otherwise than by play");
        work.check_invariants().unwrap();
        work.undo(&undos.pop().unwrap());
        assert!(same_bits(&work, board), "{m:?} not taken back exactly");
    }

    /// The cases a game meets rarely, each on purpose (9×9, Black to play
    /// at E5 or D1): four strings joined into one, and two strings taken
    /// at once, which give liberties to black strings away from the move.
    #[test]
    fn joins_of_four_and_double_captures_are_taken_back_exactly() {
        let board = |black: &[&str], white: &[&str]| {
            let mut game = Game::new(9, Rules::CHINESE);
            let stone = |c: Color| move |v: &&str| (Vertex::parse_gtp(v, 9).unwrap(), Some(c));
            let stones: Vec<_> =
                black.iter().map(stone(Color::Black)).chain(white.iter().map(stone(Color::White))).collect();
            game.setup(&stones).unwrap();
            game.board().clone()
        };
        let at = |b: &Board, v: &str| b.point(Vertex::parse_gtp(v, 9).unwrap());
        // E5 joins four one-stone strings (the new stone kept as the root)
        // and four two-stone ones.
        for black in [&["E6", "D5", "F5", "E4"][..], &["E6", "E7", "D5", "C5", "F5", "G5", "E4", "E3"]] {
            let b = board(black, &["A1"]);
            play_and_take_back(&b, at(&b, "E5"), Color::Black);
        }
        // D1 takes C1 and E1, each in atari; B1, F1, C2 and E2 gain
        // liberties, none of them next to D1. With D2, a join too.
        for black in [&["B1", "C2", "E2", "F1"][..], &["B1", "C2", "E2", "F1", "D2"]] {
            let b = board(black, &["C1", "E1"]);
            assert_eq!(b.move_outcome(at(&b, "D1"), Color::Black).unwrap().captured, 2);
            play_and_take_back(&b, at(&b, "D1"), Color::Black);
        }
    }

    /// On positions of real games, every legal move plays as `play` plays
    /// it and is taken back exactly, two moves deep; a suicide is refused,
    /// the board untouched.
    #[test]
    fn a_move_is_played_as_play_plays_it_and_taken_back_exactly() {
        let Some(games) = crate::dataset::testkit::kgs_games(6) else { return };
        let (mut refused, mut taken_back, mut captures) = (0, 0, 0);
        for game in &games {
            for k in (20..game.moves.len()).step_by(37) {
                let board = game.replay_until(Rules::CHINESE, k).unwrap().board().clone();
                let mut work = board.clone();
                let mut played = board.clone();
                for p in board.points() {
                    for color in [Color::Black, Color::White] {
                        if board.check_move(p, color, true).is_err() {
                            continue;
                        }
                        let legal = board.move_outcome(p, color).is_some();
                        captures += board.move_outcome(p, color).is_some_and(|o| o.captured > 0) as usize;
                        let mut undos = Vec::new();
                        if !work.play_undoable(p, color, &mut undos) {
                            assert!(!legal && same_bits(&work, &board) && undos.is_empty(), "{p:?} refused");
                            refused += 1;
                            continue;
                        }
                        assert!(legal, "{p:?}: a suicide played undoably");
                        played.copy_from(&board);
                        played.play(p, color);
                        assert!(same_bits(&work, &played), "{p:?} played otherwise than by play");
                        // A second move on top, by the other side (a capture
                        // where there is one), then both back.
                        let them = color.opponent();
                        let takes = |q: Point| work.move_outcome(q, them).map(|o| o.captured > 0);
                        let second = work.empty_points().find(|&q| takes(q) == Some(true));
                        let second = second.or_else(|| work.empty_points().find(|&q| takes(q).is_some()));
                        if let Some(q) = second {
                            if work.play_undoable(q, them, &mut undos) {
                                work.check_invariants().unwrap();
                                work.undo(&undos.pop().unwrap());
                            }
                        }
                        assert!(same_bits(&work, &played), "{p:?}: the second move not taken back");
                        work.undo(&undos.pop().unwrap());
                        assert!(same_bits(&work, &board), "{p:?} not taken back exactly");
                        taken_back += 1;
                    }
                }
            }
        }
        assert!(
            taken_back > 1000 && captures > 10 && refused > 0,
            "{taken_back} taken back, {captures} captures, {refused} refused"
        );
    }
}
