//! Live analysis over GTP, in the three dialects GUIs speak (KataGo's
//! `docs/GTP_Extensions.md` describes all three):
//!
//! * Leela Zero's `lz-analyze` (Lizzie, Sabaki): win rate, prior and LCB as
//!   integers out of 10000;
//! * KataGo's `kata-analyze` (Lizzie, KaTrain's GTP mode): the same as
//!   floats in 0..1, plus `rootInfo` and `ownership` on request;
//! * Sabaki's `analyze`: KataGo's, every float written with a decimal point.
//!
//! The answer starts at once (`=`), then one line every `interval`
//! centiseconds holds every candidate move (`info move … pv …` repeated);
//! the next command (or an empty line) stops the search, which ends the
//! answer with an empty line, and that command is then answered normally.
//! The `genmove_analyze` forms search as `genmove` does, are not
//! interrupted, play the move `genmove` would (an agent without a tree
//! search chooses its own) and end with `play VERTEX`.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::engine::Engine;
use super::input::Incoming;
use super::protocol::{format_answer, Command};
use crate::go::{Color, Game, Move};
use crate::search::ownership::judge_default;
use crate::search::restrict::{self, MoveFilter};
use crate::search::Analysis;

/// How numbers are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// Leela Zero: integers out of 10000.
    Leela,
    /// KataGo: floats in 0..1, as short as they print.
    Kata,
    /// Sabaki: KataGo's, with a decimal point in every float.
    Sabaki,
}

/// An analysis command and its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalysisRequest {
    pub dialect: Dialect,
    /// `genmove_analyze`: search as `genmove` does, then play.
    pub genmove: bool,
    /// The side to analyze for (default: the side to move).
    pub color: Option<Color>,
    /// Time between lines; `None` (or 0): no line until the search ends.
    pub interval: Option<Duration>,
    /// Moves listed at least (unvisited ones by prior fill up).
    pub min_moves: usize,
    /// Moves listed at most.
    pub max_moves: usize,
    /// Append `ownership` and 361 numbers (KataGo's dialects).
    pub ownership: bool,
    /// Append `rootInfo visits N winrate W` (KataGo's dialects).
    pub root_info: bool,
    /// Follow each `pv` with `pvVisits` and the visits of its moves
    /// (KataGo's dialects).
    pub pv_visits: bool,
    /// Moves the search leaves out (`avoid`) or keeps to (`allow`), as
    /// the JSON analysis engine's `avoidMoves` and `allowMoves`.
    pub filters: Vec<MoveFilter>,
}

impl AnalysisRequest {
    /// The request `name args` makes, `None` when `name` is no analysis
    /// command, an error message when its arguments are wrong. Arguments:
    /// `[color] [interval] [key value]...` with keys `interval`,
    /// `minmoves`, `maxmoves`, for KataGo's dialects `ownership`,
    /// `rootInfo` and `pvVisits` (`true`/`false`; `movesOwnership` and
    /// `ownershipStdev` `false` only), and `avoid`/`allow PLAYER
    /// V1,V2,... UNTILDEPTH` (vertices of a `size` board).
    pub fn parse(name: &str, args: &[String], size: usize) -> Option<Result<AnalysisRequest, String>> {
        let (dialect, genmove) = match name {
            "lz-analyze" => (Dialect::Leela, false),
            "kata-analyze" => (Dialect::Kata, false),
            "analyze" => (Dialect::Sabaki, false),
            "lz-genmove_analyze" => (Dialect::Leela, true),
            "kata-genmove_analyze" => (Dialect::Kata, true),
            "genmove_analyze" => (Dialect::Sabaki, true),
            _ => return None,
        };
        let mut request = AnalysisRequest {
            dialect,
            genmove,
            color: None,
            interval: None,
            min_moves: 0,
            max_moves: usize::MAX,
            ownership: false,
            root_info: false,
            pv_visits: false,
            filters: Vec::new(),
        };
        Some(request.read_args(args, size).map(|_| request))
    }

