//! AlphaGo's second stage, `go-train train-rl`: the policy improved by
//! reinforcement. Each iteration the learner (sampling at a temperature)
//! plays a minibatch of games against an opponent drawn uniformly from the
//! pool ([`pool`]), colours alternating, and takes one SGD step of
//! REINFORCE on its own moves ([`reinforce`]); every N iterations a
//! snapshot joins the pool, and every K it plays the policy it started
//! from ([`metrics`]).
//!
//! Checkpoint folder:
//!
//! | path | what |
//! |---|---|
//! | `rl.json` | the run's settings ([`RlConfig`]) |
//! | `last/` | weights, optimizer state and iterations done ([`checkpoint`]) |
//! | `best.safetensors` | the weights that scored best against the start policy |
//! | `pool/iteration-NNNNNN.safetensors` | the snapshots in the pool |
//! | `metrics.jsonl`, `metrics.svg`, `metrics.png` | metrics per iteration, and their plot |
//!
//! Resuming is exact on the CPU (with the same number of threads): an
//! iteration's games are a function of the seed, the iteration and the
//! weights, its opponent of the seed and the iteration, and the weights and
//! the optimizer's momentum come back from the checkpoint.

pub mod metrics;
pub mod pool;
pub mod reinforce;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use candle_core::Device;
use serde::{Deserialize, Serialize};

use super::checkpoint::{self, TrainState};
use super::config::optimizer_out_of_range;
use super::optim::OptimizerConfig;
use super::run::Start;
use crate::atomic::{remove_if_present, write_atomic};
use crate::bounds;
use crate::eval::arena::stats::{wilson_interval, Z95};
use crate::eval::arena::GameConfig;
use crate::go::zobrist::mix;
use crate::lock::Lock;
use crate::nn::{weights, Output};
use crate::progress::Progress;
use crate::search::{NetEval, NetSource};
use crate::selfplay::{play_games, Finished, Plan, PlayConfig, Side};
use metrics::{IterationMetrics, Match};
use pool::Pool;
use reinforce::{Baseline, Examples, Weighting};

/// The run's settings, saved as `rl.json`. A key it does not have is
/// refused: a misspelt one, edited in by hand, would otherwise be ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RlConfig {
    /// The policy the run started from (the SL policy) as it was named:
    /// a path, or `built-in policy.safetensors`. The run plays from its
    /// copy, `pool/start.safetensors`.
    pub init: PathBuf,
    /// The checkpoint folder.
    pub out: PathBuf,
    /// Iterations in all.
    pub iterations: u64,
    /// Games a minibatch.
    pub games: usize,
    /// A snapshot joins the pool every this many iterations.
    pub pool_every: u64,
    pub optimizer: OptimizerConfig,
    pub baseline: Baseline,
    /// The share of the learner's moves each step learns from (1: all).
    #[serde(default = "all_moves")]
    pub move_fraction: f64,
    /// Both sides sample their moves at this temperature.
    pub temperature: f32,
    /// A match against the start policy every this many iterations (0:
    /// none).
    pub eval_every: u64,
    /// Games of that match.
    pub eval_games: usize,
    pub komi: f32,
    pub max_moves: usize,
    pub scoring_playouts: usize,
    pub seed: u64,
    /// auto, cpu, cuda or cuda:N.
    pub device: String,
    /// Self-play worker threads (0: one per core).
    pub threads: usize,
    /// Games each worker plays at once.
    pub batch: usize,
    /// Positions per backward pass.
    pub chunk: usize,
}

impl RlConfig {
    /// The settings of the measured run (docs/guide/alphago-stages.md):
    /// AlphaGo's REINFORCE with temperature 1, 64 games a minibatch
    /// (AlphaGo: 128) and a snapshot every 10 iterations (AlphaGo: 500 of
    /// its 10,000), but SGD with momentum 0.9 at 0.0003, the minibatch's
    /// mean outcome as baseline and a quarter of the learner's moves: its
    /// best checkpoint won 70.6% of 800 games against its start, and runs
    /// of these settings declined after iteration 30 to 40, so 40 it is.
    pub fn new(init: PathBuf, out: PathBuf) -> RlConfig {
        RlConfig {
            init,
            out,
            iterations: 40,
            games: 64,
            pool_every: 10,
            optimizer: OptimizerConfig::sgd(0.0003, 0.9),
            baseline: Baseline::Mean,
            move_fraction: 0.25,
            temperature: 1.0,
            eval_every: 10,
            eval_games: 64,
            komi: 7.5,
            max_moves: 500,
            scoring_playouts: crate::search::ownership::DEFAULT_PLAYOUTS,
            seed: 1,
            device: "cpu".into(),
            threads: 0,
            batch: 32,
            chunk: 256,
        }
    }

