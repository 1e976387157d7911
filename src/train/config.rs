//! Training jobs as TOML files (one per job in `configs/`), with any setting
//! overridable from the command line as `key=value` (dotted keys reach into
//! tables: `optimizer.lr=0.02`). The effective configuration is saved beside
//! the checkpoints.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::optim::OptimizerConfig;
use super::schedule::StepLr;
use crate::nn::{Arch, Precision};

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
    /// What activations and convolutions compute in: `f32`, or on a GPU
    /// `bf16` (tensor cores; weights, batch-norm statistics, heads and
    /// optimizer stay f32).
    #[serde(default, skip_serializing_if = "is_f32")]
    pub precision: Precision,
    /// A weights file (or checkpoint folder) to start a fresh run from:
    /// every tensor of the net that it holds under the same name and shape
    /// (a trained `policy` for a `policy-value` net's trunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<PathBuf>,
    /// Data-parallel runs (docs/guide/gpu.md): `batch` is the global batch,
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

fn is_f32(p: &Precision) -> bool {
    *p == Precision::F32
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
        let text = crate::bounded_read::read_text_at_most(path, crate::bounded_read::TEXT_BYTES, "a config")
            .with_context(|| format!("{}: cannot read the config", path.display()))?;
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

    /// The learning-rate schedule.
    pub fn step_lr(&self) -> StepLr {
        let base_lr = match self.optimizer {
            OptimizerConfig::Sgd { lr, .. } | OptimizerConfig::Adam { lr, .. } => lr,
        };
        StepLr { base_lr, step_size: self.schedule.step_size, gamma: self.schedule.gamma }
    }

    /// Refuses a net go-train cannot build and every numeric setting out
    /// of its range ([`TrainConfig::ranges`]), naming each.
    fn check(&self) -> Result<()> {
        self.arch()?;
        let mut wrong = out_of_range(self.ranges());
        // An empty path once went on to fail as ": no such folder".
        let init = self.init.as_deref().unwrap_or(Path::new("(none)"));
        for (key, path, what) in [
            ("data", self.data.as_path(), "the dataset"),
            ("out", self.out.as_path(), "the run's folder"),
            ("init", init, "the weights the net starts from (leave it out to start at random)"),
        ] {
            if path.as_os_str().is_empty() {
                wrong.push(format!("{key} is empty: it names {what}"));
            }
        }
        if !wrong.is_empty() {
            bail!("{}", wrong.join("; "));
        }
        Ok(())
    }

    /// Each numeric setting with a range, its value, the range, and why:
    /// the one place that says what each may be. The others take any
    /// value: `seed`; `steps_per_epoch`, `validation_positions` and
    /// `schedule.step_size`, where 0 means the whole split or never;
    /// `batch_norm_batches`, where 0 keeps what training leaves.
    fn ranges(&self) -> Vec<(&'static str, f64, Range, &'static str)> {
        let mut ranges = vec![
            ("epochs", self.epochs as f64, Range::at_least(1.0), "passes over the training split"),
            ("batch", self.batch as f64, Range::at_least(1.0), "positions per step"),
            ("threads", self.threads as f64, Range(Included(0.0), Included(4096.0)), "0: one per core"),
            (
                "ownership_weight",
                self.ownership_weight,
                Range::at_least(0.0),
                "a negative weight would train the ownership head to be wrong",
            ),
            (
                "schedule.gamma",
                self.schedule.gamma,
                Range(Excluded(0.0), Included(1.0)),
                "the factor of each decay: 1 keeps the rate, 0 would stop training, more than 1 would grow the rate",
            ),
        ];
        ranges.extend(optimizer_ranges(self.optimizer));
        ranges
    }

    /// The configuration as TOML (what is saved beside the checkpoints).
    pub fn to_toml(&self) -> Result<String> {
        Ok(toml::to_string_pretty(self)?)
    }
}

/// Each setting of `ranges` outside its range, as `check` words it. The
/// optimizer, the schedule and the losses compute in 32-bit floats, so a
/// value that a 32-bit float does not hold is refused too: 1e-300 as a
/// learning rate would pass `> 0` and then train at 0, and as Adam's eps
/// divide 0 by 0.
fn out_of_range(ranges: Vec<(&'static str, f64, Range, &'static str)>) -> Vec<String> {
    ranges
        .into_iter()
        .filter_map(|(key, value, range, why)| {
            if !range.contains(value) {
                Some(format!("{key} = {value} is out of range: it must be {range} ({why})"))
            } else if !crate::bounds::fits_f32(value) {
                Some(format!(
                    "{key} = {value:e} is out of range: it must be 0 or of a size from {:e} to {:e} (training computes in 32-bit floats)",
                    f32::MIN_POSITIVE,
                    f32::MAX
                ))
            } else {
                None
            }
        })
        .collect()
}

