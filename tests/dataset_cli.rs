//! `go-train dataset info` and `dataset verify` on a small dataset of real
//! games, intact and damaged.

mod common;

use std::path::Path;
use std::process::Output;

use go_train::dataset::filter::{GameList, GameRef};
use go_train::dataset::testkit::{self, FixtureRecord, Layout};
use go_train::dataset::{BatchOptions, Dataset, Manifest, Shard, Split, NO_VALUE};

use common::{path, text};

/// Runs `go-train args... dir`.
fn run_on(args: &[&str], dir: &Path) -> Output {
    common::go_train(args).arg(dir).output().unwrap()
}

/// A dataset of 10 real games in a temporary folder; `None` (skipped)
/// without the game records.
fn fixture() -> Option<(tempfile::TempDir, Vec<FixtureRecord>)> {
    let games = testkit::kgs_games(10)?;
    let dir = tempfile::tempdir().unwrap();
    let records =
        testkit::write_dataset(dir.path(), &games, &Layout { block_records: 64, shard_records: 500 }).unwrap();
    Some((dir, records))
}

#[test]
fn info_counts_what_the_shards_hold() {
    let Some((dir, records)) = fixture() else { return };
    let out = run_on(&["dataset", "info", "--json"], dir.path());
    assert!(out.status.success(), "{}", text(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["board_size"], 19);
    assert_eq!(info["settings"]["block_records"], 64);
    let train: Vec<&FixtureRecord> = records.iter().filter(|r| r.split == Split::Train).collect();
    let t = &info["splits"]["train"];
    assert_eq!(t["positions"], train.len());
    assert_eq!(t["labels"]["records"], train.len());
    assert_eq!(t["shards"], train.len().div_ceil(500));
    let passes = train.iter().filter(|r| r.policy == 361).count();
    assert_eq!(t["labels"]["passes"], passes);
    let wins = train.iter().filter(|r| r.value == 1).count();
    let none = train.iter().filter(|r| r.value == NO_VALUE).count();
    assert_eq!(t["labels"]["value"]["wins"], wins);
    assert_eq!(t["labels"]["value"]["none"], none);
    let early = train.iter().filter(|r| r.move_number < 50).count();
    assert_eq!(t["labels"]["moves"]["1-50"], early);
    assert!(t["bytes_per_position"].as_f64().unwrap() > 10.0);

    let out = run_on(&["dataset", "info"], dir.path());
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    for expected in ["split", "train", "bytes/pos", "most played", "move number: 1-50", "labelled", "won"] {
        assert!(shown.contains(expected), "no `{expected}` in\n{shown}");
    }
    let quick: serde_json::Value =
        serde_json::from_slice(&run_on(&["dataset", "info", "--json", "--quick"], dir.path()).stdout).unwrap();
    assert!(quick["splits"]["train"]["labels"].is_null());
    assert_eq!(quick["splits"]["train"]["positions"], train.len());

    // --quick checks what the manifest says of itself, as every reader of
    // the dataset does: it once printed a table for a 0x0 board.
    let manifest = dir.path().join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    m["board_size"] = 0.into();
    std::fs::write(&manifest, m.to_string()).unwrap();
    let out = run_on(&["dataset", "info", "--quick"], dir.path());
    assert!(!out.status.success() && text(&out).contains("board size 0 is not one"), "{}", text(&out));
}

#[test]
fn verify_passes_an_intact_dataset_and_warns_of_stray_files() {
    let Some((dir, _)) = fixture() else { return };
    std::fs::write(dir.path().join("train-00009.shard.tmp"), b"partial").unwrap();
    std::fs::write(dir.path().join("old-00000.shard"), b"stale").unwrap();
    std::fs::create_dir(dir.path().join(".prepare-new")).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("ok: "), "{shown}");
    assert!(shown.contains("warning") && shown.contains("train-00009.shard.tmp"), "{shown}");
    assert!(shown.contains("old-00000.shard: shard file the manifest does not name"), "{shown}");
    assert!(shown.contains(".prepare-new: the dataset a killed `prepare` was writing"), "{shown}");
}

#[test]
fn verify_names_a_corrupt_shard_and_its_block() {
    let Some((dir, _)) = fixture() else { return };
    let manifest = Manifest::read(dir.path()).unwrap();
    let entry = &manifest.shards[1];
    let path = dir.path().join(&entry.file);
    let block = Shard::open(&path).unwrap().blocks()[1];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[block.offset as usize + block.length as usize / 2] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(shown.contains(&format!("BAD {}", entry.file)), "{shown}");
    assert!(shown.contains("CRC-32"), "{shown}");
    assert!(shown.contains(&format!("{}: block 1 is corrupt", path.display())), "{shown}");
    assert!(shown.contains(&format!("bad shards: {}", entry.file)), "{shown}");
}

