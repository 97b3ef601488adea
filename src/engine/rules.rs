//! The classifier's rule table: each rule an id, a class and a matcher.
//!
//! This module owns the signatures: provider states, log patterns, exit
//! statuses. The precedence between tiers and the log scan live in
//! [`classify`](super::classify); here, the order of [`RULES`] is the
//! precedence within a tier, and for the log tier it decides which rule
//! names a line that several match (most specific first). Rule ids are
//! stable: the journal stores them, the console shows them.
//!
//! Log signatures come from the taxonomies in `shared/reference/failures.md`
//! (Philly, Acme, Llama 3, Unicron, Fire-Flyer) and from the messages
//! PyTorch, NCCL, CUDA, JAX, the kernel and Slurm actually print. Matching
//! is on one trimmed line at a time, case-sensitive unless a regex says
//! `(?i)`.

use super::classify::{FailureClass, ProviderEnd};
use super::rules_accel as accel;
use regex::Regex;
use std::sync::LazyLock;

/// How the process ended, normalised: `Exited { code: 137 }`, `Exited {
/// code: -9 }` and `Signaled { signal: 9 }` are all `Signal(9)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    Code(i32),
    Signal(i32),
    /// The end is not a process exit the provider could report.
    Unreported,
}

pub(crate) const SIGKILL: i32 = 9;
const SIGSEGV: i32 = 11;
const SIGTERM: i32 = 15;

impl Status {
    pub(crate) fn of(end: &ProviderEnd) -> Status {
        match *end {
            ProviderEnd::Exited { code } if (-64..=-1).contains(&code) => Status::Signal(-code),
            ProviderEnd::Exited { code } if (129..=192).contains(&code) => Status::Signal(code - 128),
            ProviderEnd::Exited { code } => Status::Code(code),
            ProviderEnd::Signaled { signal } => Status::Signal(signal),
            _ => Status::Unreported,
        }
    }
}

pub(crate) fn signal_name(signal: i32) -> Option<&'static str> {
    Some(match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        _ => return None,
    })
}

/// How much a log signature says about the root cause. The strongest in the
/// tail wins; among equals, the last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Strength {
    /// Says that something failed, not what: "Traceback", "Segmentation
    /// fault", a launcher's summary, MPI_ABORT.
    Trailer,
    /// A failure without a known cause: an unlisted exception, a CUDA error
    /// that names no cause, NCCL WARN.
    Generic,
    /// Usually the consequence of a failure elsewhere: collective timeouts,
    /// NCCL and network errors.
    Symptom,
    /// A root cause: OOM, a named exception, a storage error, a notice from
    /// the scheduler or the cloud.
    Cause,
    /// The GPU or its memory failed: everything after it is fallout.
    Hardware,
}

impl Strength {
    pub(crate) const MAX: Strength = Strength::Hardware;
}

pub(crate) struct Rule {
    pub(crate) id: &'static str,
    pub(crate) class: FailureClass,
    pub(crate) matcher: Matcher,
}

pub(crate) enum Matcher {
    /// Tier 1: an end Canopy enforced.
    Canopy(fn(&ProviderEnd) -> bool),
    /// Tier 2: a provider state that says on its own what happened.
    Provider(fn(&ProviderEnd) -> bool),
    /// Tier 3: a signature on one log line.
    Log(LogMatch),
    /// Tier 4: the exit status alone.
    Exit(fn(Status) -> bool),
    /// Tier 5: nothing else matched.
    Default,
}

pub(crate) struct LogMatch {
    strength: Strength,
    pattern: Pattern,
    /// The line counts only when the process ended by this signal.
    only_on_signal: Option<i32>,
}

pub(crate) enum Pattern {
    /// Any of these substrings.
    Any(&'static [&'static str]),
    Regex(&'static LazyLock<Regex>),
    /// Hand-written: the byte offset of the match.
    Fn(fn(&str) -> Option<usize>),
}

impl Pattern {
    fn find(&self, line: &str) -> Option<usize> {
        match self {
            Pattern::Any(needles) => needles.iter().find_map(|n| line.find(n)),
            Pattern::Regex(re) => re.find(line).map(|m| m.start()),
            Pattern::Fn(f) => f(line),
        }
    }
}

