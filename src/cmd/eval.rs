//! `go-train eval`: how trained nets score on held-out positions.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;

use go_train::dataset::{Dataset, Split};
use go_train::train::evaluate::{evaluate_by_phase, Report};
use go_train::train::run::{config_device, load_model};

/// Measure trained nets on a split of a dataset: loss, top-1 and top-5
/// accuracy (move nets) or squared error and accuracy (value nets), overall
/// and by game phase, and the evaluation speed.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train eval --data datasets/kgs --policy checkpoints/policy
  go-train eval --data datasets/kgs-value --value checkpoints/value --split validation
  go-train eval --data datasets/kgs --playout checkpoints/playout/last/weights.safetensors --json")]
pub struct Args {
    /// Dataset folder.
    #[arg(long)]
    data: PathBuf,
    /// Which split.
    #[arg(long, default_value = "test")]
    split: Split,
    /// Policy net: a checkpoint folder or a weights file in one.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Value net.
    #[arg(long)]
    value: Option<PathBuf>,
    /// Fast playout net.
    #[arg(long)]
    playout: Option<PathBuf>,
    /// Positions at most (0: the whole split).
    #[arg(long, default_value_t = 0)]
    limit: u64,
    /// Positions per batch.
    #[arg(long, default_value_t = 500)]
    batch: usize,
    /// auto, cpu, cuda or cuda:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// One JSON object per net on stdout.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let nets: Vec<(&str, PathBuf)> = [("policy", args.policy), ("value", args.value), ("playout", args.playout)]
        .into_iter()
        .filter_map(|(k, p)| Some((k, p?)))
        .collect();
    if nets.is_empty() {
        bail!("name at least one net: --policy, --value or --playout");
    }
    go_train::nn::init_threads(None)?;
    let device = config_device(&args.device)?;
    let dataset = Dataset::open(&args.data)?;
    for (role, path) in nets {
        let model = load_model(&path, &device)?;
        let report = evaluate_by_phase(&model, &dataset, args.split, args.batch, args.limit)?;
        if args.json {
            let value = serde_json::json!({"net": role, "checkpoint": path.display().to_string(), "split": args.split, "report": report});
            println!("{value}");
        } else {
            print_report(role, &path, args.split, &report);
        }
    }
    Ok(())
}

fn print_report(role: &str, path: &std::path::Path, split: Split, r: &Report) {
    println!(
        "{role} net {} on {split}: {} positions, {:.0} positions/s",
        path.display(),
        r.overall.positions,
        r.positions_per_second
    );
    let line = |name: &str, s: &go_train::train::evaluate::Scores| match (s.top1, s.top5, s.accuracy) {
        (Some(t1), Some(t5), _) => println!(
            "  {name:<14} loss {:.4}  top-1 {:>5.1}%  top-5 {:>5.1}%  ({} positions)",
            s.loss,
            100.0 * t1,
            100.0 * t5,
            s.positions
        ),
        _ => println!(
            "  {name:<14} MSE {:.4} (constant 0.5: 0.25)  accuracy {:>5.1}%  ({} positions)",
            s.loss,
            100.0 * s.accuracy.unwrap_or(0.0),
            s.positions
        ),
    };
    line("all", &r.overall);
    for (name, s) in &r.phases {
        line(name, s);
    }
}
