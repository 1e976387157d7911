//! The `go-train` command line: one thin module per subcommand in `cmd/`.

mod cmd;

use clap::Parser;

/// mimalloc rather than the system allocator: reading SGF through
/// sgf-parse makes some ten small allocations a node, and with mimalloc
/// `bench prepare` reads them about twice as fast (docs/results/benchmarks.md).
/// Wrapped in a counter that `bench train` turns on to report the
/// allocations of a training step (idle, it costs one load of a flag).
#[global_allocator]
static ALLOCATOR: go_train::nn::instruments::CountingAlloc<mimalloc::MiMalloc> =
    go_train::nn::instruments::CountingAlloc(mimalloc::MiMalloc);

fn main() {
    let cli = cmd::Cli::parse();
    if let Err(err) = cmd::run(cli) {
        // A reader that stopped (`go-train show DIR | head`) wants no more
        // output: that is no failure, as for ripgrep.
        let io_kind = |e: &(dyn std::error::Error + 'static)| e.downcast_ref::<std::io::Error>().map(|e| e.kind());
        if err.chain().any(|e| io_kind(e) == Some(std::io::ErrorKind::BrokenPipe)) {
            std::process::exit(0);
        }
        eprintln!("go-train: error: {err:#}");
        std::process::exit(1);
    }
}
