//! Neural nets over the feature planes, built on candle.
//!
//! Four architectures ([`Arch`]): the seed's policy, playout and value nets
//! (exactly those of `shared/bench/torch_seed_nets.py`) and a configurable
//! residual net. A [`Model`] owns one net and its tensors.
//!
//! Input: f32 (batch, planes, 19, 19), the planes of a
//! [`crate::features::FeatureSet`] as 0.0/1.0 (15 for the seed's). Output, by [`Output`]:
//! move nets give log-probabilities (batch, 362) — points in row-major
//! order, then pass — with occupied points masked out; value nets give the
//! probability (batch) that the side to move wins.
//!
//! Programs that train or run nets on the CPU should call [`init_threads`]
//! once at start-up: it sizes the thread pool and tunes what the fused CPU
//! kernels depend on for speed.
//!
//! # Tensor names
//!
//! Weights save as safetensors with plain f32 tensors under dotted names,
//! the names PyTorch's `state_dict` uses for the same layers, so
//! `model.load_state_dict(safetensors.torch.load_file(path))` loads them
//! into the nets of `torch_seed_nets.py` (checked: no missing or unexpected
//! keys, and the same outputs to 5e-7; PyTorch's batch norm fills in its
//! `num_batches_tracked` counter, which is not stored). Each net's module
//! documents its names: conv layers
//! have `weight` (c_out, c_in, k, k) and `bias` (c_out), linear layers
//! `weight` (out, in) and `bias` (out), batch norms `weight`, `bias`,
//! `running_mean`, `running_var` (channels). Names ending in
//! `running_mean`/`running_var` are statistics, not trained ([`is_statistic`]).

mod conv_geom;
mod conv_grad;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
mod direct;
pub mod inputs;
pub mod instruments;
mod kernels;
pub mod layers;
pub mod layout;
pub mod loss;
pub mod playout;
pub mod policy;
pub mod resnet;
pub mod switches;
pub mod value;
pub mod weights;

use std::str::FromStr;
use std::sync::Mutex;

use anyhow::{bail, Context};
use candle_core::{DType, Device, Result, Shape, Tensor, Var};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder, VarMap};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

pub use resnet::{Head, ResNetConfig};
pub use value::ValueHeads;

use crate::features::FeatureSet;

/// Board side the nets are built for.
pub const BOARD: usize = 19;
/// Points on the board.
pub const POINTS: usize = BOARD * BOARD;
/// Moves a move net scores: every point, then pass.
pub const MOVES: usize = POINTS + 1;
/// Index of the pass move in a move net's output.
pub const PASS: usize = POINTS;
/// The input plane that is 1 on empty points.
pub const EMPTY_PLANE: usize = 0;
/// What an occupied point's logit becomes: finite, so that a (corrupt)
/// label on an occupied point gives a huge loss rather than NaN, yet its
/// probability is exactly 0 in f32.
pub const MASKED_LOGIT: f64 = -1e9;

/// What a net's output means, and so which loss trains it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// (batch, 362) log-probabilities of the moves; targets are move indices (u32).
    MoveLogProbs,
    /// (batch) probability that the side to move wins; targets are 0.0 or 1.0 (f32).
    WinProb,
}

impl Output {
    /// The training loss of `pred` against `target`, averaged over the
    /// batch: cross-entropy (negative log-likelihood) for moves, mean squared
    /// error for win probabilities (as in the seed).
    pub fn loss(self, pred: &Tensor, target: &Tensor) -> Result<Tensor> {
        match self {
            Output::MoveLogProbs => loss::nll(pred, target),
            Output::WinProb => loss::mse(pred, target),
        }
    }
}

/// The number type a net's activations and convolutions compute in.
/// Weights, batch-norm statistics, heads after their last convolution,
/// losses and gradients stay f32 (PyTorch's autocast keeps the same
/// split): bf16's 8-bit mantissa is enough for activations, not for
/// the sums of an optimizer step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32 (on a GPU, convolutions in TF32 unless `tf32 =
    /// false`).
    #[default]
    F32,
    /// Activations and convolutions in bfloat16, on a GPU's tensor cores.
    Bf16,
}

impl Precision {
    /// The dtype of activations.
    pub fn dtype(self) -> DType {
        match self {
            Precision::F32 => DType::F32,
            Precision::Bf16 => DType::BF16,
        }
    }

