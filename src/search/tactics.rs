//! Moves a tree search must never leave unread: saving a string in atari and
//! capturing one.
//!
//! Top-k expansion only reads the policy net's k favourites, and the small
//! nets often rank the one move that saves a big string below them. In the
//! 40 games MCTS lost or won against GnuGo level 10 (sessions 8–9), 5 of the
//! 28 captures of six or more stones took a string that one move of ours, the
//! extension from atari to two or more liberties, would have saved; it was
//! never read because the policy did not rank it top-2. So the expansion
//! adds these moves to the policy's favourites.

use crate::go::{Game, Point};

/// The points where the side to move in `game` captures an opponent string
/// (one in atari), or extends an own string in atari to two or more
/// liberties. Each point once, in board order; legality beyond simple ko
/// and suicide (superko) is left to the caller's list of acceptable moves.
pub fn urgent_points(game: &Game) -> Vec<Point> {
    let board = game.board();
    let color = game.to_move();
    board
        .empty_points()
        .filter(|&p| {
            let mut captures = false;
            let mut rescues = false;
            for q in board.neighbors(p) {
                match board.color_at(q) {
                    Some(c) if board.liberties(q) == 1 => {
                        if c == color {
                            rescues = true;
                        } else {
                            captures = true;
                        }
                    }
                    _ => {}
                }
            }
            (captures || rescues)
                && board
                    .move_outcome(p, color)
                    .is_some_and(|o| o.captured > 0 || (rescues && o.liberties >= 2))
        })
        .collect::<std::collections::BTreeSet<Point>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Color, Move, Rules};

    fn game_after(size: usize, moves: &[(Color, &str)]) -> Game {
        let mut game = Game::new(size, Rules::CHINESE);
        for &(color, v) in moves {
            game.play(color, Move::parse_gtp(v, size).unwrap()).unwrap();
        }
        game
    }

    fn names(game: &Game, points: &[Point]) -> Vec<String> {
        let size = game.board().size();
        points.iter().map(|&p| game.board().vertex(p).to_gtp(size)).collect()
    }

    #[test]
    fn an_own_string_in_atari_is_extended_only_where_that_saves_it() {
        use Color::{Black as B, White as W};
        // Black C3-D3 is in atari with its last liberty at E3, which leads
        // to open space: extending there saves it.
        let game = game_after(
            9,
            &[(B, "C3"), (W, "C4"), (B, "D3"), (W, "D4"), (B, "J9"), (W, "B3"), (B, "H9"), (W, "C2"), (B, "G9"), (W, "D2")],
        );
        assert_eq!(game.to_move(), B);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["E3"]);
        // Closed in (F3, E4, E2 White): extending leaves one liberty, which
        // saves nothing, so no point is urgent.
        let game = game_after(
            9,
            &[
                (B, "C3"), (W, "C4"), (B, "D3"), (W, "D4"), (B, "J9"), (W, "B3"), (B, "H9"), (W, "C2"),
                (B, "G9"), (W, "D2"), (B, "F9"), (W, "E4"), (B, "E9"), (W, "F3"), (B, "D9"), (W, "E2"),
            ],
        );
        assert_eq!(game.to_move(), B);
        assert!(urgent_points(&game).is_empty(), "{:?}", names(&game, &urgent_points(&game)));
    }

    #[test]
    fn a_capture_is_urgent_for_the_side_that_can_make_it() {
        use Color::{Black as B, White as W};
        // White D4 has one liberty left, at D5.
        let game = game_after(9, &[(B, "C4"), (W, "D4"), (B, "E4"), (W, "J9"), (B, "D3"), (W, "H9")]);
        assert_eq!(game.to_move(), B);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["D5"]);
        // With White to move the same point is the escape.
        let game = game_after(9, &[(B, "C4"), (W, "D4"), (B, "E4"), (W, "J9"), (B, "D3")]);
        assert_eq!(game.to_move(), W);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["D5"]);
        // An empty board has nothing urgent.
        assert!(urgent_points(&Game::new(19, Rules::CHINESE)).is_empty());
    }
}
