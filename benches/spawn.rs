//! Case 2 under divan: spawn a child → its first event on the parent's
//! stream → the child stopped. Ours through the Hub and at the agent layer
//! (`AgentBuilder::spawn_into` + nested sink), against bare ractor `spawn_linked` + one
//! cast + `stop_and_wait`, and against the hub's own protocol written in
//! bare ractor (`common/protocol.rs`).
//!
//! `cargo bench --bench spawn`. For the ratios measured side by side, run
//! `cargo run --release --example bench_report`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::protocol::ProtocolCase;
use common::spawn::{AgentCase, BareCase, HubCase};
use common::{Flavor, runtime};
use divan::Bencher;
use divan::counter::ItemsCount;

const CYCLES: usize = 50;

fn main() {
    divan::main();
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn bare(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let mut case = rt.block_on(BareCase::new());
    bencher
        .counter(ItemsCount::new(CYCLES))
        .bench_local(|| rt.block_on(case.run(CYCLES)));
    case.stop();
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn agent(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let mut case = rt.block_on(AgentCase::new());
    bencher
        .counter(ItemsCount::new(CYCLES))
        .bench_local(|| rt.block_on(case.run(CYCLES)));
    case.stop();
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn hub(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let mut case = rt.block_on(HubCase::new());
    bencher
        .counter(ItemsCount::new(CYCLES))
        .bench_local(|| rt.block_on(case.run(CYCLES)));
    case.stop();
}

#[divan::bench(args = [Flavor::Multi, Flavor::Current])]
fn protocol(bencher: Bencher, flavor: Flavor) {
    let rt = runtime(flavor);
    let mut case = rt.block_on(ProtocolCase::new());
    bencher
        .counter(ItemsCount::new(CYCLES))
        .bench_local(|| rt.block_on(case.run(CYCLES)));
    case.stop();
}
