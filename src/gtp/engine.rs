//! The GTP engine behind `go-train gtp`: a game, an agent and a clock,
//! driven one command at a time. Answers follow GnuGo's formats wherever
//! GnuGo has the command, so tools written against GnuGo read ours.

use std::io::{self, BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Duration;

use super::input::{read_lines, Incoming};
use super::protocol::{format_answer, parse_line, Command, GtpId, MAX_LINE_BYTES};
use crate::go::{fixed_handicap, Board, Color, Game, Move, Point, Rules, Vertex};
use crate::search::ownership::{judge_default, Ownership};
use crate::search::{acceptable_points, Agent, Mcts};
use crate::sgf::{read_file_up_to_damage, write_game, GameRecord, PartialGame};

/// Every command the engine knows, in `list_commands` order; those that
/// need a search or its nets are listed only where the engine has them
/// ([`Engine::offers`]).
pub const COMMANDS: &[&str] = &[
    "protocol_version",
    "name",
    "version",
    "known_command",
    "list_commands",
    "quit",
    "boardsize",
    "clear_board",
    "komi",
    "play",
    "genmove",
    "reg_genmove",
    "kgs-genmove_cleanup",
    "undo",
    "showboard",
    "fixed_handicap",
    "place_free_handicap",
    "set_free_handicap",
    "final_score",
    "final_status_list",
    "time_settings",
    "time_left",
    "kgs-time_settings",
    "loadsgf",
    "printsgf",
    "list_stones",
    "captures",
    // Analysis for GUIs (analyze.rs).
    "lz-analyze",
    "kata-analyze",
    "analyze",
    "lz-genmove_analyze",
    "kata-genmove_analyze",
    "genmove_analyze",
    // Extensions of KataGo, GoGui, gomill and KGS (extensions.rs).
    "kata-raw-nn",
    "kata-set-rules",
    "kgs-rules",
    "kgs-game_over",
    "gomill-describe_engine",
    "gomill-cpu_time",
    "gogui-analyze_commands",
    "gogui-policy_heatmap",
    "gogui-value",
    "gogui-ownership",
];

/// Whether the session goes on after a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Quit,
}

/// The time controls a controller announced (`time_settings`,
/// `kgs-time_settings`) and the time each side has left: the engine's own
/// count, charged with its thinking time after each move it generates,
/// until a `time_left` from the controller overwrites it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Clock {
    /// Main time, seconds.
    main: f64,
    /// Byo-yomi period, seconds (0: none).
    byo_yomi: f64,
    /// Stones per byo-yomi period (0: absolute time).
    byo_stones: u32,
    /// Japanese byo-yomi (KGS's `byoyomi`): a period holds one move, and a
    /// `time_left` in byo-yomi counts periods left, not stones.
    japanese: bool,
    /// Whether time is limited at all.
    set: bool,
    /// Per colour: seconds left and stones left in the period (0: main time).
    pub(super) left: [(f64, u32); 2],
}

impl Clock {
    /// A clock of `main` seconds then byo-yomi periods of `byo_yomi`
    /// seconds for `byo_stones` stones each (Canadian; none when either is
    /// 0), both sides' time full.
    fn limited(main: f64, byo_yomi: f64, byo_stones: u32) -> Clock {
        let mut clock = Clock { main, byo_yomi, byo_stones, set: true, ..Clock::default() };
        clock.reset();
        clock
    }

    /// Whether there is byo-yomi after main time.
    fn has_byo_yomi(&self) -> bool {
        self.byo_yomi > 0.0 && self.byo_stones > 0
    }

    /// GTP's `time_settings` with byo-yomi time but 0 stones means "no
    /// time limits".
    fn unlimited(&self) -> bool {
        !self.set || (self.byo_yomi > 0.0 && self.byo_stones == 0)
    }

    /// A fresh byo-yomi period.
    fn period(&self) -> (f64, u32) {
        (self.byo_yomi, self.byo_stones)
    }

    /// Both sides' time as the settings give it, for a new game.
    pub(super) fn reset(&mut self) {
        let start = if self.main <= 0.0 && self.has_byo_yomi() { self.period() } else { (self.main, 0) };
        self.left = [start; 2];
    }

    /// What the controller says `color` has left (`time_left`): `seconds`
    /// of main time when `stones` is 0, else of the period for `stones`.
    fn set_left(&mut self, color: Color, seconds: f64, stones: u32) {
        // KGS counts Japanese periods where Canadian byo-yomi counts
        // stones; the move to come has this period to itself.
        let stones = if self.japanese && stones > 0 { 1 } else { stones };
        self.left[color.index()] = (seconds.max(0.0), stones);
    }

