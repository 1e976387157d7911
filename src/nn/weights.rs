//! Weights files: safetensors that know their net.
//!
//! go-train's tensor files carry one metadata key, `go_train`, whose value
//! is a list of `key=value` fields: `net=` the architecture
//! (`policy`, `resnet-policy:6x64`, …), `features=` the input planes it
//! reads, `step=` the training step (checkpoint files), `dataset=` the
//! identity of the dataset it was trained on (8 hex digits: see
//! `dataset::Manifest::identity`), and `data_crc32=`
//! a CRC-32 of the file's data (everything after its header): safetensors
//! has no checksum, and a flipped byte in a weight would load silently. One
//! key, because safetensors writes metadata in hash order and two keys would
//! make equal files differ byte for byte.
//!
//! [`load`] builds the right net from a bare weights file, so that playing
//! needs nothing of training. Files written before the net was recorded are
//! read with the `net` of their checkpoint folder's `config.toml`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use candle_core::{DType, Device, Tensor, Var};

use super::policy::SeedTrunk;
use super::{Arch, Model};
use crate::atomic::write_atomic;
use crate::features::FeatureSet;

/// The metadata key of go-train's tensor files.
const META_KEY: &str = "go_train";
/// The metadata key of files written before [`META_KEY`]: the step alone.
const LEGACY_STEP_KEY: &str = "step";
/// A checkpoint folder's best weights, by validation.
pub const BEST_FILE: &str = "best.safetensors";
/// The weights in a checkpoint folder's `last/`.
pub const LAST_FILE: &str = "last/weights.safetensors";
/// The weights file of a checkpoint folder such as `last/`.
pub const CHECKPOINT_WEIGHTS: &str = "weights.safetensors";

/// What a tensor file says about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// The net, in weights files.
    pub net: Option<Arch>,
    /// Its input planes, in weights files.
    pub features: Option<FeatureSet>,
    /// The training step, in checkpoint files.
    pub step: Option<u64>,
    /// The identity of the dataset the weights were trained on, in files
    /// that training writes.
    pub dataset: Option<u32>,
}

impl Meta {
    /// The metadata of `model`'s weights at `step`.
    pub fn of(model: &Model, step: Option<u64>) -> Meta {
        Meta { net: Some(model.arch()), features: Some(model.features()), step, dataset: None }
    }

    fn fields(&self, crc: u32) -> String {
        let mut out = Vec::new();
        if let Some(net) = self.net {
            out.push(format!("net={net}"));
        }
        if let Some(f) = self.features {
            out.push(format!("features={f}"));
        }
        if let Some(s) = self.step {
            out.push(format!("step={s}"));
        }
        if let Some(d) = self.dataset {
            out.push(format!("dataset={d:08x}"));
        }
        out.push(format!("data_crc32={crc:08x}"));
        out.join(" ")
    }
}

/// Tensors read from a safetensors file, with its metadata.
pub struct TensorFile {
    pub tensors: HashMap<String, Tensor>,
    pub meta: Meta,
}

/// Reads a safetensors file onto `device`, checking its CRC-32 when it has
/// one. Errors name the file.
pub fn read_tensors(path: &Path, device: &Device) -> Result<TensorFile> {
    let bytes = crate::bounded_read::read_at_most(path, crate::bounded_read::WEIGHTS_BYTES, "a weights file")
        .with_context(|| format!("cannot read {}", path.display()))?;
    decode_tensors(&bytes, &path.display().to_string(), device)
}