    /// Whether this precision can run on `device`: bf16 needs a GPU (the
    /// CPU's kernels are f32, and candle's generic bf16 ops on a CPU are
    /// slower, not faster).
    pub fn check_device(self, device: &Device) -> anyhow::Result<()> {
        if self == Precision::Bf16 && !device.is_cuda() {
            bail!("bf16 runs on a GPU only (the CPU's kernels compute in f32): use f32, or a CUDA device");
        }
        Ok(())
    }
}

impl FromStr for Precision {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Precision> {
        match s {
            "f32" => Ok(Precision::F32),
            "bf16" => Ok(Precision::Bf16),
            _ => bail!("precision {s:?}: f32 or bf16"),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::Bf16 => "bf16",
        })
    }
}

/// A net: planes in, predictions out.
pub trait Net: Send + Sync {
    /// Runs the net on `x` (batch, 15, 19, 19). `train` makes batch norms
    /// use (and record) the batch's statistics; otherwise their running
    /// averages. Nets without batch norm ignore it.
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor>;

    /// What [`Net::forward`] returns.
    fn output(&self) -> Output;

    /// [`Net::forward`] and, from a net with an ownership head, its
    /// prediction of who owns each point at the end of the game: (batch,
    /// 361), from -1 (the opponent's) to 1 (the side to move's).
    fn forward_with_ownership(&self, x: &Tensor, train: bool) -> Result<(Tensor, Option<Tensor>)> {
        Ok((self.forward(x, train)?, None))
    }
}

/// Which net to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// The seed's policy net ([`policy`]).
    Policy,
    /// The seed's fast playout net ([`playout`]).
    Playout,
    /// The seed's value net ([`value`]).
    Value,
    /// A value head on the seed policy's trunk ([`value::TrunkValueNet`]).
    PolicyValue,
    /// The same with an ownership head beside the value head.
    PolicyValueOwnership,
    /// The same, its value reading the margin the ownership head predicts.
    PolicyValueMargin,
    /// The ownership net with this many residual blocks between the trunk
    /// and the heads.
    PolicyValueTower(usize),
    /// A residual net ([`resnet`]).
    ResNet(ResNetConfig),
}

impl Arch {
    /// What the net predicts: moves, or the game's result.
    pub fn output(&self) -> Output {
        match self {
            Arch::Policy | Arch::Playout | Arch::ResNet(ResNetConfig { head: Head::Policy, .. }) => {
                Output::MoveLogProbs
            }
            _ => Output::WinProb,
        }
    }

    /// Whether the net has an ownership head, and so trains only on
    /// datasets prepared with `--ownership`.
    pub fn learns_ownership(&self) -> bool {
        matches!(self, Arch::PolicyValueOwnership | Arch::PolicyValueMargin | Arch::PolicyValueTower(_))
    }

    /// Builds the net for `planes` input planes, creating its tensors
    /// through `vb` (or taking them from it when they exist).
    pub fn build(&self, vb: VarBuilder, planes: usize) -> Result<Box<dyn Net>> {
        Ok(match self {
            Arch::Policy => Box::new(policy::PolicyNet::new(vb, planes)?),
            Arch::Playout => Box::new(playout::PlayoutNet::new(vb, planes)?),
            Arch::Value => Box::new(value::ValueNet::new(vb, planes)?),
            Arch::PolicyValue => Box::new(value::TrunkValueNet::new(vb, planes, ValueHeads::Value, 0)?),
            Arch::PolicyValueOwnership => Box::new(value::TrunkValueNet::new(vb, planes, ValueHeads::Ownership, 0)?),
            Arch::PolicyValueMargin => Box::new(value::TrunkValueNet::new(vb, planes, ValueHeads::Margin, 0)?),
            Arch::PolicyValueTower(blocks) => {
                Box::new(value::TrunkValueNet::new(vb, planes, ValueHeads::Ownership, *blocks)?)
            }
            Arch::ResNet(config) => Box::new(resnet::ResNet::new(vb, config, planes)?),
        })
    }
}