#[test]
fn verify_reports_a_missing_shard_and_wrong_totals() {
    let Some((dir, _)) = fixture() else { return };
    let mut manifest = Manifest::read(dir.path()).unwrap();
    let missing = manifest.shards[0].file.clone();
    std::fs::remove_file(dir.path().join(&missing)).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let shown = text(&out);
    assert!(!out.status.success());
    assert!(shown.contains(&format!("{missing}: missing")), "{shown}");
    // `info` cannot read labels from a missing shard: it says which; nor
    // does `--quick` (which reads no shard) count it, nor one cut short
    // (both once printed the manifest's table and exited 0).
    let out = run_on(&["dataset", "info"], dir.path());
    assert!(!out.status.success() && text(&out).contains(&missing), "{}", text(&out));
    let out = run_on(&["dataset", "info", "--quick"], dir.path());
    assert!(!out.status.success() && text(&out).contains(&format!("{missing}: missing")), "{}", text(&out));
    let (cut, _) = fixture().unwrap();
    let shard = &Manifest::read(cut.path()).unwrap().shards[0];
    std::fs::File::options().write(true).open(cut.path().join(&shard.file)).unwrap().set_len(shard.bytes - 1).unwrap();
    let out = run_on(&["dataset", "info", "--quick", "--json"], cut.path());
    let said = format!("{}: {} bytes, the manifest says {}", shard.file, shard.bytes - 1, shard.bytes);
    assert!(!out.status.success() && text(&out).contains(&said), "{}", text(&out));

    // A manifest whose counts disagree with intact shards.
    let dir = fixture().unwrap().0;
    manifest = Manifest::read(dir.path()).unwrap();
    manifest.splits.get_mut(&Split::Train).unwrap().value_positions += 1;
    manifest.write(dir.path()).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let shown = text(&out);
    assert!(!out.status.success());
    assert!(shown.contains("train has") && shown.contains("value positions, its shards hold"), "{shown}");

    // A shard of another folder is not the dataset's, even intact (one
    // was once verified as its own).
    let (dir, _) = fixture().unwrap();
    let other = tempfile::tempdir().unwrap();
    manifest = Manifest::read(dir.path()).unwrap();
    let moved = &mut manifest.shards[0];
    std::fs::rename(dir.path().join(&moved.file), other.path().join(&moved.file)).unwrap();
    moved.file = format!("{}/{}", other.path().display(), moved.file);
    manifest.write(dir.path()).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    assert!(!out.status.success() && text(&out).contains("no file name of the dataset's folder"), "{}", text(&out));

    // Blocks of no record, which prepare never cuts (a hand-edited
    // manifest once verified as ok).
    let (dir, _) = fixture().unwrap();
    manifest = Manifest::read(dir.path()).unwrap();
    manifest.settings.block_records = 0;
    manifest.write(dir.path()).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let said = "500 records a shard and 0 a block";
    assert!(!out.status.success() && text(&out).contains(said), "{}", text(&out));

    // A train shard listed as validation and back, counts swapped to
    // match, and fractions prepare never writes: each once verified ok.
    let (dir, _) = fixture().unwrap();
    manifest = Manifest::read(dir.path()).unwrap();
    let validation = manifest.shards.iter().position(|e| e.split == Split::Validation).unwrap();
    manifest.shards[0].split = Split::Validation;
    manifest.shards[validation].split = Split::Train;
    let (train, val) = (manifest.splits[&Split::Train].clone(), manifest.splits[&Split::Validation].clone());
    let records = (manifest.shards[0].records, manifest.shards[validation].records);
    manifest.splits.get_mut(&Split::Train).unwrap().positions = train.positions - records.0 + records.1;
    manifest.splits.get_mut(&Split::Validation).unwrap().positions = val.positions - records.1 + records.0;
    manifest.settings.split.0 = [0.5, 0.5, 0.5];
    manifest.write(dir.path()).unwrap();
    let out = run_on(&["dataset", "verify"], dir.path());
    let shown = text(&out);
    let swapped = format!("{} is a train shard by its name, and listed in validation", manifest.shards[0].file);
    assert!(!out.status.success() && shown.contains(&swapped), "{shown}");
    assert!(shown.contains("split [0.5, 0.5, 0.5]: not three fractions"), "{shown}");
}

/// `eval --data` scores the nets named; its help's shipped defaults are
/// those of `--match`, and a run naming none says so.
#[test]
fn eval_of_a_dataset_names_its_nets() {
    let Some((dir, _)) = fixture() else { return };
    let out = run_on(&["eval", "--data"], dir.path());
    assert!(!out.status.success() && text(&out).contains("no net is taken by default"), "{}", text(&out));
    let help = text(&common::run(&["eval", "--help"]));
    assert!(help.contains("the shipped nets are defaults of --match only"), "{help}");
}

#[test]
fn no_dataset_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    for command in ["info", "verify"] {
        let out = run_on(&["dataset", command], dir.path());
        assert!(!out.status.success());
        assert!(text(&out).contains("manifest.json: no dataset here"), "{}", text(&out));
    }
    let out = common::run(&["dataset", "--help"]);
    assert!(text(&out).contains("Examples:"), "{}", text(&out));
}