/// Per rule of [`RULES`], in its order, a searcher for each substring of
/// a [`Pattern::Any`] (none for other rules), built once: `str::find`
/// sets one up on every call, and every log line of every end asks every
/// rule. Finds what `str::find` finds, at the same offset.
static FINDERS: LazyLock<Vec<Vec<memchr::memmem::Finder<'static>>>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| match &rule.matcher {
            Matcher::Log(LogMatch { pattern: Pattern::Any(needles), .. }) => {
                needles.iter().map(|n| memchr::memmem::Finder::new(n.as_bytes())).collect()
            }
            _ => Vec::new(),
        })
        .collect()
});

/// The first log rule in table order that matches `line` (trimmed), with
/// its strength and the byte offset of the match.
pub(crate) fn match_line(line: &str, status: Status) -> Option<(&'static Rule, Strength, usize)> {
    RULES.iter().zip(FINDERS.iter()).find_map(|(rule, finders)| {
        let Matcher::Log(lm) = &rule.matcher else {
            return None;
        };
        if lm.only_on_signal.is_some_and(|s| status != Status::Signal(s)) {
            return None;
        }
        let at = match &lm.pattern {
            Pattern::Any(_) => finders.iter().find_map(|f| f.find(line.as_bytes())),
            other => other.find(line),
        };
        at.map(|at| (rule, lm.strength, at))
    })
}

pub(crate) fn default_rule() -> &'static Rule {
    // RULES ends with the default rule; the table test checks it.
    &RULES[RULES.len() - 1]
}

/// Compiles one of this file's regex literals.
pub(super) fn re(pattern: &str) -> Regex {
    // Invariant: every pattern is a literal in this file, and the test
    // `every_pattern_compiles` forces each LazyLock, so this cannot fail at
    // run time without failing the tests first.
    Regex::new(pattern).expect("classifier regex literal compiles")
}

/// Compiles alternatives, one per element, into one regex.
fn any_of(alternatives: &[&str]) -> Regex {
    re(&alternatives.join("|"))
}

/// [`any_of`], ignoring case.
fn any_of_ignore_case(alternatives: &[&str]) -> Regex {
    re(&format!("(?i){}", alternatives.join("|")))
}

const fn log(strength: Strength, pattern: Pattern) -> Matcher {
    Matcher::Log(LogMatch { strength, pattern, only_on_signal: None })
}

const fn rule(id: &'static str, class: FailureClass, matcher: Matcher) -> Rule {
    Rule { id, class, matcher }
}

use FailureClass as C;
use Strength::{Cause, Generic, Hardware, Symptom, Trailer};