/// The name [`Arch::from_str`] reads: `policy`, `resnet-value:6x64`, ….
impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arch::Policy => f.write_str("policy"),
            Arch::Playout => f.write_str("playout"),
            Arch::Value => f.write_str("value"),
            Arch::PolicyValue => f.write_str("policy-value"),
            Arch::PolicyValueOwnership => f.write_str("policy-value-ownership"),
            Arch::PolicyValueMargin => f.write_str("policy-value-margin"),
            Arch::PolicyValueTower(blocks) => write!(f, "policy-value-tower:{blocks}"),
            Arch::ResNet(c) => {
                let head = match c.head {
                    Head::Policy => "policy",
                    Head::Value => "value",
                };
                write!(f, "resnet-{head}:{}x{}", c.blocks, c.filters)
            }
        }
    }
}

impl FromStr for Arch {
    type Err = anyhow::Error;

    /// `policy`, `playout`, `value`, or `resnet-policy:BLOCKSxFILTERS` /
    /// `resnet-value:BLOCKSxFILTERS` (e.g. `resnet-policy:6x64`).
    fn from_str(s: &str) -> anyhow::Result<Arch> {
        let usage =
            "use policy, playout, value, policy-value, policy-value-ownership, policy-value-margin, policy-value-tower:BLOCKS, resnet-policy:BxF or resnet-value:BxF";
        Ok(match s {
            "policy" => Arch::Policy,
            "playout" => Arch::Playout,
            "value" => Arch::Value,
            "policy-value" => Arch::PolicyValue,
            "policy-value-ownership" => Arch::PolicyValueOwnership,
            "policy-value-margin" => Arch::PolicyValueMargin,
            _ => {
                let (kind, size) = s.split_once(':').with_context(|| format!("unknown net {s:?}: {usage}"))?;
                if kind == "policy-value-tower" {
                    let blocks = size.parse().with_context(|| format!("net {s:?}: bad block count {size:?}"))?;
                    check_size(s, blocks, "blocks", MAX_BLOCKS)?;
                    return Ok(Arch::PolicyValueTower(blocks));
                }
                let head = match kind {
                    "resnet-policy" => Head::Policy,
                    "resnet-value" => Head::Value,
                    _ => bail!("unknown net {s:?}: {usage}"),
                };
                let (b, f) = size.split_once('x').with_context(|| format!("net {s:?}: size must be BLOCKSxFILTERS"))?;
                let blocks = b.parse().with_context(|| format!("net {s:?}: bad block count {b:?}"))?;
                let filters: usize = f.parse().with_context(|| format!("net {s:?}: bad filter count {f:?}"))?;
                if filters == 0 {
                    bail!("net {s:?}: needs at least one filter");
                }
                check_size(s, blocks, "blocks", MAX_BLOCKS)?;
                check_size(s, filters, "filters", MAX_FILTERS)?;
                Arch::ResNet(ResNetConfig { blocks, filters, head })
            }
        })
    }
}

/// The most residual blocks, and filters, a net may have: beyond the
/// largest Go nets trained (KataGo's 40 blocks, Leela Zero's 40×256), and
/// short of sizes whose weights alone would fail to allocate and abort.
const MAX_BLOCKS: usize = 100;
const MAX_FILTERS: usize = 1024;

/// Refuses `n` `what` (blocks or filters) above `max` in net `name`.
fn check_size(name: &str, n: usize, what: &str, max: usize) -> anyhow::Result<()> {
    if n > max {
        bail!("net {name:?}: {n} {what}, at most {max}");
    }
    Ok(())
}

/// A net with its tensors.
pub struct Model {
    arch: Arch,
    /// The input planes it reads.
    features: FeatureSet,
    /// Every tensor of the net by name, trained or not.
    varmap: VarMap,
    net: Box<dyn Net>,
    device: Device,
    /// What its activations compute in.
    precision: Precision,
}

impl Model {
    /// A freshly initialised net reading `features` on `device`; `seed`
    /// fixes the initial weights (PyTorch's default initialisation: uniform
    /// ±1/√fan_in).
    pub fn new(arch: Arch, features: FeatureSet, device: &Device, seed: u64) -> Result<Model> {
        let varmap = VarMap::new();
        let backend = SeededVarMap { map: varmap.clone(), rng: Mutex::new(Pcg64Mcg::seed_from_u64(seed)) };
        let vb = VarBuilder::from_backend(Box::new(backend), DType::F32, device.clone());
        let net = arch.build(vb, features.planes())?;
        Ok(Model { arch, features, varmap, net, device: device.clone(), precision: Precision::F32 })
    }

    /// Which net this is.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The input planes it reads.
    pub fn features(&self) -> FeatureSet {
        self.features
    }

