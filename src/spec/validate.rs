//! Semantic checks on a parsed [`Spec`]: everything the types alone cannot
//! say (`gpus = 0` with a GPU memory requirement, `min > max`, a secret
//! written inline, an output path with `..`).
//!
//! This module owns the rules and their wording. It works on the typed
//! spec only and reports [`Finding`]s keyed by dotted path; it knows
//! nothing about files, lines or columns ([`super::load`] locates them).
//! It reports every problem it finds, not just the first. A finding's
//! message and help never contain a secret value.

use super::locate::{child, item};
use super::secrets::INLINE_SECRET;
use super::{Severity, Spec, WorkloadKind};
use crate::units::HumanDuration;

mod data;
mod resources;
mod runtime;

pub use super::locate::Target;
pub use data::INPUT_SCHEMES;
pub(crate) use resources::link_vendor;
pub use resources::{
    MAX_CPU_CORES, MAX_DISK_GB, MAX_GPU_MEMORY_GB, MAX_GPUS, MAX_MEMORY_GB, MAX_MODEL_BYTES, MAX_NODES,
};
pub(crate) use runtime::is_env_name;

/// Largest spec text accepted, checked before parsing.
pub const MAX_SPEC_BYTES: usize = 256 * 1024;
/// Most arguments in `runtime.command`.
pub const MAX_ARGV: usize = 1000;
/// Most `[[inputs]]` entries.
pub const MAX_INPUTS: usize = 256;
/// Most `[[outputs]]` entries.
pub const MAX_OUTPUTS: usize = 256;
/// Most labels.
pub const MAX_LABELS: usize = 64;
/// Highest priority.
pub const MAX_PRIORITY: u32 = 100;
/// Most attempts a retry policy may allow.
pub const MAX_ATTEMPTS: u32 = 100;
/// Longest workload name, in characters.
pub const MAX_NAME_CHARS: usize = 128;
/// Longest label key, in characters (ASCII only).
pub const MAX_LABEL_KEY_CHARS: usize = 128;
/// Longest label value, in characters.
pub const MAX_LABEL_VALUE_CHARS: usize = 256;

/// One problem found in a spec, keyed by the dotted path it concerns.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub severity: Severity,
    pub path: String,
    /// Point at the key (e.g. a bad env var name) or at its value.
    pub target: Target,
    pub message: String,
    pub help: String,
}

/// Collects findings; the checks below push into it.
#[derive(Default)]
pub(crate) struct Findings(Vec<Finding>);

impl Findings {
    fn push(&mut self, severity: Severity, target: Target, path: &str, message: String, help: String) {
        self.0.push(Finding { severity, path: path.to_string(), target, message, help });
    }
    pub(crate) fn error(&mut self, path: &str, message: impl Into<String>, help: impl Into<String>) {
        self.push(Severity::Error, Target::Value, path, message.into(), help.into());
    }
    pub(crate) fn error_at_key(&mut self, path: &str, message: impl Into<String>, help: impl Into<String>) {
        self.push(Severity::Error, Target::Key, path, message.into(), help.into());
    }
    pub(crate) fn warning(&mut self, path: &str, message: impl Into<String>, help: impl Into<String>) {
        self.push(Severity::Warning, Target::Value, path, message.into(), help.into());
    }
}

/// Every semantic problem in `spec`, errors and warnings, in check order.
pub fn check(spec: &Spec) -> Vec<Finding> {
    let mut f = Findings::default();
    general(spec, &mut f);
    runtime::check(&spec.runtime, &mut f);
    resources::check(&spec.resources, &mut f);
    constraints(spec, &mut f);
    preferences(spec, &mut f);
    retry(spec, &mut f);
    data::check(spec, &mut f);
    notify(spec, &mut f);
    f.0
}

/// `[notify]`: the URL as a URL (the server checks it again against its
/// admin's policy and the addresses its host resolves to).
fn notify(spec: &Spec, f: &mut Findings) {
    use crate::notify::target::{Policy, TargetError, check_url};
    let Some(n) = &spec.notify else { return };
    // What the spec alone decides: the loosest policy the admin may set.
    let loosest = Policy {
        allow_http: true,
        allow: ["0.0.0.0/0", "::/0"].iter().filter_map(|c| c.parse().ok()).collect(),
    };
    match check_url(&n.webhook, &loosest) {
        Ok(_) => {}
        Err(e @ (TargetError::Scheme { .. } | TargetError::NotUrl(_))) => f.error(
            "notify.webhook",
            e.to_string(),
            "write the receiver's URL, like \"https://hooks.example.com/canopy\"",
        ),
        Err(e) => {
            f.error("notify.webhook", e.to_string(), "name the receiver by an https URL the server may call")
        }
    }
    if n.events.is_empty() {
        f.error(
            "notify.events",
            "`notify.events` is empty: the webhook would never be called",
            "name one or more of running, succeeded, failed, cancelled, retrying, or leave it out for the ends",
        );
    }
}

