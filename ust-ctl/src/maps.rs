//! Map channels (LTTng 2.16's `lttng add-map-channel`, `show-maps`, `export-maps` and the
//! `incr-map-value` trigger action): the types the `ctl` requests carry, the key template
//! of an `incr-map-value` action, and the dump of every counter of a session that
//! `show-maps` and `export-maps` present.
//!
//! From lttng-add-map-channel(1): a map channel is a set of per-CPU counters keyed by
//! strings, in maps, one set per owner (a Unix user, or a process with
//! `--buffer-ownership=process`), plus one channel-wide set of *shared* counters that the
//! daemon owns (where the counters of a dead process go with `--dead-process-policy=
//! sum-into-shared`, and where the actions of triggers with a session condition count).
//! All the maps of a channel share one key table of at most `--max-key-count` keys; a key
//! past that is dropped (counted, and shown by `show-maps`).

use serde::{Deserialize, Serialize};

/// Default `--max-key-count` (LTTng's `default_map_channel_max_key_count`).
pub const DEFAULT_MAX_KEY_COUNT: u32 = 4096;

/// Largest `--max-key-count` the daemon accepts (the bound of its counter maps,
/// `ringbuffer::counters::MAX_KEYS`: 1 Mi keys × 8 bytes × CPUs per owner).
pub const MAX_MAX_KEY_COUNT: u32 = 1 << 20;

/// Longest key, bytes: LTTng-UST's `LTTNG_KEY_TOKEN_STRING_LEN_MAX` (256, its NUL
/// included). A template whose literal text is longer is refused; an event whose expanded
/// key is longer is not counted (as LTTng-UST, which creates no counter for it).
pub const MAX_KEY_LEN: usize = 255;

/// Who owns a set of per-CPU maps (`--buffer-ownership`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MapOwnership {
    /// `user` (default): one set per Unix user, shared by that user's processes.
    User,
    /// `process`: one set per process.
    Process,
}

/// What happens to a dead process's counters (`--dead-process-policy`, per-process
/// ownership only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeadProcessPolicy {
    /// `drop`: discarded.
    Drop,
    /// `sum-into-shared` (default): added to the channel's shared counters (wrapping, with
    /// the overflow flag set, past the value type).
    SumIntoShared,
}

/// `--value-type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueType {
    /// `signed-int-32`.
    SignedInt32,
    /// `signed-int-64`.
    SignedInt64,
    /// `signed-int-max` (default): the widest the daemon and the process share (64 bits
    /// here: the daemon and every runtime it grants maps to are 64-bit).
    SignedIntMax,
}

impl ValueType {
    /// The effective width: 32 bits for `signed-int-32`, else 64.
    pub fn bits(self) -> u32 {
        match self {
            ValueType::SignedInt32 => 32,
            _ => 64,
        }
    }

    /// LTTng's name of the effective value type (`signed-int-32`, `signed-int-64`).
    pub fn effective_name(self) -> &'static str {
        if self.bits() == 32 {
            "signed-int-32"
        } else {
            "signed-int-64"
        }
    }
}

/// `--update-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpdatePolicy {
    /// `per-event` (default): one increment per resulting key per event, however many
    /// triggers of the channel match it.
    PerEvent,
    /// `per-rule-match`: one increment per matching trigger.
    PerRuleMatch,
}

/// A map channel's attributes (`ust add-map-channel`), final once added.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChannelConfig {
    /// `--buffer-ownership`.
    pub ownership: MapOwnership,
    /// `--dead-process-policy` (`None` with per-user ownership, where it does not apply).
    pub dead_process_policy: Option<DeadProcessPolicy>,
    /// `--max-key-count`.
    pub max_key_count: u32,
    /// `--value-type`.
    pub value_type: ValueType,
    /// `--update-policy`.
    pub update_policy: UpdatePolicy,
}

impl MapChannelConfig {
    /// Checks the attributes the daemon takes: a `--max-key-count` from 1 to
    /// [`MAX_MAX_KEY_COUNT`], no `--dead-process-policy` with per-user ownership.
    ///
    /// # Errors
    /// The attribute, named.
    pub fn check(&self) -> Result<(), String> {
        if self.max_key_count == 0 || self.max_key_count > MAX_MAX_KEY_COUNT {
            return Err(format!("--max-key-count {}: 1 to {MAX_MAX_KEY_COUNT}", self.max_key_count));
        }
        if self.ownership == MapOwnership::User && self.dead_process_policy.is_some() {
            return Err("--dead-process-policy applies to --buffer-ownership=process only".into());
        }
        Ok(())
    }
}

