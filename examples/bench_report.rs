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

#[path = "../benches/common/mod.rs"]
mod common;

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

// ------------------------------------------------------------------ cases

const GATE_CYCLES: usize = 20;

fn gate_case(flavor: Flavor, samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
    let rt = runtime(flavor);
    let (mutex, bare, ours) = rt.block_on(async {
        (
            TokioMutex::default(),
            Bare::spawn().await,
            Ours::spawn().await,
        )
    });
    // Per variant: first grants in order every round; slips; cycles.
    let mut first = [true; 3];
    let mut slips = [0usize; 3];
    let mut cycles = [0usize; 3];
    let mut run = |variant: usize| -> f64 {
        let round = rt.block_on(async {
            match variant {
                0 => gate::round(&mutex, GATE_CYCLES).await,
                1 => gate::round(&bare, GATE_CYCLES).await,
                _ => gate::round(&ours, GATE_CYCLES).await,
            }
        });
        first[variant] &= round.first_in_order;
        slips[variant] += round.slips;
        cycles[variant] += round.cycles;
        ns(round.elapsed, round.cycles)
    };
    // Warm-up: one round each.
    for v in 0..3 {
        run(v);
    }
    let mut s = Samples::new(&["mutex", "bare ractor gate", "GateHandle"]);
    interleave(samples, 3, &mut run, &mut s);
    for (v, name) in [(1, "the bare ractor gate"), (2, "GateHandle")] {
        assert!(first[v], "{name} granted its first waiters out of order");
        if flavor == Flavor::Current {
            assert_eq!(slips[v], 0, "{name} granted out of FIFO order");
        }
    }
    let fifo_word = |v: usize| {
        if !first[v] {
            "broken".to_owned()
        } else if slips[v] == 0 {
            "exact".to_owned()
        } else {
            format!("in order, {} re-queue slips in {}", slips[v], cycles[v])
        }
    };
    let vs_mutex = s.ratio(2, 0);
    let vs_bare = s.ratio(2, 1);
    let where_ = match flavor {
        Flavor::Multi => "2 workers",
        Flavor::Current => "current-thread",
    };
    rows.push(Row {
        case: format!("1. gate grant→release cycle, {WAITERS} waiters ({where_})"),
        ours: fmt_ns(s.median(2)),
        floors: format!(
            "Mutex {} · bare ractor gate {}",
            fmt_ns(s.median(0)),
            fmt_ns(s.median(1))
        ),
        ratio: format!(
            "{vs_mutex:.2}× Mutex · {vs_bare:.2}× bare (bare = {:.2}× Mutex)",
            s.ratio(1, 0)
        ),
        target: "≤ 2.5× Mutex, FIFO exact".into(),
        met: format!(
            "{} (FIFO: ours {}, bare {}, Mutex {})",
            met(vs_mutex <= 2.5),
            fifo_word(2),
            fifo_word(1),
            fifo_word(0)
        ),
    });
    let (lo, hi) = s.spread(2);
    let _ = writeln!(
        notes,
        "- gate ({where_}): ours per-sample range {}–{}; {samples} samples × {} cycles",
        fmt_ns(lo),
        fmt_ns(hi),
        WAITERS * GATE_CYCLES
    );
    rt.block_on(async {
        ours.0.actor().stop(None);
    });
}

const SPAWN_CYCLES: usize = 200;

