//! What an answer leaves: an id of its own for each of its calls, the
//! text of a partial result when a limit cut the turn, and the tool
//! choice the next call may still send.

use subagents_messages::{LimitKind, Limits, ModelRequest, Role, ToolCall, ToolChoice, ToolUseId};

use crate::agent::turn_state::Progress;

/// Gives every call of one answer an id of its own: an empty id becomes
/// `call_<n>` (its place in the answer), a repeated one `<id>#<k>`. A
/// model that repeats an id in one answer got two results under one id
/// in the conversation it read back, and servers refuse that history
/// (DeepSeek: 400 "Duplicate value for 'tool_call_id'"), so every later
/// request failed. Each id's next suffix is remembered: an answer of N
/// calls under one id took N²/2 steps, in a loop no stop or wall clock
/// can cut (it never waits).
/// Returns how many taken ids it tried past (linear in the calls).
pub(crate) fn unique_ids(calls: &mut [ToolCall]) -> usize {
    let mut tried = 0;
    if calls.len() == 1 && !calls[0].id.as_str().is_empty() {
        return tried;
    }
    let mut taken = std::collections::BTreeSet::new();
    let mut next_suffix = std::collections::BTreeMap::<String, u64>::new();
    for (n, call) in calls.iter_mut().enumerate() {
        let base = match call.id.as_str() {
            "" => format!("call_{n}"),
            id => id.to_owned(),
        };
        let mut id = base.clone();
        if taken.contains(&id) {
            let k = next_suffix.entry(base.clone()).or_insert(1);
            loop {
                tried += 1;
                *k += 1;
                id = format!("{base}#{k}");
                if !taken.contains(&id) {
                    break;
                }
            }
        }
        if id != call.id.as_str() {
            call.id = ToolUseId::new(id.clone());
        }
        taken.insert(id);
    }
    tried
}

/// The tools a partial result names: each once, in the order first used,
/// a count after one used more than once, at most [`TOOLS_NAMED`] of them.
/// One name per call, a turn of 5,000 calls wrote all 5,000.
fn tools_line(used: &[String]) -> String {
    let mut order: Vec<(&str, usize)> = Vec::new();
    let mut at = std::collections::BTreeMap::<&str, usize>::new();
    for name in used {
        match at.get(name.as_str()) {
            Some(&i) => order[i].1 += 1,
            None => {
                at.insert(name, order.len());
                order.push((name, 1));
            }
        }
    }
    if order.is_empty() {
        return String::new();
    }
    let mut named: Vec<String> = order
        .iter()
        .take(TOOLS_NAMED)
        .map(|&(name, n)| match n {
            1 => name.to_owned(),
            n => format!("{name} ×{n}"),
        })
        .collect();
    if order.len() > TOOLS_NAMED {
        named.push(format!("{} more", order.len() - TOOLS_NAMED));
    }
    format!(" ({})", named.join(", "))
}

/// How many tools a partial result names at most.
const TOOLS_NAMED: usize = 10;

