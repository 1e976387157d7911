//! Training primitives: optimizers, learning-rate schedules, checkpoints,
//! and one training step. The data loader and the `train-*` commands build
//! on these.

pub mod checkpoint;
pub mod config;
pub mod distributed;
pub mod launch;
pub mod metrics;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod optim;
mod optim_kernels;
pub mod rendezvous;
pub mod rl;
pub mod run;
pub mod run_folder;
pub mod schedule;
mod stepper;

pub use stepper::Stepper;

use anyhow::Result;
use candle_core::backprop::GradStore;
use candle_core::{Device, Tensor};

use crate::nn::Model;
use optim::Optimizer;

/// Ownership targets of a batch, (batch, points) from -1 to 1
/// ([`crate::dataset::ownership`]), and the weight of their loss.
pub type OwnershipTargets<'a> = Option<(&'a Tensor, f64)>;

/// The training loss of `model` on `x` in training mode, and its
/// prediction: the loss of the net's [`crate::nn::Output`] against
/// `target`, plus, from a net with an ownership head given `ownership`,
/// the weight times the mean squared error of the ownership over the
/// points (a net with the head and no targets learns the value alone).
pub fn training_loss(
    model: &Model,
    x: &Tensor,
    target: &Tensor,
    ownership: OwnershipTargets,
) -> Result<(Tensor, Tensor)> {
    let (pred, owned) = model.forward_with_ownership(x, true)?;
    let mut loss = model.output().loss(&pred, target)?;
    if let (Some(owned), Some((targets, weight))) = (owned, ownership) {
        loss = (loss + (crate::nn::loss::mse(&owned, targets)? * weight)?)?;
    }
    Ok((loss, pred))
}

/// [`training_loss`] and its gradients: (loss, predictions, gradients),
/// computed [on the compute pool](on_compute_pool).
pub fn loss_and_gradients(
    model: &Model,
    x: &Tensor,
    target: &Tensor,
    ownership: OwnershipTargets,
) -> Result<(Tensor, Tensor, GradStore)> {
    on_compute_pool(x.device(), || {
        let (loss, pred) = training_loss(model, x, target, ownership)?;
        let grads = loss.backward()?;
        Ok((loss, pred, grads))
    })
}

/// Runs `work` (forward and backward passes) on a thread of rayon's pool
/// when `device` is the CPU, so that the kernels' parallel loops start
/// from a worker and the calling thread waits once, not once a loop: each
/// wait and wake of a thread outside the pool cost the playout net a
/// twelfth of its speed on 2 cores (`go-train bench train`, AMD Zen 5,
/// 2026-11-26). `work` must not wait on other work of the pool (the batch
/// reader's decoding runs there): on a one-thread pool nobody would do
/// it. A GPU's queue is fed from the calling thread.
pub fn on_compute_pool<R: Send>(device: &Device, work: impl FnOnce() -> R + Send) -> R {
    if device.is_cpu() {
        rayon::scope(|_| work())
    } else {
        work()
    }
}

/// One optimizer step on a batch: [`loss_and_gradients`], then the
/// update. Returns the batch's mean loss, left where it was computed:
/// reading it makes a GPU finish its queue ([`host_read_interval`]).
pub fn train_step(
    model: &Model,
    optimizer: &mut dyn Optimizer,
    x: &Tensor,
    target: &Tensor,
    ownership: OwnershipTargets,
) -> Result<Tensor> {
    let (loss, _, grads) = loss_and_gradients(model, x, target, ownership)?;
    optimizer.step(&grads)?;
    Ok(loss)
}

/// Steps between reads of the loss (and of the predictions scored for the
/// training metrics) to the host: each read waits for a GPU to finish the
/// step, where otherwise the host queues the next while it runs.
/// `GO_TRAIN_READ_EVERY` (a positive number) changes it; 1 reads every
/// step.
pub fn host_read_interval() -> usize {
    const DEFAULT: usize = 10;
    static EVERY: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| match std::env::var("GO_TRAIN_READ_EVERY") {
        Ok(v) => v.parse().ok().filter(|&n| n > 0).unwrap_or_else(|| {
            crate::say!("GO_TRAIN_READ_EVERY={v}: not a positive number of steps, reading every {DEFAULT}");
            DEFAULT
        }),
        Err(_) => DEFAULT,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::FeatureSet;
    use crate::nn::{Arch, BOARD, PASS};
    use candle_core::Device;
    use optim::OptimizerConfig;

    /// Each net fits a small fixed batch: the loss falls over a few steps,
    /// which exercises every gradient path end to end.
    #[test]
    fn training_steps_reduce_the_loss() {
        let dev = Device::Cpu;
        // Two positions with every point empty (plane 0) and a fixed
        // pseudo-random 30% of ones in the other planes.
        let data: Vec<f32> = (0..2 * 15 * BOARD * BOARD)
            .map(|i| if (i / (BOARD * BOARD)).is_multiple_of(15) { 1.0 } else { ((i * 7919) % 10 < 3) as u8 as f32 })
            .collect();
        let x = Tensor::from_vec(data, (2, 15, BOARD, BOARD), &dev).unwrap();
        let moves = Tensor::new(&[60u32, PASS as u32], &dev).unwrap();
        let results = Tensor::new(&[1f32, 0.0], &dev).unwrap();
        for (arch, config, target) in [
            (Arch::Policy, OptimizerConfig::sgd(0.05, 0.9), &moves),
            (Arch::Playout, OptimizerConfig::sgd(0.05, 0.9), &moves),
            (Arch::Value, OptimizerConfig::adam(0.01), &results),
        ] {
            let model = Model::new(arch, FeatureSet::Seed, &dev, 3).unwrap();
            let mut opt = config.build(model.parameters());
            let step = |opt: &mut Box<dyn Optimizer>| {
                train_step(&model, opt.as_mut(), &x, target, None).unwrap().to_scalar::<f32>().unwrap()
            };
            let first = step(&mut opt);
            let mut last = first;
            for _ in 0..4 {
                last = step(&mut opt);
            }
            assert!(last < first * 0.9, "{arch:?}: loss {first} -> {last}");
        }
    }
}
