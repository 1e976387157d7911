//! The training loop shared by `train-policy`, `train-playout` and
//! `train-value`: epochs of shuffled batches, a validation pass, metrics,
//! and a checkpoint after every epoch.
//!
//! Checkpoint folder layout:
//!
//! | path | what |
//! |---|---|
//! | `config.toml` | the effective configuration |
//! | `last/` | weights, optimizer state and training state after the last epoch |
//! | `best.safetensors` | weights of the epoch with the best validation accuracy |
//! | `metrics.jsonl`, `metrics.svg`, `metrics.png` | metrics per epoch, and their plot |
//! | `.go-train.lock` | held by the run that writes the folder ([`crate::lock`]) |
//!
//! How a run may begin in a folder that holds another, or parts of one, is
//! [`super::run_folder`]'s to decide: nothing a run wrote is replaced
//! without [`Start::Overwrite`], and a run is resumed only with its own
//! settings and dataset.
//!
//! Resuming is exact on CPU: the initial weights come from the seed, the
//! batches of an epoch from (seed, epoch), and the optimizer state from the
//! checkpoint, so a run killed and resumed ends with the same weights as one
//! that never stopped.
//!
//! The same loop runs data-parallel, one process per GPU
//! ([`super::distributed`]): each rank trains on its slice of every batch
//! and the gradients are averaged before each step; rank 0 alone writes.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::checkpoint::{self, TrainState, TrainedOn};
use super::config::TrainConfig;
use super::distributed::{average_gradients, broadcast_vars, leader_decides, Collective};
use super::metrics::{self, EpochMetrics};
use super::optim::Optimizer;
use super::run_folder::{self, Plan, LAST_DIR};
use crate::atomic::write_atomic;
use crate::dataset::{BatchOptions, Dataset, Split, MANIFEST};
use crate::eval::positions::{batch_tensors, evaluate, Predictions, Tally};
use crate::nn::weights::Meta;
use crate::nn::{Model, Output};
use crate::progress::Progress;

pub use super::run_folder::Start;

/// What a finished run reports.
#[derive(Clone, Debug)]
pub struct Summary {
    pub epochs: Vec<EpochMetrics>,
    /// Whether the run had nothing left to do.
    pub already_done: bool,
}

