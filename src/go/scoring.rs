//! Counting a finished position under area or territory scoring.
//!
//! Both methods start from the same count: dead stones (given by the caller)
//! are lifted, then every region of empty points that touches stones of only
//! one colour is that colour's territory; regions touching both colours (dame,
//! the shared liberties of a seki) belong to nobody.
//!
//! * Area (Chinese): stones on the board + territory.
//! * Territory (Japanese): territory + prisoners (captures during play plus
//!   the dead stones lifted at the end).
//!
//! **The identity that ties them.** For one final position and one set of
//! dead stones,
//!
//! ```text
//! area margin − territory margin = (stones Black placed) − (stones White placed)
//! ```
//!
//! (margins Black minus White, before komi; "placed" counts every stone put
//! on the board, setup and handicap stones included). Proof: every stone a
//! player placed is either still alive on the board, captured, or dead at
//! the end; area counts Black's live stones where territory counts the white
//! stones Black captured or found dead, so the difference of the two margins
//! is `(B alive + B captured + B dead) − (W alive + W captured + W dead)`.
//! This is the "one stone of area is two points" relation: with alternate
//! play the difference is 0 or 1, and the player who places the last stone
//! (Black, when both have passed an equal number of times and Black started)
//! gains a point under area counting.

use std::fmt;

use super::board::{Board, Cell, Point};
use super::rules::{Rules, Scoring};
use super::Color;

/// The raw count of a position, before choosing a scoring method.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Count {
    /// Live stones on the board, `[black, white]`.
    pub stones: [u32; 2],
    /// Empty (or dead-stone) points surrounded by each colour.
    pub territory: [u32; 2],
    /// Dead stones of each colour lifted before counting.
    pub dead: [u32; 2],
    /// Points that belong to nobody.
    pub neutral: u32,
    /// Prisoners taken during play by each colour (from the board).
    pub captures: [u32; 2],
}

impl Count {
    /// Counts `board` after lifting the stones at `dead`.
    pub fn new(board: &Board, dead: &[Point]) -> Count {
        let len = board.points().map(|p| p.idx()).max().unwrap_or(0) + 1;
        let mut is_dead = vec![false; len];
        let mut count =
            Count { captures: [board.captures(Color::Black), board.captures(Color::White)], ..Count::default() };
        for &p in dead {
            if let Some(c) = board.color_at(p) {
                if !is_dead[p.idx()] {
                    is_dead[p.idx()] = true;
                    count.dead[c.index()] += 1;
                }
            }
        }
        let alive = |p: Point| if is_dead[p.idx()] { None } else { board.color_at(p) };

        let mut visited = vec![false; len];
        let mut stack = Vec::new();
        for p in board.points() {
            if let Some(c) = alive(p) {
                count.stones[c.index()] += 1;
                continue;
            }
            if visited[p.idx()] {
                continue;
            }
            // Flood the region of empty and dead points; note which live
            // colours border it.
            let mut borders = [false; 2];
            let mut size = 0;
            visited[p.idx()] = true;
            stack.push(p);
            while let Some(q) = stack.pop() {
                size += 1;
                for n in board.neighbors(q) {
                    if board.cell(n) == Cell::Border {
                        continue;
                    }
                    match alive(n) {
                        Some(c) => borders[c.index()] = true,
                        None if !visited[n.idx()] => {
                            visited[n.idx()] = true;
                            stack.push(n);
                        }
                        None => {}
                    }
                }
            }
            match borders {
                [true, false] => count.territory[0] += size,
                [false, true] => count.territory[1] += size,
                _ => count.neutral += size,
            }
        }
        count
    }

    /// Black's area minus White's area (no komi).
    pub fn area_margin(&self) -> i32 {
        (self.stones[0] + self.territory[0]) as i32 - (self.stones[1] + self.territory[1]) as i32
    }

    /// Black's territory and prisoners minus White's (no komi).
    pub fn territory_margin(&self) -> i32 {
        let black = self.territory[0] + self.captures[0] + self.dead[1];
        let white = self.territory[1] + self.captures[1] + self.dead[0];
        black as i32 - white as i32
    }

    /// The margin under `scoring`, no komi.
    pub fn margin(&self, scoring: Scoring) -> i32 {
        match scoring {
            Scoring::Area => self.area_margin(),
            Scoring::Territory => self.territory_margin(),
        }
    }
}

/// A final score: Black's lead (negative when White leads), komi included.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    pub black_lead: f32,
}

impl Score {
    /// Scores `board` under `rules` with `dead` stones lifted.
    pub fn new(board: &Board, dead: &[Point], rules: &Rules) -> Score {
        let margin = Count::new(board, dead).margin(rules.scoring);
        Score { black_lead: margin as f32 - rules.komi }
    }

    /// The outcome for `color`: 1 a win, 0 a loss, ½ a draw.
    pub fn value_for(self, color: Color) -> f32 {
        match self.winner() {
            Some(winner) if winner == color => 1.0,
            Some(_) => 0.0,
            None => 0.5,
        }
    }

    pub fn winner(self) -> Option<Color> {
        if self.black_lead > 0.0 {
            Some(Color::Black)
        } else if self.black_lead < 0.0 {
            Some(Color::White)
        } else {
            None
        }
    }
}

impl fmt::Display for Score {
    /// The SGF/GTP form: `B+3.5`, `W+0.5`, `0` for a draw.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.winner() {
            Some(c) => write!(f, "{}+{}", c.letter(), self.black_lead.abs()),
            None => f.write_str("0"),
        }
    }
}
