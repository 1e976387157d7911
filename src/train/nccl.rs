//! The NCCL collective of data-parallel training (`--features nccl`):
//! one communicator per process, its GPU the rank's, its unique id passed
//! from rank 0 through a [`Rendezvous`]. The all-reduce runs as a candle
//! custom op on the tensor's CUDA buffer, on the device's stream, as
//! candle's multi-process examples do.

use std::rc::Rc;

use anyhow::{anyhow, Result};
use candle_core::backend::BackendStorage;
use candle_core::cuda::cudarc::nccl::safe::{Comm, Id, ReduceOp};
use candle_core::{CpuStorage, CudaStorage, CustomOp1, Device, Layout, Shape, Tensor};

use super::distributed::{Collective, World};
use super::rendezvous::Rendezvous;

/// Bytes of an NCCL unique id.
const ID_BYTES: usize = 128;

/// An NCCL communicator of the run, on this rank's GPU.
pub struct Nccl {
    world: World,
    device: Device,
    comm: Rc<Comm>,
}

impl Nccl {
    /// Joins the communicator of `world` on `device` (a CUDA device),
    /// meeting the other ranks at `meet` (`None` for a world of one).
    pub fn connect(world: World, device: &Device, meet: Option<&Rendezvous>) -> Result<Nccl> {
        let cuda = device.as_cuda_device().map_err(|_| anyhow!("NCCL needs a CUDA device (--device cuda)"))?;
        let id = if world.is_leader() {
            let id = Id::new().map_err(|e| anyhow!("creating an NCCL id: {e:?}"))?;
            let bytes: Vec<u8> = id.internal().iter().map(|&c| c as u8).collect();
            if let Some(meet) = meet {
                meet.exchange(world.rank, world.size, Some(&bytes), ID_BYTES)?;
            }
            id
        } else {
            let meet = meet.ok_or_else(|| anyhow!("rank {} of {}: nowhere to meet rank 0", world.rank, world.size))?;
            let bytes = meet.exchange(world.rank, world.size, None, ID_BYTES)?;
            let mut internal = [0 as std::ffi::c_char; ID_BYTES];
            internal.iter_mut().zip(&bytes).for_each(|(c, &b)| *c = b as std::ffi::c_char);
            Id::uninit(internal)
        };
        let comm = Comm::from_rank(cuda.cuda_stream(), world.rank, world.size, id)
            .map_err(|e| anyhow!("rank {} of {}: joining the NCCL communicator: {e:?}", world.rank, world.size))?;
        Ok(Nccl { world, device: device.clone(), comm: Rc::new(comm) })
    }
}

impl Collective for Nccl {
    fn world(&self) -> &World {
        &self.world
    }

    fn all_reduce_sum(&self, values: &Tensor) -> Result<Tensor> {
        let on_gpu = values.to_dtype(candle_core::DType::F32)?.to_device(&self.device)?.contiguous()?;
        let summed = on_gpu.apply_op1_no_bwd(&AllReduceSum { comm: self.comm.clone() })?;
        Ok(summed.to_device(values.device())?)
    }
}

/// ncclAllReduce(sum) of an f32 CUDA tensor into a new one.
struct AllReduceSum {
    comm: Rc<Comm>,
}

// SAFETY: candle asks custom ops to be Send and Sync; this one is made,
// applied and dropped on the one thread that owns the communicator (the
// training loop's), and never shared.
unsafe impl Send for AllReduceSum {}
unsafe impl Sync for AllReduceSum {}

impl CustomOp1 for AllReduceSum {
    fn name(&self) -> &'static str {
        "nccl-all-reduce-sum"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        candle_core::bail!("NCCL reduces CUDA tensors only")
    }

    fn cuda_fwd(&self, storage: &CudaStorage, layout: &Layout) -> candle_core::Result<(CudaStorage, Shape)> {
        let Some((start, end)) = layout.contiguous_offsets() else {
            candle_core::bail!("all-reduce of a tensor that is not contiguous")
        };
        let source = storage.as_cuda_slice::<f32>()?.slice(start..end);
        let device = storage.device().clone();
        let mut summed = device.alloc_zeros::<f32>(end - start)?;
        self.comm
            .all_reduce(&source, &mut summed, &ReduceOp::Sum)
            .map_err(|e| candle_core::Error::Msg(format!("ncclAllReduce: {e:?}")))?;
        Ok((CudaStorage::wrap_cuda_slice(summed, device), layout.shape().clone()))
    }
}