/// The text of a partial result: what was done, and which limit hit.
pub(crate) fn partial_result(limit: LimitKind, limits: &Limits, progress: &Progress) -> String {
    let detail = match limit {
        LimitKind::ModelCalls => format!("{} model calls", limits.max_model_calls),
        LimitKind::Tokens => format!(
            "{} tokens; {} used",
            limits.token_budget,
            progress.usage.total()
        ),
        LimitKind::WallClock => format!("{} s", limits.wall_clock.as_secs_f64()),
        LimitKind::Output => format!(
            "finish_reason `{}`",
            progress.cut.as_deref().unwrap_or("length")
        ),
    };
    let detail = match (limit, progress.usage_estimated, progress.usage_reported) {
        // Of the turn, not of the call that crossed the budget: a call
        // that reported its usage read "no usage reported for the call it
        // cut" once an earlier one had been estimated. Some output, not a
        // call: a call whose usage came first (the prompt's) reports and
        // is estimated for what it wrote after ("a call reported no
        // usage" was false of it).
        (LimitKind::Tokens, true, true) => {
            format!("{detail}, partly estimated: some output of the turn no server counted")
        }
        (LimitKind::Tokens, true, false) => {
            format!("{detail}, estimated: no call of the turn reported usage")
        }
        _ => detail,
    };
    let tools = tools_line(&progress.tools_used);
    let last = if progress.last_text.trim().is_empty() {
        "no answer was written yet".to_owned()
    } else {
        format!("the last thing written was: {}", progress.last_text.trim())
    };
    // An answer the server cut for another reason than its output limit
    // (its content filter) says so, not "the model's output limit".
    let by = match progress.cut.as_deref() {
        Some(reason)
            // In any case: a gateway passes Gemini's `MAX_TOKENS` through.
            if limit == LimitKind::Output
                && !["length", "max_tokens"].iter().any(|r| r.eq_ignore_ascii_case(reason)) =>
        {
            "server, which cut the answer".to_owned()
        }
        _ => limit.to_string(),
    };
    format!(
        "Partial result: stopped by the {by} ({detail}) after {} model call(s) and {} tool call(s){tools}; {last}",
        progress.model_calls, progress.tool_calls
    )
}

/// What a turn stopped by the host (or its requester) answers: what it
/// did, and what it wrote last (the result takes that text's place in the
/// conversation). Written piece by piece: every stopped child writes it,
/// and `format!` cost it half again.
pub(crate) fn stopped_result(progress: &Progress) -> String {
    let last = progress.last_text.trim();
    let mut text = String::with_capacity(96 + last.len());
    text.push_str("Stopped before finishing, after ");
    push_count(&mut text, progress.model_calls);
    text.push_str(" model call(s) and ");
    push_count(&mut text, progress.tool_calls);
    text.push_str(" tool call(s).");
    if !last.is_empty() {
        text.push_str(" The last thing written was: ");
        text.push_str(last);
    }
    text
}

