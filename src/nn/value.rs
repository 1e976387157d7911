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
use candle_nn::{Init, VarBuilder};

use super::layers::{flatten, to_f32, Conv, Linear};
use super::layout::Channels;
use super::policy::SeedTrunk;
use super::resnet::Block;
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
/// [`ValueHeads`] says which heads sit beside the value head. Between the
/// trunk and the heads there may be a tower of residual blocks of the
/// trunk's 32 channels (`policy-value-tower:N`): the trunk sees 9×9 around
/// each point, too little to tell a large group's life, and each block
/// widens that by 4. The blocks start as the identity, so a tower net
/// started from a `policy-value-ownership` file begins as that net.
///
/// Tensors: the trunk's (`bn0.*`, `convs.{0..3}.*`, `bns.{0..3}.*`), the
/// tower's `tower.{i}.conv{1,2}.weight` (32, 32, 3, 3) and
/// `tower.{i}.bn{1,2}.*`, then
/// `value.conv.{weight,bias}` (2, 32, 1, 1), `value.fc1.*` (64, 722),
/// `value.fc2.*` (1, 64), with the ownership head
/// `ownership.conv.{weight,bias}` (1, 32, 1, 1), and with the margin
/// `value.margin.weight` (1, 1).
pub struct TrunkValueNet {
    trunk: SeedTrunk,
    tower: Vec<Block>,
    conv: Conv,
    fc1: Linear,
    fc2: Linear,
    ownership: Option<Conv>,
    /// Logit per point of the margin the ownership head predicts.
    margin: Option<Tensor>,
}

/// The heads of a [`TrunkValueNet`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueHeads {
    /// The value head alone (`policy-value`).
    Value,
    /// A second head beside it predicts who owns each point at the end of
    /// the game: a 1×1 convolution to one plane, tanh (KataGo's auxiliary
    /// ownership head; `policy-value-ownership`). Trained on datasets
    /// prepared with `--ownership`; play and evaluation use only the value.
    Ownership,
    /// The ownership head, and the value's logit adds a learnt multiple of
    /// the area margin it predicts (the sum of its points;
    /// `policy-value-margin`). Late in a game the result is the margin, and
    /// the value head's two-plane 1×1 bottleneck reads it only indirectly;
    /// KataGo's value head reads its score the same way. The multiple
    /// starts at 0, so a net started (`init`) from a `policy-value-ownership`
    /// file begins as that net.
    Margin,
}

impl TrunkValueNet {
    /// The net for `planes` input planes with `tower` residual blocks on
    /// the trunk.
    pub fn new(vb: VarBuilder, planes: usize, heads: ValueHeads, tower: usize) -> Result<TrunkValueNet> {
        let trunk = SeedTrunk::new(&vb, planes)?;
        let tower = (0..tower)
            .map(|i| Block::new(vb.pp(format!("tower.{i}")), SeedTrunk::CHANNELS, 0.0))
            .collect::<Result<_>>()?;
        let head = vb.pp("value");
        let conv = Conv::new(head.pp("conv"), SeedTrunk::CHANNELS, 2, 1, true, true)?;
        let fc1 = Linear::new(head.pp("fc1"), 2 * POINTS, 64)?;
        let fc2 = Linear::new(head.pp("fc2"), 64, 1)?;
        let ownership = if heads == ValueHeads::Value {
            None
        } else {
            Some(Conv::new(vb.pp("ownership").pp("conv"), SeedTrunk::CHANNELS, 1, 1, true, false)?)
        };
        let margin = match heads {
            ValueHeads::Margin => Some(head.pp("margin").get_with_hints((1, 1), "weight", Init::Const(0.0))?),
            _ => None,
        };
        Ok(TrunkValueNet { trunk, tower, conv, fc1, fc2, ownership, margin })
    }
}

impl TrunkValueNet {
    /// The value, and with `want_ownership` the ownership; the ownership
    /// head runs only when asked for or read by the margin, so that play
    /// (value only) does not pay for it.
    fn heads(&self, x: &Tensor, train: bool, want_ownership: bool) -> Result<(Tensor, Option<Tensor>)> {
        let mut h = self.trunk.forward(x, train)?;
        for block in &self.tower {
            h = block.forward(&h, train, Channels::First)?;
        }
        let ownership = match &self.ownership {
            Some(conv) if want_ownership || self.margin.is_some() => {
                Some(to_f32(&flatten(&conv.forward(&h)?)?)?.tanh()?)
            }
            _ => None,
        };
        let hidden = self.fc1.forward(&flatten(&self.conv.forward(&h)?)?)?.relu()?;
        let mut logit = self.fc2.forward(&hidden)?;
        if let (Some(margin), Some(ownership)) = (&self.margin, &ownership) {
            logit = (logit + ownership.sum_keepdim(1)?.matmul(margin)?)?;
        }
        Ok((candle_nn::ops::sigmoid(&logit)?.squeeze(1)?, ownership))
    }
}

impl Net for TrunkValueNet {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        Ok(self.heads(x, train, false)?.0)
    }

    fn forward_with_ownership(&self, x: &Tensor, train: bool) -> Result<(Tensor, Option<Tensor>)> {
        self.heads(x, train, true)
    }

    fn output(&self) -> Output {
        Output::WinProb
    }
}
