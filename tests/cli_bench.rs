//! `go-train bench` from the command line: the searches `bench search`
//! times by default, with the shipped nets wherever they lie; what `bench
//! prepare` refuses.

mod common;

/// The default agents end with the search `go-train gtp` plays, the
/// residual policy at its root, read from the shipped nets' folder even
/// when its path holds a comma (agent specs are comma-separated: the path
/// once went into the spec's text and split it); the one before it is the
/// same search without the residual root, left out with a policy of one's
/// own, which keeps its root.
#[test]
fn bench_search_times_what_gtp_plays_with_the_nets_on_any_path() {
    let Some(kgs) = common::collection("kgs-6d") else { return };
    let game = kgs.join("kgs-19-2017-06-new/2017-06-01-13.sgf");
    let dir = tempfile::tempdir().unwrap();
    let nets = dir.path().join("nets,shipped");
    std::fs::create_dir(&nets).unwrap();
    let shipped = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("nets");
    for file in ["policy.safetensors", "value.safetensors", "playout.safetensors", "resnet-policy.safetensors"] {
        std::fs::copy(shipped.join(file), nets.join(file)).unwrap();
    }
    let out = common::go_train(&["bench", "search", "--every", "150", "--sgf"])
        .arg(&game)
        .env("GO_TRAIN_NETS", &nets)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let agents: Vec<&str> = stdout.lines().skip(2).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(agents, ["mcts:preset=seed,selection=puct", "mcts:root-policy=none", "mcts"], "{stdout}");
    // A policy of one's own: no shipped root, as `go-train gtp --policy`.
    let own = common::go_train(&["bench", "search", "--every", "150", "--sgf"])
        .arg(&game)
        .arg("--policy")
        .arg(nets.join("policy.safetensors"))
        .env("GO_TRAIN_NETS", &nets)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&own.stdout);
    assert!(own.status.success(), "{}", String::from_utf8_lossy(&own.stderr));
    assert_eq!(stdout.lines().skip(2).count(), 2, "{stdout}");
    assert!(!stdout.contains("root-policy"), "{stdout}");
}

/// `bench prepare` into a folder that already held its dataset found it up
/// to date and reported the time of preparing nothing as a speed; a
/// `--data` with no games named only its temporary files.
#[test]
fn bench_prepare_refuses_a_folder_it_would_not_prepare() {
    let dir = tempfile::tempdir().unwrap();
    let (empty, out) = (dir.path().join("empty"), dir.path().join("out"));
    std::fs::create_dir(&empty).unwrap();
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("manifest.json"), "{}").unwrap();
    // A record that fails the benchmark's criteria (no moves): named as
    // the data's, not the scratch list's (gone by the time it is read).
    let one = dir.path().join("one.sgf");
    std::fs::write(&one, "(;SZ[19])").unwrap();
    let cases = [
        (&empty, None, format!("--data {}: no SGF file there", empty.display())),
        (&one, None, format!("--data {}: none of its 1 games can be prepared (1 too short)", one.display())),
        (&empty, Some(&out), format!("--out {}: not empty", out.display())),
    ];
    for (data, out_dir, says) in cases {
        let mut command = common::go_train(&["bench", "prepare", "--data"]);
        command.arg(data);
        if let Some(out_dir) = out_dir {
            command.arg("--out").arg(out_dir);
        }
        let result = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&result.stderr);
        assert!(!result.status.success() && stderr.contains(&says), "{stderr}");
    }
    assert_eq!(std::fs::read_to_string(out.join("manifest.json")).unwrap(), "{}");
}

/// `bench search` times tree searches only (another kind was timed as
/// the search its settings make, under its own name), and takes the
/// position after the game's last move (`--every` the game's length once
/// found "fewer than N moves").
#[test]
fn bench_search_refuses_other_agents_and_reaches_the_last_move() {
    let Some(kgs) = common::collection("kgs-6d") else { return };
    let game = kgs.join("kgs-19-2017-06-new/2017-06-01-13.sgf");
    let shown = common::go_train(&["show", "--json"]).arg(&game).output().unwrap();
    let moves = serde_json::from_slice::<serde_json::Value>(&shown.stdout).unwrap()["moves"].as_u64().unwrap();
    let bench = |agent: &str, every: u64| {
        let mut command = common::go_train(&["bench", "search", "--agent", agent, "--every", &every.to_string()]);
        command.arg("--sgf").arg(&game).output().unwrap()
    };
    let out = bench("random", 150);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("agent random") && stderr.contains("mcts"), "{stderr}");
    let out = bench("mcts:iterations=8", moves);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(": 1 positions"), "{stdout}");

    // A collection's game is chosen by --index and named by it: game 0 of
    // thousands once read as the whole file, with no way to take another.
    let Some(tygem) = common::collection("tygem-9d-2010-2011") else { return };
    let collection = tygem.join("tygem-9d-2010-01.sgf");
    let bench = |index: &str| {
        let mut command = common::go_train(&["bench", "search", "--agent", "mcts:iterations=2", "--every", "100"]);
        command.arg("--sgf").arg(&collection).args(["--index", index]).output().unwrap()
    };
    let out = bench("1");
    let said = common::text(&out);
    assert!(out.status.success() && said.contains("(game 1 of "), "{said}");
    let out = bench("999999");
    assert!(!out.status.success() && common::text(&out).contains("--index 0 to "), "{}", common::text(&out));
}

/// However short the time, `bench playouts` plays some: a run of none
/// printed NaN moves a playout.
#[test]
fn bench_playouts_plays_at_least_one_batch() {
    let out = common::run_ok(&["bench", "playouts", "--size", "9", "--seconds", "1e-9"]);
    let text = common::text(&out);
    let played: u64 = text.lines().find_map(|l| l.strip_prefix("playouts:")).unwrap().trim().parse().unwrap();
    assert!(played >= 1 && !text.contains("NaN"), "{text}");
}

/// A game that ends in two passes is over at its last move, which no
/// player searches: that position is left out (its search once ended at
/// once and flattered every agent's speed, 99,161 iterations a second
/// where others ran 343).
#[test]
fn bench_search_leaves_out_a_finished_games_last_position() {
    let Some(kgs) = common::collection("kgs-6d") else { return };
    let game = kgs.join("kgs-19-2015/2015-02-04-28.sgf");
    let shown = common::go_train(&["show", "--json"]).arg(&game).output().unwrap();
    let moves = serde_json::from_slice::<serde_json::Value>(&shown.stdout).unwrap()["moves"].as_u64().unwrap();
    let bench = |every: u64| {
        let mut command =
            common::go_train(&["bench", "search", "--agent", "mcts:iterations=8", "--every", &every.to_string()]);
        command.arg("--sgf").arg(&game).output().unwrap()
    };
    let out = bench(moves);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("before the game's end"), "{stderr}");
    let out = bench(moves / 2);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains(": 1 positions"), "{stdout}");
}
