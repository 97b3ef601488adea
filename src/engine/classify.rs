//! The failure classifier: what a failed attempt *was*, and the evidence
//! that decided it.
//!
//! This module owns the failure classes ([`FailureClass`]), the words for
//! how a provider says an attempt ended ([`ProviderEnd`]), and [`classify`],
//! which turns an end plus the tail of the attempt's log into a
//! [`Classification`]: a class, the stable id of the rule that decided, and
//! the exact provider state, exit status or log line that rule rested on.
//! The rules themselves are a static table (`rules.rs`).
//!
//! It must not decide what to do about a failure (retry, back off, penalise
//! a node, ask for a bigger GPU): the engine's retry policy reads the class
//! for that. It does no I/O and reads no clock: the log tail is handed in.
//!
//! # Precedence
//!
//! Rules are tried tier by tier; the first tier with a match decides.
//!
//! 1. **Canopy-enforced ends** (`canopy.*`): cancel, cost cap, max runtime.
//!    Canopy ended the attempt itself, so whatever the log says after that
//!    is a consequence.
//! 2. **Unambiguous provider states** (`provider.*`): preempted, node lost,
//!    boot failure, launch rejected (capacity or not), API error, launch
//!    timeout, the provider's own time limit and OOM kill. The provider saw
//!    what happened; the log cannot know better.
//! 3. **Log-tail signatures** (`log.*`), for ends that are a process exit
//!    (or an end the provider could not explain). Each signature has a
//!    strength: hardware faults, then causes (OOM, named exceptions,
//!    storage errors, scheduler and cloud notices), then symptoms (NCCL
//!    timeouts, network errors), then generic errors, then trailers
//!    ("Traceback", "Segmentation fault", launcher summaries). The tail is
//!    read from the end backwards; the strongest signature anywhere wins,
//!    and among equally strong ones the *last* wins. So a CUDA OOM on this
//!    rank beats the NCCL timeout it caused later, an Xid 79 beats every
//!    CUDA error after it, and a real `ImportError` beats an earlier OOM
//!    that a batch-size probe caught and survived. When one line matches
//!    several rules, the first in table order names it.
//! 4. **Exit code or signal** (`exit.*`): SIGKILL, SIGSEGV, SIGTERM, other
//!    signals, "command not found", and an end the provider could not
//!    explain (`provider.unknown`).
//! 5. **Default** (`default.app`): the workload failed on its own; the
//!    evidence is the last non-empty log line, or the exit status when the
//!    log is empty.
//!
//! # Decisions on ambiguous signals
//!
//! - Exit 137 / SIGKILL is CPU OOM only with evidence: an OOM-killer line,
//!   or the shell's bare `Killed` line. Without evidence it is `app`
//!   (`exit.sigkill`): calling it `node` would charge machines for the most
//!   common user failure (CPU OOM is 30% of Philly's failed trials), and
//!   calling it `cpu-oom` would be a guess.
//! - SIGTERM (143) is `preempted` when the provider says so or the log has
//!   a preemption notice; otherwise `app` (`exit.sigterm`).
//! - "CUDA driver version is insufficient" is `app`: the node is healthy, the
//!   workload's image needs a newer driver than this pool has. Retrying on
//!   the same pool fails the same way; the fix is in the spec.
//! - "Permission denied" and `FileNotFoundError` are `app` (Philly counts
//!   both as user errors); a missing `libcuda.so.1` or an unreachable GPU is
//!   `node`.
//! - A CUDA error that names no cause (e.g. "unspecified launch failure") is
//!   `app` at generic strength: most come from the workload's kernels, and
//!   real hardware faults carry their own signature (Xid, ECC, fallen off
//!   the bus) which outranks it. "CUDA error: unknown error" is `node`.
//! - Connection errors are `comm` when the line names the distributed stack
//!   (c10d, NCCL, Gloo, MPI, TCPStore), otherwise `io` (storage, hubs and
//!   other services the workload reads from).
//! - A launch the provider never answered in time is `provider` (its API
//!   timed out). A launch it accepted that then stays pending is capacity,
//!   but that is the engine's call on its own clock, not a provider end.
//! - A boot failure is `node`, except an image that does not exist or may
//!   not be pulled, which is `app`.