/// Whether `name` is a usable name: letters, digits, `-`, `_`, `.`.
/// Returns the first offending character, if any.
pub(crate) fn bad_name_char(name: &str) -> Option<char> {
    name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
}

/// The first control character in `s` (C0, DEL or C1) other than those in
/// `allowed`. Such characters act on a terminal instead of showing, and
/// spec text is shown on operators' terminals.
pub(crate) fn control_char(s: &str, allowed: &[char]) -> Option<char> {
    s.chars().find(|c| c.is_control() && !allowed.contains(c))
}

/// "`runtime.env.X` contains a NUL character", or "… the control
/// character U+001B".
pub(crate) fn control_message(path: &str, c: char) -> String {
    if c == '\0' {
        format!("`{path}` contains a NUL character")
    } else {
        format!("`{path}` contains the control character U+{:04X}", u32::from(c))
    }
}

fn general(spec: &Spec, f: &mut Findings) {
    let name = spec.name.as_str();
    if name.trim().is_empty() {
        f.error("name", "`name` is empty", "give the workload a short name, like \"batch-inference\"");
    } else if let Some(c) = bad_name_char(name) {
        f.error(
            "name",
            format!("`name` contains {c:?}, which is not allowed"),
            "use letters, digits, `-`, `_` and `.` only, like \"batch-inference\"",
        );
    } else if name.chars().count() > MAX_NAME_CHARS {
        f.error(
            "name",
            format!("`name` is longer than {MAX_NAME_CHARS} characters"),
            "use a shorter name; put details in `labels`",
        );
    }
    if spec.priority > MAX_PRIORITY {
        f.error(
            "priority",
            format!("`priority` is {}, above the maximum of {MAX_PRIORITY}", spec.priority),
            "use 0 (lowest) to 100 (highest); the default is 50",
        );
    }
    if let Some(expected) = spec.expected_runtime {
        if expected.0.is_zero() {
            f.error(
                "expected_runtime",
                "`expected_runtime` is 0",
                "give the typical run time, like \"2h\", or remove it",
            );
        }
        if let Some(max) = spec.constraints.max_runtime
            && expected > max
            && !max.0.is_zero()
        {
            f.error(
                "expected_runtime",
                format!("`expected_runtime` ({expected}) is longer than `constraints.max_runtime` ({max}), so a typical run would time out"),
                "raise constraints.max_runtime or lower expected_runtime",
            );
        }
    }
    if spec.labels.len() > MAX_LABELS {
        f.error(
            "labels",
            format!("there are {} labels; at most {MAX_LABELS} are allowed", spec.labels.len()),
            "keep the labels you filter on and drop the rest",
        );
    }
    for (key, value) in &spec.labels {
        let path = child("labels", key);
        if key.is_empty()
            || key.len() > MAX_LABEL_KEY_CHARS
            || key.chars().any(|c| !(c.is_ascii_alphanumeric() || "-_./".contains(c)))
        {
            f.error_at_key(
                &path,
                format!(
                    "label keys must be 1 to {MAX_LABEL_KEY_CHARS} letters, digits, `-`, `_`, `.` or `/`"
                ),
                "rename the label, like `team = \"ml-platform\"`",
            );
        }
        if value.chars().count() > MAX_LABEL_VALUE_CHARS {
            f.error(
                &path,
                format!("label values must be at most {MAX_LABEL_VALUE_CHARS} characters"),
                "shorten the value",
            );
        }
        if let Some(c) = control_char(value, &[]) {
            f.error(
                &path,
                control_message(&path, c),
                "remove it: labels are shown on operators' terminals, where a control character acts instead of showing",
            );
        }
        if super::secrets::looks_like_credential(value) {
            f.error(
                &path,
                format!("{INLINE_SECRET} {path}"),
                "remove it: labels are shown in the console and stored in the journal",
            );
        }
    }
}

fn is_zero(d: &Option<HumanDuration>) -> bool {
    d.is_some_and(|d| d.0.is_zero())
}

fn money(f: &mut Findings, path: &str, value: Option<f64>) {
    if let Some(v) = value
        && (!v.is_finite() || v <= 0.0)
    {
        f.error(
            path,
            format!("`{path}` must be more than 0"),
            "give an amount in US dollars, like 10.0, or remove it for no limit",
        );
    }
}

