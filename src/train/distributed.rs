//! Data-parallel training: one process per GPU, on one machine or many,
//! launched by Slurm's `srun` or by `torchrun`, gradients averaged by an
//! all-reduce after every step (NCCL with `--features nccl`).
//!
//! Every rank reads the same epoch stream of records (the same seed and
//! epoch give the same order and symmetries) and trains on its own slice
//! of each global batch ([`crate::dataset::BatchOptions::ranks`]). Each
//! rank's gradient, a mean over its slice, is weighted by the slice's share
//! of the global batch before the sum over ranks, so the step is the one a
//! single process takes on the whole global batch: the same `batch`, the
//! same learning rate, whatever the number of ranks; resuming with another
//! number of ranks goes on with the same run. (Batch-norm statistics are
//! the exception: each rank normalises over its own slice, as PyTorch's
//! DDP does without SyncBatchNorm.)
//!
//! Rank 0 alone writes checkpoints, metrics and plots, and scores the
//! validation split; the others wait for it at the next collective.

use std::ops::Range;
use std::sync::{Arc, Barrier, Mutex};

use anyhow::{bail, Context, Result};
use candle_core::backprop::GradStore;
use candle_core::{DType, Tensor, Var};

/// This process's place among the training processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// 0 to `size - 1`; rank 0 writes the checkpoints.
    pub rank: usize,
    /// Number of processes.
    pub size: usize,
    /// Rank among the processes on this machine: the GPU it uses.
    pub local_rank: usize,
    /// Where these came from, for the log.
    pub source: String,
}

impl World {
    /// One process.
    pub fn single() -> World {
        World { rank: 0, size: 1, local_rank: 0, source: "one process".into() }
    }

    /// From the launcher's variables: torchrun's `RANK`, `WORLD_SIZE`,
    /// `LOCAL_RANK`, else Slurm's `SLURM_PROCID`, `SLURM_STEP_NUM_TASKS`,
    /// `SLURM_LOCALID` (an `srun` task), else one process. torchrun's come
    /// first: inside a Slurm allocation they are what the job meant. The
    /// step's task count, not the job's `SLURM_NTASKS`: a batch script of
    /// a job of N tasks has `SLURM_PROCID=0` and `SLURM_NTASKS=N` too,
    /// and go-train run there directly, not under `srun`, is one process
    /// (taken for rank 0 of N, it waited for ranks that never came).
    /// `env` reads a variable.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<World> {
        let launchers = [
            ("torchrun", ["RANK", "WORLD_SIZE", "LOCAL_RANK"]),
            ("srun", ["SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"]),
        ];
        for (launcher, [rank, size, local]) in launchers {
            let (Some(r), Some(s)) = (env(rank), env(size)) else { continue };
            let number = |name: &str, v: &str| -> Result<usize> {
                v.trim().parse().with_context(|| format!("{name}={v}: not a number"))
            };
            let (rank_n, size_n) = (number(rank, &r)?, number(size, &s)?);
            let local_n = match env(local) {
                Some(l) => number(local, &l)?,
                None => 0,
            };
            if size_n == 0 || rank_n >= size_n {
                bail!("{rank}={r} with {size}={s}: a rank is 0 to {size} - 1");
            }
            let source = format!("{launcher}: {rank}={rank_n}, {size}={size_n}, {local}={local_n}");
            return Ok(World { rank: rank_n, size: size_n, local_rank: local_n, source });
        }
        Ok(World::single())
    }

    /// Whether this process writes what the run leaves.
    pub fn is_leader(&self) -> bool {
        self.rank == 0
    }

    /// The device this rank trains on, for the config's `spec`: with
    /// several ranks, `cuda` and `auto` mean this machine's GPU number
    /// `local_rank` (one process per GPU), or the one GPU the rank sees
    /// when the launcher gave each its own (`CUDA_VISIBLE_DEVICES` of one
    /// device, as `srun --gpus-per-task=1` sets: `cuda:LOCAL_RANK` was no
    /// device there).
    pub fn device_spec(&self, spec: &str) -> String {
        self.device_spec_seeing(spec, std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref())
    }

    fn device_spec_seeing(&self, spec: &str, visible: Option<&str>) -> String {
        let one_gpu = visible.is_some_and(|v| !v.trim().is_empty() && !v.contains(','));
        match spec {
            "cuda" | "auto" if self.size > 1 && one_gpu => "cuda:0".to_string(),
            "cuda" | "auto" if self.size > 1 => format!("cuda:{}", self.local_rank),
            _ => spec.to_string(),
        }
    }

    /// This rank's records of a global batch of `n`: contiguous, sizes
    /// differing by one at most.
    pub fn slice(&self, n: usize) -> Range<usize> {
        crate::dataset::reader::rank_slice(self.rank, self.size, n)
    }
}

/// The collective operations training needs.
pub trait Collective {
    fn world(&self) -> &World;

    /// The sum over ranks of each rank's `values` (a 1-d f32 tensor of the
    /// same length on every rank).
    fn all_reduce_sum(&self, values: &Tensor) -> Result<Tensor>;