    fn read_args(&mut self, args: &[String], size: usize) -> Result<(), String> {
        let mut rest = args;
        if let Some(color) = rest.first().and_then(|c| Color::parse(c)) {
            self.color = Some(color);
            rest = &rest[1..];
        }
        // A number that is no interval (`-1`, `1e3`, one past u64) was once
        // read as a key and refused as "a key without a value".
        if let Some(first) = rest.first().filter(|a| a.parse::<f64>().is_ok() && a.parse::<u64>().is_err()) {
            return Err(format!("interval {first}: give a whole number of centiseconds"));
        }
        if let Some(cs) = rest.first().and_then(|a| a.parse::<u64>().ok()) {
            self.interval = centiseconds(cs);
            rest = &rest[1..];
        }
        let number = |key: &str, value: &str| {
            value.parse::<u64>().map_err(|_| format!("{key} {value}: give a whole number, 0 or more"))
        };
        let flag = |key: &str, value: &str| match value {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(format!("{key} {value}: give true or false")),
        };
        let kata = self.dialect != Dialect::Leela;
        while let Some((key, after)) = rest.split_first() {
            if key == "avoid" || key == "allow" {
                let [player, vertices, depth, after @ ..] = after else {
                    return Err(format!("{key}: give a player, vertices (D4,Q16) and a depth"));
                };
                self.filters.push(move_filter(key == "allow", player, vertices, depth, size)?);
                rest = after;
                continue;
            }
            let Some((value, after)) = after.split_first() else { return Err(format!("{key}: a key without a value")) };
            match key.as_str() {
                "interval" => self.interval = centiseconds(number(key, value)?),
                "minmoves" => self.min_moves = number(key, value)? as usize,
                "maxmoves" => self.max_moves = number(key, value)? as usize,
                "ownership" if kata => self.ownership = flag(key, value)?,
                "rootInfo" if kata => self.root_info = flag(key, value)?,
                "pvVisits" if kata => self.pv_visits = flag(key, value)?,
                // KataGo's, from outputs go-train has not: asked for, they
                // are refused by name, not as unknown keys.
                "movesOwnership" | "ownershipStdev" if kata => {
                    if flag(key, value)? {
                        return Err(format!(
                            "{key} true: go-train's ownership is one estimate of the position, from random \
                             playouts (the JSON analysis engine's includeMovesOwnership gives it after each move)"
                        ));
                    }
                }
                _ => return Err(format!("unknown analysis option {key}")),
            }
            rest = after;
        }
        restrict::check(&self.filters)
    }
}

/// `avoid` or `allow`'s rule: `player`'s `vertices` (comma-separated)
/// until `depth` moves deep, counted from the analysed position.
fn move_filter(allow: bool, player: &str, vertices: &str, depth: &str, size: usize) -> Result<MoveFilter, String> {
    let key = if allow { "allow" } else { "avoid" };
    let player = Color::parse(player).ok_or_else(|| format!("{key} {player}: not a player (b or w)"))?;
    let moves = vertices
        .split(',')
        .map(|v| {
            Move::parse_board_move(v, size).ok_or_else(|| format!("{key} {v}: not a vertex of a {size}x{size} board"))
        })
        .collect::<Result<Vec<Move>, String>>()?;
    let until_depth = depth
        .parse::<u32>()
        .ok()
        .filter(|&d| d >= 1)
        .ok_or_else(|| format!("{key} depth {depth}: give a whole number from 1 to {}", u32::MAX))?;
    Ok(MoveFilter { player, moves, allow, until_depth })
}

fn centiseconds(cs: u64) -> Option<Duration> {
    (cs > 0).then(|| Duration::from_millis(cs.saturating_mul(10)))
}