/// The rules, tier by tier. Within the log tier, the order decides which
/// rule names a line that several match, not which line wins (strength and
/// position decide that).
pub(crate) static RULES: &[Rule] = &[
    // ── Tier 1: Canopy-enforced ends ─────────────────────────────────────
    rule("canopy.cancelled", C::Cancelled, Matcher::Canopy(|e| matches!(e, ProviderEnd::Cancelled))),
    rule("canopy.cost-cap", C::CostCap, Matcher::Canopy(|e| matches!(e, ProviderEnd::CostCapReached))),
    rule(BUDGET_RULE, C::CostCap, Matcher::Canopy(|e| matches!(e, ProviderEnd::BudgetSpent { .. }))),
    rule(EVICTED_RULE, C::Preempted, Matcher::Canopy(|e| matches!(e, ProviderEnd::Evicted { .. }))),
    rule(RECLAIMED_RULE, C::Reclaimed, Matcher::Canopy(|e| matches!(e, ProviderEnd::OwnerReclaim { .. }))),
    rule(
        "canopy.preemption-notice",
        C::Preempted,
        Matcher::Canopy(|e| matches!(e, ProviderEnd::Reclaimed { .. })),
    ),
    rule("canopy.max-runtime", C::Timeout, Matcher::Canopy(|e| matches!(e, ProviderEnd::MaxRuntimeReached))),
    // ── Tier 2: provider states ──────────────────────────────────────────
    rule("provider.preempted", C::Preempted, Matcher::Provider(|e| matches!(e, ProviderEnd::Preempted))),
    rule("provider.node-lost", C::Node, Matcher::Provider(|e| matches!(e, ProviderEnd::NodeLost { .. }))),
    rule("provider.boot-image", C::Image, Matcher::Provider(boot_image_missing)),
    rule("provider.registry-unreachable", C::Io, Matcher::Provider(registry_unreachable)),
    rule("provider.boot-failed", C::Node, Matcher::Provider(|e| matches!(e, ProviderEnd::BootFailed { .. }))),
    rule("provider.launch-capacity", C::Capacity, Matcher::Provider(no_capacity)),
    rule("provider.launch-invalid", C::Config, Matcher::Provider(invalid_request)),
    rule(
        "provider.launch-rejected",
        C::Provider,
        Matcher::Provider(|e| matches!(e, ProviderEnd::LaunchRejected { .. })),
    ),
    rule("provider.api-error", C::Provider, Matcher::Provider(|e| matches!(e, ProviderEnd::ApiError { .. }))),
    rule(
        "provider.launch-timeout",
        C::Provider,
        Matcher::Provider(|e| matches!(e, ProviderEnd::LaunchTimeout)),
    ),
    rule("provider.time-limit", C::Timeout, Matcher::Provider(|e| matches!(e, ProviderEnd::TimedOut))),
    rule("provider.oom", C::CpuOom, Matcher::Provider(|e| matches!(e, ProviderEnd::OutOfMemory))),
    // ── Tier 3: log signatures ───────────────────────────────────────────
    // GPU hardware (Llama 3: ~58% of interruptions; Fire-Flyer Xid stats).
    rule("log.xid-hardware", C::Node, log(Hardware, Pattern::Fn(xid_hardware))),
    rule(
        "log.gpu-fallen-off-bus",
        C::Node,
        log(Hardware, Pattern::Any(&["fallen off the bus", "GPU is lost"])),
    ),
    rule("log.ecc-uncorrectable", C::Node, log(Hardware, Pattern::Regex(&ECC))),
    // Other vendors' accelerators: Ascend, Kunlunxin ([`super::rules_accel`]).
    rule("log.accel-device-lost", C::Node, log(Hardware, Pattern::Regex(&accel::DEVICE_LOST))),
    rule("log.accel-oom", C::GpuOom, log(Cause, Pattern::Any(accel::DEVICE_OOM))),
    rule("log.accel-collective-timeout", C::Comm, log(Symptom, Pattern::Any(accel::COLLECTIVE_TIMEOUT))),
    rule("log.accel-collective-error", C::Comm, log(Symptom, Pattern::Any(accel::COLLECTIVE_ERROR))),
    // GPU memory (Philly: GPU out of memory 1.2% of trials).
    rule(
        "log.hip-oom",
        C::GpuOom,
        log(Cause, Pattern::Any(&["HIP out of memory. Tried to allocate", "hipErrorOutOfMemory"])),
    ),
    rule(
        "log.cuda-oom",
        C::GpuOom,
        log(
            Cause,
            Pattern::Any(&[
                "CUDA out of memory. Tried to allocate",
                "torch.OutOfMemoryError",
                "torch.cuda.OutOfMemoryError",
                "CUDA error: out of memory",
                "CUBLAS_STATUS_ALLOC_FAILED",
                "CUDNN_STATUS_ALLOC_FAILED",
                "cudaErrorMemoryAllocation",
                "Cuda failure 'out of memory'",
            ]),
        ),
    ),
    rule(
        "log.xla-oom",
        C::GpuOom,
        log(
            Cause,
            Pattern::Any(&[
                "RESOURCE_EXHAUSTED: Out of memory",
                "OOM when allocating tensor",
                "Ran out of memory in memory space hbm",
            ]),
        ),
    ),
    // Host memory (Philly: CPU out of memory 30.4% of trials, the top row).
    rule(
        "log.oom-killer",
        C::CpuOom,
        log(
            Cause,
            Pattern::Any(&[
                "Out of memory: Killed process",
                "Out of memory: Kill process",
                "Memory cgroup out of memory",
                "oom-kill",
                "oom_kill",
                "OOMKilled",
                "out-of-memory handler",
            ]),
        ),
    ),
    rule(
        "log.killed-137",
        C::CpuOom,
        Matcher::Log(LogMatch {
            strength: Cause,
            pattern: Pattern::Fn(killed_line),
            only_on_signal: Some(SIGKILL),
        }),
    ),
    rule(
        "log.shm-exhausted",
        C::CpuOom,
        log(
            Cause,
            Pattern::Any(&[
                "insufficient shared memory (shm)",
                "out of shared memory",
                "unable to write to file </torch_",
            ]),
        ),
    ),
    rule("log.child-sigkill", C::CpuOom, log(Cause, Pattern::Regex(&CHILD_SIGKILL))),
    rule("log.memory-error", C::CpuOom, log(Cause, Pattern::Regex(&MEMORY_ERROR))),
    // Notices from Slurm and the clouds.
    rule("log.slurm-time-limit", C::Timeout, log(Cause, Pattern::Any(&["DUE TO TIME LIMIT"]))),
    rule("log.slurm-preempted", C::Preempted, log(Cause, Pattern::Any(&["DUE TO PREEMPTION"]))),
    rule("log.slurm-node-fail", C::Node, log(Cause, Pattern::Any(&["DUE TO NODE FAILURE"]))),
    rule("log.preemption-notice", C::Preempted, log(Cause, Pattern::Regex(&PREEMPTION_NOTICE))),
    // The node's driver and devices (Philly: CUDA init failed, CUDA failure).
    rule("log.driver-mismatch", C::Node, log(Cause, Pattern::Any(&["Driver/library version mismatch"]))),
    rule(
        "log.no-gpu",
        C::Node,
        log(
            Cause,
            Pattern::Any(&[
                "no CUDA-capable device is detected",
                "No CUDA GPUs are available",
                "cudaErrorNoDevice",
                "CUDA driver initialization failed",
                "system not yet initialized",
                "CUDA-capable device(s) is/are busy or unavailable",
                "Found no NVIDIA driver on your system",
                "libcuda.so.1: cannot open shared object file",
                "couldn't communicate with the NVIDIA driver",
            ]),
        ),
    ),
    rule(
        "log.cuda-unknown-error",
        C::Node,
        log(Cause, Pattern::Any(&["CUDA error: unknown error", "cudaErrorUnknown"])),
    ),
    // CUDA errors the workload causes.
    rule(
        "log.cuda-driver-too-old",
        C::App,
        log(
            Cause,
            Pattern::Any(&[
                "CUDA driver version is insufficient",
                "NVIDIA driver on your system is too old",
                "cudaErrorInsufficientDriver",
            ]),
        ),
    ),
    rule(
        "log.device-assert",
        C::App,
        log(Cause, Pattern::Any(&["device-side assert triggered", "cudaErrorAssert"])),
    ),
    rule(
        "log.illegal-address",
        C::App,
        log(
            Cause,
            Pattern::Any(&[
                "illegal memory access",
                "misaligned address",
                "illegal instruction was encountered",
                "cudaErrorIllegalAddress",
            ]),
        ),
    ),
    // Storage (Philly: model checkpoint errors 21.7% of runtime-to-failure;
    // Acme: S3StorageError).
    rule(
        "log.checkpoint-write",
        C::Io,
        log(Cause, Pattern::Any(&["PytorchStreamWriter failed writing file", "file write failed"])),
    ),
    rule("log.no-space", C::Io, log(Cause, Pattern::Any(&["No space left on device", "ENOSPC"]))),
    rule("log.disk-quota", C::Io, log(Cause, Pattern::Any(&["Disk quota exceeded", "EDQUOT"]))),
    rule("log.io-error", C::Io, log(Cause, Pattern::Any(&["Input/output error"]))),
    rule(
        "log.stale-handle",
        C::Io,
        log(Cause, Pattern::Any(&["Stale file handle", "Stale NFS file handle"])),
    ),
    rule("log.read-only-fs", C::Io, log(Cause, Pattern::Any(&["Read-only file system"]))),
    rule("log.storage-transient", C::Io, log(Cause, Pattern::Regex(&STORAGE_TRANSIENT))),
    // The workload's own errors (Acme: TypeError, FileNotFoundError,
    // KeyError, ImportError lead the script rows; Philly: syntax, import,
    // permission errors, diverged models).
    rule("log.import-error", C::App, log(Cause, Pattern::Regex(&IMPORT_ERROR))),
    rule("log.syntax-error", C::App, log(Cause, Pattern::Regex(&SYNTAX_ERROR))),
    rule("log.file-not-found", C::App, log(Cause, Pattern::Regex(&FILE_NOT_FOUND))),
    rule("log.permission-denied", C::App, log(Cause, Pattern::Regex(&PERMISSION_DENIED))),
    rule("log.assertion", C::App, log(Cause, Pattern::Regex(&ASSERTION))),
    rule("log.device-mismatch", C::App, log(Cause, Pattern::Regex(&DEVICE_MISMATCH))),
    rule("log.loss-nan", C::App, log(Cause, Pattern::Regex(&LOSS_NAN))),
    rule("log.app-exception", C::App, log(Cause, Pattern::Regex(&APP_EXCEPTION))),
    // Collective communication (Unicron: NCCL timeout 10.1%; Acme:
    // NCCLTimeoutError, NCCLRemoteError; Philly: MPI runtime failures).
    rule(
        "log.nccl-watchdog",
        C::Comm,
        log(Symptom, Pattern::Any(&["Watchdog caught collective operation timeout", "Timeout at NCCL work"])),
    ),
    rule("log.nccl-error", C::Comm, log(Symptom, Pattern::Regex(&NCCL_ERROR))),
    rule(
        "log.gloo-error",
        C::Comm,
        log(Symptom, Pattern::Any(&["gloo/transport", "Gloo connectFullMesh failed"])),
    ),
    rule("log.c10d-network", C::Comm, log(Symptom, Pattern::Fn(c10d_network))),
    rule(
        "log.mpi-runtime",
        C::Comm,
        log(
            Symptom,
            Pattern::Any(&[
                "ORTE has lost communication",
                "lost communication with a remote daemon",
                "MPI communication peer process has unexpectedly disconnected",
                "unable to complete a TCP connection",
                "PMIX ERROR",
            ]),
        ),
    ),
    // Network to storage and services (Acme: ConnectionError, the most
    // frequent infrastructure error).
    rule("log.network-error", C::Io, log(Symptom, Pattern::Regex(&NETWORK_ERROR))),
    // Generic failures.
    rule("log.xid-app", C::App, log(Generic, Pattern::Fn(xid_app))),
    rule(
        "log.cuda-error",
        C::App,
        log(Generic, Pattern::Any(&["CUDA error:", "CUDA failure", "Cuda failure", "cudaError"])),
    ),
    rule("log.nccl-warn", C::Comm, log(Generic, Pattern::Any(&["NCCL WARN"]))),
    rule("log.nccl-process-group", C::Comm, log(Generic, Pattern::Regex(&NCCL_PROCESS_GROUP))),
    // Trailers: they say that something failed, not what.
    rule("log.torchrun-failed", C::App, log(Trailer, Pattern::Any(&["ChildFailedError"]))),
    rule("log.mpi-abort", C::Comm, log(Trailer, Pattern::Any(&["MPI_ABORT was invoked"]))),
    rule(
        "log.crash",
        C::App,
        log(
            Trailer,
            Pattern::Any(&[
                "Segmentation fault",
                "Fatal Python error",
                "terminate called after throwing",
                "core dumped",
                "SIGSEGV",
            ]),
        ),
    ),
    rule("log.traceback", C::App, log(Trailer, Pattern::Any(&["Traceback (most recent call last)"]))),
    // Last among log rules so every more specific rule names the line first.
    rule("log.python-exception", C::App, log(Generic, Pattern::Regex(&PYTHON_EXCEPTION))),
    // ── Tier 4: exit status ──────────────────────────────────────────────
    rule("exit.sigkill", C::App, Matcher::Exit(|s| s == Status::Signal(SIGKILL))),
    rule("exit.segfault", C::App, Matcher::Exit(|s| s == Status::Signal(SIGSEGV))),
    rule("exit.sigterm", C::App, Matcher::Exit(|s| s == Status::Signal(SIGTERM))),
    rule("exit.signal", C::App, Matcher::Exit(|s| matches!(s, Status::Signal(_)))),
    rule("exit.not-found", C::App, Matcher::Exit(|s| matches!(s, Status::Code(126 | 127)))),
    rule("provider.unknown", C::Provider, Matcher::Exit(|s| s == Status::Unreported)),
    // ── Tier 5: default ──────────────────────────────────────────────────
    rule("default.app", C::App, Matcher::Default),
];

