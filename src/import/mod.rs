//! `canopy import`: a SkyPilot task YAML or a dstack task configuration →
//! an equivalent Canopy spec, with a warning for everything that has no
//! counterpart.
//!
//! This module owns the conversion and its bookkeeping: the shared
//! mappings both formats need (GPU requests, environment and secrets,
//! inputs, names), the warnings, and where each Canopy field came from, so
//! that a problem the spec's own validation finds in the result is
//! reported at the line of the YAML that caused it. `skypilot` and
//! `dstack` read their format's fields; `yaml` reads YAML with
//! positions; `emit` writes the TOML.
//!
//! Rules kept throughout: no field is dropped without a warning at its
//! line (every mapping's leftovers are reported); a secret's value, or an
//! environment value that looks like one, is never written out, shown or
//! logged: it becomes a secret *name*, resolved at launch; malformed input
//! is an error at `FILE:LINE:COL` with what to do, never a panic. The
//! result is always loaded back through [`crate::spec::load`] before it is
//! returned, so what `import` prints is a spec `validate` accepts. The only
//! I/O is [`convert_file`] reading the one file.

mod checkpoint;
mod dstack;
mod dstack_run;
pub mod emit;
mod gpu_names;
mod skypilot;
mod values;
mod yaml;

use crate::accel::{ComputeCapability, Family, Vendor};
use crate::spec::load::{self, Format};
use crate::spec::secrets;
use crate::spec::{AcceleratorReq, Diagnostic, GbRange, Input, Severity, Spec};
use std::path::{Path, PathBuf};
use yaml::{Got, Pos, Problem};

/// Which tool's file is being imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Skypilot,
    Dstack,
}

impl Source {
    /// As on the command line: `skypilot`, `dstack`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Skypilot => "skypilot",
            Source::Dstack => "dstack",
        }
    }

    /// As the tool spells itself: `SkyPilot`, `dstack`.
    pub fn title(self) -> &'static str {
        match self {
            Source::Skypilot => "SkyPilot",
            Source::Dstack => "dstack",
        }
    }
}

impl std::str::FromStr for Source {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "skypilot" | "sky" => Ok(Source::Skypilot),
            "dstack" => Ok(Source::Dstack),
            _ => Err(format!("unknown format {s:?}; use `skypilot` or `dstack`")),
        }
    }
}

/// Where the file is, for messages and for resolving local paths.
#[derive(Debug, Clone)]
pub struct Context {
    /// How diagnostics name the file.
    pub file: String,
    /// SkyPilot resolves relative local paths against the directory `sky`
    /// runs in: this one.
    pub cwd: PathBuf,
    /// dstack resolves relative local paths against the configuration's
    /// directory.
    pub config_dir: PathBuf,
    /// For `~/…` local paths; such paths are refused without it.
    pub home: Option<PathBuf>,
}

impl Context {
    /// For a file read from `path` by this process.
    pub fn for_file(path: &Path) -> Context {
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let config_dir = if dir.is_absolute() { dir.to_path_buf() } else { cwd.join(dir) };
        Context {
            file: path.display().to_string(),
            cwd,
            config_dir,
            home: std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from),
        }
    }

    /// The file's name without directories and YAML extensions, as a
    /// fallback workload name: `task.yaml` → `task`, `.dstack.yml` → `dstack`.
    fn stem(&self) -> String {
        let base = self.file.rsplit('/').next().unwrap_or(&self.file);
        let base = base.trim_start_matches('.');
        let base = [".dstack.yml", ".dstack.yaml", ".yaml", ".yml"]
            .iter()
            .find_map(|ext| base.strip_suffix(ext))
            .unwrap_or(base);
        base.to_string()
    }
}

/// A converted spec: the TOML text, the spec it means, and the warnings.
#[derive(Debug, Clone)]
pub struct Imported {
    pub spec: Spec,
    pub toml: String,
    /// One line each: `FILE:LINE:COL: warning: …`.
    pub warnings: Vec<Diagnostic>,
}

/// A file that could not be converted: errors first, then warnings, shown
/// one per line as a spec that does not load is.
pub type ImportError = crate::spec::SpecError;

