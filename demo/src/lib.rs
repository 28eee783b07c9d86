//! Four small deterministic tools for the examples and tests of
//! `subagents`: a calculator, a page-title fetcher over canned pages (no
//! network), a post that records what it was sent, and a sleep in tokio
//! time. They are not part of the library: a host brings its own tools
//! through [`subagents_actors::Tool`].

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use subagents_actors::{Tool, ToolCallContext, ToolError, ToolFuture};

/// Evaluates `+ - * /` and parentheses over decimal numbers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Tool for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }

    fn description(&self) -> String {
        "Evaluates an arithmetic expression with + - * / and parentheses.".into()
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4"}},
            "required": ["expression"]
        })
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let result = string_argument(&call.arguments, "expression")
            .and_then(|e| evaluate(&e).map_err(ToolError::Failed))
            .map(format_number);
        Box::pin(async move { result })
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Reads a required string argument from a JSON object.
fn string_argument(arguments: &str, key: &str) -> Result<String, ToolError> {
    let value: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| ToolError::InvalidArguments(format!("not JSON: {e}")))?;
    value
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| ToolError::InvalidArguments(format!("`{key}` (a string) is required")))
}

/// Evaluates an arithmetic expression.
fn evaluate(expression: &str) -> Result<f64, String> {
    let tokens: Vec<char> = expression.chars().filter(|c| !c.is_whitespace()).collect();
    let mut parser = Parser {
        tokens,
        at: 0,
        depth: 0,
    };
    let value = parser.sum()?;
    if parser.at != parser.tokens.len() {
        return Err(format!(
            "unexpected `{}` at position {}",
            parser.tokens[parser.at],
            parser.at + 1
        ));
    }
    if !value.is_finite() {
        return Err("the result is not a finite number (division by zero?)".into());
    }
    Ok(value)
}

struct Parser {
    tokens: Vec<char>,
    at: usize,
    /// Nested `(` and unary `-` now open: bounded, as each is a frame of
    /// the parser's recursion, and a stack overflow aborts the process (no
    /// panic a tool's guard could catch).
    depth: usize,
}

/// The deepest nesting of `(` and unary `-` an expression may have.
const MAX_DEPTH: usize = 256;

impl Parser {
    fn peek(&self) -> Option<char> {
        self.tokens.get(self.at).copied()
    }

    fn sum(&mut self) -> Result<f64, String> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.at += 1;
            let rhs = self.product()?;
            value = if op == '+' { value + rhs } else { value - rhs };
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<f64, String> {
        let mut value = self.atom()?;
        while let Some(op @ ('*' | '/')) = self.peek() {
            self.at += 1;
            let rhs = self.atom()?;
            value = if op == '*' { value * rhs } else { value / rhs };
        }
        Ok(value)
    }

    fn atom(&mut self) -> Result<f64, String> {
        self.depth += 1;
        let value = self.atom_inner();
        self.depth -= 1;
        value
    }

    fn atom_inner(&mut self) -> Result<f64, String> {
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "the expression nests `(` or `-` deeper than {MAX_DEPTH} levels"
            ));
        }
        match self.peek() {
            Some('(') => {
                self.at += 1;
                let value = self.sum()?;
                if self.peek() != Some(')') {
                    return Err("a `(` is never closed".into());
                }
                self.at += 1;
                Ok(value)
            }
            Some('-') => {
                self.at += 1;
                Ok(-self.atom()?)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => {
                let start = self.at;
                while self.peek().is_some_and(|c| c.is_ascii_digit() || c == '.') {
                    self.at += 1;
                }
                let text: String = self.tokens[start..self.at].iter().collect();
                text.parse()
                    .map_err(|_| format!("`{text}` is not a number"))
            }
            Some(c) => Err(format!("unexpected `{c}` at position {}", self.at + 1)),
            None => Err("the expression ended early".into()),
        }
    }
}

/// Returns the `<title>` of a page, from a fixed set of canned pages.
#[derive(Debug, Clone)]
pub struct PageTitle {
    pages: Arc<BTreeMap<String, String>>,
}

impl Default for PageTitle {
    fn default() -> Self {
        Self::with_pages([
            (
                "https://example.com",
                "<html><head><title>Example Domain</title></head></html>",
            ),
            (
                "https://www.rust-lang.org",
                "<html><head><title>Rust Programming Language</title></head></html>",
            ),
            (
                "https://tokio.rs",
                "<html><head><title>Tokio - An asynchronous Rust runtime</title></head></html>",
            ),
            (
                "https://docs.rs/ractor",
                "<html><head><title>ractor - Rust</title></head></html>",
            ),
            (
                "https://serde.rs",
                "<html><head><title>Overview · Serde</title></head></html>",
            ),
        ])
    }
}

