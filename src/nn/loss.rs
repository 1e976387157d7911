//! The training losses' last steps as single CPU ops, forward and
//! backward: the masked log-softmax of a move net's logits, the negative
//! log-likelihood of the played moves, and the mean squared error of a
//! value net. Done with candle's ops they take some 45 ops (each a pass and
//! a new tensor) where PyTorch's cross-entropy is two fused kernels.
//!
//! They run in training with f32 data (and `GO_TRAIN_FUSED_LOSS` not 0),
//! on the CPU and on a CUDA GPU (one kernel each way: `nn::cuda::loss`);
//! evaluation and other devices keep candle's ops, which give the same
//! values to rounding (the sums run in another order).

#[cfg(feature = "cuda")]
use candle_core::CudaStorage;
use candle_core::{CpuStorage, CustomOp2, DType, Layout, Result, Shape, Tensor, D};

use super::switches::Fused;
use super::{BOARD, EMPTY_PLANE, MASKED_LOGIT, MOVES, POINTS};

/// Whether the fused ops run on `t`.
fn fused(t: &Tensor) -> bool {
    (t.device().is_cpu() || t.device().is_cuda()) && t.dtype() == DType::F32 && Fused::Loss.enabled()
}

/// The batch and the planes a sample of a masked log-softmax's arguments,
/// logits (batch, 362) and planes (batch, planes, 19, 19).
fn move_shapes(ll: &Layout, pl: &Layout) -> Result<(usize, usize)> {
    let (batch, moves) = ll.shape().dims2()?;
    let (pb, planes, h, w) = pl.shape().dims4()?;
    if moves != MOVES || pb != batch || h != BOARD || w != BOARD || planes < EMPTY_PLANE + 1 {
        candle_core::bail!("masked log-softmax: logits {:?} do not fit planes {:?}", ll.shape(), pl.shape());
    }
    Ok((batch, planes))
}

/// Checks that an MSE's prediction and target have one shape.
fn same_shape(pl: &Layout, tl: &Layout) -> Result<()> {
    if pl.shape() != tl.shape() {
        candle_core::bail!("mse: prediction {:?} and target {:?} differ", pl.shape(), tl.shape());
    }
    Ok(())
}

/// The contiguous data of a CPU storage of `T` seen through `layout`.
fn slice<'a, T: candle_core::WithDType>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [T]> {
    let data = s.as_slice::<T>()?;
    match l.contiguous_offsets() {
        Some((start, end)) => Ok(&data[start..end]),
        None => candle_core::bail!("{what}: the fused loss needs contiguous data"),
    }
}

/// The contiguous f32 data of a CPU tensor, copied (backward passes get
/// tensors; the losses' are a batch of 362 values a row at most).
fn values(t: &Tensor) -> Result<Vec<f32>> {
    t.flatten_all()?.to_vec1::<f32>()
}

fn cpu_tensor<S: Into<Shape>>(data: Vec<f32>, shape: S) -> Result<Tensor> {
    Tensor::from_vec(data, shape, &candle_core::Device::Cpu)
}

/// Log-probabilities of the moves: `logits` (batch, 362) with the points
/// that `planes` (the net's input, batch × planes × 19 × 19) shows
/// occupied set to [`MASKED_LOGIT`], then log-softmax. `train` selects the
/// fused op on the CPU.
pub fn masked_log_softmax(logits: &Tensor, planes: &Tensor, train: bool) -> Result<Tensor> {
    // The planes in the logits' dtype (a bf16 net's input, f32 heads).
    let planes = &planes.to_dtype(logits.dtype())?;
    if train && fused(logits) {
        logits.contiguous()?.apply_op2(&planes.contiguous()?, MaskedLogSoftmax)
    } else {
        candle_nn::ops::log_softmax(&super::mask_occupied(logits, planes)?, D::Minus1)
    }
}

