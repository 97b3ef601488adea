//! YAML text → a tree whose every node knows its line and column, and
//! typed readers that say where and what is wrong.
//!
//! This module owns reading YAML for the importers and nothing about
//! SkyPilot or dstack. It uses `saphyr` (with `saphyr-parser`): a
//! maintained, YAML 1.2 parser whose `MarkedYaml` nodes carry spans, which
//! reports scan errors with a position, refuses duplicate keys and bounds
//! alias expansion ("billion laughs"). `serde_yaml` is archived and
//! `yaml-rust2` has no per-node positions; saphyr is yaml-rust2's successor
//! by the same maintainers.
//!
//! Two guards are added here: events are pulled one by one and nesting
//! deeper than [`MAX_DEPTH`] is refused as it is read (saphyr's own
//! `Parser::load`, and dropping a tree, recurse once per level), and scalars are kept as written (`early_parse(false)`), so an
//! environment value like `1.10` stays `1.10` and a typed read resolves it
//! by YAML 1.2's core schema only when a number or boolean is wanted.
//! Messages quote keys and the values of plain settings, never the values
//! of environment variables or secrets (callers read those with
//! [`Node::text`] and do not echo them).

use saphyr::{MarkedYaml, Scalar, YamlData, YamlLoader};
use saphyr_parser::{Event, Parser, Span, SpannedEventReceiver};
use std::cell::Cell;

/// Deepest nesting of lists and mappings accepted. Task files nest four
/// or five levels; anything near this is not a task file.
pub const MAX_DEPTH: usize = 64;

/// A place in the source: 1-based line and 1-based column in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos { line: span.start.line().max(1), col: span.start.col() + 1 }
    }
}

/// Something wrong at a place, with what to do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub pos: Pos,
    /// The source field, dotted (`resources.accelerators`).
    pub path: String,
    pub message: String,
    pub help: String,
}

pub type Got<T> = Result<T, Problem>;

/// The documents of `text`, or where the YAML is broken.
pub fn parse(text: &str) -> Got<Vec<MarkedYaml<'_>>> {
    let mut guard = Guard { loader: YamlLoader::default(), depth: 0, too_deep: None };
    guard.loader.early_parse(false);
    // Events one by one: `Parser::load` recurses once per nesting level.
    let mut scanned = Ok(());
    for event in Parser::new_from_str(text) {
        match event {
            Ok((ev, span)) => guard.on_event(ev, span),
            Err(e) => {
                scanned = Err(e);
                break;
            }
        }
        if guard.too_deep.is_some() {
            break;
        }
    }
    if let Some(at) = guard.too_deep {
        return Err(Problem {
            pos: at,
            path: String::new(),
            message: format!("the YAML nests deeper than {MAX_DEPTH} levels"),
            help: "a task file nests a few levels; check that this is the file you meant".into(),
        });
    }
    let error = scanned.err().or_else(|| guard.loader.error().cloned());
    if let Some(e) = error {
        let m = e.marker();
        return Err(Problem {
            pos: Pos { line: m.line().max(1), col: m.col() + 1 },
            path: String::new(),
            message: format!("invalid YAML: {}", e.info()),
            help: syntax_help(e.info()).into(),
        });
    }
    Ok(guard.loader.into_documents())
}

fn syntax_help(info: &str) -> &'static str {
    if info.contains("duplicated key") {
        "a key may appear once per mapping: remove or merge the repeated one"
    } else if info.contains("alias expansion") {
        "the anchors and aliases expand to too much; write the values out"
    } else if info.contains("tab") {
        "indent with spaces: YAML does not allow tabs for indentation"
    } else {
        "check the indentation and the quoting on this line and the one before"
    }
}

/// Forwards events to saphyr's loader until nesting passes [`MAX_DEPTH`],
/// then stops (the partial tree is dropped, never returned). Nothing here
/// or in the loader recurses per level, and the tree it builds is at most
/// [`MAX_DEPTH`] deep (twice that through an alias), so neither building
/// nor dropping it can exhaust the stack.
struct Guard<'i> {
    loader: YamlLoader<'i, MarkedYaml<'i>>,
    depth: usize,
    too_deep: Option<Pos>,
}

impl<'i> SpannedEventReceiver<'i> for Guard<'i> {
    fn on_event(&mut self, ev: Event<'i>, span: Span) {
        if self.too_deep.is_some() {
            return;
        }
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                self.depth += 1;
                if self.depth > MAX_DEPTH {
                    self.too_deep = Some(Pos::of(&span));
                    return;
                }
            }
            Event::SequenceEnd | Event::MappingEnd => self.depth = self.depth.saturating_sub(1),
            _ => {}
        }
        self.loader.on_event(ev, span);
    }
}