/// A dataset written by `prepare` from 200 real games, with small blocks
/// and shards; `None` (skipped) without the game records.
fn prepared(dir: &Path) -> Option<std::path::PathBuf> {
    let games = common::collection("kgs-6d")?.join("KGS2001");
    let (all, list, data) = (dir.join("all.list"), dir.join("small.list"), dir.join("data"));
    let run = |args: &[&str], last: &Path| {
        let out = run_on(args, last);
        assert!(out.status.success(), "{}", text(&out));
    };
    run(&["filter", path(&games), "--out"], &all);
    let small = GameList(GameList::read(&all).unwrap().0.into_iter().take(200).collect());
    std::fs::write(&list, small.to_text(&list)).unwrap();
    run(
        &[
            "prepare",
            path(&list),
            "--value",
            "per-game:2",
            "--block-records",
            "300",
            "--shard-records",
            "3000",
            "--out",
        ],
        &data,
    );
    Some(data)
}

#[test]
fn what_prepare_writes_verifies_and_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let Some(data) = prepared(dir.path()) else { return };
    let out = run_on(&["dataset", "verify"], &data);
    assert!(out.status.success(), "{}", text(&out));
    let dataset = Dataset::open(&data).unwrap();
    assert!(dataset.manifest().shards.len() > 3, "shards roll over");
    for split in Split::ALL {
        let manifest = &dataset.manifest().splits[&split];
        assert_eq!(dataset.split_len(split), manifest.positions);
        for value_only in [false, true] {
            let options = BatchOptions {
                batch_size: 256,
                shuffle: true,
                symmetries: true,
                value_only,
                ..BatchOptions::default()
            };
            let records: usize = dataset.batches(split, &options).map(|b| b.unwrap().len).sum();
            let expected = if value_only { manifest.value_positions } else { manifest.positions };
            assert_eq!(records as u64, expected, "{split}, value only: {value_only}");
        }
    }
    // Prepared again with the same list and settings: up to date, unless
    // a shard has gone (it once passed as up to date).
    let list = dir.path().join("small.list");
    let again = |extra: &[&str]| {
        let args = [&["prepare", path(&list), "--value", "per-game:2", "--block-records", "300"][..], extra].concat();
        run_on(&[&args[..], &["--shard-records", "3000", "--out"]].concat(), &data)
    };
    // A killed `--force` left its staging folder: the next run clears it.
    std::fs::create_dir_all(data.join(".prepare-new")).unwrap();
    std::fs::write(data.join(".prepare-new/train-00000.shard.tmp"), b"partial").unwrap();
    let out = again(&[]);
    assert!(out.status.success() && text(&out).contains("up to date"), "{}", text(&out));
    assert!(!data.join(".prepare-new").exists());
    let shard = data.join(&dataset.manifest().shards[1].file);
    std::fs::remove_file(&shard).unwrap();
    let out = again(&[]);
    let said = text(&out);
    assert!(!out.status.success() && said.contains(shard.file_name().unwrap().to_str().unwrap()), "{said}");
    assert!(said.contains("--force"), "{said}");
    assert!(again(&["--force"]).status.success());
    assert!(run_on(&["dataset", "verify"], &data).status.success());

    // A `--force` with other settings killed while moving its finished
    // dataset in: the old manifest gone, some new shards moved, the rest
    // and the new manifest in the staging folder. The old dataset is gone
    // and the new one is whole: it is named, and the same prepare again
    // finishes the move (once, neither dataset was left).
    let other = dir.path().join("other");
    let args = ["prepare", path(&list), "--value", "per-game:1", "--block-records", "300"];
    let other_run = run_on(&[&args[..], &["--shard-records", "3000", "--out"]].concat(), &other);
    assert!(other_run.status.success(), "{}", text(&other_run));
    let new = Manifest::read(&other).unwrap();
    let staging = data.join(".prepare-new");
    std::fs::create_dir(&staging).unwrap();
    std::fs::remove_file(data.join("manifest.json")).unwrap();
    std::fs::copy(other.join("manifest.json"), staging.join("manifest.json")).unwrap();
    for (i, shard) in new.shards.iter().enumerate() {
        let into = if i % 2 == 0 { &data } else { &staging };
        std::fs::copy(other.join(&shard.file), into.join(&shard.file)).unwrap();
    }
    let info = run_on(&["dataset", "info"], &data);
    assert!(!info.status.success(), "{}", text(&info));
    assert!(text(&info).contains(".prepare-new; run that prepare again to finish the move"), "{}", text(&info));
    let finished = run_on(&[&args[..], &["--shard-records", "3000", "--out"]].concat(), &data);
    let said = text(&finished);
    assert!(finished.status.success() && said.contains("finishing the move") && said.contains("up to date"), "{said}");
    assert!(!staging.exists());
    let files = |dir: &Path| {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".shard") || n == "manifest.json")
            .collect();
        names.sort();
        names
    };
    assert_eq!(files(&data), files(&other), "the new dataset's files, no old shard left");
    for name in files(&other) {
        assert_eq!(std::fs::read(data.join(&name)).unwrap(), std::fs::read(other.join(&name)).unwrap(), "{name}");
    }
}

/// The first `n` game files of kgs-6d's KGS2001 folder, by name; `None`
/// (skipped) without the game records.
fn kgs_2001_files(n: usize) -> Option<Vec<std::path::PathBuf>> {
    let kgs = common::collection("kgs-6d")?;
    let files = walkdir::WalkDir::new(kgs.join("KGS2001")).sort_by_file_name().into_iter().filter_map(Result::ok);
    Some(files.filter(|e| e.path().extension().is_some_and(|x| x == "sgf")).take(n).map(|e| e.into_path()).collect())
}

