//! What `train-*` does with the folder it writes: nothing a run wrote is
//! lost or continued under other settings or data without `--force`, one
//! process writes a folder at a time, and settings out of range are refused
//! before anything is written. On a small dataset of real games, with the
//! seed's playout net (a few steps an epoch).

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use go_train::dataset::testkit::{self, Layout};

use common::path;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A dataset of 12 real games in `dir/name`, cut into blocks of
/// `block_records`; `None` (skipped) without the game records.
fn dataset(dir: &Path, name: &str, block_records: usize) -> Option<PathBuf> {
    let games = testkit::kgs_games(12)?;
    let data = dir.join(name);
    std::fs::create_dir_all(&data).unwrap();
    testkit::write_dataset(&data, &games, &Layout { block_records, shard_records: 400 }).unwrap();
    Some(data)
}

/// `train-playout` into `out`, two steps of 8 positions an epoch.
fn train(data: Option<&Path>, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["train-playout", "--out", path(out), "--device", "cpu", "--steps-per-epoch", "2"];
    args.extend(["--set", "batch=8", "--set", "validation_positions=64"]);
    if let Some(data) = data {
        args.extend(["--data", path(data)]);
    }
    args.extend(extra);
    common::run(&args)
}

fn trained(data: Option<&Path>, out: &Path, extra: &[&str]) -> String {
    let run = train(data, out, extra);
    assert!(run.status.success(), "{extra:?}: {}", stderr(&run));
    stderr(&run)
}

