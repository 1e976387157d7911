//! Who owns each point, estimated by random playouts: the way go-train
//! decides which stones are dead when it scores a game (GTP `final_score`,
//! `final_status_list`, matches).
//!
//! From the final position, random playouts (both sides playing the random
//! agent until both pass, never filling their own eyes nor putting a big
//! string into atari: [`RandomAgent::judging`]; when a game is counted,
//! nor 4 stones in a living shape either: [`RandomAgent::scoring`]) are
//! run to the end, where every point is a stone, an eye or a seki's shared
//! liberty and ownership is unambiguous (Tromp–Taylor). A stone whose own
//! colour ends up owning its point in fewer than half of the playouts is
//! dead. Groups with two eyes are never taken in a random playout, nor
//! seki whose only moves left are the self-ataris refused; a group without
//! eyes inside the opponent's area almost always is. The method needs no
//! net and works on any board size; its agreement with GnuGo's judgement
//! on finished games is measured by `eval --match --cross-check` and
//! `scripts/rescore-matches.py` (README).

use super::random::{playout, RandomAgent};
use crate::go::{Board, Cell, Color, Game, Point, Rules, Score};

/// Playouts [`Ownership::estimate`] runs when the caller has no opinion:
/// enough that a clearly dead or clearly alive group is never misjudged,
/// and a few milliseconds on 19×19.
pub const DEFAULT_PLAYOUTS: usize = 200;

/// How a leaf's value is mixed with random playouts from its position
/// (`mix=λ`, `mix-playouts=n`, `mix-tactics=on`): what MCTS leaves and
/// `eval --mix` share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LeafMix {
    /// The playouts' weight on a settled board ([`Ownership::mix`]).
    pub lambda: f32,
    /// Playouts per leaf.
    pub playouts: usize,
    /// Playouts that answer ataris ([`RandomAgent::tactical`]) rather than
    /// the judging playouts that score games.
    pub tactical: bool,
}

impl LeafMix {
    /// `value`, the value of `game`'s position for its side to move, mixed
    /// with playouts seeded by `seed`.
    pub fn value(&self, game: &Game, value: f32, seed: u64) -> f32 {
        let mut agent = if self.tactical { RandomAgent::tactical(seed) } else { RandomAgent::judging(seed) };
        Ownership::from_playouts(game, self.playouts, &mut agent).mix(value, game.to_move(), self.lambda)
    }
}

/// The share of playouts in which Black owned each point.
#[derive(Clone, Debug)]
pub struct Ownership {
    /// Board side.
    size: usize,
    /// Per point, row-major: 1.0 always Black's, 0.0 always White's.
    black: Vec<f32>,
    /// The share of playouts Black won, by area with komi (a tie counts ½):
    /// the rollout outcome AlphaGo mixed into its leaf values.
    black_wins: f32,
}

impl Ownership {
    /// Runs `playouts` random playouts from the position of `game`, with the
    /// side to move first, by the judging agent ([`RandomAgent::judging`]);
    /// `seed` makes the estimate reproducible.
    pub fn estimate(game: &Game, playouts: usize, seed: u64) -> Ownership {
        Ownership::from_playouts(game, playouts, &mut RandomAgent::judging(seed))
    }

    /// As [`Ownership::estimate`], with the playouts that count finished
    /// games ([`RandomAgent::scoring`]): what decides dead stones in GTP
    /// `final_score`, `final_status_list` and the cleanup of `genmove`, and
    /// in match referees. Dataset labels, the learned-nothing baseline and
    /// MCTS leaves keep [`Ownership::estimate`], so that datasets prepared
    /// before stay as they were and the search plays as its matches measured.
    pub fn judge(game: &Game, playouts: usize, seed: u64) -> Ownership {
        Ownership::from_playouts(game, playouts, &mut RandomAgent::scoring(seed))
    }

