//! `go-train dataset`: what a dataset holds, and whether it is intact.

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use go_train::dataset::manifest::SplitCounts;
use go_train::dataset::stats::STAGES;
use go_train::dataset::{verify, Dataset, LabelStats, Manifest, Split};
use go_train::go::Vertex;
use go_train::progress::Progress;

/// Inspect and check datasets written by `go-train prepare`.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train dataset info datasets/kgs            # counts, settings and label statistics
  go-train dataset info --json datasets/kgs     # the same, as one JSON object
  go-train dataset info --quick datasets/kgs    # from the manifest alone (reads no shard)
  go-train dataset verify datasets/kgs          # check every shard and block against the manifest
  go-train dataset merge /shared/all            # join the parts of `prepare --part I/N`")]
pub struct Args {
    /// `info`, `verify` or `merge`.
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Counts per split, shards and bytes, the settings and inputs it was
    /// made with, and statistics of its labels (read from every block).
    #[command(after_help = "Examples:
  go-train dataset info datasets/kgs
  go-train dataset info --json datasets/kgs | jq .splits.train.labels.value
  go-train dataset info --quick datasets/kgs")]
    Info {
        /// The dataset folder (holding manifest.json).
        dir: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Read the manifest only: no label statistics.
        #[arg(long)]
        quick: bool,
    },
    /// Check every shard against the manifest (presence, size, CRC-32,
    /// index, each block's checksum, records and labels) and the totals per
    /// split; warn of stray files. Exits non-zero when anything is wrong.
    #[command(after_help = "Examples:
  go-train dataset verify datasets/kgs
  rsync -a host:datasets/kgs datasets/ && go-train dataset verify datasets/kgs   # after a copy")]
    Verify {
        /// The dataset folder (holding manifest.json).
        dir: PathBuf,
    },
    /// Write the dataset's manifest from the part manifests that `prepare
    /// --part I/N` left (what the last part to finish also does); refuses,
    /// naming them, while parts are missing.
    #[command(after_help = "Examples:
  go-train dataset merge /shared/all && go-train dataset verify /shared/all
  sbatch --dependency=afterok:$ARRAY_JOB --wrap 'go-train dataset merge /shared/all'")]
    Merge {
        /// The folder the parts were prepared into.
        dir: PathBuf,
    },
}

pub fn run(args: Args) -> Result<()> {
    match args.what {
        What::Info { dir, json, quick } => info(&dir, json, quick),
        What::Verify { dir } => verify_dataset(&dir),
        What::Merge { dir } => {
            let manifest = go_train::dataset::parts::merge(&dir)?;
            let positions: u64 = manifest.splits.values().map(|c| c.positions).sum();
            go_train::say!("{}: merged {} shards, {positions} positions", dir.display(), manifest.shards.len());
            Ok(())
        }
    }
}

/// What `info` shows of one split.
struct SplitInfo {
    /// Which split.
    split: Split,
    /// Games, positions and value positions, from the manifest.
    counts: SplitCounts,
    /// Shard files.
    shards: usize,
    /// Bytes of its shard files.
    bytes: u64,
    /// `None` with `--quick`.
    labels: Option<LabelStats>,
}

fn info(dir: &Path, json: bool, quick: bool) -> Result<()> {
    let manifest = Manifest::read(dir)?;
    // Even the manifest alone: a table of counts it contradicts, or of
    // shards missing or cut short, would mislead.
    manifest.check(dir)?;
    manifest.check_shard_files(dir)?;
    let labels: Vec<Option<LabelStats>> = match quick {
        true => vec![None; Split::ALL.len()],
        false => label_stats(dir)?.into_iter().map(Some).collect(),
    };
    let splits: Vec<SplitInfo> = Split::ALL
        .into_iter()
        .zip(labels)
        .map(|(split, labels)| {
            let entries = manifest.shards.iter().filter(|e| e.split == split);
            SplitInfo {
                split,
                counts: manifest.splits.get(&split).cloned().unwrap_or_default(),
                shards: entries.clone().count(),
                bytes: entries.map(|e| e.bytes).sum(),
                labels,
            }
        })
        .collect();
    if json {
        println!("{}", serde_json::to_string_pretty(&info_json(dir, &manifest, &splits))?);
    } else {
        print!("{}", info_text(dir, &manifest, &splits));
    }
    Ok(())
}

