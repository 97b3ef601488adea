//! The `/` filter for lists: words are ANDed; `key=value` matches a field
//! (`state=`, `provider=`, `pool=`, `node=`, `class=`, `name=`), `!word`
//! inverts, anything else is a case-insensitive regex (or plain text when
//! it is not a valid regex) over the row's text. Pure; no I/O.

use regex::Regex;

#[derive(Debug, Clone)]
enum Term {
    Field {
        key: String,
        value: String,
        negate: bool,
    },
    /// `re` is `None` only if even the escaped literal fails to compile;
    /// then a lowercase substring test stands in.
    Text {
        re: Option<Regex>,
        lit: String,
        negate: bool,
    },
}

/// The filter's syntax, for the help: (what is typed, what it does).
pub const HELP: &[(&str, &str)] = &[
    ("text", "a case-insensitive regex over the row as shown (plain text if not a regex)"),
    (
        "key=value",
        "a field starts with value: state= name= provider= pool= node= class= retry=waiting (nodes: node= pool= state= health=quarantined; audit: who= from= action= target= outcome= reason=)",
    ),
    ("!word", "rows that do not match"),
    ("a b", "both: words are ANDed"),
];

/// A parsed filter; the empty filter matches everything.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    terms: Vec<Term>,
}

impl Filter {
    pub fn parse(text: &str) -> Self {
        let terms = text
            .split_whitespace()
            .map(|w| {
                let (negate, w) = match w.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, w),
                };
                match w.split_once('=') {
                    Some((k, v)) if !k.is_empty() => {
                        Term::Field { key: k.to_lowercase(), value: v.to_lowercase(), negate }
                    }
                    _ => {
                        let re = Regex::new(&format!("(?i){w}"))
                            .or_else(|_| Regex::new(&format!("(?i){}", regex::escape(w))))
                            .ok();
                        Term::Text { re, lit: w.to_lowercase(), negate }
                    }
                }
            })
            .collect();
        Self { terms }
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether a row matches: `field(key)` gives a field's value, `text` the
    /// whole row as shown.
    pub fn matches<'a>(&self, field: impl Fn(&str) -> Option<&'a str>, text: &str) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Field { key, value, negate } => {
                let hit = field(key).is_some_and(|f| f.to_lowercase().starts_with(value.as_str()));
                hit != *negate
            }
            Term::Text { re, lit, negate } => {
                let hit = match re {
                    Some(re) => re.is_match(text),
                    None => text.to_lowercase().contains(lit.as_str()),
                };
                hit != *negate
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f<'a>(state: &'a str, provider: &'a str) -> impl Fn(&str) -> Option<&'a str> {
        move |k| match k {
            "state" => Some(state),
            "provider" => Some(provider),
            _ => None,
        }
    }

    #[test]
    fn fields_text_regex_and_negation() {
        let row = "w-3 train-llm failed sim-a";
        assert!(Filter::parse("state=failed").matches(f("failed", "sim-a"), row));
        assert!(!Filter::parse("state=running").matches(f("failed", "sim-a"), row));
        assert!(Filter::parse("provider=sim train").matches(f("failed", "sim-a"), row));
        assert!(Filter::parse("tr.*llm").matches(f("failed", "sim-a"), row));
        assert!(!Filter::parse("!llm").matches(f("failed", "sim-a"), row));
        assert!(Filter::parse("(").matches(f("failed", "sim-a"), "a ( b"), "bad regex falls back to text");
        assert!(Filter::parse("").matches(f("x", "y"), ""));
    }
}