    /// Where its tensors live.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The net itself.
    pub fn net(&self) -> &dyn Net {
        self.net.as_ref()
    }

    /// Makes its activations compute in `precision` from now on (its
    /// weights stay f32).
    pub fn set_precision(&mut self, precision: Precision) {
        self.precision = precision;
    }

    /// See [`Net::forward`]; `x` (f32) is cast to the model's precision,
    /// whose dtype the layers then follow.
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        self.net.forward(&self.input(x)?, train)
    }

    /// See [`Net::forward_with_ownership`].
    pub fn forward_with_ownership(&self, x: &Tensor, train: bool) -> Result<(Tensor, Option<Tensor>)> {
        self.net.forward_with_ownership(&self.input(x)?, train)
    }

    /// `x` in the dtype of the model's activations.
    fn input(&self, x: &Tensor) -> Result<Tensor> {
        x.to_dtype(self.precision.dtype())
    }

    /// See [`Net::output`].
    pub fn output(&self) -> Output {
        self.net.output()
    }

    /// Every tensor (trained weights and batch-norm statistics), sorted by
    /// name: what a weights file holds.
    pub fn tensors(&self) -> Vec<(String, Var)> {
        let mut all: Vec<(String, Var)> = match self.varmap.data().lock() {
            Ok(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            // A panic elsewhere while holding the lock leaves the map intact.
            Err(poisoned) => poisoned.get_ref().iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Sets every batch norm's running averages to the plain mean of the
    /// statistics of `inputs`' batches (each a net input), in place of
    /// the exponential average over the last batches that training leaves:
    /// with momentum 0.1 that average follows the last ten batches or so,
    /// and the net's answers in evaluation mode move with it from epoch to
    /// epoch ("precise batch norm", Wu & Johnson 2021). Each batch's own
    /// statistics are read back from how the running average moved, so the
    /// layers' update stays the only one. Returns the batches used: none
    /// for a net without batch norms, which has nothing to settle.
    pub fn settle_batch_norms(
        &self,
        inputs: impl IntoIterator<Item = anyhow::Result<Tensor>>,
    ) -> anyhow::Result<usize> {
        let statistics: Vec<Var> =
            self.tensors().into_iter().filter(|(n, _)| is_statistic(n)).map(|(_, v)| v).collect();
        if statistics.is_empty() {
            return Ok(0);
        }
        let read = || statistics.iter().map(|v| v.as_tensor().copy()).collect::<Result<Vec<_>>>();
        let mut sums: Option<Vec<Tensor>> = None;
        let mut batches = 0;
        for x in inputs {
            let before = read()?;
            self.forward(&x?, true)?;
            let momentum = layers::BN_MOMENTUM;
            let own = statistics
                .iter()
                .zip(&before)
                .map(|(now, old)| (now.as_tensor() - (old * (1.0 - momentum))?)? / momentum)
                .collect::<Result<Vec<_>>>()?;
            sums = Some(match sums {
                None => own,
                Some(sums) => sums.iter().zip(&own).map(|(s, o)| s + o).collect::<Result<_>>()?,
            });
            batches += 1;
        }
        if let Some(sums) = sums {
            for (var, sum) in statistics.iter().zip(sums) {
                var.set(&(sum / batches as f64)?)?;
            }
        }
        Ok(batches)
    }

    /// The trained tensors, sorted by name: what an optimizer updates.
    pub fn parameters(&self) -> Vec<(String, Var)> {
        self.tensors().into_iter().filter(|(name, _)| !is_statistic(name)).collect()
    }

    /// Refuses, on the CPU, a training batch of `batch` positions that
    /// cannot fit in the memory there is, in `what`'s words (`--batch
    /// 1048576` once aborted on its first allocation). On a GPU, running
    /// out is an error candle returns, not an abort.
    pub fn check_training_batch_fits(&self, batch: usize, what: impl FnOnce() -> String) -> anyhow::Result<()> {
        if !self.device.is_cpu() {
            return Ok(());
        }
        let needed = self.training_bytes_per_position().saturating_mul(batch as u64);
        crate::memory::check_fits(needed, what)
    }

    /// A lower bound of the memory one position of a training batch
    /// takes on the CPU: 1.5 times its input and each layer's output (what
    /// the backward pass keeps) in f32. A step was measured to take 1.8 to
    /// 2.8 times those (the seed nets, a residual net and a value tower,
    /// batches 256 and 2,048: batch norms' outputs, gradients, convolution
    /// buffers); a lower bound refuses only a batch that cannot fit.
    fn training_bytes_per_position(&self) -> u64 {
        let layer_outputs: usize = self
            .parameters()
            .iter()
            .filter(|(name, _)| name.ends_with("weight"))
            .map(|(_, var)| match var.dims() {
                [c_out, _, _, _] => c_out * POINTS,
                [out, _] => *out,
                _ => 0,
            })
            .sum();
        let kept = (self.features.planes() * POINTS + layer_outputs) * std::mem::size_of::<f32>();
        (kept + kept / 2) as u64
    }

    /// Whether every trained weight is a finite number, read back as one
    /// scalar: a NaN or an infinity anywhere makes the sum of their
    /// absolute values non-finite.
    pub fn weights_finite(&self) -> Result<bool> {
        let mut total: Option<Tensor> = None;
        for (_, var) in self.parameters() {
            let part = var.as_tensor().abs()?.to_dtype(DType::F32)?.sum_all()?;
            total = Some(match total {
                Some(t) => (t + part)?,
                None => part,
            });
        }
        Ok(total.map_or(Ok(0.0), |t| t.to_scalar::<f32>())?.is_finite())
    }
}

/// Whether the tensor `name` holds batch-norm statistics (updated by
/// forward passes in training mode, not by the optimizer).
pub fn is_statistic(name: &str) -> bool {
    name.ends_with("running_mean") || name.ends_with("running_var")
}

/// Sets the logits of occupied points to [`MASKED_LOGIT`]: a stone's point
/// can never be played. `logits` is (batch, 362), `planes` the net's input
/// (batch, 15, 19, 19) whose plane [`EMPTY_PLANE`] is 1 on empty points;
/// pass is always legal.
pub fn mask_occupied(logits: &Tensor, planes: &Tensor) -> Result<Tensor> {
    let batch = logits.dim(0)?;
    let empty = planes.narrow(1, EMPTY_PLANE, 1)?.flatten_from(1)?;
    let pass = Tensor::ones((batch, 1), empty.dtype(), empty.device())?;
    let legal = Tensor::cat(&[&empty, &pass], 1)?;
    // legal·(−M) + M: 0 where legal, M where occupied.
    logits + legal.affine(-MASKED_LOGIT, MASKED_LOGIT)?
}

/// The device named `spec`: `cpu`, `cuda`, `cuda:N`, or `auto` (the
/// first GPU when this build and machine have one, else the CPU).
pub fn device(spec: &str) -> anyhow::Result<Device> {
    let ordinal = match spec {
        "cpu" => return Ok(Device::Cpu),
        "auto" => return Ok(cuda_device(0).unwrap_or(Device::Cpu)),
        "cuda" => 0,
        _ => match spec.strip_prefix("cuda:") {
            Some(n) => n.parse().with_context(|| format!("device {spec:?}: bad GPU number"))?,
            None => bail!("unknown device {spec:?}: use cpu, cuda or cuda:N"),
        },
    };
    cuda_device(ordinal)
}

/// GPU `ordinal`, with cudarc's event tracking off unless
/// `GO_TRAIN_CUDA_EVENTS=1`. cudarc gives every buffer two CUDA events,
/// created on allocation and destroyed on free (four driver calls), which
/// it records and waits on only once a second stream exists; go-train and
/// candle run each device on one stream (cuDNN and NCCL on that stream
/// too), so the events were pure cost, on the hundreds of buffers a
/// training step allocates.
///
/// Memory freed stays in the GPU's pool for the next allocations
/// ([`keep_freed_gpu_memory`]) unless `GO_TRAIN_CUDA_KEEP_MEMORY=0`.
///
/// With `GO_TRAIN_CUDA_BLOCKING=1` the CPU sleeps when it waits for the GPU
/// (CUDA's blocking synchronisation) instead of spinning, so that the
/// process's CPU time counts host work alone (`bench train`'s "CPU" figure);
/// the wake-up costs some latency a wait.
#[cfg(feature = "cuda")]
fn cuda_device(ordinal: usize) -> anyhow::Result<Device> {
    if switches::env_switch("GO_TRAIN_CUDA_BLOCKING", false) {
        use candle_core::cuda_backend::cudarc::driver::{result, sys};
        let blocking = || -> std::result::Result<(), result::DriverError> {
            result::init()?;
            let dev = result::device::get(ordinal as i32)?;
            // SAFETY: a device handle the driver just gave, and a flag of
            // the primary context's scheduling, set before it is used.
            unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(dev, sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC as u32) }
                .result()
        };
        blocking().map_err(|e| anyhow::anyhow!("GO_TRAIN_CUDA_BLOCKING=1: GPU {ordinal}: {e:?}"))?;
    }
    let device = Device::new_cuda(ordinal).with_context(|| format!("cannot open GPU {ordinal}"))?;
    let keep_events = switches::env_switch("GO_TRAIN_CUDA_EVENTS", false);
    if let Device::Cuda(cuda) = &device {
        if !keep_events && !cuda.cuda_stream().context().is_in_multi_stream_mode() {
            // SAFETY: only buffers allocated from here on go untracked, and
            // cudarc uses the tracking only in multi-stream mode, which
            // nothing in go-train or candle enters (it takes
            // `CudaContext::new_stream`, never called): one stream orders
            // every use of a buffer.
            unsafe { cuda.disable_event_tracking() };
        }
    }
    if switches::env_switch("GO_TRAIN_CUDA_KEEP_MEMORY", true) {
        keep_freed_gpu_memory(ordinal).map_err(|e| anyhow::anyhow!("GPU {ordinal}: keeping freed memory: {e:?}"))?;
    }
    Ok(device)
}

/// Sets the release threshold of GPU `ordinal`'s memory pool, which
/// cudarc's stream-ordered allocations draw on, to all of it: memory freed
/// stays in the pool for the next allocations, as in PyTorch's caching
/// allocator. At the default threshold, 0, the pool hands every freed byte
/// back to the driver at each synchronisation (training reads its loss
/// every 10 steps), and the next allocations map memory afresh: through a
/// training run on an H100 the memory in use swung between 6 and 25 GB
/// every few seconds while the GPU was busy 85-94% of the time
/// (docs/gpu-2026-11-27b/gpu-util-train-segment3.csv). The memory is the
/// process's until it ends, as PyTorch's is.
#[cfg(feature = "cuda")]
fn keep_freed_gpu_memory(
    ordinal: usize,
) -> std::result::Result<(), candle_core::cuda_backend::cudarc::driver::DriverError> {
    use candle_core::cuda_backend::cudarc::driver::{result, sys};
    let dev = result::device::get(ordinal as i32)?;
    let mut threshold = u64::MAX;
    // SAFETY: a device the driver just gave; the pool it reports; the
    // release threshold's value is a u64, as passed.
    unsafe {
        let pool = result::device::get_mem_pool(dev)?;
        let value = (&mut threshold as *mut u64).cast::<std::ffi::c_void>();
        result::mem_pool::set_attribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, value)
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_ordinal: usize) -> anyhow::Result<Device> {
    bail!("this go-train was built without CUDA support: rebuild with `--features cuda`")
}

/// Whether float32 matrix products on a GPU may use the tensor cores'
/// TF32 mode (about 1e-3 relative error, several times the speed): what
/// PyTorch's cuDNN convolutions do by default. No effect on the CPU.
pub fn allow_tf32(allow: bool) {
    candle_core::cuda::set_gemm_reduced_precision_f32(allow);
}

/// The device the tests run their nets on: `GO_TRAIN_TEST_DEVICE` (`cpu`,
/// `cuda`, `cuda:N`), the CPU when unset. Lets the same tests check a CUDA
/// build on a GPU machine.
pub fn test_device() -> Device {
    let spec = std::env::var("GO_TRAIN_TEST_DEVICE").unwrap_or_else(|_| "cpu".into());
    device(&spec).unwrap_or_else(|e| panic!("GO_TRAIN_TEST_DEVICE={spec}: {e:#}"))
}

/// Sizes rayon's global pool, which the CPU kernels and candle's matrix
/// products share, to `threads` (default: one per core). Call it once,
/// before any net runs; it fails if the pool already exists.
pub fn init_threads(threads: Option<usize>) -> anyhow::Result<usize> {
    let n = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    rayon::ThreadPoolBuilder::new().num_threads(n).build_global().context("cannot size the thread pool")?;
    // candle sizes its gemm calls from this variable; keep it in step.
    std::env::set_var("RAYON_NUM_THREADS", n.to_string());
    // candle runs large element-wise ops on a pool of its own whose workers
    // spin while waiting; beside rayon's threads that oversubscribes the
    // cores (on 2 cores it cost a third of the playout net's speed). The
    // fused kernels do the heavy work on rayon, so keep candle's pool empty.
    if std::env::var_os("CANDLE_NUM_THREADS").is_none() {
        std::env::set_var("CANDLE_NUM_THREADS", "1");
    }
    keep_freed_memory();
    candle_core::backprop::set_first_gradient_stored(switches::Fused::FirstGradients.enabled());
    Ok(n)
}

/// Every training step allocates and frees the same few-megabyte
/// activation buffers. An allocator that hands freed memory back to the
/// system makes each step pay for page faults and the kernel's zeroing of
/// fresh pages (a tenth of the policy net's time in a profile), so keep it:
///
/// - mimalloc, the `go-train` binary's allocator, purges freed memory
///   after a delay, shorter than a training step: purging is turned off
///   (`bench train --net policy`, 3 s: 12,100 page faults, some 700 a
///   step, down to 320, all at start-up);
/// - glibc's malloc, which C libraries use, serves such sizes with fresh
///   `mmap`s: its thresholds are raised so that freed memory is reused.
fn keep_freed_memory() {
    /// `mi_option_purge_delay` in mimalloc 2 and 3's option enum; −1 never
    /// purges.
    const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: sets one of mimalloc's tuning options, which it reads at
    // each purge decision; it does not touch any allocation.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // glibc's ceiling for the mmap threshold on 64-bit systems; larger
        // buffers still get their own mappings.
        const MMAP_LIMIT: libc::c_int = 32 << 20;
        const TRIM_LIMIT: libc::c_int = 1 << 30;
        // SAFETY: mallopt only changes allocator tuning; called before the
        // heavy allocations start. A refused value leaves the default.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_LIMIT);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_LIMIT);
        }
    }
}

