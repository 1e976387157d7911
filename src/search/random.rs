//! The baseline agent: a uniformly random legal move that does not fill one
//! of its own eyes (the seed design's random player), and random playouts.

use super::tactics::{answers_atari, urgent_points};
use crate::go::{Board, Cell, Color, ColoredMove, Game, Move, Point};

/// wyrand (Wang Yi's generator): 64 bits of state, and an addition and one
/// 64×64→128-bit multiply per number, about half the work of PCG-64's
/// 128-bit multiply, which showed in playout profiles. Its output passes
/// BigCrush and PractRand, plenty for choosing among a few hundred points,
/// and it gives the same stream on every platform.
#[derive(Clone, Debug)]
struct WyRand(u64);

impl WyRand {
    fn new(seed: u64) -> WyRand {
        // One SplitMix64 step, so that nearby seeds start far apart.
        WyRand(crate::go::zobrist::splitmix64(seed).1)
    }

    #[inline]
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0xa076_1d64_78bd_642f);
        let t = self.0 as u128 * (self.0 ^ 0xe703_7ed1_a0b4_28db) as u128;
        (t >> 64) as u64 ^ t as u64
    }
}

/// The smallest string whose self-atari judging playouts refuse. Smaller
/// self-ataris must stay: killing a group with a small eye space means
/// playing inside it (two stones in atari kill a corner group with two
/// liberties). Rescoring the 263 match games against GnuGo that ended in
/// two passes, GnuGo's `final_score` and go-train's agree exactly on 238
/// with 2, on all 263 with 4 or 5, on 262 with 6 and 255 with no limit.
pub const SEKI_STRING: u32 = 5;

/// Plays uniformly among the legal moves that do not fill its own eyes, and
/// passes when none is left.
pub struct RandomAgent {
    /// Seeded, so playouts are reproducible.
    rng: WyRand,
    /// Also refuses moves that put a string of [`SEKI_STRING`] or more
    /// stones into atari without capturing ([`RandomAgent::judging`]).
    spare_seki: bool,
    /// Answers ataris the last move made before playing at random
    /// ([`RandomAgent::tactical`]).
    answer_ataris: bool,
    /// Also refuses putting 4 stones in a line, an L or a zigzag into
    /// atari ([`RandomAgent::scoring`]).
    spare_living_four: bool,
    /// Candidate points, reused between calls to avoid allocation.
    candidates: Vec<Point>,
}

impl RandomAgent {
    pub fn new(seed: u64) -> RandomAgent {
        RandomAgent {
            rng: WyRand::new(seed),
            spare_seki: false,
            answer_ataris: false,
            spare_living_four: false,
            candidates: Vec::with_capacity(361),
        }
    }

    /// The playouts that judge life and death (scoring, ownership, mixed
    /// leaves): as [`RandomAgent::new`], but never putting a string of
    /// [`SEKI_STRING`] or more stones into atari unless the move captures.
    /// In a seki the only moves left are such self-ataris: plain random
    /// play makes them, and the other side takes a group that lives (a
    /// 25-stone seki scored dead turned a match game lost by 12.5 into a
    /// win by 40.5). MoGo's and Pachi's playouts refuse big self-ataris for
    /// the same reason.
    pub fn judging(seed: u64) -> RandomAgent {
        RandomAgent { spare_seki: true, ..RandomAgent::new(seed) }
    }

    /// The playouts that count a finished game (GTP `final_score` and
    /// `final_status_list`, match referees): as [`RandomAgent::judging`],
    /// and refusing also the self-atari of a string of 4 stones in a
    /// line, an L or a zigzag. Taken, such a string leaves the taker an
    /// eye space of those 4 points, which lives; only the square and the T
    /// of 4 are killing shapes (nakade), and they stay. In game 21 of the
    /// 800-iteration match, three White stones inside twenty Black ones
    /// share their last two liberties (a seki): White filling one made an
    /// L of 4 in atari, the capture that answers it was one point among
    /// many for a uniform playout, White took the twenty stones in most
    /// playouts, and the referee counted W+28.5 where GnuGo counts B+13.5
    /// (docs/results/strength.md).
    pub fn scoring(seed: u64) -> RandomAgent {
        RandomAgent { spare_living_four: true, ..RandomAgent::judging(seed) }
    }

    /// As [`RandomAgent::judging`], and first answering the last move the
    /// way MoGo's playouts did (Gelly et al. 2006): capture the string that
    /// moved if it is left in atari, or extend an own string it put in
    /// atari where that gives two or more liberties. Uniform playouts let a
    /// string in atari be taken or saved by chance, so they misjudge the
    /// capturing races that decide the engine's games against GnuGo
    /// (docs/results/value-nets.md); these play the obvious answer, at the cost of a
    /// look at the last move's four neighbours per move, and of a scan of
    /// the whole board for the first.
    pub fn tactical(seed: u64) -> RandomAgent {
        RandomAgent { answer_ataris: true, ..RandomAgent::judging(seed) }
    }

