//! `go-train bench`: speed measurements that back the figures in the README.

use std::time::{Duration, Instant};

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use go_train::bounds::{self, count_flag, real_flag, Domain};
use go_train::dataset::filter::{filter, find_sgf_files, Criteria};
use go_train::dataset::prepare::{prepare as prepare_dataset, PrepareOptions};
use go_train::dataset::{decode_rate, Dataset, DecodeRate, Split};
use go_train::features::FeatureSet;
use go_train::go::{Board, Game, Rules};
use go_train::progress::Progress;
use go_train::search::random::{playout, RandomAgent};

mod search;
mod train;

/// Measure the speed of go-train's parts on this machine.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train bench playouts
  go-train bench playouts --size 9 --seconds 5
  go-train bench prepare --data ../shared/datasets/kgs-6d
  go-train bench reader --data datasets/kgs
  go-train bench reader --data datasets/kgs --split validation --threads 4 --seconds 5
  go-train bench train --net policy --batch 100
  go-train bench search")]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Random playouts from the empty board until both pass, on one thread.
    #[command(after_help = "Examples:
  go-train bench playouts
  go-train bench playouts --size 9 --seconds 5
  go-train bench playouts --playouts 2000   # a fixed amount of work, for profilers")]
    Playouts {
        /// Board size.
        #[arg(long, default_value_t = 19, value_parser = count_flag::<usize>(bounds::BOARD_SIZE))]
        size: usize,
        /// How long to run.
        #[arg(long, default_value_t = 10.0, value_parser = real_flag::<f64>(bounds::SECONDS))]
        seconds: f64,
        /// Seed of the random agent.
        #[arg(long, default_value_t = 1, value_parser = count_flag::<u64>(bounds::SEED))]
        seed: u64,
        /// Run exactly this many playouts instead of for a time (for
        /// instruction-count profiling, which must be repeatable).
        #[arg(long, value_parser = count_flag::<u64>(Domain::Count { min: 1, max: u64::MAX }))]
        playouts: Option<u64>,
    },
    /// filter + prepare over a whole collection, every game with a move kept (handicap,
    /// any komi, any year): positions/s end to end, bytes per position on
    /// disk, peak memory.
    #[command(after_help = "Examples:
  go-train bench prepare
  go-train bench prepare --data ../shared/datasets/kgs-6d --threads 2
  go-train bench prepare --features extended")]
    Prepare {
        /// Folder of SGF files.
        #[arg(long, default_value = "../shared/datasets/kgs-6d")]
        data: PathBuf,
        /// Where to write the dataset [default: a temporary folder, removed after].
        #[arg(long)]
        out: Option<PathBuf>,
        /// Worker threads [default: all cores].
        #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
        threads: Option<usize>,
        /// Input planes: seed or extended.
        #[arg(long, default_value = "seed")]
        features: FeatureSet,
    },
    /// Records decoded into f32 batches of 100 (shuffled, with symmetries),
    /// on 1 thread and on all: what the dataset reader feeds a trainer.
    #[command(after_help = "Examples:
  go-train bench reader --data datasets/kgs
  go-train bench reader --data datasets/kgs --split validation --threads 4 --seconds 5")]
    Reader {
        /// The dataset folder (holding manifest.json).
        #[arg(long)]
        data: PathBuf,
        /// Which split to read.
        #[arg(long, default_value = "train")]
        split: Split,
        /// Threads of the second run [default: all cores].
        #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
        threads: Option<usize>,
        /// How long each run lasts.
        #[arg(long, default_value_t = 10.0, value_parser = real_flag::<f64>(bounds::SECONDS))]
        seconds: f64,
    },
    /// Training speed of the nets: forward, backward and optimizer step on
    /// random planes (30% ones) and random targets (legal moves, or
    /// results), as scripts/torch_nets.py measures PyTorch.
    #[command(after_help = "Examples:
  go-train bench train
  go-train bench train --net policy,resnet-policy:6x64 --batch 100,256 --seconds 10
  go-train bench train --net all --features extended
  go-train bench train --device cuda --net all --batch 100,1024   # a CUDA build on a GPU
  go-train bench train --net policy --steps 20   # a fixed amount of work, for profilers
  go-train bench train --device cuda --net resnet-policy:10x128 --precision bf16
  GO_TRAIN_FUSED_OPTIM=0 go-train bench train    # without one fused path, to A/B it")]
    Train(TrainArgs),
    /// MCTS seconds per move and iterations/s with the nets it plays with,
    /// on positions of a real game (the settings interleaved), to compare
    /// search settings at equal time (docs/results/benchmarks.md, Search).
    #[command(after_help = "Examples:
  go-train bench search
  go-train bench search --agent mcts:selection=puct --agent mcts:selection=puct,rollout=0,iterations=400
  go-train bench search --sgf GAME.sgf --every 20 --policy checkpoints/policy")]
    Search(search::SearchArgs),
}