/// The label statistics of each split, in the order of [`Split::ALL`].
fn label_stats(dir: &Path) -> Result<Vec<LabelStats>> {
    let dataset = Dataset::open(dir)?;
    let blocks = dataset.manifest().shards.iter().map(|e| e.blocks as u64).sum();
    let progress = Progress::new("reading labels", blocks, "blocks");
    let stats = Split::ALL.into_iter().map(|split| LabelStats::of_split(&dataset, split, &progress)).collect();
    progress.finish();
    stats
}

fn bytes_per_position(bytes: u64, positions: u64) -> Option<f64> {
    (positions > 0).then(|| bytes as f64 / positions as f64)
}

/// A line of the table of counts.
fn count_row(name: &str, c: &SplitCounts, shards: usize, bytes: u64) -> String {
    let per = bytes_per_position(bytes, c.positions).map_or("-".into(), |b| format!("{b:.1}"));
    format!(
        "{name:<12}{:>9}{:>12}{:>12}{shards:>8}{:>12}{per:>10}\n",
        c.games,
        c.positions,
        c.value_positions,
        go_train::memory::human_bytes(bytes)
    )
}

fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

fn point_name(point: usize, size: usize) -> String {
    Vertex::from_index(point, size).to_gtp(size)
}

fn info_json(dir: &Path, m: &Manifest, splits: &[SplitInfo]) -> Value {
    let split_json = |s: &SplitInfo| {
        json!({
            "games": s.counts.games,
            "positions": s.counts.positions,
            "value_positions": s.counts.value_positions,
            "shards": s.shards,
            "bytes": s.bytes,
            "bytes_per_position": bytes_per_position(s.bytes, s.counts.positions),
            "labels": s.labels.as_ref().map(labels_json),
            // The same for the same records in the same order, however they
            // were cut into shards (a dataset prepared in parts, merged).
            "records_crc32": s.labels.as_ref().map(|l| format!("{:08x}", l.checksum.value())),
        })
    };
    json!({
        "dir": dir.display().to_string(),
        // What checkpoints and weights record of the dataset they trained on.
        "identity": m.identity().to_string(),
        "dataset_version": m.dataset_version,
        "go_train_version": m.go_train_version,
        "feature_version": m.feature_version,
        "planes": m.planes,
        "board_size": m.board_size,
        "input": m.input,
        "settings": m.settings,
        "dropped": m.dropped,
        "splits": splits.iter().map(|s| (s.split.name().to_string(), split_json(s))).collect::<serde_json::Map<_, _>>(),
    })
}