/// The mean negative log-likelihood of the moves `target` (batch, u32)
/// under the log-probabilities `logp` (batch, moves).
pub fn nll(logp: &Tensor, target: &Tensor) -> Result<Tensor> {
    if fused(logp) && logp.track_op() {
        logp.contiguous()?.apply_op2(&target.contiguous()?, Nll)
    } else {
        candle_nn::loss::nll(logp, target)
    }
}

/// The mean squared error of `pred` against `target` (same shape).
pub fn mse(pred: &Tensor, target: &Tensor) -> Result<Tensor> {
    if fused(pred) && pred.track_op() && !target.track_op() {
        pred.contiguous()?.apply_op2(&target.contiguous()?, Mse)
    } else {
        candle_nn::loss::mse(pred, target)
    }
}

/// The op of [`masked_log_softmax`]: arguments (logits, planes).
struct MaskedLogSoftmax;

impl CustomOp2 for MaskedLogSoftmax {
    fn name(&self) -> &'static str {
        "go-train-masked-log-softmax"
    }

    fn cpu_fwd(&self, ls: &CpuStorage, ll: &Layout, ps: &CpuStorage, pl: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, planes) = move_shapes(ll, pl)?;
        let (logits, input) = (slice::<f32>(ls, ll, "logits")?, slice::<f32>(ps, pl, "planes")?);
        // As mask_occupied computes it: logit + (empty·(−M) + M).
        let (scale, shift) = (-MASKED_LOGIT as f32, MASKED_LOGIT as f32);
        let mut out = vec![0.0f32; batch * MOVES];
        for (b, (row, out)) in logits.chunks_exact(MOVES).zip(out.chunks_exact_mut(MOVES)).enumerate() {
            let empty = &input[(b * planes + EMPTY_PLANE) * POINTS..][..POINTS];
            for (j, (o, &l)) in out.iter_mut().zip(row).enumerate() {
                let legal = if j < POINTS { empty[j] } else { 1.0 };
                *o = l + (legal * scale + shift);
            }
            let max = out.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = out.iter().map(|&v| exp(v - max)).sum();
            let log_sum = sum.ln();
            for o in out.iter_mut() {
                *o = (*o - max) - log_sum;
            }
        }
        Ok((CpuStorage::F32(out), ll.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, ls: &CudaStorage, ll: &Layout, ps: &CudaStorage, pl: &Layout) -> Result<(CudaStorage, Shape)> {
        let (batch, planes) = move_shapes(ll, pl)?;
        Ok((super::cuda::loss::masked_log_softmax((ls, ll), (ps, pl), batch, planes)?, ll.shape().clone()))
    }

    /// d logits = dy − softmax · Σ dy, row by row; the planes get none.
    fn bwd(&self, _: &Tensor, _: &Tensor, res: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        #[cfg(feature = "cuda")]
        if res.device().is_cuda() {
            return Ok((Some(super::cuda::loss::log_softmax_grad(res, dy)?), None));
        }
        let (logp, dy) = (values(res)?, values(dy)?);
        let mut dx = vec![0.0f32; dy.len()];
        for ((dx, dy), logp) in dx.chunks_exact_mut(MOVES).zip(dy.chunks_exact(MOVES)).zip(logp.chunks_exact(MOVES)) {
            let total: f32 = dy.iter().sum();
            for ((d, &g), &lp) in dx.iter_mut().zip(dy).zip(logp) {
                *d = g - exp(lp) * total;
            }
        }
        Ok((Some(cpu_tensor(dx, res.shape())?), None))
    }
}

/// `eˣ`, taking the masked points' exponents of about −10⁹ as the 0 they
/// give, and flushing results below the smallest normal f32 to 0, without
/// libm's slow path for underflows (a twentieth of the playout net's step
/// went there; then, once a net was confident, 4% more for exponents
/// between −104 and −87).
#[inline(always)]
fn exp(x: f32) -> f32 {
    // ln of f32::MIN_POSITIVE: below it eˣ is subnormal or 0.
    if x < -87.336_54 {
        0.0
    } else {
        x.exp()
    }
}

