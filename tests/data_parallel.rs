//! Data-parallel training on CPU, with ranks as threads and the in-process
//! stand-in for NCCL's all-reduce: the same weights as one process with
//! the same global batch, and a run resumed with another number of ranks
//! going on as if it had not changed.

use std::path::{Path, PathBuf};

use candle_core::{Device, Tensor};
use go_train::dataset::testkit::{self, Layout};
use go_train::features::FeatureSet;
use go_train::train::config::TrainConfig;
use go_train::train::distributed::{Alone, Collective, InProcess};
use go_train::train::run::{train, Start};

/// The seed's playout net (no batch norm, whose statistics are per rank)
/// on a dataset of real games, `epochs` of 5 batches of 30.
fn config(data: &Path, out: &Path, epochs: u64) -> TrainConfig {
    let set = |k: &str, v: String| format!("{k}={v}");
    let overrides = [
        set("data", format!("{:?}", data.display().to_string())),
        set("out", format!("{:?}", out.display().to_string())),
        set("epochs", epochs.to_string()),
        set("steps_per_epoch", "5".into()),
        set("batch", "30".into()),
        set("validation_positions", "60".into()),
        set("device", "\"cpu\"".into()),
        set("seed", "5".into()),
    ];
    TrainConfig::built_in("playout", &overrides).unwrap()
}

/// A dataset of `games` real games in `dir`/data (`None`, skipped, without them).
fn dataset(dir: &Path, games: usize) -> Option<PathBuf> {
    let games = testkit::kgs_games(games)?;
    let data = dir.join("data");
    std::fs::create_dir(&data).unwrap();
    testkit::write_dataset(&data, &games, &Layout { block_records: 64, shard_records: 400 }).unwrap();
    Some(data)
}

/// The errors of a fresh run of `config` on two ranks, each of which must fail.
fn errors_of_two_ranks(config: &TrainConfig) -> Vec<String> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = InProcess::group(2)
            .into_iter()
            .map(|member| {
                scope.spawn(move || format!("{:#}", train(config, Start::Fresh, false, None, &member).unwrap_err()))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Trains with `ranks` threads as ranks (one: the plain single process).
fn train_ranks(config: &TrainConfig, ranks: usize, start: Start) {
    if ranks == 1 {
        train(config, start, false, None, &Alone::new()).unwrap();
        return;
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = InProcess::group(ranks)
            .into_iter()
            .map(|member| scope.spawn(move || train(config, start, false, None, &member as &dyn Collective).unwrap()))
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    });
}

fn weights(out: &Path) -> Vec<(String, Tensor)> {
    let mut all: Vec<_> = candle_core::safetensors::load(out.join("last/weights.safetensors"), &Device::Cpu)
        .unwrap()
        .into_iter()
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Largest difference between two sets of weights, and the largest change
/// any weight made from `start` (so that "equal" is not "untrained").
fn largest_difference(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            (ta - tb).unwrap().abs().unwrap().flatten_all().unwrap().max(0).unwrap().to_scalar::<f32>().unwrap()
        })
        .fold(0.0, f32::max)
}

#[test]
fn two_ranks_train_the_weights_of_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(data) = dataset(tmp.path(), 12) else { return };

    let (one, two, three) = (tmp.path().join("one"), tmp.path().join("two"), tmp.path().join("three"));
    train_ranks(&config(&data, &one, 1), 1, Start::Fresh);
    let initial: Vec<(String, Tensor)> = {
        let c = config(&data, &one, 1);
        let model = go_train::nn::Model::new(c.arch().unwrap(), FeatureSet::Seed, &Device::Cpu, c.seed).unwrap();
        model.tensors().into_iter().map(|(name, var)| (name, var.as_tensor().clone())).collect()
    };
    train_ranks(&config(&data, &two, 1), 2, Start::Fresh);
    let (w1, w2) = (weights(&one), weights(&two));
    let moved = largest_difference(&w1, &initial);
    let apart = largest_difference(&w1, &w2);
    assert!(moved > 1e-3, "training changed the weights: {moved}");
    assert!(apart < 1e-4 * moved.max(1.0), "two ranks {apart} from one process (weights moved {moved})");
    assert!(one.join("metrics.jsonl").is_file() && two.join("metrics.jsonl").is_file());

    // Two epochs: the first with 3 ranks, the second resumed with 1; and
    // the same run in one process throughout.
    train_ranks(&config(&data, &three, 1), 3, Start::Fresh);
    train_ranks(&config(&data, &three, 2), 1, Start::Resume);
    train_ranks(&config(&data, &one, 2), 1, Start::Resume);
    let (w1, w3) = (weights(&one), weights(&three));
    let apart = largest_difference(&w1, &w3);
    assert!(apart < 1e-4 * largest_difference(&w1, &initial).max(1.0), "resumed with other ranks: {apart}");
    let lines = std::fs::read_to_string(three.join("metrics.jsonl")).unwrap().lines().count();
    assert_eq!(lines, 2, "rank 0 alone wrote one line per epoch");

    // Rank 0 refuses to start over a run: every rank stops with it, none
    // waits for it in a collective.
    let refused = config(&data, &three, 1);
    let errors = errors_of_two_ranks(&refused);
    assert!(errors[0].contains("already holds a run") && errors[1].contains("rank 0 refused"), "{errors:?}");
}

/// Rank 0 failing at an epoch's end (here its metrics cannot be written: a
/// folder stands at their temporary name) stops every rank: the others once
/// waited for it in the next all-reduce for ever.
#[test]
fn a_rank_0_failing_after_an_epoch_stops_every_rank() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(data) = dataset(tmp.path(), 6) else { return };
    let out = tmp.path().join("run");
    std::fs::create_dir_all(out.join("metrics.jsonl.tmp").join("in the way")).unwrap();
    let config = config(&data, &out, 3);
    let errors = errors_of_two_ranks(&config);
    assert!(errors[0].contains("metrics.jsonl"), "{errors:?}");
    assert!(errors[1].contains("rank 0 refused"), "{errors:?}");
}

/// With `linear_scaling` the global batch and learning rate follow the
/// number of ranks: a run resumed on another number would go on with other
/// steps, and once did, silently. On the same number it goes on.
#[test]
fn a_linearly_scaled_run_resumes_only_on_as_many_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(data) = dataset(tmp.path(), 6) else { return };
    let out = tmp.path().join("run");
    let scaled = |epochs| {
        let mut c = config(&data, &out, epochs);
        c.linear_scaling = true;
        c.batch = 10;
        c
    };
    train_ranks(&scaled(1), 2, Start::Fresh);
    let e = format!("{:#}", train(&scaled(2), Start::Resume, false, None, &Alone::new()).unwrap_err());
    assert!(e.contains("global batch of 20") && e.contains("would be 10"), "{e}");
    train_ranks(&scaled(2), 2, Start::Resume);
    let lines = std::fs::read_to_string(out.join("metrics.jsonl")).unwrap().lines().count();
    assert_eq!(lines, 2);
}
