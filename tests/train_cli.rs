//! `train-policy`, `train-playout` and `train-value` from the command line,
//! with shards made from real games: on the CPU, or on the device that
//! `GO_TRAIN_TEST_DEVICE` names (`cuda` with a CUDA build on a GPU machine).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{path, run, run_ok};

/// A dataset of about 300 real 2001 KGS games (~60,000 positions), value
/// labels on every position.
fn dataset(dir: &Path) -> Option<PathBuf> {
    let games = common::collection("kgs-6d")?.join("KGS2001");
    let list = dir.join("games.list");
    run_ok(&["filter", path(&games), "--out", path(&list)]);
    let text = std::fs::read_to_string(&list).unwrap();
    let short: String = text.lines().take(301).map(|l| format!("{l}\n")).collect();
    std::fs::write(&list, short).unwrap();
    let data = dir.join("data");
    run_ok(&["prepare", path(&list), "--out", path(&data)]);
    Some(data)
}

fn config(kind: &str) -> String {
    format!("{}/configs/{kind}.toml", env!("CARGO_MANIFEST_DIR"))
}

/// ‖a − b‖ / ‖a‖ over the trained tensors of two weights files (the batch
/// norms' running averages left out).
fn relative_distance(a: &Path, b: &Path) -> f64 {
    use candle_core::Device;
    let load = |p: &Path| candle_core::safetensors::load(p, &Device::Cpu).unwrap();
    let (a, b) = (load(a), load(b));
    let (mut diff, mut norm) = (0f64, 0f64);
    for (name, x) in a.iter().filter(|(name, _)| !name.contains("running")) {
        let x = x.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let y = b[name].flatten_all().unwrap().to_vec1::<f32>().unwrap();
        diff += x.iter().zip(&y).map(|(x, y)| (*x as f64 - *y as f64).powi(2)).sum::<f64>();
        norm += x.iter().map(|x| (*x as f64).powi(2)).sum::<f64>();
    }
    (diff / norm).sqrt()
}