/// Real games under file names with a line feed, a tab and a byte that is
/// not UTF-8 go through `filter` and `prepare` like any other: the list
/// escapes them, so no name breaks it or is lost.
#[test]
fn odd_file_names_go_through_filter_and_prepare() {
    use std::os::unix::ffi::OsStrExt;
    let Some(sources) = kgs_2001_files(40) else { return };
    let dir = tempfile::tempdir().unwrap();
    let games = dir.path().join("games");
    std::fs::create_dir_all(&games).unwrap();
    let names: [&[u8]; 3] = [b"new\nline.sgf", b"tab\there.sgf", b"latin1-\xe9t\xe9.sgf"];
    let mut copied = 0;
    for (i, source) in sources.iter().enumerate() {
        let name = match names.get(i) {
            Some(n) => std::ffi::OsStr::from_bytes(n).to_owned(),
            None => format!("plain{i}.sgf").into(),
        };
        std::fs::copy(source, games.join(name)).unwrap();
        copied += 1;
    }
    let list = dir.path().join("games.list");
    let out = common::go_train(&["filter", "--min-year", "0", "--any-komi", "--allow-handicap", "--out"])
        .arg(&list)
        .arg(&games)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let kept = GameList::read(&list).unwrap();
    for name in names {
        assert!(kept.0.iter().any(|g| g.file.file_name().unwrap().as_bytes() == name), "{name:?} kept");
    }
    assert!(!text(&out).contains("unreadable"), "{}", text(&out));
    let data = dir.path().join("data");
    let out = run_on(&["prepare", path(&list), "--split", "1,1,1", "--out"], &data);
    assert!(out.status.success(), "{}", text(&out));
    let manifest = Manifest::read(&data).unwrap();
    let games: u64 = manifest.splits.values().map(|c| c.games).sum();
    assert_eq!((games, manifest.dropped.len()), (kept.0.len() as u64, 0), "every kept game of {copied} prepared");
}

/// What costs nothing to check is checked when a dataset opens, so that
/// training and `eval` refuse what `verify` rejects: split totals that are
/// not the shards' sums, a shard of another size than recorded.
#[test]
fn a_manifest_that_contradicts_its_shards_is_refused_on_open() {
    let Some((dir, _)) = fixture() else { return };
    let good = Manifest::read(dir.path()).unwrap();
    let manifest = dir.path().join("manifest.json");
    let damage = |change: &dyn Fn(&mut Manifest)| {
        let mut m = good.clone();
        change(&mut m);
        m.write(dir.path()).unwrap();
    };
    let refusals = |expect: &str| {
        let err = format!("{:#}", Dataset::open(dir.path()).err().expect("refused"));
        assert!(err.contains(expect), "{err}");
        let out_dir = dir.path().join("run");
        for command in [
            &["train-playout", "--device", "cpu", "--out", path(&out_dir), "--data"][..],
            &["eval", "--playout", "no-such-net", "--device", "cpu", "--data"],
        ] {
            let out = run_on(command, dir.path());
            assert!(!out.status.success() && text(&out).contains(expect), "{command:?}: {}", text(&out));
        }
        assert!(!out_dir.join("config.toml").exists());
    };
    damage(&|m| m.splits.get_mut(&Split::Train).unwrap().positions += 1);
    let train: u64 = good.shards.iter().filter(|e| e.split == Split::Train).map(|e| e.records).sum();
    refusals(&format!("{}: train has {} positions, its shards' entries {train}", manifest.display(), train + 1));
    damage(&|m| m.shards[0].bytes += 1);
    let shard = dir.path().join(&good.shards[0].file);
    refusals(&format!(
        "{}: {} bytes, the manifest says {}",
        shard.display(),
        good.shards[0].bytes,
        good.shards[0].bytes + 1
    ));
    let out = run_on(&["dataset", "verify"], dir.path());
    assert!(!out.status.success() && text(&out).contains(&shard.display().to_string()), "{}", text(&out));
}

/// A `prepare` that keeps no game writes no dataset: it fails, counting
/// why the games were dropped.
#[test]
fn a_prepare_that_keeps_no_game_fails_and_writes_no_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let Some(games) = common::collection("kgs-6d") else { return };
    let list = dir.path().join("games.list");
    let out = run_on(&["filter", "--out", path(&list)], &games.join("KGS2001"));
    assert!(out.status.success(), "{}", text(&out));
    let listed = GameList::read(&list).unwrap().0.len();
    let data = dir.path().join("data");
    let out = run_on(&["prepare", path(&list), "--size", "9", "--out"], &data);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains(&format!("dropped: {listed} wrong board size")), "{}", text(&out));
    assert!(!data.join("manifest.json").exists());
}

