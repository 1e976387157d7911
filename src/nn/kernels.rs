//! CPU kernels behind the fused layers in [`super::layers`], on plain
//! `f32` slices in NCHW order.
//!
//! Why they exist: candle's CPU convolution computes the input gradient with
//! `conv_transpose2d` and the kernel gradient as a convolution with a 19×19
//! "kernel", both far slower than a matrix product (training the seed policy
//! net ran at ~100 samples/s). Here a convolution, forward or backward, is
//! either the AVX-512 direct kernel of [`super::direct`] or, on CPUs without
//! it, im2col copies plus `gemm` products; the input gradient is itself a
//! forward convolution with the flipped kernel. Samples are spread over
//! rayon's threads. Batch norm is done in two passes (statistics, then one
//! fused scale-shift-ReLU) instead of candle-nn's dozen tensor ops.

use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use super::conv_geom::{finish_plane, with_scratch};
pub use super::conv_geom::{ConvGeom, ConvGrads};

/// A read-only matrix view over a slice: element (r, c) is at
/// `data[r * rs + c * cs]`, so a transpose is a swap of strides, not a copy.
#[derive(Clone, Copy)]
struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat { data: &data[..rows * cols], rows, cols, rs: cols, cs: 1 }
    }

    fn t(self) -> Mat<'a> {
        Mat { rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs, ..self }
    }
}

/// `dst = a·b`, or `dst += a·b` when `accumulate`; `dst` is row-major.
/// Single-threaded: callers parallelise over samples, which keeps each
/// product's operands in one core's cache.
fn matmul(dst: &mut [f32], a: Mat, b: Mat, accumulate: bool) {
    assert_eq!(a.cols, b.rows, "inner dimensions differ");
    assert_eq!(dst.len(), a.rows * b.cols, "destination has the wrong size");
    for m in [a, b] {
        // The last element must lie inside the slice; gemm reads raw pointers.
        assert!(m.rows == 0 || m.cols == 0 || (m.rows - 1) * m.rs + (m.cols - 1) * m.cs < m.data.len());
    }
    let n = b.cols;
    // SAFETY: the asserts above bound every index gemm touches: dst is
    // a.rows × n row-major and exactly dst.len() long; a and b are inside
    // their slices. dst does not alias a or b (it is a &mut).
    unsafe {
        gemm(
            a.rows,
            n,
            a.cols,
            dst.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            Parallelism::None,
        )
    }
}

/// Writes the same-padding k×k patches of one sample `src` (`c` planes of
/// h×w) into columns `at..at + h·w` of `cols`, a matrix with rows `stride`
/// long: row `(ci·k + ky)·k + kx` gets, for every output point, the input at
/// offset (ky − k/2, kx − k/2) from it, or 0 off the board.
#[allow(clippy::too_many_arguments)] // one geometry, spelled out
fn im2col(src: &[f32], c: usize, h: usize, w: usize, k: usize, cols: &mut [f32], stride: usize, at: usize) {
    let pad = k as isize / 2;
    let mut rows = cols.chunks_exact_mut(stride);
    for plane in src.chunks_exact(h * w).take(c) {
        for ky in 0..k as isize {
            for kx in 0..k as isize {
                if let Some(row) = rows.next() {
                    shifted_plane(plane, h, w, ky - pad, kx - pad, &mut row[at..at + h * w]);
                }
            }
        }
    }
}

