//! KataGo's JSON analysis engine protocol (`docs/Analysis_Engine.md`), the
//! subset KaTrain and review scripts use, behind `go-train analysis`: one
//! JSON query per line on stdin, one JSON response per analysed turn on
//! stdout.
//!
//! Queries are read while others are searched, so several may be in
//! flight; they are searched one at a time, the highest `priority` first
//! and in the order they came among equals (a search under way is not
//! interrupted for a higher priority: `terminate` it). A `terminate`
//! action acts on the queries with that id queued or searched when it
//! comes, and on nothing after: it stops the search under way at once
//! (its response holds what it had) and answers their turns not yet
//! searched `noResults`, a query queued with every turn stopped at once;
//! `turnNumbers` limits it to those turns. `terminate_all` does the same to
//! every query.
//! Supported: `id`, `moves`, `initialStones`, `initialPlayer`, `rules` (a
//! name, or an object of `ko`, `scoring`, `tax`, `suicide`, `hasButton`,
//! `whiteHandicapBonus`, `friendlyPassOk` where go-train has the rule),
//! `komi`, `boardXSize`/`boardYSize` (square), `analyzeTurns`,
//! `maxVisits`, `includeOwnership`, `includePolicy`, `avoidMoves` and
//! `allowMoves` (`[{"player", "moves", "untilDepth"}]`),
//! `reportDuringSearchEvery` (seconds: partial responses with
//! `isDuringSearch` true), `priority`, `includeMovesOwnership`,
//! `includePVVisits`,
//! `overrideSettings.maxTime` and `.reportAnalysisWinratesAs` (`BLACK`,
//! the default, `WHITE` or `SIDETOMOVE`; other override settings are
//! ignored; any other field is warned of, as KataGo does); actions
//! `query_version`, `terminate` and `terminate_all`. `maxVisits` caps the
//! root's visits, a tree kept from the last query counted.
//! A query is one line of at most [`MAX_QUERY_BYTES`] bytes, with at most
//! [`MAX_QUERY_MOVES`] moves; a longer line is dropped as it is read and
//! answered with an error (under its id where the scan of its bytes finds
//! one), and the engine goes on. Queries waiting their turn are held as
//! their text; a query searched holds one game, replayed turn by turn.
//! Responses hold `moveInfos` (move, visits, winrate, prior, lcb, order,
//! pv), `rootInfo` (winrate, visits, currentPlayer, rawWinrate with a value
//! net), `ownership` (random-playout ownership: the nets have no ownership
//! head) and `policy`. `scoreLead` (in `moveInfos` and `rootInfo`) is the
//! expected area margin of those random playouts less komi: the nets
//! predict no score, and KaTrain reads a lead for every move.

use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{self, BufRead, Write};
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use super::input::{read_lines, Incoming};
use super::json_id::JsonId;
use crate::features::Symmetry;
use crate::go::{Color, Game, IllegalMove, KoRule, Move, Rules, Scoring};
use crate::search::nets::{raw_output, RawOutput};
use crate::search::ownership::judge_default;
use crate::search::{Agent, Mcts, MoveFilter, Ownership};

/// The longest query line read, newline left out. A query of the most
/// moves, written with spaces, takes under a fifth of it.
pub const MAX_QUERY_BYTES: usize = 1 << 20;

/// The most moves a query holds. A game rarely passes 1,000 moves (the
/// match referee stops 19x19 games at 1,083), but records of long runs of
/// passes exist; searching a position costs time in its history's length.
pub const MAX_QUERY_MOVES: usize = 10_000;

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

/// A query read and checked: what to search and report.
struct Analysis {
    id: String,
    /// Board side.
    size: usize,
    analyze: Vec<usize>,
    visits: Option<u32>,
    ownership: bool,
    /// Ownership after each candidate move (`includeMovesOwnership`).
    moves_ownership: bool,
    /// The visits of each move of a principal variation (`includePVVisits`).
    pv_visits: bool,
    policy: bool,
    perspective: Perspective,
    /// Most time per turn (`overrideSettings.maxTime`, seconds).
    max_time: Option<Duration>,
    /// Moves the search may not consider (`avoidMoves`, `allowMoves`).
    filters: Vec<MoveFilter>,
    /// How often to report during a search (`reportDuringSearchEvery`).
    report_every: Option<Duration>,
}