/// The op of [`nll`]: arguments (log-probabilities, targets).
struct Nll;

impl CustomOp2 for Nll {
    fn name(&self) -> &'static str {
        "go-train-nll"
    }

    fn cpu_fwd(&self, ls: &CpuStorage, ll: &Layout, ts: &CpuStorage, tl: &Layout) -> Result<(CpuStorage, Shape)> {
        let (batch, moves) = ll.shape().dims2()?;
        let logp = slice::<f32>(ls, ll, "log-probabilities")?;
        let targets = slice::<u32>(ts, tl, "targets")?;
        if targets.len() != batch {
            candle_core::bail!("nll: {} targets for a batch of {batch}", targets.len());
        }
        let mut sum = 0.0f32;
        for (row, &t) in logp.chunks_exact(moves).zip(targets) {
            match row.get(t as usize) {
                Some(&v) => sum += v,
                None => candle_core::bail!("nll: target {t} is not one of the {moves} moves"),
            }
        }
        // As candle's nll: the sum times −1/batch (affine).
        Ok((CpuStorage::F32(vec![sum * (-1.0 / batch as f64) as f32 + 0.0]), Shape::from(())))
    }

    /// On a GPU a target outside the moves makes the loss NaN (a kernel
    /// cannot fail), which stops training.
    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, ls: &CudaStorage, ll: &Layout, ts: &CudaStorage, tl: &Layout) -> Result<(CudaStorage, Shape)> {
        Ok((super::cuda::loss::nll((ls, ll), (ts, tl))?, Shape::from(())))
    }

    fn bwd(&self, logp: &Tensor, target: &Tensor, _: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let (batch, moves) = logp.dims2()?;
        #[cfg(feature = "cuda")]
        if logp.device().is_cuda() {
            return Ok((Some(super::cuda::loss::nll_grad(target, dy, moves)?), None));
        }
        let g = dy.to_dtype(DType::F32)?.to_scalar::<f32>()? * (-1.0 / batch as f64) as f32;
        let mut d = vec![0.0f32; batch * moves];
        for (b, t) in target.to_vec1::<u32>()?.into_iter().enumerate() {
            d[b * moves + t as usize] = g;
        }
        Ok((Some(cpu_tensor(d, (batch, moves))?), None))
    }
}

/// The op of [`mse`]: arguments (prediction, target).
struct Mse;

