//! `canopy import skypilot`: task files written after SkyPilot's task YAML
//! reference convert to Canopy specs that load and validate, with every
//! field that has no counterpart named in a warning at its line; each
//! example's spec and warnings are an insta snapshot. Malformed files get
//! an error at FILE:LINE:COL with what to do, and never a panic.

use canopy::accel::{Family, Vendor};
use canopy::import::Source;
use canopy::spec::GbRange;

mod import_support;

use import_support::{Bad, Fixtures, warnings};

const FIX: Fixtures = Fixtures {
    source: Source::Skypilot,
    kind: "skypilot",
    ext: ".yaml",
    cwd: "/home/ada/project",
    snippet_name: "task.yaml",
};

#[test]
fn every_example_converts_to_a_spec_that_loads_and_matches_its_snapshot() {
    for (name, snapshot) in FIX.converted_examples(10) {
        insta::assert_snapshot!(name, snapshot);
    }
}

#[test]
fn a_file_without_a_name_is_named_after_the_file_and_runs_its_script_in_bash() {
    let i = FIX.convert("hello.yaml");
    assert_eq!(i.spec.name, "hello");
    assert_eq!(i.spec.runtime.command, ["bash", "-c", "echo \"Hello, SkyPilot!\"\n"]);
    assert!(i.warnings.is_empty(), "{}", warnings(&i));
}

#[test]
fn accelerators_become_the_exact_model_its_family_and_the_count() {
    let i = FIX.convert("finetune-h100.yaml");
    let r = &i.spec.resources;
    assert_eq!(r.gpus, 8);
    let acc = r.accelerator.as_ref().unwrap();
    assert_eq!(acc.model.as_deref(), Some("H100"));
    assert_eq!(acc.family, [Family::Hopper]);
    assert_eq!(acc.vendor, Some(Vendor::Nvidia));
    assert_eq!(r.gpu_memory_gb, Some(GbRange { min: Some(80.0), max: None }));
    assert_eq!((r.cpu_cores, r.memory_gb, r.disk_gb), (32.0, 512.0, 1024.0));
    // Values keep the text they were written with.
    assert_eq!(i.spec.runtime.env["EPOCHS"], "3");
    assert_eq!(i.spec.runtime.env["LEARNING_RATE"], "2.0e-5");
    // Setup, then run only if the setup succeeded, each in its own bash.
    let argv = &i.spec.runtime.command;
    assert_eq!(argv[..4], ["bash", "-c", "bash -c \"$1\" && exec bash -c \"$2\"", "skypilot"]);
    assert!(argv[4].starts_with("pip install torch") && argv[5].starts_with("accelerate launch"));

    let i = FIX.convert("a100-80gb-mapping.yaml");
    let r = &i.spec.resources;
    assert_eq!(r.gpus, 4);
    assert_eq!(r.accelerator.as_ref().unwrap().model.as_deref(), Some("A100"));
    assert_eq!(r.gpu_memory_gb.unwrap().min, Some(80.0), "A100-80GB is an A100 with 80 GB");
    assert_eq!((r.memory_gb, r.disk_gb, r.cpu_cores), (256.0, 500.0, 48.0));
    let globs = |g: &[canopy::units::Glob]| g.iter().map(|g| g.as_str().to_string()).collect::<Vec<_>>();
    assert_eq!(globs(&i.spec.constraints.providers), ["gcp"]);
    assert_eq!(globs(&i.spec.constraints.regions), ["us-central1"]);

    let i = FIX.convert("amd-mi300x.yaml");
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!((acc.model.as_deref(), acc.vendor), (Some("MI300X"), Some(Vendor::Amd)));
    assert_eq!(i.spec.resources.disk_gb, 2048.0);
}

