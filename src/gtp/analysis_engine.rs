//! KataGo's JSON analysis engine protocol (`docs/Analysis_Engine.md`), the
//! subset KaTrain and review scripts use, behind `go-train analysis`: one
//! JSON query per line on stdin, one JSON response per analysed turn on
//! stdout.
//!
//! Queries are read while others are searched, so several may be in
//! flight; they are answered in the order they came (one search at a
//! time). A `terminate` action stops the named query's search at once and
//! drops its turns not yet searched (each answered `noResults`).
//! Supported: `id`, `moves`, `initialStones`, `initialPlayer`, `rules` (a
//! name), `komi`, `boardXSize`/`boardYSize` (square), `analyzeTurns`,
//! `maxVisits`, `includeOwnership`, `includePolicy`,
//! `overrideSettings.reportAnalysisWinratesAs` (`BLACK`, the default,
//! `WHITE` or `SIDETOMOVE`); actions `query_version` and `terminate`.
//! Responses hold `moveInfos` (move, visits, winrate, prior, lcb, order,
//! pv), `rootInfo` (winrate, visits, currentPlayer, rawWinrate with a value
//! net), `ownership` (random-playout ownership: the nets have no ownership
//! head) and `policy`. No score fields: the nets predict no score.

use std::collections::{HashSet, VecDeque};
use std::io::{self, BufRead, Write};
use std::ops::ControlFlow;
use std::sync::mpsc::{Receiver, TryRecvError};

use serde_json::{json, Map, Value};

use super::analyze::ownership_for;
use super::input::{read_lines, Incoming};
use crate::features::Symmetry;
use crate::go::{Color, Game, Move, Rules, Scoring};
use crate::search::nets::raw_output;
use crate::search::{Agent, Mcts};

/// A query refused: the message, and the field at fault when one is.
#[derive(Debug)]
struct QueryError {
    field: Option<&'static str>,
    message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> QueryError {
    QueryError { field: Some(field), message: message.into() }
}

/// Whose side the win rates and ownership are reported from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Perspective {
    Black,
    White,
    SideToMove,
}

/// A query read and checked: the game, and what to report.
struct Analysis {
    id: String,
    /// The game after each turn: `turns[t]` is turn `t` (0: the start).
    turns: Vec<Game>,
    analyze: Vec<usize>,
    visits: Option<u32>,
    ownership: bool,
    policy: bool,
    perspective: Perspective,
}

/// The analysis engine over one search.
pub struct AnalysisEngine {
    search: Mcts,
    /// Queries read but not yet searched.
    queue: VecDeque<Value>,
    /// Ids whose queries a `terminate` stopped.
    terminated: HashSet<String>,
}

impl AnalysisEngine {
    pub fn new(search: Mcts) -> AnalysisEngine {
        AnalysisEngine { search, queue: VecDeque::new(), terminated: HashSet::new() }
    }

    /// Answers queries from `input` on `output` until the input ends (the
    /// queries already read are answered first).
    pub fn run(&mut self, input: impl BufRead + Send + 'static, mut output: impl Write) -> io::Result<()> {
        let lines = read_lines(input);
        let mut input_open = true;
        loop {
            let query = match self.queue.pop_front() {
                Some(query) => query,
                None if !input_open => return Ok(()),
                None => {
                    match lines.recv() {
                        Ok(incoming) => input_open = self.take(incoming, &mut output)?,
                        Err(_) => input_open = false,
                    }
                    continue;
                }
            };
            self.answer(&query, &mut output, &lines, &mut input_open)?;
        }
    }

