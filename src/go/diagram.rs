//! Text diagrams of a position, as GnuGo's `showboard` draws them.

use super::{Board, Color, Vertex};

const COLUMNS: &str = "ABCDEFGHJKLMNOPQRSTUVWXYZ";

/// Whether `v` is a star point (hoshi) on a board of `size`, drawn `+`.
fn is_star(v: Vertex, size: usize) -> bool {
    if size < 7 {
        return false;
    }
    let edge = if size >= 13 { 3 } else { 2 };
    let lines = [edge, size / 2, size - 1 - edge];
    let on = |c: usize| lines.contains(&c) && (c != size / 2 || size % 2 == 1);
    let (x, y) = (v.x as usize, v.y as usize);
    // Side stars (one coordinate on the middle line) only from 13x13 up.
    let side = (x == size / 2) != (y == size / 2);
    on(x) && on(y) && !(side && size < 13)
}

/// The board with column letters and row numbers: `X` black, `O` white,
/// `.` empty, `+` star points; `last` is drawn in parentheses.
pub fn diagram(board: &Board, last: Option<Vertex>) -> String {
    let size = board.size();
    let letters: String = COLUMNS[..size].chars().map(|c| format!(" {c}")).collect();
    let mut out = format!("  {letters}\n");
    for y in 0..size {
        let row = size - y;
        out.push_str(&format!("{row:>2}"));
        let mut after_last = false;
        for x in 0..size {
            let v = Vertex::new(x, y);
            let is_last = Some(v) == last;
            // Each point is a separator and a stone; the separators around
            // the last move become its parentheses.
            out.push(if is_last {
                '('
            } else if after_last {
                ')'
            } else {
                ' '
            });
            out.push(match board.color_at(board.point(v)) {
                Some(Color::Black) => 'X',
                Some(Color::White) => 'O',
                None if is_star(v, size) => '+',
                None => '.',
            });
            after_last = is_last;
        }
        out.push_str(&format!("{}{row}\n", if after_last { ')' } else { ' ' }));
    }
    out.push_str(&format!("  {letters}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Game, Move, Rules};

    #[test]
    fn draws_coordinates_stones_and_the_last_move() {
        let mut g = Game::new(9, Rules::CHINESE);
        g.play(Color::Black, Move::parse_gtp("C7", 9).unwrap()).unwrap();
        g.play(Color::White, Move::parse_gtp("E5", 9).unwrap()).unwrap();
        let d = diagram(g.board(), Vertex::parse_gtp("E5", 9));
        let lines: Vec<&str> = d.lines().collect();
        assert_eq!(lines[0], "   A B C D E F G H J");
        assert_eq!(lines[1], " 9 . . . . . . . . . 9");
        assert_eq!(lines[3], " 7 . . X . . . + . . 7");
        assert_eq!(lines[5], " 5 . . . .(O). . . . 5");
        assert_eq!(lines[9], " 1 . . . . . . . . . 1");
        assert_eq!(lines.len(), 11);
    }
}
