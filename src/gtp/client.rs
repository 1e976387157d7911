//! A GTP client: runs an engine as a child process and talks to it over its
//! standard input and output, waiting a bounded time for each answer.
//!
//! An engine is never left behind: it runs in a process group of its own,
//! killed whole when the client is dropped (a `sh` wrapper's engine goes
//! too), and on Linux the kernel kills it when the thread that started it
//! ends, so that a controller killed with SIGKILL takes its engines along.
//! A controller stopped by SIGINT, SIGTERM or SIGHUP (Ctrl-C, `kill`, a
//! closed terminal) kills every engine's group first: the kernel's signal
//! at its death reaches only each group's first process, and a wrapper's
//! engine busy thinking outlived it.

use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use anyhow::bail;
use thiserror::Error;

use super::input::{read_lines, Incoming, NoId};
use super::protocol::MAX_LINE_BYTES;
use crate::bounds;

/// The longest answer read, its lines' newlines counted: an engine that
/// writes on without the empty line ending an answer is cut off here.
/// GTP answers take a few kB (`go-train gtp`'s longest, `kata-raw-nn
/// all`, some 30 kB).
pub const MAX_ANSWER_BYTES: usize = 1 << 20;

/// What can go wrong talking to an engine.
#[derive(Debug, Error)]
pub enum GtpError {
    // Not named `source`: the message holds the cause, which anyhow's
    // chain would print a second time.
    #[error("cannot start engine `{command}`: {cause}")]
    Spawn { command: String, cause: std::io::Error },
    #[error("engine command line is empty")]
    EmptyCommand,
    #[error("engine command line `{0}` has an unclosed quote or a trailing backslash")]
    Quoting(String),
    #[error("engine `{engine}` failed on `{command}`: {message}")]
    Refused { engine: String, command: String, message: String },
    #[error("engine `{engine}` stopped answering during `{command}`{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Io { engine: String, command: String, detail: Option<String> },
    #[error("engine `{engine}` did not answer `{command}` within {seconds} s ({setting})")]
    Timeout { engine: String, command: String, seconds: f64, setting: String },
}

/// How long a client waits for an engine's answer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GtpTimeouts {
    /// For a command of a game under way (`play`, `genmove`, `final_score`).
    pub command: Duration,
    /// For a command that sets a game up (`boardsize`, `clear_board`,
    /// `komi`), the first an engine gets: it may still be loading its nets.
    pub startup: Duration,
}

impl GtpTimeouts {
    /// The default wait for a command, in seconds (`--gtp-timeout`).
    /// Matches send no `time_settings`, so engines think with no clock:
    /// GnuGo at level 10 and `go-train gtp` take seconds a move, but
    /// GnuGo's `final_score` (the cross-check) reads the whole board and
    /// took 256 s on one finished kgs-6d game. An engine set to think
    /// longer needs more.
    pub const DEFAULT_SECONDS: f64 = 300.0;
    /// The least wait for a game's setup commands: the default, however
    /// short `--gtp-timeout` is, since an engine may be loading its nets.
    pub const STARTUP: Duration = Duration::from_secs(GtpTimeouts::DEFAULT_SECONDS as u64);

    /// `seconds` for a command (within [`bounds::SECONDS`]), and for the
    /// setup commands the larger of that and [`GtpTimeouts::STARTUP`].
    pub fn for_commands(seconds: f64) -> anyhow::Result<GtpTimeouts> {
        let command = match bounds::SECONDS.real_value(seconds) {
            Ok(seconds) => Duration::from_secs_f64(seconds),
            // As typed, but a huge one in exponent form, not 300 digits.
            Err(refusal) if seconds.abs() < 1e7 => bail!("{seconds} seconds: {refusal}"),
            Err(refusal) => bail!("{seconds:e} seconds: {refusal}"),
        };
        Ok(GtpTimeouts { command, startup: command.max(GtpTimeouts::STARTUP) })
    }
}

impl Default for GtpTimeouts {
    fn default() -> GtpTimeouts {
        GtpTimeouts::for_commands(GtpTimeouts::DEFAULT_SECONDS).expect("a valid default")
    }
}

