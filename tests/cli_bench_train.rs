//! `go-train bench train` from the command line: the per-step counts it
//! prints come from the binary's counting allocator and candle's tensor
//! numbers.

mod common;

#[test]
fn bench_train_counts_a_steps_allocations_tensors_and_reads() {
    let out =
        common::run_ok(&["bench", "train", "--net", "playout", "--steps", "2", "--seconds", "0.05", "--threads", "1"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 steps in"), "{text}");
    let per_step = text.lines().find(|l| l.trim_start().starts_with("per step:")).expect("a per-step line");
    // Counted, not "allocations not counted": the binary's allocator is the
    // counting wrapper. Every step reads its loss: 2 steps, 1 read a step
    // at most (one after the last).
    let number = |before: &str| -> f64 {
        let head = per_step.split(before).next().unwrap_or_default();
        head.rsplit([' ', ':', '(']).find(|w| !w.is_empty()).and_then(|w| w.parse().ok()).unwrap_or(-1.0)
    };
    assert!(number(" allocations (") > 10.0, "{per_step}");
    assert!(number(" candle tensors") > 10.0, "{per_step}");
    let reads = number(" host reads");
    assert!(reads > 0.0 && reads <= 1.0, "{per_step}");
}

#[test]
fn bench_train_refuses_zero_steps() {
    let out = common::run(&["bench", "train", "--steps", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--steps") && err.contains("from 1 to"), "{err}");
}

/// bf16 is for a GPU's tensor cores: on the CPU it is a clear error
/// naming the flag, not a slow run, and a wrong name lists the two there
/// are.
#[test]
fn bench_train_refuses_bf16_on_the_cpu() {
    let out = common::run(&["bench", "train", "--precision", "bf16", "--device", "cpu", "--steps", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--precision") && err.contains("GPU only"), "{err}");
    let out = common::run(&["bench", "train", "--precision", "fp16"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("f32 or bf16"), "{err}");
}

/// A batch no machine holds is refused before it is allocated, naming the
/// flag and the net: `--batch 1048576` once aborted on its first step with
/// a failed allocation and a backtrace. A residual net of 40×256 needs
/// about 30 MB a position, so a million positions need 30 TB.
#[test]
fn bench_train_refuses_a_batch_the_memory_cannot_hold() {
    let out = common::run(&["bench", "train", "--net", "resnet-policy:40x256", "--batch", "1048576", "--steps", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--batch 1048576 (net resnet-policy:40x256) needs at least") && err.contains(" TiB"), "{err}");
}

/// A net whose training diverges costs its own figure: the bench goes on
/// with the next batch size, then fails naming every run that diverged.
#[test]
fn bench_train_goes_on_past_a_run_that_diverges() {
    let out = common::run(&[
        "bench",
        "train",
        "--net",
        "playout",
        "--batch",
        "4,8",
        "--steps",
        "3",
        "--seconds",
        "0.05",
        "--threads",
        "1",
        "--lr",
        "1e25",
    ]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "{stdout}");
    for batch in [4, 8] {
        assert!(stdout.contains(&format!("batch {batch}: the loss became")), "batch {batch}: {stdout}");
        assert!(stderr.contains(&format!("playout at batch {batch}")), "{stderr}");
    }
    assert!(stderr.contains("--lr"), "{stderr}");
}
