//! Training steps queued op by op, or, on a GPU unless
//! `GO_TRAIN_CUDA_GRAPH=0`, captured once as a CUDA graph and replayed (`nn::cuda::graph`):
//! one launch a step where the host otherwise queues several hundred.
//!
//! A graph reads its inputs from where they were when it was captured, so
//! from then on each step's inputs are copied into those tensors (in
//! place, queued on the device) and the step's loss and predictions out of
//! the graph's own, which the next launch writes again. The same fixed
//! inputs run without a graph on any device ([`Stepper::fixed_inputs`]),
//! so that the CPU checks what a replay computes.

use anyhow::Result;
use candle_core::Tensor;

use super::optim::Optimizer;
use super::{loss_and_gradients, OwnershipTargets};
use crate::nn::Model;

/// Eager steps before a capture: the first step of momentum SGD or Adam
/// differs from the next (it makes their buffers), and the ones before the capture
/// choose cuDNN's algorithms, load the kernels and fill candle's cache of
/// uploads.
#[cfg(feature = "cuda")]
const STEPS_BEFORE_CAPTURE: usize = 2;

/// One step's inputs: planes, targets, and the ownership targets with
/// their weight in the loss.
struct Inputs {
    x: Tensor,
    target: Tensor,
    ownership: Option<(Tensor, f64)>,
}

impl Inputs {
    fn of(x: &Tensor, target: &Tensor, ownership: OwnershipTargets) -> Inputs {
        Inputs { x: x.clone(), target: target.clone(), ownership: ownership.map(|(o, w)| (o.clone(), w)) }
    }

    /// Copies `x`, `target` and `ownership` into these tensors, in place
    /// (nothing when they are these tensors).
    fn set(&self, x: &Tensor, target: &Tensor, ownership: OwnershipTargets) -> Result<()> {
        let pairs = [(&self.x, Some(x)), (&self.target, Some(target))];
        let owned = self.ownership.as_ref().map(|(o, _)| (o, ownership.map(|(t, _)| t)));
        for (fixed, new) in pairs.into_iter().chain(owned) {
            let Some(new) = new else { anyhow::bail!("a step without the ownership targets the others have") };
            if fixed.id() != new.id() {
                fixed.slice_set(&new.contiguous()?, 0, 0)?;
            }
        }
        match (&self.ownership, ownership) {
            (None, Some(_)) => anyhow::bail!("a step with ownership targets the others do not have"),
            // The weight is part of what a graph captured.
            (Some((_, fixed)), Some((_, weight))) if *fixed != weight => {
                anyhow::bail!("a step with ownership weight {weight} where the others have {fixed}")
            }
            _ => Ok(()),
        }
    }

    /// The step on these inputs: loss and predictions.
    fn step(&self, model: &Model, optimizer: &mut dyn Optimizer) -> Result<(Tensor, Tensor)> {
        let ownership = self.ownership.as_ref().map(|(o, w)| (o, *w));
        let (loss, pred, grads) = loss_and_gradients(model, &self.x, &self.target, ownership)?;
        optimizer.step(&grads)?;
        Ok((loss, pred))
    }
}

/// What runs the next step.
enum Mode {
    /// Each step on its own inputs, op by op.
    Eager,
    /// Eager steps before a capture; candle's upload cache on meanwhile.
    #[cfg(feature = "cuda")]
    Warming { steps: usize, _cache: crate::nn::cuda::graph::HtodCache },
    /// Every step on the input tensors of the next, copies of its own.
    FixedFromNext,
    /// Every step on the same input tensors, op by op.
    Fixed(Inputs),
    /// Every step on the same input tensors, the captured graph
    /// replayed; its loss and predictions.
    #[cfg(feature = "cuda")]
    Replay { inputs: Inputs, graph: crate::nn::cuda::graph::StepGraph, loss: Tensor, pred: Tensor },
}

/// Runs the training steps of one model with one optimizer (whose
/// learning rate stays as it is: the graph captures it).
pub struct Stepper<'a> {
    model: &'a Model,
    mode: Mode,
    /// Said once: how the capture went.
    report: Option<String>,
}