/// Numbers out of their range are refused naming the option, before
/// anything is read or written.
#[test]
fn options_out_of_range_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("games.list");
    std::fs::write(&list, "").unwrap();
    let out_dir = dir.path().join("out");
    let prepare = ["prepare", path(&list), "--out", path(&out_dir)];
    let filter = ["filter", path(dir.path()), "--out", path(&list)];
    let cases: [(&[&str], &[&str], &str); 13] = [
        (&prepare, &["--size", "1"], "--size"),
        (&prepare, &["--size", "26"], "--size"),
        (&prepare, &["--block-records", "0"], "--block-records"),
        (&prepare, &["--shard-records", "0"], "--shard-records"),
        (&prepare, &["--shard-records", "10", "--block-records", "64"], "--shard-records 10"),
        (&prepare, &["--threads", "0"], "--threads"),
        (&prepare, &["--level", "99"], "--level"),
        (&prepare, &["--split", "inf,1,1"], "split"),
        (&filter, &["--size", "0"], "--size"),
        (&filter, &["--min-komi", "nan"], "--min-komi"),
        // The range every komi takes (`1e308` was once "not a finite
        // number", `1e20` taken).
        (&filter, &["--min-komi", "1e20"], "give a number from -1000 to 1000"),
        (&filter, &["--min-komi", "9", "--max-komi", "6"], "--max-komi"),
        (&filter, &["--min-moves", "50", "--max-moves", "10"], "--max-moves"),
    ];
    for (command, options, named) in cases {
        let out = common::run(&[command, options].concat());
        assert!(!out.status.success() && text(&out).contains(named), "{options:?}: {}", text(&out));
    }
    assert!(!out_dir.exists() && std::fs::read(&list).unwrap().is_empty(), "nothing is written");
}

/// Outputs over inputs or each other: `filter --out GAME.sgf` once
/// replaced the game with the list, `--out L --report L` kept only the
/// report; `--out` naming a file or a folder of the wrong kind said only
/// "File exists" or "Is a directory", after the whole walk.
#[test]
fn outputs_that_would_overwrite_an_input_or_each_other_are_refused() {
    let Some(games) = common::sgf_files("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let game = dir.path().join("game.sgf");
    std::fs::copy(&games[0], &game).unwrap();
    let before = std::fs::read(&game).unwrap();
    let (list, folder) = (dir.path().join("games.list"), dir.path().join("folder"));
    std::fs::create_dir(&folder).unwrap();
    let (in_game, report_in_game) = (game.join("x.list"), game.join("x.json"));
    let file_in_the_way = format!("{} is not a folder", game.display());
    // `games.list/` once replaced the report beside the list, then failed.
    let report = dir.path().join("games.list.report.json");
    std::fs::write(&report, "the last run's").unwrap();
    let slashed = format!("{}/", list.display());
    let cases: [(&[&str], &str); 9] = [
        (&["filter", path(&game), "--out", &slashed], "names a folder; give the file to write"),
        (&["filter", path(&game), "--out", path(&in_game)], &file_in_the_way),
        // Found before the list is replaced (it once was, and then the
        // report failed).
        (&["filter", path(&game), "--out", path(&list), "--report", path(&report_in_game)], &file_in_the_way),
        (&["filter", path(&game), "--out", path(&game)], "that is a game being read"),
        (&["filter", path(dir.path()), "--out", path(&list), "--report", path(&game)], "that is a game being read"),
        (&["filter", path(&game), "--out", path(&list), "--report", path(&list)], "both name"),
        (&["filter", path(&game), "--out", path(&folder)], "a folder; give the file to write"),
        (&["prepare", path(&list), "--out", path(&game)], "a file, not a folder"),
        // Once "creating …: File exists".
        (&["eval", "--match", "random", "random", "--size", "9", "--out", path(&game)], "a file, not a folder"),
    ];
    std::fs::write(&list, format!("{}\t0\n", game.display())).unwrap();
    for (args, says) in cases {
        let out = common::run(args);
        assert!(!out.status.success() && text(&out).contains(says), "{args:?}: {}", text(&out));
    }
    assert_eq!(std::fs::read(&game).unwrap(), before, "the game is untouched");
    assert_eq!(std::fs::read_to_string(&list).unwrap(), format!("{}\t0\n", game.display()), "the list too");
    assert_eq!(std::fs::read_dir(&folder).unwrap().count(), 0, "nothing left in the folder");
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "the last run's", "nor the report beside the list");

    // Finished work that is no list or report of filter's (a list made by
    // hand, a dataset's manifest.json) was once replaced without a word;
    // --force replaces it, and a list filter wrote is replaced as before.
    let other = "holds something other than what filter writes";
    let fresh = dir.path().join("fresh.list");
    for args in [
        &["filter", path(&game), "--out", path(&list)][..],
        &["filter", path(&game), "--out", path(&fresh), "--report", path(&report)],
    ] {
        let out = common::run(args);
        assert!(!out.status.success() && text(&out).contains(other), "{args:?}: {}", text(&out));
    }
    assert!(!fresh.exists(), "nothing written before the refusal");
    common::run_ok(&["filter", "--min-year", "0", "--any-komi", path(&game), "--out", path(&list), "--force"]);
    let written = std::fs::read_to_string(&list).unwrap();
    assert!(written.starts_with("# go-train game list"), "{written}");
    common::run_ok(&["filter", "--min-year", "0", "--any-komi", path(&game), "--out", path(&list)]);
}