impl Default for MapChannelConfig {
    fn default() -> Self {
        MapChannelConfig {
            ownership: MapOwnership::User,
            dead_process_policy: None,
            max_key_count: DEFAULT_MAX_KEY_COUNT,
            value_type: ValueType::SignedIntMax,
            update_policy: UpdatePolicy::PerEvent,
        }
    }
}

/// Checks a map channel's name as LTTng does: 1 to 255 bytes (lttng-sessiond keeps it in a
/// `LTTNG_SYMBOL_NAME_LEN`-byte field with its NUL), without control characters (ust's
/// addition: one would break `show-maps`' tables and `ust list`). Unlike an event
/// channel's, a map channel's name names no file: quotes, backslashes, spaces and
/// non-ASCII text are allowed (lttng-tools' test_export_maps_schema_ust names one
/// `ch'an\nel`).
///
/// # Errors
/// An empty name, one over 255 bytes, or one with a control character.
pub fn check_map_channel_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 255 || name.chars().any(char::is_control) {
        return Err(format!("invalid map channel name {name:?}: use 1 to 255 bytes, no control character"));
    }
    Ok(())
}

/// A map channel as `ust list SESSION` shows it and `ust save` writes it (in session XML's
/// `<map_channels>`): its name and attributes, not its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChannelInfo {
    /// Its name.
    pub name: String,
    /// Its attributes.
    pub config: MapChannelConfig,
}

/// `ust add-map-channel` (LTTng 2.16): add a map channel to a session; triggers'
/// `incr-map-value` actions naming it start counting (in the processes that match them,
/// from now on).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddMapChannel {
    /// Session (`None`: the current one).
    pub session: Option<String>,
    /// Its name; `None`: the daemon names it `map-channel<N>`.
    pub name: Option<String>,
    /// Its attributes.
    pub config: MapChannelConfig,
}

/// One piece of a key template.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyPart {
    /// Text used as is (`{{` and `}}` already unescaped).
    Text(String),
    /// `{event_name}`: `provider:name`.
    EventName,
    /// `{provider_name}`: the provider.
    ProviderName,
}