    /// Charges `color` for `elapsed` spent on a move. Main time running
    /// out starts byo-yomi, which this move already counts in; the last
    /// stone of a period starts the next one.
    pub(super) fn charge(&mut self, color: Color, elapsed: Duration) {
        if self.unlimited() {
            return;
        }
        let spent = elapsed.as_secs_f64();
        let (has_byo_yomi, period) = (self.has_byo_yomi(), self.period());
        let (seconds, stones) = &mut self.left[color.index()];
        if *stones == 0 {
            if spent < *seconds || !has_byo_yomi {
                *seconds = (*seconds - spent).max(0.0);
                return;
            }
            // Into byo-yomi: what main time did not cover comes out of the
            // first period.
            let overrun = spent - *seconds;
            *seconds = (period.0 - overrun).max(0.0);
            *stones = period.1 - 1;
        } else {
            *seconds = (*seconds - spent).max(0.0);
            *stones -= 1;
        }
        if *stones == 0 {
            (*seconds, *stones) = period;
        }
    }

    /// A time budget for `color`'s next move on `board`, or `None` when no
    /// clock is set or time is unlimited.
    pub(super) fn budget(&self, color: Color, board: &Board) -> Option<Duration> {
        if self.unlimited() {
            return None;
        }
        let (left, stones) = self.left[color.index()];
        let byo_share = if self.has_byo_yomi() { self.byo_yomi / self.byo_stones as f64 } else { 0.0 };
        let (seconds, available) = if stones > 0 {
            // In byo-yomi: share the period, keeping a margin for overhead.
            (0.8 * left / stones as f64, left / stones as f64)
        } else {
            // Main time: spread it over the moves likely left (about half
            // the empty points), then byo-yomi can take over.
            let moves_left = (board.empty_count() as f64 / 2.0).max(20.0);
            (left / moves_left + 0.5 * byo_share, left + byo_share)
        };
        // The shares above stay within what is available; a floor for
        // moves short of time must too.
        let seconds = seconds.max(MIN_BUDGET_SECONDS.min(available / 2.0));
        // Beyond what a Duration holds the clock is as good as unlimited.
        Duration::try_from_secs_f64(seconds).ok()
    }
}

/// The least budget of a move with time to spare, so that a long game's
/// late moves still search; a move short of time gets at most half of what
/// it has, leaving the rest for overhead.
const MIN_BUDGET_SECONDS: f64 = 0.05;

/// A GTP engine over one agent.
pub struct Engine {
    /// The game on the board.
    pub(super) game: Game,
    /// Rules for new games (komi follows the `komi` command).
    pub(super) rules: Rules,
    /// Who chooses moves.
    pub(super) agent: Box<dyn Agent>,
    /// The search analysis commands run when the agent has none of its own.
    analysis_search: Option<Mcts>,
    pub(super) clock: Clock,
    /// Whether to describe each move choice on stderr.
    pub(super) verbose: bool,
    /// What `gomill-describe_engine` says besides the version: the agent's
    /// settings as its command gave them, else its name.
    pub(super) description: Option<String>,
}

impl Engine {
    /// An engine playing `agent` under `rules` on a `size` board.
    pub fn new(agent: Box<dyn Agent>, rules: Rules, size: usize) -> Engine {
        Engine {
            game: Game::new(size, rules),
            rules,
            agent,
            analysis_search: None,
            clock: Clock::default(),
            verbose: false,
            description: None,
        }
    }

    /// Gives analysis commands (`lz-analyze`, `kata-raw-nn`, ...) a search
    /// of their own, for an agent that has no tree search (the policy net
    /// alone): they run it; `genmove` still asks the agent.
    pub fn set_analysis_search(&mut self, search: Mcts) {
        self.analysis_search = Some(search);
    }

    /// The search analysis runs: the agent's own, else the one set aside.
    pub(super) fn search_mut(&mut self) -> Result<&mut Mcts, String> {
        match self.agent.tree_search() {
            Some(search) => Ok(search),
            None => self.analysis_search.as_mut().ok_or_else(|| "this engine has no search to analyze with".into()),
        }
    }

    /// Whether `command` is one this engine can carry out. Commands that
    /// read the search or its nets are not, where it has none: GUIs ask
    /// `known_command` before they offer a command, and one that can only
    /// be refused should not be offered.
    pub(super) fn offers(&mut self, command: &str) -> bool {
        let search = self.search_mut().ok().map(|search| search.nets());
        let (policy, value) = search.map_or((false, false), |(policy, value)| (policy.is_some(), value.is_some()));
        match command {
            "lz-analyze" | "kata-analyze" | "analyze" => search.is_some(),
            "kata-raw-nn" => policy || value,
            "gogui-policy_heatmap" => policy,
            "gogui-value" => value,
            _ => COMMANDS.contains(&command),
        }
    }