fn labels_json(l: &LabelStats) -> Value {
    let top: Vec<Value> = l
        .top_points(10)
        .into_iter()
        .map(|(p, n)| json!({"point": point_name(p, l.size), "records": n, "fraction": fraction(n, l.records)}))
        .collect();
    json!({
        "records": l.records,
        "passes": l.passes(),
        "pass_fraction": fraction(l.passes(), l.records),
        "top_points": top,
        "moves": STAGES.iter().zip(l.stages).map(|(name, n)| (name.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "value": {"wins": l.wins, "losses": l.losses, "none": l.no_value},
    })
}

fn info_text(dir: &Path, m: &Manifest, splits: &[SplitInfo]) -> String {
    let s = &m.settings;
    let mut out = format!(
        "dataset {} (identity {})\n  written by go-train {}, dataset version {}, features {} ({} planes), {}x{}\n",
        dir.display(),
        m.identity(),
        m.go_train_version,
        m.dataset_version,
        m.feature_version,
        m.planes,
        m.board_size,
        m.board_size
    );
    out +=
        &format!("  input: {} (CRC-32 {}), {} games listed\n", m.input.list, m.input.list_crc32, m.input.games_listed);
    let [train, validation, test] = s.split.0;
    out += &format!(
        "  settings: seed {}, split {train:.2}/{validation:.2}/{test:.2}, value labels {}, default rules {}, \
         {} records a shard, {} a block, zstd level {}{}\n",
        s.seed,
        s.value,
        s.default_rules,
        s.shard_records,
        s.block_records,
        s.zstd_level,
        if s.ownership { ", final ownership on every position" } else { "" }
    );
    if !m.dropped.is_empty() {
        let dropped: Vec<String> = m.dropped.iter().map(|(why, n)| format!("{why} {n}")).collect();
        out += &format!("  games dropped: {}\n", dropped.join(", "));
    }
    out += &format!(
        "\n{:<12}{:>9}{:>12}{:>12}{:>8}{:>12}{:>10}\n",
        "split", "games", "positions", "value pos.", "shards", "bytes", "bytes/pos"
    );
    for s in splits {
        out += &count_row(s.split.name(), &s.counts, s.shards, s.bytes);
    }
    let total = SplitCounts {
        games: splits.iter().map(|s| s.counts.games).sum(),
        positions: splits.iter().map(|s| s.counts.positions).sum(),
        value_positions: splits.iter().map(|s| s.counts.value_positions).sum(),
    };
    out += &count_row("total", &total, splits.iter().map(|s| s.shards).sum(), splits.iter().map(|s| s.bytes).sum());
    for s in splits {
        if let Some(l) = s.labels.as_ref().filter(|l| l.records > 0) {
            out += &labels_text(s.split, l);
        }
    }
    out
}

fn labels_text(split: Split, l: &LabelStats) -> String {
    let percent = |n: u64, of: u64| format!("{:.1}%", 100.0 * fraction(n, of));
    let top: Vec<String> = l
        .top_points(5)
        .into_iter()
        .map(|(p, n)| format!("{} {}", point_name(p, l.size), percent(n, l.records)))
        .collect();
    let stages: Vec<String> =
        STAGES.iter().zip(l.stages).map(|(name, n)| format!("{name} {}", percent(n, l.records))).collect();
    // The balance among labelled records is what a value net sees.
    let labelled = l.wins + l.losses;
    format!(
        "\nlabels of {split} ({} records, CRC-32 {:08x})\n  passes {}; most played: {}\n  move number: {}\n  \
         value: {labelled} labelled ({} of records): won {}, lost {}\n",
        l.records,
        l.checksum.value(),
        percent(l.passes(), l.records),
        if top.is_empty() { "none (passes only)".to_string() } else { top.join(", ") },
        stages.join(", "),
        percent(labelled, l.records),
        percent(l.wins, labelled),
        percent(l.losses, labelled),
    )
}

fn verify_dataset(dir: &Path) -> Result<()> {
    // The manifest is read twice (here for the bar's length): it is small.
    let blocks = Manifest::read(dir)?.shards.iter().map(|e| e.blocks as u64).sum();
    let progress = Progress::new("verify", blocks, "blocks");
    let report = verify(dir, &progress)?;
    progress.finish();
    for s in &report.shards {
        let status = if s.errors.is_empty() { "ok " } else { "BAD" };
        println!(
            "{status} {:<28} {:<10} {:>10} records {:>9} with value",
            s.file,
            s.split.name(),
            s.records,
            s.value_records
        );
    }
    for w in &report.warnings {
        go_train::say!("warning: {w}");
    }
    for e in report.all_errors() {
        go_train::say!("error: {e}");
    }
    let bad: Vec<&str> = report.shards.iter().filter(|s| !s.errors.is_empty()).map(|s| s.file.as_str()).collect();
    let errors = report.all_errors().count();
    match (errors, bad.is_empty()) {
        (0, _) => {
            let records: u64 = report.shards.iter().map(|s| s.records).sum();
            println!("{}: ok: {} shards, {records} records", dir.display(), report.shards.len());
            Ok(())
        }
        (n, true) => bail!("{}: {n} problems (see above)", dir.display()),
        (n, false) => bail!("{}: {n} problems; bad shards: {}", dir.display(), bad.join(", ")),
    }
}
