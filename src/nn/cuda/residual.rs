//! A residual block's end, `relu(x + skip)`, on a GPU in one kernel each
//! way. From candle's ops it is an add and a ReLU forward, and backward a
//! comparison, a mask and a copy for each of the two inputs: passes over
//! the activations that a residual net makes at every block.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::cuda_backend::WrapErr;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, Layout, Result, Shape, Tensor};
use half::bf16;

use super::{by_dtype, cpu_refused, elementwise, kernel, pack_width, packs, ptx, view_of, Activation, MODULE};

/// `relu(x + skip)`, differentiable in both.
pub fn residual_relu(x: &Tensor, skip: &Tensor) -> Result<Tensor> {
    x.contiguous()?.apply_op2(&skip.contiguous()?, Residual::Forward)
}

/// A ReLU's backward from its output `y`: `dy` where `y > 0`, else 0.
pub(super) fn relu_passed(y: &Tensor, dy: &Tensor) -> Result<Tensor> {
    y.detach().apply_op2(&dy.detach().contiguous()?, Residual::Grad)
}

/// The op's two passes, each of two tensors of one shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Residual {
    /// (x, skip) → relu(x + skip).
    Forward,
    /// (y, dy) → dy where y > 0: the gradient of x and of skip alike.
    Grad,
}

impl CustomOp2 for Residual {
    fn name(&self) -> &'static str {
        match self {
            Residual::Forward => "go-train-cuda-residual-relu",
            Residual::Grad => "go-train-cuda-relu-grad",
        }
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, a: &CudaStorage, al: &Layout, b: &CudaStorage, bl: &Layout) -> Result<(CudaStorage, Shape)> {
        let args = ((a, al), (b, bl));
        by_dtype(a.dtype(), self.name(), || self.run::<f32>(args), || self.run::<bf16>(args))
    }

    fn bwd(&self, x: &Tensor, skip: &Tensor, y: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        if *self != Residual::Forward {
            candle_core::bail!("{}: no second derivative", self.name());
        }
        let passed = relu_passed(y, dy)?;
        let dx = if x.track_op() { Some(passed.clone()) } else { None };
        Ok((dx, skip.track_op().then_some(passed)))
    }
}

impl Residual {
    /// The pass on activations of type `T`.
    fn run<T: Activation>(
        self,
        ((a, al), (b, bl)): ((&CudaStorage, &Layout), (&CudaStorage, &Layout)),
    ) -> Result<(CudaStorage, Shape)> {
        if al.shape() != bl.shape() {
            candle_core::bail!("{}: shapes {:?} and {:?} differ", self.name(), al.shape(), bl.shape());
        }
        let dev = a.device();
        let total = al.shape().elem_count();
        // 16-byte packs where the values fill them.
        let packed = packs::<T>(total);
        let (a, b) = (view_of::<T>(a, al, "first argument")?, view_of::<T>(b, bl, "second argument")?);
        // SAFETY: uninitialised, but both kernels (`residual_relu`,
        // `relu_grad`) write every one of its `total` values (a grid-stride
        // loop) before anything reads it.
        let out = unsafe { dev.alloc::<T>(total)? };
        let name = match self {
            Residual::Forward => kernel::<T>("residual_relu", "residual_relu_bf16"),
            Residual::Grad => kernel::<T>("relu_grad", "relu_grad_bf16"),
        };
        let func = dev.get_or_load_custom_func(name, MODULE, ptx()?)?;
        let (total64, packed32) = (total as i64, packed as i32);
        let mut builder = func.builder();
        builder.arg(&a).arg(&b).arg(&out).arg(&total64).arg(&packed32);
        // SAFETY: the three buffers hold `total` values each, a multiple of
        // a pack's when packed.
        unsafe { builder.launch(elementwise(total / pack_width::<T>(packed))) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev.clone()), al.shape().clone()))
    }
}