/// A query's game at the turns asked for: the start and the moves, and
/// one game walked through them, forward, or again from the start for an
/// earlier turn. (A game kept for every turn, each with the whole history
/// before it, grew with the square of the moves: 1.8 GB for 10,000.)
struct Replay {
    start: Game,
    moves: Vec<(Color, Move)>,
    game: Game,
    /// The turn `game` is at.
    turn: usize,
}

impl Replay {
    fn new(start: Game, moves: Vec<(Color, Move)>) -> Replay {
        Replay { game: start.clone(), start, moves, turn: 0 }
    }

    /// The game at `turn` (0: the start), or the move that could not be
    /// played on the way (its index) and why.
    fn at(&mut self, turn: usize) -> Result<&Game, (usize, IllegalMove)> {
        if turn < self.turn {
            self.game = self.start.clone();
            self.turn = 0;
        }
        while self.turn < turn {
            let (color, mv) = self.moves[self.turn];
            self.game.play(color, mv).map_err(|e| (self.turn, e))?;
            self.turn += 1;
        }
        Ok(&self.game)
    }
}

/// A query waiting its turn: its text (parsed again when searched, since
/// parsed JSON takes many times the room), its priority and id, and the
/// turns a `terminate` stopped while it waited.
struct Queued {
    text: String,
    priority: i64,
    id: Option<String>,
    stopped: BTreeSet<usize>,
}

/// The query being searched: its id, its turns, and those of them a
/// `terminate` stopped.
struct Searching {
    id: String,
    turns: BTreeSet<usize>,
    stopped: BTreeSet<usize>,
}

/// A `terminate` action: the id it names (every query's for
/// `terminate_all`), and the turns it stops (every one when `None`).
struct Terminate {
    target: Option<String>,
    turns: Option<BTreeSet<usize>>,
}

impl Terminate {
    /// The `terminateId` (none for `all`) and `turnNumbers` of a terminate
    /// action.
    fn read(query: &Value, all: bool) -> Result<Terminate, QueryError> {
        let target = match all {
            true => None,
            false => Some(
                query
                    .get("terminateId")
                    .and_then(Value::as_str)
                    .ok_or_else(|| refuse("terminateId", "terminate needs a terminateId"))?
                    .to_string(),
            ),
        };
        let turns = match query.get("turnNumbers") {
            None | Some(Value::Null) => None,
            Some(Value::Array(turns)) => Some(
                turns
                    .iter()
                    .map(|t| t.as_u64().map(|t| t as usize))
                    .collect::<Option<BTreeSet<usize>>>()
                    .ok_or_else(|| refuse("turnNumbers", "turn numbers are integers from 0"))?,
            ),
            Some(_) => return Err(refuse("turnNumbers", "a list of turn numbers")),
        };
        Ok(Terminate { target, turns })
    }

    /// Whether it names the query `id`.
    fn names(&self, id: Option<&str>) -> bool {
        self.target.as_deref().is_none_or(|target| id == Some(target))
    }

    /// Whether it stops turn `turn` of the query `id`.
    fn stops(&self, id: &str, turn: usize) -> bool {
        self.names(Some(id)) && self.turns.as_ref().is_none_or(|turns| turns.contains(&turn))
    }
}

/// The analysis engine over one search.
pub struct AnalysisEngine {
    search: Mcts,
    inbox: Inbox,
}

/// What has come in: filed apart from the search, so that lines are taken
/// (actions answered, queries queued) while it runs.
#[derive(Default)]
struct Inbox {
    /// Queries read but not yet searched.
    queue: VecDeque<Queued>,
    /// The query being searched, while one is.
    searching: Option<Searching>,
}

impl AnalysisEngine {
    pub fn new(search: Mcts) -> AnalysisEngine {
        AnalysisEngine { search, inbox: Inbox::default() }
    }

    /// Answers queries from `input` on `output` until the input ends (the
    /// queries already read are answered first).
    pub fn run(&mut self, input: impl BufRead + Send + 'static, mut output: impl Write) -> io::Result<()> {
        let lines = read_lines::<JsonId>(input, MAX_QUERY_BYTES);
        let mut input_open = true;
        loop {
            let query = match self.inbox.next_query() {
                Some(query) => query,
                None if !input_open => return Ok(()),
                None => {
                    match lines.recv() {
                        Ok(incoming) => input_open = self.inbox.take(incoming, &mut output)?,
                        Err(_) => input_open = false,
                    }
                    continue;
                }
            };
            // A bug met by one query must not end the engine and with it
            // every query queued behind this one.
            let answered = catch_unwind(AssertUnwindSafe(|| self.answer(&query, &mut output, &lines, &mut input_open)));
            // A terminate acts on what is searched or queued when it comes,
            // never on a query that comes later under the same id.
            self.inbox.searching = None;
            match answered {
                Ok(result) => result?,
                Err(_) => {
                    let id = serde_json::from_str::<Value>(&query.text).ok().and_then(|q| q.get("id").cloned());
                    let error = "internal error: the query was not answered";
                    respond(&mut output, json!({"id": id.unwrap_or(Value::Null), "error": error}))?;
                }
            }
        }
    }

