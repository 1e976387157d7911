//! Convolution for devices without the fused CPU kernels (CUDA), with a
//! backward pass made of fast convolutions.
//!
//! candle's own `conv2d` is fast forward (im2col and one cuBLAS product, or
//! cuDNN), but its backward pass computes the input gradient with
//! `conv_transpose2d`, which on CUDA is a naive direct kernel, and the
//! kernel gradient with a convolution over a non-contiguous (transposed)
//! kernel. For same-padding, stride-1 convolutions both gradients are
//! ordinary convolutions over contiguous tensors:
//!
//! - input gradient: `dx = conv2d(dy, flip(wᵀ))`, the kernel with its two
//!   channel axes swapped and rotated by 180°, same padding;
//! - kernel gradient: `dw = conv2d(xᵀ, dyᵀ)ᵀ`, batch and channel axes
//!   swapped (the batch becomes the contracted axis), padding k/2, which
//!   gives a k×k result.
//!
//! candle has no way to give one of its ops another backward pass, and its
//! convolution parameters cannot be built outside the crate, so the forward
//! convolution runs as usual on detached inputs and [`AttachConvGrad`], an
//! identity op on its result, carries the gradient to `x` and `w`.
//!
//! A build with cuDNN (`--features cudnn`) hands f32 convolutions on a GPU
//! to `nn::cuda::cudnn_conv` instead: cuDNN's own backward kernels, planned
//! once per shape.

use candle_core::{CpuStorage, CustomOp3, DType, Layout, Result, Shape, Tensor};

/// `conv2d(x, w)` with same padding and stride 1 (k odd), differentiable
/// through [`AttachConvGrad`].
pub fn conv2d_same(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    #[cfg(feature = "cudnn")]
    if super::cuda::cudnn_conv::applies(x, w) {
        return super::cuda::cudnn_conv::conv2d_same(x, w);
    }
    if x.device().is_cpu() && x.dtype() != DType::F32 {
        // candle has no bf16 matrix product on the CPU: the convolution as
        // a GPU's tensor cores compute it (bf16 operands, f32 sums, the
        // result rounded to bf16), so that tests check bf16 training here.
        return conv2d_same(&x.to_dtype(DType::F32)?, &w.to_dtype(DType::F32)?)?.to_dtype(x.dtype());
    }
    let k = w.dim(2)?;
    let y = x.detach().conv2d(&w.detach(), k / 2, 1, 1, 1)?;
    if !x.track_op() && !w.track_op() {
        return Ok(y);
    }
    x.apply_op3(w, &y, AttachConvGrad)
}

/// The identity on its third argument (the convolution of the first two),
/// whose gradient goes to the first two as the convolution's would.
pub struct AttachConvGrad;

/// A copy of a contiguous storage; the result of a fresh convolution
/// always is.
fn clone_contiguous<S: candle_core::backend::BackendStorage>(s: &S, l: &Layout) -> Result<(S, Shape)> {
    if !l.is_contiguous() || l.start_offset() != 0 {
        candle_core::bail!("conv gradient: the convolution's result is not a fresh contiguous tensor");
    }
    Ok((s.try_clone(l)?, l.shape().clone()))
}

impl CustomOp3 for AttachConvGrad {
    fn name(&self) -> &'static str {
        "go-train-conv-grad"
    }

    fn cpu_fwd(
        &self,
        _: &CpuStorage,
        _: &Layout,
        _: &CpuStorage,
        _: &Layout,
        y: &CpuStorage,
        yl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        clone_contiguous(y, yl)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        _: &candle_core::CudaStorage,
        _: &Layout,
        _: &candle_core::CudaStorage,
        _: &Layout,
        y: &candle_core::CudaStorage,
        yl: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        clone_contiguous(y, yl)
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _y: &Tensor,
        _res: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let k = w.dim(2)?;
        let pad = k / 2;
        // Detached: gradients that carried a graph back to the weights and
        // activations would keep every step's tensors alive through the
        // optimizer's momentum buffers.
        let (x_in, w_in) = (x, w);
        let (x, w, dy) = (x.detach(), w.detach(), dy.detach().contiguous()?);
        let dx = if x_in.track_op() {
            // flip's index-select needs contiguous input on CUDA.
            let w_flipped = w.transpose(0, 1)?.contiguous()?.flip(&[2, 3])?.contiguous()?;
            Some(dy.conv2d(&w_flipped, pad, 1, 1, 1)?)
        } else {
            None
        };
        let dw = if w_in.track_op() {
            let xt = x.transpose(0, 1)?.contiguous()?;
            let dyt = dy.transpose(0, 1)?.contiguous()?;
            Some(xt.conv2d(&dyt, pad, 1, 1, 1)?.transpose(0, 1)?.contiguous()?)
        } else {
            None
        };
        Ok((dx, dw, None))
    }
}