    /// Files an incoming line: actions are answered at once, queries
    /// queued. Returns whether the input is still open.
    fn take(&mut self, incoming: Incoming, out: &mut impl Write) -> io::Result<bool> {
        let bytes = match incoming {
            Incoming::Line(bytes) => bytes,
            Incoming::End => return Ok(false),
            Incoming::Failed(e) => return Err(e),
        };
        let text = String::from_utf8_lossy(&bytes);
        if text.trim().is_empty() {
            return Ok(true);
        }
        let query: Value = match serde_json::from_str(text.trim()) {
            Ok(Value::Object(map)) => Value::Object(map),
            Ok(_) => return respond(out, json!({"error": "a query is a JSON object"})).map(|_| true),
            Err(e) => {
                return respond(out, json!({"error": format!("could not parse the query as JSON: {e}")})).map(|_| true)
            }
        };
        let id = query.get("id").cloned().unwrap_or(Value::Null);
        match query.get("action").and_then(Value::as_str) {
            None => self.queue.push_back(query),
            Some("query_version") => respond(
                out,
                json!({"id": id, "action": "query_version", "version": env!("CARGO_PKG_VERSION"), "git_hash": ""}),
            )?,
            Some("terminate") => match query.get("terminateId").and_then(Value::as_str) {
                Some(target) => {
                    self.terminated.insert(target.to_string());
                    respond(out, json!({"id": id, "action": "terminate", "terminateId": target}))?;
                }
                None => {
                    respond(out, json!({"id": id, "field": "terminateId", "error": "terminate needs a terminateId"}))?
                }
            },
            Some(other) => {
                respond(out, json!({"id": id, "field": "action", "error": format!("unknown action {other}")}))?
            }
        }
        Ok(true)
    }

