//! A GTP client: runs an engine as a child process and talks to it over its
//! standard input and output.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use thiserror::Error;

/// What can go wrong talking to an engine.
#[derive(Debug, Error)]
pub enum GtpError {
    #[error("cannot start engine `{command}`: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("engine command line is empty")]
    EmptyCommand,
    #[error("engine `{engine}` failed on `{command}`: {message}")]
    Refused { engine: String, command: String, message: String },
    #[error("engine `{engine}` stopped answering during `{command}`{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Io { engine: String, command: String, detail: Option<String> },
}

/// A running GTP engine.
pub struct GtpClient {
    /// The command line it was started with, for error messages.
    engine: String,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl GtpClient {
    /// Starts `command_line` (program and arguments separated by spaces,
    /// e.g. `gnugo --mode gtp --level 10`). The engine's stderr is dropped.
    pub fn spawn(command_line: &str) -> Result<GtpClient, GtpError> {
        let mut words = command_line.split_whitespace();
        let program = words.next().ok_or(GtpError::EmptyCommand)?;
        let mut child = Command::new(program)
            .args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| GtpError::Spawn { command: command_line.to_string(), source })?;
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        Ok(GtpClient { engine: command_line.to_string(), child, stdin, stdout })
    }

    /// Sends one command and returns the text of a successful answer
    /// (without the leading `=`), or the engine's `?` message as an error.
    pub fn send(&mut self, command: &str) -> Result<String, GtpError> {
        let io_error =
            |detail: Option<String>| GtpError::Io { engine: self.engine.clone(), command: command.to_string(), detail };
        writeln!(self.stdin, "{command}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| io_error(Some(e.to_string())))?;
        // An answer is `=` or `?`, text, and ends with an empty line.
        let mut answer = String::new();
        loop {
            let mut line = String::new();
            let n = self.stdout.read_line(&mut line).map_err(|e| io_error(Some(e.to_string())))?;
            if n == 0 {
                return Err(io_error(None));
            }
            let line = line.trim_end_matches(['\r', '\n']);
            if line.is_empty() {
                if answer.is_empty() {
                    continue; // stray blank line before an answer
                }
                break;
            }
            if !answer.is_empty() {
                answer.push('\n');
            }
            answer.push_str(line);
        }
        // The status character, then an optional numeric id.
        let status = answer.chars().next().unwrap_or(' ');
        let text = answer[status.len_utf8()..].trim_start_matches(|c: char| c.is_ascii_digit()).trim().to_string();
        match status {
            '=' => Ok(text),
            '?' => Err(GtpError::Refused { engine: self.engine.clone(), command: command.to_string(), message: text }),
            _ => Err(io_error(Some(format!("not a GTP answer: {answer:?}")))),
        }
    }

    /// The engine's command line.
    pub fn engine(&self) -> &str {
        &self.engine
    }
}

impl Drop for GtpClient {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.stdin.flush();
        // Give it a moment to leave on its own, then make sure it is gone.
        for _ in 0..50 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
