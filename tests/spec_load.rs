//! Well-formed specs: the shipped examples load cleanly, warnings do not
//! block, TOML and JSON mean the same thing, and the JSON Schema describes
//! what the loader accepts.

use canopy::accel::{Family, Vendor};
use canopy::spec::{Format, Severity, Spec, WorkloadKind, load};
use serde_json::Value;
use std::path::Path;

const SPECS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/assets/specs");

fn asset(name: &str) -> String {
    std::fs::read_to_string(Path::new(SPECS).join(name)).unwrap()
}

/// The batch-inference example written by hand as JSON.
const BATCH_INFERENCE_JSON: &str = r#"{
  "name": "batch-inference",
  "kind": "inference",
  "priority": 50,
  "runtime": {
    "image": "registry.example.com/batch-inference:v4",
    "command": ["python", "run_inference.py"],
    "env": { "BATCH_SIZE": "64" },
    "secrets": ["HF_TOKEN"]
  },
  "resources": {
    "gpus": 1,
    "gpu_memory_gb": { "min": 24 },
    "accelerator": { "vendor": "nvidia", "family": ["hopper", "ada", "ampere"], "min_compute_capability": "8.0" },
    "cpu_cores": 8,
    "memory_gb": 32,
    "disk_gb": 100
  },
  "constraints": {
    "max_runtime": "2h",
    "max_cost_usd": 10.0,
    "max_hourly_usd": 4.0,
    "providers": ["onprem-*", "cloud-a"],
    "regions": ["eu-*"],
    "compliance": ["gdpr"],
    "interruptible": false
  },
  "preferences": {
    "startup_within": "2m",
    "regions": ["eu-west"],
    "optimize": "balanced",
    "reserved_first": true
  },
  "retry": { "max_attempts": 4, "app_errors": 0 },
  "inputs": [ { "name": "dataset", "source": "file:///data/inference-batch", "region": "eu-west" } ],
  "outputs": [ { "name": "predictions", "path": "/outputs/predictions.jsonl" } ]
}"#;

#[test]
fn the_example_spec_loads_with_no_diagnostics() {
    let loaded = load::parse(&asset("batch-inference.toml"), "batch-inference.toml", Format::Toml).unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let spec = loaded.spec;
    assert_eq!(spec.name, "batch-inference");
    assert_eq!(spec.kind, WorkloadKind::Inference);
    assert_eq!(spec.resources.gpus, 1);
    assert_eq!(spec.resources.gpu_memory_gb.and_then(|r| r.min), Some(24.0));
    let acc = spec.resources.accelerator.as_ref().unwrap();
    assert_eq!(acc.vendor, Some(Vendor::Nvidia));
    assert_eq!(acc.family, [Family::Hopper, Family::Ada, Family::Ampere]);
    assert_eq!(spec.constraints.max_runtime.unwrap().as_secs(), 7200);
    assert_eq!(spec.runtime.secrets, ["HF_TOKEN"]);
    assert_eq!(spec.retry.max_attempts, 4);
    assert_eq!(spec.outputs[0].path, "/outputs/predictions.jsonl");
}

#[test]
fn toml_and_json_forms_give_the_same_spec() {
    let from_toml = load::parse(&asset("batch-inference.toml"), "a.toml", Format::Toml).unwrap().spec;
    let from_json = load::parse(BATCH_INFERENCE_JSON, "a.json", Format::Json).unwrap().spec;
    assert_eq!(from_toml, from_json);
}

#[test]
fn every_shipped_spec_round_trips_through_json() {
    for (name, text) in shipped() {
        let spec = load::parse(&text, &name, Format::Toml).unwrap().spec;
        let json = serde_json::to_string_pretty(&spec).unwrap();
        let again =
            load::parse(&json, "round-trip.json", Format::Json).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        assert_eq!(spec, again.spec, "{name}");
    }
}

