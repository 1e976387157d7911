//! Training primitives: optimizers, learning-rate schedules, checkpoints,
//! and one training step. The data loader and the `train-*` commands build
//! on these.

pub mod checkpoint;
pub mod optim;
pub mod schedule;

use anyhow::Result;
use candle_core::Tensor;

use crate::nn::Model;
use optim::Optimizer;

/// One optimizer step on a batch: forward in training mode, the loss of
/// the net's [`crate::nn::Output`] against `target`, backward, update.
/// Returns the batch's mean loss.
pub fn train_step(model: &Model, optimizer: &mut dyn Optimizer, x: &Tensor, target: &Tensor) -> Result<f32> {
    let loss = model.output().loss(&model.forward(x, true)?, target)?;
    let grads = loss.backward()?;
    optimizer.step(&grads)?;
    Ok(loss.to_scalar::<f32>()?)
}
