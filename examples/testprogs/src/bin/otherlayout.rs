//! `otherlayout`: declares `short:ev` with other fields than `threeevents` does (`{ i: u64,
//! tag: &str }` instead of `{ i: u32 }`), and an event of its own, `short:mine { k }`, and
//! emits each twice. In a per-UID trace shared with `threeevents`, each `short:ev` must be
//! decoded with its own layout (two event classes of one name, as LTTng's registry).

fn main() {
    for k in 0..2u64 {
        ust::tracepoint!(short, ev, i: u64 = k, tag: &str = "other");
        ust::tracepoint!(short, mine, k: u64 = k);
    }
}