/// [`read_tensors`] of a file's bytes already in memory; errors name it
/// `name`.
pub fn decode_tensors(bytes: &[u8], name: &str, device: &Device) -> Result<TensorFile> {
    let (header_len, meta) = safetensors::SafeTensors::read_metadata(bytes)
        .map_err(|e| anyhow!("{name}: not a valid safetensors file: {e}"))?;
    let meta = meta.metadata().clone().unwrap_or_default();
    // Files from before checksums were written have none to check.
    if let Some(stored) = fields(&meta).get("data_crc32") {
        let data = bytes.get(8 + header_len..).unwrap_or_default();
        let actual = format!("{:08x}", crc32fast::hash(data));
        if *stored != actual {
            bail!("{name}: damaged: its tensor data has CRC-32 {actual}, written as {stored}");
        }
    }
    let meta = parse_meta(name, &meta)?;
    let tensors = candle_core::safetensors::load_buffer(bytes, device)
        .map_err(|e| anyhow!("{name}: cannot decode its tensors: {e}"))?;
    Ok(TensorFile { tensors, meta })
}

/// The metadata of the tensor file `path`, from its header alone (the
/// tensors are neither read nor checked).
pub fn read_meta(path: &Path) -> Result<Meta> {
    let path = resolve(path)?;
    let not_safetensors = || format!("{}: not a valid safetensors file", path.display());
    let mut file =
        crate::bounded_read::open_without_waiting(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut len = [0u8; 8];
    std::io::Read::read_exact(&mut file, &mut len).with_context(not_safetensors)?;
    // safetensors' own limit on a header.
    if u64::from_le_bytes(len) > 100_000_000 {
        bail!("{}: its header would be {} bytes", not_safetensors(), u64::from_le_bytes(len));
    }
    let mut header = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, u64::from_le_bytes(len)), &mut header)?;
    let header: serde_json::Value = serde_json::from_slice(&header).with_context(not_safetensors)?;
    let meta: HashMap<String, String> = match header.get("__metadata__") {
        Some(m) => serde_json::from_value(m.clone()).with_context(not_safetensors)?,
        None => HashMap::new(),
    };
    parse_meta(&path.display().to_string(), &meta)
}

/// The `key=value` fields of go-train's metadata key.
fn fields(meta: &HashMap<String, String>) -> HashMap<&str, &str> {
    meta.get(META_KEY).map(|v| v.split_whitespace().filter_map(|f| f.split_once('=')).collect()).unwrap_or_default()
}

/// go-train's fields of the metadata of the file `name`.
fn parse_meta(name: &str, meta: &HashMap<String, String>) -> Result<Meta> {
    let fields = fields(meta);
    let bad = |what: &str, value: &str| format!("{name}: bad {what} {value:?} in its metadata");
    let step = match fields.get("step").copied().or(meta.get(LEGACY_STEP_KEY).map(String::as_str)) {
        Some(s) => Some(s.parse().with_context(|| bad("step", s))?),
        None => None,
    };
    let net = fields.get("net").map(|s| s.parse::<Arch>().with_context(|| bad("net", s))).transpose()?;
    let features =
        fields.get("features").map(|s| s.parse::<FeatureSet>().with_context(|| bad("features", s))).transpose()?;
    let dataset =
        fields.get("dataset").map(|s| u32::from_str_radix(s, 16).with_context(|| bad("dataset", s))).transpose()?;
    Ok(Meta { net, features, step, dataset })
}

/// Writes `tensors` to `path` (atomically) with `meta` and the checksum of
/// their data.
pub fn write_tensors(path: &Path, tensors: Vec<(String, Tensor)>, meta: &Meta) -> Result<()> {
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
    let crc = crc32fast::hash(&first[8 + header_len..]);
    write_atomic(path, &encode(meta.fields(crc))?)
}

/// Writes `model`'s tensors to `path`, with its net and features (and
/// `step`, for a checkpoint).
pub fn save(path: &Path, model: &Model, step: Option<u64>) -> Result<()> {
    save_as(path, model, &Meta::of(model, step))
}

/// Writes `model`'s tensors to `path` with `meta` ([`Meta::of`] and more).
pub fn save_as(path: &Path, model: &Model, meta: &Meta) -> Result<()> {
    let weights = model.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect();
    write_tensors(path, weights, meta)
}

