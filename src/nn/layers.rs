//! The layers the nets are made of: convolution (with optional bias and
//! ReLU), batch norm (with optional ReLU) and linear.
//!
//! On the CPU with f32 data, convolution and batch norm run as candle custom
//! ops over the kernels in [`super::kernels`], fusing bias, normalisation and
//! ReLU into the matrix passes. Elsewhere (CUDA) they run as candle's own
//! ops, except the convolution's backward pass ([`super::conv_grad`]);
//! candle's ops are also the reference the fused ops are tested against.

use candle_core::{
    CpuStorage, CustomOp2, CustomOp3, DType, Device, InplaceOp1, Layout, Result, Shape, Storage, StorageRef, Tensor,
    Var,
};
use candle_nn::{Init, Module, VarBuilder};

use super::kernels::{self, ConvGeom, Norm, Planes};
use super::layout::{to_channels_first, to_channels_last, Channels};
use super::switches::Fused;

/// Whether the fused CPU kernels can run on `x`.
fn fused(x: &Tensor) -> bool {
    x.device().is_cpu() && x.dtype() == DType::F32 && !generic_ops_forced()
}

#[cfg(test)]
thread_local! {
    static GENERIC_OPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn generic_ops_forced() -> bool {
    GENERIC_OPS.with(|g| g.get())
}

/// `GO_TRAIN_GENERIC_OPS=1` runs the GPU's code path on the CPU: for
/// finding whether a GPU problem lies in that path or in the device.
#[cfg(not(test))]
fn generic_ops_forced() -> bool {
    static FORCED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| super::switches::env_switch("GO_TRAIN_GENERIC_OPS", false))
}

/// Runs `f` with the layers on the path a GPU takes (candle's ops and
/// [`super::conv_grad`]) even on the CPU: how tests without a GPU check
/// that path against the fused kernels.
#[cfg(test)]
pub(crate) fn with_generic_ops<T>(f: impl FnOnce() -> T) -> T {
    GENERIC_OPS.with(|g| g.set(true));
    let out = f();
    GENERIC_OPS.with(|g| g.set(false));
    out
}

/// The contiguous f32 data of a CPU storage seen through `layout`.
fn cpu_slice<'a>(s: &'a CpuStorage, layout: &Layout, what: &str) -> Result<&'a [f32]> {
    let data = s.as_slice::<f32>()?;
    match layout.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{what}: the fused CPU kernel needs contiguous data"),
    }
}

/// Read access to a CPU tensor's data, for backward passes (which get
/// tensors, not storages). Holds the storage's read lock while alive.
struct CpuView<'a> {
    storage: StorageRef<'a>,
    layout: &'a Layout,
}

impl<'a> CpuView<'a> {
    fn new(t: &'a Tensor) -> CpuView<'a> {
        let (storage, layout) = t.storage_and_layout();
        CpuView { storage, layout }
    }

    fn slice(&self, what: &str) -> Result<&[f32]> {
        match &*self.storage {
            Storage::Cpu(s) => cpu_slice(s, self.layout, what),
            _ => candle_core::bail!("{what}: the fused kernel runs on the CPU only"),
        }
    }
}

fn cpu_tensor<S: Into<Shape>>(data: Vec<f32>, shape: S) -> Result<Tensor> {
    Tensor::from_vec(data, shape, &Device::Cpu)
}

/// PyTorch's default initialisation for conv and linear layers: weight and
/// bias uniform in ±1/√fan_in. Kept so that nets start as the seed's did.
fn torch_default_init(fan_in: usize) -> Init {
    let bound = 1.0 / (fan_in as f64).sqrt();
    Init::Uniform { lo: -bound, up: bound }
}

/// The layout a residual tower on `x`'s device keeps
/// ([`super::layout`]): channels-last on a GPU where cuDNN convolves on
/// tensor cores (unless `GO_TRAIN_CHANNELS_LAST=0`), NCHW elsewhere.
pub fn tower_channels(x: &Tensor) -> Channels {
    if let Some(channels) = super::layout::forced() {
        return channels;
    }
    let tf32 = candle_core::cuda::gemm_reduced_precision_f32();
    if cudnn_convolves(x) && on_tensor_cores(x.dtype(), tf32) && Fused::ChannelsLast.enabled() {
        Channels::Last
    } else {
        Channels::First
    }
}

/// The layout the seed nets' hidden layers keep past their first:
/// [`tower_channels`] in bf16, NCHW in f32, where the seed policy already
/// trains faster than PyTorch (docs/results/gpu.md) and channels-last has
/// not been measured.
pub fn trunk_channels(x: &Tensor) -> Channels {
    if x.dtype() == DType::BF16 || super::layout::forced().is_some() {
        tower_channels(x)
    } else {
        Channels::First
    }
}

/// Whether cuDNN convolves `dtype` on tensor cores: bf16 always, f32 when
/// TF32 is allowed. Channels-last pays only there: in full f32 (`--tf32
/// false`) the 10×128 residual tower trained at 3,558 samples/s
/// channels-last and 8,848 NCHW (H200, docs/results/gpu.md).
fn on_tensor_cores(dtype: DType, tf32: bool) -> bool {
    dtype == DType::BF16 || (dtype == DType::F32 && tf32)
}

/// Whether cuDNN runs the convolutions on `x`'s device.
#[cfg(feature = "cudnn")]
fn cudnn_convolves(x: &Tensor) -> bool {
    x.device().is_cuda() && super::cuda::cudnn_conv::enabled()
}

#[cfg(not(feature = "cudnn"))]
fn cudnn_convolves(_: &Tensor) -> bool {
    false
}

/// The multiple of channels that cuDNN's bf16 tensor-core convolutions take.
const TENSOR_CORE_CHANNELS: usize = 8;

/// A same-padding k×k convolution with stride 1, on NCHW input.
///
/// Tensors: `weight` (c_out, c_in, k, k) and, if it has one, `bias` (c_out).
#[derive(Clone, Debug)]
pub struct Conv {
    /// Kernel, (c_out, c_in, k, k).
    weight: Tensor,
    /// Bias, or zeros (a constant, not a variable) when the layer has none,
    /// so the fused op always has three arguments.
    bias: Tensor,
    /// Whether `bias` is a learned variable.
    has_bias: bool,
    /// Kernel side.
    k: usize,
    /// Whether a ReLU follows (fused into the op).
    relu: bool,
}

impl Conv {
    /// A k×k convolution from `c_in` to `c_out` channels, with a learned bias
    /// when `bias`, followed by a ReLU when `relu`.
    pub fn new(vb: VarBuilder, c_in: usize, c_out: usize, k: usize, bias: bool, relu: bool) -> Result<Conv> {
        if k.is_multiple_of(2) {
            candle_core::bail!("{}: same-padding convolutions need an odd kernel size, not {k}", vb.prefix());
        }
        let init = torch_default_init(c_in * k * k);
        let weight = vb.get_with_hints((c_out, c_in, k, k), "weight", init)?;
        let bias_t =
            if bias { vb.get_with_hints(c_out, "bias", init)? } else { Tensor::zeros(c_out, DType::F32, vb.device())? };
        Ok(Conv { weight, bias: bias_t, has_bias: bias, k, relu })
    }