    /// As [`Ownership::estimate`], with the playouts played by `agent`.
    pub fn from_playouts(game: &Game, playouts: usize, agent: &mut RandomAgent) -> Ownership {
        let size = game.board().size();
        // The real game may be over (two passes), and its history matters
        // little to who owns what; its ko ban does.
        let start = game.restarted(Rules { komi: game.rules().komi, ..Rules::CHINESE });

        let mut black = vec![0f32; size * size];
        let mut black_wins = 0f32;
        let playouts = playouts.max(1);
        let mut g = start.clone();
        for _ in 0..playouts {
            g.copy_from(&start);
            playout(&mut g, agent, 4 * size * size);
            let mut margin = 0f32;
            for (i, owner) in area_owners(g.board()).into_iter().enumerate() {
                match owner {
                    Some(Color::Black) => {
                        black[i] += 1.0;
                        margin += 1.0;
                    }
                    Some(Color::White) => margin -= 1.0,
                    None => {}
                }
            }
            black_wins += Score { black_lead: margin - game.rules().komi }.value_for(Color::Black);
        }
        black.iter_mut().for_each(|b| *b /= playouts as f32);
        Ownership { size, black, black_wins: black_wins / playouts as f32 }
    }

    /// The share of the playouts that `color` won, by area with komi.
    pub fn win_share(&self, color: Color) -> f32 {
        match color {
            Color::Black => self.black_wins,
            Color::White => 1.0 - self.black_wins,
        }
    }

    /// The share of playouts in which `color` owned the point at row-major `index`.
    pub fn share(&self, index: usize, color: Color) -> f32 {
        match color {
            Color::Black => self.black[index],
            Color::White => 1.0 - self.black[index],
        }
    }

    /// The share of the board's points that one colour owned in more than
    /// 90% of the playouts (with 8 playouts: in all of them): near 1 when
    /// every group is settled and the playouts count the game as it will
    /// end, near 0 in the opening.
    pub fn settled(&self) -> f32 {
        let sure = self.black.iter().filter(|&&b| !(0.1..=0.9).contains(&b)).count();
        sure as f32 / self.black.len().max(1) as f32
    }

    /// A leaf value `value` for `color`, mixed with the share of playouts
    /// `color` won: by `lambda` times [`Ownership::settled`], so the
    /// playouts' count weighs in as the board settles. A value net trained
    /// on games decided by resignation cannot count a close endgame; random
    /// playouts count a settled board exactly.
    pub fn mix(&self, value: f32, color: Color, lambda: f32) -> f32 {
        let weight = lambda * self.settled();
        (1.0 - weight) * value + weight * self.win_share(color)
    }

    /// Per point, row-major, from -1 (always the other colour's) to 1
    /// (always `color`'s): ownership as KataGo and GUIs give it.
    pub fn balance(&self, color: Color) -> Vec<f32> {
        (0..self.black.len()).map(|i| 2.0 * self.share(i, color) - 1.0).collect()
    }

    /// Black's expected area margin over the playouts, less `komi`: a score
    /// lead from random playouts, not from any net.
    pub fn black_lead(&self, komi: f32) -> f32 {
        self.black.iter().map(|b| 2.0 * b - 1.0).sum::<f32>() - komi
    }

    /// The stones of `board` judged dead: strings whose colour owned their
    /// points in fewer than half of the playouts, on average over the
    /// string. A string lives or dies whole; per point, a string near the
    /// threshold could come out half dead.
    pub fn dead_stones(&self, board: &Board) -> Vec<Point> {
        assert_eq!(board.size(), self.size, "ownership of another board size");
        let mut judged = vec![false; board.points().map(|p| p.idx()).max().unwrap_or(0) + 1];
        let mut dead = Vec::new();
        for p in board.points() {
            let Some(color) = board.color_at(p) else { continue };
            if judged[p.idx()] {
                continue;
            }
            let string = board.string_stones(p);
            string.iter().for_each(|q| judged[q.idx()] = true);
            let share: f32 = string.iter().map(|&q| self.share(board.vertex(q).index(self.size), color)).sum();
            if share < 0.5 * string.len() as f32 {
                dead.extend(string);
            }
        }
        dead.sort_by_key(|&q| board.vertex(q).index(self.size));
        dead
    }

