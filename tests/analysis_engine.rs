//! `go-train analysis` against the query and response formats of KataGo's
//! `docs/Analysis_Engine.md`, with the shipped nets: its own example query,
//! the version and terminate actions, perspectives, and errors that name
//! the field while the engine goes on.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc::channel;
use std::time::Duration;

use serde_json::Value;

/// The example query of KataGo's documentation (with few visits, and the
/// policy and ownership asked for).
const EXAMPLE: &str = r#"{"id":"foo","initialStones":[["B","Q4"],["B","C4"]],"moves":[["W","P5"],["B","P6"]],"rules":"tromp-taylor","komi":7.5,"boardXSize":19,"boardYSize":19,"analyzeTurns":[0,1,2],"maxVisits":40,"includePolicy":true,"includeOwnership":true}"#;

/// `go-train analysis` with the shipped nets, its input and output piped.
fn start() -> std::process::Child {
    common::piped(&["analysis"]).stderr(Stdio::null()).spawn().expect("start go-train analysis")
}

/// Sends `queries` (a pause of `pause_ms` before each one after the first)
/// and reads `expected` responses.
fn exchange(queries: &[&str], pause_ms: u64, expected: usize) -> Vec<Value> {
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let (send, receive) = channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    for (i, q) in queries.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(Duration::from_millis(pause_ms));
        }
        writeln!(stdin, "{q}").unwrap();
        stdin.flush().unwrap();
    }
    let responses: Vec<Value> = (0..expected)
        .map(|_| {
            let line = receive.recv_timeout(Duration::from_secs(120)).expect("a response within two minutes");
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("one JSON object per line: {e}: {line}"))
        })
        .collect();
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "ends when its input does");
    assert!(receive.recv_timeout(Duration::from_secs(5)).is_err(), "nothing more than expected");
    responses
}