/// Trains as `config` says; `show_progress` draws bars on a terminal.
/// With `stop_after`, the run ends cleanly, its checkpoint written, after
/// the last epoch that it expects to finish within that time (judged by the
/// epochs so far): for batch jobs with a wall-clock limit, continued later
/// with [`Start::Resume`]. `collective` is this process's place in a
/// data-parallel run ([`super::distributed::Alone`] for one process).
pub fn train(
    config: &TrainConfig,
    start: Start,
    show_progress: bool,
    stop_after: Option<Duration>,
    collective: &dyn Collective,
) -> Result<Summary> {
    let run_started = Instant::now();
    let world = collective.world();
    // What config.toml keeps is the run's own settings; what trains are
    // those for this number of ranks.
    let (saved_config, config) = (config, &config.for_ranks(world.size));
    let leader = world.is_leader();
    let show_progress = show_progress && leader;
    let out = &config.out;
    let last = out.join(LAST_DIR);
    // Rank 0 alone writes: it locks the folder and decides how the run
    // begins before anything else is read; every rank follows.
    let begun = if leader { run_folder::begin(out, start, saved_config).map(Some) } else { Ok(None) };
    let (_lock, plan) = follow_leader(collective, begun, out)?.unzip();
    let resume = leader_decides(collective, matches!(plan, Some(Plan::Resume { .. })))?;
    let device = crate::nn::device(&world.device_spec(&config.device))?;
    crate::nn::allow_tf32(config.tf32);
    config.precision.check_device(&device).with_context(|| format!("{}: precision", out.display()))?;
    let dataset = Dataset::open(&config.data)?;
    let mut model = Model::new(config.arch()?, dataset.features(), &device, config.seed)?;
    model.set_precision(config.precision);
    crate::eval::positions::check_inputs(&model, &dataset)?;
    check_dataset(&dataset, config, model.output() == Output::WinProb)?;
    if model.arch().learns_ownership() && !dataset.layout().ownership {
        bail!(
            "{}: net {} learns ownership, but the dataset has no ownership targets: prepare it with --ownership",
            dataset.dir().join(MANIFEST).display(),
            model.arch()
        );
    }
    model.check_training_batch_fits(config.batch, || format!("{}: batch = {}", out.display(), config.batch))?;
    let mut optimizer = config.optimizer.build(model.parameters());
    let same_data = match &plan {
        Some(Plan::Resume { at, .. }) => run_folder::check_trained_on(out, at, &dataset)
            .and_then(|()| run_folder::check_global_batch(out, at, config.batch, world.size)),
        _ => Ok(()),
    };
    follow_leader(collective, same_data, out)?;
    let mut state = match resume {
        true => checkpoint::load(&last, &model, optimizer.as_mut())?,
        false => {
            if let Some(init) = &config.init {
                let set = crate::nn::weights::load_matching(init, &model).context("init")?;
                if leader {
                    crate::say!(
                        "{}: {set} of the net's {} tensors start from {}",
                        out.display(),
                        model.tensors().len(),
                        init.display()
                    );
                }
            }
            TrainState::default()
        }
    };
    if let Some(Plan::Resume { best_lost: true, .. }) = plan {
        state.best_metric = None;
    }
    state.dataset = Some(TrainedOn { id: dataset.manifest().identity(), dir: config.data.clone() });
    state.global_batch = Some(config.batch);
    let cpu_threads = device.is_cpu().then(rayon::current_num_threads);
    if let (Some(before), Some(now)) = (state.cpu_threads, cpu_threads) {
        if before != now && leader {
            crate::say!(
                "note: {}: the run trained on {before} CPU threads and goes on with {now}: its weights will differ, in \
                 the last bits, from those of a run that never stopped (threads={before} keeps them equal)",
                out.display()
            );
        }
    }
    state.cpu_threads = cpu_threads;
    // Every rank has read the checkpoint before rank 0 writes anything.
    collective.barrier()?;
    let all_tensors: Vec<_> = model.tensors().into_iter().map(|(_, v)| v).collect();
    broadcast_vars(collective, &all_tensors)?;
    let mut history = Vec::new();
    if leader {
        if world.size > 1 {
            let lr = config.step_lr().base_lr;
            crate::say!(
                "{}: rank 0 of {} ({}), global batch {}, lr {lr}",
                out.display(),
                world.size,
                world.source,
                config.batch
            );
        }
        if start == Start::Overwrite {
            run_folder::remove_old_run(out)?;
        }
        history = metrics::read(&out.join(metrics::FILE), state.epoch + 1)?;
        // Not for a run with nothing left to do: its config.toml would name
        // fewer epochs than its checkpoint holds.
        if state.epoch < config.epochs {
            write_atomic(&run_folder::config_path(out), saved_config.to_toml()?.as_bytes())?;
        }
    }
    if state.epoch >= config.epochs {
        return Ok(Summary { epochs: history, already_done: true });
    }

    let value_net = model.output() == Output::WinProb;
    let schedule = config.step_lr();
    let mut slowest_epoch = Duration::ZERO;
    for epoch in state.epoch..config.epochs {
        let started = Instant::now();
        let lr = schedule.lr(epoch);
        optimizer.set_learning_rate(lr);
        let options = BatchOptions {
            batch_size: config.batch,
            seed: config.seed,
            epoch,
            shuffle: true,
            symmetries: config.symmetries,
            value_only: value_net,
            drop_last: true,
            ranks: (world.rank, world.size),
            packed_planes: crate::nn::inputs::packed_on(model.device()),
            ..BatchOptions::default()
        };
        let positions = if value_net { dataset.value_len(Split::Train) } else { dataset.split_len(Split::Train) };
        let mut total = positions / config.batch as u64;
        if config.steps_per_epoch > 0 {
            total = total.min(config.steps_per_epoch);
        }
        let label = format!("epoch {}/{}", epoch + 1, config.epochs);
        let progress = if show_progress {
            Progress::new(&label, total * config.batch as u64, "positions")
        } else {
            Progress::hidden()
        };
        let steps = Steps { total, global_batch: config.batch, collective, ownership_weight: config.ownership_weight };
        let steps_before = state.step;
        let train = train_epoch(&model, optimizer.as_mut(), &dataset, &options, &steps, &progress, &mut state)?;
        progress.finish();
        // Every rank's positions, not this rank's slices.
        let trained = (state.step - steps_before) * config.batch as u64;
        state.epoch = epoch + 1;
        // Rank 0 scores the epoch and writes it, and whether that fails
        // reaches every rank: a rank 0 that stopped alone once left the
        // others waiting in the next all-reduce.
        let ended = match leader {
            false => Ok(false),
            true => (|| -> Result<bool> {
                let trained_for = started.elapsed().as_secs_f64();
                if config.batch_norm_batches > 0 {
                    // Other batches than the epoch's last ones: the next epoch's.
                    let options = BatchOptions { epoch: epoch + 1, ranks: (0, 1), ..options };
                    let inputs = dataset.batches(Split::Train, &options).take(config.batch_norm_batches);
                    model.settle_batch_norms(
                        inputs.map(|batch| Ok(batch_tensors(&model, &batch?, dataset.board_size())?.0)),
                    )?;
                }
                let validation = evaluate(&model, &dataset, Split::Validation, 500, config.validation_positions)?;
                // Before anything of the epoch is written: its net would be scored
                // as a NaN (which metrics.jsonl cannot hold) and could become best.
                if !validation.loss.is_finite() {
                    bail!(
                        "the validation loss became {} after epoch {}: lower the learning rate (nothing of this epoch \
                         was saved: --resume trains it again from the last checkpoint)",
                        validation.loss,
                        epoch + 1
                    );
                }
                let metrics = EpochMetrics {
                    epoch: epoch + 1,
                    step: state.step,
                    lr,
                    samples_per_second: trained as f64 / trained_for,
                    seconds: started.elapsed().as_secs_f64(),
                    train,
                    validation,
                };
                // Metrics before the checkpoint: after a crash between the two, the
                // resumed run redoes this epoch and replaces its line.
                history.push(metrics.clone());
                metrics::write(out, &history)?;
                let key = EpochMetrics::key_accuracy(&metrics.validation);
                if state.best_metric.is_none_or(|best| key > best) {
                    state.best_metric = Some(key);
                    let meta = Meta { dataset: Some(dataset.manifest().identity().0), ..Meta::of(&model, None) };
                    crate::nn::weights::save_as(&out.join(crate::nn::weights::BEST_FILE), &model, &meta)?;
                }
                checkpoint::save(&last, &model, optimizer.as_ref(), &state)?;
                log_epoch(&metrics);
                slowest_epoch = slowest_epoch.max(started.elapsed());
                Ok(stop_after.is_some_and(|limit| run_started.elapsed() + slowest_epoch > limit))
            })(),
        };
        let stop = follow_leader(collective, ended, out)?;
        if state.epoch < config.epochs && leader_decides(collective, stop)? {
            if let Some(limit) = stop_after.filter(|_| leader) {
                crate::say!(
                    "stopping after epoch {} of {}: another would pass --stop-after {} s; continue with --resume",
                    state.epoch,
                    config.epochs,
                    // Whole seconds said "0 s" for --stop-after 0.1.
                    limit.as_secs_f64()
                );
            }
            return Ok(Summary { epochs: history, already_done: false });
        }
    }
    Ok(Summary { epochs: history, already_done: false })
}

