//! The two kinds of match player: a go-train agent in this process, or any
//! GTP engine run as a child process.

use anyhow::{bail, Context, Result};
use candle_core::Device;

use crate::go::{Color, Game, Move, Rules};
use crate::gtp::{GtpClient, GtpTimeouts};
use crate::search::{Agent, AgentSpec};

/// One side of a match game.
pub trait Player {
    /// Starts a new game.
    fn new_game(&mut self, size: usize, komi: f32) -> Result<()>;
    /// Tells the player about the opponent's move.
    fn play(&mut self, color: Color, mv: Move) -> Result<()>;
    /// Asks for `color`'s move, which the player plays on its own board (as
    /// GTP's `genmove` does); a move the referee refuses ends the game.
    fn genmove(&mut self, color: Color) -> Result<Move>;
    /// A go-train agent's full name, its nets and settings in it (an
    /// engine's command line is in [`PlayerSpec::label`]).
    fn agent_name(&self) -> Option<String> {
        None
    }
}

/// Who plays one side of a match.
#[derive(Clone, Debug)]
pub enum PlayerSpec {
    /// A go-train agent.
    Agent(Box<AgentSpec>),
    /// An external GTP engine's command line, e.g. `gnugo --mode gtp --level 10`.
    Gtp(String),
}

impl PlayerSpec {
    /// A go-train agent spec (`random`, `policy`, `mcts:iterations=400`),
    /// else, when the text names no agent kind, an engine command line.
    pub fn parse(text: &str) -> Result<PlayerSpec> {
        let text = text.trim();
        if text.is_empty() {
            bail!("empty player: name an agent (random, policy, playout, mcts) or a GTP command line");
        }
        let kind_word = text.split(':').next().unwrap_or("");
        if kind_word.parse::<crate::search::AgentKind>().is_ok() {
            return Ok(PlayerSpec::Agent(Box::new(text.parse()?)));
        }
        let words = crate::gtp::command_words(text)?;
        if words.first().is_none_or(|program| program.is_empty()) {
            bail!("empty player: name an agent (random, policy, playout, mcts) or a GTP command line");
        }
        Ok(PlayerSpec::Gtp(text.to_string()))
    }

    /// A go-train agent's settings ([`AgentSpec::settings`]); `None` for an
    /// engine, whose command line its label already gives.
    pub fn settings(&self) -> Option<String> {
        match self {
            PlayerSpec::Agent(spec) => Some(spec.settings()),
            PlayerSpec::Gtp(_) => None,
        }
    }

    /// A go-train agent's settings but its nets
    /// ([`AgentSpec::settings_but_nets`]); `None` for an engine.
    pub fn settings_but_nets(&self) -> Option<String> {
        match self {
            PlayerSpec::Agent(spec) => Some(spec.settings_but_nets()),
            PlayerSpec::Gtp(_) => None,
        }
    }

    /// The nets an agent plays with, each with the checksum of its file
    /// ([`crate::search::AgentSpec::net_fingerprints`]); none for an engine.
    pub fn net_fingerprints(&self) -> Result<Vec<String>> {
        match self {
            PlayerSpec::Agent(spec) => spec.net_fingerprints(),
            PlayerSpec::Gtp(_) => Ok(Vec::new()),
        }
    }

    /// A short name: the agent's kind, or the engine's program and
    /// arguments ([`Player::agent_name`] names an agent in full).
    pub fn label(&self) -> String {
        match self {
            PlayerSpec::Agent(spec) => format!("{:?}", spec.kind).to_lowercase(),
            PlayerSpec::Gtp(command) => {
                // `parse` checked the quoting.
                let words = crate::gtp::command_words(command).unwrap_or_default();
                let Some((program, rest)) = words.split_first() else { return String::new() };
                let name = std::path::Path::new(program).file_name().map_or(program.into(), |n| n.to_string_lossy());
                let rest: Vec<&str> =
                    rest.iter().map(String::as_str).filter(|w| *w != "--mode" && *w != "gtp").collect();
                if rest.is_empty() {
                    name.to_string()
                } else {
                    format!("{name} {}", rest.join(" "))
                }
            }
        }
    }