#[derive(clap::Args)]
struct TrainArgs {
    /// Which nets, comma-separated: policy, playout, value, all (the
    /// three), or a residual net such as resnet-policy:6x64.
    #[arg(long, default_value = "all")]
    net: String,
    /// Samples per training step; a comma-separated list runs each size.
    #[arg(long, default_value = "100", value_delimiter = ',', value_parser = count_flag::<usize>(Domain::Count { min: 1, max: 1 << 20 }))]
    batch: Vec<usize>,
    /// On a GPU, TF32 tensor-core matrix products (PyTorch's default for
    /// convolutions); `--tf32 false` for full float32.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    tf32: bool,
    /// What activations and convolutions compute in: f32, or on a GPU
    /// bf16 (weights, heads and optimizer stay f32).
    #[arg(long, default_value = "f32")]
    precision: go_train::nn::Precision,
    /// Input planes: seed (15) or extended.
    #[arg(long, default_value = "seed")]
    features: FeatureSet,
    /// How long to train each net.
    #[arg(long, default_value_t = 5.0, value_parser = real_flag::<f64>(bounds::SECONDS))]
    seconds: f64,
    /// Train each net exactly this many timed steps instead of for a time
    /// (a fixed amount of work, for instruction-count profilers).
    #[arg(long, value_parser = count_flag::<usize>(Domain::Count { min: 1, max: 1 << 30 }))]
    steps: Option<usize>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// CPU threads (default: one per core).
    #[arg(long, value_parser = count_flag::<usize>(bounds::THREADS))]
    threads: Option<usize>,
    /// Seed of the weights and the data.
    #[arg(long, default_value_t = 1, value_parser = count_flag::<u64>(bounds::SEED))]
    seed: u64,
    /// The optimizers' learning rate [default: the seed's, as in scripts/torch_nets.py: SGD
    /// 0.01 for the move nets, Adam 0.001 for the value net]. Every step
    /// trains on the same batch: a long run at a high rate can diverge.
    #[arg(long, value_parser = real_flag::<f32>(bounds::LEARNING_RATE))]
    lr: Option<f32>,
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Prepare { data, out, threads, features } => prepare(&data, out, threads, features),
        What::Playouts { size, seconds, seed, playouts: count } => playouts(size, seconds, seed, count),
        What::Reader { data, split, threads, seconds } => reader(&data, split, threads, seconds),
        What::Train(args) => train::run(args),
        What::Search(args) => search::run(args),
    }
}

