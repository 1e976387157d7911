//! Optimizers with PyTorch's update rules, over candle variables, with
//! state that exports to tensors so that training resumes exactly.
//!
//! State tensor names (in the optimizer's safetensors file), per parameter
//! `P`: SGD `P.momentum_buffer`; Adam `P.exp_avg`, `P.exp_avg_sq` and
//! `P.step` (i64, one element). A parameter that never had a gradient has
//! no state yet, as in PyTorch.
//!
//! On the CPU the updates run in place, one pass over a parameter for each
//! tensor they write ([`super::optim_kernels`]), and on a CUDA GPU in
//! place for all parameters in one kernel launch (`nn::cuda::update`),
//! with the same arithmetic as the chains of candle ops that run elsewhere
//! (and with `GO_TRAIN_FUSED_OPTIM=0`): the weights come out the same bit
//! for bit.

use std::collections::HashMap;

use anyhow::{bail, Result};
use candle_core::{backprop::GradStore, DType, Tensor, Var};
use serde::{Deserialize, Serialize};

use super::optim_kernels::{AdamDescend, AdamMoment, Momentum, PlainSgd};
use crate::nn::switches::Fused;

/// An optimizer over a fixed list of named parameters.
pub trait Optimizer {
    /// Updates every parameter that has a gradient in `grads`.
    fn step(&mut self, grads: &GradStore) -> Result<()>;

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Sets the learning rate (for a schedule).
    fn set_learning_rate(&mut self, lr: f64);

    /// The state (buffers, moments, step counts) as named tensors. On the
    /// CPU these are the optimizer's own buffers, which later steps update
    /// in place: save (or copy) them before the next step.
    fn state(&self) -> Vec<(String, Tensor)>;

    /// Restores state exported by [`Optimizer::state`] for the same
    /// parameters; every tensor must be known and of the right shape.
    fn load_state(&mut self, state: HashMap<String, Tensor>) -> Result<()>;

    /// Why a step cannot be captured as a CUDA graph and replayed
    /// (`nn::cuda::graph`), or `None` when it can: its launches and their
    /// arguments the same every step from now on.
    fn not_replayable(&self) -> Option<&'static str>;

    /// Before each launch of a captured step, the first included: what
    /// changes from step to step (Adam's step sizes) written where the
    /// captured kernel reads it.
    fn before_replay(&mut self) -> Result<()> {
        Ok(())
    }

    /// A capture that ran this optimizer's step failed: the step never
    /// ran, so nothing of it is counted.
    fn capture_failed(&mut self) {}
}

/// An optimizer and its hyper-parameters, as recorded in a checkpoint.
/// A setting it does not have is refused: a misspelt `learning_rate`, or
/// Adam's `beta1` given to SGD, would otherwise train with the default.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum OptimizerConfig {
    /// Stochastic gradient descent with momentum (see [`Sgd`]).
    Sgd {
        /// Learning rate.
        lr: f64,
        /// Momentum μ (0 for plain SGD).
        momentum: f64,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
    },
    /// Adam (see [`Adam`]).
    Adam {
        /// Learning rate.
        lr: f64,
        /// Decay of the first moment.
        beta1: f64,
        /// Decay of the second moment.
        beta2: f64,
        /// Added to the denominator for stability.
        eps: f64,
        /// L2 penalty added to the gradient (PyTorch `Adam`, not `AdamW`).
        weight_decay: f64,
    },
}

impl OptimizerConfig {
    /// Its `kind`, as a config file names it.
    pub fn kind(&self) -> &'static str {
        match self {
            OptimizerConfig::Sgd { .. } => "sgd",
            OptimizerConfig::Adam { .. } => "adam",
        }
    }

    /// PyTorch's `Adam` defaults with learning rate `lr`.
    pub fn adam(lr: f64) -> OptimizerConfig {
        OptimizerConfig::Adam { lr, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }
    }

    /// SGD with momentum `momentum` and no weight decay.
    pub fn sgd(lr: f64, momentum: f64) -> OptimizerConfig {
        OptimizerConfig::Sgd { lr, momentum, weight_decay: 0.0 }
    }

    /// An optimizer over `params` (name, variable), e.g. `Model::parameters()`.
    pub fn build(self, params: Vec<(String, Var)>) -> Box<dyn Optimizer> {
        match self {
            OptimizerConfig::Sgd { lr, momentum, weight_decay } => {
                Box::new(Sgd::new(params, SgdParams { lr, momentum, weight_decay }))
            }
            OptimizerConfig::Adam { lr, beta1, beta2, eps, weight_decay } => {
                Box::new(Adam::new(params, AdamParams { lr, beta1, beta2, eps, weight_decay }))
            }
        }
    }
}