    /// Searches and answers every turn a query asks for.
    fn answer(
        &mut self,
        queued: &Queued,
        out: &mut impl Write,
        lines: &Receiver<Incoming>,
        input_open: &mut bool,
    ) -> io::Result<()> {
        // Parsed when it came, so it parses again.
        let query: Value = serde_json::from_str(&queued.text).unwrap_or_default();
        let (analysis, mut replay) = match read_query(&query) {
            Ok(read) => read,
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
        drop(query);
        self.inbox.searching = Some(Searching {
            id: analysis.id.clone(),
            turns: analysis.analyze.iter().copied().collect(),
            stopped: queued.stopped.clone(),
        });
        if !self.search.supports_size(analysis.size) {
            let b = crate::nn::BOARD;
            return respond(
                out,
                json!({"id": analysis.id, "field": "boardXSize", "error": format!("the nets play {b}x{b} only")}),
            );
        }
        if analysis.policy && self.search.nets().0.is_none() {
            // Refused once, as a field of the query, not once per turn.
            let error = "includePolicy needs a policy net, and this engine has none (--policy NET)";
            return respond(out, json!({"id": analysis.id, "field": "includePolicy", "error": error}));
        }
        for &turn in &analysis.analyze {
            // Lines that came during the last search: a terminate for this
            // query must be seen before its next turn starts.
            while *input_open {
                match lines.try_recv() {
                    Ok(incoming) => *input_open = self.inbox.take(incoming, out)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => *input_open = false,
                }
            }
            if self.inbox.searching.as_ref().is_some_and(|s| s.stopped.contains(&turn)) {
                respond(out, no_results(&analysis.id, turn))?;
                continue;
            }
            let game = match replay.at(turn) {
                Ok(game) => game,
                Err((i, e)) => {
                    // read_query played every move: this cannot fail.
                    let message = format!("move {}: {e}", i + 1);
                    respond(out, json!({"id": analysis.id, "turnNumber": turn, "error": message}))?;
                    continue;
                }
            };
            self.search.restrict(analysis.filters.clone());
            // `maxVisits` caps the root's visits, those of a tree kept from
            // an earlier query included, as KataGo's does; a kept tree of
            // more is not reused (a query of 3 once answered 200).
            let visits = analysis.visits.unwrap_or(self.search.config().iterations).max(1);
            let visits = visits - self.search.root_visits_within(game, visits);
            let (policy_net, value_net) = self.search.nets();
            let raw = raw_output(game, policy_net.filter(|_| analysis.policy), value_net, Symmetry::IDENTITY);
            let mut facts = match raw {
                Ok(raw) => TurnFacts::new(game, raw),
                Err(e) => {
                    respond(out, json!({"id": analysis.id, "turnNumber": turn, "error": format!("{e:#}")}))?;
                    continue;
                }
            };
            // Lines that come during the search are taken at once: actions
            // answered (a terminate or a version asked for once waited for
            // the search to end), queries queued; a terminate of this turn
            // stops it.
            let inbox = &mut self.inbox;
            let mut last_report = Instant::now();
            let mut failed = None;
            let mut stop = |search: &Mcts| {
                if analysis.report_every.is_some_and(|every| last_report.elapsed() >= every) {
                    last_report = Instant::now();
                    if let Ok(partial) = response(search, &analysis, game, turn, true, &mut facts) {
                        if let Err(e) = respond(out, partial) {
                            failed = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                }
                while *input_open {
                    match lines.try_recv() {
                        Ok(incoming) => match inbox.take(incoming, out) {
                            Ok(open) => *input_open = open,
                            Err(e) => {
                                failed = Some(e);
                                return ControlFlow::Break(());
                            }
                        },
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => *input_open = false,
                    }
                }
                match inbox.searching.as_ref().is_some_and(|s| s.stopped.contains(&turn)) {
                    true => ControlFlow::Break(()),
                    false => ControlFlow::Continue(()),
                }
            };
            let searched = self.search.search_observed(game, analysis.max_time, Some(visits), &mut stop);
            if let Some(e) = failed {
                return Err(e);
            }
            let response = match searched {
                Ok(_) => response(&self.search, &analysis, game, turn, false, &mut facts),
                Err(e) => Err(format!("{e:#}")),
            };
            match response {
                Ok(value) => respond(out, value)?,
                Err(message) => respond(out, json!({"id": analysis.id, "turnNumber": turn, "error": message}))?,
            }
        }
        self.search.restrict(Vec::new());
        Ok(())
    }
}

impl Inbox {
    /// The queued query to search next: the highest `priority` (0 when
    /// not given), the first to come among equals.
    fn next_query(&mut self) -> Option<Queued> {
        let best = (0..self.queue.len()).rev().max_by_key(|&i| self.queue[i].priority)?;
        self.queue.remove(best)
    }

    /// Files an incoming line: actions are answered at once, queries
    /// queued. Returns whether the input is still open.
    fn take(&mut self, incoming: Incoming, out: &mut impl Write) -> io::Result<bool> {
        let bytes = match incoming {
            Incoming::Line(bytes) => bytes,
            Incoming::TooLong { bytes, id } => {
                let mut error = Map::new();
                if let Some(id) = id {
                    error.insert("id".into(), id.into());
                }
                let message = format!("a query of {bytes} bytes: the most is {MAX_QUERY_BYTES} bytes a line; not read");
                error.insert("error".into(), message.into());
                return respond(out, Value::Object(error)).map(|_| true);
            }
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
        // An action that is no string was once taken for a query.
        if query.get("action").is_some_and(|a| !a.is_string()) {
            return respond(out, json!({"id": id, "field": "action", "error": "action is a string"})).map(|_| true);
        }
        match query.get("action").and_then(Value::as_str) {
            None => {
                // As KataGo does: a misspelt field (`maxvisits`) was once
                // ignored without a word, and the query searched 800 visits.
                for field in
                    query.as_object().into_iter().flat_map(Map::keys).filter(|k| !QUERY_FIELDS.contains(&k.as_str()))
                {
                    let warning = "Unexpected or unused field, do you have a typo?";
                    respond(out, json!({"id": id, "field": field, "warning": warning}))?;
                }
                let priority = query.get("priority").and_then(Value::as_i64).unwrap_or(0);
                let id = query.get("id").and_then(Value::as_str).map(str::to_string);
                self.queue.push_back(Queued { text: text.trim().to_string(), priority, id, stopped: BTreeSet::new() });
            }
            Some("query_version") => respond(
                out,
                json!({
                    "id": id,
                    "action": "query_version",
                    "version": env!("CARGO_PKG_VERSION"),
                    "git_hash": env!("GO_TRAIN_COMMIT")
                }),
            )?,
            Some(action @ ("terminate" | "terminate_all")) => {
                match Terminate::read(&query, action == "terminate_all") {
                    Ok(terminate) => {
                        // Acknowledged as KataGo does, with the query echoed.
                        respond(out, query)?;
                        self.terminate(&terminate, out)?;
                    }
                    Err(e) => respond(out, json!({"id": id, "field": e.field, "error": e.message}))?,
                }
            }
            Some(other) => {
                respond(out, json!({"id": id, "field": "action", "error": format!("unknown action {other}")}))?
            }
        }
        Ok(true)
    }

    /// Carries out `terminate` on the query searched and those queued:
    /// marks the turns it stops, and answers `noResults` at once for each
    /// turn of a queued query it stops whole, which leaves the queue. A
    /// queued query that cannot be read keeps its place (it is answered
    /// with its error in its turn).
    fn terminate(&mut self, terminate: &Terminate, out: &mut impl Write) -> io::Result<()> {
        if let Some(searching) = self.searching.as_mut().filter(|s| terminate.names(Some(&s.id))) {
            let stopped = searching.turns.iter().filter(|&&turn| terminate.stops(&searching.id, turn));
            searching.stopped.extend(stopped);
        }
        let mut i = 0;
        while i < self.queue.len() {
            if !terminate.names(self.queue[i].id.as_deref()) {
                i += 1;
                continue;
            }
            let query: Value = serde_json::from_str(&self.queue[i].text).unwrap_or_default();
            let Ok((analysis, _)) = read_query(&query) else {
                i += 1;
                continue;
            };
            let queued = &mut self.queue[i];
            queued.stopped.extend(analysis.analyze.iter().filter(|&&turn| terminate.stops(&analysis.id, turn)));
            if !analysis.analyze.iter().all(|turn| queued.stopped.contains(turn)) {
                i += 1;
                continue;
            }
            self.queue.remove(i);
            for turn in analysis.analyze {
                respond(out, no_results(&analysis.id, turn))?;
            }
        }
        Ok(())
    }
}

/// The response for a turn a `terminate` stopped before its search began.
fn no_results(id: &str, turn: usize) -> Value {
    json!({"id": id, "isDuringSearch": false, "turnNumber": turn, "noResults": true})
}

/// What a turn's responses share however far its search has gone, worked
/// out once for the partial responses and the final one alike: the nets'
/// raw output for the position, and the random-playout estimates (the
/// nets predict no score or ownership) of it and of the position after
/// each candidate move.
struct TurnFacts {
    raw: RawOutput,
    root: Ownership,
    after: HashMap<Move, Ownership>,
}

impl TurnFacts {
    fn new(game: &Game, raw: RawOutput) -> TurnFacts {
        TurnFacts { raw, root: judge_default(game), after: HashMap::new() }
    }

    /// The estimate after `mv` in `game`, the turn's position.
    fn after(&mut self, game: &Game, mv: Move) -> Result<&Ownership, String> {
        match self.after.entry(mv) {
            Entry::Occupied(known) => Ok(known.into_mut()),
            Entry::Vacant(slot) => {
                let mut next = game.clone();
                next.play(game.to_move(), mv).map_err(|e| format!("{}: {e}", mv.to_gtp(game.size())))?;
                Ok(slot.insert(judge_default(&next)))
            }
        }
    }
}

/// The response for `turn` (`game`) from `search`, run on it: final, or
/// the search as it stands (`during`).
fn response(
    search: &Mcts,
    analysis: &Analysis,
    game: &Game,
    turn: usize,
    during: bool,
    facts: &mut TurnFacts,
) -> Result<Value, String> {
    let size = game.size();
    let to_move = game.to_move();
    let view = search.analysis().ok_or("no search ran")?;
    // Win rates arrive for the side to move; flip them for the other side.
    let flip = match analysis.perspective {
        Perspective::Black => to_move == Color::White,
        Perspective::White => to_move == Color::Black,
        Perspective::SideToMove => false,
    };
    let seen = |w: f32| if flip { 1.0 - w } else { w };
    // Ownership and score leads are for this side.
    let side = match analysis.perspective {
        Perspective::Black => Color::Black,
        Perspective::White => Color::White,
        Perspective::SideToMove => to_move,
    };
    // KaTrain needs a `scoreLead` for every move: the playouts' margin.
    let komi = game.rules().komi;
    let lead = |estimate: &Ownership| {
        let black = estimate.black_lead(komi);
        if side == Color::Black {
            black
        } else {
            -black
        }
    };
    let root_winrate = view.winrate.unwrap_or(0.5);
    let mut move_infos = Vec::new();
    for (order, m) in view.moves.iter().filter(|m| m.visits > 0).enumerate() {
        let winrate = m.winrate.unwrap_or(root_winrate);
        let lcb = if flip { m.opponent_lcb() } else { m.lcb() };
        let estimate = facts.after(game, m.mv)?;
        let mut info = json!({
            "move": m.mv.to_gtp(size), "visits": m.visits, "winrate": seen(winrate), "scoreLead": lead(estimate),
            "prior": m.prior, "lcb": lcb, "order": order, "pv": m.pv.iter().map(|p| p.to_gtp(size)).collect::<Vec<_>>(),
        });
        if analysis.moves_ownership {
            info["ownership"] = json!(estimate.balance(side));
        }
        if analysis.pv_visits {
            info["pvVisits"] = json!(m.pv_visits);
        }
        move_infos.push(info);
    }
    let player = |c: Color| if c == Color::Black { "B" } else { "W" };
    let (raw, estimate) = (&facts.raw, &facts.root);
    let mut root = json!({
        "winrate": seen(root_winrate), "scoreLead": lead(estimate), "visits": view.visits,
        "currentPlayer": player(to_move),
    });
    if let Some(raw_value) = raw.value {
        root["rawWinrate"] = json!(seen(raw_value));
    }
    let mut response = json!({
        "id": analysis.id, "isDuringSearch": during, "turnNumber": turn,
        "moveInfos": move_infos, "rootInfo": root,
    });
    if analysis.ownership {
        response["ownership"] = json!(estimate.balance(side));
    }
    if analysis.policy {
        let policy = raw.policy.as_ref().ok_or("includePolicy needs a policy net")?;
        response["policy"] = json!(policy.iter().map(|p| p.unwrap_or(-1.0)).collect::<Vec<f32>>());
    }
    Ok(response)
}

fn respond(out: &mut impl Write, value: Value) -> io::Result<()> {
    writeln!(out, "{value}")?;
    out.flush()
}

/// The fields of a query [`read_query`] reads; any other is answered with
/// a warning, and the query searched without it.
const QUERY_FIELDS: [&str; 19] = [
    "id",
    "moves",
    "initialStones",
    "initialPlayer",
    "rules",
    "komi",
    "boardXSize",
    "boardYSize",
    "analyzeTurns",
    "maxVisits",
    "includeOwnership",
    "includeMovesOwnership",
    "includePVVisits",
    "includePolicy",
    "avoidMoves",
    "allowMoves",
    "reportDuringSearchEvery",
    "priority",
    "overrideSettings",
];

/// Reads and checks a query, replaying its game to the end.
fn read_query(query: &Value) -> Result<(Analysis, Replay), QueryError> {
    let id = match query.get("id") {
        Some(Value::String(id)) => id.clone(),
        _ => return Err(refuse("id", "a query needs an id string")),
    };
    let size_field = |name: &'static str| -> Result<usize, QueryError> {
        let given = query.get(name).ok_or_else(|| refuse(name, format!("{name} is required")))?;
        given
            .as_u64()
            .and_then(|size| usize::try_from(size).ok())
            .filter(|&size| crate::go::Board::valid_size(size))
            .ok_or_else(|| refuse(name, format!("{name} {given}: boards are 2 to 25 points a side, a whole number")))
    };
    let size = size_field("boardXSize")?;
    if size_field("boardYSize")? != size {
        return Err(refuse("boardYSize", "only square boards"));
    }
    let mut rules = match query.get("rules") {
        Some(Value::String(name)) => {
            let base = name.trim_end_matches("-kgs").trim_end_matches("-ogs");
            Rules::by_name(base).ok_or_else(|| refuse("rules", format!("unknown rules {name}")))?
        }
        Some(Value::Object(fields)) => rules_from_fields(fields)?,
        Some(_) => return Err(refuse("rules", "give the rules by name (chinese, japanese, ...) or as an object")),
        None => return Err(refuse("rules", "rules are required")),
    };
    rules.komi = match query.get("komi") {
        None => {
            if rules.scoring == Scoring::Area {
                7.5
            } else {
                6.5
            }
        }
        // The range GTP's `komi` and the flags take (it was ±400 here).
        Some(k) => match k
            .as_f64()
            .ok_or_else(|| crate::bounds::KOMI.refusal())
            .and_then(|x| crate::bounds::KOMI.real_value(x))
        {
            Ok(x) => x as f32,
            Err(e) => return Err(refuse("komi", format!("komi {k}: {e}"))),
        },
    };
    // More stones than points must name some twice.
    let stones = colored_moves(query, "initialStones", size, size * size)?;
    let moves = colored_moves(query, "moves", size, MAX_QUERY_MOVES)?;
    let mut game = Game::new(size, rules);
    let setup: Vec<_> = stones
        .iter()
        .map(|&(c, m)| match m {
            Move::Play(v) => Ok((v, Some(c))),
            _ => Err(refuse("initialStones", "initial stones are points")),
        })
        .collect::<Result<_, _>>()?;
    // KataGo refuses stones it cannot place as a position: two on one
    // point (the later one once won silently), a string without a liberty
    // (refused by the setup itself).
    let mut seen = std::collections::HashSet::new();
    if let Some(&(v, _)) = setup.iter().find(|(v, _)| !seen.insert(*v)) {
        return Err(refuse("initialStones", format!("{} holds two stones", Move::Play(v).to_gtp(size))));
    }
    if !setup.is_empty() {
        game.setup(&setup).map_err(|e| {
            let why = match e {
                IllegalMove::NoLiberty(v) => {
                    format!("the string of {} has no liberty: no game reaches it", v.to_gtp(size))
                }
                e => e.to_string(),
            };
            refuse("initialStones", why)
        })?;
    }
    let first = match query.get("initialPlayer") {
        Some(Value::String(p)) => {
            Color::parse(p).ok_or_else(|| refuse("initialPlayer", format!("{p}: give B or W")))?
        }
        Some(other) => return Err(refuse("initialPlayer", format!("{other}: give B or W"))),
        None => moves.first().map_or(Color::Black, |m| m.0),
    };
    game.set_to_move(first);
    let mut replay = Replay::new(game, moves);
    let last = replay.moves.len();
    if let Err((i, e)) = replay.at(last) {
        let mv = replay.moves[i].1;
        return Err(refuse("moves", format!("move {} ({}): {e}", i + 1, mv.to_gtp(size))));
    }
    let moves = &replay.moves;
    let analyze = match query.get("analyzeTurns") {
        None => vec![moves.len()],
        // An empty list would be answered by nothing, and a client waiting
        // for one answer a query would wait for ever.
        Some(Value::Array(turns)) if turns.is_empty() => {
            return Err(refuse("analyzeTurns", "an empty list: leave analyzeTurns out to analyse the last turn"))
        }
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
                .ok_or_else(|| refuse("maxVisits", "maxVisits is a whole number, 1 or more"))?
                .min(u32::MAX as u64) as u32,
        ),
    };
    if query.get("overrideSettings").is_some_and(|o| !o.is_object()) {
        return Err(refuse("overrideSettings", "an object of settings"));
    }
    let perspective = match query.pointer("/overrideSettings/reportAnalysisWinratesAs").and_then(Value::as_str) {
        None | Some("BLACK") => Perspective::Black,
        Some("WHITE") => Perspective::White,
        Some("SIDETOMOVE") => Perspective::SideToMove,
        Some(other) => {
            return Err(refuse(
                "overrideSettings",
                format!("reportAnalysisWinratesAs {other}: give BLACK, WHITE or SIDETOMOVE"),
            ))
        }
    };
    // Seconds at `pointer`, if given, within the bounds of every duration
    // setting (a millisecond at least: reports every nanosecond would
    // flood the output).
    let seconds = |pointer: &str, field: &'static str, name: &str| -> Result<Option<Duration>, QueryError> {
        query
            .pointer(pointer)
            .map(|v| {
                v.as_f64()
                    .and_then(|s| crate::bounds::SECONDS.real_value(s).ok())
                    .map(|s| Duration::from_secs_f64(s.max(0.001)))
                    .ok_or_else(|| refuse(field, format!("{name} is seconds: {}", crate::bounds::SECONDS.refusal())))
            })
            .transpose()
    };
    let max_time = seconds("/overrideSettings/maxTime", "overrideSettings", "maxTime")?;
    let report_every = seconds("/reportDuringSearchEvery", "reportDuringSearchEvery", "reportDuringSearchEvery")?;
    if query.get("priority").is_some_and(|p| !p.is_i64()) {
        return Err(refuse("priority", "an integer"));
    }
    let mut filters = move_filters(query, "avoidMoves", size)?;
    filters.extend(move_filters(query, "allowMoves", size)?);
    crate::search::restrict::check(&filters).map_err(|why| refuse("allowMoves", why))?;
    let analysis = Analysis {
        id,
        size,
        analyze,
        visits,
        ownership: flag("includeOwnership")?,
        moves_ownership: flag("includeMovesOwnership")?,
        pv_visits: flag("includePVVisits")?,
        policy: flag("includePolicy")?,
        perspective,
        max_time,
        filters,
        report_every,
    };
    Ok((analysis, replay))
}

/// Rules given as KataGo's object: each field maps onto go-train's rules
/// or must say what go-train's rules already do; the rest are refused by
/// name rather than ignored.
fn rules_from_fields(fields: &Map<String, Value>) -> Result<Rules, QueryError> {
    let text = |name: &str| fields.get(name).map(|v| v.as_str().map(str::to_ascii_uppercase));
    let mut rules = Rules::CHINESE;
    match text("ko") {
        None => {}
        Some(Some(ko)) => {
            rules.ko = match ko.as_str() {
                "SIMPLE" => KoRule::Simple,
                "POSITIONAL" => KoRule::PositionalSuperko,
                "SITUATIONAL" => KoRule::SituationalSuperko,
                _ => return Err(refuse("rules", format!("ko {ko}: SIMPLE, POSITIONAL or SITUATIONAL"))),
            }
        }
        Some(None) => return Err(refuse("rules", "ko is a string")),
    }
    match text("scoring") {
        None => {}
        Some(Some(s)) if s == "AREA" => rules.scoring = Scoring::Area,
        Some(Some(s)) if s == "TERRITORY" => rules.scoring = Scoring::Territory,
        Some(_) => return Err(refuse("rules", "scoring is AREA or TERRITORY")),
    }
    match fields.get("suicide") {
        None => {}
        Some(Value::Bool(b)) => rules.allow_suicide = *b,
        Some(_) => return Err(refuse("rules", "suicide is true or false")),
    }
    // Territory scoring here does not count points in seki, as KataGo's
    // tax SEKI; area scoring counts them, as tax NONE.
    let tax = if rules.scoring == Scoring::Area { "NONE" } else { "SEKI" };
    let unsupported = [
        (
            text("tax").is_some_and(|t| t.as_deref() != Some(tax)),
            format!("tax: with this scoring go-train counts as tax {tax}"),
        ),
        (fields.get("hasButton").is_some_and(|b| b != &Value::Bool(false)), "hasButton: go-train has no button".into()),
        (
            text("whiteHandicapBonus").is_some_and(|b| b.as_deref() != Some("0")),
            "whiteHandicapBonus: go-train gives White no handicap bonus (\"0\")".into(),
        ),
        (fields.get("friendlyPassOk").is_some_and(|b| !b.is_boolean()), "friendlyPassOk is true or false".into()),
    ];
    if let Some((_, what)) = unsupported.into_iter().find(|(bad, _)| *bad) {
        return Err(refuse("rules", what));
    }
    if let Some(unknown) = fields.keys().find(|k| {
        !["ko", "scoring", "tax", "suicide", "hasButton", "whiteHandicapBonus", "friendlyPassOk"].contains(&k.as_str())
    }) {
        return Err(refuse("rules", format!("unknown rule {unknown}")));
    }
    Ok(rules)
}

/// `avoidMoves` or `allowMoves`: `[{"player": "B", "moves": ["C3", ...],
/// "untilDepth": 1}, ...]`.
fn move_filters(query: &Value, field: &'static str, size: usize) -> Result<Vec<MoveFilter>, QueryError> {
    let Some(list) = query.get(field) else { return Ok(Vec::new()) };
    let bad = |what: String| refuse(field, what);
    let list = list.as_array().ok_or_else(|| bad(format!("{field} is a list of {{player, moves, untilDepth}}")))?;
    list.iter()
        .enumerate()
        .map(|(i, entry)| {
            let entry_bad = |what: &str| bad(format!("entry {}: {what}", i + 1));
            let player = entry
                .get("player")
                .and_then(Value::as_str)
                .and_then(Color::parse)
                .ok_or_else(|| entry_bad("player is B or W"))?;
            let moves = entry
                .get("moves")
                .and_then(Value::as_array)
                .ok_or_else(|| entry_bad("moves is a list of locations"))?
                .iter()
                .map(|m| {
                    m.as_str()
                        .and_then(|m| Move::parse_board_move(m, size))
                        .ok_or_else(|| entry_bad(&format!("{m} is not a location")))
                })
                .collect::<Result<Vec<Move>, QueryError>>()?;
            let until_depth = entry
                .get("untilDepth")
                .and_then(Value::as_u64)
                .filter(|&d| d >= 1)
                .ok_or_else(|| entry_bad("untilDepth is a whole number, 1 or more"))?
                .min(u32::MAX as u64) as u32;
            Ok(MoveFilter { player, moves, allow: field == "allowMoves", until_depth })
        })
        .collect()
}

/// A list of `[player, location]` pairs (`moves`, `initialStones`), of
/// `most` pairs at most.
fn colored_moves(
    query: &Value,
    field: &'static str,
    size: usize,
    most: usize,
) -> Result<Vec<(Color, Move)>, QueryError> {
    let Some(list) = query.get(field) else {
        return if field == "moves" {
            Err(refuse(field, "moves are required (an empty list for none)"))
        } else {
            Ok(vec![])
        };
    };
    let list = list.as_array().ok_or_else(|| refuse(field, "a list of [player, location] pairs"))?;
    if list.len() > most {
        return Err(refuse(field, format!("{} entries: a query holds at most {most}", list.len())));
    }
    list.iter()
        .enumerate()
        .map(|(i, pair)| {
            let bad = || refuse(field, format!("entry {}: {pair} is not [\"B\"|\"W\", location]", i + 1));
            let [player, location] = pair.as_array().map(Vec::as_slice).ok_or_else(bad)? else { return Err(bad()) };
            let color = player.as_str().and_then(Color::parse).ok_or_else(bad)?;
            let mv = location.as_str().and_then(|l| Move::parse_board_move(l, size));
            Ok((color, mv.ok_or_else(bad)?))
        })
        .collect()
}
