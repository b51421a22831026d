//! Map channels in session configuration files, as LTTng 2.16 saves them (lttng-sessiond's
//! `save_map_channels_from_domain` in `src/bin/lttng-sessiond/save.cpp`; `session.xsd`
//! 2.16's `map_channel_list_type`): a `<map_channels>` element in the user-space
//! `<domain>`, after `<channels>`, one `<map_channel>` per channel, attributes only (no
//! counter is saved).
//!
//! ```text
//! <map_channels><map_channel>
//!   <name>N</name> <key_type>STRING</key_type>
//!   <value_type>SIGNED_INT_32 | SIGNED_INT_64 | SIGNED_INT_MAX</value_type>
//!   <update_policy>PER_EVENT | PER_RULE_MATCH</update_policy>
//!   <max_entry_count>N</max_entry_count>
//!   <buffer_ownership>PER_UID | PER_PID</buffer_ownership>
//!   [<dead_group_policy>DROP | SUM_INTO_SHARED</dead_group_policy>]   (PER_PID only)
//! </map_channel>…</map_channels>
//! ```

use super::{esc, Node};
use crate::maps::{DeadProcessPolicy, MapChannelConfig, MapChannelInfo, MapOwnership, UpdatePolicy, ValueType};

/// Appends the `<map_channels>` element of `channels` (nothing when there is none, as
/// LTTng), four tabs deep.
pub(super) fn map_channels_xml(o: &mut String, channels: &[MapChannelInfo]) {
    if channels.is_empty() {
        return;
    }
    o.push_str("\t\t\t\t<map_channels>\n");
    for m in channels {
        let c = &m.config;
        let leaf = |o: &mut String, name: &str, text: &str| o.push_str(&format!("\t\t\t\t\t\t<{name}>{}</{name}>\n", esc(text)));
        o.push_str("\t\t\t\t\t<map_channel>\n");
        leaf(o, "name", &m.name);
        leaf(o, "key_type", "STRING");
        let value_type = match c.value_type {
            ValueType::SignedInt32 => "SIGNED_INT_32",
            ValueType::SignedInt64 => "SIGNED_INT_64",
            ValueType::SignedIntMax => "SIGNED_INT_MAX",
        };
        leaf(o, "value_type", value_type);
        leaf(o, "update_policy", if c.update_policy == UpdatePolicy::PerEvent { "PER_EVENT" } else { "PER_RULE_MATCH" });
        leaf(o, "max_entry_count", &c.max_key_count.to_string());
        match c.ownership {
            MapOwnership::User => leaf(o, "buffer_ownership", "PER_UID"),
            MapOwnership::Process => {
                leaf(o, "buffer_ownership", "PER_PID");
                let dead = match c.dead_process_policy.unwrap_or(DeadProcessPolicy::SumIntoShared) {
                    DeadProcessPolicy::Drop => "DROP",
                    DeadProcessPolicy::SumIntoShared => "SUM_INTO_SHARED",
                };
                leaf(o, "dead_group_policy", dead);
            }
        }
        o.push_str("\t\t\t\t\t</map_channel>\n");
    }
    o.push_str("\t\t\t\t</map_channels>\n");
}

/// The map channels of a user-space `<domain>` (none: an empty list).
///
/// # Errors
/// A `<map_channel>` without a name, with a key type other than `STRING`, a value, policy
/// or ownership name session.xsd 2.16 does not define, or a `<max_entry_count>` that is 0
/// or above [`crate::maps::MAX_MAX_KEY_COUNT`] (what the daemon takes), named in the
/// message; two map channels of one name.
pub(super) fn map_channels_from(d: &Node) -> Result<Vec<MapChannelInfo>, String> {
    let Some(list) = d.child("map_channels") else { return Ok(Vec::new()) };
    let channels: Vec<MapChannelInfo> = list.all("map_channel").map(map_channel_from).collect::<Result<_, _>>()?;
    // Refused here, before `ust load` creates anything, rather than by the daemon halfway.
    for (i, m) in channels.iter().enumerate() {
        if channels[..i].iter().any(|o| o.name == m.name) {
            return Err(format!("two map channels named {:?}", m.name));
        }
    }
    Ok(channels)
}

