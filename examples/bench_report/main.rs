//! The overhead report: every benchmark case of issue 7 against its floor
//! (raw tokio, bare ractor), measured side by side in one run — the cases
//! interleaved sample by sample, so a noisy neighbour slows ours and the
//! floor alike — and printed as one Markdown table with the ratios.
//!
//! ```sh
//! cargo run --release --example bench_report              # the table
//! cargo run --release --example bench_report -- --callgrind  # + instructions/op
//! BENCH_FULL=1 cargo run --release --example bench_report # 30 samples
//! ```
//!
//! Environment: `BENCH_SAMPLES` (interleaved samples per timed case,
//! default 15; `BENCH_FULL=1` makes it 30), `BENCH_THREADS` (threads in
//! the memory case, default the full 10,000; a smaller count is scaled to
//! 10,000).
//!
//! Internal modes (the report runs itself in them): `--mem KIND N` measures
//! one memory case in a fresh process; `--case NAME --ops N` runs one case
//! alone on a current-thread runtime (what `benches/callgrind.sh` and
//! `--callgrind` run under valgrind). `docs/performance.md` explains what
//! bounds each figure.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../benches/common/mod.rs"]
mod common;

mod cases;
mod single;

use cases::*;
use single::*;

use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use common::gate::{self, Bare, Lock, Ours, TokioMutex, WAITERS};
use common::mem::{self, MemKind};
use common::protocol::ProtocolCase;
use common::sink::{self, BATCH, Kind, Pipe};
use common::spawn::{AgentCase, BareCase, HubCase};
use common::{Flavor, capacity, rpc, runtime};

// -------------------------------------------------------------- statistics

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per-sample values of several variants measured in the same samples.
struct Samples {
    values: Vec<Vec<f64>>,
}

impl Samples {
    /// `names` label the variants (for the reader of the code).
    fn new(names: &[&'static str]) -> Self {
        Self {
            values: vec![Vec::new(); names.len()],
        }
    }

    fn push(&mut self, variant: usize, value: f64) {
        self.values[variant].push(value);
    }

    fn median(&self, variant: usize) -> f64 {
        median(&self.values[variant])
    }

    /// The median over samples of `a / b` (paired: same sample, so drift
    /// of the machine cancels).
    fn ratio(&self, a: usize, b: usize) -> f64 {
        let ratios: Vec<f64> = self.values[a]
            .iter()
            .zip(&self.values[b])
            .map(|(x, y)| x / y)
            .collect();
        median(&ratios)
    }

    /// Spread of a variant: (min, max).
    fn spread(&self, variant: usize) -> (f64, f64) {
        let v = &self.values[variant];
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        )
    }
}

/// Runs `variants` in a rotated order per sample: sample `s` starts with
/// variant `s % n`, so none always goes first (warm caches) or last.
fn interleave(samples: usize, n: usize, mut run: impl FnMut(usize) -> f64, into: &mut Samples) {
    for s in 0..samples {
        for k in 0..n {
            let variant = (s + k) % n;
            let value = run(variant);
            into.push(variant, value);
        }
    }
}

fn ns(d: Duration, ops: usize) -> f64 {
    d.as_nanos() as f64 / ops as f64
}

fn fmt_ns(v: f64) -> String {
    if v >= 1_000_000.0 {
        format!("{:.2} ms", v / 1e6)
    } else if v >= 1_000.0 {
        format!("{:.2} µs", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

fn fmt_bytes(v: f64) -> String {
    if v >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", v / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", v / 1024.0)
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn full() -> bool {
    std::env::var("BENCH_FULL").is_ok_and(|v| v == "1")
}

fn samples() -> usize {
    env_usize("BENCH_SAMPLES", if full() { 30 } else { 15 })
}

fn met(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

/// One row of the table.
struct Row {
    case: String,
    ours: String,
    floors: String,
    ratio: String,
    target: String,
    met: String,
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let date = Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    format!("{cores} cores, {cpu}; {date}")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--mem") => {
            let kind = MemKind::parse(&args[1]).expect("a memory kind");
            let n: usize = args[2].parse().expect("a count");
            println!("{}", mem::measure(kind, n));
            return;
        }
        Some("--case") => {
            let ops: usize = args
                .iter()
                .position(|a| a == "--ops")
                .and_then(|i| args.get(i + 1))
                .and_then(|v| v.parse().ok())
                .unwrap_or(1_000);
            run_case(&args[1], ops);
            return;
        }
        Some("--callgrind-only") => {
            match callgrind_table() {
                Some(t) => println!("{t}"),
                None => eprintln!("valgrind not found"),
            }
            return;
        }
        _ => {}
    }
    let with_callgrind = args.iter().any(|a| a == "--callgrind");
    let samples = samples();
    // First, while nothing is timed (it may compile the counting binary).
    eprintln!("allocation counts (cargo bench --bench alloc_count)…");
    let counts = alloc_counts();
    let mut rows = Vec::new();
    let mut notes = String::new();
    eprintln!("gate…");
    gate_case(Flavor::Multi, samples, &mut rows, &mut notes);
    gate_case(Flavor::Current, samples, &mut rows, &mut notes);
    eprintln!("spawn…");
    spawn_case(Flavor::Multi, samples, &mut rows, &mut notes);
    spawn_case(Flavor::Current, samples, &mut rows, &mut notes);
    eprintln!("sink…");
    sink_case(samples, &counts, &mut rows, &mut notes);
    eprintln!("memory…");
    mem_case(&counts, &mut rows, &mut notes);
    eprintln!("capacity…");
    capacity_case(samples, &mut rows, &mut notes);
    rpc_case(samples, &mut rows);

    println!("## Overhead against the floors\n");
    println!("Machine: {}\n", machine());
    println!("| case | ours | floor(s) | ratio | target | met? |");
    println!("|---|---|---|---|---|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.case, r.ours, r.floors, r.ratio, r.target, r.met
        );
    }
    println!(
        "\nTimes are medians per op; ratios are medians of per-sample ratios (cases interleaved)."
    );
    println!("{notes}");
    if with_callgrind {
        eprintln!("callgrind…");
        match callgrind_table() {
            Some(t) => println!("### Instructions per op (callgrind)\n\n{t}"),
            None => println!("(valgrind not found: no instruction counts)"),
        }
    }
}
