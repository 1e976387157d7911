//! Progress reporting for long work: an indicatif bar when stderr is a
//! terminal, plain lines every few seconds when it is not (batch jobs,
//! CI logs), nothing at all when quiet. Safe to share between threads.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

/// How often plain-text progress is printed.
const PLAIN_EVERY: Duration = Duration::from_secs(10);

/// Progress of `total` units of work (files, games, samples).
pub struct Progress {
    /// The terminal bar, when stderr is a terminal.
    bar: Option<ProgressBar>,
    /// What is being done, e.g. "filter".
    label: String,
    /// Units of work in all (0 when unknown).
    total: u64,
    /// Units done so far.
    done: AtomicU64,
    /// Units done before this run (a resumed match): counted in the
    /// position, not in the rate.
    resumed: AtomicU64,
    /// When the last plain line was printed.
    last_line: Mutex<Instant>,
    /// When the work started.
    start: Instant,
    /// Whether to print plain lines.
    plain: bool,
}

impl Progress {
    /// Progress over `total` units named `unit` (e.g. "files").
    pub fn new(label: &str, total: u64, unit: &str) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let bar = tty.then(|| {
            let bar = ProgressBar::new(total);
            let template = format!("{label} {{bar:40}} {{pos}}/{{len}} {unit} {{rate}} eta {{eta}} {{msg}}");
            let style = ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style.with_key("rate", |state: &ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = w.write_str(&speed(state.per_sec()));
            }));
            bar
        });
        Progress {
            bar,
            label: label.to_string(),
            total,
            done: AtomicU64::new(0),
            resumed: AtomicU64::new(0),
            last_line: Mutex::new(Instant::now()),
            start: Instant::now(),
            plain: !tty,
        }
    }

    /// Progress that prints nothing.
    pub fn hidden() -> Progress {
        Progress { plain: false, ..Progress::new("", 0, "") }.without_bar()
    }

    fn without_bar(mut self) -> Progress {
        self.bar = None;
        self
    }

    /// Records `n` units finished by an earlier run (`--resume`): they
    /// move the position but not the rate or the time left, which would
    /// otherwise count them as done in no time.
    pub fn resume_from(&self, n: u64) {
        self.done.fetch_add(n, Ordering::Relaxed);
        self.resumed.fetch_add(n, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.inc(n);
            bar.reset_eta();
        }
    }

    /// Records `n` more units done.
    pub fn inc(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(bar) = &self.bar {
            bar.inc(n);
        } else if self.plain {
            let mut last = self.last_line.lock().unwrap_or_else(|e| e.into_inner());
            if last.elapsed() >= PLAIN_EVERY {
                *last = Instant::now();
                crate::say!("{}", self.plain_line(done, self.start.elapsed().as_secs_f64()));
            }
        }
    }

    /// The plain-text line for `done` units after `elapsed` seconds.
    fn plain_line(&self, done: u64, elapsed: f64) -> String {
        let this_run = done.saturating_sub(self.resumed.load(Ordering::Relaxed));
        let speed = speed(this_run as f64 / elapsed);
        format!("{}: {done}/{} ({speed}, {elapsed:.0} s)", self.label, self.total)
    }

    /// A short status next to the bar (e.g. the current loss).
    /// Prints `line` on stderr, above the bar when there is one.
    pub fn note(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.println(line),
            None => crate::say!("{line}"),
        }
    }

    pub fn set_message(&self, message: String) {
        if let Some(bar) = &self.bar {
            bar.set_message(message);
        }
    }

    /// Units done so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Clears the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// A rate for people: whole units per second, or seconds each for slow
/// units (match games); indicatif's own prints four decimals.
fn speed(rate: f64) -> String {
    if !rate.is_finite() || rate <= 0.0 {
        "-".to_string()
    } else if rate >= 1.0 {
        format!("{rate:.0}/s")
    } else {
        format!("{:.1} s each", 1.0 / rate)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rates_read_as_whole_units_or_seconds_each() {
        assert_eq!(super::speed(323.1371), "323/s");
        assert_eq!(super::speed(0.25), "4.0 s each");
        assert_eq!(super::speed(0.0), "-");
    }

    /// A resumed match that has played one game in 300 s reads 300 s a
    /// game, not 300 s over the 17 games it holds.
    #[test]
    fn resumed_units_count_in_the_position_not_the_rate() {
        let progress = super::Progress::new("match", 40, "games");
        progress.resume_from(16);
        progress.inc(1);
        assert_eq!(progress.done(), 17);
        assert_eq!(progress.plain_line(17, 300.0), "match: 17/40 (300.0 s each, 300 s)");
    }
}
