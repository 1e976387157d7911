//! `go-train train-rl`: a run stopped and resumed ends with the weights of
//! one that never stopped; a folder holding a run and bad settings are
//! refused.

mod common;

use std::path::Path;

use common::{fails, path, run_ok as ok};

/// A tiny run of the shipped policy: 4 games of 24 moves an iteration, a
/// snapshot and a match against the start every 2 iterations.
fn init() -> &'static str {
    concat!(env!("CARGO_MANIFEST_DIR"), "/nets/policy.safetensors")
}

fn tiny(out: &Path, start: &str, extra: &[&str]) {
    let mut args = vec!["train-rl", "--init", start, "--out", path(out), "--games", "4", "--max-moves", "24"];
    args.extend(["--pool-every", "2", "--eval-every", "2", "--eval-games", "4", "--lr", "0.01", "--momentum", "0.9"]);
    args.extend(extra);
    ok(&args);
}

/// The metrics of a run, seconds left out.
fn metrics(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut m: serde_json::Value = serde_json::from_str(l).unwrap();
            m.as_object_mut().unwrap().retain(|key, _| !key.ends_with("seconds"));
            m
        })
        .collect()
}

#[test]
fn a_resumed_run_ends_as_one_that_never_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    tiny(&whole, init(), &["--iterations", "3"]);
    // The run keeps its start policy: the file it started from may go.
    let copy = dir.path().join("sl.safetensors");
    std::fs::copy(init(), &copy).unwrap();
    tiny(&parts, path(&copy), &["--iterations", "2"]);
    std::fs::remove_file(&copy).unwrap();
    let err = fails(&["train-rl", "--out", path(&parts), "--iterations", "3"]);
    assert!(err.contains("--resume") && err.contains("--force"), "{err}");
    // The run's own settings come back; only the iterations are extended.
    ok(&["train-rl", "--out", path(&parts), "--iterations", "3", "--resume"]);
    let weights = |d: &Path| std::fs::read(d.join("last/weights.safetensors")).unwrap();
    assert_eq!(weights(&whole), weights(&parts), "the same weights, to the byte");
    assert_eq!(
        std::fs::read(whole.join("last/optimizer.safetensors")).unwrap(),
        std::fs::read(parts.join("last/optimizer.safetensors")).unwrap()
    );
    let m = metrics(&whole);
    assert_eq!(m, metrics(&parts));
    assert_eq!(m.len(), 3);
    assert!(m[1]["against_start"]["games"] == 4 && m[0]["against_start"].is_null());
    assert_eq!(m[2]["pool"], 2, "the snapshot of iteration 2 joined the pool");
    assert!(parts.join("pool/iteration-000002.safetensors").is_file() && parts.join("best.safetensors").is_file());
    // The weights moved, all but the pass logit: the learner learns where
    // to play, not when to pass.
    let tensors = |path: &Path| go_train::nn::weights::read_tensors(path, &candle_core::Device::Cpu).unwrap().tensors;
    let (start, trained) = (tensors(Path::new(init())), tensors(&whole.join("last/weights.safetensors")));
    let values = |t: &candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    assert!((values(&start["pass_logit"])[0] - values(&trained["pass_logit"])[0]).abs() < 1e-5);
    assert_ne!(values(&start["head.weight"]), values(&trained["head.weight"]));
    // Nothing left to do.
    ok(&["train-rl", "--out", path(&parts), "--iterations", "3", "--resume"]);
    // Metrics cut short (by outside damage) are named, as a supervised
    // run names them: a resume once went on with a gap in its plot.
    let file = parts.join("metrics.jsonl");
    let full = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, full.lines().take(2).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let said = common::text(&ok(&["train-rl", "--out", path(&parts), "--iterations", "3", "--resume"]));
    assert!(said.contains("records 2 iterations, the checkpoint is at iteration 3"), "{said}");
    std::fs::write(&file, full).unwrap();
    // A run that lost its checkpoint is not started again over its metrics.
    std::fs::remove_dir_all(parts.join("last")).unwrap();
    let err = fails(&["train-rl", "--out", path(&parts), "--iterations", "4", "--resume"]);
    assert!(err.contains("state.json") && err.contains("missing"), "{err}");
    assert_eq!(metrics(&parts).len(), 3, "the metrics stay");
}