use crate::engine::rules::{self, Matcher, RULES, Status, Strength};
use serde::{Deserialize, Deserializer, Serialize};
use std::fmt;

/// The longest evidence line kept, in characters.
pub const EVIDENCE_MAX_CHARS: usize = 300;

pub use crate::failure::{FailureClass, ProviderEnd, UnknownFailureClass};

/// Reads as the evidence line for a provider state, exit code or signal.
impl fmt::Display for ProviderEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn with(f: &mut fmt::Formatter<'_>, what: &str, message: &str) -> fmt::Result {
            match message.trim() {
                "" => f.write_str(what),
                m => write!(f, "{what}: {m}"),
            }
        }
        match self {
            ProviderEnd::Exited { code } => match Status::of(self) {
                Status::Signal(s) => match rules::signal_name(s) {
                    Some(name) => write!(f, "exit code {code} ({name})"),
                    None => write!(f, "exit code {code} (signal {s})"),
                },
                _ => write!(f, "exit code {code}"),
            },
            ProviderEnd::Signaled { signal } => match rules::signal_name(*signal) {
                Some(name) => write!(f, "signal {signal} ({name})"),
                None => write!(f, "signal {signal}"),
            },
            ProviderEnd::LaunchRejected { message, capacity: true } => {
                with(f, "launch rejected (no capacity)", message)
            }
            ProviderEnd::LaunchRejected { message, capacity: false } => with(f, "launch rejected", message),
            ProviderEnd::ApiError { message } => with(f, "provider API error", message),
            ProviderEnd::LaunchTimeout => f.write_str("launch timed out"),
            ProviderEnd::NodeLost { message } => with(f, "node lost", message),
            ProviderEnd::Preempted => f.write_str("preempted by the provider"),
            ProviderEnd::TimedOut => f.write_str("provider time limit reached"),
            ProviderEnd::OutOfMemory => f.write_str("killed by the provider for host memory"),
            ProviderEnd::Cancelled => f.write_str("cancelled"),
            ProviderEnd::BootFailed { message } => with(f, "boot failed", message),
            ProviderEnd::CostCapReached => f.write_str("cost cap reached"),
            ProviderEnd::BudgetSpent { budget, message } => {
                with(f, &format!("budget {budget} spent"), message)
            }
            ProviderEnd::MaxRuntimeReached => f.write_str("max runtime reached"),
            ProviderEnd::Evicted { message, .. } => with(f, "evicted", message),
            ProviderEnd::Reclaimed { message, .. } => with(f, "preemption notice", message),
            ProviderEnd::OwnerReclaim { owner, message, .. } => {
                with(f, &format!("reclaimed by {owner}"), message)
            }
            ProviderEnd::Unknown { message } => with(f, "unknown end", message),
            ProviderEnd::Rank { rank, node, end } => write!(f, "rank {rank} on {node}: {end}"),
        }
    }
}

/// Where the deciding evidence came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceSource {
    ProviderState,
    ExitCode,
    Signal,
    LogLine,
}

/// The state, status or line that decided a classification.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Evidence {
    pub source: EvidenceSource,
    /// The exact line or state that decided, trimmed, at most
    /// [`EVIDENCE_MAX_CHARS`] characters. A longer log line is cut to a
    /// window around the matched signature.
    pub line: String,
    /// Index of the line in the log tail handed to [`classify`], for "jump
    /// to the evidence line". `None` unless `source` is `LogLine`.
    pub line_no: Option<usize>,
}

/// What a failed attempt was, which rule said so, and on what evidence.
///
/// Deserializing looks the rule id up in this build's table, so `rule`
/// stays `&'static str`; an unknown id is an error.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Classification {
    pub class: FailureClass,
    /// The stable id of the deciding rule, e.g. `log.cuda-oom`. Ids are
    /// never reused for a different meaning; see [`rule_ids`].
    pub rule: &'static str,
    pub evidence: Evidence,
}

/// A classification as stored (the journal), with the rule id owned.
#[derive(Deserialize)]
struct StoredClassification {
    class: FailureClass,
    rule: String,
    evidence: Evidence,
}

/// A stored classification names a rule this build does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown classifier rule `{0}`")]
pub struct UnknownRule(pub String);