fn map_channel_from(m: &Node) -> Result<MapChannelInfo, String> {
    let name = m.text_of("name").ok_or("<map_channel> without <name>")?.to_string();
    crate::maps::check_map_channel_name(&name)?;
    let what = |e: String| format!("map channel {name}: {e}");
    match m.text_of("key_type") {
        None | Some("STRING") => {}
        Some(k) => return Err(what(format!("<key_type> {k:?}: ust keys map channels by string (STRING)"))),
    }
    let value_type = match m.text_of("value_type") {
        Some("SIGNED_INT_32") => ValueType::SignedInt32,
        Some("SIGNED_INT_64") => ValueType::SignedInt64,
        None | Some("SIGNED_INT_MAX") => ValueType::SignedIntMax,
        Some(v) => return Err(what(format!("<value_type> {v:?} is not SIGNED_INT_32, SIGNED_INT_64 or SIGNED_INT_MAX"))),
    };
    let update_policy = match m.text_of("update_policy") {
        None | Some("PER_EVENT") => UpdatePolicy::PerEvent,
        Some("PER_RULE_MATCH") => UpdatePolicy::PerRuleMatch,
        Some(u) => return Err(what(format!("<update_policy> {u:?} is not PER_EVENT or PER_RULE_MATCH"))),
    };
    let max_key_count = match m.num::<u64>("max_entry_count").map_err(what)? {
        None => crate::maps::DEFAULT_MAX_KEY_COUNT,
        Some(n) => u32::try_from(n)
            .ok()
            .filter(|n| (1..=crate::maps::MAX_MAX_KEY_COUNT).contains(n))
            .ok_or_else(|| what(format!("<max_entry_count> {n}: from 1 to {}", crate::maps::MAX_MAX_KEY_COUNT)))?,
    };
    let ownership = match m.text_of("buffer_ownership") {
        None | Some("PER_UID") => MapOwnership::User,
        Some("PER_PID") => MapOwnership::Process,
        Some(b) => return Err(what(format!("<buffer_ownership> {b:?} is not PER_UID or PER_PID"))),
    };
    let dead = match m.text_of("dead_group_policy") {
        None | Some("SUM_INTO_SHARED") => DeadProcessPolicy::SumIntoShared,
        Some("DROP") => DeadProcessPolicy::Drop,
        Some(p) => return Err(what(format!("<dead_group_policy> {p:?} is not DROP or SUM_INTO_SHARED"))),
    };
    let dead_process_policy = (ownership == MapOwnership::Process).then_some(dead);
    Ok(MapChannelInfo { name, config: MapChannelConfig { ownership, dead_process_policy, max_key_count, value_type, update_policy } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session_xml::{from_xml, to_xml, SavedSession};

    #[test]
    fn map_channels_round_trip() {
        let user = MapChannelInfo { name: "per-user".into(), config: MapChannelConfig::default() };
        let process = MapChannelInfo {
            name: "per-process".into(),
            config: MapChannelConfig {
                ownership: MapOwnership::Process,
                dead_process_policy: Some(DeadProcessPolicy::Drop),
                max_key_count: 7,
                value_type: ValueType::SignedInt32,
                update_policy: UpdatePolicy::PerRuleMatch,
            },
        };
        let s = SavedSession { name: "s".into(), map_channels: vec![user, process], ..SavedSession::default() };
        let xml = to_xml(std::slice::from_ref(&s));
        assert!(xml.contains("\t\t\t\t</channels>\n\t\t\t\t<map_channels>\n"), "{xml}");
        assert!(xml.contains("<dead_group_policy>DROP</dead_group_policy>") && xml.matches("<dead_group_policy>").count() == 1, "{xml}");
        let back = from_xml(&xml).unwrap();
        assert_eq!(back[0].map_channels, s.map_channels);
        let none = to_xml(&[SavedSession { name: "s".into(), ..SavedSession::default() }]);
        assert!(!none.contains("map_channels"), "no element without map channels");
    }

    #[test]
    fn bad_map_channels_are_refused_by_name() {
        let wrap = |m: &str| {
            format!("<sessions><session><name>s</name><domains><domain><type>UST</type><buffer_type>PER_UID</buffer_type><map_channels><map_channel><name>m</name>{m}</map_channel></map_channels></domain></domains></session></sessions>")
        };
        for (m, want) in [
            ("<key_type>INDEX</key_type>", "STRING"),
            ("<value_type>FLOAT</value_type>", "SIGNED_INT_32"),
            ("<max_entry_count>0</max_entry_count>", "from 1"),
            ("<max_entry_count>4294967295</max_entry_count>", "from 1 to 1048576"),
            ("<max_entry_count>1048577</max_entry_count>", "from 1 to 1048576"),
            ("<buffer_ownership>GLOBAL</buffer_ownership>", "PER_UID"),
        ] {
            let e = from_xml(&wrap(m)).unwrap_err();
            assert!(e.contains("map channel m") && e.contains(want), "{m}: {e}");
        }
        // A duplicate name is refused by the parser, before `ust load` creates anything.
        let e = from_xml(&wrap("</map_channel><map_channel><name>m</name>")).unwrap_err();
        assert!(e.contains("two map channels named \"m\""), "{e}");
    }
}
