//! The per-site plan ([`Site::plan`]): a fixed-size event enabled in exactly one plain,
//! unfiltered channel records through that channel directly. Every change of the mask, the
//! filters or the channel in the slot must move the plan with it, and every event must land
//! where the general path would have put it.

use ust_core::context::ContextType;
use ust_core::filter::{CmpOp, Expr, Operand};

use super::{enable, serial, site_named, test_buffer, TestChannel};
use crate::channel::{self, Channel};
use crate::site::Site;

fn fire(v: u64) {
    crate::tracepoint!(unit, planned, v: u64 = v);
}

fn fire_text(v: u64, s: &str) {
    crate::tracepoint!(unit, planned_text, v: u64 = v, s: &str = s);
}

/// The `v` of every record of `ch` (all `unit:planned` events: 8-byte payloads after
/// `skip` bytes of context).
fn values(ch: &TestChannel, skip: usize) -> Vec<u64> {
    ch.records(|_, _| skip + 8).iter().map(|(_, p)| u64::from_le_bytes(p[skip..skip + 8].try_into().unwrap())).collect()
}

fn plan_of(s: &Site) -> Option<*const Channel> {
    s.plan().map(|c| c as *const Channel)
}

#[test]
fn the_plan_follows_the_mask_the_filters_and_the_slot() {
    let _g = serial();
    let a = TestChannel::new(30, 4096);
    let b = TestChannel::new(31, 4096);
    fire(0);
    let site = site_named("unit", "planned");
    assert_eq!(plan_of(site), None, "disabled: no plan");

    enable(site, &[30]);
    assert_eq!(plan_of(site), Some(a.ch as *const Channel));
    fire(1);
    enable(site, &[31]);
    assert_eq!(plan_of(site), Some(b.ch as *const Channel), "the plan moves with the mask");
    fire(2);
    enable(site, &[30, 31]);
    assert_eq!(plan_of(site), None, "two channels: the general path");
    fire(3);
    enable(site, &[30, 62]);
    assert_eq!(plan_of(site), None, "a second bit, even without a channel, is not one channel");
    fire(4);

    // A filter on the one channel: the general path evaluates it.
    let f = Expr::Cmp(CmpOp::Gt, Operand::Field(0), Operand::Int(10));
    enable(site, &[30]);
    crate::__testing::set_filters(site, vec![(30, vec![f.clone()])]).unwrap();
    assert_eq!(plan_of(site), None, "a filtered channel: no plan");
    fire(5);
    fire(11);
    crate::__testing::set_filters(site, vec![]).unwrap();
    assert_eq!(plan_of(site), Some(a.ch as *const Channel), "filter removed: the plan is back");
    fire(6);
    // A filter on another slot does not concern the one channel.
    crate::__testing::set_filters(site, vec![(31, vec![f])]).unwrap();
    assert_eq!(plan_of(site), Some(a.ch as *const Channel));
    fire(7);
    crate::__testing::set_filters(site, vec![]).unwrap();

    site.clear_bits(1 << 30);
    assert_eq!(plan_of(site), None, "bit cleared: no plan");
    fire(8);

    assert_eq!(values(&a, 0), vec![1, 3, 4, 11, 6, 7]);
    assert_eq!(values(&b, 0), vec![2, 3]);
}

#[test]
fn a_channel_installed_under_an_unchanged_mask_becomes_the_plan() {
    let _g = serial();
    let old = TestChannel::new(32, 4096);
    fire(0);
    let site = site_named("unit", "planned");
    enable(site, &[32]);
    assert_eq!(plan_of(site), Some(old.ch as *const Channel));
    fire(1);
    let first = values(&old, 0);
    // The slot reused by another channel while the site stays enabled in it (what the
    // runtime does when the daemon grants a slot it had enabled, or reuses one).
    crate::__testing::install_channel(32, vec![test_buffer(4096)]);
    let replacement = TestChannel { slot: 32, ch: channel::get(32).unwrap() };
    assert!(!std::ptr::eq(replacement.ch, old.ch));
    assert_eq!(plan_of(site), Some(replacement.ch as *const Channel), "the new channel, not the old one");
    fire(2);
    assert_eq!(first, vec![1]);
    // The replaced channel was retired (its buffer is private memory now): nothing of
    // event 2 there.
    assert_eq!(values(&old, 0), Vec::<u64>::new(), "nothing more into the replaced channel");
    assert_eq!(values(&replacement, 0), vec![2]);
    std::mem::forget(old); // its slot now belongs to `replacement`, which cleans it up
}

#[test]
fn channels_with_contexts_take_the_general_path_and_variable_size_events_the_plan() {
    let _g = serial();
    let ctx = TestChannel::with_contexts(33, 4096, vec![ContextType::Vtid]);
    fire(0);
    fire_text(0, "");
    let site = site_named("unit", "planned");
    let text = site_named("unit", "planned_text");
    enable(site, &[33]);
    assert_eq!(plan_of(site), None, "a channel with contexts is not plain");
    fire(9);
    let vtid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
    let recs = ctx.records(|_, _| 4 + 8);
    assert_eq!(recs.len(), 1);
    assert_eq!(u32::from_le_bytes(recs[0].1[..4].try_into().unwrap()), vtid, "the context block is written");
    assert_eq!(u64::from_le_bytes(recs[0].1[4..12].try_into().unwrap()), 9);
    site.set_mask(0);

    let plain = TestChannel::new(34, 4096);
    enable(text, &[34]);
    assert_eq!(plan_of(text), Some(plain.ch as *const Channel), "a string field: the plan serves events of any size (sizes from the payload)");
    fire_text(7, "hi");
    let recs = plain.records(|_, p| 8 + p[8..].iter().position(|&b| b == 0).unwrap() + 1);
    assert_eq!(recs.len(), 1);
    assert_eq!(&recs[0].1[..], &[7, 0, 0, 0, 0, 0, 0, 0, b'h', b'i', 0]);
    text.set_mask(0);
}
