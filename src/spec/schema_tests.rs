//! Each pattern of the schema against the validator's own rule, over
//! strings built from the pieces that matter (separators, dots, blanks,
//! control characters, non-ASCII): the schema refuses exactly what
//! `validate` refuses for that field, so an editor never flags a spec that
//! `canopy validate` passes, nor passes one it refuses for that rule.

use super::*;
use crate::spec::secrets::INLINE_SECRET;
use crate::spec::{Input, Output, Severity, Spec, validate};
use crate::units::{HumanDuration, duration_pattern};
use proptest::prelude::*;
use regex::Regex;

fn spec() -> Spec {
    Spec::new("x", vec!["true".into()])
}

/// The validator's errors at `path`, less those of rules JSON Schema
/// cannot say (an inline credential), which the pattern need not match.
fn errors_at(spec: &Spec, path: &str) -> Vec<String> {
    validate::check(spec)
        .into_iter()
        .filter(|f| f.severity == Severity::Error && f.path == path && !f.message.starts_with(INLINE_SECRET))
        .map(|f| f.message)
        .collect()
}

fn text(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(pieces), 0..8).prop_map(|v| v.concat())
}

/// `pattern` compiled once: a debug build compiles the duration pattern
/// in milliseconds, thousands of times over.
fn matches(pattern: &str, value: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<String, Regex>>> = OnceLock::new();
    let mut cache = CACHE.get_or_init(Default::default).lock().unwrap();
    cache.entry(pattern.to_string()).or_insert_with(|| Regex::new(pattern).unwrap()).is_match(value)
}

fn agree(pattern: &str, value: &str, errors: &[String]) -> Result<(), TestCaseError> {
    let matches = matches(pattern, value);
    prop_assert_eq!(
        matches,
        errors.is_empty(),
        "{:?}: pattern {} says {}, validate says {:?}",
        value,
        pattern,
        matches,
        errors
    );
    Ok(())
}

const CONTROLS: [&str; 5] = ["\t", "\n", "\x1b", "\x7f", "\u{9b}"];

const NAME_PIECES: &[&str] = &[
    "a",
    "Z",
    "7",
    "-",
    "_",
    ".",
    "/",
    " ",
    "é",
    "\t",
    "\x1b",
    "",
    "a-very-long-name-part-of-forty-characters",
];
const PATH_PIECES: &[&str] =
    &["/", "/", "/", "a", "..", ".", "...", "..x", ".x", "-", " ", "\t", "\x1b", "\u{9b}", "é"];
const URI_PIECES: &[&str] = &[
    "s3", "S3", "file", "FILE", "ftp", "hf", "https", "://", ":/", "/", "/", "a", "b.c", ":", "?x=1", " ",
    "\x1b", "é",
];
const ARG_PIECES: &[&str] = &["a", " ", "-x", "/", "é", "\t", "\n", "\r", "\x1b", "\x7f", "\u{85}", "\u{9b}"];
const DURATION_PIECES: &[&str] = &[
    "0",
    "1",
    "7",
    "12",
    " ",
    " ",
    ".",
    "5",
    "h",
    "m",
    "s",
    "ms",
    "ns",
    "nsec",
    "min",
    "mins",
    "M",
    "µs",
    "µ",
    "fortnight",
    "x",
    "hours",
    "\t",
    "d",
    "w",
    "y",
    "yrs",
    "-",
    "+",
    "\u{a0}",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn the_name_pattern_is_the_validators_rule(name in text(NAME_PIECES)) {
        let mut s = spec();
        s.name = name.clone();
        let long = name.chars().count() > validate::MAX_NAME_CHARS;
        let errors = errors_at(&s, "name");
        // maxLength says the length; the pattern the characters.
        let pattern_ok = matches(NAME_PATTERN, &name);
        prop_assert_eq!(pattern_ok && !long, errors.is_empty(), "{:?}: {:?}", name, errors);
        let mut s = spec();
        s.outputs = vec![Output { name: name.clone(), path: "/out".into(), required: false }];
        agree(NAME_PATTERN, &name, &errors_at(&s, "outputs[0].name"))?;
    }

    #[test]
    fn the_absolute_path_pattern_is_the_validators_rule(path in text(PATH_PIECES)) {
        let mut s = spec();
        s.outputs = vec![Output { name: "o".into(), path: path.clone(), required: false }];
        agree(ABSOLUTE_PATH_PATTERN, &path, &errors_at(&s, "outputs[0].path"))?;
        let mut s = spec();
        s.runtime.workdir = Some(path.clone());
        agree(WORKDIR_PATTERN, &path, &errors_at(&s, "runtime.workdir"))?;
    }

    #[test]
    fn the_source_pattern_is_the_validators_rule(uri in text(URI_PIECES)) {
        let mut s = spec();
        s.inputs = vec![Input { name: "d".into(), source: uri.clone(), region: None, size_gb: None, mount: None }];
        agree(&source_pattern(), &uri, &errors_at(&s, "inputs[0].source"))?;
    }

    #[test]
    fn argument_image_and_label_patterns_are_the_validators_rules(value in text(ARG_PIECES)) {
        let mut s = spec();
        s.runtime.command.push(value.clone());
        agree(ARG_PATTERN, &value, &errors_at(&s, "runtime.command[1]"))?;
        let mut s = spec();
        s.runtime.image = Some(value.clone());
        agree(IMAGE_PATTERN, &value, &errors_at(&s, "runtime.image"))?;
        let mut s = spec();
        s.labels.insert("team".into(), value.clone());
        agree(NO_CONTROL, &value, &errors_at(&s, "labels.team"))?;
    }

    #[test]
    fn key_patterns_are_the_validators_rules(key in text(NAME_PIECES)) {
        let mut s = spec();
        s.runtime.env.insert(key.clone(), "1".into());
        agree(ENV_NAME_PATTERN, &key, &errors_at(&s, &crate::spec::locate::child("runtime.env", &key)))?;
        let mut s = spec();
        s.labels.insert(key.clone(), "v".into());
        let long = key.len() > validate::MAX_LABEL_KEY_CHARS;
        let errors = errors_at(&s, &crate::spec::locate::child("labels", &key));
        let pattern_ok = matches(LABEL_KEY_PATTERN, &key);
        prop_assert_eq!(pattern_ok && !long, errors.is_empty(), "{:?}: {:?}", key, errors);
    }

    /// The duration pattern accepts what the parser accepts, and refuses
    /// what it refuses but for numbers too large or too fine.
    #[test]
    fn the_duration_pattern_is_the_parsers_grammar(text in text(DURATION_PIECES)) {
        let parsed = text.parse::<HumanDuration>();
        let matches = matches(&duration_pattern(), &text);
        match parsed {
            Ok(_) => prop_assert!(matches, "{:?} parses but the pattern refuses it", text),
            Err(e) => prop_assert!(!matches || e.contains("too large"), "{:?} matches but does not parse: {}", text, e),
        }
    }
}