/// Convert `text`, a file of `source`'s format.
pub fn convert(source: Source, text: &str, ctx: &Context) -> Result<Imported, ImportError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut cx = Cx::new(ctx, text);
    let docs = match yaml::parse(text) {
        Ok(docs) => docs,
        Err(p) => {
            cx.error(p);
            return Err(cx.failed());
        }
    };
    // A trailing `---` leaves an empty document: not a second task.
    let docs: Vec<yaml::Node<'_>> = docs
        .iter()
        .map(yaml::Node::root)
        .filter(|d| !matches!(d.kind(), yaml::Kind::Null | yaml::Kind::Invalid))
        .collect();
    let root = match docs.as_slice() {
        [] => {
            cx.error(Problem {
                pos: Pos { line: 1, col: 1 },
                path: String::new(),
                message: "the file is empty".into(),
                help: format!("give a {} task file", source.title()),
            });
            return Err(cx.failed());
        }
        [one] => one.clone(),
        [_, second, ..] => {
            let what = match source {
                Source::Skypilot => "a SkyPilot pipeline (several tasks)",
                Source::Dstack => "several configurations",
            };
            cx.error(second.problem(
                format!("the file holds {} YAML documents: {what}", docs.len()),
                "import one task per file: split the documents at `---` and import each",
            ));
            return Err(cx.failed());
        }
    };
    let map = match root
        .mapping(&format!("a {} task is a mapping of fields, like `name: train`", source.title()))
    {
        Ok(m) => m,
        Err(p) => {
            cx.error(p);
            return Err(cx.failed());
        }
    };
    match source {
        Source::Skypilot => skypilot::convert(&map, &mut cx),
        Source::Dstack => dstack::convert(&map, &mut cx),
    }
    cx.finish(source)
}

/// Read `path` (safely: a regular file of at most the spec size limit) and
/// convert it. Returns the text read (empty when none was), to show
/// diagnostics against.
pub fn convert_file(source: Source, path: &Path) -> (String, Result<Imported, ImportError>) {
    match load::read(path) {
        Ok(text) => {
            let result = convert(source, &text, &Context::for_file(path));
            (text, result)
        }
        Err(e) => {
            // The reader speaks of specs; here the file is a task file.
            let diagnostics = e
                .diagnostics
                .into_iter()
                .map(|mut d| {
                    d.message = d.message.replace("the spec", "the file");
                    d
                })
                .collect();
            (String::new(), Err(ImportError { diagnostics }))
        }
    }
}

/// The conversion under way: the spec being built, warnings, errors and
/// where each Canopy field came from.
pub(crate) struct Cx<'c> {
    pub ctx: &'c Context,
    pub spec: Spec,
    warnings: Vec<Diagnostic>,
    errors: Vec<Diagnostic>,
    origin: std::collections::BTreeMap<String, Pos>,
    /// Values never to be shown: secret values and credential-shaped
    /// tokens of the source.
    hidden: Vec<String>,
}

impl<'c> Cx<'c> {
    fn new(ctx: &'c Context, text: &str) -> Self {
        let hidden = secrets::secret_ranges(text).into_iter().filter_map(|r| text.get(r)).map(str::to_owned);
        Cx {
            ctx,
            spec: Spec::new("imported", Vec::new()),
            warnings: Vec::new(),
            errors: Vec::new(),
            origin: Default::default(),
            hidden: hidden.collect(),
        }
    }