fn metrics(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_three_nets_learn_resume_exactly_and_refuse_bad_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = dataset(dir.path()) else { return };
    let device = common::test_device();
    let flags = |out: &Path, kind: &str| -> Vec<String> {
        [
            "--config",
            &config(kind),
            "--data",
            path(&data),
            "--out",
            path(out),
            "--device",
            &device,
            "--set",
            "validation_positions=3000",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect()
    };
    let train = |out: &Path, kind: &str, extra: &[&str]| {
        let mut args = vec![format!("train-{kind}")];
        args.extend(flags(out, kind));
        args.extend(extra.iter().map(|x| x.to_string()));
        run(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    // The policy net learns within a few hundred steps: the loss falls and
    // top-1 accuracy is far above chance (about 1/200 legal moves).
    let policy = dir.path().join("policy");
    let out = train(&policy, "policy", &["--epochs", "3", "--steps-per-epoch", "80"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m = metrics(&policy);
    assert_eq!(m.len(), 3);
    let loss = |e: usize, split: &str| m[e][split]["loss"].as_f64().unwrap();
    assert!(loss(2, "train") < loss(0, "train"), "{m:?}");
    assert!(loss(2, "validation") < loss(0, "validation"), "{m:?}");
    assert!(m[2]["validation"]["top1"].as_f64().unwrap() > 0.10, "{m:?}");
    assert!(m[2]["validation"]["top5"].as_f64().unwrap() > m[2]["validation"]["top1"].as_f64().unwrap());
    for f in [
        "config.toml",
        "best.safetensors",
        "metrics.svg",
        "metrics.png",
        "last/weights.safetensors",
        "last/optimizer.safetensors",
        "last/state.json",
    ] {
        assert!(policy.join(f).exists(), "{f}");
    }
    assert!(std::fs::read_to_string(policy.join("metrics.svg")).unwrap().contains("<polyline"));

    // `eval` scores the checkpoint on the test split, overall and by phase.
    let out = run_ok(&[
        "eval",
        "--data",
        path(&data),
        "--policy",
        path(&policy),
        "--device",
        &device,
        "--limit",
        "3000",
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let overall = &report["report"]["overall"];
    assert!(overall["positions"].as_u64().unwrap() >= 3000);
    assert!(overall["top1"].as_f64().unwrap() > 0.10, "{report}");
    let phases = report["report"]["phases"].as_array().unwrap();
    assert_eq!(phases.len(), 3);
    let by_phase: u64 = phases.iter().map(|p| p[1]["positions"].as_u64().unwrap()).sum();
    assert_eq!(by_phase, overall["positions"].as_u64().unwrap());
    // The first 20 test positions are the opening of one game: the later
    // phases hold none and are left out, not scored 0.
    let eval_first = |json: bool| {
        let mut args = vec!["eval", "--data", path(&data), "--policy", path(&policy), "--device", &device];
        args.extend(["--limit", "20"]);
        args.extend(json.then_some("--json"));
        run_ok(&args)
    };
    let report: serde_json::Value = serde_json::from_slice(&eval_first(true).stdout).unwrap();
    let phases: Vec<&str> =
        report["report"]["phases"].as_array().unwrap().iter().map(|p| p[0].as_str().unwrap()).collect();
    assert_eq!(phases, ["moves 1-50"], "{report}");
    let text = String::from_utf8(eval_first(false).stdout).unwrap();
    assert!(text.contains("moves 1-50") && !text.contains("moves 151+"), "{text}");

    // Stopped after one epoch and resumed: the same weights as straight through.
    let straight = dir.path().join("straight");
    let resumed = dir.path().join("resumed");
    assert!(train(&straight, "policy", &["--epochs", "2", "--steps-per-epoch", "15"]).status.success());
    assert!(train(&resumed, "policy", &["--epochs", "1", "--steps-per-epoch", "15"]).status.success());
    let again = train(&resumed, "policy", &["--epochs", "1", "--steps-per-epoch", "15"]);
    assert!(!again.status.success(), "a second fresh run must not overwrite a checkpoint");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    assert!(train(&resumed, "policy", &["--epochs", "2", "--steps-per-epoch", "15", "--resume"]).status.success());
    let distance =
        relative_distance(&straight.join("last/weights.safetensors"), &resumed.join("last/weights.safetensors"));
    if device == "cpu" {
        for f in ["last/weights.safetensors", "last/optimizer.safetensors"] {
            assert_eq!(std::fs::read(straight.join(f)).unwrap(), std::fs::read(resumed.join(f)).unwrap(), "{f}");
        }
        assert_eq!(distance, 0.0);
        // Another number of threads rounds the kernel gradients otherwise,
        // which the resume says (it said nothing).
        let threads = dir.path().join("threads");
        let steps = ["--steps-per-epoch", "5", "--set"];
        assert!(train(&threads, "policy", &[&["--epochs", "1"], &steps[..], &["threads=1"]].concat()).status.success());
        let out = train(&threads, "policy", &[&["--epochs", "2"], &steps[..], &["threads=2", "--resume"]].concat());
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && said.contains("trained on 1 CPU threads and goes on with 2"), "{said}");
    } else {
        // On a GPU, cuDNN's algorithms add in an order that can change from
        // process to process, and 15 steps of a young net amplify the last
        // bits: on an H100 the resumed weights were 0.9% (relative L2) from
        // the straight ones, as 1 and 2 CPU threads leave them 0.6% apart.
        // A resume that lost its momentum buffers lands 3.9% away (CPU).
        assert!(distance < 0.02, "resumed weights {:.2}% from the straight run's", distance * 100.0);
    }

    // --stop-after ends a run after the epoch that would pass the limit,
    // its checkpoint written; --resume finishes it.
    let segmented = dir.path().join("segmented");
    let out = train(&segmented, "policy", &["--epochs", "3", "--steps-per-epoch", "5", "--stop-after", "0.001"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("stopping after epoch 1 of 3") && said.contains("--stop-after 0.001 s"), "{said}");
    assert_eq!(metrics(&segmented).len(), 1);
    assert!(train(&segmented, "policy", &["--epochs", "3", "--steps-per-epoch", "5", "--resume"]).status.success());
    assert_eq!(metrics(&segmented).len(), 3);
    let bad = train(&segmented, "policy", &["--stop-after", "0", "--resume"]);
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("positive number of seconds"));
    let huge = train(&segmented, "policy", &["--stop-after", "1e20", "--resume"]);
    assert!(String::from_utf8_lossy(&huge.stderr).contains("more seconds than a clock counts"), "{huge:?}");

    // A corrupted checkpoint is refused with its file named.
    let weights = resumed.join("last/weights.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&weights, bytes).unwrap();
    let out = train(&resumed, "policy", &["--epochs", "3", "--steps-per-epoch", "15", "--resume"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("weights.safetensors"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The playout and value nets train too; the value net reports its MSE
    // next to the constant-0.5 baseline of 0.25.
    let playout = dir.path().join("playout");
    assert!(train(&playout, "playout", &["--epochs", "2", "--steps-per-epoch", "60"]).status.success());
    let m = metrics(&playout);
    assert!(m[1]["train"]["loss"].as_f64().unwrap() < m[0]["train"]["loss"].as_f64().unwrap(), "{m:?}");
    let value = dir.path().join("value");
    let out = train(&value, "value", &["--epochs", "1", "--steps-per-epoch", "60"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("baseline 0.25"));
    let m = metrics(&value);
    let mse = m[0]["validation"]["loss"].as_f64().unwrap();
    assert!(mse > 0.0 && mse < 0.3, "{m:?}");
    assert!(m[0]["validation"]["accuracy"].as_f64().is_some());

    // Averaged over the 8 symmetries, the policy net is scored too.
    let out =
        run_ok(&["eval", "--data", path(&data), "--policy", path(&policy), "--limit", "500", "--symmetries", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["report"]["overall"]["top1"].as_f64().unwrap() > 0.10, "{report}");
    // `--value none` names no net, as everywhere (it was read as a file
    // after the policy had been scored); a bad net fails before any is scored.
    let out = run_ok(&["eval", "--data", path(&data), "--policy", path(&policy), "--value", "none", "--limit", "50"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("none:"));
    let bad =
        run(&["eval", "--data", path(&data), "--policy", path(&policy), "--value", "no/such/net", "--limit", "50"]);
    assert!(!bad.status.success() && bad.stdout.is_empty(), "{}", String::from_utf8_lossy(&bad.stdout));

    // The value net mixed with random playouts, as MCTS leaves mix them,
    // is scored on the same positions as the net alone; a weight outside
    // 0..=1 is refused.
    let value_eval =
        ["eval", "--data", path(&data), "--value", path(&value), "--limit", "300", "--baseline-positions", "0"];
    let out = run_ok(&[&value_eval[..], &["--mix", "1", "--mix-playouts", "4", "--json"]].concat());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (alone, mixed) = (&report["report"]["overall"], &report["mixed"]["report"]["overall"]);
    assert_eq!(alone["positions"], mixed["positions"], "{report}");
    let mse = mixed["loss"].as_f64().unwrap();
    assert!(mse > 0.0 && mse < 0.5 && mse != alone["loss"].as_f64().unwrap(), "{report}");
    let bad = run(&[&value_eval[..], &["--mix", "1.5"]].concat());
    assert!(!bad.status.success() && String::from_utf8_lossy(&bad.stderr).contains("give a number from 0 to 1"));
    let no_value = run(&["eval", "--data", path(&data), "--policy", path(&policy), "--mix", "1"]);
    assert!(!no_value.status.success() && String::from_utf8_lossy(&no_value.stderr).contains("give --value"));
    // Tactical playouts score the same positions and name
    // themselves; without --mix they are refused.
    let out = run_ok(&[&value_eval[..], &["--mix", "1", "--mix-playouts", "4", "--mix-tactics", "--json"]].concat());
    let tactical: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(tactical["mixed"]["tactics"], true, "{tactical}");
    assert_eq!(tactical["mixed"]["report"]["overall"]["positions"], mixed["positions"], "{tactical}");
    let no_mix = run(&[&value_eval[..], &["--mix-tactics"]].concat());
    assert!(!no_mix.status.success() && String::from_utf8_lossy(&no_mix.stderr).contains("give --mix"));
    // The ownership baseline says how many positions it was fitted on:
    // those asked for, not a whole batch of 256.
    let fitted = ["eval", "--data", path(&data), "--value", path(&value), "--limit", "50", "--json"];
    let out = run_ok(&[&fitted[..], &["--baseline-positions", "50"]].concat());
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ownership_baseline"]["fitted_on"], 50, "{report}");

    play_with_the_trained_nets(dir.path(), &policy, &playout, &value);
}

/// The agents built on the nets just trained: the policy agent beats the
/// random one, MCTS plays complete legal games, and `go-train gtp` answers
/// with its nets loaded.
fn play_with_the_trained_nets(dir: &Path, policy: &Path, playout: &Path, value: &Path) {
    let summary = |out: &Output| -> serde_json::Value { serde_json::from_slice(&out.stdout).unwrap() };
    let games = dir.join("policy-vs-random");
    let out = run_ok(&[
        "eval",
        "--match",
        "policy",
        "random",
        "--policy",
        path(policy),
        "--games",
        "4",
        "--out",
        path(&games),
        "--json",
    ]);
    let m = summary(&out);
    assert!(m["a_wins"].as_u64().unwrap() >= 3, "{m}");
    assert_eq!(m["a_wins_by_color"].as_array().unwrap().len(), 2);
    // A second match into the same folder is refused without --force.
    let again = run(&["eval", "--match", "policy", "random", "--policy", path(policy), "--out", path(&games)]);
    assert!(!again.status.success() && String::from_utf8_lossy(&again.stderr).contains("--force"));

    let games = dir.join("mcts-vs-policy");
    let mcts = "mcts:iterations=24,batch=4,leaf=value";
    let out = run_ok(&[
        "eval",
        "--match",
        mcts,
        "policy",
        "--policy",
        path(policy),
        "--value",
        path(value),
        "--playout",
        path(playout),
        "--games",
        "2",
        "--max-moves",
        "120",
        "--out",
        path(&games),
        "--json",
    ]);
    let m = summary(&out);
    assert_eq!(m["games"], 2);
    assert_eq!(m["forfeits"], serde_json::json!([0, 0]), "{m}");
    for g in m["details"].as_array().unwrap() {
        let record = go_train::sgf::read_file(Path::new(g["file"].as_str().unwrap())).unwrap().remove(0).unwrap();
        let game = record.replay(go_train::go::Rules::CHINESE).expect("every move legal");
        assert_eq!(game.move_count(), g["moves"].as_u64().unwrap() as usize);
        assert!(game.move_count() <= 120);
    }

    let mut gtp = go_train::gtp::GtpClient::spawn(&format!(
        "{} gtp --engine mcts --iterations 16 --policy {} --value {} --playout {}",
        common::BIN,
        path(policy),
        path(value),
        path(playout)
    ))
    .unwrap();
    assert!(gtp.send("boardsize 9").is_err(), "the nets play 19x19 only");
    gtp.send("play b Q16").unwrap();
    let reply = gtp.send("genmove w").unwrap();
    assert!(go_train::go::Vertex::parse_gtp(&reply, 19).is_some() || reply == "pass", "{reply}");
    assert_eq!(gtp.send("list_stones white").unwrap(), reply.to_uppercase().replace("PASS", ""));
}

#[test]
fn a_bad_config_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "net = \"policy\"\nepochs = [\n").unwrap();
    let out = run(&["train-policy", "--config", path(&bad)]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml"), "{err}");
    let out = run(&["train-policy", "--config", &config("policy"), "--data", path(&dir.path().join("nothing"))]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("manifest.json"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&["train-value", "--config", &config("policy-value-ownership"), "--set", "ownership_weight=-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("policy-value-ownership.toml") && err.contains("ownership_weight"),
        "{err}"
    );
    // A flag and a --set of the same setting: the flag once won silently,
    // and the --set value was not even checked.
    let out = run(&["train-policy", "--config", &config("policy"), "--epochs", "1", "--set", "epochs=1e30"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--epochs") && err.contains("--set epochs"), "{err}");
}

/// From a folder with no `configs/` the seed's settings are built in, and
/// `--resume` with only `--out` goes on with the run's saved settings (its
/// data, its steps per epoch), not the defaults.
#[test]
fn runs_need_no_config_file_and_resume_with_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = small_dataset(dir.path(), "kgs-6d", 19, 12, "0.8,0.1,0.1") else { return };
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out_dir = dir.path().join("run");
    let train = |args: &[&str]| {
        let out = common::go_train(args).current_dir(&elsewhere).output().unwrap();
        assert!(out.status.success(), "{args:?}:\n{}", String::from_utf8_lossy(&out.stderr));
    };
    train(&[
        "train-playout",
        "--data",
        path(&data),
        "--out",
        path(&out_dir),
        "--epochs",
        "1",
        "--steps-per-epoch",
        "3",
        "--set",
        "optimizer.kind=adam",
    ]);
    // An Adam setting is the saved run's, not one of the built-in SGD
    // config, which refused it.
    train(&["train-playout", "--out", path(&out_dir), "--resume", "--epochs", "2", "--set", "optimizer.beta1=0.9"]);
    let m = metrics(&out_dir);
    assert_eq!(m.len(), 2);
    assert_eq!(m[1]["step"].as_u64(), Some(6), "the resumed epoch kept 3 steps: {m:?}");

    // A closed stderr (`2>&1 | head -1`, its reader gone) leaves the
    // work alone: an epoch's line to it once ended the run, with status 0,
    // after its first epoch.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let quiet = dir.path().join("quiet");
    let args =
        ["train-playout", "--data", path(&data), "--out", path(&quiet), "--epochs", "3", "--steps-per-epoch", "2"];
    let unheard = common::go_train(&args).stderr(writer).output().unwrap();
    assert!(unheard.status.success());
    assert_eq!(metrics(&quiet).len(), 3, "every epoch trained");

    // A run with nothing left to do keeps the config.toml it trained by.
    let config = std::fs::read(out_dir.join("config.toml")).unwrap();
    train(&["train-playout", "--out", path(&out_dir), "--resume", "--epochs", "1"]);
    assert_eq!(std::fs::read(out_dir.join("config.toml")).unwrap(), config);
    // train-value does not go on training a move net, nor the others a
    // value net.
    let out = common::go_train(&["train-value", "--out", path(&out_dir), "--resume", "--epochs", "3"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("net playout is the fast playout net"), "{err}");
    assert_eq!(metrics(&out_dir).len(), 2);
    // A resumed run names each setting it goes on with changed.
    let out = common::go_train(&["train-playout", "--out", path(&out_dir), "--resume", "--epochs", "3"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("settings changed: epochs 2 → 3"), "{err}");
    let err = common::fails(&[
        "train-policy",
        "--data",
        path(&data),
        "--out",
        path(&dir.path().join("v")),
        "--set",
        "net=\"value\"",
    ]);
    assert!(err.contains("net value is a value net") && err.contains("train-value"), "{err}");
    // A dataset's folder is not a run's, even with --force.
    let before = std::fs::read_dir(&data).unwrap().count();
    let err = common::fails(&["train-policy", "--data", path(&data), "--out", path(&data), "--force"]);
    assert!(err.contains("holds a dataset"), "{err}");
    assert_eq!(std::fs::read_dir(&data).unwrap().count(), before, "nothing written into it");
    // The playout run is train-playout's alone, the other move nets
    // train-policy's: each once resumed the other's without a word.
    let out = common::go_train(&["train-policy", "--out", path(&out_dir), "--resume", "--epochs", "4"])
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("net playout is the fast playout net: train it with train-playout"));
    assert_eq!(metrics(&out_dir).len(), 3, "{err}");

    // An epoch whose validation loss is not finite stops the run before
    // anything of it is written: it once scored 100% top-1, became the
    // best checkpoint for good, and left metrics.jsonl unreadable.
    let diverged = dir.path().join("diverged");
    let out = common::go_train(&[
        "train-playout",
        "--data",
        path(&data),
        "--out",
        path(&diverged),
        "--epochs",
        "2",
        "--steps-per-epoch",
        "1",
        "--set",
        "optimizer.lr=1e6",
    ])
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("validation loss became NaN after epoch 2"), "{err}");
    let written = std::fs::read_to_string(diverged.join("metrics.jsonl")).unwrap();
    assert!(written.lines().count() == 1 && !written.contains("null"), "{written}");
}

/// A small dataset from `games` real records of `collection` on a `size`
/// board (setup stones allowed: 9x9 records are mostly regression
/// positions), split as `split` says. `None` without the records.
fn small_dataset(dir: &Path, collection: &str, size: usize, games: usize, split: &str) -> Option<PathBuf> {
    let sgf = dir.join(format!("sgf-{size}-{split}"));
    std::fs::create_dir_all(&sgf).unwrap();
    let tag = format!("SZ[{size}]");
    let sized = |p: &PathBuf| String::from_utf8_lossy(&std::fs::read(p).unwrap()).contains(&tag) || size == 19;
    for (i, file) in common::sgf_files(collection)?.iter().filter(|p| sized(p)).take(games).enumerate() {
        std::fs::copy(file, sgf.join(format!("game{i}.sgf"))).unwrap();
    }
    let list = dir.join(format!("games-{size}-{split}.list"));
    let size_arg = size.to_string();
    let criteria = ["--size", &size_arg, "--min-year", "0", "--any-komi", "--allow-handicap"];
    run_ok(&[&["filter", path(&sgf), "--out", path(&list)][..], &criteria].concat());
    let data = dir.join(format!("data-{size}-{split}"));
    run_ok(&[
        "prepare",
        path(&list),
        "--out",
        path(&data),
        "--size",
        &size_arg,
        "--split",
        split,
        "--block-records",
        "16",
    ]);
    Some(data)
}

#[test]
fn a_dataset_the_nets_cannot_train_on_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |data: &Path, extra: &[&str], expect: &str| {
        let out_dir = dir.path().join("out");
        let cfg = config("policy");
        // A value net is train-value's.
        let command = if extra.iter().any(|e| e.contains("value")) { "train-value" } else { "train-policy" };
        let mut args =
            vec![command, "--config", &cfg, "--data", path(data), "--out", path(&out_dir), "--device", "cpu"];
        args.extend(extra);
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(err.contains(expect) && err.contains("manifest.json") && err.contains(path(data)), "{err}");
        assert!(!out_dir.join("config.toml").exists(), "nothing is written");
    };
    // (a) A 9x9 dataset: the nets are 19x19.
    let Some(nine) = small_dataset(dir.path(), "gnugo-regression", 9, 40, "0.8,0.1,0.1") else { return };
    refused(&nine, &[], "9x9");
    // (b) Fewer train positions than one batch (6 games hold far fewer than
    // a million, whichever 6 the records folder gives).
    let tiny = small_dataset(dir.path(), "kgs-6d", 19, 6, "1,1,0").unwrap();
    refused(&tiny, &["--set", "batch=1000000"], "fewer than one batch");
    // (c) No validation positions.
    let no_validation = small_dataset(dir.path(), "kgs-6d", 19, 6, "1,0,0").unwrap();
    refused(&no_validation, &["--set", "batch=4"], "validation split");
    // (d) A net that learns ownership, on a dataset prepared without it.
    refused(&tiny, &["--set", "batch=4", "--set", "net=policy-value-ownership"], "prepare it with --ownership");

    // --force removes the old run before it writes its config: killed (here
    // by a diverging loss) before its first checkpoint, it leaves nothing a
    // --resume could pick up under the new config.
    let out_dir = dir.path().join("forced");
    let cfg = config("policy");
    let train = |extra: &[&str]| {
        let mut args =
            vec!["train-policy", "--config", &cfg, "--data", path(&tiny), "--out", path(&out_dir), "--device", "cpu"];
        args.extend(["--set", "batch=4", "--epochs", "1"]);
        args.extend(extra);
        run(&args)
    };
    let out = train(&[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let old = ["last", "metrics.jsonl", "metrics.svg", "metrics.png", "best.safetensors"];
    assert!(old.iter().all(|f| out_dir.join(f).exists()));
    let out = train(&["--force", "--set", "optimizer.lr=1e30"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("loss became"));
    for f in old {
        assert!(!out_dir.join(f).exists(), "{f} of the old run is left");
    }
    assert!(out_dir.join("config.toml").exists());
}

/// Launched as one of several ranks (torchrun's variables), a build
/// without NCCL refuses at once, naming the launcher and the fix, rather
/// than training alone; an `srun` task of a one-task step trains as one
/// process.
#[cfg(not(feature = "nccl"))]
#[test]
fn several_ranks_need_nccl_and_one_srun_task_trains_alone() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = small_dataset(dir.path(), "kgs-6d", 19, 6, "1,1,0") else { return };
    let out_dir = dir.path().join("out");
    let cfg = config("playout");
    let args = [
        "train-playout",
        "--config",
        &cfg,
        "--data",
        path(&data),
        "--out",
        path(&out_dir),
        "--device",
        "cpu",
        "--epochs",
        "1",
    ];
    let launched = |vars: &[(&str, &str)]| {
        let mut cmd = common::go_train(&args);
        cmd.args(["--set", "batch=8", "--steps-per-epoch", "2"]);
        for var in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID"] {
            cmd.env_remove(var);
        }
        cmd.envs(vars.iter().copied()).output().unwrap()
    };
    let out = launched(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "29500")]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("torchrun: RANK=0, WORLD_SIZE=2") && err.contains("--features nccl"), "{err}");
    assert!(!out_dir.join("config.toml").exists(), "nothing is written");
    let out = launched(&[("SLURM_PROCID", "0"), ("SLURM_STEP_NUM_TASKS", "1"), ("SLURM_LOCALID", "0")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(metrics(&out_dir).len(), 1);
}

/// bf16 is a GPU's: on the CPU a run asked for it stops at its start,
/// naming the setting, and writes neither its config nor a checkpoint; so
/// does a batch the memory cannot hold.
#[test]
fn what_the_cpu_cannot_run_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let data = small_dataset(dir.path(), "kgs-6d", 19, 6, "1,1,0").unwrap();
    let out_dir = dir.path().join("out");
    let cfg = config("policy");
    let mut args = vec!["train-policy", "--config", &cfg, "--data", path(&data), "--out", path(&out_dir)];
    args.extend(["--device", "cpu", "--precision", "bf16"]);
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("precision") && err.contains("GPU only"), "{err}");
    assert!(!out_dir.join("config.toml").exists() && !out_dir.join("last").exists(), "nothing is written");

    // A batch no machine's memory holds, of no more positions than the
    // training split has: a residual net of 20×256 needs about 90 MB a
    // position, 10,000 of them 900 GB. Refused, not aborted on a step.
    let data = small_dataset(dir.path(), "kgs-6d", 19, 80, "0.9,0.1,0").unwrap();
    let mut args = vec!["train-policy", "--config", &cfg, "--data", path(&data), "--out", path(&out_dir)];
    args.extend(["--device", "cpu", "--set", "net=resnet-policy:20x256", "--set", "batch=10000"]);
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("batch = 10000 needs at least") && (err.contains(" GiB") || err.contains(" TiB")), "{err}");
    assert!(!out_dir.join("config.toml").exists() && !out_dir.join("last").exists(), "nothing is written");
}