    /// Applies the convolution to `x` (batch, c_in, h, w), in `x`'s dtype.
    ///
    /// In bf16 a layer whose channels are not multiples of
    /// [`TENSOR_CORE_CHANNELS`] (a net's input layer: 15 planes) is run in
    /// f32 and its result cast: cuDNN's bf16 kernels need that alignment,
    /// and without it fell back to an algorithm that took the 10×128 net's
    /// input layer 7.4 ms a step at batch 1,024 on an H100, against 0.4 ms
    /// in TF32 (PyTorch pads the channels instead).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.dtype() == DType::BF16 && !self.tensor_core_aligned() {
            return self.forward(&x.to_dtype(DType::F32)?)?.to_dtype(DType::BF16);
        }
        if fused(x) {
            x.contiguous()?.apply_op3(&self.weight, &self.bias, ConvOp { k: self.k, relu: self.relu })
        } else {
            self.forward_with(x, super::conv_grad::conv2d_same, add_bias)
        }
    }

    /// [`Conv::forward`] on `x` in the layout `channels`: channels-last,
    /// `x` (batch, h, w, c_in) gives (batch, h, w, c_out). Through cuDNN
    /// where it convolves, elsewhere by changing the layout around the
    /// NCHW convolution.
    pub fn forward_in(&self, x: &Tensor, channels: Channels) -> Result<Tensor> {
        if channels == Channels::First {
            return self.forward(x);
        }
        if x.dtype() == DType::BF16 && !self.tensor_core_aligned() {
            return self.forward_in(&x.to_dtype(DType::F32)?, channels)?.to_dtype(DType::BF16);
        }
        #[cfg(feature = "cudnn")]
        if x.device().is_cuda() {
            // cuDNN's channels-last kernel order, (c_out, k, k, c_in): in
            // bf16 the cast writes it, one launch.
            let w = self.weight.permute((0, 2, 3, 1))?.to_dtype(x.dtype())?;
            if super::cuda::cudnn_conv::applies(x, &w) {
                let y = super::cuda::cudnn_conv::conv2d_same_in(x, &w, channels)?;
                return self.bias_relu(y, |y, b, relu| add_bias_in(y, b, relu, channels));
            }
        }
        to_channels_last(&self.forward(&to_channels_first(x)?)?)
    }

    /// Whether both channel counts suit the tensor cores in bf16.
    fn tensor_core_aligned(&self) -> bool {
        let (c_out, c_in) = (self.weight.dim(0).unwrap_or(0), self.weight.dim(1).unwrap_or(0));
        c_in.is_multiple_of(TENSOR_CORE_CHANNELS) && c_out.is_multiple_of(TENSOR_CORE_CHANNELS)
    }

    /// Candle's own ops throughout, its slow convolution backward included:
    /// the reference in tests.
    #[cfg(test)]
    fn forward_reference(&self, x: &Tensor) -> Result<Tensor> {
        let bias = |y: &Tensor, b: &Tensor, relu| add_bias_by_ops(y, b, relu, Channels::First);
        self.forward_with(x, |x, w| x.conv2d(w, w.dim(2)? / 2, 1, 1, 1), bias)
    }

    /// The convolution by `conv`, then the bias and the ReLU by `bias`
    /// (when the layer has a bias; the ReLU alone otherwise). In bf16 the
    /// f32 kernel is cast for the convolution (its gradient cast back by
    /// the cast's backward pass); the bias stays f32.
    fn forward_with(
        &self,
        x: &Tensor,
        conv: impl Fn(&Tensor, &Tensor) -> Result<Tensor>,
        bias: impl Fn(&Tensor, &Tensor, bool) -> Result<Tensor>,
    ) -> Result<Tensor> {
        self.bias_relu(conv(x, &self.weight.to_dtype(x.dtype())?)?, bias)
    }

    /// The layer's bias and ReLU by `bias` on its convolution `y` (the ReLU
    /// alone when it has no bias).
    fn bias_relu(&self, y: Tensor, bias: impl Fn(&Tensor, &Tensor, bool) -> Result<Tensor>) -> Result<Tensor> {
        match (self.has_bias, self.relu) {
            (true, relu) => bias(&y, &self.bias, relu),
            (false, true) => y.relu(),
            (false, false) => Ok(y),
        }
    }
}