/// `dst[y][x] = src[y + dy][x + dx]`, 0 off the plane. Done as one flat
/// copy of the plane shifted by `dy·w + dx`, which is right except in the
/// columns where `x + dx` wraps into the neighbouring row; those are zeroed
/// after. (Copying row by row instead costs a `memcpy` call per 19 floats,
/// which made im2col slower than the matrix product.)
fn shifted_plane(src: &[f32], h: usize, w: usize, dy: isize, dx: isize, dst: &mut [f32]) {
    let n = (h * w) as isize;
    let off = dy * w as isize + dx;
    let lo = (-off).clamp(0, n) as usize;
    let hi = (n - off).clamp(lo as isize, n) as usize;
    dst[..lo].fill(0.0);
    if hi > lo {
        let start = (lo as isize + off) as usize;
        dst[lo..hi].copy_from_slice(&src[start..start + (hi - lo)]);
    }
    dst[hi..].fill(0.0);
    // Strided stores, one column at a time: a per-row `fill` of one or two
    // floats would again be a library call per row.
    let bad_columns = if dx > 0 { w.saturating_sub(dx as usize)..w } else { 0..(dx.unsigned_abs()).min(w) };
    for column in bad_columns {
        for v in dst[column..].iter_mut().step_by(w) {
            *v = 0.0;
        }
    }
}

/// The patch matrix of one sample (patch × points): the sample itself when
/// k = 1, else its im2col copy in `scratch`.
fn patches<'a>(g: &ConvGeom, sample: &'a [f32], scratch: &'a mut [f32]) -> Mat<'a> {
    if g.k == 1 {
        Mat::row_major(sample, g.c_in, g.points())
    } else {
        im2col(sample, g.c_in, g.h, g.w, g.k, scratch, g.points(), 0);
        Mat::row_major(scratch, g.patch(), g.points())
    }
}

/// Samples per matrix product in [`conv_forward`]. With few channels a
/// product over one sample (16 × 144 × 361 for the seed's small nets) is
/// too small for gemm to run well: four side by side doubled its speed,
/// and larger layers lose nothing.
const GROUP: usize = 4;

/// Forward convolution: `y[b] = weight · patches(x[b]) + bias`, then ReLU
/// when `relu`. `weight` is (c_out, c_in, k, k), `bias` (c_out) or none.
///
/// Samples go [`GROUP`] at a time: their patches side by side in one
/// matrix, one product, then the result is scattered back to NCHW with bias
/// and ReLU applied on the way.
pub fn conv_forward(g: &ConvGeom, x: &[f32], weight: &[f32], bias: Option<&[f32]>, relu: bool) -> Vec<f32> {
    match super::direct::conv_forward(g, x, weight, bias, relu) {
        Some(y) => y,
        None => conv_forward_gemm(g, x, weight, bias, relu),
    }
}

/// [`conv_forward`] by im2col and gemm, for CPUs without AVX-512.
pub(super) fn conv_forward_gemm(g: &ConvGeom, x: &[f32], weight: &[f32], bias: Option<&[f32]>, relu: bool) -> Vec<f32> {
    let (points, patch) = (g.points(), g.patch());
    assert_eq!(x.len(), g.batch * g.c_in * points, "conv input has the wrong size");
    let wmat = Mat::row_major(weight, g.c_out, patch);
    let group = GROUP.min(g.batch).max(1);
    let mut y = vec![0.0f32; g.batch * g.c_out * points];
    let (x_chunk, y_chunk) = (group * g.c_in * points, group * g.c_out * points);
    y.par_chunks_mut(y_chunk).zip(x.par_chunks(x_chunk)).for_each(|(yg, xg)| {
        let width = xg.len() / (g.c_in * points) * points;
        with_scratch((patch + g.c_out) * width, |scratch| {
            let (cols, out) = scratch.split_at_mut(patch * width);
            for (j, xb) in xg.chunks_exact(g.c_in * points).enumerate() {
                im2col(xb, g.c_in, g.h, g.w, g.k, cols, width, j * points);
            }
            matmul(out, wmat, Mat::row_major(cols, patch, width), false);
            for (j, yb) in yg.chunks_exact_mut(g.c_out * points).enumerate() {
                for (co, dst) in yb.chunks_exact_mut(points).enumerate() {
                    finish_plane(dst, &out[co * width + j * points..], g.w, g.w, bias.map_or(0.0, |b| b[co]), relu);
                }
            }
        });
    });
    y
}

