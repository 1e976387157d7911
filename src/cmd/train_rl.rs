//! `go-train train-rl`: a policy improved by reinforcement learning.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;

use go_train::bounds::{self, count_flag, real_flag};
use go_train::search::NetSource;
use go_train::train::optim::OptimizerConfig;
use go_train::train::rl::reinforce::Baseline;
use go_train::train::rl::{saved_config, train_rl, RlConfig, CONFIG_FILE, START_FILE};
use go_train::train::run::Start;
use go_train::train::run_folder::changed_settings;

/// Improve a policy by playing: AlphaGo's second stage.
///
/// Each iteration the learner, starting from a policy checkpoint (the SL
/// policy), plays --games games against an opponent drawn uniformly from a
/// pool (the start policy, and a snapshot of the learner every
/// --pool-every iterations), colours alternating, both sampling their moves
/// at --temperature; then one SGD step of REINFORCE: each of the learner's
/// moves pushed up if it won its game and down if it lost,
/// Δρ = lr/games · Σ Σ (z − b)·∇log p(a|s), z = ±1, b the mean outcome
/// (or 0, --baseline none). The learner learns where to play, not when to
/// pass: its passes are not pushed. Every --eval-every iterations the
/// learner plays --eval-games against the start policy, and the best of
/// those checkpoints is best.safetensors. Metrics per iteration go to
/// metrics.jsonl and metrics.svg/png; a checkpoint after every iteration; --resume continues exactly (on the CPU, on as many cores: the nets take one thread per core, and the number of threads rounds their gradients), with
/// the run's own settings (rl.json) and any flag given overriding them
/// (but --pool-every, which a resume must leave as the run's).
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train train-rl --out checkpoints/rl   # from the shipped policy
  go-train train-rl --out checkpoints/rl --resume --stop-after 3000   # in segments
  go-train train-rl --init checkpoints/policy --out checkpoints/rl2 --games 128 --lr 0.0001   # from a train-policy run
  go-train selfplay --games 400 --out matches/rl-vs-sl --agent policy:policy=checkpoints/rl/best.safetensors,temperature=1 --opponent policy:temperature=1")]
pub struct Args {
    /// The policy to start from: a weights file or checkpoint folder
    /// [default: the shipped policy].
    #[arg(long)]
    init: Option<PathBuf>,
    /// Checkpoint folder.
    #[arg(long, default_value = "checkpoints/rl")]
    out: PathBuf,
    /// Iterations in all [default: 40].
    #[arg(long)]
    iterations: Option<u64>,
    /// Games a minibatch [default: 64].
    #[arg(long, value_parser = count_flag::<usize>(bounds::RL_GAMES))]
    games: Option<usize>,
    /// A snapshot of the learner joins the opponent pool every this many
    /// iterations [default: 10; a resume keeps the run's own].
    #[arg(long)]
    pool_every: Option<u64>,
    /// Learning rate of SGD [default: 0.0003; AlphaGo's: 0.001].
    #[arg(long)]
    lr: Option<f64>,
    /// Momentum of SGD [default: 0.9; AlphaGo's: 0].
    #[arg(long)]
    momentum: Option<f64>,
    /// none (AlphaGo's) or mean (the iteration's mean outcome) [default:
    /// mean].
    #[arg(long)]
    baseline: Option<Baseline>,
    /// The share of the learner's moves each step learns from, each kept
    /// at random and weighing 1/share [default: 0.25; AlphaGo: 1, all].
    #[arg(long)]
    move_fraction: Option<f64>,
    /// Temperature both sides sample at, 0.001 to 10 [default: 1].
    #[arg(long, value_parser = real_flag::<f32>(bounds::RL_TEMPERATURE))]
    temperature: Option<f32>,
    /// A match against the start policy every this many iterations, 0 for
    /// none [default: 10].
    #[arg(long)]
    eval_every: Option<u64>,
    /// Games of that match [default: 64].
    #[arg(long, value_parser = count_flag::<usize>(bounds::RL_GAMES))]
    eval_games: Option<usize>,
    /// Komi [default: 7.5].
    #[arg(long)]
    komi: Option<f32>,
    /// Moves after which a game is scored as it stands [default: 500].
    #[arg(long, value_parser = count_flag::<usize>(bounds::MAX_MOVES))]
    max_moves: Option<usize>,
    /// Seeds the games and the opponents [default: 1].
    #[arg(long)]
    seed: Option<u64>,
    /// auto, cpu, cuda or cuda:N [default: cpu].
    #[arg(long)]
    device: Option<String>,
    /// Self-play worker threads [default: one per core].
    #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
    threads: Option<usize>,
    /// Games each worker plays at once [default: 32].
    #[arg(long, value_parser = count_flag::<usize>(bounds::RL_GAMES))]
    batch: Option<usize>,
    /// Positions a backward pass [default: 256].
    #[arg(long, value_parser = count_flag::<usize>(bounds::RL_GAMES))]
    chunk: Option<usize>,
    /// Continue the run in --out.
    #[arg(long, conflicts_with = "force")]
    resume: bool,
    /// Replace the run in --out.
    #[arg(long)]
    force: bool,
    /// Stop cleanly, after a checkpoint, before an iteration that would end
    /// past this many seconds from the start.
    #[arg(long, value_name = "SECONDS", value_parser = super::train::parse_seconds)]
    stop_after: Option<Duration>,
}