/// `y + b` per channel, `y` (batch, c, h, w), `b` (c, f32), then the ReLU
/// when `relu`, in `y`'s dtype.
fn add_bias(y: &Tensor, b: &Tensor, relu: bool) -> Result<Tensor> {
    add_bias_in(y, b, relu, Channels::First)
}

/// [`add_bias`] on `y` in the layout `channels`: on a GPU by
/// `nn::cuda::bias` (one kernel forward; the bias's gradient one
/// per-channel sum), elsewhere by candle's ops.
fn add_bias_in(y: &Tensor, b: &Tensor, relu: bool, channels: Channels) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if super::cuda::applies(y) {
        return super::cuda::bias::add_bias(y, b, relu, channels);
    }
    add_bias_by_ops(y, b, relu, channels)
}

/// [`add_bias`] by candle's ops, `y` in the layout `channels`.
fn add_bias_by_ops(y: &Tensor, b: &Tensor, relu: bool, channels: Channels) -> Result<Tensor> {
    let b = b.to_dtype(y.dtype())?;
    let b = match channels {
        Channels::First => b.reshape((1, (), 1, 1))?,
        Channels::Last => b,
    };
    let y = y.broadcast_add(&b)?;
    if relu {
        y.relu()
    } else {
        Ok(y)
    }
}

/// The fused convolution op: arguments (x, weight, bias).
struct ConvOp {
    k: usize,
    relu: bool,
}

impl ConvOp {
    fn geometry(&self, x: &Layout, w: &Layout) -> Result<ConvGeom> {
        let (batch, c_in, h, wd) = x.shape().dims4()?;
        let (c_out, wc_in, kh, kw) = w.shape().dims4()?;
        if wc_in != c_in || kh != self.k || kw != self.k {
            candle_core::bail!("conv: kernel {:?} does not fit input {:?}", w.shape(), x.shape());
        }
        Ok(ConvGeom { batch, c_in, c_out, k: self.k, h, w: wd })
    }
}

impl CustomOp3 for ConvOp {
    fn name(&self) -> &'static str {
        "go-train-conv"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let g = self.geometry(xl, wl)?;
        let (x, w, b) =
            (cpu_slice(xs, xl, "conv input")?, cpu_slice(ws, wl, "conv kernel")?, cpu_slice(bs, bl, "conv bias")?);
        let y = kernels::conv_forward(&g, x, w, Some(b), self.relu);
        Ok((CpuStorage::F32(y), Shape::from((g.batch, g.c_out, g.h, g.w))))
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        b: &Tensor,
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let g = self.geometry(x.layout(), w.layout())?;
        let dy = dy.contiguous()?;
        let (xv, wv, yv, dyv) = (CpuView::new(x), CpuView::new(w), CpuView::new(y), CpuView::new(&dy));
        let relu_out = if self.relu { Some(yv.slice("conv output")?) } else { None };
        // The net's input needs no gradient: skip that convolution.
        let grads = kernels::conv_backward(
            &g,
            xv.slice("conv input")?,
            wv.slice("conv kernel")?,
            dyv.slice("conv output gradient")?,
            relu_out,
            x.track_op(),
        );
        let dx = grads.dx.map(|d| cpu_tensor(d, x.shape())).transpose()?;
        let dw = cpu_tensor(grads.dweight, w.shape())?;
        let db = if b.track_op() { Some(cpu_tensor(grads.dbias, b.shape())?) } else { None };
        Ok((dx, Some(dw), db))
    }
}

/// Batch normalisation over the channels of NCHW input, optionally followed
/// by a ReLU. Training mode normalises with the batch's statistics and
/// updates the running averages (PyTorch's rule: momentum 0.1, unbiased
/// variance); evaluation mode uses the running averages.
///
/// Tensors: `weight` (γ), `bias` (β), `running_mean`, `running_var`, all
/// (channels). The running averages are variables only so that they are
/// saved with the weights; they get no gradient.
#[derive(Clone, Debug)]
pub struct BatchNorm {
    /// Scale γ.
    weight: Tensor,
    /// Shift β.
    bias: Tensor,
    /// Running mean, updated in training mode.
    running_mean: Var,
    /// Running (unbiased) variance, updated in training mode.
    running_var: Var,
    /// Whether a ReLU follows (fused into the op).
    relu: bool,
}