fn spawn_case(flavor: Flavor, samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
    let rt = runtime(flavor);
    let (mut bare, mut agent, mut hub) = rt.block_on(async {
        (
            BareCase::new().await,
            AgentCase::new().await,
            HubCase::new().await,
        )
    });
    let mut run = |variant: usize| -> f64 {
        rt.block_on(async {
            let start = std::time::Instant::now();
            match variant {
                0 => bare.run(SPAWN_CYCLES).await,
                1 => agent.run(SPAWN_CYCLES).await,
                _ => hub.run(SPAWN_CYCLES).await,
            }
            ns(start.elapsed(), SPAWN_CYCLES)
        })
    };
    for v in 0..3 {
        run(v);
    }
    let mut s = Samples::new(&["bare", "agent", "hub"]);
    interleave(samples, 3, &mut run, &mut s);
    let where_ = match flavor {
        Flavor::Multi => "2 workers",
        Flavor::Current => "current-thread",
    };
    let hub_ratio = s.ratio(2, 0);
    let agent_ratio = s.ratio(1, 0);
    rows.push(Row {
        case: format!("2. spawn → first nested event → stopped, via Hub ({where_})"),
        ours: fmt_ns(s.median(2)),
        floors: format!("bare spawn_linked+cast+stop {}", fmt_ns(s.median(0))),
        ratio: format!("{hub_ratio:.2}×"),
        target: "≤ 2×".into(),
        met: met(hub_ratio <= 2.0).into(),
    });
    rows.push(Row {
        case: format!("2. same, agent layer: AgentBuilder::spawn_into + nested sink ({where_})"),
        ours: fmt_ns(s.median(1)),
        floors: format!("bare {}", fmt_ns(s.median(0))),
        ratio: format!("{agent_ratio:.2}×"),
        target: "≤ 2×".into(),
        met: met(agent_ratio <= 2.0).into(),
    });
    let _ = writeln!(
        notes,
        "- spawn ({where_}): {samples} samples × {SPAWN_CYCLES} cycles; hub range {}–{}",
        fmt_ns(s.spread(2).0),
        fmt_ns(s.spread(2).1)
    );
    rt.block_on(async {
        bare.stop();
        agent.stop();
        hub.stop();
    });
}

const SINK_BATCHES: usize = 256;

fn sink_case(samples: usize, counts: &Counts, rows: &mut Vec<Row>, notes: &mut String) {
    let kinds = [
        Kind::Raw,
        Kind::RawWrapped,
        Kind::Nested(0),
        Kind::Nested(1),
        Kind::Nested(2),
    ];
    let mut pipes: Vec<Pipe> = kinds.iter().map(|k| Pipe::new(*k)).collect();
    for p in &mut pipes {
        p.same_thread(8);
    }
    let mut s = Samples::new(&["raw", "raw wrapped", "root sink", "nested 1", "nested 2"]);
    interleave(
        samples,
        kinds.len(),
        |v| ns(pipes[v].same_thread(SINK_BATCHES), SINK_BATCHES * BATCH),
        &mut s,
    );
    // Cross-thread: a producer thread, the host reading on a runtime.
    let rt = runtime(Flavor::Current);
    let n = 1 << 20;
    let cross_kinds = [Kind::Raw, Kind::Nested(1)];
    let mut c = Samples::new(&["raw", "nested 1"]);
    interleave(
        samples.min(7),
        2,
        |v| ns(sink::cross_thread(&rt, cross_kinds[v], n), n),
        &mut c,
    );
    let alloc = |k: &str| counts.get(k).copied().unwrap_or(f64::NAN);
    let allocs = [
        alloc("alloc.raw"),
        alloc("alloc.wrapped"),
        alloc("alloc.nested0"),
        alloc("alloc.nested1"),
        alloc("alloc.nested2"),
    ];
    let per_level = allocs[3] - allocs[2];
    let per_level_2 = (allocs[4] - allocs[2]) / 2.0;
    let rate = |ns_per: f64| 1e9 / ns_per;
    let nested_rate = rate(s.median(3));
    let cross_rate = rate(c.median(1));
    rows.push(Row {
        case: "3. event through 1 nesting level, emit+read on one thread".into(),
        ours: format!(
            "{} ({:.1} M events/s)",
            fmt_ns(s.median(3)),
            nested_rate / 1e6
        ),
        floors: format!(
            "raw channel {} · raw + hand-wrapped Child {} · root sink {}",
            fmt_ns(s.median(0)),
            fmt_ns(s.median(1)),
            fmt_ns(s.median(2))
        ),
        ratio: format!(
            "{:.2}× raw · {:.2}× hand-wrapped",
            s.ratio(3, 0),
            s.ratio(3, 1)
        ),
        target: "≥ 1,000,000 events/s".into(),
        met: met(nested_rate >= 1e6).into(),
    });
    rows.push(Row {
        case: "3. same, producer thread → host task".into(),
        ours: format!(
            "{} ({:.1} M events/s)",
            fmt_ns(c.median(1)),
            cross_rate / 1e6
        ),
        floors: format!("raw channel {}", fmt_ns(c.median(0))),
        ratio: format!("{:.2}×", c.ratio(1, 0)),
        target: "≥ 1,000,000 events/s".into(),
        met: met(cross_rate >= 1e6).into(),
    });
    rows.push(Row {
        case: "3. allocations per event per nesting level".into(),
        ours: format!("{per_level:.2} (2 levels: {per_level_2:.2}/level)"),
        floors: format!(
            "raw {:.2} · hand-wrapped {:.2} · root sink {:.2} per event",
            allocs[0], allocs[1], allocs[2]
        ),
        ratio: "—".into(),
        target: "≤ 1 per level".into(),
        met: met(per_level <= 1.0 + 1e-9 && per_level_2 <= 1.0 + 1e-9).into(),
    });
    let _ = writeln!(
        notes,
        "- sink: same-thread {samples} samples × {} events; cross-thread {} samples × {n} events; 2 levels {}",
        SINK_BATCHES * BATCH,
        samples.min(7),
        fmt_ns(s.median(4))
    );
}

