//! What a run's folder holds, and how a run may begin in it: the one place
//! that chooses between a fresh start, a resume and a refusal, so that
//! nothing a run wrote is lost or continued under other settings or data
//! without `--force`.
//!
//! A run writes, in this order: `config.toml` at its start; then after
//! each epoch `metrics.jsonl` and its plots, `best.safetensors` when the
//! epoch is the best so far, and last the checkpoint `last/`. So a run
//! killed at any point leaves a checkpoint at epoch E and metrics of E or
//! E + 1 epochs (killed between the two: the resumed run redoes the
//! epoch). Anything else means files were lost or damaged, and resuming
//! would train again over what the lost files held: refused.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::checkpoint::{self, TrainState};
use super::config::TrainConfig;
use super::metrics;
use crate::dataset::Dataset;
use crate::lock::Lock;
use crate::nn::weights::BEST_FILE;

/// How a run begins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// A fresh run; refuses a folder that holds anything a run wrote.
    Fresh,
    /// A fresh run that replaces whatever run the folder holds.
    Overwrite,
    /// Continue the folder's run from its last checkpoint; refuses a
    /// folder without a run, or one whose run cannot be continued exactly.
    Resume,
    /// [`Start::Resume`], or a fresh run when the folder holds no run at
    /// all: for a job that may be run again from the start (requeued).
    ResumeOrStart,
}

/// The run's settings, beside its checkpoints.
pub const CONFIG_FILE: &str = "config.toml";
/// What marks a folder as train-rl's run (its settings): named here, for
/// each kind of trainer refuses the other's folder.
pub const RL_CONFIG_FILE: &str = "rl.json";
/// The checkpoint after the last finished epoch.
pub const LAST_DIR: &str = "last";

/// Every file and folder a run writes, apart from the lock and the
/// rendezvous files of data-parallel runs.
const RUN_FILES: [&str; 6] = [CONFIG_FILE, LAST_DIR, BEST_FILE, metrics::FILE, "metrics.svg", "metrics.png"];

/// What an interrupted write leaves: a checkpoint half swapped
/// ([`checkpoint::recover`] puts it right) and temporary files, which the
/// next write of the same file replaces. None of them is a run.
const LEFTOVERS: [&str; 7] = [
    "last.new",
    "last.old",
    "config.toml.tmp",
    "best.safetensors.tmp",
    "metrics.jsonl.tmp",
    "metrics.svg.tmp",
    "metrics.png.tmp.png",
];

/// How a run goes on in its folder, as [`plan`] decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// A new run.
    Fresh,
    /// The folder's run finished no epoch: it starts over from its first,
    /// with its own settings.
    Restart,
    /// The folder's run continues from its checkpoint, at this state.
    Resume {
        at: Box<TrainState>,
        /// `best.safetensors` is gone: it will hold the best epoch from
        /// here on.
        best_lost: bool,
    },
}

/// What the process that writes a run's folder does first: takes the
/// folder's lock (held until the returned [`Lock`] is dropped), puts back
/// the newest complete checkpoint a kill interrupted, and [`plan`]s.
pub fn begin(out: &Path, start: Start, config: &TrainConfig) -> Result<(Lock, Plan)> {
    if start == Start::Resume && !out.is_dir() {
        bail!("{}: nothing to resume: no such folder", out.display());
    }
    // Before the lock, which would leave its file there.
    check_not_a_dataset(out)?;
    let lock = Lock::create_folder(out, "the run's folder (--out) holds its checkpoints")?;
    checkpoint::recover(&out.join(LAST_DIR))?;
    Ok((lock, plan(out, start, config)?))
}