#[test]
fn the_duration_pattern_takes_the_spellings_in_use() {
    let re = Regex::new(&duration_pattern()).unwrap();
    for ok in ["90s", "45m", "2h", "1h30m", "1h 30m", "3d", "1.5h", " 10 min ", "0", "500ms", "2 weeks", "1y"]
    {
        assert!(re.is_match(ok) && ok.parse::<HumanDuration>().is_ok(), "{ok:?}");
    }
    for bad in ["2 fortnights", "90", "h", "-1h", "1h-", "1h.5m", ""] {
        assert!(!re.is_match(bad) && bad.parse::<HumanDuration>().is_err(), "{bad:?}");
    }
    // Beyond a pattern: numbers too large or too fine for the parser.
    for beyond in ["1.5ns", "99999999999999999999s", "0.1234567891s"] {
        let e = beyond.parse::<HumanDuration>().unwrap_err();
        assert!(re.is_match(beyond) && e.contains("too large"), "{beyond:?}: {e}");
    }
}

#[test]
fn the_short_unit_pattern_is_the_parsers_list_of_units() {
    let short = Regex::new(&duration_pattern()).unwrap();
    for unit in crate::units::DURATION_UNITS {
        assert!(
            short.is_match(&format!("1{unit}")) && format!("1{unit}").parse::<HumanDuration>().is_ok(),
            "{unit}"
        );
    }
    // Near misses of every unit: one letter more or one less.
    for unit in crate::units::DURATION_UNITS {
        for near in [
            format!("{unit}s"),
            format!("{unit}x"),
            unit[..unit.len() - unit.chars().last().unwrap().len_utf8()].to_string(),
        ] {
            let text = format!("1{near}");
            assert_eq!(short.is_match(&text), text.parse::<HumanDuration>().is_ok(), "{text:?}");
        }
    }
}

#[test]
fn control_characters_are_refused_where_the_validator_refuses_them() {
    let arg = Regex::new(ARG_PATTERN).unwrap();
    let none = Regex::new(NO_CONTROL).unwrap();
    for c in CONTROLS {
        let allowed_in_args = c == "\t" || c == "\n";
        assert_eq!(arg.is_match(c), allowed_in_args, "{c:?}");
        assert!(!none.is_match(c), "{c:?}");
    }
}

#[test]
fn optional_fields_are_plain_and_defaults_hold_no_null() {
    let s = schema();
    let text = serde_json::to_string(&s).unwrap();
    assert!(!text.contains("null"), "{text}");
    let resources = &s["$defs"]["Resources"]["properties"];
    assert_eq!(resources["accelerator"]["$ref"], "#/$defs/AcceleratorReq");
    assert!(resources["accelerator"].get("anyOf").is_none());
    assert_eq!(s["$defs"]["Runtime"]["properties"]["image"]["type"], "string");
    // A documented enum is an `enum`, its words explained in the description.
    let link = &s["$defs"]["Interconnect"];
    assert_eq!(link["enum"], serde_json::json!(["pcie", "nvlink", "xgmi", "hccs", "mlu-link"]));
    assert!(link["description"].as_str().unwrap().contains("`xgmi`: AMD Infinity Fabric"), "{link}");
    assert!(
        link["description"].as_str().unwrap().contains("`hccs`: Huawei Cache Coherence System"),
        "{link}"
    );
}