/// `dy` where the ReLU output `y` is positive, else 0: the gradient before
/// a ReLU, given the one after it.
pub fn relu_backward(dy: &[f32], y: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0f32; dy.len()];
    out.par_chunks_mut(4096).zip(dy.par_chunks(4096).zip(y.par_chunks(4096))).for_each(|(o, (d, y))| {
        for ((o, &d), &y) in o.iter_mut().zip(d).zip(y) {
            *o = if y > 0.0 { d } else { 0.0 };
        }
    });
    out
}

/// Backward convolution, given the gradient `dy` of the layer's output and,
/// when a ReLU was fused into it, that output `relu_out` (for the mask).
///
/// * kernel: `dW = Σ_b dy[b] ⋆ x[b]`, each thread summing its own
///   contiguous share of the batch, the shares then added in order, so the
///   result does not depend on scheduling;
/// * input: a convolution of `dy` with the kernel flipped in space and with
///   in/out channels swapped.
///
/// With AVX-512 (3×3 kernels) all of it is one fused pass per sample in
/// [`super::direct`]; otherwise im2col and gemm products.
pub fn conv_backward(
    g: &ConvGeom,
    x: &[f32],
    weight: &[f32],
    dy: &[f32],
    relu_out: Option<&[f32]>,
    need_dx: bool,
) -> ConvGrads {
    match super::direct::conv_backward(g, x, weight, dy, relu_out, need_dx) {
        Some(grads) => grads,
        None => conv_backward_gemm(g, x, weight, dy, relu_out, need_dx),
    }
}

/// [`conv_backward`] by im2col and gemm.
pub(super) fn conv_backward_gemm(
    g: &ConvGeom,
    x: &[f32],
    weight: &[f32],
    dy: &[f32],
    relu_out: Option<&[f32]>,
    need_dx: bool,
) -> ConvGrads {
    let points = g.points();
    assert_eq!(dy.len(), g.batch * g.c_out * points, "conv output gradient has the wrong size");
    let masked = relu_out.map(|y| relu_backward(dy, y));
    let dy = masked.as_deref().unwrap_or(dy);
    // One share per thread, each summing its samples' kernel gradients
    // (which is why their last bits follow the number of threads). Counted
    // from the share's size: with 4 threads a batch of 5 makes 3 shares of
    // 2, and a fourth share once sliced past the batch.
    let per_share = g.batch.div_ceil(rayon::current_num_threads().clamp(1, g.batch.max(1))).max(1);
    let partial: Vec<(Vec<f32>, Vec<f32>)> = (0..g.batch.div_ceil(per_share).max(1))
        .into_par_iter()
        .map(|share| {
            let samples = share * per_share..((share + 1) * per_share).min(g.batch);
            let mut db = vec![0.0f32; g.c_out];
            let planes = &dy[samples.start * g.c_out * points..samples.end * g.c_out * points];
            // Planes cycle through the channels, sample after sample.
            for (i, plane) in planes.chunks_exact(points).enumerate() {
                db[i % g.c_out] += plane.iter().sum::<f32>();
            }
            (weight_grad_gemm(g, x, dy, samples), db)
        })
        .collect();
    let mut parts = partial.into_iter();
    let (mut dweight, mut dbias) = parts.next().unwrap_or_default();
    for (dw, db) in parts {
        add_assign(&mut dweight, &dw);
        add_assign(&mut dbias, &db);
    }
    let dx = need_dx.then(|| conv_forward(&g.reversed(), dy, &flip_transpose(g, weight), None, false));
    ConvGrads { dx, dweight, dbias }
}

