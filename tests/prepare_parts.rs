//! `prepare --part I/N` and `dataset merge` on real games: parts run at
//! once into one folder hold, merged, exactly the records of a one-process
//! `prepare`; a killed part is redone alone; parts of other settings are
//! refused.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::SystemTime;

use common::{path, text};

/// A game list of real games: every 25th kgs-6d file, and the first 80
/// games of a tygem collection (a file whose games fall into several
/// parts).
fn real_list(dir: &Path) -> Option<PathBuf> {
    let kgs = common::sgf_files("kgs-6d")?;
    let tygem = common::collection("tygem-9d-2010-2011")?.join("tygem-9d-2010-01.sgf");
    let mut list = String::from("# go-train game list: file<TAB>game index in file\n");
    for file in kgs.iter().step_by(25).take(140) {
        list += &format!("{}\t0\n", file.display());
    }
    for index in 0..80 {
        list += &format!("{}\t{index}\n", tygem.display());
    }
    let path = dir.join("games.list");
    std::fs::write(&path, list).unwrap();
    Some(path)
}

/// The first 20 games of [`real_list`].
fn short_list(dir: &Path) -> Option<PathBuf> {
    let full = real_list(dir)?;
    let list = dir.join("short.list");
    let lines: String = std::fs::read_to_string(&full).unwrap().lines().take(21).map(|l| format!("{l}\n")).collect();
    std::fs::write(&list, lines).unwrap();
    Some(list)
}

const SETTINGS: [&str; 6] = ["--value", "per-game:4", "--block-records", "64", "--shard-records", "1500"];

/// `prepare` of `list` into `out`, not a task of a Slurm array job even
/// when the tests run in one (a task's id picks its part).
fn prepare(list: &Path, out: &Path, extra: &[&str]) -> Command {
    let mut cmd = common::go_train(&["prepare", path(list), "--out", path(out), "--threads", "1"]);
    cmd.args(SETTINGS).args(extra).env_remove("SLURM_ARRAY_TASK_ID");
    cmd
}

/// What `cmd` printed, failing the test unless it succeeds.
fn succeeded(mut cmd: Command) -> String {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

/// Positions and the records' checksum, per split, as `dataset info` reads them.
fn records(dir: &Path) -> BTreeMap<String, (u64, String)> {
    let out = common::run(&["dataset", "info", "--json", path(dir)]);
    assert!(out.status.success(), "{}", text(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let splits = info["splits"].as_object().unwrap();
    splits
        .iter()
        .map(|(name, s)| {
            (name.clone(), (s["positions"].as_u64().unwrap(), s["records_crc32"].as_str().unwrap().to_string()))
        })
        .collect()
}

fn modified(dir: &Path) -> BTreeMap<String, SystemTime> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), e.metadata().unwrap().modified().unwrap()))
        .collect()
}