    /// Every setting in range, the bad one named.
    pub fn check(&self) -> Result<()> {
        let counts = [
            ("iterations", self.iterations as usize),
            ("games", self.games),
            ("pool_every", self.pool_every as usize),
            ("max_moves", self.max_moves),
            ("scoring_playouts", self.scoring_playouts),
            ("batch", self.batch),
            ("chunk", self.chunk),
        ];
        if let Some((name, _)) = counts.iter().find(|(_, v)| *v == 0) {
            bail!("{name} 0: give at least 1");
        }
        // The flags' bounds, for a settings file edited by hand: a `games`
        // of 2^62 once overflowed the allocation of a minibatch.
        let limits = [
            ("games", self.games, bounds::RL_GAMES),
            ("eval_games", self.eval_games.max(1), bounds::RL_GAMES),
            ("batch", self.batch, bounds::RL_GAMES),
            ("chunk", self.chunk, bounds::RL_GAMES),
            ("max_moves", self.max_moves, bounds::MAX_MOVES),
            ("scoring_playouts", self.scoring_playouts, bounds::SCORING_PLAYOUTS),
            ("threads", self.threads.max(1), bounds::THREADS),
        ];
        for (name, value, domain) in limits {
            domain.count_value(value as u64).map_err(|refusal| anyhow!("{name} {value}: {refusal}"))?;
        }
        let wrong = optimizer_out_of_range(self.optimizer);
        if !wrong.is_empty() {
            bail!("{}", wrong.join("; "));
        }
        if self.eval_every > 0 && self.eval_games == 0 {
            bail!("eval_games 0: a match against the start policy needs games (eval_every 0 turns it off)");
        }
        if !(self.move_fraction > 0.0 && self.move_fraction <= 1.0) {
            bail!("move_fraction {:?}: give a share above 0 and at most 1", self.move_fraction);
        }
        if self.games < 2 && self.baseline == Baseline::Mean {
            bail!(
                "games {} with baseline mean: the mean outcome of one game is its outcome, so every move would \
                 weigh 0 and nothing be learnt: give games 2 or more, or baseline none",
                self.games
            );
        }
        // Even if every game ran to max_moves, an iteration would expect to
        // keep less than one of the learner's moves: most would learn nothing.
        let most = self.games as f64 * self.max_moves.div_ceil(2) as f64 * self.move_fraction;
        if most < 1.0 {
            bail!(
                "move_fraction {:?}: of the learner's at most {} moves an iteration (games {}, max_moves {}) it \
                 would keep {most:.2e} on average, so steps would learn from no position: give a larger share",
                self.move_fraction,
                self.games * self.max_moves.div_ceil(2),
                self.games,
                self.max_moves
            );
        }
        if let Err(refusal) = bounds::RL_TEMPERATURE.real_value(self.temperature as f64) {
            bail!("temperature {:?}: {refusal}", self.temperature);
        }
        // The range every other komi takes (it was ±361 here).
        if let Err(e) = crate::bounds::KOMI.real_value(self.komi as f64) {
            bail!("komi {}: {e}", self.komi);
        }
        Ok(())
    }

    fn play_config(&self, seed: u64) -> PlayConfig {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = if self.threads > 0 { self.threads } else { cores };
        PlayConfig {
            game: GameConfig {
                size: crate::nn::BOARD,
                komi: self.komi,
                max_moves: self.max_moves,
                ownership_playouts: self.scoring_playouts,
            },
            seed,
            threads,
            batch: self.batch,
        }
    }
}

fn all_moves() -> f64 {
    1.0
}

/// The settings file in the checkpoint folder.
pub const CONFIG_FILE: &str = super::run_folder::RL_CONFIG_FILE;

