//! The self-play game loop.
//!
//! Each worker thread keeps up to `batch` games going. A step makes one
//! move in every game: the positions where a net side is to move are
//! evaluated in one forward pass per side, the other movers (per-game
//! players, the recipe's random move) choose alone, and a game that ends
//! is scored, handed to the caller and replaced by the next game to play.
//! Workers take game indices from one queue; each runs its nets on a
//! thread pool of its own of one thread, so that on the CPU the workers
//! are the parallelism and a forward pass never waits for another's.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::cpu_time::process_cpu_seconds;
use anyhow::{bail, Context, Result};
use candle_core::Device;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use super::plan::{GamePlan, Mover, Plan};
use super::side::Side;
use crate::eval::arena::{counted, EndReason, GameConfig, GameOutcome, Player};
use crate::go::{Color, Game, Move};
use crate::search::net_agent::choose_move;

/// How self-play games are played.
#[derive(Clone, Copy, Debug)]
pub struct PlayConfig {
    /// Board, komi, move limit, dead-stone judging.
    pub game: GameConfig,
    /// Seeds every game ([`super::game_seed`]).
    pub seed: u64,
    /// Worker threads.
    pub threads: usize,
    /// Games each worker keeps going at once: the most positions a net
    /// evaluates in one forward pass.
    pub batch: usize,
}

impl PlayConfig {
    /// The worker threads and the games each keeps going for a run of
    /// `games`: at most `threads` and `batch`, the games spread over every
    /// thread when there are fewer than `threads × batch` (2,048 games in
    /// batches of 512 left 12 of an H100 machine's 16 threads idle).
    pub fn workers(&self, games: usize) -> (usize, usize) {
        let threads = self.threads.min(games).max(1);
        (threads, self.batch.min(games.div_ceil(threads)).max(1))
    }
}

/// A finished game.
pub struct Finished {
    /// Its index in the run.
    pub index: usize,
    /// Who played it.
    pub plan: GamePlan,
    pub outcome: GameOutcome,
    /// Under AlphaGo's recipe, the moves played before the position to
    /// label: the random move's number, clipped to the game.
    pub value_position: Option<usize>,
}

/// What a call of [`play_games`] did.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PlayStats {
    /// Games finished.
    pub games: u64,
    /// Moves played in them, passes included.
    pub moves: u64,
    /// Positions the net sides evaluated.
    pub net_positions: u64,
    /// Forward passes of the net sides.
    pub forward_passes: u64,
    /// Wall-clock seconds.
    pub seconds: f64,
    /// CPU seconds of the whole process meanwhile (user and system, all
    /// threads): the speed a machine shared with other work would give
    /// with its cores to itself.
    pub cpu_seconds: f64,
}

/// Plays the games `indices` by `plan` between `sides`, handing each to
/// `finished` as it ends (from any worker; an error there stops the run).
/// Games still being played when the run stops are dropped, never handed
/// over half played.
pub fn play_games(
    sides: &[Side],
    plan: &Plan,
    indices: &[usize],
    config: &PlayConfig,
    device: &Device,
    finished: &(dyn Fn(Finished) -> Result<()> + Sync),
) -> Result<PlayStats> {
    if config.batch == 0 || config.threads == 0 {
        bail!("self-play needs at least one thread and one game at a time");
    }
    check_plan(sides, plan)?;
    let (threads, batch) = config.workers(indices.len());
    let run = Run {
        sides,
        plan,
        indices,
        config,
        device,
        finished,
        batch,
        next: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
        counts: Default::default(),
        error: Mutex::new(None),
    };
    let started = Instant::now();
    let cpu_started = process_cpu_seconds().unwrap_or(0.0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let result = rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .context("starting a self-play worker's thread pool")
                    .and_then(|pool| pool.install(|| run.work()));
                if let Err(e) = result {
                    run.stop.store(true, Ordering::Relaxed);
                    run.error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                }
            });
        }
    });
    if let Some(e) = run.error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let [games, moves, net_positions, forward_passes] = run.counts.map(|c| c.into_inner());
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds().unwrap_or(0.0) - cpu_started;
    Ok(PlayStats { games, moves, net_positions, forward_passes, seconds, cpu_seconds })
}