/// Games reached twice, through overlapping inputs or a link, were listed
/// (and trained on) twice; a folder of links to games read as empty and
/// exited 0; a `manifest.json` that `prepare` could not read (another
/// program's, a newer go-train's) was replaced without `--force`; a game
/// dropped as unreadable was counted without naming it.
#[test]
fn each_game_is_listed_once_and_no_unreadable_manifest_is_replaced() {
    let Some(games) = common::sgf_files("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (folder, links) = (dir.path().join("games"), dir.path().join("links"));
    std::fs::create_dir(&folder).unwrap();
    std::fs::create_dir(&links).unwrap();
    for (i, game) in games.iter().take(3).enumerate() {
        std::fs::copy(game, folder.join(format!("{i}.sgf"))).unwrap();
        std::os::unix::fs::symlink(game.canonicalize().unwrap(), links.join(format!("{i}.sgf"))).unwrap();
    }
    let list = dir.path().join("games.list");
    let filter = ["filter", "--min-year", "0", "--any-komi", "--allow-handicap", "--out", path(&list)];
    let one = folder.join("1.sgf");
    let out = common::go_train(&filter).args([&folder, &one, &folder]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(GameList::read(&list).unwrap().0.len(), 3, "{}", text(&out));
    assert!(text(&out).contains("4  files reached twice"), "{}", text(&out));

    let out = common::go_train(&filter).arg(&links).output().unwrap();
    assert!(!out.status.success() && text(&out).contains("3 links to SGF files"), "{}", text(&out));
    assert!(text(&out).contains("--follow-links"), "{}", text(&out));
    let out = common::go_train(&filter).arg(&links).arg("--follow-links").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(GameList::read(&list).unwrap().0.len(), 3);

    // A game listed but gone is named with its cause.
    std::fs::remove_file(links.join("2.sgf")).unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let foreign = r#"{"name": "not a dataset"}"#;
    std::fs::write(data.join("manifest.json"), foreign).unwrap();
    let prepare = ["prepare", path(&list), "--split", "1,1,1", "--out", path(&data)];
    let out = common::run(&prepare);
    assert!(!out.status.success() && text(&out).contains("--force replaces it"), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(data.join("manifest.json")).unwrap(), foreign);
    let out = common::go_train(&prepare).arg("--force").output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let missing = format!("{}#0: ", links.join("2.sgf").display());
    assert!(text(&out).contains(&format!("dropped: 1 (unreadable file)  e.g. {missing}")), "{}", text(&out));
    let manifest = Manifest::read(&data).unwrap();
    assert!(manifest.dropped_examples["unreadable file"][0].starts_with(&missing), "{:?}", manifest.dropped_examples);
}

/// A list reads the same from any working folder: `filter` run in one
/// folder, `prepare` of its list from another (the list's relative paths
/// were once read from the working folder of whoever read it).
#[test]
fn a_list_reads_the_same_from_any_working_folder() {
    let Some(sources) = kgs_2001_files(12) else { return };
    let dir = tempfile::tempdir().unwrap();
    let games = dir.path().join("games");
    std::fs::create_dir_all(&games).unwrap();
    for (i, source) in sources.iter().enumerate() {
        std::fs::copy(source, games.join(format!("g{i}.sgf"))).unwrap();
    }
    let lists = dir.path().join("lists");
    std::fs::create_dir(&lists).unwrap();
    let filter = |cwd: &Path, list: &str, root: &str| {
        let out =
            common::go_train(&["filter", "--min-year", "0", "--any-komi", "--allow-handicap", root, "--out", list])
                .current_dir(cwd)
                .output()
                .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    // A list beside its games, and one in another folder, both written
    // with relative names from the folder above.
    filter(dir.path(), "games/here.list", "games");
    filter(dir.path(), "lists/there.list", "games");
    for (list, cwd) in [("games/here.list", &lists), ("lists/there.list", &games)] {
        let list = dir.path().join(list);
        let data = dir.path().join(format!("data-{}", list.file_stem().unwrap().to_string_lossy()));
        let out = common::go_train(&["prepare", path(&list), "--out", path(&data)]).current_dir(cwd).output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let manifest = Manifest::read(&data).unwrap();
        let prepared: u64 = manifest.splits.values().map(|c| c.games).sum();
        assert_eq!((prepared, manifest.dropped.len()), (12, 0), "{}", text(&out));
    }
    let here = std::fs::read_to_string(dir.path().join("games/here.list")).unwrap();
    assert!(here.lines().nth(1).is_some_and(|l| l.starts_with("g0.sgf\t")), "{here}");
}

/// Two lists of one text naming other games (relative names, read from
/// each list's folder), and a game file edited under its list, are not
/// the dataset already prepared: both once passed as "up to date".
#[test]
fn a_list_of_the_same_text_naming_other_games_is_not_up_to_date() {
    let Some(sources) = kgs_2001_files(6) else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut lists = Vec::new();
    for (folder, files) in [("x", &sources[..3]), ("y", &sources[3..])] {
        let games = dir.path().join(folder).join("games");
        std::fs::create_dir_all(&games).unwrap();
        for (i, source) in files.iter().enumerate() {
            std::fs::copy(source, games.join(format!("g{i}.sgf"))).unwrap();
        }
        let list = dir.path().join(folder).join("games.list");
        let args = ["filter", "--min-year", "0", "--any-komi", "--allow-handicap", path(&games), "--out", path(&list)];
        assert!(common::run(&args).status.success());
        lists.push(list);
    }
    assert_eq!(std::fs::read(&lists[0]).unwrap(), std::fs::read(&lists[1]).unwrap(), "one text");
    let data = dir.path().join("data");
    let prepare = |list: &Path| common::run(&["prepare", path(list), "--out", path(&data)]);
    assert!(prepare(&lists[0]).status.success());
    let again = prepare(&lists[0]);
    assert!(again.status.success() && text(&again).contains("up to date"), "{}", text(&again));
    let other = prepare(&lists[1]);
    assert!(!other.status.success(), "{}", text(&other));
    assert!(text(&other).contains("other inputs"), "{}", text(&other));
    // A game file edited in place.
    let game = dir.path().join("x/games/g1.sgf");
    let mut edited = std::fs::read(&game).unwrap();
    edited.extend_from_slice(b"\n");
    std::fs::write(&game, edited).unwrap();
    let edited = prepare(&lists[0]);
    assert!(!edited.status.success() && text(&edited).contains("other inputs"), "{}", text(&edited));
}

/// `--shard-records` is the most records a shard holds, also when it is
/// not a multiple of `--block-records` (shards once held a block less than
/// twice as many).
#[test]
fn no_shard_holds_more_records_than_shard_records() {
    let Some(sources) = kgs_2001_files(3) else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("games.list");
    let list_text = GameList(sources.iter().map(|file| GameRef { file: file.clone(), index: 0 }).collect());
    std::fs::write(&list, list_text.to_text(&list)).unwrap();
    let data = dir.path().join("data");
    let args = ["prepare", path(&list), "--out", path(&data), "--split", "1,0,0"];
    let out = common::run(&[&args[..], &["--block-records", "64", "--shard-records", "100"]].concat());
    assert!(out.status.success(), "{}", text(&out));
    let manifest = Manifest::read(&data).unwrap();
    assert!(manifest.shards.len() > 3, "{:?}", manifest.shards.len());
    for shard in &manifest.shards {
        assert!(shard.records <= 100, "{} holds {} records", shard.file, shard.records);
    }
    assert!(run_on(&["dataset", "verify"], &data).status.success());
}

/// Runs `cmd` to its end: its output and its peak resident memory in bytes
/// (the kernel's count for the reaped child).
#[allow(clippy::zombie_processes)] // reaped by wait4, which also reads its memory
fn run_measured(mut cmd: std::process::Command) -> (Output, u64) {
    let child = cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    // The pipes are read on threads, or a full pipe would stall the child.
    let read_all = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).unwrap();
            bytes
        })
    };
    let stdout = read_all(Box::new(child.stdout.unwrap()));
    let stderr = read_all(Box::new(child.stderr.unwrap()));
    let mut status = 0;
    // SAFETY: rusage is plain data that wait4 fills in for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    use std::os::unix::process::ExitStatusExt;
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    };
    (output, usage.ru_maxrss as u64 * 1024)
}

