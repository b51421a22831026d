use super::*;

fn p(s: &[&str]) -> Result<TriggerSpec, String> {
    parse_add_trigger(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
}

#[test]
fn names_before_and_after_the_condition() {
    let t = p(&[
        "--name",
        "t1",
        "--condition",
        "event-rule-matches",
        "--type=user",
        "--name=myapp:error",
        "--filter",
        "code > 3",
        "--action",
        "snapshot-session",
        "fr",
        "--action=notify",
    ])
    .unwrap();
    assert_eq!(t.name.as_deref(), Some("t1"));
    assert_eq!(t.rule.pattern, "myapp:error");
    assert_eq!(t.rule.filter.as_deref(), Some("code > 3"));
    assert_eq!(t.actions, vec![TriggerAction::SnapshotSession("fr".into()), TriggerAction::Notify]);
}

#[test]
fn levels_and_defaults() {
    let t = p(&["--condition", "event-rule-matches", "--type", "user:tracepoint", "--log-level", "TRACE_WARNING..", "--action", "notify"]).unwrap();
    assert_eq!(t.name, None);
    assert_eq!(t.rule.pattern, "*");
    assert_eq!(t.rule.level, LevelFilter::UpTo(Level::Warning));
    let t = p(&["--condition", "event-rule-matches", "--type", "user", "--log-level=INFO", "--action", "notify"]).unwrap();
    assert_eq!(t.rule.level, LevelFilter::Only(Level::Info));
    let t = p(&["--condition", "event-rule-matches", "--type", "user", "--log-level=..", "--action", "notify"]).unwrap();
    assert_eq!(t.rule.level, LevelFilter::Any);
}

#[test]
fn session_conditions() {
    let t = p(&["--name", "big", "--condition=session-consumed-size-ge", "-s", "s1", "--threshold-size=64k", "--action", "stop-session", "s1"]).unwrap();
    assert_eq!(t.name.as_deref(), Some("big"));
    assert_eq!(t.condition, Some(SessionCondition::ConsumedSizeGe { session: "s1".into(), threshold: 65536 }));
    assert_eq!(t.actions, vec![TriggerAction::StopSession("s1".into())]);
    let t = p(&["--condition", "session-rotation-finishes", "--session", "s1", "--action", "notify"]).unwrap();
    assert_eq!(t.condition, Some(SessionCondition::RotationFinishes { session: "s1".into() }));
    let t = p(&["--condition", "session-rotation-starts", "--session=s2", "--action", "notify"]).unwrap();
    assert_eq!(t.condition, Some(SessionCondition::RotationStarts { session: "s2".into() }));
    assert_eq!(parse_size("2M"), Ok(2 << 20));
    assert_eq!(parse_size("1G"), Ok(1 << 30));
}

#[test]
fn buffer_usage_conditions() {
    let t = p(&[
        "--condition=channel-buffer-usage-ge",
        "--session",
        "s1",
        "--channel",
        "ch",
        "--domain",
        "user",
        "--threshold-ratio",
        "0.75",
        "--action",
        "notify",
    ])
    .unwrap();
    assert_eq!(
        t.condition,
        Some(SessionCondition::BufferUsageGe { session: "s1".into(), channel: "ch".into(), threshold: UsageThreshold::Ratio(Ratio(0.75)) })
    );
    assert_eq!(t.rule.pattern, "*");
    let t = p(&["--condition", "channel-buffer-usage-le", "-s", "s1", "-c", "ch", "-d", "user", "-t", "64k", "--action", "notify"]).unwrap();
    assert_eq!(t.condition, Some(SessionCondition::BufferUsageLe { session: "s1".into(), channel: "ch".into(), threshold: UsageThreshold::Bytes(65536) }));
    assert_eq!(UsageThreshold::Ratio(Ratio(0.5)).bytes(8192), 4096);
    assert_eq!(UsageThreshold::Bytes(7).bytes(8192), 7);
    assert!(UsageThreshold::Ratio(Ratio(f64::NAN)).check().is_err());
}

#[test]
fn action_options() {
    let t = p(&[
        "--condition",
        "event-rule-matches",
        "--type=user",
        "--action",
        "notify",
        "--rate-policy=every:10",
        "--action",
        "snapshot-session",
        "fr",
        "--path",
        "/snaps",
        "--name",
        "full",
        "--max-size",
        "1M",
        "--rate-policy",
        "once-after:40",
        "--action",
        "stop-session",
        "fr",
    ])
    .unwrap();
    assert_eq!(t.actions.len(), 3);
    assert_eq!(t.options(0).rate_policy, options::RatePolicy::EveryN(10));
    let snap = t.options(1);
    assert_eq!(snap.rate_policy, options::RatePolicy::OnceAfterN(40));
    let o = snap.snapshot_output.unwrap();
    assert_eq!((o.ctrl_url.as_str(), o.name.as_deref(), o.max_size), ("/snaps", Some("full"), Some(1 << 20)));
    assert_eq!(t.options(2), ActionOptions::default());
    assert_eq!(t.action_options.len(), 2, "trailing defaults dropped");
    let t = p(&["--condition", "event-rule-matches", "--type=user", "--action", "snapshot-session", "s", "--url", "net://1.2.3.4"]).unwrap();
    assert_eq!(t.options(0).snapshot_output.unwrap().ctrl_url, "net://1.2.3.4");
    let t = p(&["--condition", "event-rule-matches", "--type=user", "--action", "notify"]).unwrap();
    assert!(t.action_options.is_empty());
}

#[test]
fn refusals_name_what_is_wrong() {
    let cases: &[(&[&str], &str)] = &[
        (&["--action", "notify"], "before --condition"),
        (&["--condition", "channel-buffer-usage-ge", "--action", "notify"], "--session"),
        (&["--condition", "channel-buffer-usage-ge", "-s", "s", "--action", "notify"], "--channel"),
        (&["--condition", "channel-buffer-usage-le", "-s", "s", "-c", "ch", "-t", "1k", "--action", "notify"], "--domain"),
        (&["--condition", "channel-buffer-usage-le", "-s", "s", "-c", "ch", "-d", "kernel", "-t", "1k", "--action", "notify"], "user space"),
        (&["--condition", "channel-buffer-usage-le", "-s", "s", "-c", "ch", "-d", "user", "--action", "notify"], "is required"),
        (&["--condition", "channel-buffer-usage-ge", "-s", "s", "-c", "ch", "-d", "user", "-t", "1k", "-r", "0.5", "--action", "notify"], "only one of"),
        (&["--condition", "channel-buffer-usage-ge", "-s", "s", "-c", "ch", "-d", "user", "-r", "1.5", "--action", "notify"], "from 0 to 1"),
        (&["--condition", "session-consumed-size-ge", "-s", "s", "-r", "0.5", "--action", "notify"], "unexpected"),
        (&["--condition", "session-rotation-starts", "--action", "notify"], "--session"),
        (&["--condition", "session-consumed-size-ge", "--session", "s", "--action", "notify"], "--threshold-size"),
        (&["--condition", "session-consumed-size-ge", "--session", "s", "--threshold-size", "3x", "--action", "notify"], "not a size"),
        (&["--condition", "session-rotation-finishes", "--session", "s", "--threshold-size", "3", "--action", "notify"], "unexpected"),
        (&["--condition", "event-rule-matches", "--type", "kernel", "--action", "notify"], "user space"),
        (&["--condition", "event-rule-matches", "--action", "notify"], "--type user"),
        (&["--condition", "event-rule-matches", "--type", "user"], "missing --action"),
        (&["--condition", "event-rule-matches", "--type", "user", "--filter", "a *", "--action", "notify"], "--filter"),
        (&["--condition", "event-rule-matches", "--type", "user", "--action", "dance"], "unknown action"),
        (&["--condition", "event-rule-matches", "--type", "user", "--action", "notify", "--rate-policy", "bob:3"], "type `bob` unknown"),
        (&["--condition", "event-rule-matches", "--type", "user", "--action", "snapshot-session"], "Missing session name."),
        (&["--condition", "event-rule-matches", "--type", "user", "--action", "snapshot-session", "s", "bob"], "unexpected argument \"bob\""),
        (
            &["--condition", "event-rule-matches", "--type", "user", "--action", "snapshot-session", "s", "--max-size", "10M"],
            "without a snapshot output destination",
        ),
        (&["--condition", "event-rule-matches", "--type", "user", "--action", "stop-session", "s", "--path", "/x"], "unexpected"),
        (&["--condition", "event-rule-matches", "--type", "user", "--name", "a*", "--exclude-name", "a*", "--action", "notify"], "exclu"),
        (&["--condition", "event-rule-matches", "--type", "user", "--capture", "x", "--action", "notify"], "capture"),
    ];
    for (args, want) in cases {
        let e = p(args).unwrap_err();
        assert!(e.contains(want), "{args:?}: {e}");
    }
}
