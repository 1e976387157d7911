//! `go-train train-policy`, `train-playout`, `train-value`: one command,
//! three default configurations.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Parser;

use go_train::train::config::TrainConfig;
use go_train::train::distributed::World;
use go_train::train::launch::join;
use go_train::train::run::{train, Start};
use go_train::train::run_folder::{config_path, CONFIG_FILE, LAST_DIR};

/// Which of the three nets a command trains by default.
#[derive(Clone, Copy, PartialEq)]
pub enum Kind {
    Policy,
    Playout,
    Value,
}

impl Kind {
    /// The name of its built-in config.
    fn net(self) -> &'static str {
        match self {
            Kind::Policy => "policy",
            Kind::Playout => "playout",
            Kind::Value => "value",
        }
    }
}

/// Train a net on a dataset written by `go-train prepare`.
///
/// Settings are the seed's (built in; `configs/<net>.toml` holds the same
/// text), or a TOML file given with --config, and any of them can be
/// overridden with --set key=value. A checkpoint is written after every
/// epoch; --resume continues a stopped run exactly where it stopped, with
/// the settings saved in its folder (config.toml) unless --config is given,
/// on the dataset it trained on. Nothing a run wrote is replaced without
/// --force, and one process at a time writes a folder.
#[derive(Parser)]
#[command(after_help = "Examples:
  go-train train-policy --data datasets/kgs --out checkpoints/policy
  go-train train-policy --set optimizer.lr=0.02 --set epochs=5 --device cpu
  go-train train-policy --config configs/resnet-policy.toml --resume
  go-train train-value --data datasets/kgs-v1 --steps-per-epoch 2000
  go-train train-policy --config configs/resnet-policy.toml --resume --stop-after 540
  go-train train-policy --config configs/resnet-policy.toml --device cuda --precision bf16
  go-train train-policy --config configs/resnet-policy.toml --resume-or-start --stop-after 540   # a requeued job")]
pub struct Args {
    /// Training configuration [default: the seed's settings for the net,
    /// or with --resume the run's own config.toml].
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Override a setting, e.g. --set optimizer.lr=0.02 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Dataset folder (the config's `data`).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Checkpoint folder (the config's `out`).
    #[arg(long)]
    out: Option<PathBuf>,
    /// auto, cpu, cuda or cuda:N (the config's `device`).
    #[arg(long)]
    device: Option<String>,
    /// Epochs (the config's `epochs`).
    #[arg(long)]
    epochs: Option<u64>,
    /// Batches per epoch at most (the config's `steps_per_epoch`).
    #[arg(long)]
    steps_per_epoch: Option<u64>,
    /// f32, or on a GPU bf16 activations and convolutions (the config's
    /// `precision`).
    #[arg(long)]
    precision: Option<go_train::nn::Precision>,
    /// Continue the run in the output folder from its last checkpoint;
    /// refuses a folder without one, or whose run cannot be continued
    /// exactly (its settings, checkpoint or dataset gone or changed).
    #[arg(long, conflicts_with_all = ["force", "resume_or_start"])]
    resume: bool,
    /// --resume, or start a run when the output folder holds none: for a
    /// job that may run again from its start (a requeued batch job).
    #[arg(long, conflicts_with = "force")]
    resume_or_start: bool,
    /// Start over, deleting the run in the output folder.
    #[arg(long)]
    force: bool,
    /// Stop cleanly, after a checkpoint, before an epoch that would end
    /// past this many seconds from the start (for jobs with a wall-clock
    /// limit; continue with --resume).
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    stop_after: Option<Duration>,
}

