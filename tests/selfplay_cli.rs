//! `go-train selfplay`: the same games for the same seed whatever the batch
//! and threads, resuming after a kill, AlphaGo's value recipe into a
//! dataset, and clear refusals.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{fails, path, run, run_ok as ok, text};

use go_train::dataset::{BatchOptions, Dataset, Split};
use go_train::go::Color;
use go_train::sgf::read_file;

fn shipped(name: &str) -> String {
    format!("{}/nets/{name}.safetensors", env!("CARGO_MANIFEST_DIR"))
}

/// The game records of a run, by file name.
fn games(out: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(out.join("games"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_string_lossy().to_string(), std::fs::read(&p).unwrap()))
        .collect()
}

/// The shipped policy against itself, short games.
fn policy_run(out: &Path, extra: &[&str]) -> std::process::Output {
    let policy = shipped("policy");
    let mut args = vec!["selfplay", "--games", "6", "--max-moves", "40", "--seed", "5", "--out", path(out)];
    args.extend(["--policy", policy.as_str()]);
    args.extend(extra);
    ok(&args)
}

#[test]
fn the_same_seed_plays_the_same_games_whatever_the_batch_threads_or_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("c"));
    policy_run(&a, &["--batch", "4", "--threads", "2"]);
    policy_run(&b, &["--batch", "1", "--threads", "1"]);
    let first = games(&a);
    assert_eq!(first.len(), 6);
    assert_eq!(first, games(&b), "batch and threads change nothing in the games");
    let distinct: std::collections::BTreeSet<&Vec<u8>> = first.values().collect();
    assert_eq!(distinct.len(), 6, "each game its own");

    // A run killed after some games: two records never written, one
    // half-written under its temporary name.
    policy_run(&c, &["--batch", "3"]);
    std::fs::remove_file(c.join("games/game-000002.sgf")).unwrap();
    std::fs::remove_file(c.join("games/game-000004.sgf")).unwrap();
    std::fs::write(c.join("games/game-000004.sgf.tmp"), b"(;FF[4]GM[1]SZ[19];B[pd];W[d").unwrap();
    let err = fails(&["selfplay", "--games", "6", "--out", path(&c)]);
    assert!(err.contains("--resume") && err.contains("--force"), "{err}");
    let policy = shipped("policy");
    let other_seed = ["selfplay", "--games", "6", "--max-moves", "40", "--seed", "6", "--policy", &policy];
    let err = fails(&[&other_seed[..], &["--out", path(&c), "--resume"]].concat());
    assert!(err.contains("another run") && err.contains("seed 6 here, 5 in the run"), "{err}");
    // Fewer games than the folder holds once wrote a list and a summary
    // of those alone.
    let fewer = ["selfplay", "--games", "4", "--max-moves", "40", "--seed", "5", "--policy", &policy];
    let err = fails(&[&fewer[..], &["--out", path(&c), "--resume"]].concat());
    assert!(err.contains("holds game 6 (game-000005.sgf), past --games 4: give --games 6 or more"), "{err}");
    let resumed = policy_run(&c, &["--resume", "--json"]);
    assert_eq!(games(&c), first, "the resumed run's games are the uninterrupted run's");
    let summary: serde_json::Value = serde_json::from_slice(&resumed.stdout).unwrap();
    assert_eq!(summary["games"], 6, "no game lost or counted twice");
    assert_eq!(summary["this_run"]["games"], 2);
    assert!(summary["a_wins"].as_u64().unwrap() <= 6);
    let list = std::fs::read_to_string(c.join("games.list")).unwrap();
    assert_eq!(list.lines().filter(|l| !l.starts_with('#')).count(), 6);

    // A description that cannot be read once let a resume of any settings
    // go on over the run and rewrite its list and summary.
    let description = std::fs::read(c.join("selfplay.json")).unwrap();
    std::fs::write(c.join("selfplay.json"), b"\xff\xfe").unwrap();
    let err = fails(&[&other_seed[..], &["--out", path(&c), "--resume"]].concat());
    assert!(err.contains("cannot read") && err.contains("selfplay.json"), "{err}");
    assert_eq!(std::fs::read_to_string(c.join("games.list")).unwrap(), list, "the list stays");
    std::fs::write(c.join("selfplay.json"), description).unwrap();

    // --force starts again.
    policy_run(&c, &["--force"]);
    assert_eq!(games(&c), first);
}