/// Sets `model`'s tensors from the file `path`, which must hold exactly the
/// net's tensors with their shapes, for the same net and features when it
/// names them. Returns the file's metadata.
pub fn load_into(path: &Path, model: &Model) -> Result<Meta> {
    set_tensors(read_tensors(path, model.device())?, model, &path.display().to_string())
}

/// [`load_into`] from tensors already read, from the file `name`.
fn set_tensors(file: TensorFile, model: &Model, name: &str) -> Result<Meta> {
    let TensorFile { mut tensors, meta } = file;
    if let Some(net) = meta.net.filter(|&n| n != model.arch()) {
        bail!("{name}: weights of a {net} net, not {}", model.arch());
    }
    if let Some(f) = meta.features.filter(|&f| f != model.features()) {
        bail!("{name}: a net for {f} features, not {}", model.features());
    }
    for (tensor, var) in model.tensors() {
        let t = tensors.remove(&tensor).ok_or_else(|| anyhow!("{name}: no tensor {tensor}"))?;
        if t.shape() != var.shape() {
            bail!("{name}: tensor {tensor} has shape {:?}, the net needs {:?}", t.dims(), var.dims());
        }
        set_checked(&var, &t, name, &tensor)?;
    }
    if let Some(extra) = tensors.keys().min() {
        bail!("{name}: tensor {extra} is not part of a {} net", model.arch());
    }
    Ok(meta)
}

/// Sets `var` to the tensor `tensor` of the file `name`, which must hold
/// finite floats: a file of NaN weights (its checksum right) once played
/// a pass on an empty board, and integers were taken for weights.
fn set_checked(var: &Var, t: &Tensor, name: &str, tensor: &str) -> Result<()> {
    if !t.dtype().is_float() {
        bail!("{name}: tensor {tensor} holds {:?} numbers, where a net's weights are floats", t.dtype());
    }
    let magnitude = t.abs()?.to_dtype(DType::F32)?.sum_all()?.to_scalar::<f32>()?;
    if !magnitude.is_finite() {
        bail!("{name}: tensor {tensor} holds NaN or infinite values");
    }
    let t = t.to_device(var.device())?.to_dtype(var.dtype())?;
    var.set(&t).with_context(|| format!("{name}: cannot set {tensor}"))
}

/// Starts `model` from another net: sets each of its tensors that `path`
/// holds under the same name and shape (a trained policy's trunk under a
/// value head), and returns how many were set. The features must be the
/// same; a file sharing no tensor with the net is an error.
pub fn load_matching(path: &Path, model: &Model) -> Result<usize> {
    let path = resolve(path)?;
    let TensorFile { tensors, meta } = read_tensors(&path, model.device())?;
    if let Some(f) = meta.features.filter(|&f| f != model.features()) {
        bail!("{}: a net for {f} features, not {}", path.display(), model.features());
    }
    let mut set = 0;
    for (name, var) in model.tensors() {
        if let Some(t) = tensors.get(&name).filter(|t| t.shape() == var.shape()) {
            set_checked(&var, t, &path.display().to_string(), &name)?;
            set += 1;
        }
    }
    if set == 0 {
        bail!("{}: no tensor of the same name and shape as the {} net's", path.display(), model.arch());
    }
    Ok(set)
}

/// The weights file `path` names: the file itself, or in a run's folder
/// its best weights, else its last; in a checkpoint folder its weights.
pub fn resolve(path: &Path) -> Result<PathBuf> {
    if !path.exists() {
        bail!("{}: no such checkpoint folder or weights file", path.display());
    }
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let best = path.join(BEST_FILE);
    if best.exists() {
        return Ok(best);
    }
    // A checkpoint folder itself (`RUN/last`), not only its run's.
    let own = path.join(CHECKPOINT_WEIGHTS);
    let last = path.join(LAST_FILE);
    match (own.is_file(), last.exists()) {
        (true, _) => Ok(own),
        (false, true) => Ok(last),
        // A folder of nets (`nets/`) once failed as "cannot read
        // nets/last/weights.safetensors".
        (false, false) => bail!(
            "{}: a folder, but no training run's or checkpoint's ({BEST_FILE}, {LAST_FILE} or {CHECKPOINT_WEIGHTS} \
             in it): name a weights file",
            path.display()
        ),
    }
}