    fn diagnostic(
        &self,
        severity: Severity,
        pos: Pos,
        path: &str,
        message: String,
        help: Option<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity,
            file: self.ctx.file.clone(),
            line: pos.line,
            col: pos.col,
            path: path.to_string(),
            message: secrets::scrub(&message, &self.hidden),
            help: help.map(|h| secrets::scrub(&h, &self.hidden)),
        }
    }

    /// A warning: one line, at `pos`, about source field `path`.
    pub fn warn(&mut self, pos: Pos, path: &str, message: String) {
        let d = self.diagnostic(Severity::Warning, pos, path, message, None);
        self.warnings.push(d);
    }

    /// "`resources.disk_tier` has no Canopy counterpart: … (dropped)".
    pub fn dropped(&mut self, pos: Pos, path: &str, why: &str) {
        self.warn(pos, path, format!("`{path}` has no Canopy counterpart: {why} (dropped)"));
    }

    /// "The zone in `resources.infra` has no Canopy counterpart: … (dropped)".
    pub fn dropped_part(&mut self, pos: Pos, path: &str, what: &str, why: &str) {
        self.warn(pos, path, format!("{what} in `{path}` has no Canopy counterpart: {why} (dropped)"));
    }

    pub fn error(&mut self, p: Problem) {
        let d = self.diagnostic(Severity::Error, p.pos, &p.path, p.message, Some(p.help));
        self.errors.push(d);
    }

    /// The value, or `None` with the problem recorded.
    pub fn ok<T>(&mut self, r: Got<T>) -> Option<T> {
        r.map_err(|p| self.error(p)).ok()
    }

    /// Canopy field `path` was set from the YAML at `pos`.
    pub fn from(&mut self, path: &str, pos: Pos) {
        self.origin.insert(path.to_string(), pos);
    }

    /// Never show `value` in any message.
    pub fn hide(&mut self, value: &str) {
        if !value.is_empty() {
            self.hidden.push(value.to_string());
        }
    }

    /// Every key of `map` nobody took, as a warning from `known`'s reason,
    /// or as an unknown field of the format.
    pub fn leftovers(&mut self, map: &yaml::Map<'_>, source: Source, known: &[(&str, &str)]) {
        for e in map.leftovers() {
            let path = e.value.path.clone();
            match known.iter().find(|(k, _)| *k == e.key) {
                Some((_, why)) => self.dropped(e.key_pos, &path, why),
                None => self.warn(
                    e.key_pos,
                    &path,
                    format!(
                        "`{path}` is not a {} task field Canopy knows; check its spelling (dropped)",
                        source.title()
                    ),
                ),
            }
        }
    }

    fn failed(mut self) -> ImportError {
        let mut diagnostics = std::mem::take(&mut self.errors);
        diagnostics.sort_by_key(|d| (d.line, d.col));
        self.warnings.sort_by_key(|d| (d.line, d.col));
        diagnostics.extend(self.warnings);
        ImportError { diagnostics }
    }

    /// The position the Canopy field `path` (or its nearest parent) came from.
    fn origin_of(&self, path: &str) -> Pos {
        self.origin
            .iter()
            .filter(|(p, _)| {
                path == p.as_str()
                    || path.strip_prefix(p.as_str()).is_some_and(|rest| rest.starts_with(['.', '[']))
                    || p.strip_prefix(path).is_some_and(|rest| rest.starts_with(['.', '[']))
            })
            .max_by_key(|(p, _)| p.len())
            .map_or(Pos { line: 1, col: 1 }, |(_, pos)| *pos)
    }

    /// Write the spec, load it back as a Canopy spec, and turn what the
    /// spec's validation says into diagnostics at the YAML's lines.
    fn finish(mut self, source: Source) -> Result<Imported, ImportError> {
        if !self.errors.is_empty() {
            return Err(self.failed());
        }
        let baseline = Spec::new(self.spec.name.clone(), self.spec.runtime.command.clone());
        let body = match emit::to_toml(&self.spec, &baseline, &[]) {
            Ok(t) => t,
            Err(e) => return Err(self.internal(&format!("the spec could not be written as TOML ({e})"))),
        };
        let label = format!("{} (converted)", self.ctx.file);
        match load::parse(&body, &label, Format::Toml) {
            Ok(loaded) => {
                if loaded.spec != self.spec {
                    return Err(self.internal("the written spec does not read back the same"));
                }
                for w in loaded.warnings {
                    let pos = self.origin_of(&w.path);
                    let message = format!("{} (in the converted spec)", w.message);
                    self.warn(pos, &w.path, message);
                }
            }
            Err(e) => {
                for d in e.diagnostics {
                    let pos = self.origin_of(&d.path);
                    let message = format!("the converted spec is not valid: {}", d.message);
                    let (severity, help) = (d.severity, d.help.clone());
                    let diag = self.diagnostic(severity, pos, &d.path, message, help);
                    match severity {
                        Severity::Error => self.errors.push(diag),
                        Severity::Warning => self.warnings.push(diag),
                    }
                }
                return Err(self.failed());
            }
        }
        self.warnings.sort_by_key(|d| (d.line, d.col));
        let header = self.header(source);
        let toml = match emit::to_toml(&self.spec, &baseline, &header) {
            Ok(t) => t,
            Err(e) => return Err(self.internal(&format!("the spec could not be written as TOML ({e})"))),
        };
        Ok(Imported { spec: self.spec, toml, warnings: self.warnings })
    }

    fn header(&self, source: Source) -> Vec<String> {
        let file = self.ctx.file.rsplit('/').next().unwrap_or(&self.ctx.file);
        let mut lines = vec![
            format!(
                "Converted from the {} {} `{file}` by `canopy import {}`.",
                source.title(),
                if self.spec.kind == crate::spec::WorkloadKind::Inference { "service" } else { "task" },
                source.as_str()
            ),
            "Check it with `canopy validate` and `canopy plan`; docs/import.md lists the mapping."
                .to_string(),
        ];
        if !self.warnings.is_empty() {
            lines.push(String::new());
            lines.push("Warnings (what has no counterpart, or changed form):".to_string());
            for w in &self.warnings {
                lines.push(format!("  line {}: {}", w.line, w.message));
            }
        }
        lines
    }

    fn internal(mut self, what: &str) -> ImportError {
        self.error(Problem {
            pos: Pos { line: 1, col: 1 },
            path: String::new(),
            message: format!("internal error: {what}"),
            help: "this is a bug in `canopy import`; please report it with the file".into(),
        });
        self.failed()
    }

    // ── Mappings both formats share ─────────────────────────────────────

    /// The workload's name: `given` made safe, else the file's stem.
    pub fn name(&mut self, given: Option<(String, Pos, String)>) {
        let (raw, pos, path) = match given {
            Some(g) => g,
            None => (self.ctx.stem(), Pos { line: 1, col: 1 }, String::new()),
        };
        let mut name = safe_name(&raw);
        if name.is_empty() {
            name = "imported".into();
        }
        if name != raw && !path.is_empty() {
            self.warn(
                pos,
                &path,
                format!("`{path}` becomes `{name}`: Canopy names use letters, digits, `-`, `_` and `.`"),
            );
        }
        self.spec.name = name;
        self.from("name", pos);
    }

    /// A GPU request → `resources.gpus`, `gpu_memory_gb`, `accelerator`.
    pub fn gpus(&mut self, ask: GpuAsk) {
        let r = &mut self.spec.resources;
        r.gpus = ask.count;
        self.from("resources.gpus", ask.pos);
        if ask.count == 0 {
            return;
        }
        let mut known = Vec::new();
        let mut unknown = Vec::new();
        for (name, pos) in &ask.names {
            match gpu_names::lookup(name) {
                Some(k) => known.push(k),
                None => unknown.push((name.clone(), *pos)),
            }
        }
        let mut acc = AcceleratorReq { vendor: ask.vendor, ..Default::default() };
        let mut implied_memory = None;
        match (ask.names.len(), known.as_slice()) {
            (0, _) => {}
            (1, [k]) => {
                acc.model = Some(k.model.to_string());
                acc.family = vec![k.family];
                acc.vendor = Some(k.vendor());
                implied_memory = Some(k.memory_gb);
            }
            (1, _) => {
                let (name, pos) = &unknown[0];
                acc.model = Some(name.clone());
                self.warn(
                    *pos,
                    &ask.path,
                    format!(
                        "`{name}` is not a GPU name Canopy knows: kept as `resources.accelerator.model`, \
                         matched as a whole word in pools' model names"
                    ),
                );
            }
            (_, []) => {
                let (name, pos) = &unknown[0];
                acc.model = Some(name.clone());
                let rest: Vec<&str> = unknown[1..].iter().map(|(n, _)| n.as_str()).collect();
                self.warn(
                    *pos,
                    &ask.path,
                    format!(
                        "`{path}` lists GPUs Canopy does not know ({}): kept `{name}` as \
                         `resources.accelerator.model`; Canopy asks for one model, so {} (dropped)",
                        ask.names.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", "),
                        rest.join(", "),
                        path = ask.path,
                    ),
                );
            }
            (_, ks) => {
                let mut families: Vec<Family> = Vec::new();
                for k in ks {
                    if !families.contains(&k.family) {
                        families.push(k.family);
                    }
                }
                let vendors: Vec<Vendor> = families.iter().map(|f| f.vendor()).collect();
                if vendors.iter().all(|v| *v == vendors[0]) {
                    acc.vendor = Some(vendors[0]);
                } else {
                    acc.vendor = None;
                }
                implied_memory = ks.iter().map(|k| k.memory_gb).reduce(f64::min);
                let names: Vec<&str> = ask.names.iter().map(|(n, _)| n.as_str()).collect();
                let fams: Vec<&str> = families.iter().map(|f| f.as_str()).collect();
                self.warn(
                    ask.pos,
                    &ask.path,
                    format!(
                        "`{}` offers several GPUs ({}): Canopy asks for one model, so any GPU of their \
                         families ({}) with at least {} GB is accepted",
                        ask.path,
                        names.join(", "),
                        fams.join(", "),
                        values::fmt_num(implied_memory.unwrap_or(0.0)),
                    ),
                );
                for (name, pos) in &unknown {
                    self.warn(
                        *pos,
                        &ask.path,
                        format!(
                            "`{name}` is not a GPU name Canopy knows and cannot join a family list (dropped)"
                        ),
                    );
                }
                acc.family = families;
            }
        }
        if let Some(v) = ask.vendor
            && acc.vendor.is_some_and(|a| a != v)
        {
            acc.vendor = Some(v);
        }
        let memory = match ask.memory {
            Some(m) => Some(GbRange { min: m.min, max: m.max }),
            None => implied_memory.map(|gb| GbRange { min: Some(gb), max: None }),
        };
        acc.min_compute_capability = ask.compute_capability;
        let has_memory = memory.is_some();
        self.spec.resources.gpu_memory_gb = memory;
        if acc != AcceleratorReq::default() {
            self.spec.resources.accelerator = Some(acc);
            self.from("resources.accelerator", ask.pos);
        }
        if has_memory {
            self.from("resources.gpu_memory_gb", ask.pos);
        }
    }

    /// One environment entry: a plain variable, or a secret *name* when it
    /// has no value, refers to a secret, or holds something secret.
    pub fn env(&mut self, name: &str, value: EnvValue, pos: Pos, path: &str) {
        match value {
            EnvValue::Missing => {
                self.warn(
                    pos,
                    path,
                    format!(
                        "`{path}` has no value in the file: it becomes secret `{name}`, resolved when the \
                         workload launches"
                    ),
                );
                self.secret(name, pos);
            }
            EnvValue::SecretRef(from) => {
                self.warn(
                    pos,
                    path,
                    format!(
                        "`{path}` reads dstack secret `{from}`: it becomes Canopy secret `{name}`, resolved \
                         when the workload launches"
                    ),
                );
                self.secret(name, pos);
            }
            EnvValue::Text(v) => {
                let secret = (secrets::is_secret_name(name) && !secrets::harmless(&v))
                    || secrets::looks_like_credential(&v);
                if secret {
                    self.hide(&v);
                    self.warn(
                        pos,
                        path,
                        format!(
                            "`{path}` holds a secret value: it becomes secret `{name}`, resolved when the \
                             workload launches; the value is not carried over"
                        ),
                    );
                    self.secret(name, pos);
                } else if self.spec.runtime.secrets.iter().any(|s| s == name) {
                    self.warn(
                        pos,
                        path,
                        format!(
                            "`{path}` is also a secret: the secret is kept and this value is not carried over"
                        ),
                    );
                } else {
                    self.spec.runtime.env.insert(name.to_string(), v);
                    self.from(&format!("runtime.env.{name}"), pos);
                }
            }
        }
    }

    /// `name` is a secret of the workload (once; never also a plain variable).
    pub fn secret(&mut self, name: &str, pos: Pos) {
        self.spec.runtime.env.remove(name);
        if !self.spec.runtime.secrets.iter().any(|s| s == name) {
            let i = self.spec.runtime.secrets.len();
            self.spec.runtime.secrets.push(name.to_string());
            self.from(&format!("runtime.secrets[{i}]"), pos);
        }
    }

    /// Data the workload reads: `source` is a URI or a local path (made
    /// absolute against `base`), appearing at `mount` when given. Returns
    /// the input's name, or `None` (with a warning) when it cannot be one.
    pub fn input(
        &mut self,
        hint: &str,
        source: &str,
        mount: Option<String>,
        base: &Path,
        at: (Pos, &str),
    ) -> Option<String> {
        let (pos, path) = at;
        let uri = match source.split_once("://") {
            Some((scheme, _)) => {
                let lower = scheme.to_ascii_lowercase();
                if !crate::spec::validate::INPUT_SCHEMES.contains(&lower.as_str()) {
                    self.dropped(
                        pos,
                        path,
                        &format!(
                            "Canopy inputs read {} URIs, not `{scheme}://`; copy the data to one of those",
                            crate::spec::validate::INPUT_SCHEMES.join(", ")
                        ),
                    );
                    return None;
                }
                source.to_string()
            }
            None => {
                let local = if source == "~" || source.starts_with("~/") {
                    match &self.ctx.home {
                        Some(h) => h.join(source.trim_start_matches('~').trim_start_matches('/')),
                        None => {
                            self.dropped(
                                pos,
                                path,
                                "`~` cannot be resolved without $HOME; write an absolute path",
                            );
                            return None;
                        }
                    }
                } else {
                    base.join(source)
                };
                file_uri(&lexical(&local))
            }
        };
        let mut name = safe_name(hint);
        if name.is_empty() {
            name = "input".into();
        }
        let taken = |n: &str, spec: &Spec| spec.inputs.iter().any(|i| i.name == n);
        if taken(&name, &self.spec) {
            let base_name = name.clone();
            let mut k = 2;
            while taken(&format!("{base_name}-{k}"), &self.spec) {
                k += 1;
            }
            name = format!("{base_name}-{k}");
        }
        let i = self.spec.inputs.len();
        self.spec.inputs.push(Input { name: name.clone(), source: uri, region: None, size_gb: None, mount });
        self.from(&format!("inputs[{i}]"), pos);
        Some(name)
    }
}