/// Added to the variance before the square root, as in PyTorch.
const BN_EPS: f64 = 1e-5;
/// Weight of the new batch in the running averages, as in PyTorch.
pub(crate) const BN_MOMENTUM: f64 = 0.1;

impl BatchNorm {
    /// Batch norm over `channels`, followed by a ReLU when `relu`.
    pub fn new(vb: VarBuilder, channels: usize, relu: bool) -> Result<BatchNorm> {
        BatchNorm::with_scale(vb, channels, relu, 1.0)
    }

    /// The same with every scale γ starting at `scale` (when its tensors
    /// are created, not loaded): 0 makes a residual branch start as nothing,
    /// so a block added to a trained net leaves it as it was.
    pub fn with_scale(vb: VarBuilder, channels: usize, relu: bool, scale: f64) -> Result<BatchNorm> {
        let weight = vb.get_with_hints(channels, "weight", Init::Const(scale))?;
        let bias = vb.get_with_hints(channels, "bias", Init::Const(0.0))?;
        let running_mean = Var::from_tensor(&vb.get_with_hints(channels, "running_mean", Init::Const(0.0))?)?;
        let running_var = Var::from_tensor(&vb.get_with_hints(channels, "running_var", Init::Const(1.0))?)?;
        Ok(BatchNorm { weight, bias, running_mean, running_var, relu })
    }

    /// Normalises `x` (batch, channels, h, w); `train` selects batch
    /// statistics (and updates the running averages).
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        // On a GPU in f32 or bf16: the kernels compute in f32 either way.
        #[cfg(feature = "cuda")]
        if super::cuda::applies(x) {
            return self.forward_cuda(x, train, Channels::First);
        }
        if x.dtype() != DType::F32 {
            // Elsewhere bf16 runs through f32 (as PyTorch's autocast runs
            // batch norm), the output in x's dtype.
            return self.forward(&x.to_dtype(DType::F32)?, train)?.to_dtype(x.dtype());
        }
        if !fused(x) {
            return self.forward_reference(x, train);
        }
        let x = x.contiguous()?;
        let p = planes(&x)?;
        let (mean, var) = if train {
            let (mean, var) = kernels::channel_stats(&p, CpuView::new(&x).slice("batch-norm input")?);
            if Fused::RunningStats.enabled() {
                self.update_running_in_place(&mean, &var, &p)?;
            } else {
                self.update_running(&cpu_tensor(mean.clone(), p.channels)?, &cpu_tensor(var.clone(), p.channels)?, &p)?;
            }
            (mean, var)
        } else {
            (self.running_mean.as_tensor().to_vec1()?, self.running_var.as_tensor().to_vec1()?)
        };
        let invstd = var.iter().map(|v| 1.0 / (v + BN_EPS as f32).sqrt()).collect();
        x.apply_op3(&self.weight, &self.bias, BatchNormOp { mean, invstd, relu: self.relu, batch_stats: train })
    }

    /// Folds a batch's mean and biased variance into the running averages.
    fn update_running(&self, mean: &Tensor, var: &Tensor, p: &Planes) -> Result<()> {
        let blend = |old: &Var, new: &Tensor, scale: f64| -> Result<()> {
            old.set(&((old.as_tensor() * (1.0 - BN_MOMENTUM))? + (new * (BN_MOMENTUM * scale))?)?)
        };
        blend(&self.running_mean, mean, 1.0)?;
        blend(&self.running_var, var, unbiased_scale(p))
    }

    /// The same on the CPU, in place: one pass over each average where
    /// candle's ops take four and two new tensors, with the same f32
    /// arithmetic.
    fn update_running_in_place(&self, mean: &[f32], var: &[f32], p: &Planes) -> Result<()> {
        let [(keep, take_mean), (_, take_var)] = blend_factors(p);
        for (old, new, take) in [(&self.running_mean, mean, take_mean), (&self.running_var, var, take_var)] {
            old.as_tensor().inplace_op1(&Blend { new, keep, take })?;
        }
        Ok(())
    }

    /// [`BatchNorm::forward`] on `x` in the layout `channels`. On a GPU
    /// by kernels for that layout, elsewhere by changing the layout around
    /// the NCHW batch norm.
    pub fn forward_in(&self, x: &Tensor, train: bool, channels: Channels) -> Result<Tensor> {
        if channels == Channels::First {
            return self.forward(x, train);
        }
        #[cfg(feature = "cuda")]
        if super::cuda::applies(x) {
            return self.forward_cuda(x, train, channels);
        }
        to_channels_last(&self.forward(&to_channels_first(x)?, train)?)
    }

    /// On a GPU, by the kernels of `nn::cuda::norm`.
    #[cfg(feature = "cuda")]
    fn forward_cuda(&self, x: &Tensor, train: bool, channels: Channels) -> Result<Tensor> {
        let stats = if train {
            let (batch, c, points) = channels.dims(x.shape())?;
            let p = Planes { batch, channels: c, points };
            if Fused::RunningStats.enabled() {
                let running = [self.running_mean.as_tensor(), self.running_var.as_tensor()];
                super::cuda::norm::moments_blending(x, running, blend_factors(&p), channels)?
            } else {
                let stats = super::cuda::norm::moments(x, channels)?;
                self.update_running(&stats.get(0)?, &stats.get(1)?, &p)?;
                stats
            }
        } else {
            Tensor::stack(&[self.running_mean.as_tensor(), self.running_var.as_tensor()], 0)?
        };
        super::cuda::norm::normalize(x, &self.weight, &self.bias, &stats, BN_EPS, self.relu, train, channels)
    }

    /// Candle's own ops: the GPU path without `nn::cuda` (or with
    /// `GO_TRAIN_CUDA_KERNELS=0`), and the reference in tests.
    fn forward_reference(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let per_channel = |t: &Tensor| t.reshape((1, (), 1, 1));
        let (mean, var) = if train {
            // One reduction over batch and board per statistic: each is a
            // kernel launch on a GPU, where a chain of three cost as much.
            let mean = x.mean_keepdim((0, 2, 3))?;
            let var = x.broadcast_sub(&mean)?.sqr()?.mean_keepdim((0, 2, 3))?;
            self.update_running(&mean.flatten_all()?.detach(), &var.flatten_all()?.detach(), &planes(x)?)?;
            (mean, var)
        } else {
            (per_channel(self.running_mean.as_tensor())?, per_channel(self.running_var.as_tensor())?)
        };
        // y = x·scale + shift, scale = γ/σ, shift = β − μ·scale: the
        // per-channel work on small tensors, two passes over x.
        let scale = per_channel(&self.weight)?.broadcast_mul(&(var + BN_EPS)?.sqrt()?.recip()?)?;
        let shift = per_channel(&self.bias)?.broadcast_sub(&mean.broadcast_mul(&scale)?)?;
        let y = x.broadcast_mul(&scale)?.broadcast_add(&shift)?;
        if self.relu {
            y.relu()
        } else {
            Ok(y)
        }
    }
}