#[test]
fn bad_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    for (flag, value, named) in [
        ("--games", "0", "games"),
        ("--lr", "-1", "learning rate"),
        ("--temperature", "0", "temperature"),
        ("--momentum", "1.5", "--momentum"),
        ("--baseline", "median", "median"),
        ("--komi", "inf", "komi"),
        // In the range every other komi takes, and worded as they word it.
        ("--komi", "1500", "komi 1500: give a number from -1000 to 1000"),
        ("--move-fraction", "0", "move_fraction"),
        // A temperature whose division overflows: once a whole iteration
        // played, then a NaN loss blamed on --lr. The value as typed, not
        // as it rounds (`1e-300` was once called 0, 1e-300 written out).
        ("--temperature", "1e-45", "give a number from 0.001 to 10"),
        ("--temperature", "1e-300", "1e-300"),
        ("--move-fraction", "1e-300", "move_fraction 1e-300:"),
        // Once a capacity-overflow panic, or an abort allocating for them.
        ("--games", "18446744073709551615", "--games"),
        ("--eval-games", "100000000", "--eval-games"),
    ] {
        let err = fails(&["train-rl", "--out", path(&out), &format!("{flag}={value}")]);
        assert!(err.contains(named), "{flag} {value}: {err}");
    }
    // A negative number after its flag is the flag's value, refused by
    // its range rather than taken for a flag of its own.
    let err = fails(&["train-rl", "--out", path(&out), "--lr", "-1"]);
    assert!(err.contains("lr = -1"), "{err}");
    // Nets train-rl does not play with are not taken and ignored.
    let err = fails(&["train-rl", "--out", path(&out), "--value", "no/such/value.safetensors"]);
    assert!(err.contains("--value"), "{err}");
    let err = fails(&["train-rl", "--out", path(&out), "--init", "no/such/policy.safetensors"]);
    assert!(err.contains("no/such/policy.safetensors"), "{err}");
    assert!(!out.exists(), "a refused run leaves nothing behind");
    // Nor is a dataset's folder a run's (its files were once mixed in).
    let dataset = dir.path().join("dataset");
    std::fs::create_dir(&dataset).unwrap();
    std::fs::write(dataset.join("manifest.json"), "{}").unwrap();
    for force in [&[][..], &["--force"]] {
        let err = fails(&[&["train-rl", "--out", path(&dataset), "--init", init()][..], force].concat());
        assert!(err.contains("holds a dataset"), "{err}");
    }
    assert_eq!(std::fs::read_dir(&dataset).unwrap().count(), 1, "nothing written beside it");
}