/// Reads the settings a run saved in `out`.
pub fn saved_config(out: &Path) -> Result<Option<RlConfig>> {
    let path = out.join(CONFIG_FILE);
    crate::atomic::read_if_present(&path, "the run's settings")?
        .map(|text| {
            let config: RlConfig = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a train-rl settings file", path.display()))?;
            config.check().with_context(|| format!("{}: a setting out of range", path.display()))?;
            Ok(config)
        })
        .transpose()
}

/// What a run reports.
pub struct RlSummary {
    pub metrics: Vec<IterationMetrics>,
    /// Whether it had nothing left to do.
    pub already_done: bool,
    /// Iterations the run has done, this call's with the earlier ones.
    pub done: u64,
}

/// Runs `config` (see the module's notes); with `stop_after`, stops
/// cleanly after the last iteration expected to end within that time.
///
/// `start_policy` is the policy a fresh run starts from (`config.init`
/// names it); the run keeps a copy in its pool folder, which it and every
/// resumption play against as the start policy, so that a run never
/// depends on a file outside its folder staying as it was.
pub fn train_rl(
    config: &RlConfig,
    start_policy: &NetSource,
    start: Start,
    stop_after: Option<Duration>,
) -> Result<RlSummary> {
    let run_started = Instant::now();
    config.check()?;
    let out = &config.out;
    let device = crate::nn::device(&config.device)?;
    let kept_start = out.join("pool").join(START_FILE);
    let resuming = match start {
        Start::Resume => true,
        Start::ResumeOrStart => kept_start.is_file(),
        Start::Fresh | Start::Overwrite => false,
    };
    // A fresh run's start policy is checked before the folder is touched.
    let fresh = match resuming {
        false => Some(NetEval::load_source(start_policy, &device, Output::MoveLogProbs).context("the start policy")?),
        true => None,
    };
    super::run_folder::check_not_a_dataset(out)?;
    let _lock = Lock::create_folder(out, "the run's folder (--out) holds its checkpoints")?;
    let learner = match fresh {
        Some(learner) => {
            // Read before --force clears the folder, which may hold it.
            let start_bytes = start_policy.bytes()?;
            ready_folder(out, start)?;
            std::fs::create_dir_all(out.join("pool"))?;
            write_atomic(&kept_start, &start_bytes)?;
            learner
        }
        None if !kept_start.is_file() => {
            bail!("{}: the run's start policy is missing, so --resume cannot continue it", kept_start.display())
        }
        None => NetEval::load(&kept_start, &device, Output::MoveLogProbs).context("the run's start policy")?,
    };
    if resuming {
        check_pool_every(out, config.pool_every)?;
    }
    let learner = Arc::new(learner);
    let model = learner.model();
    let mut optimizer = config.optimizer.build(model.parameters());
    let last = out.join("last");
    checkpoint::recover(&last)?;
    let mut state = if last.join(checkpoint::STATE_FILE).is_file() {
        checkpoint::load(&last, model, optimizer.as_mut())?
    } else {
        // A run killed before its first checkpoint starts again; one that
        // has lost its checkpoint must not. Each iteration writes its
        // metrics (and best net) before its checkpoint, so the first
        // iteration's alone prove nothing: a later one's were written after
        // a checkpoint.
        let trained = metrics::read(&out.join("metrics.jsonl"), u64::MAX)?.iter().any(|m| m.iteration > 1);
        if resuming && trained {
            bail!(
                "{}: the run's last checkpoint is missing, so --resume cannot continue it exactly (--force starts again)",
                last.join(checkpoint::STATE_FILE).display()
            );
        }
        TrainState::default()
    };
    // A damaged best net is replaced by the next match's winner, as a
    // supervised run replaces one (`run_folder::damage`).
    let best = out.join("best.safetensors");
    if let Some(how) = (state.step > 0 && best.exists()).then(|| super::run_folder::damage(&best)).flatten() {
        super::run_folder::say_best_lost(&best, &how, "iteration", state.step);
        state.best_metric = None;
    }
    let mut pool = Pool::open(&kept_start, &out.join("pool"), config.pool_every, state.step)?;
    let mut all = metrics::read(&out.join("metrics.jsonl"), state.step)?;
    if (all.len() as u64) < state.step {
        crate::say!(
            "warning: {} records {} iterations, the checkpoint is at iteration {}: its plot lacks the iterations lost",
            out.join("metrics.jsonl").display(),
            all.len(),
            state.step
        );
    }
    // A finished run keeps the settings it trained with.
    if state.step >= config.iterations {
        return Ok(RlSummary { metrics: all, already_done: true, done: state.step });
    }
    // Only once the run is known to go on with these settings: a resume
    // refused for one of them leaves the run's own.
    write_atomic(&out.join(CONFIG_FILE), serde_json::to_string_pretty(config)?.as_bytes())?;
    let features = model.features();
    let progress = Progress::new("train-rl", config.iterations, "iterations");
    progress.resume_from(state.step);
    let mut slowest = Duration::ZERO;
    for iteration in state.step + 1..=config.iterations {
        if stop_after.is_some_and(|limit| run_started.elapsed() + slowest > limit) {
            crate::say!("train-rl: stopping before iteration {iteration} (--stop-after); --resume continues");
            break;
        }
        let started = Instant::now();
        let member = pool.draw(config.seed, iteration);
        let opponent = pool.net(member, &device)?;
        let seed = mix(config.seed ^ mix(iteration));
        let games = play_match(config, &learner, opponent, config.games, seed, &device)?;
        let play_seconds = started.elapsed().as_secs_f64();
        let weighting = Weighting {
            baseline: config.baseline,
            move_fraction: config.move_fraction,
            seed,
            temperature: config.temperature,
        };
        let examples = Examples::of(&games, 0, features, &weighting)?;
        if examples.is_empty() {
            progress.note(&format!(
                "train-rl: iteration {iteration} learnt from no position (the learner only passed, or \
                 --move-fraction {} kept none of its moves)",
                config.move_fraction
            ));
        }
        let (grads, loss, mean_log_p) = examples.gradient(model, config.chunk)?;
        // Before anything of the iteration is written: a net of NaNs once
        // went on to be saved, resumed and reviewed with.
        let diverged = |what: String| {
            anyhow::anyhow!(
                "{what} at iteration {iteration}: lower --lr (nothing of this iteration was saved: --resume plays it \
                 again from the last checkpoint)"
            )
        };
        if !(loss.is_finite() && mean_log_p.is_finite()) {
            return Err(diverged(format!("the loss became {loss}")));
        }
        optimizer.step(&grads)?;
        if !model.weights_finite()? {
            return Err(diverged("the weights became infinite or NaN".into()));
        }
        let train_seconds = started.elapsed().as_secs_f64() - play_seconds;
        if iteration % config.pool_every == 0 {
            pool.add(iteration, model)?;
        }
        let against_start = if config.eval_every > 0 && iteration % config.eval_every == 0 {
            let start_net = pool.net(0, &device)?;
            let eval_seed = mix(config.seed ^ mix(iteration ^ 0x4556_414C));
            Some(score(&play_match(config, &learner, start_net, config.eval_games, eval_seed, &device)?))
        } else {
            None
        };
        let played = score(&games);
        let m = IterationMetrics {
            iteration,
            opponent: pool.name(member).to_string(),
            games: played.games,
            wins: played.wins,
            win_rate: played.win_rate,
            mean_moves: games.iter().map(|g| g.outcome.game.move_count() as f64).sum::<f64>() / games.len() as f64,
            positions: examples.len(),
            loss,
            mean_log_p: Some(mean_log_p),
            lr: optimizer.learning_rate(),
            pool: pool.len(),
            seconds: started.elapsed().as_secs_f64(),
            play_seconds: Some(play_seconds),
            train_seconds: Some(train_seconds),
            against_start,
        };
        progress.set_message(describe(&m));
        if let Some(a) = against_start {
            if state.best_metric.is_none_or(|best| a.win_rate > best) {
                state.best_metric = Some(a.win_rate);
                weights::save(&out.join("best.safetensors"), model, Some(iteration))?;
            }
        }
        all.push(m);
        metrics::write(out, &all)?;
        state.epoch = iteration;
        state.step = iteration;
        checkpoint::save(&last, model, optimizer.as_ref(), &state)?;
        progress.inc(1);
        slowest = slowest.max(started.elapsed());
    }
    progress.finish();
    Ok(RlSummary { metrics: all, already_done: false, done: state.step })
}