/// (keep, take) of the in-place running averages, `avg ← keep·avg +
/// take·batch`, for the mean and for the variance: the f32 factors of
/// [`BatchNorm::update_running`]'s ops.
fn blend_factors(p: &Planes) -> [(f32, f32); 2] {
    let keep = (1.0 - BN_MOMENTUM) as f32;
    [(keep, BN_MOMENTUM as f32), (keep, (BN_MOMENTUM * unbiased_scale(p)) as f32)]
}

/// The factor from the biased variance of a batch to the unbiased one
/// that the running average keeps.
fn unbiased_scale(p: &Planes) -> f64 {
    let n = p.per_channel() as f64;
    if n > 1.0 {
        n / (n - 1.0)
    } else {
        1.0
    }
}

/// `old ← old·keep + new·take` in place, as candle's `old * keep + new *
/// take` rounds it (`Tensor * f64` is `x·s + 0` in f32).
struct Blend<'a> {
    new: &'a [f32],
    keep: f32,
    take: f32,
}

impl InplaceOp1 for Blend<'_> {
    fn name(&self) -> &'static str {
        "go-train-running-average"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> Result<()> {
        let old = match (storage, layout.contiguous_offsets()) {
            (CpuStorage::F32(v), Some((start, end))) => &mut v[start..end],
            _ => candle_core::bail!("batch norm: the running average is not contiguous f32 data"),
        };
        if old.len() != self.new.len() {
            candle_core::bail!("batch norm: {} running values for {} channels", old.len(), self.new.len());
        }
        for (o, &n) in old.iter_mut().zip(self.new) {
            *o = (*o * self.keep + 0.0) + (n * self.take + 0.0);
        }
        Ok(())
    }
}

fn planes(x: &Tensor) -> Result<Planes> {
    let (batch, channels, h, w) = x.dims4()?;
    Ok(Planes { batch, channels, points: h * w })
}

/// The fused batch-norm op: arguments (x, γ, β); the statistics it
/// normalises with are fixed when the op is built.
struct BatchNormOp {
    mean: Vec<f32>,
    invstd: Vec<f32>,
    relu: bool,
    batch_stats: bool,
}

impl CustomOp3 for BatchNormOp {
    fn name(&self) -> &'static str {
        "go-train-batch-norm"
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        bs: &CpuStorage,
        bl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (batch, channels, h, w) = xl.shape().dims4()?;
        let p = Planes { batch, channels, points: h * w };
        let (gamma, beta) = (cpu_slice(gs, gl, "batch-norm weight")?, cpu_slice(bs, bl, "batch-norm bias")?);
        if gamma.len() != channels || beta.len() != channels || self.mean.len() != channels {
            candle_core::bail!("batch norm over {} channels got input {:?}", gamma.len(), xl.shape());
        }
        // y = γ(x−μ)/σ + β = x·scale + shift.
        let scale: Vec<f32> = gamma.iter().zip(&self.invstd).map(|(g, s)| g * s).collect();
        let shift: Vec<f32> = beta.iter().zip(&scale).zip(&self.mean).map(|((b, s), m)| b - m * s).collect();
        let y = kernels::channel_affine(&p, cpu_slice(xs, xl, "batch-norm input")?, &scale, &shift, self.relu);
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }

    fn bwd(
        &self,
        x: &Tensor,
        gamma: &Tensor,
        _beta: &Tensor,
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let p = planes(x)?;
        let dy = dy.contiguous()?;
        let (xv, gv, yv, dyv) = (CpuView::new(x), CpuView::new(gamma), CpuView::new(y), CpuView::new(&dy));
        let norm = Norm {
            mean: &self.mean,
            invstd: &self.invstd,
            gamma: gv.slice("batch-norm weight")?,
            batch_stats: self.batch_stats,
        };
        let relu_out = if self.relu { Some(yv.slice("batch-norm output")?) } else { None };
        let g = kernels::batch_norm_backward(
            &p,
            xv.slice("batch-norm input")?,
            dyv.slice("batch-norm gradient")?,
            relu_out,
            &norm,
        );
        let dx = if x.track_op() { Some(cpu_tensor(g.dx, x.shape())?) } else { None };
        Ok((dx, Some(cpu_tensor(g.dgamma, p.channels)?), Some(cpu_tensor(g.dbeta, p.channels)?)))
    }
}