/// A run resumes in the folder given (a copy, or the same run from
/// another working folder), not in the one its settings were written in;
/// `--force` starts from a net kept in the folder it replaces; a resume
/// refused for its settings leaves the run's own.
#[test]
fn resume_and_force_keep_to_the_folder_given() {
    let dir = tempfile::tempdir().unwrap();
    let (first, copy) = (dir.path().join("first"), dir.path().join("copy"));
    let quick = ["--games", "2", "--max-moves", "16", "--eval-every", "0", "--threads", "1", "--pool-every", "2"];
    ok(&[&["train-rl", "--init", init(), "--out", path(&first), "--iterations", "1", "--komi", "-7.5"][..], &quick]
        .concat());
    let settings: serde_json::Value = serde_json::from_slice(&std::fs::read(first.join("rl.json")).unwrap()).unwrap();
    assert_eq!(settings["komi"], -7.5);
    let original = std::fs::read(first.join("last/state.json")).unwrap();
    copy_folder(&first, &copy);
    ok(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "2"]);
    assert_eq!(std::fs::read(first.join("last/state.json")).unwrap(), original, "the original run is untouched");
    assert_eq!(metrics(&copy).len(), 2, "the copy went on");
    // --init may name the run's start however its path is spelt; only
    // another policy is refused (a path spelt otherwise once was too).
    let respelt = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/../nets/policy.safetensors");
    ok(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "2", "--init", respelt]);
    // A checkpoint folder whose best weights are the start's: the same.
    let folder = dir.path().join("checkpoint");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(init(), folder.join("best.safetensors")).unwrap();
    ok(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "2", "--init", path(&folder)]);
    let other = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/rl-policy.safetensors");
    let err = fails(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "2", "--init", other]);
    assert!(err.contains("started from"), "{err}");

    let settings = std::fs::read(copy.join("rl.json")).unwrap();
    let err = fails(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "3", "--pool-every", "1"]);
    assert!(err.contains("--pool-every"), "{err}");
    // Every 4 found no snapshot missing, and left the run's of iteration 2
    // out of the pool.
    let err = fails(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "4", "--pool-every", "4"]);
    assert!(err.contains("rl.json") && err.contains("pool_every 2") && err.contains("--pool-every 4"), "{err}");
    assert_eq!(metrics(&copy).len(), 2, "nothing played");
    assert_eq!(std::fs::read(copy.join("rl.json")).unwrap(), settings, "a refused resume keeps the run's settings");
    // A resume reads no shipped nets: a GO_TRAIN_NETS that names nothing is no matter.
    let done = common::go_train(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "1", "--lr", "0.5"])
        .env("GO_TRAIN_NETS", dir.path().join("no-such-folder"))
        .output()
        .unwrap();
    assert!(done.status.success(), "{}", common::text(&done));
    // The run's count, not the flag's.
    let said = common::text(&done);
    assert!(said.contains("2 iterations are done") && said.contains("--iterations 1"), "{said}");
    assert_eq!(std::fs::read(copy.join("rl.json")).unwrap(), settings, "a finished run keeps its settings");

    // The run's own copy of its start, which --force removes with the run.
    let kept = first.join("pool/start.safetensors");
    let start = std::fs::read(&kept).unwrap();
    ok(&[&["train-rl", "--init", path(&kept), "--out", path(&first), "--force", "--iterations", "1"][..], &quick]
        .concat());
    assert_eq!(std::fs::read(&kept).unwrap(), start);

    // Neither kind of trainer takes the other's run, even with --force
    // (train-rl once called a train-policy run its own, and deleted it).
    let err = fails(&["train-playout", "--data", path(&dir.path().join("none")), "--out", path(&first), "--force"]);
    assert!(err.contains("holds a train-rl run") && err.contains("another --out"), "{err}");
    assert!(first.join("rl.json").is_file() && first.join("last/state.json").is_file(), "the run is untouched");
    let supervised = dir.path().join("supervised");
    std::fs::create_dir_all(supervised.join("last")).unwrap();
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/configs/policy.toml"), supervised.join("config.toml")).unwrap();
    for force in [&[][..], &["--force"]] {
        let err = fails(&[&["train-rl", "--init", init(), "--out", path(&supervised)][..], force, &quick].concat());
        assert!(err.contains("not of train-rl") && err.contains("another --out"), "{force:?}: {err}");
    }
    assert!(supervised.join("config.toml").is_file() && supervised.join("last").is_dir(), "the run is untouched");
}

