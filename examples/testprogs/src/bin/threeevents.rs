//! Emits 3 events and returns from `main` at once: none may be lost.

fn main() {
    for i in 0..3u32 {
        ust::tracepoint!(short, ev, i: u32 = i);
    }
}
