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
//! Output points are computed on the padded width (`w + k − 1` per row), so
//! that each tap is a constant offset into the padded plane; the extra
//! columns are garbage and dropped when the result is written out.

use std::ops::Range;

use rayon::prelude::*;

use super::kernels::{finish_plane, with_scratch, ConvGeom};

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
    /// Padded row length, `w + k − 1`.
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
        let width = g.w + g.k - 1;
        let plane = (g.h + g.k - 1) * width;
        let taps = (0..g.k).flat_map(|ky| (0..g.k).map(move |kx| ky * width + kx)).collect();
        Padded { width, plane, taps, blocks: (g.h * width).div_ceil(LANES) }
    }

    /// Floats of the padded copy of a sample: the planes, plus room for
    /// the last block's reads past the end (they only feed dropped points).
    fn len(&self, channels: usize) -> usize {
        channels * self.plane + self.blocks * LANES + self.taps.last().copied().unwrap_or(0)
    }

    /// Copies one sample (`channels` planes of h×w) into `dst` with a zero
    /// border of k/2.
    fn fill(&self, g: &ConvGeom, src: &[f32], channels: usize, dst: &mut [f32]) {
        dst.fill(0.0);
        let pad = g.k / 2;
        for (plane, out) in src.chunks_exact(g.h * g.w).take(channels).zip(dst.chunks_exact_mut(self.plane)) {
            for (row, out_row) in plane.chunks_exact(g.w).zip(out[pad * self.width..].chunks_exact_mut(self.width)) {
                out_row[pad..pad + g.w].copy_from_slice(row);
            }
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
    let grid = pad.blocks * LANES;
    let mut y = vec![0.0f32; g.batch * g.c_out * points];
    y.par_chunks_mut(g.c_out * points).zip(x.par_chunks(g.c_in * points)).for_each(|(yb, xb)| {
        let input_len = pad.len(g.c_in);
        with_scratch(input_len + g.c_out * grid, |scratch| {
            let (input, out) = scratch.split_at_mut(input_len);
            pad.fill(g, xb, g.c_in, input);
            let mut co = 0;
            while co < g.c_out {
                let n = run_block(&pad, g, input, &w_t, co, &mut out[co * grid..]);
                co += n;
            }
            for (c, dst) in yb.chunks_exact_mut(points).enumerate() {
                finish_plane(dst, &out[c * grid..], g.w, pad.width, bias.map_or(0.0, |b| b[c]), relu);
            }
        });
    });
    y
}

/// Computes output channels `co..co + n` for the largest supported block
/// n ≤ the channels left; returns n.
#[cfg(target_arch = "x86_64")]
fn run_block(pad: &Padded, g: &ConvGeom, input: &[f32], w_t: &[f32], co: usize, out: &mut [f32]) -> usize {
    let left = g.c_out - co;
    let grid = pad.blocks * LANES;
    assert!(input.len() >= pad.len(g.c_in) && out.len() >= left.min(LANES) * grid && w_t.len() == g.c_out * g.c_in * pad.taps.len());
    // SAFETY: AVX-512 was detected by the caller; the assert above bounds
    // every read (input: taps stay inside pad.len, weights: co + n ≤ c_out)
    // and write (out: n planes of grid floats).
    unsafe {
        match left {
            16.. => block::<16>(pad, g, input, w_t, co, out),
            8.. => block::<8>(pad, g, input, w_t, co, out),
            4.. => block::<4>(pad, g, input, w_t, co, out),
            2.. => block::<2>(pad, g, input, w_t, co, out),
            _ => block::<1>(pad, g, input, w_t, co, out),
        }
    }
}

/// The kernel: `CO` output channels starting at `co`, all output blocks.
/// Accumulators stay in registers across all input channels and taps.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block<const CO: usize>(pad: &Padded, g: &ConvGeom, input: &[f32], w_t: &[f32], co: usize, out: &mut [f32]) -> usize {
    use std::arch::x86_64::*;
    let grid = pad.blocks * LANES;
    let (inp, wp, op) = (input.as_ptr(), w_t.as_ptr().add(co), out.as_mut_ptr());
    for b in 0..pad.blocks {
        let base = b * LANES;
        let mut acc = [_mm512_setzero_ps(); CO];
        for ci in 0..g.c_in {
            let plane = inp.add(ci * pad.plane + base);
            let w_ci = wp.add(ci * pad.taps.len() * g.c_out);
            for (t, &off) in pad.taps.iter().enumerate() {
                let v = _mm512_loadu_ps(plane.add(off));
                let w_tap = w_ci.add(t * g.c_out);
                for (j, a) in acc.iter_mut().enumerate() {
                    *a = _mm512_fmadd_ps(_mm512_set1_ps(*w_tap.add(j)), v, *a);
                }
            }
        }
        for (j, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(op.add(j * grid + base), *a);
        }
    }
    CO
}

/// Kernel gradient `Σ_b dy[b] ⋆ x[b]` over `samples`, laid out as the
/// kernel (c_out, c_in, k, k); `None` without AVX-512 or for kernel sizes
/// other than 1 and 3.
pub fn weight_grad(g: &ConvGeom, x: &[f32], dy: &[f32], samples: Range<usize>) -> Option<Vec<f32>> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") && (g.k == 1 || g.k == 3) {
            return Some(weight_grad_avx512(g, x, dy, samples));
        }
    }
    let _ = (g, x, dy, samples);
    None
}

