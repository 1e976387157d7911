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

/// Each section of the reference: its command (`go-train review`) and the
/// long flags it lists.
fn sections(reference: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in reference.lines() {
        if let Some(command) = line.strip_prefix("## `").and_then(|l| l.strip_suffix('`')) {
            out.push((command.to_string(), Vec::new()));
        } else if let (Some(item), Some(section)) = (line.strip_prefix("* `"), out.last_mut()) {
            // `-c`, `--config <CONFIG>` — …: every long name before the dash.
            let names = item.split(" — ").next().unwrap_or_default();
            for flag in names.split('`').filter(|w| w.starts_with("--")) {
                section.1.push(flag.split_whitespace().next().unwrap_or_default().to_string());
            }
        }
    }
    out
}

/// A shell command's words, quotes removed (`'gnugo --mode gtp'` is one).
fn shell_words(command: &str) -> Vec<String> {
    let (mut words, mut word, mut quote) = (Vec::new(), None::<String>, None);
    for c in command.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// Every go-train command line in the reference's examples (its `sh`
/// blocks), with the example line it stands in: a line's first command,
/// one after `&&`, `|` or `;`, or one quoted for `sbatch --wrap '…'`.
/// Asserts that each example line's comment starts with `#`.
fn examples(reference: &str) -> Vec<(&str, Vec<String>)> {
    let mut out = Vec::new();
    let mut in_block = false;
    for line in reference.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        // Lines of prose under an example are indented.
        if !in_block || line.starts_with(' ') {
            continue;
        }
        let code = line.split(" #").next().unwrap().trim_end();
        assert!(!code.contains("   "), "example `{line}`: its comment needs a #");
        for command in code.split("&&").flat_map(|c| c.split(['|', ';'])) {
            let words = shell_words(command);
            let start = words.iter().position(|w| w == "go-train" || w.starts_with("go-train "));
            match start.map(|i| &words[i..]) {
                Some([quoted, ..]) if quoted.starts_with("go-train ") => out.push((line, shell_words(quoted))),
                Some(words) => out.push((line, words.to_vec())),
                None => {}
            }
        }
    }
    out
}

/// `review collection.sgf --game 3` stood in review's examples when the
/// flag was `--index`, and some examples' comments had no `#` (one as
/// late as `rsync … && go-train dataset verify …   after a copy`, where
/// only lines starting `go-train` were checked): an example is what users
/// copy first.
#[test]
fn every_flag_an_example_gives_is_one_its_command_takes() {
    let reference = generated();
    let sections = sections(&reference);
    assert!(sections.len() >= 20, "sections: {}", sections.len());
    let mut checked = 0;
    for (line, invocation) in examples(&reference) {
        let words: Vec<&str> = invocation.iter().map(String::as_str).collect();
        // The command is the longest section heading the words start with.
        let Some((command, flags)) = sections
            .iter()
            .filter(|(c, _)| {
                let c: Vec<&str> = c.split_whitespace().collect();
                words.len() >= c.len() && words[..c.len()] == c[..]
            })
            .max_by_key(|(c, _)| c.len())
        else {
            panic!("example `{line}` names no command of the reference");
        };
        for word in words.iter().filter(|w| w.starts_with("--")) {
            let flag = word.split('=').next().unwrap();
            assert!(
                flags.iter().any(|f| f == flag) || flag == "--help",
                "example `{line}` gives {flag}, which `{command}` does not take (it takes {flags:?})"
            );
            checked += 1;
        }
    }
    assert!(checked >= 50, "flags checked in examples: {checked}");
}

/// `--generate man` holds a section for every command of the reference
/// with each of its long flags, and every shell's completions name them
/// too: the three are made from the same definitions, so none can lag.
#[test]
fn the_man_page_and_completions_hold_every_command_and_flag() {
    let reference = generated();
    let generate = |kind: &str| {
        let out = common::run(&["--generate", kind]);
        assert!(out.status.success(), "--generate {kind}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    let man = generate("man");
    assert!(man.contains(".TH go-train 1"), "a man page's title line:\n{}", &man[..man.len().min(300)]);
    let bash = generate("complete-bash");
    let mut flags_checked = 0;
    for (command, flags) in sections(&reference) {
        // The man page's sections, cut at their headings.
        let section = match command.as_str() {
            "go-train" => man.split(".SH \"GO-TRAIN ").next().unwrap().to_string(),
            _ => {
                let heading = format!(".SH \"{}\"\n", command.to_uppercase());
                let at = man.find(&heading).unwrap_or_else(|| panic!("no {heading:?} in the man page"));
                man[at + heading.len()..].split(".SH \"GO-TRAIN ").next().unwrap().to_string()
            }
        };
        for flag in flags {
            let roff = flag.replace('-', "\\-");
            assert!(section.contains(&format!("\\fB{roff}\\fR")), "{command}: no {flag} in its man section");
            assert!(bash.contains(&flag), "{command}: no {flag} in the bash completions");
            flags_checked += 1;
        }
    }
    assert!(flags_checked > 100, "flags checked: {flags_checked}");
    assert!(man.contains(".SH EXAMPLES\n.nf\n  go\\-train filter"), "examples keep their lines");
    for shell in ["zsh", "fish", "powershell", "elvish"] {
        assert!(generate(&format!("complete-{shell}")).contains("train-policy"), "{shell}");
    }
    // A failed write is an error, not clap_complete's panic.
    let full = common::go_train(&["--generate", "complete-bash"])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&full.stderr);
    assert_eq!(full.status.code(), Some(1), "{said}");
    assert!(said.contains("standard output: No space left") && !said.contains("panicked"), "{said}");
    // It once ran the subcommand and generated nothing.
    let refused = common::run(&["--generate", "man", "show", "game.sgf"]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("cannot be used with"), "{said}");
}