/// Decides how a run begins in `out` as `start` asks, with `config`
/// (which, resuming, must be the run's: [`CONFIG_FILE`] says), or refuses,
/// naming what is in the way or missing. Reads, writes nothing; call it
/// holding the folder's lock, after [`checkpoint::recover`].
pub fn plan(out: &Path, start: Start, config: &TrainConfig) -> Result<Plan> {
    // Not even --force replaces another trainer's run (the two share
    // `last/` and the metrics' names).
    if out.join(RL_CONFIG_FILE).exists() {
        bail!(
            "{} holds a train-rl run ({RL_CONFIG_FILE}): this trainer neither continues nor replaces it; name \
             another --out",
            out.display()
        );
    }
    let found = present(out)?;
    match start {
        // Removed once the new run is ready to write ([`remove_old_run`]).
        Start::Overwrite => Ok(Plan::Fresh),
        Start::Fresh if found.is_empty() => Ok(Plan::Fresh),
        Start::ResumeOrStart if found.is_empty() => {
            crate::say!("{}: no run to resume: starting one", out.display());
            Ok(Plan::Fresh)
        }
        Start::Fresh => bail!(
            "{} already holds a run ({}): --resume continues it, --force deletes it and starts over",
            out.display(),
            found.join(", ")
        ),
        Start::Resume if found.is_empty() => bail!(
            "{}: nothing to resume: it holds no run (no {CONFIG_FILE}, no {LAST_DIR}/); leave out --resume to start \
             one, or give --resume-or-start to a job that may run again",
            out.display()
        ),
        Start::Resume | Start::ResumeOrStart => plan_resume(out, config),
    }
}

/// Refuses a dataset's folder as a run's, whatever the start: a run's
/// files were once mixed into the dataset it trained on.
pub fn check_not_a_dataset(out: &Path) -> Result<()> {
    let manifest = out.join(crate::dataset::MANIFEST);
    if manifest.exists() {
        bail!(
            "{} holds a dataset ({}): a run's checkpoints go in a folder of their own",
            out.display(),
            manifest.display()
        );
    }
    Ok(())
}

/// The names of [`RUN_FILES`] in `out`.
fn present(out: &Path) -> Result<Vec<&'static str>> {
    let mut found = Vec::new();
    for name in RUN_FILES {
        if out.join(name).try_exists().with_context(|| format!("looking into {}", out.display()))? {
            found.push(name);
        }
    }
    Ok(found)
}

fn plan_resume(out: &Path, config: &TrainConfig) -> Result<Plan> {
    let config_path = out.join(CONFIG_FILE);
    if !config_path.is_file() {
        bail!(
            "{}: missing, so the settings of the run in {} are unknown, and resuming under others would not \
             continue it: put its settings back there (the config it was started with, and its --set overrides)",
            config_path.display(),
            out.display()
        );
    }
    check_same_job(&config_path, config)?;
    let last = out.join(LAST_DIR);
    let at = match last.exists() {
        true if !last.join(checkpoint::STATE_FILE).is_file() => bail!(
            "{}: missing, so the checkpoint in {} is incomplete; put it back, or start over with --force",
            last.join(checkpoint::STATE_FILE).display(),
            last.display()
        ),
        true => Some(checkpoint::read_state(&last)?.1),
        false => None,
    };
    let epoch = at.as_ref().map_or(0, |s| s.epoch);
    let metrics_path = out.join(metrics::FILE);
    let recorded = metrics::read(&metrics_path, u64::MAX)?.iter().map(|m| m.epoch).max().unwrap_or(0);
    let checkpoint = match &at {
        Some(_) => format!("the checkpoint {} is at epoch {epoch}", last.display()),
        None => format!("there is no checkpoint ({} is missing)", last.display()),
    };
    // A checkpoint is written after the epoch's metrics: one epoch more
    // is a run killed in between.
    if recorded > epoch + 1 {
        bail!(
            "{} records epochs up to {recorded}, but {checkpoint}: the checkpoints of the later epochs are lost, and \
             resuming would train epoch {} again over them (cutting the metrics, replacing {BEST_FILE}); put the \
             checkpoint back, or start over with --force",
            metrics_path.display(),
            epoch + 1
        );
    }
    let best = out.join(BEST_FILE);
    let Some(at) = at else {
        if best.exists() && recorded == 0 {
            bail!(
                "{} is there, but {checkpoint} and {} records no epoch: resuming would train from the first epoch \
                 and replace it; put the files back, or start over with --force",
                best.display(),
                metrics_path.display()
            );
        }
        crate::say!(
            "{}: its run finished no epoch (it has no checkpoint yet): starting it again from the first, with its \
             settings ({CONFIG_FILE})",
            out.display()
        );
        return Ok(Plan::Restart);
    };
    if recorded < epoch {
        crate::say!(
            "warning: {} records {recorded} epochs, {checkpoint}: its plot lacks the epochs lost",
            metrics_path.display()
        );
    }
    let lost = match epoch > 0 {
        true if !best.exists() => Some("missing".to_string()),
        true => damage(&best),
        false => None,
    };
    if let Some(how) = &lost {
        say_best_lost(&best, how, "epoch", epoch);
    }
    let best_lost = lost.is_some();
    Ok(Plan::Resume { at: Box::new(at), best_lost })
}

