//! The optimizers' updates as in-place candle ops, one pass over a
//! parameter's values for each buffer they write, where candle's own ops
//! take 5 (SGD) to 14 (Adam) passes and allocate a new tensor for each.
//!
//! Each op does, value by value, exactly the f32 arithmetic of the chain of
//! candle ops it replaces (`Tensor * f64` is candle's `affine(s, 0)`, that
//! is `x·s + 0` in f32; `Tensor / f64` multiplies by the f32 of `1/s`), so
//! that training gives the same weights bit for bit either way
//! ([`super::optim`]'s tests compare them). On a GPU the same arithmetic
//! runs for all parameters in one kernel of go-train's own
//! (`nn::cuda::update`), so that a step there gives the CPU's weights to
//! the bit too.

use candle_core::{CpuStorage, InplaceOp2, InplaceOp3, Layout, Result};

/// The values of a contiguous f32 storage seen through `layout`.
fn values<'a>(s: &'a CpuStorage, l: &Layout, what: &str) -> Result<&'a [f32]> {
    match (s, l.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((start, end))) => Ok(&v[start..end]),
        _ => candle_core::bail!("optimizer: the {what} is not contiguous f32 data"),
    }
}

/// The same, writable.
fn values_mut<'a>(s: &'a mut CpuStorage, l: &Layout, what: &str) -> Result<&'a mut [f32]> {
    match (s, l.contiguous_offsets()) {
        (CpuStorage::F32(v), Some((start, end))) => Ok(&mut v[start..end]),
        _ => candle_core::bail!("optimizer: the {what} is not contiguous f32 data"),
    }
}

/// Checks that every slice has `n` values.
fn same_sizes(n: usize, others: &[usize]) -> Result<()> {
    if others.iter().any(|&m| m != n) {
        candle_core::bail!("optimizer: a parameter, its gradient and its state differ in size");
    }
    Ok(())
}

/// `x·s` as candle's `Tensor * f64` computes it.
#[inline(always)]
fn scaled(x: f32, s: f32) -> f32 {
    x * s + 0.0
}

/// The gradient with the L2 penalty, as `g + w·wd` (candle's ops), or `g`
/// when there is none.
#[inline(always)]
fn penalised(g: f32, w: f32, weight_decay: Option<f32>) -> f32 {
    match weight_decay {
        Some(wd) => g + scaled(w, wd),
        None => g,
    }
}

/// `v ← μ·v + g'` (or `v ← g'` on the first step), `g'` the gradient with
/// its penalty: in place on the momentum buffer, arguments (gradient,
/// weight).
pub struct Momentum {
    pub momentum: f32,
    pub weight_decay: Option<f32>,
    /// The buffer has no value yet: it becomes the gradient.
    pub first: bool,
}

impl InplaceOp3 for Momentum {
    fn name(&self) -> &'static str {
        "go-train-sgd-momentum"
    }

    fn cpu_fwd(
        &self,
        vs: &mut CpuStorage,
        vl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> Result<()> {
        let (v, g, w) =
            (values_mut(vs, vl, "momentum buffer")?, values(gs, gl, "gradient")?, values(ws, wl, "parameter")?);
        same_sizes(v.len(), &[g.len(), w.len()])?;
        for ((v, &g), &w) in v.iter_mut().zip(g).zip(w) {
            let g = penalised(g, w, self.weight_decay);
            *v = if self.first { g } else { scaled(*v, self.momentum) + g };
        }
        Ok(())
    }
}

/// Plain SGD, `w ← w − lr·g'`, in place on the parameter, argument the
/// gradient; with no weight decay, also momentum SGD's last step, the
/// argument then the momentum buffer.
pub struct PlainSgd {
    pub lr: f32,
    pub weight_decay: Option<f32>,
}

impl InplaceOp2 for PlainSgd {
    fn name(&self) -> &'static str {
        "go-train-sgd"
    }

    fn cpu_fwd(&self, ws: &mut CpuStorage, wl: &Layout, gs: &CpuStorage, gl: &Layout) -> Result<()> {
        let (w, g) = (values_mut(ws, wl, "parameter")?, values(gs, gl, "gradient")?);
        same_sizes(w.len(), &[g.len()])?;
        for (w, &g) in w.iter_mut().zip(g) {
            *w -= scaled(penalised(g, *w, self.weight_decay), self.lr);
        }
        Ok(())
    }
}

/// One of Adam's moments, in place: `m ← β₁m + (1−β₁)g'` (first) or
/// `v ← β₂v + (1−β₂)g'²` (second, `squared`); arguments (gradient,
/// weight).
pub struct AdamMoment {
    pub decay: f32,
    pub one_minus_decay: f32,
    pub squared: bool,
    pub weight_decay: Option<f32>,
}

impl InplaceOp3 for AdamMoment {
    fn name(&self) -> &'static str {
        "go-train-adam-moment"
    }

    fn cpu_fwd(
        &self,
        ms: &mut CpuStorage,
        ml: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
        ws: &CpuStorage,
        wl: &Layout,
    ) -> Result<()> {
        let (m, g, w) = (values_mut(ms, ml, "Adam moment")?, values(gs, gl, "gradient")?, values(ws, wl, "parameter")?);
        same_sizes(m.len(), &[g.len(), w.len()])?;
        for ((m, &g), &w) in m.iter_mut().zip(g).zip(w) {
            let g = penalised(g, w, self.weight_decay);
            let new = if self.squared { g * g } else { g };
            *m = scaled(*m, self.decay) + scaled(new, self.one_minus_decay);
        }
        Ok(())
    }
}

/// Adam's step `w ← w − step·m / (√v·c + ε)`, in place on the parameter;
/// arguments the moments (m, v). `c` is `1/√(1−β₂ᵗ)`, `step` `lr/(1−β₁ᵗ)`.
pub struct AdamDescend {
    pub step_size: f32,
    pub inv_bias_correction2: f32,
    pub eps: f32,
}

impl InplaceOp3 for AdamDescend {
    fn name(&self) -> &'static str {
        "go-train-adam-descend"
    }

    fn cpu_fwd(
        &self,
        ws: &mut CpuStorage,
        wl: &Layout,
        ms: &CpuStorage,
        ml: &Layout,
        vs: &CpuStorage,
        vl: &Layout,
    ) -> Result<()> {
        let (w, m, v) =
            (values_mut(ws, wl, "parameter")?, values(ms, ml, "first moment")?, values(vs, vl, "second moment")?);
        same_sizes(w.len(), &[m.len(), v.len()])?;
        for ((w, &m), &v) in w.iter_mut().zip(m).zip(v) {
            // `+ ε` is candle's affine(1, ε): x·1 + ε.
            let denom = scaled(v.sqrt(), self.inv_bias_correction2) * 1.0 + self.eps;
            *w -= scaled(m / denom, self.step_size);
        }
        Ok(())
    }
}