fn playouts(size: usize, seconds: f64, seed: u64, count: Option<u64>) -> Result<()> {
    if !Board::valid_size(size) {
        bail!("--size {size}: board sizes 2 to 25 are supported");
    }
    let mut agent = RandomAgent::new(seed);
    let empty = Game::new(size, Rules::CHINESE);
    // One game, reset to the empty board before each playout: cloning one
    // allocated and freed a dozen buffers per playout.
    let mut game = empty.clone();
    let budget = Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--seconds {seconds}: give a positive number of seconds"))?;
    let max_moves = 3 * size * size;
    let (mut games, mut moves, mut limited) = (0u64, 0u64, 0u64);
    let start = Instant::now();
    let done = |games: u64| match count {
        Some(n) => games >= n,
        None => start.elapsed() >= budget,
    };
    // At least one batch, whatever the budget: a run of none reported NaN.
    loop {
        // Check the clock once per batch: Instant::now costs ~20 ns.
        for _ in 0..64 {
            if count.is_some_and(|n| games >= n) {
                break;
            }
            game.copy_from(&empty);
            let stats = playout(&mut game, &mut agent, max_moves);
            games += 1;
            moves += stats.moves as u64;
            limited += stats.hit_limit as u64;
        }
        if done(games) {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("board {size}x{size}, 1 thread, {secs:.1} s, rules: positional superko, no suicide");
    println!("playouts:       {games}");
    println!("playouts/s:     {:.0}", games as f64 / secs);
    println!("moves/s:        {:.0}", moves as f64 / secs);
    println!("moves/playout:  {:.1}", moves as f64 / games as f64);
    if limited > 0 {
        println!("stopped at the {max_moves}-move limit: {limited}");
    }
    Ok(())
}

fn prepare(data: &Path, out: Option<PathBuf>, threads: Option<usize>, features: FeatureSet) -> Result<()> {
    super::set_threads(threads)?;
    let scratch = tempfile::tempdir().context("creating a temporary folder")?;
    // A dataset asked for with --out is kept, and an existing one there is
    // never replaced: only the scratch folder is written over.
    let keep = out.is_some();
    let out = out.unwrap_or_else(|| scratch.path().join("dataset"));
    // A dataset already there would be found up to date and the time of
    // preparing nothing reported as a speed.
    if keep && std::fs::read_dir(&out).is_ok_and(|mut entries| entries.next().is_some()) {
        bail!("--out {}: not empty; the benchmark prepares a new dataset there: name an empty folder", out.display());
    }
    let list = scratch.path().join("games.list");
    // Every game that has a position to prepare.
    let all = Criteria { min_year: None, allow_handicap: true, komi: None, min_moves: 1, ..Criteria::default() };

    let start = Instant::now();
    let files = find_sgf_files(&[data.to_path_buf()], false).files;
    if !files.iter().any(Result::is_ok) {
        bail!("--data {}: no SGF file there (a folder of *.sgf files, searched recursively)", data.display());
    }
    let (games, report) = filter(&files, &all, &Progress::new("filter", files.len() as u64, "files"));
    // Said here: prepare would name the scratch list, gone when it is read.
    if games.0.is_empty() {
        let why: Vec<String> = report.rejected.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
        bail!("--data {}: none of its {} games can be prepared ({})", data.display(), report.games, why.join(", "));
    }
    std::fs::write(&list, games.to_text(&list)).with_context(|| format!("writing {}", list.display()))?;
    let filtered = start.elapsed().as_secs_f64();
    let options = PrepareOptions { force: !keep, features, ..PrepareOptions::default() };
    let (manifest, _) =
        prepare_dataset(&list, &out, &options, &Progress::new("prepare", games.0.len() as u64, "games"))?;
    let total = start.elapsed().as_secs_f64();

    let positions: u64 = manifest.splits.values().map(|c| c.positions).sum();
    let bytes: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    println!("data: {} ({} files, {} games kept)", data.display(), report.files, report.kept);
    println!("threads:            {}", rayon::current_num_threads());
    println!("features:           {features} ({} planes)", features.planes());
    println!("filter:             {filtered:.1} s");
    println!("prepare:            {:.1} s", total - filtered);
    println!("positions:          {positions}");
    println!("positions/s:        {:.0} (filter + prepare)", positions as f64 / total);
    println!("bytes/position:     {:.1}", bytes as f64 / positions.max(1) as f64);
    match peak_memory_mib() {
        Some(mib) => println!("peak memory:        {mib:.0} MiB"),
        None => println!("peak memory:        unknown (needs /proc)"),
    }
    Ok(())
}

/// The process's peak resident memory, from Linux's `/proc/self/status`.
fn peak_memory_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn reader(data: &Path, split: Split, threads: Option<usize>, seconds: f64) -> Result<()> {
    let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let dataset = Dataset::open(data)?;
    let size = dataset.board_size();
    println!(
        "{}: {split}, {} records, {size}x{size}; batches of 100, shuffled, with symmetries, {seconds} s a run",
        data.display(),
        dataset.split_len(split)
    );
    let one = measured_rate(&dataset, split, 1, seconds)?;
    if threads > 1 {
        let all = measured_rate(&dataset, split, threads, seconds)?;
        println!("scaling: {:.2}x on {threads} threads", all.per_second() / one.per_second());
    }
    match peak_memory_mib() {
        Some(mib) => println!("peak memory: {mib:.0} MiB"),
        None => println!("peak memory: unknown (needs /proc)"),
    }
    Ok(())
}

/// Runs [`decode_rate`] and prints it, with the CPU time it took: on a
/// shared machine the threads may not get a core each, and records per
/// CPU-second still say what a core does.
fn measured_rate(dataset: &Dataset, split: Split, threads: usize, seconds: f64) -> Result<DecodeRate> {
    let cpu_before = go_train::cpu_time::process_cpu_seconds();
    let rate = decode_rate(dataset, split, threads, seconds)?;
    let cpu = cpu_before.zip(go_train::cpu_time::process_cpu_seconds()).map(|(before, after)| after - before);
    let cpu_text = match cpu {
        Some(cpu) if cpu > 0.0 => {
            format!(", {:.2} cores busy, {:.0} records per CPU-second", cpu / rate.seconds, rate.records as f64 / cpu)
        }
        _ => String::new(),
    };
    println!(
        "{:>3} thread(s): {:>9.0} records/s ({:.0} per thread){cpu_text}",
        threads,
        rate.per_second(),
        rate.per_thread()
    );
    Ok(rate)
}
