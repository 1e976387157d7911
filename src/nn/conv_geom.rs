//! What the CPU's two convolution paths share: the geometry of a batch of
//! convolutions, the gradients they return, the per-thread scratch buffer
//! and the write of a finished output plane. The im2col-and-gemm path
//! ([`super::kernels`]) and the AVX-512 direct kernel ([`super::direct`])
//! both build on it; `kernels` dispatches to `direct` where it applies.

use std::cell::RefCell;

/// Geometry of a batch of same-padded k×k convolutions with stride 1 on NCHW
/// data: the output has the input's height and width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvGeom {
    /// Samples in the batch.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel side (odd).
    pub k: usize,
    /// Height of input and output.
    pub h: usize,
    /// Width of input and output.
    pub w: usize,
}

impl ConvGeom {
    pub(super) fn points(&self) -> usize {
        self.h * self.w
    }

    /// Length of one im2col column: the input values one output point sees.
    pub(super) fn patch(&self) -> usize {
        self.c_in * self.k * self.k
    }

    /// The geometry of the input gradient, which is itself a convolution
    /// from the output channels back to the input channels.
    pub(super) fn reversed(&self) -> ConvGeom {
        ConvGeom { c_in: self.c_out, c_out: self.c_in, ..*self }
    }
}

thread_local! {
    /// Per-thread im2col buffer, reused across calls: allocating ~1 MB per
    /// sample and layer would cost more than the copy into it.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on this thread's scratch buffer, grown to `len` floats.
/// `f` must not itself call `with_scratch` (it only runs im2col and gemm).
pub(super) fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut buf = s.borrow_mut();
        if buf.len() < len {
            buf.resize(len, 0.0);
        }
        f(&mut buf[..len])
    })
}

/// Writes one output plane from a result whose rows are `stride` apart:
/// `dst[y·w + x] = src[y·stride + x] + b`, then ReLU when `relu`.
pub(super) fn finish_plane(dst: &mut [f32], src: &[f32], w: usize, stride: usize, b: f32, relu: bool) {
    for (d_row, s_row) in dst.chunks_exact_mut(w).zip(src.chunks(stride)) {
        for (d, &s) in d_row.iter_mut().zip(s_row) {
            *d = if relu { (s + b).max(0.0) } else { s + b };
        }
    }
}

/// Gradients of a convolution.
pub struct ConvGrads {
    /// Input gradient (batch, c_in, h, w), when asked for.
    pub dx: Option<Vec<f32>>,
    /// Kernel gradient (c_out, c_in, k, k).
    pub dweight: Vec<f32>,
    /// Bias gradient (c_out).
    pub dbias: Vec<f32>,
}