/// Rank 0's `verdict` on every rank (the others pass `Ok`): rank 0 alone
/// decides how a run begins, and when it refuses, every rank stops rather
/// than wait for it in the next collective.
fn follow_leader<T>(collective: &dyn Collective, verdict: Result<T>, out: &Path) -> Result<T> {
    if leader_decides(collective, verdict.is_ok())? {
        return verdict;
    }
    Err(verdict.err().unwrap_or_else(|| anyhow!("rank 0 refused to run in {}: see its error", out.display())))
}

/// The steps of an epoch: how many, of which global batch, averaged over
/// which ranks, with which weight on the ownership loss.
struct Steps<'a> {
    total: u64,
    global_batch: usize,
    collective: &'a dyn Collective,
    ownership_weight: f64,
}

/// One pass over the training batches; returns the training scores (of
/// this rank's slices).
fn train_epoch(
    model: &Model,
    optimizer: &mut dyn Optimizer,
    dataset: &Dataset,
    options: &BatchOptions,
    steps: &Steps,
    progress: &Progress,
    state: &mut TrainState,
) -> Result<crate::eval::positions::Scores> {
    let mut tally = Tally::new(model.output());
    let parameters: Vec<_> = model.parameters().into_iter().map(|(_, v)| v).collect();
    // Reading the loss and predictions waits for a GPU to finish the step:
    // they are kept on the device and read every few steps (each step's
    // then), so that a non-finite loss stops the run at most that many
    // steps late, nothing saved. Data-parallel runs read the loss at every
    // step anyway, to average it with the gradients.
    let every = if steps.collective.is_alone() { super::host_read_interval() } else { 1 };
    let mut unread = Vec::with_capacity(every);
    // Data-parallel steps average their gradients between the backward
    // pass and the update, which a captured graph cannot wait for.
    let mut stepper = super::Stepper::new(model, steps.collective.is_alone());
    let batches = dataset.batches(Split::Train, options).prefetch(2);
    for batch in batches.take(steps.total as usize) {
        let mut batch = batch?;
        let (x, target) = batch_tensors(model, &batch, dataset.board_size())?;
        let owned = match batch.ownership.is_empty() {
            true => None,
            false => Some(crate::nn::inputs::tensor(
                &batch.ownership,
                (batch.len, batch.ownership.len() / batch.len),
                model.device(),
            )?),
        };
        let ownership = owned.as_ref().map(|o| (o, steps.ownership_weight));
        let (loss, pred) = if steps.collective.is_alone() {
            let stepped = stepper.step(optimizer, &x, &target, ownership)?;
            if let Some(report) = stepper.take_report() {
                progress.note(&report);
            }
            stepped
        } else {
            let (loss, pred, mut grads) = super::loss_and_gradients(model, &x, &target, ownership)?;
            let share = batch.len as f64 / steps.global_batch as f64;
            // The global loss comes back with the gradients, so that every
            // rank stops together on a non-finite one rather than leaving
            // the others waiting in the next all-reduce.
            let local = crate::nn::instruments::read_scalar(&loss)? as f64;
            let global = average_gradients(steps.collective, &parameters, &mut grads, share, local)?;
            if !global.is_finite() {
                bail!("the loss became {global} at step {}: lower the learning rate", state.step + 1);
            }
            optimizer.step(&grads)?;
            (loss, pred)
        };
        state.step += 1;
        // The global batch: every rank's slices of it.
        progress.inc(steps.global_batch as u64);
        // Tally reads the targets alone: the planes and ownership can go.
        (batch.planes, batch.planes_bits, batch.ownership) = (Vec::new(), Vec::new(), Vec::new());
        unread.push((state.step, loss, pred, batch));
        if unread.len() == every {
            read_steps(&mut unread, &mut tally, model.output())?;
            progress.set_message(format!("loss {:.3}", tally.scores().loss));
        }
    }
    read_steps(&mut unread, &mut tally, model.output())?;
    Ok(tally.scores())
}