/// Moves before the marked position, and the winner, of each record.
fn marks(out: &Path) -> Vec<(usize, Color)> {
    (0..12)
        .map(|i| {
            let path = out.join(format!("games/game-{i:06}.sgf"));
            let record = read_file(&path).unwrap().remove(0).unwrap();
            let mark = record.marked_value_position().expect("every recipe game marks its position");
            assert!(
                mark >= 1 && mark <= record.moves.len(),
                "{}: VP[{mark}] of {}",
                path.display(),
                record.moves.len()
            );
            (mark, record.result.and_then(|r| r.winner()).expect("a counted game with komi 7.5 has a winner"))
        })
        .collect()
}

#[test]
fn alphagos_recipe_writes_one_labelled_position_a_game_into_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("value");
    let policy = shipped("policy");
    let args = ["selfplay", "--games", "12", "--max-moves", "60", "--value-positions", "alphago", "--threads", "2"];
    ok(&[&args[..], &["--sl-policy", &policy, "--rl-policy", &policy, "--out", path(&out)]].concat());
    let marks = marks(&out);
    assert!(marks.iter().any(|&(u, _)| u < 59), "U is drawn, not always the cap: {marks:?}");
    let verified = run(&["dataset", "verify", path(&out.join("dataset"))]);
    assert!(verified.status.success(), "{}", text(&verified));

    // Exactly the marked positions, labelled from the side to move's view.
    let dataset = Dataset::open(&out.join("dataset")).unwrap();
    let mut found = Vec::new();
    for split in Split::ALL {
        let options = BatchOptions { batch_size: 64, ..BatchOptions::default() };
        for batch in dataset.batches(split, &options) {
            let batch = batch.unwrap();
            found.extend((0..batch.len).map(|i| (batch.move_number[i] as usize, batch.value[i])));
        }
    }
    let mut expected: Vec<(usize, f32)> = marks
        .iter()
        .map(|&(u, winner)| {
            let to_move = if u % 2 == 0 { Color::Black } else { Color::White };
            (u, (winner == to_move) as u8 as f32)
        })
        .collect();
    found.sort_by(|a, b| a.partial_cmp(b).unwrap());
    expected.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(found, expected);

    // `prepare --value marked` of the run's list is the same dataset.
    let again = dir.path().join("again");
    let list = out.join("games.list");
    ok(&["prepare", path(&list), "--out", path(&again), "--value", "marked", "--features", "extended", "--seed", "1"]);
    let shard = |d: &Path| std::fs::read(d.join("train-00000.shard")).unwrap();
    assert_eq!(shard(&again), shard(&out.join("dataset")));

    // Unnamed, the policies are the shipped SL and RL ones.
    let shipped = dir.path().join("shipped");
    ok(&["selfplay", "--games", "2", "--max-moves", "20", "--value-positions", "alphago", "--out", path(&shipped)]);
    let players = std::fs::read_to_string(shipped.join("summary.json")).unwrap();
    assert!(players.contains("SL policy built-in policy.safetensors"), "{players}");
    assert!(players.contains("RL policy built-in rl-policy.safetensors"), "{players}");
}

