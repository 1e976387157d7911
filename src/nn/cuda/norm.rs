//! Batch norm (with its ReLU) on a GPU in four kernel passes.
//!
//! Built from candle's ops, a training-mode batch norm is seven passes
//! over the activations forward (two reductions, subtract, square,
//! multiply, add, ReLU) and about twice that backward: docs/cuda.md found
//! them a third of the GPU's time on a residual net. Here the forward is
//! two passes (per-channel moments, then normalise and ReLU) and the
//! backward two (the per-channel gradient sums, then the input gradient),
//! as in the fused CPU kernels of `nn::kernels`, which these mirror.
//!
//! candle has no batch norm kernel, and cuDNN's would tie the plain `cuda`
//! build to libcudnn and cannot fuse the ReLU for NCHW tensors.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, CudaView, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, WrapErr};
use candle_core::{CpuStorage, CudaStorage, CustomOp3, Layout, Result, Shape, Tensor};
use half::bf16;

use super::{
    address, by_dtype, channel_reduce, channel_sums, cpu_refused, divide_each_value, elementwise, kernel, pack_width,
    packs, ptx, view, view_of, with_view, Activation, Reading, Reduce, RunningBlend, MODULE,
};
use crate::nn::layout::Channels;

/// The per-channel mean and biased variance of `x` (batch, c, h, w, or
/// batch, h, w, c channels-last), as a (2, c) tensor, not differentiated
/// (the normalisation's gradient accounts for them).
pub fn moments(x: &Tensor, channels: Channels) -> Result<Tensor> {
    channel_reduce(x, Reduce::Moments, None, channels)
}

/// [`moments`], folded as well into batch norm's running averages
/// `running` (mean, variance; c values each) in place: `avg ← keep·avg +
/// take·moment`, `factors` (keep, take) for each. The same launches as
/// [`moments`] alone, where candle's ops take eight and two copies.
pub fn moments_blending(
    x: &Tensor,
    running: [&Tensor; 2],
    factors: [(f32, f32); 2],
    channels: Channels,
) -> Result<Tensor> {
    let dev = x.device().as_cuda_device()?.clone();
    let c = channels.dims(x.shape())?.1;
    let [(mean, m), (var, v)] = [address(running[0], &dev)?, address(running[1], &dev)?];
    if m != c || v != c {
        candle_core::bail!("batch norm: running averages of {m} and {v} values for {c} channels");
    }
    let [(keep, take_mean), (_, take_var)] = factors;
    let blend = Some(RunningBlend { mean, var, keep, take_mean, take_var });
    channel_reduce(x, Reduce::Moments, blend, channels)
}

/// `γ·(x − mean)/√(var + eps) + β`, then ReLU when `relu`, with mean and
/// variance from `stats` (2, c); `batch_stats` says they are `x`'s own, so
/// that the gradient flows through them too. `x` in the layout `channels`.
#[allow(clippy::too_many_arguments)]
pub fn normalize(
    x: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    stats: &Tensor,
    eps: f64,
    relu: bool,
    batch_stats: bool,
    channels: Channels,
) -> Result<Tensor> {
    let pass = NormPass::Forward { batch_stats };
    let op = NormOp { stats: stats.detach().contiguous()?, eps: eps as f32, relu, pass, channels };
    x.contiguous()?.apply_op3(&gamma.contiguous()?, &beta.contiguous()?, op)
}

/// Batch norm's three passes on the GPU as one candle op of three tensors,
/// its statistics fixed when it is built.
struct NormOp {
    stats: Tensor,
    eps: f32,
    relu: bool,
    pass: NormPass,
    channels: Channels,
}

enum NormPass {
    /// (x, γ, β) → y; `batch_stats`: the statistics are x's own.
    Forward { batch_stats: bool },
    /// (x, y, dy) → (Σ g, Σ g·x̂) per channel, a (2, c) tensor: (dβ, dγ).
    GradSums,
    /// (x, y, dy) → dx, from γ and the sums.
    InputGrad { gamma: Tensor, sums: Tensor, batch_stats: bool },
}