/// Parses an `incr-map-value` key template (lttng-add-trigger(1)): `{event_name}` and
/// `{provider_name}` are placeholders, `{{` and `}}` a literal brace, anything else text.
///
/// # Errors
/// An unknown placeholder, a lone `{` or `}`, an empty template, literal text over
/// [`MAX_KEY_LEN`] bytes (every key it makes would be longer), a control character (it
/// would break `show-maps`' tables).
pub fn parse_key_template(t: &str) -> Result<Vec<KeyPart>, String> {
    if t.is_empty() {
        return Err("an empty --key".into());
    }
    if t.chars().any(char::is_control) {
        return Err(format!("--key {t:?}: no control character"));
    }
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = t;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("{{") || rest.starts_with("}}") {
            text.push(c);
            rest = &rest[2..];
        } else if c == '{' {
            let end = rest.find('}').ok_or_else(|| format!("--key {t:?}: `{{` without `}}` (write `{{{{` for a literal brace)"))?;
            let part = match &rest[1..end] {
                "event_name" => KeyPart::EventName,
                "provider_name" => KeyPart::ProviderName,
                other => return Err(format!("--key {t:?}: unknown placeholder {{{other}}} (event_name, provider_name)")),
            };
            if !text.is_empty() {
                parts.push(KeyPart::Text(std::mem::take(&mut text)));
            }
            parts.push(part);
            rest = &rest[end + 1..];
        } else if c == '}' {
            return Err(format!("--key {t:?}: lone `}}` (write `}}}}` for a literal brace)"));
        } else {
            text.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    if !text.is_empty() {
        parts.push(KeyPart::Text(text));
    }
    let literal: usize = parts.iter().map(|p| if let KeyPart::Text(t) = p { t.len() } else { 0 }).sum();
    if literal > MAX_KEY_LEN {
        let shown: String = t.chars().take(32).collect();
        return Err(format!("--key \"{shown}...\": {literal} bytes of text, a key is at most {MAX_KEY_LEN} bytes"));
    }
    Ok(parts)
}

/// Checks an `incr-map-value` action as the daemon takes it: session and map channel
/// names, and the key template ([`parse_key_template`]), which must be literal text when
/// the trigger has a session condition (`literal`).
///
/// # Errors
/// The bad part, named.
pub fn check_incr_map_value(session: &str, channel: &str, key: &str, literal: Option<&str>) -> Result<(), String> {
    crate::config::check_name("session", session)?;
    check_map_channel_name(channel)?;
    let parts = parse_key_template(key)?;
    if let Some(k) = literal.filter(|_| !is_literal(&parts)) {
        return Err(format!("--key {key:?}: with condition {k}, the key must be literal text ({{event_name}} and {{provider_name}} need event-rule-matches)"));
    }
    Ok(())
}

/// True when the template has no placeholder (what a trigger with a session condition
/// needs).
pub fn is_literal(parts: &[KeyPart]) -> bool {
    parts.iter().all(|p| matches!(p, KeyPart::Text(_)))
}

/// The key of `parts` for the event `provider:name`.
pub fn expand_key(parts: &[KeyPart], provider: &str, name: &str) -> String {
    let mut k = String::new();
    for p in parts {
        match p {
            KeyPart::Text(t) => k.push_str(t),
            KeyPart::EventName => {
                k.push_str(provider);
                k.push(':');
                k.push_str(name);
            }
            KeyPart::ProviderName => k.push_str(provider),
        }
    }
    k
}

/// The kind of a group of maps (export-maps' `group_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupType {
    /// `user-per-user`: one Unix user's per-CPU maps; owner id = uid.
    UserPerUser,
    /// `user-per-process`: one process's per-CPU maps; owner id = pid.
    UserPerProcess,
    /// `shared`: the channel's shared counters (no owner, no CPU).
    Shared,
}

impl GroupType {
    /// LTTng's name (`user-per-user`, `user-per-process`, `shared`).
    pub fn lttng_name(self) -> &'static str {
        match self {
            GroupType::UserPerUser => "user-per-user",
            GroupType::UserPerProcess => "user-per-process",
            GroupType::Shared => "shared",
        }
    }
}

/// One counter: key, value, overflow flag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The key.
    pub key: String,
    /// The value (of the group's value type).
    pub value: i64,
    /// At least one update wrapped around.
    pub overflow: bool,
}

/// One partition of a group: a CPU's map, or the shared counters (`part: None`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartDump {
    /// CPU, `None` for the shared counters.
    pub part: Option<u32>,
    /// The shared part: every allocated key's counter, in allocation order. A CPU's part, as
    /// the daemon sends it: only the counters that are not 0 or overflowed (a 384-CPU
    /// owner's thousands of keys would otherwise be millions of zeros, past the 16 MiB frame);
    /// [`MapsDump::with_zeros`] puts the zeros back.
    pub entries: Vec<Entry>,
}

/// One group of maps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDump {
    /// Its kind.
    pub kind: GroupType,
    /// uid or pid; `None` for the shared counters.
    pub owner_id: Option<i64>,
    /// User name or process name (informational).
    pub owner_name: Option<String>,
    /// Effective value type (`signed-int-32` or `signed-int-64`).
    pub value_type: String,
    /// Its partitions.
    pub parts: Vec<PartDump>,
}

/// One map channel and all its counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapChannelDump {
    /// Channel name.
    pub name: String,
    /// Its attributes.
    pub config: MapChannelConfig,
    /// Keys allocated in its key table.
    pub keys: u32,
    /// Keys dropped because the table was full (`--max-key-count`).
    pub keys_dropped: u64,
    /// Its groups: shared first, then owners by id.
    pub groups: Vec<GroupDump>,
}

/// Every map channel of a session (`show-maps`, `export-maps`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapsDump {
    /// Session name.
    pub session: String,
    /// Its map channels, by name.
    pub channels: Vec<MapChannelDump>,
}

