//! Training jobs as TOML files (one per job in `configs/`), with any setting
//! overridable from the command line as `key=value` (dotted keys reach into
//! tables: `optimizer.lr=0.02`). The effective configuration is saved beside
//! the checkpoints.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::optim::OptimizerConfig;
use super::schedule::StepLr;
use crate::nn::Arch;

/// Step decay of the learning rate (the base rate is the optimizer's).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schedule {
    /// Epochs between decays (0: never).
    pub step_size: u64,
    /// Factor of each decay.
    pub gamma: f64,
}

/// One training job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// The net: `policy`, `playout`, `value`, `policy-value`,
    /// `policy-value-ownership`, `policy-value-margin`,
    /// `policy-value-tower:BLOCKS`, `resnet-policy:BxF`, `resnet-value:BxF`.
    pub net: String,
    /// Dataset folder written by `go-train prepare`.
    pub data: PathBuf,
    /// Checkpoint folder.
    pub out: PathBuf,
    /// Passes over the training split.
    pub epochs: u64,
    /// Positions per batch.
    pub batch: usize,
    /// Seed of the initial weights and of the batch order.
    pub seed: u64,
    /// `auto` (a GPU when built with CUDA and one is present), `cpu`, `cuda`, `cuda:N`.
    pub device: String,
    /// CPU threads (0: one per core).
    #[serde(default)]
    pub threads: usize,
    /// A random symmetry of the board for every training position.
    pub symmetries: bool,
    /// Batches per epoch at most (0: the whole split): for runs that must
    /// fit in a time budget.
    #[serde(default)]
    pub steps_per_epoch: u64,
    /// Validation positions per epoch at most (0: the whole split).
    #[serde(default)]
    pub validation_positions: u64,
    /// On a GPU, float32 matrix products (and so convolutions) on the
    /// tensor cores in TF32 (10-bit mantissa), as PyTorch's cuDNN
    /// convolutions do by default; `false` keeps full float32.
    #[serde(default = "default_tf32")]
    pub tf32: bool,
    /// A weights file (or checkpoint folder) to start a fresh run from:
    /// every tensor of the net that it holds under the same name and shape
    /// (a trained `policy` for a `policy-value` net's trunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<PathBuf>,
    /// Data-parallel runs (docs/cluster.md): `batch` is the global batch,
    /// split among the ranks, whatever their number (`false`, the default:
    /// the same run on any number of GPUs); `true` makes `batch` each
    /// rank's and multiplies the batch and the learning rate by the number
    /// of ranks (the linear scaling rule of Goyal et al. 2017), for
    /// throughput.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linear_scaling: bool,
    /// Weight of the ownership loss (mean squared error over the points)
    /// beside the value loss, for nets with an ownership head
    /// (`policy-value-ownership`, `policy-value-margin`, `policy-value-tower:N`).
    #[serde(default = "default_ownership_weight")]
    pub ownership_weight: f64,
    /// Before each epoch's validation, set the batch norms' running
    /// averages to the mean over this many training batches
    /// ([`crate::nn::Model::settle_batch_norms`]); 0 (the default) keeps
    /// what training leaves, an average over the last ten batches or so.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batch_norm_batches: usize,
    pub optimizer: OptimizerConfig,
    pub schedule: Schedule,
}

fn default_tf32() -> bool {
    true
}

fn default_ownership_weight() -> f64 {
    1.0
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The seed's settings for the three nets, compiled in so that a run from
/// any folder needs no file; `configs/` holds the same texts to read and
/// copy.
const BUILT_IN: [(&str, &str); 3] = [
    ("policy", include_str!("../../configs/policy.toml")),
    ("playout", include_str!("../../configs/playout.toml")),
    ("value", include_str!("../../configs/value.toml")),
];

impl TrainConfig {
    /// Reads `path` and applies `overrides` (`key=value`, the value in TOML
    /// syntax or a bare string). Errors name the file or the override.
    pub fn load(path: &Path, overrides: &[String]) -> Result<TrainConfig> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("{}: cannot read the config", path.display()))?;
        TrainConfig::parse(&path.display().to_string(), &text, overrides)
    }

    /// The built-in settings of `net` (`policy`, `playout` or `value`) with
    /// `overrides` applied.
    pub fn built_in(net: &str, overrides: &[String]) -> Result<TrainConfig> {
        let (_, text) =
            BUILT_IN.iter().find(|(name, _)| *name == net).with_context(|| format!("no built-in config for {net}"))?;
        TrainConfig::parse(&format!("the built-in {net} config"), text, overrides)
    }

    /// `text` with `overrides` applied; errors name `source`.
    fn parse(source: &str, text: &str, overrides: &[String]) -> Result<TrainConfig> {
        let mut table: toml::Table = text.parse().with_context(|| format!("{source}: not valid TOML"))?;
        for o in overrides {
            apply_override(&mut table, o)?;
        }
        let config: TrainConfig = toml::Value::Table(table)
            .try_into()
            .with_context(|| format!("{source}: not a valid training config (with overrides {overrides:?})"))?;
        config.check().with_context(|| source.to_string())?;
        Ok(config)
    }

    /// The net to build.
    pub fn arch(&self) -> Result<Arch> {
        self.net.parse()
    }

    /// The learning-rate schedule.
    /// The settings a run on `ranks` ranks trains with: with
    /// `linear_scaling`, the batch and the learning rate times `ranks`.
    pub fn for_ranks(&self, ranks: usize) -> TrainConfig {
        let mut scaled = self.clone();
        if self.linear_scaling && ranks > 1 {
            scaled.batch *= ranks;
            match &mut scaled.optimizer {
                OptimizerConfig::Sgd { lr, .. } | OptimizerConfig::Adam { lr, .. } => *lr *= ranks as f64,
            }
        }
        scaled
    }

    pub fn step_lr(&self) -> StepLr {
        let base_lr = match self.optimizer {
            OptimizerConfig::Sgd { lr, .. } | OptimizerConfig::Adam { lr, .. } => lr,
        };
        StepLr { base_lr, step_size: self.schedule.step_size, gamma: self.schedule.gamma }
    }

    fn check(&self) -> Result<()> {
        self.arch()?;
        if self.batch == 0 || self.epochs == 0 {
            bail!("batch and epochs must be at least 1");
        }
        // A negative weight would train the ownership head to be wrong.
        if !(self.ownership_weight >= 0.0 && self.ownership_weight.is_finite()) {
            bail!("ownership_weight must be a finite number ≥ 0, not {}", self.ownership_weight);
        }
        Ok(())
    }

    /// The configuration as TOML (what is saved beside the checkpoints).
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }
}

