//! The `/` filter for lists: words are ANDed; `key=value` matches a field
//! (`state=`, `provider=`, `pool=`, `node=`, `class=`, `name=`,
//! `tenant=`, which `tenant:` spells too), `!word`
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
        "a field starts with value: state= name= provider= pool= node= class= retry=waiting tenant= (or tenant:) (nodes: node= pool= state= health=quarantined; audit: who= from= action= target= outcome= reason=)",
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
        Self { terms: text.split_whitespace().map(term).collect() }
    }

    /// Whether every row that `new` matches also matches `old`: `new` is
    /// `old` with more typed at its end, and that only adds words or
    /// lengthens the last one where a longer word matches less (a field's
    /// value, or plain text; not a negation or a regex). A list filtered by
    /// `old` then holds every row `new` passes.
    pub fn narrows(old: &str, new: &str) -> bool {
        if !new.starts_with(old) {
            return false;
        }
        let (olds, news): (Vec<&str>, Vec<&str>) =
            (old.split_whitespace().collect(), new.split_whitespace().collect());
        let Some((&last, same)) = olds.split_last() else { return true };
        if news.len() < olds.len() || news[..same.len()] != *same {
            return false;
        }
        let grown = news[same.len()];
        if grown == last {
            return true;
        }
        match (term(last), term(grown)) {
            (
                Term::Field { key: k1, value: v1, negate: false },
                Term::Field { key: k2, value: v2, negate: false },
            ) => k1 == k2 && v2.starts_with(&v1),
            (Term::Text { negate: false, .. }, Term::Text { negate: false, .. }) => {
                // Plain words, no regex: a row holding the longer holds
                // the shorter.
                plain(last) && plain(grown)
            }
            _ => false,
        }
    }

    /// Whether any word matches the row's text (not only its fields).
    pub fn reads_text(&self) -> bool {
        self.terms.iter().any(|t| matches!(t, Term::Text { .. }))
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether a row matches: `field(key)` gives a field's value, `text` the
    /// whole row as shown.
    pub fn matches<'a>(&self, field: impl Fn(&str) -> Option<&'a str>, text: &str) -> bool {
        self.terms.iter().all(|t| match t {
            Term::Field { key, value, negate } => {
                let hit = field(key).is_some_and(|f| starts_with_lower(f, value));
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

/// One word of a filter.
fn term(w: &str) -> Term {
    let (negate, w) = match w.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, w),
    };
    // `tenant:NAME` is `tenant=NAME` (as `canopy status --tenant` and
    // k9s-style filters spell it).
    if let Some(v) = w.get(..7).filter(|p| p.eq_ignore_ascii_case("tenant:")).map(|_| &w[7..]) {
        return Term::Field { key: "tenant".into(), value: v.to_lowercase(), negate };
    }
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
}

/// Whether a word is read as plain text: no character a regex gives a
/// meaning to outside a class.
fn plain(w: &str) -> bool {
    w.chars().all(|c| c.is_alphanumeric() || "-_/:@,%~=<>;'\"".contains(c))
}

/// `field.to_lowercase().starts_with(value)`, without a copy of an ASCII
/// field.
fn starts_with_lower(field: &str, value: &str) -> bool {
    if field.is_ascii() {
        field.len() >= value.len() && field.as_bytes()[..value.len()].eq_ignore_ascii_case(value.as_bytes())
    } else {
        field.to_lowercase().starts_with(value)
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

    #[test]
    fn tenant_colon_is_tenant_equals() {
        let tenant = |t: &'static str| move |k: &str| (k == "tenant").then_some(t);
        for spelled in ["tenant:team-a", "TENANT:team-a", "tenant=team-a", "tenant:TEAM-A"] {
            assert!(Filter::parse(spelled).matches(tenant("team-a"), ""), "{spelled}");
            assert!(!Filter::parse(spelled).matches(tenant("team-b"), ""), "{spelled}");
        }
        assert!(Filter::parse("!tenant:team-a").matches(tenant("team-b"), ""));
        assert!(!Filter::parse("tenant:x").matches(|_| None, "tenant:x"), "a field, not text");
        assert!(Filter::narrows("tenant:team", "tenant:team-a"));
    }

    #[test]
    fn narrowing_is_only_typing_that_can_only_match_less() {
        for (old, new) in [
            ("", "x"),
            ("state=f", "state=fa"),
            ("state=", "state=failed"),
            ("train", "train-"),
            ("train", "train llm"),
            ("state=failed ", "state=failed w-1"),
            ("!llm", "!llm x"),
            ("Tr", "TrA"),
        ] {
            assert!(Filter::narrows(old, new), "{old:?} -> {new:?}");
        }
        for (old, new) in [
            ("x", ""),
            ("train", "trai"),
            ("a", "a*"),
            ("a", "a|b"),
            ("tr.", "tr.x"),
            ("!ll", "!llm"),
            ("state", "state=failed"),
            ("state=f", "status=f"),
            ("train llm", "train xllm"),
        ] {
            assert!(!Filter::narrows(old, new), "{old:?} -> {new:?}");
        }
    }
}