/// What an environment entry holds.
pub(crate) enum EnvValue {
    /// `KEY` with no value: supplied when the task is launched.
    Missing,
    /// `${{ secrets.name }}`: a dstack secret.
    SecretRef(String),
    Text(String),
}

/// A GPU request as both formats can state it.
pub(crate) struct GpuAsk {
    /// Candidate GPU names and where each was written.
    pub names: Vec<(String, Pos)>,
    pub vendor: Option<Vendor>,
    pub count: u32,
    /// Memory per GPU, when stated apart from the name.
    pub memory: Option<values::Range>,
    pub compute_capability: Option<ComputeCapability>,
    pub pos: Pos,
    /// The source field, for messages.
    pub path: String,
}

/// Letters, digits, `-`, `_`, `.`; anything else becomes `-`, runs of `-`
/// collapse, and the result is at most 128 characters.
pub(crate) fn safe_name(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.trim().chars() {
        let c = if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '-' };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.trim_matches('-').chars().take(128).collect()
}

/// `p` without `.` components and with `..` applied to what precedes it,
/// without asking the file system (the path may not exist here).
fn lexical(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("/");
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// `file://` + the path, with the characters a URI cannot hold escaped.
fn file_uri(p: &Path) -> String {
    let mut out = String::from("file://");
    for c in p.to_string_lossy().chars() {
        match c {
            '%' | ' ' | '#' | '?' => out.push_str(&format!("%{:02X}", c as u32)),
            c if c.is_control() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// A compute capability written `8.0` (a number) or `"8.0"`.
pub(crate) fn compute_capability(node: &yaml::Node<'_>) -> Got<ComputeCapability> {
    let text = node.text("write it as MAJOR.MINOR, like 8.0")?;
    text.parse::<ComputeCapability>().map_err(|e| node.problem(e, "write it as MAJOR.MINOR, like 8.0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe() {
        assert_eq!(safe_name("my task/v2"), "my-task-v2");
        assert_eq!(safe_name("--x--"), "x");
        assert_eq!(safe_name("llama-3.1_ft"), "llama-3.1_ft");
    }

    #[test]
    fn local_paths_are_resolved_lexically() {
        assert_eq!(lexical(Path::new("/home/u/./code/../data")), PathBuf::from("/home/u/data"));
        assert_eq!(lexical(Path::new("/../x")), PathBuf::from("/x"));
    }

    #[test]
    fn file_uris_escape_what_a_uri_cannot_hold() {
        assert_eq!(file_uri(Path::new("/data/my set%1")), "file:///data/my%20set%251");
    }

    #[test]
    fn stems_drop_yaml_extensions_and_dots() {
        let c =
            |f: &str| Context { file: f.into(), cwd: "/".into(), config_dir: "/".into(), home: None }.stem();
        assert_eq!(c("x/task.yaml"), "task");
        assert_eq!(c(".dstack.yml"), "dstack");
        assert_eq!(c("train.dstack.yml"), "train");
    }
}