pub fn run(args: Args) -> Result<()> {
    let saved = if args.resume { saved_config(&args.out)? } else { None };
    if args.resume && saved.is_none() {
        bail!("{}: no train-rl run to resume here ({} is missing)", args.out.display(), CONFIG_FILE);
    }
    // A resumed run plays from the copy of its start policy it keeps: the
    // shipped nets (and GO_TRAIN_NETS) are no concern of it.
    let start_policy = match &args.init {
        Some(path) => Some(NetSource::File(path.clone())),
        None if saved.is_some() => None,
        None => super::nets::NetPaths::default().defaults(go_train::nn::BOARD, None, true)?.policy,
    };
    let mut config = match saved.clone() {
        // The folder given, wherever the run was started from.
        Some(saved) => RlConfig { out: args.out.clone(), ..saved },
        None => {
            let init = start_policy.as_ref().context("give --init (no shipped policy here)")?;
            RlConfig::new(PathBuf::from(init.to_string()), args.out.clone())
        }
    };
    if args.resume && args.init.as_ref().is_some_and(|i| !is_run_start(i, &config)) {
        bail!(
            "--init {}: the run in {} started from {}",
            args.init.unwrap().display(),
            args.out.display(),
            config.init.display()
        );
    }
    macro_rules! set {
        ($($field:ident),*) => {$(if let Some(v) = args.$field.clone() { config.$field = v; })*};
    }
    set!(
        iterations,
        games,
        pool_every,
        baseline,
        move_fraction,
        temperature,
        eval_every,
        eval_games,
        komi,
        max_moves,
        seed
    );
    set!(device, threads, batch, chunk);
    if args.lr.is_some() || args.momentum.is_some() {
        let OptimizerConfig::Sgd { lr, momentum, weight_decay } = config.optimizer else {
            bail!("{}: its run does not train with SGD", args.out.display());
        };
        config.optimizer = OptimizerConfig::Sgd {
            lr: args.lr.unwrap_or(lr),
            momentum: args.momentum.unwrap_or(momentum),
            weight_decay,
        };
    }
    if let Some(m) = args.momentum.filter(|m| !(m.is_finite() && (0.0..1.0).contains(m))) {
        bail!("--momentum {m}: give a number from 0 to below 1");
    }
    config.check().context("train-rl settings")?;
    if let Some(saved) = &saved {
        let changed = changed_settings(saved, &config);
        if !changed.is_empty() {
            go_train::say!(
                "note: {}: resuming with settings changed: {}",
                config.out.join(CONFIG_FILE).display(),
                changed.join("; ")
            );
        }
    }
    go_train::nn::init_threads(None)?;
    let start = match (args.resume, args.force) {
        (true, _) => Start::Resume,
        (_, true) => Start::Overwrite,
        _ => Start::Fresh,
    };
    let start_policy = start_policy.unwrap_or_else(|| NetSource::File(config.init.clone()));
    let summary = train_rl(&config, &start_policy, start, args.stop_after)?;
    if summary.already_done {
        go_train::say!(
            "{}: {} iterations are done, --iterations {} asks for no more",
            config.out.display(),
            summary.done,
            config.iterations
        );
    }
    if let Some(last) = summary.metrics.iter().rev().find_map(|m| m.against_start.map(|a| (m.iteration, a))) {
        let (iteration, a) = last;
        go_train::say!(
            "after iteration {iteration}: won {:.0} of {} against the start policy ({:.1}%, 95% interval {:.1}%–{:.1}%)",
            a.wins,
            a.games,
            100.0 * a.win_rate,
            100.0 * a.interval.0,
            100.0 * a.interval.1
        );
    }
    go_train::say!("checkpoints: {}", config.out.display());
    Ok(())
}

/// Whether `--init` on a resume names the policy the run started from:
/// the same weights file however the path is spelt (`./ref`, from another
/// working folder, its checkpoint folder), or a file with the bytes of the
/// copy the run keeps.
fn is_run_start(init: &Path, config: &RlConfig) -> bool {
    let file = |p: &Path| go_train::nn::weights::resolve(p).ok().and_then(|f| std::fs::canonicalize(f).ok());
    if *init == config.init || file(init).is_some_and(|f| Some(f) == file(&config.init)) {
        return true;
    }
    let kept = config.out.join("pool").join(START_FILE);
    match file(init).map(std::fs::read) {
        Some(Ok(bytes)) => std::fs::read(kept).is_ok_and(|k| k == bytes),
        _ => false,
    }
}
