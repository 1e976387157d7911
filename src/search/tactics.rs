//! Moves a tree search must never leave unread: saving a string in atari and
//! capturing one.
//!
//! Top-k expansion only reads the policy net's k favourites, and the small
//! nets often rank the one move that saves a big string below them. In the
//! 40 games MCTS lost or won against GnuGo level 10 (2026-11-23), 5 of the
//! 28 captures of six or more stones took a string that one move of ours, the
//! extension from atari to two or more liberties, would have saved; it was
//! never read because the policy did not rank it top-2 (at most 5: the
//! script then also counted an extension into the string's own last eye,
//! a self-capture, as a rescue). So the expansion adds these moves to the
//! policy's favourites.

use crate::go::{Board, Color, Game, Point};

/// The points where the side to move in `game` captures an opponent string
/// (one in atari), or extends an own string in atari to two or more
/// liberties. Each point once (the empty points are each listed once),
/// sorted; legality beyond simple ko and suicide (superko) is left to the
/// caller's list of acceptable moves.
pub fn urgent_points(game: &Game) -> Vec<Point> {
    let board = game.board();
    let color = game.to_move();
    let mut points: Vec<Point> = board
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
            (captures || rescues) && answers_atari(board, p, color, rescues)
        })
        .collect();
    points.sort_unstable();
    points
}

/// Whether `color` playing at `p` captures a string, or, where `rescue` (an
/// own string in atari touches `p`), leaves that string two or more
/// liberties: one liberty saves nothing, the opponent takes it next.
pub fn answers_atari(board: &Board, p: Point, color: Color, rescue: bool) -> bool {
    board.move_outcome(p, color).is_some_and(|o| o.captured > 0 || (rescue && o.liberties >= 2))
}

/// The game after `moves` (GTP vertices), Black first and the colours
/// alternating: the positions of the search's tactical tests.
#[cfg(test)]
pub(crate) fn game_after(size: usize, moves: &str) -> Game {
    use crate::go::{Move, Rules};
    let mut game = Game::new(size, Rules::CHINESE);
    for (i, v) in moves.split_whitespace().enumerate() {
        let color = if i % 2 == 0 { Color::Black } else { Color::White };
        game.play(color, Move::parse_gtp(v, size).unwrap()).unwrap();
    }
    game
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::Rules;

    fn names(game: &Game, points: &[Point]) -> Vec<String> {
        let size = game.board().size();
        points.iter().map(|&p| game.board().vertex(p).to_gtp(size)).collect()
    }

    #[test]
    fn an_own_string_in_atari_is_extended_only_where_that_saves_it() {
        // Black C3-D3 is in atari with its last liberty at E3, which leads
        // to open space: extending there saves it.
        let game = game_after(9, "C3 C4 D3 D4 J9 B3 H9 C2 G9 D2");
        assert_eq!(game.to_move(), Color::Black);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["E3"]);
        // Closed in (E4, F3 White): extending leaves one liberty, E2, which
        // saves nothing, so no point is urgent.
        let game = game_after(9, "C3 C4 D3 D4 J9 B3 H9 E4 G9 F3 F9 C2 E9 D2");
        assert_eq!(game.to_move(), Color::Black);
        assert!(urgent_points(&game).is_empty(), "{:?}", names(&game, &urgent_points(&game)));
    }

    #[test]
    fn a_capture_is_urgent_for_the_side_that_can_make_it() {
        // White D4 has one liberty left, at D5.
        let game = game_after(9, "C4 D4 E4 J9 D3 H9");
        assert_eq!(game.to_move(), Color::Black);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["D5"]);
        // With White to move the same point is the escape.
        let game = game_after(9, "C4 D4 E4 J9 D3");
        assert_eq!(game.to_move(), Color::White);
        assert_eq!(names(&game, &urgent_points(&game)), vec!["D5"]);
        // An empty board has nothing urgent.
        assert!(urgent_points(&Game::new(19, Rules::CHINESE)).is_empty());
    }
}
