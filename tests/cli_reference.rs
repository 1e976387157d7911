//! `docs/reference/cli.md` is generated from the clap definitions
//! (`go-train --markdown-help`), so that the reference users read is the
//! options the binary parses. These tests fail when the committed file lags
//! behind a change of options, and say how to regenerate it.

mod common;

use std::path::PathBuf;

const REFERENCE: &str = "docs/reference/cli.md";
const REGENERATE: &str = "cargo run --release -- --markdown-help > docs/reference/cli.md";

fn generated() -> String {
    let out = common::run(&["--markdown-help"]);
    assert!(out.status.success(), "go-train --markdown-help failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("the reference is UTF-8")
}

/// The first line where `committed` and `generated` differ, numbered from 1,
/// with both versions of it (empty past a file's end).
fn first_difference<'a>(committed: &'a str, generated: &'a str) -> Option<(usize, &'a str, &'a str)> {
    let (mut old, mut new) = (committed.lines(), generated.lines());
    for number in 1.. {
        match (old.next(), new.next()) {
            (None, None) => return (committed != generated).then_some((number, "", "")),
            (a, b) if a != b => return Some((number, a.unwrap_or(""), b.unwrap_or(""))),
            _ => {}
        }
    }
    unreachable!()
}

#[test]
fn the_committed_cli_reference_is_what_the_clap_definitions_generate() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(REFERENCE);
    let generated = generated();
    if std::env::var_os("GO_TRAIN_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        return;
    }
    // A missing file reads as empty: the failure then says how to make it.
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if let Some((line, old, new)) = first_difference(&committed, &generated) {
        panic!(
            "{REFERENCE} is not what the clap definitions generate (first difference at line {line}):\n  \
             committed: {old}\n  generated: {new}\n\
             Regenerate it with\n  {REGENERATE}\nor\n  GO_TRAIN_BLESS=1 cargo test --test cli_reference\n\
             and commit it with the change of options."
        );
    }
}

#[test]
fn the_reference_has_a_section_for_every_subcommand_and_help_does_not_show_the_flag() {
    let help = common::run(&["--help"]);
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(!help.contains("markdown"), "--markdown-help is for the docs, not for users:\n{help}");
    let reference = generated();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .collect();
    assert!(commands.len() >= 10, "the subcommands listed by --help: {commands:?}");
    for command in commands {
        let heading = format!("## `go-train {command}`");
        assert!(reference.contains(&heading), "no {heading} in the generated reference");
    }
    assert!(reference.contains("`--out <OUT>`"), "options are listed with their values");
}
