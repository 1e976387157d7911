//! Checkpoints: everything needed to resume training exactly, in one
//! directory.
//!
//! | file | content |
//! |---|---|
//! | `weights.safetensors` | the model's tensors (f32, PyTorch names: see [`crate::nn`]) |
//! | `optimizer.safetensors` | the optimizer's state (see [`super::optim`]) |
//! | `state.json` | [`TrainState`], plus the net's architecture |
//!
//! A checkpoint is replaced as a whole: the new one is written and synced
//! in `<dir>.new` (`state.json` last), then `<dir>` becomes `<dir>.old`,
//! `<dir>.new` becomes `<dir>`, and `<dir>.old` is removed. A process killed
//! at any point leaves a state [`recover`] turns back into one complete
//! checkpoint, the newest that was fully written: no kill can leave a
//! checkpoint that `--resume` refuses. The two tensor files also record the
//! training step and a CRC-32 of their data in their metadata: loading
//! checks the checksum (a flipped byte is refused, naming the file) and that
//! all three files agree.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use super::optim::Optimizer;
use crate::atomic::{sync_dir, write_atomic};
use crate::dataset::manifest::DatasetId;
use crate::nn::weights::{self, read_tensors, write_tensors, Meta};
use crate::nn::{Arch, Model};

/// File of the model's tensors in a checkpoint directory.
pub const WEIGHTS_FILE: &str = crate::nn::weights::CHECKPOINT_WEIGHTS;
/// File of the optimizer's state.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File of the training state.
pub const STATE_FILE: &str = "state.json";

/// Where training stands, besides the weights and the optimizer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Epochs completed.
    pub epoch: u64,
    /// Optimizer steps taken.
    pub step: u64,
    /// The data loader's random generator, so that resumed training sees
    /// the same batches as uninterrupted training would have.
    pub rng: Option<Pcg64Mcg>,
    /// Best validation metric so far (e.g. accuracy), if measured.
    pub best_metric: Option<f64>,
    /// The dataset the run trains on (absent in checkpoints written
    /// before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<TrainedOn>,
    /// The positions a step trained on, over all ranks: `batch`, or with
    /// `linear_scaling` `batch` times the ranks (absent in checkpoints
    /// written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_batch: Option<usize>,
    /// The threads the CPU steps ran on (absent for a GPU, and in
    /// checkpoints written before it was recorded): the kernel gradients
    /// are summed in one share per thread, so another number rounds them
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_threads: Option<usize>,
}

/// The dataset a run trains on, as its checkpoint records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrainedOn {
    /// Its identity ([`crate::dataset::Manifest::identity`]).
    pub id: DatasetId,
    /// Its folder, as the run named it.
    pub dir: PathBuf,
}

/// `state.json` as stored: the state plus what it belongs to. (Nested,
/// not flattened: serde's flattening cannot carry the generator's u128.)
#[derive(Serialize, Deserialize)]
struct StateFile {
    arch: Arch,
    state: TrainState,
}

/// Writes a checkpoint of `model`, `optimizer` and `state` into `dir`,
/// replacing any checkpoint there in one step (see the module's notes).
pub fn save(dir: &Path, model: &Model, optimizer: &dyn Optimizer, state: &TrainState) -> Result<()> {
    recover(dir)?;
    let (staged, previous) = (sibling(dir, "new")?, sibling(dir, "old")?);
    remove_dir_if_present(&staged)?;
    fs::create_dir_all(&staged).with_context(|| format!("cannot create checkpoint folder {}", staged.display()))?;
    let trained_on = state.dataset.as_ref().map(|d| d.id.0);
    weights::save_as(
        &staged.join(WEIGHTS_FILE),
        model,
        &Meta { dataset: trained_on, ..Meta::of(model, Some(state.step)) },
    )?;
    let step_only = Meta { step: Some(state.step), ..Meta::default() };
    write_tensors(&staged.join(OPTIMIZER_FILE), optimizer.state(), &step_only)?;
    let json = serde_json::to_vec_pretty(&StateFile { arch: model.arch(), state: state.clone() })?;
    // Last: a staged folder with a state file is complete.
    write_atomic(&staged.join(STATE_FILE), &json)?;
    swap_in(dir, &staged, &previous)
}

/// Makes `dir` the one complete checkpoint after a save that was killed
/// part-way, keeping the newest complete one: a staged checkpoint whose
/// state file was written wins over the old one. Does nothing when no save
/// was interrupted.
pub fn recover(dir: &Path) -> Result<()> {
    let (staged, previous) = (sibling(dir, "new")?, sibling(dir, "old")?);
    if staged.join(STATE_FILE).exists() {
        // Killed after the staged checkpoint was complete, before or
        // between the renames.
        swap_in(dir, &staged, &previous)
    } else {
        // Killed while staging (the old checkpoint stands), or after the
        // swap, before the old one was removed.
        if !dir.exists() && previous.join(STATE_FILE).exists() {
            rename(&previous, dir)?;
        }
        remove_dir_if_present(&staged)?;
        remove_dir_if_present(&previous)
    }
}