// ── Provider-state helpers ───────────────────────────────────────────────

/// Capacity and quota messages from the clouds and Kubernetes, for
/// providers that report them as a plain rejection or API error.
static CAPACITY_MESSAGE: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"insufficient\w*capacity",
        r"ZONE_RESOURCE_POOL_EXHAUSTED",
        r"\b(?:out of|no|not enough) capacity",
        r"capacity (?:is )?(?:not available|unavailable)",
        r"QuotaExceeded",
        r"VcpuLimitExceeded",
        r"Quota '\w+' exceeded",
        r"\b(?:gpu|vcpu|cpu|instance)s? quota",
        r"SkuNotAvailable",
        r"AllocationFailed",
        r"does not have enough resources",
        r"Insufficient nvidia\.com/gpu",
        r"\bunschedulable\b",
    ])
});

/// The rule of an attempt Canopy stopped to move it off a drained node:
/// its workload is relocated without spending an attempt, and no health
/// score changes.
pub const EVICTED_RULE: &str = "canopy.evicted";

/// The rule of an attempt Canopy stopped so that the tenant owning its
/// capacity gets it back: like an eviction, the workload is placed again
/// without spending an attempt and no health score changes.
pub const RECLAIMED_RULE: &str = "canopy.reclaimed";

/// The rule of an attempt Canopy stopped because a hard budget on its
/// tenant or token is spent (class `cost-cap`, final); the evidence names
/// the budget and its numbers.
pub const BUDGET_RULE: &str = "canopy.budget";