pub(super) fn parse_seconds(s: &str) -> Result<Duration, String> {
    let seconds: f64 = s.parse().map_err(|_| format!("{s:?} is not a positive number of seconds"))?;
    match Duration::try_from_secs_f64(seconds) {
        Ok(d) if !d.is_zero() => Ok(d),
        // 1e20 was said to be no positive number.
        Err(_) if seconds > 1.0 => Err(format!("{s:?}: more seconds than a clock counts ({} at most)", u64::MAX)),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

/// Whether the override `key=value` sets `key`.
fn sets_key(o: &str, key: &str) -> bool {
    o.split('=').next().is_some_and(|k| k.trim() == key)
}

pub fn run(kind: Kind, args: Args) -> Result<()> {
    let quoted = |v: String| format!("{v:?}");
    let flags: Vec<(&str, &str, Option<String>)> = vec![
        ("data", "--data", args.data.map(|d| quoted(d.display().to_string()))),
        ("out", "--out", args.out.map(|d| quoted(d.display().to_string()))),
        ("device", "--device", args.device.map(quoted)),
        ("epochs", "--epochs", args.epochs.map(|e| e.to_string())),
        ("steps_per_epoch", "--steps-per-epoch", args.steps_per_epoch.map(|s| s.to_string())),
        ("precision", "--precision", args.precision.map(|p| quoted(p.to_string()))),
    ];
    let mut overrides = args.set;
    for (key, flag, value) in flags {
        let Some(value) = value else { continue };
        // Both given: one would silently win over the other.
        if overrides.iter().any(|o| sets_key(o, key)) {
            bail!("{flag} and --set {key}=… both set {key}: give one");
        }
        overrides.push(format!("{key}={value}"));
    }
    let data_given = overrides.iter().any(|o| sets_key(o, "data"));
    let mut resumed_config = None;
    let config = match args.config {
        Some(path) => {
            let config = TrainConfig::load(&path, &overrides)?;
            // A run's own config.toml, copied with its folder, still names
            // the folder it was written in: a copy's resume once trained on
            // in the original, over its finished checkpoints.
            let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let a_run = path.file_name() == Some(CONFIG_FILE.as_ref()) && folder.join(LAST_DIR).is_dir();
            if a_run && !overrides.iter().any(|o| sets_key(o, "out")) && !super::same_file(folder, &config.out) {
                bail!(
                    "--config {}: the config of the run in {}, which names out = {:?}: give --out {} to go on in \
                     this folder (or --out {} for that one)",
                    path.display(),
                    folder.display(),
                    config.out.display().to_string(),
                    folder.display(),
                    config.out.display()
                );
            }
            config
        }
        None => {
            // A resumed run goes on with the settings it was started with
            // (which `train` checks are there when it resumes), the other
            // overrides applied to those: an Adam run's `optimizer.beta2`
            // is no setting of the built-in SGD config, and was refused.
            let out_only: Vec<String> = overrides.iter().filter(|o| sets_key(o, "out")).cloned().collect();
            let saved = config_path(&TrainConfig::built_in(kind.net(), &out_only)?.out);
            if (args.resume || args.resume_or_start) && saved.is_file() {
                let config = TrainConfig::load(&saved, &overrides)?;
                resumed_config = Some(saved);
                config
            } else {
                TrainConfig::built_in(kind.net(), &overrides)?
            }
        }
    };
    // The run's dataset as its config.toml names it: relative to the folder
    // the run was started from, and not found from another ("run prepare
    // first" once said, of a dataset that is there).
    if let Some(saved) = resumed_config.filter(|_| !data_given && config.data.is_relative()) {
        if !config.data.join(go_train::dataset::MANIFEST).is_file() {
            bail!(
                "{}: the run's dataset, data = {:?}, is relative to the folder the run was started from, and {} \
                 holds no dataset: resume from that folder, or give --data",
                saved.display(),
                config.data.display().to_string(),
                std::env::current_dir().map_or(config.data.clone(), |cwd| cwd.join(&config.data)).display()
            );
        }
    }
    // A value net is train-value's, a move net the others': a resumed
    // run's config.toml once let train-value go on training a playout net.
    // So is the playout net train-playout's alone: a policy run resumed
    // by train-playout once went on as a policy run without a word.
    let arch = config.arch()?;
    let trained_by = match arch {
        _ if arch.output() == go_train::nn::Output::WinProb => Kind::Value,
        go_train::nn::Arch::Playout => Kind::Playout,
        _ => Kind::Policy,
    };
    if trained_by != kind {
        let what = match trained_by {
            Kind::Value => "a value net",
            Kind::Playout => "the fast playout net",
            Kind::Policy => "a move net",
        };
        bail!("{}: net {} is {what}: train it with train-{}", config.out.display(), config.net, trained_by.net());
    }
    let threads = (config.threads > 0).then_some(config.threads);
    go_train::nn::init_threads(threads)?;
    let start = if args.resume {
        Start::Resume
    } else if args.resume_or_start {
        Start::ResumeOrStart
    } else if args.force {
        Start::Overwrite
    } else {
        Start::Fresh
    };
    // One process, or one rank of a data-parallel run under srun or torchrun.
    let world = World::from_env(|name| std::env::var(name).ok())?;
    let collective = join(world, &config.device, &config.out)?;
    let summary = train(&config, start, std::io::stderr().is_terminal(), args.stop_after, collective.as_ref())?;
    if !collective.world().is_leader() {
        return Ok(());
    }
    if summary.already_done {
        let trained = (summary.epochs.len() as u64).max(config.epochs);
        if trained > config.epochs {
            go_train::say!(
                "{}: {trained} epochs are done, more than the {} asked",
                config.out.display(),
                config.epochs
            );
        } else {
            go_train::say!("{}: all {} epochs are done", config.out.display(), config.epochs);
        }
    }
    go_train::say!("checkpoints: {}", config.out.display());
    Ok(())
}