/// A parameter and its per-parameter state tensors (absent until its
/// first gradient).
struct Slot<S> {
    name: String,
    var: Var,
    state: Option<S>,
}

fn slots<S>(params: Vec<(String, Var)>) -> Vec<Slot<S>> {
    params.into_iter().map(|(name, var)| Slot { name, var, state: None }).collect()
}

/// Whether `var` is updated in place on the CPU: f32 there, with the fused
/// updates `enabled`.
fn in_place(var: &Var, enabled: bool) -> bool {
    enabled && var.device().is_cpu() && var.dtype() == DType::F32
}

/// Whether the parameters are updated together in one kernel: all f32 on
/// one CUDA GPU, with the fused updates `enabled`.
fn all_on_one_gpu<S>(params: &[Slot<S>], enabled: bool) -> bool {
    let Some(first) = params.first() else { return false };
    let gpu = first.var.device();
    enabled && gpu.is_cuda() && params.iter().all(|s| s.var.device().same_device(gpu) && s.var.dtype() == DType::F32)
}

/// The gradient of `var`, contiguous, for the in-place updates (which
/// keep no tensor of it, so its graph, if any, goes with it).
fn contiguous_grad(grads: &GradStore, var: &Var) -> Result<Option<Tensor>> {
    Ok(match grads.get(var.as_tensor()) {
        Some(g) => Some(g.contiguous()?),
        None => None,
    })
}

/// The weight decay as the in-place updates take it: none when 0.
fn decay(weight_decay: f64) -> Option<f32> {
    (weight_decay != 0.0).then_some(weight_decay as f32)
}

/// A state tensor of its own for `var`: updated in place, it must share
/// its storage with nothing (a loaded checkpoint's tensor, the gradient).
fn own_copy(t: &Tensor) -> Result<Tensor> {
    Ok(t.copy()?)
}

/// The gradient of `var` with the L2 penalty added, or none.
fn penalised_grad(grads: &GradStore, var: &Var, weight_decay: f64) -> Result<Option<Tensor>> {
    let Some(g) = grads.get(var.as_tensor()) else { return Ok(None) };
    // Detached: a gradient may carry the graph that computed it, and the
    // momentum and moment buffers built from it would chain every step's
    // graph (activations included) to the next, never freeing them.
    let (g, w) = (g.detach(), var.as_tensor().detach());
    Ok(Some(if weight_decay != 0.0 { (g + (w * weight_decay)?)? } else { g }))
}

/// Takes `name` out of `state`, checking it has `var`'s shape.
fn take_like(state: &mut HashMap<String, Tensor>, name: &str, var: &Var) -> Result<Option<Tensor>> {
    let Some(t) = state.remove(name) else { return Ok(None) };
    if t.shape() != var.shape() {
        bail!("optimizer state {name} has shape {:?}, the parameter has {:?}", t.shape(), var.shape());
    }
    Ok(Some(t.to_dtype(var.dtype())?.to_device(var.device())?))
}

fn refuse_leftovers(state: &HashMap<String, Tensor>) -> Result<()> {
    if let Some(name) = state.keys().min() {
        bail!("optimizer state has {name}, which belongs to no parameter of this net");
    }
    Ok(())
}

/// Hyper-parameters of [`Sgd`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SgdParams {
    /// Learning rate.
    pub lr: f64,
    /// Momentum μ.
    pub momentum: f64,
    /// L2 penalty.
    pub weight_decay: f64,
}

/// SGD with momentum, PyTorch's rule (no dampening, no Nesterov):
/// `g ← ∇ + wd·w; v ← μ·v + g` (v = g on the first step); `w ← w − lr·v`.
pub struct Sgd {
    params: Vec<Slot<Tensor>>,
    hp: SgdParams,
    /// Whether f32 parameters are updated in place ([`in_place`]).
    fused: bool,
}

impl Sgd {
    /// SGD over named parameters.
    pub fn new(params: Vec<(String, Var)>, hp: SgdParams) -> Sgd {
        Sgd { params: slots(params), hp, fused: Fused::Optimizer.enabled() }
    }

