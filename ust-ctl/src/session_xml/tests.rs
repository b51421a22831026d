use super::*;

/// What `lttng save` (LTTng 2.13.9, Debian) wrote for a session made with
/// `lttng create s1 --output DIR; lttng enable-channel -u ch --subbuf-size 64k --num-subbuf 8
/// --overwrite; lttng enable-event -u 'myapp:*' -c ch --filter 'i > 3' --exclude myapp:x
/// --loglevel TRACE_WARNING; lttng enable-event -u b:c -c ch --loglevel-only TRACE_INFO;
/// lttng add-context -u -c ch -t vpid -t procname; lttng track -u --vpid 12,13`.
const LTTNG_S1: &str = include_str!("lttng-2.13-s1.lttng");

#[test]
fn reads_what_lttng_saves() {
    let s = from_xml(LTTNG_S1).unwrap();
    assert_eq!(s.len(), 1);
    let s = &s[0];
    assert_eq!(s.name, "s1");
    assert_eq!(s.output.as_deref(), Some(std::path::Path::new("/tmp/lttng-home/out")));
    assert!(!s.snapshot && !s.started && s.net_output.is_none());
    assert_eq!(s.buffers, BufferType::PerUid);
    assert_eq!(s.vpid, VpidTracker::Only([12, 13].into()));
    assert_eq!((s.vuid.clone(), s.vgid.clone()), (None, None));
    assert!(s.other_domains.is_empty(), "empty JUL/LOG4J/PYTHON domains are not reported");
    let c = &s.channels[0];
    assert_eq!(c.name, "ch");
    assert_eq!((c.config.subbuf_size, c.config.num_subbuf, c.config.overwrite), (65536, 8, true));
    assert_eq!(c.config.read_timer_us, crate::config::DEFAULT_READ_TIMER_US, "0 = ust's default read timer");
    assert_eq!(c.config.blocking_timeout_us, 0);
    assert_eq!(c.contexts, vec![ContextType::Vpid, ContextType::Procname]);
    assert_eq!(c.events.len(), 2);
    assert_eq!((c.events[0].pattern.as_str(), c.events[0].level), ("b:c", LevelFilter::Only(Level::Info)));
    let e = &c.events[1];
    assert_eq!((e.pattern.as_str(), e.level), ("myapp:*", LevelFilter::UpTo(Level::Warning)));
    assert_eq!(e.filter.as_deref(), Some("i > 3"), "&gt; unescaped");
    assert_eq!(e.exclusions, vec!["myapp:x".to_string()]);
}

