//! `canopy import dstack`: task configurations written after dstack's
//! reference convert to Canopy specs that load and validate, with every
//! field that has no counterpart named in a warning at its line; each
//! example's spec and warnings are an insta snapshot. Other configuration
//! types are refused by name, and malformed files get an error at
//! FILE:LINE:COL with what to do, never a panic.

use canopy::accel::{ComputeCapability, Family, Vendor};
use canopy::import::Source;
use canopy::spec::GbRange;

mod import_support;

use import_support::{Bad, Fixtures, warnings};

const FIX: Fixtures = Fixtures {
    source: Source::Dstack,
    kind: "dstack",
    ext: ".dstack.yml",
    cwd: "/home/ada",
    snippet_name: ".dstack.yml",
};

#[test]
fn every_example_converts_to_a_spec_that_loads_and_matches_its_snapshot() {
    for (name, snapshot) in FIX.converted_examples(5) {
        insta::assert_snapshot!(name, snapshot);
    }
}

#[test]
fn commands_run_joined_by_and_in_bash_without_an_image_and_sh_with_one() {
    let i = FIX.convert("hello.dstack.yml");
    assert_eq!(i.spec.name, "hello");
    assert_eq!(i.spec.runtime.command, ["/bin/bash", "-c", "echo \"Hello, dstack!\""]);
    assert!(i.warnings.is_empty(), "{}", warnings(&i));

    let i = FIX.convert("amd.dstack.yml");
    assert_eq!(i.spec.runtime.command, ["/bin/sh", "-c", "python bench.py"]);
    assert_eq!(i.spec.runtime.image.as_deref(), Some("rocm/pytorch:latest"));

    let i = FIX.convert("image-and-files.dstack.yml");
    assert_eq!(
        i.spec.runtime.command,
        ["/bin/bash", "-c", "{ vllm serve $MODEL_ID --max-model-len $MAX_MODEL_LEN & } && python bench.py"],
        "`shell: bash`, and a background command wrapped as dstack does"
    );
    assert_eq!(i.spec.runtime.workdir.as_deref(), Some("/workspace"));
}

#[test]
fn gpu_ranges_names_and_memory_map_to_count_model_and_memory_per_gpu() {
    let i = FIX.convert("gpu-memory-range.dstack.yml");
    let r = &i.spec.resources;
    assert_eq!(r.gpus, 8);
    assert_eq!(r.gpu_memory_gb, Some(GbRange { min: Some(24.0), max: Some(80.0) }));
    assert_eq!(r.accelerator, None, "no name: any GPU with that memory");
    assert_eq!((r.cpu_cores, r.memory_gb, r.disk_gb), (16.0, 64.0, 500.0));
    let c = &i.spec.constraints;
    assert!(c.interruptible, "spot_policy: auto");
    assert_eq!(c.max_hourly_usd, Some(12.5));
    assert_eq!(c.max_runtime.unwrap().as_secs(), 86_400);

    let i = FIX.convert("image-and-files.dstack.yml");
    let r = &i.spec.resources;
    assert_eq!(r.gpus, 2);
    assert_eq!(r.accelerator.as_ref().unwrap().model.as_deref(), Some("A100"));
    assert_eq!(r.gpu_memory_gb, Some(GbRange { min: Some(40.0), max: Some(40.0) }), "A100:40GB");

    let i = FIX.convert("gpu-object.dstack.yml");
    let r = &i.spec.resources;
    assert_eq!(r.gpus, 2, "the least of 2..4");
    let acc = r.accelerator.as_ref().unwrap();
    assert_eq!(acc.family, [Family::Ampere, Family::Hopper]);
    assert_eq!(acc.min_compute_capability, Some(ComputeCapability::new(8, 0)));
    assert_eq!(r.gpu_memory_gb, Some(GbRange { min: Some(40.0), max: None }));
    assert_eq!((r.cpu_cores, r.memory_gb, r.disk_gb), (8.0, 32.0, 200.0));
    let w = warnings(&i);
    assert!(w.contains("dstack/gpu-object.dstack.yml:11:5: warning: `resources.gpu` asks for a range of GPU counts: Canopy asks for exactly 2 (the least)"), "{w}");
    assert!(w.contains("The architecture in `resources.cpu` has no Canopy counterpart"), "{w}");
    assert!(w.contains("The upper bound in `resources.memory` has no Canopy counterpart"), "{w}");

    let i = FIX.convert("amd.dstack.yml");
    let acc = i.spec.resources.accelerator.as_ref().unwrap();
    assert_eq!((acc.vendor, acc.model.as_deref()), (Some(Vendor::Amd), Some("MI300X")));
    assert_eq!(i.spec.resources.gpus, 8);
    assert_eq!(i.spec.constraints.max_runtime, None, "max_duration: off");
}