    /// The same with candle's ops on every device: the reference the
    /// in-place updates are tested against.
    pub fn unfused(self) -> Sgd {
        Sgd { fused: false, ..self }
    }

    /// One in-place update of `slot` by `g`.
    fn step_in_place(slot: &mut Slot<Tensor>, g: &Tensor, hp: &SgdParams) -> Result<()> {
        let (w, lr, weight_decay) = (slot.var.as_tensor(), hp.lr as f32, decay(hp.weight_decay));
        if hp.momentum == 0.0 {
            return Ok(w.inplace_op2(g, &PlainSgd { lr, weight_decay })?);
        }
        let first = slot.state.is_none();
        let v = match &slot.state {
            Some(v) => v,
            None => slot.state.insert(w.zeros_like()?),
        };
        v.inplace_op3(g, w, &Momentum { momentum: hp.momentum as f32, weight_decay, first })?;
        Ok(w.inplace_op2(v, &PlainSgd { lr, weight_decay: None })?)
    }

    /// One update of every parameter with a gradient, in one launch.
    #[cfg(feature = "cuda")]
    fn step_on_gpu(&mut self, grads: &GradStore) -> Result<()> {
        use crate::nn::cuda::update;
        let hp = self.hp;
        let momentum = (hp.momentum != 0.0).then_some(hp.momentum as f32);
        let mut taken = Vec::new();
        for slot in &mut self.params {
            let Some(g) = contiguous_grad(grads, &slot.var)? else { continue };
            let first = momentum.is_some() && slot.state.is_none();
            if first {
                slot.state = Some(slot.var.zeros_like()?);
            }
            taken.push((slot.var.as_tensor().clone(), g, slot.state.clone().filter(|_| momentum.is_some()), first));
        }
        let rows: Vec<update::Row> = taken
            .iter()
            .map(|(w, g, v, first)| update::Row { w, g, state: [v.as_ref(), None], own: [*first as u32, 0] })
            .collect();
        Ok(update::sgd(&rows, hp.lr as f32, momentum, decay(hp.weight_decay))?)
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        #[cfg(feature = "cuda")]
        if all_on_one_gpu(&self.params, self.fused) {
            return self.step_on_gpu(grads);
        }
        for slot in &mut self.params {
            if in_place(&slot.var, self.fused) {
                if let Some(g) = contiguous_grad(grads, &slot.var)? {
                    Sgd::step_in_place(slot, &g, &self.hp)?;
                }
                continue;
            }
            let Some(g) = penalised_grad(grads, &slot.var, self.hp.weight_decay)? else { continue };
            let update = if self.hp.momentum == 0.0 {
                g
            } else {
                let v = match &slot.state {
                    Some(v) => ((v * self.hp.momentum)? + g)?,
                    None => g,
                };
                slot.state = Some(v.clone());
                v
            };
            slot.var.set(&(slot.var.as_tensor() - (update * self.hp.lr)?)?)?;
        }
        Ok(())
    }

    fn learning_rate(&self) -> f64 {
        self.hp.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.hp.lr = lr;
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        let buffers = self.params.iter().filter_map(|s| s.state.as_ref().map(|v| (s, v)));
        buffers.map(|(s, v)| (format!("{}.momentum_buffer", s.name), v.clone())).collect()
    }

    fn load_state(&mut self, mut state: HashMap<String, Tensor>) -> Result<()> {
        for slot in &mut self.params {
            let buffer = take_like(&mut state, &format!("{}.momentum_buffer", slot.name), &slot.var)?;
            slot.state = buffer.as_ref().map(own_copy).transpose()?;
        }
        refuse_leftovers(&state)
    }

    fn not_replayable(&self) -> Option<&'static str> {
        if !all_on_one_gpu(&self.params, self.fused) {
            return Some("SGD updates in place only f32 parameters on one GPU, with GO_TRAIN_FUSED_OPTIM on");
        }
        // A parameter's first step with momentum sets its buffer rather
        // than decaying it: a different argument.
        if self.hp.momentum != 0.0 && self.params.iter().any(|s| s.state.is_none()) {
            return Some("SGD's momentum buffers are made by the first step");
        }
        None
    }
}