/// A file of two million empty game trees (`(;)`, 6 MB): `filter` and
/// `prepare` hold what they keep of it, not all of it (each held every
/// game's record, and filter every rejection's text: a gigabyte).
#[test]
fn a_file_of_millions_of_empty_games_takes_little_memory() {
    let Some(kgs) = common::sgf_files("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let games = dir.path().join("games");
    std::fs::create_dir(&games).unwrap();
    let trees = 2_000_000;
    std::fs::write(games.join("empty.sgf"), "(;)".repeat(trees)).unwrap();
    std::fs::copy(&kgs[0], games.join("real.sgf")).unwrap();
    let list = dir.path().join("all.list");
    let mut filter =
        common::go_train(&["filter", "--min-year", "0", "--any-komi", "--allow-handicap", "--min-moves", "1", "--out"]);
    filter.arg(&list).arg(&games);
    let (out, peak) = run_measured(filter);
    assert!(out.status.success(), "{}", text(&out));
    assert!(peak < 200 << 20, "filter's peak resident memory {} MiB", peak >> 20);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("all.list.report.json")).unwrap()).unwrap();
    assert_eq!(report["report"]["games"], trees as u64 + 1, "{report}");
    assert_eq!(report["report"]["rejected"]["too short"], trees as u64, "{report}");
    assert_eq!(report["report"]["examples"]["too short"].as_array().unwrap().len(), 5, "{report}");

    // A list naming two of them, and the real game.
    let header = std::fs::read_to_string(&list).unwrap().lines().next().unwrap().to_string();
    let named = dir.path().join("named.list");
    std::fs::write(
        &named,
        format!("{header}\ngames/empty.sgf\t0\ngames/empty.sgf\t{}\ngames/real.sgf\t0\n", trees - 1),
    )
    .unwrap();
    let data = dir.path().join("data");
    let mut prepare = common::go_train(&["prepare", path(&named), "--split", "1,0,0", "--out", path(&data)]);
    prepare.current_dir(dir.path());
    let (out, peak) = run_measured(prepare);
    assert!(out.status.success(), "{}", text(&out));
    assert!(peak < 200 << 20, "prepare's peak resident memory {} MiB", peak >> 20);
    let manifest = Manifest::read(&data).unwrap();
    assert_eq!((manifest.splits[&Split::Train].games, manifest.dropped["no moves"]), (1, 2), "{}", text(&out));
}