/// Refuses a resume with another snapshot interval than the run's own: its
/// pool is the snapshots of that interval, and another one would leave
/// some of them out of it (every 4 after every 2: iteration 2's) or find
/// some missing.
fn check_pool_every(out: &Path, pool_every: u64) -> Result<()> {
    match saved_config(out)? {
        Some(saved) if saved.pool_every != pool_every => bail!(
            "{}: the run takes a snapshot into its pool every {} iterations (pool_every {}), and --pool-every \
             {pool_every} would look for snapshots of other iterations than its own: resume without --pool-every, or \
             start another run",
            out.join(CONFIG_FILE).display(),
            saved.pool_every,
            saved.pool_every
        ),
        _ => Ok(()),
    }
}

/// The start policy's copy in the run's pool folder.
pub const START_FILE: &str = "start.safetensors";

/// Refuses a folder with a run in it unless resuming or replacing; with
/// [`Start::Overwrite`], removes the run's files.
fn ready_folder(out: &Path, start: Start) -> Result<()> {
    // Not even --force replaces a supervised trainer's run: it was once
    // called "a train-rl run", and --force deleted it.
    let supervised = super::run_folder::CONFIG_FILE;
    if out.join(supervised).exists() && !out.join(CONFIG_FILE).exists() {
        bail!(
            "{} holds a run of train-policy, train-playout or train-value ({supervised}), not of train-rl: \
             name another --out",
            out.display()
        );
    }
    let ours = ["last", "last.new", "last.old", "pool", "best.safetensors", CONFIG_FILE, "metrics.jsonl"];
    // A fresh run writes its copy of the start policy before its settings:
    // killed between the two, it left a pool of that copy alone, which no
    // resume takes (it has no settings) and the next fresh run replaces.
    let unfinished_start = |name: &&str| {
        *name == "pool"
            && !out.join(CONFIG_FILE).exists()
            && std::fs::read_dir(out.join("pool")).is_ok_and(|entries| {
                entries.flatten().all(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name == START_FILE || name.ends_with(".tmp")
                })
            })
    };
    let holds_a_run = ours.iter().filter(|name| !unfinished_start(name)).any(|name| out.join(name).exists());
    match start {
        Start::Fresh if holds_a_run => {
            bail!("{} holds a train-rl run: --resume to continue it, --force to replace it", out.display())
        }
        Start::Overwrite => {
            ours.iter().chain(&["metrics.svg", "metrics.png"]).try_for_each(|name| remove_if_present(&out.join(name)))
        }
        _ => Ok(()),
    }
}

