use super::*;
use crate::trigger::parse_add_trigger;

fn spec(args: &str) -> TriggerSpec {
    let v: Vec<String> = args.split_whitespace().map(str::to_string).collect();
    parse_add_trigger(&v).unwrap_or_else(|e| panic!("{args}: {e}"))
}

/// One trigger of every condition, action and rate policy kind (as lttng's
/// test_save_load_triggers.py has), written and read back unchanged.
#[test]
fn every_kind_round_trips() {
    let all = [
        "--name erm-notify --condition event-rule-matches --type user --name tp:tp1 --action notify",
        "--name erm-filter-every --condition event-rule-matches --type user --name tp:tp2 --filter intfield>0 --action notify --rate-policy every:5",
        "--name erm-severe-exclude-once --condition event-rule-matches --type user --name tp:* --log-level TRACE_WARNING.. --exclude-name tp:secret --action notify --rate-policy once-after:3",
        "--name erm-exact-start --condition event-rule-matches --type user --name tp:tp4 --log-level TRACE_INFO --action start-session s",
        "--name erm-stop --condition event-rule-matches --type user --action stop-session s",
        "--name erm-rotate --condition event-rule-matches --type user --action rotate-session s",
        "--name erm-snapshot --condition event-rule-matches --type user --action snapshot-session s",
        "--name erm-snapshot-path --condition event-rule-matches --type user --action snapshot-session s --path /snaps --name full --max-size 1M --rate-policy every:2",
        "--name erm-snapshot-url --condition event-rule-matches --type user --action snapshot-session s --url net://1.2.3.4",
        "--name erm-snapshot-ctrl --condition event-rule-matches --type user --action snapshot-session s --ctrl-url tcp://1.2.3.4:1234 --data-url tcp://1.2.3.4:1235",
        "--name erm-multi --condition event-rule-matches --type user --name tp:multi --action start-session s --action notify --action stop-session s",
        "--name consumed-size --condition session-consumed-size-ge --session s --threshold-size 1M --action notify",
        "--name usage-high-bytes --condition channel-buffer-usage-ge --session s --channel chan --domain user --threshold-size 4096 --action notify",
        "--name usage-low-ratio --condition channel-buffer-usage-le --session s --channel chan --domain user --threshold-ratio 0.25 --action notify",
        "--name rotation-ongoing --condition session-rotation-starts --session s --action notify",
        "--name rotation-completed --condition session-rotation-finishes --session s --action snapshot-session s",
    ];
    let specs: Vec<TriggerSpec> = all.iter().map(|a| spec(a)).collect();
    let xml = to_xml_with_triggers(&[], Some(&specs));
    assert!(xml.ends_with("\t</triggers>\n</sessions>\n"), "{xml}");
    assert!(xml.contains("<condition_buffer_usage_low>") && xml.contains("<threshold_ratio>0.25</threshold_ratio>") && xml.contains("<domain>UST</domain>"));
    assert!(xml.contains("<rate_policy_once_after_n>\n\t\t\t\t\t\t\t\t\t<threshold>3</threshold>"), "{xml}");
    let back = triggers_from_xml(&xml).unwrap();
    assert!(back.skipped.is_empty(), "{:?}", back.skipped);
    let mut want = specs.clone();
    want.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(back.triggers, want);
    // Without triggers (`--no-triggers`) the element is absent.
    assert!(!to_xml_with_triggers(&[], None).contains("<triggers>"));
}

/// A file as lttng-tools 2.16 writes one (its MI serialization; `<owner_uid>` as `lttng
/// list-triggers --mi` adds it, which load ignores): what ust cannot honour is skipped
/// with the reason, the rest loads.
#[test]
fn lttng_written_triggers_load() {
    let xml = include_str!("lttng-2.16-triggers.lttng");
    let got = triggers_from_xml(xml).unwrap();
    let names: Vec<&str> = got.triggers.iter().map(|t| t.name.as_deref().unwrap()).collect();
    assert_eq!(names, ["on-error", "usage"]);
    let on_error = &got.triggers[0];
    assert_eq!(on_error.rule.pattern, "my_app:*");
    assert_eq!(on_error.rule.level, LevelFilter::UpTo(Level::Warning));
    assert_eq!(on_error.rule.exclusions, vec!["my_app:noise".to_string()]);
    assert_eq!(on_error.rule.filter.as_deref(), Some("code >= 3"));
    assert_eq!(on_error.actions, vec![TriggerAction::StopSession("my-session".into()), TriggerAction::SnapshotSession("fr".into())]);
    let o = on_error.options(1).snapshot_output.unwrap();
    assert_eq!((o.ctrl_url.as_str(), o.name.as_deref(), o.max_size), ("/var/snaps", Some("err"), Some(4194304)));
    assert_eq!(on_error.options(0).rate_policy, RatePolicy::OnceAfterN(10));
    assert_eq!(
        got.triggers[1].condition,
        Some(SessionCondition::BufferUsageGe { session: "my-session".into(), channel: "channel0".into(), threshold: UsageThreshold::Ratio(Ratio(0.75)) })
    );
    let skipped: Vec<(&str, bool)> = got.skipped.iter().map(|(n, why)| (n.as_str(), !why.is_empty())).collect();
    assert_eq!(skipped, [("count-events", true), ("kernel-sched", true), ("py-logger", true), ("with-capture", true)]);
    assert!(got.skipped[1].1.contains("event_rule_kernel_tracepoint"), "{:?}", got.skipped);
}

#[test]
fn malformed_triggers_are_refused_by_name() {
    let wrap = |t: &str| format!("<sessions><triggers><trigger><name>t</name>{t}</trigger></triggers></sessions>");
    let notify = "<action><action_notify><rate_policy><rate_policy_every_n><interval>1</interval></rate_policy_every_n></rate_policy></action_notify></action>";
    let cases = [
        (wrap(notify), "no <condition>"),
        (wrap("<condition><condition_session_rotation_ongoing><session_name>s</session_name></condition_session_rotation_ongoing></condition>"), "no <action>"),
        (wrap(&format!("<condition><condition_session_consumed_size><session_name>s</session_name></condition_session_consumed_size></condition>{notify}")), "threshold_bytes"),
        (wrap(&format!("<condition><condition_buffer_usage_high><session_name>s</session_name><channel_name>c</channel_name><domain>UST</domain><threshold_ratio>2</threshold_ratio></condition_buffer_usage_high></condition>{notify}")), "not from 0 to 1"),
        (wrap("<condition><condition_session_rotation_ongoing><session_name>s</session_name></condition_session_rotation_ongoing></condition><action><action_notify><rate_policy><rate_policy_every_n><interval>0</interval></rate_policy_every_n></rate_policy></action_notify></action>"), "> 0"),
        (wrap("<condition><condition_nope/></condition>"), "unknown condition"),
    ];
    for (xml, want) in cases {
        let e = triggers_from_xml(&xml).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
}