#[test]
fn nodes_env_secrets_backends_regions_and_spot_map() {
    let i = FIX.convert("distributed.dstack.yml");
    let s = &i.spec;
    assert_eq!(s.resources.nodes, 2);
    assert_eq!(s.resources.gpus, 8);
    assert_eq!(s.runtime.secrets, ["HF_TOKEN", "WANDB_API_KEY"]);
    assert_eq!(s.runtime.env.len(), 1);
    assert_eq!(s.runtime.env["NCCL_DEBUG"], "INFO");
    let globs = |g: &[canopy::units::Glob]| g.iter().map(|g| g.as_str().to_string()).collect::<Vec<_>>();
    assert_eq!(globs(&s.constraints.providers), ["aws", "gcp"]);
    assert_eq!(globs(&s.constraints.regions), ["us-east-1", "us-central1"]);
    assert!(s.constraints.interruptible);
    let w = warnings(&i);
    assert!(
        w.contains("dstack/distributed.dstack.yml:7:5: warning: `env.HF_TOKEN` has no value in the file"),
        "{w}"
    );
    assert!(
        w.contains(
            "`env.WANDB_API_KEY` reads dstack secret `wandb_key`: it becomes Canopy secret `WANDB_API_KEY`"
        ),
        "{w}"
    );
    assert!(w.contains("`spot_policy: spot` becomes `constraints.interruptible = true`"), "{w}");
    assert!(w.contains("`retry.duration` has no Canopy counterpart"), "{w}");
    assert_eq!(s.retry.app_errors, 0, "no `error` event: the workload's errors are not retried");
    // Multi-line plain commands fold into one line, as YAML says.
    assert!(s.runtime.command[2].contains("torchrun --nproc-per-node=$DSTACK_GPUS_PER_NODE --node-rank="));
}

#[test]
fn image_env_map_files_stop_duration_and_priority_map() {
    let src = FIX.text("image-and-files.dstack.yml");
    let i = FIX.convert("image-and-files.dstack.yml");
    let s = &i.spec;
    assert_eq!(s.runtime.env["MAX_MODEL_LEN"], "8192");
    assert_eq!(s.runtime.secrets, ["HF_TOKEN"], "an inline token becomes a secret name");
    let token = "hf_abcdefghijklmnopqrstuvwxyzABCDEF12";
    assert!(src.contains(token));
    assert!(!format!("{}{}", i.toml, warnings(&i)).contains(token), "the token leaked");
    assert_eq!(s.runtime.stop_grace.unwrap().as_secs(), 120);
    assert_eq!(s.priority, 80);
    let inputs: Vec<(&str, &str, Option<&str>)> =
        s.inputs.iter().map(|x| (x.name.as_str(), x.source.as_str(), x.mount.as_deref())).collect();
    assert_eq!(
        inputs,
        [
            ("bench.py", "file:///home/ada/project/bench.py", Some("/workspace/bench.py")),
            (
                "prompts.jsonl",
                "file:///home/ada/project/data/prompts.jsonl",
                Some("/workspace/data/prompts.jsonl")
            ),
        ]
    );
    let w = warnings(&i);
    for field in ["ports", "volumes[0]"] {
        assert!(w.contains(&format!("`{field}` has no Canopy counterpart")), "{field}: {w}");
    }
}