    /// The score of `game` with the dead stones lifted, under its rules.
    pub fn score(&self, game: &Game) -> Score {
        Score::new(game.board(), &self.dead_stones(game.board()), game.rules())
    }
}

/// The owner of each point (row-major) of a finished board under area
/// counting with no dead stones: a stone's colour, or the one colour that
/// an empty region touches.
pub fn area_owners(board: &Board) -> Vec<Option<Color>> {
    let size = board.size();
    let mut owners: Vec<Option<Color>> = vec![None; size * size];
    let mut seen = vec![false; size * size];
    let index = |p: Point| board.vertex(p).index(size);
    let mut region = Vec::new();
    for p in board.points() {
        if let Some(c) = board.color_at(p) {
            owners[index(p)] = Some(c);
            continue;
        }
        if seen[index(p)] {
            continue;
        }
        // Flood the empty region, noting which colours border it.
        region.clear();
        region.push(p);
        seen[index(p)] = true;
        let mut borders = [false; 2];
        let mut next = 0;
        while next < region.len() {
            let q = region[next];
            next += 1;
            for n in board.neighbors(q) {
                match board.cell(n) {
                    Cell::Border => {}
                    Cell::Empty if !seen[index(n)] => {
                        seen[index(n)] = true;
                        region.push(n);
                    }
                    Cell::Empty => {}
                    Cell::Black => borders[0] = true,
                    Cell::White => borders[1] = true,
                }
            }
        }
        let owner = match borders {
            [true, false] => Some(Color::Black),
            [false, true] => Some(Color::White),
            _ => None,
        };
        for &q in &region {
            owners[index(q)] = owner;
        }
    }
    owners
}