/// Reads the losses and predictions of the steps in `unread` (step
/// number, loss, predictions, batch) into `tally`, refusing a non-finite
/// loss.
fn read_steps(
    unread: &mut Vec<(u64, candle_core::Tensor, candle_core::Tensor, crate::dataset::Batch)>,
    tally: &mut Tally,
    output: Output,
) -> Result<()> {
    for (step, loss, pred, batch) in unread.drain(..) {
        let loss = crate::nn::instruments::read_scalar(&loss)?;
        if !loss.is_finite() {
            bail!("the loss became {loss} at step {step}: lower the learning rate");
        }
        crate::nn::instruments::counted_host_read();
        tally.add(&Predictions::of(&pred, output)?, &batch, 0..batch.len);
    }
    Ok(())
}

/// Refuses, before anything is written, a dataset the run cannot train
/// on (besides inputs the net cannot read: [`crate::eval::positions::check_inputs`]):
/// a train split smaller than one
/// batch (every epoch would train on nothing, since short batches are
/// dropped), or an empty validation split (no epoch could be scored, so
/// `best.safetensors` would never follow the training). Value nets count
/// only the positions with a value label, as their batches do.
fn check_dataset(dataset: &Dataset, config: &TrainConfig, value_net: bool) -> Result<()> {
    let manifest = dataset.dir().join(MANIFEST);
    let count = |split: Split| -> u64 {
        if value_net {
            dataset.value_len(split)
        } else {
            dataset.split_len(split)
        }
    };
    let what = if value_net { "value-labelled positions" } else { "positions" };
    let train = count(Split::Train);
    if value_net && train == 0 {
        bail!(
            "{}: no position of the train split has a value label: its games have no result (RE), or it was \
             prepared without value labels (prepare --value all or per-game:K)",
            manifest.display()
        );
    }
    if train < config.batch as u64 {
        bail!(
            "{}: the train split holds {train} {what}, fewer than one batch of {}: every epoch would train on nothing; \
             lower `batch` or prepare more games",
            manifest.display(),
            config.batch
        );
    }
    if count(Split::Validation) == 0 {
        bail!(
            "{}: the validation split holds no {what}, so no epoch could be scored; prepare more games or a larger \
             validation fraction (--split)",
            manifest.display()
        );
    }
    Ok(())
}