#[test]
fn per_game_sampling_writes_every_position_and_k_labels() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pg");
    let policy = shipped("policy");
    let args = ["selfplay", "--games", "4", "--max-moves", "30", "--value-positions", "per-game:2", "--features"];
    ok(&[&args[..], &["seed", "--policy", &policy, "--out", path(&out)]].concat());
    let manifest = Dataset::open(&out.join("dataset")).unwrap().manifest().clone();
    let positions: u64 = manifest.splits.values().map(|c| c.positions).sum();
    let labelled: u64 = manifest.splits.values().map(|c| c.value_positions).sum();
    assert_eq!((positions, labelled), (4 * 30, 4 * 2));
    assert_eq!(manifest.planes, 15);
    // Resumed for more games without --value-positions, the dataset would
    // stay that of the first 4, silently.
    let more = ["selfplay", "--games", "6", "--max-moves", "30", "--resume", "--policy", &policy, "--out", path(&out)];
    let err = fails(&more);
    assert!(err.contains("dataset") && err.contains("--value-positions"), "{err}");
    assert!(!out.join("games/game-000004.sgf").exists(), "refused before playing");
    // Resumed with other dataset settings, it was once made again
    // otherwise without a word.
    for (flag, value, named) in [
        ("--value-positions", "all", "value"),
        ("--features", "extended", "features"),
        ("--split", "0.5,0.5,0", "split"),
    ] {
        let mut args = more.to_vec();
        let settings = [("--value-positions", "per-game:2"), ("--features", "seed")];
        for (f, v) in settings.iter().filter(|(f, _)| *f != flag) {
            args.extend([*f, *v]);
        }
        args.extend([flag, value]);
        let err = fails(&args);
        assert!(err.contains("prepared otherwise") && err.contains(named), "{flag}: {err}");
    }
    assert!(!out.join("games/game-000004.sgf").exists(), "refused before playing");
    assert_eq!(Dataset::open(&out.join("dataset")).unwrap().manifest(), &manifest, "the dataset untouched");
}

#[test]
fn players_without_batched_nets_play_one_game_each_and_reproducibly() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let args = ["selfplay", "--games", "4", "--size", "9", "--agent", "random", "--opponent", "mcts:iterations=16"];
    let out = ok(&[&args[..], &["--out", path(&a), "--batch", "2", "--json"]].concat());
    ok(&[&args[..], &["--out", path(&b), "--batch", "1", "--threads", "1"]].concat());
    assert_eq!(games(&a), games(&b));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["games"], 4);
    assert_eq!(summary["this_run"]["net_positions"], 0);
    let record = read_file(&a.join("games/game-000001.sgf")).unwrap().remove(0).unwrap();
    assert_eq!(record.size, 9);
    assert!(record.white.unwrap().starts_with("random"), "the opponent is Black in odd games");
}

/// Another net put at a path a run named is another run, for selfplay and
/// for a match: a resume once played on with it, its games counted as the
/// first net's.
#[test]
fn a_resume_refuses_another_net_at_the_same_path() {
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("mine.safetensors");
    std::fs::copy(shipped("policy"), &net).unwrap();
    let (out, matched) = (dir.path().join("run"), dir.path().join("match"));
    let selfplay = |games: &str, extra: &[&str]| {
        let args = ["selfplay", "--games", games, "--max-moves", "10", "--policy", path(&net), "--out", path(&out)];
        run(&[&args[..], extra].concat())
    };
    let spec = format!("policy:policy={}", net.display());
    let a_match = |games: &str, extra: &[&str]| {
        let args = ["eval", "--match", &spec, "random", "--games", games, "--max-moves", "10", "--out", path(&matched)];
        run(&[&args[..], extra].concat())
    };
    assert!(selfplay("2", &[]).status.success() && a_match("2", &[]).status.success());
    // The same bytes again: the same run.
    assert!(selfplay("3", &["--resume"]).status.success() && a_match("3", &["--resume"]).status.success());
    std::fs::copy(shipped("rl-policy"), &net).unwrap();
    let refused = selfplay("4", &["--resume"]);
    assert!(!refused.status.success() && text(&refused).contains("nets"), "{}", text(&refused));
    let refused = a_match("4", &["--resume"]);
    assert!(
        !refused.status.success() && text(&refused).contains("a net of this match has changed"),
        "{}",
        text(&refused)
    );
    assert_eq!(games(&out).len(), 3, "no game played with the other net");
}