/// `Σ dy[b] · patches(x[b])ᵀ` over `samples`, by im2col and gemm.
fn weight_grad_gemm(g: &ConvGeom, x: &[f32], dy: &[f32], samples: std::ops::Range<usize>) -> Vec<f32> {
    let (points, patch) = (g.points(), g.patch());
    let mut dw = vec![0.0f32; g.c_out * patch];
    for b in samples {
        let dyb = &dy[b * g.c_out * points..][..g.c_out * points];
        let xb = &x[b * g.c_in * points..][..g.c_in * points];
        with_scratch(if g.k == 1 { 0 } else { patch * points }, |scratch| {
            let cols = patches(g, xb, scratch);
            matmul(&mut dw, Mat::row_major(dyb, g.c_out, points), cols.t(), true);
        });
    }
    dw
}

fn add_assign(acc: &mut [f32], v: &[f32]) {
    for (a, b) in acc.iter_mut().zip(v) {
        *a += b;
    }
}

/// The kernel of the input-gradient convolution: `out[ci][co][ky][kx] =
/// w[co][ci][k−1−ky][k−1−kx]`.
fn flip_transpose(g: &ConvGeom, w: &[f32]) -> Vec<f32> {
    let kk = g.k * g.k;
    let mut out = vec![0.0f32; g.c_in * g.c_out * kk];
    for co in 0..g.c_out {
        for ci in 0..g.c_in {
            let src = &w[(co * g.c_in + ci) * kk..][..kk];
            let dst = &mut out[(ci * g.c_out + co) * kk..][..kk];
            for (d, s) in dst.iter_mut().zip(src.iter().rev()) {
                *d = *s;
            }
        }
    }
    out
}

/// Shape of NCHW data as batch norm sees it: `batch` × `channels` planes of
/// `points` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planes {
    /// Samples.
    pub batch: usize,
    /// Channels.
    pub channels: usize,
    /// Values per plane (h·w).
    pub points: usize,
}

impl Planes {
    fn len(&self) -> usize {
        self.batch * self.channels * self.points
    }

    /// Values per channel over the whole batch.
    pub fn per_channel(&self) -> usize {
        self.batch * self.points
    }

    /// The planes of channel `c`, one per sample.
    fn channel<'a>(&self, data: &'a [f32], c: usize) -> impl Iterator<Item = &'a [f32]> + 'a {
        let (channels, points) = (self.channels, self.points);
        (0..self.batch).map(move |b| &data[(b * channels + c) * points..][..points])
    }
}

/// Per-channel `(Σ a, Σ a·b)` over all planes of the channel, in f64 so
/// that 36,100 values per channel lose nothing. `b` defaults to `a`; with
/// `relu_out`, `a` counts only where it is positive (`a` is the gradient
/// after a ReLU whose output that was).
fn channel_sums(p: &Planes, a: &[f32], b: Option<&[f32]>, relu_out: Option<&[f32]>) -> Vec<(f64, f64)> {
    (0..p.channels)
        .into_par_iter()
        .map(|c| {
            let bs = p.channel(b.unwrap_or(a), c);
            // Without a mask, `a` masks itself: the same planes, no cost.
            let ms = p.channel(relu_out.unwrap_or(a), c);
            p.channel(a, c).zip(bs).zip(ms).fold((0.0, 0.0), |(s, sp), ((ra, rb), rm)| {
                let (s1, s2) = plane_sums(ra, rb, relu_out.is_some().then_some(rm));
                (s + s1 as f64, sp + s2 as f64)
            })
        })
        .collect()
}

