//! A convolution's bias, with the ReLU that follows it, on a GPU. candle's
//! broadcast add is one kernel forward, but its gradient for the bias is a
//! generic reduction over the batch and the board, the `fast_sum` row of
//! docs/cuda.md's profile, and its ReLU another pass forward and three
//! backward; here the bias and the ReLU are one kernel forward, and
//! backward the ReLU's mask and the per-channel sum of `kernels.cu`, the
//! input's gradient the masked one, passed on without a copy.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::cuda_backend::WrapErr;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, Layout, Result, Shape, Tensor};
use half::bf16;

use super::residual::relu_passed;
use super::{
    by_dtype, channel_reduce, cpu_refused, dims, divide_each_value, elementwise, kernel, ptx, view, view_of,
    Activation, Reduce, MODULE,
};
use crate::nn::layout::Channels;

/// `x + b`, `b` (c, f32) added to every point of channel c of `x` (f32
/// or bf16; batch, c, h, w, or batch, h, w, c channels-last), then the
/// ReLU when `relu`; differentiable in both.
pub fn add_bias(x: &Tensor, b: &Tensor, relu: bool, channels: Channels) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&b.contiguous()?, BiasAdd { relu, channels })
}

/// The op: arguments (x, b).
struct BiasAdd {
    relu: bool,
    channels: Channels,
}

impl CustomOp2 for BiasAdd {
    fn name(&self) -> &'static str {
        "go-train-cuda-bias"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, xs: &CudaStorage, xl: &Layout, bs: &CudaStorage, bl: &Layout) -> Result<(CudaStorage, Shape)> {
        let args = ((xs, xl), (bs, bl));
        by_dtype(xs.dtype(), self.name(), || self.run::<f32>(args), || self.run::<bf16>(args))
    }

    fn bwd(&self, x: &Tensor, b: &Tensor, y: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dy = if self.relu { relu_passed(y, dy)? } else { dy.detach() };
        let db =
            if b.track_op() { Some(channel_reduce(&dy, Reduce::Sums, None, self.channels)?.get(0)?) } else { None };
        Ok((x.track_op().then_some(dy), db))
    }
}

impl BiasAdd {
    /// The op on activations of type `T`.
    fn run<T: Activation>(
        &self,
        ((xs, xl), (bs, bl)): ((&CudaStorage, &Layout), (&CudaStorage, &Layout)),
    ) -> Result<(CudaStorage, Shape)> {
        // Channels-last, a channel's values lie one every c: the kernel's
        // channel walk with planes of one point.
        let (_, c, p) = match self.channels {
            Channels::First => dims(xl)?,
            Channels::Last => (0, self.channels.dims(xl.shape())?.1, 1),
        };
        if bl.shape().elem_count() != c {
            candle_core::bail!("{}: a bias of {:?} for input {:?}", self.name(), bl.shape(), xl.shape());
        }
        let dev = xs.device();
        let (x, b) = (view_of::<T>(xs, xl, "input")?, view(bs, bl, "bias")?);
        let total = xl.shape().elem_count();
        // SAFETY: uninitialised, but `channel_bias` writes every one of its
        // `total` values (a grid-stride loop over the whole tensor) before
        // anything reads it.
        let y = unsafe { dev.alloc::<T>(total)? };
        let func = dev.get_or_load_custom_func(kernel::<T>("channel_bias", "channel_bias_bf16"), MODULE, ptx()?)?;
        let (c, p, total64, relu, divide) = (c as i32, p as i32, total as i64, self.relu as i32, divide_each_value());
        let mut builder = func.builder();
        builder.arg(&x).arg(&b).arg(&y).arg(&c).arg(&p).arg(&total64).arg(&relu).arg(&divide);
        // SAFETY: x and y hold `total` values, b c.
        unsafe { builder.launch(elementwise(total)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(y, dev.clone()), xl.shape().clone()))
    }
}