/// Like [`Ownership::judge`] with [`DEFAULT_PLAYOUTS`] and a seed taken
/// from the position, so the same position always scores the same.
pub fn judge_default(game: &Game) -> Ownership {
    Ownership::judge(game, DEFAULT_PLAYOUTS, game.board().hash())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Move, Vertex};

    fn game_from(rows: &[&str]) -> Game {
        let size = rows.len();
        let mut game = Game::new(size, Rules::CHINESE);
        let mut stones = Vec::new();
        for (y, row) in rows.iter().enumerate() {
            for (x, c) in row.chars().filter(|c| !c.is_whitespace()).enumerate() {
                let color = match c {
                    'X' => Color::Black,
                    'O' => Color::White,
                    _ => continue,
                };
                stones.push((Vertex::new(x, y), Some(color)));
            }
        }
        game.setup(&stones).unwrap();
        game
    }

    #[test]
    fn a_lone_stone_in_living_territory_is_dead_and_the_walls_live() {
        // White's wall on the right has two eyes' worth of room; Black owns
        // the left; a white stone sits inside Black's area.
        let mut game = game_from(&[
            ". . . X O . . . .",
            ". . . X O . . . .",
            ". O . X O . . . .",
            ". . . X O . . . .",
            ". . . X O . . . .",
            ". . . X O . . . .",
            ". . . X O . . . .",
            ". . . X O . . . .",
            ". . . X O . . . .",
        ]);
        game.play(Color::Black, Move::Pass).unwrap();
        let own = Ownership::estimate(&game, 100, 1);
        let dead = own.dead_stones(game.board());
        let b = game.board();
        assert_eq!(dead, vec![b.point(Vertex::new(1, 2))]);
        // Black: 3 columns + the wall = 36 points; White: 45 + the dead
        // stone's point counted for Black => Black 36, White 45.
        let score = own.score(&game);
        assert_eq!(score.black_lead, 36.0 - 45.0 - 7.5);
    }

    #[test]
    fn a_seki_lives_and_a_small_eye_space_dies() {
        // Two living walls with two eyes each; between them White's column
        // touches Black's wall and Black's column White's, and they share
        // the empty column: whoever fills its last two points puts its own
        // column in atari and loses it. A seki: both columns live, the two
        // last points are no one's.
        let game = game_from(&[
            "X X X O . X O O O",
            ". X X O . X O O .",
            "X X X O . X O O O",
            "X X X O . X O O O",
            "X X X O . X O O O",
            ". X X O . X O O .",
            "X X X O . X O O O",
            "X X X O . X O O O",
            "X X X O . X O O O",
        ]);
        let own = Ownership::estimate(&game, 100, 1);
        assert!(own.dead_stones(game.board()).is_empty(), "{:?}", own.dead_stones(game.board()));
        for x in [3, 5] {
            let color = if x == 3 { Color::White } else { Color::Black };
            let share = own.share(Vertex::new(x, 4).index(9), color);
            assert!(share > 0.9, "column {x} owned in {share} of the playouts");
        }
        // A white corner group with two liberties, both shared with a
        // black stone inside: Black kills it by playing a second stone
        // inside, two stones in atari, which judging playouts must allow.
        let game = game_from(&[
            "X X X X X X O . X",
            "X . X X X X O O .",
            "X X X X X X X O O",
            "X X X . X X X X O",
            "X X X X X X X X X",
            "X . X X X X X . X",
            "X X X X X X X X X",
            "X X X . X X X . X",
            "X X X X X X X X X",
        ]);
        let own = Ownership::estimate(&game, 100, 1);
        let b = game.board();
        let white: Vec<Point> = b.points().filter(|&p| b.color_at(p) == Some(Color::White)).collect();
        assert_eq!(own.dead_stones(b), white);
    }

    #[test]
    fn on_a_settled_board_the_playouts_count_and_the_mix_trusts_them() {
        // Black's stones fill the five left columns, White's the three
        // right ones, each with an eye at every odd-odd point; the column
        // between is dame. Black wins by at least 9 − 7.5 however the dame
        // is shared, and every point but the dame is settled. A leaf value
        // that says Black loses is overruled.
        let mut game = game_from(&[
            "X X X X X . O O O",
            "X . X . X . O . O",
            "X X X X X . O O O",
            "X . X . X . O . O",
            "X X X X X . O O O",
            "X . X . X . O . O",
            "X X X X X . O O O",
            "X . X . X . O . O",
            "X X X X X . O O O",
        ]);
        game.set_to_move(Color::White);
        let own = Ownership::estimate(&game, 32, 3);
        assert!(own.settled() > 0.85, "settled {}", own.settled());
        assert_eq!(own.win_share(Color::Black), 1.0);
        assert_eq!(own.win_share(Color::White), 0.0);
        assert!(own.mix(0.0, Color::Black, 1.0) > 0.8);
        assert!(own.mix(1.0, Color::White, 1.0) < 0.2);
        assert_eq!(own.mix(0.3, Color::Black, 0.0), 0.3);
    }

    #[test]
    fn on_an_empty_board_the_mix_keeps_the_leaf_value() {
        // Nothing is settled: random playouts' count says little, and the
        // net's value stands almost as it is.
        let game = Game::new(9, Rules::CHINESE);
        let own = Ownership::estimate(&game, 32, 5);
        assert!(own.settled() < 0.2, "settled {}", own.settled());
        let mixed = own.mix(0.7, Color::Black, 1.0);
        assert!((mixed - 0.7).abs() < 0.15, "{mixed}");
    }

    #[test]
    fn area_owners_of_a_finished_board() {
        let game = game_from(&["X X O", "X . O", "X X O"]);
        let owners = area_owners(game.board());
        assert_eq!(owners[4], None, "touches both colours");

        // An empty point Black surrounds is Black's (White's strings with a
        // liberty each: setup refuses a string without one).
        let game = game_from(&["X X O .", ". X O .", "X X O .", "X X O ."]);
        assert_eq!(area_owners(game.board())[4], Some(Color::Black));
    }
}