/// Says that the best weights `best`, kept up to `done` (`unit`s: epoch,
/// iteration), are lost (`how`), and that the resumed run's best replaces
/// them.
pub fn say_best_lost(best: &Path, how: &str, unit: &str, done: u64) {
    crate::say!(
        "warning: {}: {how} (the best weights up to {unit} {done} are lost): from here on it holds the best {unit} \
         after {done}",
        best.display()
    );
}

/// What is wrong with the weights file `path`, if it cannot be read whole
/// or fails its checksum: a resumed run that kept a damaged best net as it
/// was would finish with none ("damaged: …").
pub fn damage(path: &Path) -> Option<String> {
    let read = crate::nn::weights::read_tensors(path, &candle_core::Device::Cpu);
    read.err().map(|e| format!("damaged: {e:#}"))
}

/// Refuses to resume with another global batch than the checkpoint's
/// steps took (`global_batch` on `ranks` ranks now): with
/// `linear_scaling` the batch and learning rate follow the number of
/// ranks, and another number would go on with another run's steps.
pub fn check_global_batch(out: &Path, at: &TrainState, global_batch: usize, ranks: usize) -> Result<()> {
    match at.global_batch {
        Some(trained) if trained != global_batch => bail!(
            "{}: the run trained with a global batch of {trained}; with linear_scaling on {ranks} rank(s) it would be \
             {global_batch}, with the learning rate scaled alike: resume it on as many ranks as it began with, or \
             start a new run",
            out.display()
        ),
        _ => Ok(()),
    }
}

/// Refuses to resume a checkpoint made for another net, seed or batch
/// than `config` asks for, or whose settings cannot be read.
fn check_same_job(saved_path: &Path, config: &TrainConfig) -> Result<()> {
    let saved = TrainConfig::load(saved_path, &[])?;
    if saved.net != config.net || saved.seed != config.seed || saved.batch != config.batch {
        bail!(
            "{}: the checkpoint was made with net {}, seed {}, batch {}; this run asks for net {}, seed {}, batch {}",
            saved_path.display(),
            saved.net,
            saved.seed,
            saved.batch,
            config.net,
            config.seed,
            config.batch
        );
    }
    // A resumed run's weights are its checkpoint's: a new init would be
    // written into config.toml as the start of a run that never had it.
    if saved.init != config.init {
        let named = |init: &Option<PathBuf>| {
            init.as_ref().map_or("none".to_string(), |p| format!("{:?}", p.display().to_string()))
        };
        bail!(
            "{}: the run started from init = {}; a resumed run goes on from its checkpoint, so init {} changes \
             nothing: leave it out, or start a new run (another --out, or --force)",
            saved_path.display(),
            named(&saved.init),
            named(&config.init)
        );
    }
    // The checkpoint's optimizer state is the saved kind's (SGD's momentum,
    // Adam's moments): another kind would start from none of it, so the run
    // would not go on as it was; its weights can start a new run.
    if saved.optimizer.kind() != config.optimizer.kind() {
        bail!(
            "{}: the run trains with optimizer.kind = \"{}\", whose state its checkpoint holds; \"{}\" cannot go on \
             from it: resume with the run's optimizer, or start a new run from its weights (--set init={} and \
             another --out)",
            saved_path.display(),
            saved.optimizer.kind(),
            config.optimizer.kind(),
            saved_path.parent().unwrap_or(Path::new(".")).display()
        );
    }
    let changed = changed_settings(&saved, config);
    if !changed.is_empty() {
        crate::say!("note: {}: resuming with settings changed: {}", saved_path.display(), changed.join("; "));
    }
    Ok(())
}