impl<'de> Deserialize<'de> for Classification {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = StoredClassification::deserialize(d)?;
        Classification::try_from(stored).map_err(serde::de::Error::custom)
    }
}

impl TryFrom<StoredClassification> for Classification {
    type Error = UnknownRule;

    fn try_from(s: StoredClassification) -> Result<Self, Self::Error> {
        let rule = RULES.iter().find(|r| r.id == s.rule).ok_or(UnknownRule(s.rule))?;
        Ok(Classification { class: s.class, rule: rule.id, evidence: s.evidence })
    }
}

/// Every rule as `(id, class)`, in precedence order: tier by tier, and
/// within the log tier in the order that names a line matched by several.
pub fn rule_ids() -> impl Iterator<Item = (&'static str, FailureClass)> {
    RULES.iter().map(|r| (r.id, r.class))
}

/// Decides what a failed attempt was, from how the provider says it ended
/// and the tail of its log (oldest line first). See the module docs for the
/// precedence. Always returns a classification; `default.app` when nothing
/// more specific matched.
pub fn classify(end: &ProviderEnd, log_tail: &[&str]) -> Classification {
    // A gang's end is the end of the rank that ended first: classified as
    // that end, with the rank and node named in the evidence.
    if let ProviderEnd::Rank { rank, node, end } = end {
        let mut c = classify(end, log_tail);
        c.evidence.line = format!("rank {rank} on {node}: {}", c.evidence.line);
        return c;
    }
    for rule in RULES {
        if let Matcher::Canopy(m) | Matcher::Provider(m) = rule.matcher
            && m(end)
        {
            return decided(rule, state_evidence(end, EvidenceSource::ProviderState));
        }
    }

    let status = Status::of(end);
    if let Some(found) = scan_log(status, log_tail) {
        let evidence = Evidence {
            source: EvidenceSource::LogLine,
            line: excerpt(found.line, found.at),
            line_no: Some(found.line_no),
        };
        return decided(found.rule, evidence);
    }

    for rule in RULES {
        if let Matcher::Exit(m) = rule.matcher
            && m(status)
        {
            return decided(rule, state_evidence(end, status_source(end)));
        }
    }

    let evidence = match last_non_empty(log_tail) {
        Some((line_no, line)) => {
            Evidence { source: EvidenceSource::LogLine, line: excerpt(line, 0), line_no: Some(line_no) }
        }
        None => state_evidence(end, status_source(end)),
    };
    decided(rules::default_rule(), evidence)
}

fn decided(rule: &rules::Rule, evidence: Evidence) -> Classification {
    Classification { class: rule.class, rule: rule.id, evidence }
}

fn status_source(end: &ProviderEnd) -> EvidenceSource {
    match end {
        ProviderEnd::Exited { .. } => EvidenceSource::ExitCode,
        ProviderEnd::Signaled { .. } => EvidenceSource::Signal,
        _ => EvidenceSource::ProviderState,
    }
}

fn state_evidence(end: &ProviderEnd, source: EvidenceSource) -> Evidence {
    Evidence { source, line: excerpt(&end.to_string(), 0), line_no: None }
}

/// The log line that decided, and where.
struct Found<'a> {
    rule: &'static rules::Rule,
    strength: Strength,
    line: &'a str,
    line_no: usize,
    /// Byte offset of the match in the trimmed line.
    at: usize,
}

/// Reads the tail from the end backwards; the strongest signature wins,
/// and among equals the last one (found first) is kept.
fn scan_log<'a>(status: Status, log_tail: &[&'a str]) -> Option<Found<'a>> {
    let mut best: Option<Found<'a>> = None;
    for (line_no, raw) in log_tail.iter().enumerate().rev() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let Some((rule, strength, at)) = rules::match_line(line, status) else {
            continue;
        };
        if best.as_ref().is_none_or(|b| strength > b.strength) {
            best = Some(Found { rule, strength, line, line_no, at });
            if strength == Strength::MAX {
                break;
            }
        }
    }
    best
}

fn last_non_empty<'a>(log_tail: &[&'a str]) -> Option<(usize, &'a str)> {
    log_tail.iter().enumerate().rev().map(|(i, l)| (i, l.trim())).find(|(_, l)| !l.is_empty())
}