    /// A uniform integer in `0..n` (Lemire's multiply-shift; the bias is
    /// below 2^-20 for board-sized `n`).
    #[inline]
    fn below(&mut self, n: usize) -> usize {
        (((self.rng.next_u64() >> 32) * n as u64) >> 32) as usize
    }

    /// The move for the side to move in `game`.
    pub fn select(&mut self, game: &Game) -> Move {
        self.select_point(game).map_or(Move::Pass, |p| Move::Play(game.board().vertex(p)))
    }

    /// The point to play for the side to move in `game`, `None` to pass.
    pub fn select_point(&mut self, game: &Game) -> Option<Point> {
        let board = game.board();
        let color = game.to_move();
        let spare_seki = self.spare_seki;
        let spare_living_four = self.spare_living_four;
        // A stone with two empty neighbours keeps two liberties: most
        // points of a playout need no look at the string they would join.
        let big_self_atari = |p: Point| {
            board.neighbors(p).iter().filter(|&&q| board.cell(q) == Cell::Empty).count() < 2
                && board.move_outcome(p, color).is_some_and(|o| {
                    o.captured == 0
                        && o.liberties == 1
                        && (o.stones >= SEKI_STRING
                            || (spare_living_four && o.stones == 4 && !killing_four(board, p, color)))
                })
        };
        let acceptable = |p: Point| {
            !board.is_eye(p, color) && game.check_point(p, color).is_ok() && !(spare_seki && big_self_atari(p))
        };
        if self.answer_ataris {
            if let Some(p) = self.atari_answer(game, &acceptable) {
                return Some(p);
            }
        }
        // Most draws succeed at once: first try a few draws straight from
        // the board's list (rejection sampling, uniform over the acceptable
        // points) and copy the list only when they all fail.
        let n = board.empty_count();
        for _ in 0..4.min(n) {
            let p = board.empty_point(self.below(n));
            if acceptable(p) {
                return Some(p);
            }
        }
        let mut candidates = std::mem::take(&mut self.candidates);
        candidates.clear();
        candidates.extend(board.empty_points());
        let point = self.draw(&mut candidates, &acceptable);
        self.candidates = candidates;
        point
    }
}

impl RandomAgent {
    /// A point answering the atari situation the last move left
    /// ([`RandomAgent::tactical`]), drawn uniformly among those `acceptable`
    /// allows; `None` when the last move left none (or was a pass). A game
    /// with no move yet has no last move to answer, so every capture and
    /// rescue on the board is an answer ([`urgent_points`]): a playout's
    /// start, which [`Game::restarted`] gives the leaf's stones, side to
    /// move and ko ban but not its last move.
    fn atari_answer(&mut self, game: &Game, acceptable: &impl Fn(Point) -> bool) -> Option<Point> {
        let board = game.board();
        let color = game.to_move();
        let last = match game.recent_moves(1).next() {
            Some(&ColoredMove { mv: Move::Play(v), color: c }) if c != color => board.point(v),
            None => return self.draw(&mut urgent_points(game), acceptable),
            _ => return None,
        };
        // At most one capture and four extensions.
        let mut answers = [Point(0); 5];
        let mut n = 0;
        if let Some(l) = board.atari_liberty(last) {
            answers[n] = l;
            n += 1;
        }
        for q in board.neighbors(last) {
            if board.color_at(q) != Some(color) {
                continue;
            }
            let Some(l) = board.atari_liberty(q) else { continue };
            if answers_atari(board, l, color, true) && !answers[..n].contains(&l) {
                answers[n] = l;
                n += 1;
            }
        }
        self.draw(&mut answers[..n], acceptable)
    }

    /// A point drawn uniformly among the `acceptable` ones of `points`
    /// (without replacement: a rejected point is swapped out of the live
    /// range), `None` when none is.
    fn draw(&mut self, points: &mut [Point], acceptable: &impl Fn(Point) -> bool) -> Option<Point> {
        let mut live = points.len();
        while live > 0 {
            let i = self.below(live);
            if acceptable(points[i]) {
                return Some(points[i]);
            }
            live -= 1;
            points.swap(i, live);
        }
        None
    }
}

