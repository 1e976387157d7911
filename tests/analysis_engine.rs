//! `go-train analysis` against the query and response formats of KataGo's
//! `docs/Analysis_Engine.md`, with the shipped nets: its own example query,
//! the version and terminate actions, perspectives, and errors that name
//! the field while the engine goes on.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::Duration;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_go-train");

/// The example query of KataGo's documentation (with few visits, and the
/// policy and ownership asked for).
const EXAMPLE: &str = r#"{"id":"foo","initialStones":[["B","Q4"],["B","C4"]],"moves":[["W","P5"],["B","P6"]],"rules":"tromp-taylor","komi":7.5,"boardXSize":19,"boardYSize":19,"analyzeTurns":[0,1,2],"maxVisits":40,"includePolicy":true,"includeOwnership":true}"#;

/// Sends `queries` (a pause of `pause_ms` before each one after the first)
/// and reads `expected` responses.
fn exchange(queries: &[&str], pause_ms: u64, expected: usize) -> Vec<Value> {
    let mut child = Command::new(BIN)
        .arg("analysis")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start go-train analysis");
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
        r#"{"id":"after","moves":[],"rules":"chinese","boardXSize":19,"boardYSize":19,"maxVisits":4}"#,
    ];
    let responses = exchange(&queries, 1500, 8);
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
    assert_eq!(by_id("after")[0]["turnNumber"], 0, "the engine goes on after errors");
}