/// One line of analysis (with its newline): the listed moves, then
/// `rootInfo` and `ownership` when asked. `ownership` is per point,
/// row-major from the top left (A19), for the side analyzed. Empty, with
/// no newline, when there is nothing to write: an empty line would end
/// the answer for the client.
pub fn info_line(analysis: &Analysis, request: &AnalysisRequest, size: usize, ownership: Option<&[f32]>) -> String {
    let fraction = |x: f32| match request.dialect {
        Dialect::Leela => format!("{}", (x * 10000.0).round() as i64),
        Dialect::Kata => format!("{}", (x as f64 * 1e6).round() / 1e6),
        Dialect::Sabaki => format!("{x:.6}"),
    };
    let root_winrate = analysis.winrate.unwrap_or(0.5);
    let listed = analysis
        .moves
        .iter()
        .enumerate()
        .take_while(|(i, m)| m.visits > 0 || *i < request.min_moves)
        .take(request.max_moves);
    let mut line = String::new();
    for (order, m) in listed {
        let pv: Vec<String> = m.pv.iter().map(|mv| mv.to_gtp(size)).collect();
        line.push_str(&format!(
            "info move {} visits {} winrate {} prior {} lcb {} order {order} pv {} ",
            m.mv.to_gtp(size),
            m.visits,
            fraction(m.winrate.unwrap_or(root_winrate)),
            fraction(m.prior),
            fraction(m.lcb()),
            pv.join(" "),
        ));
        if request.pv_visits {
            let visits: Vec<String> = m.pv_visits.iter().map(u32::to_string).collect();
            line.push_str(&format!("pvVisits {} ", visits.join(" ")));
        }
    }
    if request.root_info {
        line.push_str(&format!("rootInfo visits {} winrate {} ", analysis.visits, fraction(root_winrate)));
    }
    if let Some(owned) = ownership.filter(|_| request.ownership) {
        line.push_str("ownership");
        for x in owned {
            line.push(' ');
            line.push_str(&match request.dialect {
                Dialect::Sabaki => format!("{x:.6}"),
                _ => format!("{}", (*x as f64 * 1e6).round() / 1e6),
            });
        }
    }
    let mut line = line.trim_end().to_string();
    if !line.is_empty() {
        line.push('\n');
    }
    line
}

/// Who owns each point at the end, from `color`'s side: 1 surely
/// `color`'s, −1 surely the opponent's, from the random playouts that
/// score games, not from the ownership head that `nets/value.safetensors`
/// carries (an auxiliary training target; in play only MCTS `score=W`
/// reads it).
pub fn ownership_for(game: &Game, color: Color) -> Vec<f32> {
    judge_default(game).balance(color)
}

impl Engine {
    /// Runs `command` when it is an analysis command (`None` when not):
    /// its streamed answer, or its error, goes to `out`. Returns what
    /// stopped the analysis, for the caller to handle next.
    pub(super) fn analyze_if_asked(
        &mut self,
        command: &Command,
        out: &mut impl Write,
        lines: &Receiver<Incoming>,
    ) -> io::Result<Option<Option<Incoming>>> {
        match AnalysisRequest::parse(&command.name, &command.args, self.game.size()) {
            None => Ok(None),
            Some(Ok(request)) => self.stream_analysis(command.id.as_deref(), &request, out, lines).map(Some),
            Some(Err(message)) => {
                out.write_all(format_answer(command.id.as_deref(), &Err(message)).as_bytes())?;
                out.flush()?;
                Ok(Some(None))
            }
        }
    }