/// A resume finds its run by the files of the nets its players play with,
/// however their paths are spelt, and not by nets they never use (a
/// policy agent and --value); another net is refused, and the advice
/// says what --force would delete.
#[test]
fn a_resume_takes_the_same_nets_however_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(shipped("policy"), dir.path().join("p.safetensors")).unwrap();
    std::fs::copy(shipped("rl-policy"), dir.path().join("r.safetensors")).unwrap();
    let absolute = dir.path().join("p.safetensors");
    let in_dir = |games: &str, out: &str, extra: &[&str]| {
        let args = ["selfplay", "--games", games, "--max-moves", "10", "--threads", "1", "--out", out];
        let done = common::go_train(&[&args[..], extra].concat()).current_dir(dir.path()).output().unwrap();
        (done.status.success(), text(&done))
    };
    let agent = |net: &str| format!("policy:policy={net},temperature=1");
    let (done, said) = in_dir("2", "run", &["--agent", &agent("p.safetensors")]);
    assert!(done, "{said}");
    for (games, extra) in [
        ("3", vec!["--agent".to_string(), agent("./p.safetensors")]),
        ("4", vec!["--agent".to_string(), agent(path(&absolute))]),
        ("5", vec!["--agent".to_string(), agent("p.safetensors"), "--value".into(), shipped("value")]),
    ] {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (done, said) = in_dir(games, "run", &[&["--resume"][..], &extra].concat());
        assert!(done, "{extra:?}: {said}");
    }
    assert_eq!(games(&dir.path().join("run")).len(), 5);
    let (done, said) = in_dir("6", "run", &["--resume", "--agent", &agent("r.safetensors")]);
    assert!(!done && said.contains("nets") && said.contains("deleting its 5 finished games"), "{said}");

    let recipe = ["--value-positions", "alphago", "--sl-policy", "p.safetensors", "--rl-policy", "r.safetensors"];
    let (done, said) = in_dir("1", "value", &recipe);
    assert!(done, "{said}");
    let respelt = ["--value-positions", "alphago", "--sl-policy", "./p.safetensors", "--rl-policy", "./r.safetensors"];
    let (done, said) = in_dir("2", "value", &[&respelt[..], &["--resume"]].concat());
    assert!(done, "{said}");
}

/// An engine that dies while a game is set up loses that game, as in a
/// match, and the run plays on (it once stopped the run, all its other
/// games unplayed).
#[test]
fn an_engine_that_fails_to_set_up_a_game_forfeits_it() {
    let dir = tempfile::tempdir().unwrap();
    // A GTP engine that passes, and on its third start dies unanswering.
    let engine = dir.path().join("flaky.py");
    let starts = dir.path().join("starts");
    std::fs::write(
        &engine,
        "import sys\nf = sys.argv[1]\nn = len(open(f).read()) if __import__('os').path.exists(f) else 0\n\
         open(f, 'a').write('x')\nif n == 2:\n    sys.exit(0)\nfor line in sys.stdin:\n    w = line.split()\n    \
         print('= pass\\n' if w and w[0] == 'genmove' else '= \\n', flush=True)\n",
    )
    .unwrap();
    let opponent = format!("python3 {} {}", engine.display(), starts.display());
    let out = dir.path().join("flaky");
    let args = ["selfplay", "--games", "4", "--size", "9", "--agent", "random", "--threads", "1", "--batch", "1"];
    let done = ok(&[&args[..], &["--opponent", &opponent, "--json", "--out", path(&out)]].concat());
    let summary: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!((summary["games"].as_u64(), summary["forfeits"].as_u64()), (Some(4), Some(1)), "{summary}");
    let forfeited: Vec<String> = games(&out)
        .into_values()
        .map(|g| String::from_utf8(g).unwrap())
        .filter(|g| g.contains("failed to set up the game"))
        .collect();
    assert_eq!(forfeited.len(), 1, "one game lost at its setup");
}

