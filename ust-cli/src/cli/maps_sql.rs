//! `ust export-maps --format=sqlite`: every counter of a session's map channels as the SQL
//! script lttng-export-maps(1) specifies (its schema, word for word: tables `channels`,
//! `groups`, `keys`, `entries` and the view `vmap`), the inserts in one transaction.
//! Strings are quoted as SQLite reads them: in single quotes, a quote doubled, a backslash
//! an ordinary character.

use std::fmt::Write as _;

use ust_ctl::maps::{GroupType, MapsDump};

/// The schema of lttng-export-maps(1).
const SCHEMA: &str = "CREATE TABLE channels (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  type TEXT NOT NULL CHECK (type IN ('kernel', 'user')),
  UNIQUE (name, type)
);

CREATE TABLE groups (
  id          INTEGER PRIMARY KEY,
  channel_id  INTEGER NOT NULL REFERENCES channels(id),
  type        TEXT NOT NULL
              CHECK (type IN ('kernel-global', 'user-per-user',
                              'user-per-process', 'shared')),
  owner_id    INTEGER,
  owner_name  TEXT,
  value_type  TEXT NOT NULL
              CHECK (value_type IN ('signed-int-32', 'signed-int-64')),
  CHECK ((owner_id IS NULL) =
         (type NOT IN ('user-per-user', 'user-per-process')))
);

CREATE TABLE keys (
  id   INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE
);

CREATE TABLE entries (
  group_id     INTEGER NOT NULL REFERENCES groups(id),
  part_id      INTEGER,
  key_id       INTEGER NOT NULL REFERENCES keys(id),
  value        INTEGER NOT NULL,
  has_overflow INTEGER NOT NULL CHECK (has_overflow IN (0, 1))
);

CREATE VIEW vmap AS
SELECT c.name AS channel_name,
       c.type AS channel_type,
       g.type AS group_type,
       g.owner_id,
       g.owner_name,
       g.value_type,
       e.part_id,
       k.name AS key,
       e.value,
       e.has_overflow
FROM entries e
JOIN groups g   ON e.group_id   = g.id
JOIN channels c ON g.channel_id = c.id
JOIN keys k     ON e.key_id     = k.id;
";

/// `s` as an SQLite string literal.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// The script for dump `d`.
pub fn script(d: &MapsDump) -> String {
    let mut out = String::from("BEGIN TRANSACTION;\n\n");
    out += SCHEMA;
    out.push('\n');
    let mut keys: Vec<&str> =
        d.channels.iter().flat_map(|c| c.groups.iter()).flat_map(|g| g.parts.iter()).flat_map(|p| p.entries.iter()).map(|e| e.key.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    for (i, k) in keys.iter().enumerate() {
        let _ = writeln!(out, "INSERT INTO keys (id, name) VALUES ({}, {});", i + 1, quote(k));
    }
    let key_id = |k: &str| keys.binary_search(&k).map(|i| i + 1).unwrap_or(0);
    let mut gid = 0;
    for (ci, ch) in d.channels.iter().enumerate() {
        let _ = writeln!(out, "INSERT INTO channels (id, name, type) VALUES ({}, {}, 'user');", ci + 1, quote(&ch.name));
        for g in &ch.groups {
            gid += 1;
            let (owner_id, owner_name) = match g.kind {
                GroupType::Shared => ("NULL".to_string(), "NULL".to_string()),
                _ => (g.owner_id.map_or("NULL".into(), |i| i.to_string()), g.owner_name.as_deref().map_or("NULL".into(), quote)),
            };
            let _ = writeln!(
                out,
                "INSERT INTO groups (id, channel_id, type, owner_id, owner_name, value_type) VALUES ({gid}, {}, '{}', {owner_id}, {owner_name}, {});",
                ci + 1,
                g.kind.lttng_name(),
                quote(&g.value_type)
            );
            for p in &g.parts {
                let part = p.part.map_or("NULL".into(), |c| c.to_string());
                for e in &p.entries {
                    let _ = writeln!(
                        out,
                        "INSERT INTO entries (group_id, part_id, key_id, value, has_overflow) VALUES ({gid}, {part}, {}, {}, {});",
                        key_id(&e.key),
                        e.value,
                        u8::from(e.overflow)
                    );
                }
            }
        }
    }
    out += "\nCOMMIT;\n";
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ust_ctl::maps::{Entry, GroupDump, MapChannelConfig, MapChannelDump, PartDump};

    #[test]
    fn the_script_has_lttngs_schema_and_every_counter() {
        let d = MapsDump {
            session: "s".into(),
            channels: vec![MapChannelDump {
                name: "it's".into(),
                config: MapChannelConfig::default(),
                keys: 1,
                keys_dropped: 0,
                groups: vec![
                    GroupDump {
                        kind: GroupType::Shared,
                        owner_id: None,
                        owner_name: None,
                        value_type: "signed-int-64".into(),
                        parts: vec![PartDump { part: None, entries: vec![Entry { key: "k\\'".into(), value: 3, overflow: true }] }],
                    },
                    GroupDump {
                        kind: GroupType::UserPerUser,
                        owner_id: Some(0),
                        owner_name: Some("root".into()),
                        value_type: "signed-int-64".into(),
                        parts: vec![PartDump { part: Some(1), entries: vec![Entry { key: "k\\'".into(), value: -2, overflow: false }] }],
                    },
                ],
            }],
        };
        let s = script(&d);
        assert!(s.starts_with("BEGIN TRANSACTION;") && s.ends_with("COMMIT;\n"));
        assert!(s.contains("CREATE VIEW vmap AS"));
        assert!(s.contains("INSERT INTO channels (id, name, type) VALUES (1, 'it''s', 'user');"), "{s}");
        assert!(s.contains("INSERT INTO keys (id, name) VALUES (1, 'k\\''');"), "{s}");
        assert!(s.contains("VALUES (1, 1, 'shared', NULL, NULL, 'signed-int-64');"), "{s}");
        assert!(s.contains("VALUES (2, 1, 'user-per-user', 0, 'root', 'signed-int-64');"), "{s}");
        assert!(s.contains("VALUES (1, NULL, 1, 3, 1);") && s.contains("VALUES (2, 1, 1, -2, 0);"), "{s}");
    }
}
