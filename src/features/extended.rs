//! The extended feature set: the seed's 15 planes, then AlphaGo's richer
//! planes (Silver et al. 2016, Extended Data Table 2), all from the side to
//! move.
//!
//! | plane | meaning |
//! |---|---|
//! | 0–14 | the seed's planes ([`super::planes`]) |
//! | 15 | all ones when Black is to move: with komi in White's favour, who moves changes who is ahead (AlphaGo's value net had this plane) |
//! | 16 | the point the side to move may not play because of ko |
//! | 17 | sensible moves: legal (superko included), never a suicide (even where the rules allow one), and not filling an own eye |
//! | 18–25 | a stone played 1, 2, …, 7, or 8 or more moves ago |
//! | 26–33 | a legal move here leaves its string 1, 2, …, 7, or 8 or more liberties |
//! | 34–41 | a move here captures 1, 2, …, 7, or 8 or more stones |
//! | 42–49 | a move here leaves its own string of 1, 2, …, 7, or 8 or more stones in atari |
//! | 50 | a move here is an atari that captures in a ladder |
//! | 51 | a move here extends a string in atari and escapes (is not captured, ladder read out) |
//!
//! Counts of eight or more share their last plane, as AlphaGo's did.

use super::ladder;
use super::{PackedPlanes, PLANES};
use crate::go::{Board, Color, Game, Move, Point};

/// Planes after the seed's.
pub const EXTRA_PLANES: usize = 37;

pub(crate) const BLACK_TO_MOVE: usize = PLANES;
const KO: usize = PLANES + 1;
const SENSIBLE: usize = PLANES + 2;
const TURNS_SINCE: usize = PLANES + 3;
const LIBERTIES_AFTER: usize = TURNS_SINCE + 8;
const CAPTURE_SIZE: usize = LIBERTIES_AFTER + 8;
const SELF_ATARI_SIZE: usize = CAPTURE_SIZE + 8;
const LADDER_CAPTURE: usize = SELF_ATARI_SIZE + 8;
const LADDER_ESCAPE: usize = LADDER_CAPTURE + 1;
const _: () = assert!(LADDER_ESCAPE + 1 == PLANES + EXTRA_PLANES);

/// The plane of a count among 8 planes for 1, 2, …, 7, 8+ (`count` ≥ 1).
fn count_plane(first: usize, count: u32) -> usize {
    first + count.clamp(1, 8) as usize - 1
}

/// Writes the extra planes of the position of `game` (the seed's planes
/// must already be in `planes`, the rest clear).
pub(crate) fn encode_extra(game: &Game, planes: &mut PackedPlanes) {
    let board = game.board();
    let size = board.size();
    let n = size * size;
    let me = game.to_move();
    let index = |p: Point| board.vertex(p).index(size);
    if me == Color::Black {
        (0..n).for_each(|i| planes.set(BLACK_TO_MOVE, i));
    }
    if let Some((p, c)) = board.ko_point() {
        if c == me {
            planes.set(KO, index(p));
        }
    }

    // Age of each stone: the most recent move at an occupied point is the
    // stone on it. Every stone not among the last seven moves is 8+.
    let mut aged = vec![false; n];
    for (age, m) in game.recent_moves(7).enumerate() {
        if let Move::Play(v) = m.mv {
            let i = v.index(size);
            if !aged[i] && board.color_at(board.point(v)) == Some(m.color) {
                aged[i] = true;
                planes.set(TURNS_SINCE + age, i);
            }
        }
    }

    for (i, p) in board.points().enumerate() {
        if board.color_at(p).is_some() {
            if !aged[i] {
                planes.set(TURNS_SINCE + 7, i);
            }
            continue;
        }
        let Some(outcome) = board.move_outcome(p, me) else { continue };
        // The outcome's hash spares computing it again for superko.
        if !game.repeats(outcome.hash, me) && !board.is_eye(p, me) {
            planes.set(SENSIBLE, i);
        }
        planes.set(count_plane(LIBERTIES_AFTER, outcome.liberties), i);
        if outcome.captured > 0 {
            planes.set(count_plane(CAPTURE_SIZE, outcome.captured), i);
        }
        if outcome.liberties == 1 {
            planes.set(count_plane(SELF_ATARI_SIZE, outcome.stones), i);
        }
    }
    ladders(board, me, planes, index);
}

