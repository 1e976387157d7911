//! Subcommands. Each file parses its arguments and calls the library.

mod analysis;
mod bench;
mod dataset;
mod eval;
mod filter;
mod gtp;
mod nets;
mod prepare;
mod raw_nn;
mod review;
mod search_flags;
mod selfplay;
mod show;
mod train;
mod train_rl;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

use go_train::bounds::Domain;
use go_train::go::{Event, Game, Move};

/// Teach a computer to play Go the way AlphaGo did: supervised, then by
/// self-play and reinforcement; and play with what it learned.
///
/// Data flows one way: SGF game records → positions → feature planes →
/// shards → batches → nets.
#[derive(Parser)]
#[command(
    name = "go-train",
    version,
    long_version = env!("GO_TRAIN_LONG_VERSION"),
    about,
    long_about,
    arg_required_else_help = true,
    // `--generate man show g.sgf` once ran `show` and generated nothing.
    args_conflicts_with_subcommands = true,
    after_help = "Examples:
  go-train filter games/ --out datasets/games.list
  go-train prepare datasets/games.list --out datasets/games
  go-train train-policy --data datasets/games --out checkpoints/policy
  go-train eval --data datasets/games --policy checkpoints/policy
  go-train gtp --policy checkpoints/policy

Each command's options and examples: go-train help COMMAND"
)]
pub struct Cli {
    /// Print every subcommand's options as markdown: docs/reference/cli.md
    /// is this output, and tests/cli_reference.rs keeps it so.
    #[arg(long, hide = true, exclusive = true)]
    markdown_help: bool,
    /// Print a man page (`--generate man > go-train.1`) or a shell's
    /// completions (`--generate complete-bash > /etc/bash_completion.d/go-train`),
    /// from the definitions that parse the options.
    #[arg(long, exclusive = true, value_name = "KIND")]
    generate: Option<Generate>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    Filter(filter::Args),
    Prepare(prepare::Args),
    Eval(eval::Args),
    Show(show::Args),
    Review(review::Args),
    RawNn(raw_nn::Args),
    Gtp(gtp::Args),
    Analysis(analysis::Args),
    Selfplay(selfplay::Args),
    /// Train the seed's policy net (or any net, by config).
    TrainPolicy(train::Args),
    /// Train the fast playout (rollout) net.
    TrainPlayout(train::Args),
    /// Train the value net.
    TrainValue(train::Args),
    TrainRl(train_rl::Args),
    Dataset(dataset::Args),
    Bench(bench::Args),
}

/// What `--generate` prints.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Generate {
    /// A man page (roff), every subcommand in it.
    Man,
    CompleteBash,
    CompleteZsh,
    CompleteFish,
    CompletePowershell,
    CompleteElvish,
}

/// Standard output whose write errors say where they happened: `show >
/// /dev/full` once said only "No space left on device". An error keeps
/// its kind, so that a reader that stopped still ends the program quietly
/// (`main`).
pub struct NamedStdout(std::io::StdoutLock<'static>);

impl NamedStdout {
    pub fn lock() -> NamedStdout {
        NamedStdout(std::io::stdout().lock())
    }
}

impl std::io::Write for NamedStdout {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.write(bytes).map_err(stdout_error)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush().map_err(stdout_error)
    }
}

fn stdout_error(e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("cannot write to standard output: {e}"))
}

pub fn run(cli: Cli) -> Result<()> {
    let Some(command) = cli.command else {
        if let Some(kind) = cli.generate {
            // Made whole in memory, then written: clap_complete panics on
            // a failed write (a full disk, `| head`), which here is an
            // error like any other output's.
            let mut text = Vec::new();
            generate(kind, &mut text)?;
            return Ok(std::io::Write::write_all(&mut NamedStdout::lock(), &text)?);
        }
        if !cli.markdown_help {
            bail!("no subcommand given: see go-train --help");
        }
        print!("{}", markdown_help());
        return Ok(());
    };
    match command {
        Command::Filter(args) => filter::run(args),
        Command::Prepare(args) => prepare::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Show(args) => show::run(args),
        Command::Review(args) => review::run(args),
        Command::RawNn(args) => raw_nn::run(args),
        Command::Gtp(args) => gtp::run(args),
        Command::Analysis(args) => analysis::run(args),
        Command::Selfplay(args) => selfplay::run(args),
        Command::TrainPolicy(args) => train::run(train::Kind::Policy, args),
        Command::TrainPlayout(args) => train::run(train::Kind::Playout, args),
        Command::TrainValue(args) => train::run(train::Kind::Value, args),
        Command::TrainRl(args) => train_rl::run(args),
        Command::Dataset(args) => dataset::run(args),
        Command::Bench(args) => bench::run(args),
    }
}