/// `(Σ a, Σ a·b)` over one plane, `a` counted only where `mask` is
/// positive. On AVX-512 sixteen running sums: the scalar sum is a chain of
/// dependent additions that no compiler may reorder, and took 7% of a
/// training step of the policy net (`perf`, AMD Zen 5).
fn plane_sums(a: &[f32], b: &[f32], mask: Option<&[f32]>) -> (f32, f32) {
    assert!(b.len() >= a.len() && mask.is_none_or(|m| m.len() >= a.len()));
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512 was just detected; the lengths are asserted.
            return unsafe { plane_sums_avx512(a, b, mask) };
        }
    }
    let (mut s1, mut s2) = (0.0f32, 0.0f32);
    for (i, (&va, &vb)) in a.iter().zip(b).enumerate() {
        let va = if mask.is_none_or(|m| m[i] > 0.0) { va } else { 0.0 };
        s1 += va;
        s2 += va * vb;
    }
    (s1, s2)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn plane_sums_avx512(a: &[f32], b: &[f32], mask: Option<&[f32]>) -> (f32, f32) {
    use std::arch::x86_64::*;
    let (mut s1, mut s2) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    for i in (0..a.len()).step_by(16) {
        let left = a.len() - i;
        let k: __mmask16 = if left >= 16 { !0 } else { (1u16 << left) - 1 };
        let mut va = _mm512_maskz_loadu_ps(k, a.as_ptr().add(i));
        if let Some(m) = mask {
            let positive = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(
                k,
                _mm512_maskz_loadu_ps(k, m.as_ptr().add(i)),
                _mm512_setzero_ps(),
            );
            va = _mm512_maskz_mov_ps(positive, va);
        }
        s1 = _mm512_add_ps(s1, va);
        s2 = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(k, b.as_ptr().add(i)), s2);
    }
    (_mm512_reduce_add_ps(s1), _mm512_reduce_add_ps(s2))
}

/// Per-channel mean and biased variance (what batch norm normalises with).
pub fn channel_stats(p: &Planes, x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    assert_eq!(x.len(), p.len(), "batch-norm input has the wrong size");
    let n = p.per_channel() as f64;
    channel_sums(p, x, None, None)
        .into_iter()
        .map(|(s, sq)| {
            let mean = s / n;
            (mean as f32, (sq / n - mean * mean).max(0.0) as f32)
        })
        .unzip()
}

/// `y = x·scale[c] + shift[c]`, then ReLU when `relu`.
pub fn channel_affine(p: &Planes, x: &[f32], scale: &[f32], shift: &[f32], relu: bool) -> Vec<f32> {
    assert_eq!(x.len(), p.len(), "batch-norm input has the wrong size");
    let mut y = vec![0.0f32; x.len()];
    y.par_chunks_mut(p.points).zip(x.par_chunks(p.points)).enumerate().with_min_len(64).for_each(|(i, (yr, xr))| {
        let (a, b) = (scale[i % p.channels], shift[i % p.channels]);
        for (o, &v) in yr.iter_mut().zip(xr) {
            let t = v * a + b;
            *o = if relu { t.max(0.0) } else { t };
        }
    });
    y
}

/// Batch-norm statistics and parameters the backward pass needs.
pub struct Norm<'a> {
    /// Mean used in the forward pass, per channel.
    pub mean: &'a [f32],
    /// 1/√(var + ε) used in the forward pass, per channel.
    pub invstd: &'a [f32],
    /// Scale γ, per channel.
    pub gamma: &'a [f32],
    /// Whether mean and variance were the batch's own (training), so that
    /// they depend on x; otherwise they were running averages (constants).
    pub batch_stats: bool,
}

/// Gradients of a batch norm.
pub struct NormGrads {
    /// Input gradient.
    pub dx: Vec<f32>,
    /// Gradient of the scale γ.
    pub dgamma: Vec<f32>,
    /// Gradient of the shift β.
    pub dbeta: Vec<f32>,
}

