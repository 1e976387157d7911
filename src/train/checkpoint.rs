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

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use super::optim::Optimizer;
use crate::nn::{Arch, Model};

/// File of the model's tensors in a checkpoint directory.
pub const WEIGHTS_FILE: &str = "weights.safetensors";
/// File of the optimizer's state.
pub const OPTIMIZER_FILE: &str = "optimizer.safetensors";
/// File of the training state.
pub const STATE_FILE: &str = "state.json";
/// The one metadata key of go-train's tensor files: `step=N data_crc32=X`
/// (the step only in checkpoint files). The CRC-32 covers the file's data
/// (everything after its header): safetensors has no checksum, and a
/// flipped byte in a weight loaded silently. One key, because safetensors
/// writes metadata in hash order and two keys would make equal checkpoints
/// differ byte for byte.
const META_KEY: &str = "go_train";
/// The metadata key of files written before [`META_KEY`]: the step alone.
const LEGACY_STEP_KEY: &str = "step";

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
    let weights: Vec<(String, Tensor)> = model.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect();
    write_tensors(&staged.join(WEIGHTS_FILE), weights, Some(state.step))?;
    write_tensors(&staged.join(OPTIMIZER_FILE), optimizer.state(), Some(state.step))?;
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

fn sync_dir(dir: &Path) -> Result<()> {
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("cannot sync folder {}", dir.display()))
}

/// Loads the checkpoint in `dir` into `model` and `optimizer` (which must be
/// of the kinds that saved it) and returns the training state.
pub fn load(dir: &Path, model: &Model, optimizer: &mut dyn Optimizer) -> Result<TrainState> {
    let state_path = dir.join(STATE_FILE);
    let bytes = fs::read(&state_path).with_context(|| format!("cannot read {}", state_path.display()))?;
    let file: StateFile =
        serde_json::from_slice(&bytes).with_context(|| format!("{}: not a valid state file", state_path.display()))?;
    if file.arch != model.arch() {
        bail!("{}: checkpoint of a {:?} net, not {:?}", state_path.display(), file.arch, model.arch());
    }
    let step = file.state.step;
    let weights = dir.join(WEIGHTS_FILE);
    check_step(&weights, load_weights_at(&weights, model)?, step)?;
    let opt_path = dir.join(OPTIMIZER_FILE);
    let opt_file = read_tensors(&opt_path, model.device())?;
    check_step(&opt_path, opt_file.step, step)?;
    optimizer
        .load_state(opt_file.tensors)
        .with_context(|| format!("{}: cannot restore the optimizer", opt_path.display()))?;
    Ok(file.state)
}

/// Writes `model`'s tensors to the safetensors file `path`.
pub fn save_weights(path: &Path, model: &Model) -> Result<()> {
    let weights = model.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect();
    write_tensors(path, weights, None)
}

/// Sets `model`'s tensors from the safetensors file `path`, which must hold
/// exactly the net's tensors with their shapes.
pub fn load_weights(path: &Path, model: &Model) -> Result<()> {
    load_weights_at(path, model).map(|_| ())
}