/// Loads a net from `path` (a weights file, or a checkpoint folder: see
/// [`resolve`]) onto `device`, building the net the file names.
pub fn load(path: &Path, device: &Device) -> Result<Model> {
    let file = resolve(path)?;
    let TensorFile { meta, tensors } = read_tensors(&file, &Device::Cpu)?;
    // A training checkpoint's optimizer state names no net either: taken
    // for an old weights file, it failed as "no tensor bn0.bias".
    let optimizer_state = [".momentum_buffer", ".exp_avg", ".exp_avg_sq"];
    if meta.net.is_none() && tensors.keys().any(|k| optimizer_state.iter().any(|s| k.ends_with(s))) {
        bail!(
            "{}: a training checkpoint's optimizer state (momentum or Adam moments), not a net's weights: name \
             weights.safetensors beside it, or the run's folder",
            file.display()
        );
    }
    let arch = match meta.net {
        Some(net) => net,
        None => legacy_arch(&file)?,
    };
    let name = file.display().to_string();
    check_depth(arch, &tensors, &name)?;
    let model = Model::new(arch, meta.features.unwrap_or_default(), device, 0)?;
    set_tensors(TensorFile { meta, tensors }, &model, &name)?;
    Ok(model)
}

/// Builds the net a weights file's bytes name (`name` in errors), onto
/// `device`: nets built into a program rather than read from a file.
pub fn load_bytes(bytes: &[u8], name: &str, device: &Device) -> Result<Model> {
    let file = decode_tensors(bytes, name, device)?;
    let arch = file.meta.net.with_context(|| format!("{name}: names no net in its metadata"))?;
    check_depth(arch, &file.tensors, name)?;
    let model = Model::new(arch, file.meta.features.unwrap_or_default(), device, 0)?;
    set_tensors(file, &model, name)?;
    Ok(model)
}

/// Whether the tensors of the file `name` hold the last residual block of
/// `arch`, the net its metadata names, at that block's width, and no block
/// after it, checked before the net is built: metadata naming a net of 100
/// blocks of 1,024 filters over a small net's tensors once took 40 seconds
/// and 7.5 GB to build it before the tensors were compared.
fn check_depth(arch: Arch, tensors: &HashMap<String, Tensor>, name: &str) -> Result<()> {
    let (prefix, blocks, filters) = match arch {
        Arch::ResNet(config) => ("blocks", config.blocks, config.filters),
        Arch::PolicyValueTower(blocks) => ("tower", blocks, SeedTrunk::CHANNELS),
        _ => return Ok(()),
    };
    let shape_of = |block: usize| tensors.get(&format!("{prefix}.{block}.conv1.weight")).map(|t| t.dims().to_vec());
    let last = blocks.checked_sub(1).map(shape_of);
    let fits = last.is_none_or(|shape| shape == Some(vec![filters, filters, 3, 3])) && shape_of(blocks).is_none();
    if !fits {
        bail!("{name}: its metadata names a {arch} net, but its tensors are not of one (blocks or filters differ)");
    }
    Ok(())
}