#[test]
fn several_candidate_gpus_become_their_families_with_a_warning() {
    let i = FIX.convert("candidates-list.yaml");
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!(acc.family, [Family::Ada, Family::Ampere, Family::Turing]);
    assert_eq!(acc.model, None);
    assert_eq!(i.spec.resources.gpu_memory_gb.unwrap().min, Some(16.0), "the least of the candidates");
    assert!(i.spec.constraints.interruptible);
    assert_eq!(i.spec.constraints.max_hourly_usd, Some(1.5));
    let w = warnings(&i);
    assert!(w.contains("skypilot/candidates-list.yaml:4:17: warning: `resources.accelerators` offers several GPUs (L4, A10G, T4)"), "{w}");
    assert!(
        w.contains("skypilot/candidates-list.yaml:5:13: warning: `resources.use_spot: true` becomes"),
        "{w}"
    );

    let i = FIX.convert("candidates-set.yaml");
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!(acc.family, [Family::Ada]);
    assert_eq!(i.spec.resources.gpus, 2);
}

#[test]
fn num_nodes_makes_a_gang_and_dropped_resources_are_named_at_their_lines() {
    let i = FIX.convert("multinode.yaml");
    assert_eq!(i.spec.resources.nodes, 4);
    assert_eq!(i.spec.resources.gpus, 8, "GPUs per node");
    let w = warnings(&i);
    assert!(
        w.contains(
            "skypilot/multinode.yaml:9:3: warning: `resources.network_tier` has no Canopy counterpart"
        ),
        "{w}"
    );
    assert!(
        w.contains("skypilot/multinode.yaml:10:3: warning: `resources.any_of` has no Canopy counterpart"),
        "{w}"
    );
    assert!(w.contains("(dropped)"), "{w}");
}

#[test]
fn secret_values_and_value_less_entries_become_secret_names_never_values() {
    let src = FIX.text("envs-and-secrets.yaml");
    let i = FIX.convert("envs-and-secrets.yaml");
    let rt = &i.spec.runtime;
    assert_eq!(rt.secrets, ["HF_TOKEN", "OPENAI_API_KEY", "WANDB_API_KEY", "GITHUB_TOKEN"]);
    assert_eq!(rt.env.keys().collect::<Vec<_>>(), ["BATCH_SIZE", "DATASET", "USE_FP16"]);
    assert_eq!(rt.env["USE_FP16"], "true");
    let everything = format!("{}\n{}", i.toml, warnings(&i));
    for secret in ["sk-proj-abcdefghijklmnopqrstuvwxyz012345", "0123456789abcdef0123456789abcdef01234567"] {
        assert!(src.contains(secret));
        assert!(!everything.contains(secret), "{secret} leaked:\n{everything}");
    }
    let w = warnings(&i);
    assert!(w.contains("`envs.HF_TOKEN` has no value in the file: it becomes secret `HF_TOKEN`"), "{w}");
    assert!(w.contains("`envs.OPENAI_API_KEY` holds a secret value"), "{w}");
    assert!(w.contains("`secrets.WANDB_API_KEY` has its value in the file"), "{w}");

    let i = FIX.convert("secrets-list.yaml");
    assert_eq!(i.spec.runtime.secrets, ["HF_TOKEN", "SLACK_WEBHOOK_TOKEN"]);
    assert!(i.warnings.is_empty());
}

#[test]
fn file_mounts_become_inputs_where_they_map() {
    let i = FIX.convert("file-mounts.yaml");
    let inputs: Vec<(&str, &str, Option<&str>)> =
        i.spec.inputs.iter().map(|x| (x.name.as_str(), x.source.as_str(), x.mount.as_deref())).collect();
    assert_eq!(
        inputs,
        [
            ("raw", "file:///home/ada/project/raw-data", Some("/data/raw")),
            (".netrc", "file:///home/ada/.netrc", None),
            ("datasets-s3", "s3://my-awesome-dataset", Some("/datasets-s3")),
            ("models", "gs://team-models/llama", Some("/models")),
        ]
    );
    let w = warnings(&i);
    assert!(w.contains("`~/.netrc` is not an absolute path"), "{w}");
    assert!(w.contains("$CANOPY_INPUT__NETRC"), "{w}");
    assert!(w.contains("`file_mounts./models.name` has no Canopy counterpart"), "{w}");
    assert!(w.contains("`file_mounts./outputs` has no Canopy counterpart: without a `source`"), "{w}");
    assert!(w.contains("`file_mounts./cache` has no Canopy counterpart: Canopy inputs read"), "{w}");
}