/// `eval` of a split that holds nothing to score is an error naming it
/// (it printed a loss of 0, a perfect score, and exited 0).
#[test]
fn eval_of_an_empty_split_is_refused() {
    let Some(sources) = kgs_2001_files(6) else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("six.list");
    let games = GameList(sources.into_iter().map(|file| GameRef { file, index: 0 }).collect());
    std::fs::write(&list, games.to_text(&list)).unwrap();
    let data = dir.path().join("data");
    let out = run_on(&["prepare", path(&list), "--split", "1,0,0", "--features", "extended", "--out"], &data);
    assert!(out.status.success(), "{}", text(&out));
    let policy = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/policy.safetensors");
    let eval = |extra: &[&str]| {
        common::go_train(&["eval", "--policy", policy, "--limit", "50", "--data", path(&data)]).args(extra).output()
    };
    let out = eval(&[]).unwrap();
    assert!(!out.status.success() && text(&out).contains("its test split holds no positions"), "{}", text(&out));
    let out = eval(&["--split", "train"]).unwrap();
    assert!(out.status.success() && text(&out).contains("50 positions"), "{}", text(&out));

    // A second net the data does not fit is refused before the first is
    // scored, naming its flag and file (the policy's report came first,
    // then an error naming neither).
    let resnet = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/resnet-policy.safetensors");
    let out = eval(&["--split", "train", "--playout", resnet]).unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && said.is_empty(), "{said}");
    assert!(text(&out).contains("--playout") && text(&out).contains("resnet-policy.safetensors"), "{}", text(&out));
    // Flags of the other mode are refused, not ignored.
    let out = eval(&["--games", "7"]).unwrap();
    assert!(!out.status.success() && text(&out).contains("--games"), "{}", text(&out));

    // The value net's report, as JSON: what was measured, the mix as
    // given, and at λ = 0 the mix is the net, symmetries and all (the mix
    // read the net without them).
    let value = concat!(env!("CARGO_MANIFEST_DIR"), "/nets/value.safetensors");
    let value_eval = |data: &Path, extra: &[&str]| {
        common::go_train(&["eval", "--value", value, "--limit", "16", "--json", "--data", path(data)])
            .args(extra)
            .output()
            .unwrap()
    };
    let reports = |out: &std::process::Output| -> Vec<serde_json::Value> {
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let out = value_eval(&data, &["--split", "train", "--baseline-positions", "0", "--symmetries", "--mix", "0"]);
    assert!(out.status.success(), "{}", text(&out));
    let r = &reports(&out)[0];
    assert_eq!((r["symmetries"].as_bool(), r["limit"].as_u64()), (Some(true), Some(16)), "{r}");
    assert!(r["data"].as_str().unwrap().ends_with("data"), "{r}");
    let (net, mixed) = (&r["report"]["overall"]["loss"], &r["mixed"]["report"]["overall"]["loss"]);
    assert!((net.as_f64().unwrap() - mixed.as_f64().unwrap()).abs() < 1e-6, "{net} {mixed}");
    let out =
        value_eval(&data, &["--split", "train", "--baseline-positions", "0", "--mix", "0.3", "--mix-playouts", "1"]);
    assert_eq!(reports(&out)[0]["mixed"]["mix"], serde_json::json!(0.3));

    // No train positions to fit the baseline on: refused before the net
    // is scored, and the error says how to leave it out.
    let test_only = dir.path().join("test-only");
    let out = run_on(&["prepare", path(&list), "--split", "0,0,1", "--features", "extended", "--out"], &test_only);
    assert!(out.status.success(), "{}", text(&out));
    let out = value_eval(&test_only, &[]);
    assert!(!out.status.success() && out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(text(&out).contains("--baseline-positions 0"), "{}", text(&out));
    assert!(value_eval(&test_only, &["--baseline-positions", "0"]).status.success());
}

/// zstd's fast levels are negative numbers, which the option once took
/// for an unknown flag (`--level -5` was refused; only `--level=-5` ran).
#[test]
fn a_fast_zstd_level_is_given_as_a_negative_number() {
    let Some(games) = common::sgf_files("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("games.list");
    let lines: String = games.iter().take(4).map(|g| format!("{}\t0\n", g.display())).collect();
    std::fs::write(&list, lines).unwrap();
    let data = dir.path().join("data");
    let out = common::run(&["prepare", path(&list), "--out", path(&data), "--level", "-5", "--threads", "1"]);
    assert!(out.status.success(), "{}", text(&out));
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["settings"]["zstd_level"], -5);
    let out = common::run(&["dataset", "verify", path(&data)]);
    assert!(out.status.success(), "{}", text(&out));
}
