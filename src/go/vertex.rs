//! Board coordinates independent of the board's internal layout, and moves.
//!
//! A [`Vertex`] counts columns from the left and rows from the top, as SGF
//! does (`aa` is the top-left corner). GTP names the same point with a column
//! letter (`A`–`Z` without `I`) and a row number counted from the bottom.

use std::fmt;

use super::Color;

/// Largest board side supported (GTP and SGF both stop at 25 with letters).
pub const MAX_SIZE: usize = 25;

/// Number of padded points of the largest board: rows of the board's
/// points with one border column shared between rows, a border row above
/// and below ([`crate::go::board`]'s layout). Zobrist keys are per padded
/// point, so the layout's size lives here, beneath both.
pub const MAX_POINTS: usize = (MAX_SIZE + 2) * (MAX_SIZE + 1) + 1;

/// Column letters used by GTP: the alphabet without `I`.
const GTP_COLUMNS: &[u8; 25] = b"ABCDEFGHJKLMNOPQRSTUVWXYZ";

/// A point on the board: column `x` from the left, row `y` from the top.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vertex {
    pub x: u8,
    pub y: u8,
}

impl Vertex {
    pub fn new(x: usize, y: usize) -> Vertex {
        debug_assert!(x < MAX_SIZE && y < MAX_SIZE);
        Vertex { x: x as u8, y: y as u8 }
    }

    /// Row-major index `y * size + x`: the layout of feature planes and of
    /// policy labels (361 = pass on 19×19).
    #[inline]
    pub fn index(self, size: usize) -> usize {
        self.y as usize * size + self.x as usize
    }

    /// Inverse of [`Vertex::index`].
    #[inline]
    pub fn from_index(index: usize, size: usize) -> Vertex {
        Vertex::new(index % size, index / size)
    }

    /// GTP name on a board of `size`, e.g. `D4`.
    pub fn to_gtp(self, size: usize) -> String {
        format!("{}{}", GTP_COLUMNS[self.x as usize] as char, size - self.y as usize)
    }

    /// Parses a GTP vertex (`d4`, `Q16`; case-insensitive), checking it lies
    /// on a board of `size`.
    pub fn parse_gtp(s: &str, size: usize) -> Option<Vertex> {
        let s = s.trim();
        let mut chars = s.chars();
        let letter = chars.next()?.to_ascii_uppercase();
        let x = GTP_COLUMNS.iter().position(|&c| c as char == letter)?;
        // Digits only, no leading zero: `str::parse` would also take `A+1`
        // and `A01` for A1, names no controller writes.
        let digits = chars.as_str();
        if digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let row: usize = digits.parse().ok()?;
        if x >= size || row == 0 || row > size {
            return None;
        }
        Some(Vertex::new(x, size - row))
    }

    /// SGF name, e.g. `dd`.
    pub fn to_sgf(self) -> String {
        let c = |v: u8| (b'a' + v) as char;
        format!("{}{}", c(self.x), c(self.y))
    }
}

/// What a player does on their turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Move {
    Play(Vertex),
    Pass,
    Resign,
}

impl Move {
    /// GTP name: a vertex, `pass` or `resign`.
    pub fn to_gtp(self, size: usize) -> String {
        match self {
            Move::Play(v) => v.to_gtp(size),
            Move::Pass => "pass".to_string(),
            Move::Resign => "resign".to_string(),
        }
    }

    /// Parses a GTP move: a vertex, `pass` or `resign` (any case).
    pub fn parse_gtp(s: &str, size: usize) -> Option<Move> {
        match s.trim().to_ascii_lowercase().as_str() {
            "pass" => Some(Move::Pass),
            "resign" => Some(Move::Resign),
            v => Vertex::parse_gtp(v, size).map(Move::Play),
        }
    }

    /// Parses a move a player can make on the board: a vertex or `pass`,
    /// not `resign` (what `play`, `avoid` and the analysis engine's
    /// `moves` take).
    pub fn parse_board_move(s: &str, size: usize) -> Option<Move> {
        Move::parse_gtp(s, size).filter(|m| *m != Move::Resign)
    }

    /// The policy label of this move on a board of `size`: the point's
    /// row-major index, or `size * size` for a pass. Resignation has none.
    pub fn policy_index(self, size: usize) -> Option<usize> {
        match self {
            Move::Play(v) => Some(v.index(size)),
            Move::Pass => Some(size * size),
            Move::Resign => None,
        }
    }
}

/// A move together with the colour that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ColoredMove {
    pub color: Color,
    pub mv: Move,
}

impl fmt::Display for Vertex {
    /// Formats as `(x,y)`; use [`Vertex::to_gtp`] for a board name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{})", self.x, self.y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gtp_row_is_plain_digits() {
        assert_eq!(Vertex::parse_gtp("a1", 19), Some(Vertex::new(0, 18)));
        for name in ["A+1", "A01", "A0", "A-1", "A 1", "A1.0", "A", "A١"] {
            assert_eq!(Vertex::parse_gtp(name, 19), None, "{name}");
        }
    }

    #[test]
    fn gtp_round_trip_skips_i() {
        let v = Vertex::parse_gtp("J10", 19).unwrap();
        assert_eq!(v, Vertex::new(8, 9));
        assert_eq!(v.to_gtp(19), "J10");
        assert_eq!(Vertex::parse_gtp("i5", 19), None);
        assert_eq!(Vertex::parse_gtp("A1", 19), Some(Vertex::new(0, 18)));
        assert_eq!(Vertex::parse_gtp("T19", 19), Some(Vertex::new(18, 0)));
        assert_eq!(Vertex::parse_gtp("U1", 19), None);
        assert_eq!(Vertex::parse_gtp("A20", 19), None);
        assert_eq!(Vertex::parse_gtp("A0", 19), None);
        for i in 0..361 {
            let v = Vertex::from_index(i, 19);
            assert_eq!(Vertex::parse_gtp(&v.to_gtp(19), 19), Some(v));
        }
    }

    #[test]
    fn policy_index_of_pass_follows_the_points() {
        assert_eq!(Move::Pass.policy_index(19), Some(361));
        assert_eq!(Move::Play(Vertex::new(3, 1)).policy_index(19), Some(22));
        assert_eq!(Move::Resign.policy_index(19), None);
    }
}
