//! `go-train prepare`: encode the listed games into a dataset.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;

use go_train::dataset::filter::GameList;
use go_train::dataset::parts::{merge_if_complete, Part};
use go_train::dataset::prepare::{prepare, PrepareOptions};
use go_train::dataset::{Split, SplitFractions, ValueSampling};
use go_train::features::FeatureSet;
use go_train::progress::Progress;

/// Replay the listed games and write every position as feature planes and
/// labels into zstd-compressed shards, split into train, validation and test
/// by game.
///
/// The split is decided by a hash of each game's moves and the seed, so a
/// game always lands in the same split and duplicates cannot leak across.
/// The output is byte-identical for the same list and settings, whatever the
/// number of threads. A killed run leaves no manifest; run it again.
///
/// On a cluster, `--part I/N` (or a Slurm array task, from its
/// SLURM_ARRAY_* variables) prepares the I-th of N contiguous slices of the
/// list into the shared folder; the last part to finish, or `go-train
/// dataset merge DIR`, writes the dataset's manifest. The merged dataset
/// holds the records of a one-process run, in the same order (docs/guide/datasets.md).
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train prepare datasets/kgs.list --out datasets/kgs
  go-train prepare datasets/kgs.list --out datasets/kgs-v1 --value per-game:1 --seed 7
  go-train prepare games.list --out data --split 0.9,0.05,0.05 --threads 2
  go-train prepare datasets/kgs.list --out datasets/kgs-x --features extended
  go-train prepare datasets/all.list --out datasets/all-xo --features extended --value per-game:8 --ownership
  go-train prepare datasets/all.list --out /shared/all --part 3/8     # the 3rd of 8 parts
  sbatch --array=1-8 --wrap 'go-train prepare all.list --out /shared/all'   # parts from Slurm")]
pub struct Args {
    /// Game list written by `go-train filter`.
    list: PathBuf,
    /// Dataset folder to write.
    #[arg(long, short)]
    out: PathBuf,
    /// Seed of the split and of value-label sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Fractions of games for train, validation and test.
    #[arg(long, default_value = "0.8,0.1,0.1")]
    split: SplitFractions,
    /// Positions with a value label: all, per-game:K (K drawn per game with
    /// the seed, as AlphaGo did with K=1), final (the last position), or
    /// marked (the one position each game marks, and only it: the games of
    /// `go-train selfplay --value-positions alphago`).
    #[arg(long, default_value = "all")]
    value: ValueSampling,
    /// Rules for games whose RU is missing or unknown (simple ko by default:
    /// records are what a server accepted).
    #[arg(long, default_value = "japanese")]
    rules: String,
    /// Board size of the dataset (2 to 25).
    #[arg(long, default_value_t = 19, value_parser = super::board_sizes())]
    size: usize,
    /// Input planes: seed (the seed design's 15) or extended (52: the seed's
    /// plus colour to play, ko, stone ages, liberties after the move,
    /// captures, self-atari and ladders, after AlphaGo). Nets trained on the
    /// dataset read the same planes.
    #[arg(long, default_value = "seed")]
    features: FeatureSet,
    /// Most records per shard file (at least --block-records).
    #[arg(long, default_value_t = 1 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    shard_records: u64,
    /// Records per compressed block (the unit a reader fetches and decodes
    /// whole: 1 to 65,536).
    #[arg(long, default_value_t = 1024, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    block_records: usize,
    /// zstd compression level: 1 to 22, zstd's fast levels below 0 (`--level
    /// -5`), or 0 for zstd's default (3).
    #[arg(long, default_value_t = 3, value_parser = zstd_levels())]
    level: i32,
    /// Worker threads, 1 to 4096 [default: all cores].
    #[arg(long, value_parser = super::thread_counts())]
    threads: Option<usize>,
    /// Replace a dataset made from other inputs or settings.
    #[arg(long)]
    force: bool,
    /// Prepare only the I-th of N contiguous parts of the list (1 ≤ I ≤ N ≤ 9999)
    /// [default: from SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT in a
    /// Slurm array job, else the whole list].
    #[arg(long, value_name = "I/N")]
    part: Option<Part>,
    /// Give every position its game's final ownership (who owns each point
    /// at the end, by random playouts from the last position), a target
    /// that `policy-value-ownership` nets learn beside the result.
    #[arg(long)]
    ownership: bool,
}