fn refused(data: Option<&Path>, out: &Path, extra: &[&str]) -> String {
    let run = train(data, out, extra);
    assert!(!run.status.success(), "{extra:?} should be refused: {}", stderr(&run));
    stderr(&run)
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

/// The bytes of every file a run wrote that a refused run must leave as
/// they were.
fn snapshot(out: &Path) -> Vec<(String, Option<Vec<u8>>)> {
    ["config.toml", "best.safetensors", "metrics.jsonl", "metrics.svg", "metrics.png", "last/weights.safetensors"]
        .iter()
        .map(|f| (f.to_string(), std::fs::read(out.join(f)).ok()))
        .collect()
}

fn epochs_recorded(out: &Path) -> usize {
    std::fs::read_to_string(out.join("metrics.jsonl")).map_or(0, |t| t.lines().count())
}

#[test]
fn resume_refuses_what_it_cannot_continue_and_overwrites_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = dataset(dir.path(), "data", 64) else { return };
    let run = dir.path().join("run");
    trained(Some(&data), &run, &["--epochs", "2"]);
    assert_eq!(epochs_recorded(&run), 2);

    // Each loss, on a copy of the run: refused, naming what is missing,
    // and every file left as it was.
    let damaged = |name: &str, damage: &dyn Fn(&Path)| -> (PathBuf, String) {
        let copy = dir.path().join(name);
        copy_dir(&run, &copy);
        damage(&copy);
        let before = snapshot(&copy);
        let err = refused(None, &copy, &["--resume", "--epochs", "3"]);
        assert_eq!(snapshot(&copy), before, "{name}: a refused resume changed the run");
        (copy, err)
    };
    let (copy, err) = damaged("no-state", &|d| std::fs::remove_file(d.join("last/state.json")).unwrap());
    assert!(err.contains(&format!("{}/last/state.json: missing", copy.display())), "{err}");
    let (copy, err) = damaged("no-last", &|d| std::fs::remove_dir_all(d.join("last")).unwrap());
    assert!(err.contains(&format!("{}/metrics.jsonl records epochs up to 2", copy.display())), "{err}");
    assert!(err.contains("no checkpoint") && err.contains("--force"), "{err}");
    // Without its settings the run cannot go on as it began (it would
    // take the built-in ones, and their dataset).
    let (copy, err) = damaged("no-config", &|d| std::fs::remove_file(d.join("config.toml")).unwrap());
    assert!(err.contains(&format!("{}/config.toml: missing", copy.display())), "{err}");
    assert!(!err.contains("manifest.json"), "{err}");
    // Weights of a best epoch but no metrics nor checkpoint to go with them.
    let (_, err) = damaged("only-best", &|d| {
        std::fs::remove_dir_all(d.join("last")).unwrap();
        std::fs::remove_file(d.join("metrics.jsonl")).unwrap();
    });
    assert!(err.contains("best.safetensors is there"), "{err}");

    // What resuming cannot make worse: a lost plot line, lost best
    // weights (from here on, the best epoch after the checkpoint's). Said,
    // and the run goes on.
    // A damaged best net once stayed damaged through the resumed run, which
    // kept its score to beat.
    for (name, file, emptied, said) in [
        ("no-metrics", "metrics.jsonl", false, &["records 0 epochs, the checkpoint"][..]),
        ("no-best", "best.safetensors", false, &["the best weights up to epoch 2 are lost"]),
        ("damaged-best", "best.safetensors", true, &["damaged: ", "are lost"]),
    ] {
        let copy = dir.path().join(name);
        copy_dir(&run, &copy);
        match emptied {
            true => std::fs::write(copy.join(file), b"").unwrap(),
            false => std::fs::remove_file(copy.join(file)).unwrap(),
        }
        let shown = trained(None, &copy, &["--resume", "--epochs", "3"]);
        assert!(said.iter().all(|said| shown.contains(said)), "{shown}");
        assert!(copy.join(file).metadata().is_ok_and(|m| m.len() > 0), "{file} is written again");
    }

    // Nothing to resume: refused; a requeued job's --resume-or-start
    // starts the run, and resumes it the next time.
    let err = refused(Some(&data), &dir.path().join("nowhere"), &["--resume"]);
    assert!(err.contains("nothing to resume"), "{err}");
    assert!(!dir.path().join("nowhere").exists(), "no folder is made for nothing");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let err = refused(Some(&data), &empty, &["--resume"]);
    assert!(err.contains("nothing to resume"), "{err}");
    trained(Some(&data), &empty, &["--resume-or-start", "--epochs", "1"]);
    trained(Some(&data), &empty, &["--resume-or-start", "--epochs", "2"]);
    assert_eq!(epochs_recorded(&empty), 2, "the second --resume-or-start resumed");

    // A fresh run into a folder holding any file of a run is refused.
    for file in ["metrics.jsonl", "best.safetensors", "config.toml"] {
        let partial = dir.path().join(format!("partial-{file}"));
        std::fs::create_dir(&partial).unwrap();
        std::fs::copy(run.join(file), partial.join(file)).unwrap();
        let err = refused(Some(&data), &partial, &["--epochs", "1"]);
        assert!(err.contains("already holds a run") && err.contains(file), "{err}");
        assert_eq!(std::fs::read(partial.join(file)).unwrap(), std::fs::read(run.join(file)).unwrap());
    }

    // A run killed in its first epoch left its settings alone: --resume
    // starts it again, with them (its 2 steps an epoch, not the default).
    let started = dir.path().join("started");
    std::fs::create_dir(&started).unwrap();
    std::fs::copy(run.join("config.toml"), started.join("config.toml")).unwrap();
    let shown =
        common::run(&["train-playout", "--out", path(&started), "--device", "cpu", "--resume", "--epochs", "1"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(stderr(&shown).contains("finished no epoch"), "{}", stderr(&shown));
    let metrics = std::fs::read_to_string(started.join("metrics.jsonl")).unwrap();
    assert!(metrics.contains("\"step\":2"), "{metrics}");

    // A copy's config.toml names the folder it was written in: --config
    // of it once resumed the original, over its finished checkpoints.
    let copy = dir.path().join("config-copy");
    copy_dir(&run, &copy);
    let before = snapshot(&run);
    let config = copy.join("config.toml");
    let args = ["train-playout", "--config", path(&config), "--device", "cpu", "--resume", "--epochs", "3"];
    let shown = common::run(&args);
    assert!(
        !shown.status.success() && stderr(&shown).contains(&format!("--out {}", copy.display())),
        "{}",
        stderr(&shown)
    );
    assert_eq!(snapshot(&run), before, "the original run is untouched");
    // A resumed run goes on from its checkpoint: a new init would be
    // recorded as a start it never had.
    let init = format!("init={}", path(&run));
    let err = refused(None, &copy, &["--resume", "--epochs", "3", "--set", &init]);
    assert!(err.contains("init") && err.contains("changes nothing"), "{err}");
    // Another optimizer cannot take on the checkpoint's state: once
    // refused as state "which belongs to no parameter of this net".
    let before = snapshot(&copy);
    let err = refused(None, &copy, &["--resume", "--epochs", "3", "--set", "optimizer.kind=adam"]);
    assert!(err.contains("optimizer.kind = \"sgd\"") && err.contains("\"adam\" cannot go on"), "{err}");
    assert!(err.contains(&format!("--set init={}", copy.display())), "{err}");
    assert_eq!(snapshot(&copy), before, "a refused resume changed the run");

    // --force replaces the whole run, its plots included.
    trained(Some(&data), &run, &["--force", "--epochs", "1"]);
    assert_eq!(epochs_recorded(&run), 1);
}

/// Two writers of one folder: the second is refused at once, `--force`
/// or not, naming the folder and the first (pid and host); killed, the
/// first leaves no lock behind.
#[test]
fn a_second_writer_is_refused_and_a_killed_one_leaves_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = dataset(dir.path(), "data", 64) else { return };
    let run = dir.path().join("run");
    let mut first = common::go_train(&[
        "train-playout",
        "--data",
        path(&data),
        "--out",
        path(&run),
        "--device",
        "cpu",
        "--epochs",
        "100000",
    ])
    .args(["--steps-per-epoch", "1", "--set", "batch=8", "--set", "validation_positions=8"])
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let holder = format!("pid {}", first.id());
    let lock = run.join(".go-train.lock");
    // Until the first run holds the folder (bounded, so that a first run
    // that fails cannot hang the test).
    let mut waited = 0;
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&holder)) {
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        assert!(waited < 6000, "the first run never locked {}", run.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    // "pid N on HOST: COMMAND LINE"
    let named = std::fs::read_to_string(&lock).unwrap().split(':').next().unwrap().to_string();
    assert!(named.starts_with(&format!("{holder} on ")) && named.len() > holder.len() + 4, "{named}");
    for extra in [&[][..], &["--force"], &["--resume"]] {
        let err = refused(Some(&data), &run, &[extra, &["--epochs", "1"]].concat());
        assert!(err.contains(&format!("{} is in use by {named}", run.display())), "{extra:?}: {err}");
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let shown = trained(Some(&data), &run, &["--resume", "--stop-after", "0.001"]);
    assert!(!shown.contains("in use"), "{shown}");
}

/// A checkpoint knows the dataset it trained on: resuming on another (or
/// on its own folder prepared again) is refused, naming both; a checkpoint
/// from before this was recorded resumes, saying so; `eval` on another
/// dataset says which the net was trained on.
#[test]
fn a_checkpoint_knows_its_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = dataset(dir.path(), "data", 64) else { return };
    let identity = |data: &Path| -> String {
        let info = common::run(&["dataset", "info", "--quick", "--json", path(data)]);
        let info: serde_json::Value = serde_json::from_slice(&info.stdout).unwrap();
        info["identity"].as_str().expect("dataset info names the identity").to_string()
    };
    let first = identity(&data);
    let run = dir.path().join("run");
    trained(Some(&data), &run, &["--epochs", "1"]);
    let old = dir.path().join("old");
    copy_dir(&run, &old);

    // The same folder, prepared again into other blocks (the same games,
    // read in another order).
    for entry in std::fs::read_dir(&data).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    testkit::write_dataset(&data, &testkit::kgs_games(12).unwrap(), &Layout { block_records: 32, shard_records: 400 })
        .unwrap();
    let second = identity(&data);
    assert_ne!(first, second);
    let before = snapshot(&run);
    let err = refused(None, &run, &["--resume", "--epochs", "2"]);
    assert!(err.contains(&format!("trained on dataset {first} ({})", data.display())), "{err}");
    assert!(err.contains(&format!("{} is dataset {second}", data.display())), "{err}");
    assert_eq!(snapshot(&run), before);

    // Its net, evaluated on the rebuilt dataset, says what it was trained on.
    let eval =
        common::run(&["eval", "--data", path(&data), "--playout", path(&run), "--limit", "100", "--device", "cpu"]);
    assert!(eval.status.success(), "{}", stderr(&eval));
    assert!(stderr(&eval).contains(&format!("was trained on dataset {first}, not on")), "{}", stderr(&eval));

    // A checkpoint written before datasets were recorded resumes once with a
    // note, and records the dataset from then on.
    let state = old.join("last/state.json");
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert!(json["state"]["dataset"]["id"] == first.as_str(), "{json}");
    json["state"].as_object_mut().unwrap().remove("dataset");
    std::fs::write(&state, serde_json::to_vec(&json).unwrap()).unwrap();
    let shown = trained(Some(&data), &old, &["--resume", "--epochs", "2"]);
    assert!(shown.contains("names no dataset"), "{shown}");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert!(json["state"]["dataset"]["id"] == second.as_str(), "{json}");
    assert!(trained(Some(&data), &old, &["--resume", "--epochs", "3"]).lines().all(|l| !l.contains("names no")));
}

/// A run started with a relative `--data` resumes from its own folder;
/// from another, the refusal says where the path is read from (it once said
/// "run prepare first" of a dataset that is there), and `--data` resumes.
#[test]
fn a_relative_dataset_is_named_as_the_run_saved_it() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = dataset(dir.path(), "data", 64) else { return };
    let run = |cwd: &Path, args: &[&str]| {
        let mut all = vec!["train-playout", "--out", "run", "--device", "cpu", "--steps-per-epoch", "2"];
        all.extend(["--set", "batch=8", "--set", "validation_positions=64"]);
        all.extend(args);
        common::go_train(&all).current_dir(cwd).output().unwrap()
    };
    let started = run(dir.path(), &["--data", "data", "--epochs", "1"]);
    assert!(started.status.success(), "{}", stderr(&started));
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(dir.path().join("run"), elsewhere.join("run")).unwrap();
    let refused = run(&elsewhere, &["--resume", "--epochs", "2"]);
    let err = stderr(&refused);
    assert!(!refused.status.success(), "{err}");
    assert!(err.contains("config.toml: the run's dataset, data = \"data\", is relative to the folder"), "{err}");
    assert!(err.contains("give --data") && !err.contains("prepare"), "{err}");
    let resumed = run(&elsewhere, &["--resume", "--epochs", "2", "--data", path(&data)]);
    assert!(resumed.status.success(), "{}", stderr(&resumed));
    let again = run(dir.path(), &["--resume", "--epochs", "3"]);
    assert!(again.status.success(), "{}", stderr(&again));
    // Fewer epochs than it has trained: nothing to do, and said so (it
    // once said "all 2 epochs are done" of a run of 3).
    let fewer = run(dir.path(), &["--resume", "--epochs", "2"]);
    assert!(stderr(&fewer).contains("run: 3 epochs are done, more than the 2 asked"), "{}", stderr(&fewer));
}

/// Settings out of their range are refused at once, named with their
/// range, before the run's folder is touched.
#[test]
fn settings_out_of_range_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let data = dir.path().join("no-data-needed");
    for (set, range) in [
        ("optimizer.lr=-0.5", "> 0"),
        ("optimizer.momentum=2", "[0, 1)"),
        ("schedule.gamma=-1", "(0, 1]"),
        ("batch=0", "≥ 1"),
        ("optimizer.weight_decay=nan", "≥ 0"),
    ] {
        let err = refused(Some(&data), &out, &["--set", set]);
        let key = set.split('=').next().unwrap();
        assert!(err.contains(key) && err.contains(range) && err.contains("out of range"), "{set}: {err}");
        assert!(!out.exists(), "{set}: nothing is written");
    }
    let err = refused(Some(&data), &out, &["--epochs", "0"]);
    assert!(err.contains("epochs") && err.contains("≥ 1"), "{err}");
}