/// A running GTP engine.
pub struct GtpClient {
    /// The command line it was started with, for error messages.
    engine: String,
    child: Child,
    stdin: ChildStdin,
    /// Its output, line by line, read on a thread of its own.
    answers: Receiver<Incoming>,
    timeouts: GtpTimeouts,
    /// Why the engine can no longer be trusted to answer in step with the
    /// commands (a late answer would be taken for the next command's).
    failed: Option<String>,
}

/// `command_line`'s program and arguments, split as a POSIX shell would
/// (no variables or globs), so that a path with spaces can be quoted.
pub fn command_words(command_line: &str) -> Result<Vec<String>, GtpError> {
    shlex::split(command_line).ok_or_else(|| GtpError::Quoting(command_line.to_string()))
}

impl GtpClient {
    /// Starts `command_line` (program and arguments split as a shell
    /// would, e.g. `gnugo --mode gtp --level 10` or `'/opt/my go/gnugo'
    /// --mode gtp`) with the default timeouts. The engine's stderr is
    /// dropped.
    pub fn spawn(command_line: &str) -> Result<GtpClient, GtpError> {
        GtpClient::spawn_with(command_line, GtpTimeouts::default())
    }

    /// Starts `command_line`, waiting for answers as `timeouts` say. Use
    /// the client on the thread that starts it: the engine dies with that
    /// thread (see the module's comment).
    pub fn spawn_with(command_line: &str, timeouts: GtpTimeouts) -> Result<GtpClient, GtpError> {
        let words = command_words(command_line)?;
        let (program, words) = words.split_first().ok_or(GtpError::EmptyCommand)?;
        let mut command = Command::new(program);
        command.args(words).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
        die_with_this_thread(&mut command);
        stop_signals_kill_the_engines();
        let mut groups = ENGINE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner);
        let mut child =
            command.spawn().map_err(|cause| GtpError::Spawn { command: command_line.to_string(), cause })?;
        groups.push(child.id() as libc::pid_t);
        drop(groups);
        let stdin = child.stdin.take().expect("piped stdin");
        let answers = read_lines::<NoId>(BufReader::new(child.stdout.take().expect("piped stdout")), MAX_LINE_BYTES);
        Ok(GtpClient { engine: command_line.to_string(), child, stdin, answers, timeouts, failed: None })
    }

    /// Sends one command of a game under way and returns the text of a
    /// successful answer (without the leading `=`), or the engine's `?`
    /// message as an error.
    pub fn send(&mut self, command: &str) -> Result<String, GtpError> {
        self.send_within(command, self.timeouts.command, "--gtp-timeout".into())
    }

    /// [`GtpClient::send`] for a command that sets a game up, which gets
    /// the startup timeout.
    pub fn send_setup(&mut self, command: &str) -> Result<String, GtpError> {
        let setting = format!("a game's setup gets {} s, or --gtp-timeout if more", GtpTimeouts::STARTUP.as_secs());
        self.send_within(command, self.timeouts.startup, setting)
    }

    fn send_within(&mut self, command: &str, limit: Duration, setting: String) -> Result<String, GtpError> {
        let result = match &self.failed {
            Some(why) => Err(self.io_error(command, Some(format!("not sent, the engine failed before: {why}")))),
            None => self.exchange(command, limit, setting),
        };
        if let Err(e) = &result {
            if !matches!(e, GtpError::Refused { .. }) {
                self.failed.get_or_insert_with(|| e.to_string());
            }
        }
        result
    }

    fn exchange(&mut self, command: &str, limit: Duration, setting: String) -> Result<String, GtpError> {
        // Each command waits for its answer before the next is written, so
        // the pipe holds a command at most and this write cannot block.
        writeln!(self.stdin, "{command}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| self.io_error(command, Some(e.to_string())))?;
        let deadline = Instant::now() + limit;
        // An answer is `=` or `?`, text, and ends with an empty line.
        let mut answer = String::new();
        loop {
            // Checked for each line: lines that keep coming (stray empty
            // ones) must not keep the answer from timing out.
            let left = deadline.saturating_duration_since(Instant::now());
            let received =
                if left.is_zero() { Err(RecvTimeoutError::Timeout) } else { self.answers.recv_timeout(left) };
            let line = match received {
                Ok(Incoming::Line(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                Ok(Incoming::TooLong { bytes, .. }) => {
                    let detail = format!("a line of {bytes} bytes, over the {MAX_LINE_BYTES} a GTP line may have");
                    return Err(self.io_error(command, Some(detail)));
                }
                Ok(Incoming::Failed(e)) => return Err(self.io_error(command, Some(e.to_string()))),
                Ok(Incoming::End) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(self.io_error(command, Some(self.how_it_ended())))
                }
                Err(RecvTimeoutError::Timeout) => {
                    return Err(GtpError::Timeout {
                        engine: self.engine.clone(),
                        command: command.to_string(),
                        seconds: limit.as_secs_f64(),
                        setting,
                    })
                }
            };
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if answer.is_empty() {
                    continue; // stray blank line before an answer
                }
                break;
            }
            // An answer starts with `=` or `?`: an engine that writes
            // anything else first is not answering in GTP, and waiting
            // for the empty line that ends an answer (which `cat`, echoing
            // the commands, never writes) held a match's setup for 300 s.
            if answer.is_empty() && !line.starts_with(['=', '?']) {
                return Err(self.io_error(command, Some(format!("not a GTP answer: {line:?}"))));
            }
            if answer.len() + 1 + line.len() > MAX_ANSWER_BYTES {
                let detail = format!("an answer over the {MAX_ANSWER_BYTES} bytes a GTP answer may have, with no end");
                return Err(self.io_error(command, Some(detail)));
            }
            if !answer.is_empty() {
                answer.push('\n');
            }
            answer.push_str(line);
        }
        // The status character, then the text. Commands go out without an
        // id, so an answer that carries one (`=3 D4`) answers some other
        // command: taking its text would play another exchange's move.
        let (status, rest) = answer.split_at(1);
        let id_len = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if id_len > 0 {
            let detail = format!("an answer with id {} to a command sent without one: {answer:?}", &rest[..id_len]);
            return Err(self.io_error(command, Some(detail)));
        }
        let text = rest.trim().to_string();
        match status {
            "=" => Ok(text),
            _ => Err(GtpError::Refused { engine: self.engine.clone(), command: command.to_string(), message: text }),
        }
    }

    fn io_error(&self, command: &str, detail: Option<String>) -> GtpError {
        GtpError::Io { engine: self.engine.clone(), command: command.to_string(), detail }
    }

    /// The engine's command line.
    pub fn engine(&self) -> &str {
        &self.engine
    }

    /// How the engine's process ended, once its output has: it may take a
    /// moment to exit after closing its output (GnuGo 3.8 dies of a
    /// segmentation fault on some positions, saying nothing).
    fn how_it_ended(&self) -> String {
        for _ in 0..100 {
            if let Some(info) = self.exit_info() {
                // SAFETY: waitid filled `info` for a child that ended.
                let status = unsafe { info.si_status() };
                return match info.si_code {
                    libc::CLD_EXITED => format!("it exited with status {status}"),
                    _ => format!("it was killed by signal {status}{}", signal_name(status)),
                };
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "its output ended and it went on running".to_string()
    }

    /// Whether the engine's process has ended; it stays unreaped (a
    /// zombie), so that its id still names its process group.
    fn has_exited(&self) -> bool {
        self.exit_info().is_some()
    }

    /// What waitid says of the engine's process once it has ended, leaving
    /// it unreaped.
    fn exit_info(&self) -> Option<libc::siginfo_t> {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
        // SAFETY: `info` is a valid siginfo_t for waitid to fill.
        let found = unsafe { libc::waitid(libc::P_PID, self.child.id(), &mut info, flags) };
        // SAFETY: waitid filled `info` (si_pid stays 0 while it runs).
        (found == 0 && unsafe { info.si_pid() } != 0).then_some(info)
    }
}

/// ` (SIGSEGV)` and the like for the signals that end engines.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGFPE => " (SIGFPE)",
        libc::SIGILL => " (SIGILL)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGTERM => " (SIGTERM)",
        libc::SIGPIPE => " (SIGPIPE)",
        _ => "",
    }
}