/// Hyper-parameters of [`Adam`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamParams {
    /// Learning rate.
    pub lr: f64,
    /// Decay of the first moment.
    pub beta1: f64,
    /// Decay of the second moment.
    pub beta2: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// L2 penalty added to the gradient.
    pub weight_decay: f64,
}

/// Adam's state for one parameter.
struct Moments {
    /// First moment m.
    exp_avg: Tensor,
    /// Second moment v.
    exp_avg_sq: Tensor,
    /// Updates so far (PyTorch counts them per parameter).
    step: i64,
}

/// Adam, PyTorch's rule: `g ← ∇ + wd·w; m ← β₁m + (1−β₁)g;
/// v ← β₂v + (1−β₂)g²; w ← w − lr/(1−β₁ᵗ) · m / (√v/√(1−β₂ᵗ) + ε)`.
pub struct Adam {
    params: Vec<Slot<Moments>>,
    hp: AdamParams,
    /// Whether f32 parameters are updated in place ([`in_place`]).
    fused: bool,
    /// On a GPU: the table the update kernel reads.
    #[cfg(feature = "cuda")]
    table: crate::nn::cuda::update::KeptTable,
    /// The parameters of a captured step, in its table's order, and
    /// whether its first launch is still to come (its steps counted by
    /// the capture).
    #[cfg(feature = "cuda")]
    captured: Option<(Vec<usize>, bool)>,
}

impl Adam {
    /// Adam over named parameters.
    pub fn new(params: Vec<(String, Var)>, hp: AdamParams) -> Adam {
        Adam {
            params: slots(params),
            hp,
            fused: Fused::Optimizer.enabled(),
            #[cfg(feature = "cuda")]
            table: Default::default(),
            #[cfg(feature = "cuda")]
            captured: None,
        }
    }

    /// The same with candle's ops on every device: the reference the
    /// in-place updates are tested against.
    pub fn unfused(self) -> Adam {
        Adam { fused: false, ..self }
    }

    /// One in-place update of `slot` by `g`.
    fn step_in_place(slot: &mut Slot<Moments>, g: &Tensor, hp: &AdamParams) -> Result<()> {
        let w = slot.var.as_tensor();
        let (s, (step_size, inv_bias_correction2)) = Adam::next_step(w, &mut slot.state, hp)?;
        let weight_decay = decay(hp.weight_decay);
        for (m, decay, squared) in [(&s.exp_avg, hp.beta1, false), (&s.exp_avg_sq, hp.beta2, true)] {
            let one_minus_decay = (1.0 - decay) as f32;
            m.inplace_op3(g, w, &AdamMoment { decay: decay as f32, one_minus_decay, squared, weight_decay })?;
        }
        let descend = AdamDescend { step_size, inv_bias_correction2, eps: hp.eps as f32 };
        Ok(w.inplace_op3(&s.exp_avg, &s.exp_avg_sq, &descend)?)
    }

    /// Counts a step of parameter `w` whose moments are `state` (made, zero,
    /// on the first) and gives them with the step's `lr/(1−β₁ᵗ)` and
    /// `1/√(1−β₂ᵗ)` in f32, as the in-place updates take them.
    fn next_step<'a>(w: &Tensor, state: &'a mut Option<Moments>, hp: &AdamParams) -> Result<(&'a Moments, (f32, f32))> {
        if state.is_none() {
            *state = Some(Moments { exp_avg: w.zeros_like()?, exp_avg_sq: w.zeros_like()?, step: 0 });
        }
        let s = state.as_mut().expect("made above");
        s.step += 1;
        Ok((s, Adam::corrections(s.step, hp)))
    }

    /// Step `t`'s `lr/(1−β₁ᵗ)` and `1/√(1−β₂ᵗ)` in f32.
    fn corrections(t: i64, hp: &AdamParams) -> (f32, f32) {
        let t = t as i32;
        ((hp.lr / (1.0 - hp.beta1.powi(t))) as f32, (1.0 / (1.0 - hp.beta2.powi(t)).sqrt()) as f32)
    }

    /// One update of every parameter with a gradient, in one launch.
    #[cfg(feature = "cuda")]
    fn step_on_gpu(&mut self, grads: &GradStore) -> Result<()> {
        use crate::nn::cuda::update;
        let hp = self.hp;
        let (mut taken, mut order) = (Vec::new(), Vec::new());
        for (i, slot) in self.params.iter_mut().enumerate() {
            let Some(g) = contiguous_grad(grads, &slot.var)? else { continue };
            let w = slot.var.as_tensor().clone();
            let (s, (step_size, inv_bias_correction2)) = Adam::next_step(&w, &mut slot.state, &hp)?;
            let own = [step_size.to_bits(), inv_bias_correction2.to_bits()];
            taken.push((w, g, s.exp_avg.clone(), s.exp_avg_sq.clone(), own));
            order.push(i);
        }
        if crate::nn::cuda::graph::capturing() {
            self.captured = Some((order, true));
        }
        let rows: Vec<update::Row> =
            taken.iter().map(|(w, g, m, v, own)| update::Row { w, g, state: [Some(m), Some(v)], own: *own }).collect();
        let (b1, b2) = (hp.beta1, hp.beta2);
        let decays = (b1 as f32, b2 as f32);
        let (one_minus, eps, wd) = (((1.0 - b1) as f32, (1.0 - b2) as f32), hp.eps as f32, decay(hp.weight_decay));
        Ok(update::adam(&rows, decays, one_minus, eps, wd, &mut self.table)?)
    }
}

