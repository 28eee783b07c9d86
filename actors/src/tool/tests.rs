//! The registry's and `run_tool`'s unit tests.

use super::*;

/// A tool named `calculator` that answers its arguments.
struct Calculator;
impl Tool for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }
    fn description(&self) -> String {
        "answers its arguments".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        Box::pin(async move { Ok(call.arguments) })
    }
}

struct Panicky;
impl Tool for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }
    fn description(&self) -> String {
        "panics".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async { panic!("disk on fire") })
    }
}

fn ctx(arguments: &str) -> ToolCallContext {
    ToolCallContext {
        tool_use_id: ToolUseId::new("c1"),
        arguments: arguments.into(),
        agent_id: AgentId::new("parent"),
        depth: 0,
        available_tools: Arc::from(vec![]),
        slot: Default::default(),
        left: None,
    }
}

#[tokio::test]
async fn a_panicking_tool_becomes_a_sentence() {
    let tool: Arc<dyn Tool> = Arc::new(Panicky);
    let out = run_tool(&tool, "panicky", ctx("{}")).await;
    assert!(out.is_error);
    assert!(
        out.output.contains("`panicky` crashed (disk on fire)"),
        "{}",
        out.output
    );
}

#[test]
fn subset_names_the_unknown_tool_and_the_available_ones() {
    let registry = ToolRegistry::new().with(Calculator);
    let err = registry.subset(&["calculator", "shell"]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "there is no tool named `shell`; the tools available are: calculator"
    );
    assert_eq!(
        registry.subset(&["calculator"]).unwrap().names(),
        ["calculator"]
    );
    assert!(registry.without("calculator").is_empty());
}

/// The names are kept with the tools: every change to the registry
/// keeps them in step (order added, a replacement in place), and an
/// agent's copy shares them.
#[test]
fn the_kept_names_follow_every_change() {
    let registry = ToolRegistry::new().with(Calculator).with(Panicky);
    assert_eq!(registry.names(), ["calculator", "panicky"]);
    // Replaced in place: same name, same position.
    let replaced = registry.clone().with(Calculator);
    assert_eq!(replaced.names(), ["calculator", "panicky"]);
    assert_eq!(registry.without("calculator").names(), ["panicky"]);
    assert_eq!(
        registry.subset(&["panicky", "calculator"]).unwrap().names(),
        ["panicky", "calculator"]
    );
    assert!(ToolRegistry::new().names().is_empty());
    // Shared, not copied, by every clone.
    let copy = registry.clone();
    assert!(Arc::ptr_eq(&registry.shared_names(), &copy.shared_names()));
    assert_eq!(&*registry.shared_names(), ["calculator", "panicky"]);
}

/// A tool whose `name()` says something else each time it is asked.
struct Shifty(std::sync::atomic::AtomicUsize);

impl Tool for Shifty {
    fn name(&self) -> &str {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        ["first", "second", "third"][n % 3]
    }
    fn description(&self) -> String {
        "its name shifts".into()
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn call(&self, call: ToolCallContext) -> ToolFuture {
        Box::pin(async move { Ok(call.arguments) })
    }
}

/// The registry asked a tool's `name()` again for its index, its names,
/// each spec and each copy: a tool whose name changed between calls (or
/// whose `spec()` named another) was listed, offered and looked up under
/// different names — the model called a name the registry did not know.
/// The name is read once, when the tool is added.
#[test]
fn a_tool_is_known_by_the_name_it_was_added_with() {
    let registry = ToolRegistry::new().with(Shifty(std::sync::atomic::AtomicUsize::new(0)));
    let names = registry.names();
    assert_eq!(names, ["first"]);
    let specs: Vec<String> = registry.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(specs, names);
    assert_eq!(registry.specs()[0].name, "first");
    assert!(registry.get("first").is_some());
    let copy = registry.subset(&["first"]).unwrap().without("nothing");
    assert_eq!(copy.names(), names);
    assert_eq!(copy.specs()[0].name, "first");
}

/// A tool whose `name()` says another thing after registration, or
/// panics: the sentences of its calls named what `name()` said then (a
/// call to `first` read "the tool `second` failed"), and a `name()` that
/// panicked, asked again outside every guard, failed the whole turn. The
/// registered name is used.
#[tokio::test]
async fn a_calls_sentences_name_the_tool_as_registered() {
    struct Shifty(std::sync::atomic::AtomicBool);
    impl Tool for Shifty {
        fn name(&self) -> &str {
            if self.0.swap(true, std::sync::atomic::Ordering::SeqCst) {
                panic!("name asked again")
            }
            "first"
        }
        fn description(&self) -> String {
            String::new()
        }
        fn parameters(&self) -> serde_json::Value {
            serde_json::json!({"type": "object"})
        }
        fn call(&self, _call: ToolCallContext) -> ToolFuture {
            Box::pin(async { Err(ToolError::Failed("no".into())) })
        }
    }
    let tool: Arc<dyn Tool> = Arc::new(Shifty(std::sync::atomic::AtomicBool::new(true)));
    let out = run_tool(&tool, "first", ctx("{}")).await;
    assert!(out.is_error);
    assert!(out.output.contains("`first`"), "{}", out.output);
}

/// Cost that grows with the host's tool count (review: surprise panics):
/// `without` added the tools it kept one at a time, each copying every
/// tool, name and index entry so far — n² allocations, three times in
/// the hub's handler for every request a child made. Linear now, and a
/// name not there takes nothing.
#[test]
fn without_is_linear_in_the_tools() {
    let registry = |n: usize| {
        (0..n).fold(ToolRegistry::new(), |r, i| {
            r.with_named(Arc::new(Calculator), format!("t{i}"))
        })
    };
    let cost = |n: usize| {
        let registry = registry(n);
        allocation_counter::measure(|| drop(registry.without("t0"))).count_total
    };
    let (small, large) = (cost(100), cost(400));
    assert!(
        large < 6 * small,
        "{small} → {large} allocations for 4× the tools"
    );
    let registry = registry(400);
    let kept = registry.without("t1");
    assert_eq!(kept.len(), 399);
    assert!(!kept.contains("t1") && kept.contains("t0") && kept.contains("t399"));
    assert_eq!(kept.names()[1], "t2", "the order kept");
    assert_eq!(
        allocation_counter::measure(|| drop(registry.without("use_agent"))).count_total,
        0,
        "nothing to take out"
    );
}
