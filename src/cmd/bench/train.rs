//! `go-train bench train`: training samples per second of the nets, the
//! figure compared with PyTorch in docs/results/benchmarks.md.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use candle_core::{Device, Tensor};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use go_train::features::FeatureSet;
use go_train::nn::{self, Arch, Model, Output, BOARD, MOVES};
use go_train::train::optim::OptimizerConfig;
use go_train::train::train_step;

use super::TrainArgs;

/// Untimed steps first: they allocate buffers and warm caches.
const WARMUP_STEPS: usize = 3;
/// Fraction of ones in the random planes (as in torch_seed_nets.py).
const ONES: f64 = 0.3;

pub fn run(args: TrainArgs) -> Result<()> {
    let budget = Duration::try_from_secs_f64(args.seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--seconds {}: give a positive number of seconds", args.seconds))?;
    let threads = nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    nn::allow_tf32(args.tf32);
    let mut archs = Vec::new();
    for name in args.net.split(',') {
        match name {
            "all" => archs.extend([Arch::Policy, Arch::Playout, Arch::Value]),
            name => archs.push(name.parse()?),
        }
    }
    let mut rng = Pcg64Mcg::seed_from_u64(args.seed);
    for &batch in &args.batch {
        for &arch in &archs {
            let rate = samples_per_second(arch, args.features, batch, &device, args.seed, budget, &mut rng)?;
            println!(
                "{arch} ({} features): {:.0} samples/s training ({}{}, batch {batch}, threads {threads}, {} steps in \
                 {:.1} s, CPU {:.1} s); forward at batch 1: {:.0} µs",
                args.features,
                rate.samples_per_second,
                args.device,
                if device.is_cuda() && args.tf32 { ", tf32" } else { "" },
                rate.steps,
                rate.seconds,
                rate.cpu_seconds,
                rate.single_forward.as_secs_f64() * 1e6,
            );
        }
    }
    Ok(())
}

/// What one net's timed run measured.
struct Rate {
    samples_per_second: f64,
    steps: usize,
    seconds: f64,
    cpu_seconds: f64,
    single_forward: Duration,
}

/// Trains `arch` on one random batch for about `budget`.
fn samples_per_second(
    arch: Arch,
    features: FeatureSet,
    batch: usize,
    device: &Device,
    seed: u64,
    budget: Duration,
    rng: &mut Pcg64Mcg,
) -> Result<Rate> {
    let model = Model::new(arch, features, device, seed)?;
    // The optimizers of torch_seed_nets.py.
    let config = match model.output() {
        Output::MoveLogProbs => OptimizerConfig::sgd(0.01, 0.9),
        Output::WinProb => OptimizerConfig::adam(0.001),
    };
    let mut opt = config.build(model.parameters());
    let x = random_planes(rng, batch, features.planes(), device)?;
    let y = random_targets(rng, model.output(), batch, device)?;
    for _ in 0..WARMUP_STEPS {
        train_step(&model, opt.as_mut(), &x, &y, None)?;
    }
    let (mut steps, start, cpu_start) = (0usize, Instant::now(), cpu_time());
    // train_step reads the loss back, which waits for a GPU to finish.
    while steps < WARMUP_STEPS || start.elapsed() < budget {
        train_step(&model, opt.as_mut(), &x, &y, None)?;
        steps += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = cpu_time() - cpu_start;
    let x1 = x.narrow(0, 0, 1)?;
    let single_forward =
        time_per_call(budget / 4, || model.forward(&x1, false)?.sum_all()?.to_scalar::<f32>().map(|_| ()))?;
    Ok(Rate { samples_per_second: (steps * batch) as f64 / seconds, steps, seconds, cpu_seconds, single_forward })
}

/// Planes of 0/1 with [`ONES`] ones.
fn random_planes(rng: &mut Pcg64Mcg, batch: usize, planes: usize, device: &Device) -> Result<Tensor> {
    let data: Vec<f32> = (0..batch * planes * BOARD * BOARD).map(|_| rng.random_bool(ONES) as u8 as f32).collect();
    Ok(Tensor::from_vec(data, (batch, planes, BOARD, BOARD), device)?)
}

/// Random move indices or random game results.
fn random_targets(rng: &mut Pcg64Mcg, output: Output, batch: usize, device: &Device) -> Result<Tensor> {
    Ok(match output {
        Output::MoveLogProbs => {
            Tensor::from_vec((0..batch).map(|_| rng.random_range(0..MOVES as u32)).collect::<Vec<_>>(), batch, device)?
        }
        Output::WinProb => {
            Tensor::from_vec((0..batch).map(|_| rng.random_bool(0.5) as u8 as f32).collect::<Vec<_>>(), batch, device)?
        }
    })
}

/// Mean time of `f` over about `budget`.
fn time_per_call(budget: Duration, mut f: impl FnMut() -> candle_core::Result<()>) -> Result<Duration> {
    f()?;
    let (mut calls, start) = (0u32, Instant::now());
    while calls < 3 || start.elapsed() < budget {
        f()?;
        calls += 1;
    }
    Ok(start.elapsed() / calls)
}

/// CPU time (user + system) this process has used, in seconds. Printed
/// beside the wall time: on a shared machine, CPU time well under
/// threads × wall time means the run was starved and its rate is low.
fn cpu_time() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return f64::NAN;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