#[test]
fn parts_at_once_merge_into_the_one_process_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(list) = real_list(tmp.path()) else { return };
    let (one, parts) = (tmp.path().join("one"), tmp.path().join("parts"));
    succeeded(prepare(&list, &one, &[]));

    // Four parts at once, sharing the folder, as an array job runs them.
    let spawned: Vec<_> = (1..=4)
        .map(|i| {
            let mut cmd = prepare(&list, &parts, &["--part", &format!("{i}/4")]);
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
        })
        .collect();
    let children: Vec<Output> = spawned.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for child in &children {
        assert!(child.status.success(), "{}", text(child));
    }
    let merged = children.iter().filter(|c| text(c).contains("dataset manifest written")).count();
    assert!(merged >= 1, "the last part to finish writes the manifest");
    assert!(parts.join("manifest.json").is_file());
    let expected = records(&one);
    assert!(expected["train"].0 > 10_000, "{expected:?}");
    assert_eq!(records(&parts), expected, "the same records, split by split, in the same order");
    let verified = common::run(&["dataset", "verify", path(&parts)]);
    assert!(verified.status.success() && !text(&verified).contains("warning"), "{}", text(&verified));
    let shards = modified(&parts).keys().filter(|name| name.ends_with(".shard")).count();
    assert!(shards > 4 * 3, "several shards a part and split: {shards}");

    // Part 2 killed: no part manifest, a half-written shard; the dataset
    // is not finished until it is redone.
    std::fs::remove_file(parts.join("manifest.json")).unwrap();
    std::fs::remove_file(parts.join("part-0002-of-0004.json")).unwrap();
    std::fs::write(parts.join("train-p0002of0004-00000.shard.tmp"), b"half").unwrap();
    let refused = common::run(&["dataset", "merge", path(&parts)]);
    assert!(!refused.status.success());
    assert!(text(&refused).contains("part 2 of 4 not finished"), "{}", text(&refused));
    let before = modified(&parts);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let redone = succeeded(prepare(&list, &parts, &["--part", "3/4"]));
    assert!(redone.contains("is up to date"), "a finished part is not redone: {redone}");
    assert!(redone.contains("waiting for parts 2"), "{redone}");
    let redone = succeeded(prepare(&list, &parts, &["--part", "2/4"]));
    assert!(redone.contains("dataset manifest written"), "{redone}");
    let after = modified(&parts);
    for (name, time) in &before {
        // A lock file is written by each run that holds it (part 3's
        // above): it holds no data.
        if !name.contains("p0002of0004") && !name.ends_with(".lock") {
            assert_eq!(after.get(name), Some(time), "{name} of another part was touched");
        }
    }
    assert!(!after.contains_key("train-p0002of0004-00000.shard.tmp"));
    assert_eq!(records(&parts), expected);
    let merged_again = common::run(&["dataset", "merge", path(&parts)]);
    assert!(merged_again.status.success(), "{}", text(&merged_again));

    // A part manifest lost after the merge: that part is redone, not
    // taken as done because the dataset's manifest is there.
    std::fs::remove_file(parts.join("part-0003-of-0004.json")).unwrap();
    let redone = succeeded(prepare(&list, &parts, &["--part", "3/4"]));
    assert!(!redone.contains("up to date") && redone.contains("dataset manifest written"), "{redone}");
    assert_eq!(records(&parts), expected);

    // A part manifest that cannot be read is named, and replaced with
    // --force (it once blocked every part, --force or not).
    std::fs::write(parts.join("part-0003-of-0004.json"), b"{").unwrap();
    let refused = prepare(&list, &parts, &["--part", "3/4"]).output().unwrap();
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("part-0003-of-0004.json") && text(&refused).contains("--force"),
        "{}",
        text(&refused)
    );
    let redone = succeeded(prepare(&list, &parts, &["--part", "3/4", "--force"]));
    assert!(redone.contains("dataset manifest written"), "{redone}");
    assert_eq!(records(&parts), expected);

    // A finished part's shard cut short: the part is prepared again, not
    // taken as done (with a merged manifest that `verify` then refused).
    let shard = parts.join("train-p0001of0004-00000.shard");
    let bytes = std::fs::read(&shard).unwrap();
    std::fs::write(&shard, &bytes[..1000]).unwrap();
    let redone = succeeded(prepare(&list, &parts, &["--part", "1/4"]));
    assert!(redone.contains("train-p0001of0004-00000.shard is missing or not its"), "{redone}");
    assert!(!redone.contains("up to date") && redone.contains("dataset manifest written"), "{redone}");
    assert_eq!(std::fs::read(&shard).unwrap(), bytes);
    assert_eq!(records(&parts), expected);
}

#[test]
fn parts_of_other_settings_are_refused_and_slurm_names_the_part() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(list) = real_list(tmp.path()) else { return };
    let parts = tmp.path().join("parts");
    succeeded(prepare(&list, &parts, &["--part", "1/3"]));
    let other = prepare(&list, &parts, &["--part", "2/3", "--seed", "2"]).output().unwrap();
    assert!(!other.status.success());
    // It once named the part alone, not the setting that differs.
    assert!(text(&other).contains("part-0001-of-0003.json: seed: 2 here, 1 there"), "{}", text(&other));

    // An array task with ids 0-2: task 1 is part 2/3.
    let mut task = prepare(&list, &parts, &[]);
    task.env("SLURM_ARRAY_TASK_ID", "1").env("SLURM_ARRAY_TASK_COUNT", "3").env("SLURM_ARRAY_TASK_MIN", "0");
    let shown = succeeded(task);
    assert!(shown.contains("part 2/3, from the Slurm array"), "{shown}");
    assert!(parts.join("part-0002-of-0003.json").is_file());
    assert!(shown.contains("waiting for parts 3"), "{shown}");
}

