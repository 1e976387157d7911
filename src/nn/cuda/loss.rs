//! The training losses' last steps on a GPU: `nn::loss`'s fused ops, each
//! one kernel of `kernels.cu` forward and one backward (the NLL's gradient
//! and the MSE's read the loss's gradient where it lies, so nothing waits
//! for the GPU), where candle's ops take some 45.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::WrapErr;
use candle_core::{CpuStorage, CudaStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};

use super::{cpu_refused, elementwise, ptx, view, view_of, MODULE, THREADS};
use crate::nn::{EMPTY_PLANE, MASKED_LOGIT, MOVES, POINTS};

/// One block of [`THREADS`] a row of `rows`.
fn rows(rows: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 }
}

/// One block of [`THREADS`]: a whole-tensor sum.
const ONE_BLOCK: LaunchConfig = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };

/// `masked_log_softmax` of `batch` rows of logits against planes of
/// `planes` planes a sample (shapes checked by the caller).
pub fn masked_log_softmax(
    (ls, ll): (&CudaStorage, &Layout),
    (ps, pl): (&CudaStorage, &Layout),
    batch: usize,
    planes: usize,
) -> Result<CudaStorage> {
    let dev = ls.device();
    let (logits, input) = (view(ls, ll, "logits")?, view(ps, pl, "planes")?);
    // SAFETY: uninitialised, but block b writes all MOVES values of row b.
    let out = unsafe { dev.alloc::<f32>(batch * MOVES)? };
    let func = dev.get_or_load_custom_func("masked_log_softmax", MODULE, ptx()?)?;
    let (planes, empty, points, moves) = (planes as i32, EMPTY_PLANE as i32, POINTS as i32, MOVES as i32);
    // As mask_occupied computes it: logit + (empty·(−M) + M).
    let (scale, shift) = (-MASKED_LOGIT as f32, MASKED_LOGIT as f32);
    let mut b = func.builder();
    b.arg(&logits).arg(&input).arg(&out).arg(&planes).arg(&empty).arg(&points).arg(&moves).arg(&scale).arg(&shift);
    // SAFETY: logits and out hold batch·MOVES floats, the planes
    // batch·planes·POINTS.
    unsafe { b.launch(rows(batch)) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}

/// `nll_forward`: the mean negative log-likelihood of the targets, as a
/// one-value buffer.
pub fn nll((ls, ll): (&CudaStorage, &Layout), (ts, tl): (&CudaStorage, &Layout)) -> Result<CudaStorage> {
    let (batch, moves) = ll.shape().dims2()?;
    if tl.shape().elem_count() != batch {
        candle_core::bail!("nll: {} targets for a batch of {batch}", tl.shape().elem_count());
    }
    let dev = ls.device();
    let (logp, target) = (view(ls, ll, "log-probabilities")?, view_of::<u32>(ts, tl, "targets")?);
    // SAFETY: uninitialised, but thread 0 writes its one value.
    let out = unsafe { dev.alloc::<f32>(1)? };
    let func = dev.get_or_load_custom_func("nll_forward", MODULE, ptx()?)?;
    let (batch32, moves, scale) = (batch as i32, moves as i32, (-1.0 / batch as f64) as f32);
    let mut b = func.builder();
    b.arg(&logp).arg(&target).arg(&out).arg(&batch32).arg(&moves).arg(&scale);
    // SAFETY: logp holds batch·moves floats, target batch values.
    unsafe { b.launch(ONE_BLOCK) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}

/// `mse_forward`: the mean squared error of `pred` against `target` (the
/// same number of values), as a one-value buffer.
pub fn mse((ps, pl): (&CudaStorage, &Layout), (ts, tl): (&CudaStorage, &Layout)) -> Result<CudaStorage> {
    let dev = ps.device();
    let (pred, target) = (view(ps, pl, "prediction")?, view(ts, tl, "target")?);
    let n = pl.shape().elem_count();
    // SAFETY: uninitialised, but thread 0 writes its one value.
    let out = unsafe { dev.alloc::<f32>(1)? };
    let func = dev.get_or_load_custom_func("mse_forward", MODULE, ptx()?)?;
    let (n64, scale) = (n as i64, (1.0 / n.max(1) as f64) as f32);
    let mut b = func.builder();
    b.arg(&pred).arg(&target).arg(&out).arg(&n64).arg(&scale);
    // SAFETY: pred and target hold n floats.
    unsafe { b.launch(ONE_BLOCK) }.w()?;
    Ok(CudaStorage::wrap_cuda_slice(out, dev.clone()))
}

/// The masked log-softmax's gradient, `dy − softmax · Σ dy` row by row,
/// from its output `logp` (batch, moves).
pub fn log_softmax_grad(logp: &Tensor, dy: &Tensor) -> Result<Tensor> {
    logp.contiguous()?.apply_op2_no_bwd(&dy.contiguous()?, &LogSoftmaxGrad)
}

/// The NLL's gradient for log-probabilities of `moves` columns: the loss's
/// gradient `dy` times −1/batch at each row's target.
pub fn nll_grad(target: &Tensor, dy: &Tensor, moves: usize) -> Result<Tensor> {
    target.contiguous()?.apply_op2_no_bwd(&dy.to_dtype(DType::F32)?, &NllGrad { moves })
}

/// The MSE's gradient for `pred`: `2 (p − t) · dy / n`.
pub fn mse_grad(pred: &Tensor, target: &Tensor, dy: &Tensor) -> Result<Tensor> {
    pred.contiguous()?.apply_op3_no_bwd(&target.contiguous()?, &dy.to_dtype(DType::F32)?, &MseGrad)
}

struct LogSoftmaxGrad;

impl CustomOp2 for LogSoftmaxGrad {
    fn name(&self) -> &'static str {
        "go-train-cuda-log-softmax-grad"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, ls: &CudaStorage, ll: &Layout, ds: &CudaStorage, dl: &Layout) -> Result<(CudaStorage, Shape)> {
        let (batch, moves) = ll.shape().dims2()?;
        if dl.shape() != ll.shape() {
            candle_core::bail!("{}: gradient {:?} for output {:?}", self.name(), dl.shape(), ll.shape());
        }
        let dev = ls.device();
        let (logp, dy) = (view(ls, ll, "log-probabilities")?, view(ds, dl, "gradient")?);
        // SAFETY: uninitialised, but block b writes all `moves` values of row b.
        let dx = unsafe { dev.alloc::<f32>(batch * moves)? };
        let func = dev.get_or_load_custom_func("log_softmax_grad", MODULE, ptx()?)?;
        let moves32 = moves as i32;
        let mut b = func.builder();
        b.arg(&logp).arg(&dy).arg(&dx).arg(&moves32);
        // SAFETY: logp, dy and dx hold batch·moves floats.
        unsafe { b.launch(rows(batch)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(dx, dev.clone()), ll.shape().clone()))
    }
}

struct NllGrad {
    moves: usize,
}

impl CustomOp2 for NllGrad {
    fn name(&self) -> &'static str {
        "go-train-cuda-nll-grad"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        cpu_refused(self.name())
    }

    fn cuda_fwd(&self, ts: &CudaStorage, tl: &Layout, ds: &CudaStorage, dl: &Layout) -> Result<(CudaStorage, Shape)> {
        let batch = tl.shape().elem_count();
        let dev = ts.device();
        let (target, dy) = (view_of::<u32>(ts, tl, "targets")?, view(ds, dl, "gradient")?);
        let total = batch * self.moves;
        // SAFETY: uninitialised, but `nll_grad` writes every one of its
        // `total` floats (a grid-stride loop over the whole tensor).
        let d = unsafe { dev.alloc::<f32>(total)? };
        let func = dev.get_or_load_custom_func("nll_grad", MODULE, ptx()?)?;
        let (moves, scale, total64) = (self.moves as i32, (-1.0 / batch.max(1) as f64) as f32, total as i64);
        let mut b = func.builder();
        b.arg(&target).arg(&dy).arg(&d).arg(&moves).arg(&scale).arg(&total64);
        // SAFETY: target holds batch values, dy one, d batch·moves.
        unsafe { b.launch(elementwise(total)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(d, dev.clone()), Shape::from((batch, self.moves))))
    }
}

struct MseGrad;

impl CustomOp3 for MseGrad {
    fn name(&self) -> &'static str {
        "go-train-cuda-mse-grad"
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
        ps: &CudaStorage,
        pl: &Layout,
        ts: &CudaStorage,
        tl: &Layout,
        ds: &CudaStorage,
        dl: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let n = pl.shape().elem_count();
        let dev = ps.device();
        let (pred, target, dy) = (view(ps, pl, "prediction")?, view(ts, tl, "target")?, view(ds, dl, "gradient")?);
        // SAFETY: uninitialised, but `mse_grad` writes all n floats.
        let d = unsafe { dev.alloc::<f32>(n)? };
        let func = dev.get_or_load_custom_func("mse_grad", MODULE, ptx()?)?;
        let (scale, n64) = ((1.0 / n.max(1) as f64) as f32, n as i64);
        let mut b = func.builder();
        b.arg(&pred).arg(&target).arg(&dy).arg(&d).arg(&scale).arg(&n64);
        // SAFETY: pred, target and d hold n floats, dy one.
        unsafe { b.launch(elementwise(n)) }.w()?;
        Ok((CudaStorage::wrap_cuda_slice(d, dev.clone()), pl.shape().clone()))
    }
}