/// Settings edited by hand into rl.json are checked as the flags are (a
/// `games` of 2^62 once overflowed an allocation), a damaged best net is
/// replaced by the next match's winner, and a resume says which settings
/// its flags changed.
#[test]
fn a_resume_checks_the_runs_files() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    tiny(&run, init(), &["--iterations", "2", "--threads", "1"]);
    let settings = std::fs::read_to_string(run.join("rl.json")).unwrap();
    for (name, from, to, said) in [
        ("games", "\"games\": 4,", "\"games\": 4611686018427387904,", "give a whole number from 1 to 100000"),
        ("momentum", "\"momentum\": 0.9", "\"momentum\": 1.5", "optimizer.momentum = 1.5 is out of range"),
        ("unknown", "\"games\": 4,", "\"games\": 4, \"gmaes\": 8,", "unknown field `gmaes`"),
    ] {
        let copy = dir.path().join(name);
        copy_folder(&run, &copy);
        assert!(settings.contains(from), "{settings}");
        std::fs::write(copy.join("rl.json"), settings.replacen(from, to, 1)).unwrap();
        let err = fails(&["train-rl", "--out", path(&copy), "--resume", "--iterations", "3"]);
        assert!(err.contains("rl.json") && err.contains(said), "{name}: {err}");
        assert_eq!(metrics(&copy).len(), 2, "{name}: nothing played");
    }

    let best = run.join("best.safetensors");
    assert!(best.is_file());
    std::fs::write(&best, b"").unwrap();
    let resumed = common::go_train(&["train-rl", "--out", path(&run), "--resume", "--iterations", "4", "--lr", "0.02"])
        .output()
        .unwrap();
    let said = common::text(&resumed);
    assert!(resumed.status.success(), "{said}");
    assert!(said.contains("best.safetensors: damaged") && said.contains("are lost"), "{said}");
    assert!(said.contains("settings changed") && said.contains("optimizer.lr 0.01 → 0.02"), "{said}");
    assert!(best.metadata().unwrap().len() > 0, "iteration 4's match wrote the best net again");
}

/// A fresh run killed between copying its start policy into the folder and
/// writing its settings left a folder holding that copy alone: the next
/// fresh run takes it, and a folder holding more is still refused.
#[test]
fn a_start_killed_before_its_settings_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let quick = ["--games", "2", "--max-moves", "10", "--eval-every", "0", "--threads", "1", "--iterations", "1"];
    let killed = dir.path().join("killed");
    std::fs::create_dir_all(killed.join("pool")).unwrap();
    std::fs::copy(init(), killed.join("pool/start.safetensors")).unwrap();
    ok(&[&["train-rl", "--init", init(), "--out", path(&killed)][..], &quick].concat());
    assert!(killed.join("rl.json").is_file() && killed.join("last/state.json").is_file());
    assert_eq!(metrics(&killed).len(), 1);

    let more = dir.path().join("more");
    std::fs::create_dir_all(more.join("pool")).unwrap();
    std::fs::copy(init(), more.join("pool/start.safetensors")).unwrap();
    std::fs::copy(init(), more.join("pool/iteration-000002.safetensors")).unwrap();
    let err = fails(&[&["train-rl", "--init", init(), "--out", path(&more)][..], &quick].concat());
    assert!(err.contains("--force"), "{err}");
    assert!(more.join("pool/iteration-000002.safetensors").is_file() && !more.join("rl.json").exists());
}

/// Settings that would train nothing are refused before a game is played:
/// the mean baseline of one game is its outcome, so every move weighs 0.
#[test]
fn settings_that_learn_nothing_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let quick = ["--max-moves", "10", "--iterations", "1", "--eval-every", "0", "--threads", "1"];
    let base = ["train-rl", "--init", init(), "--out", path(&out)];
    let err = fails(&[&base[..], &quick, &["--games", "1"]].concat());
    assert!(err.contains("games 1") && err.contains("baseline"), "{err}");
    let err = fails(&[&base[..], &quick, &["--games", "16", "--move-fraction", "1e-9"]].concat());
    assert!(err.contains("move_fraction") && err.contains("max_moves"), "{err}");
    assert!(!out.exists(), "refused before the folder was made");
    // Without a baseline one game is enough.
    ok(&[&base[..], &quick, &["--games", "1", "--baseline", "none"]].concat());
    // A share that may keep none of the learner's two moves: each
    // iteration that learnt from nothing says so.
    let few = dir.path().join("few");
    let args =
        ["train-rl", "--init", init(), "--out", path(&few), "--games", "2", "--max-moves", "2", "--threads", "1"];
    let done = ok(&[&args[..], &["--move-fraction", "0.5", "--iterations", "4", "--eval-every", "0"]].concat());
    let said = common::text(&done);
    let empty: Vec<u64> =
        (metrics(&few).iter()).filter(|m| m["positions"] == 0).map(|m| m["iteration"].as_u64().unwrap()).collect();
    assert!(!empty.is_empty(), "this seed keeps no move in some iteration");
    for m in metrics(&few) {
        let warned = said.contains(&format!("iteration {} learnt from no position", m["iteration"]));
        assert_eq!(warned, m["positions"] == 0, "{m}: {said}");
    }
}

