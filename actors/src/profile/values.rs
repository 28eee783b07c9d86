//! Frontmatter values checked as they are read: an iteration cap, a
//! sampling setting in its range. Checked inside the format's visitor, so
//! an error keeps the value's position.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// An iteration cap: an integer from 1 to `u32::MAX`. Checked inside the
/// visitor (not after it, as `NonZeroU32` does) so that the YAML
/// deserializer still knows the value's position when the check fails.
pub(super) struct Iterations(pub(super) u32);

impl<'de> Deserialize<'de> for Iterations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `any`, not `u32`: a wrong type then reads "invalid type: string …,
        // expected an integer from 1 to …" in YAML too.
        deserializer.deserialize_any(IterationsVisitor)
    }
}

struct IterationsVisitor;

impl<'de> Visitor<'de> for IterationsVisitor {
    type Value = Iterations;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an integer from 1 to {}", u32::MAX)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Iterations, E> {
        match u32::try_from(value) {
            Ok(n) if n > 0 => Ok(Iterations(n)),
            _ => Err(E::invalid_value(de::Unexpected::Unsigned(value), &self)),
        }
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Iterations, E> {
        match u64::try_from(value) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(de::Unexpected::Signed(value), &self)),
        }
    }
}

/// A sampling setting within `low..=high` (a NaN or an infinity would be
/// sent as `null`, silently nothing).
pub(super) fn in_range<E: de::Error>(
    key: &str,
    value: Option<f64>,
    low: f64,
    high: f64,
) -> Result<Option<f64>, E> {
    match value {
        Some(v) if !(v.is_finite() && (low..=high).contains(&v)) => Err(E::custom(format!(
            "`{key}` must be a number from {low} to {high}, not {v}"
        ))),
        v => Ok(v),
    }
}

/// A `seed` within what servers take (see [`crate::agent::MAX_SEED`]).
pub(super) fn seed_in_range<E: de::Error>(key: &str, seed: Option<u64>) -> Result<Option<u64>, E> {
    match seed {
        Some(seed) if seed > crate::agent::MAX_SEED => Err(E::custom(format!(
            "`{key}` {}",
            crate::agent::seed_why(seed)
        ))),
        seed => Ok(seed),
    }
}

/// `model`: a name, or GitHub Copilot's and VS Code's list of them (the
/// first one available is used): the first name, and whether more were
/// listed (fallbacks this runtime does not try: warned as not applied).
/// A list was refused as a wrong type, the whole agent with it.
pub(super) struct ModelName {
    pub(super) first: Option<String>,
    pub(super) fallbacks: bool,
}

impl<'de> Deserialize<'de> for ModelName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ModelNameVisitor)
    }
}

struct ModelNameVisitor;

impl<'de> Visitor<'de> for ModelNameVisitor {
    type Value = ModelName;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a model's name, or a list of names (the first is used)")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<ModelName, E> {
        Ok(ModelName {
            first: Some(name.to_owned()),
            fallbacks: false,
        })
    }

    // A bare number is a name (`model: 4`), as a list's entries are.
    fn visit_u64<E: de::Error>(self, name: u64) -> Result<ModelName, E> {
        self.visit_str(&name.to_string())
    }

    fn visit_i64<E: de::Error>(self, name: i64) -> Result<ModelName, E> {
        self.visit_str(&name.to_string())
    }

    // `4.0` stays `4.0` (`to_string` wrote `4`).
    fn visit_f64<E: de::Error>(self, name: f64) -> Result<ModelName, E> {
        self.visit_str(&format!("{name:?}"))
    }

    fn visit_bool<E: de::Error>(self, name: bool) -> Result<ModelName, E> {
        self.visit_str(&name.to_string())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut names: A) -> Result<ModelName, A::Error> {
        let first = names.next_element::<String>()?;
        let mut fallbacks = false;
        while names.next_element::<String>()?.is_some() {
            fallbacks = true;
        }
        Ok(ModelName { first, fallbacks })
    }
}