impl NormOp {
    /// `normalize` (`normalize_nhwc` channels-last): y from x, γ and β;
    /// `packed`, channels-last in 16-byte packs.
    fn forward<T: Activation>(
        &self,
        dev: &CudaDevice,
        x: CudaView<T>,
        [gamma, beta]: [CudaView<f32>; 2],
        l: &Layout,
        packed: bool,
    ) -> Result<CudaSlice<T>> {
        let (_, c, p) = self.channels.dims(l.shape())?;
        let total = l.shape().elem_count();
        // SAFETY: uninitialised, but `normalize` writes every one of its
        // `total` values (a grid-stride loop) before anything reads it.
        let y = unsafe { dev.alloc::<T>(total)? };
        with_view(&self.stats, "statistics", |stats| {
            let last = self.channels == Channels::Last;
            let name = if last {
                kernel::<T>("normalize_nhwc", "normalize_nhwc_bf16")
            } else {
                kernel::<T>("normalize", "normalize_bf16")
            };
            let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
            let (c, p, total64, relu) = (c as i32, p as i32, total as i64, self.relu as i32);
            let mut b = func.builder();
            b.arg(&x).arg(&stats).arg(&gamma).arg(&beta).arg(&self.eps).arg(&y).arg(&c);
            let (divide, packed32) = (divide_each_value(), packed as i32);
            let threads = if last {
                b.arg(&total64).arg(&relu).arg(&packed32);
                total / pack_width::<T>(packed)
            } else {
                b.arg(&p).arg(&total64).arg(&relu).arg(&divide);
                total
            };
            // SAFETY: x and y hold `total` values (c a multiple of a pack's
            // when packed), γ and β c, stats 2c.
            unsafe { b.launch(elementwise(threads)) }.w()?;
            Ok(())
        })?;
        Ok(y)
    }

    /// `normalize_grad`: dx from x, y, dy, γ and the gradient sums.
    fn input_grad<T: Activation>(
        &self,
        dev: &CudaDevice,
        [x, y, dy]: [CudaView<T>; 3],
        l: &Layout,
        (gamma, sums, batch_stats): (&Tensor, &Tensor, bool),
        packed: bool,
    ) -> Result<CudaSlice<T>> {
        let (n, c, p) = self.channels.dims(l.shape())?;
        let total = l.shape().elem_count();
        // SAFETY: uninitialised, but `normalize_grad` writes every one of its
        // `total` values (a grid-stride loop) before anything reads it.
        let dx = unsafe { dev.alloc::<T>(total)? };
        with_view(&self.stats, "statistics", |stats| {
            with_view(gamma, "weight", |gamma| {
                with_view(sums, "gradient sums", |sums| {
                    let last = self.channels == Channels::Last;
                    let name = if last {
                        kernel::<T>("normalize_grad_nhwc", "normalize_grad_nhwc_bf16")
                    } else {
                        kernel::<T>("normalize_grad", "normalize_grad_bf16")
                    };
                    let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
                    let (c, p, total64, m) = (c as i32, p as i32, total as i64, (n * p) as f32);
                    let (relu, batch_stats) = (self.relu as i32, batch_stats as i32);
                    let mut b = func.builder();
                    b.arg(&x).arg(&dy).arg(&y).arg(&stats).arg(&gamma).arg(&sums).arg(&self.eps).arg(&dx);
                    let (divide, packed32) = (divide_each_value(), packed as i32);
                    let threads = if last {
                        b.arg(&c).arg(&total64).arg(&m).arg(&relu).arg(&batch_stats).arg(&packed32);
                        total / pack_width::<T>(packed)
                    } else {
                        b.arg(&c).arg(&p).arg(&total64).arg(&m).arg(&relu).arg(&batch_stats).arg(&divide);
                        total
                    };
                    // SAFETY: x, y, dy and dx hold `total` values (c a
                    // multiple of a pack's when packed), γ c, stats and sums
                    // 2c.
                    unsafe { b.launch(elementwise(threads)) }.w()?;
                    Ok(())
                })
            })
        })?;
        Ok(dx)
    }
}