/// [`load_weights`], returning the step recorded in the file's metadata.
fn load_weights_at(path: &Path, model: &Model) -> Result<Option<u64>> {
    let TensorFile { mut tensors, step } = read_tensors(path, model.device())?;
    for (name, var) in model.tensors() {
        let t = tensors.remove(&name).ok_or_else(|| anyhow!("{}: no tensor {name}", path.display()))?;
        if t.shape() != var.shape() {
            bail!("{}: tensor {name} has shape {:?}, the net needs {:?}", path.display(), t.dims(), var.dims());
        }
        var.set(&t.to_dtype(var.dtype())?).with_context(|| format!("{}: cannot set {name}", path.display()))?;
    }
    if let Some(extra) = tensors.keys().min() {
        bail!("{}: tensor {extra} is not part of a {:?} net", path.display(), model.arch());
    }
    Ok(step)
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

/// Tensors read from a safetensors file.
struct TensorFile {
    tensors: HashMap<String, Tensor>,
    /// The step recorded in the metadata, if any.
    step: Option<u64>,
}

fn read_tensors(path: &Path, device: &Device) -> Result<TensorFile> {
    let bytes = fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let (header_len, meta) = safetensors::SafeTensors::read_metadata(&bytes)
        .map_err(|e| anyhow!("{}: not a valid safetensors file: {e}", path.display()))?;
    let meta = meta.metadata().clone().unwrap_or_default();
    let fields: HashMap<&str, &str> = meta
        .get(META_KEY)
        .map(|v| v.split_whitespace().filter_map(|f| f.split_once('=')).collect())
        .unwrap_or_default();
    // Files from before checksums were written have none to check.
    if let Some(&stored) = fields.get("data_crc32") {
        let data = bytes.get(8 + header_len..).unwrap_or_default();
        let actual = format!("{:08x}", crc32fast::hash(data));
        if stored != actual {
            bail!("{}: damaged: its tensor data has CRC-32 {actual}, written as {stored}", path.display());
        }
    }
    let step = match fields.get("step").copied().or(meta.get(LEGACY_STEP_KEY).map(String::as_str)) {
        Some(s) => Some(s.parse().with_context(|| format!("{}: bad step {s:?} in metadata", path.display()))?),
        None => None,
    };
    let tensors = candle_core::safetensors::load_buffer(&bytes, device)
        .map_err(|e| anyhow!("{}: cannot decode its tensors: {e}", path.display()))?;
    Ok(TensorFile { tensors, step })
}

/// Writes `tensors` to `path` with their checksum and, for a checkpoint's
/// files, the training step (see [`META_KEY`]).
fn write_tensors(path: &Path, tensors: Vec<(String, Tensor)>, step: Option<u64>) -> Result<()> {
    // Contiguous CPU copies: serialising reads raw bytes, and candle's
    // conversion for other layouts would panic rather than fail.
    let host = tensors
        .into_iter()
        .map(|(name, t)| {
            let t = t.to_device(&Device::Cpu)?;
            let t = if t.dtype() == DType::F64 { t.to_dtype(DType::F32)? } else { t };
            Ok((name, t.contiguous()?))
        })
        .collect::<candle_core::Result<Vec<_>>>()?;
    let encode = |value: String| {
        let meta = HashMap::from([(META_KEY.to_string(), value)]);
        safetensors::serialize(host.iter().map(|(n, t)| (n.as_str(), t)), Some(meta))
            .with_context(|| format!("cannot encode tensors for {}", path.display()))
    };
    // The data section does not depend on the metadata: encode once to
    // checksum it, then again with the checksum in the header.
    let first = encode(String::new())?;
    let header_len = u64::from_le_bytes(first[..8].try_into().expect("safetensors files start with 8 bytes")) as usize;
    let crc = format!("data_crc32={:08x}", crc32fast::hash(&first[8 + header_len..]));
    write_atomic(path, &encode(step.map_or(crc.clone(), |s| format!("step={s} {crc}")))?)
}

/// Writes `bytes` to `path` through a temporary file that is synced and
/// then renamed over `path`; finally syncs the folder so the rename lasts.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp_name = path.file_name().ok_or_else(|| anyhow!("{}: not a file name", path.display()))?.to_owned();
    tmp_name.push(".tmp");
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write().with_context(|| format!("cannot write {}", tmp.display()))?;
    rename(&tmp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::optim::OptimizerConfig;
    use rand::SeedableRng;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("go-train-ckpt-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// A trained-a-little value net with Adam, so the optimizer has state.
    fn trained(seed: u64) -> (Model, Box<dyn Optimizer>) {
        let model = Model::new(Arch::Value, &Device::Cpu, seed).unwrap();
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
        let state = TrainState { epoch: 2, step: 17, rng: Some(Pcg64Mcg::seed_from_u64(5)), best_metric: Some(0.5) };
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

        // One flipped bit in the last weight: the file still decodes.
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        fs::write(&weights, &flipped).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("damaged"), "{err}");
        let err = format!("{:#}", load_weights(&weights, &model).unwrap_err());
        assert!(err.contains("damaged"), "{err}");

        fs::write(&weights, b"garbage").unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors"), "{err}");

        // Another net's weights: names and shapes differ.
        let playout = Model::new(Arch::Playout, &Device::Cpu, 1).unwrap();
        fs::write(&weights, &good).unwrap();
        let err = format!("{:#}", load_weights(&weights, &playout).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("shape"), "{err}");

        // A weights file from another save.
        save_weights(&weights, &model).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("weights.safetensors") && err.contains("step"), "{err}");

        fs::remove_file(dir.join(STATE_FILE)).unwrap();
        let err = format!("{:#}", load(&dir, &model, opt.as_mut()).unwrap_err());
        assert!(err.contains("state.json"), "{err}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