#[test]
fn a_workdir_is_an_input_and_the_scripts_start_in_it() {
    let i = FIX.convert("workdir.yaml");
    assert_eq!(i.spec.inputs[0].name, "workdir");
    assert_eq!(i.spec.inputs[0].source, "file:///home/ada/projects/quickstart");
    assert_eq!(
        i.spec.runtime.command[2],
        "cd \"${CANOPY_INPUT_WORKDIR:-/home/ada/projects/quickstart}\" && bash -c \"$1\" && exec bash -c \"$2\""
    );
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!((i.spec.resources.gpus, acc.model.as_deref()), (1, Some("T4")));
}

#[test]
fn cloud_region_image_labels_and_recovery_map_and_the_rest_is_named() {
    let i = FIX.convert("legacy-cloud-region.yaml");
    let s = &i.spec;
    assert_eq!(s.constraints.providers[0].as_str(), "aws");
    assert_eq!(s.constraints.regions[0].as_str(), "us-west-2");
    assert_eq!(s.runtime.image.as_deref(), Some("vllm/vllm-openai:v0.6.3"));
    assert_eq!(s.labels["team"], "inference");
    assert_eq!(s.labels["cost-center"], "1234");
    assert_eq!(s.constraints.max_hourly_usd, Some(8.0));
    assert_eq!((s.retry.app_errors, s.retry.max_attempts), (3, 4));
    let w = warnings(&i);
    for field in ["resources.zone", "resources.instance_type", "resources.job_recovery.strategy"] {
        assert!(w.contains(&format!("`{field}` has no Canopy counterpart")), "{field}: {w}");
    }
}

#[test]
fn unknown_gpus_fractions_and_kubernetes_extras_are_kept_or_named() {
    let i = FIX.convert("unknown-gpu.yaml");
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!((acc.model.as_deref(), acc.family.len()), (Some("K80"), 0));
    assert!(i.warnings[0].to_string().contains("`K80` is not a GPU name Canopy knows"), "{}", warnings(&i));

    let i = FIX.convert("kubernetes-extras.yaml");
    assert_eq!(i.spec.resources.gpus, 1, "half a T4 is one whole GPU");
    assert_eq!(i.spec.constraints.providers[0].as_str(), "kubernetes");
    let w = warnings(&i);
    assert!(w.contains("asks for 0.5 of a GPU: Canopy gives whole GPUs, 1"), "{w}");
    assert!(w.contains("`service` (a SkyServe service) becomes a workload of `kind = \"inference\"`"), "{w}");
    for field in ["resources.ports", "resources.autostop", "config"] {
        assert!(w.contains(&format!("`{field}` has no Canopy counterpart")), "{field}: {w}");
    }
    assert!(w.contains("The Kubernetes context in `resources.infra` has no Canopy counterpart"), "{w}");

    let i = FIX.convert("misspelled-field.yaml");
    let w = warnings(&i);
    assert!(
        w.contains("skypilot/misspelled-field.yaml:3:1: warning: `enviroment` is not a SkyPilot task field"),
        "{w}"
    );
    assert!(w.contains("skypilot/misspelled-field.yaml:6:3: warning: `resources.acelerators` is not a SkyPilot task field"), "{w}");
}

// ── Malformed files ──────────────────────────────────────────────────────