impl CustomOp3 for NormOp {
    fn name(&self) -> &'static str {
        match self.pass {
            NormPass::Forward { .. } => "go-train-cuda-batch-norm",
            NormPass::GradSums => "go-train-cuda-batch-norm-sums",
            NormPass::InputGrad { .. } => "go-train-cuda-batch-norm-input-grad",
        }
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(
        &self,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
        s3: &CudaStorage,
        l3: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let args = [(s1, l1), (s2, l2), (s3, l3)];
        by_dtype(s1.dtype(), self.name(), || self.run::<f32>(args), || self.run::<bf16>(args))
    }

    fn bwd(
        &self,
        x: &Tensor,
        gamma: &Tensor,
        _beta: &Tensor,
        y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let NormPass::Forward { batch_stats } = self.pass else {
            candle_core::bail!("{}: no second derivative", self.name());
        };
        let (x_in, x, y, dy) = (x, x.detach(), y.detach(), dy.detach().contiguous()?);
        let op =
            |pass| NormOp { stats: self.stats.clone(), eps: self.eps, relu: self.relu, pass, channels: self.channels };
        let sums = x.apply_op3(&y, &dy, op(NormPass::GradSums))?;
        let dx = if x_in.track_op() {
            let (gamma, sums) = (gamma.detach().contiguous()?, sums.clone());
            Some(x.apply_op3(&y, &dy, op(NormPass::InputGrad { gamma, sums, batch_stats }))?)
        } else {
            None
        };
        // sums = (Σ g, Σ g·x̂) = (dβ, dγ).
        Ok((dx, Some(sums.get(1)?), Some(sums.get(0)?)))
    }
}

impl NormOp {
    /// The op's pass on activations of type `T` (x, and y and dy backward;
    /// γ and β f32).
    fn run<T: Activation>(
        &self,
        [(s1, l1), (s2, l2), (s3, l3)]: [(&CudaStorage, &Layout); 3],
    ) -> Result<(CudaStorage, Shape)> {
        let dev = s1.device();
        let (_, c, p) = self.channels.dims(l1.shape())?;
        let last = self.channels == Channels::Last;
        let wrap = |out, shape| Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), shape));
        match &self.pass {
            NormPass::Forward { .. } => {
                let (gc, bc) = (l2.shape().elem_count(), l3.shape().elem_count());
                if gc != c || bc != c || self.stats.dims() != [2, c] {
                    candle_core::bail!("batch norm over {gc} channels got input {:?}", l1.shape());
                }
                let x = view_of::<T>(s1, l1, "input")?;
                let weights = [view(s2, l2, "weight")?, view(s3, l3, "bias")?];
                let packed = last && packs::<T>(c);
                wrap(self.forward(dev, x, weights, l1, packed)?, l1.shape().clone())
            }
            backward => {
                if l1.shape() != l2.shape() || l1.shape() != l3.shape() {
                    candle_core::bail!(
                        "{}: shapes {:?}, {:?}, {:?} differ",
                        self.name(),
                        l1.shape(),
                        l2.shape(),
                        l3.shape()
                    );
                }
                let [x, y, dy] = [
                    view_of::<T>(s1, l1, "input")?,
                    view_of::<T>(s2, l2, "output")?,
                    view_of::<T>(s3, l3, "output gradient")?,
                ];
                let packed = last && packs::<T>(c);
                match backward {
                    NormPass::InputGrad { gamma, sums, batch_stats } => {
                        let sums = (gamma, sums, *batch_stats);
                        wrap(self.input_grad(dev, [x, y, dy], l1, sums, packed)?, l1.shape().clone())
                    }
                    _ => {
                        let n = l1.shape().dims()[0];
                        let reading = Reading { channels: self.channels, packed };
                        let sums = with_view(&self.stats, "statistics", |stats| {
                            let (inputs, shape, what) = ((&x, &dy, &y), (n, c, p), Reduce::Gradient);
                            channel_sums(dev, inputs, Some(&stats), self.eps, shape, what, self.relu, None, reading)
                        })?;
                        Ok((CudaStorage::wrap_cuda_slice(sums, dev.clone()), Shape::from((2, c))))
                    }
                }
            }
        }
    }
}
