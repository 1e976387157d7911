//! A batch's inputs and targets as tensors on a net's device. On a GPU,
//! with [`Fused::Inputs`] on, every copy goes through pinned memory, so
//! that the host never waits for the GPU to take a batch, and planes given
//! as bits are unpacked there (`cuda::upload`); elsewhere the data is
//! copied as it is.

use candle_core::{Device, Result, Shape, Tensor, WithDType};

use super::switches::Fused;
use crate::features::PackedPlanes;

/// Whether inputs on `device` should travel as bits through pinned memory.
pub fn packed_on(device: &Device) -> bool {
    device.is_cuda() && Fused::Inputs.enabled()
}

/// Whether positions judged in play on `device` go in batches padded to
/// [`padded_rows`]: on a GPU. cuDNN's algorithms are timed for each new
/// shape, and self-play's batches shrink by a game or two a step as games
/// end: on an H100 2,048 games ran 141,856 an hour while the GPU was
/// mostly timing algorithms. The extra rows are positions of nothing, cut
/// from the output; in play batch norm uses its running statistics, so
/// they change no other row.
pub fn pads_on(device: &Device) -> bool {
    device.is_cuda()
}

/// Batch sizes up to this are padded to a power of two, larger ones to a
/// multiple of it.
const BUCKET: usize = 64;

/// The rows a padded batch of `n` positions takes: `n` rounded up to a
/// power of two up to [`BUCKET`], then to a multiple of it (14 sizes up
/// to 512).
pub fn padded_rows(n: usize) -> usize {
    if n <= BUCKET {
        n.next_power_of_two()
    } else {
        n.div_ceil(BUCKET) * BUCKET
    }
}

/// `data` as a tensor of `shape` on `device`.
pub fn tensor<T: WithDType + CudaValue>(data: &[T], shape: impl Into<Shape>, device: &Device) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if let (Device::Cuda(dev), true) = (device, packed_on(device)) {
        let shape = shape.into();
        if shape.elem_count() != data.len() {
            candle_core::bail!("{} values for a tensor of shape {shape:?}", data.len());
        }
        let storage = T::wrap(super::cuda::upload::to_device(dev, data)?, dev);
        return Ok(on_gpu(storage, shape));
    }
    Tensor::from_slice(data, shape, device)
}

/// Planes given as bits, `words` holding `n` records of `planes` planes
/// of `size × size` points, each plane `⌈size² / 64⌉` words with point i at
/// bit i % 64 of word i / 64 (as [`PackedPlanes`] keeps them), as a
/// (n, planes, size, size) tensor of 0.0 and 1.0 on `device`.
pub fn planes_from_bits(words: &[u64], (n, planes, size): (usize, usize, usize), device: &Device) -> Result<Tensor> {
    let points = size * size;
    let per_record = planes * points.div_ceil(64);
    if words.len() != n * per_record {
        candle_core::bail!("{} words of planes for {n} records of {planes} planes of {size}×{size}", words.len());
    }
    #[cfg(feature = "cuda")]
    if let Device::Cuda(dev) = device {
        let storage = super::cuda::upload::planes_from_bits(dev, words, n * planes, points)?;
        return Ok(on_gpu(storage, (n, planes, size, size).into()));
    }
    let mut values = vec![0f32; n * planes * points];
    for (record, out) in words.chunks_exact(per_record.max(1)).zip(values.chunks_exact_mut(planes * points)) {
        let packed = PackedPlanes::from_words(size, planes, record.to_vec()).expect("per_record words a record");
        packed.unpack_into(out);
    }
    Tensor::from_vec(values, (n, planes, size, size), device)
}

/// A tensor over a fresh GPU buffer.
#[cfg(feature = "cuda")]
fn on_gpu(storage: candle_core::CudaStorage, shape: Shape) -> Tensor {
    Tensor::from_storage(candle_core::Storage::Cuda(storage), shape, candle_core::op::BackpropOp::none(), false)
}

/// Element types [`tensor`] takes: those candle's GPU storage holds.
#[cfg(feature = "cuda")]
pub trait CudaValue:
    candle_core::cuda_backend::CudaDType + candle_core::cuda_backend::cudarc::driver::DeviceRepr
{
    /// A buffer of them as candle's storage.
    fn wrap(
        slice: candle_core::cuda_backend::cudarc::driver::CudaSlice<Self>,
        dev: &candle_core::cuda_backend::CudaDevice,
    ) -> candle_core::CudaStorage {
        candle_core::CudaStorage::wrap_cuda_slice(slice, dev.clone())
    }
}
#[cfg(feature = "cuda")]
impl<T: candle_core::cuda_backend::CudaDType + candle_core::cuda_backend::cudarc::driver::DeviceRepr> CudaValue for T {}

/// Element types [`tensor`] takes (any, without the `cuda` feature).
#[cfg(not(feature = "cuda"))]
pub trait CudaValue {}
#[cfg(not(feature = "cuda"))]
impl<T> CudaValue for T {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Up to 512 positions take 14 shapes, each at least the batch and
    /// at most 63 rows (or twice the batch, below 64) more.
    #[test]
    fn batches_on_a_gpu_take_few_shapes() {
        let sizes: std::collections::BTreeSet<usize> = (1..=512).map(padded_rows).collect();
        assert_eq!(sizes.len(), 14, "{sizes:?}");
        for n in 1..=2048 {
            let rows = padded_rows(n);
            assert!(rows >= n && (rows < 2 * n || rows == 1) && (n <= BUCKET || rows - n < BUCKET), "{n} -> {rows}");
        }
        assert!(!pads_on(&Device::Cpu), "no padding on the CPU");
    }
}