/// The rule on the row of a launch its provider refused for lack of
/// capacity (`LaunchError::Capacity`, answered to the only launch call of
/// the placement): nothing ran, no attempt is spent, no health score
/// changes, and the workload's next placement takes the row over, so
/// refusals never pile up attempts (see `engine/core/refused.rs`).
pub const REFUSED_RULE: &str = "canopy.launch-refused";

/// A launch that can never succeed as written (see
/// [`crate::providers::LaunchError::Invalid`]).
fn invalid_request(end: &ProviderEnd) -> bool {
    matches!(end, ProviderEnd::LaunchRejected { message, .. }
        if message.starts_with(crate::providers::INVALID_REQUEST_PREFIX))
}

fn no_capacity(end: &ProviderEnd) -> bool {
    match end {
        ProviderEnd::LaunchRejected { capacity: true, .. } => true,
        ProviderEnd::LaunchRejected { message, .. } | ProviderEnd::ApiError { message } => {
            CAPACITY_MESSAGE.is_match(message)
        }
        _ => false,
    }
}

/// An image that does not exist or may not be pulled: the spec's mistake,
/// not the machine's (class `image`). A registry that cannot be reached
/// is `io` ([`REGISTRY_UNREACHABLE`]); other boot failures stay `node`.
static IMAGE_MISSING: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"manifest unknown",
        r"manifest for \S+ not found",
        r"repository does not exist",
        r"pull access denied",
        r"InvalidImageName",
        r"invalid reference format",
        r"unauthorized: authentication required",
        // podman: a local-only image that is not there, a missing tag.
        r"image not known",
        r"name unknown",
        r"requested access to the resource is denied",
    ])
});

