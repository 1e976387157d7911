//! Direct same-padding convolution with AVX-512, for x86-64 CPUs that have
//! it (checked at run time; elsewhere [`conv_forward`] declines and the
//! im2col + gemm path runs).
//!
//! Why: with the seed's 16-channel layers, im2col and gemm's own packing
//! moved more data than the product computed, so less than a third of the
//! time went to arithmetic. Here each sample is copied once into zero-padded
//! planes, and the kernel reads the input straight from them: for a block
//! of 16 output points it loads the 16 inputs under one kernel tap with a
//! single vector load and multiplies them by that tap's weight for up to 16
//! output channels held in registers.
//!
//! Output points are computed on the padded width, so that each tap is a
//! constant offset into the padded plane; the extra columns are garbage
//! and dropped when the result is written out. A padded row is `w + k/2`
//! long, zeros first: a row's zeros are also the right padding of the row
//! above, as a tap past a row's end reads on into the next row. With
//! `w + k − 1` (both paddings) a 19×19 plane took 25 vector blocks of 16
//! points, now 24.

use rayon::prelude::*;

use super::conv_geom::{finish_plane, with_scratch, ConvGeom, ConvGrads};

/// Lanes of one AVX-512 vector of f32.
const LANES: usize = 16;

/// Forward convolution as [`super::kernels::conv_forward`], or `None` when
/// this CPU lacks AVX-512.
pub fn conv_forward(g: &ConvGeom, x: &[f32], weight: &[f32], bias: Option<&[f32]>, relu: bool) -> Option<Vec<f32>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(forward(g, x, weight, bias, relu));
        }
    }
    let _ = (g, x, weight, bias, relu);
    None
}

/// Layout of one sample's zero-padded input planes.
struct Padded {
    /// Padding on each side, k/2.
    pad: usize,
    /// Padded row length, `w + k/2`: the left padding, then the row.
    width: usize,
    /// Floats per padded plane.
    plane: usize,
    /// Offset of each kernel tap `(ky, kx)` from an output point.
    taps: Vec<usize>,
    /// Vector blocks covering the output grid (`h` rows of `width`).
    blocks: usize,
}

impl Padded {
    fn new(g: &ConvGeom) -> Padded {
        let width = g.w + g.k / 2;
        let plane = (g.h + g.k - 1) * width;
        let taps = (0..g.k).flat_map(|ky| (0..g.k).map(move |kx| ky * width + kx)).collect();
        Padded { pad: g.k / 2, width, plane, taps, blocks: (g.h * width).div_ceil(LANES) }
    }

    /// Floats in the output grid of one channel.
    fn grid(&self) -> usize {
        self.blocks * LANES
    }

    /// Floats of the padded copy of a sample: the planes, plus room for
    /// the last block's reads past the end (they only feed dropped points).
    fn len(&self, channels: usize) -> usize {
        channels * self.plane + self.grid() + self.taps.last().copied().unwrap_or(0)
    }

    /// Where a padded plane, read from offset `pad·(width + 1)`, is also the
    /// plane on the output grid: each row's dropped columns fall on the zero
    /// border, and so do the grid's last points when the bottom border is
    /// long enough to hold them.
    fn grid_inside_padding(&self, h: usize) -> bool {
        self.pad > 0 && self.grid() - h * self.width <= self.pad * (self.width - 1)
    }
}

