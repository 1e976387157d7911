//! `filter` and `prepare` from the command line on real game records.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use go_train::dataset::filter::GameList;
use go_train::dataset::{game_key, Manifest, Shard, Split, NO_VALUE};
use go_train::features::FeatureSet;
use go_train::sgf::read_file;

use common::{path, run_ok};

fn report(list: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(format!("{}.report.json", list.display())).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// A list of the first `n` even kgs-6d games, written by `filter`.
fn small_list(dir: &Path, n: usize) -> Option<PathBuf> {
    let data = common::collection("kgs-6d")?.join("KGS2001");
    let all = dir.join("all.list");
    run_ok(&["filter", path(&data), "--out", path(&all)]);
    let list = GameList::read(&all).unwrap();
    let small = GameList(list.0.into_iter().take(n).collect());
    let out = dir.join("small.list");
    std::fs::write(&out, small.to_text(&out)).unwrap();
    Some(out)
}

#[test]
fn filter_keeps_the_even_kgs_games_and_counts_every_rejection() {
    let Some(kgs) = common::collection("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("kgs.list");
    run_ok(&["filter", path(&kgs), "--out", path(&list)]);
    let games = GameList::read(&list).unwrap().0;
    // The datasets README: 12,118 even games with normal komi, 15,571 with
    // handicap, 8,905 without handicap but with komi 0.5. Of the even
    // games, 15 records hold no move at all.
    assert_eq!(games.len(), 12_103);
    let mut sorted = games.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, games, "sorted and unique");
    let r = &report(&list)["report"];
    assert_eq!(r["games"], 36_692);
    assert_eq!(r["kept"], 12_103);
    assert_eq!(r["rejected"]["no stone played"], 15);
    assert_eq!(r["rejected"]["handicap"], 15_571);
    assert!(r["rejected"]["komi out of range"].as_u64().unwrap() >= 8_905);
    let rejected: u64 = r["rejected"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(rejected + 12_103, 36_692);
    // The same tree gives the same list.
    let again = dir.path().join("again.list");
    run_ok(&["filter", path(&kgs), "--out", path(&again)]);
    assert_eq!(std::fs::read(&list).unwrap(), std::fs::read(&again).unwrap());
}

#[test]
fn filter_reports_bad_input_by_reason_and_goes_on() {
    let Some(data) = common::datasets_holding(&["gnugo-regression", "pro-1941-1997"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("bad.list");
    let (gnugo, pro) = (data.join("gnugo-regression"), data.join("pro-1941-1997"));
    run_ok(&[
        "filter",
        path(&gnugo),
        path(&pro),
        "--out",
        path(&list),
        "--min-year",
        "0",
        "--any-komi",
        "--allow-handicap",
    ]);
    let r = &report(&list)["report"];
    let rejected = &r["rejected"];
    assert_eq!(rejected["unreadable file"], 2, "owl42.sgf (truncated) and pending/nightmare.sgf (no SGF): {r}");
    assert!(rejected["unparsable game"].as_u64().unwrap() >= 1, "buzco1.sgf holds two moves in one node");
    assert!(rejected["illegal move"].as_u64().unwrap() >= 5, "the 5 moves onto occupied points of pro-1941-1997");
    assert!(rejected["wrong board size"].as_u64().unwrap() > 600, "9x9 and 13x13 regression games");
    for (reason, examples) in r["examples"].as_object().unwrap() {
        assert!(!examples.as_array().unwrap().is_empty(), "{reason} has examples");
    }
    let examples = r["examples"]["illegal move"].as_array().unwrap();
    assert!(examples.iter().all(|e| e.as_str().unwrap().contains("move ")), "{examples:?}");
    // With the default criteria every professional game is too old or undated.
    let old = dir.path().join("old.list");
    run_ok(&["filter", path(&pro), "--out", path(&old)]);
    let r = &report(&old)["report"];
    assert_eq!(r["kept"], 0);
    assert_eq!(
        r["rejected"]["too old"].as_u64().unwrap()
            + r["rejected"]["no date"].as_u64().unwrap_or(0)
            + r["rejected"]["illegal move"].as_u64().unwrap_or(0)
            + r["rejected"]["komi out of range"].as_u64().unwrap_or(0)
            + r["rejected"]["no komi"].as_u64().unwrap_or(0),
        596
    );
}

/// One record: packed planes, policy, value and move number.
type Record = (Vec<u64>, u16, i8, u16);

/// Every record of `dir`, split by split, in file order.
fn records(dir: &Path) -> HashMap<Split, Vec<Record>> {
    let manifest = Manifest::read(dir).unwrap();
    let mut out: HashMap<Split, Vec<_>> = HashMap::new();
    for split in Split::ALL {
        for shard_path in manifest.shard_paths(dir, split) {
            let shard = Shard::open(&shard_path).unwrap();
            for b in 0..shard.blocks().len() {
                let block = shard.read_block(b).unwrap();
                for i in 0..block.len() {
                    let rec =
                        (block.planes_of(i, shard.layout()), block.policy[i], block.value[i], block.move_number[i]);
                    out.entry(split).or_default().push(rec);
                }
            }
        }
    }
    out
}

#[test]
fn every_record_decodes_to_the_position_the_core_plays() {
    let dir = tempfile::tempdir().unwrap();
    let Some(list) = small_list(dir.path(), 150) else { return };
    for features in FeatureSet::ALL {
        records_match_the_core(dir.path(), &list, features);
    }
}

fn records_match_the_core(dir: &Path, list: &Path, features: FeatureSet) {
    let list = list.to_path_buf();
    let data = dir.join(format!("data-{features}"));
    // Small blocks and shards so that blocks and shards roll over.
    run_ok(&[
        "prepare",
        path(&list),
        "--out",
        path(&data),
        "--block-records",
        "500",
        "--shard-records",
        "4000",
        "--features",
        features.name(),
    ]);
    let manifest = Manifest::read(&data).unwrap();
    assert_eq!((manifest.features, manifest.planes), (features, features.planes()));
    assert!(manifest.shards.len() > 3);
    let mut records = records(&data);
    let mut expected: HashMap<Split, Vec<Record>> = HashMap::new();
    let mut games_per_split: HashMap<Split, u64> = HashMap::new();
    for game in GameList::read(&list).unwrap().0 {
        let record = read_file(&game.file).unwrap().remove(game.index).unwrap();
        if record.moves.is_empty() {
            continue;
        }
        let split = manifest.settings.split.assign(game_key(&record), manifest.settings.seed);
        *games_per_split.entry(split).or_default() += 1;
        let winner = record.result.as_ref().and_then(|r| r.winner());
        record
            .replay_with(record.rules(), |i, g, mv| {
                let value = winner.map_or(NO_VALUE, |w| (w == mv.color) as i8);
                let policy = mv.mv.policy_index(19).unwrap() as u16;
                expected.entry(split).or_default().push((features.encode(g).words().to_vec(), policy, value, i as u16));
            })
            .unwrap();
    }
    for split in Split::ALL {
        let got = records.remove(&split).unwrap_or_default();
        let want = expected.remove(&split).unwrap_or_default();
        assert_eq!(got.len(), want.len(), "{split}: record count");
        assert_eq!(manifest.splits[&split].positions, got.len() as u64);
        assert_eq!(manifest.splits[&split].games, games_per_split.get(&split).copied().unwrap_or(0));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{split} record {i}");
        }
    }
}

#[test]
fn output_is_byte_identical_whatever_the_threads_and_duplicates_share_a_split() {
    let dir = tempfile::tempdir().unwrap();
    let Some(list) = small_list(dir.path(), 200) else { return };
    // The same real game under two names must land in one split.
    let mut games = GameList::read(&list).unwrap();
    let copies = dir.path().join("copies");
    std::fs::create_dir(&copies).unwrap();
    for (i, g) in games.0.clone().iter().take(20).enumerate() {
        let copy = copies.join(format!("copy-{i}.sgf"));
        std::fs::copy(&g.file, &copy).unwrap();
        games.0.push(go_train::dataset::filter::GameRef { file: copy, index: g.index });
    }
    std::fs::write(&list, games.to_text(&list)).unwrap();
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    run_ok(&["prepare", path(&list), "--out", path(&one), "--threads", "1", "--block-records", "256"]);
    run_ok(&["prepare", path(&list), "--out", path(&two), "--threads", "2", "--block-records", "256"]);
    let files = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(files(&one), files(&two));
    // Each original and its copy: same key, same split.
    let manifest = Manifest::read(&one).unwrap();
    for (orig, copy) in games.0.iter().take(20).zip(games.0.iter().skip(games.0.len() - 20)) {
        let a = read_file(&orig.file).unwrap().remove(orig.index).unwrap();
        let b = read_file(&copy.file).unwrap().remove(copy.index).unwrap();
        let s = |r| manifest.settings.split.assign(game_key(r), manifest.settings.seed);
        assert_eq!(s(&a), s(&b));
    }
}

#[test]
fn a_killed_prepare_leaves_no_manifest_and_a_rerun_finishes_cleanly() {
    let Some(kgs) = common::collection("kgs-6d") else { return };
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("kgs.list");
    run_ok(&["filter", path(&kgs), "--out", path(&list)]);
    let out = dir.path().join("data");
    // Kill it mid-run, several times at different moments.
    for delay_ms in [300, 900] {
        let mut child =
            common::go_train(&["prepare", path(&list), "--out", path(&out), "--force", "--shard-records", "65536"])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let finished = child.try_wait().unwrap().is_some();
        child.kill().ok();
        child.wait().unwrap();
        if !finished {
            assert!(!out.join("manifest.json").exists(), "a killed run must not leave a manifest");
        }
    }
    run_ok(&["prepare", path(&list), "--out", path(&out), "--shard-records", "65536"]);
    let clean = dir.path().join("clean");
    run_ok(&["prepare", path(&list), "--out", path(&clean), "--shard-records", "65536"]);
    let a = Manifest::read(&out).unwrap();
    let b = Manifest::read(&clean).unwrap();
    assert_eq!(a.shards, b.shards, "the rerun equals a clean run, checksums included");
    let stray: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
}

/// The final ownership `prepare --ownership` gives every position: the
/// inputs stay those of a plain `prepare`, and late in a game the side
/// that owns more of the board at the end is the side that won.
#[test]
fn prepare_with_ownership_adds_final_ownership_that_agrees_with_the_results() {
    use go_train::dataset::{BatchOptions, Dataset};
    let dir = tempfile::tempdir().unwrap();
    let Some(list) = small_list(dir.path(), 60) else { return };
    let (plain, owned) = (dir.path().join("plain"), dir.path().join("owned"));
    run_ok(&["prepare", path(&list), "--out", path(&plain), "--value", "all"]);
    run_ok(&["prepare", path(&list), "--out", path(&owned), "--value", "all", "--ownership"]);
    let (plain, owned) = (Dataset::open(&plain).unwrap(), Dataset::open(&owned).unwrap());
    assert!(owned.layout().ownership && !plain.layout().ownership);
    let options = BatchOptions { batch_size: 512, symmetries: true, seed: 3, ..BatchOptions::default() };
    let (mut late, mut agree) = (0, 0);
    for (p, o) in plain.batches(Split::Train, &options).zip(owned.batches(Split::Train, &options)) {
        let (p, o) = (p.unwrap(), o.unwrap());
        assert!(p.ownership.is_empty());
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(
            p.planes == o.planes
                && p.policy == o.policy
                && bits(&p.value) == bits(&o.value)
                && p.symmetry == o.symmetry,
            "the ownership planes changed the records"
        );
        assert_eq!(o.ownership.len(), o.len * 361);
        assert!(o.ownership.iter().all(|&t| t == 1.0 || t == -1.0 || t == 0.0));
        for (i, owners) in o.ownership.chunks(361).enumerate() {
            if o.move_number[i] >= 150 && !o.value[i].is_nan() {
                late += 1;
                // No handicap: Black moves at even move numbers; komi 6.5 or more.
                let komi = if o.move_number[i] % 2 == 0 { -6.5 } else { 6.5 };
                let margin: f32 = owners.iter().sum::<f32>() + komi;
                agree += ((margin > 0.0) == (o.value[i] == 1.0)) as usize;
            }
        }
    }
    assert!(late > 1000, "{late} late positions");
    // Random playouts misjudge some final positions (a seki, a false eye,
    // an open fight at a resignation), and games lost on time need not be
    // behind: 69% of these positions agree (a quarter of the 40 games
    // checked by hand disagree on the margin's sign). Labels turned the
    // wrong way round would agree on a third, unrelated ones on half.
    let share = agree as f64 / late as f64;
    eprintln!("ownership margin agrees with the result on {agree} of {late} late positions ({share:.3})");
    assert!(share > 0.62, "{share}");

    // A manifest that forgets the label planes its shards hold is refused
    // when the dataset opens, naming a shard, not when a batch is cut wrong.
    let manifest = dir.path().join("owned/manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"ownership\": true", "\"ownership\": false")).unwrap();
    let err = format!("{:#}", Dataset::open(&dir.path().join("owned")).err().expect("refused"));
    assert!(err.contains(".shard") && err.contains("labels included"), "{err}");
}