/// Backward batch norm `y = γ·(x−μ)/σ + β`, optionally followed by a ReLU
/// whose output was `relu_out` (its mask is applied on the fly, saving a
/// pass). With batch statistics:
/// `dx = γ/σ · (dy − mean(dy) − x̂·mean(dy·x̂))`; otherwise `dx = γ/σ · dy`.
pub fn batch_norm_backward(p: &Planes, x: &[f32], dy: &[f32], relu_out: Option<&[f32]>, n: &Norm) -> NormGrads {
    assert!(x.len() == p.len() && dy.len() == p.len(), "batch-norm gradient has the wrong size");
    assert!(relu_out.is_none_or(|y| y.len() == p.len()), "batch-norm output has the wrong size");
    // Σ dy·x̂ = σ⁻¹·(Σ dy·x − μ·Σ dy): one pass over dy and x. The ReLU's
    // mask is applied as dy is read, here and below, rather than to a
    // masked copy (a pass and an activation-sized buffer more).
    let sums = channel_sums(p, dy, Some(x), relu_out);
    let dbeta: Vec<f32> = sums.iter().map(|s| s.0 as f32).collect();
    let dgamma: Vec<f32> =
        sums.iter().enumerate().map(|(c, s)| ((s.1 - n.mean[c] as f64 * s.0) * n.invstd[c] as f64) as f32).collect();
    let m = p.per_channel() as f32;
    let mut dx = vec![0.0f32; p.len()];
    // Without a ReLU the mask is dy itself, never read.
    let mask = relu_out.unwrap_or(dy);
    dx.par_chunks_mut(p.points)
        .zip(dy.par_chunks(p.points).zip(x.par_chunks(p.points)).zip(mask.par_chunks(p.points)))
        .enumerate()
        .with_min_len(64)
        .for_each(|(i, (o, ((d, xr), yr)))| {
            let c = i % p.channels;
            let k = n.gamma[c] * n.invstd[c];
            let (mu, is) = (n.mean[c], n.invstd[c]);
            let passed = |d: f32, y: f32| if relu_out.is_none() || y > 0.0 { d } else { 0.0 };
            if n.batch_stats {
                let (mdy, mdyx) = (dbeta[c] / m, dgamma[c] / m);
                for (((o, &d), &v), &y) in o.iter_mut().zip(d).zip(xr).zip(yr) {
                    *o = k * (passed(d, y) - mdy - (v - mu) * is * mdyx);
                }
            } else {
                for ((o, &d), &y) in o.iter_mut().zip(d).zip(yr) {
                    *o = k * passed(d, y);
                }
            }
        });
    NormGrads { dx, dgamma, dbeta }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct same-padding convolution, the definition the fast path must match.
    fn conv_direct(g: &ConvGeom, x: &[f32], w: &[f32]) -> Vec<f32> {
        let pad = (g.k / 2) as isize;
        let mut y = vec![0.0; g.batch * g.c_out * g.h * g.w];
        for b in 0..g.batch {
            for co in 0..g.c_out {
                for yy in 0..g.h {
                    for xx in 0..g.w {
                        let mut s = 0.0;
                        for ci in 0..g.c_in {
                            for ky in 0..g.k {
                                for kx in 0..g.k {
                                    let (sy, sx) = (yy as isize + ky as isize - pad, xx as isize + kx as isize - pad);
                                    if sy >= 0 && sx >= 0 && (sy as usize) < g.h && (sx as usize) < g.w {
                                        s += w[((co * g.c_in + ci) * g.k + ky) * g.k + kx]
                                            * x[((b * g.c_in + ci) * g.h + sy as usize) * g.w + sx as usize];
                                    }
                                }
                            }
                        }
                        y[((b * g.c_out + co) * g.h + yy) * g.w + xx] = s;
                    }
                }
            }
        }
        y
    }

    fn pseudo_random(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn im2col_gemm_matches_direct_convolution() {
        for k in [1, 3, 5] {
            let g = ConvGeom { batch: 3, c_in: 2, c_out: 4, k, h: 5, w: 7 };
            let x = pseudo_random(g.batch * g.c_in * 35, 1);
            let w = pseudo_random(g.c_out * g.c_in * k * k, 2);
            let fast = conv_forward(&g, &x, &w, None, false);
            let slow = conv_direct(&g, &x, &w);
            let diff = fast.iter().zip(&slow).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-5, "k={k}: max diff {diff}");
        }
    }

    /// Both backward paths, in pools of 1 to 6 threads, on batches that
    /// leave some thread without samples: the gemm path once sliced past
    /// the batch there (batch 5 under 4 threads panicked). The input
    /// gradient is the same bits under any number of threads; the kernel
    /// and bias gradients, summed in one share per thread, the same values.
    #[test]
    fn conv_gradients_agree_under_any_thread_count() {
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| (a - b).abs() <= 1e-4 * (1.0 + b.abs()));
        // 3×3 on 19×19 takes the AVX-512 path where there is one; 1×1 never does.
        for (k, batch) in [(1, 5), (1, 7), (3, 5), (3, 19), (3, 20)] {
            let g = ConvGeom { batch, c_in: 4, c_out: 6, k, h: 19, w: 19 };
            let x = pseudo_random(batch * g.c_in * g.points(), 1);
            let w = pseudo_random(g.c_out * g.patch(), 2);
            let dy = pseudo_random(batch * g.c_out * g.points(), 3);
            let grads = |threads: usize| {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                let both = |gemm: bool| {
                    pool.install(|| match gemm {
                        true => conv_backward_gemm(&g, &x, &w, &dy, None, true),
                        false => conv_backward(&g, &x, &w, &dy, None, true),
                    })
                };
                [both(true), both(false)]
            };
            let one = grads(1);
            for threads in 2..=6 {
                for (path, (many, one)) in ["gemm", "dispatched"].iter().zip(grads(threads).iter().zip(&one)) {
                    let what = format!("{path}, k={k}, batch={batch}, {threads} threads");
                    assert_eq!(
                        bits(many.dx.as_ref().unwrap()),
                        bits(one.dx.as_ref().unwrap()),
                        "{what}: input gradient"
                    );
                    assert!(close(&many.dweight, &one.dweight), "{what}: kernel gradient");
                    assert!(close(&many.dbias, &one.dbias), "{what}: bias gradient");
                }
            }
        }
    }

    #[test]
    fn bias_and_relu_are_applied() {
        let g = ConvGeom { batch: 1, c_in: 1, c_out: 2, k: 1, h: 1, w: 2 };
        let y = conv_forward(&g, &[1.0, -1.0], &[1.0, 2.0], Some(&[0.5, -0.5]), true);
        assert_eq!(y, vec![1.5, 0.0, 1.5, 0.0]);
    }

    /// Batch norm's backward pass masks the gradient by the ReLU as it
    /// reads it, with the results of masking a copy first, bit for bit.
    #[test]
    fn batch_norm_backward_masks_as_a_masked_copy_would() {
        let p = Planes { batch: 3, channels: 4, points: 10 };
        let (x, dy, y) = (pseudo_random(p.len(), 1), pseudo_random(p.len(), 2), pseudo_random(p.len(), 3));
        let (mean, invstd, gamma) = ([0.1, -0.2, 0.3, 0.0], [1.5, 0.7, 2.0, 1.0], [0.9, 1.1, -0.4, 2.0]);
        for batch_stats in [true, false] {
            let n = Norm { mean: &mean, invstd: &invstd, gamma: &gamma, batch_stats };
            let fused = batch_norm_backward(&p, &x, &dy, Some(&y), &n);
            let copied = batch_norm_backward(&p, &x, &relu_backward(&dy, &y), None, &n);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&fused.dx), bits(&copied.dx), "batch_stats={batch_stats}");
            assert_eq!(bits(&fused.dgamma), bits(&copied.dgamma));
            assert_eq!(bits(&fused.dbeta), bits(&copied.dbeta));
        }
    }

    #[test]
    fn channel_stats_are_mean_and_biased_variance() {
        let p = Planes { batch: 2, channels: 2, points: 2 };
        // Channel 0: 1, 2, 5, 6; channel 1: all 3.
        let (mean, var) = channel_stats(&p, &[1.0, 2.0, 3.0, 3.0, 5.0, 6.0, 3.0, 3.0]);
        assert_eq!(mean, vec![3.5, 3.0]);
        assert_eq!(var, vec![4.25, 0.0]);
    }
}