/// Moves the complete checkpoint `staged` to `dir`, the one there (if any)
/// out of the way to `previous` first, and removes it once the move lasts.
fn swap_in(dir: &Path, staged: &Path, previous: &Path) -> Result<()> {
    if dir.exists() {
        remove_dir_if_present(previous)?;
        rename(dir, previous)?;
    }
    rename(staged, dir)?;
    sync_dir(dir.parent().unwrap_or(Path::new(".")))?;
    remove_dir_if_present(previous)
}

/// `<dir>.<suffix>`, beside `dir`.
fn sibling(dir: &Path, suffix: &str) -> Result<PathBuf> {
    let mut name = dir.file_name().ok_or_else(|| anyhow!("{}: not a folder name", dir.display()))?.to_owned();
    name.push(format!(".{suffix}"));
    Ok(dir.with_file_name(name))
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).with_context(|| format!("cannot rename {} to {}", from.display(), to.display()))
}

fn remove_dir_if_present(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Loads the checkpoint in `dir` into `model` and `optimizer` (which must be
/// of the kinds that saved it) and returns the training state.
pub fn load(dir: &Path, model: &Model, optimizer: &mut dyn Optimizer) -> Result<TrainState> {
    let (arch, state) = read_state(dir)?;
    if arch != model.arch() {
        bail!("{}: checkpoint of a {arch} net, not {}", dir.join(STATE_FILE).display(), model.arch());
    }
    let step = state.step;
    let weights = dir.join(WEIGHTS_FILE);
    check_step(&weights, load_weights_at(&weights, model)?, step)?;
    let opt_path = dir.join(OPTIMIZER_FILE);
    let opt_file = read_tensors(&opt_path, model.device())?;
    check_step(&opt_path, opt_file.meta.step, step)?;
    optimizer
        .load_state(opt_file.tensors)
        .with_context(|| format!("{}: cannot restore the optimizer", opt_path.display()))?;
    Ok(state)
}

/// The net and the training state of the checkpoint in `dir`, from its
/// state file alone.
pub fn read_state(dir: &Path) -> Result<(Arch, TrainState)> {
    let state_path = dir.join(STATE_FILE);
    let bytes = crate::bounded_read::read_at_most(&state_path, crate::bounded_read::TEXT_BYTES, "a state file")
        .with_context(|| format!("cannot read {}", state_path.display()))?;
    let file: StateFile =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: not a valid state file", state_path.display()))?;
    Ok((file.arch, file.state))
}

/// [`weights::load_into`], returning the step recorded in the file.
fn load_weights_at(path: &Path, model: &Model) -> Result<Option<u64>> {
    Ok(weights::load_into(path, model)?.step)
}

fn check_step(path: &Path, found: Option<u64>, expected: u64) -> Result<()> {
    match found {
        Some(s) if s == expected => Ok(()),
        Some(s) => bail!(
            "{}: written at step {s}, but {STATE_FILE} is at step {expected} (was a save interrupted?)",
            path.display()
        ),
        None => bail!("{}: no step in its metadata: not a checkpoint file", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::nn::weights::{load_into, save as save_weights};
    use crate::train::optim::OptimizerConfig;
    use candle_core::{DType, Device, Tensor};
    use rand::SeedableRng;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("go-train-ckpt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// A trained-a-little value net with Adam, so the optimizer has state.
    fn trained(seed: u64) -> (Model, Box<dyn Optimizer>) {
        let model = Model::new(Arch::Value, FeatureSet::Seed, &Device::Cpu, seed).unwrap();
        let mut opt = OptimizerConfig::adam(0.01).build(model.parameters());
        let x = Tensor::ones((2, 15, 19, 19), DType::F32, &Device::Cpu).unwrap();
        let y = Tensor::new(&[1.0f32, 0.0], &Device::Cpu).unwrap();
        let grads = model.output().loss(&model.forward(&x, true).unwrap(), &y).unwrap().backward().unwrap();
        opt.step(&grads).unwrap();
        (model, opt)
    }

    fn values(m: &Model) -> Vec<(String, Vec<f32>)> {
        m.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().flatten_all().unwrap().to_vec1().unwrap())).collect()
    }

    #[test]
    fn save_then_load_restores_everything() {
        let dir = temp_dir("roundtrip");
        let (model, opt) = trained(1);
        let dataset = Some(TrainedOn { id: DatasetId(0x1234abcd), dir: "datasets/kgs".into() });
        let state = TrainState {
            epoch: 2,
            step: 17,
            rng: Some(Pcg64Mcg::seed_from_u64(5)),
            best_metric: Some(0.5),
            dataset,
            global_batch: Some(64),
            cpu_threads: Some(3),
        };
        save(&dir, &model, opt.as_ref(), &state).unwrap();
        let (fresh, mut fresh_opt) = trained(2);
        assert_ne!(values(&fresh), values(&model));
        assert_eq!(load(&dir, &fresh, fresh_opt.as_mut()).unwrap(), state);
        assert_eq!(values(&fresh), values(&model));
        let flat = |o: &dyn Optimizer| -> Vec<(String, Vec<f32>)> {
            let to_f32 = |t: Tensor| t.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1().unwrap();
            o.state().into_iter().map(|(n, t)| (n, to_f32(t))).collect()
        };
        assert_eq!(flat(fresh_opt.as_ref()), flat(opt.as_ref()));
        let weights = crate::nn::weights::read_meta(&dir.join(WEIGHTS_FILE)).unwrap();
        assert_eq!(weights.dataset, Some(0x1234abcd), "the weights name their dataset too");
        assert!(!dir.join("weights.safetensors.tmp").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    fn copy_dir(from: &Path, to: &Path, only: Option<&str>) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            if only.is_none_or(|o| o == name) {
                fs::copy(&path, to.join(name)).unwrap();
            }
        }
    }

    /// Every state a killed save can leave (built file by file as `save`
    /// leaves it at each step) comes back as one complete checkpoint, the
    /// newest fully written, and no `.new`/`.old` folder is left.
    #[test]
    fn a_save_killed_at_any_point_leaves_a_checkpoint_that_resumes() {
        let root = temp_dir("killed");
        let (model, opt) = trained(1);
        let at = |step| TrainState { epoch: step / 10, step, ..TrainState::default() };
        let (older, newer) = (root.join("older"), root.join("newer"));
        save(&older, &model, opt.as_ref(), &at(10)).unwrap();
        save(&newer, &model, opt.as_ref(), &at(20)).unwrap();
        // The folder, its .new (complete or not), its .old, and the step to
        // resume from (None: no checkpoint).
        type Case<'a> = (Option<&'a Path>, Option<(&'a Path, bool)>, Option<&'a Path>, Option<u64>);
        let cases: [Case; 5] = [
            (Some(&older), Some((&newer, false)), None, Some(10)), // killed while staging
            (Some(&older), Some((&newer, true)), None, Some(20)),  // staged, before the renames
            (None, Some((&newer, true)), Some(&older), Some(20)),  // between the two renames
            (Some(&newer), None, Some(&older), Some(20)),          // before the old one is removed
            (None, Some((&newer, false)), None, None),             // the first save, killed while staging
        ];
        for (i, (current, staged, previous, expected)) in cases.into_iter().enumerate() {
            let dir = root.join(format!("case{i}")).join("last");
            if let Some(c) = current {
                copy_dir(c, &dir, None);
            }
            if let Some((s, complete)) = staged {
                copy_dir(s, &sibling(&dir, "new").unwrap(), if complete { None } else { Some(WEIGHTS_FILE) });
            }
            if let Some(p) = previous {
                copy_dir(p, &sibling(&dir, "old").unwrap(), None);
            }
            recover(&dir).unwrap();
            let (fresh, mut fresh_opt) = trained(2);
            match expected {
                Some(step) => assert_eq!(load(&dir, &fresh, fresh_opt.as_mut()).unwrap().step, step, "case {i}"),
                None => assert!(!dir.exists(), "case {i}: no checkpoint was complete"),
            }
            assert!(!sibling(&dir, "new").unwrap().exists() && !sibling(&dir, "old").unwrap().exists(), "case {i}");
        }
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn damaged_checkpoints_are_refused_naming_the_file() {
        let dir = temp_dir("damaged");
        let (model, mut opt) = trained(1);
        save(&dir, &model, opt.as_ref(), &TrainState::default()).unwrap();
        let weights = dir.join(WEIGHTS_FILE);
        let good = fs::read(&weights).unwrap();

        fs::write(&weights, &good[..good.len() / 2]).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors"), "{err}");
        fs::write(&weights, &good).unwrap();

        // The optimizer's file given as a net is named for what it is
        // (once "no tensor bn0.bias", from the folder's config.toml).
        let Err(err) = crate::nn::weights::load(&dir.join(OPTIMIZER_FILE), &Device::Cpu) else {
            panic!("the optimizer's state loaded as a net")
        };
        let err = format!("{err:#}");
        assert!(err.contains("optimizer state") && err.contains("weights.safetensors"), "{err}");

        // Another kind of net is named as the command line names it (once
        // as Rust's debug text, `ResNet(ResNetConfig { blocks: 1, .. })`).
        let other = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        let mut other_opt = OptimizerConfig::adam(0.01).build(other.parameters());
        let err = format!("{:#}", load(&dir, &other, other_opt.as_mut()).unwrap_err());
        assert!(err.contains("checkpoint of a value net, not policy"), "{err}");

        // One flipped bit in the last weight: the file still decodes.
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        fs::write(&weights, &flipped).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("damaged"), "{err}");
        let err = format!("{:#}", load_into(&weights, &model).unwrap_err());
        assert!(err.contains("damaged"), "{err}");

        fs::write(&weights, b"garbage").unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors"), "{err}");

        // Another net's weights: names and shapes differ.
        let playout = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        fs::write(&weights, &good).unwrap();
        let err = format!("{:#}", load_into(&weights, &playout).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("value net, not playout"), "{err}");

        // A weights file from another save.
        save_weights(&weights, &model, None).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("step"), "{err}");

        fs::remove_file(dir.join(STATE_FILE)).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("state.json"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
