//! `canopy plan` on the demo fleet for work that asks for domestic
//! accelerators: an Ascend request and a Cambricon request find the
//! `dc-bj` pools, and a "domestic hardware only" request that no domestic
//! pool can serve is refused everywhere with the reason for each pool.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_canopy");

fn plan(spec: &str) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.toml");
    std::fs::write(&path, spec).unwrap();
    let out = Command::new(BIN)
        .arg("--store")
        .arg(dir.path().join("home"))
        .arg("plan")
        .arg(&path)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

fn spec(accelerator: &str, gpus: u32, compliance: &str) -> String {
    format!(
        "name = \"pretrain\"\n[runtime]\ncommand = [\"torchrun\", \"train.py\"]\n\
         [resources]\ngpus = {gpus}\naccelerator = {accelerator}\n\
         [constraints]\ncompliance = {compliance}\n"
    )
}

#[test]
fn an_ascend_request_is_placed_on_the_ascend_pool() {
    let (code, out) = plan(&spec(r#"{ vendor = "huawei", family = ["ascend910b"] }"#, 8, "[]"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("dc-bj/ascend910b"), "{out}");
    assert!(!out.contains("dc-bj/mlu370 "), "an Ascend request never lands on MLUs: {out}");
}

#[test]
fn a_cambricon_request_is_placed_on_the_mlu_pool() {
    let (code, out) = plan(&spec(r#"{ vendor = "cambricon" }"#, 4, r#"["domestic-hardware"]"#));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("dc-bj/mlu370"), "{out}");
}

#[test]
fn a_domestic_only_request_goes_only_to_domestic_pools() {
    let (code, out) = plan(&spec("{}", 8, r#"["domestic-hardware", "certified-stack"]"#));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("dc-bj/ascend910b"), "{out}");
    assert!(!out.contains("onprem-fra/h100-nvl 1"), "{out}");
}

#[test]
fn a_domestic_only_request_no_domestic_pool_serves_is_refused_with_the_reason() {
    let (code, out) = plan(&spec(r#"{ model = "H100" }"#, 8, r#"["domestic-hardware"]"#));
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("nothing fits"), "{out}");
    assert!(out.contains("missing compliance [domestic-hardware]"), "the other pools lack the tag: {out}");
    assert!(out.contains("7 accelerator model is not H100"), "the 7 domestic nodes have no H100: {out}");
}

/// Work that names no accelerator was written for CUDA (or ROCm): it is
/// never sent to an Ascend or MLU pool, however cheap or free they are;
/// the plan says why they were ruled out.
#[test]
fn work_that_names_no_accelerator_never_lands_on_an_opt_in_vendor() {
    let (code, out) = plan(&spec("{}", 8, "[]"));
    assert_eq!(code, Some(0), "{out}");
    for pool in ["dc-bj/ascend910b", "dc-bj/mlu370"] {
        let line = format!("{pool}: its vendor's accelerators take only work that names them");
        assert!(out.contains(&line), "{pool} is ruled out, saying why: {out}");
    }
}