impl CustomOp2 for Mse {
    fn name(&self) -> &'static str {
        "go-train-mse"
    }

    fn cpu_fwd(&self, ps: &CpuStorage, pl: &Layout, ts: &CpuStorage, tl: &Layout) -> Result<(CpuStorage, Shape)> {
        same_shape(pl, tl)?;
        let (pred, target) = (slice::<f32>(ps, pl, "prediction")?, slice::<f32>(ts, tl, "target")?);
        let sum: f32 = pred.iter().zip(target).map(|(p, t)| (p - t) * (p - t)).sum();
        let n = pred.len().max(1) as f64;
        Ok((CpuStorage::F32(vec![sum * (1.0 / n) as f32 + 0.0]), Shape::from(())))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(&self, ps: &CudaStorage, pl: &Layout, ts: &CudaStorage, tl: &Layout) -> Result<(CudaStorage, Shape)> {
        same_shape(pl, tl)?;
        Ok((super::cuda::loss::mse((ps, pl), (ts, tl))?, Shape::from(())))
    }

    /// d pred = 2(p − t)/n · dy; the target gets none.
    fn bwd(&self, pred: &Tensor, target: &Tensor, _: &Tensor, dy: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>)> {
        #[cfg(feature = "cuda")]
        if pred.device().is_cuda() {
            return Ok((Some(super::cuda::loss::mse_grad(pred, target, dy)?), None));
        }
        let n = pred.elem_count().max(1) as f64;
        let g = dy.to_dtype(DType::F32)?.to_scalar::<f32>()? * (1.0 / n) as f32;
        let d = values(pred)?.iter().zip(values(target)?).map(|(p, t)| 2.0 * (p - t) * g).collect();
        Ok((Some(cpu_tensor(d, pred.shape())?), None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        let (a, b) = (values(a).unwrap(), values(b).unwrap());
        a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
    }

    /// Planes whose empty plane has every third point occupied.
    fn planes(batch: usize, dev: &Device) -> Tensor {
        let data: Vec<f32> = (0..batch * 3 * POINTS)
            .map(|i| if (i / POINTS) % 3 == EMPTY_PLANE { ((i % 3) != 0) as u8 as f32 } else { 0.5 })
            .collect();
        Tensor::from_vec(data, (batch, 3, BOARD, BOARD), dev).unwrap()
    }

    fn logits(batch: usize, dev: &Device) -> Var {
        let data: Vec<f32> = (0..batch * MOVES).map(|i| ((i * 7919) % 1000) as f32 / 150.0 - 3.0).collect();
        Var::from_vec(data, (batch, MOVES), dev).unwrap()
    }

    /// The fused masked log-softmax and NLL give candle's loss, log-probabilities
    /// and logit gradient, to rounding, on the test device
    /// (`GO_TRAIN_TEST_DEVICE`: there the kernels of `nn::cuda::loss`).
    #[test]
    fn fused_move_loss_matches_candle_ops() {
        let dev = crate::nn::test_device();
        let (x, planes) = (logits(4, &dev), planes(4, &dev));
        let target = Tensor::new(&[1u32, 5, 361, 200], &dev).unwrap();
        let fused_logp = masked_log_softmax(x.as_tensor(), &planes, true).unwrap();
        let reference_logp = masked_log_softmax(x.as_tensor(), &planes, false).unwrap();
        assert!(max_diff(&fused_logp, &reference_logp) < 1e-5);
        let fused_loss = nll(&fused_logp, &target).unwrap();
        let reference_loss = candle_nn::loss::nll(&reference_logp, &target).unwrap();
        assert!(max_diff(&fused_loss, &reference_loss) < 1e-5);
        let (gf, gr) = (fused_loss.backward().unwrap(), reference_loss.backward().unwrap());
        assert!(max_diff(gf.get(x.as_tensor()).unwrap(), gr.get(x.as_tensor()).unwrap()) < 1e-6);
        // Occupied points get probability 0.
        let p = fused_logp.exp().unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(p[0][0], 0.0);
        assert!((p[0].iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }

    /// The same for the MSE, on the test device.
    #[test]
    fn fused_mse_matches_candle_ops() {
        let dev = crate::nn::test_device();
        let pred = Var::from_vec(vec![0.1f32, 0.7, 0.4, 0.9, 0.5], 5, &dev).unwrap();
        let target = Tensor::new(&[0f32, 1.0, 1.0, 0.0, 1.0], &dev).unwrap();
        let (fused, reference) =
            (mse(pred.as_tensor(), &target).unwrap(), candle_nn::loss::mse(pred.as_tensor(), &target).unwrap());
        assert!(max_diff(&fused, &reference) < 1e-7);
        let (gf, gr) = (fused.backward().unwrap(), reference.backward().unwrap());
        assert!(max_diff(gf.get(pred.as_tensor()).unwrap(), gr.get(pred.as_tensor()).unwrap()) < 1e-7);
    }

    #[test]
    fn bad_targets_are_refused() {
        let logp = masked_log_softmax(logits(2, &Device::Cpu).as_tensor(), &planes(2, &Device::Cpu), true).unwrap();
        let err = nll(&logp, &Tensor::new(&[1u32, 362], &Device::Cpu).unwrap()).unwrap_err();
        assert!(err.to_string().contains("target 362"), "{err}");
    }
}