impl<'a> Stepper<'a> {
    /// Steps op by op, or on a GPU with `graph_allowed` (unless
    /// `GO_TRAIN_CUDA_GRAPH=0`), a few so and then the graph of the next.
    pub fn new(model: &'a Model, graph_allowed: bool) -> Stepper<'a> {
        #[cfg(feature = "cuda")]
        if graph_allowed && crate::nn::cuda::graph::enabled() {
            if let Some(stepper) = Stepper::graphed(model) {
                return stepper;
            }
        }
        let _ = graph_allowed;
        Stepper { model, mode: Mode::Eager, report: None }
    }

    /// Every step on the input tensors of the first, copied into them, op
    /// by op: what a graph's replays compute, on any device.
    pub fn fixed_inputs(model: &'a Model) -> Stepper<'a> {
        Stepper { model, mode: Mode::FixedFromNext, report: None }
    }

    /// On a GPU, a few steps op by op and then the graph of the next,
    /// whatever `GO_TRAIN_CUDA_GRAPH` says; elsewhere [`Stepper::fixed_inputs`].
    pub fn replaying(model: &'a Model) -> Stepper<'a> {
        #[cfg(feature = "cuda")]
        if let Some(stepper) = Stepper::graphed(model) {
            return stepper;
        }
        Stepper::fixed_inputs(model)
    }

    /// The graph's way, when `model` is on a GPU.
    #[cfg(feature = "cuda")]
    fn graphed(model: &'a Model) -> Option<Stepper<'a>> {
        let candle_core::Device::Cuda(dev) = model.device() else { return None };
        let _cache = crate::nn::cuda::graph::HtodCache::on(dev);
        Some(Stepper { model, mode: Mode::Warming { steps: 0, _cache }, report: None })
    }

    /// One step on `x`, `target` and `ownership`: its loss and
    /// predictions, left on the device.
    pub fn step(
        &mut self,
        optimizer: &mut dyn Optimizer,
        x: &Tensor,
        target: &Tensor,
        ownership: OwnershipTargets,
    ) -> Result<(Tensor, Tensor)> {
        match &mut self.mode {
            Mode::FixedFromNext => {
                let owned = copied(ownership)?;
                let inputs = Inputs::of(&x.copy()?, &target.copy()?, owned.as_ref().map(|(o, w)| (o, *w)));
                let out = inputs.step(self.model, optimizer)?;
                self.mode = Mode::Fixed(inputs);
                Ok(out)
            }
            Mode::Eager => Inputs::of(x, target, ownership).step(self.model, optimizer),
            Mode::Fixed(inputs) => {
                inputs.set(x, target, ownership)?;
                let (loss, pred) = inputs.step(self.model, optimizer)?;
                Ok((loss.copy()?, pred.copy()?))
            }
            #[cfg(feature = "cuda")]
            Mode::Warming { steps, .. } if *steps < STEPS_BEFORE_CAPTURE => {
                *steps += 1;
                Inputs::of(x, target, ownership).step(self.model, optimizer)
            }
            #[cfg(feature = "cuda")]
            Mode::Warming { .. } => self.capture(optimizer, Inputs::of(x, target, ownership)),
            #[cfg(feature = "cuda")]
            Mode::Replay { inputs, graph, loss, pred } => {
                inputs.set(x, target, ownership)?;
                optimizer.before_replay()?;
                graph.launch()?;
                Ok((loss.copy()?, pred.copy()?))
            }
        }
    }

    /// How the capture went, in words, once it was tried (then `None`).
    pub fn take_report(&mut self) -> Option<String> {
        self.report.take()
    }

    /// Captures the step on `inputs`, then runs it by launching the graph;
    /// when the capture fails, runs it op by op, as every step after.
    #[cfg(feature = "cuda")]
    fn capture(&mut self, optimizer: &mut dyn Optimizer, inputs: Inputs) -> Result<(Tensor, Tensor)> {
        let candle_core::Device::Cuda(dev) = self.model.device() else { anyhow::bail!("a graph off a GPU") };
        // The cache stays on through the capture, off after it.
        let _warming = std::mem::replace(&mut self.mode, Mode::Eager);
        if let Some(why) = crate::nn::cuda::graph::not_replayable().or(optimizer.not_replayable()) {
            self.report = Some(format!("whole-step graph: not captured, {why}"));
            return inputs.step(self.model, optimizer);
        }
        let model = self.model;
        let captured = crate::nn::cuda::graph::StepGraph::capture(dev, || inputs.step(model, &mut *optimizer))
            .and_then(|(graph, out)| Ok((graph.nodes()?, graph, out)));
        match captured {
            Ok((nodes, graph, (loss, pred))) => {
                self.report = Some(format!("whole-step graph: captured, {nodes} nodes"));
                optimizer.before_replay()?;
                graph.launch()?;
                let out = (loss.copy()?, pred.copy()?);
                self.mode = Mode::Replay { inputs, graph, loss, pred };
                Ok(out)
            }
            Err(e) => {
                self.report = Some(format!("whole-step graph: not captured ({e:#}); steps queued op by op"));
                optimizer.capture_failed();
                inputs.step(self.model, optimizer)
            }
        }
    }
}

/// Copies of the ownership targets, so that later steps' copies into them
/// leave the caller's tensors alone.
fn copied(ownership: OwnershipTargets) -> Result<Option<(Tensor, f64)>> {
    Ok(match ownership {
        Some((o, w)) => Some((o.copy()?, w)),
        None => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::nn::{Arch, BOARD, POINTS};
    use crate::train::optim::OptimizerConfig;
    use candle_core::Device;

    /// Batch `k` of two positions: every point empty (plane 0) and a
    /// pseudo-random 30% of ones elsewhere; moves on empty points.
    fn batch(k: usize) -> (Tensor, Tensor) {
        let data: Vec<f32> = (0..2 * 15 * POINTS)
            .map(
                |i| if (i / POINTS).is_multiple_of(15) { 1.0 } else { ((i * 7919 + k * 104729) % 10 < 3) as u8 as f32 },
            )
            .collect();
        let x = Tensor::from_vec(data, (2, 15, BOARD, BOARD), &Device::Cpu).unwrap();
        let moves = Tensor::new(&[(60 + 7 * k) as u32, (200 + k) as u32], &Device::Cpu).unwrap();
        (x, moves)
    }

    fn bits(t: &Tensor) -> Vec<u32> {
        let t = t.to_device(&Device::Cpu).unwrap().to_dtype(candle_core::DType::F32).unwrap();
        t.flatten_all().unwrap().to_vec1::<f32>().unwrap().into_iter().map(f32::to_bits).collect()
    }

    /// Replayed steps train as their batches do: each batch copied into
    /// the first batch's tensors, on a GPU (`GO_TRAIN_TEST_DEVICE=cuda`)
    /// through the captured graph, within float error (cuDNN's gradients
    /// may add in any order), on the CPU op by op, to the bit; and the
    /// caller's first batch is left as it was.
    #[test]
    fn replayed_steps_train_as_their_batches_do() {
        crate::nn::allow_tf32(false);
        let dev = crate::nn::test_device();
        let on = |t: Tensor| t.to_device(&dev).unwrap();
        // Planes, moves and results (alternating by batch) of 5 batches.
        let batches: Vec<_> = (0..5)
            .map(|k| {
                let (x, moves) = batch(k);
                (on(x), on(moves), on(Tensor::new(&[(k % 2) as f32, ((k + 1) % 2) as f32], &Device::Cpu).unwrap()))
            })
            .collect();
        let first_planes = bits(&batches[0].0);
        // Momentum SGD's table is copied inside the graph, Adam's before
        // each launch.
        let runs = [
            (Arch::Policy, OptimizerConfig::sgd(0.05, 0.9)),
            ("resnet-policy:2x16".parse().unwrap(), OptimizerConfig::sgd(0.05, 0.9)),
            (Arch::Value, OptimizerConfig::adam(0.001)),
        ];
        for (arch, config) in runs {
            let model = |_| Model::new(arch, FeatureSet::Seed, &dev, 5).unwrap();
            let (eager_model, replayed_model) = (model(0), model(1));
            let (mut eager_opt, mut replayed_opt) =
                (config.build(eager_model.parameters()), config.build(replayed_model.parameters()));
            let mut eager = Stepper::new(&eager_model, false);
            let mut replayed = Stepper::replaying(&replayed_model);
            let mut report = None;
            for (k, (x, moves, results)) in batches.iter().enumerate() {
                let target = if arch == Arch::Value { results } else { moves };
                let (loss_a, pred_a) = eager.step(eager_opt.as_mut(), x, target, None).unwrap();
                let (loss_b, pred_b) = replayed.step(replayed_opt.as_mut(), x, target, None).unwrap();
                report = report.or(replayed.take_report());
                close(&bits(&loss_a), &bits(&loss_b), dev.is_cpu(), &format!("{arch:?} step {k}: loss"));
                close(&bits(&pred_a), &bits(&pred_b), dev.is_cpu(), &format!("{arch:?} step {k}: predictions"));
            }
            for ((name, a), (_, b)) in eager_model.parameters().iter().zip(replayed_model.parameters().iter()) {
                close(&bits(a.as_tensor()), &bits(b.as_tensor()), dev.is_cpu(), &format!("{arch:?}: {name}"));
            }
            // Shown with --nocapture, as the GPU lease runs this test.
            println!("{arch}, {dev:?}: {}", report.as_deref().unwrap_or("no graph"));
            match dev.is_cpu() {
                true => assert!(report.is_none(), "no graph on the CPU: {report:?}"),
                false => assert!(report.as_deref().is_some_and(|r| r.contains("captured,")), "{arch:?}: {report:?}"),
            }
            // Adam counts its steps for its checkpoint: every step once.
            let steps = replayed_opt.state().into_iter().filter(|(name, _)| name.ends_with(".step"));
            for (name, t) in steps {
                let t = t.to_device(&Device::Cpu).unwrap().to_dtype(candle_core::DType::F64).unwrap();
                assert_eq!(t.flatten_all().unwrap().to_vec1::<f64>().unwrap(), [5.0], "{name}");
            }
        }
        assert_eq!(bits(&batches[0].0), first_planes, "the caller's first batch was written");
    }

    /// Equal to the bit when `exact`, else within 1e-4 of the larger norm.
    fn close(a: &[u32], b: &[u32], exact: bool, what: &str) {
        if exact {
            assert_eq!(a, b, "{what}");
            return;
        }
        let (a, b): (Vec<f32>, Vec<f32>) =
            (a.iter().map(|&x| f32::from_bits(x)).collect(), b.iter().map(|&x| f32::from_bits(x)).collect());
        let norm = a.iter().map(|x| (x * x) as f64).sum::<f64>().sqrt().max(1e-2);
        let diff = a.iter().zip(&b).map(|(x, y)| ((x - y) * (x - y)) as f64).sum::<f64>().sqrt();
        assert!(diff <= 1e-4 * norm, "{what}: differs by {:.2e} (relative)", diff / norm);
    }

    /// Fixed inputs are the same tensors every step: a step that brings
    /// ownership targets the first did not have (or lacks those it had)
    /// or another weight on them is refused, not trained on half its
    /// inputs.
    #[test]
    fn fixed_inputs_refuse_a_step_of_another_kind() {
        let model = Model::new(Arch::Policy, FeatureSet::Seed, &Device::Cpu, 5).unwrap();
        let mut opt = OptimizerConfig::sgd(0.05, 0.9).build(model.parameters());
        let (x, moves) = batch(0);
        let owned = Tensor::zeros((2, POINTS), candle_core::DType::F32, &Device::Cpu).unwrap();
        let mut fixed = Stepper::fixed_inputs(&model);
        fixed.step(opt.as_mut(), &x, &moves, None).unwrap();
        let err = fixed.step(opt.as_mut(), &x, &moves, Some((&owned, 1.0))).unwrap_err().to_string();
        assert!(err.contains("ownership targets the others do not have"), "{err}");
        // Nor one whose ownership weight differs from the first's.
        let mut weighted = Stepper::fixed_inputs(&model);
        weighted.step(opt.as_mut(), &x, &moves, Some((&owned, 1.0))).unwrap();
        let err = weighted.step(opt.as_mut(), &x, &moves, Some((&owned, 0.5))).unwrap_err().to_string();
        assert!(err.contains("ownership weight 0.5 where the others have 1"), "{err}");
    }
}