/// A registry that could not be reached while pulling: the network's or
/// the registry's, not the image's.
static REGISTRY_UNREACHABLE: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"pinging container registry",
        r"dial tcp",
        r"no such host",
        r"i/o timeout",
        r"TLS handshake timeout",
    ])
});

fn registry_unreachable(end: &ProviderEnd) -> bool {
    matches!(end, ProviderEnd::BootFailed { message } if REGISTRY_UNREACHABLE.is_match(message))
}

fn boot_image_missing(end: &ProviderEnd) -> bool {
    matches!(end, ProviderEnd::BootFailed { message } if IMAGE_MISSING.is_match(message))
}

// ── Log helpers ──────────────────────────────────────────────────────────

/// `NVRM: Xid (PCI:0000:3b:00): 79, ...` and the `XID 79` of DCGM and
/// operator tooling.
static XID: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\bxid\b(?:\s*\([^)]*\))?\s*[:=]?\s*(\d{1,3})\b"));

/// Xids that mean the GPU, its memory, NVLink or its firmware failed: ECC
/// and row remapping (48, 63, 64, 94, 95, 140), NVLink (74), fallen off the
/// bus (79), internal micro-controller (61, 62), GSP (119, 120), reset
/// required (154).
const HARDWARE_XIDS: &[u32] = &[48, 61, 62, 63, 64, 74, 79, 94, 95, 119, 120, 140, 154];