/// AlphaGo's recipe replaces a net's game-ending pass by the random move,
/// which a player that keeps a board of its own would not see.
fn check_plan(sides: &[Side], plan: &Plan) -> Result<()> {
    let used: &[usize] = match plan {
        Plan::Alternate { a, b } => &[*a, *b],
        Plan::AlphaGoValue { sl, rl } => {
            for &s in &[*sl, *rl] {
                if sides.get(s).is_some_and(|side| side.move_net().is_none()) {
                    bail!("AlphaGo's value recipe plays move nets (policy agents), not {}", sides[s].name());
                }
            }
            &[*sl, *rl]
        }
    };
    if let Some(s) = used.iter().find(|&&s| s >= sides.len()) {
        bail!("the plan names side {s}, but there are {} sides", sides.len());
    }
    Ok(())
}

/// What the workers share.
struct Run<'a> {
    sides: &'a [Side],
    plan: &'a Plan,
    indices: &'a [usize],
    config: &'a PlayConfig,
    device: &'a Device,
    finished: &'a (dyn Fn(Finished) -> Result<()> + Sync),
    /// Games each worker keeps going ([`PlayConfig::workers`]).
    batch: usize,
    /// The next of `indices` to start.
    next: AtomicUsize,
    /// Set when a worker fails: the others stop at their next step.
    stop: AtomicBool,
    /// Games, moves, net positions, forward passes.
    counts: [AtomicU64; 4],
    error: Mutex<Option<anyhow::Error>>,
}

impl Run<'_> {
    /// One worker: keeps `batch` games going until the queue is empty.
    fn work(&self) -> Result<()> {
        let mut slots: Vec<Slot> = Vec::with_capacity(self.batch);
        loop {
            while slots.len() < self.batch {
                let Some(&index) = self.indices.get(self.next.fetch_add(1, Ordering::Relaxed)) else { break };
                let mut slot = Slot::start(index, self)?;
                match slot.setup_failed.take() {
                    Some(forfeit) => self.finish(slot, forfeit)?,
                    None => slots.push(slot),
                }
            }
            if slots.is_empty() || self.stop.load(Ordering::Relaxed) {
                return Ok(());
            }
            let moves = self.choose(&mut slots)?;
            for (k, (mv, by)) in moves.into_iter().enumerate().rev() {
                if let Some(outcome) = slots[k].apply(mv, by, &self.config.game) {
                    self.finish(slots.swap_remove(k), outcome)?;
                }
            }
        }
    }

    /// Counts and hands on a finished game.
    fn finish(&self, slot: Slot, outcome: GameOutcome) -> Result<()> {
        self.counts[0].fetch_add(1, Ordering::Relaxed);
        self.counts[1].fetch_add(outcome.game.move_count() as u64, Ordering::Relaxed);
        let finished = Finished { index: slot.index, plan: slot.plan, outcome, value_position: slot.random_played };
        (self.finished)(finished).with_context(|| format!("game {}", slot.index))
    }

    /// The move of each game, and the side whose player chose it (it has
    /// played it on its own board already).
    fn choose(&self, slots: &mut [Slot]) -> Result<Vec<(Choice, Option<usize>)>> {
        let movers: Vec<Mover> = slots.iter().map(Slot::mover).collect();
        let mut chosen: Vec<Option<(Choice, Option<usize>)>> = vec![None; slots.len()];
        for (s, side) in self.sides.iter().enumerate() {
            let Some((net, temperature)) = side.move_net() else { continue };
            let members: Vec<usize> = (0..slots.len()).filter(|&k| movers[k] == Mover::Side(s)).collect();
            if members.is_empty() {
                continue;
            }
            let games: Vec<&Game> = members.iter().map(|&k| &slots[k].game).collect();
            let probs = net.move_probs(&games).with_context(|| format!("evaluating {}", side.name()))?;
            self.counts[2].fetch_add(members.len() as u64, Ordering::Relaxed);
            self.counts[3].fetch_add(1, Ordering::Relaxed);
            for (&k, p) in members.iter().zip(&probs) {
                let slot = &mut slots[k];
                let mv = choose_move(&slot.game, p, temperature, &mut slot.rng);
                chosen[k] = Some((Choice::Move(slot.clip_random_move(mv)), None));
            }
        }
        for (k, slot) in slots.iter_mut().enumerate() {
            if chosen[k].is_some() {
                continue;
            }
            chosen[k] = Some(match movers[k] {
                Mover::Uniform => (Choice::Move(slot.uniform_move()), None),
                Mover::Side(s) => (slot.ask(s), Some(s)),
            });
        }
        Ok(chosen.into_iter().map(|c| c.expect("every game has a mover")).collect())
    }
}

