//! `go-train bench train`: training samples per second of the nets, the
//! figure compared with PyTorch in docs/results/benchmarks.md, and what a
//! step costs besides arithmetic ([`go_train::nn::instruments`]).

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use candle_core::{Device, Tensor};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use go_train::cpu_time::process_cpu_seconds;
use go_train::features::FeatureSet;
use go_train::nn::instruments::{self, Counts};
use go_train::nn::switches::Fused;
use go_train::nn::{self, Arch, Model, Output, BOARD, EMPTY_PLANE, POINTS};
use go_train::train::optim::OptimizerConfig;
use go_train::train::{host_read_interval, Stepper};

use super::TrainArgs;

/// Untimed steps first: they allocate buffers and warm caches.
const WARMUP_STEPS: usize = 3;
/// Fraction of ones in the random planes (as in scripts/torch_nets.py).
const ONES: f64 = 0.3;

pub fn run(args: TrainArgs) -> Result<()> {
    let budget = Duration::try_from_secs_f64(args.seconds)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("--seconds {}: give a positive number of seconds", args.seconds))?;
    let threads = nn::init_threads(args.threads)?;
    let device = nn::device(&args.device)?;
    nn::allow_tf32(args.tf32);
    args.precision.check_device(&device).context("--precision")?;
    let mut archs = Vec::new();
    for name in args.net.split(',') {
        match name {
            "all" => archs.extend([Arch::Policy, Arch::Playout, Arch::Value]),
            name => archs.push(name.parse()?),
        }
    }
    let run = Run {
        budget,
        steps: args.steps,
        device: &device,
        seed: args.seed,
        precision: args.precision,
        lr: args.lr.map(f64::from),
    };
    let off = Fused::disabled();
    if !off.is_empty() {
        println!("fused paths off: {}", off.join(" "));
    }
    let mut rng = Pcg64Mcg::seed_from_u64(args.seed);
    let mut diverged = Vec::new();
    for &batch in &args.batch {
        for &arch in &archs {
            // A run that diverges (one batch learnt by heart, for long)
            // costs its own figure, not the others'.
            let rate = match samples_per_second(arch, args.features, batch, &run, &mut rng) {
                Err(e) if e.is::<Diverged>() => {
                    println!("{arch} ({} features), batch {batch}: {e}; no figure", args.features);
                    diverged.push(format!("{arch} at batch {batch}"));
                    continue;
                }
                rate => rate?,
            };
            println!(
                "{arch} ({} features): {:.0} samples/s training ({}{}, batch {batch}, threads {threads}, {} steps in \
                 {:.1} s, CPU {:.1} s); forward at batch 1: {:.0} µs",
                args.features,
                rate.samples_per_second,
                args.device,
                match args.precision {
                    nn::Precision::Bf16 => ", bf16",
                    nn::Precision::F32 if device.is_cuda() && args.tf32 => ", tf32",
                    nn::Precision::F32 => "",
                },
                rate.steps,
                rate.seconds,
                rate.cpu_seconds,
                rate.single_forward.as_secs_f64() * 1e6,
            );
            println!("  per step: {}", per_step(&rate));
        }
    }
    if !diverged.is_empty() {
        bail!(
            "training diverged for {}: no figure (a lower --lr, or fewer --seconds, keeps it from learning its one \
             batch by heart)",
            diverged.join(", ")
        );
    }
    Ok(())
}

/// How each net is timed.
struct Run<'a> {
    /// For about this long…
    budget: Duration,
    /// …or exactly this many steps.
    steps: Option<usize>,
    device: &'a Device,
    seed: u64,
    precision: nn::Precision,
    /// The optimizers' learning rate, when not the seed's (scripts/torch_nets.py).
    lr: Option<f64>,
}

/// What one net's timed run measured.
struct Rate {
    samples_per_second: f64,
    steps: usize,
    seconds: f64,
    cpu_seconds: f64,
    single_forward: Duration,
    /// Counted over the timed steps.
    counts: Counts,
    /// Milliseconds the GPU worked on the timed steps, when on one.
    gpu_ms: Option<f64>,
    /// Seconds the host took to queue them: the wall time less the time
    /// spent in the loss reads, which wait for the GPU.
    enqueue_seconds: f64,
}

/// The counts of `rate` per step, in words.
fn per_step(rate: &Rate) -> String {
    let n = rate.steps as f64;
    let c = &rate.counts;
    let allocations = if Counts::allocations_counted() {
        format!("{:.1} allocations ({:.2} MB)", c.allocations as f64 / n, c.allocated_bytes as f64 / n / 1e6)
    } else {
        "allocations not counted (no counting allocator)".into()
    };
    let mut words = format!(
        "{allocations}, {:.1} candle tensors (ops and views), {:.2} host reads",
        c.tensors as f64 / n,
        c.host_reads as f64 / n
    );
    if let Some(gpu_ms) = rate.gpu_ms {
        words += &format!("; GPU busy {:.2} ms, host queued in {:.2} ms", gpu_ms / n, rate.enqueue_seconds * 1e3 / n);
    }
    words
}