/// `games` games of the learner (side A: Black in even games) against
/// `opponent`, both sampling at the run's temperature, in index order.
fn play_match(
    config: &RlConfig,
    learner: &Arc<NetEval>,
    opponent: Arc<NetEval>,
    games: usize,
    seed: u64,
    device: &Device,
) -> Result<Vec<Finished>> {
    let sides = [
        Side::net("learner", learner.clone(), config.temperature),
        Side::net("opponent", opponent, config.temperature),
    ];
    let finished = Mutex::new(Vec::new());
    let keep = |done: Finished| -> Result<()> {
        finished.lock().unwrap_or_else(|p| p.into_inner()).push(done);
        Ok(())
    };
    let indices: Vec<usize> = (0..games).collect();
    play_games(&sides, &Plan::Alternate { a: 0, b: 1 }, &indices, &config.play_config(seed), device, &keep)?;
    let mut finished = finished.into_inner().unwrap_or_else(|p| p.into_inner());
    finished.sort_by_key(|g| g.index);
    Ok(finished)
}

/// The learner's (side 0's) score in `games`.
fn score(games: &[Finished]) -> Match {
    let wins: f64 = games
        .iter()
        .map(|g| match g.outcome.winner {
            None => 0.5,
            Some(w) => (g.plan.side(w) == 0) as u8 as f64,
        })
        .sum();
    let n = games.len() as f64;
    Match { games: games.len(), wins, win_rate: wins / n.max(1.0), interval: wilson_interval(wins, n, Z95) }
}

/// One line about an iteration, for the progress bar.
fn describe(m: &IterationMetrics) -> String {
    let mut text = format!("won {:.0}% against {}", 100.0 * m.win_rate, m.opponent);
    if let Some(a) = m.against_start {
        text.push_str(&format!(", {:.0}% against the start", 100.0 * a.win_rate));
    }
    text
}