/// Xids usually caused by the workload: graphics engine exception (13),
/// MMU fault / illegal address (31), GPU stopped processing (43), and
/// preemptive cleanup after a killed context (45).
const APP_XIDS: &[u32] = &[13, 31, 43, 45];

fn xid_in(line: &str, codes: &[u32]) -> Option<usize> {
    let caps = XID.captures(line)?;
    let code: u32 = caps.get(1)?.as_str().parse().ok()?;
    codes.contains(&code).then(|| caps.get(0).map_or(0, |m| m.start()))
}

fn xid_hardware(line: &str) -> Option<usize> {
    xid_in(line, HARDWARE_XIDS)
}

fn xid_app(line: &str) -> Option<usize> {
    xid_in(line, APP_XIDS)
}

static ECC: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"uncorrectable ECC",
        r"ECC uncorrectable",
        r"cudaErrorECCUncorrectable",
        r"double bit ECC",
    ])
});

/// The shell's report that its child was SIGKILLed: a bare `Killed`, or
/// `line 12: 48213 Killed    python train.py`.
fn killed_line(line: &str) -> Option<usize> {
    static JOB_REPORT: LazyLock<Regex> = LazyLock::new(|| re(r"\bline \d+:\s+\d+ Killed\b"));
    if line == "Killed" {
        return Some(0);
    }
    JOB_REPORT.find(line).map(|m| m.start())
}

/// A worker SIGKILLed inside a live container: the OOM killer's signature
/// when the kernel's own line is not in the log.
static CHILD_SIGKILL: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[r"exitcode\s*:\s*-9\b", r"is killed by signal: Killed", r"Signal 9 \(SIGKILL\) received by PID"])
});

static MEMORY_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        // Python's MemoryError and NumPy's _ArrayMemoryError, not torch's
        // OutOfMemoryError.
        r"(?:^|[\s:\]>.])_?(?:Array)?MemoryError\b",
        r"std::bad_alloc",
        r"Cannot allocate memory",
        r"can't allocate memory",
        r"java\.lang\.OutOfMemoryError",
    ])
});

static PREEMPTION_NOTICE: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"\b(?:spot|preemptible)\b[^.]{0,40}\b(?:interruption|termination|reclaim)",
        r"preemption notice",
        r"instance was preempted",
        r"is being preempted",
    ])
});

static STORAGE_TRANSIENT: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        // S3 and S3-compatible stores.
        r"\(SlowDown\)",
        r"Please reduce your request rate",
        r"\b503\b.{0,40}(?:Service Unavailable|Slow ?Down|Backend Error)",
        r"ServiceUnavailable",
        r"EndpointConnectionError",
        // GCS.
        r"rateLimitExceeded",
        // HDFS.
        r"BlockMissingException",
        r"Could not obtain block",
        r"ChecksumException",
    ])
});

/// A Python exception line: the name at the start of the line or after a
/// rank prefix, then `:` or the end. Not `raise KeyError(...)` source lines.
macro_rules! exception {
    ($names:literal) => {
        LazyLock::new(|| re(concat!(r"(?:^|[\s:\]>])(?:[A-Za-z_]\w*\.)*(?:", $names, r")(?::|$)")))
    };
}