fn bad_cases() -> Vec<Bad> {
    vec![
        Bad {
            yaml: "resources:\n  accelerators: \"A100:x\"\nrun: echo\n",
            at: (2, 17),
            message: "`resources.accelerators` has `A100:x`: the count after `:` must be a number",
            help: "write NAME:COUNT, like A100:8",
        },
        Bad {
            yaml: "resources:\n  accelerators: A100:0\nrun: echo\n",
            at: (2, 17),
            message: "asks for 0 of `A100`: the count must be more than 0",
            help: "like A100:8",
        },
        Bad {
            yaml: "resources:\n  accelerators: 8\nrun: echo\n",
            at: (2, 17),
            message: "`resources.accelerators` must be a string like A100:8, a list or a mapping, not a whole number",
            help: "write NAME:COUNT",
        },
        Bad {
            yaml: "resources:\n  cpus: lots\nrun: echo\n",
            at: (2, 9),
            message: "`resources.cpus` is not a size SkyPilot accepts",
            help: "like 8 or 8+",
        },
        Bad {
            yaml: "resources:\n  memory: [32]\nrun: echo\n",
            at: (2, 11),
            message: "`resources.memory` must be a number or a string like \"8+\", not a list",
            help: "32+",
        },
        Bad {
            yaml: "name: x\nsetup: pip install foo\n",
            at: (1, 1),
            message: "the task has no `run`",
            help: "add `run:`",
        },
        Bad { yaml: "run:\n", at: (1, 1), message: "the task has no `run`", help: "add `run:`" },
        Bad {
            yaml: "run:\n  - python a.py\n",
            at: (2, 3),
            message: "`run` must be a string, not a list",
            help: "`|` starts a multi-line block",
        },
        Bad {
            yaml: "num_nodes: 0\nrun: x\n",
            at: (1, 12),
            message: "`num_nodes` must be 1 or more",
            help: "like 2",
        },
        Bad {
            yaml: "num_nodes: two\nrun: x\n",
            at: (1, 12),
            message: "`num_nodes` must be a whole number, not a string",
            help: "like 2",
        },
        Bad {
            yaml: "envs:\n  - FOO=bar\nrun: x\n",
            at: (2, 3),
            message: "`envs` must be a mapping of `key: value` lines, not a list",
            help: "`NAME: value`",
        },
        Bad {
            yaml: "name: a\nresources:\n  cpus: 4\n cpus: 8\nrun: x\n",
            at: (4, 2),
            message: "invalid YAML: while parsing a block mapping, did not find expected key",
            help: "indentation",
        },
        Bad {
            yaml: "name: a\nname: b\nrun: x\n",
            at: (2, 1),
            message: "invalid YAML: duplicated key in mapping",
            help: "once per mapping",
        },
        Bad {
            yaml: "run: one\n---\nrun: two\n",
            at: (3, 1),
            message: "the file holds 2 YAML documents: a SkyPilot pipeline",
            help: "import one task per file",
        },
        Bad { yaml: "# nothing\n", at: (1, 1), message: "the file is empty", help: "SkyPilot task file" },
        Bad {
            yaml: "- run: x\n",
            at: (1, 1),
            message: "the file must be a mapping of `key: value` lines, not a list",
            help: "like `name: train`",
        },
        // The spec's own validation, reported at the YAML line it came from.
        Bad {
            yaml: "name: big\nresources:\n  accelerators: A100:128\nrun: x\n",
            at: (3, 17),
            message: "the converted spec is not valid: `resources.gpus` is 128, more than any single node has",
            help: "at most 64",
        },
        Bad {
            yaml: "run: x\nenvs:\n  BAD-NAME: 1\n",
            at: (3, 3),
            message: "the converted spec is not valid: `BAD-NAME` is not a valid environment variable name",
            help: "start with a letter",
        },
    ]
}

#[test]
fn malformed_files_get_an_error_at_file_line_col_with_what_to_do() {
    FIX.check_malformed(&bad_cases());
}

