//! Which collective a training process joins: alone, or one rank of an
//! NCCL communicator, as the launcher's variables say. Above both
//! [`super::distributed`] (the ranks and their operations) and
//! [`super::nccl`] (the communicator) so that neither names the other.

#[cfg(not(feature = "nccl"))]
use anyhow::bail;
use anyhow::Result;

use super::distributed::{Alone, Collective, World};
use super::rendezvous::Rendezvous;

/// The collective of this process: [`Alone`] in a world of one, else an
/// NCCL communicator on the rank's GPU, meeting the others as
/// [`Rendezvous::from_env`] says (`dir`: the shared checkpoint folder).
/// `GO_TRAIN_COLLECTIVE=nccl` takes the NCCL path even for one process:
/// the check of that path on a machine with one GPU.
pub fn join(world: World, device_spec: &str, dir: &std::path::Path) -> Result<Box<dyn Collective>> {
    let forced = std::env::var("GO_TRAIN_COLLECTIVE").is_ok_and(|v| v == "nccl");
    if world.size == 1 && !forced {
        return Ok(Box::new(Alone::new()));
    }
    let meet = match world.size {
        1 => None,
        _ => Some(Rendezvous::from_env(|name| std::env::var(name).ok(), dir)?),
    };
    #[cfg(feature = "nccl")]
    {
        let device = crate::nn::device(&world.device_spec(device_spec))?;
        let rank = world.rank;
        let nccl = super::nccl::Nccl::connect(world, &device, meet.as_ref())?;
        if let Some(meet) = &meet {
            // Every rank has read it once all are past a collective.
            nccl.barrier()?;
            meet.finish(rank)?;
        }
        Ok(Box::new(nccl))
    }
    #[cfg(not(feature = "nccl"))]
    {
        let _ = (device_spec, meet);
        bail!(
            "{}: {} ranks, but this go-train was built without NCCL: build it with --features nccl \
             (GO_TRAIN_NCCL=1 scripts/build-cuda.sh; docs/guide/gpu.md)",
            world.source,
            world.size
        )
    }
}