static IMPORT_ERROR: LazyLock<Regex> = exception!("ModuleNotFoundError|ImportError");
static SYNTAX_ERROR: LazyLock<Regex> = exception!("SyntaxError|IndentationError|TabError");
static ASSERTION: LazyLock<Regex> = exception!("AssertionError");
static APP_EXCEPTION: LazyLock<Regex> = exception!(
    "NameError|TypeError|KeyError|ValueError|AttributeError|IndexError|ZeroDivisionError|NotImplementedError|UnboundLocalError|RecursionError|OverflowError|UnicodeDecodeError|UnicodeEncodeError|JSONDecodeError"
);
static PYTHON_EXCEPTION: LazyLock<Regex> = exception!(r"[A-Z]\w*(?:Error|Exception)");

/// Python's and the shell's "no such file", not every library that logs
/// ENOENT on its way to a fallback (NCCL's net plugin probe does).
static FILE_NOT_FOUND: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"(?:^|[\s:\]>])FileNotFoundError(?::|$)",
        r"\[Errno 2\] No such file or directory",
        r"can't open file",
        r": No such file or directory$",
    ])
});

static PERMISSION_DENIED: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"(?:^|[\s:\]>])PermissionError(?::|$)",
        r"\[Errno 13\] Permission denied",
        r": Permission denied$",
    ])
});

static DEVICE_MISMATCH: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[r"Expected all tensors to be on the same device", r"RuntimeError: Expected .{0,120}\bdevice\b"])
});

static LOSS_NAN: LazyLock<Regex> = LazyLock::new(|| {
    any_of_ignore_case(&[
        r"\bloss\b.{0,20}\b(?:is|became|=|:)\s*(?:nan|inf)\b",
        r"\bnan loss\b",
        r"\b(?:training|loss|model) (?:has )?diverged\b",
        r"(?:^|[\s:\]>])FloatingPointError(?::|$)",
    ])
});

static NCCL_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"NCCL error",
        r"nccl(?:Remote|System|Internal|UnhandledCuda)Error",
        r"unhandled system error",
        r"NCCL communicator was aborted",
        r"remote process exited or there was a network error",
    ])
});

/// The process group's own error lines: they accompany a specific NCCL
/// error or timeout, and stand in for one when it is not in the tail.
static NCCL_PROCESS_GROUP: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"DistBackendError",
        r"Some NCCL operations have failed or timed out",
        r"Process group watchdog thread terminated",
        // glog error lines: `[E ProcessGroupNCCL.cpp:475]`, `[E520 02:24:07.55 77213 ProcessGroupNCCL.cpp:607]`
        r"\[E[\d ][^\]]*ProcessGroupNCCL\.cpp",
    ])
});

/// A connection error inside the distributed stack. "Socket Timeout" is
/// c10d's own message and needs no context.
fn c10d_network(line: &str) -> Option<usize> {
    const ALONE: &[&str] = &["Socket Timeout", "DistNetworkError", "DistStoreError"];
    const PHRASES: &[&str] = &[
        "Connection reset by peer",
        "Broken pipe",
        "Connection refused",
        "Connection timed out",
        "Connection closed by peer",
    ];
    const CONTEXT: &[&str] = &[
        "c10d",
        "TCPStore",
        "torch.distributed",
        "ProcessGroup",
        "rendezvous",
        "NCCL",
        "MPI",
        "gloo",
        "Gloo",
    ];
    if let Some(at) = ALONE.iter().find_map(|n| line.find(n)) {
        return Some(at);
    }
    let at = PHRASES.iter().find_map(|p| line.find(p))?;
    CONTEXT.iter().any(|c| line.contains(c)).then_some(at)
}

static NETWORK_ERROR: LazyLock<Regex> = LazyLock::new(|| {
    any_of(&[
        r"Connection reset by peer",
        r"Connection refused",
        r"Connection timed out",
        r"(?:^|[\s:\]>.])Connection(?:Reset|Refused|Aborted)?Error\b",
        r"Temporary failure in name resolution",
        r"Name or service not known",
        r"Network is unreachable",
        r"Max retries exceeded with url",
        r"Read timed out",
        r"couldn't connect to",
    ])
});

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