/// The ladder planes: ataris on the opponent's two-liberty strings that
/// capture in a ladder, and extensions of the side to move's strings in
/// atari that escape one.
fn ladders(board: &Board, me: Color, planes: &mut PackedPlanes, index: impl Fn(Point) -> usize) {
    // Asked of one copy of the board, after the shortcuts: most positions
    // ask nothing.
    let mut escapes_to_read = Vec::new();
    let mut ataris_to_read = Vec::new();
    let mut visited = vec![false; board.size() * board.size()];
    for p in board.points() {
        let Some(owner) = board.color_at(p) else { continue };
        let libs = board.liberties(p);
        let wanted = if owner == me { libs == 1 } else { libs == 2 };
        if !wanted || visited[index(p)] {
            continue;
        }
        for s in board.string_stones(p) {
            visited[index(s)] = true;
        }
        // Most candidates are settled by the liberties an extension would
        // have, without reading: three or more is out, one is captured.
        if owner == me {
            let Some(lib) = board.atari_liberty(p) else { continue };
            match board.move_outcome(lib, me).map(|o| o.liberties) {
                None | Some(0 | 1) => {}
                Some(2) => escapes_to_read.push((p, lib)),
                Some(_) => planes.set(LADDER_ESCAPE, index(lib)),
            }
        } else {
            let liberties: Vec<Point> = board.liberty_points(p).collect();
            for (k, &atari) in liberties.iter().enumerate() {
                if board.check_move(atari, me, false).is_err() {
                    continue;
                }
                // After the atari the defender extends at the other
                // liberty; the atari's point is no longer one of its. Exact
                // when neither move captures: a capture changes the
                // liberties of strings beyond the two moves.
                let other = liberties[1 - k];
                let quiet = |m: Point, c: Color| board.move_outcome(m, c).filter(|o| o.captured == 0);
                let out = quiet(atari, me).is_some() && quiet(other, owner).is_some_and(|o| o.liberties >= 4);
                if !out {
                    ataris_to_read.push((p, atari));
                }
            }
        }
    }
    if escapes_to_read.is_empty() && ataris_to_read.is_empty() {
        return;
    }
    ladder::read(board, |reader| {
        for (s, lib) in escapes_to_read {
            if reader.extension_escapes(s) {
                planes.set(LADDER_ESCAPE, index(lib));
            }
        }
        for (s, atari) in ataris_to_read {
            if reader.atari_captures(s, atari) {
                planes.set(LADDER_CAPTURE, index(atari));
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::go::{Rules, Vertex};

    fn at(name: &str) -> usize {
        Vertex::parse_gtp(name, 19).unwrap().index(19)
    }

    fn game(moves: &[&str]) -> Game {
        let mut g = Game::new(19, Rules::CHINESE);
        for (k, m) in moves.iter().enumerate() {
            let color = if k % 2 == 0 { Color::Black } else { Color::White };
            g.play(color, Move::parse_gtp(m, 19).unwrap()).unwrap();
        }
        g
    }

    /// The extra planes set at `point`, but the colour plane.
    fn set_at(p: &PackedPlanes, point: &str) -> Vec<usize> {
        (KO..p.planes()).filter(|&pl| p.get(pl, at(point))).collect()
    }

    #[test]
    fn colour_ages_liberties_captures_and_self_atari() {
        let g = game(&["D4", "D5", "C5", "Q16", "E5", "Q4"]);
        // Black to move; White D5 has one liberty (D6).
        let p = FeatureSet::Extended.encode(&g);
        assert_eq!(p.planes(), 52);
        assert!((0..361).all(|i| p.get(BLACK_TO_MOVE, i)));
        // Ages: Q4 1 move ago, E5 2, Q16 3, C5 4, D5 5, D4 6.
        for (age, v) in ["Q4", "E5", "Q16", "C5", "D5", "D4"].iter().enumerate() {
            assert_eq!(set_at(&p, v), vec![TURNS_SINCE + age], "{v}");
        }
        // D6 captures D5: one stone, and D6 then has 3 + 1 liberties (C6,
        // E6, D7 and the captured D5).
        let d6 = set_at(&p, "D6");
        assert!(d6.contains(&count_plane(CAPTURE_SIZE, 1)), "{d6:?}");
        assert!(d6.contains(&count_plane(LIBERTIES_AFTER, 4)), "{d6:?}");
        assert!(d6.contains(&SENSIBLE));
        // An open point: 4 liberties, nothing captured.
        assert_eq!(set_at(&p, "K10"), vec![SENSIBLE, count_plane(LIBERTIES_AFTER, 4)]);
        // White to move after a pass: the colour plane is clear, and D6
        // only extends White's stone.
        let mut w = g.clone();
        w.play(Color::Black, Move::Pass).unwrap();
        let p = FeatureSet::Extended.encode(&w);
        assert!((0..361).all(|i| !p.get(BLACK_TO_MOVE, i)));
        assert!(!p.get(count_plane(CAPTURE_SIZE, 1), at("D6")));
        // White C4, between Black C5 and D4, keeps B4 and C3.
        assert!(p.get(count_plane(LIBERTIES_AFTER, 2), at("C4")));
        assert!(!p.get(count_plane(SELF_ATARI_SIZE, 1), at("C4")));
        // White D6 joins D5: three liberties.
        assert!(p.get(count_plane(LIBERTIES_AFTER, 3), at("D6")));
    }

    #[test]
    fn the_ko_point_and_a_ladder_are_marked() {
        // White E5 sits in Black's mouth (D5, E6, F5); Black E4, inside
        // White's (D4, E3, F4), captures it: White may not retake at once.
        let g = game(&["D5", "D4", "E6", "E3", "F5", "F4", "Q16", "E5", "E4"]);
        assert_eq!(g.to_move(), Color::White);
        let p = FeatureSet::Extended.encode(&g);
        assert!(p.get(KO, at("E5")), "White may not retake at E5");
        assert!(!p.get(SENSIBLE, at("E5")));
        // After two passes the ko ban is gone, but retaking would repeat
        // the board before Black's capture: superko, not sensible.
        let mut g = g;
        g.play(Color::White, Move::Pass).unwrap();
        g.play(Color::Black, Move::Pass).unwrap();
        let e5 = g.board().point(Vertex::parse_gtp("E5", 19).unwrap());
        assert_eq!(g.board().ko_point(), None);
        assert_eq!(g.check_point(e5, Color::White), Err(crate::go::IllegalMove::Superko));
        let p = FeatureSet::Extended.encode(&g);
        assert!(!p.get(KO, at("E5")) && !p.get(SENSIBLE, at("E5")));
        assert!(p.get(count_plane(CAPTURE_SIZE, 1), at("E5")));

        // Black C4, D3, E5 against White D4: Black's atari at E4 is a ladder.
        let mut g = Game::new(19, Rules::CHINESE);
        let stones = [("C4", Color::Black), ("D3", Color::Black), ("E5", Color::Black), ("D4", Color::White)];
        g.setup(&stones.map(|(v, c)| (Vertex::parse_gtp(v, 19).unwrap(), Some(c)))).unwrap();
        g.set_to_move(Color::Black);
        let p = FeatureSet::Extended.encode(&g);
        // Both ataris work: up and left, or down and right, to an edge.
        assert!(p.get(LADDER_CAPTURE, at("E4")) && p.get(LADDER_CAPTURE, at("D5")));
        assert!((0..361).filter(|&i| p.get(LADDER_CAPTURE, i)).count() == 2);
        // After the atari, White's extension at D5 does not escape.
        g.play(Color::Black, Move::parse_gtp("E4", 19).unwrap()).unwrap();
        let p = FeatureSet::Extended.encode(&g);
        assert!(!p.get(LADDER_ESCAPE, at("D5")));
        assert!(p.get(count_plane(LIBERTIES_AFTER, 2), at("D5")));
    }
}

#[cfg(test)]
mod real_games {
    use super::*;
    use crate::dataset::testkit::kgs_games;
    use crate::features::FeatureSet;
    use crate::go::Rules;

    /// The ladder planes as a full read gives them, without the shortcuts.
    fn read_ladders(board: &Board, me: Color) -> (Vec<usize>, Vec<usize>) {
        let size = board.size();
        let index = |p: Point| board.vertex(p).index(size);
        let (mut capture, mut escape) = (Vec::new(), Vec::new());
        for p in board.points() {
            let Some(owner) = board.color_at(p) else { continue };
            if owner == me && board.liberties(p) == 1 {
                let lib = board.atari_liberty(p).unwrap();
                if ladder::read(board, |r| r.extension_escapes(p)) && !escape.contains(&index(lib)) {
                    escape.push(index(lib));
                }
            } else if owner != me && board.liberties(p) == 2 {
                for atari in board.liberty_points(p) {
                    if board.check_move(atari, me, false).is_ok()
                        && ladder::read(board, |r| r.atari_captures(p, atari))
                        && !capture.contains(&index(atari))
                    {
                        capture.push(index(atari));
                    }
                }
            }
        }
        capture.sort_unstable();
        escape.sort_unstable();
        (capture, escape)
    }

    #[test]
    fn ladder_shortcuts_agree_with_reading_every_ladder_out() {
        let Some(games) = kgs_games(60) else { return };
        let (mut positions, mut ladders) = (0, 0);
        for record in &games {
            record
                .replay_with(record.rules_or(Rules::JAPANESE), |_, game, _| {
                    let planes = FeatureSet::Extended.encode(game);
                    let plane = |k: usize| (0..361).filter(|&i| planes.get(k, i)).collect::<Vec<_>>();
                    let read = read_ladders(game.board(), game.to_move());
                    assert_eq!(
                        (plane(LADDER_CAPTURE), plane(LADDER_ESCAPE)),
                        read,
                        "{:?} to move\n{}",
                        game.to_move(),
                        crate::go::diagram(game.board(), None)
                    );
                    positions += 1;
                    ladders += read.0.len();
                })
                .unwrap();
        }
        assert!(positions > 3000 && ladders > 0, "{positions} positions, {ladders} ladder captures");
    }

    #[test]
    fn sensible_moves_are_the_legal_ones_that_fill_no_own_eye() {
        let Some(games) = kgs_games(30) else { return };
        let (mut positions, mut whole) = (0, 0);
        for record in &games {
            let replayed = record.replay_with(Rules::CHINESE, |_, game, _| {
                let planes = FeatureSet::Extended.encode(game);
                let (board, me) = (game.board(), game.to_move());
                for p in board.points() {
                    let sensible = game.check_point(p, me).is_ok() && !board.is_eye(p, me);
                    let i = board.vertex(p).index(board.size());
                    assert_eq!(
                        planes.get(SENSIBLE, i),
                        sensible,
                        "{:?}\n{}",
                        board.vertex(p),
                        crate::go::diagram(board, None)
                    );
                }
                positions += 1;
            });
            // A game that breaks Chinese rules is checked up to there.
            whole += replayed.is_ok() as usize;
        }
        assert!(whole >= 25 && positions > 5000, "{whole} of 30 games replayed whole, {positions} positions");
    }
}
