//! Which settings of two records differ: what a refused resume or a note
//! names (a training run's `config.toml` or `rl.json` against the flags
//! given, a dataset's manifest against `prepare`'s options, a match's
//! `match.json` against this match), rather than printing both records.

use serde::Serialize;
use serde_json::Value;

/// Each setting that differs between `before` and `now`, as JSON, by its
/// dotted key (`optimizer.lr`), in key order: `(key, before, now)`, `None`
/// where a record leaves the setting out or has it null (its default).
/// Records that are not objects as JSON compare whole, under the key `""`.
pub fn differences<T: Serialize>(before: &T, now: &T) -> Vec<(String, Option<Value>, Option<Value>)> {
    let (before, now) = (flatten(before), flatten(now));
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(now.keys()).collect();
    keys.into_iter()
        .filter(|key| before.get(*key) != now.get(*key))
        .map(|key| (key.clone(), before.get(key).cloned(), now.get(key).cloned()))
        .collect()
}

/// A setting's value as a message shows it, `none` where it is left out.
pub fn shown(value: &Option<Value>, none: &str) -> String {
    value.as_ref().map_or(none.to_string(), Value::to_string)
}

fn flatten<T: Serialize>(record: &T) -> std::collections::BTreeMap<String, Value> {
    fn walk(prefix: &str, value: Value, into: &mut std::collections::BTreeMap<String, Value>) {
        match value {
            Value::Object(fields) => {
                for (key, v) in fields {
                    walk(&if prefix.is_empty() { key } else { format!("{prefix}.{key}") }, v, into);
                }
            }
            Value::Null => {}
            other => {
                into.insert(prefix.to_string(), other);
            }
        }
    }
    let mut all = std::collections::BTreeMap::new();
    walk("", serde_json::to_value(record).unwrap_or(Value::Null), &mut all);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Run {
        seed: u64,
        init: Option<String>,
        optimizer: Optimizer,
    }

    #[derive(Serialize)]
    struct Optimizer {
        lr: f64,
        kind: &'static str,
    }

    #[test]
    fn nested_settings_are_named_by_their_dotted_keys_and_nulls_are_left_out() {
        let before = Run { seed: 1, init: None, optimizer: Optimizer { lr: 0.01, kind: "sgd" } };
        let now = Run { seed: 1, init: Some("a".into()), optimizer: Optimizer { lr: 0.02, kind: "sgd" } };
        let found = differences(&before, &now);
        let keys: Vec<&str> = found.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(keys, ["init", "optimizer.lr"]);
        assert_eq!(shown(&found[0].1, "default"), "default");
        assert_eq!(shown(&found[0].2, "default"), "\"a\"");
        assert_eq!(shown(&found[1].2, "none"), "0.02");
        assert!(differences(&before, &before).is_empty());
    }
}