fn bad_cases() -> Vec<Bad> {
    vec![
        Bad {
            yaml: "type: gateway\ndomain: example.com\n",
            at: (1, 7),
            message: "`type: gateway` is a dstack gateway; `canopy import dstack` imports tasks (`type: task`) and services (`type: service`) only",
            help: "import a task configuration",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nretry:\n  on_events: [error, meltdown]\n",
            at: (4, 22),
            message: "`retry.on_events[1]` is `meltdown`, which is not a dstack retry event",
            help: "no-capacity, interruption or error",
        },
        Bad {
            yaml: "type: dev-environment\nide: vscode\n",
            at: (1, 7),
            message: "`type: dev-environment` is a dstack dev environment",
            help: "import a task configuration",
        },
        Bad {
            yaml: "type: fleet\nnodes: 2\n",
            at: (1, 7),
            message: "`type: fleet` is a dstack fleet",
            help: "import a task configuration",
        },
        Bad {
            yaml: "name: x\ncommands: [echo hi]\n",
            at: (1, 1),
            message: "the configuration has no `type`",
            help: "add `type: task`",
        },
        Bad {
            yaml: "type: task\nimage: ubuntu\n",
            at: (1, 1),
            message: "the task has no `commands`",
            help: "not the image's own entrypoint",
        },
        Bad {
            yaml: "type: task\ncommands: []\n",
            at: (2, 11),
            message: "`commands` is empty",
            help: "list the shell commands",
        },
        Bad {
            yaml: "type: task\ncommands:\n  - echo: hi\n",
            at: (3, 5),
            message: "`commands[0]` must be a string, not a mapping",
            help: "quote it if it holds `: `",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nresources:\n  gpu: 80GB..24GB:2\n",
            at: (4, 8),
            message: "`resources.gpu` has `80GB..24GB`, which is not a GPU memory size",
            help: "24GB..80GB:8",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nresources:\n  gpu: A100:2:4\n",
            at: (4, 8),
            message: "`resources.gpu` gives the GPU count twice",
            help: "H100:8",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nresources:\n  cpu: lots\n",
            at: (4, 8),
            message: "`resources.cpu` is not a CPU count dstack accepts",
            help: "like 8, 8.. or 4..16",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nspot_policy: sometimes\n",
            at: (3, 14),
            message: "`spot_policy` is `sometimes`, which dstack does not define",
            help: "spot, on-demand or auto",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nmax_duration: 2 fortnights\n",
            at: (3, 15),
            message: "`max_duration` is not a duration dstack accepts",
            help: "like 90s, 30m, 2h",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nenv:\n  - 1BAD=secretish\n",
            at: (4, 5),
            message: "`env[0]` is not `NAME=value` with a valid variable name",
            help: "start the name with a letter",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nenv:\n  - A=1\n  - A=2\n",
            at: (5, 5),
            message: "`A` is listed twice in `env`",
            help: "one entry per variable",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nnodes: 0\n",
            at: (3, 8),
            message: "`nodes` must be 1 or more",
            help: "like 2",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nresources:\n  cpu: 0\n",
            at: (4, 8),
            message: "the converted spec is not valid: `resources.cpu_cores` must be a number more than 0",
            help: "CPU cores per node",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nresources:\n  gpu: -1\n",
            at: (4, 8),
            message: "`resources.gpu` must be 0 or more",
            help: "H100:8",
        },
        Bad {
            yaml: "type: task\ncommands: [x]\nstop_duration: 3h\n",
            at: (3, 16),
            message: "the converted spec is not valid:",
            help: "",
        },
        Bad {
            yaml: "type: task\n\tcommands: [x]\n",
            at: (1, 7),
            message: "invalid YAML: while scanning a plain scalar, found a tab",
            help: "indent with spaces",
        },
    ]
}

#[test]
fn malformed_files_and_other_types_get_an_error_at_file_line_col_with_what_to_do() {
    FIX.check_malformed(&bad_cases());
}

