//! `callsites`: records one event from each kind of call site (`tracepoint!`, a
//! `#[ust::provider]` function, `tracef!`, `tracelog!`) and prints `<event> <line>` for
//! each, the source line of the call, so the `ip` context test (system-tests/tests/ip.rs) can
//! check that babeltrace2's debug-info filter maps each event's `ip` to that line.

#[ust::provider]
mod callsites {
    /// Fired through a provider function: its `ip` lies in this function (or where it is
    /// inlined).
    #[tracepoint(level = Info)]
    pub fn from_provider(n: u32) {}
}

fn main() {
    // Each call is on the line after the `line!()` that names it.
    let tp = line!() + 1;
    ust::tracepoint!(callsites, from_macro, n: u32 = 1);
    let pf = line!() + 1;
    callsites::from_provider(2);
    let tf = line!() + 1;
    ust::tracef!("from tracef {}", 3);
    let tl = line!() + 1;
    ust::tracelog!(Info, "from tracelog {}", 4);
    println!("callsites:from_macro {tp}");
    println!("callsites:from_provider {pf}");
    println!("lttng_ust_tracef:event {tf}");
    println!("lttng_ust_tracelog:TRACE_INFO {tl}");
}