/// Each setting of `optimizer` outside its range, as a supervised run's
/// config refuses it: what train-rl's settings are checked by too.
pub fn optimizer_out_of_range(optimizer: OptimizerConfig) -> Vec<String> {
    out_of_range(optimizer_ranges(optimizer))
}

/// The optimizer's settings with their ranges (see [`TrainConfig::ranges`]).
fn optimizer_ranges(optimizer: OptimizerConfig) -> Vec<(&'static str, f64, Range, &'static str)> {
    let (OptimizerConfig::Sgd { lr, weight_decay, .. } | OptimizerConfig::Adam { lr, weight_decay, .. }) = optimizer;
    let positive = Range(Excluded(0.0), Unbounded);
    let mut ranges = vec![
        ("optimizer.lr", lr, positive, "the learning rate: 0 or less learns nothing or climbs the loss"),
        ("optimizer.weight_decay", weight_decay, Range::at_least(0.0), "a negative L2 penalty grows the weights"),
    ];
    let decay =
        |key, value| (key, value, Range(Included(0.0), Excluded(1.0)), "a decay of the past: 1 or more never forgets");
    match optimizer {
        OptimizerConfig::Sgd { momentum, .. } => ranges.push(decay("optimizer.momentum", momentum)),
        OptimizerConfig::Adam { beta1, beta2, eps, .. } => ranges.extend([
            decay("optimizer.beta1", beta1),
            decay("optimizer.beta2", beta2),
            ("optimizer.eps", eps, positive, "added to the denominator: 0 divides by 0 where a gradient is 0"),
        ]),
    }
    ranges
}

/// One end of a [`Range`].
#[derive(Clone, Copy, Debug)]
enum End {
    Unbounded,
    Included(f64),
    Excluded(f64),
}
use End::{Excluded, Included, Unbounded};

/// The finite values a numeric setting may take, from one end to the
/// other; shown as mathematicians write it (`[0, 1)`, `> 0`).
#[derive(Clone, Copy, Debug)]
struct Range(End, End);

impl Range {
    fn at_least(low: f64) -> Range {
        Range(Included(low), Unbounded)
    }

    fn contains(&self, v: f64) -> bool {
        let above = match self.0 {
            Unbounded => true,
            Included(low) => v >= low,
            Excluded(low) => v > low,
        };
        let below = match self.1 {
            Unbounded => true,
            Included(high) => v <= high,
            Excluded(high) => v < high,
        };
        v.is_finite() && above && below
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.0, self.1) {
            (Included(low), Unbounded) => write!(f, "a finite number ≥ {low}"),
            (Excluded(low), Unbounded) => write!(f, "a finite number > {low}"),
            (low, high) => {
                let (open, low) = match low {
                    Included(v) => ('[', v.to_string()),
                    Excluded(v) => ('(', v.to_string()),
                    Unbounded => ('(', "-∞".into()),
                };
                let (close, high) = match high {
                    Included(v) => (']', v.to_string()),
                    Excluded(v) => (')', v.to_string()),
                    Unbounded => (')', "∞".into()),
                };
                write!(f, "in {open}{low}, {high}{close}")
            }
        }
    }
}