impl Optimizer for Adam {
    fn step(&mut self, grads: &GradStore) -> Result<()> {
        #[cfg(feature = "cuda")]
        if all_on_one_gpu(&self.params, self.fused) {
            return self.step_on_gpu(grads);
        }
        let hp = self.hp;
        for slot in &mut self.params {
            if in_place(&slot.var, self.fused) {
                if let Some(g) = contiguous_grad(grads, &slot.var)? {
                    Adam::step_in_place(slot, &g, &hp)?;
                }
                continue;
            }
            let Some(g) = penalised_grad(grads, &slot.var, hp.weight_decay)? else { continue };
            let (m, v, t) = match slot.state.take() {
                Some(s) => (s.exp_avg, s.exp_avg_sq, s.step),
                None => (g.zeros_like()?, g.zeros_like()?, 0),
            };
            let t = t + 1;
            let m = ((m * hp.beta1)? + (&g * (1.0 - hp.beta1))?)?;
            let v = ((v * hp.beta2)? + (g.sqr()? * (1.0 - hp.beta2))?)?;
            let step_size = hp.lr / (1.0 - hp.beta1.powi(t as i32));
            let denom = ((v.sqrt()? / (1.0 - hp.beta2.powi(t as i32)).sqrt())? + hp.eps)?;
            slot.var.set(&(slot.var.as_tensor() - ((&m / denom)? * step_size)?)?)?;
            slot.state = Some(Moments { exp_avg: m, exp_avg_sq: v, step: t });
        }
        Ok(())
    }

    fn learning_rate(&self) -> f64 {
        self.hp.lr
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.hp.lr = lr;
    }

    fn state(&self) -> Vec<(String, Tensor)> {
        let mut out = Vec::new();
        for slot in &self.params {
            let Some(s) = &slot.state else { continue };
            out.push((format!("{}.exp_avg", slot.name), s.exp_avg.clone()));
            out.push((format!("{}.exp_avg_sq", slot.name), s.exp_avg_sq.clone()));
            // Creating a one-element CPU tensor cannot fail.
            if let Ok(step) = Tensor::new(&[s.step], &candle_core::Device::Cpu) {
                out.push((format!("{}.step", slot.name), step));
            }
        }
        out
    }

    fn load_state(&mut self, mut state: HashMap<String, Tensor>) -> Result<()> {
        for slot in &mut self.params {
            let name = &slot.name;
            let m = take_like(&mut state, &format!("{name}.exp_avg"), &slot.var)?;
            let v = take_like(&mut state, &format!("{name}.exp_avg_sq"), &slot.var)?;
            let step = state.remove(&format!("{name}.step"));
            slot.state = match (m, v, step) {
                (None, None, None) => None,
                (Some(exp_avg), Some(exp_avg_sq), Some(step)) => {
                    let step = step.to_dtype(DType::I64)?.flatten_all()?.to_vec1::<i64>()?;
                    let [step] = step[..] else { bail!("optimizer state {name}.step must have one element") };
                    Some(Moments { exp_avg: own_copy(&exp_avg)?, exp_avg_sq: own_copy(&exp_avg_sq)?, step })
                }
                _ => bail!("optimizer state for {name} is incomplete: it needs exp_avg, exp_avg_sq and step"),
            };
        }
        refuse_leftovers(&state)
    }

