//! What a model call costs when its server said nothing (yet): an
//! estimate at about four characters a token, of its prompt and of what
//! it wrote.

use subagents_messages::{ChatMessage, Usage};

use super::TurnState;

impl TurnState {
    /// An estimate of the tokens of the call in flight, cut after
    /// `streamed` characters — none if it streamed nothing (a call refused
    /// or cut before a byte may never have reached the model): its prompt
    /// (`prompt_chars`) and what it streamed, at about four
    /// characters a token; once it counted, what it streamed after the
    /// count only.
    pub(crate) fn call_estimate(&self, streamed: u64) -> Option<Usage> {
        if self.call_counted {
            let more = streamed.saturating_sub(u64::from(self.counted_chars));
            return (more > 0).then(|| Usage {
                prompt_tokens: 0,
                completion_tokens: more.div_ceil(4),
            });
        }
        if streamed == 0 {
            return None;
        }
        Some(Usage {
            prompt_tokens: self.prompt_chars().div_ceil(4),
            completion_tokens: streamed.div_ceil(4),
        })
    }

    /// Characters of the prompt the call in flight sent: the system prompt
    /// and the tools' specs, and the conversation — each message's text
    /// and its tool calls' names and arguments (the text alone read a
    /// write of 40,000 characters of arguments as none).
    fn prompt_chars(&self) -> u64 {
        let message = |m: &ChatMessage| {
            let calls = m.tool_calls.iter();
            let calls = calls.map(|c| (c.name.len() + c.arguments.chars().count()) as u64);
            (m.content.chars().count() as u64).saturating_add(calls.sum())
        };
        let conversation = self
            .history
            .iter()
            .map(message)
            .fold(0u64, u64::saturating_add);
        conversation.saturating_add(self.prompt_fixed)
    }

    /// Characters of its whole tool calls beyond its hidden output (the
    /// OpenAI adapter says their arguments as hidden: not counted twice).
    pub(crate) fn calls_beyond_hidden(&self) -> u64 {
        u64::from(self.call_chars.saturating_sub(self.hidden_chars))
    }

    /// `streamed` characters (text and hidden) and the calls beyond the
    /// hidden: the output every hold of the call in flight counts — calls
    /// said before text too (a host's model's order: left out of the
    /// text's hold, a call of 3,500 characters then text went ~2× past
    /// the budget before the cut).
    pub(crate) fn with_calls(&self, streamed: u64) -> u64 {
        streamed.saturating_add(self.calls_beyond_hidden())
    }

    /// Characters the call in flight wrote: text, hidden, calls beyond.
    pub(crate) fn output_chars(&self) -> u64 {
        (self.streaming.chars().count() as u64)
            .saturating_add(u64::from(self.hidden_chars))
            .saturating_add(self.calls_beyond_hidden())
    }

    /// The call in flight, `so_far` tokens of output by the estimate (none
    /// once the server counted its own), against the turn's `budget`: past
    /// it (`true`), the estimate is counted and the call cut
    /// ([`TurnState::cut_over_budget`]) under the turn's lock, with what
    /// streamed.
    ///
    /// Its prompt counts too, as every other end of a call the server
    /// reported no usage for counts it: cut here, a call was charged its
    /// output alone, so one that wrote a little more was charged the
    /// whole prompt less.
    pub(crate) fn past_budget(&mut self, so_far: Option<u64>, budget: u64) -> bool {
        let Some(n) = so_far.filter(|n| self.progress.usage.total().saturating_add(*n) > budget)
        else {
            return false;
        };
        let prompt = if self.call_counted {
            0
        } else {
            self.prompt_chars().div_ceil(4)
        };
        self.progress.add_estimate(Usage {
            prompt_tokens: prompt,
            completion_tokens: n,
        });
        self.counted(self.output_chars());
        self.cut_over_budget();
        true
    }

    /// The call in flight is cut, over the budget: it counts, what it
    /// wrote so far is the last thing written, and the turn is between
    /// calls — in the step that takes the text (in a later one, a stop on
    /// another worker between the two found the text gone and the call
    /// still in flight: the result quoted nothing the host had seen).
    pub(crate) fn cut_over_budget(&mut self) {
        let text = std::mem::take(&mut self.streaming);
        self.progress.model_calls += 1;
        self.doing(super::Activity::Thinking);
        if !text.trim().is_empty() {
            self.progress.last_text = text;
        }
    }

    /// A usage came for the call in flight (`usage`: its counts so far),
    /// `output` characters of it out: what it counted is counted — the
    /// output only if it counted some of it, nothing if it counted
    /// nothing. Marked counted whatever it said, a usage said last with
    /// `completion_tokens: 0` (a server reporting the prompt alone) made
    /// the whole output free, and an all-zero one the whole call.
    pub(crate) fn usage_came(&mut self, usage: Usage, output: u64) {
        if usage.completion_tokens > 0 {
            self.counted(output);
        } else if usage.prompt_tokens > 0 {
            self.counted(0);
        }
    }

    /// After a usage came for the call in flight, `output` characters of
    /// it out: past `budget`, the call is cut there (`true`) — what no
    /// count covered of it estimated first (a prompt-only count that
    /// crossed the budget left the output it had written free).
    pub(crate) fn cut_if_past(&mut self, budget: u64, output: u64) -> bool {
        if self.progress.usage.total() <= budget {
            return false;
        }
        if let Some(uncounted) = self.call_estimate(output) {
            self.progress.add_estimate(uncounted);
            self.counted(output);
        }
        self.cut_over_budget();
        true
    }

    /// The call in flight counted its tokens with `chars` characters of
    /// its output out.
    pub(crate) fn counted(&mut self, chars: u64) {
        self.call_counted = true;
        self.counted_chars = u32::try_from(chars).unwrap_or(u32::MAX);
    }
}