/// Sets `key=value` in `table`; dotted keys name nested tables.
fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<()> {
    let (key, raw) = assignment
        .split_once('=')
        .with_context(|| format!("override {assignment:?}: expected key=value, e.g. optimizer.lr=0.02"))?;
    // A TOML literal (number, boolean, quoted string), else a bare string.
    let value = format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let mut parts: Vec<&str> = key.trim().split('.').collect();
    let last = parts.pop().filter(|k| !k.is_empty()).with_context(|| format!("override {assignment:?}: empty key"))?;
    let mut current = table;
    for part in parts {
        current = current
            .entry(part.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .with_context(|| format!("override {assignment:?}: {part} is not a table"))?;
    }
    current.insert(last.to_string(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
        net = "policy"
        data = "datasets/kgs"
        out = "checkpoints/policy"
        epochs = 30
        batch = 100
        seed = 1
        device = "auto"
        symmetries = true
        [optimizer]
        kind = "sgd"
        lr = 0.01
        momentum = 0.9
        weight_decay = 0.0
        [schedule]
        step_size = 15
        gamma = 0.1
    "#;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.toml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn linear_scaling_multiplies_batch_and_lr_by_the_ranks() {
        let plain = TrainConfig::parse("test", POLICY, &[]).unwrap();
        assert_eq!(plain.for_ranks(8), plain, "the global batch by default");
        let scaled = TrainConfig::parse("test", POLICY, &["linear_scaling=true".into()]).unwrap();
        let on_8 = scaled.for_ranks(8);
        assert_eq!(on_8.batch, 8 * plain.batch);
        assert!((on_8.step_lr().base_lr - 8.0 * plain.step_lr().base_lr).abs() < 1e-12);
        assert_eq!(scaled.for_ranks(1), scaled);
        assert!(!plain.to_toml().unwrap().contains("linear_scaling"), "absent from configs that do not use it");
    }

    #[test]
    fn overrides_reach_any_setting() {
        let (_d, path) = write(POLICY);
        let c =
            TrainConfig::load(&path, &["optimizer.lr=0.02".into(), "epochs=3".into(), "device=cpu".into()]).unwrap();
        assert_eq!(c.epochs, 3);
        assert_eq!(c.device, "cpu");
        assert_eq!(c.step_lr().base_lr, 0.02);
        assert_eq!(c.step_lr().lr(15), 0.02 * 0.1);
        // The saved form reads back the same.
        let (_d2, saved) = write(&c.to_toml().unwrap());
        assert_eq!(TrainConfig::load(&saved, &[]).unwrap(), c);
    }

    #[test]
    fn bad_configs_name_the_file_and_the_reason() {
        let (_d, path) = write("net = \"policy\"\nepochs = 1\n");
        let err = format!("{:#}", TrainConfig::load(&path, &[]).unwrap_err());
        assert!(err.contains("job.toml") && err.contains("missing field"), "{err}");
        let (_d, path) = write(&POLICY.replace("\"policy\"", "\"polcy\""));
        let err = format!("{:#}", TrainConfig::load(&path, &[]).unwrap_err());
        assert!(err.contains("job.toml") && err.contains("polcy"), "{err}");
        let (_d, path) = write(&format!("{POLICY}\nbogus = 1\n"));
        assert!(format!("{:#}", TrainConfig::load(&path, &[]).unwrap_err()).contains("bogus"));
        let (_d, path) = write(POLICY);
        assert!(TrainConfig::load(&path, &["lr".into()]).is_err());
    }
}