impl Drop for GtpClient {
    fn drop(&mut self) {
        if self.failed.is_none() {
            let _ = writeln!(self.stdin, "quit");
            let _ = self.stdin.flush();
            // Give it a moment to leave on its own.
            for _ in 0..50 {
                if self.has_exited() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        // Then its group goes, with whatever the engine left running.
        // SAFETY: kill has no memory effects; the group is the engine's,
        // its leader not yet reaped.
        unsafe { libc::kill(-(self.child.id() as libc::pid_t), libc::SIGKILL) };
        // Out of the list before its leader is reaped and its id free for
        // another process.
        let group = self.child.id() as libc::pid_t;
        ENGINE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner).retain(|&g| g != group);
        let _ = self.child.wait();
    }
}

/// The process group of every engine running now (each group's id is its
/// first process's).
static ENGINE_GROUPS: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

/// From the first engine started on: SIGINT, SIGTERM and SIGHUP kill every
/// engine's group, then stop this process as the signal would have. A
/// thread of signal-hook's takes the signal, so the list can be locked.
fn stop_signals_kill_the_engines() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static WATCHING: Once = Once::new();
    WATCHING.call_once(|| {
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) {
            Ok(signals) => signals,
            Err(e) => return crate::say!("warning: engines may outlive this process if it is stopped: {e}"),
        };
        let watcher = std::thread::Builder::new().name("engine-groups".into()).spawn(move || {
            if let Some(signal) = signals.forever().next() {
                for &group in ENGINE_GROUPS.lock().unwrap_or_else(PoisonError::into_inner).iter() {
                    // SAFETY: kill has no memory effects; each group's
                    // leader is not yet reaped (Drop removes it first).
                    unsafe { libc::kill(-group, libc::SIGKILL) };
                }
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
        if let Err(e) = watcher {
            crate::say!("warning: engines may outlive this process if it is stopped: {e}");
        }
    });
}

/// Starts `command` in a process group of its own and, on Linux, has the
/// kernel kill it when the thread that starts it ends.
fn die_with_this_thread(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec the closure calls only prctl,
        // getppid and _exit, which are async-signal-safe.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                // The parent died before the line above: nothing will
                // signal its death now.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_come_from_seconds_above_zero() {
        let t = GtpTimeouts::for_commands(2.5).unwrap();
        assert_eq!((t.command, t.startup), (Duration::from_millis(2500), GtpTimeouts::STARTUP));
        assert_eq!(GtpTimeouts::for_commands(900.0).unwrap().startup, Duration::from_secs(900));
        // 1e300 once named itself in 301 digits and asked for a number
        // above 0; 1e19 passed and overflowed a deadline.
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e300, 1e19, 1e6 + 1.0] {
            let e = GtpTimeouts::for_commands(bad).unwrap_err().to_string();
            assert!(e.ends_with("seconds: give a number above 0, up to 1000000"), "{bad}: {e}");
            assert!(e.len() < 80, "{bad}: {e}");
        }
        assert_eq!(GtpTimeouts::for_commands(1e6).unwrap().command, Duration::from_secs(1_000_000));
        let e = GtpTimeouts::for_commands(-1.0).unwrap_err().to_string();
        assert_eq!(e, "-1 seconds: give a number above 0, up to 1000000");
    }