    /// Rank 0's `values` on every rank.
    fn broadcast(&self, values: &Tensor) -> Result<Tensor> {
        let mine = if self.world().is_leader() { values.clone() } else { values.zeros_like()? };
        self.all_reduce_sum(&mine)
    }

    /// Whether every collective is the identity (one process, no
    /// communicator): training then skips them.
    fn is_alone(&self) -> bool {
        false
    }

    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()> {
        let one = Tensor::ones(1, DType::F32, &candle_core::Device::Cpu)?;
        self.all_reduce_sum(&one).map(drop)
    }
}

/// A world of one: every collective is the identity.
pub struct Alone(World);

impl Alone {
    pub fn new() -> Alone {
        Alone(World::single())
    }
}

impl Default for Alone {
    fn default() -> Alone {
        Alone::new()
    }
}

impl Collective for Alone {
    fn world(&self) -> &World {
        &self.0
    }

    fn all_reduce_sum(&self, values: &Tensor) -> Result<Tensor> {
        Ok(values.clone())
    }

    fn is_alone(&self) -> bool {
        true
    }
}

/// Ranks as threads of one process, for tests on a machine without GPUs:
/// the same sums, in rank order, that NCCL computes between processes.
pub struct InProcess {
    world: World,
    shared: Arc<Exchange>,
}

struct Exchange {
    slots: Mutex<Vec<Option<Vec<f32>>>>,
    barrier: Barrier,
}

impl InProcess {
    /// The `size` members of one group, rank by rank; give each to a thread.
    pub fn group(size: usize) -> Vec<InProcess> {
        let shared = Arc::new(Exchange { slots: Mutex::new(vec![None; size]), barrier: Barrier::new(size) });
        (0..size)
            .map(|rank| InProcess {
                world: World { rank, size, local_rank: rank, source: "in-process stand-in".into() },
                shared: shared.clone(),
            })
            .collect()
    }
}

impl Collective for InProcess {
    fn world(&self) -> &World {
        &self.world
    }

    fn all_reduce_sum(&self, values: &Tensor) -> Result<Tensor> {
        let mine = values.to_dtype(DType::F32)?.to_vec1::<f32>()?;
        let lock = || self.shared.slots.lock().map_err(|_| anyhow::anyhow!("a rank panicked"));
        lock()?[self.world.rank] = Some(mine);
        self.shared.barrier.wait();
        let sum = {
            let slots = lock()?;
            let mut sum = vec![0f32; values.elem_count()];
            for slot in slots.iter() {
                let slot = slot.as_ref().context("a rank's values are missing")?;
                if slot.len() != sum.len() {
                    bail!("ranks reduce {} and {} values", slot.len(), sum.len());
                }
                sum.iter_mut().zip(slot).for_each(|(s, v)| *s += v);
            }
            sum
        };
        // Nobody refills a slot before everyone has read them all.
        self.shared.barrier.wait();
        Ok(Tensor::from_vec(sum, values.elem_count(), values.device())?)
    }
}

/// Replaces each gradient by the sum over ranks of `share` times the
/// rank's gradient: with `share` the rank's fraction of the global batch,
/// the gradient of the global batch's mean loss. One all-reduce for all
/// the gradients (a flat buffer), as DDP's buckets do, rather than one per
/// tensor. Parameters without a gradient count as zero. `loss`, the
/// rank's mean loss, travels with them: returns the global batch's.
pub fn average_gradients(
    collective: &dyn Collective,
    vars: &[Var],
    grads: &mut GradStore,
    share: f64,
    loss: f64,
) -> Result<f64> {
    let device = vars.first().map_or(candle_core::Device::Cpu, |v| v.device().clone());
    let mut flat: Vec<Tensor> = vars
        .iter()
        .map(|v| match grads.get(v.as_tensor()) {
            Some(g) => g.flatten_all(),
            None => v.as_tensor().zeros_like()?.flatten_all(),
        })
        .collect::<candle_core::Result<_>>()?;
    flat.push(Tensor::new(&[loss as f32], &device)?);
    let summed = collective.all_reduce_sum(&(Tensor::cat(&flat, 0)? * share)?)?;
    let mut at = 0;
    for v in vars {
        let n = v.as_tensor().elem_count();
        grads.insert(v.as_tensor(), summed.narrow(0, at, n)?.reshape(v.as_tensor().shape())?);
        at += n;
    }
    Ok(summed.narrow(0, at, 1)?.to_vec1::<f32>()?[0] as f64)
}

/// Gives every rank rank 0's values of `vars` (weights and batch-norm
/// statistics), so that all start from the same net whatever each drew.
pub fn broadcast_vars(collective: &dyn Collective, vars: &[Var]) -> Result<()> {
    if collective.is_alone() || vars.is_empty() {
        return Ok(());
    }
    let flat: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().flatten_all()).collect::<candle_core::Result<_>>()?;
    let all = collective.broadcast(&Tensor::cat(&flat, 0)?)?;
    let mut at = 0;
    for v in vars {
        let n = v.as_tensor().elem_count();
        v.set(&all.narrow(0, at, n)?.reshape(v.as_tensor().shape())?)?;
        at += n;
    }
    Ok(())
}

