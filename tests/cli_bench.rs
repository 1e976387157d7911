//! `go-train bench search` from the command line: the searches it times by
//! default, with the shipped nets wherever they lie.

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