/// `n` in decimal.
fn push_count(text: &mut String, n: u32) {
    let (digits, at) = crate::hub::decimal(u64::from(n));
    text.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// A choice that forces a tool (`required`, a named one) holds only
/// until the turn has tool results: sent again, it forced a tool after
/// every result, so no turn could answer — each ran to its model-call
/// limit, the forced tool (a POST, a write) run at every call. Reset, the
/// server's default (`auto`) applies, as agent loops elsewhere do
/// (openai-agents' `reset_tool_choice`).
///
/// A forced function the call does not offer (a child narrowed to other
/// tools than its host's `child_request_options` force) is not sent
/// either: servers refuse the pair (400) and every call of the turn
/// failed.
pub(crate) fn honoured_choice_reset(request: &mut ModelRequest) {
    if let Some(ToolChoice::Function(name)) = &request.options.tool_choice
        && !request.tools.iter().any(|t| &t.name == name)
    {
        request.options.tool_choice = None;
        return;
    }
    let forced = matches!(
        request.options.tool_choice,
        Some(ToolChoice::Required | ToolChoice::Function(_))
    );
    // Tool results since the last user message (the turn's input, a
    // message sent to it): the forced call was made.
    let answered = || {
        request
            .messages
            .iter()
            .rev()
            .take_while(|m| m.role != Role::User)
            .any(|m| m.role == Role::Tool)
    };
    if forced && answered() {
        request.options.tool_choice = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_result_reads_as_written_with_format() {
        for (calls, tools, last) in [(0, 0, ""), (1, 0, "  x "), (10, 4_294_967_295, "y")] {
            let progress = Progress {
                model_calls: calls,
                tool_calls: tools,
                last_text: last.into(),
                ..Progress::default()
            };
            let mut expected = format!(
                "Stopped before finishing, after {calls} model call(s) and {tools} tool call(s)."
            );
            if !last.trim().is_empty() {
                expected.push_str(" The last thing written was: ");
                expected.push_str(last.trim());
            }
            assert_eq!(stopped_result(&progress), expected);
        }
    }
    use std::time::Duration;
    use subagents_messages::Usage;

    #[test]
    fn every_call_of_an_answer_gets_an_id_of_its_own() {
        let call = |id: &str| ToolCall {
            id: ToolUseId::new(id),
            name: "t".into(),
            arguments: "{}".into(),
            extra_content: None,
        };
        let mut calls = vec![
            call("a"),
            call("a"),
            call(""),
            call("a#2"),
            call("b"),
            call("a"),
        ];
        unique_ids(&mut calls);
        let ids: Vec<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "a#2", "call_2", "a#2#2", "b", "a#3"]);
        let mut one = vec![call("")];
        unique_ids(&mut one);
        assert_eq!(one[0].id.as_str(), "call_0");
    }

    /// An answer of N calls under one id: each id's next suffix is
    /// remembered, so the candidates tried are linear in the calls (the
    /// old loop tried N²/2, in a step no stop or wall clock cuts).
    #[test]
    fn many_calls_under_one_id_are_renamed_in_linear_steps() {
        let mut calls: Vec<ToolCall> = (0..20_000)
            .map(|_| ToolCall {
                id: ToolUseId::new("x"),
                name: "t".into(),
                arguments: "{}".into(),
                extra_content: None,
            })
            .collect();
        let tried = unique_ids(&mut calls);
        assert!(tried <= 2 * calls.len(), "{tried} candidates tried");
        assert_eq!(calls[19_999].id.as_str(), "x#20000");
        let ids: std::collections::BTreeSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), calls.len());
    }

    /// A turn cut after thousands of calls names each tool once, with its
    /// count, and at most ten of them.
    #[test]
    fn a_partial_result_names_each_tool_once_with_its_count() {
        let mut used: Vec<String> = vec!["calculator".into(); 5_000];
        used.push("fetch_title".into());
        assert_eq!(tools_line(&used), " (calculator ×5000, fetch_title)");
        let many: Vec<String> = (0..25).map(|i| format!("t{i}")).collect();
        let line = tools_line(&many);
        assert!(line.ends_with("t9, 15 more)"), "{line}");
        assert_eq!(tools_line(&[]), "");
    }

    #[test]
    fn partial_result_names_the_limit_and_the_work_done() {
        let progress = Progress {
            model_calls: 3,
            tool_calls: 2,
            usage: Usage {
                prompt_tokens: 10,
                completion_tokens: 5,
            },
            tools_used: vec!["calculator".into(), "fetch_title".into()],
            last_text: "Half way there.".into(),
            ..Progress::default()
        };
        let limits = Limits {
            max_model_calls: 3,
            token_budget: 100,
            wall_clock: Duration::from_secs(30),
        };
        let text = partial_result(LimitKind::ModelCalls, &limits, &progress);
        assert_eq!(
            text,
            "Partial result: stopped by the model-call limit (3 model calls) after 3 model call(s) and 2 tool call(s) (calculator, fetch_title); the last thing written was: Half way there."
        );
        let text = partial_result(LimitKind::WallClock, &limits, &Progress::default());
        assert!(text.contains("wall-clock limit (30 s)"), "{text}");
        assert!(text.contains("no answer was written yet"), "{text}");
        let text = partial_result(LimitKind::Tokens, &limits, &progress);
        assert!(
            text.contains("token budget (100 tokens; 15 used)"),
            "{text}"
        );
        // Cut by the server's content filter: not "the model's output
        // limit".
        let filtered = Progress {
            cut: Some("content_filter".into()),
            ..Progress::default()
        };
        let text = partial_result(LimitKind::Output, &limits, &filtered);
        assert!(
            text.starts_with("Partial result: stopped by the server, which cut the answer (finish_reason `content_filter`)"),
            "{text}"
        );
        // A gateway's `MAX_TOKENS` (Gemini's spelling, read in any case
        // since this session) is the output limit, not the server's cut.
        let gemini = Progress {
            cut: Some("MAX_TOKENS".into()),
            ..Progress::default()
        };
        let text = partial_result(LimitKind::Output, &limits, &gemini);
        assert!(
            text.starts_with("Partial result: stopped by the model's output limit"),
            "{text}"
        );
    }
}