/// The moves of every game of a run, in game order.
fn moves_of(out: &Path) -> Vec<Vec<go_train::go::ColoredMove>> {
    games(out).keys().map(|name| read_file(&out.join("games").join(name)).unwrap().remove(0).unwrap().moves).collect()
}

#[test]
fn an_agents_seed_shifts_the_games_of_a_batched_net_as_of_a_per_game_player() {
    let dir = tempfile::tempdir().unwrap();
    let run_as = |name: &str, agent: &str| {
        let out = dir.path().join(name);
        policy_run(&out, &["--agent", agent]);
        moves_of(&out)
    };
    let plain = run_as("plain", "policy:temperature=1");
    assert_eq!(plain, run_as("zero", "policy:temperature=1,seed=0"), "seed 0 is the default");
    let shifted = run_as("three", "policy:temperature=1,seed=3");
    assert!(plain != shifted, "seed=3 plays other games");
    assert_eq!(shifted, run_as("again", "policy:temperature=1,seed=3"), "and the same ones each time");
}

#[test]
fn bad_settings_and_a_failed_write_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x");
    let o = path(&out);
    let err = fails(&["selfplay", "--games", "0", "--out", o]);
    assert!(err.contains("--games"), "{err}");
    // More games than one folder holds, or more at once than memory.
    let err = fails(&["selfplay", "--games", "10000001", "--out", o]);
    assert!(err.contains("--games") && err.contains("from 1 to 10000000"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--batch", "0", "--out", o]);
    assert!(err.contains("--batch"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--batch", "5000", "--out", o]);
    assert!(err.contains("--batch") && err.contains("from 1 to 4096"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--komi", "NaN", "--out", o]);
    assert!(err.contains("--komi"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--agent", "policy:policy=no/such/net.safetensors", "--out", o]);
    assert!(err.contains("no/such/net.safetensors") && err.contains("--agent"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--agent", "policy:temprature=1", "--out", o]);
    assert!(err.contains("temprature"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--value-positions", "per-game:0", "--out", o]);
    assert!(err.contains("--value-positions") && !err.contains("marked"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--value-positions", "alphago", "--agent", "random", "--out", o]);
    assert!(err.contains("--agent"), "{err}");
    // Nets that cannot play the board size are refused before the run
    // writes anything, not by each game failing once started.
    let policy = format!("policy:policy={}", shipped("policy"));
    let mcts = format!("mcts:iterations=8,policy={},value={}", shipped("policy"), shipped("value"));
    for agent in [&policy, &mcts] {
        let err =
            fails(&["selfplay", "--games", "2", "--size", "9", "--agent", agent, "--opponent", "random", "--out", o]);
        assert!(err.contains("cannot play on 9x9") && !err.contains("--resume"), "{err}");
        assert!(!out.exists(), "{agent}: a refused run left {}", out.display());
    }
    // Without a net named, the board size is what is wrong, not a net
    // missing: the shipped nets are there, for 19x19.
    let err = fails(&["selfplay", "--games", "2", "--size", "9", "--out", o]);
    assert!(err.contains("19x19") && err.contains("--size 9") && !err.contains("give --policy"), "{err}");
    let err = fails(&["selfplay", "--games", "2", "--size", "9", "--value-positions", "alphago", "--out", o]);
    assert!(err.contains("19x19") && err.contains("--size 9") && !err.contains("no shipped"), "{err}");
    assert!(!out.exists());
    // The recipe labels the position after its random move: a game of one
    // move has none, refused before any game is played.
    let err = fails(&["selfplay", "--games", "2", "--value-positions", "alphago", "--max-moves", "1", "--out", o]);
    assert!(err.contains("--max-moves 1") && err.contains("at least 2"), "{err}");
    assert!(!out.exists());
    let err = fails(&["selfplay", "--games", "2", "--agent", "no-such-engine --mode gtp", "--out", o]);
    assert!(err.contains("cannot start engine `no-such-engine --mode gtp`"), "{err}");
    assert!(!out.exists());

    // A record that cannot be written (here its temporary name is taken by
    // a folder, as a full disk would refuse it) stops the run, naming the
    // file, and keeps the games already written.
    let args = ["selfplay", "--size", "9", "--agent", "random", "--batch", "1", "--threads", "1", "--out", o];
    ok(&[&args[..], &["--games", "1"]].concat());
    let blocked: PathBuf = out.join("games/game-000001.sgf.tmp");
    std::fs::create_dir_all(&blocked).unwrap();
    let err = fails(&[&args[..], &["--games", "3", "--resume"]].concat());
    assert!(err.contains("game-000001.sgf.tmp") && err.contains("--resume"), "{err}");
    assert!(out.join("games/game-000000.sgf").is_file());
}

/// `--force` replaces a self-play run, never a folder of the user's own
/// that holds none: it once removed their games/ and dataset/.
#[test]
fn force_replaces_a_run_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("collection");
    std::fs::create_dir_all(out.join("games")).unwrap();
    std::fs::write(out.join("games/mine.sgf"), "(;GM[1]SZ[19])").unwrap();
    let args = ["selfplay", "--size", "9", "--agent", "random", "--games", "1", "--out", path(&out)];
    for extra in [&[][..], &["--force"], &["--resume"]] {
        let err = fails(&[&args[..], extra].concat());
        assert!(err.contains("holds no self-play run") && !err.contains("--force to"), "{extra:?}: {err}");
    }
    assert!(out.join("games/mine.sgf").is_file(), "the user's file is kept");
    // A run killed while writing its description left only that
    // description's temporary file: the folder is still free for it.
    let killed = dir.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    std::fs::write(killed.join("selfplay.json.tmp"), "{").unwrap();
    let run = ["selfplay", "--size", "9", "--agent", "random", "--out", path(&killed)];
    ok(&[&run[..], &["--games", "2"]].concat());
    // Replacing a run removes its game records, not a file the user put
    // beside them (the whole games/ folder once went).
    std::fs::write(killed.join("games/notes.txt"), "mine").unwrap();
    ok(&[&run[..], &["--force", "--games", "1"]].concat());
    let mut left: Vec<String> = std::fs::read_dir(killed.join("games"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["game-000000.sgf", "notes.txt"]);
}

#[test]
fn a_second_writer_of_one_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("games");
    let mut first = common::go_train(&["selfplay", "--games", "100000", "--max-moves", "40", "--out", path(&out)])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (holder, lock) = (format!("pid {}", first.id()), out.join(".go-train.lock"));
    // Until the first run holds the folder (bounded: a first run that
    // fails must not hang the test).
    for waited in 0.. {
        if std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&holder)) {
            break;
        }
        assert!(first.try_wait().unwrap().is_none() && waited < 6000, "the first run never locked {}", out.display());
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let err = fails(&["selfplay", "--games", "4", "--max-moves", "40", "--out", path(&out), "--force"]);
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(err.contains("in use by") && err.contains(&holder), "{err}");
}

#[test]
fn a_damaged_game_is_named_and_played_again_once_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("games");
    let args = ["selfplay", "--games", "3", "--max-moves", "30", "--out", path(&out)];
    ok(&args);
    let game = out.join("games/game-000001.sgf");
    let played = std::fs::read(&game).unwrap();
    std::fs::write(&game, "(;FF[4]GM[1]SZ[19];B[").unwrap();
    let err = fails(&[&args[..], &["--resume"]].concat());
    assert!(err.contains("game-000001.sgf") && err.contains("remove it"), "{err}");
    assert!(game.is_file(), "the damaged record is left as it was");
    std::fs::remove_file(&game).unwrap();
    ok(&[&args[..], &["--resume"]].concat());
    assert_eq!(std::fs::read(&game).unwrap(), played, "the same game again");
}
