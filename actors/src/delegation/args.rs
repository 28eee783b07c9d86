//! Strict arguments for the delegation tools: a call's JSON is checked
//! field by field before it is read, so an error names the field and what
//! was expected, and a misspelt field is refused with the nearest known
//! name instead of being silently ignored (`wiat: false` would otherwise
//! run the child inline).

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tool::ToolError;

/// What a field holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A string.
    Text,
    /// `true` or `false`.
    Flag,
    /// A whole number, at least 1.
    Count,
    /// A whole number, 0 or more (a position).
    Offset,
    /// An array of strings.
    Names,
}

impl Kind {
    fn expected(self) -> &'static str {
        match self {
            Kind::Text => "a string",
            Kind::Flag => "true or false",
            Kind::Count => "a whole number from 1 to 4294967295",
            Kind::Offset => "a whole number of at least 0",
            Kind::Names => "an array of strings",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match self {
            Kind::Text => value.is_string(),
            Kind::Flag => value.is_boolean(),
            Kind::Count => value
                .as_u64()
                .is_some_and(|n| n >= 1 && n <= u64::from(u32::MAX)),
            Kind::Offset => value.as_u64().is_some(),
            Kind::Names => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
        }
    }
}

/// The fields `ChildSpec` reads (who the child is), shared by `use_agent`
/// and `delegate_task`.
pub(crate) const CHILD_SPEC: &[(&str, Kind)] = &[
    ("agent", Kind::Text),
    ("system_prompt", Kind::Text),
    ("tools", Kind::Names),
    ("model", Kind::Text),
    ("provider", Kind::Text),
    ("max_iterations", Kind::Count),
];

/// The first key an object gives twice, if any (its values skipped).
struct Repeated(Option<String>);

