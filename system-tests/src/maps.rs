//! What the map-channel tests share (maps.rs, maps_hostile.rs): a session with one map
//! channel `m`, a trigger counting into it, and its counters read back as lttng-tools'
//! map tests read them (`export-maps` loaded into sqlite3, queried through `vmap`).

use std::io::Write;
use std::process::{Command, Stdio};

use crate::TestDaemon;

/// `export-maps -s session | sqlite3` with `query` appended: the rows, fields joined by `|`.
///
/// # Panics
/// When sqlite3 is missing, fails or writes to stderr (the script is in the message).
pub fn sql(d: &TestDaemon, session: &str, query: &str) -> Vec<String> {
    let script = d.ust_ok(&["export-maps", "-s", session]);
    let mut c =
        Command::new("sqlite3").arg(":memory:").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("sqlite3 is installed");
    let mut input = c.stdin.take().unwrap();
    input.write_all(script.as_bytes()).unwrap();
    input.write_all(query.as_bytes()).unwrap();
    input.write_all(b"\n").unwrap();
    drop(input);
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success() && o.stderr.is_empty(), "sqlite3: {}\n{script}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(str::to_string).collect()
}

/// `key|total` of every key of `session`, in key order.
pub fn values(d: &TestDaemon, session: &str) -> Vec<String> {
    sql(d, session, "SELECT key, SUM(value) FROM vmap GROUP BY key ORDER BY key;")
}

/// A session `name` with a map channel `m` (`add-map-channel` options `opts`), not
/// started.
///
/// # Panics
/// When a command fails or `add-map-channel` does not say the channel was added.
pub fn session(d: &TestDaemon, name: &str, opts: &[&str]) {
    let out = d.output(name);
    d.ust_ok(&["create", name, "--output", out.to_str().unwrap()]);
    let mut a = vec!["add-map-channel", "-s", name, "--type=user"];
    a.extend_from_slice(opts);
    a.push("m");
    let o = d.ust_ok(&a);
    assert!(o.contains("map channel `m` added"), "{o}");
}

/// An `event-rule-matches` trigger named `rule` on the event rule `rule` (with the
/// condition's options `extra`) incrementing `key` in `session`/m.
pub fn count_trigger(d: &TestDaemon, session: &str, rule: &str, key: &str, extra: &[&str]) {
    let mut a = vec!["add-trigger", "--condition=event-rule-matches", "--type=user", "--name", rule];
    a.extend_from_slice(extra);
    a.extend_from_slice(&["--action=incr-map-value", "--session", session, "--type=user", "--channel=m", "--key", key]);
    d.ust_ok(&a);
}
