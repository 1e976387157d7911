//! The optimizers' in-place updates on a GPU: the kernels of `kernels.cu`
//! behind `train::optim_kernels`' ops. One launch for each buffer a step
//! writes (two a parameter for momentum SGD, three for Adam), in place,
//! where candle's ops take 5 to 14 launches a parameter, each allocating
//! its result; and the same f32 arithmetic as on the CPU, to the bit.

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
use candle_core::cuda_backend::WrapErr;
use candle_core::{CudaStorage, Layout, Result};

use super::{elementwise, ptx, view, view_mut, MODULE};

/// The buffer a kernel updates in place, and its layout.
pub type Target<'a> = (&'a mut CudaStorage, &'a Layout);
/// A buffer it reads.
pub type Source<'a> = (&'a CudaStorage, &'a Layout);

/// The values every buffer holds, as the kernels' `n`.
fn common_size(target: &Layout, sources: &[&Layout]) -> Result<i64> {
    let n = target.shape().elem_count();
    if sources.iter().any(|l| l.shape().elem_count() != n) {
        candle_core::bail!("optimizer: a parameter, its gradient and its state differ in size");
    }
    Ok(n as i64)
}

/// A weight decay as the kernels take it: (wd, has_wd).
fn decay_args(weight_decay: Option<f32>) -> (f32, i32) {
    (weight_decay.unwrap_or(0.0), weight_decay.is_some() as i32)
}

/// `sgd_momentum`: `v ← μ·v + g'` (or `v ← g'` when `first`).
pub fn sgd_momentum(
    v: Target,
    g: Source,
    w: Source,
    momentum: f32,
    weight_decay: Option<f32>,
    first: bool,
) -> Result<()> {
    let n = common_size(v.1, &[g.1, w.1])?;
    let dev = v.0.device().clone();
    let func = dev.get_or_load_custom_func("sgd_momentum", MODULE, ptx()?)?;
    let (g, w) = (view(g.0, g.1, "gradient")?, view(w.0, w.1, "parameter")?);
    let mut v = view_mut(v.0, v.1, "momentum buffer")?;
    let ((wd, has_wd), first) = (decay_args(weight_decay), first as i32);
    let mut b = func.builder();
    b.arg(&mut v).arg(&g).arg(&w).arg(&momentum).arg(&wd).arg(&has_wd).arg(&first).arg(&n);
    // SAFETY: v, g and w hold n floats each.
    unsafe { b.launch(elementwise(n as usize)) }.w()?;
    Ok(())
}

/// `sgd_descend`: `w ← w − lr·g'`.
pub fn sgd_descend(w: Target, g: Source, lr: f32, weight_decay: Option<f32>) -> Result<()> {
    let n = common_size(w.1, &[g.1])?;
    let dev = w.0.device().clone();
    let func = dev.get_or_load_custom_func("sgd_descend", MODULE, ptx()?)?;
    let g = view(g.0, g.1, "gradient")?;
    let mut w = view_mut(w.0, w.1, "parameter")?;
    let (wd, has_wd) = decay_args(weight_decay);
    let mut b = func.builder();
    b.arg(&mut w).arg(&g).arg(&lr).arg(&wd).arg(&has_wd).arg(&n);
    // SAFETY: w and g hold n floats each.
    unsafe { b.launch(elementwise(n as usize)) }.w()?;
    Ok(())
}

/// `adam_moment`: `m ← d·m + (1−d)·g'` (`g'²` when `squared`).
pub fn adam_moment(
    m: Target,
    g: Source,
    w: Source,
    (decay, one_minus_decay): (f32, f32),
    squared: bool,
    weight_decay: Option<f32>,
) -> Result<()> {
    let n = common_size(m.1, &[g.1, w.1])?;
    let dev = m.0.device().clone();
    let func = dev.get_or_load_custom_func("adam_moment", MODULE, ptx()?)?;
    let (g, w) = (view(g.0, g.1, "gradient")?, view(w.0, w.1, "parameter")?);
    let mut m = view_mut(m.0, m.1, "Adam moment")?;
    let ((wd, has_wd), squared) = (decay_args(weight_decay), squared as i32);
    let mut b = func.builder();
    b.arg(&mut m).arg(&g).arg(&w).arg(&decay).arg(&one_minus_decay).arg(&squared).arg(&wd).arg(&has_wd).arg(&n);
    // SAFETY: m, g and w hold n floats each.
    unsafe { b.launch(elementwise(n as usize)) }.w()?;
    Ok(())
}

/// `adam_descend`: `w ← w − step·m / (√v·c + ε)`.
pub fn adam_descend(
    w: Target,
    m: Source,
    v: Source,
    step_size: f32,
    inv_bias_correction2: f32,
    eps: f32,
) -> Result<()> {
    let n = common_size(w.1, &[m.1, v.1])?;
    let dev = w.0.device().clone();
    let func = dev.get_or_load_custom_func("adam_descend", MODULE, ptx()?)?;
    let (m, v) = (view(m.0, m.1, "first moment")?, view(v.0, v.1, "second moment")?);
    let mut w = view_mut(w.0, w.1, "parameter")?;
    let mut b = func.builder();
    b.arg(&mut w).arg(&m).arg(&v).arg(&step_size).arg(&inv_bias_correction2).arg(&eps).arg(&n);
    // SAFETY: w, m and v hold n floats each.
    unsafe { b.launch(elementwise(n as usize)) }.w()?;
    Ok(())
}