/// The trimmed line, or for one longer than [`EVIDENCE_MAX_CHARS`] a window
/// of that many characters that starts a little before byte offset `at` (the
/// match), so the signature itself is always shown.
fn excerpt(line: &str, at: usize) -> String {
    const LEAD: usize = 60;
    let line = line.trim();
    let total = line.chars().count();
    if total <= EVIDENCE_MAX_CHARS {
        return line.to_string();
    }
    let at_char = line.char_indices().take_while(|(b, _)| *b < at).count();
    let start = at_char.saturating_sub(LEAD).min(total - EVIDENCE_MAX_CHARS);
    line.chars().skip(start).take(EVIDENCE_MAX_CHARS).collect::<String>().trim().to_string()
}

/// What a clean exit whose outputs could not be collected was: the
/// workload's own mistake (`app`, rule `outputs.not-written`) when a
/// required output was not written where the spec says (most often: the
/// workload wrote the spec's absolute path itself, outside
/// `$CANOPY_OUTPUT_DIR`), so that retrying it on other nodes cannot help;
/// otherwise a storage failure (`io`, rule `outputs.collect-failed`): the
/// outputs directory or the store could not be read or written. Returns
/// the class, the rule and the evidence (the collection's message, which
/// says where the output was expected and what to do).
pub fn collection_failure(message: &str) -> (FailureClass, &'static str, String) {
    use crate::providers::collect::NOT_WRITTEN;
    if message.contains(NOT_WRITTEN) {
        (FailureClass::App, "outputs.not-written", message.to_string())
    } else {
        (FailureClass::Io, "outputs.collect-failed", message.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exited(code: i32) -> ProviderEnd {
        ProviderEnd::Exited { code }
    }

    fn run(end: ProviderEnd, log: &str) -> Classification {
        let lines: Vec<&str> = log.lines().collect();
        classify(&end, &lines)
    }

    const CUDA_OOM: &str = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.";
    const WATCHDOG: &str = "[rank3]:[E1023 12:00:00.123456 4242 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600054 milliseconds before timing out.";

    #[test]
    fn class_names_round_trip_through_str_display_and_serde() {
        for class in FailureClass::ALL {
            assert_eq!(class.as_str().parse::<FailureClass>(), Ok(class));
            assert_eq!(class.to_string(), class.as_str());
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            assert_eq!(serde_json::from_str::<FailureClass>(&json).unwrap(), class);
        }
        let err = "gpu_oom".parse::<FailureClass>().unwrap_err();
        assert!(err.to_string().contains("gpu-oom, cpu-oom"), "{err}");
    }

    #[test]
    fn all_lists_each_class_once() {
        let mut names: Vec<_> = FailureClass::ALL.iter().map(|c| c.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), FailureClass::ALL.len());
    }

    #[test]
    fn infrastructure_and_node_blame_are_as_documented() {
        use FailureClass::*;
        let infra: Vec<_> = FailureClass::ALL.into_iter().filter(|c| c.is_infrastructure()).collect();
        assert_eq!(infra, [Capacity, Provider, Node, Comm, Io, Preempted, Reclaimed]);
        let node: Vec<_> = FailureClass::ALL.into_iter().filter(|c| c.counts_against_node()).collect();
        assert_eq!(node, [Node]);
        assert!(!GpuOom.is_infrastructure());
    }

    #[test]
    fn canopy_ends_beat_everything() {
        let c = run(ProviderEnd::Cancelled, CUDA_OOM);
        assert_eq!((c.class, c.rule), (FailureClass::Cancelled, "canopy.cancelled"));
        assert_eq!(c.evidence.source, EvidenceSource::ProviderState);
        let c = run(ProviderEnd::CostCapReached, CUDA_OOM);
        assert_eq!((c.class, c.rule), (FailureClass::CostCap, "canopy.cost-cap"));
        let c = run(ProviderEnd::MaxRuntimeReached, CUDA_OOM);
        assert_eq!((c.class, c.rule), (FailureClass::Timeout, "canopy.max-runtime"));
    }

    #[test]
    fn provider_states_beat_the_log() {
        let c = run(ProviderEnd::Preempted, CUDA_OOM);
        assert_eq!((c.class, c.rule), (FailureClass::Preempted, "provider.preempted"));
        let c = run(ProviderEnd::NodeLost { message: "kubelet stopped posting status".into() }, CUDA_OOM);
        assert_eq!(c.class, FailureClass::Node);
        assert_eq!(c.evidence.line, "node lost: kubelet stopped posting status");
        let c = run(ProviderEnd::OutOfMemory, CUDA_OOM);
        assert_eq!(c.class, FailureClass::CpuOom);
        let c = run(ProviderEnd::TimedOut, "");
        assert_eq!(c.class, FailureClass::Timeout);
    }

    #[test]
    fn launch_rejections_split_on_capacity() {
        let c = run(ProviderEnd::LaunchRejected { message: "no H100 left".into(), capacity: true }, "");
        assert_eq!((c.class, c.rule), (FailureClass::Capacity, "provider.launch-capacity"));
        let msg = "ZONE_RESOURCE_POOL_EXHAUSTED: The zone 'us-central1-a' does not have enough resources";
        let c = run(ProviderEnd::LaunchRejected { message: msg.into(), capacity: false }, "");
        assert_eq!(c.class, FailureClass::Capacity);
        let c = run(ProviderEnd::ApiError { message: "InsufficientInstanceCapacity: try later".into() }, "");
        assert_eq!(c.class, FailureClass::Capacity);
        let c = run(
            ProviderEnd::LaunchRejected { message: "InvalidParameterValue: bad AMI".into(), capacity: false },
            "",
        );
        assert_eq!((c.class, c.rule), (FailureClass::Provider, "provider.launch-rejected"));
        let c = run(ProviderEnd::ApiError { message: "503 from compute API".into() }, "");
        assert_eq!((c.class, c.rule), (FailureClass::Provider, "provider.api-error"));
        let c = run(ProviderEnd::LaunchTimeout, "");
        assert_eq!((c.class, c.rule), (FailureClass::Provider, "provider.launch-timeout"));
    }

    #[test]
    fn resource_quota_is_capacity_but_api_rate_quota_is_not() {
        let gpu_quota = "Quota 'NVIDIA_A100_GPUS' exceeded. Limit: 0.0 in region us-central1.";
        let c = run(ProviderEnd::ApiError { message: gpu_quota.into() }, "");
        assert_eq!(c.class, FailureClass::Capacity);
        let rate = "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute'";
        let c = run(ProviderEnd::ApiError { message: rate.into() }, "");
        assert_eq!(c.class, FailureClass::Provider);
    }

    #[test]
    fn boot_failures_are_node_unless_the_image_is_missing() {
        let c = run(
            ProviderEnd::BootFailed {
                message: "nvidia-container-cli: initialization error: driver not loaded".into(),
            },
            "",
        );
        assert_eq!((c.class, c.rule), (FailureClass::Node, "provider.boot-failed"));
        let msg = "ErrImagePull: manifest for ghcr.io/acme/train:v9 not found: manifest unknown";
        let c = run(ProviderEnd::BootFailed { message: msg.into() }, "");
        assert_eq!((c.class, c.rule), (FailureClass::Image, "provider.boot-image"));
        // podman's words for an image that is not there (pull=never, or
        // no such tag), and for a registry it could not reach: `io`.
        let msg = "Error: localhost/nope: image not known";
        let c = run(ProviderEnd::BootFailed { message: msg.into() }, "");
        assert_eq!((c.class, c.rule), (FailureClass::Image, "provider.boot-image"));
        let msg = "Error: initializing source docker://registry.example/x:1: pinging container registry \
                   registry.example: Get \"https://registry.example/v2/\": dial tcp: lookup registry.example: \
                   no such host";
        let c = run(ProviderEnd::BootFailed { message: msg.into() }, "");
        assert_eq!((c.class, c.rule), (FailureClass::Io, "provider.registry-unreachable"));
    }

    #[test]
    fn log_beats_exit_code() {
        let c = run(exited(137), CUDA_OOM);
        assert_eq!((c.class, c.rule), (FailureClass::GpuOom, "log.cuda-oom"));
    }

    #[test]
    fn a_cause_beats_the_later_symptom_it_caused() {
        let log = format!(
            "step 10 loss 2.1\n{CUDA_OOM}\n{WATCHDOG}\nsrun: error: gpu-07: task 3: Exited with exit code 1"
        );
        let c = run(exited(1), &log);
        assert_eq!((c.class, c.rule), (FailureClass::GpuOom, "log.cuda-oom"));
        assert_eq!(c.evidence.line_no, Some(1));
    }

    #[test]
    fn among_equals_the_last_wins() {
        let log = format!(
            "{CUDA_OOM}\nretrying with batch size 16\nModuleNotFoundError: No module named 'flash_attn'"
        );
        let c = run(exited(1), &log);
        assert_eq!((c.class, c.rule), (FailureClass::App, "log.import-error"));
        let log =
            format!("ModuleNotFoundError: No module named 'apex'\nfalling back to torch amp\n{CUDA_OOM}");
        let c = run(exited(1), &log);
        assert_eq!(c.class, FailureClass::GpuOom);
        assert_eq!(c.evidence.line_no, Some(2));
    }

    #[test]
    fn hardware_beats_everything_in_the_log() {
        let log = format!(
            "[Tue May 14 10:22:31 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.\n{CUDA_OOM}\n{WATCHDOG}"
        );
        let c = run(exited(1), &log);
        assert_eq!((c.class, c.rule), (FailureClass::Node, "log.xid-hardware"));
        assert_eq!(c.evidence.line_no, Some(0));
    }

    #[test]
    fn xid_codes_split_between_hardware_and_workload() {
        let c = run(
            exited(1),
            "NVRM: Xid (PCI:0000:ca:00): 31, pid=77, name=python, Ch 00000008, intr 10000000. MMU Fault",
        );
        assert_eq!((c.class, c.rule), (FailureClass::App, "log.xid-app"));
        let c = run(
            exited(1),
            "NVRM: Xid (PCI:0000:ca:00): 95, pid=77, name=python, Uncontained: FBHUB. RST: Yes, D-RST: No",
        );
        assert_eq!(c.class, FailureClass::Node);
        let c = run(exited(1), "NVRM: Xid (PCI:0000:ca:00): 8, pid=77, something else");
        assert_eq!(c.rule, "default.app");
    }

    #[test]
    fn specific_errors_beat_a_later_generic_trailer() {
        let log = "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<56789> with error 12\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\nSegmentation fault (core dumped)";
        let c = run(exited(139), log);
        assert_eq!((c.class, c.rule), (FailureClass::Comm, "log.nccl-warn"));
    }

    #[test]
    fn killed_with_137_is_cpu_oom_but_not_without_it() {
        let log = "loading shard 17/64\nloading shard 18/64\nKilled";
        let c = run(exited(137), log);
        assert_eq!((c.class, c.rule), (FailureClass::CpuOom, "log.killed-137"));
        assert_eq!(c.evidence.line, "Killed");
        let c = run(ProviderEnd::Signaled { signal: 9 }, log);
        assert_eq!(c.class, FailureClass::CpuOom);
        let c = run(exited(1), log);
        assert_eq!((c.class, c.rule), (FailureClass::App, "default.app"));
    }

    #[test]
    fn sigkill_without_evidence_is_app() {
        for end in [exited(137), exited(-9), ProviderEnd::Signaled { signal: 9 }] {
            let c = run(end.clone(), "step 100 loss 1.9\nstep 200 loss 1.8");
            assert_eq!((c.class, c.rule), (FailureClass::App, "exit.sigkill"), "{end:?}");
            assert_eq!(c.evidence.line_no, None);
        }
        let c = run(exited(137), "");
        assert_eq!(c.evidence.source, EvidenceSource::ExitCode);
        assert_eq!(c.evidence.line, "exit code 137 (SIGKILL)");
        let c = run(ProviderEnd::Signaled { signal: 9 }, "");
        assert_eq!(c.evidence.source, EvidenceSource::Signal);
        assert_eq!(c.evidence.line, "signal 9 (SIGKILL)");
    }

    #[test]
    fn segfault_and_sigterm_are_app_unless_preemption_is_evident() {
        let c = run(exited(139), "");
        assert_eq!((c.class, c.rule), (FailureClass::App, "exit.segfault"));
        let c = run(exited(143), "step 5 loss 3.0");
        assert_eq!((c.class, c.rule), (FailureClass::App, "exit.sigterm"));
        let log = "WARNING Received Spot Instance interruption notice: instance-action terminate at 2024-05-01T12:02:05Z\nsaving checkpoint\nTerminated";
        let c = run(exited(143), log);
        assert_eq!((c.class, c.rule), (FailureClass::Preempted, "log.preemption-notice"));
        let c = run(ProviderEnd::Signaled { signal: 6 }, "");
        assert_eq!((c.class, c.rule), (FailureClass::App, "exit.signal"));
        let c = run(exited(127), "/bin/sh: 1: torchrun: not found");
        assert_eq!((c.class, c.rule), (FailureClass::App, "exit.not-found"));
    }

    #[test]
    fn default_is_app_with_the_last_line_or_the_exit_code() {
        let c = run(exited(2), "usage: train.py [-h]\ntrain.py: error: unrecognized arguments: --lr\n\n   ");
        assert_eq!((c.class, c.rule), (FailureClass::App, "default.app"));
        assert_eq!(c.evidence.line, "train.py: error: unrecognized arguments: --lr");
        assert_eq!(c.evidence.line_no, Some(1));
        let c = run(exited(1), "");
        assert_eq!(
            c.evidence,
            Evidence { source: EvidenceSource::ExitCode, line: "exit code 1".into(), line_no: None }
        );
    }

    #[test]
    fn an_unexplained_end_is_the_provider_unless_the_log_explains_it() {
        let end = ProviderEnd::Unknown { message: "state=WEIRD".into() };
        let c = run(end.clone(), "step 1\nstep 2");
        assert_eq!((c.class, c.rule), (FailureClass::Provider, "provider.unknown"));
        assert_eq!(c.evidence.line, "unknown end: state=WEIRD");
        let c = run(end, CUDA_OOM);
        assert_eq!(c.class, FailureClass::GpuOom);
    }

    #[test]
    fn connection_errors_are_comm_only_in_distributed_context() {
        let c = run(
            exited(1),
            "[W socket.cpp:464] [c10d] The server socket has failed to listen: Connection refused",
        );
        assert_eq!((c.class, c.rule), (FailureClass::Comm, "log.c10d-network"));
        let c = run(
            exited(1),
            "requests.exceptions.ConnectionError: HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded",
        );
        assert_eq!((c.class, c.rule), (FailureClass::Io, "log.network-error"));
        let c = run(exited(1), "BrokenPipeError: [Errno 32] Broken pipe");
        assert_eq!(c.class, FailureClass::App);
    }

    #[test]
    fn evidence_of_a_long_line_is_a_window_around_the_match() {
        let line = format!(
            "{} CUDA out of memory. Tried to allocate 20.00 MiB {}",
            "x".repeat(1000),
            "y".repeat(1000)
        );
        let c = run(exited(1), &line);
        assert_eq!(c.class, FailureClass::GpuOom);
        assert_eq!(c.evidence.line.chars().count(), EVIDENCE_MAX_CHARS);
        assert!(c.evidence.line.contains("CUDA out of memory. Tried to allocate"));
        assert!(line.contains(&c.evidence.line));
        let multibyte = "é".repeat(400);
        assert_eq!(excerpt(&multibyte, 0).chars().count(), EVIDENCE_MAX_CHARS);
        assert_eq!(excerpt(&multibyte, 700).chars().count(), EVIDENCE_MAX_CHARS);
    }

    #[test]
    fn classification_round_trips_through_serde_with_a_static_rule_id() {
        let c = run(exited(1), CUDA_OOM);
        let json = serde_json::to_string(&c).unwrap();
        let back: Classification = serde_json::from_str(&json).unwrap();
        assert_eq!(back, c);
        let bad = json.replace("log.cuda-oom", "log.no-such-rule");
        let err = serde_json::from_str::<Classification>(&bad).unwrap_err();
        assert!(err.to_string().contains("unknown classifier rule `log.no-such-rule`"), "{err}");
    }

    #[test]
    fn provider_end_serde_is_kebab_case_tagged() {
        let end = ProviderEnd::LaunchRejected { message: "m".into(), capacity: true };
        let json = serde_json::to_string(&end).unwrap();
        assert_eq!(json, r#"{"kind":"launch-rejected","message":"m","capacity":true}"#);
        assert_eq!(
            serde_json::to_string(&ProviderEnd::CostCapReached).unwrap(),
            r#"{"kind":"cost-cap-reached"}"#
        );
    }
}
