//! What a killed process leaves: a writer killed mid-write never leaves a
//! torn file (a second process), and the wakes it owed come back in order.

use super::*;

const CHILD_DIR_VAR: &str = "SUBAGENTS_STORE_CRASH_CHILD_DIR";
const CHILD_START_VAR: &str = "SUBAGENTS_STORE_CRASH_CHILD_START";
const CHILD_IDS: u32 = 5;

/// Not a test: the child process of
/// `killed_writer_never_leaves_a_torn_file`. Without its environment
/// variable it does nothing.
#[test]
#[ignore = "helper process for killed_writer_never_leaves_a_torn_file"]
fn crash_child_saves_in_a_loop() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let start: u32 = std::env::var(CHILD_START_VAR)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let (store, _) = EnvelopeStore::open(dir, clock(T0)).unwrap();
    let mut out = std::io::stdout().lock();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seq = start;
    while Instant::now() < deadline {
        let id = format!("agent_{}", seq % CHILD_IDS);
        let mut e = envelope(&id, T0, Some(T0));
        e.tool_calls = seq;
        // Varying sizes, some spanning several pages: an in-place write
        // killed midway would show.
        e.result = Some("r".repeat((seq as usize * 977) % 20_000));
        store.save(&e).unwrap();
        writeln!(out, "saved {id} {seq}").unwrap();
        out.flush().unwrap();
        seq += 1;
    }
}

#[test]
fn killed_writer_never_leaves_a_torn_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("envelopes");
    let exe = std::env::current_exe().unwrap();
    let started = Instant::now();
    // The last sequence number each id was reported saved with.
    let mut reported: HashMap<String, u32> = HashMap::new();

    for round in 0..20u32 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash::crash_child_saves_in_a_loop",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_DIR_VAR, &dir)
            // Rounds start far apart (so sequence numbers only grow) and
            // on a different id each (1_000_003 % 5 == 3).
            .env(CHILD_START_VAR, (round * 1_000_003).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("saved ") && tx.send(line).is_err() {
                    break;
                }
            }
        });

        // Wait until it is writing, then kill it at a varying moment
        // (not in step with its output).
        let mut lines = vec![
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("child stalled in round {round}: {e}")),
        ];
        std::thread::sleep(Duration::from_micros(u64::from((round * 7919) % 15_000)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        reader.join().unwrap();
        // Saves reported between our last read and the kill count too.
        lines.extend(rx.try_iter());
        for line in lines {
            let mut parts = line.split_whitespace().skip(1);
            let (Some(id), Some(seq)) = (parts.next(), parts.next()) else {
                panic!("bad line {line:?}");
            };
            reported.insert(id.to_owned(), seq.parse().unwrap());
        }

        // No torn file: every .json parses as an envelope.
        for name in json_files(&dir) {
            let bytes = fs::read(dir.join(&name)).unwrap();
            serde_json::from_slice::<Envelope>(&bytes)
                .unwrap_or_else(|e| panic!("round {round}: {name} is torn: {e}"));
        }
        // And the store agrees, with every reported write readable.
        let (store, report) = EnvelopeStore::open(&dir, clock(T0)).unwrap();
        assert!(report.corrupt.is_empty(), "round {round}: {report:?}");
        assert!(report.unreadable.is_empty(), "round {round}: {report:?}");
        for (id, seq) in &reported {
            let got = store
                .get(&AgentId::new(id.as_str()))
                .unwrap_or_else(|| panic!("round {round}: {id} lost"));
            assert!(
                got.tool_calls >= *seq,
                "round {round}: {id} has {} but {seq} was reported saved",
                got.tool_calls
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "crash test is taking too long"
        );
    }
    // Each round reported at least its first save, on its own first id.
    assert_eq!(reported.len(), CHILD_IDS as usize);
}

/// The wakes a killed process owed go out in the order their children
/// finished, then by number — not by number alone (`agent_10` after
/// `agent_2`, numerically).
#[test]
fn owed_wakes_come_in_the_order_the_children_finished() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path(), &clock(T0));
        // (`agent_012`, no hub's number, after the numbered ones in a tie,
        // as every list of the store has it.)
        for (id, finished) in [
            ("agent_1", 300),
            ("agent_012", 100),
            ("agent_100", 100),
            ("agent_10", 100),
            ("agent_2", 100),
        ] {
            let mut owed = envelope(id, T0, Some(T0 + finished));
            owed.background = true;
            owed.wake_owed = true;
            store.save(&owed).unwrap();
        }
    }
    let store = open(tmp.path(), &clock(T0 + 1_000));
    let owed: Vec<String> = store.owed_wakes().iter().map(|id| id.to_string()).collect();
    assert_eq!(
        owed,
        ["agent_2", "agent_10", "agent_100", "agent_012", "agent_1"]
    );
}
