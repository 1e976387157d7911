//! The seed's policy net: which move would a strong player make here?
//!
//! Batch norm on the input planes (15 for the seed's features) (then ReLU), four 3×3 convolutions
//! 15→32→64→64→32 each followed by batch norm and ReLU, a 3×3 convolution
//! 32→1 giving one logit per point, and one learned pass logit: 362 logits.
//! Occupied points are masked, then log-softmax.
//!
//! Tensors (PyTorch's names for `torch_seed_nets.Policy`):
//! `bn0.{weight,bias,running_mean,running_var}` (planes),
//! `convs.{0..3}.weight` (c_out, c_in, 3, 3) and `.bias` (c_out),
//! `bns.{0..3}.{weight,bias,running_mean,running_var}` (c_out),
//! `head.weight` (1, 32, 3, 3), `head.bias` (1), `pass_logit` (1).

use candle_core::{Result, Tensor};
use candle_nn::{Init, VarBuilder};

use super::layers::{flatten, to_f32, trunk_channels, BatchNorm, Conv};
use super::layout::{to_channels_first, to_channels_last, Channels};
use super::loss::masked_log_softmax;
use super::{Net, Output};

/// Channels after each hidden convolution.
const CHANNELS: [usize; 4] = [32, 64, 64, 32];

/// The seed policy's layers up to its head: what it has learned to see.
/// [`super::value::TrunkValueNet`] puts a value head on the same layers,
/// under the same tensor names, so it can start from a trained policy.
pub struct SeedTrunk {
    /// Normalises the raw input planes.
    bn0: BatchNorm,
    /// Hidden convolutions, each with its batch norm + ReLU.
    hidden: Vec<(Conv, BatchNorm)>,
}

impl SeedTrunk {
    /// Channels of its output.
    pub const CHANNELS: usize = CHANNELS[CHANNELS.len() - 1];

    pub fn new(vb: &VarBuilder, planes: usize) -> Result<SeedTrunk> {
        let bn0 = BatchNorm::new(vb.pp("bn0"), planes, true)?;
        let mut hidden = Vec::with_capacity(CHANNELS.len());
        let mut c_in = planes;
        for (i, &c_out) in CHANNELS.iter().enumerate() {
            // The bias is redundant before batch norm, but kept so that the
            // tensors match the PyTorch seed net one for one.
            let conv = Conv::new(vb.pp(format!("convs.{i}")), c_in, c_out, 3, true, false)?;
            hidden.push((conv, BatchNorm::new(vb.pp(format!("bns.{i}")), c_out, true)?));
            c_in = c_out;
        }
        Ok(SeedTrunk { bn0, hidden })
    }

    /// (batch, planes, 19, 19) to (batch, [`SeedTrunk::CHANNELS`], 19, 19).
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        self.forward_in(x, train, Channels::First)
    }

    /// [`SeedTrunk::forward`], its output in the layout `channels`: the
    /// input planes and the first convolution NCHW (15 planes suit neither
    /// layout's fast kernels, as a residual net's stem), the layout changed
    /// once after it.
    pub fn forward_in(&self, x: &Tensor, train: bool, channels: Channels) -> Result<Tensor> {
        let mut h = self.bn0.forward(x, train)?;
        for (i, (conv, bn)) in self.hidden.iter().enumerate() {
            let layout = if i == 0 { Channels::First } else { channels };
            h = bn.forward_in(&conv.forward_in(&h, layout)?, train, layout)?;
            if i == 0 && channels == Channels::Last {
                h = to_channels_last(&h)?;
            }
        }
        Ok(h)
    }
}

/// The seed's policy net.
pub struct PolicyNet {
    trunk: SeedTrunk,
    /// The 3×3 convolution to one logit per point.
    head: Conv,
    /// The pass move's logit, learned, the same for every position.
    pass_logit: Tensor,
}

impl PolicyNet {
    /// Creates (or, from a filled `VarMap`, loads) the net's tensors, for
    /// `planes` input planes.
    pub fn new(vb: VarBuilder, planes: usize) -> Result<PolicyNet> {
        let trunk = SeedTrunk::new(&vb, planes)?;
        let head = Conv::new(vb.pp("head"), SeedTrunk::CHANNELS, 1, 3, true, false)?;
        let pass_logit = vb.get_with_hints(1, "pass_logit", Init::Const(0.0))?;
        Ok(PolicyNet { trunk, head, pass_logit })
    }
}

impl Net for PolicyNet {
    fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let channels = trunk_channels(x);
        let mut h = self.trunk.forward_in(x, train, channels)?;
        if channels == Channels::Last {
            // The head's one output channel runs in f32 NCHW, as a bf16
            // layer whose channels the tensor cores do not take.
            h = to_channels_first(&h)?;
        }
        let board = to_f32(&flatten(&self.head.forward(&h)?)?)?;
        let pass = self.pass_logit.reshape((1, 1))?.broadcast_as((board.dim(0)?, 1))?;
        masked_log_softmax(&Tensor::cat(&[&board, &pass], 1)?, x, train)
    }

    fn output(&self) -> Output {
        Output::MoveLogProbs
    }
}
