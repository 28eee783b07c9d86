//! The timed cases, each beside its floor, and the memory case.

use super::*;

pub(super) const GATE_CYCLES: usize = 20;

pub(super) fn gate_case(flavor: Flavor, samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
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

pub(super) const SPAWN_CYCLES: usize = 200;

pub(super) fn spawn_case(flavor: Flavor, samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
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

pub(super) const SINK_BATCHES: usize = 256;

pub(super) fn sink_case(samples: usize, counts: &Counts, rows: &mut Vec<Row>, notes: &mut String) {
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
pub(super) fn alloc_counts() -> Counts {
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

pub(super) fn mem_child(kind: MemKind, n: usize) -> f64 {
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

pub(super) fn mem_case(counts: &Counts, rows: &mut Vec<Row>, notes: &mut String) {
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

pub(super) fn capacity_case(samples: usize, rows: &mut Vec<Row>, notes: &mut String) {
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

pub(super) fn rpc_case(samples: usize, rows: &mut Vec<Row>) {
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