    #[test]
    fn an_engine_that_cannot_start_names_its_cause_once() {
        let e = GtpClient::spawn("/nonexistent/go-engine --mode gtp").err().expect("no such engine");
        let message = format!("{:#}", anyhow::Error::from(e));
        assert!(message.starts_with("cannot start engine `/nonexistent/go-engine --mode gtp`: "), "{message}");
        assert_eq!(message.matches("No such file").count(), 1, "{message}");
    }

    #[test]
    fn an_engine_path_with_spaces_is_quoted_as_in_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("my engines");
        std::fs::create_dir(&folder).unwrap();
        // Answers every command with its own first argument, so the test
        // sees that `--name 'two words'` arrived as one argument.
        let engine = shell_engine(&folder, "echo engine.sh", "printf '= %s\\n\\n' \"$1\"");
        let line = format!("'{}' 'two words' --mode gtp", engine.display());
        let mut client = GtpClient::spawn(&line).unwrap();
        assert_eq!(client.send("name").unwrap(), "two words");
        let e = GtpClient::spawn("'/opt/my go/gnugo --mode gtp").err().expect("an unclosed quote");
        assert!(matches!(e, GtpError::Quoting(_)), "{e}");
        assert!(e.to_string().contains("unclosed quote"), "{e}");
    }

    /// An executable `folder/name` that runs `answer` (sh) for each line read.
    fn shell_engine(folder: &std::path::Path, name: &str, answer: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let engine = folder.join(name);
        std::fs::write(&engine, format!("#!/bin/sh\nwhile read line; do {answer}; done\n")).unwrap();
        std::fs::set_permissions(&engine, std::fs::Permissions::from_mode(0o755)).unwrap();
        engine
    }

    /// What an I/O error says of its cause; panics on any other result.
    fn io_detail(result: Result<String, GtpError>) -> String {
        match result {
            Err(GtpError::Io { detail: Some(detail), .. }) => detail,
            other => panic!("an I/O error saying why, not {other:?}"),
        }
    }

    #[test]
    fn an_answer_with_an_id_to_a_command_sent_without_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Numbers its answers as if each command had carried an id.
        let engine = shell_engine(dir.path(), "numbered.sh", "n=$((n+1)); printf '=%s D4\\n\\n' $n");
        let mut client = GtpClient::spawn(&engine.display().to_string()).unwrap();
        let detail = io_detail(client.send("genmove b"));
        assert!(detail.starts_with("an answer with id 1 to a command sent without one"), "{detail}");
        // An answer whose text starts with a digit after the space is text.
        let plain = shell_engine(dir.path(), "plain.sh", "printf '= 2\\n\\n'");
        let mut client = GtpClient::spawn(&plain.display().to_string()).unwrap();
        assert_eq!(client.send("protocol_version").unwrap(), "2");
    }

    #[test]
    fn an_engine_writing_other_than_gtp_is_refused_at_its_first_line() {
        // `cat` echoes each command and never writes the empty line that
        // ends an answer: a match's setup once waited its full 300 s.
        let timeouts = GtpTimeouts { command: Duration::from_secs(60), startup: Duration::from_secs(60) };
        let mut engine = GtpClient::spawn_with("cat", timeouts).unwrap();
        assert_eq!(io_detail(engine.send_setup("boardsize 19")), r#"not a GTP answer: "boardsize 19""#);
        // Stray empty lines before an answer are still skipped.
        let dir = tempfile::tempdir().unwrap();
        let blank_first = shell_engine(dir.path(), "blank.sh", "printf '\\n= 2\\n\\n'");
        let mut client = GtpClient::spawn(&blank_first.display().to_string()).unwrap();
        assert_eq!(client.send("protocol_version").unwrap(), "2");
    }

    #[test]
    fn an_answer_that_never_ends_is_cut_off_at_the_cap() {
        // `yes '= y'` answers every command with `= y` lines and no empty
        // line: the answer once grew at 130 MB a second, the deadline never
        // reached while lines kept coming.
        let timeouts = GtpTimeouts { command: Duration::from_secs(2), startup: Duration::from_secs(2) };
        let mut engine = GtpClient::spawn_with("yes '= y'", timeouts).unwrap();
        let detail = io_detail(engine.send("genmove b"));
        assert!(detail.contains(&format!("over the {MAX_ANSWER_BYTES} bytes")), "{detail}");
        // The engine is not trusted to answer in step afterwards.
        assert!(matches!(engine.send("play b pass"), Err(GtpError::Io { .. })));
    }
}
