//! `ust add-trigger`'s accepted and refused command lines: a port of lttng-tools'
//! `tests/regression/tools/trigger/test_add_trigger_cli` (its user-space cases; kernel
//! event rules, captures and `--owner-uid` are refused by ust, said by name). Where ust
//! gives lttng's error message, the test checks for lttng's words.

use system_tests as common;

use common::*;

fn run(d: &TestDaemon, args: &[&str]) -> (bool, String) {
    let mut v = vec!["add-trigger"];
    v.extend_from_slice(args);
    let o = d.ust(&v);
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn add_trigger_cli_as_lttng_tests_it() {
    let d = TestDaemon::start();
    d.ust_ok(&["create", "ze-session", "--snapshot", "--output", d.output("ze").to_str().unwrap()]);
    let erm = ["--condition", "event-rule-matches", "--type=user"];
    let with = |name: &str, rest: &[&'static str]| -> Vec<String> {
        let mut v = vec!["--name".to_string(), name.to_string()];
        v.extend(erm.iter().map(|s| s.to_string()));
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    let successes: Vec<Vec<String>> = vec![
        with("notify-1", &["--action", "notify"]),
        with("notify-2", &["--name=some-event-id", "--action", "notify", "--rate-policy=every:55"]),
        with("exclude-one", &["--name=bernard*", "--exclude-name=bernard-lermite", "--action", "notify"]),
        with("exclude-two", &["--name=jean-*", "--exclude-name", "jean-chretien", "-x", "jean-charest", "--action", "notify"]),
        with("test-rate-policy-1", &["--action", "notify", "--rate-policy=every:55", "--action", "notify", "--rate-policy=once-after:55"]),
        with(
            "test-rate-policy-2",
            &[
                "--action",
                "snapshot-session",
                "ze-session",
                "--rate-policy=every:55",
                "--action",
                "snapshot-session",
                "ze-session",
                "--rate-policy=once-after:55",
            ],
        ),
        with("log-level-range-any", &["--log-level=..", "--action", "notify"]),
        with("notify-4", &["--log-level=INFO", "--action", "notify", "--rate-policy=once-after:55"]),
        with("notify-5", &["--log-level=TRACE_DEBUG_LINE..", "--filter", "a == 1", "--action", "notify"]),
        with("notify-9", &["--action", "start-session", "ze-session"]),
        with("notify-10", &["--action", "stop-session", "ze-session"]),
        with("notify-11", &["--action", "rotate-session", "ze-session"]),
        with("notify-12", &["--action", "snapshot-session", "ze-session"]),
        with("notify-13", &["--action", "snapshot-session", "ze-session", "--path", "/hello"]),
        with("notify-14", &["--action", "snapshot-session", "ze-session", "--url", "net://1.2.3.4"]),
        with("notify-15", &["--action", "snapshot-session", "ze-session", "--ctrl-url=tcp://1.2.3.4:1234", "--data-url=tcp://1.2.3.4:1235"]),
        vec![
            "--name=usage".into(),
            "--condition=channel-buffer-usage-ge".into(),
            "--session=ze-session".into(),
            "--channel=channel0".into(),
            "--domain=user".into(),
            "--threshold-ratio=0.42".into(),
            "--action=notify".into(),
        ],
    ];
    for args in &successes {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, out) = run(&d, &a);
        assert!(ok, "{args:?}: {out}");
        assert!(out.contains(&format!("Added trigger `{}`", args[1].trim_start_matches("--name="))) || out.contains("Added trigger `usage`"), "{out}");
    }
    let listed = d.ust_json(&["list-triggers", "--json"]);
    assert_eq!(listed.as_array().unwrap().len(), successes.len());

    let failures: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "SPEC"),
        (vec!["--condition", "event-rule-matches", "--type=user"], "missing --action"),
        (
            vec![
                "--condition",
                "event-rule-matches",
                "--name=aaa",
                "--type=user",
                "--condition",
                "event-rule-matches",
                "--name=bbb",
                "--type=user",
                "--action",
                "notify",
            ],
            "only one --condition",
        ),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "notify", "--rate-policy=once-after"], "Rate policy format is invalid."),
        (
            vec!["--condition", "event-rule-matches", "--type=user", "--action", "notify", "--rate-policy=every:123bob"],
            "Failed to parse rate policy value `123bob` as an integer.",
        ),
        (
            vec!["--condition", "event-rule-matches", "--type=user", "--action", "notify", "--rate-policy=every:"],
            "Failed to parse rate policy value `` as an integer.",
        ),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "notify", "--rate-policy=bob:123"], "Rate policy type `bob` unknown."),
        (vec!["--condition", "zoofest"], "unknown condition"),
        (vec!["--condition", "event-rule-matches", "--type=user", "--log-level=FOO", "--action", "notify"], "not a log level"),
        (
            vec!["--condition", "event-rule-matches", "--type=user", "--name=jean", "--exclude-name", "jean-chretien", "--action", "notify"],
            "Event name pattern must contain wildcard characters to use exclusions",
        ),
        (vec!["--condition", "event-rule-matches", "--type=kernel", "--action", "notify"], "user space"),
        (vec!["--condition", "event-rule-matches", "--type=user", "--capture", "foo", "--action", "notify"], "--capture"),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "zoofest"], "unknown action"),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "notify", "bob"], "unexpected argument \"bob\""),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "start-session"], "Missing session name."),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "start-session", "ze-session", "bob"], "unexpected argument \"bob\""),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "snapshot-session"], "Missing session name."),
        (
            vec!["--condition", "event-rule-matches", "--type=user", "--action", "snapshot-session", "ze-session", "--max-size", "10M"],
            "Can't provide a snapshot output max size without a snapshot output destination.",
        ),
        (
            vec!["--condition", "event-rule-matches", "--type=user", "--action", "snapshot-session", "ze-session", "--name", "hallo"],
            "Can't provide a snapshot output name without a snapshot output destination.",
        ),
        (
            vec![
                "--condition",
                "event-rule-matches",
                "--type=user",
                "--action",
                "snapshot-session",
                "ze-session",
                "--name",
                "hallo",
                "--url",
                "/something/that/looks/like/a/path",
            ],
            "Failed to parse '/something/that/looks/like/a/path' as an URL.",
        ),
        (
            vec![
                "--condition",
                "event-rule-matches",
                "--type=user",
                "--action",
                "snapshot-session",
                "ze-session",
                "--name",
                "hallo",
                "--path",
                "net://8.8.8.8/",
            ],
            "Failed to parse 'net://8.8.8.8/' as a local path.",
        ),
        (
            vec!["--condition", "channel-buffer-usage-ge", "--session", "ze-session", "--channel", "c", "--threshold-ratio", "0.5", "--action", "notify"],
            "`-d/--domain` is required",
        ),
        (
            vec!["--condition", "channel-buffer-usage-le", "--session", "ze-session", "--channel", "c", "--domain", "user", "--action", "notify"],
            "One of `-r/--threshold-ratio` or `-t/--threshold-size` is required",
        ),
        (vec!["--condition", "event-rule-matches", "--type=user", "--action", "snapshot-session", "nope"], "no session named"),
    ];
    for (args, want) in &failures {
        let (ok, out) = run(&d, args);
        assert!(!ok, "{args:?} was accepted: {out}");
        assert!(out.contains(want), "{args:?}: wanted {want:?} in: {out}");
    }
    assert_eq!(d.ust_json(&["list-triggers", "--json"]).as_array().unwrap().len(), successes.len(), "no refused trigger was added");
    d.ust_ok(&["destroy", "-s", "ze-session"]);
}