impl PageTitle {
    /// A fetcher over these `(url, html)` pages.
    pub fn with_pages<'a>(pages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self {
            pages: Arc::new(
                pages
                    .into_iter()
                    .map(|(u, h)| (u.trim_end_matches('/').to_owned(), h.to_owned()))
                    .collect(),
            ),
        }
    }
}

impl Tool for PageTitle {
    fn name(&self) -> &str {
        "fetch_title"
    }

    fn description(&self) -> String {
        "Fetches a web page and returns its <title>.".into()
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {"url": {"type": "string"}},
            "required": ["url"]
        })
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let pages = self.pages.clone();
        Box::pin(async move {
            let url = string_argument(&call.arguments, "url")?;
            let html = pages
                .get(url.trim_end_matches('/'))
                .ok_or_else(|| ToolError::Failed(format!("{url} answered 404 Not Found")))?;
            let title = html
                .split_once("<title>")
                .and_then(|(_, rest)| rest.split_once("</title>"))
                .map(|(t, _)| t.trim().to_owned())
                .ok_or_else(|| ToolError::Failed(format!("{url} has no <title>")))?;
            Ok(title)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;

    /// A model's expression could nest `(` or unary `-` without bound:
    /// each level a frame of the parser's recursion, and a deep enough one
    /// overflowed the stack, which aborts the process (the tool's panic
    /// guard cannot catch it). Nesting is bounded; past it is an error.
    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = |open: &str, close: &str| {
            format!("{}1{}", open.repeat(1_000_000), close.repeat(1_000_000))
        };
        for expression in [deep("(", ")"), deep("-", "")] {
            let error = evaluate(&expression).unwrap_err();
            assert!(error.contains("deeper than 256 levels"), "{error}");
        }
        // 255 levels and the number inside them: within the bound.
        let within = format!("{}1{}", "(".repeat(255), ")".repeat(255));
        assert_eq!(evaluate(&within), Ok(1.0));
        assert_eq!(evaluate(&format!("{}1", "-".repeat(255))), Ok(-1.0));
    }

    use super::*;

    #[test]
    fn calculator_follows_precedence_and_reports_errors() {
        assert_eq!(evaluate("(2 + 3) * 4 - 10 / 4").unwrap(), 17.5);
        assert_eq!(evaluate("-3*-2").unwrap(), 6.0);
        assert!(evaluate("1/0").unwrap_err().contains("division by zero"));
        assert!(evaluate("2 +").unwrap_err().contains("ended early"));
        assert!(evaluate("(1").unwrap_err().contains("never closed"));
        assert!(evaluate("2 $ 3").unwrap_err().contains("unexpected `$`"));
        assert_eq!(format_number(4.0), "4");
    }
}

/// Waits `secs` seconds of tokio time (`{"secs": 30}`), then answers
/// `slept N s`: work that holds no gate permit, for simulations.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sleep;

impl Tool for Sleep {
    fn name(&self) -> &str {
        "sleep"
    }

    fn description(&self) -> String {
        "Waits the given number of seconds, then answers.".into()
    }

    fn parameters(&self) -> serde_json::Value {
        json!({
            "type": "object",
            "properties": {"secs": {"type": "integer", "minimum": 0}},
            "required": ["secs"]
        })
    }

    fn call(&self, call: ToolCallContext) -> ToolFuture {
        let secs = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| v.get("secs").and_then(serde_json::Value::as_u64));
        Box::pin(async move {
            let secs = secs.ok_or_else(|| {
                ToolError::InvalidArguments("`secs` (a whole number) is required".into())
            })?;
            tokio::time::sleep(std::time::Duration::from_secs(secs)).await;
            Ok(format!("slept {secs} s"))
        })
    }
}

/// Posts a message to a canned endpoint, after the host approves each call
/// (`requires_approval` is always true); answers `posted`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Post;

impl Tool for Post {
    fn name(&self) -> &str {
        "http_post"
    }

    fn description(&self) -> String {
        "Posts a message (the user approves each call).".into()
    }

    fn parameters(&self) -> serde_json::Value {
        json!({"type": "object", "properties": {"message": {"type": "string"}}})
    }

    fn requires_approval(&self, _arguments: &str) -> bool {
        true
    }

    fn call(&self, _call: ToolCallContext) -> ToolFuture {
        Box::pin(async { Ok("posted".into()) })
    }
}