/// For each sample: pad it, lay `dy` out on the padded grid (zeros in the
/// dropped columns, so they add nothing), and add every (output channel,
/// input channel, tap) dot product over the grid into 16-lane partial sums;
/// the lanes are added up once at the end.
#[cfg(target_arch = "x86_64")]
fn weight_grad_avx512(g: &ConvGeom, x: &[f32], dy: &[f32], samples: Range<usize>) -> Vec<f32> {
    let points = g.h * g.w;
    let pad = Padded::new(g);
    let (taps, grid) = (pad.taps.len(), pad.blocks * LANES);
    let mut lanes = vec![0.0f32; g.c_out * g.c_in * taps * LANES];
    let input_len = pad.len(g.c_in);
    for b in samples {
        let xb = &x[b * g.c_in * points..][..g.c_in * points];
        let dyb = &dy[b * g.c_out * points..][..g.c_out * points];
        with_scratch(input_len + g.c_out * grid, |scratch| {
            let (input, dyg) = scratch.split_at_mut(input_len);
            pad.fill(g, xb, g.c_in, input);
            dyg.fill(0.0);
            for (plane, out) in dyb.chunks_exact(points).zip(dyg.chunks_exact_mut(grid)) {
                for (row, out_row) in plane.chunks_exact(g.w).zip(out.chunks_mut(pad.width)) {
                    out_row[..g.w].copy_from_slice(row);
                }
            }
            assert!(input.len() >= pad.len(g.c_in) && dyg.len() == g.c_out * grid);
            let mut co = 0;
            while co < g.c_out {
                // SAFETY: AVX-512 was detected; reads stay inside input
                // (pad.len) and dyg (c_out planes of grid), writes inside
                // lanes (c_out × c_in × taps × 16), as co + CO ≤ c_out.
                co += unsafe {
                    match (g.k, g.c_out - co) {
                        (3, 2..) => weight_grad_block::<2, 9>(&pad, g, input, dyg, co, &mut lanes),
                        (3, _) => weight_grad_block::<1, 9>(&pad, g, input, dyg, co, &mut lanes),
                        (_, 8..) => weight_grad_block::<8, 1>(&pad, g, input, dyg, co, &mut lanes),
                        (_, _) => weight_grad_block::<1, 1>(&pad, g, input, dyg, co, &mut lanes),
                    }
                };
            }
        });
    }
    lanes.chunks_exact(LANES).map(|l| l.iter().sum()).collect()
}

/// Adds the dot products of output channels `co..co + CO` with every input
/// channel under each of the `T` taps into `lanes`; 2 × 9 accumulators fit
/// the 32 vector registers with room for the loads.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn weight_grad_block<const CO: usize, const T: usize>(
    pad: &Padded,
    g: &ConvGeom,
    input: &[f32],
    dyg: &[f32],
    co: usize,
    lanes: &mut [f32],
) -> usize {
    use std::arch::x86_64::*;
    let grid = pad.blocks * LANES;
    let offs: [usize; T] = std::array::from_fn(|t| pad.taps[t]);
    for ci in 0..g.c_in {
        let plane = input.as_ptr().add(ci * pad.plane);
        let mut acc = [[_mm512_setzero_ps(); T]; CO];
        for b in 0..pad.blocks {
            let base = b * LANES;
            let d: [__m512; CO] = std::array::from_fn(|j| _mm512_loadu_ps(dyg.as_ptr().add((co + j) * grid + base)));
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

#[cfg(not(target_arch = "x86_64"))]
fn weight_grad_avx512(_: &ConvGeom, _: &[f32], _: &[f32], _: Range<usize>) -> Vec<f32> {
    unreachable!("weight_grad declines before calling this off x86-64")
}

#[cfg(not(target_arch = "x86_64"))]
fn forward(_: &ConvGeom, _: &[f32], _: &[f32], _: Option<&[f32]>, _: bool) -> Vec<f32> {
    unreachable!("conv_forward declines before calling this off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::kernels::{conv_forward_gemm, weight_grad_gemm};

    #[test]
    fn direct_matches_gemm_path() {
        for (k, c_in, c_out, relu) in [(3, 5, 21, true), (3, 16, 16, false), (1, 3, 2, true), (5, 2, 3, false)] {
            let g = ConvGeom { batch: 3, c_in, c_out, k, h: 7, w: 6 };
            let x: Vec<f32> = (0..g.batch * c_in * 42).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            let w: Vec<f32> = (0..c_out * c_in * k * k).map(|i| ((i * 13) % 7) as f32 * 0.1 - 0.3).collect();
            let b: Vec<f32> = (0..c_out).map(|i| i as f32 * 0.01).collect();
            let Some(fast) = conv_forward(&g, &x, &w, Some(&b), relu) else { return };
            let slow = conv_forward_gemm(&g, &x, &w, Some(&b), relu);
            let diff = fast.iter().zip(&slow).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-4, "k={k} {c_in}->{c_out}: max diff {diff}");
        }
    }

    #[test]
    fn direct_weight_gradient_matches_gemm_path() {
        for (k, c_in, c_out) in [(3, 5, 3), (3, 16, 16), (1, 3, 10)] {
            let g = ConvGeom { batch: 3, c_in, c_out, k, h: 7, w: 6 };
            let x: Vec<f32> = (0..g.batch * c_in * 42).map(|i| ((i * 37) % 11) as f32 - 5.0).collect();
            let dy: Vec<f32> = (0..g.batch * c_out * 42).map(|i| ((i * 13) % 7) as f32 * 0.1 - 0.3).collect();
            let Some(fast) = weight_grad(&g, &x, &dy, 1..3) else { return };
            let slow = weight_grad_gemm(&g, &x, &dy, 1..3);
            let diff = fast.iter().zip(&slow).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(diff < 1e-3, "k={k} {c_in}->{c_out}: max diff {diff}");
        }
    }
}