/// One writer of what must have one: a `prepare` of the whole list, or of
/// one part, is refused at once while another process writes it, naming
/// that process; parts share the folder. (This test's process holds the
/// locks that a running `prepare` would.)
#[test]
fn a_second_writer_of_a_dataset_or_a_part_is_refused() {
    use go_train::dataset::parts::Part;
    use go_train::lock::Lock;
    let tmp = tempfile::tempdir().unwrap();
    let Some(list) = short_list(tmp.path()) else { return };
    let out = tmp.path().join("data");
    std::fs::create_dir(&out).unwrap();
    let me = format!("{} is in use by pid {} on ", out.display(), std::process::id());
    let refused = |cmd: Command| {
        let mut cmd = cmd;
        let shown = cmd.output().unwrap();
        assert!(!shown.status.success(), "{}", text(&shown));
        assert!(text(&shown).contains(&me), "{}", text(&shown));
    };

    let whole = Lock::folder(&out).unwrap();
    refused(prepare(&list, &out, &[]));
    refused(prepare(&list, &out, &["--force"]));
    refused(prepare(&list, &out, &["--part", "1/2"]));
    refused(common::go_train(&["dataset", "merge", path(&out)]));
    drop(whole);

    // Part 2 of 2 running: part 1 runs beside it, the same part or the
    // whole list cannot.
    let part_two =
        (Lock::folder_shared(&out).unwrap(), Lock::own(&out, &Part::new(2, 2).unwrap().lock_name()).unwrap());
    refused(prepare(&list, &out, &["--part", "2/2"]));
    refused(prepare(&list, &out, &[]));
    let shown = succeeded(prepare(&list, &out, &["--part", "1/2"]));
    assert!(shown.contains("waiting for parts 2"), "{shown}");
    drop(part_two);
    let shown = succeeded(prepare(&list, &out, &["--part", "2/2"]));
    assert!(shown.contains("dataset manifest written"), "{shown}");
    succeeded(common::go_train(&["dataset", "verify", path(&out)]));
}

/// A finished dataset outlives what would remove it: parts of the same
/// job run into it (they once began by removing its manifest), and a
/// `--force` whose new dataset holds nothing (it once left an empty folder).
#[test]
fn a_finished_dataset_survives_parts_and_a_failed_force() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(list) = short_list(tmp.path()) else { return };
    let out = tmp.path().join("data");
    succeeded(prepare(&list, &out, &[]));
    let before = records(&out);
    let shown = prepare(&list, &out, &["--part", "1/2"]).output().unwrap();
    assert!(!shown.status.success() && text(&shown).contains("prepared whole"), "{}", text(&shown));
    let shown = prepare(&list, &out, &["--force", "--size", "9"]).output().unwrap();
    assert!(!shown.status.success() && text(&shown).contains("wrong board size"), "{}", text(&shown));
    assert_eq!(records(&out), before, "the dataset is as it was");
    succeeded(common::go_train(&["dataset", "verify", path(&out)]));
    assert!(!out.join(".prepare-new").exists(), "nothing of the failed run is left");
    // A --force that works replaces it, and leaves no staging folder.
    let shown = succeeded(prepare(&list, &out, &["--force", "--seed", "2"]));
    assert!(shown.contains("positions"), "{shown}");
    assert_ne!(records(&out), before);
    assert!(!out.join(".prepare-new").exists());
    succeeded(common::go_train(&["dataset", "verify", path(&out)]));
    // Parts forced into it replace it whole: none of its shards stays
    // beside theirs (they once did, unlisted).
    succeeded(prepare(&list, &out, &["--part", "1/2", "--force"]));
    succeeded(prepare(&list, &out, &["--part", "2/2"]));
    let shards: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".shard"))
        .collect();
    assert!(
        !shards.is_empty()
            && shards.iter().all(|name| name.contains("-p0001of0002-") || name.contains("-p0002of0002-")),
        "{shards:?}"
    );
    assert_eq!(records(&out), before, "the parts hold the first dataset's records");
    succeeded(common::go_train(&["dataset", "verify", path(&out)]));
}