impl<'de> serde::Deserialize<'de> for Repeated {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = Repeated;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Repeated, A::Error> {
                let mut seen = std::collections::BTreeSet::new();
                let mut repeated = None;
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if !seen.insert(key.clone()) && repeated.is_none() {
                        repeated = Some(key);
                    }
                }
                Ok(Repeated(repeated))
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// Checks `arguments` against `fields` (null counts as absent), then reads
/// them as `T`.
pub(crate) fn parse<T: DeserializeOwned>(
    tool: &str,
    arguments: &str,
    fields: &[&[(&str, Kind)]],
) -> Result<T, ToolError> {
    let invalid =
        |why: String| ToolError::InvalidArguments(format!("{why}; see the tool's schema"));
    let mut value: Value = serde_json::from_str(arguments)
        .map_err(|e| invalid(format!("the arguments are not valid JSON ({e})")))?;
    let Value::Object(object) = &mut value else {
        return Err(invalid(format!(
            "the arguments must be a JSON object, not {}",
            describe(&value)
        )));
    };
    // Read as a map, a key given twice kept its last value: `tools` given
    // twice ran the child with the second list, while the call's text —
    // what a host's approval dialog shows — held both.
    if let Ok(Repeated(Some(key))) = serde_json::from_str::<Repeated>(arguments) {
        return Err(invalid(format!(
            "`{tool}` was given `{}` twice; give each field once",
            crate::delegation::shown(&key)
        )));
    }
    let known = || fields.iter().flat_map(|f| f.iter());
    for (name, given) in object.iter_mut() {
        let Some((_, kind)) = known().find(|(known, _)| known == name) else {
            let names: Vec<&str> = known().map(|(n, _)| *n).collect();
            let hint = nearest(name, &names)
                .map(|n| format!("did you mean `{n}`? "))
                .unwrap_or_default();
            return Err(invalid(format!(
                "`{tool}` has no field `{}`; {hint}its fields are {}",
                crate::delegation::shown(name),
                names
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        // A whole number written with a fraction (`5.0`, `1e1`) is one: the
        // schema's `integer` allows it (JSON Schema), and the refusal read
        // "must be a whole number, not the number 5.0".
        if matches!(kind, Kind::Count | Kind::Offset)
            && let Some(whole) = whole(given)
        {
            *given = whole;
        }
        if !given.is_null() && !kind.accepts(given) {
            let why = match (kind, given.as_i64()) {
                (Kind::Count, Some(n)) if n < 1 && name == "max_iterations" => format!(
                    "`{name}` must be at least 1 (it caps the sub-agent's model calls; {n} would stop it before it starts)"
                ),
                _ => format!(
                    "`{name}` must be {}, not {}",
                    kind.expected(),
                    describe(given)
                ),
            };
            return Err(invalid(why));
        }
    }
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// A number written with a fraction that has none, as an integer.
fn whole(value: &Value) -> Option<Value> {
    let n = value.as_f64().filter(|_| value.is_f64())?;
    // 2^64 and -2^63 are exact as floats (`u64::MAX as f64` rounds up).
    let fits =
        n.fract() == 0.0 && (-9.223_372_036_854_776e18..18_446_744_073_709_551_616.0).contains(&n);
    fits.then(|| match n >= 0.0 {
        true => Value::from(n as u64),
        false => Value::from(n as i64),
    })
}

/// Refuses the first field `given` (name, present) that `action` does not
/// read, naming the ones it does.
pub(crate) fn only_fields(
    action: &str,
    given: &[(&str, bool)],
    reads: &[&str],
) -> Result<(), ToolError> {
    let Some((stray, _)) = given
        .iter()
        .find(|(name, present)| *present && !reads.contains(name))
    else {
        return Ok(());
    };
    let reads = if reads.is_empty() {
        "none but `action`".to_owned()
    } else {
        reads
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(ToolError::InvalidArguments(format!(
        "`{stray}` does not apply to action `{action}` (its fields are {reads}); leave it out; see the tool's schema"
    )))
}

/// The known name closest to a misspelt one, if any is close enough.
fn nearest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(name, k), *k))
        .filter(|(distance, k)| *distance <= 2.max(k.len() / 3))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// A value as a model would recognise it in an error.
fn describe(value: &Value) -> String {
    let shown = |v: &Value| {
        let text = v.to_string();
        if text.chars().count() > 40 {
            format!("{}…", text.chars().take(40).collect::<String>())
        } else {
            text
        }
    };
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => format!("the string {}", shown(value)),
        Value::Array(_) => format!("the array {}", shown(value)),
        Value::Object(_) => format!("the object {}", shown(value)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    struct Args {
        input: Option<String>,
        wait: Option<bool>,
        max_iterations: Option<u32>,
    }

    const FIELDS: &[(&str, Kind)] = &[
        ("input", Kind::Text),
        ("wait", Kind::Flag),
        ("max_iterations", Kind::Count),
    ];

    fn error(arguments: &str) -> String {
        match parse::<Args>("use_agent", arguments, &[FIELDS]) {
            Err(ToolError::InvalidArguments(e)) => e,
            other => panic!("not refused: {other:?}"),
        }
    }

    /// Repeated (review: tool calls from misbehaving models, thirty-fourth
    /// session): a key given twice was read as its last value — the call's
    /// text, which a host's approval shows, held both. Refused, naming it.
    #[test]
    fn a_field_given_twice_is_refused() {
        let e = error(r#"{"input":"x","wait":false,"wait":true}"#);
        assert!(e.contains("`wait` twice"), "{e}");
        assert!(parse::<Args>("use_agent", r#"{"input":"x","wait":false}"#, &[FIELDS]).is_ok());
    }

    /// Foreign input: some servers and small models write an integer as
    /// `5.0` or `1e1` — allowed by the schema's `integer` — and the call
    /// was refused, saying 5.0 is not a whole number.
    #[test]
    fn a_whole_number_written_with_a_fraction_is_read() {
        for (arguments, read) in [
            (r#"{"max_iterations":3.0}"#, 3),
            (r#"{"max_iterations":1e1}"#, 10),
        ] {
            let args: Args = parse("use_agent", arguments, &[FIELDS]).unwrap();
            assert_eq!(args.max_iterations, Some(read), "{arguments}");
        }
        const AT: &[(&str, Kind)] = &[("offset", Kind::Offset)];
        #[derive(Debug, serde::Deserialize)]
        struct Ranged {
            offset: Option<u64>,
        }
        let ranged: Ranged = parse("use_agent", r#"{"offset":2.0}"#, &[AT]).unwrap();
        assert_eq!(ranged.offset, Some(2));
        let e = error(r#"{"max_iterations":2.5}"#);
        assert!(e.contains("not the number 2.5"), "{e}");
        let e = error(r#"{"max_iterations":-1.0}"#);
        assert!(e.contains("must be at least 1"), "{e}");
        let e = error(r#"{"max_iterations":1e300}"#);
        assert!(e.contains("must be a whole number from 1"), "{e}");
    }

    #[test]
    fn a_wrong_type_names_the_field_and_what_was_expected() {
        let e = error(r#"{"input":5}"#);
        assert!(
            e.starts_with("`input` must be a string, not the number 5"),
            "{e}"
        );
        let e = error(r#"{"wait":"no"}"#);
        assert!(
            e.starts_with(r#"`wait` must be true or false, not the string "no""#),
            "{e}"
        );
    }

    #[test]
    fn a_misspelt_field_is_refused_with_the_nearest_name() {
        let e = error(r#"{"input":"x","wiat":false}"#);
        assert!(
            e.contains("has no field `wiat`; did you mean `wait`?"),
            "{e}"
        );
        assert!(e.contains("`input`, `wait`, `max_iterations`"), "{e}");
        let e = error(r#"{"zzzzzzzz":1}"#);
        assert!(!e.contains("did you mean"), "nothing is near: {e}");
    }

    #[test]
    fn zero_iterations_is_refused_with_a_reason() {
        let e = error(r#"{"max_iterations":0}"#);
        assert!(e.starts_with("`max_iterations` must be at least 1"), "{e}");
        let e = error(r#"{"max_iterations":2.5}"#);
        assert!(e.contains("a whole number from 1 to 4294967295"), "{e}");
    }

    /// The reason for a zero was about model calls whatever the field
    /// (`limit: 0` read "it caps the sub-agent's model calls"), and a count
    /// past `u32` was refused without its bound.
    #[test]
    fn a_count_out_of_range_names_its_own_field_and_bound() {
        const LIMIT: &[(&str, Kind)] = &[("limit", Kind::Count)];
        let error =
            |arguments: &str| match parse::<serde_json::Value>("use_agent", arguments, &[LIMIT]) {
                Err(ToolError::InvalidArguments(e)) => e,
                other => panic!("not refused: {other:?}"),
            };
        let e = error(r#"{"limit":0}"#);
        assert!(
            e.starts_with("`limit` must be a whole number from 1 to 4294967295, not the number 0"),
            "{e}"
        );
        assert!(!e.contains("model calls"), "{e}");
        let e = error(r#"{"limit":5000000000}"#);
        assert!(e.contains("from 1 to 4294967295"), "{e}");
    }

    #[test]
    fn a_field_an_action_does_not_read_is_refused_naming_the_ones_it_does() {
        let e = only_fields(
            "result",
            &[("id", true), ("wait", true)],
            &["id", "offset", "limit"],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "`wait` does not apply to action `result` (its fields are `id`, `offset`, `limit`)"
            ),
            "{e}"
        );
        let e = only_fields("agents", &[("id", true)], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("its fields are none but `action`"), "{e}");
        assert!(only_fields("result", &[("id", true), ("wait", false)], &["id"]).is_ok());
    }

    #[test]
    fn good_arguments_and_nulls_are_read() {
        let args: Args = parse(
            "use_agent",
            r#"{"input":"x","wait":null,"max_iterations":3}"#,
            &[FIELDS],
        )
        .unwrap();
        assert_eq!(args.input.as_deref(), Some("x"));
        assert_eq!(args.wait, None);
        assert_eq!(args.max_iterations, Some(3));
    }

    #[test]
    fn not_an_object_or_not_json_is_said_so() {
        assert!(error("[1]").contains("must be a JSON object, not the array [1]"));
        assert!(error("{").contains("not valid JSON"));
    }
}
