//! Malformed specs and what a user is told about them: the position
//! (line:col), the message and the help line.

use canopy::spec::{Diagnostic, Format, Severity, load};

/// Lines 1–3 of most cases; the case's own text starts on line 4.
const BASE: &str = "name = \"x\"\n[runtime]\ncommand = [\"a\"]\n";

fn t(extra: &str) -> String {
    format!("{BASE}{extra}")
}

struct Case {
    name: &'static str,
    format: Format,
    src: String,
    /// Expected (line, col), 1-based.
    at: (usize, usize),
    message: &'static str,
    help: Option<&'static str>,
}

fn toml(
    name: &'static str,
    src: String,
    at: (usize, usize),
    message: &'static str,
    help: Option<&'static str>,
) -> Case {
    Case { name, format: Format::Toml, src, at, message, help }
}

fn json(
    name: &'static str,
    src: &str,
    at: (usize, usize),
    message: &'static str,
    help: Option<&'static str>,
) -> Case {
    Case { name, format: Format::Json, src: src.to_string(), at, message, help }
}

fn cases() -> Vec<Case> {
    vec![
        // Unknown fields, at several depths, with did-you-mean.
        toml(
            "unknown top-level field",
            "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"a\"]\n".into(),
            (2, 1),
            "unknown field `prority` at the top level",
            Some("did you mean `priority`?"),
        ),
        toml("unknown table", "name = \"x\"\n[runtme]\ncommand = [\"a\"]\n".into(), (2, 2), "unknown field `runtme` at the top level", Some("did you mean `runtime`?")),
        toml("unknown field in [resources]", t("[resources]\ngpu = 1\n"), (5, 1), "unknown field `gpu` in [resources]", Some("did you mean `gpus`?")),
        toml(
            "unknown field in an inline table",
            t("[resources]\ngpus = 1\naccelerator = { vendr = \"nvidia\" }\n"),
            (6, 17),
            "unknown field `vendr` in [resources.accelerator]",
            Some("did you mean `vendor`?"),
        ),
        toml(
            "unknown bound in gpu_memory_gb",
            t("[resources]\ngpus = 1\ngpu_memory_gb = { mn = 24 }\n"),
            (6, 19),
            "unknown field `mn` in [resources.gpu_memory_gb]",
            Some("did you mean `min`?"),
        ),
        toml(
            "unknown field in [[inputs]]",
            t("[[inputs]]\nname = \"d\"\nsourc = \"s3://b/k\"\n"),
            (6, 1),
            "unknown field `sourc` in [[inputs]]",
            Some("did you mean `source`?"),
        ),
        toml(
            "field in the wrong table",
            t("[resources]\nmin_compute_capability = \"8.0\"\n"),
            (5, 1),
            "unknown field `min_compute_capability` in [resources]",
            Some("belongs in [resources.accelerator]"),
        ),
        toml(
            "top-level field after a table header",
            t("kind = \"training\"\n"),
            (4, 1),
            "unknown field `kind` in [runtime]",
            Some("`kind` is a top-level field: move it above the first [table] header"),
        ),
        // Wrong types.
        toml("number in quotes", t("[resources]\ngpus = \"8\"\n"), (5, 8), "`resources.gpus` must be a whole number, not a string", Some("remove the quotes: write 8")),
        toml("word for a number", t("[resources]\ncpu_cores = \"lots\"\n"), (5, 13), "`resources.cpu_cores` must be a number, not a string", Some("change it to a number")),
        toml("fractional GPU count", t("[resources]\ngpus = 1.5\n"), (5, 8), "`resources.gpus` must be a whole number, not a decimal number", Some("without a decimal point")),
        toml(
            "command as one string",
            "name = \"x\"\n[runtime]\ncommand = \"python train.py\"\n".into(),
            (3, 11),
            "`runtime.command` must be an array, not a string",
            Some("no shell splits it for you"),
        ),
        toml("boolean in quotes", t("[constraints]\ninterruptible = \"true\"\n"), (5, 17), "must be true or false, not a string", Some("remove the quotes: write true")),
        toml("table as a number", "name = \"x\"\nresources = 8\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 13), "`resources` must be a table, not a whole number", Some("[resources]")),
        toml("table as an array", "name = \"x\"\nresources = [8]\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 13), "`resources` must be a table, not an array", Some("[resources] table")),
        toml("negative priority", "name = \"x\"\npriority = -1\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 12), "`priority` cannot be negative", Some("use 0 or more")),
        // Bad enum values.
        toml("misspelt family", t("[resources]\ngpus = 1\naccelerator = { family = [\"hoper\"] }\n"), (6, 27), "unknown value `hoper` for `resources.accelerator.family`", Some("did you mean `hopper`?")),
        toml("misspelt kind", "name = \"x\"\nkind = \"trainig\"\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 8), "unknown value `trainig` for `kind`", Some("did you mean `training`?")),
        toml("snake-case kind", "name = \"x\"\nkind = \"fine_tuning\"\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 8), "unknown value `fine_tuning`", Some("did you mean `fine-tuning`?")),
        toml("unknown optimize goal", t("[preferences]\noptimize = \"cheap\"\n"), (5, 12), "unknown value `cheap` for `preferences.optimize`", Some("use one of `cost`, `speed`, `reliability`, `balanced`")),
        toml("misspelt interconnect", t("[resources]\ngpus = 8\ninterconnect = \"nvlnk\"\n"), (6, 16), "unknown value `nvlnk`", Some("did you mean `nvlink`?")),
        // Durations and capabilities.
        toml("bad duration unit", t("[constraints]\nmax_runtime = \"2 hourz\"\n"), (5, 15), "`constraints.max_runtime` is not a valid duration (unknown time unit \"hourz\")", Some("write it like \"90s\", \"45m\", \"2h\" or \"1h30m\"")),
        toml("duration as a number", t("[constraints]\nmax_runtime = 7200\n"), (5, 15), "`constraints.max_runtime` must be a string, not a whole number", Some("quoted string, like \"2h\"")),
        toml("duration as a TOML time", t("[retry]\nbackoff = 00:00:10\n"), (5, 11), "`retry.backoff` must be a string, not a date/time", Some("quoted string")),
        toml("zero max_runtime", t("[constraints]\nmax_runtime = \"0s\"\n"), (5, 15), "`constraints.max_runtime` is 0", Some("give a limit like \"2h\"")),
        toml("bad compute capability", t("[resources]\ngpus = 1\naccelerator = { min_compute_capability = \"eight\" }\n"), (6, 42), "is not a valid compute capability", Some("\"MAJOR.MINOR\"")),
        toml(
            "unreachable compute capability",
            t("[resources]\ngpus = 1\naccelerator = { family = [\"ampere\"], min_compute_capability = \"9.0\" }\n"),
            (6, 63),
            "no listed family reaches compute capability 9.0 (ampere reaches 8.7)",
            Some("lower min_compute_capability"),
        ),
        // Ranges and GPU consistency.
        toml("gpu memory min > max", t("[resources]\ngpus = 1\ngpu_memory_gb = { min = 80, max = 40 }\n"), (6, 25), "min (80 GB) greater than max (40 GB)", Some("swap them")),
        toml("negative gpu memory", t("[resources]\ngpus = 1\ngpu_memory_gb = -24\n"), (6, 17), "`resources.gpu_memory_gb.min` must be a number of GB, 0 or more", Some("like 24")),
        toml("absurd gpu memory", t("[resources]\ngpus = 1\ngpu_memory_gb = { min = 4096 }\n"), (6, 25), "is 4096 GB, more than any GPU has", Some("check the unit")),
        toml("gpus = 0 with gpu memory", t("[resources]\ngpus = 0\ngpu_memory_gb = { min = 24 }\n"), (6, 17), "`resources.gpu_memory_gb` is set but `resources.gpus` is 0", Some("set gpus to the number of GPUs needed")),
        toml("no gpus with an accelerator", t("[resources]\naccelerator = { vendor = \"nvidia\" }\n"), (5, 15), "`resources.accelerator` is set but `resources.gpus` is 0", Some("remove accelerator for CPU-only work")),
        toml("vendor and family disagree", t("[resources]\ngpus = 1\naccelerator = { vendor = \"amd\", family = [\"hopper\"] }\n"), (6, 43), "family `hopper` is made by nvidia, but `vendor` is amd", Some("set vendor = \"nvidia\"")),
        toml("nvlink on amd", t("[resources]\ngpus = 8\naccelerator = { vendor = \"amd\" }\ninterconnect = \"nvlink\"\n"), (7, 16), "interconnect `nvlink` exists only on nvidia GPUs", Some("pcie")),
        toml("no cpu", t("[resources]\ncpu_cores = 0\n"), (5, 13), "`resources.cpu_cores` must be a number more than 0", Some("like 8")),
        toml("absurd memory", t("[resources]\nmemory_gb = 100000\n"), (5, 13), "is 100000 GB of memory, more than any node has", Some("check the unit")),
        toml("NaN disk", t("[resources]\ndisk_gb = nan\n"), (5, 11), "`resources.disk_gb` must be a number 0 or more", None),
        // Other semantic errors.
        toml("priority too high", "name = \"x\"\npriority = 150\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 12), "`priority` is 150, above the maximum of 100", Some("use 0 (lowest) to 100 (highest)")),
        toml("empty name", "name = \"\"\n[runtime]\ncommand = [\"a\"]\n".into(), (1, 8), "`name` is empty", Some("give the workload a short name")),
        toml("name with a space", "name = \"my job\"\n[runtime]\ncommand = [\"a\"]\n".into(), (1, 8), "`name` contains ' '", Some("letters, digits")),
        toml("empty command", "name = \"x\"\n[runtime]\ncommand = []\n".into(), (3, 11), "`runtime.command` is empty", Some("[\"python\", \"train.py\"]")),
        toml("empty program", "name = \"x\"\n[runtime]\ncommand = [\"\", \"x\"]\n".into(), (3, 12), "the program name (`runtime.command[0]`) is empty", Some("put the program first")),
        toml("zero attempts", t("[retry]\nmax_attempts = 0\n"), (5, 16), "`retry.max_attempts` is 0", Some("use 1 for no retries")),
        toml("too many attempts", t("[retry]\nmax_attempts = 1000\n"), (5, 16), "above the maximum of 100", None),
        toml("backoff above its ceiling", t("[retry]\nbackoff = \"1h\"\nbackoff_max = \"5m\"\n"), (5, 11), "`retry.backoff` (1h) is longer than `retry.backoff_max` (5m)", Some("lower backoff or raise backoff_max")),
        toml("zero cost cap", t("[constraints]\nmax_runtime = \"1h\"\nmax_cost_usd = 0.0\n"), (6, 16), "`constraints.max_cost_usd` must be more than 0", Some("US dollars")),
        toml("expected runtime beyond the limit", "name = \"x\"\nexpected_runtime = \"3h\"\n[runtime]\ncommand = [\"a\"]\n[constraints]\nmax_runtime = \"2h\"\n".into(), (2, 20), "`expected_runtime` (3h) is longer than `constraints.max_runtime` (2h)", Some("raise constraints.max_runtime")),
        // Inputs and outputs.
        toml("relative output path", t("[[outputs]]\nname = \"o\"\npath = \"outputs/model\"\n"), (6, 8), "`outputs[0].path` must be an absolute path", Some("like \"/outputs/o\"")),
        toml("output path with ..", t("[[outputs]]\nname = \"o\"\npath = \"/outputs/../etc\"\n"), (6, 8), "`outputs[0].path` contains a `..` component", Some("without `..`")),
        toml("duplicate output names", t("[[outputs]]\nname = \"o\"\npath = \"/a\"\n[[outputs]]\nname = \"o\"\npath = \"/b\"\n"), (8, 8), "output name `o` is used twice (first at outputs[0])", Some("its own name")),
        toml("duplicate output paths", t("[[outputs]]\nname = \"a\"\npath = \"/out/x\"\n[[outputs]]\nname = \"b\"\npath = \"/out//x/\"\n"), (9, 8), "output path `/out/x` is used twice", None),
        toml("duplicate input names", t("[[inputs]]\nname = \"d\"\nsource = \"s3://b/1\"\n[[inputs]]\nname = \"d\"\nsource = \"s3://b/2\"\n"), (8, 8), "input name `d` is used twice", None),
        toml("unknown input scheme", t("[[inputs]]\nname = \"d\"\nsource = \"s4://bucket/key\"\n"), (6, 10), "uses an unknown scheme `s4`", Some("did you mean `s3://`?")),
        toml("input without a scheme", t("[[inputs]]\nname = \"d\"\nsource = \"/data/set\"\n"), (6, 10), "`inputs[0].source` has no scheme", Some("file:///data/set")),
        toml("missing input source", t("[[inputs]]\nname = \"d\"\n"), (4, 1), "missing required field `source` in [[inputs]]", Some("add `source = \"s3://bucket/path\"`")),
        // Environment and secrets.
        toml("invalid env name", t("env = { \"1BAD\" = \"x\" }\n"), (4, 9), "`1BAD` is not a valid environment variable name", Some("like `BATCH_SIZE`")),
        toml("secret listed twice", t("secrets = [\"HF_TOKEN\", \"HF_TOKEN\"]\n"), (4, 24), "secret `HF_TOKEN` is listed twice", Some("remove the duplicate")),
        toml("env and secret clash", t("env = { HF_TOKEN = \"\" }\nsecrets = [\"HF_TOKEN\"]\n"), (4, 9), "`HF_TOKEN` is both a plain variable", Some("remove runtime.env.HF_TOKEN")),
        toml(
            "inline secret by name",
            t("env = { HF_TOKEN = \"my-private-value\" }\n"),
            (4, 20),
            "a secret value is written inline in runtime.env.HF_TOKEN",
            Some("move it out of the spec and list `HF_TOKEN` in runtime.secrets"),
        ),
        toml(
            "inline secret by shape",
            t("[runtime.env]\nGIT_AUTH = \"ghp_0123456789abcdefghijklmnopqrstuvwxyz\"\n"),
            (5, 12),
            "a secret value is written inline in runtime.env.GIT_AUTH",
            Some("list `GIT_AUTH` in runtime.secrets"),
        ),
        toml("credential in an input URI", t("[[inputs]]\nname = \"d\"\nsource = \"https://user:pa55word@example.com/data\"\n"), (6, 10), "a secret value is written inline in inputs[0].source", Some("runtime.secrets")),
        // Control characters: they act on the terminals specs are shown on.
        toml("control character in a label", "name = \"x\"\nlabels = { team = \"a\\u001b\" }\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 19), "`labels.team` contains the control character U+001B", Some("operators' terminals")),
        toml("carriage return in an argument", "name = \"x\"\n[runtime]\ncommand = [\"a\", \"b\\r\"]\n".into(), (3, 17), "`runtime.command[1]` contains the control character U+000D", Some("tabs and newlines")),
        toml("control character in the image", t("image = \"img\\u009b\"\n"), (4, 9), "`runtime.image` contains the control character U+009B", None),
        toml("control character in the workdir", t("workdir = \"/w\\u007f\"\n"), (4, 11), "`runtime.workdir` contains the control character U+007F", None),
        toml("control character in an input URI", t("[[inputs]]\nname = \"d\"\nsource = \"s3://b/\\u001b\"\n"), (6, 10), "`inputs[0].source` contains the control character U+001B", Some("percent-encode")),
        toml("NUL in a mount path", t("[[inputs]]\nname = \"d\"\nsource = \"s3://b/k\"\nmount = \"/data\\u0000\"\n"), (7, 9), "`inputs[0].mount` contains a NUL character", None),
        // Missing required fields.
        toml("missing name", "[runtime]\ncommand = [\"a\"]\n".into(), (1, 1), "missing required field `name`", Some("add `name = \"my-workload\"` at the top of the file")),
        toml("missing command", "name = \"x\"\n[runtime]\nimage = \"img\"\n".into(), (2, 1), "missing required field `command` in [runtime]", Some("add `command = [\"python\", \"main.py\"]` to [runtime]")),
        toml("missing runtime", "name = \"x\"\n".into(), (1, 1), "missing required field `runtime`", Some("[runtime]")),
        // TOML syntax.
        toml("unclosed array", "name = \"x\"\n[runtime]\ncommand = [\"a\"\n".into(), (3, 15), "TOML syntax error: unclosed array", Some("close the array with `]`")),
        toml("duplicate key", "name = \"x\"\nname = \"y\"\n[runtime]\ncommand = [\"a\"]\n".into(), (2, 1), "`name` is defined twice", Some("remove one of the two definitions")),
        toml("unquoted string", "name = hello\n[runtime]\ncommand = [\"a\"]\n".into(), (1, 8), "TOML syntax error", Some("double quotes")),
        toml("unterminated string", "name = \"x\n[runtime]\ncommand = [\"a\"]\n".into(), (1, 10), "TOML syntax error: invalid basic string", Some("close the string")),
        // Oversize.
        toml("oversize spec", format!("{BASE}# {}\n", "x".repeat(300 * 1024)), (0, 0), "at most 256 KiB is allowed", Some("move long lists")),
        toml("too many arguments", format!("name = \"x\"\n[runtime]\ncommand = [{}]\n", vec!["\"a\""; 1001].join(", ")), (3, 11), "`runtime.command` has 1001 arguments; at most 1000 are allowed", None),
        // JSON.
        json("json unknown field", "{\"name\": \"x\",\n \"runtime\": {\"command\": [\"a\"]},\n \"resources\": {\"gpu\": 1}}", (3, 16), "unknown field `gpu` in `resources`", Some("did you mean `gpus`?")),
        json("json missing command", "{\"name\": \"x\",\n \"runtime\": {\"image\": \"a\"}}", (2, 2), "missing required field `command` in `runtime`", Some("add `\"command\": [\"python\", \"main.py\"]`")),
        json("json trailing comma", "{\"name\": \"x\",\n \"runtime\": {\"command\": [\"a\"]},\n}", (3, 1), "JSON syntax error: trailing comma", Some("remove the comma")),
        json("json wrong type", "{\"name\": \"x\", \"runtime\": {\"command\": [\"a\"]}, \"resources\": {\"gpus\": \"two\"}}", (1, 68), "`resources.gpus` must be a whole number, not a string", Some("change it to a whole number")),
        json("json gpus past u32", "{\"name\": \"x\", \"runtime\": {\"command\": [\"a\"]}, \"resources\": {\"gpus\": 99999999999999999999}}", (1, 68), "`resources.gpus` must be a whole number from 0 to 4294967295, not 99999999999999999999", Some("use a number from 0 to 4294967295")),
        toml("gpus past u32", t("[resources]\ngpus = 4294967296\n"), (5, 8), "`resources.gpus` must be a whole number from 0 to 4294967295, not 4294967296", None),
        json("json number for an enum", "{\"name\": \"x\", \"kind\": 7, \"runtime\": {\"command\": [\"a\"]}}", (1, 23), "`kind` must be a string, not a whole number", Some("put the value in double quotes")),
        json("json bad enum", "{\"name\": \"x\", \"kind\": \"infrence\", \"runtime\": {\"command\": [\"a\"]}}", (1, 23), "unknown value `infrence` for `kind`", Some("did you mean `inference`?")),
        json(
            "json gpus = 0 with memory",
            "{\n  \"name\": \"x\",\n  \"runtime\": {\"command\": [\"a\"]},\n  \"resources\": {\"gpus\": 0, \"gpu_memory_gb\": {\"min\": 24}}\n}",
            (4, 45),
            "`resources.gpu_memory_gb` is set but `resources.gpus` is 0",
            None,
        ),
        // Gangs and checkpoints.
        toml("zero nodes", t("[resources]\nnodes = 0\n"), (5, 9), "`resources.nodes` is 0", Some("use 1 for work on one node (the default), or the number of nodes a gang runs on")),
        toml("unknown fabric", t("[resources]\nnodes = 2\nfabric = \"infiniband2\"\n"), (6, 10), "unknown value `infiniband2` for `resources.fabric`", None),
        toml("bad topology", t("[resources]\nnodes = 2\n[constraints]\ntopology = \"same-rack\"\n"), (7, 12), "unknown value `same-rack` for `constraints.topology`", None),
        toml("relative checkpoint path", t("[checkpoint]\npath = \"ckpt\"\n"), (5, 8), "`checkpoint.path` must be an absolute path", Some("write it from the root, like \"/ckpt\"")),
        toml("empty accelerator model", t("[resources]\ngpus = 1\naccelerator = { model = \"\" }\n"), (6, 25), "`resources.accelerator.model` must name a model, like \"A100\" or \"H100\"", None),
        json(
            "json inline secret",
            "{\"name\": \"x\",\n \"runtime\": {\"command\": [\"a\"], \"env\": {\"OPENAI_API_KEY\": \"not-for-your-eyes\"}}}",
            (2, 58),
            "a secret value is written inline in runtime.env.OPENAI_API_KEY",
            None,
        ),
    ]
}

#[test]
fn malformed_specs_point_at_the_problem_and_say_how_to_fix_it() {
    let cases = cases();
    assert!(cases.len() >= 30);
    let mut failures = Vec::new();
    for case in &cases {
        let err = match load::parse(&case.src, "spec.toml", case.format) {
            Ok(loaded) => {
                failures.push(format!(
                    "{}: parsed without errors ({} warnings)",
                    case.name,
                    loaded.warnings.len()
                ));
                continue;
            }
            Err(e) => e,
        };
        let Some(d) = err.diagnostics.iter().find(|d| d.message.contains(case.message)) else {
            failures.push(format!("{}: no diagnostic contains {:?}; got:\n{err}", case.name, case.message));
            continue;
        };
        if (d.line, d.col) != case.at {
            failures.push(format!(
                "{}: at {}:{}, expected {}:{}\n{}",
                case.name,
                d.line,
                d.col,
                case.at.0,
                case.at.1,
                d.render(&case.src)
            ));
        }
        if d.severity != Severity::Error {
            failures.push(format!("{}: reported as a warning", case.name));
        }
        let help = d.help.as_deref().unwrap_or("");
        if help.is_empty() {
            failures.push(format!("{}: no help", case.name));
        }
        if let Some(want) = case.help
            && !help.contains(want)
        {
            failures.push(format!("{}: help {help:?} does not contain {want:?}", case.name));
        }
        // Errors come before warnings, in source order.
        let first_warning = err.diagnostics.iter().position(|d| d.severity == Severity::Warning);
        if let Some(w) = first_warning
            && err.diagnostics[w..].iter().any(Diagnostic::is_error)
        {
            failures.push(format!("{}: an error follows a warning", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_semantic_problem_is_reported_at_once() {
    let src = t(
        "[resources]\ngpus = 0\ngpu_memory_gb = { min = 90, max = 40 }\ncpu_cores = -1\n[retry]\nmax_attempts = 0\n[[outputs]]\nname = \"o\"\npath = \"rel\"\n",
    );
    let err = load::parse(&src, "spec.toml", Format::Toml).unwrap_err();
    let messages: Vec<&str> = err.diagnostics.iter().map(|d| d.message.as_str()).collect();
    for want in [
        "is set but `resources.gpus` is 0",
        "greater than max",
        "`resources.cpu_cores` must be",
        "`retry.max_attempts` is 0",
        "must be an absolute path",
    ] {
        assert!(messages.iter().any(|m| m.contains(want)), "{want:?} missing from {messages:#?}");
    }
    let lines: Vec<usize> = err.diagnostics.iter().map(|d| d.line).collect();
    let mut sorted = lines.clone();
    sorted.sort();
    assert_eq!(lines, sorted, "errors are in source order");
}

/// (line, col, message) of every diagnostic.
fn located(err: &load::SpecError) -> Vec<(usize, usize, String)> {
    err.diagnostics.iter().map(|d| (d.line, d.col, d.message.clone())).collect()
}

#[test]
fn separate_problems_of_every_kind_are_reported_together() {
    // An unknown key, a wrong type, a bad enum value and a range error.
    let src = "name = \"x\"\nprority = 5\n[runtime]\ncommand = [\"a\"]\n[resources]\ngpus = \"two\"\n\
               interconnect = \"nvlnk\"\n[retry]\nmax_attempts = 0\n";
    let err = load::parse(src, "spec.toml", Format::Toml).unwrap_err();
    let got = located(&err);
    let want = [
        (2, 1, "unknown field `prority` at the top level"),
        (6, 8, "`resources.gpus` must be a whole number, not a string"),
        (7, 16, "unknown value `nvlnk` for `resources.interconnect`"),
        (9, 16, "`retry.max_attempts` is 0"),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for ((line, col, message), (l, c, m)) in got.iter().zip(want) {
        assert_eq!((*line, *col), (l, c), "{message}");
        assert!(message.starts_with(m), "{message:?} is not {m:?}");
    }
    assert!(err.diagnostics.iter().all(|d| d.help.is_some()), "each says what to do");
    let shown = err.to_string();
    for at in ["spec.toml:2:1:", "spec.toml:6:8:", "spec.toml:7:16:", "spec.toml:9:16:"] {
        assert!(shown.contains(at), "{at} missing from\n{shown}");
    }
}

#[test]
fn missing_fields_are_reported_with_the_other_problems() {
    let src = "kind = \"trainig\"\n[runtime]\nimage = \"img\"\n[resources]\ngpu = 1\n";
    let err = load::parse(src, "spec.toml", Format::Toml).unwrap_err();
    let got = located(&err);
    for (at, m) in [
        ((1, 1), "missing required field `name`"),
        ((1, 8), "unknown value `trainig` for `kind`"),
        ((2, 1), "missing required field `command` in [runtime]"),
        ((5, 1), "unknown field `gpu` in [resources]"),
    ] {
        assert!(
            got.iter().any(|(l, c, msg)| (*l, *c) == at && msg.starts_with(m)),
            "{m:?} at {at:?} missing: {got:#?}"
        );
    }
    assert_eq!(got.len(), 4, "{got:#?}");
}

#[test]
fn what_only_follows_from_an_earlier_problem_is_not_reported() {
    // A bad required value is not also missing or empty; a bad GPU count
    // is not also "0 GPUs with a GPU memory requirement"; a misspelt
    // table is not also missing.
    let src = "name = 5\n[runtme]\ncommand = \"python x\"\n[resources]\ngpus = \"two\"\ngpu_memory_gb = 24\n";
    let err = load::parse(src, "spec.toml", Format::Toml).unwrap_err();
    let got = located(&err);
    let messages: Vec<&str> = got.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`name` must be a string, not a whole number",
            "unknown field `runtme` at the top level",
            "`resources.gpus` must be a whole number, not a string",
        ],
        "{got:#?}"
    );
}

#[test]
fn a_flood_of_problems_is_cut_short_and_says_so() {
    let junk: String = (0..100).map(|i| format!("junk{i} = 1\n")).collect();
    let err = load::parse(&format!("{BASE}{junk}"), "spec.toml", Format::Toml).unwrap_err();
    assert!(err.diagnostics.len() > 50, "{}", err.diagnostics.len());
    assert!(err.diagnostics.iter().any(|d| d.message.starts_with("stopped checking types after")), "{err}");
}

#[test]
fn json_specs_report_every_problem_too() {
    let src = "{\"name\": \"x\",\n \"prority\": 5,\n \"runtime\": {\"image\": \"i\"},\n \"resources\": {\"gpus\": \"two\"},\n \"retry\": {\"max_attempts\": 0}}";
    let err = load::parse(src, "spec.json", Format::Json).unwrap_err();
    let got = located(&err);
    let want = [
        (2, 2, "unknown field `prority` at the top level"),
        (3, 2, "missing required field `command` in `runtime`"),
        (4, 24, "`resources.gpus` must be a whole number, not a string"),
        (5, 28, "`retry.max_attempts` is 0"),
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for ((line, col, message), (l, c, m)) in got.iter().zip(want) {
        assert_eq!((*line, *col), (l, c), "{message}");
        assert!(message.starts_with(m), "{message:?} is not {m:?}");
    }
}

#[test]
fn display_and_render_show_file_line_col_and_help() {
    let src = t("[resources]\ngpu = 1\n");
    let err = load::parse(&src, "spec.toml", Format::Toml).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.toml:5:1: error: unknown field `gpu` in [resources]\n  help: did you mean `gpus`?"
    );
    assert_eq!(
        err.diagnostics[0].render(&src),
        "error: unknown field `gpu` in [resources]\n --> spec.toml:5:1\n  |\n5 | gpu = 1\n  | ^^^\n  = help: did you mean `gpus`?\n"
    );
}

#[test]
fn unreadable_and_non_utf8_files_are_diagnosed() {
    let err = load::load_file(std::path::Path::new("/nonexistent/dir/spec.toml")).unwrap_err();
    assert_eq!(err.diagnostics.len(), 1);
    let d = &err.diagnostics[0];
    assert_eq!((d.line, d.col), (0, 0));
    assert!(d.message.starts_with("cannot read the spec"), "{}", d.message);
    assert!(d.to_string().starts_with("/nonexistent/dir/spec.toml: error: cannot read the spec"));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, b"name = \"x\"\nimage = \"\xff\"\n").unwrap();
    let err = load::load_file(&path).unwrap_err();
    let d = &err.diagnostics[0];
    assert_eq!((d.line, d.col, d.message.as_str()), (2, 10, "the spec is not valid UTF-8"));
}