/// Each setting of `now` that differs from `saved`, as `key was → now`
/// (the run's folder aside, which a copied run changes): of a supervised
/// run's `config.toml` or of train-rl's `rl.json`.
pub fn changed_settings<T: serde::Serialize>(saved: &T, now: &T) -> Vec<String> {
    use crate::differences::{differences, shown};
    differences(saved, now)
        .into_iter()
        .filter(|(key, _, _)| key != "out")
        .map(|(key, was, is)| format!("{key} {} → {}", shown(&was, "default"), shown(&is, "default")))
        .collect()
}

/// Refuses to resume, on `dataset`, a run whose checkpoint (at `at`)
/// trained on another one; a checkpoint that names none (written before
/// checkpoints did) resumes, saying so.
pub fn check_trained_on(out: &Path, at: &TrainState, dataset: &Dataset) -> Result<()> {
    let here = dataset.manifest().identity();
    let state = out.join(LAST_DIR).join(checkpoint::STATE_FILE);
    match &at.dataset {
        None => crate::say!(
            "note: {} names no dataset (an older go-train wrote it): resuming on {} (dataset {here}) unchecked; its \
             next checkpoint records it",
            state.display(),
            dataset.dir().display()
        ),
        Some(trained) if trained.id != here => bail!(
            "{}: the run trained on dataset {} ({}), but {} is dataset {here}, other records (prepared again, or \
             another dataset): resuming would go on with other data than it began with; give the dataset it trained \
             on, or start a new run (another --out, or --force)",
            state.display(),
            trained.id,
            trained.dir.display(),
            dataset.dir().display()
        ),
        Some(_) => {}
    }
    Ok(())
}

/// Removes what a previous run left in `out` (its files but its config,
/// which the new run writes at once, and their leftovers), so that a
/// forced run killed before its first checkpoint cannot be resumed from
/// the old one under the new config.
pub fn remove_old_run(out: &Path) -> Result<()> {
    let mut removed = Vec::new();
    for name in RUN_FILES.iter().chain(&LEFTOVERS).filter(|&&name| name != CONFIG_FILE) {
        let path = out.join(name);
        let gone = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        match gone {
            Ok(()) => removed.push(*name),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", path.display()))
            }
            Err(_) => {}
        }
    }
    if !removed.is_empty() {
        crate::say!("{}: --force: removed the run it held ({})", out.display(), removed.join(", "));
    }
    Ok(())
}

/// The path of `out`'s config file.
pub fn config_path(out: &Path) -> PathBuf {
    out.join(CONFIG_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_put_back_to_its_default_is_a_change() {
        let config = |overrides: &[&str]| {
            let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
            TrainConfig::built_in("policy", &overrides).unwrap()
        };
        let tuned = config(&["batch_norm_batches=3", "linear_scaling=true"]);
        let plain = config(&[]);
        // config.toml leaves both out at their defaults.
        assert!(!plain.to_toml().unwrap().contains("batch_norm_batches"));
        assert_eq!(
            changed_settings(&tuned, &plain),
            ["batch_norm_batches 3 → default", "linear_scaling true → default"]
        );
        assert_eq!(
            changed_settings(&plain, &config(&["batch_norm_batches=3", "epochs=9"])),
            ["batch_norm_batches default → 3", "epochs 30 → 9"]
        );
        assert!(changed_settings(&tuned, &tuned).is_empty());
    }
}