    /// The commands this engine offers, in `list_commands` order.
    pub(super) fn offered_commands(&mut self) -> Vec<&'static str> {
        COMMANDS.iter().copied().filter(|c| self.offers(c)).collect()
    }

    /// Describes the engine to `gomill-describe_engine` (the agent's name
    /// by default).
    pub fn set_description(&mut self, description: String) {
        self.description = Some(description);
    }

    /// Logs each generated move and its time to stderr.
    pub fn set_verbose(&mut self, verbose: bool) {
        self.verbose = verbose;
    }

    /// The game as it stands.
    pub fn game(&self) -> &Game {
        &self.game
    }

    /// Answers commands from `input` on `output` until `quit` or the end of
    /// the input. Only GTP goes to `output`.
    ///
    /// A thread reads `input` line by line, so that a command arriving
    /// during live analysis (`lz-analyze`, which runs until interrupted)
    /// stops it and is then answered like any other. A line longer than
    /// [`MAX_LINE_BYTES`] is dropped as it is read and refused under its
    /// id: no controller can make the engine hold more.
    pub fn run(&mut self, input: impl BufRead + Send + 'static, mut output: impl Write) -> io::Result<()> {
        let lines = read_lines::<GtpId>(input, MAX_LINE_BYTES);
        let mut pending = None;
        loop {
            let line = match pending.take().map_or_else(|| lines.recv(), Ok) {
                Ok(Incoming::Line(bytes)) => Ok(bytes),
                Ok(Incoming::TooLong { bytes, id }) => {
                    Err((id, format!("a command line of {bytes} bytes: the most is {MAX_LINE_BYTES}")))
                }
                Ok(Incoming::Failed(e)) => return Err(e),
                Ok(Incoming::End) | Err(_) => return Ok(()),
            };
            let (id, answer, flow) = match line {
                Err((id, refusal)) => (id, Err(refusal), Flow::Continue),
                Ok(bytes) => {
                    // Bytes that are not UTF-8 cannot be part of a valid
                    // command; they become U+FFFD and the command is
                    // refused normally.
                    let line = String::from_utf8_lossy(&bytes);
                    match parse_line(&line) {
                        None => continue,
                        Some(Err(id)) => (id, Err("missing command".to_string()), Flow::Continue),
                        Some(Ok(command)) => match self.analyze_if_asked(&command, &mut output, &lines)? {
                            Some(stopped_by) => {
                                pending = stopped_by;
                                continue;
                            }
                            None => {
                                let (answer, flow) = self.handle_guarded(&command);
                                (command.id, answer, flow)
                            }
                        },
                    }
                }
            };
            output.write_all(format_answer(id.as_deref(), &answer).as_bytes())?;
            output.flush()?;
            if flow == Flow::Quit {
                return Ok(());
            }
        }
    }

    /// [`Engine::handle`], with a panic turned into a `?` answer: a bug in
    /// one command must not end a game a controller has running.
    fn handle_guarded(&mut self, command: &Command) -> (Result<String, String>, Flow) {
        match catch_unwind(AssertUnwindSafe(|| self.handle(command))) {
            Ok(result) => result,
            Err(_) => (Err(format!("internal error in {}", command.name)), Flow::Continue),
        }
    }

    /// Carries out one command: the answer's text (or error message) and
    /// whether to go on.
    pub fn handle(&mut self, command: &Command) -> (Result<String, String>, Flow) {
        let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
        let answer = match command.name.as_str() {
            "protocol_version" => Ok("2".to_string()),
            "name" => Ok("go-train".to_string()),
            "version" => Ok(env!("CARGO_PKG_VERSION").to_string()),
            "known_command" => Ok(args.first().is_some_and(|c| self.offers(c)).to_string()),
            "list_commands" => Ok(self.offered_commands().join("\n")),
            "quit" => return (Ok(String::new()), Flow::Quit),
            "boardsize" => self.boardsize(&args),
            "clear_board" => {
                self.game = Game::new(self.game.size(), self.rules);
                self.clock.reset();
                Ok(String::new())
            }
            // Within the bounds of `--komi`: any finite float once passed
            // and a komi of 3e38 scored in 39 digits.
            "komi" => match args.first().map(|k| (k, k.parse::<f32>())) {
                Some((text, Ok(komi))) => match crate::bounds::KOMI.real_value(komi as f64) {
                    Ok(_) => {
                        self.rules.komi = komi;
                        self.game.set_komi(komi);
                        Ok(String::new())
                    }
                    Err(refusal) => Err(format!("komi {text}: {refusal}")),
                },
                _ => Err("komi not a float".to_string()),
            },
            "play" => self.play(&args),
            "genmove" => self.genmove(&args, Mode::Play),
            "reg_genmove" => self.genmove(&args, Mode::Regression),
            "kgs-genmove_cleanup" => self.genmove(&args, Mode::Cleanup),
            "undo" => self.game.undo().map(|_| String::new()).ok_or_else(|| "cannot undo".to_string()),
            "showboard" => Ok(self.showboard()),
            "fixed_handicap" => self.handicap(&args, HandicapKind::Fixed),
            "place_free_handicap" => self.handicap(&args, HandicapKind::Free),
            "set_free_handicap" => self.set_free_handicap(&args),
            "final_score" => Ok(judge_default(&self.game).score(&self.game).to_string()),
            "final_status_list" => self.final_status_list(&args),
            "time_settings" => self.time_settings(&args),
            "time_left" => self.time_left(&args),
            "kgs-time_settings" => self.kgs_time_settings(&args),
            "loadsgf" => self.loadsgf(&args),
            "printsgf" => self.printsgf(&args),
            "list_stones" => match args.first().and_then(|c| Color::parse(c)) {
                Some(color) => Ok(self.stones(color).join(" ")),
                None => Err("invalid color".to_string()),
            },
            "captures" => match args.first().and_then(|c| Color::parse(c)) {
                Some(color) => Ok(self.game.board().captures(color).to_string()),
                None => Err("invalid color".to_string()),
            },
            name => self.handle_extension(name, &args).unwrap_or_else(|| Err("unknown command".to_string())),
        };
        (answer, Flow::Continue)
    }

    fn boardsize(&mut self, args: &[&str]) -> Result<String, String> {
        let size: usize = args.first().and_then(|s| s.parse().ok()).ok_or("boardsize not an integer")?;
        if !Board::valid_size(size) || !self.agent.supports_size(size) {
            return Err("unacceptable size".to_string());
        }
        self.game = Game::new(size, self.rules);
        self.clock.reset();
        Ok(String::new())
    }

    fn play(&mut self, args: &[&str]) -> Result<String, String> {
        let invalid = || "invalid color or coordinate".to_string();
        let [color, mv] = args else { return Err(invalid()) };
        let color = Color::parse(color).ok_or_else(invalid)?;
        let mv = Move::parse_board_move(mv, self.game.size()).ok_or_else(invalid)?;
        self.game.play(color, mv).map(|_| String::new()).map_err(|_| "illegal move".to_string())
    }

    fn genmove(&mut self, args: &[&str], mode: Mode) -> Result<String, String> {
        let color = args.first().and_then(|c| Color::parse(c)).ok_or("invalid color")?;
        // GTP lets a controller ask either colour to move.
        let mut position = self.game.clone();
        position.set_to_move(color);
        let budget = self.clock.budget(color, position.board());
        let started = std::time::Instant::now();
        let mut mv = self.agent.genmove(&position, budget).map_err(|e| format!("{e:#}"))?;
        if mode == Mode::Cleanup && mv == Move::Pass {
            mv = cleanup_move(&position).unwrap_or(Move::Pass);
        }
        // `reg_genmove` only asks: no move on the board, none on the clock.
        if mode != Mode::Regression {
            self.clock.charge(color, started.elapsed());
        }
        if self.verbose {
            crate::say!(
                "{} {}: {} in {:.2}s",
                self.agent.name(),
                color,
                mv.to_gtp(self.game.size()),
                started.elapsed().as_secs_f64()
            );
        }
        if mode != Mode::Regression {
            self.commit(color, mv)?;
        }
        Ok(mv.to_gtp(self.game.size()))
    }

    /// Plays a move the engine chose (a resignation changes nothing).
    pub(super) fn commit(&mut self, color: Color, mv: Move) -> Result<(), String> {
        if mv == Move::Resign {
            return Ok(());
        }
        self.game.set_to_move(color);
        // Agents promise legal moves; a broken promise is an error answer,
        // never an illegal position.
        self.game
            .play(color, mv)
            .map(|_| ())
            .map_err(|e| format!("engine chose an illegal move {}: {e}", mv.to_gtp(self.game.size())))
    }

    fn showboard(&self) -> String {
        let board = self.game.board();
        let last = self.game.recent_moves(1).next().and_then(|m| match m.mv {
            Move::Play(v) => Some(v),
            _ => None,
        });
        format!(
            "\n{}\nBlack (X) has captured {} stones, White (O) has captured {} stones; {} to move",
            crate::go::diagram(board, last),
            board.captures(Color::Black),
            board.captures(Color::White),
            self.game.to_move()
        )
    }

    /// Whether nothing has happened on the board yet (handicap may be set).
    fn board_is_empty(&self) -> bool {
        self.game.board().empty_count() == self.game.size() * self.game.size()
    }

    fn handicap(&mut self, args: &[&str], kind: HandicapKind) -> Result<String, String> {
        let n: usize = args.first().and_then(|s| s.parse().ok()).ok_or("handicap not an integer")?;
        if !self.board_is_empty() {
            return Err("board not empty".to_string());
        }
        let size = self.game.size();
        let stones = match kind {
            HandicapKind::Fixed => fixed_handicap(size, n).map_err(|_| "invalid handicap".to_string())?,
            HandicapKind::Free => free_handicap(size, n).ok_or("invalid handicap")?,
        };
        self.place_handicap(&stones)?;
        // Listed in board order, rows from the top, as GnuGo lists them.
        let mut listed = stones;
        listed.sort_by_key(|v| v.index(size));
        Ok(listed.iter().map(|v| v.to_gtp(size)).collect::<Vec<_>>().join(" "))
    }

    fn set_free_handicap(&mut self, args: &[&str]) -> Result<String, String> {
        if !self.board_is_empty() {
            return Err("board not empty".to_string());
        }
        let size = self.game.size();
        let mut stones = Vec::new();
        for a in args {
            let v = Vertex::parse_gtp(a, size).ok_or("invalid coordinate")?;
            if stones.contains(&v) {
                return Err("repeated vertex".to_string());
            }
            stones.push(v);
        }
        if stones.len() < 2 || stones.len() >= size * size {
            return Err("invalid handicap".to_string());
        }
        self.place_handicap(&stones)?;
        Ok(String::new())
    }

    fn place_handicap(&mut self, stones: &[Vertex]) -> Result<(), String> {
        let changes: Vec<(Vertex, Option<Color>)> = stones.iter().map(|&v| (v, Some(Color::Black))).collect();
        self.game.setup(&changes).map_err(|e| e.to_string())?;
        self.game.set_to_move(Color::White);
        Ok(())
    }

    fn final_status_list(&self, args: &[&str]) -> Result<String, String> {
        let status = args.first().copied().unwrap_or("");
        let board = self.game.board();
        let dead: Vec<Point> = match status {
            "dead" | "alive" => judge_default(&self.game).dead_stones(board),
            // Seki is not told apart from life: its stones are listed alive.
            "seki" => return Ok(String::new()),
            _ => return Err("invalid status".to_string()),
        };
        let wanted = |p: Point| board.color_at(p).is_some() && (dead.contains(&p) == (status == "dead"));
        // One string per line, as GnuGo lists them.
        let mut done = vec![false; board.points().map(|p| p.idx()).max().unwrap_or(0) + 1];
        let mut lines = Vec::new();
        for p in board.points().filter(|&p| wanted(p)) {
            if done[p.idx()] {
                continue;
            }
            let mut string = board.string_stones(p);
            string.iter().for_each(|q| done[q.idx()] = true);
            string.sort_by_key(|&q| board.vertex(q).index(board.size()));
            lines.push(string.iter().map(|&q| board.vertex(q).to_gtp(board.size())).collect::<Vec<_>>().join(" "));
        }
        Ok(lines.join("\n"))
    }

    fn time_settings(&mut self, args: &[&str]) -> Result<String, String> {
        let [main, byo, stones] = args else { return Err("syntax error".to_string()) };
        let (Ok(main), Ok(byo), Ok(stones)) = (main.parse::<f64>(), byo.parse::<f64>(), stones.parse::<u32>()) else {
            return Err("syntax error".to_string());
        };
        if !(main.is_finite() && byo.is_finite() && main >= 0.0 && byo >= 0.0) {
            return Err("syntax error".to_string());
        }
        self.clock = Clock::limited(main, byo, stones);
        Ok(String::new())
    }

    /// KGS's `kgs-time_settings none | absolute MAIN | byoyomi MAIN PERIOD
    /// PERIODS | canadian MAIN PERIOD STONES`. Japanese byo-yomi is kept
    /// as Canadian periods of one stone: the extra periods are a margin
    /// the engine never plans to spend.
    fn kgs_time_settings(&mut self, args: &[&str]) -> Result<String, String> {
        let syntax = || "syntax error".to_string();
        let seconds = |text: &str| text.parse::<f64>().ok().filter(|t| t.is_finite() && *t >= 0.0).ok_or_else(syntax);
        let count = |text: &str| text.parse::<u32>().map_err(|_| syntax());
        self.clock = match args {
            ["none"] => Clock::default(),
            ["absolute", main] => Clock::limited(seconds(main)?, 0.0, 0),
            ["canadian", main, period, stones] => Clock::limited(seconds(main)?, seconds(period)?, count(stones)?),
            ["byoyomi", main, period, periods] => {
                let (main, period, periods) = (seconds(main)?, seconds(period)?, count(periods)?);
                if periods == 0 || period == 0.0 {
                    Clock::limited(main, 0.0, 0)
                } else {
                    Clock { japanese: true, ..Clock::limited(main, period, 1) }
                }
            }
            _ => return Err(syntax()),
        };
        Ok(String::new())
    }

    fn time_left(&mut self, args: &[&str]) -> Result<String, String> {
        let [color, time, stones] = args else { return Err("syntax error".to_string()) };
        let color = Color::parse(color).ok_or("invalid color")?;
        let (Ok(time), Ok(stones)) = (time.parse::<f64>(), stones.parse::<u32>()) else {
            return Err("syntax error".to_string());
        };
        if !time.is_finite() {
            return Err("syntax error".to_string());
        }
        self.clock.set_left(color, time, stones);
        Ok(String::new())
    }

    fn loadsgf(&mut self, args: &[&str]) -> Result<String, String> {
        let path = args.first().ok_or("missing filename")?;
        // GnuGo's words, then the reason.
        let refuse = |why: String| format!("cannot open or parse '{path}': {why}");
        // Read as far as it goes, as GnuGo does: a damaged later node
        // refuses only the moves from it on.
        let parsed = read_file_up_to_damage(Path::new(path)).map_err(|e| refuse(e.to_string()))?;
        let (record, damage) = match parsed.into_iter().next() {
            Some(Ok(PartialGame { record, damage, .. })) => (record, damage),
            Some(Err(e)) => return Err(refuse(e.to_string())),
            None => return Err(refuse("no game in it".to_string())),
        };
        if !self.agent.supports_size(record.size) {
            return Err("unacceptable size".to_string());
        }
        // `loadsgf FILE N` stops before move N; `loadsgf FILE VERTEX`
        // before the first move there (GnuGo's reading).
        let stop = match args.get(1) {
            None => record.moves.len(),
            Some(a) => match a.parse::<usize>() {
                Ok(n) => n.saturating_sub(1),
                Err(_) => {
                    let v = Vertex::parse_gtp(a, record.size).ok_or("invalid coordinate")?;
                    record.moves.iter().position(|m| m.mv == Move::Play(v)).unwrap_or(record.moves.len())
                }
            },
        };
        if let Some(damage) = &damage {
            let read = record.moves.len();
            if args.get(1).is_some() && stop > read {
                return Err(format!("{path}: readable up to move {read}, then: {damage}"));
            }
            crate::say!("loadsgf {path}: read up to move {read}, then: {damage}");
        }
        let rules = record.rules_or(self.rules);
        let game = record.replay_until(rules, stop).map_err(|e| format!("{path}: {e}"))?;
        self.rules = rules;
        self.game = game;
        self.clock.reset();
        Ok(if self.game.to_move() == Color::Black { "black" } else { "white" }.to_string())
    }

    fn printsgf(&self, args: &[&str]) -> Result<String, String> {
        let mut record = GameRecord::from_game(&self.game);
        // Under a name read back as the same rules: `Chinese` for every
        // area rule set made a Tromp-Taylor suicide illegal on reloading.
        // Rules no name stands for go unnamed, and `loadsgf` keeps the
        // engine's own.
        record.rules = self.rules.sgf_name().map(str::to_string);
        let sgf = write_game(&record);
        match args.first() {
            None => Ok(sgf),
            // Whole or not at all, and never opened where a named pipe is:
            // that open waited for a reader and hung the engine.
            Some(file) => crate::atomic::write_atomic(std::path::Path::new(file), sgf.as_bytes())
                .map(|_| String::new())
                .map_err(|e| format!("cannot write {file}: {e:#}")),
        }
    }

    /// The stones of `color` in GTP names, in board order (rows from the
    /// top, GnuGo's order).
    fn stones(&self, color: Color) -> Vec<String> {
        let board = self.game.board();
        board
            .points()
            .filter(|&p| board.color_at(p) == Some(color))
            .map(|p| board.vertex(p).to_gtp(board.size()))
            .collect()
    }
}