/// Rank 0's answer to a yes-or-no question, on every rank (decisions that
/// must agree, such as stopping before a wall-clock limit).
pub fn leader_decides(collective: &dyn Collective, yes: bool) -> Result<bool> {
    let flag = Tensor::new(&[yes as u8 as f32], &candle_core::Device::Cpu)?;
    Ok(collective.broadcast(&flag)?.to_vec1::<f32>()?[0] > 0.5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name: &str| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn the_world_comes_from_the_launcher() {
        assert_eq!(World::from_env(env(&[])).unwrap().size, 1);
        let srun =
            [("SLURM_PROCID", "5"), ("SLURM_NTASKS", "8"), ("SLURM_STEP_NUM_TASKS", "8"), ("SLURM_LOCALID", "1")];
        let w = World::from_env(env(&srun)).unwrap();
        assert_eq!((w.rank, w.size, w.local_rank), (5, 8, 1));
        // A job's batch script, not an srun step: one process.
        let batch = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "16"), ("SLURM_LOCALID", "0"), ("SLURM_JOB_ID", "9")];
        assert_eq!(World::from_env(env(&batch)).unwrap(), World::single());
        let both = [
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_NUM_TASKS", "1"),
            ("RANK", "3"),
            ("WORLD_SIZE", "4"),
            ("LOCAL_RANK", "3"),
        ];
        let w = World::from_env(env(&both)).unwrap();
        assert_eq!((w.rank, w.size, w.local_rank), (3, 4, 3), "torchrun's variables first");
        assert!(World::from_env(env(&[("RANK", "4"), ("WORLD_SIZE", "4")])).is_err());
        assert!(World::from_env(env(&[("RANK", "x"), ("WORLD_SIZE", "4")])).is_err());
    }

    #[test]
    fn a_rank_trains_on_its_own_gpu_or_the_one_it_sees() {
        let third = World { rank: 2, size: 4, local_rank: 2, source: String::new() };
        assert_eq!(third.device_spec_seeing("cuda", None), "cuda:2");
        assert_eq!(third.device_spec_seeing("auto", Some("0,1,2,3")), "cuda:2");
        assert_eq!(third.device_spec_seeing("cuda", Some("5")), "cuda:0", "--gpus-per-task=1");
        assert_eq!(third.device_spec_seeing("cpu", Some("5")), "cpu");
        assert_eq!(World::single().device_spec_seeing("cuda", Some("5")), "cuda");
    }

    #[test]
    fn slices_cover_a_batch_once() {
        for size in 1..=5 {
            for n in [5, 64, 100, 257] {
                let slices: Vec<Range<usize>> = (0..size)
                    .map(|rank| World { rank, size, local_rank: rank, source: String::new() }.slice(n))
                    .collect();
                let covered: Vec<usize> = slices.iter().flat_map(|r| r.clone()).collect();
                assert_eq!(covered, (0..n).collect::<Vec<_>>());
            }
        }
    }

    /// Two ranks' weighted gradients sum to the gradient of the whole
    /// batch's mean loss, and a broadcast gives rank 0's weights.
    #[test]
    fn in_process_ranks_average_and_broadcast() {
        let x: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0];
        let whole = {
            let w = Var::new(&[0.5f32], &Device::Cpu).unwrap();
            let xs = Tensor::new(x.as_slice(), &Device::Cpu).unwrap();
            let loss = xs.broadcast_mul(w.as_tensor()).unwrap().sqr().unwrap().mean_all().unwrap();
            loss.backward().unwrap().get(w.as_tensor()).unwrap().to_vec1::<f32>().unwrap()[0]
        };
        let results: Vec<(f32, f32)> = std::thread::scope(|scope| {
            let handles: Vec<_> = InProcess::group(2)
                .into_iter()
                .map(|member| {
                    let x = &x;
                    scope.spawn(move || {
                        let mine = member.world().slice(x.len());
                        let w = Var::new(&[0.5f32 + member.world().rank as f32], &Device::Cpu).unwrap();
                        broadcast_vars(&member, std::slice::from_ref(&w)).unwrap();
                        let xs = Tensor::new(&x[mine.clone()], &Device::Cpu).unwrap();
                        let loss = xs.broadcast_mul(w.as_tensor()).unwrap().sqr().unwrap().mean_all().unwrap();
                        let mut grads = loss.backward().unwrap();
                        let share = mine.len() as f64 / x.len() as f64;
                        let loss = loss.to_vec0::<f32>().unwrap() as f64;
                        average_gradients(&member, std::slice::from_ref(&w), &mut grads, share, loss).unwrap();
                        let g = grads.get(w.as_tensor()).unwrap().to_vec1::<f32>().unwrap()[0];
                        (w.as_tensor().to_vec1::<f32>().unwrap()[0], g)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (w, g) in results {
            assert_eq!(w, 0.5, "rank 0's weight everywhere");
            assert!((g - whole).abs() < 1e-5, "{g} against {whole}");
        }
    }
}