fn non_empty_entries(
    f: &mut Findings,
    path: &str,
    items: impl IntoIterator<Item = impl AsRef<str>>,
    what: &str,
) {
    for (i, s) in items.into_iter().enumerate() {
        if s.as_ref().trim().is_empty() {
            f.error(
                &item(path, i),
                format!("`{}` is empty", item(path, i)),
                format!("write a {what} or remove the entry"),
            );
        }
    }
}

fn constraints(spec: &Spec, f: &mut Findings) {
    if let Some(g) = spec.runtime.stop_grace
        && g.0 > crate::spec::Runtime::MAX_STOP_GRACE
    {
        f.error(
            "runtime.stop_grace",
            format!("`runtime.stop_grace` is {g}, longer than the 1h a stop may wait"),
            "give the workload at most \"1h\" to exit after SIGTERM",
        );
    }
    let c = &spec.constraints;
    if c.topology.is_some() && spec.resources.nodes == 1 {
        f.warning(
            "constraints.topology",
            "`constraints.topology` only matters between the nodes of a gang, and nodes = 1",
            "remove it, or set resources.nodes; as written it is ignored",
        );
    }
    if is_zero(&c.max_runtime) {
        f.error(
            "constraints.max_runtime",
            "`constraints.max_runtime` is 0, so every attempt would time out at once",
            "give a limit like \"2h\", or remove it for no limit",
        );
    }
    money(f, "constraints.max_cost_usd", c.max_cost_usd);
    money(f, "constraints.max_hourly_usd", c.max_hourly_usd);
    if c.max_cost_usd.is_some() && c.max_runtime.is_none() && spec.expected_runtime.is_none() {
        f.warning(
            "constraints.max_cost_usd",
            "`max_cost_usd` is set without `max_runtime` or `expected_runtime`, so the cost cap is only enforced while the workload runs",
            "add constraints.max_runtime (or expected_runtime) so placements that would exceed the budget are avoided up front",
        );
    }
    non_empty_entries(
        f,
        "constraints.providers",
        c.providers.iter().map(|g| g.as_str()),
        "provider name or glob",
    );
    non_empty_entries(f, "constraints.regions", c.regions.iter().map(|g| g.as_str()), "region name or glob");
    non_empty_entries(f, "constraints.compliance", &c.compliance, "compliance tag");
    non_empty_entries(f, "constraints.capabilities", &c.capabilities, "capability tag");
    let r = &spec.retry;
    if c.interruptible && spec.kind == WorkloadKind::Training && r.infra_retries == 0 && r.max_attempts <= 1 {
        f.warning(
            "constraints.interruptible",
            "training on interruptible capacity with no retries: one preemption fails the workload",
            "raise retry.infra_retries (e.g. 10), or set interruptible = false",
        );
    }
}

fn preferences(spec: &Spec, f: &mut Findings) {
    let p = &spec.preferences;
    non_empty_entries(f, "preferences.regions", p.regions.iter().map(|g| g.as_str()), "region name or glob");
    non_empty_entries(f, "preferences.capabilities", &p.capabilities, "capability tag");
    let allowed = &spec.constraints.regions;
    for (i, region) in p.regions.iter().enumerate() {
        let literal = !region.as_str().contains(['*', '?']) && !region.as_str().is_empty();
        if literal && !crate::units::allowed(allowed, region.as_str()) {
            f.warning(
                &item("preferences.regions", i),
                format!("preferred region `{region}` is outside constraints.regions, so this preference never applies"),
                "add it to constraints.regions or remove it from preferences.regions",
            );
        }
    }
}

fn retry(spec: &Spec, f: &mut Findings) {
    let r = &spec.retry;
    if r.max_attempts == 0 {
        f.error(
            "retry.max_attempts",
            "`retry.max_attempts` is 0, so the workload would never run",
            "use 1 for no retries; attempts count the first one",
        );
    } else if r.max_attempts > MAX_ATTEMPTS {
        f.error(
            "retry.max_attempts",
            format!("`retry.max_attempts` is {}, above the maximum of {MAX_ATTEMPTS}", r.max_attempts),
            "use at most 100; a workload that fails that often needs fixing, not retrying",
        );
    } else if r.app_errors >= r.max_attempts {
        f.warning(
            "retry.app_errors",
            format!(
                "`retry.app_errors` is {}, but only {} retries are possible with max_attempts = {}",
                r.app_errors,
                r.max_attempts - 1,
                r.max_attempts
            ),
            format!("lower app_errors to at most {}, or raise max_attempts", r.max_attempts - 1),
        );
    }
    if r.backoff > r.backoff_max {
        f.error(
            "retry.backoff",
            format!("`retry.backoff` ({}) is longer than `retry.backoff_max` ({})", r.backoff, r.backoff_max),
            "lower backoff or raise backoff_max",
        );
    }
}