/// What a node holds, for messages: "a string", "a list", ….
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Int,
    Float,
    Str,
    List,
    Map,
    Invalid,
}

impl Kind {
    pub fn describe(self) -> &'static str {
        match self {
            Kind::Null => "empty",
            Kind::Bool => "true/false",
            Kind::Int => "a whole number",
            Kind::Float => "a number",
            Kind::Str => "a string",
            Kind::List => "a list",
            Kind::Map => "a mapping",
            Kind::Invalid => "an invalid value",
        }
    }
}

/// One node of the document and the dotted path that leads to it.
#[derive(Clone)]
pub struct Node<'a> {
    y: &'a MarkedYaml<'a>,
    pub path: String,
}

impl<'a> Node<'a> {
    pub fn root(y: &'a MarkedYaml<'a>) -> Node<'a> {
        Node { y: untag(y), path: String::new() }
    }

    pub fn pos(&self) -> Pos {
        Pos::of(&self.y.span)
    }

    /// A problem at this node.
    pub fn problem(&self, message: impl Into<String>, help: impl Into<String>) -> Problem {
        Problem { pos: self.pos(), path: self.path.clone(), message: message.into(), help: help.into() }
    }

    /// "`resources.cpus` must be a number, not a list".
    pub fn wrong_type(&self, want: &str, help: impl Into<String>) -> Problem {
        let what = if self.path.is_empty() { "the file".to_string() } else { format!("`{}`", self.path) };
        let message = format!("{what} must be {want}, not {}", self.kind().describe());
        self.problem(message, help)
    }

    fn scalar(&self) -> Option<Scalar<'a>> {
        match &self.y.data {
            YamlData::Representation(v, style, tag) => {
                Scalar::parse_from_cow_and_metadata(v.clone(), *style, tag.as_ref())
            }
            YamlData::Value(s) => Some(s.clone()),
            _ => None,
        }
    }

    pub fn kind(&self) -> Kind {
        match &self.y.data {
            YamlData::Sequence(_) => Kind::List,
            YamlData::Mapping(_) => Kind::Map,
            _ => match self.scalar() {
                Some(Scalar::Null) => Kind::Null,
                Some(Scalar::Boolean(_)) => Kind::Bool,
                Some(Scalar::Integer(_)) => Kind::Int,
                Some(Scalar::FloatingPoint(_)) => Kind::Float,
                Some(Scalar::String(_)) => Kind::Str,
                None => Kind::Invalid,
            },
        }
    }

    pub fn is_null(&self) -> bool {
        self.kind() == Kind::Null
    }

    /// A string value (quoted, or plain text that is not a number, a
    /// boolean or null).
    pub fn string(&self, help: &str) -> Got<String> {
        match self.scalar() {
            Some(Scalar::String(s)) => Ok(s.into_owned()),
            _ => Err(self.wrong_type("a string", help)),
        }
    }

    /// Any non-empty scalar as written (`64`, `1.10`, `true`, `abc`).
    pub fn text(&self, help: &str) -> Got<String> {
        match (&self.y.data, self.kind()) {
            (_, Kind::Null | Kind::List | Kind::Map | Kind::Invalid) => {
                Err(self.wrong_type("a single value", help))
            }
            (YamlData::Representation(v, _, _), _) => Ok(v.to_string()),
            (YamlData::Value(s), _) => Ok(scalar_text(s)),
            _ => Err(self.wrong_type("a single value", help)),
        }
    }

    /// A number (whole or not), or a string holding one is not accepted:
    /// callers that take `"4+"` read [`Node::text`].
    pub fn number(&self, help: &str) -> Got<f64> {
        match self.scalar() {
            Some(Scalar::Integer(i)) => Ok(i as f64),
            Some(Scalar::FloatingPoint(f)) if f.is_finite() => Ok(f.into_inner()),
            _ => Err(self.wrong_type("a number", help)),
        }
    }

    pub fn integer(&self, help: &str) -> Got<i64> {
        match self.scalar() {
            Some(Scalar::Integer(i)) => Ok(i),
            _ => Err(self.wrong_type("a whole number", help)),
        }
    }

    pub fn boolean(&self, help: &str) -> Got<bool> {
        match self.scalar() {
            Some(Scalar::Boolean(b)) => Ok(b),
            _ => Err(self.wrong_type("true or false", help)),
        }
    }

    pub fn list(&self, help: &str) -> Got<Vec<Node<'a>>> {
        match &self.y.data {
            YamlData::Sequence(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, y)| Node { y: untag(y), path: format!("{}[{i}]", self.path) })
                .collect()),
            _ => Err(self.wrong_type("a list", help)),
        }
    }

    pub fn mapping(&self, help: &str) -> Got<Map<'a>> {
        let YamlData::Mapping(m) = &self.y.data else {
            return Err(self.wrong_type("a mapping of `key: value` lines", help));
        };
        let entries = m
            .iter()
            .map(|(k, v)| {
                let k = untag(k);
                let key = match &k.data {
                    YamlData::Representation(s, _, _) => s.to_string(),
                    YamlData::Value(s) => scalar_text(s),
                    _ => "?".to_string(),
                };
                let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
                Entry { key, key_pos: Pos::of(&k.span), value: Node { y: untag(v), path } }
            })
            .collect::<Vec<_>>();
        let used = entries.iter().map(|_| Cell::new(false)).collect();
        Ok(Map { node: self.clone(), entries, used })
    }
}