/// A learning rate as a researcher writes it: a StepLr run decays to rates
/// that four decimals show as 0.0000.
fn lr_text(lr: f64) -> String {
    if lr >= 0.01 {
        format!("{lr:.4}")
    } else {
        format!("{lr:.2e}")
    }
}

fn log_epoch(m: &EpochMetrics) {
    let v = &m.validation;
    let detail = match (v.top1, v.top5, v.accuracy) {
        (Some(t1), Some(t5), _) => format!("top-1 {:.1}%, top-5 {:.1}%", 100.0 * t1, 100.0 * t5),
        (_, _, Some(acc)) => format!("accuracy {:.1}% (MSE baseline 0.25)", 100.0 * acc),
        _ => String::new(),
    };
    crate::say!(
        "epoch {}: lr {}, train loss {:.4}, validation loss {:.4}, {detail}, {:.0} positions/s, {:.0} s",
        m.epoch,
        lr_text(m.lr),
        m.train.loss,
        v.loss,
        m.samples_per_second,
        m.seconds
    );
}

#[cfg(test)]
mod tests {
    use super::lr_text;

    #[test]
    fn decayed_learning_rates_are_printed_as_what_they_are() {
        assert_eq!(lr_text(0.02), "0.0200");
        assert_eq!(lr_text(0.000027), "2.70e-5");
        assert_eq!(lr_text(0.0003), "3.00e-4");
    }
}