/// The command line, parsed with every option that takes a value taking a
/// negative number as its value, so that `--gtp-timeout -1` meets the
/// option's own range check ("give a number above 0") rather than clap's
/// "unexpected argument '-1'", whose tip suggests `-- -1`.
pub fn parse_args() -> Cli {
    fn negative_values(command: clap::Command) -> clap::Command {
        command
            .mut_args(|arg| if arg.get_action().takes_values() { arg.allow_negative_numbers(true) } else { arg })
            .mut_subcommands(negative_values)
    }
    let matches = negative_values(<Cli as clap::CommandFactory>::command()).try_get_matches().unwrap_or_else(exit_with);
    <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(exit_with)
}

/// Prints clap's help, version or usage error and exits with its status,
/// or with 1 when it cannot be printed: `clap::Error::exit` drops a failed
/// write, so `--help > /dev/full` once succeeded having printed nothing.
fn exit_with<T>(e: clap::Error) -> T {
    use clap::error::ErrorKind;
    let printed = e.print();
    let wanted = matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion);
    match printed {
        Err(cause) if cause.kind() == std::io::ErrorKind::BrokenPipe && wanted => std::process::exit(0),
        Err(cause) => {
            let stream = if e.use_stderr() { "standard error" } else { "standard output" };
            go_train::say!("go-train: error: cannot write to {stream}: {cause}");
            std::process::exit(1)
        }
        Ok(()) => std::process::exit(e.exit_code()),
    }
}

/// Writes what `--generate kind` asks for to `out`.
fn generate(kind: Generate, out: &mut dyn std::io::Write) -> Result<()> {
    use clap_complete::Shell;
    let mut command = <Cli as clap::CommandFactory>::command();
    let shell = match kind {
        Generate::Man => return man_page(command, out),
        Generate::CompleteBash => Shell::Bash,
        Generate::CompleteZsh => Shell::Zsh,
        Generate::CompleteFish => Shell::Fish,
        Generate::CompletePowershell => Shell::PowerShell,
        Generate::CompleteElvish => Shell::Elvish,
    };
    clap_complete::generate(shell, &mut command, "go-train", out);
    Ok(())
}

/// One man page: go-train's own sections, then each subcommand's (and
/// theirs: `dataset info`, `bench train`) as a section of its own, so that
/// `man go-train` holds every option, as `--help` shows them.
fn man_page(command: clap::Command, out: &mut dyn std::io::Write) -> Result<()> {
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    man_examples(&command, out)?;
    fn subcommands(parent: &str, command: &clap::Command, out: &mut dyn std::io::Write) -> Result<()> {
        for sub in command.get_subcommands().filter(|c| c.get_name() != "help") {
            let name = format!("{parent} {}", sub.get_name());
            writeln!(out, ".SH \"{}\"", name.to_uppercase())?;
            let page = clap_mangen::Man::new(sub.clone().bin_name(&name)).title(&name);
            page.render_synopsis_section(out)?;
            page.render_description_section(out)?;
            page.render_options_section(out)?;
            man_examples(sub, out)?;
            subcommands(&name, sub, out)?;
        }
        Ok(())
    }
    subcommands("go-train", &command, out)?;
    man.render_version_section(out)?;
    Ok(())
}