#[test]
fn round_trips() {
    let mut s = from_xml(LTTNG_S1).unwrap().remove(0);
    s.buffers = BufferType::PerPid;
    s.snapshot = true;
    s.started = true;
    s.shm_path = Some("/dev/shm/x <&>".into());
    s.vuid = Some(vec![0, 1000]);
    s.vgid = Some(vec![]);
    s.channels[0].contexts.push(ContextType::SpanId);
    s.channels[0].contexts.push(ContextType::CpuId);
    s.channels[0].config.blocking_timeout_us = crate::config::BLOCKING_FOREVER;
    s.channels[0].config.overwrite = false;
    s.channels[0].events[1].enabled = false;
    s.channels[0].events[1].filter = Some(r#"a == "x<y>&z" && $ctx.vtid != 3"#.into());
    let xml = to_xml(std::slice::from_ref(&s));
    assert!(xml.contains("<buffer_type>PER_PID</buffer_type>") && xml.contains("<snapshot_outputs>"), "{xml}");
    assert!(xml.contains("<provider_name>ust</provider_name>") && xml.contains("<blocking_timeout>-1</blocking_timeout>"), "{xml}");
    let back = from_xml(&xml).unwrap();
    assert_eq!(back, vec![s.clone()]);
    // Network output instead of a path.
    s.snapshot = false;
    s.net_output = Some(("tcp4://127.0.0.1:5342/".into(), "tcp4://127.0.0.1:5343/".into()));
    s.output = None;
    s.live_timer_us = Some(1_000_000);
    assert_eq!(from_xml(&to_xml(std::slice::from_ref(&s))).unwrap(), vec![s]);
}

#[test]
fn bad_files_are_errors_not_panics() {
    let cases = [
        ("", "no root"),
        ("<sessions><session>", "ends inside"),
        ("<html/>", "not an LTTng session file"),
        ("<sessions><session><name>../x</name></session></sessions>", "invalid session name"),
        ("<sessions><session><name>a</name><started>maybe</started></session></sessions>", "not a boolean"),
        ("<session><name>a</name><domains><domain><type>UST</type><buffer_type>PER_UID</buffer_type><channels><channel><name>c</name><subbuffer_size>5000</subbuffer_size></channel></channels></domain></domains></session>", "power of two"),
        ("<session><name>a</name><domains><domain><type>UST</type><buffer_type>PER_UID</buffer_type><channels><channel><name>c</name><events><event><name>x</name><loglevel_type>RANGE</loglevel_type><loglevel>99</loglevel></event></events></channel></channels></domain></domains></session>", "not a log level"),
        ("<session><name>a</name><domains><domain><type>UST</type><buffer_type>PER_UID</buffer_type><channels><channel><name>c</name><events><event><name>x</name><filter>a * 2</filter></event></events></channel></channels></domain></domains></session>", "filter"),
    ];
    for (xml, want) in cases {
        let e = from_xml(xml).unwrap_err();
        assert!(e.contains(want), "{xml}: {e}");
    }
    let deep = "<a>".repeat(100) + &"</a>".repeat(100);
    assert!(from_xml(&deep).unwrap_err().contains("deeper"));
}

#[test]
fn allocation_policies_round_trip_with_lttng_2_15_names() {
    use crate::alloc::{BufferAllocation, BufferPreallocation};
    let mut s = from_xml(LTTNG_S1).unwrap().remove(0);
    let plain = to_xml(std::slice::from_ref(&s));
    assert!(!plain.contains("allocation_policy"), "defaults stay out (2.13's schema has no such element)");
    s.channels[0].config.allocation = BufferAllocation::PerChannel;
    s.channels[0].config.preallocation = BufferPreallocation::OnDemand;
    let xml = to_xml(std::slice::from_ref(&s));
    assert!(xml.contains("<allocation_policy>PER_CHANNEL</allocation_policy>"), "{xml}");
    assert!(xml.contains("<preallocation_policy>ON_DEMAND</preallocation_policy>"), "{xml}");
    let back = from_xml(&xml).unwrap().remove(0);
    assert_eq!(back.channels[0].config, s.channels[0].config);
    let bad = xml.replace("PER_CHANNEL", "GLOBAL");
    assert!(from_xml(&bad).unwrap_err().contains("allocation_policy"));
    let explicit =
        plain.replace("<events>", "<allocation_policy>PER_CPU</allocation_policy>\n<preallocation_policy>PREALLOCATE</preallocation_policy>\n<events>");
    let c = &from_xml(&explicit).unwrap()[0].channels[0].config;
    assert_eq!((c.allocation, c.preallocation), (BufferAllocation::PerCpu, BufferPreallocation::Preallocate));
}

/// A kernel domain as `lttng save` writes it for `lttng enable-event -k
/// --userspace-probe=elf:/usr/bin/app:query q` (and an SDT probe, and a kernel
/// tracepoint, which ust skips and reports): the probes load; saved again, they read back
/// the same, a return probe included.
#[test]
fn userspace_probes_load_and_round_trip() {
    let xml = "<sessions><session><name>k</name><domains><domain><type>KERNEL</type><buffer_type>GLOBAL</buffer_type><channels><channel><name>channel0</name><events>\
        <event><name>q</name><enabled>true</enabled><type>USERSPACE_PROBE</type><attributes><userspace_probe_function_attributes><lookup_method>ELF</lookup_method><binary_path>/tmp/link:x/app</binary_path><function_name>query</function_name></userspace_probe_function_attributes></attributes></event>\
        <event><name>s</name><enabled>false</enabled><type>USERSPACE_PROBE</type><attributes><userspace_probe_tracepoint_attributes><lookup_method>SDT</lookup_method><binary_path>/bin/app</binary_path><probe_name>tick</probe_name><provider_name>prov</provider_name></userspace_probe_tracepoint_attributes></attributes></event>\
        <event><name>sched_switch</name><enabled>true</enabled><type>TRACEPOINT</type></event>\
        </events></channel></channels></domain></domains><started>false</started></session></sessions>";
    let mut s = from_xml(xml).unwrap().remove(0);
    assert_eq!(s.other_domains, vec!["KERNEL".to_string()], "the kernel tracepoint is skipped and said");
    assert_eq!(s.probes.len(), 2);
    assert_eq!(s.probes[0].location, ProbeLocation::Function { path: "/tmp/link:x/app".into(), symbol: "query".into(), ret: false });
    assert!(s.probes[0].enabled && !s.probes[1].enabled);
    assert_eq!(s.probes[1].location, ProbeLocation::Sdt { path: "/bin/app".into(), provider: "prov".into(), probe: "tick".into() });
    s.probes.push(UserspaceProbe {
        name: "q_return".into(),
        enabled: true,
        location: ProbeLocation::Function { path: "/a/b".into(), symbol: "app::q".into(), ret: true },
    });
    let again = from_xml(&to_xml(std::slice::from_ref(&s))).unwrap().remove(0);
    assert_eq!(again.probes, s.probes);
    assert!(again.other_domains.is_empty(), "only probes were saved");
    let bad = xml.replace("<binary_path>/bin/app</binary_path>", "<binary_path>bin/app</binary_path>");
    assert!(from_xml(&bad).unwrap_err().contains("not absolute"));
}

#[test]
fn reclaim_policy_round_trips_in_lttng_2_15_elements() {
    use crate::reclaim::AutoReclaim;
    let mut s = from_xml(LTTNG_S1).unwrap().remove(0);
    assert_eq!(s.channels[0].config.auto_reclaim, None, "absent: off");
    // LTTng's own test value (test_sparse_buffer.py's test_load_save_reclaim_policy_periodic).
    for p in [AutoReclaim::OlderThan(3141592653589793), AutoReclaim::Consumed] {
        s.channels[0].config.auto_reclaim = Some(p);
        let xml = to_xml(std::slice::from_ref(&s));
        let want = match p {
            AutoReclaim::OlderThan(_) => "<reclaim_policy>\n\t\t\t\t\t\t\t<periodic>\n\t\t\t\t\t\t\t\t<age_threshold>3141592653589793</age_threshold>",
            AutoReclaim::Consumed => "<reclaim_policy>\n\t\t\t\t\t\t\t<consumed></consumed>",
        };
        assert!(xml.contains(want), "{xml}");
        assert_eq!(from_xml(&xml).unwrap(), vec![s.clone()]);
    }
    let bad = to_xml(std::slice::from_ref(&s)).replace("<consumed></consumed>", "<sometimes/>");
    assert!(from_xml(&bad).unwrap_err().contains("reclaim_policy"));
}