/// The levels this build's zstd compresses at.
fn zstd_levels() -> clap::builder::RangedI64ValueParser<i32> {
    let levels = zstd::compression_level_range();
    clap::builder::RangedI64ValueParser::new().range(*levels.start() as i64..=*levels.end() as i64)
}

pub fn run(args: Args) -> Result<()> {
    super::set_threads(args.threads)?;
    let part = match args.part {
        Some(part) => Some(part),
        None => Part::from_slurm(|name| std::env::var(name).ok())?.map(|(part, said)| {
            go_train::say!("prepare: part {part}, from the Slurm array ({said})");
            part
        }),
    };
    let options = PrepareOptions {
        board_size: args.size,
        features: args.features,
        seed: args.seed,
        split: args.split,
        value: args.value,
        default_rules: args.rules,
        shard_records: args.shard_records,
        block_records: args.block_records,
        zstd_level: args.level,
        force: args.force,
        part,
        ownership: args.ownership,
    };
    let listed = GameList::read(&args.list)?.0.len();
    let games = part.map_or(listed, |p| p.range(listed).len()) as u64;
    let progress = Progress::new("prepare", games, "games");
    let started = std::time::Instant::now();
    let (manifest, up_to_date) = prepare(&args.list, &args.out, &options, &progress)?;
    let what = part.map_or(String::new(), |p| format!("part {p} of "));
    if up_to_date {
        go_train::say!(
            "{what}{} is up to date with {} (use --force to redo it)",
            args.out.display(),
            args.list.display()
        );
    } else {
        report(&manifest, games, started.elapsed().as_secs_f64());
    }
    if let Some(part) = part {
        match merge_if_complete(&args.out)? {
            Ok(_) => go_train::say!("part {part}: all {} parts are done; dataset manifest written", part.count),
            Err(missing) => {
                let mut named: Vec<String> = missing.iter().take(10).map(|i| i.to_string()).collect();
                if missing.len() > named.len() {
                    named.push(format!("… ({} in all)", missing.len()));
                }
                go_train::say!(
                    "part {part} done; waiting for parts {} (the last to finish, or `go-train dataset merge {}`, \
                     writes the dataset manifest)",
                    named.join(", "),
                    args.out.display()
                );
                return Ok(());
            }
        }
    }
    go_train::say!("dataset: {}", args.out.display());
    Ok(())
}

/// Counts and speed of a finished run (of a part, with a part's counts).
fn report(manifest: &go_train::dataset::Manifest, games: u64, secs: f64) {
    let positions: u64 = manifest.splits.values().map(|c| c.positions).sum();
    let bytes: u64 = manifest.shards.iter().map(|s| s.bytes).sum();
    go_train::say!(
        "prepare: {games} games, {positions} positions in {secs:.1} s ({:.0} positions/s), {:.1} bytes/position",
        positions as f64 / secs,
        bytes as f64 / positions.max(1) as f64
    );
    for split in Split::ALL {
        let c = &manifest.splits[&split];
        go_train::say!(
            "  {split:<10} {:>7} games {:>9} positions {:>9} with value",
            c.games,
            c.positions,
            c.value_positions
        );
    }
    for (reason, n) in &manifest.dropped {
        let example = manifest.dropped_examples.get(reason).and_then(|e| e.first());
        go_train::say!("  dropped: {n} ({reason}){}", example.map(|e| format!("  e.g. {e}")).unwrap_or_default());
    }
}