/// `command`'s "Examples:" (its after-help) as a section of lines kept as
/// they are, which man would otherwise run into one paragraph.
fn man_examples(command: &clap::Command, out: &mut dyn std::io::Write) -> Result<()> {
    let Some(text) = command.get_after_help().map(|t| t.to_string()) else { return Ok(()) };
    writeln!(out, ".SH EXAMPLES\n.nf")?;
    for line in text.lines().skip_while(|l| l.trim_end() == "Examples:") {
        let line = line.replace('\\', "\\e").replace('-', "\\-");
        let guard = if line.starts_with(['.', '\'']) { "\\&" } else { "" };
        writeln!(out, "{guard}{line}")?;
    }
    writeln!(out, ".fi")?;
    Ok(())
}

/// The command-line reference: every subcommand's usage, arguments and
/// options, from the same clap definitions that parse them.
fn markdown_help() -> String {
    let options =
        clap_markdown::MarkdownOptions::new().title("go-train command-line reference".to_string()).show_footer(false);
    let body = fence_examples(&clap_markdown::help_markdown_custom::<Cli>(&options));
    format!(
        "<!-- Generated from the clap definitions by `go-train --markdown-help`; do not edit.\n     \
         Regenerate: cargo run --release -- --markdown-help > docs/reference/cli.md -->\n\n{}\n",
        body.trim_end()
    )
}

/// Each command's "Examples:" block (its after-help, which clap-markdown
/// copies as text and markdown would run into one paragraph) as a fenced
/// shell block.
fn fence_examples(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut in_examples = false;
    for line in markdown.lines() {
        if in_examples && !line.starts_with("  ") {
            out.push_str("```\n");
            in_examples = false;
        }
        out.push_str(if in_examples { &line[2..] } else { line });
        out.push('\n');
        if line == "Examples:" {
            out.push_str("\n```sh\n");
            in_examples = true;
        }
    }
    if in_examples {
        out.push_str("```\n");
    }
    out
}

/// A game's place in a collection.
pub(crate) const INDEX: Domain = Domain::Count { min: 0, max: u32::MAX as u64 };
/// A number of moves into a game.
const MOVES: Domain = Domain::Count { min: 0, max: u32::MAX as u64 };

/// Sets the size of rayon's global pool (once, before any parallel work)
/// when `--threads` asks for one.
/// Board sides a dataset may have: what go-train plays.
fn board_sizes() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(2..=go_train::go::MAX_SIZE as u64)
}

/// Worker threads a `--threads` may ask for: at least one (leaving the
/// option out takes every core), at most a machine's worth.
fn thread_counts() -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::new().range(1..=4096)
}

fn set_threads(threads: Option<usize>) -> Result<()> {
    if threads.is_some() {
        go_train::nn::init_threads(threads).context("setting --threads")?;
    }
    Ok(())
}

/// The SGF files named by `paths`: files as given, folders searched for
/// `*.sgf` in any case, following links (a folder of links to games is
/// common); sorted, each file once. An entry that cannot be read (a
/// broken link, a link loop) is an error naming it, among the others: it
/// once hid every other game of its folder.
fn sgf_files(paths: &[PathBuf]) -> Result<Vec<Result<PathBuf, go_train::dataset::filter::UnreadableEntry>>> {
    for path in paths {
        std::fs::metadata(path).with_context(|| format!("{}", path.display()))?;
    }
    let files = go_train::dataset::filter::find_sgf_files(paths, true).files;
    if files.is_empty() {
        bail!("no SGF files in {}", joined(paths));
    }
    Ok(files)
}

/// Paths for a message: `a, b, c`.
fn joined(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// The board of `game` as a diagram, its last move marked.
fn diagram(game: &Game) -> String {
    let last = game.history().iter().rev().find_map(|e| match e {
        Event::Move(m) => Some(m.mv),
        Event::Setup(_) => None,
    });
    let last = match last {
        Some(Move::Play(v)) => Some(v),
        _ => None,
    };
    go_train::go::diagram(game.board(), last)
}

/// Whether `a` and `b` name one file, existing or not: their folders
/// resolved (links, `..`) and the same name in them.
pub(crate) fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    let resolved = |p: &std::path::Path| match p.canonicalize() {
        Ok(full) => Some(full),
        Err(_) => {
            let folder = p.parent().filter(|f| !f.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
            Some(folder.canonicalize().ok()?.join(p.file_name()?))
        }
    };
    a == b || resolved(a).is_some_and(|a| resolved(b).is_some_and(|b| a == b))
}