/// Creates variables in a `VarMap` as `VarBuilder::from_varmap` does, but
/// draws random initial values from a seeded generator: candle's CPU
/// generator cannot be seeded, and runs must be reproducible.
struct SeededVarMap {
    map: VarMap,
    rng: Mutex<Pcg64Mcg>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SimpleBackend for SeededVarMap {
    fn get(&self, shape: Shape, name: &str, init: Init, dtype: DType, dev: &Device) -> Result<Tensor> {
        let mut data = lock(self.map.data());
        if let Some(var) = data.get(name) {
            if var.shape() != &shape {
                candle_core::bail!("{name}: shape {:?}, expected {shape:?}", var.shape());
            }
            return Ok(var.as_tensor().clone());
        }
        let n = shape.elem_count();
        let values: Vec<f32> = match init {
            Init::Const(c) => vec![c as f32; n],
            Init::Uniform { lo, up } if lo < up => {
                let mut rng = lock(&self.rng);
                (0..n).map(|_| rng.random_range(lo..up) as f32).collect()
            }
            other => candle_core::bail!("{name}: no seeded initialisation for {other:?}"),
        };
        let var = Var::from_tensor(&Tensor::from_vec(values, shape, dev)?.to_dtype(dtype)?)?;
        let tensor = var.as_tensor().clone();
        data.insert(name.to_string(), var);
        Ok(tensor)
    }

    fn get_unchecked(&self, name: &str, _dtype: DType, _dev: &Device) -> Result<Tensor> {
        match lock(self.map.data()).get(name) {
            Some(var) => Ok(var.as_tensor().clone()),
            None => candle_core::bail!("no tensor named {name}"),
        }
    }

    fn contains_tensor(&self, name: &str) -> bool {
        lock(self.map.data()).contains_key(name)
    }
}

/// Layers shared by the seed's playout and value nets: `c.{i}`, 3×3
/// convolutions with bias and ReLU from the input `planes` through `channels`.
fn conv_stack(vb: &VarBuilder, planes: usize, channels: &[usize]) -> Result<Vec<layers::Conv>> {
    let mut c_in = planes;
    let mut convs = Vec::with_capacity(channels.len());
    for (i, &c_out) in channels.iter().enumerate() {
        convs.push(layers::Conv::new(vb.pp(format!("c.{i}")), c_in, c_out, 3, true, true)?);
        c_in = c_out;
    }
    Ok(convs)
}

#[cfg(test)]
mod tests;
