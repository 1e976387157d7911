//! The seed's value net: the probability that the side to move wins.
//!
//! 3×3 convolutions 15→16→16→16→16 with ReLU, a 3×3 convolution 16→2, a
//! linear layer 722→1, sigmoid.
//!
//! Tensors (PyTorch's names for `torch_seed_nets.Value`):
//! `c.{0..3}.weight` (16, c_in, 3, 3) and `.bias` (16),
//! `head.weight` (2, 16, 3, 3), `head.bias` (2),
//! `fc.weight` (1, 722), `fc.bias` (1).

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;

use super::layers::{flatten, Conv, Linear};
use super::policy::SeedTrunk;
use super::{conv_stack, Net, Output, POINTS};

/// The seed's value net.
pub struct ValueNet {
    /// Hidden 3×3 convolutions, ReLU fused.
    hidden: Vec<Conv>,
    /// The 3×3 convolution to two values per point.
    head: Conv,
    /// Two planes to one logit.
    fc: Linear,
}

impl ValueNet {
    /// Creates (or, from a filled `VarMap`, loads) the net's tensors, for
    /// `planes` input planes.
    pub fn new(vb: VarBuilder, planes: usize) -> Result<ValueNet> {
        let hidden = conv_stack(&vb, planes, &[16, 16, 16, 16])?;
        let head = Conv::new(vb.pp("head"), 16, 2, 3, true, false)?;
        let fc = Linear::new(vb.pp("fc"), 2 * POINTS, 1)?;
        Ok(ValueNet { hidden, head, fc })
    }
}

impl Net for ValueNet {
    fn forward(&self, x: &Tensor, _train: bool) -> Result<Tensor> {
        let mut h = x.clone();
        for conv in &self.hidden {
            h = conv.forward(&h)?;
        }
        let logit = self.fc.forward(&flatten(&self.head.forward(&h)?)?)?;
        candle_nn::ops::sigmoid(&logit)?.squeeze(1)
    }

    fn output(&self) -> Output {
        Output::WinProb
    }
}

/// A value head on the seed policy's layers ([`SeedTrunk`], same tensor
/// names), so that training can start from a trained policy net (the
/// `init` setting): the trunk has learned from millions of moves what a
/// value net cannot learn from the few hundred thousand results it gets.
/// Head: a 1×1 convolution to 2 planes with ReLU, 722 → 64 with ReLU,
/// 64 → 1, sigmoid (AlphaGo Zero's value head, narrower).
///
/// With `ownership` (`policy-value-ownership`), a second head beside it
/// predicts who owns each point at the end of the game: a 1×1 convolution
/// to one plane, tanh (KataGo's auxiliary ownership head). Trained on
/// datasets prepared with `--ownership`; play and evaluation use only the
/// value.
///
/// Tensors: the trunk's (`bn0.*`, `convs.{0..3}.*`, `bns.{0..3}.*`), then
/// `value.conv.{weight,bias}` (2, 32, 1, 1), `value.fc1.*` (64, 722),
/// `value.fc2.*` (1, 64), and with the ownership head
/// `ownership.conv.{weight,bias}` (1, 32, 1, 1).
pub struct TrunkValueNet {
    trunk: SeedTrunk,
    conv: Conv,
    fc1: Linear,
    fc2: Linear,
    ownership: Option<Conv>,
}

impl TrunkValueNet {
    pub fn new(vb: VarBuilder, planes: usize, ownership: bool) -> Result<TrunkValueNet> {
        let trunk = SeedTrunk::new(&vb, planes)?;
        let head = vb.pp("value");
        let conv = Conv::new(head.pp("conv"), SeedTrunk::CHANNELS, 2, 1, true, true)?;
        let fc1 = Linear::new(head.pp("fc1"), 2 * POINTS, 64)?;
        let fc2 = Linear::new(head.pp("fc2"), 64, 1)?;
        let ownership = match ownership {
            true => Some(Conv::new(vb.pp("ownership").pp("conv"), SeedTrunk::CHANNELS, 1, 1, true, false)?),
            false => None,
        };
        Ok(TrunkValueNet { trunk, conv, fc1, fc2, ownership })
    }

    fn value(&self, h: &Tensor) -> Result<Tensor> {
        let hidden = self.fc1.forward(&flatten(&self.conv.forward(h)?)?)?.relu()?;
        candle_nn::ops::sigmoid(&self.fc2.forward(&hidden)?)?.squeeze(1)
    }
}

impl Net for TrunkValueNet {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        self.value(&self.trunk.forward(x, train)?)
    }

    fn forward_with_ownership(&self, x: &Tensor, train: bool) -> Result<(Tensor, Option<Tensor>)> {
        let h = self.trunk.forward(x, train)?;
        let ownership = match &self.ownership {
            Some(conv) => Some(flatten(&conv.forward(&h)?)?.tanh()?),
            None => None,
        };
        Ok((self.value(&h)?, ownership))
    }

    fn output(&self) -> Output {
        Output::WinProb
    }
}