/// Which genmove variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `genmove`: choose and play.
    Play,
    /// `reg_genmove`: choose only.
    Regression,
    /// `kgs-genmove_cleanup`: choose and play, never passing while the
    /// opponent has dead stones left on the board.
    Cleanup,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HandicapKind {
    Fixed,
    Free,
}

/// A move that helps remove the opponent's dead stones, for the cleanup
/// phase: a liberty of a dead opponent stone, else any acceptable point
/// (playing on is how dead stones get taken off under area rules).
fn cleanup_move(game: &Game) -> Option<Move> {
    let board = game.board();
    let color = game.to_move();
    let dead: Vec<Point> = Ownership::judge(game, 100, board.hash())
        .dead_stones(board)
        .into_iter()
        .filter(|&p| board.color_at(p) == Some(color.opponent()))
        .collect();
    if dead.is_empty() {
        return None;
    }
    let acceptable = acceptable_points(game);
    let near_dead = acceptable.iter().copied().find(|&p| board.neighbors(p).iter().any(|n| dead.contains(n)));
    near_dead.or(acceptable.first().copied()).map(|p| Move::Play(board.vertex(p)))
}

/// `n` free handicap stones: the fixed points while they last, then the
/// empty points of the 3rd and 4th lines (or any) farthest from the stones
/// already placed. `None` when `n` is not 2 to `size² − 1`.
fn free_handicap(size: usize, n: usize) -> Option<Vec<Vertex>> {
    if n < 2 || n >= size * size {
        return None;
    }
    let max_fixed = (2..=9).rev().find(|&k| fixed_handicap(size, k).is_ok()).unwrap_or(0);
    let mut stones = if max_fixed >= 2 { fixed_handicap(size, n.min(max_fixed)).ok()? } else { Vec::new() };
    let line = |c: u8| (c as usize).min(size - 1 - c as usize);
    let on_good_line = |v: &Vertex| (2..=3).contains(&line(v.x)) && (2..=3).contains(&line(v.y));
    while stones.len() < n {
        let empty: Vec<Vertex> =
            (0..size * size).map(|i| Vertex::from_index(i, size)).filter(|v| !stones.contains(v)).collect();
        let pool: Vec<Vertex> = empty.iter().copied().filter(on_good_line).collect();
        let pool = if pool.is_empty() { empty } else { pool };
        let distance = |v: &Vertex| {
            stones.iter().map(|s| s.x.abs_diff(v.x) as usize + s.y.abs_diff(v.y) as usize).min().unwrap_or(usize::MAX)
        };
        // Farthest first; ties to the earliest point, so it is deterministic.
        let best = pool.iter().copied().rev().max_by_key(distance)?;
        stones.push(best);
    }
    Some(stones)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `line` to `engine`, expecting success.
    fn send(engine: &mut Engine, line: &str) -> String {
        let command = parse_line(line).unwrap().unwrap();
        engine.handle(&command).0.unwrap_or_else(|e| panic!("{line}: {e}"))
    }

    fn random_engine() -> Engine {
        Engine::new(Box::new(crate::search::RandomAgent::new(7)), Rules::CHINESE, 9)
    }

    #[test]
    fn the_clock_spreads_main_time_and_shares_byo_yomi() {
        let board = Board::new(19);
        let mut clock = Clock::default();
        assert_eq!(clock.budget(Color::Black, &board), None, "no clock: no budget");
        clock = Clock::limited(361.0, 0.0, 0);
        // Main time over about half the empty points.
        assert_eq!(clock.budget(Color::Black, &board), Some(Duration::from_secs_f64(2.0)));
        // In byo-yomi: 80% of the period's share per stone.
        clock = Clock::limited(361.0, 30.0, 5);
        clock.set_left(Color::White, 20.0, 4);
        assert_eq!(clock.budget(Color::White, &board), Some(Duration::from_secs_f64(4.0)));
        // GTP's "no time limits": byo-yomi time with no stones.
        clock = Clock::limited(361.0, 30.0, 0);
        assert_eq!(clock.budget(Color::White, &board), None);
    }

    #[test]
    fn the_clock_charges_each_move_and_enters_byo_yomi_when_main_time_runs_out() {
        // Absolute time: spent until nothing is left.
        let mut clock = Clock::limited(10.0, 0.0, 0);
        clock.charge(Color::Black, Duration::from_secs(3));
        assert_eq!(clock.left, [(7.0, 0), (10.0, 0)], "only the mover pays");
        clock.charge(Color::Black, Duration::from_secs(8));
        assert_eq!(clock.left[Color::Black.index()], (0.0, 0));
        // Canadian byo-yomi: the move that overruns main time is the
        // period's first, and pays the overrun; the last stone starts a
        // new period.
        let mut clock = Clock::limited(10.0, 30.0, 3);
        clock.charge(Color::White, Duration::from_secs(12));
        assert_eq!(clock.left[Color::White.index()], (28.0, 2));
        clock.charge(Color::White, Duration::from_secs(5));
        assert_eq!(clock.left[Color::White.index()], (23.0, 1));
        clock.charge(Color::White, Duration::from_secs(5));
        assert_eq!(clock.left[Color::White.index()], (30.0, 3));
        // No main time: byo-yomi from the first move.
        assert_eq!(Clock::limited(0.0, 30.0, 3).left, [(30.0, 3); 2]);
        // The controller's word overwrites the engine's count; a new game
        // starts from the settings.
        clock.set_left(Color::White, 100.0, 0);
        assert_eq!(clock.left[Color::White.index()], (100.0, 0));
        clock.reset();
        assert_eq!(clock.left, [(10.0, 0); 2]);
        // Unlimited time is never charged.
        let mut unlimited = Clock::limited(10.0, 30.0, 0);
        unlimited.charge(Color::Black, Duration::from_secs(60));
        assert_eq!(unlimited.left, [(10.0, 0); 2]);
    }

    #[test]
    fn a_move_short_of_time_gets_at_most_half_of_it() {
        let board = Board::new(9);
        let mut clock = Clock::limited(10.0, 0.0, 0);
        clock.set_left(Color::Black, 0.01, 0);
        assert_eq!(clock.budget(Color::Black, &board), Some(Duration::from_secs_f64(0.005)));
        clock.set_left(Color::Black, 0.0, 0);
        assert_eq!(clock.budget(Color::Black, &board), Some(Duration::ZERO));
        // With time to spare, the floor holds.
        clock.set_left(Color::Black, 1.0, 0);
        assert_eq!(clock.budget(Color::Black, &board), Some(Duration::from_secs_f64(0.05)));
    }

    #[test]
    fn kgs_time_settings_name_the_same_clocks_as_time_settings() {
        let mut engine = random_engine();
        send(&mut engine, "kgs-time_settings canadian 600 30 5");
        assert_eq!(engine.clock, Clock::limited(600.0, 30.0, 5));
        send(&mut engine, "kgs-time_settings absolute 600");
        assert_eq!(engine.clock, Clock::limited(600.0, 0.0, 0));
        send(&mut engine, "kgs-time_settings none");
        assert_eq!(engine.clock.budget(Color::Black, engine.game.board()), None);
        // Japanese periods: one move each, and `time_left` counts periods.
        send(&mut engine, "kgs-time_settings byoyomi 0 10 5");
        assert_eq!(engine.clock.left, [(10.0, 1); 2]);
        send(&mut engine, "time_left w 9 4");
        assert_eq!(engine.clock.left[Color::White.index()], (9.0, 1));
        assert_eq!(engine.clock.budget(Color::White, engine.game.board()), Some(Duration::from_secs_f64(7.2)));
        send(&mut engine, "kgs-time_settings byoyomi 60 10 0");
        assert_eq!(engine.clock, Clock::limited(60.0, 0.0, 0), "no periods: absolute time");
        for refused in ["kgs-time_settings", "kgs-time_settings fischer 60 5", "kgs-time_settings absolute -1"] {
            assert!(engine.handle(&parse_line(refused).unwrap().unwrap()).0.is_err(), "{refused}");
        }
    }

    #[test]
    fn genmove_charges_the_engines_own_time_to_its_clock() {
        let mut engine = random_engine();
        send(&mut engine, "time_settings 10 0 0");
        send(&mut engine, "genmove b");
        let [(black, _), (white, _)] = engine.clock.left;
        assert!(black < 10.0 && white == 10.0, "black {black}, white {white}");
        send(&mut engine, "reg_genmove w");
        assert_eq!(engine.clock.left[Color::White.index()], (10.0, 0), "reg_genmove plays no move");
    }

    #[test]
    fn a_new_game_starts_with_the_time_settings_whatever_time_left_said() {
        let mut engine = random_engine();
        send(&mut engine, "time_settings 10 0 0");
        let full = [(10.0, 0); 2];
        send(&mut engine, "time_left b 3 0");
        send(&mut engine, "clear_board");
        assert_eq!(engine.clock.left, full, "clear_board");
        send(&mut engine, "time_left w 3 0");
        send(&mut engine, "boardsize 7");
        assert_eq!(engine.clock.left, full, "boardsize");
        send(&mut engine, "time_left b 3 0");
        let dir = tempfile::tempdir().unwrap();
        let sgf = dir.path().join("game.sgf");
        std::fs::write(&sgf, "(;SZ[9];B[ee])").unwrap();
        send(&mut engine, &format!("loadsgf {}", sgf.display()));
        assert_eq!(engine.clock.left, full, "loadsgf");
    }

    #[test]
    fn an_engine_without_a_search_offers_no_command_that_needs_one() {
        let mut engine = random_engine();
        for needs_search in
            ["lz-analyze", "kata-analyze", "analyze", "kata-raw-nn", "gogui-policy_heatmap", "gogui-value"]
        {
            assert_eq!(send(&mut engine, &format!("known_command {needs_search}")), "false", "{needs_search}");
            assert!(!engine.offered_commands().contains(&needs_search), "{needs_search} listed");
        }
        // The genmove forms play the agent's own move; ownership comes from
        // playouts.
        for works in ["genmove", "lz-genmove_analyze", "kata-genmove_analyze", "gogui-ownership", "kgs-time_settings"] {
            assert_eq!(send(&mut engine, &format!("known_command {works}")), "true", "{works}");
        }
        assert_eq!(send(&mut engine, "gogui-analyze_commands"), "gfx/Ownership/gogui-ownership");
        assert_eq!(send(&mut engine, "list_commands").lines().count(), COMMANDS.len() - 6);
    }

    #[test]
    fn free_handicap_gives_distinct_points_and_refuses_impossible_counts() {
        for (size, n) in [(19, 2), (19, 9), (19, 17), (9, 12), (5, 3), (2, 3)] {
            let stones = free_handicap(size, n).unwrap();
            let mut unique = stones.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), n, "{size}x{size}, {n}");
        }
        assert!(free_handicap(19, 1).is_none());
        assert!(free_handicap(2, 4).is_none());
    }

    #[test]
    fn cleanup_plays_next_to_dead_stones_instead_of_passing() {
        // A lone white stone inside Black's closed area.
        let mut game = Game::new(7, Rules::CHINESE);
        let wall: Vec<(Vertex, Option<Color>)> = (0..7).map(|y| (Vertex::new(3, y), Some(Color::Black))).collect();
        game.setup(&wall).unwrap();
        game.setup(&[(Vertex::new(1, 3), Some(Color::White))]).unwrap();
        let mv = cleanup_move(&game);
        let Some(Move::Play(v)) = mv else { panic!("{mv:?}") };
        assert_eq!(v.x.abs_diff(1) + v.y.abs_diff(3), 1, "{v:?} should touch the dead stone at B4");
    }
}