fn shipped() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(SPECS)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml" || e == "json"))
        .map(|p| {
            (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_shipped_spec_is_valid() {
    let specs = shipped();
    let names: Vec<&str> = specs.iter().map(|(n, _)| n.as_str()).collect();
    for want in ["batch-inference.toml", "train-llm.toml", "fine-tune.toml", "cpu-batch.toml", "hello.toml"] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    for (name, _) in &specs {
        let loaded = load::load_file(&Path::new(SPECS).join(name)).unwrap_or_else(|e| panic!("{name}:\n{e}"));
        assert!(loaded.warnings.is_empty(), "{name}: {:?}", loaded.warnings);
    }
}

#[test]
fn the_shipped_specs_say_what_they_promise() {
    let train = load::parse(&asset("train-llm.toml"), "t", Format::Toml).unwrap().spec;
    assert_eq!(train.resources.gpus, 8);
    assert_eq!(train.resources.accelerator.unwrap().family, [Family::Hopper]);
    assert_eq!(train.resources.interconnect, Some(canopy::accel::Interconnect::Nvlink));
    assert_eq!(train.constraints.capabilities, ["long-training"]);
    assert_eq!(train.constraints.max_runtime.unwrap().as_secs(), 48 * 3600);
    for cpu_only in ["cpu-batch.toml", "hello.toml"] {
        let spec = load::parse(&asset(cpu_only), cpu_only, Format::Toml).unwrap().spec;
        assert_eq!(spec.resources.gpus, 0, "{cpu_only}");
    }
    let hello = load::parse(&asset("hello.toml"), "hello.toml", Format::Toml).unwrap().spec;
    assert_eq!(hello.runtime.command[0], "echo");
    assert_eq!(hello.runtime.image, None);
}

#[test]
fn warnings_are_shown_but_do_not_block() {
    let src = "name = \"w\"\nkind = \"training\"\n[runtime]\ncommand = [\"a\"]\n\
               [resources]\ngpus = 1\ninterconnect = \"nvlink\"\n\
               [constraints]\nmax_cost_usd = 20.0\ninterruptible = true\nregions = [\"eu-*\"]\n\
               [preferences]\nregions = [\"us-east\"]\n\
               [retry]\nmax_attempts = 1\napp_errors = 2\ninfra_retries = 0\n";
    let loaded = load::parse(src, "w.toml", Format::Toml).unwrap();
    let seen: Vec<(usize, usize, &str)> =
        loaded.warnings.iter().map(|d| (d.line, d.col, d.path.as_str())).collect();
    assert_eq!(
        seen,
        [
            (7, 16, "resources.interconnect"),
            (9, 16, "constraints.max_cost_usd"),
            (10, 17, "constraints.interruptible"),
            (13, 12, "preferences.regions[0]"),
            (16, 14, "retry.app_errors"),
        ]
    );
    assert!(loaded.warnings.iter().all(|d| d.severity == Severity::Warning && d.help.is_some()));
    let app = &loaded.warnings[4];
    assert_eq!(app.message, "`retry.app_errors` is 2, but only 0 retries are possible with max_attempts = 1");
    assert!(loaded.warnings[0].to_string().starts_with("w.toml:7:16: warning: "));
}

#[test]
fn defaults_fill_what_is_left_out() {
    let spec: Spec =
        load::parse("name = \"d\"\n[runtime]\ncommand = [\"true\"]\n", "d.toml", Format::Toml).unwrap().spec;
    assert_eq!(spec.kind, WorkloadKind::Batch);
    assert_eq!(spec.priority, 50);
    assert_eq!(spec.resources.gpus, 0);
    assert_eq!(spec.retry.max_attempts, 3);
}

#[test]
fn gpu_memory_takes_a_number_or_a_range() {
    let one = |s: &str| {
        let src = format!(
            "name = \"g\"\n[runtime]\ncommand = [\"a\"]\n[resources]\ngpus = 1\ngpu_memory_gb = {s}\n"
        );
        load::parse(&src, "g.toml", Format::Toml).unwrap().spec.resources.gpu_memory_gb.unwrap()
    };
    assert_eq!((one("24").min, one("24").max), (Some(24.0), None));
    assert_eq!(
        (one("{ min = 40, max = 80 }").min, one("{ min = 40, max = 80 }").max),
        (Some(40.0), Some(80.0))
    );
    assert_eq!((one("{ max = 16.5 }").min, one("{ max = 16.5 }").max), (None, Some(16.5)));
}

#[test]
fn format_follows_the_file_extension() {
    assert_eq!(Format::from_path(Path::new("a/spec.json")), Format::Json);
    assert_eq!(Format::from_path(Path::new("spec.JSON")), Format::Json);
    assert_eq!(Format::from_path(Path::new("spec.toml")), Format::Toml);
    assert_eq!(Format::from_path(Path::new("spec")), Format::Toml);
}

/// Follow `$ref` and the object branch of `anyOf` (GbRange).
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap();
        return resolve(&root["$defs"][name], root);
    }
    let options = schema.get("anyOf").and_then(Value::as_array).into_iter().flatten();
    options
        .map(|o| resolve(o, root))
        .find(|o| o.get("properties").is_some() || o.get("items").is_some())
        .unwrap_or(schema)
}

/// Every key of `value` is described by `schema`, recursively.
fn check_keys(value: &Value, schema: &Value, root: &Value, path: &str) {
    let schema = resolve(schema, root);
    match value {
        Value::Object(map) => {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else {
                // A free-form map (env, labels).
                assert!(
                    schema.get("additionalProperties").is_some(),
                    "{path}: object not described by {schema}"
                );
                return;
            };
            assert_eq!(
                schema.get("additionalProperties"),
                Some(&Value::Bool(false)),
                "{path} must deny unknown fields"
            );
            for (k, v) in map {
                let sub = props.get(k).unwrap_or_else(|| panic!("{path}.{k} is not in the schema"));
                check_keys(v, sub, root, &format!("{path}.{k}"));
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for v in items {
                    check_keys(v, item, root, &format!("{path}[]"));
                }
            }
        }
        _ => {}
    }
}

#[test]
fn the_schema_describes_the_example() {
    let schema = load::schema();
    assert_eq!(schema["$id"], "urn:canopy:spec:v1");
    assert_eq!(schema["title"], "Canopy workload spec");
    assert!(schema["description"].as_str().unwrap().contains("never which SKU"));
    let props = schema["properties"].as_object().unwrap();
    for key in [
        "name",
        "kind",
        "priority",
        "runtime",
        "resources",
        "constraints",
        "preferences",
        "retry",
        "inputs",
        "outputs",
    ] {
        assert!(props.contains_key(key), "schema lacks {key}");
    }
    let required: Vec<&str> =
        schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(required.contains(&"name") && required.contains(&"runtime"), "{required:?}");
    let example: Value = serde_json::from_str(BATCH_INFERENCE_JSON).unwrap();
    check_keys(&example, &schema, &schema, "");
    // The number form of gpu_memory_gb is described too.
    let gpu_mem = resolve(&schema["$defs"]["Resources"]["properties"]["gpu_memory_gb"], &schema);
    assert!(gpu_mem.get("properties").is_some());
    let raw = serde_json::to_string(&schema["$defs"]["GbRange"]).unwrap();
    assert!(raw.contains("\"number\""), "{raw}");
}

#[test]
fn the_shipped_gang_spec_asks_for_two_nodes_behind_one_switch_and_checkpoints() {
    let s = load::parse(&asset("pretrain-gang.toml"), "pretrain-gang.toml", Format::Toml).unwrap();
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
    let s = s.spec;
    assert_eq!((s.nodes(), s.resources.gpus), (2, 8));
    assert_eq!(s.resources.fabric, Some(canopy::accel::Fabric::Roce));
    assert_eq!(s.constraints.topology, Some(canopy::spec::Topology::SameSwitch));
    assert_eq!(s.checkpoint.as_ref().map(|c| c.path.as_str()), Some("/ckpt"));
}