/// Whether the 4-stone string that `color` playing at `p` would make is a
/// square or a T: the eye spaces of 4 that die ([`RandomAgent::scoring`]).
/// In a line, an L or a zigzag the stones form a path, two of them with
/// one neighbour among the four; the square has none with one, the T
/// one stone with three.
fn killing_four(board: &Board, p: Point, color: Color) -> bool {
    let mut stones = vec![p];
    for q in board.neighbors(p) {
        if board.color_at(q) == Some(color) && !stones.contains(&q) {
            stones.extend(board.string_stones(q));
        }
    }
    let ends =
        stones.iter().filter(|&&a| board.neighbors(a).iter().filter(|b| stones.contains(b)).count() == 1).count();
    ends != 2
}

/// What one random playout did.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlayoutStats {
    /// Moves played, the final two passes included.
    pub moves: usize,
    /// Whether it stopped at the move limit rather than by two passes.
    pub hit_limit: bool,
}

/// Plays `agent` for both sides until two consecutive passes, or until
/// `max_moves` moves (a safety net: superko makes games finite, not short).
pub fn playout(game: &mut Game, agent: &mut RandomAgent, max_moves: usize) -> PlayoutStats {
    let mut stats = PlayoutStats::default();
    game.reserve(max_moves);
    while !game.is_over() {
        if stats.moves >= max_moves {
            stats.hit_limit = true;
            break;
        }
        let color = game.to_move();
        match agent.select_point(game) {
            Some(p) => game.play_point(color, p),
            None => game.play_unchecked(color, Move::Pass),
        };
        stats.moves += 1;
    }
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::{Color, Rules, Score};
    use crate::search::tactics::game_after;

    #[test]
    fn playouts_end_legally_with_no_empty_point_left_but_eyes() {
        for seed in 0..20 {
            let mut game = Game::new(9, Rules::CHINESE);
            let mut agent = RandomAgent::new(seed);
            let stats = playout(&mut game, &mut agent, 1000);
            assert!(!stats.hit_limit);
            game.board().check_invariants().unwrap();
            // At the end every empty point is an eye or an illegal point for
            // the side to move (the agent passed).
            let b = game.board();
            let c = game.to_move();
            for p in b.empty_points() {
                assert!(b.is_eye(p, c) || game.check_point(p, c).is_err());
            }
            // Replaying the recorded moves with full checks succeeds.
            let mut replay = Game::new(9, Rules::CHINESE);
            for m in game.moves() {
                replay.play(m.color, m.mv).unwrap();
            }
            assert_eq!(replay.board().hash(), game.board().hash());
            let _ = Score::new(b, &[], &Rules::CHINESE);
        }
    }

    #[test]
    fn every_board_size_plays_out_legally() {
        for (size, tactical) in [2, 3, 4, 5, 7, 9, 13, 19, 25].into_iter().flat_map(|s| [(s, false), (s, true)]) {
            for seed in 0..3 {
                let mut game = Game::new(size, Rules::CHINESE);
                let mut agent = if tactical { RandomAgent::tactical(seed) } else { RandomAgent::new(seed) };
                let stats = playout(&mut game, &mut agent, 3 * size * size);
                game.board().check_invariants().unwrap_or_else(|e| panic!("{size}x{size}: {e}"));
                let mut replay = Game::new(size, Rules::CHINESE);
                for m in game.moves() {
                    replay.play(m.color, m.mv).unwrap_or_else(|e| panic!("{size}x{size}: {e}"));
                }
                assert_eq!(replay.board().hash(), game.board().hash());
                assert!(stats.moves > 0);
                // Vertices survive the trip through the padded layout.
                let b = game.board();
                for (i, p) in b.points().enumerate() {
                    assert_eq!(b.vertex(p).index(size), i);
                    assert_eq!(b.point(b.vertex(p)), p);
                }
            }
        }
    }

    /// The vertex names of the moves `agent` chooses in `game` over 40 calls.
    fn choices(agent: &mut RandomAgent, game: &Game) -> std::collections::BTreeSet<String> {
        (0..40).map(|_| agent.select(game).to_gtp(game.size())).collect()
    }

    /// The position after `moves`, restarted with no move played and
    /// `to_move` to play: how a playout from a leaf starts.
    fn set_up_after(size: usize, moves: &str, to_move: Color) -> Game {
        let mut game = game_after(size, moves).restarted(Rules::CHINESE);
        game.set_to_move(to_move);
        game
    }

    /// Four stones that a capture would turn into a dying eye space (the
    /// square, the T) against a living one (a line, an L, a zigzag),
    /// whether the fourth stone extends one string or joins three.
    #[test]
    fn killing_fours_are_the_square_and_the_t() {
        for (black, fourth, kills) in [
            ("C5 D5 E5", "F5", false),
            ("C5 D5 E5", "E4", false),
            ("C5 D5 D4", "E4", false),
            ("C5 D5 C4", "D4", true),
            ("C5 D5 E5", "D4", true),
            ("C5 E5 D4", "D5", true),
            ("C5 E5 F5", "D5", false),
        ] {
            let moves: Vec<String> =
                black.split(' ').zip(["J1", "J2", "J3"]).flat_map(|(b, w)| [b.to_string(), w.to_string()]).collect();
            let game = game_after(9, &moves.join(" "));
            let p = game.board().point(crate::go::Vertex::parse_gtp(fourth, 9).unwrap());
            assert_eq!(killing_four(game.board(), p, Color::Black), kills, "{black} + {fourth}");
        }
    }

    // White E5 walks into atari among Black D5, E6 and F5: E4 takes it.
    const SELF_ATARI: &str = "D5 J1 E6 J2 F5 E5";
    // White D2 puts Black C3-D3 in atari; E3 extends it to three liberties.
    const ATARI: &str = "C3 C4 D3 D4 J9 B3 H9 C2 G9 D2";
    // The same atari with E4 and F3 White: E3 would leave one liberty, E2.
    const CLOSED_IN: &str = "C3 C4 D3 D4 J9 B3 H9 E4 G9 F3 F9 C2 E9 D2";

    #[test]
    fn tactical_playouts_answer_the_atari_the_last_move_left() {
        for (moves, answer) in [(SELF_ATARI, "E4"), (ATARI, "E3")] {
            let game = game_after(9, moves);
            assert_eq!(game.to_move(), Color::Black);
            let expected: std::collections::BTreeSet<String> = [answer.to_string()].into();
            assert_eq!(choices(&mut RandomAgent::tactical(1), &game), expected, "after {moves}");
            // The judging agent plays it only by chance.
            assert!(choices(&mut RandomAgent::judging(1), &game).len() > 10, "after {moves}");
        }
        // Closed in (E4, F3 White), the extension at E3 leaves one liberty,
        // E2: no answer, random play.
        let game = game_after(9, CLOSED_IN);
        assert_eq!(game.to_move(), Color::Black);
        assert!(choices(&mut RandomAgent::tactical(1), &game).len() > 10);
    }

    #[test]
    fn a_playout_does_not_retake_the_ko_its_position_just_took() {
        // Black's F5 has just taken White's E5 in a ko: F5 is in atari, and
        // taking it back at once, the only capture on the board, is banned.
        let game = game_after(9, "D5 E5 E4 F4 E6 F6 A1 G5 F5").restarted(Rules::CHINESE);
        assert_eq!(game.to_move(), Color::White);
        let chosen = choices(&mut RandomAgent::tactical(4), &game);
        assert!(!chosen.contains("E5") && chosen.len() > 10, "{chosen:?}");
    }

    #[test]
    fn a_playout_from_set_up_stones_answers_every_atari_on_the_board() {
        // No move to answer: the capture of the string in atari is found
        // on the whole board.
        let game = set_up_after(9, SELF_ATARI, Color::Black);
        assert_eq!(game.moves().count(), 0);
        let expected: std::collections::BTreeSet<String> = ["E4".to_string()].into();
        assert_eq!(choices(&mut RandomAgent::tactical(2), &game), expected);
    }

    #[test]
    fn tactical_playouts_judge_a_string_in_atari_by_who_is_to_move() {
        // White E5-E4 in atari (its liberty E3 leads out), Black to move:
        // Black takes it at once in every tactical playout, so Black owns
        // E5 in nearly all of them; uniform playouts often let it run.
        let moves = "D5 E5 D4 E4 F5 J1 F4 J2 E6";
        let game = set_up_after(9, moves, Color::Black);
        let e5 = crate::go::Vertex::parse_gtp("E5", 9).unwrap().index(9);
        let share = |agent: &mut RandomAgent| {
            super::super::ownership::Ownership::from_playouts(&game, 200, agent).share(e5, Color::Black)
        };
        let (tactical, judging) = (share(&mut RandomAgent::tactical(3)), share(&mut RandomAgent::judging(3)));
        assert!(tactical > 0.95, "tactical playouts: {tactical}");
        assert!(judging < tactical - 0.1, "judging playouts {judging}, tactical {tactical}");
    }

    #[test]
    fn the_same_seed_gives_the_same_game() {
        let run = |seed| {
            let mut game = Game::new(19, Rules::CHINESE);
            playout(&mut game, &mut RandomAgent::new(seed), 2000);
            game.board().hash()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn selection_is_uniform_over_acceptable_points() {
        // On an empty 3x3 board all nine points are acceptable for Black.
        let game = Game::new(3, Rules::CHINESE);
        let mut agent = RandomAgent::new(1);
        let mut hits = std::collections::HashMap::new();
        for _ in 0..9000 {
            *hits.entry(agent.select(&game)).or_insert(0) += 1;
        }
        assert_eq!(hits.len(), 9);
        assert!(hits.values().all(|&n| (850..1150).contains(&n)), "{hits:?}");
    }
}