/// One sample's planes copied into zero-padded planes (`pad.len(channels)`
/// floats). With `relu_out`, values where the ReLU output is not positive
/// become 0 (the gradient before a ReLU). Adds each plane's sum of what it
/// wrote to `sums` when that is not empty.
///
/// Rows are moved with masked vector loads and plain stores: a `memcpy`
/// call per 19-float row cost more than the copy, and on AMD's Zen 5 a
/// masked store cost more than the rest of the copy (a third of this
/// function's time, by `perf annotate`). Each row's last store writes the
/// masked load's zeros past the row, over the next row's padding, which
/// must be zero, and over data written after it; so only the planes' top
/// and bottom borders need zeroing, where the overshoot covers the padding
/// between rows (else the whole copy is).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn fill_padded(
    pad: &Padded,
    g: &ConvGeom,
    src: &[f32],
    relu_out: Option<&[f32]>,
    channels: usize,
    dst: &mut [f32],
    sums: &mut [f32],
) {
    use std::arch::x86_64::*;
    let points = g.h * g.w;
    assert!(src.len() >= channels * points && relu_out.is_none_or(|y| y.len() >= channels * points));
    assert!(dst.len() >= pad.len(channels) && (sums.is_empty() || sums.len() == channels) && g.w > 0);
    let overshoot = g.w.next_multiple_of(LANES) - g.w;
    if overshoot >= pad.pad {
        let first = pad.pad * pad.width + pad.pad;
        let end = (pad.pad + g.h - 1) * pad.width + pad.pad + g.w;
        for plane in dst[..channels * pad.plane].chunks_exact_mut(pad.plane) {
            plane[..first].fill(0.0);
            plane[end..].fill(0.0);
        }
        dst[channels * pad.plane..].fill(0.0);
    } else {
        dst.fill(0.0);
    }
    // The last row's overshoot stays inside the room after the planes.
    assert!(overshoot <= pad.grid());
    for c in 0..channels {
        let mut total = _mm512_setzero_ps();
        for y in 0..g.h {
            let s = src.as_ptr().add(c * points + y * g.w);
            let m = relu_out.map(|r| r.as_ptr().add(c * points + y * g.w));
            let d = dst.as_mut_ptr().add(c * pad.plane + (y + pad.pad) * pad.width + pad.pad);
            for x in (0..g.w).step_by(LANES) {
                let left = (g.w - x).min(LANES);
                let k: __mmask16 = if left == LANES { !0 } else { (1u16 << left) - 1 };
                let mut v = _mm512_maskz_loadu_ps(k, s.add(x));
                if let Some(m) = m {
                    let positive =
                        _mm512_cmp_ps_mask::<_CMP_GT_OQ>(_mm512_maskz_loadu_ps(k, m.add(x)), _mm512_setzero_ps());
                    v = _mm512_maskz_mov_ps(positive, v);
                }
                _mm512_storeu_ps(d.add(x), v);
                total = _mm512_add_ps(total, v);
            }
        }
        if !sums.is_empty() {
            sums[c] += _mm512_reduce_add_ps(total);
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn forward(g: &ConvGeom, x: &[f32], weight: &[f32], bias: Option<&[f32]>, relu: bool) -> Vec<f32> {
    let points = g.h * g.w;
    assert_eq!(x.len(), g.batch * g.c_in * points, "conv input has the wrong size");
    assert_eq!(weight.len(), g.c_out * g.c_in * g.k * g.k, "conv kernel has the wrong size");
    let pad = Padded::new(g);
    let taps = pad.taps.len();
    // Weights as [ci][tap][co]: the kernel broadcasts consecutive ones.
    let mut w_t = vec![0.0f32; weight.len()];
    for co in 0..g.c_out {
        for ci in 0..g.c_in {
            for t in 0..taps {
                w_t[(ci * taps + t) * g.c_out + co] = weight[(co * g.c_in + ci) * taps + t];
            }
        }
    }
    let grid = pad.grid();
    let mut y = vec![0.0f32; g.batch * g.c_out * points];
    let sample = g.c_in * points;
    y.par_chunks_mut(g.c_out * points).enumerate().for_each(|(b, yb)| {
        let xb = &x[b * sample..][..sample];
        if let Some(next) = x.get((b + 1) * sample..(b + 2) * sample) {
            prefetch(next);
        }
        let input_len = pad.len(g.c_in);
        with_scratch(input_len + g.c_out * grid, |scratch| {
            let (input, out) = scratch.split_at_mut(input_len);
            // SAFETY: AVX-512 was detected by the caller.
            unsafe { fill_padded(&pad, g, xb, None, g.c_in, input, &mut []) };
            convolve(&pad, g, input, &w_t, out);
            for (c, dst) in yb.chunks_exact_mut(points).enumerate() {
                finish_plane(dst, &out[c * grid..], g.w, pad.width, bias.map_or(0.0, |b| b[c]), relu);
            }
        });
    });
    y
}

/// All output channels of one padded sample onto the grid, `out` holding
/// c_out planes of `pad.grid()` floats; `w_t` is the kernel as [ci][tap][co].
#[cfg(target_arch = "x86_64")]
fn convolve(pad: &Padded, g: &ConvGeom, input: &[f32], w_t: &[f32], out: &mut [f32]) {
    let grid = pad.grid();
    assert!(input.len() >= pad.len(g.c_in) && out.len() >= g.c_out * grid);
    assert_eq!(w_t.len(), g.c_out * g.c_in * pad.taps.len());
    let mut co = 0;
    while co < g.c_out {
        let out = &mut out[co * grid..];
        // SAFETY: AVX-512 was detected by the caller; the asserts above
        // bound every read (input: taps stay inside pad.len, weights:
        // co + n ≤ c_out) and write (out: the n planes from co).
        co += unsafe {
            match g.c_out - co {
                8.. => block::<8, 2>(pad, g, input, w_t, co, out, 0..pad.blocks),
                4.. => block::<4, 4>(pad, g, input, w_t, co, out, 0..pad.blocks),
                2.. => block::<2, 4>(pad, g, input, w_t, co, out, 0..pad.blocks),
                _ => block::<1, 8>(pad, g, input, w_t, co, out, 0..pad.blocks),
            }
        };
    }
}

/// The kernel: `CO` output channels starting at `co`, all output blocks,
/// `NB` blocks at a time (the last few one at a time). Accumulators stay
/// in registers across all input channels and taps. Two blocks by 8
/// channels load 2 vectors and broadcast 8 weights for 16 FMAs, where one
/// block by 16 channels needed 17 loads: 8% more policy-net samples a
/// second (`bench train`, AMD Zen 5, 2026-11-26). A single channel takes 8
/// blocks, so that 8 independent sums fill the FMA pipes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block<const CO: usize, const NB: usize>(
    pad: &Padded,
    g: &ConvGeom,
    input: &[f32],
    w_t: &[f32],
    co: usize,
    out: &mut [f32],
    blocks: std::ops::Range<usize>,
) -> usize {
    use std::arch::x86_64::*;
    let groups = blocks.len() / NB;
    if groups * NB < blocks.len() {
        block::<CO, 1>(pad, g, input, w_t, co, out, blocks.start + groups * NB..blocks.end);
    }
    let first = blocks.start;
    let grid = pad.grid();
    let (inp, wp, op) = (input.as_ptr(), w_t.as_ptr().add(co), out.as_mut_ptr());
    for gi in 0..groups {
        let base = (first + gi * NB) * LANES;
        let mut acc = [[_mm512_setzero_ps(); CO]; NB];
        for ci in 0..g.c_in {
            let plane = inp.add(ci * pad.plane + base);
            let w_ci = wp.add(ci * pad.taps.len() * g.c_out);
            for (t, &off) in pad.taps.iter().enumerate() {
                let v: [__m512; NB] = std::array::from_fn(|n| _mm512_loadu_ps(plane.add(off + n * LANES)));
                let w_tap = w_ci.add(t * g.c_out);
                for j in 0..CO {
                    let w = _mm512_set1_ps(*w_tap.add(j));
                    for (acc_n, &v_n) in acc.iter_mut().zip(&v) {
                        acc_n[j] = _mm512_fmadd_ps(w, v_n, acc_n[j]);
                    }
                }
            }
        }
        for (n, acc_n) in acc.iter().enumerate() {
            for (j, a) in acc_n.iter().enumerate() {
                _mm512_storeu_ps(op.add(j * grid + base + n * LANES), *a);
            }
        }
    }
    CO
}

/// Backward convolution as [`super::kernels::conv_backward`] (gradient
/// `dy` after the ReLU whose output was `relu_out`, if any), or `None`
/// without AVX-512 or for kernels other than 3×3-like ones whose grid fits
/// in the padding (see [`Padded::grid_inside_padding`]).
///
/// One pass per sample: `dy` is masked by the ReLU and padded once (its
/// sums give the bias gradient); the padded copy, read on the output grid,
/// feeds the kernel gradient, and read as padded input feeds the input
/// gradient, a forward convolution with the flipped kernel.
pub fn conv_backward(
    g: &ConvGeom,
    x: &[f32],
    weight: &[f32],
    dy: &[f32],
    relu_out: Option<&[f32]>,
    need_dx: bool,
) -> Option<ConvGrads> {
    #[cfg(target_arch = "x86_64")]
    {
        let pad = Padded::new(g);
        if std::arch::is_x86_feature_detected!("avx512f") && g.k == 3 && pad.grid_inside_padding(g.h) {
            return Some(backward(&pad, g, x, weight, dy, relu_out, need_dx));
        }
    }
    let _ = (g, x, weight, dy, relu_out, need_dx);
    None
}

#[cfg(target_arch = "x86_64")]
fn backward(
    pad: &Padded,
    g: &ConvGeom,
    x: &[f32],
    weight: &[f32],
    dy: &[f32],
    relu_out: Option<&[f32]>,
    need_dx: bool,
) -> ConvGrads {
    const TAPS: usize = 9;
    let points = g.h * g.w;
    assert!(x.len() == g.batch * g.c_in * points && dy.len() == g.batch * g.c_out * points);
    assert!(relu_out.is_none_or(|y| y.len() == dy.len()) && weight.len() == g.c_out * g.c_in * TAPS);
    let reversed = ConvGeom { c_in: g.c_out, c_out: g.c_in, ..*g };
    // The input gradient's kernel, flipped and transposed, laid out for
    // `convolve` as [co][tap][ci].
    let mut w_rev = vec![0.0f32; weight.len()];
    for co in 0..g.c_out {
        for ci in 0..g.c_in {
            for t in 0..TAPS {
                w_rev[(co * TAPS + t) * g.c_in + ci] = weight[(co * g.c_in + ci) * TAPS + TAPS - 1 - t];
            }
        }
    }
    let shares = rayon::current_num_threads().clamp(1, g.batch.max(1));
    let per_share = g.batch.div_ceil(shares).max(1);
    let mut dx = vec![0.0f32; if need_dx { g.batch * g.c_in * points } else { 0 }];
    let mut dx_shares: Vec<&mut [f32]> = dx.chunks_mut(per_share * g.c_in * points).collect();
    dx_shares.resize_with(shares, Default::default);
    let (grid, x_len, dy_len) = (pad.grid(), pad.len(g.c_in), pad.len(g.c_out));
    let partial: Vec<(Vec<f32>, Vec<f32>)> = dx_shares
        .into_par_iter()
        .enumerate()
        .map(|(share, dx_share)| {
            let mut lanes = vec![0.0f32; g.c_out * g.c_in * TAPS * LANES];
            let mut db = vec![0.0f32; g.c_out];
            for (i, b) in (share * per_share..((share + 1) * per_share).min(g.batch)).enumerate() {
                let xb = &x[b * g.c_in * points..][..g.c_in * points];
                let dyb = &dy[b * g.c_out * points..][..g.c_out * points];
                let yb = relu_out.map(|y| &y[b * g.c_out * points..][..g.c_out * points]);
                if b + 1 < g.batch {
                    prefetch(&x[(b + 1) * g.c_in * points..][..g.c_in * points]);
                    prefetch(&dy[(b + 1) * g.c_out * points..][..g.c_out * points]);
                    if let Some(y) = relu_out {
                        prefetch(&y[(b + 1) * g.c_out * points..][..g.c_out * points]);
                    }
                }
                with_scratch(x_len + dy_len + g.c_in * grid, |scratch| {
                    let (px, rest) = scratch.split_at_mut(x_len);
                    let (pdy, out) = rest.split_at_mut(dy_len);
                    // SAFETY: AVX-512 was detected by the caller.
                    unsafe {
                        fill_padded(pad, g, xb, None, g.c_in, px, &mut []);
                        fill_padded(pad, &reversed, dyb, yb, g.c_out, pdy, &mut db);
                    }
                    // dy on the output grid: the padded copy from its first
                    // real point on (grid_inside_padding holds).
                    let on_grid = &pdy[pad.pad * (pad.width + 1)..];
                    assert!(on_grid.len() >= (g.c_out - 1) * pad.plane + grid && px.len() >= x_len);
                    let mut co = 0;
                    while co < g.c_out {
                        // SAFETY: AVX-512 was detected; reads stay inside px
                        // (pad.len) and on_grid (c_out planes, asserted), and
                        // writes inside lanes, as co + CO ≤ c_out.
                        co += unsafe {
                            match g.c_out - co {
                                3.. => weight_grad_block::<3, TAPS>(pad, g, px, on_grid, co, &mut lanes),
                                2 => weight_grad_block::<2, TAPS>(pad, g, px, on_grid, co, &mut lanes),
                                _ => weight_grad_block::<1, TAPS>(pad, g, px, on_grid, co, &mut lanes),
                            }
                        };
                    }
                    if need_dx {
                        convolve(pad, &reversed, pdy, &w_rev, out);
                        let dxb = &mut dx_share[i * g.c_in * points..][..g.c_in * points];
                        for (c, dst) in dxb.chunks_exact_mut(points).enumerate() {
                            finish_plane(dst, &out[c * grid..], g.w, pad.width, 0.0, false);
                        }
                    }
                });
            }
            (lanes.chunks_exact(LANES).map(|l| l.iter().sum()).collect(), db)
        })
        .collect();
    let mut parts = partial.into_iter();
    let (mut dweight, mut dbias) = parts.next().unwrap_or_default();
    for (dw, db) in parts {
        add_assign(&mut dweight, &dw);
        add_assign(&mut dbias, &db);
    }
    ConvGrads { dx: need_dx.then_some(dx), dweight, dbias }
}

/// Adds the dot products of output channels `co..co + CO` of `dy` (planes
/// `pad.plane` apart, on the output grid) with every input channel of the
/// padded `input` under each of the `T` taps into `lanes`; 3 × 9
/// accumulators fit the 32 vector registers with room for the loads (12
/// loads for 27 FMAs; 2 × 9 needed 11 for 18, and the policy net trained
/// 8% slower: `bench train`, AMD Zen 5, 2026-11-26).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weight_grad_block<const CO: usize, const T: usize>(
    pad: &Padded,
    g: &ConvGeom,
    input: &[f32],
    dy: &[f32],
    co: usize,
    lanes: &mut [f32],
) -> usize {
    use std::arch::x86_64::*;
    let offs: [usize; T] = std::array::from_fn(|t| pad.taps[t]);
    for ci in 0..g.c_in {
        let plane = input.as_ptr().add(ci * pad.plane);
        let mut acc = [[_mm512_setzero_ps(); T]; CO];
        for b in 0..pad.blocks {
            let base = b * LANES;
            let d: [__m512; CO] =
                std::array::from_fn(|j| _mm512_loadu_ps(dy.as_ptr().add((co + j) * pad.plane + base)));
            for (t, &off) in offs.iter().enumerate() {
                let v = _mm512_loadu_ps(plane.add(base + off));
                for j in 0..CO {
                    acc[j][t] = _mm512_fmadd_ps(d[j], v, acc[j][t]);
                }
            }
        }
        for (j, acc_j) in acc.iter().enumerate() {
            for (t, a) in acc_j.iter().enumerate() {
                let p = lanes.as_mut_ptr().add((((co + j) * g.c_in + ci) * T + t) * LANES);
                _mm512_storeu_ps(p, _mm512_add_ps(_mm512_loadu_ps(p), *a));
            }
        }
    }
    CO
}

/// Asks for `data` in the core's L2 cache: the next sample's planes,
/// fetched while this one is convolved. Without it the padded copy waited
/// on memory for 15% of a playout-net step (`perf annotate`, Zen 5); the
/// hardware prefetcher barely starts on a 23 kB stream.
fn prefetch(data: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in data.chunks(16) {
        // SAFETY: a prefetch of an address inside a live slice.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

fn add_assign(acc: &mut [f32], v: &[f32]) {
    for (a, b) in acc.iter_mut().zip(v) {
        *a += b;
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn forward(_: &ConvGeom, _: &[f32], _: &[f32], _: Option<&[f32]>, _: bool) -> Vec<f32> {
    unreachable!("conv_forward declines before calling this off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::kernels::{conv_backward_gemm, conv_forward_gemm};

    #[test]
    fn direct_matches_gemm_path() {
        // 7×6 planes have fewer blocks than any kernel takes at once; 19×19
        // ones (25 blocks) have full groups of 2, 4 and 8 and leftovers.
        let shapes = [(3, 5, 21, true, 7, 6), (3, 16, 16, false, 7, 6), (1, 3, 2, true, 7, 6), (5, 2, 3, false, 7, 6)];
        let board = [(3, 3, 9, true, 19, 19), (3, 4, 6, false, 19, 19)];
        for (k, c_in, c_out, relu, h, w) in shapes.into_iter().chain(board) {
            let g = ConvGeom { batch: 3, c_in, c_out, k, h, w };
            let x: Vec<f32> = (0..g.batch * c_in * h * w).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            let w: Vec<f32> = (0..c_out * c_in * k * k).map(|i| ((i * 13) % 7) as f32 * 0.1 - 0.3).collect();
            let b: Vec<f32> = (0..c_out).map(|i| i as f32 * 0.01).collect();
            let Some(fast) = conv_forward(&g, &x, &w, Some(&b), relu) else { return };
            let slow = conv_forward_gemm(&g, &x, &w, Some(&b), relu);
            let diff = fast.iter().zip(&slow).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-4, "k={k} {c_in}->{c_out}: max diff {diff}");
        }
    }

    #[test]
    fn direct_backward_matches_gemm_path() {
        let cases = [(5, 3, true, true), (16, 16, false, true), (3, 1, true, false), (4, 5, true, true)];
        // 7 rows of 9 padded points (8 and the padding) and the board's 19
        // rows of 20: the grid's 1 and 4 extra points fall on the bottom
        // border, so the fused path applies.
        for ((c_in, c_out, relu, need_dx), (h, w)) in cases.into_iter().flat_map(|c| [(c, (7, 8)), (c, (19, 19))]) {
            let g = ConvGeom { batch: 3, c_in, c_out, k: 3, h, w };
            let points = h * w;
            let x: Vec<f32> = (0..g.batch * c_in * points).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            let w: Vec<f32> = (0..c_out * c_in * 9).map(|i| ((i * 13) % 7) as f32 * 0.1 - 0.3).collect();
            let dy: Vec<f32> = (0..g.batch * c_out * points).map(|i| ((i * 13) % 7) as f32 * 0.1 - 0.3).collect();
            let y: Vec<f32> = (0..g.batch * c_out * points).map(|i| ((i * 5) % 3) as f32 - 1.0).collect();
            let relu_out = relu.then_some(&y[..]);
            let Some(fast) = conv_backward(&g, &x, &w, &dy, relu_out, need_dx) else {
                #[cfg(target_arch = "x86_64")]
                assert!(!std::arch::is_x86_feature_detected!("avx512f"), "the fused path declined");
                return;
            };
            let slow = conv_backward_gemm(&g, &x, &w, &dy, relu_out, need_dx);
            let diff = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff(&fast.dweight, &slow.dweight) < 1e-3, "{c_in}->{c_out}: kernel gradient");
            assert!(diff(&fast.dbias, &slow.dbias) < 1e-3, "{c_in}->{c_out}: bias gradient");
            assert_eq!(fast.dx.is_some(), need_dx);
            if let (Some(a), Some(b)) = (&fast.dx, &slow.dx) {
                assert!(diff(a, b) < 1e-4, "{c_in}->{c_out}: input gradient");
            }
        }
    }
}