#[test]
fn the_documented_example_gets_one_response_per_turn() {
    let responses = exchange(&[EXAMPLE, r#"{"id":"v","action":"query_version"}"#], 0, 4);
    let version = responses.iter().find(|r| r["id"] == "v").unwrap();
    assert_eq!(version["action"], "query_version");
    assert!(version["version"].is_string());
    if let Some(commit) = common::checkout_commit() {
        assert_eq!(version["git_hash"], commit.as_str(), "the commit built from, as KataGo names its own");
    }
    let turns: Vec<&Value> = responses.iter().filter(|r| r["id"] == "foo").collect();
    assert_eq!(turns.iter().map(|r| r["turnNumber"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    // Stones on the board in each turn (A19 first, row-major): no policy there.
    let index = |v: &str| {
        let (col, row) = v.split_at(1);
        let x = "ABCDEFGHJKLMNOPQRST".find(col).unwrap();
        (19 - row.parse::<usize>().unwrap()) * 19 + x
    };
    let occupied = [vec!["Q4", "C4"], vec!["Q4", "C4", "P5"], vec!["Q4", "C4", "P5", "P6"]];
    let players = ["W", "B", "W"];
    for (turn, response) in turns.iter().enumerate() {
        assert_eq!(response["isDuringSearch"], false);
        assert_eq!(response["rootInfo"]["currentPlayer"], players[turn]);
        let infos = response["moveInfos"].as_array().unwrap();
        assert!(!infos.is_empty());
        let visits: u64 = infos.iter().map(|m| m["visits"].as_u64().unwrap()).sum();
        assert!((30..=40).contains(&visits), "the visits go to the moves: {visits}");
        for (order, m) in infos.iter().enumerate() {
            assert_eq!(m["order"], order as u64);
            let w = m["winrate"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&w) && m["prior"].as_f64().unwrap() > 0.0);
            assert_eq!(m["pv"][0], m["move"], "a pv starts with its move");
            assert!(!occupied[turn].contains(&m["move"].as_str().unwrap()));
        }
        let policy = response["policy"].as_array().unwrap();
        assert_eq!(policy.len(), 362);
        let illegal: Vec<usize> = (0..362).filter(|&i| policy[i] == -1.0).collect();
        let mut stones: Vec<usize> = occupied[turn].iter().map(|v| index(v)).collect();
        stones.sort();
        assert_eq!(illegal, stones, "turn {turn}: -1 exactly on the stones");
        let sum: f64 = policy.iter().map(|p| p.as_f64().unwrap()).filter(|&p| p >= 0.0).sum();
        assert!((sum - 1.0).abs() < 0.01);
        let ownership = response["ownership"].as_array().unwrap();
        assert_eq!(ownership.len(), 361);
        // Black's stones lean Black's way (reported from Black's side;
        // random playouts capture a lone stone now and then).
        assert!(ownership[index("Q4")].as_f64().unwrap() > 0.2, "{}", ownership[index("Q4")]);
        assert!(ownership.iter().all(|x| (-1.0..=1.0).contains(&x.as_f64().unwrap())));
    }
}

#[test]
fn win_rates_follow_the_perspective_asked_for() {
    let query = |id: &str, perspective: &str| {
        format!(
            r#"{{"id":"{id}","moves":[["B","Q16"]],"rules":"chinese","komi":7.5,"boardXSize":19,"boardYSize":19,"maxVisits":8,"overrideSettings":{{"reportAnalysisWinratesAs":"{perspective}"}}}}"#
        )
    };
    let (black, side) = (query("black", "BLACK"), query("side", "SIDETOMOVE"));
    let responses = exchange(&[&black, &side], 0, 2);
    let raw = |id: &str| responses.iter().find(|r| r["id"] == id).unwrap()["rootInfo"]["rawWinrate"].as_f64().unwrap();
    // White is to move: Black's view is the other side of White's.
    assert!((raw("black") - (1.0 - raw("side"))).abs() < 1e-5, "{} {}", raw("black"), raw("side"));
}

#[test]
fn terminate_stops_a_search_and_bad_queries_name_their_field() {
    let long = r#"{"id":"long","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"analyzeTurns":[0,0],"maxVisits":1000000}"#;
    let queries = [
        long,
        r#"{"id":"t","action":"terminate","terminateId":"long"}"#,
        r#"{"id":"bad","moves":[["B","Q16"],["W","Q16"]],"rules":"chinese","boardXSize":19,"boardYSize":19}"#,
        r#"{"id":"nine","moves":[],"rules":"chinese","boardXSize":9,"boardYSize":9}"#,
        r#"{"id":"rules","moves":[],"rules":"ing","boardXSize":19,"boardYSize":19}"#,
        "not json",
        // Each once ended the engine with a panic (seconds too many for a
        // Duration) or was answered "boardXSize is required".
        r#"{"id":"forever","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"overrideSettings":{"maxTime":1e30}}"#,
        r#"{"id":"never","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"reportDuringSearchEvery":1e300}"#,
        r#"{"id":"half","moves":[],"rules":"chinese","boardXSize":9.5,"boardYSize":9.5}"#,
        r#"{"id":"komi","moves":[],"rules":"chinese","komi":1500,"boardXSize":19,"boardYSize":19}"#,
        // Stones no position holds, once searched as given.
        r#"{"id":"twice","initialStones":[["B","D4"],["W","D4"]],"moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19}"#,
        r#"{"id":"dead","initialStones":[["B","A1"],["W","A2"],["W","B1"]],"moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19}"#,
        // Once answered by nothing: a client waiting for an answer waited.
        r#"{"id":"none","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"analyzeTurns":[]}"#,
        // Each once searched as if the field were not there.
        r#"{"id":"who","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"initialPlayer":5}"#,
        r#"{"id":"junk","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"overrideSettings":"junk"}"#,
        r#"{"id":"act","action":5}"#,
        r#"{"id":"purple","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"overrideSettings":{"reportAnalysisWinratesAs":"PURPLE"}}"#,
        r#"{"id":"huge","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":99999999999999999999}"#,
        // A misspelt field, once ignored without a word: warned of, as
        // KataGo does, and the query searched.
        r#"{"id":"after","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":4,"maxvisits":9}"#,
    ];
    let responses = exchange(&queries, 1500, 21);
    let by_id = |id: &str| responses.iter().filter(|r| r["id"] == id).collect::<Vec<_>>();
    assert_eq!(by_id("t")[0]["terminateId"], "long");
    let long = by_id("long");
    assert_eq!(long.len(), 2, "one response per turn: {long:?}");
    let searched = long[0]["moveInfos"].as_array().expect("the stopped search reports what it had");
    assert!(searched.iter().map(|m| m["visits"].as_u64().unwrap()).sum::<u64>() < 1_000_000);
    assert_eq!(long[1]["noResults"], true, "the turn not searched");
    assert_eq!(by_id("bad")[0]["field"], "moves");
    assert!(by_id("bad")[0]["error"].as_str().unwrap().contains("move 2 (Q16)"));
    assert_eq!(by_id("nine")[0]["field"], "boardXSize");
    assert_eq!(by_id("rules")[0]["error"], "unknown rules ing");
    assert!(responses.iter().any(|r| r["id"].is_null() && r["error"].as_str().unwrap().contains("JSON")));
    assert_eq!(by_id("forever")[0]["field"], "overrideSettings");
    assert_eq!(by_id("forever")[0]["error"], "maxTime is seconds: give a number above 0, up to 1000000");
    assert_eq!(by_id("never")[0]["field"], "reportDuringSearchEvery");
    assert_eq!(by_id("half")[0]["error"], "boardXSize 9.5: boards are 2 to 25 points a side, a whole number");
    // In the range GTP's komi takes, and worded as it is.
    assert_eq!(by_id("komi")[0]["error"], "komi 1500: give a number from -1000 to 1000");
    assert_eq!(by_id("twice")[0]["error"], "D4 holds two stones");
    assert_eq!(by_id("dead")[0]["error"], "the string of A1 has no liberty: no game reaches it");
    assert_eq!(by_id("dead")[0]["field"], "initialStones");
    assert_eq!(by_id("none")[0]["field"], "analyzeTurns");
    assert_eq!(by_id("who")[0]["error"], "5: give B or W");
    assert_eq!(by_id("junk")[0]["field"], "overrideSettings");
    assert_eq!(by_id("act")[0]["error"], "action is a string");
    // What is allowed, not only what was given (once `reportAnalysisWinratesAs
    // PURPLE`, and `a positive integer` of a positive one too large).
    assert_eq!(by_id("purple")[0]["error"], "reportAnalysisWinratesAs PURPLE: give BLACK, WHITE or SIDETOMOVE");
    assert_eq!(by_id("huge")[0]["error"], "maxVisits is a whole number, 1 or more");
    let after = by_id("after");
    assert_eq!((&after[0]["field"], &after[0]["warning"].is_string()), (&Value::from("maxvisits"), &true), "{after:?}");
    assert_eq!(after[1]["turnNumber"], 0, "the engine goes on after errors");
}

/// A live `go-train analysis`, fed a line at a time, its responses read
/// on a thread.
struct Live {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    responses: std::sync::mpsc::Receiver<Value>,
}

impl Live {
    fn start() -> Live {
        let mut child = start();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, responses) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let value =
                    serde_json::from_str(&line).unwrap_or_else(|e| panic!("one JSON object per line: {e}: {line}"));
                if send.send(value).is_err() {
                    return;
                }
            }
        });
        Live { child, stdin, responses }
    }

    fn send(&mut self, query: &str) {
        writeln!(self.stdin, "{query}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next `n` responses.
    fn next(&self, n: usize) -> Vec<Value> {
        (0..n)
            .map(|_| self.responses.recv_timeout(Duration::from_secs(120)).expect("a response within two minutes"))
            .collect()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn terminate_acts_on_what_is_queued_or_searched_when_it_comes_and_nothing_after() {
    let mut engine = Live::start();
    let query = |id: &str, extra: &str| {
        format!(
            r#"{{"id":"{id}","moves":[["B","Q16"],["W","D4"]],"rules":"chinese","komi":7.5,"boardXSize":19,"boardYSize":19,"maxVisits":8{extra}}}"#
        )
    };
    let searched = |r: &Value| r["isDuringSearch"] == false && r["moveInfos"].as_array().is_some_and(|m| !m.is_empty());
    // A terminate for a query not yet sent stops nothing.
    engine.send(r#"{"id":"t1","action":"terminate","terminateId":"early"}"#);
    let ack = engine.next(1);
    assert_eq!((&ack[0]["id"], &ack[0]["terminateId"]), (&"t1".into(), &"early".into()), "{ack:?}");
    engine.send(&query("early", ""));
    let early = engine.next(1);
    assert!(searched(&early[0]), "{early:?}");
    // Nor does one for a query already answered, when its id comes again.
    engine.send(&query("a", ""));
    assert!(searched(&engine.next(1)[0]));
    engine.send(r#"{"id":"t2","action":"terminate","terminateId":"a"}"#);
    assert_eq!(engine.next(1)[0]["id"], "t2");
    engine.send(&query("a", ""));
    let again = engine.next(1);
    assert!(searched(&again[0]), "a fresh query under a terminated id is searched: {again:?}");

    // Queued behind a long search: `turnNumbers` stops those turns only; a
    // query stopped whole is answered at once.
    let long = r#"{"id":"long","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":1000000}"#;
    engine.send(long);
    engine.send(&query("some", r#","analyzeTurns":[0,1,2]"#));
    engine.send(&query("all", r#","analyzeTurns":[1,2]"#));
    engine.send(r#"{"id":"t3","action":"terminate","terminateId":"some","turnNumbers":[1]}"#);
    engine.send(r#"{"id":"t4","action":"terminate","terminateId":"all"}"#);
    engine.send(r#"{"id":"t5","action":"terminate","terminateId":"long"}"#);
    let responses = engine.next(3 + 1 + 3 + 2);
    let of = |id: &str| responses.iter().filter(|r| r["id"] == id).collect::<Vec<_>>();
    assert_eq!(of("t3")[0]["turnNumbers"], serde_json::json!([1]), "the terminate is echoed");
    assert_eq!(of("t4").len() + of("t5").len(), 2);
    assert_eq!(of("long").len(), 1, "{responses:?}");
    let some = of("some");
    assert_eq!(some.iter().map(|r| r["turnNumber"].as_u64().unwrap()).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(searched(some[0]) && searched(some[2]), "{some:?}");
    assert_eq!(some[1]["noResults"], true, "{some:?}");
    let all = of("all");
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all.iter().all(|r| r["noResults"] == true && r["isDuringSearch"] == false), "{all:?}");
    let bad = r#"{"id":"t6","action":"terminate","terminateId":"x","turnNumbers":"1"}"#;
    engine.send(bad);
    assert_eq!(engine.next(1)[0]["field"], "turnNumbers");

    // `terminate_all` (KataGo's; once an unknown action) stops the search
    // and every query queued, whatever its id.
    engine.send(long);
    engine.send(&query("x", r#","analyzeTurns":[0,1]"#));
    engine.send(&query("y", ""));
    engine.send(r#"{"id":"t7","action":"terminate_all"}"#);
    let responses = engine.next(1 + 1 + 2 + 1);
    let of = |id: &str| responses.iter().filter(|r| r["id"] == id).collect::<Vec<_>>();
    assert_eq!(of("t7")[0]["action"], "terminate_all", "{responses:?}");
    assert_eq!(of("long").len(), 1, "{responses:?}");
    let stopped = [of("x"), of("y")].concat();
    assert!(stopped.len() == 3 && stopped.iter().all(|r| r["noResults"] == true), "{responses:?}");
    engine.send(&query("after", ""));
    assert!(searched(&engine.next(1)[0]), "a query after it is searched");
}

/// Actions that come during a long search are answered during it, a
/// queued query they stop too (they once waited for the search to end).
#[test]
fn actions_are_answered_while_a_search_runs() {
    let mut engine = Live::start();
    let long = r#"{"id":"long","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":1000000}"#;
    engine.send(long);
    engine.send(r#"{"id":"queued","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":3}"#);
    engine.send(r#"{"id":"t","action":"terminate","terminateId":"queued"}"#);
    engine.send(r#"{"id":"v","action":"query_version"}"#);
    let during = engine.next(3);
    let ids: Vec<&str> = during.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["t", "queued", "v"], "{during:?}");
    assert_eq!(during[1]["noResults"], true);
    engine.send(r#"{"id":"t2","action":"terminate","terminateId":"long"}"#);
    let end = engine.next(2);
    assert_eq!((&end[0]["id"], &end[1]["id"]), (&"t2".into(), &"long".into()), "{end:?}");
    assert_eq!(end[1]["isDuringSearch"], false);
}

/// A query on the position after Black's Q16, with `extra` fields.
fn after_q16(id: &str, extra: &str) -> String {
    format!(
        r#"{{"id":"{id}","moves":[["B","Q16"]],"rules":"chinese","komi":7.5,"boardXSize":19,"boardYSize":19,"maxVisits":12{extra}}}"#
    )
}

fn moves_of(response: &Value) -> Vec<String> {
    response["moveInfos"].as_array().unwrap().iter().map(|m| m["move"].as_str().unwrap().to_string()).collect()
}

#[test]
fn avoided_moves_are_not_searched_and_allowed_ones_only_are() {
    let free = exchange(&[&after_q16("free", "")], 0, 1);
    let best = moves_of(&free[0]);
    assert!(!best.is_empty());
    let list = best.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(",");
    let avoid = after_q16("avoid", &format!(r#","avoidMoves":[{{"player":"W","moves":[{list}],"untilDepth":1}}]"#));
    let allow = after_q16("allow", r#","allowMoves":[{"player":"W","moves":["K10"],"untilDepth":1}]"#);
    // Black's moves are not White's: a rule for Black changes nothing here.
    let other = after_q16("other", &format!(r#","avoidMoves":[{{"player":"B","moves":[{list}],"untilDepth":1}}]"#));
    let responses = exchange(&[&avoid, &allow, &other], 0, 3);
    let by_id = |id: &str| responses.iter().find(|r| r["id"] == id).unwrap();
    let avoided = moves_of(by_id("avoid"));
    assert!(!avoided.is_empty() && avoided.iter().all(|m| !best.contains(m)), "{avoided:?} avoids {best:?}");
    assert_eq!(moves_of(by_id("allow")), ["K10"]);
    assert_eq!(moves_of(by_id("other")), best);
    let refused =
        exchange(&[&after_q16("bad", r#","avoidMoves":[{"player":"W","moves":["Z99"],"untilDepth":1}]"#)], 0, 1);
    assert_eq!(refused[0]["field"], "avoidMoves", "{}", refused[0]);
}

#[test]
fn allowed_moves_that_leave_nothing_are_refused_or_answered_by_a_pass() {
    let queries = [
        // Each was once searched as nothing and answered by no candidate.
        after_q16(
            "twice",
            r#","allowMoves":[{"player":"W","moves":["D16"],"untilDepth":1},{"player":"W","moves":["C3"],"untilDepth":1}]"#,
        ),
        after_q16("none", r#","allowMoves":[{"player":"W","moves":[],"untilDepth":1}]"#),
        after_q16("taken", r#","allowMoves":[{"player":"W","moves":["Q16"],"untilDepth":1}]"#),
    ];
    let responses = exchange(&queries.iter().map(String::as_str).collect::<Vec<_>>(), 0, 3);
    let by_id = |id: &str| responses.iter().find(|r| r["id"] == id).unwrap();
    assert_eq!(by_id("twice")["field"], "allowMoves");
    assert_eq!(by_id("twice")["error"], "more than one allow for white");
    assert_eq!(by_id("none")["error"], "an allow of no moves leaves nothing to search");
    assert_eq!(moves_of(by_id("taken")), ["pass"], "{}", by_id("taken"));
}

#[test]
fn a_long_search_reports_during_it_and_max_visits_caps_the_root() {
    let during =
        after_q16("during", r#","reportDuringSearchEvery":0.05"#).replace(r#""maxVisits":12"#, r#""maxVisits":300"#);
    let capped = after_q16("capped", "");
    // The same position again: the kept tree already has its 12 visits
    // (then `during` adds 288 to them).
    let again = after_q16("again", "");
    // Then fewer than the kept tree's 300: a fresh search of 3 (the kept
    // tree's 300 were once answered).
    let fewer = after_q16("fewer", "").replace(r#""maxVisits":12"#, r#""maxVisits":3"#);
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    for q in [&capped, &again, &during, &fewer] {
        writeln!(stdin, "{q}").unwrap();
    }
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let lines: Vec<Value> =
        String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let of = |id: &str| lines.iter().filter(|r| r["id"] == id).collect::<Vec<_>>();
    let during = of("during");
    let (last, partial) = during.split_last().unwrap();
    assert_eq!(last["isDuringSearch"], false, "the final response comes last");
    assert!(!partial.is_empty(), "a search of 300 visits reports every 0.05 s");
    let visits = |r: &Value| r["rootInfo"]["visits"].as_u64().unwrap();
    for r in partial {
        assert_eq!(r["isDuringSearch"], true);
        assert!(visits(r) <= visits(last));
    }
    assert_eq!(visits(last), 300);
    assert_eq!(visits(of("fewer")[0]), 3, "maxVisits caps a query after a larger one");
    for id in ["capped", "again"] {
        let r = of(id);
        assert_eq!(r.len(), 1, "no partial responses unless asked");
        assert_eq!(visits(r[0]), 12, "{id}: maxVisits caps the root's visits, kept ones counted");
        let lead = r[0]["rootInfo"]["scoreLead"].as_f64().unwrap();
        assert!(lead.abs() <= 361.0 + 7.5);
        assert!(r[0]["moveInfos"].as_array().unwrap().iter().all(|m| m["scoreLead"].is_f64()));
    }
}

#[test]
fn rules_as_an_object_and_priorities() {
    let object = |id: &str, rules: &str, priority: i64| {
        format!(
            r#"{{"id":"{id}","moves":[],"rules":{rules},"boardXSize":19,"boardYSize":19,"maxVisits":4,"priority":{priority}}}"#
        )
    };
    // The first searches long enough for the others to queue behind it.
    let first = object("first", r#"{"ko":"SIMPLE","scoring":"TERRITORY","tax":"SEKI","suicide":false}"#, 0)
        .replace(r#""maxVisits":4"#, r#""maxVisits":100"#);
    let low = object("low", r#""japanese""#, -5);
    let button = object("button", r#"{"scoring":"AREA","hasButton":true}"#, 0);
    let high = object("high", r#"{"ko":"POSITIONAL","scoring":"AREA","tax":"NONE","whiteHandicapBonus":"0"}"#, 9);
    let responses = exchange(&[&first, &low, &button, &high], 0, 4);
    let ids: Vec<&str> = responses.iter().map(|r| r["id"].as_str().unwrap()).collect();
    // The first is searched at once; the rest wait, the highest priority first.
    assert_eq!(ids, ["first", "high", "button", "low"], "{responses:?}");
    assert!(responses[0]["moveInfos"].is_array() && responses[1]["moveInfos"].is_array());
    assert_eq!(responses[2]["field"], "rules");
    assert!(responses[2]["error"].as_str().unwrap().contains("hasButton"), "{}", responses[2]);
}

#[test]
fn the_root_policy_is_the_shipped_residual_net_unless_named() {
    let answers = |root: &[&str]| {
        let out = common::piped(&["analysis"])
            .args(root)
            .spawn()
            .and_then(|mut child| {
                writeln!(child.stdin.take().unwrap(), "{EXAMPLE}")?;
                child.wait_with_output()
            })
            .expect("run go-train analysis");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let responses = out.stdout.split(|b| *b == b'\n').filter_map(|l| serde_json::from_slice::<Value>(l).ok());
        (out.status.success(), responses.collect::<Vec<Value>>(), stderr)
    };
    let policy = |root: &[&str]| {
        let (ok, responses, stderr) = answers(root);
        let first = responses.into_iter().find(|r| r["turnNumber"] == 0);
        (ok, first.map(|r| r["policy"].clone()), stderr)
    };
    // Without a policy net the query is refused once, by its field (each
    // of its turns once answered the same error).
    let (ok, responses, _) = answers(&["--policy", "none", "--root-policy", "none", "--iterations", "8"]);
    assert!(ok && responses.len() == 1 && responses[0]["field"] == "includePolicy", "{responses:?}");
    let (ok, shipped, _) = policy(&[]);
    let (own_ok, own, _) = policy(&["--root-policy", "none"]);
    assert!(ok && own_ok && shipped.is_some() && own.is_some());
    assert_ne!(shipped, own, "includePolicy shows the net that chose the root's children");
    let (named_ok, named, _) = policy(&["--root-policy", "nets/resnet-policy.safetensors"]);
    assert!(named_ok && named == shipped);
    let (missing_ok, _, stderr) = policy(&["--root-policy", "no/such/net.safetensors"]);
    assert!(!missing_ok && stderr.contains("no/such/net.safetensors"), "{stderr}");
}

/// `go-train analysis` on `queries`, sent at once; returns the first
/// `expected` responses and the engine's peak resident memory (VmHWM,
/// bytes), read from /proc while it still runs.
fn exchange_measured(queries: &[&str], expected: usize) -> (Vec<Value>, u64) {
    let mut child = start();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    for q in queries {
        writeln!(stdin, "{q}").unwrap();
    }
    stdin.flush().unwrap();
    let responses = (0..expected)
        .map(|_| {
            let mut line = String::new();
            stdout.read_line(&mut line).unwrap();
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("one JSON object per line: {e}: {line}"))
        })
        .collect();
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).expect("VmHWM in /proc/PID/status");
    let peak_kb: u64 = peak.trim().trim_end_matches("kB").trim().parse().unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success(), "ends when its input does");
    (responses, peak_kb * 1024)
}

/// A query of `passes` passes, alternating from Black, analysed at its end.
fn passes(id: &str, passes: usize) -> String {
    let moves: Vec<String> = (0..passes).map(|i| format!(r#"["{}","pass"]"#, ["B", "W"][i % 2])).collect();
    format!(
        r#"{{"id":"{id}","moves":[{}],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":4}}"#,
        moves.join(",")
    )
}

#[test]
fn an_oversized_query_is_refused_by_its_limit_and_the_next_is_answered() {
    // Over the line limit (1 MiB), with its id last, as KaTrain writes
    // its queries: the engine finds the id without holding the line.
    let padding = "x".repeat(3 << 20);
    let huge = format!(
        r#"{{"moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":4,"note":"{padding}","id":"huge"}}"#
    );
    let after = r#"{"id":"after","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":4}"#;
    let (responses, peak) = exchange_measured(&[&huge, after], 2);
    assert_eq!(responses[0]["id"], "huge", "{}", responses[0]);
    let error = responses[0]["error"].as_str().unwrap();
    assert!(error.contains("1048576 bytes"), "the error names the limit: {error}");
    assert_eq!(responses[1]["id"], "after");
    assert_eq!(responses[1]["turnNumber"], 0, "the engine goes on: {}", responses[1]);
    // The line was dropped as it was read, never held whole.
    assert!(peak < 150 << 20, "peak resident memory {} MiB", peak >> 20);
}

#[test]
fn a_query_of_many_passes_stays_within_a_memory_bound_and_more_moves_are_refused() {
    // 10,000 moves are the most a query holds: once cost 1.6 GB (a game
    // kept per turn, each with the whole history before it).
    let (responses, peak) = exchange_measured(&[&passes("most", 10_000), &passes("over", 10_001)], 2);
    let by_id = |id: &str| responses.iter().find(|r| r["id"] == id).unwrap();
    assert_eq!(by_id("most")["turnNumber"], 10_000, "{}", by_id("most"));
    assert!(by_id("most")["rootInfo"].is_object());
    assert_eq!(by_id("over")["field"], "moves");
    let error = by_id("over")["error"].as_str().unwrap();
    assert!(error.contains("10001") && error.contains("10000"), "the error names the limit: {error}");
    assert!(peak < 150 << 20, "peak resident memory {} MiB", peak >> 20);
}