    fn not_replayable(&self) -> Option<&'static str> {
        if !all_on_one_gpu(&self.params, self.fused) {
            return Some("Adam updates in place only f32 parameters on one GPU, with GO_TRAIN_FUSED_OPTIM on");
        }
        if self.params.iter().any(|s| s.state.is_none()) {
            return Some("Adam's moments are made by the first step");
        }
        None
    }

    #[cfg(feature = "cuda")]
    fn before_replay(&mut self) -> Result<()> {
        let Some((order, first)) = self.captured.as_mut() else { bail!("Adam: a replay with no captured step") };
        let counted = std::mem::replace(first, false);
        let mut own = Vec::with_capacity(order.len());
        for &i in order.iter() {
            let Some(s) = self.params[i].state.as_mut() else { bail!("Adam: a captured parameter without moments") };
            // The capture counted the first launch's step.
            if !counted {
                s.step += 1;
            }
            let (step_size, inv_bias_correction2) = Adam::corrections(s.step, &self.hp);
            own.push([step_size.to_bits(), inv_bias_correction2.to_bits()]);
        }
        Ok(self.table.replay(|row| own[row])?)
    }

    #[cfg(feature = "cuda")]
    fn capture_failed(&mut self) {
        if let Some((order, _)) = self.captured.take() {
            for &i in &order {
                if let Some(s) = self.params[i].state.as_mut() {
                    s.step -= 1;
                }
            }
        }
        self.table.forget_capture();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// One parameter w = [1, −2] whose loss is `sum(w · c)`, so the gradient
    /// is always c = [0.5, −1].
    fn setup() -> (Var, Tensor) {
        let w = Var::new(&[1.0f32, -2.0], &Device::Cpu).unwrap();
        let c = Tensor::new(&[0.5f32, -1.0], &Device::Cpu).unwrap();
        (w, c)
    }

    fn run(config: OptimizerConfig, steps: usize) -> (Vec<f32>, Box<dyn Optimizer>, Var) {
        let (w, c) = setup();
        let mut opt = config.build(vec![("w".into(), w.clone())]);
        for _ in 0..steps {
            let grads = (w.as_tensor() * &c).unwrap().sum_all().unwrap().backward().unwrap();
            opt.step(&grads).unwrap();
        }
        (w.as_tensor().to_vec1().unwrap(), opt, w)
    }

    /// A gradient that carries its graph (here that of `sum(w·w)`, whose
    /// gradient 2w depends on w) must not pass it into the optimizer's
    /// buffers: chained from step to step, such graphs kept every step's
    /// tensors alive (on a GPU the memory filled within seconds).
    #[test]
    fn optimizer_buffers_hold_no_graph() {
        for config in [OptimizerConfig::sgd(0.1, 0.9), OptimizerConfig::adam(0.1)] {
            let (w, _) = setup();
            let mut opt = config.build(vec![("w".into(), w.clone())]);
            for _ in 0..2 {
                let grads = w.as_tensor().sqr().unwrap().sum_all().unwrap().backward().unwrap();
                assert!(grads.get(w.as_tensor()).unwrap().track_op(), "the gradient itself carries a graph");
                opt.step(&grads).unwrap();
            }
            for (name, t) in opt.state() {
                assert!(!t.track_op(), "{config:?}: {name} holds a graph");
            }
        }
    }

    fn close(a: &[f32], b: &[f64]) -> bool {
        a.iter().zip(b).all(|(x, y)| (*x as f64 - y).abs() < 1e-6)
    }

    #[test]
    fn sgd_momentum_matches_hand_computation() {
        // lr 0.1, μ 0.9, wd 0.1. Step 1: g = c + 0.1w = [0.6, −1.2]; v = g;
        // w = [0.94, −1.88]. Step 2: g = [0.594, −1.188]; v = 0.9·v + g =
        // [1.134, −2.268]; w = [0.8266, −1.6532].
        let config = OptimizerConfig::Sgd { lr: 0.1, momentum: 0.9, weight_decay: 0.1 };
        assert!(close(&run(config, 1).0, &[0.94, -1.88]));
        let (w, opt, _) = run(config, 2);
        assert!(close(&w, &[0.8266, -1.6532]), "{w:?}");
        let state = opt.state();
        assert_eq!(state[0].0, "w.momentum_buffer");
        assert!(close(&state[0].1.to_vec1::<f32>().unwrap(), &[1.134, -2.268]));
    }

    #[test]
    fn adam_matches_hand_computation() {
        // lr 0.1. Step 1: m = 0.1c, v = 0.001c², m̂ = c, v̂ = c²: w −= 0.1·sign(c)
        // (ε is negligible). Step 2: m = 0.19c, v = 0.001999c², m̂ = 0.19/0.19·c,
        // v̂ = c²: again w −= 0.1·sign(c) · |c|/(|c| + ε·…).
        let config = OptimizerConfig::adam(0.1);
        assert!(close(&run(config, 1).0, &[0.9, -1.9]));
        assert!(close(&run(config, 2).0, &[0.8, -1.8]));
        // With weight decay the gradient changes each step: g₁ = c + 0.5w₀ =
        // [1, −2]; w₁ = w₀ − 0.1·sign = [0.9, −1.9]; g₂ = [0.95, −1.95];
        // m₂ = 0.09·g₁ + 0.1·g₂, v₂ = 0.000999·g₁² + 0.001·g₂².
        let config = OptimizerConfig::Adam { lr: 0.1, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.5 };
        let expect = |g1: f64, g2: f64, w1: f64| {
            let m = (0.09 * g1 + 0.1 * g2) / 0.19;
            let v = (0.000999 * g1 * g1 + 0.001 * g2 * g2) / (1.0 - 0.999f64.powi(2));
            w1 - 0.1 * m / (v.sqrt() + 1e-8)
        };
        let (w, opt, _) = run(config, 2);
        assert!(close(&w, &[expect(1.0, 0.95, 0.9), expect(-2.0, -1.95, -1.9)]), "{w:?}");
        let names: Vec<_> = opt.state().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["w.exp_avg", "w.exp_avg_sq", "w.step"]);
    }

    #[test]
    fn state_round_trip_resumes_exactly() {
        for config in [OptimizerConfig::sgd(0.1, 0.9), OptimizerConfig::adam(0.01)] {
            let (straight, _, _) = run(config, 3);
            // Two steps, export, a fresh optimizer imports, one more step.
            let (_, opt, w) = run(config, 2);
            let c = setup().1;
            let mut resumed = config.build(vec![("w".into(), w.clone())]);
            resumed.load_state(opt.state().into_iter().collect()).unwrap();
            let grads = (w.as_tensor() * &c).unwrap().sum_all().unwrap().backward().unwrap();
            resumed.step(&grads).unwrap();
            assert_eq!(w.as_tensor().to_vec1::<f32>().unwrap(), straight, "{config:?}");
        }
    }

    /// `config`'s optimizer over `params`, in place or by candle's ops.
    fn build(config: OptimizerConfig, params: Vec<(String, Var)>, fused: bool) -> Box<dyn Optimizer> {
        match (config, fused) {
            (_, true) => config.build(params),
            (OptimizerConfig::Sgd { lr, momentum, weight_decay }, false) => {
                Box::new(Sgd::new(params, SgdParams { lr, momentum, weight_decay }).unfused())
            }
            (OptimizerConfig::Adam { lr, beta1, beta2, eps, weight_decay }, false) => {
                Box::new(Adam::new(params, AdamParams { lr, beta1, beta2, eps, weight_decay }).unfused())
            }
        }
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let t = t.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
        t.to_vec1::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
    }

    /// The in-place updates give the weights and state of candle's ops bit
    /// for bit, over steps whose gradients change (`sum(w² · c)`, gradient
    /// 2wc), with and without weight decay and momentum, for a parameter
    /// that has a gradient only every other step too; on the CPU and on the
    /// test device (`GO_TRAIN_TEST_DEVICE`), whose kernels must also give
    /// the CPU's values to the bit.
    #[test]
    fn in_place_updates_match_candle_ops_bit_for_bit() {
        let configs = [
            OptimizerConfig::sgd(0.1, 0.9),
            OptimizerConfig::Sgd { lr: 0.05, momentum: 0.9, weight_decay: 1e-3 },
            OptimizerConfig::Sgd { lr: 0.05, momentum: 0.0, weight_decay: 1e-3 },
            OptimizerConfig::sgd(0.3, 0.0),
            OptimizerConfig::adam(0.01),
            OptimizerConfig::Adam { lr: 0.003, beta1: 0.8, beta2: 0.99, eps: 1e-6, weight_decay: 0.01 },
        ];
        let values = |n: usize, seed: usize| -> Vec<f32> {
            (0..n).map(|i| (((i * 7919 + seed * 104_729) % 2001) as f32 - 1000.0) / 997.0).collect()
        };
        let mut devices = vec![Device::Cpu];
        devices.extend(Some(crate::nn::test_device()).filter(|d| !d.is_cpu()));
        for config in configs {
            let mut ends = Vec::new();
            for dev in &devices {
                let c = Tensor::from_vec(values(257, 3), 257, dev).unwrap();
                for fused in [true, false] {
                    let a = Var::from_vec(values(257, 1), 257, dev).unwrap();
                    let b = Var::from_vec(values(12, 2), (3, 4), dev).unwrap();
                    let mut opt = build(config, vec![("a".into(), a.clone()), ("b".into(), b.clone())], fused);
                    for step in 0..5 {
                        // A step where no parameter has a gradient changes nothing.
                        let nothing = Tensor::new(1f32, dev).unwrap().backward().unwrap();
                        opt.step(&nothing).unwrap();
                        let mut loss = (a.as_tensor().sqr().unwrap() * &c).unwrap().sum_all().unwrap();
                        if step % 2 == 0 {
                            loss = (loss + b.as_tensor().sqr().unwrap().sum_all().unwrap()).unwrap();
                        }
                        opt.step(&loss.backward().unwrap()).unwrap();
                    }
                    let mut end = vec![bits(a.as_tensor()), bits(b.as_tensor())];
                    end.extend(opt.state().iter().map(|(_, t)| bits(t)));
                    ends.push((format!("{dev:?}, fused {fused}"), end));
                }
            }
            for (what, end) in &ends[1..] {
                assert_eq!(&ends[0].1, end, "{config:?}: {what} against {}", ends[0].0);
            }
        }
    }

    /// The same for the seed nets' training, three steps of each net with
    /// the optimizer of `bench train` on a batch of real-looking planes.
    #[test]
    fn in_place_updates_train_the_seed_nets_as_candle_ops_do() {
        use crate::features::FeatureSet;
        use crate::nn::{Arch, Model, BOARD, MOVES};
        let dev = Device::Cpu;
        let data: Vec<f32> = (0..4 * 15 * BOARD * BOARD).map(|i| ((i * 7919) % 10 < 3) as u8 as f32).collect();
        let x = Tensor::from_vec(data, (4, 15, BOARD, BOARD), &dev).unwrap();
        let moves = Tensor::new(&[3u32, 100, 200, MOVES as u32 - 1], &dev).unwrap();
        let results = Tensor::new(&[1f32, 0.0, 0.0, 1.0], &dev).unwrap();
        for (arch, config, target) in [
            (Arch::Policy, OptimizerConfig::sgd(0.01, 0.9), &moves),
            (Arch::Value, OptimizerConfig::adam(0.001), &results),
        ] {
            let mut ends = Vec::new();
            for fused in [true, false] {
                let model = Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
                let mut opt = build(config, model.parameters(), fused);
                for _ in 0..3 {
                    crate::train::train_step(&model, opt.as_mut(), &x, target, None).unwrap();
                }
                ends.push(model.tensors().iter().map(|(_, v)| bits(v.as_tensor())).collect::<Vec<_>>());
            }
            assert_eq!(ends[0], ends[1], "{arch}");
        }
    }

    #[test]
    fn foreign_or_misshapen_state_is_refused() {
        let (_, opt, _) = run(OptimizerConfig::sgd(0.1, 0.9), 1);
        let mut state: HashMap<_, _> = opt.state().into_iter().collect();
        let (w, _) = setup();
        let mut other = OptimizerConfig::sgd(0.1, 0.9).build(vec![("v".into(), w.clone())]);
        assert!(other.load_state(state.clone()).unwrap_err().to_string().contains("w.momentum_buffer"));
        state.insert("w.momentum_buffer".into(), Tensor::zeros(3, DType::F32, &Device::Cpu).unwrap());
        let mut same = OptimizerConfig::sgd(0.1, 0.9).build(vec![("w".into(), w)]);
        assert!(same.load_state(state).unwrap_err().to_string().contains("shape"));
    }
}