/// The net of a weights file written before files named it: the `net` of
/// its checkpoint folder's `config.toml` (`<out>/best.safetensors`,
/// `<out>/last/weights.safetensors`).
fn legacy_arch(file: &Path) -> Result<Arch> {
    let parent = file.parent().unwrap_or(Path::new("."));
    let folder =
        if parent.file_name().is_some_and(|n| n == "last") { parent.parent().unwrap_or(parent) } else { parent };
    let config = folder.join("config.toml");
    let hint = || format!("{}: names no net in its metadata, nor does {} beside it", file.display(), config.display());
    let text = crate::bounded_read::read_text_at_most(&config, crate::bounded_read::TEXT_BYTES, "a config")
        .with_context(hint)?;
    let table: toml::Table = text.parse().with_context(hint)?;
    let net = table.get("net").and_then(|v| v.as_str()).with_context(hint)?;
    net.parse().with_context(hint)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run's folder gives its best weights, else its last; a checkpoint
    /// folder (`RUN/last`) its own, where `RUN/last/last/…` was named.
    #[test]
    fn folders_resolve_to_their_weights() {
        let dir = tempfile::tempdir().unwrap();
        let last = dir.path().join("last");
        std::fs::create_dir_all(&last).unwrap();
        std::fs::write(last.join(CHECKPOINT_WEIGHTS), b"").unwrap();
        assert_eq!(resolve(dir.path()).unwrap(), dir.path().join(LAST_FILE));
        assert_eq!(resolve(&last).unwrap(), last.join(CHECKPOINT_WEIGHTS));
        std::fs::write(dir.path().join(BEST_FILE), b"").unwrap();
        assert_eq!(resolve(dir.path()).unwrap(), dir.path().join(BEST_FILE));
        // A folder of other files is none of them.
        std::fs::write(last.join("policy.safetensors"), b"").unwrap();
        std::fs::remove_file(last.join(CHECKPOINT_WEIGHTS)).unwrap();
        let err = resolve(&last).unwrap_err().to_string();
        assert!(err.contains("a folder, but no training run's") && err.contains("name a weights file"), "{err}");
    }

    #[test]
    fn a_bare_weights_file_loads_as_its_net_and_features() {
        let dir = tempfile::tempdir().unwrap();
        for (arch, features) in [
            (Arch::Policy, FeatureSet::Extended),
            (Arch::Value, FeatureSet::Seed),
            ("resnet-value:1x8".parse().unwrap(), FeatureSet::Extended),
        ] {
            let model = Model::new(arch, features, &Device::Cpu, 3).unwrap();
            let path = dir.path().join("net.safetensors");
            save(&path, &model, None).unwrap();
            let loaded = load(&path, &Device::Cpu).unwrap();
            assert_eq!((loaded.arch(), loaded.features()), (arch, features));
            for ((n, a), (_, b)) in model.tensors().iter().zip(loaded.tensors()) {
                let (a, b): (Vec<f32>, Vec<f32>) = (
                    a.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
                    b.as_tensor().flatten_all().unwrap().to_vec1().unwrap(),
                );
                assert_eq!(a, b, "{n}");
            }
            // Loading into another net or for other features is refused,
            // naming both.
            let other = FeatureSet::ALL.into_iter().find(|&f| f != features).unwrap();
            let err = load_into(&path, &Model::new(arch, other, &Device::Cpu, 3).unwrap()).unwrap_err().to_string();
            assert!(err.contains(features.name()) && err.contains(other.name()), "{err}");
        }
    }

    /// The dataset a net was trained on travels in its file, and its
    /// header alone says it.
    #[test]
    fn the_metadata_reads_back_from_the_header_alone() {
        let dir = tempfile::tempdir().unwrap();
        let model = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        let path = dir.path().join(BEST_FILE);
        let meta = Meta { dataset: Some(0x0badf00d), ..Meta::of(&model, Some(7)) };
        save_as(&path, &model, &meta).unwrap();
        assert_eq!(read_meta(&path).unwrap(), meta);
        assert_eq!(read_meta(dir.path()).unwrap(), meta, "a checkpoint folder names its best weights");
        assert_eq!(read_tensors(&path, &Device::Cpu).unwrap().meta, meta);
        std::fs::write(&path, b"not a safetensors file").unwrap();
        assert!(read_meta(&path).unwrap_err().to_string().contains(BEST_FILE));
    }

    #[test]
    fn an_old_file_takes_its_net_from_the_folder_config() {
        let dir = tempfile::tempdir().unwrap();
        let model = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        let weights = model.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect();
        let path = dir.path().join(BEST_FILE);
        write_tensors(&path, weights, &Meta::default()).unwrap();
        let err = load(dir.path(), &Device::Cpu).err().unwrap().to_string();
        assert!(err.contains("config.toml"), "{err}");
        std::fs::write(dir.path().join("config.toml"), "net = \"playout\"\n").unwrap();
        assert_eq!(load(dir.path(), &Device::Cpu).unwrap().arch(), Arch::Playout);
    }

    /// Weights whose checksum is right but whose numbers are no weights:
    /// NaN once played a pass on an empty board, and integers were taken
    /// for floats.
    #[test]
    fn nan_and_integer_weights_are_refused_naming_the_tensor() {
        let dir = tempfile::tempdir().unwrap();
        let model = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        let tensors = || -> HashMap<String, Tensor> {
            model.tensors().into_iter().map(|(n, v)| (n, v.as_tensor().clone())).collect()
        };
        let victim = tensors().keys().min().unwrap().clone();
        let path = dir.path().join("bad.safetensors");
        let mut nan = tensors();
        let t = &nan[&victim];
        let poisoned = t.ones_like().unwrap().affine(0.0, f64::NAN).unwrap();
        nan.insert(victim.clone(), poisoned);
        write_tensors(&path, nan.into_iter().collect(), &Meta::of(&model, None)).unwrap();
        let err = format!("{:#}", load(&path, &Device::Cpu).err().unwrap());
        assert!(err.contains("NaN") && err.contains(&victim) && err.contains("bad.safetensors"), "{err}");
        let mut integers = tensors();
        let t = integers[&victim].to_dtype(DType::I64).unwrap();
        integers.insert(victim.clone(), t);
        write_tensors(&path, integers.into_iter().collect(), &Meta::of(&model, None)).unwrap();
        let err = format!("{:#}", load(&path, &Device::Cpu).err().unwrap());
        assert!(err.contains("I64") && err.contains(&victim), "{err}");
        let other = Model::new(Arch::Playout, FeatureSet::Seed, &Device::Cpu, 2).unwrap();
        let err = format!("{:#}", load_matching(&path, &other).unwrap_err());
        assert!(err.contains("I64"), "{err}");
    }

    /// Metadata that names a deeper or wider net than the tensors hold is
    /// refused before that net is built (one of 100 blocks of 1,024 filters
    /// over a small net's tensors took 7.5 GB to build first).
    #[test]
    fn metadata_naming_another_depth_is_refused_before_building() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claims.safetensors");
        for (built, claimed) in [
            ("resnet-policy:2x8", "resnet-policy:3x8"),
            ("resnet-policy:2x8", "resnet-policy:1x8"),
            ("resnet-policy:2x8", "resnet-policy:2x16"),
            ("policy-value-tower:1", "policy-value-tower:2"),
        ] {
            let model = Model::new(built.parse().unwrap(), FeatureSet::Seed, &Device::Cpu, 1).unwrap();
            let meta = Meta { net: Some(claimed.parse().unwrap()), ..Meta::of(&model, None) };
            save_as(&path, &model, &meta).unwrap();
            let err = format!("{:#}", load(&path, &Device::Cpu).err().unwrap());
            assert!(err.contains(claimed) && err.contains("are not of one"), "{built} as {claimed}: {err}");
            let bytes = std::fs::read(&path).unwrap();
            let err = format!("{:#}", load_bytes(&bytes, "built-in", &Device::Cpu).err().unwrap());
            assert!(err.contains("are not of one"), "{err}");
        }
        // Its own net loads.
        let model = Model::new("resnet-policy:2x8".parse().unwrap(), FeatureSet::Seed, &Device::Cpu, 1).unwrap();
        save(&path, &model, None).unwrap();
        assert_eq!(load(&path, &Device::Cpu).unwrap().arch(), model.arch());
    }
}