fn untag<'a>(mut y: &'a MarkedYaml<'a>) -> &'a MarkedYaml<'a> {
    while let YamlData::Tagged(_, inner) = &y.data {
        y = inner;
    }
    y
}

fn scalar_text(s: &Scalar<'_>) -> String {
    match s {
        Scalar::Null => String::new(),
        Scalar::Boolean(b) => b.to_string(),
        Scalar::Integer(i) => i.to_string(),
        Scalar::FloatingPoint(f) => f.to_string(),
        Scalar::String(s) => s.to_string(),
    }
}

/// One `key: value` of a mapping.
#[derive(Clone)]
pub struct Entry<'a> {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node<'a>,
}

/// A mapping whose entries are taken one by one; what nobody took is
/// [`Map::leftovers`], so that no field is dropped without a word.
pub struct Map<'a> {
    pub node: Node<'a>,
    entries: Vec<Entry<'a>>,
    used: Vec<Cell<bool>>,
}

impl<'a> Map<'a> {
    /// The value of `key`, marked as taken.
    pub fn take(&self, key: &str) -> Option<Node<'a>> {
        self.take_entry(key).map(|e| e.value)
    }

    /// The entry of `key`, marked as taken.
    pub fn take_entry(&self, key: &str) -> Option<Entry<'a>> {
        let i = self.entries.iter().position(|e| e.key == key)?;
        self.used[i].set(true);
        Some(self.entries[i].clone())
    }

    /// Every entry, in document order, all marked as taken.
    pub fn take_all(&self) -> Vec<Entry<'a>> {
        for u in &self.used {
            u.set(true);
        }
        self.entries.clone()
    }

    /// Entries nobody took, in document order.
    pub fn leftovers(&self) -> Vec<Entry<'a>> {
        self.entries.iter().zip(&self.used).filter(|(_, u)| !u.get()).map(|(e, _)| e.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based_and_scalars_keep_their_text() {
        let docs = parse("name: a\nresources:\n  memory: 1.10\n").unwrap();
        let root = Node::root(&docs[0]).mapping("").unwrap();
        let r = root.take("resources").unwrap().mapping("").unwrap();
        let m = r.take_entry("memory").unwrap();
        assert_eq!(m.key_pos, Pos { line: 3, col: 3 });
        assert_eq!(m.value.pos(), Pos { line: 3, col: 11 });
        assert_eq!(m.value.text("").unwrap(), "1.10");
        assert_eq!(m.value.number("").unwrap(), 1.1);
        assert_eq!(m.value.path, "resources.memory");
        assert_eq!(root.leftovers().len(), 1);
    }

    #[test]
    fn deep_nesting_duplicates_and_bombs_are_refused_with_a_position() {
        let deep = "- ".repeat(10_000) + "x\n";
        let e = parse(&deep).err().unwrap();
        assert!(e.message.contains("deeper than 64"), "{e:?}");
        let flow = "[".repeat(300);
        assert!(parse(&flow).is_err());
        let e = parse("a: 1\nb: 2\na: 3\n").err().unwrap();
        assert_eq!(e.pos.line, 3);
        assert!(e.help.contains("once per mapping"), "{e:?}");
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            let prev = if i == 0 { "a".to_string() } else { format!("l{}", i - 1) };
            bomb.push_str(&format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        assert!(parse(&bomb).is_err());
    }

    #[test]
    fn typed_reads_say_what_was_found() {
        let docs = parse("cpus: [1, 2]\nflag: yes\n").unwrap();
        let root = Node::root(&docs[0]).mapping("").unwrap();
        let e = root.take("cpus").unwrap().number("write it like 4").err().unwrap();
        assert_eq!(e.message, "`cpus` must be a number, not a list");
        // YAML 1.2: `yes` is a string, not a boolean.
        assert!(root.take("flag").unwrap().boolean("").is_err());
    }
}