    /// Searches and answers every turn a query asks for.
    fn answer(
        &mut self,
        query: &Value,
        out: &mut impl Write,
        lines: &Receiver<Incoming>,
        input_open: &mut bool,
    ) -> io::Result<()> {
        let analysis = match read_query(query) {
            Ok(analysis) => analysis,
            Err(e) => {
                let mut error = Map::new();
                error.insert("id".into(), query.get("id").cloned().unwrap_or(Value::Null));
                if let Some(field) = e.field {
                    error.insert("field".into(), field.into());
                }
                error.insert("error".into(), e.message.into());
                return respond(out, Value::Object(error));
            }
        };
        if !self.search.supports_size(analysis.turns[0].size()) {
            let b = crate::nn::BOARD;
            return respond(
                out,
                json!({"id": analysis.id, "field": "boardXSize", "error": format!("the nets play {b}x{b} only")}),
            );
        }
        for &turn in &analysis.analyze {
            // Lines that came during the last search: a terminate for this
            // query must be seen before its next turn starts.
            while *input_open {
                match lines.try_recv() {
                    Ok(incoming) => *input_open = self.take(incoming, out)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => *input_open = false,
                }
            }
            if self.terminated.contains(&analysis.id) {
                respond(
                    out,
                    json!({"id": analysis.id, "isDuringSearch": false, "turnNumber": turn, "noResults": true}),
                )?;
                continue;
            }
            let game = &analysis.turns[turn];
            let visits = analysis.visits.unwrap_or(self.search.config().iterations).max(1);
            // A terminate arriving mid-search stops it; other lines wait.
            let mut pending = Vec::new();
            let mut stop = |_: &Mcts| {
                while let Ok(incoming) = lines.try_recv() {
                    let terminates = matches!(&incoming, Incoming::Line(l)
                        if serde_json::from_slice::<Value>(l).ok().is_some_and(|q|
                            q.get("action").and_then(Value::as_str) == Some("terminate")
                                && q.get("terminateId").and_then(Value::as_str) == Some(analysis.id.as_str())));
                    pending.push(incoming);
                    if terminates {
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            };
            let searched = self.search.search_observed(game, None, Some(visits), &mut stop);
            for incoming in pending {
                *input_open = self.take(incoming, out)? && *input_open;
            }
            let response = match searched {
                Ok(_) => self.response(&analysis, turn),
                Err(e) => Err(format!("{e:#}")),
            };
            match response {
                Ok(value) => respond(out, value)?,
                Err(message) => respond(out, json!({"id": analysis.id, "turnNumber": turn, "error": message}))?,
            }
        }
        self.terminated.remove(&analysis.id);
        Ok(())
    }

    /// The response for `turn` from the search just run on it.
    fn response(&self, analysis: &Analysis, turn: usize) -> Result<Value, String> {
        let game = &analysis.turns[turn];
        let size = game.size();
        let to_move = game.to_move();
        let view = self.search.analysis().ok_or("no search ran")?;
        // Win rates arrive for the side to move; flip them for the other side.
        let flip = match analysis.perspective {
            Perspective::Black => to_move == Color::White,
            Perspective::White => to_move == Color::Black,
            Perspective::SideToMove => false,
        };
        let seen = |w: f32| if flip { 1.0 - w } else { w };
        let root_winrate = view.winrate.unwrap_or(0.5);
        let move_infos: Vec<Value> = view
            .moves
            .iter()
            .filter(|m| m.visits > 0)
            .enumerate()
            .map(|(order, m)| {
                let winrate = m.winrate.unwrap_or(root_winrate);
                // The bound below the side to move's win rate is, seen from
                // the other side, the bound above.
                let lcb = if flip { 1.0 - (2.0 * winrate - m.lcb()) } else { m.lcb() };
                json!({
                    "move": m.mv.to_gtp(size), "visits": m.visits, "winrate": seen(winrate), "prior": m.prior,
                    "lcb": lcb, "order": order, "pv": m.pv.iter().map(|p| p.to_gtp(size)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let (policy_net, value_net) = self.search.nets();
        let raw = raw_output(game, policy_net.filter(|_| analysis.policy), value_net, Symmetry::IDENTITY)
            .map_err(|e| format!("{e:#}"))?;
        let player = |c: Color| if c == Color::Black { "B" } else { "W" };
        let mut root = json!({"winrate": seen(root_winrate), "visits": view.visits, "currentPlayer": player(to_move)});
        if let Some(raw_value) = raw.value {
            root["rawWinrate"] = json!(seen(raw_value));
        }
        let mut response = json!({
            "id": analysis.id, "isDuringSearch": false, "turnNumber": turn,
            "moveInfos": move_infos, "rootInfo": root,
        });
        if analysis.ownership {
            let side = match analysis.perspective {
                Perspective::Black => Color::Black,
                Perspective::White => Color::White,
                Perspective::SideToMove => to_move,
            };
            response["ownership"] = json!(ownership_for(game, side));
        }
        if analysis.policy {
            let policy = raw.policy.ok_or("includePolicy needs a policy net")?;
            response["policy"] = json!(policy.iter().map(|p| p.unwrap_or(-1.0)).collect::<Vec<f32>>());
        }
        Ok(response)
    }
}

fn respond(out: &mut impl Write, value: Value) -> io::Result<()> {
    writeln!(out, "{value}")?;
    out.flush()
}

/// Reads and checks a query, replaying its game turn by turn.
fn read_query(query: &Value) -> Result<Analysis, QueryError> {
    let id = match query.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err(refuse("id", "a query needs an id string")),
    };
    let size_field = |name: &'static str| -> Result<usize, QueryError> {
        let size =
            query.get(name).and_then(Value::as_u64).ok_or_else(|| refuse(name, format!("{name} is required")))?;
        if !crate::go::Board::valid_size(size as usize) {
            return Err(refuse(name, format!("{name} {size}: boards are 2 to 25 points a side")));
        }
        Ok(size as usize)
    };
    let size = size_field("boardXSize")?;
    if size_field("boardYSize")? != size {
        return Err(refuse("boardYSize", "only square boards"));
    }
    let rules_name = match query.get("rules") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err(refuse("rules", "give the rules by name (chinese, japanese, tromp-taylor, ...)")),
        None => return Err(refuse("rules", "rules are required")),
    };
    let base = rules_name.trim_end_matches("-kgs").trim_end_matches("-ogs");
    let mut rules = Rules::by_name(base).ok_or_else(|| refuse("rules", format!("unknown rules {rules_name}")))?;
    rules.komi = match query.get("komi") {
        None => {
            if rules.scoring == Scoring::Area {
                7.5
            } else {
                6.5
            }
        }
        Some(k) => match k.as_f64() {
            Some(k) if (-400.0..=400.0).contains(&k) => k as f32,
            _ => return Err(refuse("komi", "komi is a number from -400 to 400")),
        },
    };
    let stones = colored_moves(query, "initialStones", size)?;
    let moves = colored_moves(query, "moves", size)?;
    let mut game = Game::new(size, rules);
    let setup: Vec<_> = stones
        .iter()
        .map(|&(c, m)| match m {
            Move::Play(v) => Ok((v, Some(c))),
            _ => Err(refuse("initialStones", "initial stones are points")),
        })
        .collect::<Result<_, _>>()?;
    if !setup.is_empty() {
        game.setup(&setup).map_err(|e| refuse("initialStones", e.to_string()))?;
    }
    let first = match query.get("initialPlayer").and_then(Value::as_str) {
        Some(p) => Color::parse(p).ok_or_else(|| refuse("initialPlayer", format!("{p}: give B or W")))?,
        None => moves.first().map_or(Color::Black, |m| m.0),
    };
    game.set_to_move(first);
    let mut turns = vec![game.clone()];
    for (i, &(color, mv)) in moves.iter().enumerate() {
        game.play(color, mv).map_err(|e| refuse("moves", format!("move {} ({}): {e}", i + 1, mv.to_gtp(size))))?;
        turns.push(game.clone());
    }
    let analyze = match query.get("analyzeTurns") {
        None => vec![moves.len()],
        Some(Value::Array(turns)) => turns
            .iter()
            .map(|t| t.as_u64().map(|t| t as usize).filter(|&t| t <= moves.len()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| refuse("analyzeTurns", format!("turns are integers from 0 to {}", moves.len())))?,
        Some(_) => return Err(refuse("analyzeTurns", "a list of turn numbers")),
    };
    let flag = |name: &'static str| -> Result<bool, QueryError> {
        match query.get(name) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| refuse(name, format!("{name} is true or false"))),
        }
    };
    let visits = match query.get("maxVisits") {
        None => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|&v| v >= 1)
                .ok_or_else(|| refuse("maxVisits", "a positive integer"))?
                .min(u32::MAX as u64) as u32,
        ),
    };
    let perspective = match query.pointer("/overrideSettings/reportAnalysisWinratesAs").and_then(Value::as_str) {
        None | Some("BLACK") => Perspective::Black,
        Some("WHITE") => Perspective::White,
        Some("SIDETOMOVE") => Perspective::SideToMove,
        Some(other) => return Err(refuse("overrideSettings", format!("reportAnalysisWinratesAs {other}"))),
    };
    Ok(Analysis {
        id,
        turns,
        analyze,
        visits,
        ownership: flag("includeOwnership")?,
        policy: flag("includePolicy")?,
        perspective,
    })
}

/// A list of `[player, location]` pairs (`moves`, `initialStones`).
fn colored_moves(query: &Value, field: &'static str, size: usize) -> Result<Vec<(Color, Move)>, QueryError> {
    let Some(list) = query.get(field) else {
        return if field == "moves" {
            Err(refuse(field, "moves are required (an empty list for none)"))
        } else {
            Ok(vec![])
        };
    };
    let list = list.as_array().ok_or_else(|| refuse(field, "a list of [player, location] pairs"))?;
    list.iter()
        .enumerate()
        .map(|(i, pair)| {
            let bad = || refuse(field, format!("entry {}: {pair} is not [\"B\"|\"W\", location]", i + 1));
            let [player, location] = pair.as_array().map(Vec::as_slice).ok_or_else(bad)? else { return Err(bad()) };
            let color = player.as_str().and_then(Color::parse).ok_or_else(bad)?;
            let mv = location.as_str().and_then(|l| Move::parse_gtp(l, size)).filter(|m| *m != Move::Resign);
            Ok((color, mv.ok_or_else(bad)?))
        })
        .collect()
}