/// Trains `arch` on one random batch as `run` says.
fn samples_per_second(arch: Arch, features: FeatureSet, batch: usize, run: &Run, rng: &mut Pcg64Mcg) -> Result<Rate> {
    let (device, budget) = (run.device, run.budget);
    let mut model = Model::new(arch, features, device, run.seed)?;
    model.set_precision(run.precision);
    model.check_training_batch_fits(batch, || format!("--batch {batch} (net {arch})"))?;
    // The optimizers of torch_seed_nets.py.
    let config = match model.output() {
        Output::MoveLogProbs => OptimizerConfig::sgd(run.lr.unwrap_or(0.01), 0.9),
        Output::WinProb => OptimizerConfig::adam(run.lr.unwrap_or(0.001)),
    };
    let mut opt = config.build(model.parameters());
    let planes = random_planes(rng, batch, features.planes());
    let y = random_targets(rng, model.output(), &planes, batch, device)?;
    let x = Tensor::from_vec(planes, (batch, features.planes(), BOARD, BOARD), device)?;
    let mut stepper = Stepper::new(&model, true);
    for _ in 0..WARMUP_STEPS {
        check_loss(&stepper.step(opt.as_mut(), &x, &y, None)?.0)?;
    }
    if let Some(graph) = stepper.take_report() {
        println!("  {graph}");
    }
    let every = host_read_interval();
    instruments::count_allocations(true);
    let before = Counts::now();
    let gpu = instruments::GpuTimer::start(device)?;
    let (mut steps, start, cpu_start) = (0usize, Instant::now(), process_cpu_seconds().unwrap_or(f64::NAN));
    let more = |steps: usize| match run.steps {
        Some(n) => steps < n,
        None => steps < WARMUP_STEPS || start.elapsed() < budget,
    };
    let mut reading = Duration::ZERO;
    while more(steps) {
        let (loss, _) = stepper.step(opt.as_mut(), &x, &y, None)?;
        steps += 1;
        // As training does: a read now and then, which waits for a GPU,
        // and always after the last step, so that the time is the work's.
        if steps % every == 0 || !more(steps) {
            let read = Instant::now();
            check_loss(&loss)?;
            reading += read.elapsed();
        }
    }
    let enqueue_seconds = (start.elapsed() - reading).as_secs_f64();
    let gpu_ms = gpu.map(|timer| timer.stop()).transpose()?;
    let counts = Counts::now().since(&before);
    instruments::count_allocations(false);
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds().unwrap_or(f64::NAN) - cpu_start;
    let x1 = x.narrow(0, 0, 1)?;
    let single_forward =
        time_per_call(budget / 4, || model.forward(&x1, false)?.sum_all()?.to_scalar::<f32>().map(|_| ()))?;
    Ok(Rate {
        samples_per_second: (steps * batch) as f64 / seconds,
        steps,
        seconds,
        cpu_seconds,
        single_forward,
        counts,
        gpu_ms,
        enqueue_seconds,
    })
}

/// A timed run whose loss stopped being finite.
#[derive(Debug, thiserror::Error)]
#[error("the loss became {0}: the benchmark's training diverged")]
struct Diverged(f32);

/// Reads the loss (counted), refusing a non-finite one: a benchmark of a
/// run that diverged would time NaN arithmetic.
fn check_loss(loss: &Tensor) -> Result<()> {
    let value = instruments::read_scalar(loss)?;
    if !value.is_finite() {
        return Err(Diverged(value).into());
    }
    Ok(())
}

/// Planes of 0/1 with [`ONES`] ones, `batch` × `planes` × 19 × 19.
fn random_planes(rng: &mut Pcg64Mcg, batch: usize, planes: usize) -> Vec<f32> {
    (0..batch * planes * POINTS).map(|_| rng.random_bool(ONES) as u8 as f32).collect()
}

/// Random game results, or random moves among each sample's legal ones (its
/// empty points and pass), as real records have: a move net's loss masks
/// the occupied points, so a target there would cost 10⁹ that no step can
/// lower, and pushing at it without end made the GPU's run diverge.
fn random_targets(rng: &mut Pcg64Mcg, output: Output, planes: &[f32], batch: usize, device: &Device) -> Result<Tensor> {
    Ok(match output {
        Output::MoveLogProbs => {
            let sample = planes.len() / batch;
            let moves: Vec<u32> = planes
                .chunks_exact(sample)
                .map(|sample| {
                    let empty = &sample[EMPTY_PLANE * POINTS..][..POINTS];
                    let legal: Vec<u32> =
                        (0..POINTS).filter(|&p| empty[p] == 1.0).chain([POINTS]).map(|p| p as u32).collect();
                    legal[rng.random_range(0..legal.len())]
                })
                .collect();
            Tensor::from_vec(moves, batch, device)?
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every move target is a legal move of its own sample: an empty point
    /// of its planes, or pass.
    #[test]
    fn move_targets_are_legal_in_their_planes() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let (batch, planes) = (64, FeatureSet::Seed.planes());
        let data = random_planes(&mut rng, batch, planes);
        let targets = random_targets(&mut rng, Output::MoveLogProbs, &data, batch, &Device::Cpu).unwrap();
        let targets = targets.to_vec1::<u32>().unwrap();
        assert_eq!(targets.len(), batch);
        let mut points = 0;
        for (b, &t) in targets.iter().enumerate() {
            let t = t as usize;
            if t < POINTS {
                points += 1;
                assert_eq!(data[(b * planes + EMPTY_PLANE) * POINTS + t], 1.0, "sample {b}: target {t} is occupied");
            } else {
                assert_eq!(t, POINTS, "sample {b}: target {t} is not a move");
            }
        }
        // Pass is one legal move of about 110: most targets are points.
        assert!(points > batch / 2, "{points} of {batch} targets are points");
    }
}