/// Each iteration writes its metrics before its checkpoint: a run killed
/// between the two in its first iteration, with no checkpoint yet, was
/// refused as one that had lost its checkpoint. It starts again; settings
/// or metrics that cannot be read are named as such, not as missing.
#[test]
fn a_run_killed_before_its_first_checkpoint_is_started_again() {
    let dir = tempfile::tempdir().unwrap();
    let (whole, killed) = (dir.path().join("whole"), dir.path().join("killed"));
    tiny(&whole, init(), &["--iterations", "1"]);
    tiny(&killed, init(), &["--iterations", "1"]);
    std::fs::remove_dir_all(killed.join("last")).unwrap();
    assert_eq!(metrics(&killed).len(), 1, "the first iteration's metrics stay");

    let metrics_file = std::fs::read(killed.join("metrics.jsonl")).unwrap();
    std::fs::write(killed.join("metrics.jsonl"), b"\xff\xfe").unwrap();
    let err = fails(&["train-rl", "--out", path(&killed), "--resume"]);
    assert!(err.contains("cannot read") && err.contains("metrics.jsonl"), "{err}");
    std::fs::write(killed.join("metrics.jsonl"), metrics_file).unwrap();

    ok(&["train-rl", "--out", path(&killed), "--resume"]);
    let weights = |d: &Path| std::fs::read(d.join("last/weights.safetensors")).unwrap();
    assert_eq!(weights(&whole), weights(&killed), "the same weights, to the byte");
    assert_eq!(metrics(&whole), metrics(&killed));

    std::fs::write(killed.join("rl.json"), b"\xff\xfe{").unwrap();
    let err = fails(&["train-rl", "--out", path(&killed), "--resume"]);
    assert!(err.contains("cannot read") && err.contains("rl.json") && !err.contains("missing"), "{err}");
}

fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A learning rate that blows the weights up stops the run, naming
/// `--lr`, before a net of NaNs is saved (one once went on to be resumed
/// and reviewed with).
#[test]
fn a_diverging_run_stops_before_saving_a_broken_net() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("diverged");
    let quick = ["--games", "2", "--max-moves", "10", "--eval-every", "1", "--eval-games", "2", "--threads", "1"];
    let err = fails(
        &[&["train-rl", "--init", init(), "--out", path(&out), "--iterations", "3", "--lr", "1e30"][..], &quick]
            .concat(),
    );
    assert!(err.contains("--lr") && err.contains("--resume"), "{err}");
    for file in ["last/weights.safetensors", "best.safetensors"] {
        let Ok(saved) = go_train::nn::weights::read_tensors(&out.join(file), &candle_core::Device::Cpu) else {
            continue;
        };
        for (name, t) in saved.tensors {
            let values = t.flatten_all().unwrap().to_dtype(candle_core::DType::F32).unwrap().to_vec1::<f32>().unwrap();
            assert!(values.iter().all(|v| v.is_finite()), "{file}: {name} holds a non-finite value");
        }
    }
    for m in metrics(&out) {
        assert!(m["loss"].as_f64().unwrap().is_finite() && m["positions"].as_u64().unwrap() > 0, "{m}");
    }
}