    /// Runs an analysis command, writing its streamed answer to `out`.
    /// Returns what stopped it, for the caller to handle next: a command
    /// line, or the end of the input.
    fn stream_analysis(
        &mut self,
        id: Option<&str>,
        request: &AnalysisRequest,
        out: &mut impl Write,
        lines: &Receiver<Incoming>,
    ) -> io::Result<Option<Incoming>> {
        let id = id.unwrap_or_default();
        let color = request.color.unwrap_or(self.game.to_move());
        let mut position = self.game.clone();
        position.set_to_move(color);
        let size = position.size();
        let budget = if request.genmove { self.clock.budget(color, position.board()) } else { None };
        // An agent without a tree search of its own (a net alone, random
        // play) chooses the move a genmove form plays, as `genmove` would;
        // the analysis search, where there is one, only streams lines.
        let agent_chooses = request.genmove && self.agent.tree_search().is_none();
        let search = match self.search_mut() {
            Ok(search) if !crate::search::Agent::supports_size(search, size) => {
                Err(format!("the nets play {b}x{b} only", b = crate::nn::BOARD))
            }
            other => other,
        };
        let search = match search {
            Ok(search) => Some(search),
            Err(_) if agent_chooses => None,
            Err(message) => {
                out.write_all(format_answer(Some(id), &Err(message)).as_bytes())?;
                out.flush()?;
                return Ok(None);
            }
        };
        writeln!(out, "={id}")?;
        out.flush()?;
        let started = Instant::now();
        let mut stopped_by = None;
        let searched = match search {
            Some(search) => Some(stream_search(search, &position, budget, request, out, lines, &mut stopped_by)?),
            None => None,
        };
        let chosen = match searched {
            _ if agent_chooses => Some(self.agent.genmove(&position, budget)),
            Some(report) => Some(report.map(|r| r.best)),
            None => None,
        };
        if request.genmove {
            self.clock.charge(color, started.elapsed());
        }
        match chosen {
            Some(Ok(mv)) if request.genmove => {
                if self.verbose {
                    crate::say!("analysis {color}: {} in {:.2}s", mv.to_gtp(size), started.elapsed().as_secs_f64());
                }
                match self.commit(color, mv) {
                    Ok(()) => writeln!(out, "play {}", mv.to_gtp(size))?,
                    Err(message) => crate::say!("genmove_analyze: {message}"),
                }
            }
            Some(Ok(_)) | None => {}
            // The answer has begun with `=`: the failure can only be told on stderr.
            Some(Err(e)) => crate::say!("analysis stopped: {e:#}"),
        }
        // A search that ended on its own (a full tree, a finished game)
        // still answers until the next command, as GUIs expect.
        if !request.genmove && stopped_by.is_none() {
            stopped_by = Some(lines.recv().unwrap_or(Incoming::End));
        }
        out.write_all(b"\n")?;
        out.flush()?;
        // An empty line that stopped it gets no answer (`run` skips it).
        Ok(stopped_by)
    }
}