#[test]
fn no_prefix_of_any_example_makes_the_importer_panic() {
    FIX.convert_every_prefix();
}

#[test]
fn a_checkpoint_volume_becomes_the_checkpoint_dir_and_retry_on_error_app_errors() {
    let i = FIX.convert("checkpoints-retry.dstack.yml");
    let s = &i.spec;
    let ck = s.checkpoint.as_ref().expect("[checkpoint]");
    assert_eq!(ck.path, "/checkpoints");
    assert_eq!((s.retry.app_errors, s.retry.max_attempts), (2, 3), "errors may use every attempt");
    assert!(i.toml.contains("[checkpoint]\nkeep = \"latest\"\npath = \"/checkpoints\""), "{}", i.toml);
    let w = warnings(&i);
    assert!(
        w.contains(
            "dstack/checkpoints-retry.dstack.yml:18:5: warning: `volumes[0]` mounts volume `train-ckpts` at \
             `/checkpoints`: it becomes `[checkpoint] path = \"/checkpoints\"`, but Canopy does not mount \
             volume `train-ckpts`: it keeps the checkpoints in its own store, for this workload only"
        ),
        "{w}"
    );
    assert!(w.contains("with a `COMPLETE` file written last"), "{w}");
    assert!(
        w.contains(
            "dstack/checkpoints-retry.dstack.yml:20:5: warning: `volumes[1]` has no Canopy counterpart: \
             Canopy attaches no volumes"
        ),
        "a volume elsewhere is dropped: {w}"
    );
    assert!(
        w.contains(
            "dstack/checkpoints-retry.dstack.yml:22:3: warning: `retry` on `error` becomes \
             `retry.app_errors = 2`: dstack retries errors until `duration` runs out, Canopy counts them"
        ),
        "{w}"
    );
    assert!(w.contains(":23:3: warning: `retry.duration` has no Canopy counterpart"), "{w}");
}

#[test]
fn a_service_imports_as_inference_with_its_service_fields_named() {
    let i = FIX.convert("vllm-service.dstack.yml");
    let s = &i.spec;
    assert_eq!(s.kind, canopy::spec::WorkloadKind::Inference);
    assert!(i.toml.contains("kind = \"inference\""), "{}", i.toml);
    assert_eq!(s.runtime.image.as_deref(), Some("vllm/vllm-openai:latest"));
    assert_eq!(s.runtime.secrets, ["HF_TOKEN"]);
    let w = warnings(&i);
    assert!(
        w.contains(
            "dstack/vllm-service.dstack.yml:2:7: warning: `type: service` becomes a workload of `kind = \
             \"inference\"`: Canopy runs its commands as one replica until they end"
        ),
        "{w}"
    );
    for (line, field) in [(11, "port"), (12, "model"), (13, "replicas"), (14, "scaling")] {
        let at =
            format!("dstack/vllm-service.dstack.yml:{line}:1: warning: `{field}` has no Canopy counterpart");
        assert!(w.contains(&at), "{field}: {w}");
    }
}

#[test]
fn retry_true_retries_errors_and_false_or_no_interruption_says_what_canopy_does_anyway() {
    let i = FIX.convert_str("type: task\ncommands: [x]\nretry: true\n").unwrap();
    assert_eq!(i.spec.retry.app_errors, 2);
    let i = FIX.convert_str("type: task\ncommands: [x]\nretry: false\n").unwrap();
    assert_eq!(i.spec.retry.app_errors, 0);
    assert!(warnings(&i).contains(":3:8: warning: `retry` has no Canopy counterpart: Canopy retries infrastructure failures elsewhere all the same"), "{}", warnings(&i));
    let i = FIX.convert_str("type: task\ncommands: [x]\nretry:\n  on_events: [error]\n").unwrap();
    assert_eq!(i.spec.retry.app_errors, 2);
    assert!(
        warnings(&i).contains(":4:14: warning: `retry.on_events` leaves out `interruption`"),
        "{}",
        warnings(&i)
    );
}
