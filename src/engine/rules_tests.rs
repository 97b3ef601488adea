//! Tests of the rule table (`rules.rs`).

use super::*;

/// Proves the `expect` in [`re`]: every regex in the table compiles.
#[test]
fn every_pattern_compiles() {
    for rule in RULES {
        if let Matcher::Log(lm) = &rule.matcher {
            lm.pattern.find("");
        }
    }
    for r in [&CAPACITY_MESSAGE, &IMAGE_MISSING, &REGISTRY_UNREACHABLE] {
        r.is_match("");
    }
    killed_line("x");
}

#[test]
fn ids_are_unique_and_tiers_are_in_order() {
    fn tier(m: &Matcher) -> u8 {
        match m {
            Matcher::Canopy(_) => 1,
            Matcher::Provider(_) => 2,
            Matcher::Log(_) => 3,
            Matcher::Exit(_) => 4,
            Matcher::Default => 5,
        }
    }
    let mut ids: Vec<_> = RULES.iter().map(|r| r.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), RULES.len(), "duplicate rule id");
    assert!(RULES.windows(2).all(|w| tier(&w[0].matcher) <= tier(&w[1].matcher)));
    assert!(matches!(default_rule().matcher, Matcher::Default));
    assert_eq!(RULES.iter().filter(|r| matches!(r.matcher, Matcher::Default)).count(), 1);
    let id = Regex::new(r"^[a-z0-9]+\.[a-z0-9-]+$").unwrap();
    for r in RULES {
        assert!(id.is_match(r.id), "{}", r.id);
    }
}

#[test]
fn status_normalises_codes_and_signals() {
    assert_eq!(Status::of(&ProviderEnd::Exited { code: 137 }), Status::Signal(9));
    assert_eq!(Status::of(&ProviderEnd::Exited { code: -11 }), Status::Signal(11));
    assert_eq!(Status::of(&ProviderEnd::Exited { code: 1 }), Status::Code(1));
    assert_eq!(Status::of(&ProviderEnd::Exited { code: 255 }), Status::Code(255));
    assert_eq!(Status::of(&ProviderEnd::Exited { code: i32::MIN }), Status::Code(i32::MIN));
    assert_eq!(Status::of(&ProviderEnd::Signaled { signal: 15 }), Status::Signal(15));
    assert_eq!(Status::of(&ProviderEnd::Unknown { message: String::new() }), Status::Unreported);
}

#[test]
fn exception_patterns_skip_source_lines() {
    assert!(APP_EXCEPTION.is_match("KeyError: 'labels'"));
    assert!(APP_EXCEPTION.is_match("[rank1]: json.decoder.JSONDecodeError: Expecting value"));
    assert!(!APP_EXCEPTION.is_match("    raise KeyError(key)"));
    assert!(!PYTHON_EXCEPTION.is_match("torch.distributed.elastic.multiprocessing.api: [ERROR] failed"));
    assert!(!MEMORY_ERROR.is_match("torch.OutOfMemoryError: CUDA out of memory."));
}

#[test]
fn xid_codes_parse_past_the_pci_address() {
    let line = "[ 8123.456] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    assert_eq!(xid_hardware(line), line.find("Xid"));
    assert_eq!(xid_app(line), None);
    assert!(xid_hardware("dcgm: XID 74 detected on GPU 3").is_some());
    assert!(xid_hardware("NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception").is_none());
}