/// A fully connected layer `y = x·Wᵀ + b` (PyTorch's `nn.Linear` layout).
///
/// Tensors: `weight` (out, in), `bias` (out).
#[derive(Clone, Debug)]
pub struct Linear(candle_nn::Linear);

impl Linear {
    /// A layer from `inputs` to `outputs` features.
    pub fn new(vb: VarBuilder, inputs: usize, outputs: usize) -> Result<Linear> {
        let init = torch_default_init(inputs);
        let weight = vb.get_with_hints((outputs, inputs), "weight", init)?;
        let bias = vb.get_with_hints(outputs, "bias", init)?;
        Ok(Linear(candle_nn::Linear::new(weight, Some(bias))))
    }

    /// Applies the layer to `x` (batch, inputs), in f32 whatever `x`'s
    /// dtype: the heads' few products gain nothing from bf16.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.0.forward(&to_f32(x)?)
    }
}

/// `relu(x + skip)`: the end of a residual block.
///
/// On the CPU this is one pass of our own. Candle's elementwise ops hand
/// tensors of 64 Ki elements or more (a batch of 8 leaves of 32 channels
/// already) to its barrier pool, whose caller spins until the pool's
/// threads are done; beside the search's own threads, a match's other
/// game or a training run, that spinning made a value net with two
/// residual blocks cost MCTS 1.9 times the time of one without them,
/// where the blocks add 1.2 times the arithmetic (`bench search`,
/// docs/value-net.md).
///
/// On a GPU, one kernel of our own each way (`nn::cuda::residual`).
pub fn residual_relu(x: &Tensor, skip: &Tensor) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if super::cuda::applies(x) {
        return super::cuda::residual::residual_relu(x, skip);
    }
    if fused(x) {
        x.contiguous()?.apply_op2(&skip.contiguous()?, ResidualRelu)
    } else {
        (x + skip)?.relu()
    }
}

/// The fused op of [`residual_relu`]: arguments (x, skip).
struct ResidualRelu;

