//! The seed's fast playout (rollout) policy: small enough to run once per
//! move of a playout at batch size 1.
//!
//! 3×3 convolutions 15→16→16→16 with ReLU, a 3×3 convolution 16→1, a linear
//! layer 361→362 (the pass logit can depend on the whole board), occupied
//! points masked, log-softmax.
//!
//! Tensors (PyTorch's names for `torch_seed_nets.Playout`):
//! `c.{0..2}.weight` (16, c_in, 3, 3) and `.bias` (16),
//! `head.weight` (1, 16, 3, 3), `head.bias` (1),
//! `fc.weight` (362, 361), `fc.bias` (362).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::layers::{flatten, Conv, Linear};
use super::loss::masked_log_softmax;
use super::{conv_stack, Net, Output, MOVES, POINTS};

/// The seed's playout net.
pub struct PlayoutNet {
    /// Hidden 3×3 convolutions, ReLU fused.
    hidden: Vec<Conv>,
    /// The 3×3 convolution to one value per point.
    head: Conv,
    /// Points to move logits.
    fc: Linear,
}

impl PlayoutNet {
    /// Creates (or, from a filled `VarMap`, loads) the net's tensors, for
    /// `planes` input planes.
    pub fn new(vb: VarBuilder, planes: usize) -> Result<PlayoutNet> {
        let hidden = conv_stack(&vb, planes, &[16, 16, 16])?;
        let head = Conv::new(vb.pp("head"), 16, 1, 3, true, false)?;
        let fc = Linear::new(vb.pp("fc"), POINTS, MOVES)?;
        Ok(PlayoutNet { hidden, head, fc })
    }
}

impl Net for PlayoutNet {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let mut h = x.clone();
        for conv in &self.hidden {
            h = conv.forward(&h)?;
        }
        let logits = self.fc.forward(&flatten(&self.head.forward(&h)?)?)?;
        masked_log_softmax(&logits, x, train)
    }

    fn output(&self) -> Output {
        Output::MoveLogProbs
    }
}