/// Finished parts not yet merged are work a whole-list `prepare` would
/// throw away (it once removed them silently, even of another list), and
/// a part's shard cut short since must not be merged into a dataset that
/// looks finished (it once was, by `dataset merge` and by the last part).
#[test]
fn unmerged_parts_are_kept_and_a_damaged_part_is_not_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(list) = short_list(tmp.path()) else { return };
    let out = tmp.path().join("data");
    succeeded(prepare(&list, &out, &["--part", "1/2"]));
    let unlocked = |dir: &Path| {
        let mut files = modified(dir);
        files.retain(|name, _| !name.ends_with(".lock"));
        files
    };
    let part_one = unlocked(&out);
    let shown = prepare(&list, &out, &["--seed", "2"]).output().unwrap();
    assert!(!shown.status.success(), "{}", text(&shown));
    assert!(text(&shown).contains("part-0001-of-0002.json") && text(&shown).contains("--force"), "{}", text(&shown));
    assert_eq!(unlocked(&out), part_one, "part 1 is untouched");

    succeeded(prepare(&list, &out, &["--part", "2/2"]));
    let merged = records(&out);
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    let shard = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("-p0002of0002-") && p.to_string_lossy().ends_with(".shard"))
        .expect("a shard of part 2");
    let file = std::fs::OpenOptions::new().write(true).open(&shard).unwrap();
    file.set_len(100).unwrap();
    let shown = common::go_train(&["dataset", "merge", path(&out)]).output().unwrap();
    assert!(!shown.status.success(), "{}", text(&shown));
    assert!(text(&shown).contains("part 2's") && text(&shown).contains("not its"), "{}", text(&shown));
    assert!(!out.join("manifest.json").exists(), "no manifest over a damaged part");
    // The last part to finish does not merge it either; part 2 run again does.
    let shown = succeeded(prepare(&list, &out, &["--part", "1/2"]));
    assert!(shown.contains("part 2's") && !out.join("manifest.json").exists(), "{shown}");
    succeeded(prepare(&list, &out, &["--part", "2/2"]));
    assert_eq!(records(&out), merged);
    succeeded(common::go_train(&["dataset", "verify", path(&out)]));

    // A copy of part 1 under part 2's name is not taken for part 2.
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    let part_two = out.join("part-0002-of-0002.json");
    let saved = std::fs::read(&part_two).unwrap();
    std::fs::copy(out.join("part-0001-of-0002.json"), &part_two).unwrap();
    let shown = common::go_train(&["dataset", "merge", path(&out)]).output().unwrap();
    assert!(!shown.status.success(), "{}", text(&shown));
    assert!(text(&shown).contains("part-0002-of-0002.json: holds part 1 of 2"), "{}", text(&shown));
    assert!(!out.join("manifest.json").exists(), "no manifest of a copied part");
    std::fs::write(&part_two, saved).unwrap();
    succeeded(common::go_train(&["dataset", "merge", path(&out)]));
    assert_eq!(records(&out), merged);

    // A part's totals that disagree with its shards (edited by hand) are
    // not merged into a manifest every reader would refuse.
    std::fs::remove_file(out.join("manifest.json")).unwrap();
    let part = out.join("part-0001-of-0002.json");
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&part).unwrap()).unwrap();
    json["dataset"]["splits"]["train"]["positions"] = 999_999.into();
    std::fs::write(&part, json.to_string()).unwrap();
    let shown = common::go_train(&["dataset", "merge", path(&out)]).output().unwrap();
    assert!(!shown.status.success() && text(&shown).contains("the parts do not merge"), "{}", text(&shown));
    assert!(text(&shown).contains("its shards' entries"), "{}", text(&shown));
    assert!(!out.join("manifest.json").exists(), "no manifest of wrong totals");
}