    /// Starts the player; `seed` varies agents' random choices per game,
    /// `timeouts` bound an engine's answers.
    pub fn build(&self, device: &Device, seed: u64, timeouts: GtpTimeouts) -> Result<Box<dyn Player>> {
        Ok(match self {
            PlayerSpec::Agent(spec) => {
                let mut spec = spec.clone();
                spec.search.seed = spec.search.seed.wrapping_add(seed);
                Box::new(LocalPlayer::new(spec.build(device)?))
            }
            PlayerSpec::Gtp(command) => {
                Box::new(GtpPlayer { client: GtpClient::spawn_with(command, timeouts)?, size: 19 })
            }
        })
    }
}

/// A go-train agent with its own copy of the game.
pub struct LocalPlayer {
    agent: Box<dyn Agent>,
    game: Game,
}

impl LocalPlayer {
    pub fn new(agent: Box<dyn Agent>) -> LocalPlayer {
        LocalPlayer { agent, game: Game::new(19, Rules::CHINESE) }
    }
}

impl Player for LocalPlayer {
    fn new_game(&mut self, size: usize, komi: f32) -> Result<()> {
        if !self.agent.supports_size(size) {
            bail!("{} cannot play on {size}x{size}", self.agent.name());
        }
        self.game = Game::new(size, Rules { komi, ..Rules::CHINESE });
        Ok(())
    }

    fn play(&mut self, color: Color, mv: Move) -> Result<()> {
        self.game
            .play(color, mv)
            .map(|_| ())
            .with_context(|| format!("{} refused {color} {}", self.agent.name(), mv.to_gtp(self.game.size())))
    }

    fn agent_name(&self) -> Option<String> {
        Some(self.agent.name())
    }

    fn genmove(&mut self, color: Color) -> Result<Move> {
        self.game.set_to_move(color);
        let mv = self.agent.genmove(&self.game, None)?;
        if mv != Move::Resign {
            self.game.play(color, mv).with_context(|| format!("{} chose an illegal move", self.agent.name()))?;
        }
        Ok(mv)
    }
}

/// An external engine over GTP.
pub struct GtpPlayer {
    client: GtpClient,
    /// Board side, for reading its vertices.
    size: usize,
}

impl Player for GtpPlayer {
    fn new_game(&mut self, size: usize, komi: f32) -> Result<()> {
        self.client.send_setup(&format!("boardsize {size}"))?;
        self.client.send_setup("clear_board")?;
        self.client.send_setup(&format!("komi {komi}"))?;
        self.size = size;
        Ok(())
    }

    fn play(&mut self, color: Color, mv: Move) -> Result<()> {
        self.client.send(&format!("play {} {}", color.letter(), mv.to_gtp(self.size)))?;
        Ok(())
    }

    fn genmove(&mut self, color: Color) -> Result<Move> {
        let answer = self.client.send(&format!("genmove {}", color.letter()))?;
        Move::parse_gtp(&answer, self.size)
            .with_context(|| format!("engine `{}` answered genmove with {answer:?}", self.client.engine()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_engine_is_labelled_by_its_program_and_its_quoted_arguments() {
        let spec = PlayerSpec::parse("'/opt/my go/gnugo' --mode gtp --level 10").unwrap();
        assert_eq!(spec.label(), "gnugo --level 10");
        assert_eq!(PlayerSpec::parse("/usr/games/gnugo --mode gtp").unwrap().label(), "gnugo");
        let e = PlayerSpec::parse("'/opt/my go/gnugo --mode gtp").unwrap_err().to_string();
        assert!(e.contains("unclosed quote"), "{e}");
        assert!(PlayerSpec::parse("''").is_err());
    }
}
