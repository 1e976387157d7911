//! The `go-train` command line: one thin module per subcommand in `cmd/`.

mod cmd;

/// mimalloc rather than the system allocator: reading SGF through
/// sgf-parse makes some ten small allocations a node, and with mimalloc
/// `bench prepare` reads them about twice as fast (docs/results/benchmarks.md).
/// Wrapped in a counter that `bench train` turns on to report the
/// allocations of a training step (idle, it costs one load of a flag).
#[global_allocator]
static ALLOCATOR: go_train::nn::instruments::CountingAlloc<mimalloc::MiMalloc> =
    go_train::nn::instruments::CountingAlloc(mimalloc::MiMalloc);

fn main() {
    quiet_on_closed_stdout();
    let cli = cmd::parse_args();
    if let Err(err) = cmd::run(cli) {
        // A reader that stopped (`go-train show DIR | head`) wants no more
        // output: that is no failure, as for ripgrep.
        let io_kind = |e: &(dyn std::error::Error + 'static)| e.downcast_ref::<std::io::Error>().map(|e| e.kind());
        if err.chain().any(|e| io_kind(e) == Some(std::io::ErrorKind::BrokenPipe)) {
            std::process::exit(0);
        }
        // Not eprintln!, whose panic on a closed stderr would end in the
        // hook below with status 0: the failure stands, said or not.
        go_train::say!("go-train: error: {err:#}");
        std::process::exit(1);
    }
}

/// A reader that stopped (`go-train raw-nn … | head -1`) ends the program
/// quietly, as an error of `show`'s does in `main`: `println!` panics on a
/// closed stdout, with a backtrace that reads like a crash. Not by taking
/// SIGPIPE's default, which would also kill a match whose engine died,
/// instead of letting its game be forfeited. Any other failure to print
/// (`> /dev/full`) is an error that says so, not a panic. std words these
/// panics "failed printing to stdout: Broken pipe (os error 32)".
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<String>().map(String::as_str).or(payload.downcast_ref::<&str>().copied());
        if let Some(cause) = message.and_then(|m| m.strip_prefix("failed printing to std")) {
            if cause.contains("Broken pipe") {
                std::process::exit(0);
            }
            if let Some(cause) = cause.strip_prefix("out: ") {
                go_train::say!("go-train: error: cannot write to standard output: {cause}");
            }
            // A stderr that takes nothing more cannot be told why.
            std::process::exit(1);
        }
        default_hook(info);
    }));
}
