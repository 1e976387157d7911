//! A residual tower (AlphaGo Zero's shape, sized by configuration) with a
//! policy or a value head: the step up from the seed's plain stacks.
//!
//! Stem: 3×3 convolution 15→F, batch norm, ReLU. Each of the B blocks:
//! conv 3×3, BN, ReLU, conv 3×3, BN, plus the block's input, ReLU.
//! Convolutions in the tower have no bias (batch norm supplies it).
//!
//! Policy head: 1×1 conv F→2, BN, ReLU, linear 722→362, occupied points
//! masked, log-softmax. Value head: 1×1 conv F→1, BN, ReLU, linear
//! 361→256, ReLU, linear 256→1, sigmoid.
//!
//! Tensors: `stem.conv.weight` (F, 15, 3, 3), `stem.bn.*`;
//! `blocks.{i}.conv{1,2}.weight` (F, F, 3, 3), `blocks.{i}.bn{1,2}.*`;
//! policy head `policy.conv.weight` (2, F, 1, 1), `policy.bn.*`,
//! `policy.fc.{weight,bias}` (362, 722)/(362);
//! value head `value.conv.weight` (1, F, 1, 1), `value.bn.*`,
//! `value.fc1.{weight,bias}` (256, 361)/(256), `value.fc2.{weight,bias}` (1, 256)/(1).
//! `bn.*` stands for `weight, bias, running_mean, running_var`.

use candle_core::{Result, Tensor};
use candle_nn::VarBuilder;
use serde::{Deserialize, Serialize};

use super::layers::{flatten, residual_relu, tower_channels, BatchNorm, Conv, Linear};
use super::layout::{to_channels_first, to_channels_last, Channels};
use super::loss::masked_log_softmax;
use super::{Net, Output, MOVES, POINTS};

/// What a residual net predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Head {
    /// Log-probabilities of the 362 moves.
    Policy,
    /// The probability that the side to move wins.
    Value,
}

/// Size and purpose of a residual net.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResNetConfig {
    /// Residual blocks (two convolutions each).
    pub blocks: usize,
    /// Channels throughout the tower.
    pub filters: usize,
    /// Which head sits on the tower.
    pub head: Head,
}

/// Hidden units of the value head's first linear layer.
const VALUE_HIDDEN: usize = 256;

/// One residual block.
pub(super) struct Block {
    conv1: Conv,
    bn1: BatchNorm,
    conv2: Conv,
    /// Without ReLU: it comes after the skip connection is added.
    bn2: BatchNorm,
}

impl Block {
    /// A block whose last batch norm scales by `scale` at first: 1 as
    /// usual; 0 for a block put on a trained net, which then starts as
    /// the identity (on inputs ≥ 0, as after a ReLU) and learns from there.
    pub(super) fn new(vb: VarBuilder, filters: usize, scale: f64) -> Result<Block> {
        Ok(Block {
            conv1: Conv::new(vb.pp("conv1"), filters, filters, 3, false, false)?,
            bn1: BatchNorm::new(vb.pp("bn1"), filters, true)?,
            conv2: Conv::new(vb.pp("conv2"), filters, filters, 3, false, false)?,
            bn2: BatchNorm::with_scale(vb.pp("bn2"), filters, false, scale)?,
        })
    }

    /// The block on `x` in the layout `channels`.
    pub(super) fn forward(&self, x: &Tensor, train: bool, channels: Channels) -> Result<Tensor> {
        let h = self.bn1.forward_in(&self.conv1.forward_in(x, channels)?, train, channels)?;
        let h = self.bn2.forward_in(&self.conv2.forward_in(&h, channels)?, train, channels)?;
        residual_relu(&h, x)
    }
}

/// The layers of a head after its 1×1 convolution and batch norm.
enum HeadLayers {
    Policy { fc: Linear },
    Value { fc1: Linear, fc2: Linear },
}

/// A residual net.
pub struct ResNet {
    stem: (Conv, BatchNorm),
    blocks: Vec<Block>,
    /// The head's 1×1 convolution and batch norm + ReLU.
    head_conv: (Conv, BatchNorm),
    head: HeadLayers,
}

impl ResNet {
    /// Creates (or, from a filled `VarMap`, loads) the net's tensors, for
    /// `planes` input planes.
    pub fn new(vb: VarBuilder, config: &ResNetConfig, input_planes: usize) -> Result<ResNet> {
        let f = config.filters;
        if f == 0 {
            candle_core::bail!("a residual net needs at least one filter");
        }
        let stem = (
            Conv::new(vb.pp("stem.conv"), input_planes, f, 3, false, false)?,
            BatchNorm::new(vb.pp("stem.bn"), f, true)?,
        );
        let blocks =
            (0..config.blocks).map(|i| Block::new(vb.pp(format!("blocks.{i}")), f, 1.0)).collect::<Result<_>>()?;
        let (name, planes) = match config.head {
            Head::Policy => ("policy", 2),
            Head::Value => ("value", 1),
        };
        let hv = vb.pp(name);
        let head_conv =
            (Conv::new(hv.pp("conv"), f, planes, 1, false, false)?, BatchNorm::new(hv.pp("bn"), planes, true)?);
        let head = match config.head {
            Head::Policy => HeadLayers::Policy { fc: Linear::new(hv.pp("fc"), planes * POINTS, MOVES)? },
            Head::Value => HeadLayers::Value {
                fc1: Linear::new(hv.pp("fc1"), POINTS, VALUE_HIDDEN)?,
                fc2: Linear::new(hv.pp("fc2"), VALUE_HIDDEN, 1)?,
            },
        };
        Ok(ResNet { stem, blocks, head_conv, head })
    }
}

impl Net for ResNet {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        // The stem stays NCHW: its 15 input planes suit neither layout's
        // fast kernels, and its output changes layout once.
        let mut h = self.stem.1.forward(&self.stem.0.forward(x)?, train)?;
        let channels = tower_channels(x);
        if channels == Channels::Last {
            h = to_channels_last(&h)?;
        }
        for block in &self.blocks {
            h = block.forward(&h, train, channels)?;
        }
        let (conv, bn) = &self.head_conv;
        let mut h = bn.forward_in(&conv.forward_in(&h, channels)?, train, channels)?;
        if channels == Channels::Last {
            h = to_channels_first(&h)?;
        }
        let h = flatten(&h)?;
        match &self.head {
            HeadLayers::Policy { fc } => masked_log_softmax(&fc.forward(&h)?, x, train),
            HeadLayers::Value { fc1, fc2 } => {
                candle_nn::ops::sigmoid(&fc2.forward(&fc1.forward(&h)?.relu()?)?)?.squeeze(1)
            }
        }
    }

    fn output(&self) -> Output {
        match self.head {
            HeadLayers::Policy { .. } => Output::MoveLogProbs,
            HeadLayers::Value { .. } => Output::WinProb,
        }
    }
}
