//! Where a tensor's channels lie in memory.
//!
//! candle, the CPU kernels and the nets' weights are NCHW. cuDNN's tensor
//! cores read NHWC: handed NCHW activations, cuDNN changed their layout
//! before and after every convolution, 11.7 ms of a 54.9 ms bf16 step of
//! the 10×128 net at batch 1,024 on an H100, where PyTorch, channels-last
//! throughout, spent none (docs/results/gpu.md). So on a GPU with cuDNN a
//! residual tower keeps its activations as (batch, h, w, c) tensors from
//! the first block to the head: one change of layout each way a step.

use candle_core::{Result, Shape, Tensor};

/// The order of an activation tensor's axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Channels {
    /// (batch, c, h, w): NCHW, candle's order.
    First,
    /// (batch, h, w, c): NHWC.
    Last,
}

impl Channels {
    /// The sizes of a 4-dimensional shape in this layout, in NCHW order
    /// (batch, c, h, w; for a convolution's kernel, c_out, c_in, k, k).
    pub fn nchw(self, shape: &Shape) -> Result<(usize, usize, usize, usize)> {
        let (a, b, c, d) = shape.dims4()?;
        Ok(match self {
            Channels::First => (a, b, c, d),
            Channels::Last => (a, d, b, c),
        })
    }

    /// The shape in this layout of sizes `(n, c, h, w)` given in NCHW order.
    pub fn shape(self, (n, c, h, w): (usize, usize, usize, usize)) -> Shape {
        match self {
            Channels::First => Shape::from((n, c, h, w)),
            Channels::Last => Shape::from((n, h, w, c)),
        }
    }

    /// (batch, channels, points) of a 4-dimensional tensor's shape in this
    /// layout.
    pub fn dims(self, shape: &Shape) -> Result<(usize, usize, usize)> {
        let (n, c, h, w) = self.nchw(shape)?;
        Ok((n, c, h * w))
    }
}

/// NCHW `x` as NHWC.
pub fn to_channels_last(x: &Tensor) -> Result<Tensor> {
    x.permute((0, 2, 3, 1))?.contiguous()
}

/// NHWC `x` as NCHW.
pub fn to_channels_first(x: &Tensor) -> Result<Tensor> {
    x.permute((0, 3, 1, 2))?.contiguous()
}

#[cfg(test)]
thread_local! {
    static FORCED: std::cell::Cell<Option<Channels>> = const { std::cell::Cell::new(None) };
}

/// The layout a test forces ([`with_channels`]), if any.
#[cfg(test)]
pub(crate) fn forced() -> Option<Channels> {
    FORCED.with(|f| f.get())
}

#[cfg(not(test))]
pub(crate) fn forced() -> Option<Channels> {
    None
}

/// Runs `f` with residual towers in the layout `channels` on any device:
/// how tests compare the two layouts on a GPU, and check the
/// channels-last plumbing without one (on the CPU each layer then changes
/// the layout around its NCHW kernels).
#[cfg(test)]
pub(crate) fn with_channels<T>(channels: Channels, f: impl FnOnce() -> T) -> T {
    crate::nn::switches::with_override(&FORCED, channels, f)
}