#[test]
fn hostile_yaml_is_refused_without_a_panic() {
    let deep = format!("run: x\nresources: {}1{}\n", "[".repeat(200), "]".repeat(200));
    let e = FIX.convert_str(&deep).err().unwrap();
    assert!(e[0].message.contains("invalid YAML") || e[0].message.contains("deeper than"), "{e:?}");
    let nested = format!("run: x\nfile_mounts:\n{}x\n", "- ".repeat(5000));
    let e = FIX.convert_str(&nested).err().unwrap();
    assert!(e[0].message.contains("deeper than 64 levels"), "{e:?}");
    let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 0..8 {
        let prev = if i == 0 { "a".to_string() } else { format!("b{}", i - 1) };
        let refs = vec![format!("*{prev}"); 10].join(", ");
        bomb.push_str(&format!("b{i}: &b{i} [{refs}]\n"));
    }
    bomb.push_str("run: x\n");
    let e = FIX.convert_str(&bomb).err().unwrap();
    assert!(e[0].message.contains("alias expansion"), "{e:?}");
}

#[test]
fn no_prefix_of_any_example_makes_the_importer_panic() {
    FIX.convert_every_prefix();
}

#[test]
fn a_bucket_mounted_at_a_checkpoint_path_becomes_the_checkpoint_dir() {
    let i = FIX.convert("checkpoint-bucket.yaml");
    let s = &i.spec;
    assert_eq!(s.checkpoint.as_ref().expect("[checkpoint]").path, "/checkpoints");
    let inputs: Vec<(&str, &str)> = s.inputs.iter().map(|x| (x.name.as_str(), x.source.as_str())).collect();
    assert_eq!(inputs, [("data", "s3://my-datasets/alpaca")], "the checkpoint bucket is not an input");
    assert_eq!((s.retry.app_errors, s.retry.max_attempts), (3, 4));
    let w = warnings(&i);
    assert!(
        w.contains(
            "skypilot/checkpoint-bucket.yaml:13:3: warning: `file_mounts./checkpoints` mounts bucket \
             `llama-ft-checkpoints` at `/checkpoints`: it becomes `[checkpoint] path = \"/checkpoints\"`, but \
             Canopy does not mount bucket `llama-ft-checkpoints`"
        ),
        "{w}"
    );
    assert!(w.contains("to resume from what bucket `llama-ft-checkpoints` already holds"), "{w}");
    assert!(!w.contains("`file_mounts./checkpoints.mode`"), "one warning for the whole mount: {w}");

    // COPY mode, or a mount elsewhere, stays what it was.
    let i = FIX
        .convert_str(
            "file_mounts:\n  /checkpoints:\n    source: s3://ckpts\n    mode: COPY\n  /outputs:\n    name: out\n    \
             mode: MOUNT\nrun: x\n",
        )
        .unwrap();
    assert_eq!(i.spec.checkpoint, None);
    assert_eq!(i.spec.inputs[0].source, "s3://ckpts");
    let w = warnings(&i);
    assert!(w.contains(":4:5: warning: `file_mounts./checkpoints.mode` has no Canopy counterpart"), "{w}");
    assert!(w.contains(":5:3: warning: `file_mounts./outputs` has no Canopy counterpart"), "{w}");
}

#[test]
fn a_skyserve_service_imports_as_inference() {
    let i = FIX.convert("vllm-service.yaml");
    assert_eq!(i.spec.kind, canopy::spec::WorkloadKind::Inference);
    assert!(i.toml.contains("kind = \"inference\""), "{}", i.toml);
    let w = warnings(&i);
    assert!(
        w.contains(
            "skypilot/vllm-service.yaml:2:1: warning: `service` (a SkyServe service) becomes a workload of \
             `kind = \"inference\"`: Canopy runs its task as one replica until it ends; the readiness probe, \
             replicas, autoscaling, ports and load balancer have no Canopy counterpart (dropped)"
        ),
        "{w}"
    );
}