/// Runs `search` on `position`, streaming its analysis lines to `out`
/// as `request` asks; an open-ended analysis stops at the next line of
/// input, which goes to `stopped_by`. Returns the search's own result.
fn stream_search(
    search: &mut crate::search::Mcts,
    position: &Game,
    budget: Option<std::time::Duration>,
    request: &AnalysisRequest,
    out: &mut impl Write,
    lines: &Receiver<Incoming>,
    stopped_by: &mut Option<Incoming>,
) -> io::Result<anyhow::Result<crate::search::mcts::SearchReport>> {
    let size = position.size();
    let color = position.to_move();
    let ownership = request.ownership.then(|| ownership_for(position, color));
    let iterations = if request.genmove { Some(search.config().iterations) } else { None };
    let mut failed = None;
    let mut last_line = Instant::now();
    let mut observe = |mcts: &crate::search::Mcts| {
        if !request.genmove {
            match lines.try_recv() {
                Ok(incoming) => *stopped_by = Some(incoming),
                Err(TryRecvError::Disconnected) => *stopped_by = Some(Incoming::End),
                Err(TryRecvError::Empty) => {}
            }
            if stopped_by.is_some() {
                return ControlFlow::Break(());
            }
        }
        if request.interval.is_some_and(|i| last_line.elapsed() >= i) {
            last_line = Instant::now();
            let line = mcts.analysis().map(|a| info_line(&a, request, size, ownership.as_deref()));
            if let Some(line) = line.filter(|l| !l.is_empty()) {
                if let Err(e) = out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            }
        }
        ControlFlow::Continue(())
    };
    search.restrict(request.filters.clone());
    let report = search.search_observed(position, budget, iterations, &mut observe);
    let last_word = || -> io::Result<()> {
        if let Some(e) = failed {
            return Err(e);
        }
        // The last word of the search, whenever lines were asked for or it
        // ends a genmove.
        if request.interval.is_some() || request.genmove {
            let line = search.analysis().map(|a| info_line(&a, request, size, ownership.as_deref()));
            if let Some(line) = line.filter(|l| !l.is_empty()) {
                out.write_all(line.as_bytes())?;
            }
        }
        Ok(())
    };
    let written = last_word();
    // The next command searches every move again.
    search.restrict(Vec::new());
    written.map(|()| report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go::Move;
    use crate::search::MoveInfo;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn arguments_are_read_as_leela_zero_and_katago_take_them() {
        let r = AnalysisRequest::parse("lz-analyze", &args("b 50"), 19).unwrap().unwrap();
        assert_eq!(
            (r.color, r.interval, r.dialect),
            (Some(Color::Black), Some(Duration::from_millis(500)), Dialect::Leela)
        );
        let r = AnalysisRequest::parse("kata-analyze", &args("interval 20 ownership true minmoves 3"), 19)
            .unwrap()
            .unwrap();
        assert_eq!((r.color, r.interval, r.ownership, r.min_moves), (None, Some(Duration::from_millis(200)), true, 3));
        let r = AnalysisRequest::parse("genmove_analyze", &args("W 0"), 19).unwrap().unwrap();
        assert!(r.genmove && r.interval.is_none() && r.color == Some(Color::White));
        assert!(AnalysisRequest::parse("genmove", &[], 19).is_none());
        assert!(AnalysisRequest::parse("lz-analyze", &args("ownership true"), 19).unwrap().is_err());
        assert!(AnalysisRequest::parse("kata-analyze", &args("b 10 maxmoves"), 19).unwrap().is_err());
        assert!(AnalysisRequest::parse("kata-analyze", &args("minmoves x"), 19).unwrap().is_err());
        // A number out of range says what is in it (`-3: not a number`).
        let refusal = AnalysisRequest::parse("kata-analyze", &args("b 10 minmoves -3"), 19).unwrap().unwrap_err();
        assert_eq!(refusal, "minmoves -3: give a whole number, 0 or more");
    }

    /// Leela Zero's and KataGo's `avoid` and `allow` (Lizzie sends
    /// `avoid`), once refused as unknown options.
    #[test]
    fn avoid_and_allow_become_the_searchs_move_filters() {
        let parse = |name, text| AnalysisRequest::parse(name, &args(text), 19).unwrap();
        let r = parse("lz-analyze", "b 10 avoid b D4,q16,pass 1 avoid w C3 2 minmoves 3").unwrap();
        let d4 = Move::parse_gtp("D4", 19).unwrap();
        assert_eq!(r.filters.len(), 2);
        assert_eq!(r.filters[0].moves, vec![d4, Move::parse_gtp("Q16", 19).unwrap(), Move::Pass]);
        assert!(!r.filters[0].allow && r.filters[0].player == Color::Black && r.filters[0].until_depth == 1);
        assert_eq!((r.filters[1].player, r.filters[1].until_depth), (Color::White, 2));
        assert_eq!((r.interval, r.min_moves), (Some(Duration::from_millis(100)), 3));
        let r = parse("kata-analyze", "allow w D4 1 interval 50").unwrap();
        assert!(r.filters[0].allow && r.filters[0].moves == vec![d4] && r.interval.is_some());
        for bad in ["avoid b D4", "avoid x D4 1", "avoid b Z99 1", "avoid b D4 0", "allow b D4 1 allow b C3 1"] {
            assert!(parse("kata-analyze", bad).is_err(), "{bad}");
        }
        // A depth past the largest once gave no upper bound.
        let huge = parse("lz-analyze", "avoid b D4 4294967296").unwrap_err();
        assert!(huge.ends_with("from 1 to 4294967295"), "{huge}");
    }

    #[test]
    fn lines_follow_each_dialect() {
        let analysis = Analysis {
            to_move: Color::Black,
            visits: 101,
            winrate: Some(0.55),
            moves: vec![
                MoveInfo {
                    mv: Move::parse_gtp("D4", 19).unwrap(),
                    visits: 100,
                    winrate: Some(0.5625),
                    prior: 0.25,
                    pv: vec![Move::parse_gtp("D4", 19).unwrap(), Move::Pass],
                    pv_visits: vec![100, 37],
                },
                MoveInfo {
                    mv: Move::parse_gtp("Q16", 19).unwrap(),
                    visits: 0,
                    winrate: None,
                    prior: 0.125,
                    pv: vec![],
                    pv_visits: vec![],
                },
            ],
        };
        let mut r = AnalysisRequest::parse("lz-analyze", &args("10"), 19).unwrap().unwrap();
        let lcb = (0.5625 - 1.96 * (0.5625f32 * 0.4375 / 100.0).sqrt()) * 10000.0;
        assert_eq!(
            info_line(&analysis, &r, 19, None),
            format!("info move D4 visits 100 winrate 5625 prior 2500 lcb {} order 0 pv D4 pass\n", lcb.round())
        );
        r.min_moves = 2;
        assert!(info_line(&analysis, &r, 19, None)
            .contains("info move Q16 visits 0 winrate 5500 prior 1250 lcb 0 order 1 pv\n"));
        let mut k =
            AnalysisRequest::parse("kata-analyze", &args("10 rootInfo true ownership true"), 19).unwrap().unwrap();
        let owned = vec![1.0f32; 361];
        let line = info_line(&analysis, &k, 19, Some(&owned));
        assert!(line.starts_with("info move D4 visits 100 winrate 0.5625 prior 0.25 lcb 0.465"), "{line}");
        assert!(line.contains(" rootInfo visits 101 winrate 0.55 ownership 1 1 "), "{line}");
        assert_eq!(line.trim_end().split(' ').skip_while(|w| *w != "ownership").count(), 362);
        // KataGo's `pvVisits`: the visits of each move of the pv, after it.
        let v = AnalysisRequest::parse("kata-analyze", &args("10 pvVisits true"), 19).unwrap().unwrap();
        assert!(info_line(&analysis, &v, 19, None).contains(" order 0 pv D4 pass pvVisits 100 37\n"));
        assert!(AnalysisRequest::parse("lz-analyze", &args("10 pvVisits true"), 19).unwrap().is_err());
        // Outputs go-train has not are refused by name when asked for.
        let refused = AnalysisRequest::parse("kata-analyze", &args("10 movesOwnership true"), 19).unwrap();
        assert!(refused.unwrap_err().starts_with("movesOwnership true: "));
        assert!(AnalysisRequest::parse("kata-analyze", &args("10 ownershipStdev false"), 19).unwrap().is_ok());
        k.dialect = Dialect::Sabaki;
        let line = info_line(&analysis, &k, 19, Some(&owned));
        assert!(line.starts_with("info move D4 visits 100 winrate 0.562500 prior 0.250000"), "{line}");
        assert!(line.contains("ownership 1.000000 "), "{line}");
    }

    #[test]
    fn genmove_analyze_charges_the_engines_time_to_its_clock() {
        let agent = Box::new(crate::search::RandomAgent::new(5));
        let mut engine = Engine::new(agent, crate::go::Rules::CHINESE, 9);
        let input = std::io::Cursor::new(b"time_settings 10 0 0\nkata-genmove_analyze b\n".to_vec());
        let mut output = Vec::new();
        engine.run(input, &mut output).unwrap();
        assert!(String::from_utf8(output).unwrap().contains("\nplay "));
        let [(black, _), (white, _)] = engine.clock.left;
        assert!(black < 10.0 && white == 10.0, "black {black}, white {white}");
    }

    #[test]
    fn a_line_with_nothing_to_list_is_empty_not_a_newline() {
        // An empty line inside a streamed answer would end it for the client.
        let analysis = Analysis {
            to_move: Color::Black,
            visits: 7,
            winrate: Some(0.5),
            moves: vec![MoveInfo {
                mv: Move::parse_gtp("D4", 19).unwrap(),
                visits: 7,
                winrate: Some(0.5),
                prior: 1.0,
                pv: vec![Move::parse_gtp("D4", 19).unwrap()],
                pv_visits: vec![7],
            }],
        };
        let mut r = AnalysisRequest::parse("kata-analyze", &args("10 maxmoves 0"), 19).unwrap().unwrap();
        assert_eq!(info_line(&analysis, &r, 19, None), "");
        let nothing = Analysis { moves: vec![], ..analysis.clone() };
        r.max_moves = usize::MAX;
        assert_eq!(info_line(&nothing, &r, 19, None), "", "no move to list (a finished game)");
        r.root_info = true;
        assert_eq!(info_line(&nothing, &r, 19, None), "rootInfo visits 7 winrate 0.5\n");
    }
}