impl MapsDump {
    /// Every part of every group with every allocated key, as LTTng's `show-maps` and
    /// `export-maps` see them: the counters the daemon left out of CPU parts (the zeros) put
    /// back, each part's entries in the shared part's (allocation) order. Keys come from each
    /// channel's shared part, which lists every allocated key; an entry for a key it lacks is
    /// kept, after the others.
    pub fn with_zeros(mut self) -> Self {
        for ch in &mut self.channels {
            let keys: Vec<String> = ch
                .groups
                .iter()
                .find(|g| g.kind == GroupType::Shared)
                .into_iter()
                .flat_map(|g| &g.parts)
                .flat_map(|p| &p.entries)
                .map(|e| e.key.clone())
                .collect();
            for p in ch.groups.iter_mut().flat_map(|g| &mut g.parts).filter(|p| p.part.is_some()) {
                let mut sent: std::collections::HashMap<String, Entry> = p.entries.drain(..).map(|e| (e.key.clone(), e)).collect();
                let mut full: Vec<Entry> = keys.iter().map(|k| sent.remove(k).unwrap_or(Entry { key: k.clone(), value: 0, overflow: false })).collect();
                let mut rest: Vec<Entry> = sent.into_values().collect();
                rest.sort_by(|a, b| a.key.cmp(&b.key));
                full.extend(rest);
                p.entries = full;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_channel_names_are_lttngs() {
        for ok in ["m", "ch'an\\nel", "compteurs d'été", &"x".repeat(255)] {
            assert_eq!(check_map_channel_name(ok), Ok(()), "{ok:?}");
        }
        for bad in ["", "a\nb", "a\0b", &"x".repeat(256)] {
            assert!(check_map_channel_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn templates_expand_as_lttng_says() {
        let p = parse_key_template("count/{event_name}").unwrap();
        assert_eq!(expand_key(&p, "tp", "tptest"), "count/tp:tptest");
        let p = parse_key_template("prov/{provider_name}").unwrap();
        assert_eq!(expand_key(&p, "tp", "tptest"), "prov/tp");
        let p = parse_key_template("{{lit}} {event_name}}}").unwrap();
        assert_eq!(expand_key(&p, "a", "b"), "{lit} a:b}");
        assert!(is_literal(&parse_key_template("k1").unwrap()));
        assert!(!is_literal(&parse_key_template("{event_name}").unwrap()));
        for bad in ["", "{nope}", "{event_name", "a}b", "a\nb", "{{unbalanced}", "{event_name}}"] {
            assert!(parse_key_template(bad).is_err(), "{bad:?}");
        }
        // LTTng-UST's key bound: 255 bytes of text, braces counted once unescaped.
        assert!(parse_key_template(&"k".repeat(MAX_KEY_LEN)).is_ok());
        assert!(parse_key_template(&format!("{}{{event_name}}", "k".repeat(MAX_KEY_LEN))).is_ok(), "the event's part is judged per event");
        assert!(parse_key_template(&"{{".repeat(MAX_KEY_LEN)).is_ok());
        let e = parse_key_template(&"k".repeat(MAX_KEY_LEN + 1)).unwrap_err();
        assert!(e.contains("at most 255 bytes") && e.len() < 200, "{e}");
    }

    #[test]
    fn with_zeros_puts_back_what_the_daemon_left_out() {
        let e = |k: &str, value| Entry { key: k.into(), value, overflow: false };
        let group = |kind, owner_id, parts| GroupDump { kind, owner_id, owner_name: None, value_type: "signed-int-64".into(), parts };
        let d = MapsDump {
            session: "s".into(),
            channels: vec![MapChannelDump {
                name: "m".into(),
                config: MapChannelConfig::default(),
                keys: 2,
                keys_dropped: 0,
                groups: vec![
                    group(GroupType::Shared, None, vec![PartDump { part: None, entries: vec![e("b", 0), e("a", 1)] }]),
                    group(
                        GroupType::UserPerUser,
                        Some(1000),
                        vec![PartDump { part: Some(0), entries: vec![e("a", 5)] }, PartDump { part: Some(1), entries: vec![] }],
                    ),
                ],
            }],
        }
        .with_zeros();
        let parts = &d.channels[0].groups[1].parts;
        assert_eq!(parts[0].entries, [e("b", 0), e("a", 5)]);
        assert_eq!(parts[1].entries, [e("b", 0), e("a", 0)]);
        assert_eq!(d.channels[0].groups[0].parts[0].entries, [e("b", 0), e("a", 1)], "the shared part as it was");
    }
}