/// Sets `key=value` in `table`; dotted keys name nested tables.
fn apply_override(table: &mut toml::Table, assignment: &str) -> Result<()> {
    let (key, raw) = assignment
        .split_once('=')
        .with_context(|| format!("override {assignment:?}: expected key=value, e.g. optimizer.lr=0.02"))?;
    // A TOML literal (number, boolean, quoted string), else a bare string.
    let literal = format!("v = {raw}").parse::<toml::Table>().ok().and_then(|mut t| t.remove("v"));
    let value = match literal {
        Some(value) => value,
        // 1e400 was read as the string "1e400", and refused as one.
        None if raw.trim().parse::<f64>().is_ok_and(f64::is_infinite) && !raw.to_ascii_lowercase().contains("inf") => {
            bail!("override {assignment:?}: {} is past the largest number a setting holds (about 1.8e308)", raw.trim())
        }
        None => toml::Value::String(raw.to_string()),
    };
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
    // Another optimizer kind keeps the rate and decay and starts its own
    // settings at their usual values: the old kind's would be refused.
    if key.trim() == "optimizer.kind" && current.get("kind") != Some(&value) {
        let own: &[(&str, toml::Value)] = match value.as_str() {
            Some("adam") => &[("beta1", 0.9.into()), ("beta2", 0.999.into()), ("eps", 1e-8.into())],
            Some("sgd") => &[("momentum", 0.9.into())],
            _ => &[],
        };
        current.retain(|k, _| k == "lr" || k == "weight_decay");
        current.extend(own.iter().map(|(k, v)| (k.to_string(), v.clone())));
    }
    // A word where the config holds a number or a switch: named here, for
    // the error of the optimizer's settings (one tagged table) named the
    // table alone.
    let number = |v: &toml::Value| matches!(v, toml::Value::Integer(_) | toml::Value::Float(_));
    match current.get(last) {
        Some(old) if number(old) && !number(&value) => {
            bail!("override {assignment:?}: {} takes a number, not {value}", key.trim())
        }
        Some(toml::Value::Boolean(_)) if !value.is_bool() => {
            bail!("override {assignment:?}: {} takes true or false, not {value}", key.trim())
        }
        _ => {}
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
        // A word for a number names the key (the optimizer's table alone
        // was named), and a number past f64's range is not called a word.
        let err = |o: &str| format!("{:#}", TrainConfig::load(&path, &[o.into()]).unwrap_err());
        assert_eq!(err("optimizer.lr=abc"), r#"override "optimizer.lr=abc": optimizer.lr takes a number, not "abc""#);
        let huge = err("optimizer.lr=1e400");
        assert!(huge.contains("1e400 is past the largest number a setting holds"), "{huge}");
        assert!(err("epochs=many").contains("epochs takes a number"));
    }

    /// An optimizer setting it does not have was once read as nothing at
    /// all, and the run trained with the config's own.
    #[test]
    fn an_optimizer_setting_of_another_name_or_kind_is_refused() {
        let (_d, path) = write(POLICY);
        for (set, name) in [("optimizer.learning_rate=0.5", "learning_rate"), ("optimizer.beta1=0.5", "beta1")] {
            let err = format!("{:#}", TrainConfig::load(&path, &[set.into()]).unwrap_err());
            assert!(err.contains(&format!("unknown field `{name}`")) && err.contains("`lr`"), "{set}: {err}");
        }
        assert!(TrainConfig::load(&path, &["optimizer.momentum=0.5".into()]).is_ok());
        // Another kind keeps the rate and starts its own settings at the
        // usual values, which later overrides change.
        let adam = TrainConfig::load(&path, &["optimizer.kind=adam".into(), "optimizer.beta2=0.99".into()]).unwrap();
        assert_eq!(
            adam.optimizer,
            OptimizerConfig::Adam { lr: 0.01, beta1: 0.9, beta2: 0.99, eps: 1e-8, weight_decay: 0.0 }
        );
        let back = TrainConfig::load(&path, &["optimizer.kind=adam".into(), "optimizer.kind=sgd".into()]).unwrap();
        assert_eq!(back.optimizer, OptimizerConfig::Sgd { lr: 0.01, momentum: 0.9, weight_decay: 0.0 });
    }

    /// Every numeric setting out of its range is refused, naming the key,
    /// its value and the range; the ends that mean something are kept.
    #[test]
    fn settings_out_of_range_are_refused_naming_key_and_range() {
        let adam = POLICY.replace(
            "kind = \"sgd\"\n        lr = 0.01\n        momentum = 0.9",
            "kind = \"adam\"\n        lr = 0.001\n        beta1 = 0.9\n        beta2 = 0.999\n        eps = 1e-8",
        );
        assert!(TrainConfig::parse("adam", &adam, &[]).is_ok(), "the Adam fixture is valid");
        let bad: [(&str, &str, &str); 22] = [
            (POLICY, "optimizer.lr=-0.5", "> 0"),
            (POLICY, "optimizer.lr=0", "> 0"),
            (POLICY, "optimizer.lr=nan", "> 0"),
            (POLICY, "optimizer.lr=inf", "> 0"),
            (POLICY, "optimizer.momentum=2", "in [0, 1)"),
            (POLICY, "optimizer.momentum=1", "in [0, 1)"),
            (POLICY, "optimizer.momentum=-0.1", "in [0, 1)"),
            (POLICY, "optimizer.weight_decay=-1e-4", "≥ 0"),
            (POLICY, "schedule.gamma=-1", "in (0, 1]"),
            (POLICY, "schedule.gamma=0", "in (0, 1]"),
            (POLICY, "schedule.gamma=1.5", "in (0, 1]"),
            (POLICY, "batch=0", "≥ 1"),
            (POLICY, "epochs=0", "≥ 1"),
            (POLICY, "threads=100000", "in [0, 4096]"),
            (POLICY, "ownership_weight=-1", "≥ 0"),
            (POLICY, "ownership_weight=nan", "≥ 0"),
            (&adam, "optimizer.lr=-1", "> 0"),
            (&adam, "optimizer.beta1=1", "in [0, 1)"),
            (&adam, "optimizer.beta2=-0.5", "in [0, 1)"),
            (&adam, "optimizer.eps=0", "> 0"),
            (&adam, "optimizer.eps=-inf", "> 0"),
            (&adam, "optimizer.weight_decay=-2", "≥ 0"),
        ];
        for (text, set) in [
            (POLICY, "optimizer.lr=1e-300"),
            (POLICY, "optimizer.lr=1e39"),
            (POLICY, "optimizer.weight_decay=1e-40"),
            (POLICY, "schedule.gamma=1e-300"),
            (&adam, "optimizer.eps=1e-50"),
        ] {
            let err = format!("{:#}", TrainConfig::parse("job.toml", text, &[set.into()]).unwrap_err());
            let (key, value) = set.split_once('=').unwrap();
            assert!(err.contains(&format!("{key} = {value} is out of range")), "{set}: {err}");
            assert!(err.contains("32-bit floats"), "{set}: {err}");
        }
        assert!(TrainConfig::parse("job.toml", POLICY, &["optimizer.lr=1e-30".into()]).is_ok());
        for (text, set, range) in bad {
            let err = format!("{:#}", TrainConfig::parse("job.toml", text, &[set.into()]).unwrap_err());
            let (key, value) = set.split_once('=').unwrap();
            assert!(err.contains("job.toml") && err.contains(&format!("{key} = ")), "{set}: {err}");
            assert!(err.contains(range) && err.contains("out of range"), "{set}: {err}");
            let shown: f64 = value.parse().unwrap();
            assert!(err.contains(&format!("= {shown} ")), "{set}: the value is named: {err}");
        }
        let two = TrainConfig::parse("job.toml", POLICY, &["batch=0".into(), "optimizer.lr=-1".into()]).unwrap_err();
        let err = format!("{two:#}");
        assert!(err.contains("batch") && err.contains("optimizer.lr"), "every bad setting is named: {err}");
        for (set, what) in [
            ("out=", "out is empty: it names the run's folder"),
            ("data=''", "data is empty"),
            ("init=''", "init is empty: it names the weights"),
        ] {
            let err = format!("{:#}", TrainConfig::parse("job.toml", POLICY, &[set.into()]).unwrap_err());
            assert!(err.contains("job.toml") && err.contains(what), "{set}: {err}");
        }
        for edge in ["schedule.gamma=1", "schedule.step_size=0", "optimizer.momentum=0", "optimizer.weight_decay=0"] {
            assert!(TrainConfig::parse("job.toml", POLICY, &[edge.into()]).is_ok(), "{edge} means something");
        }
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

    /// Every config the repository ships loads: valid TOML, known keys,
    /// every number in its range, a net that exists, and an `init` weights
    /// file that is there (paths are relative to the repository's root).
    #[test]
    fn the_shipped_configs_load() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut loaded = 0;
        for entry in std::fs::read_dir(root.join("configs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let config = TrainConfig::load(&path, &[]).unwrap_or_else(|e| panic!("{e:#}"));
                config.arch().unwrap_or_else(|e| panic!("{}: {e:#}", path.display()));
                if let Some(init) = &config.init {
                    assert!(root.join(init).exists(), "{}: init {} is not there", path.display(), init.display());
                }
                loaded += 1;
            }
        }
        assert!(loaded >= 10, "{loaded} configs");
    }
}