/// A move chosen, or a player's failure to choose one.
#[derive(Clone, Debug)]
enum Choice {
    Move(Move),
    Failed(String),
}

/// One game in progress.
struct Slot {
    index: usize,
    /// Seeds its scoring.
    seed: u64,
    plan: GamePlan,
    game: Game,
    /// Draws the net sides' samples and the random move.
    rng: Pcg64Mcg,
    /// The per-game players, by side (`None` for net sides and sides not
    /// in this game).
    players: Vec<Option<Box<dyn Player>>>,
    /// The random move's number, once played.
    random_played: Option<usize>,
    /// The game lost before its first move by a player that failed to set
    /// it up (an engine that died at `boardsize`), as a match forfeits it:
    /// it once stopped the whole run.
    setup_failed: Option<GameOutcome>,
}

impl Slot {
    fn start(index: usize, run: &Run) -> Result<Slot> {
        let config = &run.config.game;
        let seed = super::game_seed(run.config.seed, index);
        let plan = run.plan.game(index, seed, config.max_moves);
        let mut players: Vec<Option<Box<dyn Player>>> = (0..run.sides.len()).map(|_| None).collect();
        let mut used: Vec<usize> = plan.sides.into_iter().chain(plan.random_move.map(|r| r.before)).collect();
        used.sort_unstable();
        used.dedup();
        // The batched sides' samples come from the game's own stream.
        let net_seed = used.iter().fold(seed, |s, &side| s.wrapping_add(run.sides[side].seed_shift()));
        let game = Game::new(config.size, config.rules());
        let mut setup_failed = None;
        for &s in &used {
            if players[s].is_none() {
                if let Some(player) = run.sides[s].player(run.device, seed) {
                    let mut player = player?;
                    match player.new_game(config.size, config.komi) {
                        Ok(()) => players[s] = Some(player),
                        Err(e) => {
                            // A side that plays no colour (the recipe's moves
                            // before the random one) loses no game: the run
                            // stops, as for a player that cannot start.
                            let Some(color) = plan.colour_of(s) else {
                                return Err(e.context(format!("{} failed to set up game {index}", run.sides[s].name())));
                            };
                            let error = format!("{color} failed to set up the game: {e:#}");
                            setup_failed = Some(GameOutcome::lost_by(game.clone(), color, Some(error), [0.0; 2]));
                            break;
                        }
                    }
                }
            }
        }
        Ok(Slot {
            index,
            seed,
            plan,
            game,
            rng: Pcg64Mcg::seed_from_u64(net_seed),
            players,
            random_played: None,
            setup_failed,
        })
    }

    /// Who chooses the next move.
    fn mover(&self) -> Mover {
        self.plan.mover(self.game.move_count() + 1, self.game.to_move())
    }

