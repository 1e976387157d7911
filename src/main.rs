//! The `go-train` command line: one thin module per subcommand in `cmd/`.

mod cmd;

use clap::Parser;

fn main() {
    let cli = cmd::Cli::parse();
    if let Err(err) = cmd::run(cli) {
        eprintln!("go-train: error: {err:#}");
        std::process::exit(1);
    }
}