impl CustomOp2 for ResidualRelu {
    fn name(&self) -> &'static str {
        "go-train-residual-relu"
    }

    fn cpu_fwd(&self, xs: &CpuStorage, xl: &Layout, ss: &CpuStorage, sl: &Layout) -> Result<(CpuStorage, Shape)> {
        if xl.shape() != sl.shape() {
            candle_core::bail!("residual: input {:?} and skip {:?} differ", xl.shape(), sl.shape());
        }
        let (x, skip) = (cpu_slice(xs, xl, "residual input")?, cpu_slice(ss, sl, "residual skip")?);
        let y = x.iter().zip(skip).map(|(a, b)| (a + b).max(0.0)).collect();
        Ok((CpuStorage::F32(y), xl.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, skip: &Tensor, y: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dy = dy.contiguous()?;
        let (yv, dyv) = (CpuView::new(y), CpuView::new(&dy));
        let passed: Vec<f32> = yv
            .slice("residual output")?
            .iter()
            .zip(dyv.slice("residual gradient")?)
            .map(|(y, g)| if *y > 0.0 { *g } else { 0.0 })
            .collect();
        let passed = cpu_tensor(passed, y.shape())?;
        let dx = if x.track_op() { Some(passed.clone()) } else { None };
        Ok((dx, skip.track_op().then_some(passed)))
    }
}

/// `x` in f32: where a head leaves the activations' precision.
pub fn to_f32(x: &Tensor) -> Result<Tensor> {
    x.to_dtype(DType::F32)
}

/// Flattens (batch, c, h, w) to (batch, c·h·w), as PyTorch's `flatten(1)`.
pub fn flatten(x: &Tensor) -> Result<Tensor> {
    x.flatten_from(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::backprop::GradStore;
    use candle_nn::VarMap;

    #[test]
    fn channels_last_only_where_the_tensor_cores_convolve() {
        assert!(on_tensor_cores(DType::BF16, false) && on_tensor_cores(DType::BF16, true));
        assert!(on_tensor_cores(DType::F32, true));
        assert!(!on_tensor_cores(DType::F32, false), "full f32 convolves faster NCHW");
    }

    fn rand_input(shape: (usize, usize, usize, usize)) -> Tensor {
        Tensor::rand(-1.0f32, 1.0, shape, &Device::Cpu).unwrap()
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
    }

    /// The largest difference between the gradient of `a` in `ga` and that
    /// of `b` in `gb`.
    fn grad_diff(ga: &GradStore, a: &Tensor, gb: &GradStore, b: &Tensor) -> f32 {
        max_diff(ga.get(a).expect("gradient"), gb.get(b).expect("gradient"))
    }

    /// Output and gradient store of `sum(f(x) * wts)`: a weighting so that
    /// every output element gets its own gradient.
    fn run(f: impl Fn(&Tensor) -> Result<Tensor>, x: &Var, wts: &Tensor) -> (Tensor, GradStore) {
        let y = f(x.as_tensor()).unwrap();
        let g = (&y * wts).unwrap().sum_all().unwrap().backward().unwrap();
        (y, g)
    }

    /// Checks `Conv::forward` on `dev` against candle's own conv2d and its
    /// autograd, on outputs and all three gradients, for each case
    /// `(k, relu, bias, c_in, c_out, h)` (the board is h×7); `generic` runs
    /// it on the GPU's path even on the CPU.
    fn check_conv_against_candle(dev: &Device, cases: &[(usize, bool, bool, usize, usize, usize)], generic: bool) {
        for &(k, relu, bias, c_in, c_out, h) in cases {
            let vm = VarMap::new();
            let vb = VarBuilder::from_varmap(&vm, DType::F32, dev);
            let conv = Conv::new(vb.pp("c"), c_in, c_out, k, bias, relu).unwrap();
            let x = Var::from_tensor(&rand_input((4, c_in, h, 7)).to_device(dev).unwrap()).unwrap();
            let wts = rand_input((4, c_out, h, 7)).to_device(dev).unwrap();
            let forward = || run(|x| conv.forward(x), &x, &wts);
            let (yf, gf) = if generic { with_generic_ops(forward) } else { forward() };
            let (yr, gr) = run(|x| conv.forward_reference(x), &x, &wts);
            assert!(max_diff(&yf, &yr) < 1e-5, "forward k={k} relu={relu}");
            for t in [x.as_tensor(), &conv.weight] {
                assert!(grad_diff(&gf, t, &gr, t) < 1e-4, "gradient k={k} relu={relu}");
            }
            if bias {
                assert!(grad_diff(&gf, &conv.bias, &gr, &conv.bias) < 1e-4, "bias gradient");
            } else {
                assert!(gf.get(&conv.bias).is_none(), "a constant zero bias gets no gradient");
            }
        }
    }

    /// In bf16 a layer with channels the tensor cores cannot take (15 input
    /// planes, or one output) computes in f32 and rounds its result once:
    /// its output is the f32 layer's, rounded. An aligned layer rounds its
    /// kernel too (the tensor cores' operands), so its output is not.
    #[test]
    fn unaligned_bf16_convolutions_compute_in_f32() {
        for (c_in, c_out, aligned) in [(15, 16, false), (16, 1, false), (16, 16, true)] {
            let vm = VarMap::new();
            let vb = VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu);
            let conv = Conv::new(vb.pp("c"), c_in, c_out, 3, true, true).unwrap();
            assert_eq!(conv.tensor_core_aligned(), aligned);
            // Inputs exact in bf16, as the 0/1 planes are.
            let x = rand_input((2, c_in, 5, 5)).to_dtype(DType::BF16).unwrap();
            let rounded_f32 = conv.forward(&x.to_dtype(DType::F32).unwrap()).unwrap().to_dtype(DType::BF16).unwrap();
            let y = conv.forward(&x).unwrap();
            assert_eq!(y.dtype(), DType::BF16);
            let same = |a: &Tensor, b: &Tensor| {
                a.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
                    == b.to_dtype(DType::F32).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap()
            };
            assert_eq!(same(&y, &rounded_f32), !aligned, "{c_in} -> {c_out} channels");
        }
    }

    /// The fused conv op and candle's conv2d agree, with and without ReLU,
    /// for 3×3 and 1×1 kernels. (On 6×7 boards the AVX-512 backward
    /// applies; on 7×7 it declines: the grid's 8 extra points overflow the
    /// padding's 7.)
    #[test]
    fn fused_conv_matches_candle_conv2d() {
        let cases =
            [(3, false, true, 3, 5, 7), (3, true, true, 3, 5, 7), (3, true, true, 3, 5, 6), (1, true, false, 3, 5, 7)];
        check_conv_against_candle(&Device::Cpu, &cases, false);
    }

    /// The device path's convolution (candle's forward, gradients by
    /// [`super::super::conv_grad`]) agrees with candle's own conv2d and its
    /// autograd, on the test device (`GO_TRAIN_TEST_DEVICE`).
    #[test]
    fn device_conv_gradients_match_candle_conv2d() {
        let cases = [(3, true, true, 3, 5, 6), (3, false, false, 16, 8, 7), (1, true, false, 8, 2, 7)];
        check_conv_against_candle(&crate::nn::test_device(), &cases, true);
    }

    /// The residual end as the nets run it on the test device (the fused
    /// CPU pass, or `nn::cuda::residual` on a GPU) matches candle's
    /// `relu(x + skip)`, output and both gradients, on a tensor large
    /// enough (8×32×19×19) that candle would hand it to its own thread pool.
    #[test]
    fn residual_relu_matches_candle() {
        let dev = crate::nn::test_device();
        // Multiples of 1/64, x shifted by 1/256: no sum is exactly 0, where
        // candle's ReLU passes the gradient and PyTorch's (and ours) not.
        let grid = |shift: f64| {
            let t = rand_input((8, 32, 19, 19)).affine(64.0, 0.0).unwrap().floor().unwrap();
            t.affine(1.0 / 64.0, shift).unwrap().to_device(&dev).unwrap()
        };
        let x = Var::from_tensor(&grid(1.0 / 256.0)).unwrap();
        let skip = Var::from_tensor(&grid(0.0)).unwrap();
        let wts = rand_input((8, 32, 19, 19)).to_device(&dev).unwrap();
        let (yf, gf) = run(|x| residual_relu(x, skip.as_tensor()), &x, &wts);
        let (yr, gr) = run(|x| (x + skip.as_tensor())?.relu(), &x, &wts);
        assert!(max_diff(&yf, &yr) == 0.0, "forward");
        let positive =
            yf.gt(0.0).unwrap().to_dtype(DType::F32).unwrap().mean_all().unwrap().to_scalar::<f32>().unwrap();
        assert!(positive > 0.3 && positive < 0.7, "both sides of the ReLU tested: {positive}");
        assert!(grad_diff(&gf, x.as_tensor(), &gr, x.as_tensor()) == 0.0, "input gradient");
        assert!(grad_diff(&gf, skip.as_tensor(), &gr, skip.as_tensor()) == 0.0, "skip gradient");
    }

    /// The running averages updated in place hold what candle's ops give
    /// them, bit for bit, over several batches.
    #[test]
    fn running_averages_in_place_match_candle_ops() {
        let make = || {
            let vm = VarMap::new();
            BatchNorm::new(VarBuilder::from_varmap(&vm, DType::F32, &Device::Cpu).pp("bn"), 5, false).unwrap()
        };
        let (in_place, by_ops) = (make(), make());
        let p = Planes { batch: 3, channels: 5, points: 7 };
        for step in 0..4 {
            let mean: Vec<f32> = (0..5).map(|c| (c as f32 - 2.1) * 0.37 + step as f32 * 0.011).collect();
            let var: Vec<f32> = (0..5).map(|c| 0.3 + c as f32 * 1.7 + step as f32 * 0.13).collect();
            in_place.update_running_in_place(&mean, &var, &p).unwrap();
            by_ops.update_running(&cpu_tensor(mean, 5).unwrap(), &cpu_tensor(var, 5).unwrap(), &p).unwrap();
        }
        let bits = |v: &Var| v.as_tensor().to_vec1::<f32>().unwrap().into_iter().map(f32::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(&in_place.running_mean), bits(&by_ops.running_mean));
        assert_eq!(bits(&in_place.running_var), bits(&by_ops.running_var));
    }

    /// Batch norm as the nets run it on the test device (the fused
    /// kernels on the CPU, `nn::cuda::norm` on a GPU) matches
    /// candle's ops in both modes: output, the training-mode input gradient
    /// through the batch statistics, γ's and β's gradients, and the
    /// running averages. Evaluation follows a training pass, so that its
    /// running averages are not the initial 0 and 1; the larger board
    /// gives a channel more values than a GPU block has threads.
    #[test]
    fn batch_norm_matches_reference() {
        let dev = crate::nn::test_device();
        let on_dev = |t: Tensor| t.to_device(&dev).unwrap();
        for shape in [(5, 3, 4, 4), (6, 4, 9, 9)] {
            for (train, relu) in [(true, true), (true, false), (false, true)] {
                let gamma = on_dev(Tensor::rand(0.5f32, 2.0, shape.1, &Device::Cpu).unwrap());
                let make = || {
                    let vm = VarMap::new();
                    let vb = VarBuilder::from_varmap(&vm, DType::F32, &dev);
                    let bn = BatchNorm::new(vb.pp("bn"), shape.1, relu).unwrap();
                    Var::from_tensor(&bn.weight).unwrap().set(&gamma).unwrap();
                    bn
                };
                let (fast, reference) = (make(), make());
                let x = Var::from_tensor(&on_dev(rand_input(shape).affine(2.0, 0.5).unwrap())).unwrap();
                let wts = on_dev(rand_input(shape));
                if !train {
                    fast.forward(x.as_tensor(), true).unwrap();
                    reference.forward_reference(x.as_tensor(), true).unwrap();
                }
                let (yf, gf) = run(|x| fast.forward(x, train), &x, &wts);
                let (yr, gr) = run(|x| reference.forward_reference(x, train), &x, &wts);
                let case = format!("{shape:?} train={train} relu={relu}");
                assert!(max_diff(&yf, &yr) < 1e-5, "forward {case}");
                assert!(grad_diff(&gf, x.as_tensor(), &gr, x.as_tensor()) < 1e-4, "input gradient {case}");
                assert!(grad_diff(&gf, &fast.weight, &gr, &reference.weight) < 1e-4, "weight gradient {case}");
                assert!(grad_diff(&gf, &fast.bias, &gr, &reference.bias) < 1e-4, "bias gradient {case}");
                for (a, b) in
                    [(&fast.running_mean, &reference.running_mean), (&fast.running_var, &reference.running_var)]
                {
                    assert!(max_diff(a.as_tensor(), b.as_tensor()) < 1e-5, "running stats {case}");
                }
            }
        }
    }
}