    /// `mv`, or the random move when `mv` would end the game (a second
    /// pass) before the random move of AlphaGo's recipe: the recipe's U
    /// clipped to the game.
    fn clip_random_move(&mut self, mv: Move) -> Move {
        let number = self.game.move_count() + 1;
        let ends = mv == Move::Pass && self.game.consecutive_passes() > 0;
        if !self.plan.random_move_instead(number, ends) {
            return mv;
        }
        self.plan.clip_random_move(number);
        self.uniform_move()
    }

    /// A legal point drawn uniformly (pass when none is left): the random
    /// move of AlphaGo's recipe, whose number it records.
    fn uniform_move(&mut self) -> Move {
        let color = self.game.to_move();
        let board = self.game.board();
        let legal: Vec<_> = board.empty_points().filter(|&p| self.game.check_point(p, color).is_ok()).collect();
        self.random_played = Some(self.game.move_count() + 1);
        match legal.len() {
            0 => Move::Pass,
            n => Move::Play(board.vertex(legal[self.rng.random_range(0..n)])),
        }
    }

    /// Side `s`'s player's move.
    fn ask(&mut self, s: usize) -> Choice {
        let color = self.game.to_move();
        let player = self.players[s].as_mut().expect("a per-game side has a player in its games");
        match player.genmove(color) {
            Ok(mv) => Choice::Move(mv),
            Err(e) => Choice::Failed(format!("{color} failed: {e:#}")),
        }
    }

    /// Plays `choice` (side `by`'s player's, if any), tells the other
    /// players, and returns the outcome if the game is over.
    fn apply(&mut self, choice: Choice, by: Option<usize>, config: &GameConfig) -> Option<GameOutcome> {
        let color = self.game.to_move();
        let mv = match choice {
            Choice::Move(mv) => mv,
            Choice::Failed(error) => return Some(self.forfeit(color, error)),
        };
        if mv == Move::Resign {
            self.game.play_unchecked(color, mv);
            return Some(GameOutcome::lost_by(self.game.clone(), color, None, [0.0; 2]));
        }
        if let Err(e) = self.game.play(color, mv) {
            let error = format!("{color} played an illegal move {}: {e}", mv.to_gtp(config.size));
            return Some(self.forfeit(color, error));
        }
        for (s, player) in self.players.iter_mut().enumerate() {
            let Some(player) = player.as_mut().filter(|_| Some(s) != by) else { continue };
            if let Err(e) = player.play(color, mv) {
                let error = format!("a player failed to take {color} {}: {e:#}", mv.to_gtp(config.size));
                return Some(self.forfeit(self.plan.colour_of(s).unwrap_or(color.opponent()), error));
            }
        }
        let reason = if self.game.is_over() {
            EndReason::Passes
        } else if self.game.move_count() >= config.max_moves {
            EndReason::MoveLimit
        } else {
            return None;
        };
        Some(counted(self.game.clone(), reason, config, self.seed, [0.0; 2]))
    }

    /// The game lost by `loser`, who failed or broke the rules.
    fn forfeit(&self, loser: Color, error: String) -> GameOutcome {
        GameOutcome::lost_by(self.game.clone(), loser, Some(error), [0.0; 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(threads: usize, batch: usize) -> PlayConfig {
        let game = GameConfig { size: 19, komi: 7.5, max_moves: 500, ownership_playouts: 0 };
        PlayConfig { game, seed: 1, threads, batch }
    }

    /// Fewer games than threads × batch are spread over every thread;
    /// more keep each thread's batch full.
    #[test]
    fn games_are_spread_over_every_thread() {
        for (threads, batch, games, expected) in [
            (16, 512, 2048, (16, 128)),
            (16, 512, 100_000, (16, 512)),
            (2, 32, 100, (2, 32)),
            (2, 32, 20, (2, 10)),
            (2, 32, 21, (2, 11)),
            (16, 512, 3, (3, 1)),
            (4, 1, 10, (4, 1)),
        ] {
            let (t, b) = config(threads, batch).workers(games);
            assert_eq!((t, b), expected, "{games} games, {threads} threads of {batch}");
            assert!(t * b >= games || b == batch, "{games} games do not fit {t} threads of {b}");
        }
    }
}
