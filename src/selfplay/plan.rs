//! Which side makes each move of a self-play game.

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::go::Color;

/// The last move AlphaGo's value recipe may play at random: U is drawn
/// uniformly from 1 to this (Silver et al. 2016, Methods).
pub const LAST_RANDOM_MOVE: usize = 450;

/// Who plays the moves of one game.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GamePlan {
    /// The sides (indices into the run's sides) playing Black and White;
    /// under AlphaGo's recipe, after the random move.
    pub sides: [usize; 2],
    /// AlphaGo's value recipe: one move played uniformly at random.
    pub random_move: Option<RandomMove>,
}

/// The move of AlphaGo's value recipe played uniformly at random among the
/// legal points, after which the position is the one labelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RandomMove {
    /// Its number, from 1 (U). When the game would end before it, the move
    /// that would end it is played at random instead (U is clipped to the
    /// game).
    pub number: usize,
    /// The side that plays both colours before it (the SL policy).
    pub before: usize,
}

/// What chooses one move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mover {
    /// A side (its index).
    Side(usize),
    /// A legal point drawn uniformly (pass when there is none).
    Uniform,
}

impl GamePlan {
    /// Who chooses move `number` (from 1), played by `color`.
    pub fn mover(&self, number: usize, color: Color) -> Mover {
        match self.random_move {
            Some(r) if number < r.number => Mover::Side(r.before),
            Some(r) if number == r.number => Mover::Uniform,
            _ => Mover::Side(self.sides[color.index()]),
        }
    }

    /// Whether move `number` of a side, which would end the game (`ends`:
    /// a second pass), comes before the recipe's random move, and so is
    /// replaced by it ([`GamePlan::clip_random_move`]).
    pub fn random_move_instead(&self, number: usize, ends: bool) -> bool {
        ends && self.random_move.is_some_and(|r| number < r.number)
    }

    /// Brings the random move forward to move `number`: U clipped to a game
    /// that ends sooner. The moves after it are the RL side's.
    pub fn clip_random_move(&mut self, number: usize) {
        if let Some(r) = &mut self.random_move {
            r.number = r.number.min(number);
        }
    }

    /// The side that plays `color`'s moves after any random move.
    pub fn side(&self, color: Color) -> usize {
        self.sides[color.index()]
    }

    /// The colour side `side` plays ([`GamePlan::side`]), if any: the
    /// recipe's moves before the random one are another side's.
    pub fn colour_of(&self, side: usize) -> Option<Color> {
        [Color::Black, Color::White].into_iter().find(|&c| self.side(c) == side)
    }
}

/// How the games of a run are planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Plan {
    /// Side A against side B (the same side for a player against itself),
    /// colours alternating: A is Black in even-numbered games.
    Alternate { a: usize, b: usize },
    /// AlphaGo's value data: the SL policy plays moves 1 to U − 1, move U
    /// is uniformly random, the RL policy plays on to the end; U is drawn
    /// per game from 1 to [`LAST_RANDOM_MOVE`] (at most `max_moves`).
    AlphaGoValue { sl: usize, rl: usize },
}

impl Plan {
    /// The plan of game `index`, whose seed is `game_seed`, in games of at
    /// most `max_moves` moves.
    pub fn game(&self, index: usize, game_seed: u64, max_moves: usize) -> GamePlan {
        match *self {
            Plan::Alternate { a, b } => {
                let sides = if index.is_multiple_of(2) { [a, b] } else { [b, a] };
                GamePlan { sides, random_move: None }
            }
            Plan::AlphaGoValue { sl, rl } => {
                // A generator of its own: the game's moves draw from another.
                let mut rng = Pcg64Mcg::seed_from_u64(game_seed ^ 0x5241_4E44_4F4D);
                // Move U + 1 must be played for the position before it to
                // be a record: U = max_moves once lost the game's position.
                let last = LAST_RANDOM_MOVE.min(max_moves.saturating_sub(1)).max(1);
                let number = 1 + (rng.next_u64() % last as u64) as usize;
                GamePlan { sides: [rl, rl], random_move: Some(RandomMove { number, before: sl }) }
            }
        }
    }

    /// Fails unless games of at most `max_moves` moves can follow the
    /// plan: the recipe's position is the one after its random move, and
    /// a move must follow it (a game of one move once failed each game
    /// after all were played).
    pub fn check_max_moves(&self, max_moves: usize) -> anyhow::Result<()> {
        if matches!(self, Plan::AlphaGoValue { .. }) && max_moves < 2 {
            anyhow::bail!(
                "--max-moves {max_moves}: --value-positions alphago labels the position after a random move, and \
                 a game must go on from it: give at least 2"
            );
        }
        Ok(())
    }

    /// Whether side `a` (the first named) plays `color` in game `index`.
    pub fn a_plays(&self, index: usize, color: Color) -> bool {
        match self {
            Plan::Alternate { .. } => index.is_multiple_of(2) == (color == Color::Black),
            Plan::AlphaGoValue { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_alternate_and_the_random_move_splits_the_game_in_three() {
        let plan = Plan::Alternate { a: 0, b: 1 };
        assert_eq!(plan.game(0, 1, 500).sides, [0, 1]);
        assert_eq!(plan.game(7, 1, 500).sides, [1, 0]);
        assert!(plan.a_plays(0, Color::Black) && plan.a_plays(1, Color::White) && !plan.a_plays(1, Color::Black));

        let value = Plan::AlphaGoValue { sl: 0, rl: 1 };
        let numbers: Vec<usize> = (0..2000)
            .map(|i| value.game(i, crate::selfplay::game_seed(3, i), 500).random_move.unwrap().number)
            .collect();
        assert!(numbers.iter().all(|&u| (1..=LAST_RANDOM_MOVE).contains(&u)));
        assert!(numbers.contains(&1) && numbers.iter().any(|&u| u > 440), "U covers 1 to 450");
        let mean = numbers.iter().sum::<usize>() as f64 / numbers.len() as f64;
        assert!((205.0..245.0).contains(&mean), "uniform from 1 to 450: mean {mean}");
        assert_eq!(value.game(5, 9, 500), value.game(5, 9, 500), "a function of the game's seed");
        let capped: Vec<usize> = (0..300).map(|i| value.game(i, i as u64, 10).random_move.unwrap().number).collect();
        assert!(capped.iter().all(|&u| u < 10) && capped.contains(&9), "a move after U within the cap: {capped:?}");

        let game = GamePlan { sides: [1, 1], random_move: Some(RandomMove { number: 3, before: 0 }) };
        let movers: Vec<Mover> = (1..=4).map(|n| game.mover(n, Color::Black)).collect();
        assert_eq!(movers, [Mover::Side(0), Mover::Side(0), Mover::Uniform, Mover::Side(1)]);

        // A game the SL side would end at move 2 gets its random move there,
        // and the RL side plays on.
        let mut clipped = game;
        assert!(clipped.random_move_instead(2, true));
        assert!(!clipped.random_move_instead(2, false) && !clipped.random_move_instead(3, true));
        clipped.clip_random_move(2);
        let movers: Vec<Mover> = (1..=3).map(|n| clipped.mover(n, Color::White)).collect();
        assert_eq!(movers, [Mover::Side(0), Mover::Uniform, Mover::Side(1)]);
        assert!(!GamePlan { random_move: None, ..game }.random_move_instead(2, true));
    }
}