/// The `key value` lines of `benches/alloc_count.rs`.
type Counts = std::collections::HashMap<String, f64>;

/// Runs `cargo bench --bench alloc_count` (a binary with a counting global
/// allocator; this one keeps the system allocator so its timings are
/// untouched) and reads its lines. Empty if cargo is not at hand.
fn alloc_counts() -> Counts {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["bench", "--quiet", "--bench", "alloc_count"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(std::process::Stdio::inherit())
        .output();
    let Ok(out) = out else {
        eprintln!("could not run `cargo bench --bench alloc_count`");
        return Counts::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

fn mem_child(kind: MemKind, n: usize) -> f64 {
    let exe = std::env::current_exe().expect("this executable");
    let out = Command::new(exe)
        .args(["--mem", kind.name(), &n.to_string()])
        .output()
        .expect("run a memory measurement");
    assert!(
        out.status.success(),
        "memory measurement {} failed: {}",
        kind.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim().parse::<f64>().expect("bytes") / n as f64
}

fn mem_case(counts: &Counts, rows: &mut Vec<Row>, notes: &mut String) {
    let reps = 3;
    let agents = 10_000;
    let mut a = Samples::new(&["bare", "agent"]);
    interleave(
        reps,
        2,
        |v| mem_child([MemKind::BareActors, MemKind::Agents][v], agents),
        &mut a,
    );
    let threads = env_usize("BENCH_THREADS", 10_000);
    let mut t = Samples::new(&["bare", "threads", "shared gate", "protocol"]);
    interleave(
        reps,
        4,
        |v| {
            let kind = [
                MemKind::BareThreads,
                MemKind::Threads,
                MemKind::SharedGateThreads,
                MemKind::ProtocolThreads,
            ][v];
            mem_child(kind, threads)
        },
        &mut t,
    );
    let per_agent = a.median(1);
    rows.push(Row {
        case: format!("4. RSS per idle Agent ({agents} spawned)"),
        ours: fmt_bytes(per_agent),
        floors: format!("idle bare ractor actor {}", fmt_bytes(a.median(0))),
        ratio: format!("{:.2}×", a.ratio(1, 0)),
        target: "≤ 15 KiB".into(),
        met: met(per_agent <= 15.0 * 1024.0).into(),
    });
    let scaled = if threads == 10_000 {
        String::new()
    } else {
        format!(", scaled from {threads}")
    };
    for (v, how) in [(1, "a gate per thread (default)"), (2, "one shared gate")] {
        let per_thread = t.median(v);
        let at_10k = per_thread * 10_000.0;
        rows.push(Row {
            case: format!("4. RSS of 10,000 threads × (parent + 3 children), {how}{scaled}"),
            ours: format!(
                "{} ({} per thread)",
                fmt_bytes(at_10k),
                fmt_bytes(per_thread)
            ),
            floors: format!(
                "6 bare actors per thread: {}",
                fmt_bytes(t.median(0) * 10_000.0)
            ),
            ratio: format!("{:.2}×", t.ratio(v, 0)),
            target: "≤ 600 MiB".into(),
            met: met(at_10k <= 600.0 * 1024.0 * 1024.0).into(),
        });
    }
    rows.push(Row {
        case: format!(
            "4. RSS of 10,000 threads, a gate each, against the design's own floor{scaled}"
        ),
        ours: fmt_bytes(t.median(1) * 10_000.0),
        floors: format!(
            "its protocol in bare ractor (6 actors, 3 turn tasks, a channel): {}",
            fmt_bytes(t.median(3) * 10_000.0)
        ),
        ratio: format!("{:.2}×", t.ratio(1, 3)),
        target: "—".into(),
        met: "—".into(),
    });
    let heap = |k: &str| {
        let bytes = counts
            .get(&format!("heap.{k}"))
            .copied()
            .unwrap_or(f64::NAN);
        let blocks = counts
            .get(&format!("blocks.{k}"))
            .copied()
            .unwrap_or(f64::NAN);
        format!("{} in {blocks:.0} blocks", fmt_bytes(bytes))
    };
    let _ = writeln!(
        notes,
        "- heap held per unit (counting allocator, current-thread runtime): bare actor {}; gate {}; idle agent {}; parent+hub+gate {}; thread with 3 children {}",
        heap("bare-actors"),
        heap("gates"),
        heap("agents"),
        heap("parents"),
        heap("threads")
    );
    let _ = writeln!(
        notes,
        "- memory: {reps} fresh processes per variant, interleaved; {agents} agents; {threads} threads (BENCH_THREADS)"
    );
}

fn capacity_case(samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
    let rt = runtime(Flavor::Multi);
    let samples = samples.clamp(3, 7);
    let mut s = Samples::new(&["ours cap 1", "ours cap 4", "semaphore 1", "semaphore 4"]);
    interleave(
        samples,
        4,
        |v| {
            let d = rt.block_on(async {
                match v {
                    0 => capacity::ours(1).await,
                    1 => capacity::ours(4).await,
                    2 => capacity::floor(1).await,
                    _ => capacity::floor(4).await,
                }
            });
            capacity::calls_per_second(d)
        },
        &mut s,
    );
    let ours = s.ratio(1, 0);
    let floor = s.ratio(3, 2);
    rows.push(Row {
        case: format!(
            "5. gate capacity 4 vs 1: {} agents, 10 ms model (real tokio time)",
            capacity::AGENTS
        ),
        ours: format!(
            "{ours:.2}× ({:.0} → {:.0} calls/s)",
            s.median(0),
            s.median(1)
        ),
        floors: format!(
            "Semaphore {floor:.2}× ({:.0} → {:.0}); ideal 4×",
            s.median(2),
            s.median(3)
        ),
        ratio: format!("{:.2} of the floor's speed-up", ours / floor),
        target: "≥ 3.6×".into(),
        met: met(ours >= 3.6).into(),
    });
    let _ = writeln!(
        notes,
        "- capacity: {samples} samples × {} model calls per variant",
        capacity::AGENTS * capacity::TURNS
    );
}

fn rpc_case(samples: usize, rows: &mut Vec<Row>) {
    let rt = runtime(Flavor::Multi);
    let n = 20_000;
    let mut s = Samples::new(&["mpsc+oneshot", "call!"]);
    interleave(
        samples,
        2,
        |v| {
            rt.block_on(async {
                let start = std::time::Instant::now();
                if v == 0 {
                    rpc::mpsc_calls(n).await
                } else {
                    rpc::ractor_calls(n).await
                }
                ns(start.elapsed(), n)
            })
        },
        &mut s,
    );
    rows.push(Row {
        case: "ref. one request/reply (2 workers)".into(),
        ours: format!("ractor call! {}", fmt_ns(s.median(1))),
        floors: format!("tokio mpsc + oneshot {}", fmt_ns(s.median(0))),
        ratio: format!("{:.2}×", s.ratio(1, 0)),
        target: "— (floor of the floors)".into(),
        met: "—".into(),
    });
}

// ------------------------------------------------------ single-case mode

/// Cases for `--case`, with the op counts callgrind runs them at.
const CASES: [(&str, usize, usize); 13] = [
    ("gate-mutex", 1_000, 3_000),
    ("gate-bare", 1_000, 3_000),
    ("gate-ours", 1_000, 3_000),
    ("spawn-bare", 100, 300),
    ("spawn-agent", 100, 300),
    ("spawn-hub", 100, 300),
    ("spawn-protocol", 100, 300),
    ("sink-raw", 16 * BATCH, 48 * BATCH),
    ("sink-wrapped", 16 * BATCH, 48 * BATCH),
    ("sink-root", 16 * BATCH, 48 * BATCH),
    ("sink-nested1", 16 * BATCH, 48 * BATCH),
    ("call-mpsc", 2_000, 6_000),
    ("call-ractor", 2_000, 6_000),
];

fn run_case(name: &str, ops: usize) {
    let rt = runtime(Flavor::Current);
    rt.block_on(async {
        match name {
            "gate-mutex" => run_gate(&TokioMutex::default(), ops).await,
            "gate-bare" => run_gate(&Bare::spawn().await, ops).await,
            "gate-ours" => run_gate(&Ours::spawn().await, ops).await,
            "spawn-bare" => {
                let mut c = BareCase::new().await;
                c.run(ops).await;
            }
            "spawn-agent" => {
                let mut c = AgentCase::new().await;
                c.run(ops).await;
            }
            "spawn-hub" => {
                let mut c = HubCase::new().await;
                c.run(ops).await;
            }
            "spawn-protocol" => {
                let mut c = ProtocolCase::new().await;
                c.run(ops).await;
            }
            "sink-raw" => drop(Pipe::new(Kind::Raw).same_thread(ops / BATCH)),
            "sink-wrapped" => drop(Pipe::new(Kind::RawWrapped).same_thread(ops / BATCH)),
            "sink-root" => drop(Pipe::new(Kind::Nested(0)).same_thread(ops / BATCH)),
            "sink-nested1" => drop(Pipe::new(Kind::Nested(1)).same_thread(ops / BATCH)),
            "call-mpsc" => rpc::mpsc_calls(ops).await,
            "call-ractor" => rpc::ractor_calls(ops).await,
            other => panic!("unknown case {other}"),
        }
    });
}

async fn run_gate<L: Lock>(lock: &L, ops: usize) {
    let round = gate::round(lock, ops / WAITERS).await;
    assert!(round.exact_fifo(), "FIFO order broken");
}

/// Instructions per op of each case: callgrind at two op counts, the
/// difference divided by the difference of ops (set-up cancels out).
fn callgrind_table() -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let probe = Command::new("valgrind").arg("--version").output().ok()?;
    if !probe.status.success() {
        return None;
    }
    let count = |case: &str, ops: usize| -> f64 {
        let out = Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                "--dump-instr=no",
            ])
            .arg(&exe)
            .args(["--case", case, "--ops", &ops.to_string()])
            .output()
            .expect("run valgrind");
        let text = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "callgrind {case} failed: {text}");
        text.lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|n| n.trim().parse::<f64>().ok())
            .expect("callgrind's Collected line")
    };
    let mut per_op = std::collections::HashMap::new();
    for (case, lo, hi) in CASES {
        let i = (count(case, hi) - count(case, lo)) / (hi - lo) as f64;
        eprintln!("callgrind {case}: {i:.0} instructions/op");
        per_op.insert(case, i);
    }
    let k = |c: &str| per_op[c];
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| case (current-thread runtime) | ours instr/op | floor instr/op | ratio |"
    );
    let _ = writeln!(t, "|---|---:|---:|---:|");
    let mut line = |case: &str, ours: f64, floor_name: &str, floor: f64| {
        let _ = writeln!(
            t,
            "| {case} | {ours:.0} | {floor_name} {floor:.0} | {:.2}× |",
            ours / floor
        );
    };
    line(
        "1. gate cycle, 100 waiters",
        k("gate-ours"),
        "Mutex",
        k("gate-mutex"),
    );
    line(
        "1. gate cycle, 100 waiters",
        k("gate-ours"),
        "bare ractor gate",
        k("gate-bare"),
    );
    line(
        "1. bare gate (floor) vs Mutex",
        k("gate-bare"),
        "Mutex",
        k("gate-mutex"),
    );
    line(
        "2. spawn → event → stop, Hub",
        k("spawn-hub"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "2. spawn → event → stop, Hub",
        k("spawn-hub"),
        "its protocol in bare ractor",
        k("spawn-protocol"),
    );
    line(
        "2. the protocol in bare ractor (floor)",
        k("spawn-protocol"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "2. spawn → event → stop, agent layer",
        k("spawn-agent"),
        "bare",
        k("spawn-bare"),
    );
    line(
        "3. event, 1 nesting level",
        k("sink-nested1"),
        "raw channel",
        k("sink-raw"),
    );
    line(
        "3. event, 1 nesting level",
        k("sink-nested1"),
        "hand-wrapped",
        k("sink-wrapped"),
    );
    line(
        "3. event, root sink",
        k("sink-root"),
        "raw channel",
        k("sink-raw"),
    );
    line(
        "ref. call! vs mpsc+oneshot",
        k("call-ractor"),
        "mpsc+oneshot",
        k("call-mpsc"),
    );
    Some(t)
}

// ------------------------------------------------------------------- main

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
